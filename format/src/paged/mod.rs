//! The paged bundle (format 2): a small entry file, `jikji.json`, and immutable pages under
//! `p/`, so that a query fetches only the pages it reads (design:
//! `docs/design/paged-bundle-v2.md`; layout: `FORMAT.md`, "Format 2").
//!
//! - [`page`]: one page's header, name, compression and integrity check.
//! - [`cache`]: the page cache (verified bodies under a byte budget, misses recorded).
//! - [`dict`]: dictionary blocks, postings pages, typo dictionary.
//! - [`columns`]: per-chunk lifecycle, file and parent columns.
//! - this module: the entry's page roots ([`PagesRoot`]), the writer ([`write_pages`]), the
//!   readers of chunks, Hanja and vectors over the cache, and the "whole or paged" types
//!   ([`Lexicon`], [`Chunks`], [`Hanja`]) the engine searches through.
//!
//! **How a query runs over pages.** Readers never wait for I/O: a page that is not in the
//! cache is recorded as missing ([`PageCache::take_missing`]) and the read answers as if
//! the data were absent. The engine throws that pass's results away and reports the
//! missing pages; the caller fetches them (in parallel) and runs the query again. The last
//! pass has read every page it needed, so its results equal a whole-bundle search.

pub mod bucket;
pub mod cache;
pub mod columns;
pub mod dict;
pub mod expand;
pub mod ivf;
pub mod page;
pub mod qmodel;

#[cfg(feature = "v1")]
use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use cache::{CacheStats, PageCache};
pub use columns::{Columns, Facets, FacetsBuilder};
pub use dict::PagedLexicon;

use crate::chunks::{write_raw_records, ChunkRecord, ChunkStore};
use crate::error::{FormatError, Result};
use crate::hanja::HanjaMap;
use crate::manifest::SourceEntry;
use crate::postings::LexicalIndex;
use crate::vectors::{write_quantized, Vectors};
use page::{Encoded, Kind};

/// File name of a paged bundle's entry.
pub const ENTRY_FILE: &str = "jikji.json";
/// Folder of a paged bundle's pages.
pub const PAGES_DIR: &str = "p";
/// Target raw size of a chunk page (bytes): records per page = this ÷ the median record
/// length, at least 1. A query reads the pages of its hits (and of its phrase candidates),
/// which rarely share a page, so small pages cost fewer bytes: measured (main cf41302) with
/// `jikji search --fetch-stats`, 1,024 against 4,096 took SciFact's first query from 48.0
/// to 40.2 kB (cold median over its 300 queries 135.2 → 131.8 kB, later queries mean 15.3
/// → 12.6 kB) and the books' from 55.2 to 42.5 kB (median 56.1 → 45.0 kB, later 55.8 →
/// 41.3 kB), for 4× the files (SciFact 5,740 → 23,436; books 3,026 → 8,092).
pub const CHUNK_PAGE_TARGET: usize = 1024;
/// Vector rows per vector page.
pub const VECTOR_ROWS: usize = 256;
/// Target raw size of a Hanja page.
pub const HANJA_PAGE_TARGET: usize = 4096;
/// Sources-table entries per sources page.
pub const SOURCES_PER_PAGE: usize = 128;

/// Pages named by generation and number: `<kind>-<gen>-<n>` for `n` in `0..pages`, where
/// `gen` is the generation of the page's group when the run has `gens` (page `n` is in group
/// `n / group`), else the run's `gen` (runs of 0 or 1 page, the row pages `r`, the dense
/// index's pages, and every run of bundles written before 2026-12-03).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Numbered {
    /// 16 hex. Without `gens`: the first 8 bytes of SHA-256 over the raw bodies of all its
    /// pages in order (each preceded by its length as u64 LE), the generation of every page.
    /// With `gens`: the first 8 bytes of SHA-256 over the `gens` hex strings in order (names
    /// the run as a whole; no page name uses it).
    pub gen: String,
    /// Items per page (the last page may hold fewer).
    pub per_page: usize,
    /// Number of pages.
    pub pages: usize,
    /// Pages per group ([`group_size`]), with `gens`; 0 (absent) without.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub group: usize,
    /// The generation of each group of `group` consecutive pages (16 hex: the first 8 bytes
    /// of SHA-256 over the group's raw bodies, each preceded by its length as u64 LE), so an
    /// edit renames only the groups whose bodies changed; `⌈pages / group⌉` of them (at most
    /// [`MAX_GROUPS`]). Empty (absent): every page uses `gen`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gens: Vec<String>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// The most groups a grouped run has ([`Numbered::gens`]): the entry grows by at most this
/// many 16-hex digests a run, whatever the bundle's size.
pub const MAX_GROUPS: usize = 32;

/// Pages per group of a grouped run of `pages` pages: the smallest power of two `G` with
/// `⌈pages / G⌉ ≤` [`MAX_GROUPS`] (a function of the page count only, so a full build and an
/// update of the same corpus group alike).
pub fn group_size(pages: usize) -> usize {
    let mut g = 1usize;
    while pages.div_ceil(g) > MAX_GROUPS {
        g *= 2;
    }
    g
}

impl Numbered {
    /// The name of page `n` of this run of `kind`. A `gens` shorter than the entry check
    /// ([`check_root`]) allows falls back to `gen` (never panics; the page then fails to
    /// load by name).
    pub fn name(&self, kind: Kind, n: usize) -> String {
        page::numbered_name(kind, self.gen_of_page(n), n as u32)
    }

    /// The generation in page `n`'s name (its group's, or the run's).
    pub fn gen_of_page(&self, n: usize) -> &str {
        if self.gens.is_empty() || self.group == 0 {
            return &self.gen;
        }
        self.gens.get(n / self.group).unwrap_or(&self.gen)
    }

    /// Checks `gens` against `pages` (bytes from the network are hostile): without `gens`,
    /// `group` must be 0; with them, `group ≥ 1`, exactly `⌈pages / group⌉` of them, each 16
    /// lowercase hex. `what` names the run in the error. Errors: DataCorruption naming
    /// `jikji.json`.
    pub fn check_groups(&self, what: &str) -> Result<()> {
        let hex16 = |g: &str| {
            g.len() == 16
                && g.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let ok = if self.gens.is_empty() {
            self.group == 0
        } else {
            self.group >= 1
                && self.gens.len() == self.pages.div_ceil(self.group)
                && self.gens.iter().all(|g| hex16(g))
        };
        if ok {
            Ok(())
        } else {
            Err(FormatError::corrupt(
                ENTRY_FILE,
                0,
                format!(
                    "pages.{what}: {} group generations of {} pages for {} pages (want ⌈pages / group⌉ digests of 16 hex)",
                    self.gens.len(),
                    self.group,
                    self.pages
                ),
            ))
        }
    }
}

/// The roots of a paged bundle's pages, in the entry file (`pages`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PagesRoot {
    /// The first term of each dictionary block, in term order; empty when the dictionary
    /// has index pages (`dict_index`).
    pub dict_keys: Vec<String>,
    /// The dictionary index pages, in bundles of more than [`dict::INLINE_KEYS_MAX`] blocks
    /// (so the entry does not grow with the dictionary); absent: `dict_keys` lists every
    /// block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dict_index: Option<dict::DictIndex>,
    /// Dictionary blocks (`d-<gen>-<n>`; `per_page` unused, 0).
    pub dict: Numbered,
    /// Postings pages (`o-<gen>-<n>`; `per_page` = their raw size in bytes).
    pub postings: Numbered,
    /// The typo dictionary pages by term length (`t-<gen>-<b>`, [`dict::TYPO_BUCKETS`]), if
    /// any term qualifies ([`dict::typo_term`]).
    pub typo: Option<Numbered>,
    /// Σ of the indexed chunks' lengths in terms (BM25's avgdl = this / chunks).
    pub total_doc_len: u64,
    /// Chunk record pages (indexed chunks, then parent records).
    pub chunks: Numbered,
    /// Records in the chunk pages (indexed chunks + parent records).
    pub records: usize,
    /// The columns page.
    pub columns: String,
    /// The first key of each Hanja page (`'h'|'c'` + a char, as in `hanja.fst`).
    #[serde(default)]
    pub hanja_keys: Vec<String>,
    /// Hanja pages (`h-<gen>-<n>`), if the bundle has a reading table.
    #[serde(default)]
    pub hanja: Option<Numbered>,
    /// Vector pages ([`VECTOR_ROWS`] rows each), if the bundle has vectors.
    #[serde(default)]
    pub vectors: Option<Numbered>,
    /// Vector dimension.
    #[serde(default)]
    pub dim: usize,
    /// Sources-table pages (JSON arrays of [`SourceEntry`]), read by native commands only.
    pub sources: Numbered,
    /// The first key of each bigram expansion page ([`expand`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expand_keys: Vec<String>,
    /// Bigram expansion pages (`x-<gen>-<n>`), written with the Hanja pages; absent in
    /// bundles written before them (the engine then expands through the Hanja pages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expand: Option<Numbered>,
    /// The browser's query model (pack) as pages ([`qmodel`]), in bundles with vectors built
    /// while a query-model pack was present; absent otherwise. Always `None` when read by a
    /// build without feature `dense` (the browser's BM25 engine: not parsed, not checked),
    /// whose `PagesRoot` does not have the field (a smaller entry struct: the BM25 engine's
    /// wasm budget is spent, and every byte of a struct's size shows in its moves).
    #[cfg(feature = "dense")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub query_model: Option<qmodel::QueryModelRoot>,
    /// The dense index ([`ivf`], issue 14), in bundles with vectors built with
    /// `--dense-index ivf` (or `auto` choosing it); absent: dense queries scan every vector
    /// page. Not in a build without feature `dense` (not parsed, not checked; as
    /// [`Self::query_model`]).
    #[cfg(feature = "dense")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ivf: Option<ivf::IvfRoot>,
    /// The analyzer's Unicode table pages ([`crate::unicode`]); absent in bundles written
    /// before them (an engine without compiled-in tables then refuses texts that need them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unicode: Option<UnicodeRoot>,
    /// Term buckets (`b-<gen>-<n>`, [`bucket`]; `per_page` unused, 0): exact-term lookups by
    /// hash, written with `dict_index`; absent in smaller bundles and those written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<Numbered>,
    /// Expansion buckets (`y-<gen>-<n>`, [`bucket`]): the bigram expansions with their
    /// candidates' entries, written with `buckets` and the Hanja pages; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expand_buckets: Option<Numbered>,
}

/// The entry's `pages.unicode`: the names of the two Unicode table pages (content-named,
/// `n-<h16>`), and the chunk languages whose texts need them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnicodeRoot {
    /// NFKC + lowercase ([`crate::unicode::Table::Nfkc`]).
    pub nfkc: String,
    /// Traditional → Simplified ([`crate::unicode::Table::T2s`]).
    pub t2s: String,
    /// The chunk languages (a record's `lang`) some indexed chunk of which has a text that
    /// needs the NFKC table when it is analysed ([`crate::unicode::ChunkTables`]), sorted: an
    /// engine fetches the table, if it lacks it, with the chunk pages of a query's phrase
    /// candidates of those languages, so a candidate's text costs no round of its own.
    /// Absent with `t2s_langs` in bundles written before them (read as every language).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nfkc_langs: Option<Vec<String>>,
    /// The same for the Traditional → Simplified table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t2s_langs: Option<Vec<String>>,
}

impl UnicodeRoot {
    /// The page name of `table`.
    pub fn name(&self, table: crate::unicode::Table) -> &str {
        match table {
            crate::unicode::Table::Nfkc => &self.nfkc,
            crate::unicode::Table::T2s => &self.t2s,
        }
    }
}

impl crate::json::Record for UnicodeRoot {
    const FIELDS: crate::json::Fields<UnicodeRoot> = crate::json::json_fields!(UnicodeRoot {
        "nfkc" Error nfkc,
        "t2s" Error t2s,
        "nfkc_langs" Error nfkc_langs,
        "t2s_langs" Error t2s_langs,
    });
    fn init() -> Self {
        UnicodeRoot {
            nfkc: String::new(),
            t2s: String::new(),
            nfkc_langs: None,
            t2s_langs: None,
        }
    }
}
crate::json::record_json!(UnicodeRoot);

impl crate::json::Record for Numbered {
    const FIELDS: crate::json::Fields<Numbered> = crate::json::json_fields!(Numbered {
        "gen" Error gen,
        "per_page" Error per_page,
        "pages" Error pages,
        "group" Keep group,
        "gens" Keep gens,
    });
    fn init() -> Self {
        Numbered::default()
    }
}
crate::json::record_json!(Numbered);

/// The entry's `pages` (`crate::json`), as the serde attributes above say: read into a default
/// value through one table (`Obj::fill`; sixth and ninth rounds of docs/design/wasm-size.md).
impl crate::json::Record for PagesRoot {
    #[cfg(feature = "dense")]
    const FIELDS: crate::json::Fields<PagesRoot> = crate::json::json_fields!(PagesRoot {
        "dict_keys" Error dict_keys,
        "dict_index" Error dict_index,
        "dict" Error dict,
        "postings" Error postings,
        "typo" Error typo,
        "total_doc_len" Error total_doc_len,
        "chunks" Error chunks,
        "records" Error records,
        "columns" Error columns,
        "hanja_keys" Keep hanja_keys,
        "hanja" Error hanja,
        "vectors" Error vectors,
        "dim" Keep dim,
        "sources" Error sources,
        "expand_keys" Keep expand_keys,
        "expand" Error expand,
        "query_model" Error query_model,
        "ivf" Error ivf,
        "unicode" Error unicode,
        "buckets" Error buckets,
        "expand_buckets" Error expand_buckets,
    });
    // Dense-only parts (`query_model`, `ivf`): not read by a build without feature
    // `dense` (the browser's BM25 engine), which never uses them; its `PagesRoot` does
    // not have them.
    #[cfg(not(feature = "dense"))]
    const FIELDS: crate::json::Fields<PagesRoot> = crate::json::json_fields!(PagesRoot {
        "dict_keys" Error dict_keys,
        "dict_index" Error dict_index,
        "dict" Error dict,
        "postings" Error postings,
        "typo" Error typo,
        "total_doc_len" Error total_doc_len,
        "chunks" Error chunks,
        "records" Error records,
        "columns" Error columns,
        "hanja_keys" Keep hanja_keys,
        "hanja" Error hanja,
        "vectors" Error vectors,
        "dim" Keep dim,
        "sources" Error sources,
        "expand_keys" Keep expand_keys,
        "expand" Error expand,
        "unicode" Error unicode,
        "buckets" Error buckets,
        "expand_buckets" Error expand_buckets,
    });
    fn init() -> Self {
        PagesRoot::default()
    }
}
crate::json::record_json!(PagesRoot);

/// What [`write_pages`] lays out: a bundle's parts as the builder holds them.
pub struct Parts<'a> {
    /// Terms and postings.
    pub lexical: &'a LexicalIndex,
    /// Chunk records (indexed chunks, then parent records).
    pub chunks: &'a ChunkStore,
    /// Vectors, if any.
    pub vectors: Option<&'a Vectors>,
    /// Hanja readings, if any.
    pub hanja: Option<&'a HanjaMap>,
    /// The sources table.
    pub sources: &'a [SourceEntry],
}

/// Where a writer's pages go: stored as they are made ([`PageSink::put`]), or, when the
/// writer knows a page is byte for byte one of the previous bundle's, taken from there
/// without being encoded again ([`PageSink::reuse`]: `jikji update` hard-links it).
///
/// A page's name says its content (content-named pages: the digest of the body; numbered
/// pages: the generation, a digest of all the run's bodies, and the number, which is in the
/// header), so a writer that made the same name as a page of the previous bundle asks
/// `reuse(name, name)`; the query model's row pages, whose bodies are known from the row
/// map, may ask for another name (`jikji_query_model::paged`).
pub trait PageSink {
    /// Stores `page`. Errors: what the store returns (I/O).
    fn put(&mut self, page: Encoded) -> Result<()>;
    /// Stores page `name` with the bytes of the previous bundle's page `old`, which the
    /// caller knows to be those `name` would get (same kind, number and raw body), without
    /// reading them. `Ok(false)` when it cannot (no previous bundle, `old` not proven to be
    /// the file its writer wrote, a failed link): nothing is stored and the caller puts the
    /// page. The default: `Ok(false)`.
    fn reuse(&mut self, _name: &str, _old: &str) -> Result<bool> {
        Ok(false)
    }
    /// The previous bundle's page roots, for writers that tell unchanged pages by their
    /// inputs (the query model's). The default: none.
    fn previous_root(&self) -> Option<&PagesRoot> {
        None
    }
    /// The raw body of the previous bundle's page `name`, read and verified
    /// ([`page::decode_stored`]); `None` when there is none or it does not verify. The
    /// default: none.
    fn previous_body(&self, _name: &str) -> Option<Vec<u8>> {
        None
    }
}

/// A [`PageSink`] that hands every page to a closure and reuses nothing.
pub struct FnSink<'a>(pub &'a mut dyn FnMut(Encoded) -> Result<()>);

impl PageSink for FnSink<'_> {
    fn put(&mut self, page: Encoded) -> Result<()> {
        (self.0)(page)
    }
}

/// Gives the pages of run `kind` (bodies in order) to `sink`, grouped ([`grouped_to`]):
/// each page encoded unless `sink` reuses the previous bundle's page of the same name. The
/// root equals [`grouped`]'s.
fn put_numbered(
    kind: Kind,
    bodies: &[Vec<u8>],
    per_page: usize,
    sink: &mut dyn PageSink,
) -> Result<Numbered> {
    grouped_to(
        kind,
        bodies.len(),
        per_page,
        &|n| Ok(bodies[n].clone()),
        sink,
    )
}

/// Gives a content-named page to `sink` (reused when the previous bundle has it); returns
/// its name.
fn put_named(kind: Kind, raw: &[u8], sink: &mut dyn PageSink) -> Result<String> {
    let name = format!("{}-{}", kind.letter() as char, page::content_id(raw));
    if !sink.reuse(&name, &name)? {
        sink.put(page::encode(kind, raw))?;
    }
    Ok(name)
}

fn gen_of(bodies: &[Vec<u8>]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for b in bodies {
        h.update((b.len() as u64).to_le_bytes());
        h.update(b);
    }
    hex::encode(&h.finalize()[..8])
}

/// A run named by one generation over all its bodies (the dense index's pages, whose writer
/// is elsewhere; [`grouped`] for the others): the root and the encoded pages.
pub(crate) fn numbered(
    kind: Kind,
    bodies: Vec<Vec<u8>>,
    per_page: usize,
) -> (Numbered, Vec<Encoded>) {
    let gen = gen_of(&bodies);
    let pages = bodies
        .iter()
        .enumerate()
        .map(|(n, b)| page::encode_numbered(kind, &gen, n as u32, b))
        .collect();
    (
        Numbered {
            gen,
            per_page,
            pages: bodies.len(),
            ..Numbered::default()
        },
        pages,
    )
}

/// A grouped run ([`grouped_to`]) of `bodies`: the root and every encoded page, in order.
pub(crate) fn grouped(
    kind: Kind,
    bodies: Vec<Vec<u8>>,
    per_page: usize,
) -> (Numbered, Vec<Encoded>) {
    let mut pages = Vec::with_capacity(bodies.len());
    let root = grouped_to(
        kind,
        bodies.len(),
        per_page,
        &|n| Ok(bodies[n].clone()),
        &mut FnSink(&mut |p| {
            pages.push(p);
            Ok(())
        }),
    );
    // Infallible: the bodies are at hand and the sink only collects.
    (root.unwrap_or_default(), pages)
}

/// The run-wide `gen` of a grouped run: the first 8 bytes of SHA-256 over its group
/// generations' hex strings in order.
fn run_gen(gens: &[String]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for g in gens {
        h.update(g.as_bytes());
    }
    hex::encode(&h.finalize()[..8])
}

/// Gives the `count` pages of run `kind` to `sink` group by group ([`group_size`] pages,
/// [`Numbered::gens`]): makes a group's raw bodies (`body(n)`) once, names its pages by the
/// group's digest and hands each to `sink` encoded, unless `sink` reuses the previous
/// bundle's page of that name. Only one group's bodies are held at a time. A run of 0 or 1
/// page gets no `gens` (its `gen` is that group's digest, as before groups). Errors: what
/// `body` or `sink` return.
fn grouped_to(
    kind: Kind,
    count: usize,
    per_page: usize,
    body: &dyn Fn(usize) -> Result<Vec<u8>>,
    sink: &mut dyn PageSink,
) -> Result<Numbered> {
    let g = group_size(count);
    let mut gens = Vec::with_capacity(count.div_ceil(g));
    let mut start = 0;
    loop {
        let end = (start + g).min(count);
        let bodies = (start..end).map(body).collect::<Result<Vec<_>>>()?;
        let gen = gen_of(&bodies);
        for (i, b) in bodies.iter().enumerate() {
            let n = (start + i) as u32;
            let name = page::numbered_name(kind, &gen, n);
            if !sink.reuse(&name, &name)? {
                sink.put(page::encode_numbered(kind, &gen, n, b))?;
            }
        }
        gens.push(gen);
        start = end;
        if start >= count {
            break;
        }
    }
    if count <= 1 {
        return Ok(Numbered {
            gen: gens.pop().unwrap_or_default(),
            per_page,
            pages: count,
            ..Numbered::default()
        });
    }
    Ok(Numbered {
        gen: run_gen(&gens),
        per_page,
        pages: count,
        group: g,
        gens,
    })
}

#[derive(Deserialize)]
struct Text {
    text: String,
}

#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    expires: Option<String>,
    source: String,
    #[serde(default)]
    parent_doc: Option<u32>,
    #[serde(default)]
    tier: Option<u32>,
    #[serde(default)]
    lang: String,
}

/// Lays out `parts` as pages. Returns the page roots for the entry and the encoded pages
/// (name + bytes to store as `p/<name>`). Errors on corrupt parts. [`write_pages_with`]
/// gives each page to a sink instead of holding them all.
pub fn write_pages(parts: &Parts) -> Result<(PagesRoot, Vec<Encoded>)> {
    let mut pages = Vec::new();
    let root = write_pages_with(parts, &mut |p| {
        pages.push(p);
        Ok(())
    })?;
    Ok((root, pages))
}

/// [`write_pages`] handing each encoded page to `sink` as soon as it is made (the builder
/// writes it to disk), so the bundle's pages are never all in memory: postings lists are
/// decoded one term at a time, and chunk and vector pages are made one group at a time
/// ([`grouped_to`]). The pages and root are identical to [`write_pages`]'s.
/// Errors on corrupt parts, or what `sink` returns.
pub fn write_pages_with(
    parts: &Parts,
    sink: &mut dyn FnMut(Encoded) -> Result<()>,
) -> Result<PagesRoot> {
    write_pages_into(parts, &mut FnSink(sink))
}

/// [`write_pages_with`] over a [`PageSink`]: a page whose name the previous bundle already
/// has (same content, see [`PageSink`]) is reused instead of encoded and stored again. The
/// pages and root are identical to [`write_pages`]'s.
pub fn write_pages_into(parts: &Parts, sink: &mut dyn PageSink) -> Result<PagesRoot> {
    let lex = parts.lexical;
    let doc_lens = lex.doc_lens();
    let terms = lex.term_list();
    let keys: Vec<&str> = terms.iter().map(String::as_str).collect();
    // Each list decoded when its pages are made; the pages go to `sink` as they are made.
    let written = dict::write_into(
        &keys,
        &|i| Ok(lex.postings(keys[i])?.unwrap_or_default()),
        doc_lens,
        sink,
    )?;

    // Chunk pages: D records each, D chosen so the median page is ~4 kB raw.
    let n = parts.chunks.len();
    let mut lens: Vec<usize> = (0..n as u32)
        .map(|d| parts.chunks.raw(d).map(<[u8]>::len))
        .collect::<Result<_>>()?;
    let per_page = if n == 0 {
        1
    } else {
        lens.sort_unstable();
        (CHUNK_PAGE_TARGET / lens[n / 2].max(1)).clamp(1, 4096)
    };
    drop(lens);
    let chunk_body = |p: usize| -> Result<Vec<u8>> {
        let (start, end) = (p * per_page, ((p + 1) * per_page).min(n));
        let recs = (start..end)
            .map(|d| parts.chunks.raw(d as u32))
            .collect::<Result<Vec<_>>>()?;
        Ok(write_raw_records(recs.into_iter()))
    };
    let chunks_root = grouped_to(
        Kind::Chunks,
        n.div_ceil(per_page),
        per_page,
        &chunk_body,
        sink,
    )?;

    // Columns.
    let mut cols = Columns::default();
    let mut facets = columns::FacetsBuilder::default();
    let mut numbers: std::collections::HashMap<String, u32> = Default::default();
    // The Unicode tables the chunks' texts need by language (the entry's `unicode.chunks`);
    // a text is looked at while its language lacks one.
    let mut needs = crate::unicode::ChunkTables::new();
    for d in 0..n as u32 {
        let m: Meta = parts.chunks.get_as(d)?;
        if !needs.all(&m.lang) {
            let t: Text = parts.chunks.get_as(d)?;
            needs.add(&m.lang, &t.text);
        }
        facets.push(m.tier, &m.lang, &m.source);
        let next = numbers.len() as u32;
        cols.file.push(*numbers.entry(m.source).or_insert(next));
        cols.archived.push(m.archived);
        cols.expires
            .push(m.expires.as_deref().and_then(crate::time::parse_iso8601_ms));
        cols.parent.push(m.parent_doc);
    }
    cols.facets = Some(facets.finish());
    let columns = put_named(Kind::Columns, &cols.encode(), sink)?;

    // Hanja: groups of keys with the same (tag, first char) never split across pages.
    let mut hanja_keys = Vec::new();
    let mut hanja = None;
    let mut expand_keys = Vec::new();
    let mut expand = None;
    let mut expand_buckets = None;
    if let Some(h) = parts.hanja {
        let keys = h.keys();
        let mut bodies = Vec::new();
        let mut i = 0;
        while i < keys.len() {
            let start = i;
            let mut size = 0;
            while i < keys.len() && (i == start || size < HANJA_PAGE_TARGET) {
                let group = group_key(&keys[i]).to_vec();
                while i < keys.len() && group_key(&keys[i]) == group.as_slice() {
                    size += keys[i].len();
                    i += 1;
                }
            }
            let table = HanjaMap::from_keys(&keys[start..i])?;
            bodies.push(table.as_bytes().to_vec());
            let first = String::from_utf8(group_key(&keys[start]).to_vec()).map_err(|_| {
                FormatError::corrupt(crate::hanja::HANJA_FILE, 0, "key is not UTF-8")
            })?;
            hanja_keys.push(first);
        }
        hanja = Some(put_numbered(Kind::Hanja, &bodies, 0, sink)?);
        let terms = parts.lexical.term_list();
        let table = expand::table(terms.iter().map(String::as_str), h);
        let (keys, bodies) = expand::write(&table);
        if !bodies.is_empty() {
            expand = Some(put_numbered(Kind::Expansions, &bodies, 0, sink)?);
            expand_keys = keys;
        }
        if written.buckets.is_some() {
            let entries = &written.entries;
            let by_term = |t: &str| {
                entries
                    .binary_search_by(|e| e.term.as_str().cmp(t))
                    .ok()
                    .map(|i| &entries[i])
            };
            let bodies = bucket::write_expansions(&table, by_term);
            if !bodies.is_empty() {
                expand_buckets = Some(put_numbered(Kind::ExpansionBuckets, &bodies, 0, sink)?);
            }
        }
    }
    drop(written.entries);

    // Vectors.
    let (vectors, dim) = match parts.vectors {
        Some(v) => {
            let body = |p: usize| {
                let (start, end) = (p * VECTOR_ROWS, ((p + 1) * VECTOR_ROWS).min(v.len()));
                write_quantized(v.dim(), (start..end).map(|i| v.row(i)))
            };
            let pages = v.len().div_ceil(VECTOR_ROWS);
            let root = grouped_to(Kind::Vectors, pages, VECTOR_ROWS, &body, sink)?;
            (Some(root), v.dim())
        }
        None => (None, 0),
    };

    // Sources table.
    let mut bodies = Vec::new();
    for group in parts.sources.chunks(SOURCES_PER_PAGE) {
        bodies.push(
            serde_json::to_vec(group).map_err(|source| FormatError::Json {
                file: "p/s-…".into(),
                source,
            })?,
        );
    }
    let sources = put_numbered(Kind::Sources, &bodies, SOURCES_PER_PAGE, sink)?;

    // The analyzer's Unicode tables, for engines without them compiled in (the browser's).
    let [nfkc_langs, t2s_langs] = needs.finish();
    let unicode = Some(UnicodeRoot {
        nfkc: put_named(
            Kind::Unicode,
            &crate::unicode::page_body(crate::unicode::Table::Nfkc),
            sink,
        )?,
        t2s: put_named(
            Kind::Unicode,
            &crate::unicode::page_body(crate::unicode::Table::T2s),
            sink,
        )?,
        nfkc_langs: Some(nfkc_langs),
        t2s_langs: Some(t2s_langs),
    });

    let total_doc_len = doc_lens.iter().map(|&l| u64::from(l)).sum();
    Ok(PagesRoot {
        dict_keys: written.keys,
        dict_index: written.index,
        dict: written.blocks,
        postings: written.postings,
        typo: written.typo,
        total_doc_len,
        chunks: chunks_root,
        records: n,
        columns,
        hanja_keys,
        hanja,
        vectors,
        dim,
        sources,
        expand_keys,
        expand,
        #[cfg(feature = "dense")]
        query_model: None,
        unicode,
        #[cfg(feature = "dense")]
        ivf: None,
        buckets: written.buckets,
        expand_buckets,
    })
}

/// The `(tag, char)` prefix of a Hanja key.
fn group_key(k: &[u8]) -> &[u8] {
    let first = k.get(1).copied().unwrap_or(0);
    let w = match first {
        0..=0x7F => 1,
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        _ => 4,
    };
    &k[..(1 + w).min(k.len())]
}

/// Checks a [`PagesRoot`] against the entry's counts before anything is sized from it:
/// bytes from the network are hostile. Errors: DataCorruption naming `jikji.json`.
pub fn check_root(root: &PagesRoot, chunks: usize, parents: usize) -> Result<()> {
    let bad = |m: String| Err(FormatError::corrupt(ENTRY_FILE, 0, m));
    let runs = [
        ("dict", Some(&root.dict)),
        (
            "dict_index.pages",
            root.dict_index.as_ref().map(|x| &x.pages),
        ),
        ("postings", Some(&root.postings)),
        ("typo", root.typo.as_ref()),
        ("chunks", Some(&root.chunks)),
        ("hanja", root.hanja.as_ref()),
        ("vectors", root.vectors.as_ref()),
        ("sources", Some(&root.sources)),
        ("expand", root.expand.as_ref()),
        ("buckets", root.buckets.as_ref()),
        ("expand_buckets", root.expand_buckets.as_ref()),
    ];
    for (what, run) in runs {
        if let Some(run) = run {
            run.check_groups(what)?;
        }
    }
    let records = chunks.checked_add(parents);
    if records != Some(root.records) {
        return bad(format!(
            "pages hold {} records, counts say {chunks} chunks + {parents} parents",
            root.records
        ));
    }
    let c = &root.chunks;
    if c.per_page == 0 || c.pages != root.records.div_ceil(c.per_page) {
        return bad(format!(
            "{} chunk pages of {} for {} records",
            c.pages, c.per_page, root.records
        ));
    }
    if let Some(v) = &root.vectors {
        if v.per_page == 0
            || v.pages != chunks.div_ceil(v.per_page)
            || root.dim == 0
            || root.dim > 65536
        {
            return bad(format!(
                "{} vector pages of {} rows × {} for {chunks} chunks",
                v.pages, v.per_page, root.dim
            ));
        }
    }
    #[cfg(feature = "dense")]
    if let Some(i) = &root.ivf {
        if root.vectors.is_none() {
            return bad("a dense index (pages.ivf) without vectors".into());
        }
        i.check(chunks)?;
    }
    match &root.dict_index {
        None => {
            if root.dict_keys.windows(2).any(|w| w[0] >= w[1])
                || root.dict_keys.len() != root.dict.pages
            {
                return bad(
                    "dictionary blocks are not in term order, or not one key per block".into(),
                );
            }
        }
        Some(x) => {
            if !root.dict_keys.is_empty()
                || x.keys.windows(2).any(|w| w[0] >= w[1])
                || x.keys.len() != x.pages.pages
                || x.pages.pages > root.dict.pages
            {
                return bad("dictionary index pages are not in term order, not one key per page, or with dict_keys too".into());
            }
        }
    }
    let hanja_pages = root.hanja.as_ref().map_or(0, |h| h.pages);
    if root.hanja_keys.windows(2).any(|w| w[0] >= w[1]) || root.hanja_keys.len() != hanja_pages {
        return bad("Hanja pages are not in key order, or not one key per page".into());
    }
    let expand_pages = root.expand.as_ref().map_or(0, |x| x.pages);
    if root.expand_keys.windows(2).any(|w| w[0] >= w[1]) || root.expand_keys.len() != expand_pages {
        return bad("bigram expansion pages are not in key order, or not one key per page".into());
    }
    if root.buckets.as_ref().is_some_and(|b| b.pages == 0)
        || root.expand_buckets.as_ref().is_some_and(|y| y.pages == 0)
        || (root.expand_buckets.is_some() && root.buckets.is_none())
    {
        return bad("term or expansion buckets with no page, or expansion buckets alone".into());
    }
    if root
        .typo
        .as_ref()
        .is_some_and(|t| t.pages != dict::TYPO_BUCKETS)
    {
        return bad("typo dictionary pages are not one per length bucket".into());
    }
    if root.postings.per_page != dict::POSTINGS_PAGE {
        return bad(format!(
            "postings pages of {} bytes",
            root.postings.per_page
        ));
    }
    if let Some(u) = &root.unicode {
        for name in [&u.nfkc, &u.t2s] {
            if !name.starts_with("n-") || !crate::bundle::valid_page_name(name) {
                return bad(format!(
                    "Unicode table page {} is not a page name n-<hex>",
                    crate::quote::Quoted(name)
                ));
            }
        }
    }
    Ok(())
}

/// Chunk records read from chunk pages in the cache.
pub struct PagedChunks {
    cache: Arc<PageCache>,
    root: Numbered,
    len: usize,
}

impl PagedChunks {
    /// Over `cache`, with the entry's chunk pages and record count.
    pub fn new(cache: Arc<PageCache>, root: Numbered, len: usize) -> Self {
        PagedChunks { cache, root, len }
    }

    /// The page name of record `doc`.
    pub fn page_of(&self, doc: u32) -> String {
        self.root
            .name(Kind::Chunks, doc as usize / self.root.per_page)
    }

    fn store(&self, doc: u32) -> Result<(ChunkStore, String)> {
        if doc as usize >= self.len {
            return Err(FormatError::corrupt(
                "p/c-…",
                0,
                format!("chunk {doc} out of range ({} chunks)", self.len),
            ));
        }
        let name = self.page_of(doc);
        let body = self.cache.require(&name)?;
        let store = ChunkStore::open(body.as_ref().clone()).map_err(|e| renamed(e, &name))?;
        let want = self
            .root
            .per_page
            .min(self.len - (doc as usize / self.root.per_page) * self.root.per_page);
        if store.len() != want {
            return Err(FormatError::corrupt(
                &format!("p/{name}"),
                0,
                format!("{} records, expected {want}", store.len()),
            ));
        }
        Ok((store, name))
    }

    /// Decodes record `doc` (with [`crate::json`]). Errors: [`FormatError::PageMissing`] if
    /// its page is not loaded, DataCorruption naming the page.
    pub fn get(&self, doc: u32) -> Result<ChunkRecord> {
        let (store, name) = self.store(doc)?;
        store
            .get((doc as usize % self.root.per_page) as u32)
            .map_err(|e| renamed(e, &name))
    }

    /// Decodes the fields of record `doc` that `T` declares (serde_json). Errors:
    /// [`FormatError::PageMissing`] if its page is not loaded, DataCorruption naming the page.
    pub fn get_as<T: serde::de::DeserializeOwned>(&self, doc: u32) -> Result<T> {
        let (store, name) = self.store(doc)?;
        store
            .get_as((doc as usize % self.root.per_page) as u32)
            .map_err(|e| renamed(e, &name))
    }

    /// The JSON bytes of record `doc`.
    pub fn raw(&self, doc: u32) -> Result<Vec<u8>> {
        let (store, name) = self.store(doc)?;
        store
            .raw((doc as usize % self.root.per_page) as u32)
            .map(<[u8]>::to_vec)
            .map_err(|e| renamed(e, &name))
    }
}

/// `e` with the chunk store's file name replaced by the page's.
fn renamed(e: FormatError, page: &str) -> FormatError {
    match e {
        FormatError::DataCorruption {
            offset, message, ..
        } => FormatError::DataCorruption {
            file: format!("p/{page}"),
            offset,
            message,
        },
        FormatError::FormatVersion {
            found, expected, ..
        } => FormatError::FormatVersion {
            file: format!("p/{page}"),
            found,
            expected,
        },
        FormatError::Fst { source, .. } => FormatError::Fst {
            file: format!("p/{page}"),
            source,
        },
        e => e,
    }
}

/// Term dictionary and postings: a whole `terms.fst` + `postings.bin`, or paged.
// One per open bundle, and the paged variant is the one every query reads: not boxed.
#[allow(clippy::large_enum_variant)]
pub enum Lexicon {
    /// Format 1 (or a format 2 bundle read whole). Feature `v1` (not in the browser build).
    #[cfg(feature = "v1")]
    Whole(LexicalIndex),
    /// Format 2 over the page cache.
    Paged(PagedLexicon),
}

/// Sorts `(df, term)` matches most frequent first (ties in term order), keeps `limit`.
fn best(mut found: Vec<(u32, String)>, limit: usize) -> Vec<String> {
    crate::sort::sort_by(&mut found, |a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    found.truncate(limit);
    found.into_iter().map(|(_, t)| t).collect()
}

impl Lexicon {
    /// The whole index, if this is one (builders and native tools).
    pub fn whole(&self) -> Option<&LexicalIndex> {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(l) => Some(l),
            Lexicon::Paged(_) => None,
        }
    }

    /// Number of indexed chunks (BM25's N).
    pub fn num_docs(&self) -> usize {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(l) => l.num_docs(),
            Lexicon::Paged(p) => p.num_docs(),
        }
    }

    /// Number of distinct terms.
    pub fn num_terms(&self) -> usize {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(l) => l.num_terms(),
            Lexicon::Paged(p) => p.num_terms(),
        }
    }

    /// Mean chunk length in terms (BM25's avgdl).
    pub fn avg_doc_len(&self) -> f32 {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(l) => l.avg_doc_len(),
            Lexicon::Paged(p) => p.avg_doc_len(),
        }
    }

    /// Document frequency of `term`, `None` if absent (paged: or not loaded, recorded).
    pub fn doc_freq(&self, term: &str) -> Result<Option<usize>> {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(l) => l.doc_freq(term),
            Lexicon::Paged(p) => p.doc_freq(term),
        }
    }

    /// True if a lookup of `term` answers from loaded data (always for a whole index; for a
    /// paged one when its dictionary block is in the cache). Records nothing.
    pub fn knows(&self, term: &str) -> bool {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(_) => true,
            Lexicon::Paged(p) => p.knows(term),
        }
    }

    /// True for a paged index whose current pass read a page that was not loaded: a
    /// ranking computed now is incomplete (the engine then fetches no chunk pages for it).
    pub fn pending(&self) -> bool {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(_) => false,
            Lexicon::Paged(p) => p.pending(),
        }
    }

    /// The dictionary terms the two-character Hangul or Han term `key` expands to, from
    /// the paged bundle's expansion buckets ([`bucket`]; their entries come with them):
    /// `None` when there are none (a whole index, or a bundle without them); empty while
    /// the page is not loaded (recorded) or when the key has no candidate.
    pub fn expansions(&self, key: &str) -> Result<Option<Vec<String>>> {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(_) => Ok(None),
            Lexicon::Paged(p) => p.expansions(key),
        }
    }

    /// True for a paged index with expansion buckets ([`Lexicon::expansions`]).
    pub fn has_expansion_buckets(&self) -> bool {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(_) => false,
            Lexicon::Paged(p) => p.has_expansion_buckets(),
        }
    }

    /// Starts a pass of a query: a paged index forgets the expansion candidates' entries
    /// of earlier lookups ([`PagedLexicon::begin_query`]). No-op for a whole index.
    pub fn begin_query(&self) {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(_) => {}
            Lexicon::Paged(p) => p.begin_query(),
        }
    }

    /// Document frequency of `term`, 0 if absent.
    pub fn df(&self, term: &str) -> Result<u32> {
        Ok(self.doc_freq(term)?.unwrap_or(0) as u32)
    }

    /// Postings of `term` as `(doc, tf, doc length in terms)` in ascending doc order;
    /// `None` if absent (paged: or not loaded, recorded).
    pub fn postings_with_len(&self, term: &str) -> Result<Option<Vec<(u32, u32, u32)>>> {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(l) => Ok(l.postings(term)?.map(|list| {
                list.into_iter()
                    .map(|(d, tf)| (d, tf, l.doc_len(d)))
                    .collect()
            })),
            Lexicon::Paged(p) => p.postings_with_len(term),
        }
    }

    /// Terms starting with `prefix`, at most `limit`, most frequent first (of the first
    /// 4,096 in term order). See [`LexicalIndex::prefix_terms`].
    pub fn prefix_terms(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(l) => l.prefix_terms(prefix, limit),
            Lexicon::Paged(p) => Ok(best(p.prefix_matches(prefix)?, limit)),
        }
    }

    /// Terms within Levenshtein `distance` of `term`, at most `limit`, most frequent first.
    /// See [`LexicalIndex::fuzzy_terms`].
    pub fn fuzzy_terms(&self, term: &str, distance: u32, limit: usize) -> Result<Vec<String>> {
        match self {
            #[cfg(feature = "v1")]
            Lexicon::Whole(l) => l.fuzzy_terms(term, distance, limit),
            Lexicon::Paged(p) => Ok(best(p.fuzzy_matches(term, distance)?, limit)),
        }
    }
}

/// Chunk records: a whole `chunks.bin`, or paged.
pub enum Chunks {
    /// Format 1 (or format 2 read whole). Feature `v1` (not in the browser build).
    #[cfg(feature = "v1")]
    Whole(ChunkStore),
    /// Format 2 over the page cache.
    Paged(PagedChunks),
}

impl Chunks {
    /// Number of records (indexed chunks + parent records).
    pub fn len(&self) -> usize {
        match self {
            #[cfg(feature = "v1")]
            Chunks::Whole(c) => c.len(),
            Chunks::Paged(p) => p.len,
        }
    }

    /// True if there are no records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Decodes record `doc`. Errors: DataCorruption; paged: [`FormatError::PageMissing`].
    pub fn get(&self, doc: u32) -> Result<ChunkRecord> {
        match self {
            #[cfg(feature = "v1")]
            Chunks::Whole(c) => c.get(doc),
            Chunks::Paged(p) => p.get(doc),
        }
    }

    /// Asks for the page of record `doc` without decoding it: a paged store records its
    /// page as missing if it is not loaded (so it comes in this round). No-op otherwise.
    // Without feature `v1` a store is always paged.
    #[cfg_attr(not(feature = "v1"), allow(irrefutable_let_patterns))]
    pub fn touch(&self, doc: u32) {
        if let Chunks::Paged(p) = self {
            if (doc as usize) < p.len {
                p.cache.get(&p.page_of(doc));
            }
        }
    }

    /// Decodes the fields of record `doc` that `T` declares.
    pub fn get_as<T: serde::de::DeserializeOwned>(&self, doc: u32) -> Result<T> {
        match self {
            #[cfg(feature = "v1")]
            Chunks::Whole(c) => c.get_as(doc),
            Chunks::Paged(p) => p.get_as(doc),
        }
    }

    /// The whole store, if this is one.
    pub fn whole(&self) -> Option<&ChunkStore> {
        match self {
            #[cfg(feature = "v1")]
            Chunks::Whole(c) => Some(c),
            Chunks::Paged(_) => None,
        }
    }
}

/// Hanja readings: a whole `hanja.fst`, or paged.
pub enum Hanja {
    /// Format 1 (or format 2 read whole). Feature `v1` (not in the browser build).
    #[cfg(feature = "v1")]
    Whole(HanjaMap),
    /// Format 2 over the cache.
    Paged {
        /// The cache.
        cache: Arc<PageCache>,
        /// First key of each page.
        keys: Vec<String>,
        /// The pages.
        pages: Numbered,
        /// First key of each bigram expansion page and the pages, if the bundle has them.
        expand: Option<(Vec<String>, Numbered)>,
    },
}

impl Hanja {
    /// True if these are a paged bundle's readings with bigram expansion pages.
    pub fn has_expansions(&self) -> bool {
        matches!(
            self,
            Hanja::Paged {
                expand: Some(_),
                ..
            }
        )
    }

    /// The dictionary terms the two-character term `t` expands to through the readings
    /// (see [`expand`]), from the bigram expansion pages: `None` when the bundle has no
    /// such pages (the caller then searches [`Hanja::hanja_of`] / [`Hanja::readings_of`]
    /// and the dictionary itself); empty while the page is not loaded (the miss is
    /// recorded). Errors: [`FormatError::DataCorruption`] naming the page if its body is
    /// malformed.
    pub fn bigram_candidates(&self, t: &str) -> Result<Option<Vec<String>>> {
        let Hanja::Paged {
            cache,
            expand: Some((keys, pages)),
            ..
        } = self
        else {
            return Ok(None);
        };
        let i = keys.partition_point(|first| first.as_str() <= t);
        let Some(i) = i.checked_sub(1) else {
            return Ok(Some(Vec::new()));
        };
        let name = pages.name(Kind::Expansions, i);
        Ok(Some(match cache.get(&name) {
            Some(body) => expand::lookup(&format!("p/{name}"), &body, t)?,
            None => Vec::new(),
        }))
    }

    fn lookup(&self, tag: u8, c: char, f: impl Fn(&HanjaMap, char) -> Vec<char>) -> Vec<char> {
        match self {
            #[cfg(feature = "v1")]
            Hanja::Whole(m) => f(m, c),
            Hanja::Paged {
                cache, keys, pages, ..
            } => {
                let mut key = String::new();
                key.push(tag as char);
                key.push(c);
                let i = keys.partition_point(|first| first.as_str() <= key.as_str());
                let Some(i) = i.checked_sub(1) else {
                    return Vec::new();
                };
                match cache.get(&pages.name(Kind::Hanja, i)) {
                    Some(body) => match HanjaMap::open(body.as_ref().clone()) {
                        Ok(m) => f(&m, c),
                        Err(_) => Vec::new(),
                    },
                    None => Vec::new(),
                }
            }
        }
    }

    /// The Hanja read as the Hangul syllable `hangul` (paged: empty while not loaded).
    pub fn hanja_of(&self, hangul: char) -> Vec<char> {
        self.lookup(b'h', hangul, HanjaMap::hanja_of)
    }

    /// The Hangul readings of the Han character `han` (paged: empty while not loaded).
    pub fn readings_of(&self, han: char) -> Vec<char> {
        self.lookup(b'c', han, HanjaMap::readings_of)
    }
}

/// Vectors of a paged bundle: assembled once every vector page is in the cache.
pub fn assemble_vectors(
    cache: &PageCache,
    root: &Numbered,
    dim: usize,
    rows: usize,
) -> Result<Option<Vectors>> {
    let names: Vec<String> = (0..root.pages)
        .map(|n| root.name(Kind::Vectors, n))
        .collect();
    let bodies: Vec<_> = names.iter().map(|n| cache.get(n)).collect();
    if bodies.iter().any(Option::is_none) {
        return Ok(None);
    }
    let mut parts = Vec::with_capacity(root.pages);
    for (name, body) in names.iter().zip(bodies) {
        let v = Vectors::open(&body.expect("checked")).map_err(|e| renamed(e, name))?;
        if v.dim() != dim {
            return Err(FormatError::corrupt(
                &format!("p/{name}"),
                8,
                format!("dimension {} but the entry says {dim}", v.dim()),
            ));
        }
        parts.push(v);
    }
    let all = write_quantized(
        dim,
        parts
            .iter()
            .flat_map(|v| (0..v.len()).map(move |i| v.row(i))),
    )?;
    let v = Vectors::open(&all)?;
    if v.len() != rows {
        return Err(FormatError::corrupt(
            ENTRY_FILE,
            0,
            format!("vector pages hold {} rows, expected {rows}", v.len()),
        ));
    }
    Ok(Some(v))
}

/// Every page name of a bundle with `root`'s parts (for native whole reads and checks); the
/// query model's pages are not parts of the bundle's index: [`qmodel::QueryModelRoot::all_pages`].
pub fn all_pages(root: &PagesRoot) -> Vec<String> {
    let mut out: Vec<String> = (0..root.dict.pages)
        .map(|n| root.dict.name(Kind::Dict, n))
        .collect();
    if let Some(x) = &root.dict_index {
        out.extend((0..x.pages.pages).map(|n| x.pages.name(Kind::DictIndex, n)));
    }
    out.extend((0..root.postings.pages).map(|n| root.postings.name(Kind::Postings, n)));
    if let Some(t) = &root.typo {
        out.extend((0..t.pages).map(|n| t.name(Kind::Typo, n)));
    }
    out.push(root.columns.clone());
    if let Some(h) = &root.hanja {
        out.extend((0..h.pages).map(|n| h.name(Kind::Hanja, n)));
    }
    if let Some(x) = &root.expand {
        out.extend((0..x.pages).map(|n| x.name(Kind::Expansions, n)));
    }
    if let Some(b) = &root.buckets {
        out.extend((0..b.pages).map(|n| b.name(Kind::TermBuckets, n)));
    }
    if let Some(y) = &root.expand_buckets {
        out.extend((0..y.pages).map(|n| y.name(Kind::ExpansionBuckets, n)));
    }
    out.extend((0..root.chunks.pages).map(|n| root.chunks.name(Kind::Chunks, n)));
    if let Some(v) = &root.vectors {
        out.extend((0..v.pages).map(|n| v.name(Kind::Vectors, n)));
    }
    out.extend((0..root.sources.pages).map(|n| root.sources.name(Kind::Sources, n)));
    if let Some(u) = &root.unicode {
        out.push(u.nfkc.clone());
        out.push(u.t2s.clone());
    }
    #[cfg(feature = "dense")]
    if let Some(i) = &root.ivf {
        out.extend(i.all_pages());
    }
    out
}

/// The names of the pages a native reader needs for a bundle's records, vectors and sources
/// table (the chunk, vector and sources pages of `root`): what `jikji update` reads of the
/// bundle it updates.
pub fn record_pages(root: &PagesRoot) -> Vec<String> {
    let mut out: Vec<String> = (0..root.chunks.pages)
        .map(|n| root.chunks.name(Kind::Chunks, n))
        .collect();
    if let Some(v) = &root.vectors {
        out.extend((0..v.pages).map(|n| v.name(Kind::Vectors, n)));
    }
    out.extend((0..root.sources.pages).map(|n| root.sources.name(Kind::Sources, n)));
    out
}

/// The sources table of a paged bundle from its sources pages in `cache`, in order.
/// Errors: [`FormatError::PageMissing`], DataCorruption naming the page.
pub fn sources_table(root: &PagesRoot, cache: &PageCache) -> Result<Vec<SourceEntry>> {
    let mut sources = Vec::new();
    for n in 0..root.sources.pages {
        let name = root.sources.name(Kind::Sources, n);
        let body = cache.require(&name)?;
        let part: Vec<SourceEntry> = crate::json::from_slice(&body, &format!("p/{name}"))?;
        sources.extend(part);
    }
    Ok(sources)
}

/// The paged lexicon of a bundle with page roots `root` over `cache`.
pub fn lexicon(
    root: &PagesRoot,
    cache: &Arc<PageCache>,
    chunks: usize,
    num_terms: usize,
) -> PagedLexicon {
    let avg = if chunks == 0 {
        0.0
    } else {
        root.total_doc_len as f32 / chunks as f32
    };
    PagedLexicon::new(
        cache.clone(),
        root.dict_keys.clone(),
        root.dict.clone(),
        root.postings.clone(),
        root.typo.clone(),
        chunks,
        num_terms,
        avg,
    )
    .with_index(root.dict_index.clone())
    .with_buckets(root.buckets.clone(), root.expand_buckets.clone())
}

#[cfg(feature = "v1")]
/// The whole parts of a paged bundle whose pages are all in `cache`: v1 encodings of the
/// term dictionary + postings, chunk store, vectors, Hanja table, and the sources table,
/// byte for byte what the builder laid out.
pub struct WholeParts {
    /// `terms.fst` bytes.
    pub terms_fst: Vec<u8>,
    /// `postings.bin` bytes.
    pub postings: Vec<u8>,
    /// `chunks.bin` bytes.
    pub chunks: Vec<u8>,
    /// `vectors.bin` bytes.
    pub vectors: Option<Vec<u8>>,
    /// `hanja.fst` bytes.
    pub hanja: Option<Vec<u8>>,
    /// The sources table.
    pub sources: Vec<SourceEntry>,
}

#[cfg(feature = "v1")]
/// Rebuilds the whole parts from a cache holding every page of `root` (see [`all_pages`]); `chunks` = indexed chunks. Errors: PageMissing, DataCorruption.
pub fn whole_parts(
    root: &PagesRoot,
    cache: &Arc<PageCache>,
    chunks: usize,
    num_terms: usize,
) -> Result<WholeParts> {
    let lex = lexicon(root, cache, chunks, num_terms);
    let mut doc_lens = vec![0u32; chunks];
    let mut lists: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
    for i in 0..lex.num_blocks() {
        let name = lex.block_name(i);
        let b = lex
            .block_named(&name)?
            .ok_or_else(|| FormatError::PageMissing { name: name.clone() })?;
        for e in &b.entries {
            let list = lex
                .postings_with_len(&e.term)?
                .ok_or_else(|| FormatError::PageMissing { name: name.clone() })?;
            for &(d, _, dl) in &list {
                doc_lens[d as usize] = dl;
            }
            lists.insert(
                e.term.clone(),
                list.into_iter().map(|(d, tf, _)| (d, tf)).collect(),
            );
        }
    }
    let (terms_fst, postings) = crate::postings::write_lists(&doc_lens, lists.into_iter())?;
    let pc = PagedChunks::new(cache.clone(), root.chunks.clone(), root.records);
    let raws = (0..root.records as u32)
        .map(|d| pc.raw(d))
        .collect::<Result<Vec<_>>>()?;
    let chunks_bin = write_raw_records(raws.iter().map(Vec::as_slice));
    let vectors = match &root.vectors {
        Some(v) => {
            let vs = assemble_vectors(cache, v, root.dim, chunks)?.ok_or_else(|| {
                FormatError::PageMissing {
                    name: v.name(Kind::Vectors, 0),
                }
            })?;
            Some(write_quantized(vs.dim(), (0..vs.len()).map(|i| vs.row(i)))?)
        }
        None => None,
    };
    let hanja = match &root.hanja {
        None => None,
        Some(h) => {
            let mut keys = Vec::new();
            for n in 0..h.pages {
                let name = h.name(Kind::Hanja, n);
                let m = HanjaMap::open(cache.require(&name)?.as_ref().clone())
                    .map_err(|e| renamed(e, &name))?;
                keys.extend(m.keys());
            }
            Some(HanjaMap::from_keys(&keys)?.as_bytes().to_vec())
        }
    };
    let sources = sources_table(root, cache)?;
    Ok(WholeParts {
        terms_fst,
        postings,
        chunks: chunks_bin,
        vectors,
        hanja,
        sources,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(count: usize) -> Vec<Vec<u8>> {
        (0..count)
            .map(|i| {
                (0..(i % 7) * 300)
                    .map(|j| (j % 251) as u8 ^ i as u8)
                    .collect()
            })
            .collect()
    }

    /// The streaming run writer names and encodes pages exactly as the one holding all
    /// bodies.
    #[test]
    fn grouped_to_equals_grouped() {
        for count in [0, 1, 5, 32, 33, 200] {
            let bodies = bodies(count);
            let (root, pages) = grouped(Kind::Chunks, bodies.clone(), 7);
            let mut streamed = Vec::new();
            let root2 = grouped_to(
                Kind::Chunks,
                bodies.len(),
                7,
                &|n| Ok(bodies[n].clone()),
                &mut FnSink(&mut |p| {
                    streamed.push(p);
                    Ok(())
                }),
            )
            .unwrap();
            assert_eq!(root, root2);
            root.check_groups("chunks").unwrap();
            assert_eq!(pages.len(), count);
            for (n, (a, b)) in pages.iter().zip(&streamed).enumerate() {
                assert_eq!((&a.name, &a.bytes), (&b.name, &b.bytes));
                assert_eq!(a.name, root.name(Kind::Chunks, n));
            }
        }
    }

    /// Runs of 0 or 1 page are named as before groups (one `gen` over all bodies, no
    /// `gens`), so such pages of older bundles keep their names.
    #[test]
    fn a_one_page_run_is_named_as_before() {
        let b = bodies(2);
        let (root, pages) = grouped(Kind::Sources, vec![b[1].clone()], 128);
        let (old, old_pages) = numbered(Kind::Sources, vec![b[1].clone()], 128);
        assert_eq!(root, old);
        assert!(root.gens.is_empty());
        assert_eq!(pages[0].name, old_pages[0].name);
        assert_eq!(pages[0].bytes, old_pages[0].bytes);
    }

    /// Changing one body renames exactly the pages of its group; every other page keeps its
    /// name and bytes. Group sizes follow [`group_size`].
    #[test]
    fn an_edit_renames_only_its_group() {
        assert_eq!(group_size(0), 1);
        assert_eq!(group_size(32), 1);
        assert_eq!(group_size(33), 2);
        assert_eq!(group_size(6333), 256);
        let mut b = bodies(200); // group 8, 25 groups
        let (root, pages) = grouped(Kind::Chunks, b.clone(), 1);
        assert_eq!((root.group, root.gens.len()), (8, 25));
        b[83].push(1); // group 10: pages 80..88
        let (root2, pages2) = grouped(Kind::Chunks, b, 1);
        assert_ne!(root.gen, root2.gen);
        for (n, (p, q)) in pages.iter().zip(&pages2).enumerate() {
            if (80..88).contains(&n) {
                assert_ne!(p.name, q.name, "page {n}");
            } else {
                assert_eq!((&p.name, &p.bytes), (&q.name, &q.bytes), "page {n}");
            }
        }
    }

    /// Hostile `gens` are refused by the entry check; `name` never panics on them.
    #[test]
    fn bad_group_generations_are_refused() {
        let (root, _) = grouped(Kind::Chunks, bodies(100), 1);
        let mut r = root.clone();
        r.gens.pop();
        assert!(r.check_groups("chunks").is_err());
        let _ = r.name(Kind::Chunks, 99);
        let mut r = root.clone();
        r.group = 0;
        assert!(r.check_groups("chunks").is_err());
        let _ = r.name(Kind::Chunks, 99);
        let mut r = root.clone();
        r.gens[0] = "XYZ".into();
        let e = r.check_groups("chunks").unwrap_err().to_string();
        assert!(
            e.contains("jikji.json") && e.contains("pages.chunks"),
            "{e}"
        );
        let mut r = root;
        r.gens.clear();
        assert!(r.check_groups("chunks").is_err(), "group without gens");
    }
}

//! The query model as a paged bundle's pages: written by `jikji build`/`update` from a pack
//! ([`write_pages`], native), read back page by page by [`PagedQueryModel`] — the same code
//! in the browser (`query-model-wasm`, pages fetched by `web/worker.js`) and natively
//! (`jikji search --query-model`, pages read from the bundle folder by
//! [`PagedQueryModel::load_from_dir`]).
//!
//! Layout and the row map: `jikji_format::paged::qmodel` and `FORMAT.md` ("Query model
//! pages"); design: `docs/design/query-model-pack.md` §2.2, §6.
//!
//! A query runs in two steps: [`PagedQueryModel::token_ids`] (needs the tokenizer pages),
//! then [`PagedQueryModel::missing_rows`] names the row pages the ids need that are not
//! added yet; once they are ([`PagedQueryModel::add_page`]), [`PagedQueryModel::embed_ids`].
//! Every page is verified (format 2 header, SHA-256 of the body, name) before use, and
//! every size is bounded by the entry's root before anything is allocated.

use std::collections::HashMap;

use jikji_format::paged::page::{self, Kind};
use jikji_format::paged::qmodel::{QueryModelRoot, RowMap, RowOrder, ROWS_PER_PAGE};

use crate::kernels::Q4Matrix;
use crate::tokenizer::Tokenizer;
use crate::{ModelError, QueryModel, RowSource};

fn bad(page: &str, msg: impl Into<String>) -> ModelError {
    ModelError::Page {
        page: format!("p/{page}"),
        msg: msg.into(),
    }
}

/// Parts of one file (`layers.bin` or `tokenizer.bin`) arriving as pages in any order.
#[derive(Debug)]
struct Parts {
    names: Vec<String>,
    bodies: Vec<Option<Vec<u8>>>,
    total: u64,
    have: u64,
    /// All parts were in and were handed over as one file.
    done: bool,
}

impl Parts {
    fn new(names: &[String], total: u64) -> Self {
        Parts {
            names: names.to_vec(),
            bodies: vec![None; names.len()],
            total,
            have: 0,
            done: false,
        }
    }
    fn add(&mut self, i: usize, name: &str, body: Vec<u8>) -> Result<Option<Vec<u8>>, ModelError> {
        if self.done || self.bodies[i].is_some() {
            return Ok(None);
        }
        self.have += body.len() as u64;
        if self.have > self.total {
            return Err(bad(
                name,
                format!(
                    "the parts add up to more than the {} bytes the entry says",
                    self.total
                ),
            ));
        }
        self.bodies[i] = Some(body);
        if self.bodies.iter().any(Option::is_none) {
            return Ok(None);
        }
        if self.have != self.total {
            return Err(bad(
                name,
                format!(
                    "the parts add up to {} bytes, the entry says {}",
                    self.have, self.total
                ),
            ));
        }
        let mut out = Vec::with_capacity(self.total as usize);
        for b in self.bodies.iter_mut() {
            out.extend_from_slice(&b.take().unwrap_or_default());
        }
        self.done = true;
        Ok(Some(out))
    }
    fn missing(&self) -> impl Iterator<Item = &String> {
        self.names
            .iter()
            .zip(&self.bodies)
            .filter(|(_, b)| !self.done && b.is_none())
            .map(|(n, _)| n)
    }
}

/// The query model of a paged bundle, filled page by page.
pub struct PagedQueryModel {
    root: QueryModelRoot,
    layers: Parts,
    tok: Parts,
    model: Option<QueryModel>,
    tokenizer: Option<Tokenizer>,
    /// The row map as decoded, until the tokenizer is in when its tail is in script order.
    raw_map: Option<RowMap>,
    map: Option<RowMap>,
    rows: HashMap<usize, Vec<u8>>,
}

impl std::fmt::Debug for PagedQueryModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PagedQueryModel")
            .field("root", &self.root)
            .field("ready", &self.is_ready())
            .field("row_pages", &self.rows.len())
            .finish_non_exhaustive()
    }
}

/// The body of one row page: the Q4_0 rows (`row_bytes` each) of `ids` in order, from the
/// pack's row table. Errors: InvalidInput naming a token id the table has no row for.
/// Native only: the writers below are its callers (the browser reads pages, never writes them).
#[cfg(not(target_arch = "wasm32"))]
fn row_page_body(
    table: &crate::RowTable,
    ids: &[u32],
    row_bytes: usize,
) -> Result<Vec<u8>, ModelError> {
    let mut b = Vec::with_capacity(ids.len() * row_bytes);
    for &id in ids {
        b.extend_from_slice(table.row(id).ok_or_else(|| {
            ModelError::Format(jikji_format::FormatError::InvalidInput(format!(
                "token id {id} outside the pack's rows"
            )))
        })?);
    }
    Ok(b)
}

struct Rows<'a> {
    m: &'a PagedQueryModel,
    map: &'a RowMap,
}

impl RowSource for Rows<'_> {
    fn row(&self, id: u32) -> Option<&[u8]> {
        let slot = self.map.slot(id)?;
        let rb = self.m.root.row_bytes;
        let per = self.m.root.rows.per_page;
        let body = self.m.rows.get(&(slot / per))?;
        let at = (slot % per) * rb;
        body.get(at..at + rb)
    }
    fn rows(&self) -> usize {
        self.m.root.vocab
    }
}

impl PagedQueryModel {
    /// An empty model over the entry's `pages.query_model` (`root`). The root is checked
    /// ([`QueryModelRoot::check`]) against `bundle_model`, the bundle's `model.sha256`.
    /// Errors: [`ModelError::Format`] (the root is malformed or for another model).
    pub fn new(root: QueryModelRoot, bundle_model: Option<&str>) -> Result<Self, ModelError> {
        root.check(bundle_model)?;
        Ok(PagedQueryModel {
            layers: Parts::new(&root.layers, root.layers_bytes),
            tok: Parts::new(&root.tokenizer, root.tokenizer_bytes),
            root,
            model: None,
            tokenizer: None,
            raw_map: None,
            map: None,
            rows: HashMap::new(),
        })
    }

    /// The root this model reads.
    pub fn root(&self) -> &QueryModelRoot {
        &self.root
    }

    /// The pages needed before any query (layers, tokenizer, row map) not added yet.
    pub fn missing_base(&self) -> Vec<String> {
        let mut out: Vec<String> = self.layers.missing().cloned().collect();
        out.extend(self.tok.missing().cloned());
        if self.map.is_none() && self.raw_map.is_none() {
            out.push(self.root.row_map.clone());
        }
        out
    }

    /// Once the row map (and, for [`RowOrder::Script`], the tokenizer) is in: the map that
    /// gives slots. Errors: the tokenizer's pieces are not one per id.
    fn finish_map(&mut self, name: &str) -> Result<(), ModelError> {
        if self.map.is_some() {
            return Ok(());
        }
        let grouped = match (self.root.row_order, &self.tokenizer) {
            (RowOrder::Id, _) => self.raw_map.take(),
            (RowOrder::Script, Some(t)) => match self.raw_map.take() {
                Some(m) => Some(
                    m.group_tail(&t.script_classes())
                        .map_err(|e| bad(name, e.to_string()))?,
                ),
                None => None,
            },
            (RowOrder::Script, None) => None,
        };
        self.map = grouped;
        Ok(())
    }

    /// True once the layers, the tokenizer and the row map are in.
    pub fn is_ready(&self) -> bool {
        self.model.is_some() && self.tokenizer.is_some() && self.map.is_some()
    }

    /// Adds page `name` given as its 48-byte header + **raw** body (what the browser has
    /// after inflating): verified ([`page::verify_raw`]: kind, length, SHA-256, name), then
    /// kept as a part of the layers or tokenizer (parsed when the last part is in), the row
    /// map, or a row page. Adding a page twice is a no-op. Errors: [`ModelError::Format`]
    /// (failed verification), [`ModelError::Page`] (not a page of this query model, a size
    /// that disagrees with the root), [`ModelError::Pack`] (layers or tokenizer malformed).
    pub fn add_page(&mut self, name: &str, bytes: &[u8]) -> Result<(), ModelError> {
        let body = page::verify_raw(name, bytes)?;
        let kind = page::header(name, bytes)?.kind;
        match kind {
            Kind::ModelLayers => {
                let i = self.index_of(&self.root.layers, name)?;
                if let Some(file) = self.layers.add(i, name, body)? {
                    let m = QueryModel::from_bytes(&file, "layers (m- pages)")?;
                    let c = m.config();
                    if c.vocab != self.root.vocab
                        || Q4Matrix::row_bytes(c.hidden) != self.root.row_bytes
                    {
                        return Err(bad(
                            name,
                            format!(
                                "layers for {} tokens of width {}, the entry says {} rows of {} bytes",
                                c.vocab, c.hidden, self.root.vocab, self.root.row_bytes
                            ),
                        ));
                    }
                    self.model = Some(m);
                }
            }
            Kind::ModelTokenizer => {
                let i = self.index_of(&self.root.tokenizer, name)?;
                if let Some(file) = self.tok.add(i, name, body)? {
                    let t = Tokenizer::from_bytes(&file, "tokenizer (k- pages)")?;
                    if t.vocab_size() != self.root.vocab {
                        return Err(bad(
                            name,
                            format!(
                                "{} pieces, the entry says {} rows",
                                t.vocab_size(),
                                self.root.vocab
                            ),
                        ));
                    }
                    self.tokenizer = Some(t);
                    self.finish_map(name)?;
                }
            }
            Kind::RowMap => {
                if name != self.root.row_map {
                    return Err(bad(name, "not this bundle's row map"));
                }
                if self.map.is_none() && self.raw_map.is_none() {
                    self.raw_map = Some(RowMap::decode(&body, self.root.vocab, name)?);
                    self.finish_map(name)?;
                }
            }
            Kind::Rows => {
                let n = self.row_page_number(name)?;
                let per = self.root.rows.per_page;
                let want = per.min(self.root.vocab - n * per) * self.root.row_bytes;
                if body.len() != want {
                    return Err(bad(
                        name,
                        format!("{} bytes of rows, expected {want}", body.len()),
                    ));
                }
                self.rows.entry(n).or_insert(body);
            }
            _ => return Err(bad(name, "not a query-model page")),
        }
        Ok(())
    }

    fn index_of(&self, names: &[String], name: &str) -> Result<usize, ModelError> {
        names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| bad(name, "not a page of this bundle's query model"))
    }

    fn row_page_number(&self, name: &str) -> Result<usize, ModelError> {
        let n = name
            .rsplit('-')
            .next()
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|&n| n < self.root.rows.pages && self.root.row_page(n) == name)
            .ok_or_else(|| bad(name, "not a row page of this bundle's query model"))?;
        Ok(n)
    }

    fn not_ready(&self) -> ModelError {
        ModelError::Page {
            page: self
                .missing_base()
                .first()
                .map_or_else(String::new, |n| format!("p/{n}")),
            msg: "the query model's layer, tokenizer and row-map pages are not all added yet"
                .into(),
        }
    }

    /// Token ids of `query: ` + `text` ([`Tokenizer::query_ids`]). Errors: the tokenizer
    /// pages are not all added ([`ModelError::Page`]).
    pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, ModelError> {
        Ok(self
            .tokenizer
            .as_ref()
            .ok_or_else(|| self.not_ready())?
            .query_ids(text))
    }

    /// Names of the row pages `ids` need that are not added yet (each once, in slot order).
    /// Ids outside the model are left to [`Self::embed_ids`] to refuse. Errors: the row
    /// map is not added yet.
    pub fn missing_rows(&self, ids: &[u32]) -> Result<Vec<String>, ModelError> {
        let map = self.map.as_ref().ok_or_else(|| self.not_ready())?;
        let mut pages: Vec<usize> = ids
            .iter()
            .filter_map(|&id| map.slot(id))
            .map(|s| s / self.root.rows.per_page)
            .filter(|p| !self.rows.contains_key(p))
            .collect();
        pages.sort_unstable();
        pages.dedup();
        Ok(pages.into_iter().map(|n| self.root.row_page(n)).collect())
    }

    /// The vector of `ids` ([`QueryModel::embed_ids`]): 384 f32s, unit length. Errors:
    /// not ready, [`ModelError::TokenId`] for an id whose row page is not added (or outside
    /// the model), [`ModelError::Length`].
    pub fn embed_ids(&self, ids: &[u32]) -> Result<Vec<f32>, ModelError> {
        let (Some(model), Some(map)) = (&self.model, &self.map) else {
            return Err(self.not_ready());
        };
        model.embed_ids(ids, &Rows { m: self, map })
    }

    /// Row pages added so far.
    pub fn row_pages(&self) -> usize {
        self.rows.len()
    }

    /// Natively: reads pages `names` from `bundle/p/` (as stored), inflates and verifies
    /// them ([`page::decode_stored`]) and adds them ([`Self::add_page`], which verifies
    /// again, as in the browser). Returns the stored bytes read. Errors name the file.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_from_dir(
        &mut self,
        bundle: &std::path::Path,
        names: &[String],
    ) -> Result<u64, ModelError> {
        let mut read = 0;
        for name in names {
            if !jikji_format::bundle::valid_page_name(name) {
                return Err(bad(name, "not a page name"));
            }
            let p = bundle.join(jikji_format::paged::PAGES_DIR).join(name);
            let stored = std::fs::read(&p).map_err(|e| ModelError::io(&p, e))?;
            read += stored.len() as u64;
            let raw = page::decode_stored(name, &stored)?;
            let mut joined = Vec::with_capacity(page::HEADER_LEN + raw.len());
            joined.extend_from_slice(&stored[..page::HEADER_LEN]);
            joined.extend_from_slice(&raw);
            self.add_page(name, &joined)?;
        }
        Ok(read)
    }

    /// Natively: embeds `query` reading every page it lacks from `bundle/p/`, as the
    /// browser's worker does over the network (base pages first, then the query's rows).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn embed_query_from_dir(
        &mut self,
        bundle: &std::path::Path,
        query: &str,
    ) -> Result<Vec<f32>, ModelError> {
        let base = self.missing_base();
        self.load_from_dir(bundle, &base)?;
        let ids = self.token_ids(query)?;
        let need = self.missing_rows(&ids)?;
        self.load_from_dir(bundle, &need)?;
        self.embed_ids(&ids)
    }
}

/// Natively, at build time: the query model's pages for a bundle whose chunk texts are
/// `texts` (as embedded, without the `passage: ` prefix, which is added), from the pack in
/// folder `dir` (every file read is checked against `pack.json`'s length and SHA-256), with
/// the row layout of today's writer ([`RowLayout::default`]: 8 rows a page, the tail by
/// script). Each encoded page goes to `sink` as soon as it is made; returns the entry's root.
/// The row order counts every chunk's tokens on `threads` threads. Errors: the pack's
/// (a file missing, malformed or not the one `pack.json` lists: [`ModelError::PackInfo`],
/// [`ModelError::Pack`], [`ModelError::Io`]), or what `sink` returns ([`ModelError::Format`]).
#[cfg(not(target_arch = "wasm32"))]
pub fn write_pages(
    dir: &std::path::Path,
    texts: &[&str],
    threads: usize,
    sink: &mut dyn FnMut(page::Encoded) -> jikji_format::Result<()>,
) -> Result<QueryModelRoot, ModelError> {
    write_pages_with(dir, texts, threads, RowLayout::default(), sink)
}

/// How the row pages are laid out: rows per page and the order of the row map's tail.
/// Readers take both from the root; [`RowLayout::default`] is what `jikji build` writes
/// (other layouts: bundles written before, and the tests that read them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowLayout {
    /// Rows per `r-` page (1 ..= `MAX_ROWS_PER_PAGE`).
    pub per_page: usize,
    /// Order of the ids the corpus lacks.
    pub order: RowOrder,
}

impl Default for RowLayout {
    fn default() -> Self {
        RowLayout {
            per_page: ROWS_PER_PAGE,
            order: RowOrder::Script,
        }
    }
}

/// [`write_pages`] with row layout `layout`. Errors: as [`write_pages`], and
/// [`ModelError::Format`] for `per_page` outside 1 ..= `MAX_ROWS_PER_PAGE`.
#[cfg(not(target_arch = "wasm32"))]
pub fn write_pages_with(
    dir: &std::path::Path,
    texts: &[&str],
    threads: usize,
    layout: RowLayout,
    sink: &mut dyn FnMut(page::Encoded) -> jikji_format::Result<()>,
) -> Result<QueryModelRoot, ModelError> {
    write_pages_into(
        dir,
        texts,
        threads,
        layout,
        &mut jikji_format::paged::FnSink(sink),
    )
}

/// The generation of the row pages (`r-<gen>-<n>`): the first 8 bytes (hex) of SHA-256
/// over `jikji-rows 1\n`, the pack's hash (hex, [`crate::pack::pack_hash`]), `\n`, rows per
/// page and bytes per row (u64 LE each), and the row map page's body. A row page's body is
/// a function of exactly these (the rows of the pack's `rows.bin` in the map's slot order),
/// so pages with other content get another generation, as with every numbered kind, but
/// the generation is known without making (or hashing) the 54 MB of rows: an update whose
/// row map did not change names them all at once.
pub fn rows_gen(pack_sha256: &str, per_page: usize, row_bytes: usize, row_map: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    h.update(b"jikji-rows 1\n");
    h.update(pack_sha256.as_bytes());
    h.update(b"\n");
    h.update((per_page as u64).to_le_bytes());
    h.update((row_bytes as u64).to_le_bytes());
    h.update(row_map);
    h.finalize()[..8]
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// [`write_pages_with`] over a [`jikji_format::paged::PageSink`], taking over from the
/// previous bundle (the sink's [`PageSink::previous_root`](jikji_format::paged::PageSink))
/// every page it can prove unchanged, **without reading the pack file it comes from**:
/// - layer (`m`) and tokenizer (`k`) pages when the previous bundle carries the same pack
///   (equal `pack_sha256`, a digest of `pack.json`'s file digests): the same names, reused
///   by the sink; `layers.bin` / `tokenizer.bin` are read only for a page it cannot reuse;
/// - the row map (`u`) page when its content id is the previous one's;
/// - row page `n` when the previous bundle's row page `n` held the same token ids (its
///   row map, read and verified, in the previous layout: same pack, rows per page and row
///   size): same body, same number, so the same bytes under the new generation's name
///   ([`rows_gen`]); `rows.bin` is read only if some row page must be made.
///
/// The token counts of the row order are computed from `texts` every time (the
/// tokenizer's `tokenizer.bin` is read for that). The root and every page's bytes are what
/// a write without a previous bundle gives.
#[cfg(not(target_arch = "wasm32"))]
pub fn write_pages_into(
    dir: &std::path::Path,
    texts: &[&str],
    threads: usize,
    layout: RowLayout,
    sink: &mut dyn jikji_format::paged::PageSink,
) -> Result<QueryModelRoot, ModelError> {
    write_pages_keeping(dir, texts, threads, layout, RowMapChoice::Count, sink)
}

/// Where [`write_pages_keeping`] takes the row map (`u-` page) from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowMapChoice {
    /// Count the tokens of every chunk text and order the corpus's ids by count (what a full
    /// build does).
    #[default]
    Count,
    /// Keep the previous bundle's row map, byte for byte, when it was made from the same
    /// pack in the same layout (rows per page, row order, row size, vocabulary, and the row
    /// pages' generation is [`rows_gen`] of it): every row page then has the previous
    /// bundle's name and bytes, and no chunk text is tokenized. Ids the corpus gained are
    /// in the map's tail already (the map lists every id), so every query embeds exactly
    /// as with a counted map; only the layout (which ids share a page) is the old corpus's.
    /// When the previous bundle has no such map, or its `u-` page does not verify, the
    /// tokens are counted as with [`RowMapChoice::Count`]. `jikji update` asks for it when
    /// the edit is small (`jikji_builder::update`, "row map").
    KeepPrevious,
}

/// [`write_pages_into`] with the row map taken as `choice` says. Returns the entry's root;
/// with [`RowMapChoice::KeepPrevious`] honoured, the root's `row_map` and `rows` are the
/// previous root's. Errors: as [`write_pages_into`].
#[cfg(not(target_arch = "wasm32"))]
pub fn write_pages_keeping(
    dir: &std::path::Path,
    texts: &[&str],
    threads: usize,
    layout: RowLayout,
    choice: RowMapChoice,
    sink: &mut dyn jikji_format::paged::PageSink,
) -> Result<QueryModelRoot, ModelError> {
    use jikji_format::paged::qmodel::{LAYER_PAGES, TOKENIZER_PART};

    let info = crate::QueryPack::read_info(dir)?;
    let pack_sha256 = crate::pack::pack_hash(&info);
    let read = |name: &str| -> Result<Vec<u8>, ModelError> {
        let p = dir.join(name);
        let b = std::fs::read(&p).map_err(|e| ModelError::io(&p, e))?;
        let want = info.files.get(name);
        if want.map(|f| (f.bytes, f.sha256.as_str()))
            != Some((b.len() as u64, crate::pack::sha256_hex(&b).as_str()))
        {
            return Err(ModelError::PackInfo {
                file: p.display().to_string(),
                msg: format!(
                    "{} bytes, sha256 {}: not the file {} lists (a file of another pack?)",
                    b.len(),
                    crate::pack::sha256_hex(&b),
                    dir.join(crate::pack::INFO_FILE).display()
                ),
            });
        }
        Ok(b)
    };
    let prev: Option<QueryModelRoot> = sink
        .previous_root()
        .and_then(|r| r.query_model.clone())
        .filter(|q| q.pack_sha256 == pack_sha256);

    // A file's content-named parts: the previous bundle's pages if every one is reused,
    // else the file read and each part reused or made. Also their stored bytes (header +
    // stored body: what a browser downloads), `None` when every page was reused from a
    // bundle that did not record them.
    let file_pages = |kind: Kind,
                      file: &str,
                      cut: &dyn Fn(&[u8]) -> Vec<Vec<u8>>,
                      known: Option<(&[String], u64, Option<u64>)>,
                      sink: &mut dyn jikji_format::paged::PageSink|
     -> Result<(Vec<String>, u64, Option<u64>), ModelError> {
        if let Some((names, bytes, stored)) = known {
            let mut all = true;
            for n in names {
                all &= sink.reuse(n, n)?;
                if !all {
                    break;
                }
            }
            if all {
                return Ok((names.to_vec(), bytes, stored));
            }
        }
        let b = read(file)?;
        let mut names = Vec::new();
        let mut stored = 0u64;
        for part in cut(&b) {
            // Encoded even when reused: the stored size is the same bytes (encoding is
            // deterministic), and this path runs only when the pack changed.
            let e = page::encode(kind, &part);
            stored += e.bytes.len() as u64;
            if !sink.reuse(&e.name, &e.name)? {
                names.push(e.name.clone());
                sink.put(e)?;
            } else {
                names.push(e.name);
            }
        }
        Ok((names, b.len() as u64, Some(stored)))
    };
    let (layers, layers_bytes, layers_stored) = file_pages(
        Kind::ModelLayers,
        crate::pack::LAYERS_FILE,
        &|b| {
            let per = b.len().div_ceil(LAYER_PAGES).max(1);
            b.chunks(per).map(<[u8]>::to_vec).collect()
        },
        prev.as_ref()
            .map(|q| (q.layers.as_slice(), q.layers_bytes, q.layers_stored)),
        sink,
    )?;
    let (tokenizer_pages, tokenizer_bytes, tokenizer_stored) = file_pages(
        Kind::ModelTokenizer,
        crate::tokenizer::TOKENIZER_FILE,
        &|b| b.chunks(TOKENIZER_PART).map(<[u8]>::to_vec).collect(),
        prev.as_ref().map(|q| {
            (
                q.tokenizer.as_slice(),
                q.tokenizer_bytes,
                q.tokenizer_stored,
            )
        }),
        sink,
    )?;
    let tp = dir.join(crate::tokenizer::TOKENIZER_FILE);
    let load_tokenizer = || -> Result<Tokenizer, ModelError> {
        Tokenizer::from_bytes(
            &read(crate::tokenizer::TOKENIZER_FILE)?,
            &tp.display().to_string(),
        )
    };
    let load_rows = || -> Result<crate::RowTable, ModelError> {
        let rp = dir.join(crate::pack::ROWS_FILE);
        let b = read(crate::pack::ROWS_FILE)?;
        let hidden = b.get(12..16).map_or(0, |h| {
            u32::from_le_bytes(h.try_into().expect("4 bytes")) as usize
        });
        crate::RowTable::from_bytes(b, hidden, &rp.display().to_string())
    };

    // The previous row map, kept: its pages by their names, the rows file read only for a
    // row page that cannot be linked.
    if choice == RowMapChoice::KeepPrevious {
        if let Some((q, body)) = prev
            .as_ref()
            .filter(|q| q.rows.per_page == layout.per_page && q.row_order == layout.order)
            .and_then(|q| {
                let body = sink.previous_body(&q.row_map)?;
                let named = format!(
                    "{}-{}",
                    Kind::RowMap.letter() as char,
                    page::content_id(&body)
                );
                (named == q.row_map
                    && rows_gen(&pack_sha256, q.rows.per_page, q.row_bytes, &body) == q.rows.gen
                    && q.rows.pages == q.vocab.div_ceil(q.rows.per_page))
                .then_some((q, body))
            })
        {
            if !sink.reuse(&q.row_map, &q.row_map)? {
                sink.put(page::encode(Kind::RowMap, &body))?;
            }
            let mut made: Option<(Vec<u32>, crate::RowTable)> = None;
            let per = q.rows.per_page;
            for n in 0..q.rows.pages {
                let name = q.row_page(n);
                if sink.reuse(&name, &name)? {
                    continue;
                }
                if made.is_none() {
                    let tokenizer = load_tokenizer()?;
                    if tokenizer.vocab_size() != q.vocab {
                        return Err(ModelError::PackInfo {
                            file: tp.display().to_string(),
                            msg: format!(
                                "{} token ids, the bundle's row map {} has {}",
                                tokenizer.vocab_size(),
                                q.row_map,
                                q.vocab
                            ),
                        });
                    }
                    let m = RowMap::decode(&body, q.vocab, &q.row_map)?;
                    let m = match q.row_order {
                        RowOrder::Script => m.group_tail(&tokenizer.script_classes())?,
                        RowOrder::Id => m,
                    };
                    let table = load_rows()?;
                    if table.row_bytes() != q.row_bytes {
                        return Err(ModelError::PackInfo {
                            file: dir.join(crate::pack::ROWS_FILE).display().to_string(),
                            msg: format!(
                                "{}-byte rows, the bundle's row pages hold {}-byte rows",
                                table.row_bytes(),
                                q.row_bytes
                            ),
                        });
                    }
                    made = Some((m.ids_in_slot_order(), table));
                }
                let (order, table) = made.as_ref().expect("made");
                let ids = &order[n * per..((n + 1) * per).min(order.len())];
                let b = row_page_body(table, ids, q.row_bytes)?;
                sink.put(page::encode_numbered(Kind::Rows, &q.rows.gen, n as u32, &b))?;
            }
            return Ok(QueryModelRoot {
                model_id: info.model_id.clone(),
                model_sha256: info.model_sha256.clone(),
                pack_sha256,
                layers,
                layers_bytes,
                tokenizer: tokenizer_pages,
                tokenizer_bytes,
                layers_stored,
                tokenizer_stored,
                row_map: q.row_map.clone(),
                rows: q.rows.clone(),
                row_order: q.row_order,
                vocab: q.vocab,
                row_bytes: q.row_bytes,
            });
        }
    }
    let tokenizer = load_tokenizer()?;

    // Row order: an empty query's ids, then the corpus's ids by descending count.
    let vocab = tokenizer.vocab_size();
    let threads = threads.clamp(1, 64);
    let per_thread = texts.len().div_ceil(threads).max(1);
    let counts: Vec<u64> = std::thread::scope(|s| {
        let handles: Vec<_> = texts
            .chunks(per_thread)
            .map(|part| {
                let t = &tokenizer;
                s.spawn(move || {
                    let mut c = vec![0u64; vocab];
                    for text in part {
                        for id in t.encode(&format!("passage: {text}")) {
                            if let Some(x) = c.get_mut(id as usize) {
                                *x += 1;
                            }
                        }
                    }
                    c
                })
            })
            .collect();
        let mut total = vec![0u64; vocab];
        for h in handles {
            for (a, b) in total
                .iter_mut()
                .zip(h.join().expect("token counting thread"))
            {
                *a += b;
            }
        }
        total
    });
    let mut hot: Vec<u32> = Vec::new();
    for id in tokenizer.query_ids("") {
        if (id as usize) < vocab && !hot.contains(&id) {
            hot.push(id);
        }
    }
    let mut by_count: Vec<u32> = (0..vocab as u32)
        .filter(|&id| counts[id as usize] > 0 && !hot.contains(&id))
        .collect();
    by_count.sort_by(|&a, &b| counts[b as usize].cmp(&counts[a as usize]).then(a.cmp(&b)));
    hot.extend(by_count);
    let per = layout.per_page;
    if !(1..=jikji_format::paged::qmodel::MAX_ROWS_PER_PAGE).contains(&per) {
        return Err(jikji_format::FormatError::InvalidInput(format!(
            "{per} rows per query-model page (1 ..= {})",
            jikji_format::paged::qmodel::MAX_ROWS_PER_PAGE
        ))
        .into());
    }
    let classes = match layout.order {
        RowOrder::Id => None,
        RowOrder::Script => Some(tokenizer.script_classes()),
    };
    let in_layout = |m: RowMap, order: RowOrder| -> Result<RowMap, ModelError> {
        Ok(match (order, &classes) {
            (RowOrder::Script, Some(c)) => m.group_tail(c)?,
            (RowOrder::Script, None) => m.group_tail(&tokenizer.script_classes())?,
            (RowOrder::Id, _) => m,
        })
    };
    let map = in_layout(RowMap::new(hot, vocab)?, layout.order)?;
    let map_body = map.encode();
    let row_map = format!(
        "{}-{}",
        Kind::RowMap.letter() as char,
        page::content_id(&map_body)
    );
    if !sink.reuse(&row_map, &row_map)? {
        sink.put(page::encode(Kind::RowMap, &map_body))?;
    }

    let order = map.ids_in_slot_order();
    // Rows per page and bytes per row: the previous root's when it has the same pack (the
    // rows file is then not read unless a page must be made).
    let mut rows: Option<crate::RowTable> = None;
    let rb = match prev.as_ref().filter(|q| q.vocab == vocab) {
        Some(q) => q.row_bytes,
        None => {
            let t = load_rows()?;
            let rb = t.row_bytes();
            rows = Some(t);
            rb
        }
    };
    // The previous bundle's slot order, when its row pages are laid out as these.
    let prev_order: Option<Vec<u32>> = prev
        .as_ref()
        .filter(|q| q.rows.per_page == per && q.row_bytes == rb && q.vocab == vocab)
        .and_then(|q| {
            if q.row_map == row_map && q.row_order == layout.order {
                return Some(order.clone());
            }
            let body = sink.previous_body(&q.row_map)?;
            let m = RowMap::decode(&body, vocab, &q.row_map).ok()?;
            Some(in_layout(m, q.row_order).ok()?.ids_in_slot_order())
        });
    let gen = rows_gen(&pack_sha256, per, rb, &map_body);
    let pages = order.len().div_ceil(per);
    for n in 0..pages {
        let ids = &order[n * per..((n + 1) * per).min(order.len())];
        let name = page::numbered_name(Kind::Rows, &gen, n as u32);
        if let (Some(q), Some(po)) = (&prev, &prev_order) {
            if po.get(n * per..n * per + ids.len()) == Some(ids)
                && sink.reuse(&name, &q.row_page(n))?
            {
                continue;
            }
        }
        if rows.is_none() {
            rows = Some(load_rows()?);
        }
        let table = rows.as_ref().expect("loaded");
        let b = row_page_body(table, ids, rb)?;
        sink.put(page::encode_numbered(Kind::Rows, &gen, n as u32, &b))?;
    }
    Ok(QueryModelRoot {
        model_id: info.model_id.clone(),
        model_sha256: info.model_sha256.clone(),
        pack_sha256,
        layers,
        layers_bytes,
        tokenizer: tokenizer_pages,
        tokenizer_bytes,
        layers_stored,
        tokenizer_stored,
        row_map,
        rows: jikji_format::paged::Numbered {
            gen,
            per_page: per,
            pages,
            ..Default::default()
        },
        row_order: layout.order,
        vocab,
        row_bytes: rb,
    })
}

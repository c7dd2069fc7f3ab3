//! Term dictionary blocks (`d-…`), postings pages (`o-…`) and the typo dictionary (`t-…`)
//! of a paged bundle: writer and reader.
//!
//! Terms are sorted by their UTF-8 bytes and cut into blocks of about [`BLOCK_TARGET`] raw
//! bytes; the entry file lists each block's first term and name, so one lookup costs one
//! block (tantivy's sstable dictionary: sorted front-coded blocks behind a small index).
//!
//! Block body (varints are unsigned LEB128):
//! ```text
//! varint n_terms
//! varint first_ref, varint n_refs      the postings pages this block's long lists use:
//!                                      `o-<gen>-<first_ref>` and the n_refs − 1 after it
//! n_terms × entry:
//!   varint keep, varint add, add bytes  front coding against the previous term of the block
//!   varint df
//!   varint (len << 1 | long)
//!   long == 0: len bytes of postings inline
//!   long == 1: varint ref (index into the refs), varint offset in that page; the list's
//!              len bytes continue over the following refs
//! ```
//! A postings list is `df × (varint doc_delta, varint tf, varint doc_len)` in ascending doc
//! order (the first delta is the doc id itself): the chunk's length in terms travels with
//! each posting, so BM25 needs no per-chunk length array. Lists up to [`INLINE_MAX`] bytes
//! sit in their block; longer ones go to postings pages in term order, each list starting a
//! page of its own and cut into pages of [`POSTINGS_PAGE`] raw bytes (its last page
//! shorter): fetching a list fetches no byte of another list (`docs/design/impact-postings.md`:
//! −24 % of the median SciFact query's postings bytes against lists cut as one stream).
//!
//! The typo dictionary holds every term without Han, Hangul or Kana characters → df: the
//! terms a Latin query word can be within a small Levenshtein distance of (a CJK term
//! shares no character with it), so typo expansion over it gives the same terms as over
//! the whole dictionary. It is cut by term length in chars (page `t-<gen>-<b>` holds the
//! terms of `b + 1` chars, the last page all longer ones, [`TYPO_BUCKETS`]), each page an
//! [`fst::Map`]: a word of `L` chars within distance `d` reads only the pages of lengths
//! `L − d ..= L + d`.

use std::sync::Arc;

use super::cache::PageCache;
use super::page::{Encoded, Kind};
use super::Numbered;
use crate::analyzer::{script_of, Script};
use crate::codec::{put_varint, Reader};
use crate::error::{FormatError, Result};

/// Target raw size of a dictionary block.
pub const BLOCK_TARGET: usize = 2048;
/// Longest postings list stored inline in its block.
pub const INLINE_MAX: usize = 1024;
/// Raw size of a postings page.
pub const POSTINGS_PAGE: usize = 4096;
/// Typo dictionary pages: terms of 1 … `TYPO_BUCKETS − 1` chars, then all longer terms.
pub const TYPO_BUCKETS: usize = 24;
/// Most dictionary blocks whose first keys the entry file lists itself (`pages.dict_keys`);
/// a dictionary of more blocks is indexed by dictionary index pages instead
/// (`pages.dict_index`), so the entry does not grow with the dictionary. 2,048 keeps the
/// books (1,535 blocks) and SciFact bundles as they were: one round less for them.
pub const INLINE_KEYS_MAX: usize = 2048;
/// Target raw size of a dictionary index page (`e-…`).
pub const INDEX_PAGE_TARGET: usize = 4096;

fn typo_bucket(chars: usize) -> usize {
    chars.clamp(1, TYPO_BUCKETS) - 1
}

/// Matches looked at by prefix and typo expansion (as the whole-file index does).
const SCAN: usize = 4096;

/// What the writer produces: pages and the block index for the entry.
pub struct Written {
    /// Dictionary blocks, postings pages and the typo page.
    pub pages: Vec<Encoded>,
    /// The first term of each block, in term order.
    pub keys: Vec<String>,
    /// The dictionary blocks (`d-<gen>-<n>`).
    pub blocks: Numbered,
    /// The postings pages (`o-<gen>-<n>`; `per_page` = [`POSTINGS_PAGE`] bytes).
    pub postings: Numbered,
    /// The typo dictionary pages (`t-<gen>-<b>`, [`TYPO_BUCKETS`] of them), if any term
    /// qualifies.
    pub typo: Option<Numbered>,
    /// The dictionary index pages, when there are more than [`INLINE_KEYS_MAX`] blocks
    /// (`keys` is then empty).
    pub index: Option<DictIndex>,
    /// The term buckets (`b-<gen>-<n>`, [`super::bucket`]), written with the index pages.
    pub buckets: Option<Numbered>,
    /// Every term's entry (term order) when `buckets` were written, for the expansion
    /// buckets; empty otherwise.
    pub entries: Vec<super::bucket::WriteEntry>,
}

/// The entry's `pages.dict_index`: dictionary index pages (`e-<gen>-<n>`) and the first
/// term of each (= the first term of its first block), in term order.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DictIndex {
    /// The first term of each index page.
    pub keys: Vec<String>,
    /// The index pages (`per_page` unused, 0).
    pub pages: Numbered,
}

impl crate::json::Record for DictIndex {
    const FIELDS: crate::json::Fields<DictIndex> = crate::json::json_fields!(DictIndex {
        "keys" Error keys,
        "pages" Error pages,
    });
    fn init() -> Self {
        DictIndex {
            keys: Vec::new(),
            pages: Numbered::default(),
        }
    }
}
crate::json::record_json!(DictIndex);

/// A long list's place in the postings stream, as a dictionary index page gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongRef {
    /// Document frequency.
    pub df: u32,
    /// Postings page number (`o-<gen>-<page>`).
    pub page: usize,
    /// Offset in that page.
    pub offset: usize,
    /// List length in bytes (continuing over the following pages).
    pub len: usize,
}

/// A decoded dictionary index page:
/// ```text
/// varint first_block, varint n_blocks
/// n_blocks × (varint keep, varint add, add bytes)      each block's first term, front-coded
/// varint n_long
/// n_long × (varint keep, varint add, add bytes,        the terms of those blocks whose lists
///           varint df, varint len,                     are in postings pages, front-coded
///           varint page, varint offset)                among themselves, with the list's place
/// ```
/// A term with a long list is resolved by its index page alone (one round less: index →
/// postings); any other term by its block (index → block, postings inline).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexPage {
    /// Number of the first block this page covers.
    pub first_block: usize,
    /// The first term of each covered block.
    pub keys: Vec<String>,
    /// The covered blocks' long-list terms, in term order.
    pub long: Vec<(String, LongRef)>,
}

/// Reads a front-coded term (`varint keep`, `varint add`, `add` bytes) after `prev`.
pub(super) fn front_term(r: &mut Reader<'_>, prev: &mut Vec<u8>) -> Result<String> {
    let keep = r.varint()? as usize;
    let add = r.varint()? as usize;
    if keep > prev.len() {
        return Err(r.corrupt("front coding keeps more than the previous term"));
    }
    prev.truncate(keep);
    prev.extend_from_slice(r.take(add)?);
    String::from_utf8(prev.clone()).map_err(|_| r.corrupt("term is not UTF-8"))
}

/// Writes `k` front-coded against `prev` (the inverse of [`front_term`]).
pub(super) fn put_front(out: &mut Vec<u8>, prev: &[u8], k: &[u8]) {
    let keep = prev.iter().zip(k).take_while(|(a, b)| a == b).count();
    put_varint(out, keep as u64);
    put_varint(out, (k.len() - keep) as u64);
    out.extend_from_slice(&k[keep..]);
}

/// Pages a long list of `len` bytes from `offset` in postings page `page` spans, if it
/// starts inside that page and ends within `limit` pages (counted from 0); `None` otherwise,
/// also when the numbers overflow (hostile bytes: checked arithmetic, no panic on wasm32).
pub(super) fn long_span(page: usize, offset: usize, len: usize, limit: usize) -> Option<usize> {
    if offset >= POSTINGS_PAGE {
        return None;
    }
    let n = offset.checked_add(len)?.div_ceil(POSTINGS_PAGE);
    (page.checked_add(n)? <= limit).then_some(n)
}

/// A postings list's place as a dictionary block or term bucket entry codes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RawPlace {
    /// Bytes `start..end` of the page body being read.
    Inline(usize, usize),
    /// `len` bytes from `offset` in postings page `page` (block-relative in a dictionary
    /// block, absolute in a term bucket), continuing over the following pages.
    Long {
        /// Page (see above).
        page: usize,
        /// Offset in that page (< [`POSTINGS_PAGE`]).
        offset: usize,
        /// Length in bytes.
        len: usize,
    },
}

/// Writes a place: `varint (len << 1 | long)`, then `len` inline bytes (long = 0) or
/// `varint page, varint offset` (long = 1).
pub(super) fn put_place(
    out: &mut Vec<u8>,
    inline: Option<&[u8]>,
    long: Option<(usize, usize, usize)>,
) {
    match (inline, long) {
        (Some(b), _) => {
            put_varint(out, (b.len() as u64) << 1);
            out.extend_from_slice(b);
        }
        (None, Some((page, offset, len))) => {
            put_varint(out, ((len as u64) << 1) | 1);
            put_varint(out, page as u64);
            put_varint(out, offset as u64);
        }
        (None, None) => put_varint(out, 0),
    }
}

/// Reads a place written by [`put_place`] whose long list must lie within `limit` postings
/// pages (`whose` names them in the error: "the block's", "the bundle's"). Errors:
/// DataCorruption naming the page, the byte offset and `term`.
pub(super) fn read_place(
    r: &mut Reader<'_>,
    term: &str,
    limit: usize,
    whose: &str,
) -> Result<RawPlace> {
    let lk = r.varint()?;
    let len = usize::try_from(lk >> 1).map_err(|_| r.corrupt("length overflow"))?;
    if lk & 1 == 0 {
        let start = r.pos();
        r.take(len)?;
        return Ok(RawPlace::Inline(start, start + len));
    }
    let page = usize::try_from(r.varint()?).map_err(|_| r.corrupt("page overflow"))?;
    let offset = usize::try_from(r.varint()?).map_err(|_| r.corrupt("offset overflow"))?;
    if long_span(page, offset, len, limit).is_none() {
        return Err(r.corrupt(format!(
            "term {}: postings range past {whose} {limit} pages",
            crate::quote::Quoted(term)
        )));
    }
    Ok(RawPlace::Long { page, offset, len })
}

impl IndexPage {
    /// The page body (layout above).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, self.first_block as u64);
        put_varint(&mut out, self.keys.len() as u64);
        let mut prev: &[u8] = b"";
        for k in &self.keys {
            put_front(&mut out, prev, k.as_bytes());
            prev = k.as_bytes();
        }
        put_varint(&mut out, self.long.len() as u64);
        let mut prev: &[u8] = b"";
        for (t, l) in &self.long {
            put_front(&mut out, prev, t.as_bytes());
            put_varint(&mut out, u64::from(l.df));
            put_varint(&mut out, l.len as u64);
            put_varint(&mut out, l.page as u64);
            put_varint(&mut out, l.offset as u64);
            prev = t.as_bytes();
        }
        out
    }

    /// Decodes index page `name` of a bundle with `blocks` dictionary blocks and `postings`
    /// postings pages; every count and reference is checked against them and the body
    /// (bytes from the network are hostile). Errors: DataCorruption naming `p/<name>`.
    pub fn parse(name: &str, body: &[u8], blocks: usize, postings: usize) -> Result<IndexPage> {
        let file = format!("p/{name}");
        let mut r = Reader::new(&file, body, 0);
        let first_block = r.varint()? as usize;
        let n = r.varint()? as usize;
        if n == 0 || n > body.len() || first_block.checked_add(n).is_none_or(|e| e > blocks) {
            return Err(r.corrupt(format!(
                "blocks {first_block}+{n} in a {}-byte page of a {blocks}-block dictionary",
                body.len()
            )));
        }
        let mut keys = Vec::with_capacity(n);
        let mut prev = Vec::new();
        for _ in 0..n {
            let k = front_term(&mut r, &mut prev)?;
            if keys
                .last()
                .is_some_and(|p: &String| p.as_str() >= k.as_str())
            {
                return Err(r.corrupt("block keys not in term order"));
            }
            keys.push(k);
        }
        let n_long = r.varint()? as usize;
        if n_long > body.len() {
            return Err(r.corrupt(format!("{n_long} long terms in a {}-byte page", body.len())));
        }
        let mut long = Vec::with_capacity(n_long);
        let mut prev = Vec::new();
        for _ in 0..n_long {
            let t = front_term(&mut r, &mut prev)?;
            let df = u32::try_from(r.varint()?).map_err(|_| r.corrupt("df over u32"))?;
            let len = usize::try_from(r.varint()?).map_err(|_| r.corrupt("length overflow"))?;
            let page = usize::try_from(r.varint()?).map_err(|_| r.corrupt("page overflow"))?;
            let offset = usize::try_from(r.varint()?).map_err(|_| r.corrupt("offset overflow"))?;
            if long_span(page, offset, len, postings).is_none() {
                return Err(r.corrupt(format!(
                    "term {}: postings range past the bundle's {postings} pages",
                    crate::quote::Quoted(&t)
                )));
            }
            if long
                .last()
                .is_some_and(|(p, _): &(String, LongRef)| p.as_str() >= t.as_str())
            {
                return Err(r.corrupt("long terms not in term order"));
            }
            long.push((
                t,
                LongRef {
                    df,
                    page,
                    offset,
                    len,
                },
            ));
        }
        Ok(IndexPage {
            first_block,
            keys,
            long,
        })
    }

    /// The long-list reference of `term`, if this page has one.
    pub fn long_of(&self, term: &str) -> Option<LongRef> {
        self.long
            .binary_search_by(|(t, _)| t.as_str().cmp(term))
            .ok()
            .map(|i| self.long[i].1)
    }

    /// The number of the block that would hold `term` (`None`: before this page's first key).
    pub fn block_of(&self, term: &str) -> Option<usize> {
        let i = self.keys.partition_point(|k| k.as_str() <= term);
        i.checked_sub(1).map(|i| self.first_block + i)
    }
}

fn encode_list(list: &[(u32, u32)], doc_lens: &[u32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(list.len() * 3);
    let mut prev = 0u32;
    for &(doc, tf) in list {
        put_varint(&mut out, u64::from(doc - prev));
        put_varint(&mut out, u64::from(tf));
        put_varint(&mut out, u64::from(doc_lens[doc as usize]));
        prev = doc;
    }
    out
}

/// True for terms typo expansion can reach (no Han, Hangul or Kana character).
pub fn typo_term(term: &str) -> bool {
    !term
        .chars()
        .any(|c| matches!(script_of(c), Script::Han | Script::Hangul | Script::Kana))
}

/// Lays out `terms` (sorted by bytes, each with its `(doc, tf)` postings in doc order) as
/// dictionary blocks and postings pages. `doc_lens[doc]` is each chunk's length in terms.
/// Errors only if the typo fst cannot be built. Holds every page: [`write_into`] streams
/// them.
pub fn write<'a>(
    terms: impl Iterator<Item = (&'a str, Vec<(u32, u32)>)>,
    doc_lens: &[u32],
) -> Result<Written> {
    let mut keys = Vec::new();
    let mut lists = Vec::new();
    for (k, l) in terms {
        keys.push(k);
        lists.push(l);
    }
    let mut pages = Vec::new();
    let mut w = write_into(
        &keys,
        &|i| Ok(lists[i].clone()),
        doc_lens,
        &mut super::FnSink(&mut |p| {
            pages.push(p);
            Ok(())
        }),
    )?;
    w.pages = pages;
    Ok(w)
}

/// [`write`] handing each page to `sink` as soon as it is made (unless `sink` reuses the
/// previous bundle's page of that name), so the postings pages are never all in memory:
/// `list(i)` gives the postings of `terms[i]` (sorted by bytes) and is called twice for a
/// list longer than [`INLINE_MAX`] encoded bytes (once to size it, once for its pages, a
/// group of pages at a time), once otherwise. Held at once: the inline lists, the block
/// bodies and one group of postings pages. The returned [`Written`] has no `pages`; pages
/// and roots are identical to [`write`]'s. Errors: what `list` or `sink` return, the typo
/// fst.
pub fn write_into(
    terms: &[&str],
    list: &dyn Fn(usize) -> Result<Vec<(u32, u32)>>,
    doc_lens: &[u32],
    sink: &mut dyn super::PageSink,
) -> Result<Written> {
    // Pass 1: encode every list; long ones are laid out on postings pages (each starts a
    // page) and dropped, to be encoded again page group by page group.
    struct Term<'a> {
        term: &'a str,
        df: u32,
        inline: Option<Vec<u8>>,
        long: Option<(usize, usize)>, // (page × POSTINGS_PAGE, len)
    }
    let mut post_pages = 0usize;
    // (first page, term index) of each long list, in page order.
    let mut longs: Vec<(usize, usize)> = Vec::new();
    let mut all: Vec<Term> = Vec::with_capacity(terms.len());
    let mut typo: Vec<fst::MapBuilder<Vec<u8>>> = (0..TYPO_BUCKETS)
        .map(|_| fst::MapBuilder::memory())
        .collect();
    let mut any_typo = false;
    for (i, &term) in terms.iter().enumerate() {
        let list = list(i)?;
        let bytes = encode_list(&list, doc_lens);
        let df = list.len() as u32;
        drop(list);
        if typo_term(term) {
            typo[typo_bucket(term.chars().count())]
                .insert(term.as_bytes(), u64::from(df))
                .map_err(|source| FormatError::Fst {
                    file: "p/t-…".into(),
                    source,
                })?;
            any_typo = true;
        }
        if bytes.len() <= INLINE_MAX {
            all.push(Term {
                term,
                df,
                inline: Some(bytes),
                long: None,
            });
        } else {
            // Page-aligned: the list starts a page; only its last page is short.
            let at = post_pages * POSTINGS_PAGE;
            longs.push((post_pages, i));
            post_pages += bytes.len().div_ceil(POSTINGS_PAGE);
            all.push(Term {
                term,
                df,
                inline: None,
                long: Some((at, bytes.len())),
            });
        }
    }
    // The postings pages: page `n` is a slice of one long list, encoded again when its
    // first page is asked for (pages are asked for in order).
    let last: std::cell::RefCell<(usize, Vec<u8>)> =
        std::cell::RefCell::new((usize::MAX, Vec::new()));
    let postings = super::grouped_to(
        Kind::Postings,
        post_pages,
        POSTINGS_PAGE,
        &|n| {
            let k = longs.partition_point(|&(first, _)| first <= n) - 1;
            let (first, i) = longs[k];
            let mut last = last.borrow_mut();
            if last.0 != i {
                *last = (i, encode_list(&list(i)?, doc_lens));
            }
            let from = (n - first) * POSTINGS_PAGE;
            let to = (from + POSTINGS_PAGE).min(last.1.len());
            Ok(last.1[from..to].to_vec())
        },
        sink,
    )?;
    drop((last, longs));
    // Pass 2: blocks.
    let mut keys = Vec::new();
    let mut block_bodies = Vec::new();
    // Per block: its long-list terms (for the index pages).
    let mut block_longs: Vec<Vec<(String, LongRef)>> = Vec::new();
    let mut i = 0;
    while i < all.len() {
        // Choose the block's terms: until the estimated size reaches the target.
        let start = i;
        let mut size = 0usize;
        while i < all.len() && (i == start || size < BLOCK_TARGET) {
            let t = &all[i];
            size += t.term.len() + 4 + t.inline.as_ref().map_or(8, Vec::len);
            i += 1;
        }
        let group = &all[start..i];
        let first_page = group
            .iter()
            .filter_map(|t| t.long)
            .map(|(at, _)| at / POSTINGS_PAGE)
            .min();
        let last_page = group
            .iter()
            .filter_map(|t| t.long)
            .map(|(at, len)| (at + len - 1) / POSTINGS_PAGE)
            .max();
        let mut body = Vec::with_capacity(size + 64);
        put_varint(&mut body, group.len() as u64);
        match (first_page, last_page) {
            (Some(a), Some(z)) => {
                put_varint(&mut body, a as u64);
                put_varint(&mut body, (z - a + 1) as u64);
            }
            _ => {
                put_varint(&mut body, 0);
                put_varint(&mut body, 0);
            }
        }
        let mut prev: &[u8] = b"";
        for t in group {
            let k = t.term.as_bytes();
            put_front(&mut body, prev, k);
            put_varint(&mut body, u64::from(t.df));
            debug_assert!(
                t.inline.is_some() || t.long.is_some(),
                "a term is inline or long"
            );
            put_place(
                &mut body,
                t.inline.as_deref(),
                t.long.map(|(at, len)| {
                    (
                        at / POSTINGS_PAGE - first_page.unwrap_or(0),
                        at % POSTINGS_PAGE,
                        len,
                    )
                }),
            );
            prev = k;
        }
        keys.push(group[0].term.to_string());
        block_bodies.push(body);
        block_longs.push(
            group
                .iter()
                .filter_map(|t| {
                    t.long.map(|(at, len)| {
                        (
                            t.term.to_string(),
                            LongRef {
                                df: t.df,
                                page: at / POSTINGS_PAGE,
                                offset: at % POSTINGS_PAGE,
                                len,
                            },
                        )
                    })
                })
                .collect(),
        );
    }
    let blocks = super::put_numbered(Kind::Dict, &block_bodies, 0, sink)?;
    drop(block_bodies);
    let index = if keys.len() > INLINE_KEYS_MAX {
        let (index, index_pages) = index_pages(std::mem::take(&mut keys), block_longs);
        put_all(index_pages, sink)?;
        Some(index)
    } else {
        None
    };
    // Term buckets, with the index pages: exact lookups with no index round.
    let mut entries = Vec::new();
    let buckets = if index.is_some() {
        entries = all
            .into_iter()
            .map(|t| super::bucket::WriteEntry {
                term: t.term.to_string(),
                df: t.df,
                long: t.long.map(|(at, len)| LongRef {
                    df: t.df,
                    page: at / POSTINGS_PAGE,
                    offset: at % POSTINGS_PAGE,
                    len,
                }),
                inline: t.inline,
            })
            .collect();
        let bodies = super::bucket::write_terms(&entries);
        let (root, bp) = super::grouped(Kind::TermBuckets, bodies, 0);
        put_all(bp, sink)?;
        Some(root)
    } else {
        None
    };
    let typo = if any_typo {
        let mut bodies = Vec::with_capacity(TYPO_BUCKETS);
        for b in typo {
            bodies.push(b.into_inner().map_err(|source| FormatError::Fst {
                file: "p/t-…".into(),
                source,
            })?);
        }
        let (root, tp) = super::grouped(Kind::Typo, bodies, 0);
        put_all(tp, sink)?;
        Some(root)
    } else {
        None
    };
    Ok(Written {
        pages: Vec::new(),
        keys,
        blocks,
        postings,
        typo,
        index,
        buckets,
        entries,
    })
}

/// Hands `pages` to `sink` in order (each unless `sink` reuses its name).
fn put_all(pages: Vec<Encoded>, sink: &mut dyn super::PageSink) -> Result<()> {
    for p in pages {
        if !sink.reuse(&p.name, &p.name)? {
            sink.put(p)?;
        }
    }
    Ok(())
}

/// Cuts the blocks (first `keys`, `longs` per block) into dictionary index pages of about
/// [`INDEX_PAGE_TARGET`] raw bytes (at least one block each; a block's long terms stay
/// with it). Returns the entry's `dict_index` and the encoded pages.
fn index_pages(keys: Vec<String>, longs: Vec<Vec<(String, LongRef)>>) -> (DictIndex, Vec<Encoded>) {
    let mut bodies = Vec::new();
    let mut firsts = Vec::new();
    let mut page = IndexPage {
        first_block: 0,
        keys: Vec::new(),
        long: Vec::new(),
    };
    let mut size = 0usize;
    for (b, (key, long)) in keys.into_iter().zip(longs).enumerate() {
        // Estimated bytes: a key and each long term ≈ its length + 2, plus ~9 for the ref.
        let add = key.len() + 2 + long.iter().map(|(t, _)| t.len() + 11).sum::<usize>();
        if !page.keys.is_empty() && size + add > INDEX_PAGE_TARGET {
            firsts.push(page.keys[0].clone());
            bodies.push(page.encode());
            page = IndexPage {
                first_block: b,
                keys: Vec::new(),
                long: Vec::new(),
            };
            size = 0;
        }
        size += add;
        page.keys.push(key);
        page.long.extend(long);
    }
    if !page.keys.is_empty() {
        firsts.push(page.keys[0].clone());
        bodies.push(page.encode());
    }
    let (root, pages) = super::grouped(Kind::DictIndex, bodies, 0);
    (
        DictIndex {
            keys: firsts,
            pages: root,
        },
        pages,
    )
}

/// Where a term's postings are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Loc {
    /// Byte range inside the block body.
    Inline(usize, usize),
    /// `len` bytes from `offset` in postings page `refs[first]`, continuing over the next refs.
    Long {
        /// Index into the block's refs.
        first: usize,
        /// Offset in that page.
        offset: usize,
        /// List length in bytes.
        len: usize,
    },
}

/// One decoded dictionary entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TermEntry {
    /// The term.
    pub term: String,
    /// Document frequency.
    pub df: u32,
    /// Where its postings are.
    pub loc: Loc,
}

/// A decoded dictionary block.
pub struct Block {
    name: String,
    body: Arc<Vec<u8>>,
    refs: Vec<String>,
    /// Entries in term order.
    pub entries: Vec<TermEntry>,
}

impl Block {
    /// Decodes block `name` (raw body) of a bundle whose postings pages are `postings`.
    /// Errors: DataCorruption naming `p/<name>`.
    pub fn parse(name: &str, body: Arc<Vec<u8>>, postings: &Numbered) -> Result<Block> {
        let file = format!("p/{name}");
        let mut r = Reader::new(&file, &body, 0);
        let n = r.varint()? as usize;
        // Every entry takes at least 4 bytes: a count the body cannot hold is corrupt.
        if n > body.len() {
            return Err(r.corrupt(format!("{n} terms in a {}-byte block", body.len())));
        }
        let first_ref = r.varint()? as usize;
        let n_refs = r.varint()? as usize;
        if first_ref
            .checked_add(n_refs)
            .is_none_or(|end| end > postings.pages)
        {
            return Err(r.corrupt(format!(
                "postings pages {first_ref}+{n_refs} past the bundle's {}",
                postings.pages
            )));
        }
        let refs = (first_ref..first_ref + n_refs)
            .map(|i| postings.name(Kind::Postings, i))
            .collect();
        let mut entries = Vec::with_capacity(n);
        let mut prev: Vec<u8> = Vec::new();
        for _ in 0..n {
            let term = front_term(&mut r, &mut prev)?;
            let df = u32::try_from(r.varint()?).map_err(|_| r.corrupt("df over u32"))?;
            let loc = match read_place(&mut r, &term, n_refs, "the block's")? {
                RawPlace::Inline(a, b) => Loc::Inline(a, b),
                RawPlace::Long { page, offset, len } => Loc::Long {
                    first: page,
                    offset,
                    len,
                },
            };
            entries.push(TermEntry { term, df, loc });
        }
        Ok(Block {
            name: name.to_string(),
            body,
            refs,
            entries,
        })
    }

    /// The entry of `term`, if the block has it.
    pub fn find(&self, term: &str) -> Option<&TermEntry> {
        self.entries
            .binary_search_by(|e| e.term.as_str().cmp(term))
            .ok()
            .map(|i| &self.entries[i])
    }

    /// The postings bytes of `e`; `None` if a postings page is not in `cache` (recorded as
    /// missing, every page of the list). Errors: DataCorruption naming the first postings
    /// page when the loaded pages end before the list does.
    pub fn list_bytes(&self, e: &TermEntry, cache: &PageCache) -> Result<Option<Vec<u8>>> {
        match e.loc {
            Loc::Inline(a, b) => Ok(Some(self.body[a..b].to_vec())),
            Loc::Long { first, offset, len } => {
                // `parse` checked the span (`long_span`): no overflow, refs in range.
                let n = (offset + len).div_ceil(POSTINGS_PAGE);
                let pages: Vec<_> = self.refs[first..first + n]
                    .iter()
                    .map(|name| cache.get(name))
                    .collect();
                let mut out = Vec::with_capacity(len + offset);
                for p in pages {
                    let Some(p) = p else { return Ok(None) };
                    out.extend_from_slice(&p);
                }
                if out.len() < offset + len {
                    return Err(FormatError::corrupt(
                        &format!("p/{} ({})", self.refs[first], crate::quote::Quoted(&e.term)),
                        0,
                        format!("list of {len} bytes past its pages' {}", out.len()),
                    ));
                }
                Ok(Some(out[offset..offset + len].to_vec()))
            }
        }
    }

    /// Names of the postings pages this block's long lists use.
    pub fn refs(&self) -> &[String] {
        &self.refs
    }

    /// The block's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// Decodes a postings list of `df` entries for `num_docs` chunks: `(doc, tf, doc_len)`.
/// Errors: DataCorruption naming `file`.
#[cfg_attr(jikji_nightly, optimize(speed))]
pub fn decode_list(
    file: &str,
    bytes: &[u8],
    df: u32,
    num_docs: usize,
) -> Result<Vec<(u32, u32, u32)>> {
    let mut r = Reader::new(file, bytes, 0);
    if df as usize > num_docs || df as usize > bytes.len() {
        return Err(r.corrupt(format!("document frequency {df} > {num_docs} documents")));
    }
    let mut out = Vec::with_capacity(df as usize);
    let mut doc = 0u64;
    for i in 0..df {
        let gap = r.varint()?;
        if i > 0 && gap == 0 {
            return Err(r.corrupt("postings not in ascending doc order"));
        }
        doc = doc
            .checked_add(gap)
            .filter(|&d| d < num_docs as u64)
            .ok_or_else(|| r.corrupt(format!("doc id {doc} + {gap} out of range")))?;
        let tf = u32::try_from(r.varint()?).map_err(|_| r.corrupt("tf over u32"))?;
        let dl = u32::try_from(r.varint()?).map_err(|_| r.corrupt("doc length over u32"))?;
        out.push((doc as u32, tf, dl));
    }
    Ok(out)
}

/// The read side over the cache: a paged term dictionary.
pub struct PagedLexicon {
    cache: Arc<PageCache>,
    keys: Vec<String>,
    index: Option<DictIndex>,
    blocks: Numbered,
    postings: Numbered,
    typo: Option<Numbered>,
    num_docs: usize,
    num_terms: usize,
    avg_doc_len: f32,
    buckets: Option<Numbered>,
    expand_buckets: Option<Numbered>,
    /// Entries of expansion candidates read from loaded expansion buckets, so that a
    /// candidate needs no bucket of its own (at most [`OVERLAY_MAX`]; cleared when full),
    /// sorted by term, one per term: a sorted list rather than a hash map (a map type was
    /// ~0.6 kB gzip of the browser's wasm: issue 12, ninth round of docs/design/wasm-size.md).
    overlay: std::sync::Mutex<Vec<super::bucket::Entry>>,
}

/// Most expansion candidates' entries a [`PagedLexicon`] keeps between lookups (each holds
/// its expansion page's body): reaching it clears them (a candidate then reads its own
/// bucket), so memory stays bounded.
pub const OVERLAY_MAX: usize = 4096;

/// Long lists whose postings pages a prefix scan asks for together with its dictionary
/// blocks (the most frequent long-list terms with the prefix, from the loaded index pages):
/// the engine keeps at most this many prefix matches (its `MAX_EXPANSIONS`), so the lists
/// it ranks are already there when the blocks arrive (one round less).
pub const PREFIX_PREFETCH: usize = 30;

/// Where a term's dictionary entry is, as far as the loaded pages say.
enum Place {
    /// Before the first term: absent.
    Before,
    /// Its dictionary index page (or term bucket) is not loaded.
    Unknown,
    /// In this block (if anywhere).
    Block(usize),
    /// A long list, resolved by its index page.
    Long(LongRef),
    /// Resolved by a term bucket (or an expansion bucket's candidate list).
    Entry(super::bucket::Entry),
    /// Its term bucket does not hold it: absent.
    Absent,
}

impl PagedLexicon {
    /// A lexicon over `cache` with the entry's block index (first term of each block, in
    /// term order), blocks, postings pages, typo page, chunk count, term count and mean
    /// chunk length.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        cache: Arc<PageCache>,
        keys: Vec<String>,
        blocks: Numbered,
        postings: Numbered,
        typo: Option<Numbered>,
        num_docs: usize,
        num_terms: usize,
        avg_doc_len: f32,
    ) -> Self {
        PagedLexicon {
            cache,
            keys,
            index: None,
            blocks,
            postings,
            typo,
            num_docs,
            num_terms,
            avg_doc_len,
            buckets: None,
            expand_buckets: None,
            overlay: Default::default(),
        }
    }

    /// This lexicon with the entry's term buckets and expansion buckets (`pages.buckets`,
    /// `pages.expand_buckets`, [`super::bucket`]): exact lookups read a term's bucket, not
    /// its index page and block.
    pub fn with_buckets(mut self, buckets: Option<Numbered>, expand: Option<Numbered>) -> Self {
        self.buckets = buckets;
        self.expand_buckets = expand;
        self
    }

    /// True if the bundle has expansion buckets ([`PagedLexicon::expansions`]).
    pub fn has_expansion_buckets(&self) -> bool {
        self.expand_buckets.is_some()
    }

    fn overlay(&self) -> std::sync::MutexGuard<'_, Vec<super::bucket::Entry>> {
        self.overlay.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the expansion candidates' entries of earlier lookups (the engine calls it
    /// before each pass of a query, so memory holds one query's candidates).
    pub fn begin_query(&self) {
        self.overlay().clear();
    }

    /// The candidates of the bigram `key` from its expansion bucket (`None`: the bundle has
    /// none; empty while the page is not loaded, the miss recorded, or when the key has no
    /// candidate). Their entries are kept, so their df and postings need no bucket of
    /// their own. Errors: DataCorruption naming the page.
    pub fn expansions(&self, key: &str) -> Result<Option<Vec<String>>> {
        let Some(y) = &self.expand_buckets else {
            return Ok(None);
        };
        let name = y.name(
            Kind::ExpansionBuckets,
            super::bucket::bucket_of(key, y.pages),
        );
        let Some(body) = self.cache.get(&name) else {
            return Ok(Some(Vec::new()));
        };
        let found = super::bucket::find_expansions(&name, &body, key, self.postings.pages)?
            .unwrap_or_default();
        let mut overlay = self.overlay();
        if overlay.len() + found.len() > OVERLAY_MAX {
            overlay.clear();
        }
        let terms = found.iter().map(|e| e.term.clone()).collect();
        overlay.extend(found);
        // A term of two keys' candidates has the same entry (its own df and postings) in
        // both: keep one.
        crate::sort::sort_by(&mut overlay, |a, b| a.term.cmp(&b.term));
        overlay.dedup_by(|a, b| a.term == b.term);
        Ok(Some(terms))
    }

    /// The term bucket page of `term`, if the bundle has buckets.
    fn bucket_name(&self, term: &str) -> Option<String> {
        let b = self.buckets.as_ref()?;
        Some(b.name(Kind::TermBuckets, super::bucket::bucket_of(term, b.pages)))
    }

    /// This lexicon with the entry's dictionary index pages (`pages.dict_index`) instead of
    /// the block keys in the entry (`keys` is then empty).
    pub fn with_index(mut self, index: Option<DictIndex>) -> Self {
        self.index = index;
        self
    }

    /// The block named `name`, parsed, if the cache holds it (else recorded as missing).
    pub fn block_named(&self, name: &str) -> Result<Option<Block>> {
        match self.cache.get(name) {
            Some(body) => Ok(Some(Block::parse(name, body, &self.postings)?)),
            None => Ok(None),
        }
    }

    /// Number of chunks.
    pub fn num_docs(&self) -> usize {
        self.num_docs
    }

    /// Number of distinct terms.
    pub fn num_terms(&self) -> usize {
        self.num_terms
    }

    /// Mean chunk length in terms.
    pub fn avg_doc_len(&self) -> f32 {
        self.avg_doc_len
    }

    /// The name of block `i`.
    pub fn block_name(&self, i: usize) -> String {
        self.blocks.name(Kind::Dict, i)
    }

    /// Number of blocks.
    pub fn num_blocks(&self) -> usize {
        self.blocks.pages
    }

    /// Index page `p` parsed, if loaded (`record`: a miss is recorded; else nothing is).
    fn index_page(&self, idx: &DictIndex, p: usize, record: bool) -> Result<Option<IndexPage>> {
        let name = idx.pages.name(Kind::DictIndex, p);
        if !record && !self.cache.contains(&name) {
            return Ok(None);
        }
        match self.cache.get(&name) {
            Some(body) => Ok(Some(IndexPage::parse(
                &name,
                &body,
                self.blocks.pages,
                self.postings.pages,
            )?)),
            None => Ok(None),
        }
    }

    fn place(&self, term: &str, record: bool) -> Result<Place> {
        {
            let overlay = self.overlay();
            if let Ok(i) = overlay.binary_search_by(|e| e.term.as_str().cmp(term)) {
                return Ok(Place::Entry(overlay[i].clone()));
            }
        }
        let Some(name) = self.bucket_name(term) else {
            return self.sorted_place(term, record);
        };
        if self.cache.contains(&name) {
            let Some(body) = self.cache.get(&name) else {
                return Ok(Place::Unknown);
            };
            return Ok(
                match super::bucket::find_term(&name, &body, term, self.postings.pages)? {
                    Some(e) => Place::Entry(e),
                    None => Place::Absent,
                },
            );
        }
        // The bucket is not loaded: the sorted dictionary answers if its pages are (a
        // prefix scan's matches, or pages of earlier queries); else ask for the bucket.
        match self.sorted_place(term, false)? {
            Place::Block(i) if !self.cache.contains(&self.block_name(i)) => {}
            Place::Unknown => {}
            p => return Ok(p),
        }
        if record {
            self.cache.get(&name);
        }
        Ok(Place::Unknown)
    }

    /// [`Self::place`] through the sorted dictionary (entry keys or index pages, blocks).
    fn sorted_place(&self, term: &str, record: bool) -> Result<Place> {
        let Some(idx) = &self.index else {
            let i = self.keys.partition_point(|first| first.as_str() <= term);
            return Ok(i.checked_sub(1).map_or(Place::Before, Place::Block));
        };
        let p = idx.keys.partition_point(|first| first.as_str() <= term);
        let Some(p) = p.checked_sub(1) else {
            return Ok(Place::Before);
        };
        let Some(page) = self.index_page(idx, p, record)? else {
            return Ok(Place::Unknown);
        };
        if let Some(l) = page.long_of(term) {
            return Ok(Place::Long(l));
        }
        Ok(page.block_of(term).map_or(Place::Before, Place::Block))
    }

    fn block(&self, i: usize) -> Result<Option<Block>> {
        self.block_named(&self.block_name(i))
    }

    /// True if this pass has read a page that was not loaded (see
    /// [`PageCache::has_missing`]).
    pub fn pending(&self) -> bool {
        self.cache.has_missing()
    }

    /// True if the pages that say whether `term` is in the dictionary (its index page and,
    /// unless that resolves it, its block) are in the cache. Records nothing.
    pub fn knows(&self, term: &str) -> bool {
        match self.place(term, false) {
            Ok(Place::Block(i)) => self.cache.contains(&self.block_name(i)),
            Ok(Place::Before | Place::Long(_) | Place::Entry(_) | Place::Absent) => true,
            Ok(Place::Unknown) => false,
            // A corrupt index page: the lookup that records it reports the error.
            Err(_) => true,
        }
    }

    /// Document frequency of `term`, `None` if absent (or its pages are not loaded).
    pub fn doc_freq(&self, term: &str) -> Result<Option<usize>> {
        Ok(match self.place(term, true)? {
            Place::Long(l) => Some(l.df as usize),
            Place::Entry(e) => Some(e.df as usize),
            Place::Block(i) => self
                .block(i)?
                .and_then(|b| b.find(term).map(|e| e.df as usize)),
            Place::Before | Place::Unknown | Place::Absent => None,
        })
    }

    /// Postings of `term` as `(doc, tf, doc_len)`; `None` if absent or not loaded.
    pub fn postings_with_len(&self, term: &str) -> Result<Option<Vec<(u32, u32, u32)>>> {
        match self.place(term, true)? {
            Place::Entry(e) => match e.place {
                super::bucket::Place::Inline { body, start, end } => {
                    let file = format!(
                        "p/{} ({})",
                        self.bucket_name(term).unwrap_or_else(|| "y-…".into()),
                        crate::quote::Quoted(term)
                    );
                    decode_list(&file, &body[start..end], e.df, self.num_docs).map(Some)
                }
                super::bucket::Place::Long(l) => self.long_list(term, l),
            },
            Place::Long(l) => self.long_list(term, l),
            Place::Block(i) => {
                let Some(b) = self.block(i)? else {
                    return Ok(None);
                };
                let Some(e) = b.find(term) else {
                    return Ok(None);
                };
                let Some(bytes) = b.list_bytes(e, &self.cache)? else {
                    return Ok(None);
                };
                let file = format!("p/{} ({})", b.name(), crate::quote::Quoted(term));
                decode_list(&file, &bytes, e.df, self.num_docs).map(Some)
            }
            Place::Before | Place::Unknown | Place::Absent => Ok(None),
        }
    }

    /// The long list `l` of `term` from its postings pages; `None` if one is not loaded
    /// (every missing page recorded).
    fn long_list(&self, term: &str, l: LongRef) -> Result<Option<Vec<(u32, u32, u32)>>> {
        let n = (l.offset + l.len).div_ceil(POSTINGS_PAGE);
        let bodies: Vec<_> = (l.page..l.page + n)
            .map(|p| self.cache.get(&self.postings.name(Kind::Postings, p)))
            .collect();
        let mut out = Vec::with_capacity(n * POSTINGS_PAGE);
        for b in bodies {
            let Some(b) = b else { return Ok(None) };
            out.extend_from_slice(&b);
        }
        let file = format!(
            "p/{} ({})",
            self.postings.name(Kind::Postings, l.page),
            crate::quote::Quoted(term)
        );
        if out.len() < l.offset + l.len {
            return Err(FormatError::corrupt(
                &file,
                0,
                format!("list of {} bytes past its pages' {}", l.len, out.len()),
            ));
        }
        decode_list(&file, &out[l.offset..l.offset + l.len], l.df, self.num_docs).map(Some)
    }

    /// The blocks a prefix scan for `prefix` reads, with their first terms: from the block
    /// that would hold `prefix` (or the first) while the first term starts with `prefix`
    /// or sorts before it. With index pages, stops at one that is not loaded (recorded).
    fn prefix_blocks(&self, prefix: &str) -> Result<Vec<(usize, String)>> {
        let keep = |i: usize, start: usize, first: &str| {
            i == start || first.starts_with(prefix) || first <= prefix
        };
        let mut out = Vec::new();
        let Some(idx) = &self.index else {
            let start = self
                .keys
                .partition_point(|first| first.as_str() <= prefix)
                .saturating_sub(1);
            for i in start..self.keys.len() {
                if !keep(i, start, &self.keys[i]) {
                    break;
                }
                out.push((i, self.keys[i].clone()));
            }
            return Ok(out);
        };
        let first_page = idx
            .keys
            .partition_point(|first| first.as_str() <= prefix)
            .saturating_sub(1);
        let mut start = None;
        for p in first_page..idx.keys.len() {
            let Some(page) = self.index_page(idx, p, true)? else {
                return Ok(out);
            };
            let s = *start.get_or_insert_with(|| page.block_of(prefix).unwrap_or(page.first_block));
            for (j, first) in page.keys.into_iter().enumerate() {
                let i = page.first_block + j;
                if i < s {
                    continue;
                }
                if !keep(i, s, &first) {
                    return Ok(out);
                }
                out.push((i, first));
            }
        }
        Ok(out)
    }

    /// Asks for the postings pages of the [`PREFIX_PREFETCH`] most frequent long-list terms
    /// starting with `prefix` that the loaded dictionary index pages list (none without
    /// index pages), so they come in the round of the prefix scan's blocks.
    fn prefetch_long(&self, prefix: &str) -> Result<()> {
        let Some(idx) = &self.index else {
            return Ok(());
        };
        let first_page = idx
            .keys
            .partition_point(|first| first.as_str() <= prefix)
            .saturating_sub(1);
        let mut long: Vec<(u32, String, LongRef)> = Vec::new();
        for p in first_page..idx.keys.len() {
            if p > first_page && !idx.keys[p].starts_with(prefix) {
                break;
            }
            let Some(page) = self.index_page(idx, p, false)? else {
                break;
            };
            for (t, l) in page.long {
                if t.starts_with(prefix) {
                    long.push((l.df, t, l));
                }
            }
        }
        crate::sort::sort_by(&mut long, |a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for (_, _, l) in long.into_iter().take(PREFIX_PREFETCH) {
            let n = (l.offset + l.len).div_ceil(POSTINGS_PAGE);
            for p in l.page..l.page + n {
                self.cache.get(&self.postings.name(Kind::Postings, p));
            }
        }
        Ok(())
    }

    /// Terms starting with `prefix` with their df, the first [`SCAN`] in term order.
    pub fn prefix_matches(&self, prefix: &str) -> Result<Vec<(u32, String)>> {
        let mut found = Vec::new();
        let mut missing = false;
        for (i, _) in self.prefix_blocks(prefix)? {
            let Some(b) = self.block(i)? else {
                if !missing {
                    missing = true;
                    self.prefetch_long(prefix)?;
                }
                continue;
            };
            for e in b.entries.iter().filter(|e| e.term.starts_with(prefix)) {
                if found.len() >= SCAN {
                    return Ok(found);
                }
                found.push((e.df, e.term.clone()));
            }
        }
        Ok(found)
    }

    /// Terms within Levenshtein `distance` of `term` with their df (from the typo pages of
    /// the lengths it can reach), the first [`SCAN`] in term order; empty if a page is not
    /// loaded (recorded).
    pub fn fuzzy_matches(&self, term: &str, distance: u32) -> Result<Vec<(u32, String)>> {
        use fst::{IntoStreamer, Streamer};
        let Some(typo) = &self.typo else {
            return Ok(Vec::new());
        };
        let len = term.chars().count();
        let d = distance as usize;
        let lo = typo_bucket(len.saturating_sub(d));
        let hi = typo_bucket(len + d);
        let names: Vec<String> = (lo..=hi).map(|b| typo.name(Kind::Typo, b)).collect();
        let bodies: Vec<_> = names.iter().map(|n| self.cache.get(n)).collect();
        if bodies.iter().any(Option::is_none) {
            return Ok(Vec::new());
        }
        let mut found = Vec::new();
        for (name, body) in names.iter().zip(bodies) {
            // fst's matches, smaller in wasm (crate::lev)
            let aut = crate::lev::Keys::Lev(crate::lev::Lev::new(term, distance));
            let fst_err = |source| FormatError::Fst {
                file: format!("p/{name}"),
                source,
            };
            let map = fst::Map::new(body.expect("checked").as_slice().to_vec()).map_err(fst_err)?;
            // Corrupt nodes can make fst lookups panic, and a hostile server can send a
            // page that matches its header: check the fst's own CRC32C first.
            crate::fst_check::verify(map.as_fst()).map_err(fst_err)?;
            let mut s = map.search(aut).into_stream();
            while let Some((k, df)) = s.next() {
                if let Ok(t) = std::str::from_utf8(k) {
                    found.push((df as u32, t.to_string()));
                }
            }
        }
        // The first SCAN in term order, as one scan of the whole dictionary would take.
        crate::sort::sort_by(&mut found, |a, b| a.1.cmp(&b.1));
        found.truncate(SCAN);
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A dictionary of `n` terms: every 7th has a long list (in postings pages), the rest
    /// short inline lists; doc ids < `docs`.
    #[allow(clippy::type_complexity)] // a test fixture: (terms with postings, doc lengths)
    fn dictionary(n: usize, docs: u32) -> (Vec<(String, Vec<(u32, u32)>)>, Vec<u32>) {
        let terms = (0..n)
            .map(|i| {
                let t = format!("t{:06}{}", i * 3, ["", "x", "가나", "學"][i % 4]);
                let df = if i % 7 == 0 { 600 + i % 50 } else { 1 + i % 40 };
                let step = (docs as usize / df).max(1);
                let list = (0..df)
                    .map(|k| (((k * step + i) % docs as usize) as u32, 1 + (k % 3) as u32))
                    .collect::<std::collections::BTreeMap<u32, u32>>()
                    .into_iter()
                    .collect();
                (t, list)
            })
            .collect();
        (terms, (0..docs).map(|d| 5 + d % 90).collect())
    }

    fn cache_of(pages: &[Encoded], skip: impl Fn(&str) -> bool) -> Arc<PageCache> {
        let cache = Arc::new(PageCache::new(usize::MAX));
        for p in pages.iter().filter(|p| !skip(&p.name)) {
            cache.add_stored(&p.name, &p.bytes).unwrap();
        }
        cache
    }

    /// Every long list starts a postings page of its own and only its last page is short, so
    /// fetching a list fetches no byte of another list; the pages hold exactly the lists'
    /// bytes (no padding), and every list reads back as written.
    #[test]
    fn long_lists_are_page_aligned() {
        let (terms, lens) = dictionary(300, 3_000);
        let w = write(terms.iter().map(|(t, l)| (t.as_str(), l.clone())), &lens).unwrap();
        let cache = cache_of(&w.pages, |_| false);
        let mut owner: Vec<Option<String>> = vec![None; w.postings.pages];
        let mut long_bytes = 0;
        for i in 0..w.blocks.pages {
            let name = w.blocks.name(Kind::Dict, i);
            let block = Block::parse(&name, cache.get(&name).unwrap(), &w.postings).unwrap();
            for e in &block.entries {
                let Loc::Long { first, offset, len } = e.loc else {
                    continue;
                };
                assert_eq!(offset, 0, "{} starts inside a page", e.term);
                long_bytes += len;
                for (k, r) in block.refs()[first..first + len.div_ceil(POSTINGS_PAGE)]
                    .iter()
                    .enumerate()
                {
                    let n = (0..w.postings.pages)
                        .find(|&n| &w.postings.name(Kind::Postings, n) == r)
                        .unwrap();
                    assert_eq!(owner[n].replace(e.term.clone()), None, "page {r} shared");
                    let body = cache.get(r).unwrap().len();
                    let want = (len - k * POSTINGS_PAGE).min(POSTINGS_PAGE);
                    assert_eq!(body, want, "{} page {k}", e.term);
                }
                let bytes = block.list_bytes(e, &cache).unwrap().unwrap();
                let (_, list) = terms.iter().find(|(t, _)| *t == e.term).unwrap();
                assert_eq!(bytes, encode_list(list, &lens), "{}", e.term);
            }
        }
        assert!(
            long_bytes > 10 * POSTINGS_PAGE,
            "fixture: several long lists"
        );
        assert!(
            owner.iter().all(Option::is_some),
            "a postings page no list uses"
        );
    }

    /// A dictionary over the inline-key limit gets index pages; every lookup through them
    /// answers as through the block keys (which the index pages hold), and a long list is
    /// read with no dictionary block loaded.
    #[test]
    fn index_pages_answer_as_block_keys() {
        let (terms, lens) = dictionary(80_000, 3_000);
        let w = write(terms.iter().map(|(t, l)| (t.as_str(), l.clone())), &lens).unwrap();
        let idx = w
            .index
            .clone()
            .expect("over INLINE_KEYS_MAX blocks: index pages");
        assert!(w.blocks.pages > INLINE_KEYS_MAX && w.keys.is_empty());
        assert!(
            idx.keys.len() * 20 < w.blocks.pages,
            "{} index pages",
            idx.keys.len()
        );
        let cache = cache_of(&w.pages, |_| false);
        // The block keys, read back from the index pages.
        let mut keys = Vec::new();
        for p in 0..idx.pages.pages {
            let name = idx.pages.name(Kind::DictIndex, p);
            let page = IndexPage::parse(
                &name,
                &cache.get(&name).unwrap(),
                w.blocks.pages,
                w.postings.pages,
            )
            .unwrap();
            assert_eq!(page.first_block, keys.len());
            assert_eq!(
                IndexPage::parse(&name, &page.encode(), w.blocks.pages, w.postings.pages).unwrap(),
                page
            );
            keys.extend(page.keys);
        }
        assert_eq!(keys.len(), w.blocks.pages);
        let lex = |c: &Arc<PageCache>, paged: bool| {
            let l = PagedLexicon::new(
                c.clone(),
                if paged { Vec::new() } else { keys.clone() },
                w.blocks.clone(),
                w.postings.clone(),
                w.typo.clone(),
                lens.len(),
                terms.len(),
                1.0,
            );
            if paged {
                l.with_index(Some(idx.clone()))
            } else {
                l
            }
        };
        let (a, b) = (lex(&cache, true), lex(&cache, false));
        let mut probes: Vec<String> = terms.iter().map(|(t, _)| t.clone()).collect();
        probes.extend(
            ["", "a", "t", "t0001", "t0999", "t000003y", "zzz", "t039999"].map(String::from),
        );
        for t in &probes {
            assert_eq!(a.doc_freq(t).unwrap(), b.doc_freq(t).unwrap(), "{t}");
            assert_eq!(
                a.postings_with_len(t).unwrap(),
                b.postings_with_len(t).unwrap(),
                "{t}"
            );
            assert!(a.knows(t) && b.knows(t));
        }
        for (t, list) in terms.iter().step_by(97) {
            let got = a.postings_with_len(t).unwrap().unwrap();
            let want: Vec<_> = list
                .iter()
                .map(|&(d, tf)| (d, tf, lens[d as usize]))
                .collect();
            assert_eq!(got, want);
        }
        for p in ["t0", "t00012", "t0399", "t01", "u", "t000003x"] {
            assert_eq!(
                a.prefix_matches(p).unwrap(),
                b.prefix_matches(p).unwrap(),
                "{p}"
            );
        }
        // Without any dictionary block: long lists resolve from the index page, others are
        // unknown (and their block is recorded as missing).
        let no_blocks = cache_of(&w.pages, |n| n.starts_with("d-"));
        let c = lex(&no_blocks, true);
        let (long, _) = &terms[7 * 100];
        let (short, _) = &terms[7 * 100 + 1];
        assert!(c.knows(long) && !c.knows(short));
        assert_eq!(
            c.postings_with_len(long).unwrap(),
            a.postings_with_len(long).unwrap()
        );
        assert!(!c.pending());
        assert_eq!(c.doc_freq(short).unwrap(), None);
        assert!(c.pending());
        // Without the index pages, nothing is known and the index page is what is missing.
        let no_index = cache_of(&w.pages, |n| n.starts_with("e-"));
        let d = lex(&no_index, true);
        assert!(!d.knows(long));
        assert_eq!(d.doc_freq(long).unwrap(), None);
        assert!(no_index.take_missing().iter().all(|n| n.starts_with("e-")));
    }

    /// A dictionary with index pages also gets term buckets: every lookup through them
    /// answers as through the block keys, with no index page or block loaded; a term
    /// whose bucket is not loaded asks for that bucket alone. A prefix scan without its
    /// blocks asks for them and for the lists of its most frequent long-list matches, so
    /// once those are in, every match's postings resolve with no bucket.
    #[test]
    fn buckets_answer_as_block_keys() {
        let (terms, lens) = dictionary(80_000, 3_000);
        let w = write(terms.iter().map(|(t, l)| (t.as_str(), l.clone())), &lens).unwrap();
        let buckets = w.buckets.clone().expect("index pages: buckets too");
        assert_eq!(w.entries.len(), terms.len());
        let whole = cache_of(&w.pages, |_| false);
        let mut keys = Vec::new();
        let idx = w.index.clone().unwrap();
        for p in 0..idx.pages.pages {
            let name = idx.pages.name(Kind::DictIndex, p);
            let body = whole.get(&name).unwrap();
            keys.extend(
                IndexPage::parse(&name, &body, w.blocks.pages, w.postings.pages)
                    .unwrap()
                    .keys,
            );
        }
        let lex = |c: &Arc<PageCache>, sorted: bool| {
            let l = PagedLexicon::new(
                c.clone(),
                if sorted { keys.clone() } else { Vec::new() },
                w.blocks.clone(),
                w.postings.clone(),
                w.typo.clone(),
                lens.len(),
                terms.len(),
                1.0,
            );
            if sorted {
                l
            } else {
                l.with_index(Some(idx.clone()))
                    .with_buckets(Some(buckets.clone()), None)
            }
        };
        // Only buckets and postings pages: no index page, no block.
        let only = cache_of(&w.pages, |n| n.starts_with("d-") || n.starts_with("e-"));
        let (a, b) = (lex(&only, false), lex(&whole, true));
        let mut probes: Vec<String> = terms.iter().map(|(t, _)| t.clone()).collect();
        probes.extend(["", "a", "t", "t0001", "t000003y", "zzz"].map(String::from));
        for t in &probes {
            assert!(a.knows(t), "{t}");
            assert_eq!(a.doc_freq(t).unwrap(), b.doc_freq(t).unwrap(), "{t}");
            assert_eq!(
                a.postings_with_len(t).unwrap(),
                b.postings_with_len(t).unwrap(),
                "{t}"
            );
        }
        assert!(
            only.take_missing().is_empty(),
            "buckets answered every lookup"
        );
        // A term whose bucket is not loaded: unknown, and its bucket is what is missing.
        let (t, _) = &terms[12_345];
        let name = buckets.name(
            Kind::TermBuckets,
            super::super::bucket::bucket_of(t, buckets.pages),
        );
        let no_bucket = cache_of(&w.pages, |n| n == name || n.starts_with("d-"));
        let c = lex(&no_bucket, false);
        assert!(!c.knows(t));
        assert_eq!(c.doc_freq(t).unwrap(), None);
        assert_eq!(
            no_bucket.take_missing().into_iter().collect::<Vec<_>>(),
            vec![name.clone()]
        );
        // A prefix scan with its index page but no block: the blocks are asked for, with the
        // postings of the most frequent long-list matches.
        let prefix = "t0012";
        let no_d = cache_of(&w.pages, |n| {
            n.starts_with("d-") || n.starts_with("o-") || n.starts_with("b-")
        });
        let d = lex(&no_d, false);
        assert!(d.prefix_matches(prefix).unwrap().is_empty());
        let missing = no_d.take_missing();
        assert!(missing.iter().any(|n| n.starts_with("d-")));
        assert!(missing.iter().any(|n| n.starts_with("o-")));
        assert!(missing.iter().all(|n| !n.starts_with("b-")));
        for n in &missing {
            let p = w.pages.iter().find(|p| &p.name == n).unwrap();
            no_d.add_stored(&p.name, &p.bytes).unwrap();
        }
        let mut found = d.prefix_matches(prefix).unwrap();
        assert_eq!(found, b.prefix_matches(prefix).unwrap());
        crate::sort::sort_by(&mut found, |a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for (_, t) in found.iter().take(PREFIX_PREFETCH) {
            assert_eq!(
                d.postings_with_len(t).unwrap(),
                b.postings_with_len(t).unwrap(),
                "{t}"
            );
        }
        assert!(
            no_d.take_missing().is_empty(),
            "the prefix matches needed no bucket"
        );
    }

    /// A small dictionary keeps its block keys in the entry (no index pages).
    #[test]
    fn small_dictionary_has_no_index_pages() {
        let (terms, lens) = dictionary(2_000, 500);
        let w = write(terms.iter().map(|(t, l)| (t.as_str(), l.clone())), &lens).unwrap();
        assert!(w.index.is_none() && w.keys.len() == w.blocks.pages);
        assert!(w.buckets.is_none() && w.entries.is_empty());
    }

    /// Hostile index pages: truncations and flipped bytes give errors, never a panic or a
    /// reference past the bundle's pages.
    #[test]
    fn corrupt_index_pages_are_refused() {
        let page = IndexPage {
            first_block: 3,
            keys: vec!["a".into(), "ab".into(), "b".into()],
            long: vec![(
                "ab".into(),
                LongRef {
                    df: 9,
                    page: 1,
                    offset: 4000,
                    len: 200,
                },
            )],
        };
        let body = page.encode();
        assert_eq!(IndexPage::parse("e-x", &body, 6, 3).unwrap(), page);
        assert!(
            IndexPage::parse("e-x", &body, 5, 3).is_err(),
            "blocks past the dictionary"
        );
        assert!(
            IndexPage::parse("e-x", &body, 6, 2).is_err(),
            "postings past the bundle"
        );
        for cut in 0..body.len() {
            assert!(IndexPage::parse("e-x", &body[..cut], 6, 3).is_err());
        }
        for i in 0..body.len() {
            for x in [0x01u8, 0x80, 0xFF] {
                let mut b = body.clone();
                b[i] ^= x;
                let _ = IndexPage::parse("e-x", &b, 6, 3);
            }
        }
    }

    /// A long list's span is checked with overflow-free arithmetic: a hostile length or page
    /// number near `usize::MAX` (reachable on wasm32's 32-bit `usize`) is refused, never
    /// wrapped into a small span.
    #[test]
    fn long_span_refuses_overflowing_and_out_of_range_lists() {
        assert_eq!(long_span(0, 0, 1, 1), Some(1));
        assert_eq!(long_span(0, 4095, 2, 2), Some(2));
        assert_eq!(long_span(0, 4095, 2, 1), None, "ends past the last page");
        assert_eq!(long_span(2, 0, POSTINGS_PAGE, 3), Some(1));
        assert_eq!(
            long_span(0, POSTINGS_PAGE, 1, 9),
            None,
            "offset outside its page"
        );
        assert_eq!(
            long_span(0, 100, usize::MAX - 50, usize::MAX),
            None,
            "offset + len overflows"
        );
        assert_eq!(
            long_span(usize::MAX, 0, 1, usize::MAX),
            None,
            "page + n overflows"
        );
    }

    /// A block whose long entry claims more bytes than its postings pages hold is refused
    /// with an error naming the postings page (it was taken for a page not yet loaded).
    #[test]
    fn regression_block_list_past_its_loaded_pages_is_an_error_not_missing() {
        let (terms, lens) = dictionary(300, 3_000);
        let w = write(terms.iter().map(|(t, l)| (t.as_str(), l.clone())), &lens).unwrap();
        let cache = cache_of(&w.pages, |_| false);
        // The last block with a long list: its refs end at the stream's last, short page.
        let block = (0..w.blocks.pages)
            .rev()
            .map(|i| {
                let name = w.blocks.name(Kind::Dict, i);
                Block::parse(&name, cache.get(&name).unwrap(), &w.postings).unwrap()
            })
            .find(|b| b.entries.iter().any(|e| matches!(e.loc, Loc::Long { .. })))
            .expect("every 7th term has a long list");
        let e = block
            .entries
            .iter()
            .rev()
            .find(|e| matches!(e.loc, Loc::Long { .. }))
            .unwrap()
            .clone();
        assert!(block.list_bytes(&e, &cache).unwrap().is_some());
        let Loc::Long { first, offset, .. } = e.loc else {
            unreachable!()
        };
        let last = block.refs().last().unwrap();
        let last_len = cache.get(last).unwrap().len();
        assert!(
            last_len < POSTINGS_PAGE,
            "fixture: the last postings page is short"
        );
        let mut long = e.clone();
        long.loc = Loc::Long {
            first,
            offset,
            len: (block.refs().len() - first) * POSTINGS_PAGE - offset,
        };
        let err = block.list_bytes(&long, &cache).unwrap_err().to_string();
        assert!(err.contains(&block.refs()[first]), "{err}");
        // Missing pages are still "not loaded", not an error.
        let empty = Arc::new(PageCache::new(usize::MAX));
        assert!(block.list_bytes(&e, &empty).unwrap().is_none());
    }

    /// Hostile dictionary blocks: every truncation and flipped byte gives an error or a
    /// block whose references stay within the bundle's postings pages; never a panic.
    #[test]
    fn corrupt_blocks_are_refused_without_panic() {
        let (terms, lens) = dictionary(300, 3_000);
        let w = write(terms.iter().map(|(t, l)| (t.as_str(), l.clone())), &lens).unwrap();
        let cache = cache_of(&w.pages, |_| false);
        let name = w.blocks.name(Kind::Dict, 0);
        let body = cache.get(&name).unwrap().to_vec();
        for cut in 0..body.len() {
            if let Ok(b) = Block::parse(&name, Arc::new(body[..cut].to_vec()), &w.postings) {
                assert!(b.entries.len() <= cut);
            }
        }
        for i in (0..body.len()).step_by(3) {
            for x in [0x01u8, 0x80, 0xFF] {
                let mut b = body.clone();
                b[i] ^= x;
                if let Ok(block) = Block::parse(&name, Arc::new(b), &w.postings) {
                    for e in &block.entries {
                        let _ = block.list_bytes(e, &cache);
                    }
                }
            }
        }
    }
}

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
//! sit in their block; longer ones are concatenated in term order and cut into postings
//! pages of [`POSTINGS_PAGE`] raw bytes.
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
/// Errors only if the typo fst cannot be built.
pub fn write<'a>(
    terms: impl Iterator<Item = (&'a str, Vec<(u32, u32)>)>,
    doc_lens: &[u32],
) -> Result<Written> {
    // Pass 1: encode every list; long ones go to the postings stream.
    struct Term<'a> {
        term: &'a str,
        df: u32,
        inline: Option<Vec<u8>>,
        long: Option<(usize, usize)>, // (stream offset, len)
    }
    let mut stream: Vec<u8> = Vec::new();
    let mut all: Vec<Term> = Vec::new();
    let mut typo: Vec<fst::MapBuilder<Vec<u8>>> = (0..TYPO_BUCKETS)
        .map(|_| fst::MapBuilder::memory())
        .collect();
    let mut any_typo = false;
    for (term, list) in terms {
        let bytes = encode_list(&list, doc_lens);
        let df = list.len() as u32;
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
            let at = stream.len();
            stream.extend_from_slice(&bytes);
            all.push(Term {
                term,
                df,
                inline: None,
                long: Some((at, bytes.len())),
            });
        }
    }
    let post_bodies: Vec<Vec<u8>> = stream.chunks(POSTINGS_PAGE).map(<[u8]>::to_vec).collect();
    let (postings, mut pages) = super::numbered(Kind::Postings, post_bodies, POSTINGS_PAGE);
    // Pass 2: blocks.
    let mut keys = Vec::new();
    let mut block_bodies = Vec::new();
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
            let keep = prev.iter().zip(k).take_while(|(a, b)| a == b).count();
            put_varint(&mut body, keep as u64);
            put_varint(&mut body, (k.len() - keep) as u64);
            body.extend_from_slice(&k[keep..]);
            put_varint(&mut body, u64::from(t.df));
            match (&t.inline, t.long) {
                (Some(b), _) => {
                    put_varint(&mut body, (b.len() as u64) << 1);
                    body.extend_from_slice(b);
                }
                (None, Some((at, len))) => {
                    put_varint(&mut body, ((len as u64) << 1) | 1);
                    put_varint(
                        &mut body,
                        (at / POSTINGS_PAGE - first_page.unwrap_or(0)) as u64,
                    );
                    put_varint(&mut body, (at % POSTINGS_PAGE) as u64);
                }
                (None, None) => unreachable!("a term is inline or long"),
            }
            prev = k;
        }
        keys.push(group[0].term.to_string());
        block_bodies.push(body);
    }
    let (blocks, block_pages) = super::numbered(Kind::Dict, block_bodies, 0);
    pages.extend(block_pages);
    let typo = if any_typo {
        let mut bodies = Vec::with_capacity(TYPO_BUCKETS);
        for b in typo {
            bodies.push(b.into_inner().map_err(|source| FormatError::Fst {
                file: "p/t-…".into(),
                source,
            })?);
        }
        let (root, tp) = super::numbered(Kind::Typo, bodies, 0);
        pages.extend(tp);
        Some(root)
    } else {
        None
    };
    Ok(Written {
        pages,
        keys,
        blocks,
        postings,
        typo,
    })
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
            let keep = r.varint()? as usize;
            let add = r.varint()? as usize;
            if keep > prev.len() {
                return Err(r.corrupt("front coding keeps more than the previous term"));
            }
            prev.truncate(keep);
            prev.extend_from_slice(r.take(add)?);
            let term =
                String::from_utf8(prev.clone()).map_err(|_| r.corrupt("term is not UTF-8"))?;
            let df = u32::try_from(r.varint()?).map_err(|_| r.corrupt("df over u32"))?;
            let lk = r.varint()?;
            let len = usize::try_from(lk >> 1).map_err(|_| r.corrupt("length overflow"))?;
            let loc = if lk & 1 == 0 {
                let at = r.pos();
                r.take(len)?;
                Loc::Inline(at, at + len)
            } else {
                let first = r.varint()? as usize;
                let offset = r.varint()? as usize;
                let pages = (offset + len).div_ceil(POSTINGS_PAGE);
                if offset >= POSTINGS_PAGE || first.saturating_add(pages) > n_refs {
                    return Err(r.corrupt(format!(
                        "term {term:?}: postings range past the block's {n_refs} pages"
                    )));
                }
                Loc::Long { first, offset, len }
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
    /// missing, every page of the list).
    pub fn list_bytes(&self, e: &TermEntry, cache: &PageCache) -> Option<Vec<u8>> {
        match e.loc {
            Loc::Inline(a, b) => Some(self.body[a..b].to_vec()),
            Loc::Long { first, offset, len } => {
                let n = (offset + len).div_ceil(POSTINGS_PAGE);
                let pages: Vec<_> = self.refs[first..first + n]
                    .iter()
                    .map(|name| cache.get(name))
                    .collect();
                let mut out = Vec::with_capacity(len + offset);
                for p in pages {
                    out.extend_from_slice(&p?);
                }
                if out.len() < offset + len {
                    return None;
                }
                Some(out[offset..offset + len].to_vec())
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
    blocks: Numbered,
    postings: Numbered,
    typo: Option<Numbered>,
    num_docs: usize,
    num_terms: usize,
    avg_doc_len: f32,
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
            blocks,
            postings,
            typo,
            num_docs,
            num_terms,
            avg_doc_len,
        }
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
        self.keys.len()
    }

    fn block_index(&self, term: &str) -> Option<usize> {
        let i = self.keys.partition_point(|first| first.as_str() <= term);
        i.checked_sub(1)
    }

    fn block(&self, i: usize) -> Result<Option<Block>> {
        self.block_named(&self.block_name(i))
    }

    /// The block that would hold `term` (`None`: before the first term, or not loaded —
    /// then recorded as missing).
    fn block_for(&self, term: &str) -> Result<Option<Block>> {
        match self.block_index(term) {
            Some(i) => self.block(i),
            None => Ok(None),
        }
    }

    /// True if this pass has read a page that was not loaded (see
    /// [`PageCache::has_missing`]).
    pub fn pending(&self) -> bool {
        self.cache.has_missing()
    }

    /// True if the block that would hold `term` is in the cache (or no block could hold
    /// it). Records nothing.
    pub fn knows(&self, term: &str) -> bool {
        match self.block_index(term) {
            Some(i) => self.cache.contains(&self.block_name(i)),
            None => true,
        }
    }

    /// Document frequency of `term`, `None` if absent (or its block is not loaded).
    pub fn doc_freq(&self, term: &str) -> Result<Option<usize>> {
        Ok(self
            .block_for(term)?
            .and_then(|b| b.find(term).map(|e| e.df as usize)))
    }

    /// Postings of `term` as `(doc, tf, doc_len)`; `None` if absent or not loaded.
    pub fn postings_with_len(&self, term: &str) -> Result<Option<Vec<(u32, u32, u32)>>> {
        let Some(b) = self.block_for(term)? else {
            return Ok(None);
        };
        let Some(e) = b.find(term) else {
            return Ok(None);
        };
        let Some(bytes) = b.list_bytes(e, &self.cache) else {
            return Ok(None);
        };
        let file = format!("p/{} ({term:?})", b.name());
        decode_list(&file, &bytes, e.df, self.num_docs).map(Some)
    }

    /// Terms starting with `prefix` with their df, the first [`SCAN`] in term order.
    pub fn prefix_matches(&self, prefix: &str) -> Result<Vec<(u32, String)>> {
        let mut found = Vec::new();
        let start = self.block_index(prefix).unwrap_or(0);
        for i in start..self.keys.len() {
            let first = &self.keys[i];
            if i > start && !first.starts_with(prefix) && first.as_str() > prefix {
                break;
            }
            let Some(b) = self.block(i)? else { continue };
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
    /// loaded (recorded) or the automaton would be too large.
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
            let Ok(aut) = fst::automaton::Levenshtein::new(term, distance) else {
                return Ok(Vec::new());
            };
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
        found.sort_by(|a, b| a.1.cmp(&b.1));
        found.truncate(SCAN);
        Ok(found)
    }
}

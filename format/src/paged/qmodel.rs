//! The browser's query model as pages of a paged bundle (issue 13; design
//! `docs/design/query-model-pack.md` §2.2 and §6; layout in `FORMAT.md`, "Format 2").
//!
//! A bundle with vectors built while a query-model pack is present (`jikji model-pack`:
//! `layers.bin`, `rows.bin`, `tokenizer.bin`, `pack.json`) carries the pack as pages, named in
//! the entry's `pages.query_model` ([`QueryModelRoot`]):
//!
//! - `m-<h16>` **layer pages**: `layers.bin` cut into [`LAYER_PAGES`] parts of equal size
//!   (the last shorter), in order; concatenated they are the file. Content-named, so every
//!   bundle built with the same pack names them alike (one copy in the browser's cache).
//! - `k-<h16>` **tokenizer pages**: `tokenizer.bin` cut into parts of at most
//!   [`TOKENIZER_PART`] bytes, likewise.
//! - `u-<h16>` the **row map**: `varint n_hot`, then `n_hot` varints, the token ids of slots
//!   `0 … n_hot − 1`: first the ids of an empty query (`<s>`, `query: `, `</s>`), then every
//!   other token id of the bundle's chunk texts (tokenized as embedded, `passage: ` + text) by
//!   descending count (ties: lower id first). Slots `n_hot …` hold the remaining ids in
//!   ascending order. Ids are distinct and below `vocab`.
//! - `r-<gen>-<n>` **row pages**: the Q4_0 rows of slots `n·16 … n·16 + 15`
//!   ([`ROWS_PER_PAGE`]), `row_bytes` each, concatenated (the last page fewer). Grouping by
//!   corpus frequency is what keeps a query's rows on few pages (§2.2: 0.5–6.2 kB of new
//!   rows per later query on the eval sets).
//!
//! Every page is a format 2 page (48-byte header, deflate when it saves 1/16 — never tried
//! for row pages, [`super::page::Kind::tries_deflate`] — SHA-256 checked on reading). This module holds the entry's root, its checks, and the row map's codec; the
//! code that writes and reads these pages around the model is `jikji_query_model::paged`.

use serde::{Deserialize, Serialize};

use super::page::Kind;
use super::{Numbered, ENTRY_FILE};
use crate::error::{FormatError, Result};

/// Layer pages per bundle: `layers.bin` (12.97 MB for e5-small) in 12 parts, so they download
/// in parallel and a page can show progress.
pub const LAYER_PAGES: usize = 12;
/// Largest tokenizer page body (bytes).
pub const TOKENIZER_PART: usize = 2 << 20;
/// Token rows per row page (216 B each for e5-small: 3,456 B a page).
pub const ROWS_PER_PAGE: usize = 16;
/// Largest `layers_bytes` / `tokenizer_bytes` a reader accepts before allocating (256 MiB).
pub const MAX_MODEL_FILE: u64 = 256 << 20;
/// Largest vocabulary a reader accepts (4 Mi ids, as `jikji_query_model` bounds it).
pub const MAX_VOCAB: usize = 1 << 22;

/// `pages.query_model` of the entry: the query-model pack this bundle carries, by hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryModelRoot {
    /// The pack's `model_id` (e.g. `multilingual-e5-small-q4`).
    pub model_id: String,
    /// SHA-256 (hex) of the `model.onnx` the pack reproduces: equal to `model.sha256`.
    pub model_sha256: String,
    /// The pack's hash: SHA-256 (hex) of its three files' SHA-256 hex digests, each followed
    /// by `\n`, in the order `layers.bin`, `rows.bin`, `tokenizer.bin`
    /// (`jikji_query_model::pack::pack_hash`).
    pub pack_sha256: String,
    /// Layer pages (`m-<h16>`), in file order.
    pub layers: Vec<String>,
    /// Bytes of `layers.bin` (Σ of the layer pages' raw bodies).
    pub layers_bytes: u64,
    /// Tokenizer pages (`k-<h16>`), in file order.
    pub tokenizer: Vec<String>,
    /// Bytes of `tokenizer.bin`.
    pub tokenizer_bytes: u64,
    /// The row map page (`u-<h16>`).
    pub row_map: String,
    /// Row pages `r-<gen>-<n>` ([`ROWS_PER_PAGE`] rows each).
    pub rows: Numbered,
    /// Token ids (rows) the model has: 250,002 for e5-small.
    pub vocab: usize,
    /// Bytes of one Q4_0 row (216 for 384 weights).
    pub row_bytes: usize,
}

impl crate::json::FromJson for QueryModelRoot {
    const WHAT: &'static str = "an object";
    fn from_json(j: &crate::json::Json, f: &str) -> Result<Self> {
        let o = j.obj(f)?;
        Ok(QueryModelRoot {
            model_id: o.req("model_id")?,
            model_sha256: o.req("model_sha256")?,
            pack_sha256: o.req("pack_sha256")?,
            layers: o.req("layers")?,
            layers_bytes: o.req("layers_bytes")?,
            tokenizer: o.req("tokenizer")?,
            tokenizer_bytes: o.req("tokenizer_bytes")?,
            row_map: o.req("row_map")?,
            rows: o.req("rows")?,
            vocab: o.req("vocab")?,
            row_bytes: o.req("row_bytes")?,
        })
    }
}

fn content_named(name: &str, kind: Kind) -> bool {
    let b = name.as_bytes();
    b.len() == 18
        && b[0] == kind.letter()
        && b[1] == b'-'
        && b[2..]
            .iter()
            .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(c))
}

impl QueryModelRoot {
    /// Checks the root before anything is sized from it (bytes from the network are
    /// hostile): page names of the right kind, sizes within [`MAX_MODEL_FILE`], a vocabulary
    /// within [`MAX_VOCAB`], row pages = ⌈vocab / 16⌉, and `model_sha256` equal to the
    /// bundle's `model.sha256` (`bundle_model`; `None`: a bundle without vectors, refused).
    /// Errors: DataCorruption naming `jikji.json`.
    pub fn check(&self, bundle_model: Option<&str>) -> Result<()> {
        let bad = |m: String| {
            Err(FormatError::corrupt(
                ENTRY_FILE,
                0,
                format!("query_model: {m}"),
            ))
        };
        match bundle_model {
            None => return bad("a query model in a bundle without vectors".into()),
            Some(m) if m != self.model_sha256 => {
                return bad(format!(
                    "made for model sha256 {}, the bundle's vectors for {m}",
                    self.model_sha256
                ))
            }
            _ => {}
        }
        if self.layers.is_empty()
            || self.layers.len() > 4096
            || !self
                .layers
                .iter()
                .all(|n| content_named(n, Kind::ModelLayers))
        {
            return bad("layer pages must be 1..=4096 names m-<16 hex>".into());
        }
        if self.tokenizer.is_empty()
            || self.tokenizer.len() > 4096
            || !self
                .tokenizer
                .iter()
                .all(|n| content_named(n, Kind::ModelTokenizer))
        {
            return bad("tokenizer pages must be 1..=4096 names k-<16 hex>".into());
        }
        if !content_named(&self.row_map, Kind::RowMap) {
            return bad(format!("row map {:?} is not u-<16 hex>", self.row_map));
        }
        if self.layers_bytes > MAX_MODEL_FILE || self.tokenizer_bytes > MAX_MODEL_FILE {
            return bad(format!(
                "{} layer bytes / {} tokenizer bytes, over the {MAX_MODEL_FILE}-byte limit",
                self.layers_bytes, self.tokenizer_bytes
            ));
        }
        if self.vocab == 0
            || self.vocab > MAX_VOCAB
            || self.row_bytes == 0
            || self.row_bytes > 1 << 16
        {
            return bad(format!(
                "{} token rows of {} bytes",
                self.vocab, self.row_bytes
            ));
        }
        if self.rows.per_page != ROWS_PER_PAGE
            || self.rows.pages != self.vocab.div_ceil(ROWS_PER_PAGE)
            || self.rows.gen.len() != 16
        {
            return bad(format!(
                "{} row pages of {} for {} rows",
                self.rows.pages, self.rows.per_page, self.vocab
            ));
        }
        Ok(())
    }

    /// The name of row page `n`.
    pub fn row_page(&self, n: usize) -> String {
        self.rows.name(Kind::Rows, n)
    }

    /// Every page name of the query model: layers, tokenizer, row map, rows.
    pub fn all_pages(&self) -> Vec<String> {
        let mut out = self.layers.clone();
        out.extend(self.tokenizer.iter().cloned());
        out.push(self.row_map.clone());
        out.extend((0..self.rows.pages).map(|n| self.row_page(n)));
        out
    }
}

/// The token id → row slot map of a bundle's row pages (the `u-` page's body decoded).
#[derive(Debug, Clone)]
pub struct RowMap {
    /// Token ids of slots `0 … n_hot − 1`.
    hot: Vec<u32>,
    /// The same ids sorted, with their slots.
    sorted: Vec<(u32, u32)>,
    vocab: usize,
}

fn varint(b: &[u8], p: &mut usize, page: &str) -> Result<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*p).ok_or_else(|| {
            FormatError::corrupt(
                &format!("p/{page}"),
                *p as u64,
                "row map ends inside a varint",
            )
        })?;
        *p += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err(FormatError::corrupt(
        &format!("p/{page}"),
        *p as u64,
        "varint longer than 10 bytes",
    ))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

impl RowMap {
    /// The map whose first slots hold `hot` (distinct ids below `vocab`).
    pub fn new(hot: Vec<u32>, vocab: usize) -> Result<Self> {
        let mut sorted: Vec<(u32, u32)> = hot
            .iter()
            .enumerate()
            .map(|(s, &id)| (id, s as u32))
            .collect();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0].0 == w[1].0)
            || sorted.last().is_some_and(|l| l.0 as usize >= vocab)
        {
            return Err(FormatError::InvalidInput(format!(
                "row map: ids must be distinct and below {vocab}"
            )));
        }
        Ok(RowMap { hot, sorted, vocab })
    }

    /// Decodes a row map body of page `page` for a model of `vocab` ids. The count is
    /// bounded by `vocab` before allocating. Errors: DataCorruption naming `p/<page>`.
    pub fn decode(body: &[u8], vocab: usize, page: &str) -> Result<Self> {
        let mut p = 0;
        let n = varint(body, &mut p, page)?;
        if n > vocab as u64 {
            return Err(FormatError::corrupt(
                &format!("p/{page}"),
                0,
                format!("{n} hot ids for a {vocab}-id model"),
            ));
        }
        let mut hot = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let at = p;
            let id = varint(body, &mut p, page)?;
            if id >= vocab as u64 {
                return Err(FormatError::corrupt(
                    &format!("p/{page}"),
                    at as u64,
                    format!("token id {id} outside the {vocab}-id model"),
                ));
            }
            hot.push(id as u32);
        }
        if p != body.len() {
            return Err(FormatError::corrupt(
                &format!("p/{page}"),
                p as u64,
                "bytes after the last id",
            ));
        }
        RowMap::new(hot, vocab)
            .map_err(|_| FormatError::corrupt(&format!("p/{page}"), 0, "a token id appears twice"))
    }

    /// The body of the `u-` page.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.hot.len() * 3 + 4);
        put_varint(&mut out, self.hot.len() as u64);
        for &id in &self.hot {
            put_varint(&mut out, u64::from(id));
        }
        out
    }

    /// Ids in the model.
    pub fn vocab(&self) -> usize {
        self.vocab
    }

    /// The row slot of token `id`, or `None` for an id outside the model. Hot ids by the
    /// map, every other id after them in id order: `n_hot + id − (hot ids below id)`.
    pub fn slot(&self, id: u32) -> Option<usize> {
        if id as usize >= self.vocab {
            return None;
        }
        match self.sorted.binary_search_by_key(&id, |&(i, _)| i) {
            Ok(k) => Some(self.sorted[k].1 as usize),
            Err(below) => Some(self.hot.len() + id as usize - below),
        }
    }

    /// The token id of every slot, in slot order (what the writer lays out).
    pub fn ids_in_slot_order(&self) -> Vec<u32> {
        let mut out = self.hot.clone();
        let mut k = 0;
        for id in 0..self.vocab as u32 {
            if k < self.sorted.len() && self.sorted[k].0 == id {
                k += 1;
            } else {
                out.push(id);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_map_slots_are_a_permutation() {
        let m = RowMap::new(vec![7, 2, 9, 0], 12).unwrap();
        let order = m.ids_in_slot_order();
        assert_eq!(order, vec![7, 2, 9, 0, 1, 3, 4, 5, 6, 8, 10, 11]);
        for (slot, &id) in order.iter().enumerate() {
            assert_eq!(m.slot(id), Some(slot), "id {id}");
        }
        assert_eq!(m.slot(12), None);
        let back = RowMap::decode(&m.encode(), 12, "u-0").unwrap();
        assert_eq!(back.ids_in_slot_order(), order);
    }

    #[test]
    fn hostile_row_maps_are_refused() {
        // A count larger than the vocabulary is refused before allocating.
        let mut b = Vec::new();
        put_varint(&mut b, u64::MAX >> 1);
        let e = RowMap::decode(&b, 10, "u-x").unwrap_err().to_string();
        assert!(e.contains("p/u-x") && e.contains("hot ids"), "{e}");
        // Out-of-range, repeated, truncated, trailing.
        for body in [
            vec![1, 10],
            vec![2, 3, 3],
            vec![2, 3],
            vec![1, 3, 0],
            vec![1, 0x80],
        ] {
            assert!(RowMap::decode(&body, 10, "u-x").is_err(), "{body:?}");
        }
    }
}

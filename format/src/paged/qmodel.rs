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
//!   descending count (ties: lower id first). Slots `n_hot …` hold the remaining ids (the
//!   *tail*) in the root's [`RowOrder`]: [`RowOrder::Script`] (written now) groups them by the
//!   [`script_class`] of their piece, ascending id within a class; [`RowOrder::Id`] (bundles
//!   written before it) in ascending id. Ids are distinct and below `vocab`.
//! - `r-<gen>-<n>` **row pages** (`gen`: a digest of the pack's hash, the layout and the row
//!   map's body, `jikji_query_model::paged::rows_gen`, not of the 54 MB of rows, so a writer
//!   names them without making them): the Q4_0 rows of slots `n·p … n·p + p − 1` with
//!   `p = rows.per_page` ([`ROWS_PER_PAGE`] = 8 now; 16 in bundles written before),
//!   `row_bytes` each, concatenated (the last page fewer). Grouping by corpus frequency keeps
//!   a query about the bundle on few pages; for queries whose tokens the corpus lacks, 8-row
//!   pages and the script grouping are what keep the new bytes per later query low (measured:
//!   README, "The browser's query model"; the XLM-R ids are already in descending Unigram
//!   score, so an order by score is the id order).
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
/// Token rows per row page that the writer (`jikji_query_model::paged::write_pages`) uses
/// (216 B each for e5-small: 1,728 B a page). Readers take `rows.per_page` from the root
/// (1 ..= [`MAX_ROWS_PER_PAGE`]; bundles written before this value have 16).
pub const ROWS_PER_PAGE: usize = 8;
/// Largest `rows.per_page` a reader accepts.
pub const MAX_ROWS_PER_PAGE: usize = 256;

/// Order of the row map's tail (slots from `n_hot` on): `row_order` of the root.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum RowOrder {
    /// Ascending token id (bundles written before `row_order` existed: the field absent).
    #[default]
    #[serde(rename = "id")]
    Id,
    /// Grouped by [`script_class`] of the token's piece (classes ascending), ascending id
    /// within a class. Needs the tokenizer's pieces to map ids to slots.
    #[serde(rename = "script")]
    Script,
}

impl RowOrder {
    fn parse(s: &str) -> Result<Self> {
        match s {
            "id" => Ok(RowOrder::Id),
            "script" => Ok(RowOrder::Script),
            other => Err(FormatError::corrupt(
                ENTRY_FILE,
                0,
                format!(
                    "query_model: row_order {} is not one this reader knows (id, script): \
                     rebuild the bundle with this jikji, or update the reader",
                    crate::quote::Quoted(other)
                ),
            )),
        }
    }
}

/// Classes of [`script_class`], in tail order.
pub const SCRIPT_CLASSES: u8 = 13;

/// The script class of a token piece (UTF-8), which groups the row map's tail under
/// [`RowOrder::Script`]: the first code point after any leading `▁` (U+2581) decides —
/// 0 none (the piece is only `▁`, or empty), 1 digits, ASCII punctuation and symbols,
/// 2 Latin (A–Z, a–z, U+00C0–024F, U+1E00–1EFF), 3 Greek (U+0370–03FF), 4 Cyrillic
/// (U+0400–052F), 5 Hebrew (U+0590–05FF), 6 Arabic (U+0600–06FF), 7 Indic (U+0900–0DFF),
/// 8 Thai and Lao (U+0E00–0EFF), 9 Hangul (U+1100–11FF, U+3130–318F, U+AC00–D7AF),
/// 10 Kana (U+3040–30FF), 11 Han (U+3400–4DBF, U+4E00–9FFF, U+F900–FAFF,
/// U+20000–3FFFF), 12 any other non-ASCII code point. Invalid UTF-8 counts as 12.
pub fn script_class(piece: &[u8]) -> u8 {
    let s = match std::str::from_utf8(piece) {
        Ok(s) => s,
        Err(_) => return 12,
    };
    let Some(c) = s.trim_start_matches('\u{2581}').chars().next() else {
        return 0;
    };
    match c as u32 {
        0x30..=0x39 => 1,
        0x41..=0x5a | 0x61..=0x7a | 0xc0..=0x24f | 0x1e00..=0x1eff => 2,
        0x370..=0x3ff => 3,
        0x400..=0x52f => 4,
        0x590..=0x5ff => 5,
        0x600..=0x6ff => 6,
        0x900..=0xdff => 7,
        0xe00..=0xeff => 8,
        0x1100..=0x11ff | 0x3130..=0x318f | 0xac00..=0xd7af => 9,
        0x3040..=0x30ff => 10,
        0x3400..=0x4dbf | 0x4e00..=0x9fff | 0xf900..=0xfaff | 0x20000..=0x3ffff => 11,
        0..=0x7f => 1,
        _ => 12,
    }
}
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
    /// Stored bytes (header + stored body, what a browser downloads) of the layer pages;
    /// absent in bundles written before it. Informative: the page's "Load semantic search
    /// (13.4 MB)" and the model's download progress, which the worker reads from the entry's
    /// JSON itself; no engine reads it, so wasm builds leave the field out (the BM25 engine's
    /// entry struct stays as small as before: 21 B gzip of a spent budget).
    #[cfg(not(target_arch = "wasm32"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers_stored: Option<u64>,
    /// Stored bytes of the tokenizer pages (as [`Self::layers_stored`]; native builds only).
    #[cfg(not(target_arch = "wasm32"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_stored: Option<u64>,
    /// The row map page (`u-<h16>`).
    pub row_map: String,
    /// Row pages `r-<gen>-<n>` (`rows.per_page` rows each).
    pub rows: Numbered,
    /// Order of the row map's tail; absent in bundles written before it ([`RowOrder::Id`]).
    #[serde(default)]
    pub row_order: RowOrder,
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
            #[cfg(not(target_arch = "wasm32"))]
            layers_stored: o
                .get("layers_stored")?
                .map(|j| u64::from_json(j, f))
                .transpose()?,
            #[cfg(not(target_arch = "wasm32"))]
            tokenizer_stored: o
                .get("tokenizer_stored")?
                .map(|j| u64::from_json(j, f))
                .transpose()?,
            row_map: o.req("row_map")?,
            rows: o.req("rows")?,
            row_order: match o.get("row_order")? {
                None => RowOrder::Id,
                Some(j) => RowOrder::parse(&String::from_json(j, f)?)?,
            },
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
    /// within [`MAX_VOCAB`], 1 ..= [`MAX_ROWS_PER_PAGE`] rows per page, row pages =
    /// ⌈vocab / per_page⌉, and `model_sha256` equal to the
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
            return bad(format!(
                "row map {} is not u-<16 hex>",
                crate::quote::Quoted(&self.row_map)
            ));
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
        if !(1..=MAX_ROWS_PER_PAGE).contains(&self.rows.per_page)
            || self.rows.pages != self.vocab.div_ceil(self.rows.per_page)
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
    /// Under [`RowOrder::Script`] ([`RowMap::group_tail`]): the slot of every id.
    slots: Option<Vec<u32>>,
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
        Ok(RowMap {
            hot,
            sorted,
            vocab,
            slots: None,
        })
    }

    /// The map with its tail in [`RowOrder::Script`]: the ids after the hot ones grouped by
    /// `class[id]` (classes ascending, ascending id within a class; `class` from
    /// [`script_class`] of each id's piece, `vocab` entries). Builds an id → slot table
    /// (4 bytes per id). Errors: InvalidInput when `class` has not `vocab` entries.
    pub fn group_tail(mut self, class: &[u8]) -> Result<Self> {
        if class.len() != self.vocab {
            return Err(FormatError::InvalidInput(format!(
                "row map: {} script classes for a {}-id model",
                class.len(),
                self.vocab
            )));
        }
        let tail = self.tail_by_id();
        let mut start = [0usize; 257];
        for &id in &tail {
            start[class[id as usize] as usize + 1] += 1;
        }
        for c in 1..start.len() {
            start[c] += start[c - 1];
        }
        let mut slots = vec![0u32; self.vocab];
        for (s, &id) in self.hot.iter().enumerate() {
            slots[id as usize] = s as u32;
        }
        let n_hot = self.hot.len();
        for &id in &tail {
            let c = class[id as usize] as usize;
            slots[id as usize] = (n_hot + start[c]) as u32;
            start[c] += 1;
        }
        self.slots = Some(slots);
        Ok(self)
    }

    /// The ids not in the hot list, ascending.
    fn tail_by_id(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.vocab - self.hot.len());
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
    /// map, every other id after them: grouped by script ([`RowMap::group_tail`]) or in id
    /// order, `n_hot + id − (hot ids below id)`.
    pub fn slot(&self, id: u32) -> Option<usize> {
        if id as usize >= self.vocab {
            return None;
        }
        if let Some(t) = &self.slots {
            return Some(t[id as usize] as usize);
        }
        match self.sorted.binary_search_by_key(&id, |&(i, _)| i) {
            Ok(k) => Some(self.sorted[k].1 as usize),
            Err(below) => Some(self.hot.len() + id as usize - below),
        }
    }

    /// The token id of every slot, in slot order (what the writer lays out).
    pub fn ids_in_slot_order(&self) -> Vec<u32> {
        if let Some(t) = &self.slots {
            let mut out = vec![0u32; self.vocab];
            for (id, &s) in t.iter().enumerate() {
                out[s as usize] = id as u32;
            }
            return out;
        }
        let mut out = self.hot.clone();
        out.extend(self.tail_by_id());
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
    fn script_grouped_tail_is_a_permutation() {
        // ids 0..12; classes: even ids 2 (Latin), odd ids 11 (Han), id 5 class 0.
        let class: Vec<u8> = (0..12u8)
            .map(|i| {
                if i == 5 {
                    0
                } else if i % 2 == 0 {
                    2
                } else {
                    11
                }
            })
            .collect();
        let m = RowMap::new(vec![7, 2], 12)
            .unwrap()
            .group_tail(&class)
            .unwrap();
        let order = m.ids_in_slot_order();
        assert_eq!(order, vec![7, 2, 5, 0, 4, 6, 8, 10, 1, 3, 9, 11]);
        for (slot, &id) in order.iter().enumerate() {
            assert_eq!(m.slot(id), Some(slot), "id {id}");
        }
        assert_eq!(m.slot(12), None);
        assert!(RowMap::new(vec![1], 12)
            .unwrap()
            .group_tail(&class[..11])
            .is_err());
    }

    #[test]
    fn script_classes() {
        for (p, c) in [
            ("\u{2581}", 0),
            ("", 0),
            ("\u{2581}the", 2),
            ("é", 2),
            ("12", 1),
            (",", 1),
            ("\u{2581}學", 11),
            ("메", 9),
            ("の", 10),
            ("да", 4),
            ("😀", 12),
        ] {
            assert_eq!(script_class(p.as_bytes()), c, "{p:?}");
        }
        assert_eq!(script_class(&[0xff, 0x41]), 12);
    }

    fn root_json(extra: &str, per_page: usize) -> String {
        let pages = 250_002usize.div_ceil(per_page);
        format!(
            r#"{{"model_id":"m","model_sha256":"ab","pack_sha256":"cd",
            "layers":["m-0123456789abcdef"],"layers_bytes":10,
            "tokenizer":["k-0123456789abcdef"],"tokenizer_bytes":10,
            "row_map":"u-0123456789abcdef",
            "rows":{{"gen":"0123456789abcdef","per_page":{per_page},"pages":{pages}}},
            {extra}"vocab":250002,"row_bytes":216}}"#
        )
    }

    fn parse_root(j: &str) -> Result<QueryModelRoot> {
        use crate::json::FromJson;
        QueryModelRoot::from_json(&crate::json::parse(j.as_bytes(), ENTRY_FILE)?, ENTRY_FILE)
    }

    /// Bundles written before `row_order` existed (16-row pages, the tail in id order) still
    /// read, with their old meaning; an order this reader does not know is refused.
    #[test]
    fn old_row_layout_roots_still_read() {
        for json in [root_json("", 16), root_json(r#""row_order":"id","#, 16)] {
            let old = parse_root(&json).unwrap();
            assert_eq!(old.row_order, RowOrder::Id);
            assert_eq!(old.rows.per_page, 16);
            old.check(Some("ab")).unwrap();
            // serde (the wasm reader) agrees.
            let via_serde: QueryModelRoot = serde_json::from_str(&json).unwrap();
            assert_eq!(via_serde, old);
        }
        let new = parse_root(&root_json(r#""row_order":"script","#, 8)).unwrap();
        assert_eq!(new.row_order, RowOrder::Script);
        new.check(Some("ab")).unwrap();
        let e = parse_root(&root_json(r#""row_order":"zipf","#, 8))
            .unwrap_err()
            .to_string();
        assert!(e.contains("jikji.json") && e.contains("rebuild"), "{e}");
        for per in [0, 300] {
            let mut r = new.clone();
            r.rows.per_page = per;
            r.rows.pages = if per == 0 {
                0
            } else {
                250_002usize.div_ceil(per)
            };
            assert!(r.check(Some("ab")).is_err(), "{per} rows per page");
        }
        let mut r = new.clone();
        r.rows.pages += 1;
        assert!(r.check(Some("ab")).is_err());
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

//! The query tokenizer in compact form: multilingual-e5-small's XLM-R SentencePiece **Unigram**
//! tokenizer (Kudo 2018, arXiv:1804.10959; Kudo & Richardson 2018, arXiv:1808.06226) without
//! the `tokenizers` crate and its 17 MB `tokenizer.json`, giving the same ids as
//! `tokenizers` 0.22.2 with that file (`jikji_embed::EmbedTokenizer`; `tests/tokenizer.rs`
//! checks every query of every eval set and random strings).
//!
//! [`compact_tokenizer_json`] (run by `jikji model-pack`) turns `tokenizer.json` into
//! [`TOKENIZER_FILE`]; [`Tokenizer::from_bytes`] reads it. What `tokenizers` does with this
//! `tokenizer.json`, reproduced step by step in [`Tokenizer::encode`]:
//!
//! 1. **added tokens** (`<s>`, `<pad>`, `</s>`, `<unk>`, `<mask>`, all `normalized: false`) are
//!    cut out of the raw text, leftmost-longest, and give their ids directly;
//! 2. each other segment is **normalised**: the `Precompiled` charsmap (SentencePiece's
//!    NFKC-based rules, a double-array trie in `tokenizer.json`) applied per extended grapheme
//!    cluster (Unicode UAX #29, `unicode-segmentation`) as `spm_precompiled` 0.1.4 does — a
//!    grapheme of < 6 bytes is replaced whole by the rule of the **shortest** rule key that is a
//!    prefix of it, else each char by its own rule; keys are read up to a NUL byte — then
//!    runs of 2 or more spaces become one (`Replace " {2,}"`);
//! 3. **Metaspace**: spaces become `▁` (U+2581), a `▁` is put in front unless the segment
//!    already starts with one, and the segment is cut before every `▁`;
//! 4. each piece is split by **Viterbi** over the vocabulary (scores summed in f64, ties kept
//!    by the shortest piece first, a char no piece covers becomes `<unk>` with score
//!    `min score − 10`, consecutive `<unk>`s fused into one);
//! 5. `<s>` … `</s>` around it all (the `TemplateProcessing` post-processor).
//!
//! The charsmap's trie is expanded at pack time into its (key → replacement) rules (224,711
//! keys for e5-small: single code points and many multi-char sequences), so reading it needs
//! no trie code and no bounds on unknown offsets.
//!
//! [`TOKENIZER_FILE`] layout (version 2), integers little-endian, all lengths checked on reading:
//!
//! - magic `JKQT`, u32 version (= 2), u32 vocabulary size `n`, u32 unk id, u32 bos id, u32 eos
//!   id, f64 min score (of all `n` pieces);
//! - u32 number of added tokens; each: u32 id, u8 length, UTF-8 bytes;
//! - u32 number of normalisation rules `r`, sorted by key bytes; the `r` keys front-coded (u8
//!   bytes shared with the previous key, u8 further bytes, those bytes; at most 64 bytes
//!   each), then the `r` replacements (u8 length, UTF-8 bytes; may be empty);
//! - the `n` pieces sorted by their UTF-8 bytes, front-coded: u8 bytes shared with the
//!   previous piece, u8 further bytes, those bytes; then the u32 id of each sorted piece and
//!   the f64 score of each id (in id order), both as **byte planes**: byte 0 of every value,
//!   then byte 1, and so on (`4n` and `8n` bytes).
//!
//! Version 1 (read, no longer written) kept each rule as (u8 key length, key, u8 replacement
//! length, replacement) and the two columns value after value.
//!
//! Sizes for e5-small: `tokenizer.json` 17,082,730 B; version 1 7,344,701 B, 2,632,171 B
//! `gzip -9` (rules 3.06 MB / 0.75 MB gzip, pieces 1.28 / 0.62, ids 1.00 / 0.73, scores 2.00 /
//! 0.53); version 2 the same values with rules 0.14 MB, ids 0.57 MB, scores 0.36 MB deflated
//! (`scripts`-free measurement: `docs/design/query-model-pack.md` §2.3). Scores stay f64:
//! 65,856 of them are not f32 values, and Viterbi sums them in f64.

use unicode_segmentation::UnicodeSegmentation;

use crate::ModelError;

/// Name of the compact tokenizer file in a pack folder.
pub const TOKENIZER_FILE: &str = "tokenizer.bin";
/// Magic of [`TOKENIZER_FILE`].
pub const TOKENIZER_MAGIC: &[u8; 4] = b"JKQT";
/// Version of [`TOKENIZER_FILE`].
pub const TOKENIZER_VERSION: u32 = 2;
/// What E5 puts before a search query.
pub const QUERY_PREFIX: &str = "query: ";
/// `tokenizers`' Unigram penalty for an unknown char (`K_UNK_PENALTY`).
const UNK_PENALTY: f64 = 10.0;
/// Longest normalisation key the trie walk accepts.
const MAX_RULE_KEY: usize = 64;
/// Most normalisation rules the trie walk accepts (e5-small: 224,711).
const MAX_RULES: usize = 1 << 20;

/// The compact tokenizer, loaded: sorted pieces with ids, scores by id, added tokens and the
/// normalisation rules. About 8 MB in memory for e5-small.
#[derive(Clone)]
pub struct Tokenizer {
    /// Sorted pieces' bytes, concatenated; piece `i` is `blob[offs[i]..offs[i + 1]]`.
    blob: Vec<u8>,
    offs: Vec<u32>,
    /// Id of each sorted piece.
    ids: Vec<u32>,
    /// Score of each id.
    scores: Vec<f64>,
    unk: u32,
    bos: u32,
    eos: u32,
    min_score: f64,
    /// Longest piece, in bytes.
    max_piece: usize,
    /// Added tokens: bytes and id.
    added: Vec<(Vec<u8>, u32)>,
    /// Normalisation rules sorted by key: keys and replacements concatenated.
    rule_keys: Vec<u8>,
    rule_key_offs: Vec<u32>,
    rule_vals: String,
    rule_val_offs: Vec<u32>,
    max_rule_key: usize,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("pieces", &self.ids.len())
            .field("rules", &(self.rule_key_offs.len() - 1))
            .field("added", &self.added.len())
            .finish_non_exhaustive()
    }
}

struct Cur<'a> {
    b: &'a [u8],
    p: usize,
    file: &'a str,
}

impl<'a> Cur<'a> {
    fn bad(&self, at: usize, msg: String) -> ModelError {
        ModelError::Pack {
            file: self.file.to_string(),
            offset: at,
            msg,
        }
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ModelError> {
        if self.b.len() - self.p < n {
            return Err(self.bad(
                self.p,
                format!("{what}: needs {n} bytes, {} left", self.b.len() - self.p),
            ));
        }
        let s = &self.b[self.p..self.p + n];
        self.p += n;
        Ok(s)
    }
    fn u8(&mut self, what: &str) -> Result<usize, ModelError> {
        Ok(self.take(1, what)?[0] as usize)
    }
    fn u32(&mut self, what: &str) -> Result<u32, ModelError> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }
    fn f64(&mut self, what: &str) -> Result<f64, ModelError> {
        Ok(f64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    /// A count of items of at least `min_item` bytes each: bounded by the bytes left, so a
    /// hostile count cannot make us allocate more than the file.
    fn count(&mut self, what: &str, min_item: usize) -> Result<usize, ModelError> {
        let at = self.p;
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_item) > self.b.len() - self.p {
            return Err(self.bad(
                at,
                format!(
                    "{what} = {n}, more than the {} bytes left can hold",
                    self.b.len() - self.p
                ),
            ));
        }
        Ok(n)
    }
    fn utf8(&mut self, n: usize, what: &str) -> Result<&'a str, ModelError> {
        let at = self.p;
        let b = self.take(n, what)?;
        std::str::from_utf8(b).map_err(|_| self.bad(at, format!("{what} is not UTF-8")))
    }
}

impl Tokenizer {
    /// Parses [`TOKENIZER_FILE`] bytes (`file` names it in errors). Every count is bounded by
    /// the bytes left before anything is allocated; pieces must be strictly sorted, ids below
    /// the vocabulary size, each used once. Errors: [`ModelError::Pack`] with the byte offset.
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Self, ModelError> {
        let mut c = Cur {
            b: bytes,
            p: 0,
            file,
        };
        if c.take(4, "magic")? != TOKENIZER_MAGIC {
            return Err(c.bad(0, "bad magic, expected \"JKQT\"".into()));
        }
        let v = c.u32("version")?;
        if v != 1 && v != TOKENIZER_VERSION {
            return Err(c.bad(4, format!("version {v}, expected 1 or {TOKENIZER_VERSION}")));
        }
        let v2 = v == 2;
        // Each piece takes at least 2 + 4 + 8 bytes.
        let n = c.count("vocabulary size", 14)?;
        if n == 0 {
            return Err(c.bad(8, "vocabulary size 0".into()));
        }
        let id = |c: &mut Cur, what: &str| -> Result<u32, ModelError> {
            let at = c.p;
            let v = c.u32(what)?;
            if v as usize >= n {
                return Err(c.bad(at, format!("{what} {v} is not below the {n} pieces")));
            }
            Ok(v)
        };
        let unk = id(&mut c, "unk id")?;
        let bos = id(&mut c, "bos id")?;
        let eos = id(&mut c, "eos id")?;
        let at = c.p;
        let min_score = c.f64("min score")?;
        if !min_score.is_finite() {
            return Err(c.bad(at, format!("min score {min_score}")));
        }
        let n_added = c.count("added tokens", 6)?;
        let mut added = Vec::with_capacity(n_added);
        for _ in 0..n_added {
            let i = id(&mut c, "added token id")?;
            let at = c.p;
            let len = c.u8("added token length")?;
            let s = c.utf8(len, "added token")?;
            if s.is_empty() {
                return Err(c.bad(at, "empty added token".into()));
            }
            added.push((s.as_bytes().to_vec(), i));
        }
        let n_rules = c.count("normalisation rules", 3)?;
        let (mut rule_keys, mut rule_key_offs) = (Vec::new(), Vec::with_capacity(n_rules + 1));
        let (mut rule_vals, mut rule_val_offs) = (String::new(), Vec::with_capacity(n_rules + 1));
        rule_key_offs.push(0);
        rule_val_offs.push(0);
        let mut max_rule_key = 0;
        for r in 0..n_rules {
            let at = c.p;
            let (key, kl) = if v2 {
                // Front-coded against the previous key.
                let shared = c.u8("rule key shared bytes")?;
                let more = c.u8("rule key more bytes")?;
                let prev_start = rule_key_offs[r.saturating_sub(1)] as usize;
                if shared > rule_keys.len() - prev_start {
                    return Err(c.bad(at, format!("normalisation rule {r}: shares {shared} bytes with a shorter previous key")));
                }
                let mut k = rule_keys[prev_start..prev_start + shared].to_vec();
                k.extend_from_slice(c.take(more, "rule key")?);
                let kl = k.len();
                (k, kl)
            } else {
                let kl = c.u8("rule key length")?;
                (c.take(kl, "rule key")?.to_vec(), kl)
            };
            let prev = &rule_keys[rule_key_offs[r.saturating_sub(1)] as usize..];
            if kl == 0 || kl > MAX_RULE_KEY || key.contains(&0) || (r > 0 && prev >= key.as_slice())
            {
                return Err(c.bad(
                    at,
                    format!(
                        "normalisation rule {r}: key empty, too long, with a NUL, or not after the previous"
                    ),
                ));
            }
            max_rule_key = max_rule_key.max(kl);
            rule_keys.extend_from_slice(&key);
            rule_key_offs.push(rule_keys.len() as u32);
            if !v2 {
                let vl = c.u8("rule replacement length")?;
                rule_vals.push_str(c.utf8(vl, "rule replacement")?);
                rule_val_offs.push(rule_vals.len() as u32);
            }
        }
        if v2 {
            // The replacements follow the keys (they compress better apart).
            for _ in 0..n_rules {
                let vl = c.u8("rule replacement length")?;
                rule_vals.push_str(c.utf8(vl, "rule replacement")?);
                rule_val_offs.push(rule_vals.len() as u32);
            }
        }
        let mut blob = Vec::new();
        let mut offs = Vec::with_capacity(n + 1);
        offs.push(0u32);
        let mut max_piece = 0;
        for i in 0..n {
            let at = c.p;
            let shared = c.u8("piece shared bytes")?;
            let more = c.u8("piece more bytes")?;
            let prev_start = offs[i.saturating_sub(1)] as usize;
            let prev_len = blob.len() - prev_start;
            if shared > prev_len || shared + more == 0 {
                return Err(c.bad(
                    at,
                    format!("piece {i}: shares {shared} bytes with a {prev_len}-byte previous piece, adds {more}"),
                ));
            }
            let tail = c.take(more, "piece bytes")?;
            let start = blob.len();
            blob.extend_from_within(prev_start..prev_start + shared);
            blob.extend_from_slice(tail);
            if std::str::from_utf8(&blob[start..]).is_err()
                || (i > 0 && blob[prev_start..start] >= blob[start..])
            {
                return Err(c.bad(
                    at,
                    format!("piece {i}: not UTF-8 or not after the previous piece"),
                ));
            }
            max_piece = max_piece.max(blob.len() - start);
            offs.push(blob.len() as u32);
        }
        // Version 2 stores the id and score columns as byte planes (byte 0 of every value,
        // then byte 1, …): the same values, a third smaller after deflate.
        let ids_at = c.p;
        let id_col = c.take(4 * n, "piece ids")?;
        let scores_at = c.p;
        let score_col = c.take(8 * n, "scores")?;
        if c.p != bytes.len() {
            return Err(c.bad(c.p, format!("{} bytes after the scores", bytes.len() - c.p)));
        }
        let (id_col, score_col) = if v2 {
            (unplane(id_col, 4), unplane(score_col, 8))
        } else {
            (id_col.to_vec(), score_col.to_vec())
        };
        let mut ids = Vec::with_capacity(n);
        let mut seen = vec![false; n];
        for (k, b) in id_col.chunks_exact(4).enumerate() {
            let i = u32::from_le_bytes(b.try_into().unwrap());
            let at = ids_at + 4 * k;
            if i as usize >= n {
                return Err(c.bad(at, format!("piece id {i} is not below the {n} pieces")));
            }
            if std::mem::replace(&mut seen[i as usize], true) {
                return Err(c.bad(at, format!("piece id {i} used twice")));
            }
            ids.push(i);
        }
        let mut scores = Vec::with_capacity(n);
        for (k, b) in score_col.chunks_exact(8).enumerate() {
            let s = f64::from_le_bytes(b.try_into().unwrap());
            if !s.is_finite() || s < min_score {
                return Err(c.bad(
                    scores_at + 8 * k,
                    format!("score {s} (min score {min_score})"),
                ));
            }
            scores.push(s);
        }
        Ok(Tokenizer {
            blob,
            offs,
            ids,
            scores,
            unk,
            bos,
            eos,
            min_score,
            max_piece,
            added,
            rule_keys,
            rule_key_offs,
            rule_vals,
            rule_val_offs,
            max_rule_key,
        })
    }

    /// Pieces in the vocabulary (250,002 for e5-small).
    pub fn vocab_size(&self) -> usize {
        self.ids.len()
    }

    fn piece(&self, i: usize) -> &[u8] {
        &self.blob[self.offs[i] as usize..self.offs[i + 1] as usize]
    }

    /// The script class of every id's piece (`vocab_size()` entries, by id;
    /// [`jikji_format::paged::qmodel::script_class`]): what orders the row map's tail of a
    /// bundle's row pages ([`jikji_format::paged::qmodel::RowOrder::Script`]). Ids without
    /// a piece (none in a well-formed file) get class 0.
    pub fn script_classes(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.ids.len()];
        for (i, &id) in self.ids.iter().enumerate() {
            if let Some(c) = out.get_mut(id as usize) {
                *c = jikji_format::paged::qmodel::script_class(self.piece(i));
            }
        }
        out
    }

    /// The id of piece `s`, if it is one.
    pub fn piece_id(&self, s: &str) -> Option<u32> {
        let s = s.as_bytes();
        let (mut lo, mut hi) = (0, self.ids.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.piece(mid).cmp(s) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(self.ids[mid]),
            }
        }
        None
    }

    /// `spm_precompiled`'s `transform`: the replacement of the shortest rule key that is a
    /// prefix of `chunk` (read up to its first NUL byte).
    fn rule(&self, chunk: &[u8]) -> Option<&str> {
        let chunk = match chunk.iter().position(|&b| b == 0) {
            Some(z) => &chunk[..z],
            None => chunk,
        };
        let n = self.rule_key_offs.len() - 1;
        for len in 1..=chunk.len().min(self.max_rule_key) {
            let want = &chunk[..len];
            let (mut lo, mut hi) = (0, n);
            while lo < hi {
                let mid = (lo + hi) / 2;
                let k = &self.rule_keys
                    [self.rule_key_offs[mid] as usize..self.rule_key_offs[mid + 1] as usize];
                match k.cmp(want) {
                    std::cmp::Ordering::Less => lo = mid + 1,
                    std::cmp::Ordering::Greater => hi = mid,
                    std::cmp::Ordering::Equal => {
                        return Some(
                            &self.rule_vals[self.rule_val_offs[mid] as usize
                                ..self.rule_val_offs[mid + 1] as usize],
                        )
                    }
                }
            }
        }
        None
    }

    /// The normaliser: charsmap rules per grapheme, then runs of spaces collapsed.
    pub fn normalize(&self, text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        for g in text.graphemes(true) {
            if g.len() < 6 {
                if let Some(r) = self.rule(g.as_bytes()) {
                    out.push_str(r);
                    continue;
                }
            }
            for (i, ch) in g.char_indices() {
                match self.rule(&g.as_bytes()[i..i + ch.len_utf8()]) {
                    Some(r) => out.push_str(r),
                    None => out.push(ch),
                }
            }
        }
        // Replace " {2,}" → " ".
        if out.contains("  ") {
            let mut s = String::with_capacity(out.len());
            let mut prev_space = false;
            for ch in out.chars() {
                if ch == ' ' && prev_space {
                    continue;
                }
                prev_space = ch == ' ';
                s.push(ch);
            }
            out = s;
        }
        out
    }

    /// Viterbi over one Metaspace piece, appending its ids to `out`.
    fn viterbi(&self, s: &str, out: &mut Vec<u32>) {
        #[derive(Clone, Copy)]
        struct Best {
            id: u32,
            score: f64,
            start: Option<usize>,
        }
        let b = s.as_bytes();
        let n = b.len();
        let unk_score = self.min_score - UNK_PENALTY;
        let mut best = vec![
            Best {
                id: 0,
                score: 0.0,
                start: None
            };
            n + 1
        ];
        let mut i = 0;
        while i < n {
            let here = best[i].score;
            let mblen = s[i..].chars().next().map_or(1, char::len_utf8);
            let mut single = false;
            // Pieces that are prefixes of b[i..], shortest first: narrow the sorted range to
            // the pieces starting with b[i..i + k] for k = 1, 2, …; the one of length k, if
            // any, is the range's first entry.
            let (mut lo, mut hi) = (0, self.ids.len());
            for k in 1..=(n - i).min(self.max_piece) {
                let c = b[i + k - 1];
                let before = |p: &[u8]| p.len() < k || p[k - 1] < c;
                let upto = |p: &[u8]| p.len() < k || p[k - 1] <= c;
                let new_lo = lo + partition(lo, hi, |j| before(self.piece(j)));
                hi = lo + partition(lo, hi, |j| upto(self.piece(j)));
                lo = new_lo;
                if lo >= hi {
                    break;
                }
                if self.piece(lo).len() == k {
                    let id = self.ids[lo];
                    let cand = self.scores[id as usize] + here;
                    let t = &mut best[i + k];
                    if t.start.is_none() || cand > t.score {
                        *t = Best {
                            id,
                            score: cand,
                            start: Some(i),
                        };
                    }
                    if k == mblen {
                        single = true;
                    }
                }
            }
            if !single {
                let cand = unk_score + here;
                let t = &mut best[i + mblen];
                if t.start.is_none() || cand > t.score {
                    *t = Best {
                        id: self.unk,
                        score: cand,
                        start: Some(i),
                    };
                }
            }
            i += mblen;
        }
        // Back to front; consecutive <unk> nodes fuse, and the fused text is looked up.
        let first = out.len();
        let mut end = n;
        let mut unk_end: Option<usize> = None;
        while end > 0 {
            let node = best[end];
            let start = node.start.expect("every char boundary is reached");
            if node.id == self.unk {
                unk_end.get_or_insert(end);
            } else {
                if let Some(ue) = unk_end.take() {
                    out.push(self.piece_id(&s[end..ue]).unwrap_or(self.unk));
                }
                out.push(node.id);
            }
            end = start;
        }
        if let Some(ue) = unk_end {
            out.push(self.piece_id(&s[0..ue]).unwrap_or(self.unk));
        }
        out[first..].reverse();
    }

    /// Token ids of `text` exactly as `tokenizers` gives them with `add_special_tokens`:
    /// `<s>`, the pieces, `</s>`; not truncated. Any string is accepted.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = vec![self.bos];
        let b = text.as_bytes();
        let (mut i, mut start) = (0, 0);
        while i < b.len() {
            let hit = self
                .added
                .iter()
                .filter(|(t, _)| b[i..].starts_with(t))
                .max_by_key(|(t, _)| t.len());
            match hit {
                Some((t, id)) => {
                    if start < i {
                        self.encode_segment(&text[start..i], &mut ids);
                    }
                    ids.push(*id);
                    i += t.len();
                    start = i;
                }
                None => i += 1,
            }
        }
        if start < b.len() {
            self.encode_segment(&text[start..], &mut ids);
        }
        ids.push(self.eos);
        ids
    }

    fn encode_segment(&self, seg: &str, ids: &mut Vec<u32>) {
        let norm = self.normalize(seg);
        if norm.is_empty() {
            return;
        }
        let mut m = String::with_capacity(norm.len() + 3);
        if !norm.starts_with([' ', '▁']) {
            m.push('▁');
        }
        m.push_str(&norm.replace(' ', "▁"));
        let mut from = 0;
        for (at, _) in m.match_indices('▁') {
            if at > from {
                self.viterbi(&m[from..at], ids);
            }
            from = at;
        }
        if from < m.len() {
            self.viterbi(&m[from..], ids);
        }
    }

    /// Ids of a search query as the model sees them: [`QUERY_PREFIX`] + `query`, encoded,
    /// truncated to [`crate::MAX_TOKENS`] keeping `</s>` last (as
    /// `jikji_embed::EmbedTokenizer::token_ids(query, Prefix::Query)`).
    pub fn query_ids(&self, query: &str) -> Vec<u32> {
        let mut ids = self.encode(&format!("{QUERY_PREFIX}{query}"));
        if ids.len() > crate::MAX_TOKENS {
            ids.truncate(crate::MAX_TOKENS - 1);
            ids.push(self.eos);
        }
        ids
    }
}

/// Number of `j` in `lo..hi` for which `pred(j)` holds, `pred` being true then false.
fn partition(lo: usize, hi: usize, pred: impl Fn(usize) -> bool) -> usize {
    let (mut a, mut b) = (lo, hi);
    while a < b {
        let mid = (a + b) / 2;
        if pred(mid) {
            a = mid + 1;
        } else {
            b = mid;
        }
    }
    a - lo
}

/// Why a `tokenizer.json` cannot be compacted (`file` names it).
fn unsupported(file: &str, msg: impl Into<String>) -> ModelError {
    ModelError::TokenizerJson {
        file: file.to_string(),
        msg: msg.into(),
    }
}

/// The rules of a SentencePiece `precompiled_charsmap` (u32 trie bytes `t`, `t` bytes of
/// double-array units, then the NUL-separated replacement strings), found by walking every
/// transition that `spm_precompiled`'s `common_prefix_search` could take. Returns (key,
/// replacement) pairs sorted by key. Hostile maps give errors, not panics: every index is
/// checked, keys are at most [`MAX_RULE_KEY`] bytes, at most [`MAX_RULES`] rules.
pub fn charsmap_rules(map: &[u8]) -> Result<Vec<(Vec<u8>, String)>, String> {
    if map.len() < 4 {
        return Err(format!("{} bytes, shorter than its header", map.len()));
    }
    let trie_bytes = u32::from_le_bytes(map[..4].try_into().unwrap()) as usize;
    if !trie_bytes.is_multiple_of(4) || trie_bytes > map.len() - 4 {
        return Err(format!(
            "trie of {trie_bytes} bytes in a {}-byte map",
            map.len()
        ));
    }
    let units: Vec<usize> = map[4..4 + trie_bytes]
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()) as usize)
        .collect();
    let normalized = &map[4 + trie_bytes..];
    // spm_precompiled's unit accessors.
    let has_leaf = |u: usize| (u >> 8) & 1 == 1;
    let value = |u: usize| u & ((1usize << 31) - 1);
    let label = |u: usize| u & ((1usize << 31) | 0xFF);
    let offset = |u: usize| (u >> 10) << ((u & (1usize << 9)) >> 6);
    let unit = |i: usize| {
        units
            .get(i)
            .copied()
            .ok_or_else(|| format!("trie index {i} outside its {} units", units.len()))
    };
    let mut rules = Vec::new();
    let root = unit(0)?;
    let mut stack = vec![(offset(root), Vec::new())];
    while let Some((pos, key)) = stack.pop() {
        if key.len() >= MAX_RULE_KEY {
            return Err(format!("a key longer than {MAX_RULE_KEY} bytes"));
        }
        for c in 1..=255u8 {
            let q = pos ^ c as usize;
            let Some(&u) = units.get(q) else { continue };
            if label(u) != c as usize {
                continue;
            }
            let next = q ^ offset(u);
            let mut k = key.clone();
            k.push(c);
            if has_leaf(u) {
                let v = value(unit(next)?);
                let tail = normalized
                    .get(v..)
                    .ok_or_else(|| format!("replacement offset {v} outside the strings"))?;
                let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
                let r = std::str::from_utf8(&tail[..end])
                    .map_err(|_| format!("replacement at {v} is not UTF-8"))?;
                rules.push((k.clone(), r.to_string()));
                if rules.len() > MAX_RULES {
                    return Err(format!("more than {MAX_RULES} rules"));
                }
            }
            stack.push((next, k));
        }
    }
    rules.sort();
    rules.dedup_by(|a, b| a.0 == b.0);
    Ok(rules)
}

/// Makes [`TOKENIZER_FILE`] bytes from a Hugging Face `tokenizer.json` (`file` names it in
/// errors). Only the shape multilingual-e5-small's file has is accepted — Unigram without
/// byte fallback; normaliser `Precompiled`, optionally followed by `Replace " {2,}" → " "`;
/// pre-tokenizer `Metaspace` with `▁`, prepend scheme `always`, split on; post-processor
/// `<s> $A </s>`; added tokens not normalised, without strip or single-word rules — anything
/// else is [`ModelError::TokenizerJson`] naming what differs, since these functions would not
/// reproduce it.
pub fn compact_tokenizer_json(json: &[u8], file: &str) -> Result<Vec<u8>, ModelError> {
    use serde_json::Value;
    let v: Value =
        serde_json::from_slice(json).map_err(|e| unsupported(file, format!("not JSON: {e}")))?;
    let model = &v["model"];
    if model["type"] != "Unigram" {
        return Err(unsupported(
            file,
            format!("model type {}, expected Unigram", model["type"]),
        ));
    }
    if model["byte_fallback"].as_bool() == Some(true) {
        return Err(unsupported(file, "Unigram byte_fallback is not supported"));
    }
    let vocab = model["vocab"]
        .as_array()
        .ok_or_else(|| unsupported(file, "model.vocab is not an array"))?;
    let n = vocab.len();
    if n == 0 || n > u32::MAX as usize / 2 {
        return Err(unsupported(file, format!("{n} pieces")));
    }
    let mut pieces: Vec<(&str, u32)> = Vec::with_capacity(n);
    let mut scores = Vec::with_capacity(n);
    for (i, e) in vocab.iter().enumerate() {
        let (Some(p), Some(s)) = (e[0].as_str(), e[1].as_f64()) else {
            return Err(unsupported(
                file,
                format!("model.vocab[{i}] is not [piece, score]"),
            ));
        };
        if p.is_empty() || p.len() > 255 || !s.is_finite() {
            return Err(unsupported(
                file,
                format!(
                    "model.vocab[{i}]: piece of {} bytes (1..=255) or score {s}",
                    p.len()
                ),
            ));
        }
        pieces.push((p, i as u32));
        scores.push(s);
    }
    let unk = model["unk_id"]
        .as_u64()
        .filter(|&u| (u as usize) < n)
        .ok_or_else(|| unsupported(file, "model.unk_id missing or outside the vocabulary"))?
        as u32;
    pieces.sort();
    if let Some(w) = pieces.windows(2).find(|w| w[0].0 == w[1].0) {
        // tokenizers maps a repeated piece to its last id; not needed for e5-small.
        return Err(unsupported(
            file,
            format!("piece {:?} appears twice", w[0].0),
        ));
    }
    let min_score = scores.iter().copied().fold(f64::INFINITY, f64::min);

    // Normaliser.
    let norm = &v["normalizer"];
    let steps: Vec<&Value> = match norm["type"].as_str() {
        Some("Sequence") => norm["normalizers"]
            .as_array()
            .map(|a| a.iter().collect())
            .unwrap_or_default(),
        Some(_) => vec![norm],
        None => vec![],
    };
    let ok_replace = |s: &Value| {
        s["type"] == "Replace" && s["pattern"]["Regex"] == " {2,}" && s["content"] == " "
    };
    let charsmap = match steps.as_slice() {
        [p, r] if p["type"] == "Precompiled" && ok_replace(r) => p,
        _ => {
            return Err(unsupported(
                file,
                format!(
                    "normalizer {norm}: expected Precompiled, then Replace \" {{2,}}\" → \" \""
                ),
            ))
        }
    };
    let map = charsmap["precompiled_charsmap"]
        .as_str()
        .ok_or_else(|| unsupported(file, "Precompiled without precompiled_charsmap"))
        .and_then(|s| {
            base64::decode(s).map_err(|e| unsupported(file, format!("precompiled_charsmap: {e}")))
        })?;
    let rules = charsmap_rules(&map)
        .map_err(|e| unsupported(file, format!("precompiled_charsmap: {e}")))?;

    // Pre-tokenizer and post-processor.
    let pt = &v["pre_tokenizer"];
    let prepend_always = pt["prepend_scheme"].as_str().unwrap_or("always") == "always"
        && pt["add_prefix_space"].as_bool() != Some(false);
    if pt["type"] != "Metaspace"
        || pt["replacement"] != "▁"
        || !prepend_always
        || pt["split"].as_bool() == Some(false)
    {
        return Err(unsupported(
            file,
            format!("pre_tokenizer {pt}: expected Metaspace \"▁\", prepend always, split"),
        ));
    }
    let pp = &v["post_processor"];
    let special = |name: &str| -> Option<u32> {
        let ids = pp["special_tokens"][name]["ids"].as_array()?;
        match ids.as_slice() {
            [id] => id.as_u64().filter(|&i| (i as usize) < n).map(|i| i as u32),
            _ => None,
        }
    };
    let single = pp["single"].as_array();
    let shape_ok = single.is_some_and(|s| {
        s.len() == 3
            && s[0]["SpecialToken"]["id"] == "<s>"
            && s[1]["Sequence"]["id"] == "A"
            && s[2]["SpecialToken"]["id"] == "</s>"
    });
    let (Some(bos), Some(eos), true) = (
        special("<s>"),
        special("</s>"),
        shape_ok && pp["type"] == "TemplateProcessing",
    ) else {
        return Err(unsupported(
            file,
            "post_processor: expected TemplateProcessing <s> $A </s>",
        ));
    };

    // Added tokens.
    let mut added = Vec::new();
    for (i, t) in v["added_tokens"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let (Some(content), Some(id)) = (t["content"].as_str(), t["id"].as_u64()) else {
            return Err(unsupported(
                file,
                format!("added_tokens[{i}] has no content or id"),
            ));
        };
        let plain = t["normalized"] == false
            && t["lstrip"] != true
            && t["rstrip"] != true
            && t["single_word"] != true;
        if !plain || content.is_empty() || content.len() > 255 || id as usize >= n {
            return Err(unsupported(
                file,
                format!("added_tokens[{i}] {content:?}: only non-normalised tokens without strip or single-word rules, with an id in the vocabulary, are supported"),
            ));
        }
        added.push((content, id as u32));
    }

    let mut out = Vec::with_capacity(4 * 1024 * 1024);
    out.extend_from_slice(TOKENIZER_MAGIC);
    for x in [TOKENIZER_VERSION, n as u32, unk, bos, eos] {
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.extend_from_slice(&min_score.to_le_bytes());
    out.extend_from_slice(&(added.len() as u32).to_le_bytes());
    for (c, id) in &added {
        out.extend_from_slice(&id.to_le_bytes());
        out.push(c.len() as u8);
        out.extend_from_slice(c.as_bytes());
    }
    out.extend_from_slice(&(rules.len() as u32).to_le_bytes());
    let mut prev: &[u8] = &[];
    for (k, r) in &rules {
        if r.len() > 255 || k.len() > MAX_RULE_KEY {
            return Err(unsupported(
                file,
                format!("a normalisation rule of {} / {} bytes", k.len(), r.len()),
            ));
        }
        let shared = prev
            .iter()
            .zip(k.iter())
            .take_while(|(a, b)| a == b)
            .count();
        out.push(shared as u8);
        out.push((k.len() - shared) as u8);
        out.extend_from_slice(&k[shared..]);
        prev = k;
    }
    for (_, r) in &rules {
        out.push(r.len() as u8);
        out.extend_from_slice(r.as_bytes());
    }
    let mut prev: &[u8] = &[];
    for (p, _) in &pieces {
        let p = p.as_bytes();
        let shared = prev.iter().zip(p).take_while(|(a, b)| a == b).count();
        out.push(shared as u8);
        out.push((p.len() - shared) as u8);
        out.extend_from_slice(&p[shared..]);
        prev = p;
    }
    let ids: Vec<u8> = pieces.iter().flat_map(|(_, id)| id.to_le_bytes()).collect();
    out.extend_from_slice(&plane(&ids, 4));
    let sc: Vec<u8> = scores.iter().flat_map(|s| s.to_le_bytes()).collect();
    out.extend_from_slice(&plane(&sc, 8));
    Ok(out)
}

/// Byte planes of `w`-byte values: byte 0 of every value, then byte 1, … (`b.len()` is a
/// multiple of `w`).
fn plane(b: &[u8], w: usize) -> Vec<u8> {
    (0..w)
        .flat_map(|j| b.iter().skip(j).step_by(w).copied())
        .collect()
}

/// The inverse of [`plane`].
fn unplane(b: &[u8], w: usize) -> Vec<u8> {
    let n = b.len() / w;
    let mut out = vec![0u8; b.len()];
    for j in 0..w {
        for (i, &x) in b[j * n..(j + 1) * n].iter().enumerate() {
            out[i * w + j] = x;
        }
    }
    out
}

//! Index stage: chunk records → the term dictionary (`terms.fst`), BM25 postings
//! (`postings.bin`) and the Hangul ↔ Hanja reading table (`hanja.fst`).
//!
//! The postings are accumulated by [`PostingsWriter`] (compact, delta-coded per term) and
//! the chunks are analyzed on all cores in batches, so that a 1M-chunk corpus indexes in
//! bounded time and a few bytes per posting (`docs/design/scale-1m.md`).

use std::collections::HashMap;

use jikji_format::analyzer::{self, Analyzer, Script};
use jikji_format::codec::put_varint;
use jikji_format::hanja::write_hanja_fst;
use jikji_format::postings::write_lists;
use jikji_format::ChunkRecord;

use super::BundleSettings;
use crate::error::Result;

/// The lexical files of a bundle.
pub struct Indexed {
    /// `terms.fst` bytes.
    pub terms_fst: Vec<u8>,
    /// `postings.bin` bytes.
    pub postings: Vec<u8>,
    /// Number of distinct terms.
    pub terms: usize,
    /// `hanja.fst` bytes: `None` when `settings.hanja` is off or the corpus has no Han or
    /// Hangul text.
    pub hanja: Option<Vec<u8>>,
}

/// Indexes `records` (doc id = index) with the current analyzer version and
/// `settings.analyzer`, and makes `hanja.fst` if `settings.hanja`.
pub fn index(records: &[ChunkRecord], settings: &BundleSettings) -> Result<Indexed> {
    let analyzer = Analyzer::new(analyzer::ANALYZER_VERSION, settings.analyzer)?;
    let (terms_fst, postings, terms) = index_records(records, &analyzer)?;
    let hanja = if settings.hanja {
        hanja_table(records, &analyzer)?
    } else {
        None
    };
    Ok(Indexed {
        terms_fst,
        postings,
        terms,
        hanja,
    })
}

/// Builds the term dictionary and postings of `records` (in order: doc id = index) with
/// `analyzer`, each chunk indexed under [`ChunkRecord::indexed_text`] (title and heading
/// path, then text). Returns `(terms.fst, postings.bin, number of terms)`.
/// The chunks are analyzed on all cores ([`crate::ingest::default_threads`]) in batches of
/// [`ANALYZE_BATCH`] and added in doc order, so the bytes do not depend on the number of
/// threads.
pub fn index_records(
    records: &[ChunkRecord],
    analyzer: &Analyzer,
) -> Result<(Vec<u8>, Vec<u8>, usize)> {
    let threads = super::default_threads().max(1);
    let mut index = PostingsWriter::new();
    for batch in records.chunks(ANALYZE_BATCH) {
        let per = batch.len().div_ceil(threads).max(1);
        let analyzed: Vec<Vec<Vec<String>>> = std::thread::scope(|s| {
            let handles: Vec<_> = batch
                .chunks(per)
                .map(|part| {
                    s.spawn(move || {
                        part.iter()
                            .map(|r| analyzer.analyze(&r.indexed_text()))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
                .collect()
        });
        for terms in analyzed.iter().flatten() {
            index.add_doc(terms);
        }
    }
    let terms = index.num_terms();
    let (terms_fst, postings) = index.finish()?;
    Ok((terms_fst, postings, terms))
}

/// Chunks analyzed per batch by [`index_records`] (the batch's terms are held at once).
pub const ANALYZE_BATCH: usize = 4096;

/// One term's postings as they accumulate: `(doc_delta, tf)` varint pairs, exactly the
/// bytes of its list in `postings.bin` after the `df` varint.
#[derive(Default)]
struct TermList {
    bytes: Vec<u8>,
    df: u32,
    last: u32,
}

/// Accumulates analyzed chunks and writes `terms.fst` + `postings.bin` (format 1 layout,
/// FORMAT.md), byte for byte what `jikji_format::postings::LexicalIndexWriter` writes,
/// in about a quarter of its memory: each term's list is kept delta- and varint-coded
/// (2–3 bytes per posting instead of 8 plus the ordered map's key comparisons), terms are
/// looked up by hash and sorted once at [`PostingsWriter::finish`].
#[derive(Default)]
pub struct PostingsWriter {
    ids: HashMap<Box<str>, u32>,
    lists: Vec<TermList>,
    doc_lens: Vec<u32>,
    tf: HashMap<u32, u32>,
}

impl PostingsWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next chunk (doc id = the number of chunks added before it) with its
    /// analyzed terms (repetitions count as term frequency). Returns the doc id.
    pub fn add_doc(&mut self, terms: &[String]) -> u32 {
        let doc = self.doc_lens.len() as u32;
        self.tf.clear();
        for t in terms {
            let id = match self.ids.get(t.as_str()) {
                Some(&id) => id,
                None => {
                    let id = self.lists.len() as u32;
                    self.ids.insert(t.as_str().into(), id);
                    self.lists.push(TermList::default());
                    id
                }
            };
            *self.tf.entry(id).or_default() += 1;
        }
        for (&id, &n) in &self.tf {
            let l = &mut self.lists[id as usize];
            let prev = if l.df == 0 { 0 } else { l.last };
            put_varint(&mut l.bytes, u64::from(doc - prev));
            put_varint(&mut l.bytes, u64::from(n));
            l.df += 1;
            l.last = doc;
        }
        self.doc_lens.push(terms.len() as u32);
        doc
    }

    /// Number of distinct terms so far.
    pub fn num_terms(&self) -> usize {
        self.lists.len()
    }

    /// Serialises into `(terms.fst bytes, postings.bin bytes)`, terms in byte order;
    /// each list is decoded only when it is written, one at a time.
    pub fn finish(self) -> Result<(Vec<u8>, Vec<u8>)> {
        let PostingsWriter {
            ids,
            mut lists,
            doc_lens,
            ..
        } = self;
        let mut order: Vec<(Box<str>, u32)> = ids.into_iter().collect();
        order.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let decoded = order.into_iter().map(|(term, id)| {
            let l = std::mem::take(&mut lists[id as usize]);
            (String::from(term), decode_pairs(&l.bytes, l.df))
        });
        Ok(write_lists(&doc_lens, decoded)?)
    }
}

/// The `(doc, tf)` pairs of `df` varint `(doc_delta, tf)` pairs written by
/// [`PostingsWriter::add_doc`] (well-formed by construction).
fn decode_pairs(bytes: &[u8], df: u32) -> Vec<(u32, u32)> {
    let mut out = Vec::with_capacity(df as usize);
    let mut it = bytes.iter();
    let mut next = || {
        let (mut v, mut shift) = (0u64, 0);
        for &b in it.by_ref() {
            v |= u64::from(b & 0x7F) << shift;
            if b < 0x80 {
                break;
            }
            shift += 7;
        }
        v as u32
    };
    let mut doc = 0u32;
    for _ in 0..df {
        doc += next();
        out.push((doc, next()));
    }
    out
}

/// The `hanja.fst` bytes `records` need, or `None` for a corpus without Han or Hangul
/// text. Reading pairs come from the `hanja` crate's table (libhangul's `hanja.txt`,
/// BSD-3-Clause; the crate is MIT), each Hanja folded as `analyzer` folds text: Hangul →
/// Hanja pairs only for Han characters the corpus has, Hanja → Hangul pairs only for
/// Hangul syllables the corpus has, so the table holds only expansions that can match.
pub fn hanja_table(records: &[ChunkRecord], analyzer: &Analyzer) -> Result<Option<Vec<u8>>> {
    let mut han = std::collections::HashSet::new();
    let mut hangul = std::collections::HashSet::new();
    for r in records {
        for ch in analyzer.normalize(&r.text).chars() {
            match analyzer::script_of(ch) {
                Script::Han => han.insert(ch),
                Script::Hangul => hangul.insert(ch),
                _ => false,
            };
        }
    }
    if han.is_empty() && hangul.is_empty() {
        return Ok(None);
    }
    let (mut to_hanja, mut to_hangul) = (Vec::new(), Vec::new());
    for syllable in '\u{AC00}'..='\u{D7A3}' {
        if !hangul.contains(&syllable) && han.is_empty() {
            continue;
        }
        let Some(entries) = hanja::get(syllable) else {
            continue;
        };
        for &(h, _) in entries {
            let norm = analyzer.normalize(&h.to_string());
            let mut folded = norm.chars();
            let (Some(f), None) = (folded.next(), folded.next()) else {
                continue;
            };
            if han.contains(&f) {
                to_hanja.push((syllable, f));
            }
            if hangul.contains(&syllable) {
                to_hangul.push((syllable, f));
            }
        }
    }
    if to_hanja.is_empty() && to_hangul.is_empty() {
        return Ok(None);
    }
    Ok(Some(write_hanja_fst(&to_hanja, &to_hangul)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jikji_format::postings::LexicalIndexWriter;
    use proptest::prelude::*;

    proptest! {
        /// The compact writer's files are byte for byte the format crate's reference writer's.
        #[test]
        fn postings_writer_equals_lexical_index_writer(
            docs in prop::collection::vec(
                prop::collection::vec("[a-e]{1,3}|[가-각]{2}|[\u{4e00}-\u{4e03}]", 0..40),
                0..60,
            ),
            big_doc in 0u32..200_000,
        ) {
            let mut ours = PostingsWriter::new();
            let mut reference = LexicalIndexWriter::new();
            for d in &docs {
                ours.add_doc(d);
                reference.add_doc(d);
            }
            // Doc deltas over one varint byte.
            for _ in 0..big_doc % 300 {
                ours.add_doc(&[]);
                reference.add_doc(&[]);
            }
            let last: Vec<String> = vec!["a".into(), "zz".into(), "a".into()];
            ours.add_doc(&last);
            reference.add_doc(&last);
            prop_assert_eq!(ours.num_terms(), reference.num_terms());
            prop_assert_eq!(ours.finish().unwrap(), reference.finish().unwrap());
        }
    }
}

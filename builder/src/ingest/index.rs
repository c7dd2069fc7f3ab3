//! Index stage: chunk records → the term dictionary (`terms.fst`), BM25 postings
//! (`postings.bin`) and the Hangul ↔ Hanja reading table (`hanja.fst`).

use jikji_format::analyzer::{self, Analyzer, Script};
use jikji_format::hanja::write_hanja_fst;
use jikji_format::postings::LexicalIndexWriter;
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
pub fn index_records(
    records: &[ChunkRecord],
    analyzer: &Analyzer,
) -> Result<(Vec<u8>, Vec<u8>, usize)> {
    let mut index = LexicalIndexWriter::new();
    for r in records {
        index.add_doc(&analyzer.analyze(&r.indexed_text()));
    }
    let terms = index.num_terms();
    let (terms_fst, postings) = index.finish()?;
    Ok((terms_fst, postings, terms))
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

//! Calibrated scores at query time: how a hit's raw score becomes the probability reported
//! as its `score`, from the fits in the bundle's manifest ([`jikji_format::Calibration`]).
//!
//! Raw scores mean different things per ranker and per bundle: BM25 is unbounded and grows
//! with query length, and E5's cosines are bunched (unrelated pairs score ~0.75). Each
//! bundle therefore carries Platt sigmoids fitted at build time on pseudo-queries drawn
//! from its own chunks (the fitting is the builder's: `jikji_builder::calibrate`). A
//! calibrated score is the estimated probability that a result with that raw score is a
//! right answer, the same reading in every mode and bundle; how well that holds on labeled
//! sets is measured by `jikji eval` (score bands).
//!
//! A hit's calibration input is its raw score mapped to the fit's scale
//! ([`crate::fusion::bm25_normalised`], [`crate::fusion::dense_z`], the fused score as is),
//! and with margin-aware fits ([`jikji_format::ScoreFits`]) also its [`margin`] over the
//! best other answer among the hits returned.
//!
//! What the builder's fitting needs from the engine is public and documented where it is
//! defined: the rankers ([`crate::search::bm25`] over [`crate::search::Lexical::of`],
//! [`crate::search::dense`], [`crate::search::rrf`]), the inputs
//! ([`crate::fusion::bm25_upper_bound`], [`crate::fusion::bm25_normalised`],
//! [`crate::fusion::dense_background`], [`crate::fusion::dense_z`],
//! [`crate::fusion::weighted`]), and the margins ([`margin`] over lists at least
//! [`MARGIN_DEPTH`] deep, [`file_numbers`]), so a fit sees exactly what a search computes.

use jikji_format::analyzer::Analyzer;
use jikji_format::paged::Lexicon;
use jikji_format::{Bundle, MarginPlatt, NullCap, Platt, Result};

/// Default weight of the dense score in weighted fusion, chosen on the eval sets (README,
/// "Retrieval quality"): 0.6 is the one measured weight (0.4–0.7) at which SciFact's hybrid
/// reaches nDCG@10 0.72 (0.7208; 0.4 gives 0.7054) while classical-zh's hybrid still beats
/// its BM25 (0.7559 vs 0.7391). 0.4 has the best mean over the six public runs (0.8690 vs
/// 0.8667, all of the difference from classical-zh).
pub const DEFAULT_DENSE_WEIGHT: f32 = 0.6;

/// A chunk has at most four neighbours (two either side in its file, see [`apart`]), so
/// the best hit apart from any hit is among the first `MARGIN_DEPTH` of a ranked list:
/// margins need lists at least this deep.
pub const MARGIN_DEPTH: usize = 6;

/// True if chunks `a` and `b` are apart: in different files (`file[doc]`, a file number
/// per chunk), or more than two chunks away from each other in the same file. Overlapping
/// neighbours share text, so they are not "another answer".
pub fn apart(file: &[u32], a: u32, b: u32) -> bool {
    file.get(a as usize) != file.get(b as usize) || a.abs_diff(b) > 2
}

/// The margin of chunk `doc` with input `value`: `value` minus the value of the first entry
/// of `list` (sorted by value, descending) that is apart from `doc` (see [`apart`]), its
/// best competitor. Positive only for a hit that beats every other answer; 0 when the list
/// holds no competitor (a rare word that only one passage has: standing out from nothing
/// is no evidence, and such a hit is judged by its input alone).
pub fn margin(doc: u32, value: f32, list: &[(u32, f32)], file: &[u32]) -> f32 {
    list.iter()
        .find(|&&(d, _)| d != doc && apart(file, doc, d))
        .map_or(0.0, |&(_, v)| value - v)
}

/// A file number per chunk of `bundle` (chunks of one source file share it), for
/// [`apart`]; see [`number_files`]. Decodes the `source` of every record.
///
/// Errors only if the chunk store bytes are corrupt.
pub fn file_numbers(bundle: &Bundle) -> Result<Vec<u32>> {
    #[derive(serde::Deserialize)]
    struct Source {
        source: String,
    }
    let chunks = bundle.chunks();
    let sources = (0..chunks.len() as u32)
        .map(|d| Ok(chunks.get_as::<Source>(d)?.source))
        .collect::<Result<Vec<_>>>()?;
    Ok(number_files(sources))
}

/// Numbers source paths in order of first appearance: one `u32` per item, equal for equal
/// paths (the per-chunk file numbers [`apart`] compares).
pub fn number_files(sources: impl IntoIterator<Item = String>) -> Vec<u32> {
    let mut ids = jikji_format::hash::Map::default();
    sources
        .into_iter()
        .map(|s| {
            let next = ids.len() as u32;
            *ids.entry(s).or_insert(next)
        })
        .collect()
}

/// How much of a query one hit covers, from the bundle's term dictionary (issue 19: a
/// feature that tells an unanswerable query apart whatever the corpus). The query's terms
/// are its distinct analysed terms, Chinese question words left out first, as in
/// [`crate::fusion::bm25_upper_bound`] (no prefix, typo or Hanja expansions). All three
/// are shares in [0, 1].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Coverage {
    /// Share of the query's terms the hit's chunk holds (its postings list the chunk).
    pub terms: f32,
    /// The idf mass ([`crate::fusion::idf`]) of the query terms the chunk holds over the
    /// idf mass of the query terms the bundle's dictionary knows (df > 0); 0 when it knows
    /// none.
    pub idf: f32,
    /// Share of the query's terms that no chunk of the bundle holds (df = 0); 1 for a
    /// query without any term (nothing of it is known).
    pub unknown: f32,
}

/// A query's terms with their idf and the chunks that hold them, to give each hit its
/// [`Coverage`] ([`QueryCoverage::of`]).
#[derive(Debug, Clone, Default)]
pub struct QueryCoverage {
    /// Per known term (df > 0): its idf and the chunks holding it, sorted.
    known: Vec<(f32, Vec<u32>)>,
    /// Distinct query terms, known or not.
    terms: usize,
}

impl QueryCoverage {
    /// Reads the dictionary and postings of `query`'s terms in `index` (decoding each
    /// term's postings once: a query costs what its BM25 term scoring costs again).
    /// A paged bundle's pages not loaded yet are recorded as missing, as BM25 records
    /// them (then `Err(PageMissing)` or an incomplete answer; call after the ranking of a
    /// pass that loaded them).
    ///
    /// Errors only if the postings bytes are corrupt (or a page is missing, above).
    pub fn new(index: &Lexicon, analyzer: &Analyzer, query: &str) -> Result<Self> {
        let mut terms = analyzer.analyze(&crate::search::without_question_words(analyzer, query));
        jikji_format::sort::sort(&mut terms);
        terms.dedup();
        let n = index.num_docs();
        let mut known = Vec::new();
        for t in &terms {
            let Some(list) = index.postings_with_len(t)? else {
                continue;
            };
            if list.is_empty() {
                continue;
            }
            let mut docs: Vec<u32> = list.iter().map(|p| p.0).collect();
            // Postings come in doc order; jikji_format's sort otherwise (not core's
            // sort_unstable: its only use in the BM25 engine, 4 kB of wasm; issue 12).
            if !docs.windows(2).all(|w| w[0] <= w[1]) {
                jikji_format::sort::sort(&mut docs);
            }
            docs.dedup();
            known.push((crate::fusion::idf(n, docs.len()), docs));
        }
        if index.pending() {
            return Err(jikji_format::FormatError::PageMissing {
                name: "(postings)".into(),
            });
        }
        Ok(QueryCoverage {
            known,
            terms: terms.len(),
        })
    }

    /// The coverage of chunk `doc` (an indexed chunk's doc id).
    pub fn of(&self, doc: u32) -> Coverage {
        if self.terms == 0 {
            return Coverage {
                unknown: 1.0,
                ..Coverage::default()
            };
        }
        let (mut held, mut mass, mut total) = (0usize, 0.0f32, 0.0f32);
        for (idf, docs) in &self.known {
            total += idf;
            if docs.binary_search(&doc).is_ok() {
                held += 1;
                mass += idf;
            }
        }
        Coverage {
            terms: held as f32 / self.terms as f32,
            idf: if total > 0.0 { mass / total } else { 0.0 },
            unknown: (self.terms - self.known.len()) as f32 / self.terms as f32,
        }
    }
}

/// How one ranked list's raw scores become reported scores: each raw score's calibration
/// input ([`Input`]), then the ranker's fit.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    /// How a raw score becomes the fit's input.
    pub input: Input,
    /// The ranker's one-feature fit (bundles calibrated before margins).
    pub plain: Platt,
    /// The margin-aware fit, if the bundle has one.
    pub margin: Option<MarginPlatt>,
    /// The bundle's null cap and this fit's threshold, if it has one: applied to the
    /// reported scores after ranking ([`NullCap::apply`]).
    pub null: Option<(NullCap, f32)>,
}

/// The calibration input of a raw score, per ranker.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Input {
    /// BM25: the score over the query's exact-match maximum
    /// ([`crate::fusion::bm25_normalised`]).
    Bm25 {
        /// [`crate::fusion::bm25_upper_bound`] of the query.
        upper_bound: f32,
    },
    /// Dense: the cosine as a z-score against the query's background
    /// ([`crate::fusion::dense_z`]).
    #[cfg(feature = "dense")]
    Dense {
        /// [`crate::fusion::dense_background`] of the query vector: (mean, std).
        background: (f32, f32),
    },
    /// Fused lists (weighted, RRF): the raw score itself.
    #[cfg(feature = "dense")]
    Raw,
}

impl Input {
    /// The calibration input of raw score `raw`.
    pub fn of(self, raw: f32) -> f32 {
        match self {
            Input::Bm25 { upper_bound } => crate::fusion::bm25_normalised(raw, upper_bound),
            #[cfg(feature = "dense")]
            Input::Dense { background } => crate::fusion::dense_z(raw, background),
            #[cfg(feature = "dense")]
            Input::Raw => raw,
        }
    }
}

impl Scale {
    /// Reported scores of `ranked` (`(doc, raw score)`, best first: the hits the caller may
    /// see), the first `k` of them: each hit's fit applied to its input and, with a
    /// margin-aware fit, its margin over the rest of `ranked`. A hit never scores above
    /// one ranked before it (a neighbour of the top hit can have a wider margin than the
    /// next other answer), so scores stay sorted. `file` numbers the chunks' files (see
    /// [`apart`]).
    pub fn scores(&self, ranked: &[(u32, f32)], k: usize, file: &[u32]) -> Vec<f32> {
        let inputs: Vec<(u32, f32)> = ranked
            .iter()
            .map(|&(d, raw)| (d, self.input.of(raw)))
            .collect();
        let mut cap = f32::INFINITY;
        inputs
            .iter()
            .take(k)
            .map(|&(doc, x)| {
                let s = match self.margin {
                    Some(m) => m.apply(x, margin(doc, x, &inputs, file)),
                    None => self.plain.apply(x),
                };
                cap = cap.min(s);
                cap
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margins_skip_the_hit_itself_and_its_neighbours() {
        // Chunks 0–3 are one file, 4–5 another.
        let file = [0, 0, 0, 0, 1, 1];
        assert!(!apart(&file, 1, 3) && apart(&file, 0, 3) && apart(&file, 3, 4));
        let list = [(1, 0.9), (2, 0.8), (4, 0.5), (0, 0.4)];
        // The top hit's margin is over chunk 4 (chunk 2 is its neighbour).
        assert!((margin(1, 0.9, &list, &file) - 0.4).abs() < 1e-6);
        assert!((margin(4, 0.5, &list, &file) + 0.4).abs() < 1e-6);
        // No competitor in the list: no evidence either way.
        assert_eq!(margin(1, 0.9, &list[..2], &file), 0.0);
    }

    #[cfg(feature = "v1")]
    fn lexicon(docs: &[&str]) -> Lexicon {
        let mut w = jikji_format::postings::LexicalIndexWriter::new();
        for d in docs {
            w.add_doc(&jikji_format::analyzer::analyze(d));
        }
        let (f, p) = w.finish().unwrap();
        Lexicon::Whole(jikji_format::postings::LexicalIndex::open(f, p).unwrap())
    }

    #[cfg(feature = "v1")]
    #[test]
    fn coverage_counts_the_query_terms_a_chunk_holds() {
        let docs = ["apple banana cherry", "apple durian", "banana fig", "grape"];
        let index = lexicon(&docs);
        let a = Analyzer::default();
        let idf = |df| crate::fusion::idf(docs.len(), df);
        // Terms: apple (df 2), banana (df 2), durian (df 1), zebra (unknown).
        let q = QueryCoverage::new(&index, &a, "apple banana durian zebra").unwrap();
        let c0 = q.of(0);
        assert!((c0.terms - 0.5).abs() < 1e-6, "{c0:?}");
        let known = 2.0 * idf(2) + idf(1);
        assert!((c0.idf - 2.0 * idf(2) / known).abs() < 1e-6, "{c0:?}");
        assert!((c0.unknown - 0.25).abs() < 1e-6, "{c0:?}");
        // The rare term weighs more than a common one: chunk 1 holds apple + durian.
        let c1 = q.of(1);
        assert!((c1.idf - (idf(2) + idf(1)) / known).abs() < 1e-6, "{c1:?}");
        assert!(c1.idf > c0.idf && c1.terms == c0.terms, "{c1:?} {c0:?}");
        // A chunk holding none of them, and the unknown share is per query, not per hit.
        assert_eq!(
            q.of(3),
            Coverage {
                terms: 0.0,
                idf: 0.0,
                unknown: 0.25
            }
        );
        // Every term held: full coverage.
        let full = QueryCoverage::new(&index, &a, "banana fig").unwrap().of(2);
        assert_eq!(
            full,
            Coverage {
                terms: 1.0,
                idf: 1.0,
                unknown: 0.0
            }
        );
        // Repeated query words count once.
        let rep = QueryCoverage::new(&index, &a, "grape grape zebra")
            .unwrap()
            .of(3);
        assert!((rep.terms - 0.5).abs() < 1e-6 && rep.idf == 1.0, "{rep:?}");
    }

    #[cfg(feature = "v1")]
    #[test]
    fn coverage_of_a_query_the_bundle_does_not_know_is_zero() {
        let index = lexicon(&["apple banana", "cherry"]);
        let a = Analyzer::default();
        let q = QueryCoverage::new(&index, &a, "zebra quokka").unwrap();
        for d in 0..2 {
            assert_eq!(
                q.of(d),
                Coverage {
                    terms: 0.0,
                    idf: 0.0,
                    unknown: 1.0
                }
            );
        }
        // No term at all (punctuation only): nothing covered, all unknown.
        let none = QueryCoverage::new(&index, &a, "?!").unwrap().of(0);
        assert_eq!(none.unknown, 1.0);
        assert_eq!((none.terms, none.idf), (0.0, 0.0));
    }

    #[test]
    fn files_are_numbered_by_first_appearance() {
        let n = number_files(["b", "a", "b", "c", "a"].map(String::from));
        assert_eq!(n, vec![0, 1, 0, 2, 1]);
    }
}

//! Score normalisation and weighted (convex-combination) fusion of the BM25 and dense
//! rankings, as an alternative to [`crate::search::rrf`].
//!
//! Weighted fusion follows Bruch, Gai & Ingber 2023 ("An Analysis of Fusion Functions for
//! Hybrid Retrieval"): each ranker's score is first mapped to a common scale, then combined
//! as `w·dense + (1 − w)·bm25`. Our common scale is the log-odds of the bundle's calibrated
//! score (see [`crate::scores`]): BM25 scores are divided by the query's exact-match
//! maximum ([`bm25_upper_bound`]), cosines become z-scores ([`dense_z`]), and both pass
//! through their fitted Platt line `a·x + b`, so both estimate the log-odds of a right answer.

use std::collections::HashMap;

use crate::centring::DenseScorer;
use jikji_format::analyzer::Analyzer;
use jikji_format::paged::Lexicon;
use jikji_format::{Bm25Params, Calibration, Result};

use crate::search::{top_k, Scored};

/// Lucene's BM25 idf `ln(1 + (N − df + 0.5) / (df + 0.5))` for `n` documents.
pub fn idf(n: usize, df: usize) -> f32 {
    let (n, df) = (n as f32, df as f32);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// The largest term-component BM25 score `query` can reach on `index`:
/// `Σ idf(t)·(k1 + 1)` over the query's distinct analyzed terms, a term missing from the
/// dictionary counting with df = 0 (it cannot match, so a query asking for absent words
/// never reaches 1). Dividing a BM25 score by it gives a query-length-independent value,
/// clamped to [0, 1] by [`bm25_normalised`]. Returns 0 for a query with no terms.
///
/// Errors only if the postings bytes are corrupt.
pub fn bm25_upper_bound(
    index: &Lexicon,
    analyzer: &Analyzer,
    params: Bm25Params,
    query: &str,
) -> Result<f32> {
    let mut terms = analyzer.analyze(&crate::search::without_question_words(analyzer, query));
    jikji_format::sort::sort(&mut terms);
    terms.dedup();
    let n = index.num_docs();
    let mut sum = 0.0;
    for t in &terms {
        let df = index.doc_freq(t)?.unwrap_or(0);
        sum += idf(n, df) * (params.k1 + 1.0);
    }
    Ok(sum)
}

/// How many chunks (evenly spaced over the bundle) form a query's dense background.
pub const BACKGROUND_SAMPLE: usize = 256;

/// Mean and standard deviation of the query's cosine similarity with a fixed, evenly
/// spaced sample of [`BACKGROUND_SAMPLE`] chunks (all chunks if fewer). E5 gives some
/// queries high cosines with everything (gibberish reaches ~0.85 on the books bundle), so a
/// cosine is only meaningful against the query's own background (z-score normalisation,
/// Montague & Aslam 2001, "Relevance score normalization for metasearch").
///
/// The cosines are `dense`'s scores, with the bundle's centring if it has one.
pub fn dense_background(dense: &DenseScorer) -> (f32, f32) {
    let n = dense.len();
    if n == 0 {
        return (0.0, 1.0);
    }
    let take = n.min(BACKGROUND_SAMPLE);
    let xs: Vec<f32> = (0..take).map(|j| dense.score(j * n / take)).collect();
    let mean = xs.iter().sum::<f32>() / take as f32;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / take as f32;
    (mean, var.sqrt().max(1e-4))
}

/// The cosine `cos` as a z-score against the query's background `(mean, std)` from
/// [`dense_background`]: the input of the dense calibration.
pub fn dense_z(cos: f32, background: (f32, f32)) -> f32 {
    (cos - background.0) / background.1
}

/// `score / upper_bound`, clamped to [0, 1] (the phrase component and query expansions can
/// push a raw score past the exact-match maximum); 0 when `upper_bound` is 0.
pub fn bm25_normalised(score: f32, upper_bound: f32) -> f32 {
    if upper_bound > 0.0 {
        (score / upper_bound).clamp(0.0, 1.0)
    } else {
        0.0
    }
}

/// The fused log-odds of one candidate: `w·l_dense + (1 − w)·l_bm25`. For a
/// `cross_lingual` candidate (a chunk whose text is in another language than the query, see
/// [`cross_lingual`]) BM25's "no match" is no evidence: the chunk cannot share the query's
/// words, so `l_bm25` is replaced by `l_dense + (l_bm25 − l_none)`, `l_none` being BM25's
/// log-odds at score 0 — dense alone when BM25 matched nothing, plus the log-odds BM25
/// gained over no match when it matched something (a name, a number). Measured on
/// `xquad-zh2en-mixed` (README, "Hybrid on the mixed set"): a Chinese question's English
/// answer shares no term with it, so its BM25 log-odds at score 0 (e.g. −4.38) outweighed
/// any dense lead over a Chinese distractor with a modest match. Same-language candidates
/// are fused as before.
pub fn fused_logit(l_bm25: f32, l_dense: f32, l_none: f32, w: f32, cross_lingual: bool) -> f32 {
    let l_b = if cross_lingual {
        l_dense + (l_bm25 - l_none)
    } else {
        l_bm25
    };
    w * l_dense + (1.0 - w) * l_b
}

/// True when a chunk of text language `chunk` (a [`crate::centring::detect_lang`] code, as
/// the builder records it per chunk) is in another language than a query of language
/// `query`: both known (not `other`) and different.
pub fn cross_lingual(query: &str, chunk: &str) -> bool {
    query != "other" && chunk != "other" && query != chunk
}

/// The calibration method (`calibration.method` in the manifest) from which on bundles are
/// fitted, and searched, with the cross-lingual rule of [`fused_logit`]: a bundle calibrated
/// before (`platt-pseudo-queries-v3` and older) is fused as it was built, in every read.
pub const CROSS_LINGUAL_METHOD: &str = "platt-pseudo-queries-v4";

/// True if a bundle calibrated with `method` fuses with the cross-lingual rule: a
/// `platt-pseudo-queries-vN` method with N ≥ 4.
pub fn cross_lingual_fusion(method: &str) -> bool {
    method
        .strip_prefix("platt-pseudo-queries-v")
        .and_then(|n| n.parse::<u32>().ok())
        .is_some_and(|n| n >= 4)
}

/// Smallest share of a bundle's chunks a language needs before [`fused_logit`]'s
/// cross-lingual rule applies to it (for the query's language and the chunk's alike). A few
/// chunks of another language in a one-language bundle are mostly stray text (a table of
/// Latin names in a Chinese set), and lifting them over every weak same-language match
/// cost xquad-zh 0.016 hybrid nDCG@10; a bundle with no chunk in the query's language
/// (a Chinese question on an English bundle) keeps the plain fusion, where BM25's matches
/// of names and numbers are the only lexical evidence (xquad zh → en: 0.7708 plain,
/// 0.7660 with the rule). Measured in README, "Hybrid on the mixed set".
pub const MIN_LANGUAGE_SHARE: f32 = 0.05;

/// Per language of `langs` (a bundle's text languages, e.g. the columns page's facets),
/// whether it holds at least [`MIN_LANGUAGE_SHARE`] of the chunks: `chunk_lang[d]` indexes
/// `langs`. One pass over the chunks (O(n)); the engine keeps the result per bundle, so a
/// query pays only [`cross_lingual_docs`]'s O(1) lookups. Shape: `langs.len()` flags.
pub fn substantial_languages(langs: &[String], chunk_lang: &[u32]) -> Vec<bool> {
    let mut counts = vec![0usize; langs.len()];
    for &i in chunk_lang {
        if let Some(c) = counts.get_mut(i as usize) {
            *c += 1;
        }
    }
    let min = MIN_LANGUAGE_SHARE * chunk_lang.len() as f32;
    counts.iter().map(|&c| c as f32 >= min && c > 0).collect()
}

/// Per chunk, whether weighted fusion treats it as cross-lingual for a query of language
/// `query`: `chunk_lang[d]` indexes `langs` (the bundle's per-chunk text languages, e.g. the
/// columns page's facets) and `substantial` is [`substantial_languages`] of the same two;
/// true when [`cross_lingual`] and both languages hold at least [`MIN_LANGUAGE_SHARE`] of
/// the chunks. Returns a closure over doc ids (false for an id out of range).
pub fn cross_lingual_docs<'a>(
    query: &'a str,
    langs: &'a [String],
    chunk_lang: &'a [u32],
    substantial: &'a [bool],
) -> impl Fn(u32) -> bool + 'a {
    let query_present = langs
        .iter()
        .zip(substantial)
        .any(|(l, &ok)| ok && l == query);
    move |d: u32| {
        query_present
            && chunk_lang.get(d as usize).is_some_and(|&i| {
                substantial.get(i as usize) == Some(&true)
                    && cross_lingual(query, &langs[i as usize])
            })
    }
}

/// Weighted fusion of a BM25 list (raw scores, with the query's `upper_bound`) and a dense
/// list (cosines) under calibration `cal`, in log-odds space: candidates are the union of
/// both lists; each gets `l_bm25`, the log-odds `a·x + b` of its calibrated BM25 score (x = 0
/// when it is not in the BM25 list), and `l_dense`, that of its cosine z-score (see
/// [`dense_z`]; the cosine is computed exactly from `vectors` when it is not in the dense
/// list). The fused score is `w·l_dense + (1 − w)·l_bm25` with `w = cal.dense_weight`, a
/// weighted sum of log-odds (the naive-Bayes way to combine two probabilities) that, unlike a
/// sum of probabilities, does not saturate: a much stronger BM25 match still counts as
/// stronger when both are "certain". A ranker whose calibration is flat on this bundle (small
/// `a`) thereby weighs little. Candidates `d` for which `cross_lingual(d)` is true (their
/// text in another language than the query's) count BM25 only as evidence over no match
/// ([`fused_logit`]). Returns the top `k` by fused score (ties by doc id); the engine maps
/// it to [0, 1] with `cal.weighted`.
pub fn weighted(
    lex: &[Scored],
    upper_bound: f32,
    dense: &[Scored],
    scorer: &DenseScorer,
    cal: &Calibration,
    cross_lingual: &dyn Fn(u32) -> bool,
    k: usize,
) -> Vec<Scored> {
    weighted_with(
        lex,
        upper_bound,
        dense,
        &DenseEvidence {
            background: dense_background(scorer),
            cos_of: &|d| scorer.score(d as usize),
        },
        cal,
        cross_lingual,
        k,
    )
}

/// The dense side of [`weighted_with`] beyond the dense list: the query's background
/// `(mean, std)` ([`dense_background`]) and the cosine of a chunk not in the list.
pub struct DenseEvidence<'a> {
    /// Mean and standard deviation of the query's scores over the background sample.
    pub background: (f32, f32),
    /// The cosine of chunk `d` (exact scan: computed; the paged dense index: the lowest
    /// scanned score for a chunk it did not scan, `crate::ivf`).
    pub cos_of: &'a dyn Fn(u32) -> f32,
}

/// [`weighted`] with the query's background and the cosines of chunks not in `dense`
/// given by `evidence` ([`DenseEvidence`]).
pub fn weighted_with(
    lex: &[Scored],
    upper_bound: f32,
    dense: &[Scored],
    evidence: &DenseEvidence,
    cal: &Calibration,
    cross_lingual: &dyn Fn(u32) -> bool,
    k: usize,
) -> Vec<Scored> {
    let Some(dense_cal) = cal.dense else {
        return top_k(lex.to_vec(), k);
    };
    let w = cal.dense_weight.clamp(0.0, 1.0);
    let l_none = cal.bm25.logit(0.0);
    let bg = evidence.background;
    let cos_of = evidence.cos_of;
    let lex_map: HashMap<u32, f32> = lex.iter().copied().collect();
    let dense_map: HashMap<u32, f32> = dense.iter().copied().collect();
    let mut docs: Vec<u32> = lex.iter().chain(dense).map(|s| s.0).collect();
    docs.sort_unstable();
    docs.dedup();
    let fused = docs
        .into_iter()
        .map(|d| {
            let b = lex_map.get(&d).copied().unwrap_or(0.0);
            let l_b = cal.bm25.logit(bm25_normalised(b, upper_bound));
            let cos = dense_map.get(&d).copied().unwrap_or_else(|| cos_of(d));
            let l_d = dense_cal.logit(dense_z(cos, bg));
            (d, fused_logit(l_b, l_d, l_none, w, cross_lingual(d)))
        })
        .collect();
    top_k(fused, k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jikji_format::vectors::{write_vectors, Vectors};
    use jikji_format::Platt;

    fn cal(w: f32) -> Calibration {
        Calibration {
            method: "test".into(),
            queries: 0,
            pairs: 0,
            bm25: Platt { a: 10.0, b: -5.0 },
            dense: Some(Platt { a: 20.0, b: -16.0 }),
            weighted: None,
            rrf: None,
            dense_weight: w,
            scores: None,
            null_cap: None,
        }
    }

    #[test]
    fn bm25_no_match_is_no_evidence_across_languages() {
        let close = |a: f32, b: f32| assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        // Same language: the weighted sum of both log-odds (no match: l_bm25 = l_none = -4).
        close(fused_logit(-4.0, 1.0, -4.0, 0.6, false), 0.6 - 1.6);
        // Another language: no match leaves dense alone ...
        close(fused_logit(-4.0, 1.0, -4.0, 0.6, true), 1.0);
        // ... and a match adds what BM25 gained over no match.
        close(fused_logit(-1.0, 1.0, -4.0, 0.6, true), 1.0 + 0.4 * 3.0);
        assert!(cross_lingual("zh", "en") && !cross_lingual("zh", "zh"));
        assert!(!cross_lingual("other", "en") && !cross_lingual("ko", "other"));
        // Shares: 38 zh, 1 en, 1 ko chunks: en and ko are under 5 %, so nothing is
        // cross-lingual for a zh query; 15 zh + 5 en: the en chunks are.
        let langs = ["zh".to_string(), "en".to_string(), "ko".to_string()];
        let mut few = vec![0u32; 38];
        few.extend([1, 2]);
        let s_few = substantial_languages(&langs, &few);
        assert_eq!(s_few, [true, false, false]);
        let f = cross_lingual_docs("zh", &langs, &few, &s_few);
        assert!((0..40).all(|d| !f(d)));
        let mut mixed = vec![0u32; 15];
        mixed.extend([1; 5]);
        let s_mixed = substantial_languages(&langs, &mixed);
        let f = cross_lingual_docs("zh", &langs, &mixed, &s_mixed);
        assert!((0..15).all(|d| !f(d)) && (15..20).all(&f) && !f(99));
        // A query language without chunks (ja): the plain fusion.
        let f = cross_lingual_docs("ja", &langs, &mixed, &s_mixed);
        assert!((0..20).all(|d| !f(d)));
        assert!(cross_lingual_fusion(CROSS_LINGUAL_METHOD));
        assert!(!cross_lingual_fusion("platt-pseudo-queries-v3") && !cross_lingual_fusion("x"));
    }

    #[test]
    fn normalised_bm25_is_clamped() {
        assert_eq!(bm25_normalised(5.0, 10.0), 0.5);
        assert_eq!(bm25_normalised(12.0, 10.0), 1.0);
        assert_eq!(bm25_normalised(3.0, 0.0), 0.0);
    }

    #[test]
    fn weight_zero_and_one_reproduce_each_ranker() {
        let v = Vectors::open(
            &write_vectors(
                2,
                &[
                    vec![1.0, 0.0],
                    vec![0.0, 1.0],
                    vec![0.6, 0.8],
                    vec![0.8, 0.6],
                ],
            )
            .unwrap(),
        )
        .unwrap();
        let q = [1.0, 0.0];
        let lex = vec![(1, 9.0), (2, 5.0)];
        let dense = vec![(0, 1.0), (3, 0.8)];
        let scorer = DenseScorer::new(&v, None, &q);
        let same = |_| false;
        let only_lex = weighted(&lex, 10.0, &dense, &scorer, &cal(0.0), &same, 4);
        assert_eq!(only_lex[0].0, 1);
        assert_eq!(only_lex[1].0, 2);
        let only_dense = weighted(&lex, 10.0, &dense, &scorer, &cal(1.0), &same, 4);
        // Doc 2 (cos 0.6) is scored from the vectors although only BM25 listed it.
        assert_eq!(
            only_dense.iter().map(|s| s.0).collect::<Vec<_>>(),
            [0, 3, 2, 1]
        );
    }
}

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
    terms.sort();
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

/// The fused log-odds of one candidate: `w·l_dense + (1 − w)·l_bm25`, where for a
/// `cross_lingual` candidate (a chunk in another language than the query,
/// [`DenseScorer::cross_lingual`]) `l_bm25` counts only as positive evidence:
/// `max(l_bm25, l_dense)` replaces it. Measured on `xquad-zh2en-mixed` (README, "Hybrid on
/// the mixed set"): a Chinese question's English answer never shares its terms, so BM25's
/// log-odds at score 0 (e.g. −4.38) outweighed any dense lead over a Chinese distractor with
/// a modest match. For same-language candidates the fusion is unchanged.
pub fn fused_logit(l_bm25: f32, l_dense: f32, w: f32, cross_lingual: bool) -> f32 {
    let l_b = if cross_lingual {
        l_bm25.max(l_dense)
    } else {
        l_bm25
    };
    w * l_dense + (1.0 - w) * l_b
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
/// `a`) thereby weighs little. Candidates in another language than the query (`scorer`'s
/// [`DenseScorer::cross_lingual`], set by [`DenseScorer::with_query_lang`]) count BM25 only
/// as positive evidence ([`fused_logit`]). Returns the top `k` by fused score (ties by doc
/// id); the engine maps it to [0, 1] with `cal.weighted`.
pub fn weighted(
    lex: &[Scored],
    upper_bound: f32,
    dense: &[Scored],
    scorer: &DenseScorer,
    cal: &Calibration,
    k: usize,
) -> Vec<Scored> {
    let Some(dense_cal) = cal.dense else {
        return top_k(lex.to_vec(), k);
    };
    let w = cal.dense_weight.clamp(0.0, 1.0);
    let bg = dense_background(scorer);
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
            let cos = dense_map
                .get(&d)
                .copied()
                .unwrap_or_else(|| scorer.score(d as usize));
            let l_d = dense_cal.logit(dense_z(cos, bg));
            (
                d,
                fused_logit(l_b, l_d, w, scorer.cross_lingual(d as usize)),
            )
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
        }
    }

    #[test]
    fn bm25_counts_only_as_positive_evidence_across_languages() {
        // Same language: the weighted sum of both log-odds.
        let close = |a: f32, b: f32| assert!((a - b).abs() < 1e-6, "{a} vs {b}");
        close(fused_logit(-4.0, 1.0, 0.6, false), 0.6 - 1.6);
        // Another language: BM25's "no match" (-4) no longer drags the dense lead down ...
        close(fused_logit(-4.0, 1.0, 0.6, true), 1.0);
        // ... but a BM25 match above the dense log-odds still counts.
        close(fused_logit(3.0, 1.0, 0.6, true), 0.6 + 0.4 * 3.0);
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
        let only_lex = weighted(&lex, 10.0, &dense, &scorer, &cal(0.0), 4);
        assert_eq!(only_lex[0].0, 1);
        assert_eq!(only_lex[1].0, 2);
        let only_dense = weighted(&lex, 10.0, &dense, &scorer, &cal(1.0), 4);
        // Doc 2 (cos 0.6) is scored from the vectors although only BM25 listed it.
        assert_eq!(
            only_dense.iter().map(|s| s.0).collect::<Vec<_>>(),
            [0, 3, 2, 1]
        );
    }
}

//! Ranking: BM25 over the postings, exact dense scan over int8 vectors, and reciprocal
//! rank fusion. Pure Rust with no I/O, so native and wasm builds rank identically.

use std::cmp::Ordering;
use std::collections::HashMap;

use jikji_format::analyzer::analyze;
use jikji_format::postings::LexicalIndex;
use jikji_format::vectors::Vectors;
use jikji_format::{Bm25Params, Result};

/// RRF constant k (Cormack, Clarke & Büttcher 2009, "Reciprocal Rank Fusion outperforms
/// Condorcet and individual Rank Learning Methods").
pub const RRF_K: f32 = 60.0;

/// How many candidates each ranker contributes to hybrid fusion, at least.
pub const FUSION_DEPTH: usize = 100;

/// A `(doc id, score)` pair; doc ids index the chunk store.
pub type Scored = (u32, f32);

/// Sorts by score descending, ties by doc id ascending, and keeps the first `k`.
pub fn top_k(mut scored: Vec<Scored>, k: usize) -> Vec<Scored> {
    let cmp = |a: &Scored, b: &Scored| b.1.partial_cmp(&a.1).unwrap_or(Ordering::Equal).then(a.0.cmp(&b.0));
    if scored.len() > k && k > 0 {
        scored.select_nth_unstable_by(k - 1, cmp);
        scored.truncate(k);
    }
    scored.sort_by(cmp);
    scored.truncate(k);
    scored
}

/// BM25 (Robertson & Zaragoza 2009) with Lucene's non-negative idf
/// `ln(1 + (N − df + 0.5) / (df + 0.5))`. Query terms come from the same analyzer as the
/// index; repeated query terms count once. Returns the top `k` chunks with score > 0.
///
/// Errors only if the postings bytes are corrupt.
pub fn bm25(index: &LexicalIndex, params: Bm25Params, query: &str, k: usize) -> Result<Vec<Scored>> {
    let mut terms = analyze(query);
    terms.sort();
    terms.dedup();
    let n = index.num_docs() as f32;
    let avgdl = index.avg_doc_len().max(1e-6);
    let mut acc: HashMap<u32, f32> = HashMap::new();
    for t in &terms {
        let Some(list) = index.postings(t)? else { continue };
        let df = list.len() as f32;
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        for (doc, tf) in list {
            let tf = tf as f32;
            let dl = index.doc_len(doc) as f32;
            let norm = params.k1 * (1.0 - params.b + params.b * dl / avgdl);
            *acc.entry(doc).or_default() += idf * tf * (params.k1 + 1.0) / (tf + norm);
        }
    }
    Ok(top_k(acc.into_iter().collect(), k))
}

/// Exact dense search: cosine similarity of `query` (L2-normalised, length `vectors.dim()`)
/// with every stored int8 vector; returns the top `k`.
pub fn dense(vectors: &Vectors, query: &[f32], k: usize) -> Vec<Scored> {
    let scored = (0..vectors.len()).map(|i| (i as u32, vectors.dot(i, query))).collect();
    top_k(scored, k)
}

/// Reciprocal rank fusion: `score(d) = Σ_lists 1 / (RRF_K + rank_d)` with ranks from 1;
/// returns the top `k`.
pub fn rrf(lists: &[Vec<Scored>], k: usize) -> Vec<Scored> {
    let mut acc: HashMap<u32, f32> = HashMap::new();
    for list in lists {
        for (rank, (doc, _)) in list.iter().enumerate() {
            *acc.entry(*doc).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
        }
    }
    top_k(acc.into_iter().collect(), k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jikji_format::postings::LexicalIndexWriter;

    fn index(docs: &[&str]) -> LexicalIndex {
        let mut w = LexicalIndexWriter::new();
        for d in docs {
            w.add_doc(&analyze(d));
        }
        let (f, p) = w.finish().unwrap();
        LexicalIndex::open(f, p).unwrap()
    }

    #[test]
    fn bm25_matches_hand_computed_score() {
        let idx = index(&["apple banana", "apple apple cherry", "durian"]);
        let hits = bm25(&idx, Bm25Params::default(), "cherry", 10).unwrap();
        // N=3, df=1: idf = ln(1 + 2.5/1.5); tf=1, dl=3, avgdl=2.
        let idf = (1.0f32 + 2.5 / 1.5).ln();
        let norm = 1.2 * (1.0 - 0.75 + 0.75 * 3.0 / 2.0);
        let expect = idf * 2.2 / (1.0 + norm);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 1);
        assert!((hits[0].1 - expect).abs() < 1e-6);
    }

    #[test]
    fn bm25_prefers_rarer_terms_and_ignores_unknown() {
        let idx = index(&["the cat", "the dog", "the bird"]);
        let hits = bm25(&idx, Bm25Params::default(), "the dog zebra", 10).unwrap();
        assert_eq!(hits[0].0, 1);
        assert_eq!(hits.len(), 3);
    }

    #[test]
    fn rrf_fuses_by_rank() {
        let a = vec![(1, 9.0), (2, 8.0), (3, 7.0)];
        let b = vec![(2, 0.9), (3, 0.8)];
        let fused = rrf(&[a, b], 3);
        // doc 2: 1/62 + 1/61; doc 3: 1/63 + 1/62; doc 1: 1/61.
        assert_eq!(fused.iter().map(|s| s.0).collect::<Vec<_>>(), [2, 3, 1]);
        assert!((fused[0].1 - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-6);
    }

    #[test]
    fn top_k_breaks_ties_by_doc_id() {
        assert_eq!(top_k(vec![(5, 1.0), (2, 1.0), (9, 2.0)], 2), vec![(9, 2.0), (2, 1.0)]);
    }
}

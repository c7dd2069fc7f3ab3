//! Ranking: BM25 over the postings, exact dense scan over int8 vectors, and reciprocal
//! rank fusion. Pure Rust with no I/O, so native and wasm builds rank identically.

use std::cmp::Ordering;
use std::collections::HashMap;

use jikji_format::analyzer::analyze;
use jikji_format::chunks::ChunkStore;
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
    let cmp = |a: &Scored, b: &Scored| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(Ordering::Equal)
            .then(a.0.cmp(&b.0))
    };
    if scored.len() > k && k > 0 {
        scored.select_nth_unstable_by(k - 1, cmp);
        scored.truncate(k);
    }
    scored.sort_by(cmp);
    scored.truncate(k);
    scored
}

/// How many of the best BM25 candidates are re-scored with the phrase component.
pub const PHRASE_DEPTH: usize = 200;

/// BM25 (Robertson & Zaragoza 2009) with Lucene's non-negative idf
/// `ln(1 + (N − df + 0.5) / (df + 0.5))`, plus a phrase component for queries of two or
/// more terms, as Lucene's `PhraseQuery` scores it: the query's term sequence counted as
/// one pseudo-term whose frequency is its number of contiguous occurrences in the chunk
/// and whose idf is the sum of its terms' idfs. The phrase component is computed for the
/// best [`PHRASE_DEPTH`] candidates by plain BM25 (their text is re-analyzed from the
/// chunk store). Repeated query terms count once in the term component. Returns the top
/// `k` chunks with score > 0.
///
/// Errors only if the postings or chunk store bytes are corrupt.
pub fn bm25(
    index: &LexicalIndex,
    chunks: &ChunkStore,
    params: Bm25Params,
    query: &str,
    k: usize,
) -> Result<Vec<Scored>> {
    let sequence = analyze(query);
    let mut terms = sequence.clone();
    terms.sort();
    terms.dedup();
    let n = index.num_docs() as f32;
    let avgdl = index.avg_doc_len().max(1e-6);
    let saturate = |tf: f32, doc: u32| {
        let dl = index.doc_len(doc) as f32;
        tf * (params.k1 + 1.0) / (tf + params.k1 * (1.0 - params.b + params.b * dl / avgdl))
    };
    let mut acc: HashMap<u32, f32> = HashMap::new();
    let mut phrase_idf = 0.0;
    for t in &terms {
        let Some(list) = index.postings(t)? else {
            continue;
        };
        let df = list.len() as f32;
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        phrase_idf += idf;
        for (doc, tf) in list {
            *acc.entry(doc).or_default() += idf * saturate(tf as f32, doc);
        }
    }
    if sequence.len() < 2 {
        return Ok(top_k(acc.into_iter().collect(), k));
    }
    let mut ranked = top_k(acc.into_iter().collect(), k.max(PHRASE_DEPTH));
    for (doc, score) in ranked.iter_mut() {
        let doc_terms = analyze(&chunks.get(*doc)?.text);
        let pf = doc_terms
            .windows(sequence.len())
            .filter(|w| *w == sequence.as_slice())
            .count();
        if pf > 0 {
            *score += phrase_idf * saturate(pf as f32, *doc);
        }
    }
    Ok(top_k(ranked, k))
}

/// Exact dense search: cosine similarity of `query` (L2-normalised, length `vectors.dim()`)
/// with every stored int8 vector; returns the top `k`.
pub fn dense(vectors: &Vectors, query: &[f32], k: usize) -> Vec<Scored> {
    let scored = (0..vectors.len())
        .map(|i| (i as u32, vectors.dot(i, query)))
        .collect();
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
    use jikji_format::chunks::write_chunks;
    use jikji_format::postings::LexicalIndexWriter;
    use jikji_format::ChunkRecord;

    fn index(docs: &[&str]) -> (LexicalIndex, ChunkStore) {
        let mut w = LexicalIndexWriter::new();
        let mut recs = Vec::new();
        for (i, d) in docs.iter().enumerate() {
            w.add_doc(&analyze(d));
            recs.push(ChunkRecord {
                id: i.to_string(),
                source: "t".into(),
                source_url: None,
                tier: None,
                heading_path: vec![],
                lang: "en".into(),
                section: 0,
                start: 0,
                end: 0,
                text: d.to_string(),
                title: None,
                author: None,
                version: None,
                updated: None,
                expires: None,
                provenance: None,
                doc_id: None,
                archived: false,
                parent_id: None,
                parent_doc: None,
            });
        }
        let (f, p) = w.finish().unwrap();
        (
            LexicalIndex::open(f, p).unwrap(),
            ChunkStore::open(write_chunks(&recs).unwrap()).unwrap(),
        )
    }

    #[test]
    fn bm25_matches_hand_computed_score() {
        let (idx, store) = index(&["apple banana", "apple apple cherry", "durian"]);
        let hits = bm25(&idx, &store, Bm25Params::default(), "cherry", 10).unwrap();
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
        let (idx, store) = index(&["the cat", "the dog", "the bird"]);
        let hits = bm25(&idx, &store, Bm25Params::default(), "the dog zebra", 10).unwrap();
        assert_eq!(hits[0].0, 1);
        assert_eq!(hits.len(), 3);
    }

    #[test]
    fn phrase_occurrence_outranks_scattered_terms() {
        // Doc 0 has every term more often but never in order; doc 1 has the phrase once.
        let (idx, store) = index(&[
            "be not to or be to be not or to",
            "whether to be or not to be, that is",
        ]);
        let hits = bm25(
            &idx,
            &store,
            Bm25Params::default(),
            "to be or not to be",
            10,
        )
        .unwrap();
        assert_eq!(hits[0].0, 1, "{hits:?}");
        let plain = bm25(&idx, &store, Bm25Params::default(), "be", 10).unwrap();
        assert_eq!(
            plain[0].0, 0,
            "single-term queries have no phrase component: {plain:?}"
        );
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
        assert_eq!(
            top_k(vec![(5, 1.0), (2, 1.0), (9, 2.0)], 2),
            vec![(9, 2.0), (2, 1.0)]
        );
    }
}

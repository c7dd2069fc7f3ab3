//! Calibrated scores, `min_score` and fusion choice on a small in-memory bundle, with a
//! calibration fitted by the builder (`jikji_builder::calibrate`) and applied by the engine.

use jikji_builder::calibrate;
use jikji_engine::{Engine, Fusion, Mode};
use jikji_format::{Bundle, Calibration, ChunkRecord, TestBundle};

const DOCS: &[&str] = &[
    "The lighthouse keeper climbed the stairs at dusk to light the lamp.",
    "Fishing boats returned to the harbour before the storm broke over the bay.",
    "The orchard behind the mill gave apples every autumn to the whole village.",
    "A caravan crossed the desert by night, guided by the stars alone.",
    "The library kept its oldest maps in a locked room under the reading hall.",
    "Snow closed the mountain pass for four months, and the monastery waited.",
];

/// Unit vectors: doc i points mostly along axis i.
fn vectors() -> Vec<Vec<f32>> {
    (0..DOCS.len())
        .map(|i| {
            let mut v = [0.1f32; 8];
            v[i] = 1.0;
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / n).collect()
        })
        .collect()
}

fn bundle(calibration: Option<Calibration>) -> Bundle {
    let recs: Vec<ChunkRecord> = DOCS
        .iter()
        .enumerate()
        .map(|(i, d)| ChunkRecord {
            id: format!("c{i}"),
            source: format!("doc{i}.md"),
            lang: "en".into(),
            end: d.chars().count(),
            text: d.to_string(),
            ..ChunkRecord::default()
        })
        .collect();
    TestBundle::new(recs)
        .vectors(8, vectors())
        .calibration(calibration)
        .build()
        .unwrap()
}

/// A calibration fitted on the bundle itself, with each document's own vector as the
/// query vector of its pseudo-query (a perfect dense ranker).
fn fitted() -> Calibration {
    let b = bundle(None);
    let queries = calibrate::pseudo_queries(&b, 100).unwrap();
    // Six chunks, several spans each: small bundles are not calibrated on six pairs.
    assert!(queries.len() >= 90, "{}", queries.len());
    let distinct: std::collections::HashSet<&str> =
        queries.iter().map(|q| q.text.as_str()).collect();
    assert!(distinct.len() >= 30, "{}", distinct.len());
    let qv: Vec<Vec<f32>> = queries
        .iter()
        .map(|q| vectors()[q.doc as usize].clone())
        .collect();
    calibrate::fit(&b, &queries, Some(&qv), calibrate::DEFAULT_DENSE_WEIGHT).unwrap()
}

#[test]
fn uncalibrated_bundles_report_raw_scores() {
    let e = Engine::new(bundle(None));
    assert_eq!(e.fusion(), Fusion::Rrf);
    let r = e.search("lighthouse lamp", Mode::Bm25, 3).unwrap();
    assert!(!r.calibrated);
    assert_eq!(r.hits[0].score, r.hits[0].raw_score);
    assert!(r.hits[0].score > 1.0, "raw BM25");
}

#[test]
fn calibrated_scores_are_probabilities_and_min_score_filters() {
    let mut e = Engine::new(bundle(Some(fitted())));
    assert!(
        matches!(e.fusion(), Fusion::Weighted { dense_weight } if dense_weight == calibrate::DEFAULT_DENSE_WEIGHT)
    );
    let qv = vectors()[3].clone();
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        let r = e
            .search_with_vector("caravan crossed the desert", Some(&qv), mode, 6)
            .unwrap();
        assert!(r.calibrated, "{mode}");
        assert_eq!(r.hits[0].source, "doc3.md", "{mode}");
        for h in &r.hits {
            assert!((0.0..=1.0).contains(&h.score), "{mode}: {}", h.score);
        }
        assert!(r.hits.windows(2).all(|w| w[0].score >= w[1].score));
    }
    let all = e
        .search_with_vector("caravan desert stars", Some(&qv), Mode::Hybrid, 6)
        .unwrap();
    let cut = all.hits[0].score - 1e-6;
    e.set_min_score(cut);
    let kept = e
        .search_with_vector("caravan desert stars", Some(&qv), Mode::Hybrid, 6)
        .unwrap();
    assert!(!kept.hits.is_empty() && kept.hits.len() < all.hits.len());
    assert!(kept.hits.iter().all(|h| h.score >= cut));
    assert_eq!(kept.hits[0].rank, 1);
}

#[test]
fn fusion_can_be_chosen_and_parsed() {
    let mut e = Engine::new(bundle(Some(fitted())));
    e.set_fusion("rrf".parse().unwrap());
    let qv = vectors()[0].clone();
    let r = e
        .search_with_vector("lighthouse", Some(&qv), Mode::Hybrid, 3)
        .unwrap();
    assert_eq!(r.fusion, Some(Fusion::Rrf));
    assert!(r.hits[0].raw_score <= 2.0 / 61.0 + 1e-6);
    e.set_fusion("weighted:0.8".parse().unwrap());
    assert_eq!(e.fusion(), Fusion::Weighted { dense_weight: 0.8 });
    e.set_fusion("weighted".parse().unwrap());
    assert_eq!(
        e.fusion(),
        Fusion::Weighted {
            dense_weight: calibrate::DEFAULT_DENSE_WEIGHT
        }
    );
    assert!("weighted:1.5".parse::<Fusion>().is_err());
    assert!("max".parse::<Fusion>().is_err());
}

/// Cross-lingual (xquad-zh queries on the xquad-en corpus): a query that shares no term
/// with the bundle got BM25's "no match" log-odds in every fused score, so every hybrid
/// top-1 fell under 0.3 although 60% were right. Hybrid now reports dense's scores then.
#[test]
fn hybrid_without_lexical_match_scored_everything_low() {
    let mut e = Engine::new(bundle(Some(fitted())));
    let qv = vectors()[3].clone();
    let query = "商队在夜里穿越沙漠";
    assert!(e
        .search_with_vector(query, Some(&qv), Mode::Bm25, 6)
        .unwrap()
        .hits
        .is_empty());
    let dense = e
        .search_with_vector(query, Some(&qv), Mode::Dense, 6)
        .unwrap();
    for fusion in ["weighted", "rrf"] {
        e.set_fusion(fusion.parse().unwrap());
        let hybrid = e
            .search_with_vector(query, Some(&qv), Mode::Hybrid, 6)
            .unwrap();
        assert_eq!(hybrid.fusion, None, "{fusion}");
        assert!(hybrid.calibrated);
        assert_eq!(hybrid.hits[0].source, "doc3.md");
        let pairs = |r: &jikji_engine::SearchResult| -> Vec<(String, f32)> {
            r.hits
                .iter()
                .map(|h| (h.chunk.id.clone(), h.score))
                .collect()
        };
        assert_eq!(pairs(&hybrid), pairs(&dense), "{fusion}");
    }
    // With a lexical match the fusion still runs.
    let r = e
        .search_with_vector("caravan", Some(&qv), Mode::Hybrid, 6)
        .unwrap();
    assert_eq!(r.fusion, Some(Fusion::Rrf));
}

/// Reported scores come from the margin-aware fits: the top hit's input and its margin
/// over the next hit of another file (every chunk here is its own file).
#[test]
fn scores_use_the_hit_margin() {
    use jikji_engine::fusion::{bm25_normalised, bm25_upper_bound};
    let cal = fitted();
    let fits = cal.scores.expect("margin fits");
    assert!(fits.bm25.a >= 0.0 && fits.bm25.m >= 0.0, "{fits:?}");
    let b = bundle(Some(cal.clone()));
    let ub = bm25_upper_bound(b.lexical(), b.analyzer(), b.manifest().bm25, "the lamp").unwrap();
    let e = Engine::new(b);
    let r = e.search("the lamp", Mode::Bm25, 1).unwrap();
    // One hit asked for; its margin still counts the second hit.
    assert_eq!(r.hits.len(), 1);
    let all = e.search("the lamp", Mode::Bm25, 6).unwrap();
    let x: Vec<f32> = all
        .hits
        .iter()
        .map(|h| bm25_normalised(h.raw_score, ub))
        .collect();
    let want = fits.bm25.apply(x[0], x[0] - x[1]);
    assert!(
        (r.hits[0].score - want).abs() < 1e-6,
        "{} vs {want}",
        r.hits[0].score
    );
    assert!(all.hits.windows(2).all(|w| w[0].score >= w[1].score));
}

/// A bundle calibrated before margin fits existed (no `scores` in its manifest) keeps
/// reporting its one-feature Platt scores.
#[test]
fn calibration_without_margin_fits_keeps_the_plain_scores() {
    use jikji_engine::fusion::{bm25_normalised, bm25_upper_bound};
    let mut cal = fitted();
    cal.scores = None;
    let json = serde_json::to_string(&cal).unwrap();
    assert!(!json.contains("scores"), "{json}");
    let old: Calibration = serde_json::from_str(&json).unwrap();
    assert_eq!(old, cal);
    let b = bundle(Some(old));
    let ub = bm25_upper_bound(b.lexical(), b.analyzer(), b.manifest().bm25, "the lamp").unwrap();
    let e = Engine::new(b);
    let r = e.search("the lamp", Mode::Bm25, 3).unwrap();
    assert!(r.calibrated);
    for h in &r.hits {
        let want = cal.bm25.apply(bm25_normalised(h.raw_score, ub));
        assert!((h.score - want).abs() < 1e-6);
    }
}

#[test]
fn negative_raw_dense_scores_were_dropped_by_the_default_min_score() {
    // Raw dense scores of an uncalibrated bundle can be negative (a query vector pointing
    // away from a chunk's; centred vectors, issue 15, make it common): the default
    // `min_score` of 0 means "keep every hit", not "drop scores below 0".
    let e = Engine::new(bundle(None));
    let mut q = [-0.3f32; 8];
    q[0] = 1.0;
    let n = q.iter().map(|x| x * x).sum::<f32>().sqrt();
    let q: Vec<f32> = q.iter().map(|x| x / n).collect();
    let r = e
        .search_with_vector("lighthouse", Some(&q), Mode::Dense, 10)
        .unwrap();
    assert!(!r.calibrated);
    assert_eq!(r.hits.len(), DOCS.len(), "{:?}", r.hits);
    assert!(r.hits.last().unwrap().raw_score < 0.0);
    assert_eq!(r.hits[0].source, "doc0.md");
}

/// Issue 19's coverage features: asked for, every BM25, dense and hybrid hit of a bundle
/// read whole gets the share of the query's terms it holds, the idf mass matched and the
/// share unknown to the bundle; the ranking and scores are those of a search without them.
#[test]
fn hits_carry_query_coverage_without_changing_the_ranking() {
    let mut e = Engine::new(bundle(Some(fitted())));
    let q = "lighthouse lamp zeppelin";
    let qv = vectors()[0].clone();
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        let plain = e.search_with_vector(q, Some(&qv), mode, 6).unwrap();
        assert!(plain.hits.iter().all(|h| h.coverage.is_none()), "{mode}");
        e.set_coverage(true);
        let with = e.search_with_vector(q, Some(&qv), mode, 6).unwrap();
        e.set_coverage(false);
        let key = |r: &jikji_engine::SearchResult| {
            r.hits
                .iter()
                .map(|h| (h.id.clone(), h.score, h.raw_score))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            key(&plain),
            key(&with),
            "{mode}: ranking and scores unchanged"
        );
        for h in &with.hits {
            let c = h
                .coverage
                .unwrap_or_else(|| panic!("{mode}: {} has none", h.id));
            // "zeppelin" is in no chunk: a third of the query is unknown, whatever the hit.
            assert!((c.unknown - 1.0 / 3.0).abs() < 1e-6, "{mode} {c:?}");
            if h.id == "c0" {
                assert!((c.terms - 2.0 / 3.0).abs() < 1e-6, "{mode} {c:?}");
                assert!((c.idf - 1.0).abs() < 1e-6, "{mode} {c:?}");
            } else {
                assert_eq!((c.terms, c.idf), (0.0, 0.0), "{mode} {}", h.id);
            }
        }
    }
    // The JSON results are unchanged (a calibration feature, not an API field).
    e.set_coverage(true);
    let r = e.search("lighthouse", Mode::Bm25, 1).unwrap();
    assert!(!serde_json::to_string(&r).unwrap().contains("coverage"));
}

//! Builds a bundle from real classics (all three tiers of ../shared/books) with the real
//! model, and checks that real queries find the right passages in every mode.

mod common;

use jikji_builder::ingest::{
    build, load_build_embedder, model_info, BuildReport, BundleSettings, IngestOptions,
};
use jikji_engine::{Engine, Mode, SearchResult};

/// One bundle for all tests of this file (built once; embedding is the slow part).
fn engine() -> &'static Engine {
    static ENGINE: std::sync::OnceLock<Engine> = std::sync::OnceLock::new();
    ENGINE.get_or_init(build_engine)
}

fn build_engine() -> Engine {
    let (engine, report) = build_engine_of(common::REAL_SUBSET);
    assert_eq!(report.files, common::REAL_SUBSET.len());
    assert!(report.chunks > 100, "{report:?}");
    engine
}

fn sources(r: &SearchResult) -> Vec<&str> {
    r.hits.iter().map(|h| h.source.as_str()).collect()
}

#[test]
fn real_books_answer_real_queries() {
    let e = engine();

    // Korean story title → 이효석's story, tier 99, Korean, with its source URL.
    for mode in [Mode::Bm25, Mode::Hybrid] {
        let r = e.search("메밀꽃 필 무렵", mode, 3).unwrap();
        let top = &r.hits[0];
        assert!(
            top.source.ends_with("16_When_Buckwheat_Flowers_Blossom.md"),
            "{mode}: {:?}",
            sources(&r)
        );
        assert_eq!(top.tier, Some(99));
        assert_eq!(top.lang, "ko");
        assert!(top
            .source_url
            .as_deref()
            .unwrap()
            .starts_with("https://github.com/storidient/KoCoNovel"));
    }

    // The first saying of the Analects → 論語 學而篇, with its heading path.
    for mode in [Mode::Bm25, Mode::Hybrid] {
        let r = e.search("學而時習之", mode, 3).unwrap();
        let top = &r.hits[0];
        assert!(
            top.source.ends_with("lunyu.md"),
            "{mode}: {:?}",
            sources(&r)
        );
        assert_eq!(top.heading_path, ["論語", "學而篇第一"], "{mode}");
        assert!(top.text.contains("學而時習之"));
        assert_eq!((top.tier, top.lang.as_str()), (Some(1), "zh"));
    }

    // Hamlet's soliloquy: BM25 (with its phrase component) ranks the soliloquy's chunk first,
    // and so does hybrid with weighted fusion (the default for calibrated bundles). RRF used
    // to bury it under chunks both rankers liked (its dense rank is low because the chunk
    // opens with the King's aside): `hybrid_rrf_buried_the_soliloquy` below.
    let r = e.search("to be or not to be", Mode::Bm25, 3).unwrap();
    assert!(
        r.hits[0].text.contains("To be, or not to be"),
        "{:#?}",
        r.hits
    );
    assert!(r.hits[0].source.ends_with("shakespeare-hamlet.txt"));
    assert_eq!((r.hits[0].tier, r.hits[0].lang.as_str()), (Some(2), "en"));
    let r = e.search("to be or not to be", Mode::Hybrid, 3).unwrap();
    assert!(
        r.hits[0].text.contains("To be, or not to be"),
        "{:?}",
        sources(&r)
    );
}

/// Regression (issue 4): with RRF, hybrid ranked other Hamlet chunks (and on the whole corpus
/// a Sonnets chunk) above the soliloquy that BM25 ranks first; weighted fusion of calibrated
/// scores keeps it first. RRF itself is unchanged: its top 3 are still all Hamlet.
#[test]
fn hybrid_rrf_buried_the_soliloquy() {
    let (mut e, _) = build_engine_of(common::REAL_SUBSET);
    assert!(matches!(e.fusion(), jikji_engine::Fusion::Weighted { .. }));
    let weighted = e.search("to be or not to be", Mode::Hybrid, 3).unwrap();
    assert!(weighted.hits[0].text.contains("To be, or not to be"));
    e.set_fusion(jikji_engine::Fusion::Rrf);
    let rrf = e.search("to be or not to be", Mode::Hybrid, 3).unwrap();
    assert!(
        rrf.hits
            .iter()
            .all(|h| h.source.ends_with("shakespeare-hamlet.txt")),
        "{:?}",
        sources(&rrf)
    );
}

/// Builds a bundle of `files` with the real model (cached vectors make this cheap after
/// the first run) and opens it with the model checked against the bundle and loaded.
fn build_engine_of(files: &[&str]) -> (Engine, BuildReport) {
    build_engine_with(files, &BundleSettings::default())
}

/// [`build_engine_of`] with explicit settings.
fn build_engine_with(files: &[&str], settings: &BundleSettings) -> (Engine, BuildReport) {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::subset_corpus(tmp.path(), files);
    let out = tmp.path().join("bundle");
    let model = common::model_dir();
    let report = build(
        &IngestOptions {
            model_dir: Some(model.clone()),
            cache_dir: Some(common::cache_dir()),
            threads: jikji_builder::ingest::default_threads(),
            ..IngestOptions::new(corpus, &out)
        },
        settings,
    )
    .unwrap();
    let mut engine = Engine::open_dir(&out).unwrap();
    engine
        .check_model(&model_info(&model).unwrap().sha256)
        .unwrap();
    engine.set_embedder(load_build_embedder(&model).unwrap());
    (engine, report)
}

/// "Learning and practising it in due time: is that not a joy?" in Korean: no Han
/// characters, so BM25 cannot match 學而時習之 at all; dense retrieval must cross the
/// language gap. Distractors: the rest of the 論語 and 大學 (classical Chinese) and Hamlet.
///
/// Known limit, measured: with Korean novels in the same bundle, e5-small ranks same-language
/// Korean chunks above the 論語 chunk (raw cosine ~0.88 vs ~0.85; rank 40 of 552 on the
/// subset of `real_books_answer_real_queries`), so this test uses a bundle without them.
#[test]
fn dense_finds_a_korean_paraphrase_sharing_no_characters() {
    let (e, _) = build_engine_of(&common::REAL_SUBSET[..3]);
    let q = "배우고 때때로 익히면 또한 기쁘지 아니한가";
    let lexical = e.search(q, Mode::Bm25, 10).unwrap();
    assert!(
        lexical.hits.is_empty(),
        "BM25 should find nothing: {:?}",
        sources(&lexical)
    );
    let r = e.search(q, Mode::Dense, 3).unwrap();
    assert!(
        r.hits
            .iter()
            .any(|h| h.source.ends_with("lunyu.md") && h.text.contains("學而時習之")),
        "dense top-3: {:#?}",
        r.hits
            .iter()
            .map(|h| (
                &h.source,
                h.score,
                h.text.chars().take(40).collect::<String>()
            ))
            .collect::<Vec<_>>()
    );
}

/// Calibrated scores (issue 4): a verbatim line of the text scores in the "reliable" band
/// (≥ 0.6) in BM25 and hybrid, gibberish in the "drop" band (< 0.3) in BM25 (which finds
/// nothing) and below "reliable" in hybrid (which then falls back to dense's scores);
/// in every mode scores stay in [0, 1] and never increase down the list.
///
/// Dense alone is not asserted to separate them: measured on the books, e5-small's cosine
/// of a passage's own span is no higher (as a z-score against the query's background)
/// than that of the best other passage of similar prose, so the fitted dense sigmoid is
/// nearly flat (~0.35 for everything), which is the honest reading of dense-only scores
/// on this corpus.
#[test]
fn calibrated_scores_mean_the_same_in_every_mode() {
    let e = engine();
    let cal = e
        .bundle()
        .manifest()
        .calibration
        .as_ref()
        .expect("calibrated");
    assert!(cal.queries >= 100 && cal.dense.is_some(), "{cal:?}");
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        for q in [
            "To be, or not to be, that is the question",
            "學而時習之，不亦說乎",
            "메밀꽃 필 무렵",
            "xqzvw blorft kwyjibo frumious",
        ] {
            let r = e.search(q, mode, 10).unwrap();
            assert!(r.calibrated, "{mode}");
            let scores: Vec<f32> = r.hits.iter().map(|h| h.score).collect();
            assert!(
                scores.windows(2).all(|w| w[0] >= w[1])
                    && scores.iter().all(|s| (0.0..=1.0).contains(s)),
                "{mode} {q:?}: {scores:?}"
            );
            let top = scores.first().copied().unwrap_or(0.0);
            if mode == Mode::Dense {
                continue;
            }
            if q.starts_with("xqzvw") && mode == Mode::Bm25 {
                assert!(top < 0.3, "{mode}: gibberish scored {top}");
            } else if q.starts_with("xqzvw") {
                // No chunk shares a term with it, so hybrid reports dense's scores (as for a
                // cross-lingual query), and dense's fit is flat on the books: never reliable.
                assert!(top < 0.6, "{mode}: gibberish scored {top}");
                assert_eq!(r.fusion, None);
            } else {
                assert!(top >= 0.6, "{mode} {q:?}: top score {top}");
            }
        }
    }
}

/// The three books of issue 15: 論語, Hamlet and 메밀꽃 필 무렵.
const THREE_BOOKS: &[&str] = &[
    "1. 漢文 古典/lunyu.md",
    "2. Gutenberg classics/shakespeare-hamlet.txt",
    "99. 온라인 자료 (정리 X)/16_When_Buckwheat_Flowers_Blossom.md",
];

/// The 論語 chunk holding `line` among `hits`' first `k`, as (rank, score).
fn rank_of(r: &SearchResult, book: &str, line: &str, k: usize) -> Option<(usize, f32)> {
    r.hits
        .iter()
        .take(k)
        .find(|h| h.source.ends_with(book) && h.text.contains(line))
        .map(|h| (h.rank, h.score))
}

/// Regression (issue 15): a Korean rendering of 學而時習之 returned five chunks of the Korean
/// novel in dense and hybrid mode and 論語 nowhere, because e5-small scores any passage in
/// the query's language above the right one in another. With the per-language centring
/// (the default) the 學而 chunk is in hybrid's and dense's top 3; without it (the bundle
/// of before), it is not, which this test also checks so that it cannot pass for another
/// reason.
#[test]
fn korean_rendering_lost_to_the_korean_novel() {
    let q = "배우고 때때로 익히면 기쁘지 아니한가";
    let (centred, _) = build_engine_of(THREE_BOOKS);
    assert!(centred
        .bundle()
        .manifest()
        .model
        .as_ref()
        .and_then(|m| m.centring.as_ref())
        .is_some());
    for mode in [Mode::Hybrid, Mode::Dense] {
        let r = centred.search(q, mode, 3).unwrap();
        assert!(
            rank_of(&r, "lunyu.md", "學而時習之", 3).is_some(),
            "{mode}: {:?}",
            sources(&r)
        );
    }
    // The same-language queries of the books still find their passages first.
    let r = centred.search("學而時習之", Mode::Hybrid, 1).unwrap();
    assert!(r.hits[0].text.contains("學而時習之"), "{:?}", sources(&r));
    let r = centred.search("메밀꽃 필 무렵", Mode::Hybrid, 1).unwrap();
    assert!(r.hits[0]
        .source
        .ends_with("16_When_Buckwheat_Flowers_Blossom.md"));

    let off = BundleSettings {
        centring: None,
        ..BundleSettings::default()
    };
    // The control is dense: hybrid's cross-lingual fusion (BM25's "no match" is no evidence
    // against a chunk of another language) finds the 學而 chunk even without centring.
    let (plain, _) = build_engine_with(THREE_BOOKS, &off);
    let r = plain.search(q, Mode::Dense, 3).unwrap();
    assert!(
        rank_of(&r, "lunyu.md", "學而時習之", 3).is_none(),
        "without centring the bug should show in dense mode: {:?}",
        sources(&r)
    );
}

/// The labelled Korean → classical Chinese set (`tests/fixtures/ko-classical/`): prints, per
/// bundle and centring, how many queries find their passage in hybrid and dense top 1 / 3 /
/// 10. A measurement (README, "Dense centring"), run with
/// `cargo test --release -p jikji-builder --test real_books -- --ignored --nocapture`.
#[test]
#[ignore = "measurement: embeds five classics; run with --ignored --nocapture"]
fn ko_classical_set() {
    let set = std::fs::read_to_string(
        common::root().join("builder/tests/fixtures/ko-classical/queries.jsonl"),
    )
    .unwrap();
    let queries: Vec<serde_json::Value> = set
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let big: Vec<&str> = [
        "1. 漢文 古典/lunyu.md",
        "1. 漢文 古典/mengzi.md",
        "1. 漢文 古典/daodejing.md",
        "1. 漢文 古典/zhongyong.md",
        "1. 漢文 古典/sunzi-bingfa.md",
        "2. Gutenberg classics/shakespeare-hamlet.txt",
        "99. 온라인 자료 (정리 X)/16_When_Buckwheat_Flowers_Blossom.md",
        "99. 온라인 자료 (정리 X)/23_Spring_Spring.md",
    ]
    .to_vec();
    println!("| bundle | centring | mode | top-1 | top-3 | top-10 |");
    println!("|---|---|---|---|---|---|");
    for (name, files) in [("three books", THREE_BOOKS.to_vec()), ("eight books", big)] {
        for (label, centring) in [("off", None), ("shift", BundleSettings::default().centring)] {
            let settings = BundleSettings {
                centring,
                ..BundleSettings::default()
            };
            let (e, _) = build_engine_with(&files, &settings);
            for mode in [Mode::Hybrid, Mode::Dense] {
                let mut at = [0usize; 3];
                let mut n = 0;
                for q in &queries {
                    let book = q["book"].as_str().unwrap();
                    if !files.iter().any(|f| f.ends_with(book)) {
                        continue;
                    }
                    n += 1;
                    let r = e.search(q["query"].as_str().unwrap(), mode, 10).unwrap();
                    let rank = rank_of(&r, book, q["line"].as_str().unwrap(), 10).map(|x| x.0);
                    for (i, k) in [1, 3, 10].into_iter().enumerate() {
                        at[i] += usize::from(rank.is_some_and(|r| r <= k));
                    }
                    if name == "three books" && q["id"] == "lunyu-01-1a" {
                        println!(
                            "<!-- {label} {mode} top-3 for {}: {:?} -->",
                            q["query"],
                            r.hits
                                .iter()
                                .take(3)
                                .map(|h| (
                                    h.source.rsplit('/').next().unwrap().to_string(),
                                    h.score,
                                    h.text.chars().take(24).collect::<String>()
                                ))
                                .collect::<Vec<_>>()
                        );
                    }
                }
                println!(
                    "| {name} | {label} | {mode} | {}/{n} | {}/{n} | {}/{n} |",
                    at[0], at[1], at[2]
                );
            }
        }
    }
}

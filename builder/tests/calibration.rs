//! Regression (found by a newcomer run): a bundle of a few one-line files yielded no
//! pseudo-queries, and its "calibration" (a = b = 0) scored every hit 0.5000 while saying
//! `calibrated: true`, so `--min-score 0.6` dropped everything. Such bundles now carry no
//! calibration and report raw scores.

use jikji_builder::build::{build, BuildOptions, MIN_CALIBRATION_CHUNKS};
use jikji_engine::{Engine, Mode};

#[test]
fn tiny_bundle_scored_everything_one_half() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    std::fs::create_dir_all(corpus.join("1. docs")).unwrap();
    for i in 0..4 {
        std::fs::write(
            corpus.join(format!("1. docs/plan{i}.md")),
            format!("Source: https://example.com/{i}\n\nPlan {i} covers beta testing.\n"),
        )
        .unwrap();
    }
    let out = tmp.path().join("bundle");
    build(&BuildOptions::new(&corpus, &out)).unwrap();
    let engine = Engine::open_dir(&out).unwrap();
    assert!(4 < MIN_CALIBRATION_CHUNKS);
    assert_eq!(engine.bundle().manifest.calibration, None);
    let r = engine.search("beta testing", Mode::Bm25, 4).unwrap();
    assert!(!r.calibrated);
    assert_eq!(r.hits.len(), 4);
    for h in &r.hits {
        assert_eq!(h.score, h.raw_score);
        assert_ne!(h.score, 0.5);
    }
}

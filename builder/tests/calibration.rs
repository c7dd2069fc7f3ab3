//! Regression (found by a newcomer run): a bundle of a few one-line files yielded no
//! pseudo-queries, and its "calibration" (a = b = 0) scored every hit 0.5000 while saying
//! `calibrated: true`, so `--min-score 0.6` dropped everything. Such bundles now carry no
//! calibration and report raw scores.

use jikji_builder::calibrate::MIN_CALIBRATION_CHUNKS;
use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
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
    build(
        &IngestOptions::new(&corpus, &out),
        &BundleSettings::default(),
    )
    .unwrap();
    let engine = Engine::open_dir(&out).unwrap();
    const { assert!(4 < MIN_CALIBRATION_CHUNKS) };
    assert_eq!(engine.bundle().manifest().calibration, None);
    let r = engine.search("beta testing", Mode::Bm25, 4).unwrap();
    assert!(!r.calibrated);
    assert_eq!(r.hits.len(), 4);
    for h in &r.hits {
        assert_eq!(h.score, h.raw_score);
        assert_ne!(h.score, 0.5);
    }
}

/// Newcomer run: `jikji search --min-score 1.5` on a calibrated bundle and `--top-k 0`
/// were accepted and silently returned nothing.
#[test]
fn search_accepted_impossible_min_score_and_top_k_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    std::fs::create_dir_all(corpus.join("1. docs")).unwrap();
    let words = [
        "harbour", "lantern", "orchard", "granite", "meadow", "copper", "willow", "falcon",
        "quarry", "violet", "ember", "glacier", "thistle", "canyon", "saffron", "pebble",
    ];
    for (i, w) in words.iter().enumerate() {
        let next = words[(i + 5) % words.len()];
        std::fs::write(
            corpus.join(format!("1. docs/{w}.md")),
            format!(
                "Source: https://example.com/{w}\n\nThe {w} stood near the {next} while the village \
                 slept, and every traveller who passed the {w} remembered it for many years after.\n"
            ),
        )
        .unwrap();
    }
    let out = tmp.path().join("bundle");
    build(
        &IngestOptions::new(&corpus, &out),
        &BundleSettings::default(),
    )
    .unwrap();
    assert!(Engine::open_dir(&out)
        .unwrap()
        .bundle()
        .manifest()
        .calibration
        .is_some());
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_jikji"))
            .arg("search")
            .arg(&out)
            .arg("lantern")
            .args(args)
            .env_remove("RUST_BACKTRACE")
            .output()
            .unwrap()
    };
    let o = run(&["--min-score", "1.5"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--min-score 1.5") && err.contains("[0, 1]"),
        "{err}"
    );
    let o = run(&["--top-k", "0"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--top-k must be at least 1"));
    assert!(run(&["--min-score", "0.2"]).status.success());
    // Newcomer run: dense on a bundle without vectors first complained about the model.
    let o = run(&["--mode", "dense", "--model", "/nonexistent-model"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("built without a model"), "{err}");
}

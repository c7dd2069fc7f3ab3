//! The streamed build (`docs/design/scale-1m.md` "Streamed build"): chunk records and
//! postings go to a temporary folder as the corpus is chunked, the postings spill sorted
//! runs past the index budget, and the bodies of the corpus files are read again when they
//! are chunked. None of it may change a bundle's bytes, and nothing may be left behind.

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use jikji_builder::chunker::Strategy;
use jikji_builder::ingest::{build, BundleSettings, IngestOptions};

/// Every file a bundle serves with its bytes: `jikji.json` (without `built_at`) and the
/// pages; not the writer's own `.jikji-pages` (each page file's inode and modification
/// time, for the next update).
fn files_of(bundle: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for e in walkdir::WalkDir::new(bundle) {
        let e = e.unwrap();
        if !e.file_type().is_file() {
            continue;
        }
        let rel = e
            .path()
            .strip_prefix(bundle)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        if rel == jikji_format::bundle::PAGE_RECORDS_FILE {
            continue;
        }
        let mut bytes = std::fs::read(e.path()).unwrap();
        if rel == "jikji.json" {
            let mut v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
            v.as_object_mut().unwrap().remove("built_at");
            bytes = serde_json::to_vec(&v).unwrap();
        }
        out.insert(rel, bytes);
    }
    out
}

/// Builds `corpus` into `out` with an index budget of `budget` bytes; returns the number
/// of postings runs spilled.
fn build_with(corpus: &Path, out: &Path, budget: usize, settings: &BundleSettings) -> usize {
    let opts = IngestOptions {
        index_budget: budget,
        ..IngestOptions::new(corpus, out)
    };
    build(&opts, settings).unwrap().postings_runs
}

/// No temporary build folder is left beside the bundle.
fn no_spill_left(parent: &Path) {
    let left: Vec<_> = std::fs::read_dir(parent)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".jikji-build-"))
        .collect();
    assert!(left.is_empty(), "temporary folders left: {left:?}");
}

/// A budget of a few kB makes the postings spill hundreds of runs (and merge them in
/// passes past the merge's fan-in); the bundle is byte for byte the one built in memory,
/// for the default chunking and for parent-child (whose records are patched with their
/// parents' doc ids when the chunk store is written).
#[test]
fn spilled_postings_give_the_same_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::subset_corpus(tmp.path(), common::REAL_SUBSET);
    let parent_child = BundleSettings {
        strategy: Strategy::parse("parent-child", 2048).unwrap(),
        ..BundleSettings::default()
    };
    for (name, settings) in [
        ("default", BundleSettings::default()),
        ("parent-child", parent_child),
    ] {
        let memory = tmp.path().join(format!("{name}-memory"));
        let spilled = tmp.path().join(format!("{name}-spilled"));
        assert_eq!(build_with(&corpus, &memory, 1 << 30, &settings), 0);
        let runs = build_with(&corpus, &spilled, 4 << 10, &settings);
        // Past the merge's fan-in (128), so merge passes run too.
        assert!(runs > 128, "{name}: only {runs} runs spilled");
        let (a, b) = (files_of(&memory), files_of(&spilled));
        assert!(a.len() > 50, "{name}: {} files", a.len());
        assert_eq!(
            a.keys().collect::<Vec<_>>(),
            b.keys().collect::<Vec<_>>(),
            "{name}: page names"
        );
        for (k, v) in &a {
            assert!(b[k] == *v, "{name}: {k} differs");
        }
        no_spill_left(tmp.path());
    }
}

/// A file edited between the corpus check and its chunking (its body is read again) is an
/// error naming it, not a bundle of text the check never saw.
#[test]
fn a_file_changed_after_the_check_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::subset_corpus(tmp.path(), common::REAL_SUBSET);
    let out = tmp.path().join("bundle");
    build_with(&corpus, &out, 1 << 30, &BundleSettings::default());
    let before = files_of(&out);
    // Scan with the bodies dropped, then change a file, then ask for its whole text.
    let scanned = jikji_builder::corpus::scan(
        &corpus,
        jikji_builder::corpus::CheckOptions {
            allow_ai_draft: false,
            drop_bodies: true,
        },
    )
    .unwrap();
    let f = scanned
        .files
        .iter()
        .find(|f| f.rel.ends_with("lunyu.md"))
        .unwrap();
    assert!(f.dropped.is_some() && f.text.len() == f.body_byte);
    assert_eq!(
        f.whole().unwrap().text,
        std::fs::read_to_string(&f.path).unwrap()
    );
    let mut text = std::fs::read_to_string(&f.path).unwrap();
    text.push_str("\n子曰：「後加之。」\n");
    std::fs::write(&f.path, text).unwrap();
    let err = f.whole().unwrap_err().to_string();
    assert!(
        err.contains("lunyu.md") && err.contains("changed while the bundle was being built"),
        "{err}"
    );
    // Nothing was written: the bundle is the one built before.
    assert_eq!(files_of(&out), before);
    no_spill_left(tmp.path());
}

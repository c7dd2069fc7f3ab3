//! `jikji search` refusing what it cannot answer, naming it (the newcomer check of session
//! 30): an empty query, a path that is not a bundle folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn jikji(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

/// The frozen format 2 fixture (BM25 and vectors, no query model).
fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../format/tests/compat/v2/bundle")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Regression (empty_query_gave_hits): `jikji search BUNDLE ""` printed "no results" in
/// BM25 but ten hits of the empty string's embedding in dense and hybrid.
#[test]
fn empty_query_gave_hits() {
    let b = fixture();
    let b = b.to_str().unwrap();
    for mode in ["bm25", "dense", "hybrid"] {
        for q in [&["", "論語"][..], &["論語", "   "][..]] {
            let mut args = vec!["search", b, "--mode", mode];
            args.extend(q);
            let o = jikji(&args);
            let pos = if q[0].trim().is_empty() { 1 } else { 2 };
            assert_eq!(o.status.code(), Some(1), "{mode} {q:?}");
            assert!(o.stdout.is_empty(), "{mode} {q:?}: printed hits");
            assert!(
                stderr(&o).contains(&format!("query {pos} is empty")),
                "{mode} {q:?}: {}",
                stderr(&o)
            );
        }
    }
    // A queries file with an empty text names its line.
    let tmp = tempfile::tempdir().unwrap();
    let f = tmp.path().join("q.jsonl");
    std::fs::write(&f, "{\"text\": \"論語\"}\n{\"text\": \" \"}\n").unwrap();
    let o = jikji(&[
        "search",
        b,
        "--mode",
        "bm25",
        "--queries-file",
        f.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("q.jsonl:2: the query text is empty"),
        "{}",
        stderr(&o)
    );
}

/// Regression (wrong_bundle_path_named_manifest_json): a mistyped bundle path read as
/// "BUNDLE/manifest.json: missing from the bundle", a file of the old format.
#[test]
fn wrong_bundle_path_named_manifest_json() {
    let tmp = tempfile::tempdir().unwrap();
    let nope = tmp.path().join("nope");
    let o = jikji(&["search", nope.to_str().unwrap(), "--mode", "bm25", "x"]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.contains(&format!("bundle folder {} not found", nope.display()))
            && !e.contains("manifest.json"),
        "{e}"
    );
    let o = jikji(&[
        "search",
        tmp.path().to_str().unwrap(),
        "--mode",
        "bm25",
        "x",
    ]);
    let e = stderr(&o);
    assert!(
        e.contains("not a bundle folder (no jikji.json or manifest.json"),
        "{e}"
    );
    // A real bundle still opens.
    let o = jikji(&[
        "search",
        fixture().to_str().unwrap(),
        "--mode",
        "bm25",
        "論語",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

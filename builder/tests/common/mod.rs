//! Shared helpers of the builder's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `../shared/books` beside the repository (or `$JIKJI_SHARED/books`).
pub fn shared_books() -> PathBuf {
    let shared = std::env::var_os("JIKJI_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared"));
    let books = shared.join("books");
    assert!(
        books.is_dir(),
        "{} not found: the real-book tests need ../shared/books",
        books.display()
    );
    books
}

/// The model folder, or a panic that says how to make it. Tests that need the model
/// must not pass silently without it.
pub fn model_dir() -> PathBuf {
    let dir = std::env::var_os("JIKJI_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models/e5-small"));
    assert!(
        dir.join("model.onnx").exists(),
        "{}: no model.onnx; run scripts/setup-model",
        dir.display()
    );
    dir
}

/// Embedding cache shared by test runs (vectors keyed by model + chunk text), so the
/// same chunks are embedded once per machine.
pub fn cache_dir() -> PathBuf {
    root().join("target/jikji-test-cache")
}

/// Copies `files` (paths relative to the shared books folder, tier folders included)
/// into a fresh corpus folder under `dir`.
pub fn subset_corpus(dir: &Path, files: &[&str]) -> PathBuf {
    let src = shared_books();
    let corpus = dir.join("books");
    for f in files {
        let to = corpus.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(src.join(f), &to).unwrap_or_else(|e| panic!("copying {f}: {e}"));
    }
    corpus
}

/// The real-book subset used by the end-to-end tests: all three tiers.
pub const REAL_SUBSET: &[&str] = &[
    "1. 漢文 古典/lunyu.md",
    "1. 漢文 古典/daxue.md",
    "2. Gutenberg classics/shakespeare-hamlet.txt",
    "99. 온라인 자료 (정리 X)/16_When_Buckwheat_Flowers_Blossom.md",
    "99. 온라인 자료 (정리 X)/23_Spring_Spring.md",
];

/// Runs the built `jikji` binary with `args` and returns its stdout; panics with its
/// stderr if it exits with an error.
pub fn jikji_ok<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

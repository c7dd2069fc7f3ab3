//! The corpus check on a fixture folder of bad files: each gets its named error or
//! warning with file and line / byte offset, and `build` still builds a bundle from the
//! good files with every input file left in place, unchanged.

use std::path::{Path, PathBuf};

use jikji_builder::corpus::{scan, CheckOptions, Severity};
use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_engine::{Engine, Mode};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bad-corpus")
}

fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| (e.path().to_path_buf(), std::fs::read(e.path()).unwrap()))
        .collect();
    v.sort();
    v
}

#[test]
fn every_bad_file_gets_its_named_finding() {
    let s = scan(&fixture(), CheckOptions::default()).unwrap();
    let got: Vec<String> = s.findings.iter().map(|f| f.to_string()).collect();
    let want = [
        "error[ai-draft] 1. docs/ai-draft.md:1: front matter says provenance: ai-draft; AI-written text is excluded (--allow-ai-draft includes it, tagged)",
        "error[binary] 1. docs/binary.txt:2 (byte 32): NUL byte: this is a binary file, not text",
        "error[empty] 1. docs/empty.md: empty file",
        "warning[duplicate] 1. docs/good.md: identical content to 1. docs/good-copy.md; both are indexed, results will repeat",
        "error[invalid-utf8] 1. docs/invalid-utf8.txt:3 (byte 50): invalid UTF-8; save the file as UTF-8",
        "error[no-source] 1. docs/no-source.md: no source: add a `Source: URL` or `출처: name` line (`:` or `：`, any spacing), front matter `source:`, or a URL in the text (URLs inside code do not count)",
        "error[unclosed-fence] 1. docs/unclosed-fence.md:5: code fence ``` opened here is never closed",
        "warning[tier-unnumbered] unnumbered: top-level folder has no tier number; name it like `2. name` (lower = better curated)",
    ];
    assert_eq!(got, want);
    assert_eq!(s.errors(), 6);
    let ok: Vec<&str> = s.files.iter().map(|f| f.rel.as_str()).collect();
    assert_eq!(
        ok,
        [
            "1. docs/good-copy.md",
            "1. docs/good.md",
            "unnumbered/misc.md"
        ]
    );
}

#[test]
fn ai_draft_is_included_and_tagged_when_allowed() {
    let s = scan(
        &fixture(),
        CheckOptions {
            allow_ai_draft: true,
            drop_bodies: false,
        },
    )
    .unwrap();
    assert!(!s.findings.iter().any(|f| f.code == "ai-draft"));
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bundle");
    build(
        &IngestOptions::new(fixture(), &out),
        &BundleSettings {
            allow_ai_draft: true,
            ..BundleSettings::default()
        },
    )
    .unwrap();
    let e = Engine::open_dir(&out).unwrap();
    let hit = &e
        .search("AI-written draft timeout", Mode::Bm25, 1)
        .unwrap()
        .hits[0];
    assert_eq!(hit.source, "1. docs/ai-draft.md");
    assert_eq!(hit.provenance.as_deref(), Some("ai-draft"));
    assert_eq!(hit.title.as_deref(), Some("Draft plan"));
    assert!(
        !hit.text.contains("provenance"),
        "front matter must not be indexed: {:?}",
        hit.text
    );
}

#[test]
fn build_uses_the_good_files_and_leaves_every_input_in_place() {
    let before = snapshot(&fixture());
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bundle");
    let q = tmp.path().join("quarantine");
    let r = build(
        &IngestOptions {
            quarantine: Some(q.clone()),
            ..IngestOptions::new(fixture(), &out)
        },
        &BundleSettings::default(),
    )
    .unwrap();
    assert_eq!(r.files, 3);
    assert_eq!(
        r.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count(),
        6
    );
    assert_eq!(
        snapshot(&fixture()),
        before,
        "input files must stay in place, unchanged"
    );
    assert_eq!(r.quarantined.len(), 6);
    assert!(q.join("1. docs/no-source.md").exists());
    let e = Engine::open_dir(&out).unwrap();
    let hits = e.search("foxes and dogs", Mode::Bm25, 5).unwrap().hits;
    assert_eq!(hits.len(), 2, "the two identical good files");
    assert!(
        hits[0].updated.as_deref().is_some_and(|d| d.len() == 10),
        "file mtime fills `updated`"
    );
}

#[test]
fn strict_build_fails_on_any_error_and_writes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bundle");
    let err = build(
        &IngestOptions {
            strict: true,
            ..IngestOptions::new(fixture(), &out)
        },
        &BundleSettings::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.starts_with("6 corpus error(s) with --strict"), "{err}");
    assert!(!out.exists());
}

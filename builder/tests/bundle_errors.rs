//! A bundle that is corrupt, truncated or of another format version is refused with an
//! error naming the file; a rebuild replaces a bundle atomically and keeps the last one;
//! unreadable corpus files are reported and left untouched.

use std::path::Path;

use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_engine::{Engine, Mode};
use jikji_format::FormatError;

fn corpus(dir: &Path) -> std::path::PathBuf {
    let c = dir.join("books/1. classics");
    std::fs::create_dir_all(&c).unwrap();
    std::fs::write(c.join("a.md"), "Source: https://example.org/a\n\n# A\n\nThe quick brown fox.\n\n---\n\n## B\n\nJumps over the lazy dog.\n").unwrap();
    std::fs::write(c.join("bad.txt"), b"Source: x\nvalid then \xff\xfe invalid").unwrap();
    std::fs::write(c.join("empty.md"), "  \n").unwrap();
    dir.join("books")
}

fn opts(corpus: &Path, out: &Path) -> IngestOptions {
    IngestOptions::new(corpus, out)
}

fn open_err(dir: &Path) -> String {
    match Engine::open_dir(dir) {
        Ok(_) => panic!("a damaged bundle was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn builds_from_good_files_and_reports_bad_ones_without_touching_them() {
    let tmp = tempfile::tempdir().unwrap();
    let books = corpus(tmp.path());
    let before: Vec<_> = walk(&books);
    let r = build(
        &opts(&books, &tmp.path().join("bundle")),
        &BundleSettings::default(),
    )
    .unwrap();
    assert_eq!(r.files, 1);
    let skipped: Vec<String> = r.findings.iter().map(|f| f.to_string()).collect();
    assert_eq!(
        skipped,
        [
            "error[invalid-utf8] 1. classics/bad.txt:2 (byte 21): invalid UTF-8; save the file as UTF-8",
            "error[empty] 1. classics/empty.md: empty file"
        ]
    );
    assert_eq!(
        walk(&books),
        before,
        "corpus files must stay in place, unchanged"
    );

    let e = Engine::open_dir(&tmp.path().join("bundle")).unwrap();
    let hits = e.search("lazy dog", Mode::Bm25, 5).unwrap().hits;
    assert_eq!(hits[0].heading_path, ["A", "B"]);
    assert_eq!(hits[0].tier, Some(1));
    assert_eq!(hits[0].source_url.as_deref(), Some("https://example.org/a"));
    let err = e
        .search("lazy dog", Mode::Dense, 5)
        .unwrap_err()
        .to_string();
    assert!(err.contains("built without a model"), "{err}");
}

fn walk(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().display().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn corrupt_truncated_missing_and_foreign_version_files_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let books = corpus(tmp.path());
    let out = tmp.path().join("bundle");
    build(&opts(&books, &out), &BundleSettings::default()).unwrap();
    let fresh = |name: &str| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        for f in std::fs::read_dir(&out).unwrap() {
            let f = f.unwrap();
            std::fs::copy(f.path(), d.join(f.file_name())).unwrap();
        }
        d
    };

    // One flipped byte: checksum mismatch naming the file.
    let d = fresh("flipped");
    let mut b = std::fs::read(d.join("postings.bin")).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    std::fs::write(d.join("postings.bin"), b).unwrap();
    let err = open_err(&d);
    assert!(err.starts_with("postings.bin: checksum mismatch"), "{err}");

    // Truncated (half-copied) file: size mismatch naming the file.
    let d = fresh("truncated");
    let b = std::fs::read(d.join("chunks.bin")).unwrap();
    std::fs::write(d.join("chunks.bin"), &b[..b.len() / 2]).unwrap();
    let err = open_err(&d);
    assert!(err.starts_with("chunks.bin: size mismatch"), "{err}");

    // Missing file.
    let d = fresh("missing");
    std::fs::remove_file(d.join("terms.fst")).unwrap();
    assert!(open_err(&d).contains("terms.fst: missing"));

    // Another format version.
    let d = fresh("version");
    let m = std::fs::read_to_string(d.join("manifest.json")).unwrap();
    std::fs::write(
        d.join("manifest.json"),
        m.replace("\"format_version\": 1", "\"format_version\": 99"),
    )
    .unwrap();
    let err = open_err(&d);
    assert!(
        err.contains("manifest.json: format version 99 is not supported"),
        "{err}"
    );

    // Data corruption inside a file whose checksum was updated to match (e.g. a bad writer).
    let d = fresh("bad-magic");
    let mut b = std::fs::read(d.join("postings.bin")).unwrap();
    b[0] = b'X';
    let sha = jikji_format::sha256_hex(&b);
    std::fs::write(d.join("postings.bin"), &b).unwrap();
    let m = std::fs::read_to_string(d.join("manifest.json")).unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&m).unwrap();
    v["files"]["postings.bin"]["sha256"] = sha.into();
    std::fs::write(d.join("manifest.json"), v.to_string()).unwrap();
    match Engine::open_dir(&d) {
        Err(jikji_engine::EngineError::Format(FormatError::DataCorruption {
            file,
            offset,
            ..
        })) => {
            assert_eq!((file.as_str(), offset), ("postings.bin", 0));
        }
        Err(e) => panic!("expected DataCorruption, got {e}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn rebuild_replaces_atomically_and_keeps_the_previous_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let books = corpus(tmp.path());
    let out = tmp.path().join("bundle");
    build(&opts(&books, &out), &BundleSettings::default()).unwrap();
    let first = std::fs::read(out.join("manifest.json")).unwrap();
    std::fs::write(
        books.join("1. classics/c.md"),
        "Source: https://example.org/c\n\nA new book about foxes.\n",
    )
    .unwrap();
    build(&opts(&books, &out), &BundleSettings::default()).unwrap();
    assert_eq!(
        std::fs::read(tmp.path().join("bundle.prev/manifest.json")).unwrap(),
        first
    );
    assert_eq!(
        Engine::open_dir(&out)
            .unwrap()
            .bundle()
            .manifest()
            .counts
            .files,
        2
    );
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

//! A bundle that is corrupt, truncated or of another format version is refused with an
//! error naming the file; a rebuild replaces a bundle atomically and keeps the last one;
//! unreadable corpus files are reported and left untouched.

use std::path::Path;

use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_engine::{Engine, Mode};

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
fn corrupt_truncated_missing_and_foreign_version_pages_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let books = corpus(tmp.path());
    let out = tmp.path().join("bundle");
    build(&opts(&books, &out), &BundleSettings::default()).unwrap();
    let fresh = |name: &str| {
        let d = tmp.path().join(name);
        for e in walkdir::WalkDir::new(&out) {
            let e = e.unwrap();
            let to = d.join(e.path().strip_prefix(&out).unwrap());
            if e.file_type().is_dir() {
                std::fs::create_dir_all(&to).unwrap();
            } else {
                std::fs::copy(e.path(), to).unwrap();
            }
        }
        d
    };
    let page = |d: &Path, prefix: &str| {
        let mut names: Vec<String> = std::fs::read_dir(d.join("p"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(prefix))
            .collect();
        names.sort();
        names.into_iter().next().expect("a page of that kind")
    };
    let whole_err = |d: &Path| match jikji_format::Bundle::open_dir(d) {
        Ok(_) => panic!("a damaged bundle was accepted"),
        Err(e) => e.to_string(),
    };

    // One flipped byte in a page: refused naming the page, read whole or by a query.
    let d = fresh("flipped");
    let name = page(&d, "d-");
    let mut b = std::fs::read(d.join("p").join(&name)).unwrap();
    let mid = 48 + (b.len() - 48) / 2; // inside the body, past the 48-byte header
    b[mid] ^= 1;
    std::fs::write(d.join("p").join(&name), b).unwrap();
    let err = whole_err(&d);
    assert!(
        err.starts_with(&format!("p/{name}: data corruption")),
        "{err}"
    );
    let e = Engine::open_dir_paged(&d).unwrap();
    let err = e.search("lazy dog", Mode::Bm25, 5).unwrap_err().to_string();
    assert!(err.contains(&format!("p/{name}")), "{err}");

    // Truncated (half-copied) page.
    let d = fresh("truncated");
    let name = page(&d, "c-");
    let b = std::fs::read(d.join("p").join(&name)).unwrap();
    std::fs::write(d.join("p").join(&name), &b[..b.len() / 2]).unwrap();
    let err = whole_err(&d);
    assert!(
        err.starts_with(&format!("p/{name}: data corruption")) && err.contains("header says"),
        "{err}"
    );

    // Missing page.
    let d = fresh("missing");
    let name = page(&d, "l-");
    std::fs::remove_file(d.join("p").join(&name)).unwrap();
    let err = whole_err(&d);
    assert!(err.contains(&format!("p/{name}: missing")), "{err}");

    // A page stored under another page's name (a mixed-up copy or a hostile server).
    let d = fresh("swapped");
    let a = page(&d, "l-");
    let t = page(&d, "t-");
    std::fs::copy(d.join("p").join(&t), d.join("p").join(&a)).unwrap();
    let err = whole_err(&d);
    assert!(err.contains(&format!("p/{a}")), "{err}");

    // Another format version.
    let d = fresh("version");
    let m = std::fs::read_to_string(d.join("jikji.json")).unwrap();
    std::fs::write(
        d.join("jikji.json"),
        m.replace("\"format_version\":2", "\"format_version\":99"),
    )
    .unwrap();
    let err = open_err(&d);
    assert!(
        err.contains("jikji.json: format version 99 is not supported"),
        "{err}"
    );
}

#[test]
fn rebuild_replaces_atomically_and_keeps_the_previous_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let books = corpus(tmp.path());
    let out = tmp.path().join("bundle");
    build(&opts(&books, &out), &BundleSettings::default()).unwrap();
    let first = std::fs::read(out.join("jikji.json")).unwrap();
    std::fs::write(
        books.join("1. classics/c.md"),
        "Source: https://example.org/c\n\nA new book about foxes.\n",
    )
    .unwrap();
    build(&opts(&books, &out), &BundleSettings::default()).unwrap();
    assert_eq!(
        std::fs::read(tmp.path().join("bundle.prev/jikji.json")).unwrap(),
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

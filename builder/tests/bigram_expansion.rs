//! Bigram expansion pages (`x-…`, FORMAT.md): a Hangul or Han query bigram's expansions read
//! from its `x` page give exactly the results of the search over the Hanja table and the
//! dictionary (a whole read of the same bundle), and the paged query fetches no Hanja page
//! and no dictionary block for reading combinations that are not terms.

mod common;

use std::ffi::OsStr;
use std::path::Path;

use jikji_engine::{Engine, EngineError, Mode, SearchResult};
use jikji_format::paged::page;

/// The browser's loop, run natively: entry first, then the pages each pass asks for.
/// Returns the result and the names of every page fetched.
fn browser_search(dir: &Path, engine: &Engine, q: &str) -> (SearchResult, Vec<String>) {
    let mut fetched = Vec::new();
    for _ in 0..=jikji_engine::MAX_ROUNDS {
        match engine.search(q, Mode::Bm25, 10) {
            Ok(r) => return (r, fetched),
            Err(EngineError::NeedPages(names)) => {
                for n in names {
                    let stored = std::fs::read(dir.join("p").join(&n)).unwrap();
                    let raw = page::decode_stored(&n, &stored).unwrap();
                    let mut bytes = stored[..page::HEADER_LEN].to_vec();
                    bytes.extend_from_slice(&raw);
                    engine.add_page(&n, &bytes).unwrap();
                    fetched.push(n);
                }
            }
            Err(e) => panic!("{q}: {e}"),
        }
    }
    panic!("{q}: more than {} rounds", jikji_engine::MAX_ROUNDS);
}

#[test]
fn bigram_expansions_from_x_pages_equal_the_hanja_search() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("bundle");
    let source = common::root().join("format/tests/compat/v1/source");
    common::jikji_ok([
        OsStr::new("build"),
        source.as_os_str(),
        OsStr::new("--out"),
        out.as_os_str(),
        OsStr::new("--no-embed"),
        OsStr::new("--quiet"),
    ]);
    let x_pages = std::fs::read_dir(out.join("p"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("x-")
        })
        .count();
    assert!(x_pages > 0, "the bundle has Hanja pages, so it has x pages");

    // A whole read searches the Hanja table and the dictionary (no x pages).
    let whole = Engine::open_dir(&out).unwrap();
    let entry = std::fs::read(out.join("jikji.json")).unwrap();
    for q in [
        "군자",
        "학이",
        "君子",
        "學而",
        "학이 시습",
        "군자 학이",
        "메밀꽃",
        "장판은 쓸쓸하고",
        "學而時習之",
        "to be or not to be",
    ] {
        let browser = Engine::open_entry(&entry).unwrap();
        let want = whole.search(q, Mode::Bm25, 10).unwrap();
        let (got, fetched) = browser_search(&out, &browser, q);
        assert_eq!(want.hits, got.hits, "{q}");
        assert!(
            fetched.iter().all(|n| !n.starts_with("h-")),
            "{q}: the x pages answer, no Hanja page is read: {fetched:?}"
        );
    }
    // The expansion is used: 군자 finds the Hanja text (君子) through its x page.
    let browser = Engine::open_entry(&entry).unwrap();
    let (r, fetched) = browser_search(&out, &browser, "군자");
    assert!(!r.hits.is_empty(), "군자 finds 君子");
    assert!(fetched.iter().any(|n| n.starts_with("x-")), "{fetched:?}");
}

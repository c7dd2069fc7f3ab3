//! Bigram expansion pages (`x-…`, FORMAT.md): a Hangul or Han query bigram's expansions read
//! from its `x` page give exactly the results of the search over the Hanja table and the
//! dictionary (a whole read of the same bundle), and the paged query (read cold, as the
//! browser reads it) fetches no Hanja page.

mod common;

use std::ffi::OsStr;

use jikji_engine::{Engine, Mode};

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

    // A whole read searches the Hanja table and the dictionary (no x pages); a paged read
    // starts cold and reads, round by round, the pages each pass asks for (as the browser).
    let whole = Engine::open_dir(&out).unwrap();
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
        let paged = Engine::open_dir_paged(&out).unwrap();
        let want = whole.search(q, Mode::Bm25, 10).unwrap();
        let got = paged.search(q, Mode::Bm25, 10).unwrap();
        assert_eq!(want.hits, got.hits, "{q}");
        let read = paged.last_fetch().by_kind;
        assert!(
            !read.contains_key("h"),
            "{q}: the x pages answer, no Hanja page is read: {read:?}"
        );
    }
    // The expansion is used: 군자 finds the Hanja text (君子) through its x page.
    let paged = Engine::open_dir_paged(&out).unwrap();
    let r = paged.search("군자", Mode::Bm25, 10).unwrap();
    assert!(!r.hits.is_empty(), "군자 finds 君子");
    assert!(paged.last_fetch().by_kind.contains_key("x"));
}

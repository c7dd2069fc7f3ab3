//! Unicode table pages (`n-…`, FORMAT.md "Unicode table pages") cost no round of their own:
//! a phrase candidate's text that needs a table the query did not comes with the
//! candidate's chunk page (the entry's `unicode.chunks` says which tables chunk texts
//! need), and a query text that needs one asks for it with its first pages. Read cold, as
//! the browser reads it (a fresh engine per query), a query whose lists are long takes
//! dictionary → postings → chunks: three rounds after the entry, with the results of the
//! compiled-in tables.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

use jikji_engine::{Engine, Mode};

/// `n` files that all say "harbour bread" (long lists: more than 1,024 bytes of postings
/// each); file `i` also says it again with `extra[i]` (so it is among the phrase
/// candidates).
fn corpus(dir: &Path, n: usize, extra: &[&str]) -> PathBuf {
    let c = dir.join("corpus");
    std::fs::create_dir_all(c.join("1. notes")).unwrap();
    for i in 0..n {
        let more = match extra.get(i) {
            Some(e) => format!(" The harbour bread again, {e}."),
            None => String::new(),
        };
        std::fs::write(
            c.join(format!("1. notes/note-{i:04}.md")),
            format!(
                "Source: https://example.org/{i}\n\n# Note {i}\n\nThe harbour bread of town \
                 number {i} was baked at dawn.{more}\n"
            ),
        )
        .unwrap();
    }
    c
}

fn build(source: &Path, out: &Path) {
    common::jikji_ok([
        OsStr::new("build"),
        source.as_os_str(),
        OsStr::new("--out"),
        out.as_os_str(),
        OsStr::new("--no-embed"),
        OsStr::new("--quiet"),
    ]);
}

fn entry_unicode(out: &Path) -> serde_json::Value {
    let entry: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("jikji.json")).unwrap()).unwrap();
    entry["pages"]["unicode"].clone()
}

#[test]
fn phrase_candidate_text_needed_a_fourth_round() {
    let tmp = tempfile::tempdir().unwrap();
    // Candidates' texts with accents (NFKC) and Traditional Chinese (T2S); the first
    // query is ASCII, so it needs neither table itself.
    let source = corpus(
        tmp.path(),
        600,
        &["a café crème", "學而時習之 君子", "君子之道"],
    );
    let out = tmp.path().join("bundle");
    build(&source, &out);
    let whole = Engine::open_dir(&out).unwrap();
    for q in [
        "harbour bread",
        "bread harbour",
        "harbour 君子",
        "君子 harbour bread",
    ] {
        let paged = Engine::open_dir_paged(&out).unwrap();
        let want = whole.search(q, Mode::Bm25, 10).unwrap();
        let got = paged.search(q, Mode::Bm25, 10).unwrap();
        assert_eq!(want.hits, got.hits, "{q}");
        let f = paged.last_fetch();
        assert!(
            f.by_kind.contains_key("o") && f.by_kind.contains_key("c"),
            "{q}: long lists and chunk pages are read: {:?}",
            f.per_round
        );
        assert!(
            f.by_kind.contains_key("n"),
            "{q}: a candidate's text needs a Unicode table: {:?}",
            f.per_round
        );
        assert!(
            f.rounds <= 3,
            "{q}: {} rounds after the entry: {:?}",
            f.rounds,
            f.per_round
        );
    }
    // The languages whose chunk texts need each table: some, here (the candidates with
    // accents or Han are English or Chinese chunks by the language guess).
    let u = entry_unicode(&out);
    for t in ["nfkc_langs", "t2s_langs"] {
        assert!(!u[t].as_array().unwrap().is_empty(), "{u}");
    }
}

#[test]
fn ascii_candidates_fetch_no_unicode_table() {
    // The phrase candidates are English chunks in ASCII; the Chinese chunks (Traditional
    // text: T2S) are of another language, so the candidates' pages come without a table.
    let tmp = tempfile::tempdir().unwrap();
    let source = corpus(tmp.path(), 600, &["plain words"]);
    std::fs::create_dir_all(source.join("2. 漢文")).unwrap();
    for i in 0..3 {
        std::fs::write(
            source.join(format!("2. 漢文/書-{i}.md")),
            format!(
                "Source: https://example.org/zh/{i}\n\n# 論語 {i}\n\n學而時習之，不亦說乎。\
                 有朋自遠方來，不亦樂乎。人不知而不慍，不亦君子乎。\n"
            ),
        )
        .unwrap();
    }
    let out = tmp.path().join("bundle");
    build(&source, &out);
    let u = entry_unicode(&out);
    assert_eq!(
        (&u["nfkc_langs"], &u["t2s_langs"]),
        (&serde_json::json!([]), &serde_json::json!(["zh"])),
        "{u}"
    );
    let whole = Engine::open_dir(&out).unwrap();
    let paged = Engine::open_dir_paged(&out).unwrap();
    let got = paged.search("harbour bread", Mode::Bm25, 10).unwrap();
    assert_eq!(
        whole.search("harbour bread", Mode::Bm25, 10).unwrap().hits,
        got.hits
    );
    let f = paged.last_fetch();
    assert!(
        f.by_kind.contains_key("c") && !f.by_kind.contains_key("n"),
        "{:?}",
        f.per_round
    );
    assert!(f.rounds <= 3, "{:?}", f.per_round);
}

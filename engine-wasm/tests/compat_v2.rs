//! Format-2 compatibility: the frozen paged fixtures of `format/tests/compat/v2/` (built from
//! the same corpus as the format 1 fixtures, never rebuilt; see its README) answer exactly as
//! the format 1 fixtures do (BM25 ids and scores), read paged as the browser reads them
//! (entry first, then the pages each query asks for, in rounds) or natively; a paged read
//! equals a whole read for dense and hybrid; a page with one flipped byte is refused naming
//! it. Written against `Engine`'s and `Bundle`'s public methods only.

use std::path::{Path, PathBuf};

use jikji_engine::{Engine, EngineError, Mode, SearchResult};
use jikji_format::paged::page;

fn fixture(version: &str, name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../format/tests/compat")
        .join(version)
        .join(name)
}

const QUERIES: &[&str] = &[
    "to be or not to be",
    "學而時習之",
    "学而时习之",
    "메밀꽃",
    "학이",
    "君子",
    "hamlet ophelia",
    "the slings and arrows",
    "outrageou",
    "shakspeare",
];

fn ids_scores(r: &SearchResult) -> Vec<(String, f32, f32)> {
    r.hits
        .iter()
        .map(|h| (h.id.clone(), h.score, h.raw_score))
        .collect()
}

/// The browser's loop, run natively: open the entry alone, answer each `NeedPages` by
/// reading the pages from the folder, inflating them and adding header + raw body.
/// Returns the result and the number of rounds (fetches) it took.
fn browser_search(
    dir: &Path,
    engine: &Engine,
    q: &str,
    qvec: Option<&[f32]>,
    mode: Mode,
) -> (SearchResult, usize) {
    let mut rounds = 0;
    loop {
        match engine.search_with_vector(q, qvec, mode, 10) {
            Ok(r) => return (r, rounds),
            Err(EngineError::NeedPages(names)) => {
                rounds += 1;
                assert!(rounds <= jikji_engine::MAX_ROUNDS, "{q}: too many rounds");
                for n in names {
                    let stored = std::fs::read(dir.join("p").join(&n)).unwrap();
                    let raw = page::decode_stored(&n, &stored).unwrap();
                    let mut bytes = stored[..page::HEADER_LEN].to_vec();
                    bytes.extend_from_slice(&raw);
                    engine.add_page(&n, &bytes).unwrap();
                }
            }
            Err(e) => panic!("{q}: {e}"),
        }
    }
}

#[test]
fn paged_fixtures_answer_as_the_format_1_fixtures() {
    for name in ["bundle", "bundle-bm25"] {
        let v1 = Engine::open_dir(&fixture("v1", name)).unwrap();
        let dir = fixture("v2", name);
        let native = Engine::open_dir_paged(&dir).unwrap();
        assert!(native.bundle().is_paged());
        let entry = std::fs::read(dir.join("jikji.json")).unwrap();
        let browser = Engine::open_entry(&entry).unwrap();
        assert_eq!(
            v1.bundle().manifest().counts,
            native.bundle().manifest().counts
        );
        for q in QUERIES {
            let a = v1.search(q, Mode::Bm25, 10).unwrap();
            let b = native.search(q, Mode::Bm25, 10).unwrap();
            let (c, rounds) = browser_search(&dir, &browser, q, None, Mode::Bm25);
            assert_eq!(ids_scores(&a), ids_scores(&b), "{name} {q}: native paged");
            assert_eq!(a.hits, c.hits, "{name} {q}: browser paged");
            // Entry → dictionary → (postings) → chunks; +1 for Hanja pages; the typo page
            // and the terms it reaches +2.
            assert!(rounds <= 5, "{name} {q}: {rounds} rounds");
        }
        // A second run of a query fetches nothing.
        let (_, again) = browser_search(&dir, &browser, QUERIES[0], None, Mode::Bm25);
        assert_eq!(again, 0);
    }
}

/// The frozen grouped-names fixture (`format/tests/compat/v2-groups`, page names per group
/// with `gens`) answers as the format 1 fixture, natively paged and through the browser's loop.
#[test]
fn grouped_page_names_answer_as_the_format_1_fixture() {
    let v1 = Engine::open_dir(&fixture("v1", "bundle-bm25")).unwrap();
    let dir = fixture("v2-groups", "bundle-bm25");
    let entry = std::fs::read(dir.join("jikji.json")).unwrap();
    assert!(
        String::from_utf8_lossy(&entry).contains("\"gens\":["),
        "the fixture has grouped runs"
    );
    let native = Engine::open_dir_paged(&dir).unwrap();
    let browser = Engine::open_entry(&entry).unwrap();
    for q in QUERIES {
        let a = v1.search(q, Mode::Bm25, 10).unwrap();
        let b = native.search(q, Mode::Bm25, 10).unwrap();
        let (c, _) = browser_search(&dir, &browser, q, None, Mode::Bm25);
        assert_eq!(ids_scores(&a), ids_scores(&b), "{q}: native paged");
        assert_eq!(a.hits, c.hits, "{q}: browser paged");
    }
}

#[test]
fn paged_dense_and_hybrid_equal_a_whole_read() {
    let dir = fixture("v2", "bundle");
    let whole = Engine::open_dir(&dir).unwrap();
    assert!(!whole.bundle().is_paged());
    let entry = std::fs::read(dir.join("jikji.json")).unwrap();
    let browser = Engine::open_entry(&entry).unwrap();
    let v = whole.bundle().vectors().unwrap();
    for i in [0usize, 5, 12] {
        let mut q = v.get(i);
        let n = q.iter().map(|x| x * x).sum::<f32>().sqrt();
        q.iter_mut().for_each(|x| *x /= n);
        for mode in [Mode::Dense, Mode::Hybrid] {
            let a = whole
                .search_with_vector("hamlet", Some(&q), mode, 10)
                .unwrap();
            let (b, rounds) = browser_search(&dir, &browser, "hamlet", Some(&q), mode);
            assert_eq!(a.hits, b.hits, "row {i} {mode}");
            assert!(rounds <= 3, "row {i} {mode}: {rounds} rounds");
        }
    }
    // BM25 never asks for a vector page.
    let fresh = Engine::open_entry(&entry).unwrap();
    let mut asked = Vec::new();
    loop {
        match fresh.search("to be or not to be", Mode::Bm25, 10) {
            Ok(_) => break,
            Err(EngineError::NeedPages(names)) => {
                for n in names {
                    let stored = std::fs::read(dir.join("p").join(&n)).unwrap();
                    let raw = page::decode_stored(&n, &stored).unwrap();
                    let mut bytes = stored[..page::HEADER_LEN].to_vec();
                    bytes.extend_from_slice(&raw);
                    fresh.add_page(&n, &bytes).unwrap();
                    asked.push(n);
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(
        !asked
            .iter()
            .any(|n| n.starts_with("v-") || n.starts_with("h-")),
        "{asked:?}"
    );
}

#[test]
fn a_page_with_one_flipped_byte_is_refused_by_name() {
    let dir = fixture("v2", "bundle");
    let tmp = tempfile::tempdir().unwrap();
    let names: Vec<String> = std::fs::read_dir(dir.join("p"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.len() > 20);
    for n in &names {
        let copy = tmp.path().join(n);
        std::fs::create_dir_all(copy.join("p")).unwrap();
        std::fs::copy(dir.join("jikji.json"), copy.join("jikji.json")).unwrap();
        for m in &names {
            std::fs::copy(dir.join("p").join(m), copy.join("p").join(m)).unwrap();
        }
        let p = copy.join("p").join(n);
        let mut b = std::fs::read(&p).unwrap();
        // A byte inside the body (the last byte of a deflate stream can be padding bits
        // that carry no content: flipping those changes nothing the page says).
        let at = page::HEADER_LEN + (b.len() - page::HEADER_LEN) / 2;
        b[at] ^= 0x20;
        std::fs::write(&p, b).unwrap();
        let err = match jikji_format::Bundle::open_dir(&copy) {
            Ok(_) => panic!("{n}: a flipped byte was accepted"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(&format!("p/{n}")), "{n}: {err}");
        // The browser path refuses the same page when it is added.
        let stored = std::fs::read(&p).unwrap();
        let mut bytes = stored[..page::HEADER_LEN].to_vec();
        match page::decode_stored(n, &stored) {
            Err(e) => assert!(e.to_string().contains(&format!("p/{n}")), "{e}"),
            Ok(raw) => {
                bytes.extend_from_slice(&raw);
                let e =
                    Engine::open_entry(&std::fs::read(copy.join("jikji.json")).unwrap()).unwrap();
                let err = e.add_page(n, &bytes).unwrap_err().to_string();
                assert!(err.contains(&format!("p/{n}")), "{err}");
            }
        }
    }
}

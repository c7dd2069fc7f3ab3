//! Format-1 compatibility: today's engine opens the frozen fixture bundles of
//! `format/tests/compat/v1/` (never rebuilt; see its README) and returns exactly the results
//! they gave when they were built: BM25 ids and scores (calibrated and raw, to 1e-6) for
//! English, classical Chinese, Korean and a Hangul → Hanja expansion query, dense and hybrid
//! results for query vectors taken from the fixture's own `vectors.bin`, the manifest
//! counts, and a refusal naming the file of a copy with one flipped byte in any file.
//! Written against `Engine`'s public methods only.

use std::path::{Path, PathBuf};

use jikji_engine::{Engine, EngineError, Mode, SearchResult};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../format/tests/compat/v1")
        .join(name)
}

/// Row `i` of the fixture's `vectors.bin`, decoded as FORMAT.md says (header 16 bytes,
/// `count` f32 scales, then `count × dim` i8), dequantized and L2-normalised.
fn row(bundle: &Path, i: usize) -> Vec<f32> {
    let b = std::fs::read(bundle.join("vectors.bin")).unwrap();
    assert_eq!(&b[..8], b"JKVE\x01\0\0\0");
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize;
    let (dim, count) = (u32_at(8), u32_at(12));
    let scale = f32::from_le_bytes(b[16 + 4 * i..20 + 4 * i].try_into().unwrap());
    let start = 16 + 4 * count + i * dim;
    let v: Vec<f32> = b[start..start + dim]
        .iter()
        .map(|&x| f32::from(x as i8) * scale)
        .collect();
    let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter().map(|x| x / n).collect()
}

/// `(chunk id, calibrated score, raw score)` of each hit, best first.
type Expected = &'static [(&'static str, f32, f32)];

fn check(what: &str, r: &SearchResult, expected: Expected) {
    let got: Vec<(&str, f32, f32)> = r
        .hits
        .iter()
        .map(|h| (h.id.as_str(), h.score, h.raw_score))
        .collect();
    let close = |a: f32, b: f32| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
    assert!(
        got.len() == expected.len()
            && got
                .iter()
                .zip(expected)
                .all(|(g, e)| g.0 == e.0 && close(g.1, e.1) && close(g.2, e.2)),
        "{what}:\n got      {got:?}\n expected {expected:?}"
    );
    assert!(r.calibrated, "{what}: the fixture has a calibration");
}

const TO_BE: Expected = &[
    ("9838eba306e16355", 0.9990594, 10.800375),
    ("c035898cc611a53b", 0.1467804, 4.1133056),
    ("2d050fe7bd870027", 0.024713246, 3.1718688),
    ("0a9fdc618ab7c737", 0.024713246, 1.939508),
    ("4753c6eadadf0130", 0.024713246, 1.8770082),
];
const SLINGS: Expected = &[
    ("9838eba306e16355", 0.99997246, 24.885557),
    ("f6320ad59452f435", 0.00017018725, 1.752435),
    ("4753c6eadadf0130", 0.00017018725, 1.7350702),
    ("0a9fdc618ab7c737", 0.00017018725, 1.6895001),
    ("c035898cc611a53b", 0.00013853227, 1.503674),
];
const NUNNERY: Expected = &[
    ("c035898cc611a53b", 0.90067244, 2.161748),
    ("2d050fe7bd870027", 0.89126265, 2.1190333),
];
/// 學而時習之 and its Simplified spelling 学而时习之 (the analyzer folds both).
const XUE_ER: Expected = &[
    ("be81255b8d0e62a4", 0.99983656, 24.710426),
    ("1ce0cd221b532ca0", 0.19596073, 5.767042),
    ("a97287b9124bf154", 0.18578006, 5.512833),
    ("900e34cbeb58e3a8", 0.0012049277, 5.416173),
];
/// 장판은 쓸쓸하고: particle stripping (장판은 → 장판) on the Korean chunk.
const KOREAN: Expected = &[("2b5becf7ae99546d", 0.7641989, 4.477328)];
/// 군자 (Hangul) finds 君子 in the four 論語 chunks only through `hanja.fst`.
const GUNJA: Expected = &[
    ("a97287b9124bf154", 0.08021446, 0.38283873),
    ("be81255b8d0e62a4", 0.08021446, 0.37475374),
    ("1ce0cd221b532ca0", 0.07333513, 0.3034079),
    ("900e34cbeb58e3a8", 0.059375815, 0.2492869),
];

fn bm25_queries(e: &Engine, bundle: &str, hanja: bool) {
    let q = |text: &str| e.search(text, Mode::Bm25, 5).unwrap();
    check(&format!("{bundle}: to be"), &q("to be or not to be"), TO_BE);
    check(
        &format!("{bundle}: slings"),
        &q("slings and arrows of outrageous fortune"),
        SLINGS,
    );
    check(&format!("{bundle}: nunnery"), &q("nunnery"), NUNNERY);
    check(&format!("{bundle}: 學而時習之"), &q("學而時習之"), XUE_ER);
    check(&format!("{bundle}: 学而时习之"), &q("学而时习之"), XUE_ER);
    check(&format!("{bundle}: 장판은"), &q("장판은 쓸쓸하고"), KOREAN);
    let gunja = q("군자");
    if hanja {
        check(&format!("{bundle}: 군자"), &gunja, GUNJA);
    } else {
        assert!(gunja.hits.is_empty(), "no hanja.fst: {:?}", gunja.hits);
    }
}

fn manifest(bundle: &Path) -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(bundle.join("manifest.json")).unwrap()).unwrap()
}

#[test]
fn v1_bundle_bm25_results_are_unchanged() {
    bm25_queries(
        &Engine::open_dir(&fixture("bundle")).unwrap(),
        "bundle",
        true,
    );
}

#[test]
fn v1_bm25_only_bundle_results_are_unchanged() {
    let e = Engine::open_dir(&fixture("bundle-bm25")).unwrap();
    bm25_queries(&e, "bundle-bm25", false);
    let v = vec![0.0f32; 384];
    assert!(matches!(
        e.search_with_vector("q", Some(&v), Mode::Dense, 3),
        Err(EngineError::NoVectors(Mode::Dense))
    ));
}

#[test]
fn v1_dense_and_hybrid_results_are_unchanged() {
    let b = fixture("bundle");
    let e = Engine::open_dir(&b).unwrap();
    // A chunk's own vector finds that chunk first.
    let cases: [(usize, Expected, Expected); 3] = [
        (
            0,
            &[
                ("be81255b8d0e62a4", 0.73253644, 1.0001371),
                ("1ce0cd221b532ca0", 0.46357727, 0.9545191),
                ("a97287b9124bf154", 0.40537983, 0.94691163),
            ],
            &[
                ("9838eba306e16355", 0.32615703, -0.39109612),
                ("be81255b8d0e62a4", 0.08660049, -1.2757423),
                ("c035898cc611a53b", 0.04708637, -1.6753474),
            ],
        ),
        (
            6,
            &[
                ("4753c6eadadf0130", 0.981009, 1.0001568),
                ("0a9fdc618ab7c737", 0.092697404, 0.86492),
                ("c035898cc611a53b", 0.03699482, 0.858242),
            ],
            &[
                ("4753c6eadadf0130", 0.95272464, 2.025348),
                ("9838eba306e16355", 0.61252165, 0.4645021),
                ("c035898cc611a53b", 0.22450937, -0.27704716),
            ],
        ),
        (
            12,
            &[
                ("2b5becf7ae99546d", 0.97719187, 0.9998355),
                ("be81255b8d0e62a4", 0.052868627, 0.85332435),
                ("a97287b9124bf154", 0.04858146, 0.85115796),
            ],
            &[
                ("2b5becf7ae99546d", 0.5579195, 0.37713218),
                ("9838eba306e16355", 0.43686554, 0.11307287),
                ("c035898cc611a53b", 0.036092155, -1.7455512),
            ],
        ),
    ];
    for (i, dense, hybrid) in cases {
        let v = row(&b, i);
        let r = e.search_with_vector("", Some(&v), Mode::Dense, 3).unwrap();
        check(&format!("dense, row {i}"), &r, dense);
        let r = e
            .search_with_vector("to be or not to be", Some(&v), Mode::Hybrid, 3)
            .unwrap();
        check(&format!("hybrid, row {i}"), &r, hybrid);
    }
}

#[test]
fn v1_manifests_are_unchanged() {
    for (name, vectors, files) in [
        (
            "bundle",
            13,
            &[
                "chunks.bin",
                "hanja.fst",
                "postings.bin",
                "terms.fst",
                "vectors.bin",
            ][..],
        ),
        (
            "bundle-bm25",
            0,
            &["chunks.bin", "postings.bin", "terms.fst"][..],
        ),
    ] {
        let m = manifest(&fixture(name));
        assert_eq!(m["format_version"], 1, "{name}");
        assert_eq!(m["analyzer_version"], 2, "{name}");
        assert_eq!(
            m["counts"],
            serde_json::json!({"files": 3, "chunks": 13, "terms": 1461, "vectors": vectors}),
            "{name}"
        );
        let listed: Vec<&str> = m["files"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(listed, files, "{name}");
        assert_eq!(m["sources"].as_array().unwrap().len(), 3, "{name}");
        assert_eq!(m["chunking"]["strategy"], "hierarchical", "{name}");
    }
}

/// A copy with one byte flipped in any one file (the manifest's first byte, so that its
/// JSON breaks; the middle byte of the others) is refused with an error naming that file.
#[test]
fn v1_tampered_copies_are_refused_naming_the_file() {
    for bundle in ["bundle", "bundle-bm25"] {
        let src = fixture(bundle);
        let names: Vec<String> = std::fs::read_dir(&src)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.len() >= 4, "{names:?}");
        for name in &names {
            let dir = std::env::temp_dir().join(format!(
                "jikji-compat-v1-{}-{bundle}-{name}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            for n in &names {
                std::fs::copy(src.join(n), dir.join(n)).unwrap();
            }
            let mut bytes = std::fs::read(dir.join(name)).unwrap();
            let at = if name == "manifest.json" {
                0
            } else {
                bytes.len() / 2
            };
            bytes[at] ^= 0x01;
            std::fs::write(dir.join(name), &bytes).unwrap();
            let result = Engine::open_dir(&dir);
            std::fs::remove_dir_all(&dir).unwrap();
            let err = result
                .err()
                .unwrap_or_else(|| panic!("{bundle}/{name}: opened"));
            assert!(
                err.to_string().contains(name.as_str()),
                "{bundle}/{name}: {err}"
            );
        }
    }
}

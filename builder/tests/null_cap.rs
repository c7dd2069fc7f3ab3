//! The null cap (issue 19, docs/quality.md session 25): a bundle built by `jikji build`
//! carries the thresholds of its own off-topic queries ([`jikji_format::NullCap`]), and the
//! engine reports a hit at or under its fit's threshold at most 0.59 — after ranking, so the
//! rankings are those of the same bundle without the cap. Bundles calibrated before it (the
//! frozen fixtures of `format/tests/compat/`) carry none and search as before
//! (`engine-wasm/tests/compat_v1.rs` and `compat_v2.rs` hold their exact results).

use std::path::Path;

use jikji_builder::calibrate::{self, NULL_CAP, NULL_Q, NULL_QUERIES};
use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_engine::{Engine, Mode, SearchResult};
use jikji_format::{Bundle, Calibration};

/// A corpus of 96 short Chinese documents in 8 topics: each document is sentences of Han
/// characters drawn from its topic's 40 (three in four) and 20 shared by every topic, so the
/// character pairs of unrelated documents (the off-topic queries) often meet in some
/// document and score well, as on the Chinese eval sets (docs/quality.md, session 17).
fn corpus(dir: &Path) {
    let han = |i: u32| char::from_u32(0x4E00 + i * 7).unwrap();
    let mut x: u64 = 7;
    let mut next = |n: usize| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 33) % n as u64) as usize
    };
    for t in 0..8u32 {
        let folder = dir.join(format!("1. topic{t}"));
        std::fs::create_dir_all(&folder).unwrap();
        for d in 0..12 {
            let n = 80 + next(80);
            let chars: Vec<char> = (0..n)
                .map(|_| {
                    if next(4) == 0 {
                        han(320 + next(20) as u32)
                    } else {
                        han(t * 40 + next(40) as u32)
                    }
                })
                .collect();
            let mut text = String::new();
            let mut i = 0;
            while i < chars.len() {
                let k = (12 + next(9)).min(chars.len() - i);
                text.extend(&chars[i..i + k]);
                text.push('。');
                i += k;
            }
            std::fs::write(
                folder.join(format!("doc{d}.md")),
                format!("Source: https://example.com/{t}/{d}\n\n{text}\n"),
            )
            .unwrap();
        }
    }
}

fn built() -> (tempfile::TempDir, std::path::PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("corpus");
    corpus(&src);
    let out = tmp.path().join("bundle");
    build(&IngestOptions::new(&src, &out), &BundleSettings::default()).unwrap();
    (tmp, out)
}

/// The same bundle with its calibration's null cap removed (what a v4 bundle's engine does).
fn uncapped(out: &Path) -> Engine {
    let b = Bundle::open_dir(out).unwrap();
    let c = Calibration {
        null_cap: None,
        ..b.manifest().calibration.clone().unwrap()
    };
    Engine::new(b.with_calibration(Some(c)))
}

fn ranking(r: &SearchResult) -> Vec<(String, f32)> {
    r.hits.iter().map(|h| (h.id.clone(), h.raw_score)).collect()
}

#[test]
fn off_topic_queries_under_the_threshold_lose_the_reliable_band() {
    let (_tmp, out) = built();
    let capped = Engine::open_dir(&out).unwrap();
    let cal = capped.bundle().manifest().calibration.clone().unwrap();
    assert_eq!(cal.method, calibrate::METHOD);
    assert_eq!(cal.method, "platt-pseudo-queries-v5");
    let n = cal.null_cap.expect("a v5 calibration carries its null cap");
    assert_eq!((n.q, n.cap), (NULL_Q, NULL_CAP));
    // A BM25-only bundle: thresholds for BM25 alone.
    assert_eq!((n.dense, n.weighted, n.rrf), (None, None, None));
    let queries = calibrate::off_topic_queries(capped.bundle(), NULL_QUERIES).unwrap();
    assert_eq!(n.queries, queries.len());
    assert!(queries.len() > 400, "{}", queries.len());
    let plain = uncapped(&out);
    // The threshold is the NULL_Q-quantile of the off-topic top-1 scores, as the engine
    // reports them without the cap.
    let mut top1: Vec<f32> = queries
        .iter()
        .filter_map(|q| {
            plain
                .search(q, Mode::Bm25, 10)
                .unwrap()
                .hits
                .first()
                .map(|h| h.score)
        })
        .collect();
    assert_eq!(calibrate::quantile(&mut top1, NULL_Q), Some(n.bm25));
    let (mut lowered, mut kept_high) = (0, 0);
    for q in &queries {
        let (a, b) = (
            capped.search(q, Mode::Bm25, 10).unwrap(),
            plain.search(q, Mode::Bm25, 10).unwrap(),
        );
        assert_eq!(ranking(&a), ranking(&b), "{q}");
        for (x, y) in a.hits.iter().zip(&b.hits) {
            let want = if y.score <= n.bm25 {
                y.score.min(0.59)
            } else {
                y.score
            };
            assert_eq!(x.score, want, "{q}: {} vs {}", x.score, y.score);
        }
        let (s, s0) = (a.hits[0].score, b.hits[0].score);
        if s0 >= 0.6 && s0 <= n.bm25 {
            assert!(s < 0.6, "{q}: {s}");
            lowered += 1;
        }
        if s >= 0.6 {
            kept_high += 1;
        }
    }
    // The case the cap exists for arises on this bundle (else this test would prove
    // nothing), and at most 1 - NULL_Q of the off-topic queries keep "≥ 0.6".
    assert!(
        lowered >= 10,
        "{lowered} off-topic top hits lowered (threshold {})",
        n.bm25
    );
    assert!(
        kept_high as f32 <= (1.0 - NULL_Q) * queries.len() as f32 + 1.0,
        "{kept_high} of {} off-topic top hits still >= 0.6",
        queries.len()
    );
}

#[test]
fn rankings_and_min_score_with_and_without_the_cap() {
    let (_tmp, out) = built();
    let mut capped = Engine::open_dir(&out).unwrap();
    let mut plain = uncapped(&out);
    let n = capped
        .bundle()
        .manifest()
        .calibration
        .as_ref()
        .and_then(|c| c.null_cap)
        .unwrap();
    // Pieces of documents, of two topics, of none (characters no document holds).
    let piece = |t: u32, i: u32, n: u32| -> String {
        (0..n)
            .map(|k| char::from_u32(0x4E00 + (t * 40 + (i + k * 3) % 40) * 7).unwrap())
            .collect()
    };
    let queries: Vec<String> = (0..8)
        .map(|t| piece(t, t, 4))
        .chain([
            format!("{}{}", piece(1, 2, 2), piece(5, 7, 2)),
            format!("{}是什么？", piece(3, 1, 3)),
            "哪里有什么".into(),
            "nothing here at all".into(),
        ])
        .collect();
    for q in &queries {
        let (a, b) = (
            capped.search(q, Mode::Bm25, 20).unwrap(),
            plain.search(q, Mode::Bm25, 20).unwrap(),
        );
        assert_eq!(ranking(&a), ranking(&b), "{q}");
        for (x, y) in a.hits.iter().zip(&b.hits) {
            assert_eq!(x.rank, y.rank);
            assert_eq!(x.score, n.apply(y.score, n.bm25), "{q}");
        }
    }
    // A minimum score of 0.6 keeps only hits that beat the off-topic queries: the capped
    // engine returns the uncapped one's hits over the threshold, ranked from 1.
    capped.set_min_score(0.6);
    plain.set_min_score(0.6);
    for q in &queries {
        let a = capped.search(q, Mode::Bm25, 20).unwrap();
        let b = plain.search(q, Mode::Bm25, 20).unwrap();
        let want: Vec<String> = b
            .hits
            .iter()
            .filter(|h| h.score > n.bm25)
            .map(|h| h.id.clone())
            .collect();
        let got: Vec<String> = a.hits.iter().map(|h| h.id.clone()).collect();
        assert_eq!(got, want, "{q}");
        assert!(a.hits.iter().enumerate().all(|(i, h)| h.rank == i + 1));
    }
}

/// The frozen format 1 and 2 fixtures were calibrated before the null cap: they carry none
/// and their scores are uncapped (their exact results are in `engine-wasm/tests`).
#[test]
fn old_bundles_carry_no_null_cap() {
    let compat = Path::new(env!("CARGO_MANIFEST_DIR")).join("../format/tests/compat");
    for dir in ["v1/bundle", "v1/bundle-bm25", "v2/bundle", "v2/bundle-bm25"] {
        let e = Engine::open_dir(&compat.join(dir)).unwrap();
        let c = e.bundle().manifest().calibration.clone().unwrap();
        assert_eq!(c.null_cap, None, "{dir}");
        assert_ne!(c.method, calibrate::METHOD, "{dir}");
        let r = e.search("to be or not to be", Mode::Bm25, 10).unwrap();
        assert!(r.calibrated && !r.hits.is_empty(), "{dir}");
    }
}

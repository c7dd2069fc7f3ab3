//! Lifecycle filters of `Engine` search (`SearchOptions`): archived chunks (older versions)
//! and expired chunks (front matter `expires` before the clock) are left out in every
//! mode, and the ranking is deepened so `top_k` allowed hits still come back.

use jikji_engine::{Engine, Mode, SearchOptions};
use jikji_format::{ChunkRecord, TestBundle};

/// (text, archived, expires): the best BM25 matches for "timeout" are the archived and
/// the expiring chunk (they repeat the word).
const DOCS: &[(&str, bool, Option<&str>)] = &[
    (
        "timeout timeout timeout: the old gateway timeout",
        true,
        None,
    ),
    (
        "timeout timeout: holiday notice about the timeout",
        false,
        Some("2026-10-05"),
    ),
    ("the gateway timeout is 60 s for every route", false, None),
    ("requests that exceed the timeout are retried", false, None),
    ("backups are kept for 35 days", false, None),
];

fn record(i: usize) -> ChunkRecord {
    let (text, archived, expires) = DOCS[i];
    // Through JSON, so fields added later with serde defaults need no change here.
    serde_json::from_value(serde_json::json!({
        "id": format!("c{i}"), "source": format!("f{i}.md"), "source_url": null, "tier": null,
        "heading_path": [], "lang": "en", "section": 0, "start": 0, "end": 0, "text": text,
        "archived": archived, "expires": expires,
    }))
    .unwrap()
}

fn vectors() -> Vec<Vec<f32>> {
    // Every doc close to axis 0 (the query's direction), the filtered ones closest.
    (0..DOCS.len())
        .map(|i| {
            let mut v = [0.0f32; 8];
            v[0] = 1.0;
            v[1 + i] = 0.1 * (i as f32 + 1.0);
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / n).collect()
        })
        .collect()
}

fn engine() -> Engine {
    let recs: Vec<ChunkRecord> = (0..DOCS.len()).map(record).collect();
    let b = TestBundle::new(recs).vectors(8, vectors()).build().unwrap();
    Engine::new(b)
}

fn ids(e: &Engine, mode: Mode, k: usize, o: SearchOptions) -> Vec<String> {
    let q = [1.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    e.search_with_options("timeout", Some(&q), mode, k, &o)
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.chunk.id)
        .collect()
}

fn ms(s: &str) -> Option<i64> {
    jikji_format::time::parse_iso8601_ms(s)
}

#[test]
fn archived_chunks_only_on_request_in_every_mode() {
    let e = engine();
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        let default = ids(&e, mode, 2, SearchOptions::default());
        assert_eq!(default.len(), 2, "{mode}: still two hits");
        assert!(!default.contains(&"c0".to_string()), "{mode}: {default:?}");
        let all = ids(
            &e,
            mode,
            5,
            SearchOptions {
                include_archived: true,
                ..Default::default()
            },
        );
        assert!(all.contains(&"c0".to_string()), "{mode}: {all:?}");
    }
    // The engine's own options apply to search_with_vector too.
    assert_eq!(e.search_options(), SearchOptions::default());
}

#[test]
fn expired_chunks_are_left_out_from_their_expiry_on() {
    let e = engine();
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        let before = SearchOptions {
            now_ms: ms("2026-10-04T23:59:59Z"),
            include_archived: false,
        };
        let after = SearchOptions {
            now_ms: ms("2026-10-05"),
            include_archived: false,
        };
        assert!(
            ids(&e, mode, 5, before).contains(&"c1".to_string()),
            "{mode}"
        );
        let got = ids(&e, mode, 2, after);
        assert!(!got.contains(&"c1".to_string()), "{mode}: {got:?}");
        assert_eq!(
            got.len(),
            2,
            "{mode}: the ranking is deepened past the filtered chunks"
        );
        // No clock: nothing expires.
        assert!(ids(&e, mode, 5, SearchOptions::default()).contains(&"c1".to_string()));
    }
}

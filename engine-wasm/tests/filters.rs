//! Tier, language and folder filters of `Engine` search ([`Filters`]) on a format 1 bundle
//! (facets read from every record): only allowed chunks come back, in every mode, and still
//! `top_k` of them when the bundle has that many, although 40 left-out chunks outrank them
//! (more than the margin depth plus `top_k`, so a filter applied after the cut would come
//! back short). The paged bundle's filter columns are tested by the builder's
//! `tests/filters.rs` through `jikji search`.

use jikji_engine::{Engine, Filters, Mode};
use jikji_format::{ChunkRecord, TestBundle};

/// 40 loud chunks (tier 1, en, `a/`), then 6 quiet ones: tier 2 ko in `b/`, tier 3 en in `b/c/`,
/// no tier in `bc/`.
fn records() -> Vec<ChunkRecord> {
    let rec = |i: usize, text: String, tier: Option<u32>, lang: &str, source: String| {
        serde_json::from_value(serde_json::json!({
            "id": format!("c{i:02}"), "source": source, "source_url": null, "tier": tier,
            "heading_path": [], "lang": lang, "section": 0, "start": 0, "end": 0, "text": text,
        }))
        .unwrap()
    };
    let mut out: Vec<ChunkRecord> = (0..40)
        .map(|i| {
            rec(
                i,
                format!("lamp lamp lamp lamp keeper {i}"),
                Some(1),
                "en",
                format!("a/f{i}.md"),
            )
        })
        .collect();
    let quiet =
        |n: usize| format!("a long note {n} on orchards rivers bridges and one lamp far away");
    for (n, (tier, lang, dir)) in [
        (Some(2), "ko", "b"),
        (Some(2), "ko", "b"),
        (Some(3), "en", "b/c"),
        (Some(3), "en", "b/c"),
        (None, "en", "bc"),
        (None, "en", "bc"),
    ]
    .into_iter()
    .enumerate()
    {
        out.push(rec(40 + n, quiet(n), tier, lang, format!("{dir}/q{n}.md")));
    }
    out
}

/// Unit vectors: the loud chunks closest to the query (axis 0).
fn vectors(n: usize) -> Vec<Vec<f32>> {
    (0..n)
        .map(|i| {
            let mut v = [0.0f32; 8];
            v[0] = if i < 40 { 1.0 } else { 0.5 };
            v[1 + i % 7] = 0.3;
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            v.iter().map(|x| x / norm).collect()
        })
        .collect()
}

fn engine() -> Engine {
    let recs = records();
    let n = recs.len();
    Engine::new(
        TestBundle::new(recs)
            .vectors(8, vectors(n))
            .build()
            .unwrap(),
    )
}

fn hits(e: &mut Engine, mode: Mode, k: usize, f: Filters) -> Vec<(String, Option<u32>, String)> {
    e.set_filters(f);
    let q = [1.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    e.search_with_vector("lamp", Some(&q), mode, k)
        .unwrap()
        .hits
        .into_iter()
        .map(|h| (h.chunk.source.clone(), h.chunk.tier, h.chunk.lang.clone()))
        .collect()
}

#[test]
fn a_filter_keeps_top_k_full_in_every_mode() {
    let mut e = engine();
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        let plain = hits(&mut e, mode, 10, Filters::default());
        assert!(plain.iter().all(|h| h.1 == Some(1)), "{mode}: {plain:?}");
        let tier = |lo, hi| Filters {
            tier: Some((lo, hi)),
            ..Filters::default()
        };
        let t23 = hits(&mut e, mode, 3, tier(2, 3));
        assert_eq!(t23.len(), 3, "{mode}");
        assert!(
            t23.iter().all(|h| matches!(h.1, Some(2 | 3))),
            "{mode}: {t23:?}"
        );
        assert_eq!(
            hits(&mut e, mode, 10, tier(2, 3)).len(),
            4,
            "{mode}: all there are"
        );
        let ko = hits(
            &mut e,
            mode,
            5,
            Filters {
                langs: vec!["ko".into()],
                ..Filters::default()
            },
        );
        assert_eq!(ko.len(), 2, "{mode}");
        assert!(ko.iter().all(|h| h.2 == "ko"));
        let b = hits(
            &mut e,
            mode,
            10,
            Filters {
                folder: Some("b".into()),
                ..Filters::default()
            },
        );
        assert_eq!(b.len(), 4, "{mode}: b/ and b/c/, not bc/: {b:?}");
        assert!(b.iter().all(|h| h.0.starts_with("b/")));
        let none = hits(&mut e, mode, 10, tier(7, 9));
        assert!(none.is_empty(), "{mode}");
    }
}

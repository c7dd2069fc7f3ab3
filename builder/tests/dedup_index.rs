//! `jikji dedup --new` through the bundle's dense index (`nearest::DenseRoute`): on a bundle
//! forced to an index (a 96-note topic corpus, 24 lists, int8 and binary lists, real model,
//! the default per-language centring), new chunks that are exact copies, reworded
//! duplicates, partial repeats and new topics get the same class, the same best match and
//! bit for bit the same cosine as by the exact scan — while the route scores fewer rows
//! than the exact scan (it did take the index) — and a bundle without an index, or
//! `Route::Exact`, takes the exact scan.

mod common;

use std::path::{Path, PathBuf};

use jikji_builder::dedup::{check_new_files_with, Class, NewReport, Route, DUPLICATE, PARTIAL};
use jikji_builder::ingest::{build, BundleSettings};
use jikji_builder::ivf::DenseIndex;

const NOTES: usize = 96;

/// New files: a copy of note 30 (exact), 12 reworded notes (duplicates), two notes half
/// repeated with a new half (partial or new by cosine: whatever the exact scan says), and
/// two new topics.
fn new_files(dir: &Path, corpus: &Path) -> PathBuf {
    let out = dir.join("incoming");
    std::fs::create_dir_all(out.join("1. new")).unwrap();
    let note =
        |i: usize| std::fs::read_to_string(corpus.join(format!("1. docs/note-{i:02}.md"))).unwrap();
    std::fs::write(out.join("1. new/copy-30.md"), note(30)).unwrap();
    for i in (3..NOTES).step_by(8) {
        std::fs::write(
            out.join(format!("1. new/reworded-{i:02}.md")),
            note(i).replace("Teams ask about", "People often ask about"),
        )
        .unwrap();
    }
    for i in [20, 45] {
        let text = note(i);
        let first = text.split(". ").next().unwrap();
        std::fs::write(
            out.join(format!("1. new/half-{i:02}.md")),
            format!(
                "{first}. Beyond that, the cafeteria menu changes on Mondays and the \
                 parking garage closes at nine in the evening for cleaning.\n"
            ),
        )
        .unwrap();
    }
    std::fs::write(
        out.join("1. new/sourdough.md"),
        "Source: https://docs.example.com/new/sourdough\n\n# Sourdough\n\nFeed the starter twice a day with equal weights of flour and water, \
         and bake when it doubles within six hours.\n",
    )
    .unwrap();
    std::fs::write(
        out.join("1. new/tides.md"),
        "Source: https://docs.example.com/new/tides\n\n# Tides\n\nThe moon's pull raises two bulges of sea water, so most coasts see two \
         high tides a day, about fifty minutes later each day.\n",
    )
    .unwrap();
    out
}

fn check(bundle: &Path, incoming: &Path, route: Route) -> NewReport {
    check_new_files_with(
        bundle,
        incoming,
        &common::model_dir(),
        Some(&common::cache_dir()),
        2,
        DUPLICATE,
        PARTIAL,
        route,
    )
    .unwrap()
}

fn routed_equals_exact(binary: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::topic_corpus(tmp.path(), NOTES);
    let bundle = tmp.path().join("bundle");
    let settings = BundleSettings {
        dense_index: DenseIndex::Ivf {
            nlist: Some(24),
            binary,
        },
        ..BundleSettings::default()
    };
    build(&common::with_model(&corpus, &bundle), &settings).unwrap();
    let root = common::ivf_root(&bundle);
    assert_eq!((root.nlist, root.is_binary()), (24, binary));
    let b = jikji_format::Bundle::open_dir(&bundle).unwrap();
    assert!(
        b.manifest()
            .model
            .as_ref()
            .and_then(|m| m.centring.as_ref())
            .is_some(),
        "the routing's centred path is what this test covers"
    );
    drop(b);
    let incoming = new_files(tmp.path(), &corpus);
    let exact = check(&bundle, &incoming, Route::Exact);
    // Two lists a round: at least 4 of the 24 lists probed, at most what stability needs.
    let routed = check(&bundle, &incoming, Route::Index { round: 2 });
    assert!(
        !exact.routed && exact.way.starts_with("exact scan"),
        "{}",
        exact.way
    );
    assert!(routed.routed, "{}", routed.way);
    let classes: Vec<(String, Class)> = exact
        .chunks
        .iter()
        .map(|c| (c.source.clone(), c.class))
        .collect();
    let count = |c: Class| exact.chunks.iter().filter(|x| x.class == c).count();
    // The set covers every class: 1 exact copy, 12 reworded duplicates, and new chunks.
    assert!(
        count(Class::Duplicate) >= 13 && count(Class::New) >= 2,
        "{classes:?}"
    );
    assert!(
        exact
            .chunks
            .iter()
            .any(|c| c.class == Class::Partial || c.source.contains("half")),
        "{classes:?}"
    );
    assert_eq!(exact.chunks.len(), routed.chunks.len());
    for (e, r) in exact.chunks.iter().zip(&routed.chunks) {
        assert_eq!(
            (&e.source, e.class, e.exact, &e.match_id, e.cosine.to_bits()),
            (&r.source, r.class, r.exact, &r.match_id, r.cosine.to_bits()),
            "{} ({:?} {} vs {:?} {})",
            e.source,
            e.class,
            e.cosine,
            r.class,
            r.cosine
        );
    }
    // Every chunk but the exact copy was looked up; the exact scan scored every row for
    // each, the route fewer (lists probed, list pages read at most once each).
    let looked_up = exact.chunks.iter().filter(|c| !c.exact).count() as u64;
    assert_eq!(exact.work.lookups, looked_up);
    assert_eq!(routed.work.lookups, looked_up);
    assert_eq!(exact.work.rows, looked_up * NOTES as u64);
    assert_eq!(exact.work.lists, 0);
    assert!(
        routed.work.rows < exact.work.rows && routed.work.lists >= 4 * looked_up,
        "{:?} against {:?}",
        routed.work,
        exact.work
    );
    assert!(routed.work.pages <= 24, "{:?}", routed.work);
}

#[test]
fn dedup_through_int8_lists_equals_the_exact_scan() {
    routed_equals_exact(false);
}

#[test]
fn dedup_through_binary_lists_equals_the_exact_scan() {
    routed_equals_exact(true);
}

/// A bundle without a dense index (the default below 100,000 chunks) takes the exact scan
/// whatever the route asked.
#[test]
fn without_an_index_dedup_scans_every_row() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::topic_corpus(tmp.path(), 24);
    let bundle = tmp.path().join("bundle");
    build(
        &common::with_model(&corpus, &bundle),
        &BundleSettings::default(),
    )
    .unwrap();
    let incoming = tmp.path().join("incoming");
    std::fs::create_dir_all(&incoming).unwrap();
    std::fs::write(
        incoming.join("tides.md"),
        "Source: https://docs.example.com/new/tides\n\n# Tides\n\nThe moon's pull raises two bulges of sea water: two high tides a day, each about fifty minutes later than the day before.\n",
    )
    .unwrap();
    let r = check(&bundle, &incoming, Route::default());
    assert!(!r.routed && r.way.starts_with("exact scan"), "{}", r.way);
    assert_eq!((r.work.lookups, r.work.rows, r.work.lists), (1, 24, 0));
    assert_eq!(r.chunks[0].class, Class::New);
}

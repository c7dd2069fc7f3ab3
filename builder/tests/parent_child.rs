//! Parent-child chunking end to end: child chunks are indexed and matched, results return
//! the parent section once, with `parent_id`; bundles from before chunking strategies
//! existed still open.

mod common;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use jikji_builder::chunker::{ChunkParams, Strategy};
use jikji_builder::ingest::{
    build, load_build_embedder, model_info, BundleSettings, IngestOptions,
};
use jikji_engine::{Engine, Mode};

/// One book with three heading sections, each several child chunks long; every sentence
/// has a word of its own (`alpha1`, `alpha2`, …) so a query hits one child.
fn corpus(dir: &Path) -> PathBuf {
    let c = dir.join("books/1. test");
    std::fs::create_dir_all(&c).unwrap();
    let mut t = String::from("Source: https://example.org/book\n\n# Book\n\n");
    for (s, name) in ["alpha", "beta", "gamma"].iter().enumerate() {
        t.push_str(&format!("## Part {s}\n\n"));
        for i in 0..6 {
            t.push_str(&format!(
                "The {name}{i} sentence talks about shared lantern matters in some length here.\n\n"
            ));
        }
    }
    std::fs::write(c.join("book.md"), t).unwrap();
    dir.join("books")
}

fn settings() -> BundleSettings {
    BundleSettings {
        params: ChunkParams {
            size: 120,
            overlap: 0,
        },
        strategy: Strategy::ParentChild { parent_size: 1000 },
        ..BundleSettings::default()
    }
}

#[test]
fn parent_child_bundle_returns_parent_sections_once() {
    let tmp = tempfile::tempdir().unwrap();
    let books = corpus(tmp.path());
    let out = tmp.path().join("bundle");
    let report = build(&IngestOptions::new(&books, &out), &settings()).unwrap();
    assert_eq!(report.strategy, "parent-child");
    assert_eq!(report.parents, 3, "{report:?}");
    assert!(report.chunks >= 3 * 6, "{report:?}");

    let e = Engine::open_dir(&out).unwrap();
    let m = e.bundle().manifest();
    let chunking = m.chunking.as_ref().unwrap();
    assert_eq!(chunking.strategy, "parent-child");
    assert_eq!(chunking.parent_size, Some(1000));
    assert_eq!((chunking.parents, m.counts.chunks), (3, report.chunks));

    // A word of one child finds that child's parent: the whole `## Part 1` section.
    let r = e.search("beta4", Mode::Bm25, 5).unwrap();
    assert_eq!(r.hits.len(), 1, "{:#?}", r.hits);
    let h = &r.hits[0];
    assert_eq!(h.heading_path, ["Book", "Part 1"]);
    assert!(h.text.starts_with("## Part 1"), "{:?}", h.text);
    for i in 0..6 {
        assert!(h.text.contains(&format!("beta{i}")), "{:?}", h.text);
    }
    assert!(!h.text.contains("alpha") && !h.text.contains("gamma"));
    assert_eq!(h.parent_id.as_deref(), Some(h.id.as_str()));

    // Every child matches `lantern`: three parents, each once, whatever top_k.
    for k in [2, 3, 10] {
        let r = e.search("lantern", Mode::Bm25, k).unwrap();
        let ids: Vec<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
        let unique: HashSet<&str> = ids.iter().copied().collect();
        assert_eq!(ids.len(), unique.len(), "duplicate parents: {ids:?}");
        assert_eq!(ids.len(), k.min(3));
        assert!(r.hits.iter().all(|h| h.parent_id.is_some()));
    }

    // JSON results carry parent_id.
    let json = serde_json::to_value(e.search("gamma0", Mode::Bm25, 1).unwrap()).unwrap();
    assert!(json["hits"][0]["parent_id"].is_string(), "{json}");
}

#[test]
fn parent_child_hybrid_with_the_model() {
    let tmp = tempfile::tempdir().unwrap();
    let books = corpus(tmp.path());
    let out = tmp.path().join("bundle");
    let model = common::model_dir();
    let report = build(
        &IngestOptions {
            model_dir: Some(model.clone()),
            cache_dir: Some(common::cache_dir()),
            ..IngestOptions::new(&books, &out)
        },
        &settings(),
    )
    .unwrap();
    assert_eq!(report.truncated, 0);
    let tokens = report.chunk_tokens.unwrap();
    assert!(tokens.max <= jikji_embed::MAX_TOKENS && tokens.median > 0);
    let mut e = Engine::open_dir(&out).unwrap();
    e.check_model(&model_info(&model).unwrap().sha256).unwrap();
    e.set_embedder(load_build_embedder(&model).unwrap());
    assert_eq!(e.bundle().manifest().counts.vectors, report.chunks);
    for mode in [Mode::Dense, Mode::Hybrid] {
        let r = e.search("gamma3 lantern", mode, 10).unwrap();
        assert_eq!(r.hits.len(), 3, "{mode}");
        let ids: HashSet<&str> = r.hits.iter().map(|h| h.id.as_str()).collect();
        assert_eq!(ids.len(), 3, "{mode}: duplicate parents");
        // Parents are whole sections (the title leads the first one).
        assert!(
            r.hits
                .iter()
                .all(|h| h.text.starts_with("## Part") || h.text.starts_with("# Book\n\n## Part 0")),
            "{mode}: {:#?}",
            r.hits
        );
    }
    let r = e.search("gamma3", Mode::Hybrid, 1).unwrap();
    assert!(r.hits[0].text.contains("gamma3"), "{:?}", r.hits[0].text);
}

/// Bundles written before strategies existed have no `chunking` in the manifest and no
/// parent fields in the records: they open and search as before.
#[test]
fn bundle_without_chunking_info_still_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let books = corpus(tmp.path());
    let out = tmp.path().join("bundle");
    build(
        &IngestOptions::new(&books, &out),
        &BundleSettings::default(),
    )
    .unwrap();
    let path = out.join("jikji.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(m["chunking"]["strategy"], "hierarchical");
    m.as_object_mut().unwrap().remove("chunking");
    std::fs::write(&path, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let e = Engine::open_dir(&out).unwrap();
    assert!(e.bundle().manifest().chunking.is_none());
    let r = e.search("beta4", Mode::Bm25, 3).unwrap();
    assert!(r.hits[0].text.contains("beta4"));
    assert!(r.hits[0].parent_id.is_none());
}

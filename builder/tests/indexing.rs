//! Regression (SciFact, `jikji eval`): a document's title was indexed only with its first
//! chunk, so a query naming the document's subject could not reach its later chunks (BM25
//! nDCG@10 0.6530; 0.6730 once every chunk carries its title and heading path). Chunks are
//! now indexed under `ChunkRecord::indexed_text`.

use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_engine::{Engine, Mode};
use jikji_format::Bm25Params;

/// Sentences about something, none naming the document's title or headings.
fn filler(topic: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("Observation {i} of the {topic} was written down by the keeper at dusk."))
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn title_was_indexed_with_the_first_chunk_only() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    std::fs::create_dir_all(corpus.join("1. notes")).unwrap();
    std::fs::write(
        corpus.join("1. notes/quokka.md"),
        format!(
            "---\ntitle: Quokka field notes\n---\nSource: https://example.com/q\n\n{}\n\n## Burrows\n\n{}\n",
            filler("colony", 12),
            filler("nests", 12)
        ),
    )
    .unwrap();
    std::fs::write(
        corpus.join("1. notes/other.md"),
        format!(
            "Source: https://example.com/o\n\n{}\n",
            filler("harbour", 6)
        ),
    )
    .unwrap();
    let out = tmp.path().join("bundle");
    build(
        &IngestOptions::new(&corpus, &out),
        &BundleSettings::default(),
    )
    .unwrap();
    let engine = Engine::open_dir(&out).unwrap();
    let chunks = engine.bundle().manifest().counts.chunks;
    assert!(
        chunks >= 5,
        "the notes must span several chunks, got {chunks}"
    );

    // Every chunk of the quokka file matches its title; none of the other file does.
    let r = engine.search("quokka", Mode::Bm25, 50).unwrap();
    // Every record: read the bundle whole (the engine reads its pages as queries need them).
    let whole = jikji_format::Bundle::open_dir(&out).unwrap();
    let store = whole.chunks();
    let from_notes = (0..store.len() as u32)
        .filter(|&d| store.get(d).unwrap().source.ends_with("quokka.md"))
        .count();
    assert_eq!(r.hits.len(), from_notes);
    assert!(r.hits.iter().all(|h| h.chunk.source.ends_with("quokka.md")));

    // A heading reaches the chunks under it that do not repeat it.
    let r = engine.search("burrows", Mode::Bm25, 50).unwrap();
    assert!(r.hits.len() >= 2, "{:?}", r.hits.len());
    assert!(r
        .hits
        .iter()
        .all(|h| h.chunk.heading_path == ["Burrows"] && h.chunk.source.ends_with("quokka.md")));
    assert!(r.hits.iter().any(|h| !h.chunk.text.contains("Burrows")));
}

#[test]
fn bm25_parameters_are_recorded_in_the_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("corpus");
    std::fs::create_dir_all(corpus.join("1. a")).unwrap();
    std::fs::write(
        corpus.join("1. a/a.md"),
        "Source: https://example.com/a\n\nApples and pears.\n",
    )
    .unwrap();
    let out = tmp.path().join("bundle");
    let params = Bm25Params { k1: 0.9, b: 0.4 };
    build(
        &IngestOptions::new(&corpus, &out),
        &BundleSettings {
            bm25: params,
            ..BundleSettings::default()
        },
    )
    .unwrap();
    let engine = Engine::open_dir(&out).unwrap();
    assert_eq!(engine.bundle().manifest().bm25, params);
    assert_eq!(Bm25Params::default(), Bm25Params { k1: 0.7, b: 0.75 });
}

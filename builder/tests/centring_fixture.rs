//! How `format/tests/compat/v2-centring/queries.json` was made (run once, when the frozen
//! fixture was built; see its README): the `query: ` vectors of a few queries with the
//! real model, and the dense top 5 of each on the fixture. Ignored: the fixture is never
//! rebuilt, and `engine-wasm/tests/compat_v2_centring.rs` checks it without the model.
//!
//! `cargo test --release -p jikji-builder --test centring_fixture -- --ignored`

mod common;

use jikji_engine::{Engine, Mode};

#[test]
#[ignore = "writes the frozen fixture's queries.json; run once by hand"]
fn write_v2_centring_fixture_queries() {
    let dir = common::root().join("format/tests/compat/v2-centring");
    let texts = [
        "배우고 때때로 익히면 기쁘지 아니한가",
        "學而時習之",
        "to be or not to be",
        "메밀꽃 필 무렵",
        "the slings and arrows of outrageous fortune",
    ];
    let e = jikji_builder::ingest::load_build_embedder(&common::model_dir()).unwrap();
    let vecs = e
        .embed_many(&texts, jikji_embed::Prefix::Query, 2, &|_| {})
        .unwrap()
        .vectors;
    let engine = Engine::open_dir(&dir.join("bundle")).unwrap();
    let out: Vec<serde_json::Value> = texts
        .iter()
        .zip(&vecs)
        .map(|(t, v)| {
            let r = engine
                .search_with_vector(t, Some(v), Mode::Dense, 5)
                .unwrap();
            serde_json::json!({
                "text": t,
                "vector": v,
                "dense_top5": r.hits.iter().map(|h| h.chunk.id.clone()).collect::<Vec<_>>(),
            })
        })
        .collect();
    std::fs::write(
        dir.join("queries.json"),
        serde_json::to_string(&out).unwrap() + "\n",
    )
    .unwrap();
}

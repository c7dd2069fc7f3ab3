//! The same checks in WebAssembly (node), with the tokenizer and model read from
//! `<repo>/models/e5-small` through node's `fs`. Not part of `cargo test` on the host; run with
//!
//! ```sh
//! CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
//!   cargo test --release -p jikji-embed --target wasm32-unknown-unknown --test wasm
//! ```
//!
//! (`wasm-bindgen-test-runner` must match the `wasm-bindgen` version in Cargo.lock.)
#![cfg(target_arch = "wasm32")]

mod common;

use common::*;
use jikji_embed::{Embedder, Prefix, Weights, DIM};
use wasm_bindgen::prelude::*;
use wasm_bindgen_test::*;

#[wasm_bindgen(module = "fs")]
extern "C" {
    #[wasm_bindgen(js_name = readFileSync, catch)]
    fn read_file_sync(path: &str) -> Result<Vec<u8>, JsValue>;
}

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_namespace = Date, js_name = now)]
    fn date_now() -> f64;
}

const MODEL_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../models/e5-small");

fn read(name: &str) -> Vec<u8> {
    let path = format!("{MODEL_DIR}/{name}");
    read_file_sync(&path)
        .unwrap_or_else(|e| panic!("cannot read {path} ({e:?}) — run scripts/setup-model"))
}

#[wasm_bindgen_test]
fn tokenizer_ids_match_python_in_wasm() {
    let tok = jikji_embed::EmbedTokenizer::from_bytes(&read("tokenizer.json")).unwrap();
    for r in model_md_rows() {
        let want = r.ids.unwrap();
        assert_eq!(
            tok.token_ids(&r.text, r.prefix).unwrap(),
            want,
            "{:?}",
            r.text
        );
    }
    let rows: serde_json::Value =
        serde_json::from_str(include_str!("fixtures/tokenizer_parity.json")).unwrap();
    let rows = rows.as_array().unwrap();
    for r in rows {
        let prefix = if r["prefix"] == "query" {
            Prefix::Query
        } else {
            Prefix::Passage
        };
        let want: Vec<u32> = r["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        let text = r["text"].as_str().unwrap();
        assert_eq!(tok.token_ids(text, prefix).unwrap(), want, "{text:?}");
    }
    console_log!(
        "wasm tokenizer: {} fixture rows + 5 reference rows match",
        rows.len()
    );
}

fn check(e: &Embedder, label: &str) {
    let rows = model_md_rows();
    let mut vecs = Vec::new();
    for r in &rows {
        let v = e
            .embed(&[&r.text], r.prefix)
            .unwrap()
            .vectors
            .pop()
            .unwrap();
        assert_eq!(v.len(), DIM);
        let head = r.head.as_ref().unwrap();
        let d = max_abs_diff(&v[..8], head);
        assert!(
            d <= 1e-3,
            "[{label}] {:?}: {:?} vs {:?}",
            r.text,
            &v[..8],
            head
        );
        vecs.push(v);
    }
    for c in model_md_cosines() {
        let got = dot(&vecs[c.a], &vecs[c.b]);
        assert!(
            (got - c.cos).abs() <= 1e-3,
            "[{label}] cos {} {}: {got}",
            c.a,
            c.b
        );
    }
    // Batch invariance.
    let short = "메밀꽃 필 무렵";
    let alone = e.embed(&[short], Prefix::Passage).unwrap();
    let batch = e.embed(&[&long_text(60), short], Prefix::Passage).unwrap();
    assert!(max_abs_diff(&alone.vectors[0], &batch.vectors[1]) <= 1e-4);
    // Timing of one ~20-token query.
    let q = "how do scholars explain the meaning of learning and practice in the Analects";
    e.embed_query(q).unwrap();
    let mut ms: Vec<f64> = (0..5)
        .map(|_| {
            let t = date_now();
            e.embed_query(q).unwrap();
            date_now() - t
        })
        .collect();
    ms.sort_by(|a, b| a.partial_cmp(b).unwrap());
    console_log!(
        "[{label}] reference vectors and cosines match; 21-token query median {:.0} ms",
        ms[2]
    );
}

#[wasm_bindgen_test]
fn reference_embeddings_in_wasm() {
    let onnx = read("model.onnx");
    let tok = read("tokenizer.json");
    // Memory only grows, so the second variant's figure is a peak over both.
    let order = match option_env!("JIKJI_WASM_WEIGHTS_ORDER") {
        Some("f32-first") => [Weights::Float32, Weights::Packed4Bit],
        _ => [Weights::Packed4Bit, Weights::Float32],
    };
    for weights in order {
        let t = date_now();
        let e = Embedder::from_bytes_with(&onnx, &tok, weights).unwrap();
        console_log!(
            "[{weights:?}] loaded in {:.0} ms; wasm memory {} MiB",
            date_now() - t,
            core::arch::wasm32::memory_size(0) / 16
        );
        check(&e, &format!("{weights:?}"));
    }
    assert_eq!(Weights::default(), Weights::Packed4Bit);
}

//! The Jikji query embedder for the browser: [`jikji_embed::Embedder`] (multilingual-e5-small
//! in tract + tokenizers, ~20 MB of wasm) behind wasm-bindgen, in its own WebAssembly module so
//! that the search engine (`jikji-engine`, built without its `embed` feature, a few hundred kB)
//! loads fast and this module is fetched only when dense or hybrid search is asked.
//!
//! The web worker (`web/worker.js`) checks the ONNX file against the bundle first
//! (`Engine.model_sha256()` / `Engine.check_model()` of `jikji-engine`), then does
//! `new Embedder(onnx, tokenizer_json)`, and for each dense or hybrid query passes
//! `embedder.embed_query(text)` to `Engine.search_with_vector(query, qvec, mode, top_k)`.
//!
//! The bindings exist only on `wasm32`; natively this crate is empty (use `jikji-embed`).
#![warn(missing_docs)]

#[cfg(target_arch = "wasm32")]
mod wasm {
    use wasm_bindgen::prelude::*;

    fn js_err(e: impl std::fmt::Display) -> JsError {
        JsError::new(&e.to_string())
    }

    /// The query embedder as seen from JavaScript.
    #[wasm_bindgen]
    pub struct Embedder {
        inner: jikji_embed::Embedder,
    }

    #[wasm_bindgen]
    impl Embedder {
        /// Loads the embedder from the bytes of `model.onnx` and `tokenizer.json` (parses and
        /// optimises the graph: about a second or two). Throws an Error if either does not
        /// parse or the graph lacks the expected inputs/output. Does not check the model
        /// against a bundle: do that first with the engine's `check_model`.
        #[wasm_bindgen(constructor)]
        pub fn new(onnx: Vec<u8>, tokenizer_json: Vec<u8>) -> Result<Embedder, JsError> {
            console_error_panic_hook::set_once();
            let inner =
                jikji_embed::Embedder::from_bytes(&onnx, &tokenizer_json).map_err(js_err)?;
            Ok(Embedder { inner })
        }

        /// Embeds one search query (with the E5 `query: ` prefix) and returns its unit vector
        /// as a Float32Array of `dim()` floats. Throws an Error if tokenization or inference
        /// fails.
        pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, JsError> {
            self.inner.embed_query(text).map_err(js_err)
        }

        /// Length of the vectors `embed_query` returns (384 for multilingual-e5-small).
        pub fn dim(&self) -> usize {
            jikji_embed::DIM
        }
    }
}

#[cfg(target_arch = "wasm32")]
pub use wasm::Embedder;

//! The browser's query model: [`jikji_query_model`] (the compact Unigram tokenizer and the
//! lean Q4_0 forward pass of multilingual-e5-small, simd128 kernels: `.cargo/config.toml`
//! builds wasm32 with `+simd128`) behind wasm-bindgen. Built and timed in node by
//! `scripts/bench-query-model-wasm`, next to onnxruntime natively on the same queries.
//!
//! From JavaScript: `new QueryModel(layers, rows, tokenizer)` with the bytes of a pack's
//! `layers.bin`, `rows.bin` and `tokenizer.bin` (`jikji model-pack`), then
//! `embed_query(text)` (a `Float32Array` of 384, unit length) or `token_ids(text)` +
//! `embed_ids(ids)`. Errors are JS `Error`s with the pack file named.
//!
//! Not yet used by `web/worker.js` (row pages, Cache Storage and the progressive hybrid are
//! the next step; docs/design/query-model-pack.md). The bindings exist only on wasm32.
#![warn(missing_docs)]

#[cfg(target_arch = "wasm32")]
mod wasm {
    use jikji_query_model::tokenizer::{Tokenizer, TOKENIZER_FILE};
    use jikji_query_model::{pack, QueryModel as Model, RowTable};
    use wasm_bindgen::prelude::*;

    fn js_err(e: impl std::fmt::Display) -> JsError {
        JsError::new(&e.to_string())
    }

    /// The query model as seen from JavaScript.
    #[wasm_bindgen]
    pub struct QueryModel {
        model: Model,
        rows: RowTable,
        tokenizer: Tokenizer,
    }

    #[wasm_bindgen]
    impl QueryModel {
        /// Loads the encoder, the token rows and the tokenizer from a pack's file bytes.
        #[wasm_bindgen(constructor)]
        pub fn new(layers: &[u8], rows: Vec<u8>, tokenizer: &[u8]) -> Result<QueryModel, JsError> {
            let model = Model::from_bytes(layers, pack::LAYERS_FILE).map_err(js_err)?;
            let rows = RowTable::from_bytes(rows, model.config().hidden, pack::ROWS_FILE)
                .map_err(js_err)?;
            let tokenizer = Tokenizer::from_bytes(tokenizer, TOKENIZER_FILE).map_err(js_err)?;
            Ok(QueryModel {
                model,
                rows,
                tokenizer,
            })
        }

        /// Token ids of `query: ` + `text` (`<s>` … `</s>`, at most 512).
        pub fn token_ids(&self, text: &str) -> Vec<u32> {
            self.tokenizer.query_ids(text)
        }

        /// The vector of a token-id sequence: 384 f32s, unit length.
        pub fn embed_ids(&self, ids: &[u32]) -> Result<Vec<f32>, JsError> {
            self.model.embed_ids(ids, &self.rows).map_err(js_err)
        }

        /// Tokenize and embed a query: 384 f32s, unit length.
        pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, JsError> {
            self.embed_ids(&self.tokenizer.query_ids(text))
        }
    }

    /// Bytes of this module's linear memory (what the page pays for it).
    #[wasm_bindgen]
    pub fn memory_bytes() -> f64 {
        (core::arch::wasm32::memory_size(0) * 65536) as f64
    }
}

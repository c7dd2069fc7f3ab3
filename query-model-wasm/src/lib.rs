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
//! What the page uses (`web/worker.js`): [`PagedModel`] over a paged bundle's query-model
//! pages (`jikji_query_model::paged`, the same code `jikji search --query-model` runs
//! natively): `new PagedModel(rootJson, bundleModelSha256)` with the entry's
//! `pages.query_model`, `missing_base()` → the layer, tokenizer and row-map page names to
//! fetch, `add_page(name, headerAndRawBody)` for each (verified: SHA-256, name, sizes), then
//! per query `token_ids(text)`, `missing_rows(ids)` → row pages to fetch and add,
//! `embed_ids(ids)`. Single-threaded (the page has no threaded build). The bindings exist
//! only on wasm32.
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

    /// The query model of a paged bundle, filled page by page
    /// ([`jikji_query_model::paged::PagedQueryModel`]).
    #[wasm_bindgen]
    pub struct PagedModel {
        m: jikji_query_model::paged::PagedQueryModel,
    }

    #[wasm_bindgen]
    impl PagedModel {
        /// Over the entry's `pages.query_model` (JSON text), checked against the bundle's
        /// `model.sha256`. Errors: malformed root, another model.
        #[wasm_bindgen(constructor)]
        pub fn new(root_json: &str, bundle_model_sha256: &str) -> Result<PagedModel, JsError> {
            let root: jikji_format::paged::qmodel::QueryModelRoot = serde_json::from_str(root_json)
                .map_err(|e| JsError::new(&format!("jikji.json: pages.query_model: {e}")))?;
            let m = jikji_query_model::paged::PagedQueryModel::new(root, Some(bundle_model_sha256))
                .map_err(js_err)?;
            Ok(PagedModel { m })
        }

        /// Layer, tokenizer and row-map pages not added yet.
        pub fn missing_base(&self) -> Vec<String> {
            self.m.missing_base()
        }

        /// Adds a page: its 48-byte header + raw (inflated) body; verified.
        pub fn add_page(&mut self, name: &str, bytes: &[u8]) -> Result<(), JsError> {
            self.m.add_page(name, bytes).map_err(js_err)
        }

        /// True once the base pages are in (queries can be embedded).
        pub fn is_ready(&self) -> bool {
            self.m.is_ready()
        }

        /// Token ids of `query: ` + `text`.
        pub fn token_ids(&self, text: &str) -> Result<Vec<u32>, JsError> {
            self.m.token_ids(text).map_err(js_err)
        }

        /// Row pages `ids` need that are not added yet.
        pub fn missing_rows(&self, ids: &[u32]) -> Result<Vec<String>, JsError> {
            self.m.missing_rows(ids).map_err(js_err)
        }

        /// The vector of `ids`: 384 f32s, unit length.
        pub fn embed_ids(&self, ids: &[u32]) -> Result<Vec<f32>, JsError> {
            self.m.embed_ids(ids).map_err(js_err)
        }

        /// Row pages added so far.
        pub fn row_pages(&self) -> usize {
            self.m.row_pages()
        }
    }

    /// Bytes of this module's linear memory (what the page pays for it).
    #[wasm_bindgen]
    pub fn memory_bytes() -> f64 {
        (core::arch::wasm32::memory_size(0) * 65536) as f64
    }
}

//! JavaScript bindings (wasm-bindgen). The web worker (`web/worker.js`) drives these.
//!
//! A paged bundle (format 2): `new Engine()`, `open_entry(bytes of jikji.json)`, then for
//! each query `search(query, mode, top_k)` (or `search_with_vector`): the answer is either
//! `{"need": [page names]}` — fetch each `p/<name>`, inflate a codec-1 body, pass header +
//! raw body to `add_page(name, bytes)`, and call `search` again with the same arguments — or
//! the `SearchResult`. `set_cache_budget(bytes)` and `cache_stats()` manage the page cache.
//!
//! A whole bundle (format 1, kept for old bundles): `add_file(name, bytes)` for
//! `manifest.json` and every file it lists, then `open()`. Before searching it
//! passes its clock with `set_now(Date.now())` so expired chunks are left out, and may
//! ask for archived chunks with `set_include_archived(true)`; both are optional (without
//! them archived chunks are excluded and nothing expires).
//!
//! The browser build has no embedder (`--no-default-features`, a few hundred kB): for dense and
//! hybrid queries the worker checks the model with `model_sha256()` / `check_model(sha256)`,
//! embeds the query with the separate `jikji-query-model-wasm` module (over the bundle's
//! query-model pages) and passes its query vector in. With feature
//! `embed` (default) the engine can also load the model itself (`load_model`) and embed in
//! `search`.

use wasm_bindgen::prelude::*;

use crate::{EngineError, Filters, Mode, SearchOptions};

/// The allocator of the engine's wasm: talc (`WasmGrowAndExtend`: grows the wasm memory as
/// needed) instead of std's dlmalloc, ~3 kB smaller in the module (issue 12).
#[cfg(not(target_feature = "atomics"))]
#[global_allocator]
static ALLOC: talc::wasm::WasmDynamicTalc = talc::wasm::new_wasm_dynamic_allocator();

fn js_err(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

/// The engine as seen from JavaScript.
#[wasm_bindgen(js_name = Engine)]
pub struct WasmEngine {
    /// The files of a format 1 bundle, by name (`add_file`); a build without feature `v1`
    /// refuses format 1 in `open` and keeps none (no map of them in the browser's wasm).
    #[cfg(feature = "v1")]
    files: jikji_format::hash::Map<String, Vec<u8>>,
    engine: Option<crate::Engine>,
    options: SearchOptions,
    filters: Filters,
    /// The query whose last call answered `need`: its next call is the same query's next
    /// round, so the page cache is not trimmed in between.
    pending: Option<String>,
}

#[wasm_bindgen(js_class = Engine)]
impl WasmEngine {
    /// An engine with no bundle yet.
    #[wasm_bindgen(constructor)]
    pub fn new() -> WasmEngine {
        // scripts/build-wasm's nightly build (`--cfg jikji_nightly`) has `panic =
        // immediate-abort`: a panic traps at once and no hook ever runs, so the hook is left out
        // of that module (issue 12); the stable build logs the panic message to the console.
        #[cfg(not(jikji_nightly))]
        console_error_panic_hook::set_once();
        WasmEngine {
            #[cfg(feature = "v1")]
            files: Default::default(),
            engine: None,
            options: SearchOptions::default(),
            filters: Filters::default(),
            pending: None,
        }
    }

    /// Sets the clock for expiry filtering, in milliseconds since the Unix epoch (pass
    /// `Date.now()`); `undefined` turns expiry filtering off. Chunks whose front matter
    /// `expires` is at or before it are left out of results.
    pub fn set_now(&mut self, now_ms: Option<f64>) {
        self.options.now_ms = now_ms.filter(|v| v.is_finite()).map(|v| v as i64);
        if let Some(e) = self.engine.as_mut() {
            e.set_search_options(self.options);
        }
    }

    /// Whether results may include archived chunks (older versions of a document);
    /// default false.
    pub fn set_include_archived(&mut self, include: bool) {
        self.options.include_archived = include;
        if let Some(e) = self.engine.as_mut() {
            e.set_search_options(self.options);
        }
    }

    /// Sets the tier, language and folder filters of the following searches (kept across
    /// bundles opened later): `tier` `"N"` or `"A-B"` (inclusive), `langs` comma-separated
    /// (`"ko,en"`), `folder` a source folder (whole path components); `undefined` or `""`
    /// for no filter of that kind. Filters apply before the ranking is cut (a filtered
    /// search still returns `top_k` hits when the bundle has them). Throws on a tier range
    /// or language that does not parse (the filters are then unchanged). A search with a
    /// filter on a bundle built before the filter columns throws "rebuild it".
    pub fn set_filters(
        &mut self,
        tier: Option<String>,
        langs: Option<String>,
        folder: Option<String>,
    ) -> Result<(), JsError> {
        let tier = match tier.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
            Some(t) => Some(Filters::parse_tier(t).map_err(js_err)?),
            None => None,
        };
        let langs = match langs.as_deref() {
            Some(l) => Filters::parse_langs(l).map_err(js_err)?,
            None => Vec::new(),
        };
        self.filters = Filters {
            tier,
            langs,
            folder: folder.filter(|f| !f.is_empty()),
        };
        if let Some(e) = self.engine.as_mut() {
            e.set_filters(self.filters.clone());
        }
        Ok(())
    }

    /// Opens a paged bundle from the bytes of its entry file `jikji.json`. Returns the same
    /// JSON summary as `open` (`format_version` 2). Throws on a format 1 manifest ("rebuild
    /// the bundle") or a corrupt entry.
    pub fn open_entry(&mut self, bytes: Vec<u8>) -> Result<String, JsError> {
        let mut engine = crate::Engine::open_entry(&bytes).map_err(js_err)?;
        engine.set_search_options(self.options);
        engine.set_filters(self.filters.clone());
        let summary = summary(&engine);
        self.engine = Some(engine);
        self.pending = None;
        Ok(summary)
    }

    /// Adds page `name` of the open paged bundle: `bytes` is its 48-byte header followed by
    /// the raw (inflated) body. Throws an Error naming the page if it fails verification
    /// (length, SHA-256, name).
    pub fn add_page(&mut self, name: &str, bytes: Vec<u8>) -> Result<(), JsError> {
        self.engine
            .as_ref()
            .ok_or_else(|| JsError::new("no bundle open"))?
            .add_page(name, &bytes)
            .map_err(js_err)
    }

    /// Sets the page cache's byte budget (raw bytes; default 32 MiB). Pages are evicted,
    /// least recently used first, before a new query, never during one.
    pub fn set_cache_budget(&mut self, bytes: f64) -> Result<(), JsError> {
        let e = self
            .engine
            .as_ref()
            .ok_or_else(|| JsError::new("no bundle open"))?;
        if let Some(c) = e.bundle().cache() {
            c.set_budget(bytes.max(0.0) as usize);
        }
        Ok(())
    }

    /// The page cache's counters as JSON: `{pages, bytes, hits, misses, added, evicted}`
    /// (all zero for a whole bundle).
    pub fn cache_stats(&self) -> String {
        let stats = self
            .engine
            .as_ref()
            .and_then(|e| e.bundle().cache().map(|c| c.stats()))
            .unwrap_or_default();
        crate::out::cache_stats(&stats)
    }

    /// Adds one bundle file (`manifest.json` or a file the manifest lists) by name. Without
    /// feature `v1` (the browser build) the bytes are dropped: `open` refuses format 1 there.
    pub fn add_file(&mut self, name: &str, bytes: Vec<u8>) {
        #[cfg(feature = "v1")]
        self.files.insert(name.to_string(), bytes);
        #[cfg(not(feature = "v1"))]
        drop((name, bytes));
    }

    /// Verifies the added files against the manifest (format version, sizes, SHA-256) and
    /// opens the bundle. Returns a JSON summary: `{format_version, chunks, files, model}`.
    /// Throws an Error naming the bad file.
    ///
    /// Without feature `v1` (the browser build, which reads format 2 only) it always throws
    /// `manifest.json: a format 1 bundle, which this build of the engine does not read …;
    /// rebuild the bundle with \`jikji build\``.
    pub fn open(&mut self) -> Result<String, JsError> {
        #[cfg(not(feature = "v1"))]
        {
            Err(js_err(jikji_format::FormatError::V1NotBuilt {
                file: jikji_format::manifest::MANIFEST_FILE.into(),
            }))
        }
        #[cfg(feature = "v1")]
        {
            let files = std::mem::take(&mut self.files);
            self.open_v1(files)
        }
    }

    /// SHA-256 (lowercase hex) of the ONNX model the bundle's vectors were made with, from its
    /// manifest; `undefined` if no bundle is open or the bundle has no model (BM25 only).
    pub fn model_sha256(&self) -> Option<String> {
        let engine = self.engine.as_ref()?;
        engine
            .bundle()
            .manifest()
            .model
            .as_ref()
            .map(|m| m.sha256.clone())
    }

    /// Checks that an ONNX file whose SHA-256 (lowercase hex) is `sha256_hex` is the model the
    /// bundle's vectors were made with. Throws an Error naming both hashes and the model id if
    /// not, or if no bundle is open; passes for a bundle without a model.
    pub fn check_model(&self, sha256_hex: &str) -> Result<(), JsError> {
        let engine = self
            .engine
            .as_ref()
            .ok_or_else(|| JsError::new("open the bundle before checking the model"))?;
        engine.check_model(sha256_hex).map_err(js_err)
    }

    /// Loads the query embedder from the ONNX file and tokenizer.json bytes. Throws if the
    /// bundle is not open, the model is not the bundle's, or it fails to load.
    #[cfg(feature = "embed")]
    pub fn load_model(&mut self, onnx: Vec<u8>, tokenizer_json: Vec<u8>) -> Result<(), JsError> {
        let engine = self
            .engine
            .as_mut()
            .ok_or_else(|| JsError::new("open the bundle before loading the model"))?;
        engine.load_model(&onnx, &tokenizer_json).map_err(js_err)
    }

    /// Sets how hybrid mode fuses BM25 and dense: `rrf`, `weighted` (the bundle's weight) or
    /// `weighted:W` (W = weight of dense in [0, 1], a plain decimal of at most 8 digits after
    /// the point: this build has no general float parser). Throws on any other value or if no
    /// bundle is open. Default: `weighted` when the bundle has a dense calibration, else `rrf`.
    pub fn set_fusion(&mut self, fusion: &str) -> Result<(), JsError> {
        let f: crate::Fusion = fusion.parse().map_err(|e: EngineError| js_err(e))?;
        self.engine
            .as_mut()
            .ok_or_else(|| JsError::new("no bundle open"))?
            .set_fusion(f);
        Ok(())
    }

    /// Drops hits whose calibrated score (in [0, 1]) is below `min_score` (default 0).
    /// Throws if no bundle is open.
    pub fn set_min_score(&mut self, min_score: f32) -> Result<(), JsError> {
        self.engine
            .as_mut()
            .ok_or_else(|| JsError::new("no bundle open"))?
            .set_min_score(min_score);
        Ok(())
    }

    /// Dense index lists a dense or hybrid query scans (0: the bundle's `pages.ivf.nprobe`;
    /// clamped to the number of lists). More lists: closer to the exact scan, more bytes.
    /// Throws if no bundle is open. No effect on a bundle without a dense index.
    pub fn set_nprobe(&mut self, nprobe: u32) -> Result<(), JsError> {
        self.engine
            .as_mut()
            .ok_or_else(|| JsError::new("no bundle open"))?
            .set_nprobe((nprobe > 0).then_some(nprobe as usize));
        Ok(())
    }

    /// Oversampling of a binary dense index's int8 rescoring (0: the bundle's
    /// `pages.ivf.rescore`): `rescore · min(k, 10)` best estimates are rescored with their
    /// int8 rows. More: closer to the int8 scan of the same lists, more row pages. Throws
    /// if no bundle is open. No effect on int8 lists or without a dense index.
    pub fn set_rescore(&mut self, rescore: u32) -> Result<(), JsError> {
        self.engine
            .as_mut()
            .ok_or_else(|| JsError::new("no bundle open"))?
            .set_rescore((rescore > 0).then_some(rescore as usize));
        Ok(())
    }

    /// The names of the pages every dense query through the bundle's dense index reads,
    /// whatever the query (centroid pages and background sample page,
    /// `Engine::dense_once_pages`); empty without a dense index. The worker fetches them
    /// with the query model's pages when the dense engine is first loaded. Throws if no
    /// bundle is open. Dense engine only (feature `dense`).
    #[cfg(feature = "dense")]
    pub fn dense_once_pages(&self) -> Result<Vec<String>, JsError> {
        Ok(self
            .engine
            .as_ref()
            .ok_or_else(|| JsError::new("no bundle open"))?
            .dense_once_pages())
    }

    /// True if this engine's own query embedder is loaded (`load_model`, feature `embed`);
    /// always false in the browser build, whose embedder is the separate `jikji-query-model-wasm`.
    pub fn has_model(&self) -> bool {
        self.engine.as_ref().is_some_and(|e| e.has_model())
    }

    /// The bundle's filter values with their chunk counts, as JSON: `{"tiers": [[tier,
    /// chunks], …], "untiered": n, "langs": [[lang, chunks], …], "folders": [[folder,
    /// chunks], …]}` (`FacetValues`). While the columns page is not in the cache the answer is
    /// `{"need": [its name]}`: add it and call again. Throws on a bundle built before the
    /// filter columns ("rebuild it") or a corrupt columns page.
    pub fn facets(&self) -> Result<String, JsError> {
        let engine = self
            .engine
            .as_ref()
            .ok_or_else(|| JsError::new("no bundle open"))?;
        match engine.facet_values() {
            Ok(v) => Ok(crate::out::facets(&v)),
            Err(EngineError::NeedPages(pages)) => Ok(crate::out::need(&pages)),
            Err(e) => Err(js_err(e)),
        }
    }

    /// A hit's display fields as JSON, `{"label": string, "snippet": {"parts": [string, …],
    /// "cut_start": bool, "cut_end": bool}}`: `label` its readable title (front matter
    /// `title`, else from the file name of `source`), `snippet` the window of `text` around
    /// its best match for `query` (at most 240 columns, a CJK character counting 2), its
    /// `parts` alternating unmarked and marked text (the first unmarked), with the bundle's
    /// analyzer (the `snippet` module of this crate). Throws only when no bundle is open.
    pub fn display(
        &self,
        query: &str,
        text: &str,
        source: &str,
        title: Option<String>,
    ) -> Result<String, JsError> {
        let engine = self
            .engine
            .as_ref()
            .ok_or_else(|| JsError::new("no bundle open"))?;
        let label = crate::snippet::label(source, title.as_deref());
        Ok(crate::out::display(&label, &engine.snippet(query, text)))
    }

    /// Runs a query, embedding it with the engine's own model for dense and hybrid (see
    /// `load_model`; without feature `embed` only `bm25` works here, use
    /// `search_with_vector`). `mode` is `bm25`, `dense` or `hybrid`. Returns the JSON of a
    /// `SearchResult`: `{query, mode, fusion, calibrated, hits: [{rank, score (calibrated,
    /// 0..1), raw_score, id, source, source_url, heading_path, tier, lang, text, …}]}`.
    ///
    /// On a paged bundle the answer may instead be `{"need": [page names]}`: add those
    /// pages (`add_page`) and call again with the same arguments.
    pub fn search(&mut self, query: &str, mode: &str, top_k: usize) -> Result<String, JsError> {
        self.run(query, None, mode, top_k, true)
    }

    /// Runs a query with a query vector computed by the caller (the `Float32Array` of
    /// `jikji-query-model-wasm`'s `PagedModel.embed_ids(ids)`, unit length). `qvec` is required for
    /// `dense` and `hybrid` (Error "needs the embedding model" without it; a wrong length is
    /// an Error too) and ignored for `bm25` (pass `null`). Returns the same JSON as `search`.
    /// Answers `{"need": [...]}` on a paged bundle as `search` does.
    pub fn search_with_vector(
        &mut self,
        query: &str,
        qvec: Option<Vec<f32>>,
        mode: &str,
        top_k: usize,
    ) -> Result<String, JsError> {
        self.run(query, qvec.as_deref(), mode, top_k, false)
    }
}

impl WasmEngine {
    /// `search` (`own_model`: the engine embeds the query itself) and `search_with_vector`:
    /// one body for both exports.
    fn run(
        &mut self,
        query: &str,
        qvec: Option<&[f32]>,
        mode: &str,
        top_k: usize,
        own_model: bool,
    ) -> Result<String, JsError> {
        let engine = self
            .engine
            .as_ref()
            .ok_or_else(|| JsError::new("no bundle open"))?;
        let mode: Mode = mode.parse().map_err(|e: EngineError| js_err(e))?;
        let key = call_key(mode, top_k, &self.filters, query);
        if self.pending.as_deref() != Some(key.as_str()) {
            engine.trim_cache();
        }
        let result = if own_model {
            engine.search(query, mode, top_k)
        } else {
            engine.search_with_vector(query, qvec, mode, top_k)
        };
        let answer = answer(result);
        self.pending = matches!(answer, Ok(Answer::Need(_))).then_some(key);
        answer?.json()
    }
}

/// What identifies one search call (its next round has the same key): mode, `top_k`, the
/// filters and the query, each field ended by a NUL (the folder length-prefixed, the query
/// last), written without `Debug` (issue 12: `{:?}` of strings links core's escape tables).
fn call_key(mode: Mode, top_k: usize, f: &Filters, query: &str) -> String {
    let mut key = format!("{mode}\0{top_k}\0");
    if let Some((lo, hi)) = f.tier {
        key.push_str(&format!("{lo}-{hi}"));
    }
    key.push('\0');
    for l in &f.langs {
        key.push_str(l);
        key.push(',');
    }
    key.push('\0');
    if let Some(folder) = &f.folder {
        key.push_str(&format!("{}:{folder}", folder.len()));
    }
    key.push('\0');
    key.push_str(query);
    key
}

enum Answer {
    Need(Vec<String>),
    Result(crate::SearchResult),
}

impl Answer {
    fn json(&self) -> Result<String, JsError> {
        match self {
            Answer::Need(pages) => Ok(crate::out::need(pages)),
            Answer::Result(r) => Ok(crate::out::result(r)),
        }
    }
}

fn answer(r: Result<crate::SearchResult, EngineError>) -> Result<Answer, JsError> {
    match r {
        Ok(r) => Ok(Answer::Result(r)),
        Err(EngineError::NeedPages(pages)) => Ok(Answer::Need(pages)),
        Err(e) => Err(js_err(e)),
    }
}

fn summary(engine: &crate::Engine) -> String {
    crate::out::summary(engine.bundle().manifest(), engine.bundle().has_vectors())
}

#[cfg(feature = "v1")]
impl WasmEngine {
    fn open_v1(
        &mut self,
        files: jikji_format::hash::Map<String, Vec<u8>>,
    ) -> Result<String, JsError> {
        let mut engine = crate::Engine::from_files(files.into_iter().collect()).map_err(js_err)?;
        engine.set_search_options(self.options);
        engine.set_filters(self.filters.clone());
        let summary = summary(&engine);
        self.engine = Some(engine);
        self.pending = None;
        Ok(summary)
    }
}

impl Default for WasmEngine {
    fn default() -> Self {
        Self::new()
    }
}

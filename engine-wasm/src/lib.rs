//! The Jikji search engine: loads a bundle (see `jikji-format`) and answers BM25, dense
//! and hybrid queries. The same code runs natively (`jikji search`) and in the browser
//! (the `wasm` module, compiled only for `wasm32`).
//!
//! Cargo feature `embed` (default) adds the query embedder (tract + tokenizers); without
//! it the engine answers BM25 queries, and dense/hybrid ones given a query vector.
#![warn(missing_docs)]
// scripts/build-wasm's nightly build of the browser engine: the crate is compiled for size
// (opt-level "z") but for the functions marked `optimize(speed)`, the query's hot path.
#![cfg_attr(jikji_nightly, feature(optimize_attribute))]

pub mod centring;
pub mod filters;
pub mod fusion;
#[cfg(feature = "dense")]
pub mod ivf;
mod lifecycle;
pub mod out;
pub mod parents;
mod pipeline;
pub mod scores;
pub mod search;
pub mod snippet;
#[cfg(target_arch = "wasm32")]
mod wasm;

#[cfg(feature = "v1")]
use std::collections::HashMap;
use std::str::FromStr;
use std::sync::OnceLock;

use jikji_format::{Bundle, ChunkRecord, FormatError};
use serde::Serialize;

use lifecycle::Lifecycle;

pub use filters::{FacetValues, Filters};
pub use search::{Expansion, Scored, FUSION_DEPTH, RRF_K};

/// A bundle's per-chunk facets ([`jikji_format::paged::Facets`]), from its columns page or
/// (format 1) its records: see [`Engine::facets`].
pub(crate) enum FacetsOf<'a> {
    /// A paged bundle's columns page.
    Columns(std::sync::Arc<jikji_format::paged::Columns>),
    /// Read from a format 1 bundle's records.
    #[cfg(feature = "v1")]
    Records(&'a jikji_format::paged::Facets),
    #[cfg(not(feature = "v1"))]
    #[allow(dead_code)]
    Never(std::marker::PhantomData<&'a ()>),
}

impl FacetsOf<'_> {
    /// The facets; `None` for a columns page written before the filter columns.
    pub(crate) fn get(&self) -> Option<&jikji_format::paged::Facets> {
        match self {
            FacetsOf::Columns(c) => c.facets.as_ref(),
            #[cfg(feature = "v1")]
            FacetsOf::Records(f) => Some(f),
            #[cfg(not(feature = "v1"))]
            FacetsOf::Never(_) => None,
        }
    }
}

/// Most passes one query makes over a paged bundle (dictionary, postings, chunks, plus
/// expansions: the Hanja pages, the typo dictionary and the terms it reaches).
pub const MAX_ROUNDS: usize = 8;

/// Errors of the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The bundle is missing, corrupt or of another version (names the file).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Dense or hybrid search was asked but no model is loaded.
    #[error("mode {0} needs the embedding model; load it first")]
    NoModel(Mode),
    /// Dense or hybrid search was asked of a build without feature `dense` (the browser's
    /// BM25 engine, `pkg/`; its dense engine is `pkg/dense/`).
    #[error("mode {0} is not in this build of the engine (BM25 only): dense and hybrid search run in the dense engine (pkg/dense/, built with feature dense)")]
    NoDense(Mode),
    /// Dense or hybrid search was asked but the bundle has no vectors.
    #[error("mode {0} needs vectors, but this bundle was built without a model")]
    NoVectors(Mode),
    /// The model offered is not the one the bundle's vectors were made with.
    #[error("model mismatch: bundle vectors were made with {expected_id} (sha256 {expected}), the model given has sha256 {actual}")]
    ModelMismatch {
        /// Model id from the manifest.
        expected_id: String,
        /// Model sha256 from the manifest.
        expected: String,
        /// sha256 of the ONNX bytes given.
        actual: String,
    },
    /// The query vector has the wrong dimension.
    #[error("query vector has {actual} dimensions, bundle vectors have {expected}")]
    Dimension {
        /// Bundle dimension.
        expected: usize,
        /// Given dimension.
        actual: usize,
    },
    /// Unknown mode name.
    #[error("unknown search mode {} (expected bm25, dense or hybrid)", jikji_format::quote::Quoted(.0))]
    BadMode(String),
    /// Unknown fusion name.
    #[cfg_attr(
        not(target_arch = "wasm32"),
        error("unknown fusion {} (expected rrf, weighted or weighted:W with 0 ≤ W ≤ 1)", jikji_format::quote::Quoted(.0))
    )]
    #[cfg_attr(
        target_arch = "wasm32",
        error("unknown fusion {} (expected rrf, weighted or weighted:W with 0 ≤ W ≤ 1, W a plain decimal of at most 8 digits after the point)", jikji_format::quote::Quoted(.0))
    )]
    BadFusion(String),
    /// A search filter that does not parse (names it and what was expected).
    #[error("bad filter: {0}")]
    BadFilter(String),
    /// Filters were asked of a paged bundle whose columns page predates the filter columns.
    #[error("this bundle was built before search filters (its columns page has no tier, language and folder columns): rebuild it with `jikji build` to filter by tier, language or folder")]
    NoFilterColumns,
    /// A paged bundle needs these pages (names under `p/`) to answer the query: fetch them,
    /// add them ([`jikji_format::Bundle::add_page`]) and run the query again. Natively,
    /// for a bundle read from a folder, the engine loads them itself and never returns this.
    #[error("the query needs {} more pages of the bundle: {}", .0.len(), Names(.0))]
    NeedPages(Vec<String>),
    /// The embedder failed.
    #[cfg(feature = "embed")]
    #[error(transparent)]
    Embed(#[from] jikji_embed::EmbedError),
}

/// Search mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Lexical BM25 over the term dictionary.
    Bm25,
    /// Cosine similarity of the query embedding with every chunk vector (exact scan).
    Dense,
    /// Fusion of the BM25 and dense rankings, by the engine's [`Fusion`].
    Hybrid,
}

/// How hybrid mode fuses the BM25 and dense rankings.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
#[serde(rename_all = "lowercase", tag = "fusion")]
pub enum Fusion {
    /// Reciprocal rank fusion with k = [`RRF_K`] over the top [`FUSION_DEPTH`] of each.
    Rrf,
    /// `w·dense + (1 − w)·bm25` of the calibrated scores (see [`fusion::weighted`]);
    /// needs a bundle with a calibration, else RRF is used.
    Weighted {
        /// Weight of the dense score, in [0, 1].
        dense_weight: f32,
    },
}

impl FromStr for Fusion {
    type Err = EngineError;
    /// `rrf`, `weighted` (the bundle's default weight, else
    /// [`scores::DEFAULT_DENSE_WEIGHT`]) or `weighted:W` with W in [0, 1].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "rrf" => Ok(Fusion::Rrf),
            "weighted" => Ok(Fusion::Weighted {
                dense_weight: f32::NAN,
            }),
            _ => match s.strip_prefix("weighted:").map(fusion_weight) {
                Some(Some(w)) if (0.0..=1.0).contains(&w) => {
                    Ok(Fusion::Weighted { dense_weight: w })
                }
                _ => Err(EngineError::BadFusion(s)),
            },
        }
    }
}

/// The `W` of `weighted:W` as `str::parse::<f32>` reads it. A plain decimal with at most 8
/// digits after the point (trailing zeros aside) is read by
/// [`jikji_format::num::decimal_f32`], which gives the same `f32` without core's float
/// parser (`dec2flt`, ~15 kB of the browser's wasm); anything else (`5e-1`, more digits) is
/// read by `str::parse` natively and refused (`None`) in the wasm build.
fn fusion_weight(w: &str) -> Option<f32> {
    match jikji_format::num::decimal_f32(w) {
        Some(w) => Some(w),
        #[cfg(not(target_arch = "wasm32"))]
        None => w.parse::<f32>().ok(),
        #[cfg(target_arch = "wasm32")]
        None => None,
    }
}

impl FromStr for Mode {
    type Err = EngineError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "bm25" => Ok(Mode::Bm25),
            "dense" => Ok(Mode::Dense),
            "hybrid" => Ok(Mode::Hybrid),
            _ => Err(EngineError::BadMode(s.to_string())),
        }
    }
}

/// Names written with `", "` between them (as `names.join(", ")`, without linking a
/// `join` of `String`s into the wasm: issue 12).
struct Names<'a>(&'a [String]);

impl std::fmt::Display for Names<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, n) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(n)?;
        }
        Ok(())
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::Bm25 => "bm25",
            Mode::Dense => "dense",
            Mode::Hybrid => "hybrid",
        })
    }
}

/// One ranked chunk: its rank and score, and every field of its [`ChunkRecord`] (id,
/// source, source_url, tier, heading_path, lang, section, start, end, text and front
/// matter metadata), flattened into the same JSON object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Hit {
    /// 1-based rank.
    pub rank: usize,
    /// Calibrated score in [0, 1]: the estimated probability that this result is a right
    /// answer, read the same in every mode and bundle (≥ 0.6 reliable, 0.3–0.6 use with
    /// care, < 0.3 drop; see [`scores`]); with the bundle's null cap
    /// ([`jikji_format::NullCap`]) at most its `cap` (0.59) when at or under what the
    /// bundle's off-topic queries reach. Equal to `raw_score` when the bundle has no
    /// calibration (bundles built before it existed).
    pub score: f32,
    /// The ranker's own score: BM25 (unbounded, ≥ 0), cosine similarity (−1..1), the RRF
    /// score (≤ 2 / 61) or the weighted-fusion score (0..1).
    pub raw_score: f32,
    /// How much of the query the chunk covers ([`scores::Coverage`]: share of the query's
    /// terms it holds, idf mass matched, share unknown to the bundle), when the engine was
    /// asked for it ([`Engine::set_coverage`]) and can give it without fetching more pages
    /// (a BM25 or hybrid search, or any search of a bundle read whole) and the hit is an
    /// indexed chunk (`None` for parent-child bundles, whose hits are parent sections).
    /// A calibration feature, not in the JSON results.
    #[serde(skip)]
    pub coverage: Option<scores::Coverage>,
    /// The chunk.
    #[serde(flatten)]
    pub chunk: ChunkRecord,
}

impl std::ops::Deref for Hit {
    type Target = ChunkRecord;
    fn deref(&self) -> &ChunkRecord {
        &self.chunk
    }
}

/// Results of one query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchResult {
    /// The query as given.
    pub query: String,
    /// The mode used.
    pub mode: Mode,
    /// The fusion used (hybrid mode only; absent when the query matched no term of the
    /// bundle, so that hybrid returned the dense ranking and its calibrated scores).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fusion: Option<Fusion>,
    /// True if `score` is calibrated (the bundle has a calibration).
    pub calibrated: bool,
    /// Ranked hits, best first, at most `top_k`.
    pub hits: Vec<Hit>,
}

/// Which chunks a search may return, whatever their relevance: the lifecycle filters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SearchOptions {
    /// The clock, in milliseconds since the Unix epoch (UTC; JavaScript's `Date.now()`):
    /// chunks whose front matter `expires` (ISO 8601, see [`jikji_format::time`]; a date
    /// means midnight UTC starting that day) is at or before it are left out. `None`: no
    /// expiry filtering. An `expires` that does not parse never filters (`jikji check`
    /// reports it).
    pub now_ms: Option<i64>,
    /// Also return archived chunks (older versions of a document).
    pub include_archived: bool,
}

/// A loaded bundle plus (with feature `embed`) an optional query embedder.
pub struct Engine {
    bundle: Bundle,
    expansion: Expansion,
    #[cfg(feature = "embed")]
    embedder: Option<jikji_embed::Embedder>,
    fusion: Fusion,
    min_score: f32,
    prefer_tier: Option<u32>,
    options: SearchOptions,
    filters: Filters,
    /// The last filters' allowed docs, kept while the filters are unchanged.
    allowed: std::sync::Mutex<Option<(Filters, std::sync::Arc<Vec<bool>>)>>,
    /// A format 1 bundle's facets, read from every record on first use.
    #[cfg(feature = "v1")]
    v1_facets: OnceLock<Result<jikji_format::paged::Facets, String>>,
    lifecycle: OnceLock<Result<Lifecycle, String>>,
    /// Per facets language, whether it holds [`fusion::MIN_LANGUAGE_SHARE`] of the chunks
    /// ([`fusion::substantial_languages`]), counted once per bundle.
    #[cfg_attr(not(feature = "dense"), allow(dead_code))]
    language_shares: OnceLock<std::sync::Arc<Vec<bool>>>,
    /// The bundle's per-chunk centring, decoded once the vectors are loaded (`None`: none).
    #[cfg_attr(not(feature = "dense"), allow(dead_code))]
    chunk_centring: OnceLock<Option<centring::ChunkCentring>>,
    /// The centring's languages and offsets without norms (the dense index's scan).
    #[cfg_attr(not(feature = "dense"), allow(dead_code))]
    chunk_langs: OnceLock<Option<centring::ChunkCentring>>,
    /// Lists a dense query scans (`None`: the index's `nprobe`).
    #[cfg_attr(not(feature = "dense"), allow(dead_code))]
    nprobe: Option<usize>,
    /// Oversampling of a binary index's rescoring (`None`: the index's `rescore`).
    #[cfg_attr(not(feature = "dense"), allow(dead_code))]
    rescore: Option<usize>,
    /// Scan every vector even when the bundle has a dense index.
    exact_dense: bool,
    /// The dense index's routing of the last query ([`ivf::Routing`]): its passes rank the
    /// lists once.
    #[cfg(feature = "dense")]
    ivf_routing: std::sync::Mutex<ivf::Routing>,
    /// Give hits their [`Hit::coverage`].
    coverage: bool,
    fetched: std::sync::Mutex<FetchStats>,
}

/// What the last query read from a paged bundle's folder (natively): the browser would
/// fetch the same pages in the same rounds (the page bytes are served as stored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FetchStats {
    /// Per page kind (the name's first letter: `d` dictionary, `o` postings, `c` chunks,
    /// `l` columns, `h` Hanja, `t` typo, `v` vectors): pages and bytes.
    pub by_kind: std::collections::BTreeMap<String, (usize, u64)>,
    /// Rounds of page reads after the entry (0: every page was cached).
    pub rounds: usize,
    /// Pages read.
    pub pages: usize,
    /// Bytes of those pages as stored (what a browser transfers).
    pub bytes: u64,
    /// Per round, in order: the page kinds read and how many of each, e.g. `b:8 y:5`
    /// (which pages wait for which).
    pub per_round: Vec<String>,
}

impl Engine {
    /// Wraps a verified bundle.
    pub fn new(bundle: Bundle) -> Self {
        let fusion = match &bundle.manifest().calibration {
            Some(c) if c.dense.is_some() => Fusion::Weighted {
                dense_weight: c.dense_weight,
            },
            _ => Fusion::Rrf,
        };
        Engine {
            bundle,
            expansion: Expansion::default(),
            #[cfg(feature = "embed")]
            embedder: None,
            fusion,
            min_score: 0.0,
            prefer_tier: None,
            options: SearchOptions::default(),
            filters: Filters::default(),
            allowed: Default::default(),
            #[cfg(feature = "v1")]
            v1_facets: OnceLock::new(),
            lifecycle: OnceLock::new(),
            language_shares: OnceLock::new(),
            chunk_centring: OnceLock::new(),
            chunk_langs: OnceLock::new(),
            nprobe: None,
            rescore: None,
            exact_dense: false,
            #[cfg(feature = "dense")]
            ivf_routing: Default::default(),
            coverage: false,
            fetched: Default::default(),
        }
    }

    /// The fusion hybrid mode uses: by default weighted fusion with the bundle's weight
    /// when the bundle has a dense calibration, else RRF.
    pub fn fusion(&self) -> Fusion {
        self.fusion
    }

    /// Sets the hybrid fusion. `Weighted` with a NaN weight (as parsed from `weighted`)
    /// takes the bundle's weight, else [`scores::DEFAULT_DENSE_WEIGHT`]. Weighted fusion
    /// on a bundle without a dense calibration falls back to RRF at search time.
    pub fn set_fusion(&mut self, fusion: Fusion) {
        self.fusion = match fusion {
            Fusion::Weighted { dense_weight } if dense_weight.is_nan() => Fusion::Weighted {
                dense_weight: self
                    .bundle
                    .manifest()
                    .calibration
                    .as_ref()
                    .map_or(scores::DEFAULT_DENSE_WEIGHT, |c| c.dense_weight),
            },
            f => f,
        };
    }

    /// Gives every hit its [`Hit::coverage`] (default off: it decodes the postings of the
    /// query's terms a second time). Coverage is left out (`None`) where computing it
    /// would fetch pages the search does not need (a dense search of a paged bundle) or
    /// where hits are not indexed chunks (parent-child bundles).
    pub fn set_coverage(&mut self, on: bool) {
        self.coverage = on;
    }

    /// Drops hits whose (calibrated) score is below `min_score` (default 0: keep all, also
    /// the negative raw dense scores of an uncalibrated bundle).
    pub fn set_min_score(&mut self, min_score: f32) {
        self.min_score = min_score;
    }

    /// Lets hits of `tier` (a tier folder's number, `1. …` → 1; lower is better curated)
    /// win ties (default `None`: ranking by score alone). Hits tie when their reported
    /// scores are within [`pipeline::TIE`] (0.01) of the best hit of their group: groups are
    /// formed greedily from the top of the ranking, each starting at the best hit not yet in
    /// a group and holding the hits after it whose score is at least its score minus `TIE`.
    /// Within a group the hits of `tier` come first, in their order, then the others, in
    /// theirs; scores are not changed (so they can be out of order by less than `TIE`), only
    /// ranks. A group that straddles the `top_k`-th hit is completed from up to
    /// [`pipeline::TIE_DEPTH`] further hits, so a preferred hit that ties with the last one
    /// shown can enter the results. On a bundle without calibration the scores compared are
    /// raw scores (BM25 or cosine), where 0.01 is a smaller tie than on calibrated [0, 1]
    /// scores.
    pub fn set_prefer_tier(&mut self, tier: Option<u32>) {
        self.prefer_tier = tier;
    }

    /// Sets the lifecycle filters used by [`Engine::search`] and
    /// [`Engine::search_with_vector`] (default: archived chunks excluded, no clock so no
    /// expiry filtering).
    pub fn set_search_options(&mut self, options: SearchOptions) {
        self.options = options;
    }

    /// The lifecycle filters in use.
    pub fn search_options(&self) -> SearchOptions {
        self.options
    }

    /// Sets the tier, language and folder filters of every search (default: none). They
    /// are applied inside the rankers, before a ranking is cut (see [`filters`]), so a
    /// filtered search still returns `top_k` hits when the bundle has that many allowed
    /// chunks. On a paged bundle written before the filter columns, a search with a filter
    /// fails with [`EngineError::NoFilterColumns`].
    pub fn set_filters(&mut self, filters: Filters) {
        self.filters = filters;
    }

    /// The tier, language and folder filters in use.
    pub fn filters(&self) -> &Filters {
        &self.filters
    }

    /// Per chunk its tier, text language and folder ([`FacetsOf::get`]): a paged bundle's
    /// columns page (none when the page predates the filter columns), or every record of a
    /// format 1 bundle (read once). Errors: a corrupt columns page or record; a format 1
    /// bundle in a build without feature `v1`.
    pub(crate) fn facets(&self) -> Result<FacetsOf<'_>, EngineError> {
        match self.bundle.columns()? {
            Some(c) => Ok(FacetsOf::Columns(c)),
            None => {
                #[cfg(feature = "v1")]
                {
                    self.v1_facets
                        .get_or_init(|| filters::scan(&self.bundle).map_err(|e| e.to_string()))
                        .as_ref()
                        .map(FacetsOf::Records)
                        .map_err(|e| {
                            EngineError::Format(FormatError::corrupt(
                                jikji_format::chunks::CHUNKS_FILE,
                                0,
                                e.clone(),
                            ))
                        })
                }
                #[cfg(not(feature = "v1"))]
                Err(EngineError::Format(FormatError::V1NotBuilt {
                    file: jikji_format::manifest::MANIFEST_FILE.into(),
                }))
            }
        }
    }

    /// [`fusion::substantial_languages`] of `facets`, counted on first use and kept (the
    /// facets are the bundle's, fixed while the engine lives); `None` when the facets have
    /// no language column.
    #[cfg(feature = "dense")]
    pub(crate) fn language_shares(
        &self,
        facets: &FacetsOf<'_>,
    ) -> Option<std::sync::Arc<Vec<bool>>> {
        if let Some(s) = self.language_shares.get() {
            return Some(s.clone());
        }
        let f = facets.get()?;
        let s = std::sync::Arc::new(fusion::substantial_languages(&f.langs, &f.lang));
        Some(self.language_shares.get_or_init(|| s).clone())
    }

    /// Per doc, whether the filters allow it; `None` without filters. Reads the columns
    /// page (paged bundles) or every record (format 1, once).
    fn allowed(&self) -> Result<Option<std::sync::Arc<Vec<bool>>>, EngineError> {
        if self.filters.is_empty() {
            return Ok(None);
        }
        let mut memo = self.allowed.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((f, a)) = memo.as_ref() {
            if *f == self.filters {
                return Ok(Some(a.clone()));
            }
        }
        let facets = self.facets()?;
        let allowed = self
            .filters
            .allowed(facets.get().ok_or(EngineError::NoFilterColumns)?);
        let a = std::sync::Arc::new(allowed);
        *memo = Some((self.filters.clone(), a.clone()));
        Ok(Some(a))
    }

    /// The values the bundle's chunks take for each filter, with their chunk counts
    /// ([`FacetValues`]): what a search page offers as tier, language and folder filters.
    /// On a paged bundle this reads the columns page: natively from the bundle folder; in the
    /// browser, while it is not in the cache, [`EngineError::NeedPages`] names it (add it and
    /// call again). Errors: [`EngineError::NoFilterColumns`] for a bundle built before the
    /// filter columns; a corrupt columns page.
    pub fn facet_values(&self) -> Result<FacetValues, EngineError> {
        for _ in 0..MAX_ROUNDS {
            if let Some(c) = self.bundle.cache() {
                c.clear_missing();
            }
            match self.facets() {
                Ok(f) => {
                    return f
                        .get()
                        .map(FacetValues::of)
                        .ok_or(EngineError::NoFilterColumns)
                }
                Err(EngineError::Format(e)) if e.is_page_missing() => {
                    let missing = self
                        .bundle
                        .cache()
                        .map(|c| c.take_missing())
                        .unwrap_or_default();
                    if missing.is_empty() {
                        return Err(e.into());
                    }
                    #[cfg(not(target_arch = "wasm32"))]
                    if self.bundle.can_load_pages() {
                        self.bundle.load_pages(&missing)?;
                        continue;
                    }
                    return Err(EngineError::NeedPages(missing));
                }
                Err(e) => return Err(e),
            }
        }
        Err(EngineError::Format(FormatError::corrupt(
            jikji_format::paged::ENTRY_FILE,
            0,
            "the columns page was still missing after it was loaded",
        )))
    }

    /// The snippet of chunk text `text` for `query` ([`snippet::snippet`], with this bundle's
    /// analyzer and [`snippet::SNIPPET_WIDTH`] columns).
    pub fn snippet(&self, query: &str, text: &str) -> snippet::Snippet {
        let analyzer = self.bundle.analyzer();
        let s = snippet::snippet(analyzer, query, text, snippet::SNIPPET_WIDTH);
        // A Unicode table the text needed and the query did not: not a page to fetch (the
        // snippet falls back to ASCII lowercase for those characters).
        let _ = analyzer.tables().take_missing();
        s
    }

    fn lifecycle(&self) -> Result<&Lifecycle, EngineError> {
        if self.lifecycle.get().is_none() {
            match Lifecycle::read(&self.bundle) {
                // A paged bundle's columns page not loaded yet: not a result to keep.
                Err(e) if e.is_page_missing() => return Err(e.into()),
                r => {
                    let _ = self.lifecycle.set(r.map_err(|e| e.to_string()));
                }
            }
        }
        self.lifecycle
            .get()
            .expect("set above")
            .as_ref()
            .map_err(|e| {
                EngineError::Format(FormatError::corrupt(
                    jikji_format::chunks::CHUNKS_FILE,
                    0,
                    e.clone(),
                ))
            })
    }

    /// The bundle's per-chunk centring for its loaded `vectors` ([`centring::ChunkCentring`],
    /// decoded on first use), `None` without a `model.centring` or for a `lang-mean-v1`
    /// record. Errors: the record is not what a builder writes (not kept: every query
    /// reports it).
    #[cfg(feature = "dense")]
    fn chunk_centring(
        &self,
        vectors: &jikji_format::vectors::Vectors,
    ) -> Result<Option<&centring::ChunkCentring>, EngineError> {
        if let Some(c) = self.chunk_centring.get() {
            return Ok(c.as_ref());
        }
        let record = self.bundle.manifest().model.as_ref();
        let c = match record.and_then(|m| m.centring.as_ref()) {
            Some(c) => centring::ChunkCentring::of(c, vectors)?,
            None => None,
        };
        Ok(self.chunk_centring.get_or_init(|| c).as_ref())
    }

    /// The bundle's per-chunk centring languages and offsets without norms (decoded on
    /// first use; the dense index's scan computes each norm from its row). Errors: as
    /// [`Engine::chunk_centring`].
    #[cfg(feature = "dense")]
    fn chunk_langs(&self) -> Result<Option<&centring::ChunkCentring>, EngineError> {
        if let Some(c) = self.chunk_langs.get() {
            return Ok(c.as_ref());
        }
        let m = self.bundle.manifest();
        let dim = self.bundle.pages().map_or(0, |p| p.dim);
        let c = match m.model.as_ref().and_then(|m| m.centring.as_ref()) {
            Some(c) => centring::ChunkCentring::langs_of(c, m.counts.chunks, dim)?,
            None => None,
        };
        Ok(self.chunk_langs.get_or_init(|| c).as_ref())
    }

    /// The dense index dense queries go through: the paged bundle's `pages.ivf`, unless
    /// [`Engine::set_exact_dense`] asked for the exact scan (or the bundle is read whole).
    /// Feature `dense` only.
    #[cfg(feature = "dense")]
    pub fn dense_index(&self) -> Option<&jikji_format::paged::ivf::IvfRoot> {
        if self.exact_dense || !self.bundle.is_paged() {
            return None;
        }
        self.bundle.pages().and_then(|p| p.ivf.as_ref())
    }

    /// The pages every dense query through the dense index reads whatever the query, once
    /// per bundle generation (the centroid pages and the background sample page,
    /// [`jikji_format::paged::ivf::IvfRoot::once_pages`]); empty without a dense index (or
    /// with [`Engine::set_exact_dense`]). The browser's worker fetches them while the query
    /// model loads, so the first dense query's index rounds are those of a warm cache.
    /// Feature `dense` only.
    #[cfg(feature = "dense")]
    pub fn dense_once_pages(&self) -> Vec<String> {
        self.dense_index()
            .map(jikji_format::paged::ivf::IvfRoot::once_pages)
            .unwrap_or_default()
    }

    /// Lists a dense query scans through the dense index (`None`: the index's `nprobe`,
    /// recorded by the builder; values are clamped to `1..=nlist`). More lists: higher
    /// recall against the exact scan, more bytes per query (each list is one page of its
    /// chunks' int8 rows). No effect without a dense index.
    pub fn set_nprobe(&mut self, nprobe: Option<usize>) {
        self.nprobe = nprobe;
    }

    /// Oversampling of a binary dense index's int8 rescoring: `rescore · min(k, 10)` best
    /// estimates are rescored with their rows (`None`: the index's `pages.ivf.rescore`;
    /// `Some(0)`: none, the ranking is by the binary estimates alone, binary-only search).
    /// Ignored by int8 lists and the exact scan.
    pub fn set_rescore(&mut self, rescore: Option<usize>) {
        self.rescore = rescore;
    }

    /// `true`: dense queries scan every vector page even when the bundle has a dense index
    /// (the reference its recall is measured against); `false` (default): through the index.
    pub fn set_exact_dense(&mut self, exact: bool) {
        self.exact_dense = exact;
    }

    /// The dense scorer of query vector `q` against the bundle's `vectors`, with its
    /// per-chunk centring ([`centring::DenseScorer`]).
    #[cfg(feature = "dense")]
    pub(crate) fn scorer<'a>(
        &'a self,
        vectors: &'a jikji_format::vectors::Vectors,
        q: &'a [f32],
    ) -> Result<centring::DenseScorer<'a>, EngineError> {
        Ok(centring::DenseScorer::new(
            vectors,
            self.chunk_centring(vectors)?,
            q,
        ))
    }

    /// Verifies and opens a bundle from its files' bytes (see [`Bundle::from_files`]).
    /// Feature `v1`.
    #[cfg(feature = "v1")]
    pub fn from_files(files: HashMap<String, Vec<u8>>) -> Result<Self, EngineError> {
        Ok(Self::new(Bundle::from_files(files)?))
    }

    /// Opens a bundle folder whole (native only): every file or page is read and verified
    /// now, and the engine no longer needs the folder (see [`Bundle::open_dir`]). Feature `v1`.
    #[cfg(all(feature = "v1", not(target_arch = "wasm32")))]
    pub fn open_dir(dir: &std::path::Path) -> Result<Self, EngineError> {
        Ok(Self::new(Bundle::open_dir(dir)?))
    }

    /// Opens a format 2 bundle folder paged (native only): only `jikji.json` is read, and
    /// each query reads the pages it needs from the folder, as the browser fetches them
    /// (`jikji search`; [`Engine::last_fetch`] says what it read). The folder must stay in
    /// place while the engine is used. A format 1 folder is opened whole.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_dir_paged(dir: &std::path::Path) -> Result<Self, EngineError> {
        Ok(Self::new(Bundle::open_paged_dir(dir)?))
    }

    /// Opens a paged bundle from its entry file's bytes (`jikji.json`), as the browser
    /// does; pages are added with [`Engine::add_page`].
    pub fn open_entry(entry: &[u8]) -> Result<Self, EngineError> {
        Ok(Self::new(Bundle::open_entry(entry)?))
    }

    /// Adds a page (header + raw body) to a paged bundle's cache. Errors on a page that
    /// fails verification (named) or a whole bundle.
    pub fn add_page(&self, name: &str, bytes: &[u8]) -> Result<(), EngineError> {
        Ok(self.bundle.add_page(name, bytes)?)
    }

    /// The pages the last query read from the bundle folder (native paged bundles; zero
    /// otherwise).
    pub fn last_fetch(&self) -> FetchStats {
        self.fetched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Sets the page cache's byte budget (raw bytes of unpinned pages kept between queries;
    /// default 32 MiB; 0 = every query starts cold). No-op for a whole bundle.
    pub fn set_cache_budget(&self, bytes: usize) {
        if let Some(c) = self.bundle.cache() {
            c.set_budget(bytes);
        }
    }

    /// Evicts least recently used pages down to the cache budget: call before a new query
    /// (never between the rounds of one). No-op for a whole bundle.
    pub fn trim_cache(&self) {
        if let Some(c) = self.bundle.cache() {
            c.trim();
        }
    }

    /// The bundle.
    pub fn bundle(&self) -> &Bundle {
        &self.bundle
    }

    /// Sets the lexical query expansion weights (prefix, typo, Hangul ↔ Hanja);
    /// [`Expansion::default`] unless set.
    pub fn set_expansion(&mut self, expansion: Expansion) {
        self.expansion = expansion;
    }

    /// The bundle's lexical search inputs with this engine's expansion weights.
    fn lexical(&self) -> search::Lexical<'_> {
        search::Lexical {
            expansion: self.expansion,
            ..search::Lexical::of(&self.bundle)
        }
    }

    /// Checks that ONNX bytes with SHA-256 `onnx_sha256` are the bundle's model.
    pub fn check_model(&self, onnx_sha256: &str) -> Result<(), EngineError> {
        match &self.bundle.manifest().model {
            Some(m) if m.sha256 != onnx_sha256 => Err(EngineError::ModelMismatch {
                expected_id: m.id.clone(),
                expected: m.sha256.clone(),
                actual: onnx_sha256.to_string(),
            }),
            _ => Ok(()),
        }
    }

    /// Loads the query embedder from ONNX and tokenizer.json bytes, after checking the
    /// ONNX file is the one the bundle's vectors were made with.
    #[cfg(feature = "embed")]
    pub fn load_model(&mut self, onnx: &[u8], tokenizer_json: &[u8]) -> Result<(), EngineError> {
        self.check_model(&jikji_format::sha256_hex(onnx))?;
        self.embedder = Some(jikji_embed::Embedder::from_bytes(onnx, tokenizer_json)?);
        Ok(())
    }

    /// Uses an already loaded embedder (native: shared with the builder).
    #[cfg(feature = "embed")]
    pub fn set_embedder(&mut self, embedder: jikji_embed::Embedder) {
        self.embedder = Some(embedder);
    }

    /// True if a query embedder is loaded.
    pub fn has_model(&self) -> bool {
        #[cfg(feature = "embed")]
        {
            self.embedder.is_some()
        }
        #[cfg(not(feature = "embed"))]
        {
            false
        }
    }

    /// Embeds `query` with the `query: ` prefix (E5 convention).
    #[cfg(feature = "embed")]
    pub fn embed_query(&self, query: &str, mode: Mode) -> Result<Vec<f32>, EngineError> {
        let e = self.embedder.as_ref().ok_or(EngineError::NoModel(mode))?;
        Ok(e.embed_query(query)?)
    }

    /// Runs one query in `mode`, returning at most `top_k` hits. Dense and hybrid modes
    /// embed the query with the loaded model (feature `embed`).
    pub fn search(
        &self,
        query: &str,
        mode: Mode,
        top_k: usize,
    ) -> Result<SearchResult, EngineError> {
        let qvec: Option<Vec<f32>> = match mode {
            Mode::Bm25 => None,
            _ => {
                if !self.bundle.has_vectors() {
                    return Err(EngineError::NoVectors(mode));
                }
                #[cfg(feature = "embed")]
                {
                    Some(self.embed_query(query, mode)?)
                }
                #[cfg(not(feature = "embed"))]
                {
                    return Err(EngineError::NoModel(mode));
                }
            }
        };
        self.search_with_vector(query, qvec.as_deref(), mode, top_k)
    }

    /// Runs one query with a caller-supplied query vector (L2-normalised; required for
    /// dense and hybrid, ignored for bm25), under the engine's [`SearchOptions`].
    pub fn search_with_vector(
        &self,
        query: &str,
        qvec: Option<&[f32]>,
        mode: Mode,
        top_k: usize,
    ) -> Result<SearchResult, EngineError> {
        self.search_with_options(query, qvec, mode, top_k, &self.options)
    }

    /// Runs one query under explicit lifecycle filters `opts` (see
    /// [`Engine::search_with_vector`]). Chunks the filters leave out are removed from each
    /// ranking before it is cut to `top_k`, which is deepened by the number of chunks left
    /// out, so a filtered search still returns `top_k` hits when the bundle has them. In
    /// hybrid mode the fused ranking is filtered (ranks inside each list still count the
    /// left-out chunks). The stages (rankers, fusion, parents and lifecycle filters,
    /// calibrated scores, minimum score) are described in the `pipeline` module. A bundle
    /// whose manifest has a `model.centring` first centres `qvec` for the query's language
    /// ([`centring::centre_query`]) and scores each chunk with its language's offset
    /// ([`centring::DenseScorer`]).
    ///
    /// On a paged bundle the query runs in passes (see [`jikji_format::paged`]): a pass
    /// that read a page not in the cache is thrown away; natively the missing pages are
    /// read from the bundle folder and the query runs again (at most [`MAX_ROUNDS`]
    /// passes), in the browser [`EngineError::NeedPages`] lists them for the caller.
    pub fn search_with_options(
        &self,
        query: &str,
        qvec: Option<&[f32]>,
        mode: Mode,
        top_k: usize,
        opts: &SearchOptions,
    ) -> Result<SearchResult, EngineError> {
        #[cfg(not(feature = "dense"))]
        if mode != Mode::Bm25 {
            return Err(EngineError::NoDense(mode));
        }
        // Bundles with a per-language centring compare centred query vectors (issue 15).
        #[cfg(feature = "dense")]
        let centring = self.bundle.manifest().model.as_ref();
        #[cfg(feature = "dense")]
        let centred = match qvec {
            Some(q) => Some(centring::centre_query(
                centring.and_then(|m| m.centring.as_ref()),
                query,
                q,
            )?),
            None => None,
        };
        #[cfg(feature = "dense")]
        let qvec = centred.as_deref();
        let tables = self.bundle.analyzer().tables();
        let Some(cache) = self.bundle.cache() else {
            let _ = tables.take_missing();
            let result = self.pass(query, qvec, mode, top_k, opts);
            self.bundle.request_unicode_pages()?;
            return result;
        };
        #[cfg(not(target_arch = "wasm32"))]
        let native = self.bundle.can_load_pages();
        #[cfg(not(target_arch = "wasm32"))]
        if native {
            cache.trim();
        }
        #[cfg(not(target_arch = "wasm32"))]
        let mut stats = FetchStats::default();
        for _ in 0..MAX_ROUNDS {
            cache.clear_missing();
            self.bundle.lexical().begin_query();
            // The analyzer's Unicode tables, when they are bundle pages (`jikji_format::unicode`):
            // install those fetched. A query text that needs one not there yet is analysed as
            // if the table were empty and the pass runs on: its pages come with the table (the
            // pass is thrown away; when the table leaves the terms as they were, they are the
            // pages the next pass needs).
            self.bundle.install_unicode_pages()?;
            let _ = tables.take_missing();
            let _ = tables.take_chunk_tables();
            let result = self.pass(query, qvec, mode, top_k, opts);
            self.bundle.request_unicode_pages()?;
            let mut missing = cache.take_missing();
            // Phrase candidates' chunk pages: the tables their texts may need come with them.
            let tables_too = self.bundle.chunk_table_pages(&missing);
            missing.extend(tables_too);
            if missing.is_empty() {
                #[cfg(not(target_arch = "wasm32"))]
                {
                    *self.fetched.lock().unwrap_or_else(|e| e.into_inner()) = stats.clone();
                }
                return match result {
                    Err(EngineError::Format(e)) if e.is_page_missing() => {
                        Err(EngineError::Format(jikji_format::FormatError::corrupt(
                            jikji_format::paged::ENTRY_FILE,
                            0,
                            format!("{e}, but no page was recorded as missing"),
                        )))
                    }
                    r => r,
                };
            }
            #[cfg(not(target_arch = "wasm32"))]
            if native {
                let sizes = self.bundle.load_pages(&missing)?;
                let mut kinds = std::collections::BTreeMap::<&str, usize>::new();
                for name in &missing {
                    *kinds.entry(&name[..1]).or_default() += 1;
                }
                stats.per_round.push(
                    kinds
                        .iter()
                        .map(|(k, n)| format!("{k}:{n}"))
                        .collect::<Vec<_>>()
                        .join(" "),
                );
                for (name, n) in missing.iter().zip(sizes) {
                    let e = stats.by_kind.entry(name[..1].to_string()).or_default();
                    e.0 += 1;
                    e.1 += n;
                    stats.bytes += n;
                }
                stats.rounds += 1;
                stats.pages += missing.len();
                continue;
            }
            return Err(EngineError::NeedPages(missing));
        }
        Err(EngineError::Format(jikji_format::FormatError::corrupt(
            jikji_format::paged::ENTRY_FILE,
            0,
            format!("the query still needed pages after {MAX_ROUNDS} rounds"),
        )))
    }

    /// One pass of a query (see [`Engine::search_with_options`]).
    fn pass(
        &self,
        query: &str,
        qvec: Option<&[f32]>,
        mode: Mode,
        top_k: usize,
        opts: &SearchOptions,
    ) -> Result<SearchResult, EngineError> {
        let life = match self.lifecycle() {
            Ok(l) => l,
            Err(EngineError::Format(e)) if e.is_page_missing() => {
                // The columns page is not loaded yet: rank anyway, so the dictionary pages
                // this query needs are asked for in the same round.
                let _ = self.rankers(
                    query,
                    qvec,
                    mode,
                    top_k.max(scores::MARGIN_DEPTH),
                    top_k,
                    None,
                );
                return Err(e.into());
            }
            Err(e) => return Err(e),
        };
        let allowed = self.allowed()?;
        let allow = allowed.as_deref().map(Vec::as_slice);
        let excluded = life.excluded(opts);
        // Preferring a tier looks past the top_k-th hit for the hits that tie with it.
        let deep = top_k.saturating_add(self.prefer_tier.map_or(0, |_| pipeline::TIE_DEPTH));
        let depth = pipeline::Depth::of(self, deep, excluded);
        // The dense index keeps the hits asked for (children: before collapsing) full.
        let fill = parents::rank_depth(&self.bundle, depth.results);
        let lists = self.rankers(query, qvec, mode, depth.rank, fill, allow)?;
        let fused = self.fuse(query, qvec, mode, lists, depth.rank)?;
        let ranked = pipeline::filter(self, fused.ranked, depth, life, opts, excluded)?;
        let mut scored = pipeline::calibrate(&ranked, fused.scale, depth, life);
        if self.prefer_tier.is_some() {
            scored.truncate(pipeline::tie_cut(&scored, top_k));
        }
        if self.bundle.cache().is_some_and(|c| c.has_missing()) {
            // An incomplete ranking (a page not loaded yet): fetch no chunk page for it.
            return Err(jikji_format::FormatError::PageMissing {
                name: "(ranking)".into(),
            }
            .into());
        }
        let coverage = if self.coverage
            && self.bundle.manifest().parents() == 0
            && (mode != Mode::Dense || self.bundle.cache().is_none())
        {
            Some(scores::QueryCoverage::new(
                self.bundle.lexical(),
                self.bundle.analyzer(),
                query,
            )?)
        } else {
            None
        };
        let mut hits = self.hits(scored, coverage.as_ref())?;
        if let Some(tier) = self.prefer_tier {
            hits = pipeline::prefer_tier(hits, tier, top_k);
        }
        let hits = pipeline::null_cap(hits, fused.scale.and_then(|s| s.null), self.min_score);
        Ok(SearchResult {
            query: query.to_string(),
            mode,
            fusion: fused.fusion,
            calibrated: fused.scale.is_some(),
            hits,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `weighted:W` reads W as `str::parse::<f32>` did before the float parser left the
    /// wasm (issue 12): the same weights accepted, the same `f32`, the same refusals.
    #[test]
    fn fusion_weight_reads_as_str_parse() {
        for w in [
            "0",
            "1",
            "0.5",
            ".5",
            "1.",
            "+0.3",
            "-0",
            "0.30000000",
            "0.12345678",
            "1.00000001",
            "0.123456789",
            "5e-1",
            "1E0",
            "2",
            "-0.1",
            "nan",
            "inf",
            "",
            "x",
        ] {
            let old = match w.parse::<f32>() {
                Ok(x) if (0.0..=1.0).contains(&x) => Some(x.to_bits()),
                _ => None,
            };
            let new = match format!("weighted:{w}").parse::<Fusion>() {
                Ok(Fusion::Weighted { dense_weight }) => Some(dense_weight.to_bits()),
                Ok(Fusion::Rrf) => unreachable!(),
                Err(_) => None,
            };
            assert_eq!(new, old, "{w:?}");
        }
    }
}

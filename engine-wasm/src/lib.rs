//! The Jikji search engine: loads a bundle (see `jikji-format`) and answers BM25, dense
//! and hybrid queries. The same code runs natively (`jikji search`) and in the browser
//! (the `wasm` module, compiled only for `wasm32`).
//!
//! Cargo feature `embed` (default) adds the query embedder (tract + tokenizers); without
//! it the engine answers BM25 queries, and dense/hybrid ones given a query vector.
#![warn(missing_docs)]

pub mod calibrate;
pub mod fusion;
pub mod parents;
pub mod search;
#[cfg(target_arch = "wasm32")]
mod wasm;

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::OnceLock;

use jikji_format::{Bundle, ChunkRecord, FormatError};
use serde::{Deserialize, Serialize};

pub use search::{Expansion, Scored, FUSION_DEPTH, RRF_K};

/// Errors of the engine.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The bundle is missing, corrupt or of another version (names the file).
    #[error(transparent)]
    Format(#[from] FormatError),
    /// Dense or hybrid search was asked but no model is loaded.
    #[error("mode {0} needs the embedding model; load it first")]
    NoModel(Mode),
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
    #[error("unknown search mode {0:?} (expected bm25, dense or hybrid)")]
    BadMode(String),
    /// Unknown fusion name.
    #[error("unknown fusion {0:?} (expected rrf, weighted or weighted:W with 0 ≤ W ≤ 1)")]
    BadFusion(String),
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
    /// [`calibrate::DEFAULT_DENSE_WEIGHT`]) or `weighted:W` with W in [0, 1].
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "rrf" => Ok(Fusion::Rrf),
            "weighted" => Ok(Fusion::Weighted {
                dense_weight: f32::NAN,
            }),
            _ => match s.strip_prefix("weighted:").map(str::parse::<f32>) {
                Some(Ok(w)) if (0.0..=1.0).contains(&w) => Ok(Fusion::Weighted { dense_weight: w }),
                _ => Err(EngineError::BadFusion(s)),
            },
        }
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
    /// care, < 0.3 drop; see [`calibrate`]). Equal to `raw_score` when the bundle has no
    /// calibration (bundles built before it existed).
    pub score: f32,
    /// The ranker's own score: BM25 (unbounded, ≥ 0), cosine similarity (−1..1), the RRF
    /// score (≤ 2 / 61) or the weighted-fusion score (0..1).
    pub raw_score: f32,
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

/// Per-chunk lifecycle facts, read once from the chunk store.
#[derive(Debug, Default)]
struct Lifecycle {
    /// Doc ids of archived chunks, ascending.
    archived: Vec<u32>,
    /// `(doc id, expiry in Unix ms)` of chunks with a parseable `expires`.
    expires: Vec<(u32, i64)>,
    /// Per doc: bit 0 archived, bit 1 has an expiry (then in `expiry_of`).
    flags: Vec<u8>,
    expiry_of: HashMap<u32, i64>,
    /// Per doc: its file number (chunks of one source file share it), for score margins
    /// (see [`calibrate::apart`]).
    file: Vec<u32>,
}

impl Lifecycle {
    fn read(b: &Bundle) -> Result<Self, FormatError> {
        #[derive(Deserialize)]
        struct Meta {
            #[serde(default)]
            archived: bool,
            #[serde(default)]
            expires: Option<String>,
            source: String,
        }
        let n = b.chunks.len();
        let mut l = Lifecycle {
            flags: vec![0; n],
            ..Default::default()
        };
        let mut sources = Vec::with_capacity(n);
        for doc in 0..n as u32 {
            let m: Meta = b.chunks.get_as(doc)?;
            sources.push(m.source);
            if m.archived {
                l.archived.push(doc);
                l.flags[doc as usize] |= 1;
            }
            if let Some(ms) = m
                .expires
                .as_deref()
                .and_then(jikji_format::time::parse_iso8601_ms)
            {
                l.expires.push((doc, ms));
                l.expiry_of.insert(doc, ms);
                l.flags[doc as usize] |= 2;
            }
        }
        l.file = calibrate::number_files(sources);
        Ok(l)
    }

    /// True if `doc` may be returned under `o`.
    fn allows(&self, doc: u32, o: &SearchOptions) -> bool {
        let f = self.flags.get(doc as usize).copied().unwrap_or(0);
        if f & 1 != 0 && !o.include_archived {
            return false;
        }
        if f & 2 != 0 {
            if let Some(now) = o.now_ms {
                return self.expiry_of[&doc] > now;
            }
        }
        true
    }

    /// How many chunks `o` leaves out (an upper bound is enough: it deepens the ranking).
    fn excluded(&self, o: &SearchOptions) -> usize {
        let a = if o.include_archived {
            0
        } else {
            self.archived.len()
        };
        let e = match o.now_ms {
            Some(now) => self.expires.iter().filter(|(_, t)| *t <= now).count(),
            None => 0,
        };
        a + e
    }
}

/// How a ranked list's calibration inputs become reported scores.
#[derive(Debug, Clone, Copy)]
struct Scale {
    /// The ranker's one-feature fit (bundles calibrated before margins).
    plain: jikji_format::Platt,
    /// The margin-aware fit, if the bundle has one.
    margin: Option<jikji_format::MarginPlatt>,
}

impl Scale {
    /// The reported score of `doc` with input `x` among the hits `list` (sorted, descending).
    fn score(&self, doc: u32, x: f32, list: &[(u32, f32)], file: &[u32]) -> f32 {
        match self.margin {
            Some(m) => m.apply(x, calibrate::margin(doc, x, list, file)),
            None => self.plain.apply(x),
        }
    }
}

/// A loaded bundle plus (with feature `embed`) an optional query embedder.
pub struct Engine {
    bundle: Bundle,
    expansion: Expansion,
    #[cfg(feature = "embed")]
    embedder: Option<jikji_embed::Embedder>,
    fusion: Fusion,
    min_score: f32,
    options: SearchOptions,
    lifecycle: OnceLock<Result<Lifecycle, String>>,
}

impl Engine {
    /// Wraps a verified bundle.
    pub fn new(bundle: Bundle) -> Self {
        let fusion = match &bundle.manifest.calibration {
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
            options: SearchOptions::default(),
            lifecycle: OnceLock::new(),
        }
    }

    /// The fusion hybrid mode uses: by default weighted fusion with the bundle's weight
    /// when the bundle has a dense calibration, else RRF.
    pub fn fusion(&self) -> Fusion {
        self.fusion
    }

    /// Sets the hybrid fusion. `Weighted` with a NaN weight (as parsed from `weighted`)
    /// takes the bundle's weight, else [`calibrate::DEFAULT_DENSE_WEIGHT`]. Weighted fusion
    /// on a bundle without a dense calibration falls back to RRF at search time.
    pub fn set_fusion(&mut self, fusion: Fusion) {
        self.fusion = match fusion {
            Fusion::Weighted { dense_weight } if dense_weight.is_nan() => Fusion::Weighted {
                dense_weight: self
                    .bundle
                    .manifest
                    .calibration
                    .as_ref()
                    .map_or(calibrate::DEFAULT_DENSE_WEIGHT, |c| c.dense_weight),
            },
            f => f,
        };
    }

    /// Drops hits whose (calibrated) score is below `min_score` (default 0: keep all).
    pub fn set_min_score(&mut self, min_score: f32) {
        self.min_score = min_score;
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

    fn lifecycle(&self) -> Result<&Lifecycle, EngineError> {
        self.lifecycle
            .get_or_init(|| Lifecycle::read(&self.bundle).map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|e| {
                EngineError::Format(FormatError::corrupt(
                    jikji_format::chunks::CHUNKS_FILE,
                    0,
                    e.clone(),
                ))
            })
    }

    /// Verifies and opens a bundle from its files' bytes (see [`Bundle::from_files`]).
    pub fn from_files(files: HashMap<String, Vec<u8>>) -> Result<Self, EngineError> {
        Ok(Self::new(Bundle::from_files(files)?))
    }

    /// Opens a bundle folder (native only).
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_dir(dir: &std::path::Path) -> Result<Self, EngineError> {
        Ok(Self::new(Bundle::open_dir(dir)?))
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
        match &self.bundle.manifest.model {
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
                if self.bundle.vectors.is_none() {
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
    /// left-out chunks).
    pub fn search_with_options(
        &self,
        query: &str,
        qvec: Option<&[f32]>,
        mode: Mode,
        top_k: usize,
        opts: &SearchOptions,
    ) -> Result<SearchResult, EngineError> {
        let life = self.lifecycle()?;
        let extra = life.excluded(opts);
        let top_k_asked = top_k;
        // Margins need the first few hits of the full ranking (see calibrate::MARGIN_DEPTH).
        let top_k = top_k.max(calibrate::MARGIN_DEPTH) + extra;
        let b = &self.bundle;
        let dense = |k: usize| -> Result<Vec<Scored>, EngineError> {
            let v = b.vectors.as_ref().ok_or(EngineError::NoVectors(mode))?;
            let q = qvec.ok_or(EngineError::NoModel(mode))?;
            if q.len() != v.dim() {
                return Err(EngineError::Dimension {
                    expected: v.dim(),
                    actual: q.len(),
                });
            }
            Ok(search::dense(v, q, k))
        };
        // Parent-child bundles rank children, then return each child's parent once.
        let (results, top_k) = (top_k, parents::rank_depth(b, top_k));
        let cal = b.manifest.calibration.as_ref();
        let fits = cal.and_then(|c| c.scores);
        let upper_bound =
            || fusion::bm25_upper_bound(&b.lexical, &b.analyzer, b.manifest.bm25, query);
        // Dense hits with their calibration inputs (cosine z-scores) if the bundle has a
        // dense calibration.
        let dense_scaled = |den: Vec<Scored>| -> (Vec<(u32, f32, f32)>, Option<Scale>) {
            let scale = cal.and_then(|c| c.dense).map(|p| Scale {
                plain: p,
                margin: fits.and_then(|f| f.dense),
            });
            let bg = match (scale, b.vectors.as_ref(), qvec) {
                (Some(_), Some(v), Some(q)) => fusion::dense_background(v, q),
                _ => (0.0, 1.0),
            };
            let ranked = den
                .into_iter()
                .map(|(d, s)| (d, s, fusion::dense_z(s, bg)))
                .collect();
            (ranked, scale)
        };
        let mut fusion_used = None;
        // (doc, raw score, calibration input) and how the inputs become scores.
        let (ranked, scale): (Vec<(u32, f32, f32)>, Option<Scale>) = match mode {
            Mode::Bm25 => {
                let lex = search::bm25(&self.lexical(), query, top_k)?;
                let ub = if cal.is_some() { upper_bound()? } else { 0.0 };
                let ranked = lex
                    .into_iter()
                    .map(|(d, s)| (d, s, fusion::bm25_normalised(s, ub)))
                    .collect();
                let scale = cal.map(|c| Scale {
                    plain: c.bm25,
                    margin: fits.map(|f| f.bm25),
                });
                (ranked, scale)
            }
            Mode::Dense => dense_scaled(dense(top_k)?),
            Mode::Hybrid => {
                let depth = top_k.max(FUSION_DEPTH);
                let lex = search::bm25(&self.lexical(), query, depth)?;
                let den = dense(depth)?;
                match (self.fusion, cal) {
                    // No chunk shares a term with the query (e.g. a Chinese question on an
                    // English bundle): BM25 gives no evidence either way, so its low
                    // log-odds would only drag every fused score under 0.3 (measured on
                    // xquad-zh → xquad-en). The ranking is dense's in every fusion anyway.
                    _ if lex.is_empty() => dense_scaled(den.into_iter().take(top_k).collect()),
                    (Fusion::Weighted { dense_weight }, Some(c)) if c.dense.is_some() => {
                        fusion_used = Some(self.fusion);
                        let c = jikji_format::Calibration {
                            dense_weight,
                            ..c.clone()
                        };
                        let v = b.vectors.as_ref().ok_or(EngineError::NoVectors(mode))?;
                        let q = qvec.ok_or(EngineError::NoModel(mode))?;
                        let ranked = fusion::weighted(&lex, upper_bound()?, &den, v, q, &c, top_k)
                            .into_iter()
                            .map(|(d, s)| (d, s, s))
                            .collect();
                        let scale = c.weighted.map(|p| Scale {
                            plain: p,
                            margin: fits.and_then(|f| f.weighted),
                        });
                        (ranked, scale)
                    }
                    _ => {
                        fusion_used = Some(Fusion::Rrf);
                        let ranked = search::rrf(&[lex, den], top_k)
                            .into_iter()
                            .map(|(d, s)| (d, s, s))
                            .collect();
                        let scale = cal.and_then(|c| c.rrf).map(|p| Scale {
                            plain: p,
                            margin: fits.and_then(|f| f.rrf),
                        });
                        (ranked, scale)
                    }
                }
            }
        };
        let ranked = parents::collapse(b, ranked, results, |r| &mut r.0)?;
        let calibrated = scale.is_some() && cal.is_some();
        let mut ranked = ranked;
        if extra > 0 {
            ranked.retain(|(doc, _, _)| life.allows(*doc, opts));
        }
        // Scores of the hits the user may see, each with its margin over the rest of them.
        // A hit never scores above one ranked before it (a neighbour of the top hit can have
        // a wider margin than the next other answer), so scores stay sorted.
        let inputs: Vec<(u32, f32)> = ranked.iter().map(|r| (r.0, r.2)).collect();
        let mut cap = f32::INFINITY;
        let ranked: Vec<(u32, f32, f32)> = ranked
            .iter()
            .take(top_k_asked)
            .map(|&(doc, raw, x)| {
                let score = match scale {
                    Some(s) => {
                        cap = cap.min(s.score(doc, x, &inputs, &life.file));
                        cap
                    }
                    None => raw,
                };
                (doc, raw, score)
            })
            .collect();
        let mut hits = Vec::with_capacity(ranked.len());
        for (doc, raw, score) in ranked {
            if score < self.min_score {
                continue;
            }
            hits.push(Hit {
                rank: hits.len() + 1,
                score,
                raw_score: raw,
                chunk: parents::record(b, doc)?,
            });
        }
        Ok(SearchResult {
            query: query.to_string(),
            mode,
            fusion: fusion_used,
            calibrated,
            hits,
        })
    }
}

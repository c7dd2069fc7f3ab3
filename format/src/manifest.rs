//! `manifest.json`: what a bundle holds and how to check it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{FormatError, Result};

/// File name of the manifest in a bundle.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Version of the bundle format as a whole; bumped on any incompatible change of any file.
/// Format 1: whole files listed in `manifest.json`.
pub const FORMAT_VERSION: u32 = 1;
/// Format 2: the paged bundle, an entry file `jikji.json` and pages under `p/` (see
/// [`crate::paged`]). Native readers read both formats; the browser reads format 2.
pub const PAGED_FORMAT_VERSION: u32 = 2;

/// Size and SHA-256 of one bundle file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Lowercase hex SHA-256 (FIPS 180-4) of the file's bytes.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// The embedding model whose vectors the bundle holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Model id, e.g. `multilingual-e5-small-q4`.
    pub id: String,
    /// Lowercase hex SHA-256 of the ONNX file the vectors were made with.
    pub sha256: String,
    /// Vector dimension.
    pub dim: usize,
    /// Maximum sequence length in tokens, specials included.
    pub max_tokens: usize,
    /// The per-language correction applied to the stored passage vectors, which the engine
    /// applies to every query vector too (`jikji_engine::centring`). Absent in bundles built
    /// before it existed, or with `--centring off`: vectors as the model gave them. Always
    /// `None` when read by a build without feature `dense` (the browser's BM25 engine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub centring: Option<Centring>,
}

/// Per-language mean centring of the dense vectors (issue 15): multilingual-e5-small puts a
/// language-specific offset into every vector, so any passage in the query's language
/// outscores the right passage in another.
///
/// Method `lang-mean-v2` (what builders write): the `vectors.bin` rows are the model's
/// vectors as they are (so bundles compare with new files' raw vectors, and the rows equal
/// those of a bundle without centring); `chunks` gives each chunk's centring language and
/// `passage` the offset `o[l]` of every language in it. The engine turns a query vector `y`
/// of detected language `lq` into `q = normalise(y − query[lq])` (`y` when `query` has no
/// entry: always with `shift`) and scores chunk `i` of language `l` as
/// `(q·x_i − q·o[l]) / n_i`: the cosine of `q` with `normalise(x_i − o[l])`, where `n_i =
/// |x_i − o[l]|` is computed from the dequantized row (with `shift`, `n_i = 1`: the score is
/// `q·x_i − q·o[l]`). A chunk without a language (`-` in `chunks`) scores `q·x_i`.
///
/// Method `lang-mean-v1` (the first version, no `chunks`): the rows were stored already
/// centred; the engine only centres the query.
///
/// A query's language comes from `jikji_engine::centring::detect_lang`, a chunk's from its
/// scripts and vector (`jikji_builder::lang_means::LoadedStats::language_of`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Centring {
    /// `lang-mean-v2` (rows as the model gave them) or `lang-mean-v1` (rows centred).
    pub method: String,
    /// Lowercase hex SHA-256 of the statistics file (`lang-means.json` in the model folder)
    /// the means come from.
    pub stats_sha256: String,
    /// Centring strength applied to the passage means (1 = subtract the whole mean).
    pub alpha: f32,
    /// How the query offsets were made: `query-mean` (the language's mean of `query: `
    /// vectors), `passage-mean` (the passage mean) or `passage-mean+offset` (the passage mean
    /// plus one offset shared by all languages: the mean of query minus passage means); or
    /// `shift`: passages are compared as `x − o[l]` without renormalising, and queries are
    /// used as given (`query` is empty).
    pub query_side: String,
    /// Language code → the vector subtracted from a query of that language (`dim` f32s,
    /// already multiplied by `alpha`). Stored in the manifest so the engine needs nothing
    /// but the bundle, natively and in the browser.
    pub query: BTreeMap<String, Vec<f32>>,
    /// Prior strength `K` (source files) of the reference mean against the bundle's own mean
    /// of a language: the offset of language `l` is `alpha · (w · bundle_mean[l] + (1 − w) ·
    /// passage_mean[l])`, `w = s / (s + K)` with `s` the source files of the language's
    /// chunks. Absent: reference means alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bundle_prior: Option<f32>,
    /// Language code → the offset `o[l]` of that language's passages (`dim` f32s, `alpha`
    /// included). `lang-mean-v2`: one for every language of `chunks`, read by the engine and
    /// by `jikji update`. `lang-mean-v1`: only with a bundle prior, for `jikji update`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub passage: BTreeMap<String, Vec<f32>>,
    /// `lang-mean-v2`: each chunk's centring language, in doc-id order, as runs separated by
    /// one space: `<code>*<count>` (`en*1190 zh*848`), code `-` for chunks not centred; the
    /// counts add up to `counts.chunks`. Absent in `lang-mean-v1` records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<String>,
}

/// Counts of what the bundle holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Source files indexed.
    pub files: usize,
    /// Chunks (documents of the index).
    pub chunks: usize,
    /// Distinct terms in the term dictionary.
    pub terms: usize,
    /// Dense vectors (equal to `chunks` when the bundle has vectors, else 0).
    pub vectors: usize,
}

/// BM25 parameters (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25Params {
    /// Term-frequency saturation k1.
    pub k1: f32,
    /// Length normalisation b.
    pub b: f32,
}

/// The defaults: k1 = 0.7, b = 0.75. Lucene's k1 = 1.2 saturates term frequency later than
/// chunks of ≤ 512 characters need. Measured with `jikji eval` (BM25 nDCG@10; grid in
/// README), the mean over the public eval sets is flat (within 0.002) for k1 ∈ [0.6, 1.2],
/// b ∈ {0.5, 0.75}; a lower k1 lifts xquad-zh over 0.97 (0.9696 → 0.9711) and suits the
/// Korean set, and costs SciFact 0.0065 (0.6730 → 0.6665). Chosen on those same sets (no
/// held-out split).
impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 0.7, b: 0.75 }
    }
}

/// One source file of the corpus as the bundle last saw it: what `jikji update` compares
/// the corpus folder against to find new, changed and deleted files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceEntry {
    /// Path relative to the corpus root, `/`-separated (the chunks' `source`).
    pub path: String,
    /// Lowercase hex SHA-256 (FIPS 180-4) of the file's bytes: the change test.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
    /// Modification time, seconds since the Unix epoch, if known: only a hint (a file
    /// whose size and mtime are unchanged is still hashed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified: Option<u64>,
    /// Chunks of this file in the bundle (contiguous, in corpus order).
    pub chunks: usize,
    /// Document id if the file is one of several versions of a document.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_id: Option<String>,
    /// Version label (front matter `version` or the file name's `v2`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// True if a newer version of the same document is in the bundle.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
}

/// How the chunks were cut (`jikji build --strategy`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkingInfo {
    /// Strategy name: `fixed`, `recursive`, `heading`, `hierarchical` or `parent-child`.
    pub strategy: String,
    /// Largest chunk, in chars (Unicode scalar values).
    pub chunk_size: usize,
    /// Overlap, in chars (0 for strategies without overlap).
    pub overlap: usize,
    /// Largest chunk in model tokens (`passage: ` prefix and specials included), when the
    /// chunks were sized with the model's tokenizer.
    #[serde(default)]
    pub max_tokens: Option<usize>,
    /// `parent-child`: largest parent section, in chars.
    #[serde(default)]
    pub parent_size: Option<usize>,
    /// `parent-child`: parent records stored in `chunks.bin` after the indexed chunks.
    #[serde(default)]
    pub parents: usize,
}

/// The bundle manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Bundle format version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// Analyzer version used for the terms ([`crate::analyzer::ANALYZER_VERSION`]).
    pub analyzer_version: u32,
    /// Analyzer options the terms were made with (version 2 and later; a version 1
    /// manifest has none and its analyzer has no options). See
    /// [`crate::analyzer::AnalyzerOptions`].
    #[serde(default)]
    pub analyzer: crate::analyzer::AnalyzerOptions,
    /// Builder that wrote it, e.g. `jikji 0.1.0`.
    pub generator: String,
    /// Build time, seconds since the Unix epoch (UTC).
    pub built_at: u64,
    /// Chunking parameters: size and overlap in chars.
    pub chunk_size: usize,
    /// Overlap in chars.
    pub overlap: usize,
    /// BM25 parameters.
    pub bm25: Bm25Params,
    /// Embedding model, if the bundle has vectors.
    pub model: Option<ModelInfo>,
    /// Counts.
    pub counts: Counts,
    /// Every other file of the bundle with its size and checksum.
    pub files: BTreeMap<String, FileEntry>,
    /// Score calibration fitted at build time; absent in bundles built before it existed,
    /// whose engines then report raw scores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibration: Option<Calibration>,
    /// The corpus files the bundle was built from, in corpus (path) order, with their
    /// SHA-256; empty for bundles built before this field existed (`jikji update` then
    /// asks for a full build).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceEntry>,
    /// Chunking strategy and parameters; absent in bundles from before strategies existed
    /// (those are `hierarchical` with `chunk_size` and `overlap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunking: Option<ChunkingInfo>,
    /// Whether the build was asked to write the Hangul ↔ Hanja reading table (`hanja.fst`,
    /// written only when the corpus has Han or Hangul text); `jikji build --no-hanja` makes
    /// it false. `jikji update` follows it. Absent in manifests from before it was recorded:
    /// read as true, the default of those builds.
    #[serde(default = "yes")]
    pub hanja: bool,
    /// Whether files whose front matter says `provenance: ai-draft` were admitted
    /// (`--allow-ai-draft`); `jikji update` keeps admitting them. Absent: false.
    #[serde(default)]
    pub allow_ai_draft: bool,
    /// The dense index asked for (`--dense-index`: `exact`, `ivf`, `ivf:NLIST` or `auto`);
    /// what was built is `pages.ivf` (absent: exact scan). `jikji update` asks for the
    /// same. Absent (bundles before issue 14): `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_index: Option<String>,
    /// How the dense index was chosen (informative): `auto`'s cost-model inputs and figures
    /// (`auto: exact by the cost model per visit of 10 dense queries …`), or `forced (…)`;
    /// the same text as `pages.ivf.chosen_by` when an index was written. Absent in bundles
    /// before it and without vectors.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense_index_chosen_by: Option<String>,
    /// Format 2 (paged) bundles only: the roots of the pages under `p/` (see
    /// [`crate::paged::PagesRoot`]); absent in format 1 manifests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pages: Option<crate::paged::PagesRoot>,
}

fn yes() -> bool {
    true
}

/// A Platt sigmoid `p(x) = 1 / (1 + exp(−(a·x + b)))` mapping a raw score `x` to the
/// estimated probability that a result with that score is a right answer (Platt 1999,
/// "Probabilistic Outputs for Support Vector Machines").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Platt {
    /// Slope (per unit of the raw score).
    pub a: f32,
    /// Intercept.
    pub b: f32,
}

impl Platt {
    /// The log-odds `a·x + b` of the calibrated score.
    pub fn logit(&self, x: f32) -> f32 {
        self.a * x + self.b
    }

    /// The calibrated score in [0, 1].
    pub fn apply(&self, x: f32) -> f32 {
        let z = self.a * x + self.b;
        if z >= 0.0 {
            1.0 / (1.0 + (-z).exp())
        } else {
            let e = z.exp();
            e / (1.0 + e)
        }
    }
}

/// A two-feature Platt sigmoid `p = 1 / (1 + exp(−(a·x + m·g + b)))` over a hit's raw
/// score `x` and its **margin** `g`: `x` minus the raw score of the best other hit of the
/// same ranked list that is not a neighbour of it (another file, or more than two chunks
/// away in the same file). How far a hit stands out from the rest predicts a right answer
/// far better than its score alone when queries share few words with their passages
/// (measured on the eval sets, README "Scores"); `m = 0` is a plain [`Platt`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MarginPlatt {
    /// Slope per unit of the raw score.
    pub a: f32,
    /// Slope per unit of the margin.
    pub m: f32,
    /// Intercept.
    pub b: f32,
}

impl MarginPlatt {
    /// The calibrated score in [0, 1] of raw score `x` with margin `g`.
    pub fn apply(&self, x: f32, g: f32) -> f32 {
        Platt {
            a: 1.0,
            b: self.m * g + self.b,
        }
        .apply(self.a * x)
    }
}

/// The sigmoids a hit's reported score comes from, one per mode and fusion (see
/// [`MarginPlatt`]; the inputs are those of the matching [`Calibration`] field). Weighted
/// fusion keeps using the one-feature [`Platt`] log-odds, so rankings do not depend on them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ScoreFits {
    /// BM25 mode.
    pub bm25: MarginPlatt,
    /// Dense mode (and hybrid when no chunk shares a term with the query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense: Option<MarginPlatt>,
    /// Weighted hybrid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighted: Option<MarginPlatt>,
    /// RRF hybrid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rrf: Option<MarginPlatt>,
}

/// Per-bundle score calibration: one [`Platt`] sigmoid per ranker, fitted at build time on
/// pseudo-queries drawn from the bundle's own chunks (fitted by `jikji_builder::calibrate`, applied by `jikji_engine::scores`), so
/// that a calibrated score means the same in every mode and every bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// How it was fitted, e.g. `platt-pseudo-queries-v1`.
    pub method: String,
    /// Number of pseudo-queries used.
    pub queries: usize,
    /// Labeled (score, right answer?) pairs per ranker used for each fit.
    pub pairs: usize,
    /// BM25: the raw input is the score divided by the query's exact-match maximum
    /// `Σ idf·(k1 + 1)` (clamped to [0, 1]).
    pub bm25: Platt,
    /// Dense: the raw input is the cosine similarity as a z-score against the query's
    /// cosines with a fixed sample of the bundle's chunks (`jikji_engine::fusion::dense_z`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense: Option<Platt>,
    /// Weighted hybrid: the raw input is `w·dense + (1 − w)·bm25` of the two rankers'
    /// calibrated log-odds, with `w` = [`Calibration::dense_weight`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighted: Option<Platt>,
    /// RRF hybrid: the raw input is the RRF score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rrf: Option<Platt>,
    /// Weight of the dense score in weighted fusion, in [0, 1].
    pub dense_weight: f32,
    /// Margin-aware sigmoids for reported scores (`platt-pseudo-queries-v3` and later);
    /// absent in older bundles, whose reported scores come from the plain fits above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scores: Option<ScoreFits>,
    /// The null cap (`platt-pseudo-queries-v5` and later; absent in older bundles and in
    /// bundles too small to draw it, whose scores are reported uncapped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub null_cap: Option<NullCap>,
}

/// The **null cap** of a bundle's reported scores (issue 19): off-topic queries drawn from
/// the bundle's own chunks (a question template around words of unrelated chunks, one of
/// them reversed so the dictionary does not know it: `jikji_builder::calibrate`) are
/// searched at build time like any query; per score fit, the `q`-quantile of their top
/// hits' calibrated scores is the threshold. At query time a hit whose calibrated score
/// `s` (in [0, 1]) is at or under its fit's threshold reports `min(s, cap)`: a score in
/// the "reliable" band (≥ 0.6) only if the hit beats what the bundle's off-topic queries
/// reach. The map is monotone, applied after ranking: rankings are unchanged. A fit
/// without a threshold (`None`: no vectors, or no query embedder at build time) is not
/// capped.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NullCap {
    /// The quantile of the off-topic top-1 scores the thresholds are, in (0, 1].
    pub q: f32,
    /// The most a capped hit reports, in [0, 1] (0.59: under the 0.6 band).
    pub cap: f32,
    /// Off-topic queries searched (per mode; a query whose search returns no hit adds no
    /// score).
    pub queries: usize,
    /// Threshold of BM25 scores ([`ScoreFits::bm25`]), a calibrated score in [0, 1].
    pub bm25: f32,
    /// Threshold of dense scores (also hybrid's when no chunk shares a term with the query).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dense: Option<f32>,
    /// Threshold of weighted-hybrid scores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weighted: Option<f32>,
    /// Threshold of RRF-hybrid scores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rrf: Option<f32>,
}

impl NullCap {
    /// The reported score of a hit with calibrated score `s` under threshold `threshold`
    /// (one of this record's): `min(s, cap)` when `s <= threshold`, else `s`.
    pub fn apply(&self, s: f32, threshold: f32) -> f32 {
        if s <= threshold {
            s.min(self.cap)
        } else {
            s
        }
    }
}

// Readers of the manifest's JSON (`crate::json`), field for field as the serde attributes
// above say (defaults, optional fields).
use crate::json::{FromJson, Json};

impl crate::json::Record for FileEntry {
    const FIELDS: crate::json::Fields<FileEntry> = crate::json::json_fields!(FileEntry {
        "sha256" Error sha256,
        "bytes" Error bytes,
    });
    fn init() -> Self {
        FileEntry {
            sha256: String::new(),
            bytes: 0,
        }
    }
}
crate::json::record_json!(FileEntry);

impl crate::json::Record for ModelInfo {
    // `centring` is dense-only: not read by a build without feature `dense` (`None`).
    #[cfg(feature = "dense")]
    const FIELDS: crate::json::Fields<ModelInfo> = crate::json::json_fields!(ModelInfo {
        "id" Error id,
        "sha256" Error sha256,
        "dim" Error dim,
        "max_tokens" Error max_tokens,
        "centring" Error centring,
    });
    #[cfg(not(feature = "dense"))]
    const FIELDS: crate::json::Fields<ModelInfo> = crate::json::json_fields!(ModelInfo {
        "id" Error id,
        "sha256" Error sha256,
        "dim" Error dim,
        "max_tokens" Error max_tokens,
    });
    fn init() -> Self {
        ModelInfo {
            id: String::new(),
            sha256: String::new(),
            dim: 0,
            max_tokens: 0,
            centring: None,
        }
    }
}
crate::json::record_json!(ModelInfo);

impl FromJson for Centring {
    const WHAT: &'static str = "an object";
    fn from_json(j: &Json, f: &str) -> Result<Self> {
        let o = j.obj(f)?;
        Ok(Centring {
            method: o.req("method")?,
            stats_sha256: o.req("stats_sha256")?,
            alpha: o.req("alpha")?,
            query_side: o.req("query_side")?,
            query: o.req("query")?,
            bundle_prior: o.req("bundle_prior")?,
            passage: o.or("passage", BTreeMap::new)?,
            chunks: o.req("chunks")?,
        })
    }
}

impl crate::json::Record for Counts {
    const FIELDS: crate::json::Fields<Counts> = crate::json::json_fields!(Counts {
        "files" Error files,
        "chunks" Error chunks,
        "terms" Error terms,
        "vectors" Error vectors,
    });
    fn init() -> Self {
        Counts::default()
    }
}
crate::json::record_json!(Counts);

impl crate::json::Record for Bm25Params {
    const FIELDS: crate::json::Fields<Bm25Params> = crate::json::json_fields!(Bm25Params {
        "k1" Error k1,
        "b" Error b,
    });
    fn init() -> Self {
        Bm25Params::default()
    }
}
crate::json::record_json!(Bm25Params);

impl crate::json::Record for SourceEntry {
    const FIELDS: crate::json::Fields<SourceEntry> = crate::json::json_fields!(SourceEntry {
        "path" Error path,
        "sha256" Error sha256,
        "bytes" Error bytes,
        "modified" Error modified,
        "chunks" Error chunks,
        "doc_id" Error doc_id,
        "version" Error version,
        "archived" Keep archived,
    });
    fn init() -> Self {
        SourceEntry::default()
    }
}
crate::json::record_json!(SourceEntry);

impl crate::json::Record for ChunkingInfo {
    const FIELDS: crate::json::Fields<ChunkingInfo> = crate::json::json_fields!(ChunkingInfo {
        "strategy" Error strategy,
        "chunk_size" Error chunk_size,
        "overlap" Error overlap,
        "max_tokens" Error max_tokens,
        "parent_size" Error parent_size,
        "parents" Keep parents,
    });
    fn init() -> Self {
        ChunkingInfo {
            strategy: String::new(),
            chunk_size: 0,
            overlap: 0,
            max_tokens: None,
            parent_size: None,
            parents: 0,
        }
    }
}
crate::json::record_json!(ChunkingInfo);

impl FromJson for Manifest {
    const WHAT: &'static str = "an object";
    fn from_json(j: &Json, f: &str) -> Result<Self> {
        #[cfg(feature = "v1")]
        const FIELDS: crate::json::Fields<Manifest> = crate::json::json_fields!(Manifest {
            "format_version" Error format_version,
            "analyzer_version" Error analyzer_version,
            "analyzer" Keep analyzer,
            "generator" Error generator,
            "built_at" Error built_at,
            "chunk_size" Error chunk_size,
            "overlap" Error overlap,
            "bm25" Error bm25,
            "model" Error model,
            "counts" Error counts,
            "files" Error files,
            "calibration" Error calibration,
            "sources" Keep sources,
            "chunking" Error chunking,
            "hanja" Keep hanja,
            "allow_ai_draft" Keep allow_ai_draft,
            "dense_index" Error dense_index,
            "dense_index_chosen_by" Error dense_index_chosen_by,
            "pages" Error pages,
        });
        // Without feature `v1` (the browser's engine, which reads format 2 only) `files` is
        // read by [`NoFiles`] between these two tables: no `BTreeMap` insertion code in the wasm.
        #[cfg(not(feature = "v1"))]
        const HEAD: crate::json::Fields<Manifest> = crate::json::json_fields!(Manifest {
            "format_version" Error format_version,
            "analyzer_version" Error analyzer_version,
            "analyzer" Keep analyzer,
            "generator" Error generator,
            "built_at" Error built_at,
            "chunk_size" Error chunk_size,
            "overlap" Error overlap,
            "bm25" Error bm25,
            "model" Error model,
            "counts" Error counts,
        });
        #[cfg(not(feature = "v1"))]
        const TAIL: crate::json::Fields<Manifest> = crate::json::json_fields!(Manifest {
            "calibration" Error calibration,
            "sources" Keep sources,
            "chunking" Error chunking,
            "hanja" Keep hanja,
            "allow_ai_draft" Keep allow_ai_draft,
            "dense_index" Error dense_index,
            "dense_index_chosen_by" Error dense_index_chosen_by,
            "pages" Error pages,
        });
        let mut r = Manifest {
            format_version: 0,
            analyzer_version: 0,
            analyzer: crate::analyzer::AnalyzerOptions::default(),
            generator: String::new(),
            built_at: 0,
            chunk_size: 0,
            overlap: 0,
            bm25: Bm25Params::default(),
            model: None,
            counts: Counts::default(),
            files: BTreeMap::new(),
            calibration: None,
            sources: Vec::new(),
            chunking: None,
            hanja: true,
            allow_ai_draft: false,
            dense_index: None,
            dense_index_chosen_by: None,
            pages: None,
        };
        let o = j.obj(f)?;
        #[cfg(feature = "v1")]
        o.fill(&FIELDS, &mut r)?;
        #[cfg(not(feature = "v1"))]
        {
            o.fill(&HEAD, &mut r)?;
            let files: NoFiles = o.req("files")?;
            if r.format_version == PAGED_FORMAT_VERSION && files.listed > 0 {
                return Err(FormatError::corrupt(
                    f,
                    files.at as u64,
                    "field `files`: a format 2 entry lists no files (its data is in the pages \
                     under p/); rebuild the bundle with `jikji build`",
                ));
            }
            o.fill(&TAIL, &mut r)?;
        }
        Ok(r)
    }
}

/// The `files` object of a manifest read by a build without feature `v1`: each value is
/// checked as a [`FileEntry`] (the same errors as the `BTreeMap` reader), none is kept.
/// Format 1 manifests are refused after reading (this build does not read format 1) and a
/// format 2 entry lists none (FORMAT.md), so the browser's engine needs no map of them.
#[cfg(not(feature = "v1"))]
struct NoFiles {
    /// Byte offset of the object.
    at: usize,
    /// Files it lists.
    listed: usize,
}

#[cfg(not(feature = "v1"))]
impl FromJson for NoFiles {
    const WHAT: &'static str = "an object";
    fn from_json(j: &Json, f: &str) -> Result<Self> {
        match &j.v {
            crate::json::Value::Obj(members) => {
                for (_, v) in members {
                    FileEntry::from_json(v, f)?;
                }
                Ok(NoFiles {
                    at: j.at,
                    listed: members.len(),
                })
            }
            _ => Err(j.expected(f, Self::WHAT)),
        }
    }
}

impl crate::json::Record for Platt {
    const FIELDS: crate::json::Fields<Platt> = crate::json::json_fields!(Platt {
        "a" Error a,
        "b" Error b,
    });
    fn init() -> Self {
        Platt { a: 0.0, b: 0.0 }
    }
}
crate::json::record_json!(Platt);

impl crate::json::Record for MarginPlatt {
    const FIELDS: crate::json::Fields<MarginPlatt> = crate::json::json_fields!(MarginPlatt {
        "a" Error a,
        "m" Error m,
        "b" Error b,
    });
    fn init() -> Self {
        MarginPlatt {
            a: 0.0,
            m: 0.0,
            b: 0.0,
        }
    }
}
crate::json::record_json!(MarginPlatt);

impl crate::json::Record for ScoreFits {
    const FIELDS: crate::json::Fields<ScoreFits> = crate::json::json_fields!(ScoreFits {
        "bm25" Error bm25,
        "dense" Error dense,
        "weighted" Error weighted,
        "rrf" Error rrf,
    });
    fn init() -> Self {
        ScoreFits {
            bm25: MarginPlatt {
                a: 0.0,
                m: 0.0,
                b: 0.0,
            },
            dense: None,
            weighted: None,
            rrf: None,
        }
    }
}
crate::json::record_json!(ScoreFits);

impl crate::json::Record for Calibration {
    const FIELDS: crate::json::Fields<Calibration> = crate::json::json_fields!(Calibration {
        "method" Error method,
        "queries" Error queries,
        "pairs" Error pairs,
        "bm25" Error bm25,
        "dense" Error dense,
        "weighted" Error weighted,
        "rrf" Error rrf,
        "dense_weight" Error dense_weight,
        "scores" Error scores,
        "null_cap" Error null_cap,
    });
    fn init() -> Self {
        Calibration {
            method: String::new(),
            queries: 0,
            pairs: 0,
            bm25: Platt { a: 0.0, b: 0.0 },
            dense: None,
            weighted: None,
            rrf: None,
            dense_weight: 0.0,
            scores: None,
            null_cap: None,
        }
    }
}
crate::json::record_json!(Calibration);

impl crate::json::Record for NullCap {
    const FIELDS: crate::json::Fields<NullCap> = crate::json::json_fields!(NullCap {
        "q" Error q,
        "cap" Error cap,
        "queries" Error queries,
        "bm25" Error bm25,
        "dense" Error dense,
        "weighted" Error weighted,
        "rrf" Error rrf,
    });
    fn init() -> Self {
        NullCap {
            q: 0.0,
            cap: 0.0,
            queries: 0,
            bm25: 0.0,
            dense: None,
            weighted: None,
            rrf: None,
        }
    }
}
crate::json::record_json!(NullCap);

impl Manifest {
    /// Parent records stored after the indexed chunks (0 unless `parent-child`).
    pub fn parents(&self) -> usize {
        self.chunking.as_ref().map_or(0, |c| c.parents)
    }
}

impl Manifest {
    /// The analyzer the bundle's terms were made with (its version and options), to
    /// analyze queries the same way. Errors with [`FormatError::AnalyzerVersion`] for a
    /// version this build cannot reproduce.
    pub fn analyzer(&self) -> Result<crate::analyzer::Analyzer> {
        crate::analyzer::Analyzer::new(self.analyzer_version, self.analyzer)
    }

    /// Parses manifest bytes and checks the format and analyzer versions (analyzer
    /// versions 1 and 2 are accepted, see [`crate::analyzer`]).
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        Self::parse_named(bytes, MANIFEST_FILE)
    }

    /// [`Manifest::parse`] for bytes read from the file named `file` (`manifest.json` or a
    /// paged bundle's `jikji.json`), which errors name. The JSON is read by
    /// [`crate::json`] (serde's rules for these types; errors with a byte offset).
    pub fn parse_named(bytes: &[u8], file: &str) -> Result<Self> {
        let json = crate::json::parse(bytes, file)?;
        let version: u32 = json.obj(file)?.req("format_version")?;
        if version != FORMAT_VERSION && version != PAGED_FORMAT_VERSION {
            return Err(FormatError::FormatVersion {
                file: file.into(),
                found: version,
                expected: PAGED_FORMAT_VERSION,
            });
        }
        let m = Manifest::from_json(&json, file)?;
        if (m.format_version == PAGED_FORMAT_VERSION) != m.pages.is_some() {
            return Err(FormatError::corrupt(
                file,
                0,
                "format 2 needs `pages`, format 1 must not have it",
            ));
        }
        m.analyzer()?;
        m.check_settings()?;
        Ok(m)
    }

    /// Refuses settings no build writes (a hand-edited or hostile manifest): BM25 `k1`
    /// must be finite and ≥ 0 and `b` in [0, 1]; `chunk_size` ≥ 1 and `overlap` <
    /// `chunk_size`. Errors with [`FormatError::DataCorruption`] naming the manifest's file
    /// (`manifest.json`, or `jikji.json` for format 2) and the field (offset 0: JSON has no
    /// useful byte offset here).
    pub fn check_settings(&self) -> Result<()> {
        let file = if self.pages.is_some() {
            crate::paged::ENTRY_FILE
        } else {
            MANIFEST_FILE
        };
        let bad = |message: String| Err(FormatError::corrupt(file, 0, message));
        let Bm25Params { k1, b } = self.bm25;
        if !(k1.is_finite() && k1 >= 0.0) {
            return bad(format!(
                "bm25.k1 is {}; it must be a number ≥ 0",
                crate::num::f32_message(k1)
            ));
        }
        if !(0.0..=1.0).contains(&b) {
            return bad(format!(
                "bm25.b is {}; it must be in [0, 1]",
                crate::num::f32_message(b)
            ));
        }
        if self.chunk_size == 0 || self.overlap >= self.chunk_size {
            return bad(format!(
                "chunk_size {} / overlap {}: the chunk size must be ≥ 1 and larger than the overlap",
                self.chunk_size, self.overlap
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest_json(analyzer_version: u32, extra: &str) -> String {
        format!(
            r#"{{"format_version": {FORMAT_VERSION}, "analyzer_version": {analyzer_version}, {extra}
            "generator": "t", "built_at": 0, "chunk_size": 512, "overlap": 64,
            "bm25": {{"k1": 1.2, "b": 0.75}}, "model": null, "counts": {{"files": 0, "chunks": 0,
            "terms": 0, "vectors": 0}}, "files": {{}}}}"#
        )
    }

    /// Newcomer report: a manifest edited to `"k1": -5` (or `chunk_size: 0`) was accepted by
    /// `jikji search` (every hit tied) and kept by `jikji update`.
    #[test]
    fn manifest_with_impossible_settings_was_accepted() {
        let ok = manifest_json(2, "");
        assert!(Manifest::parse(ok.as_bytes()).is_ok());
        for (from, to) in [
            (r#""k1": 1.2"#, r#""k1": -5"#),
            (r#""b": 0.75"#, r#""b": 1.5"#),
            (r#""chunk_size": 512"#, r#""chunk_size": 0"#),
            (r#""overlap": 64"#, r#""overlap": 9999"#),
        ] {
            let bad = ok.replace(from, to);
            assert_ne!(bad, ok);
            let e = Manifest::parse(bad.as_bytes()).unwrap_err().to_string();
            assert!(e.contains("manifest.json"), "{to}: {e}");
        }
    }

    #[test]
    fn version_1_manifest_loads_with_the_version_1_analyzer() {
        let m = Manifest::parse(manifest_json(1, "").as_bytes()).unwrap();
        let a = m.analyzer().unwrap();
        assert_eq!(a.version(), 1);
        assert_eq!(a.analyze("Runs 學"), ["runs", "學"]);
    }

    #[test]
    fn version_2_options_come_from_the_manifest() {
        let json = manifest_json(2, r#""analyzer": {"stem": false, "stopwords": true},"#);
        let a = Manifest::parse(json.as_bytes())
            .unwrap()
            .analyzer()
            .unwrap();
        assert_eq!(a.analyze("The runs"), ["runs"]);
    }

    #[test]
    fn unknown_analyzer_version_is_refused_naming_it() {
        let e = Manifest::parse(manifest_json(9, "").as_bytes()).unwrap_err();
        assert!(
            matches!(e, FormatError::AnalyzerVersion { found: 9, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("analyzer version 9"), "{e}");
    }
}

//! The per-language mean vectors shipped with the model (`lang-means.json` in the model
//! folder) and the build side of the dense centring of issue 15 (the query side is
//! [`jikji_engine::centring`]).
//!
//! ## `lang-means.json`
//! Made once per model by `jikji-lang-means` (`builder/src/bin/jikji-lang-means.rs`) from a
//! reference sample of each language, copied into the model folder by `scripts/setup-model`:
//!
//! ```json
//! {"method": "lang-mean-v1", "model_sha256": "<hex of model.onnx>", "dim": 384,
//!  "languages": {"en": {"chunks": 400, "passage_mean": [384 f32], "query_mean": [384 f32]}, …},
//!  "sources": [{"lang": "en", "path": "…", "sha256": "…", "chunks": 57}, …]}
//! ```
//!
//! `passage_mean` is the mean of the chunks' `passage: ` vectors (each L2-normalised, the
//! mean not), `query_mean` the mean of the same chunk texts embedded with `query: `.
//! Languages are [`jikji_engine::centring::detect_lang`]'s codes.
//!
//! ## The correction
//! A chunk is given a language `l` by its scripts and vector ([`LoadedStats::language_of`])
//! and stored as `x − μ[l]` (default, [`QuerySide::Shift`]) or `normalise(x − μ[l])`, with
//! `μ[l]` = `α · passage_mean[l]` mixed with the bundle's own mean of `l` by the number of
//! its source files ([`LoadedStats::passage_offsets`]). With `shift` the query is used as
//! given; otherwise a query of language `l` is compared as `normalise(y − o[l])`, where
//! `o[l]` ([`QuerySide`]) is `α · query_mean[l]`, `α · passage_mean[l]`, or
//! `α · (passage_mean[l] + δ)` with δ the mean over languages of `query_mean −
//! passage_mean`. The offsets go into the manifest ([`jikji_format::Centring`]), so the
//! engine needs nothing else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use jikji_format::vectors::Vectors;
use jikji_format::{sha256_hex, Centring};
use serde::{Deserialize, Serialize};

use crate::error::{BuildError, Result};

/// File name of the statistics in the model folder.
pub const LANG_MEANS_FILE: &str = "lang-means.json";

/// Default centring strength α (chosen in README's centring table).
pub const DEFAULT_ALPHA: f32 = 1.0;

/// What is subtracted from a query vector (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QuerySide {
    /// `α · query_mean[lang]`.
    QueryMean,
    /// `α · passage_mean[lang]`.
    PassageMean,
    /// `α · (passage_mean[lang] + δ)`, δ = the mean over languages of query − passage means.
    PassageMeanOffset,
    /// Nothing: the query vector is used as given, and passages are stored as
    /// `x − α · passage_mean[lang]` **without** renormalising, so a passage's dense score
    /// becomes `cos(q, x) − α · q·passage_mean[lang]`: the query's expected cosine with a
    /// passage of that language is subtracted. Within one language the ranking is the
    /// model's own (the shift is the same for every passage of the language).
    Shift,
}

impl QuerySide {
    /// The name recorded in the manifest and taken by `--centring`.
    pub fn name(self) -> &'static str {
        match self {
            QuerySide::QueryMean => "query-mean",
            QuerySide::PassageMean => "passage-mean",
            QuerySide::PassageMeanOffset => "passage-mean+offset",
            QuerySide::Shift => "shift",
        }
    }

    /// Parses [`QuerySide::name`]; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        [
            QuerySide::QueryMean,
            QuerySide::PassageMean,
            QuerySide::PassageMeanOffset,
            QuerySide::Shift,
        ]
        .into_iter()
        .find(|q| q.name() == s)
    }
}

/// How a bundle's vectors are centred (a [`crate::ingest::BundleSettings`] choice).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CentringSettings {
    /// Strength α in [0, 1].
    pub alpha: f32,
    /// The query offsets.
    pub query_side: QuerySide,
    /// Prior strength `K` (in source files) of the reference mean against the bundle's own
    /// mean ([`LoadedStats::passage_offsets`]); `None`: the reference means alone.
    pub bundle_prior: Option<f32>,
}

/// The bundle prior measured best on the mixed-language set (`--centring-prior 50`, the
/// default: a language's passages in 50 source files weigh as much as the reference mean;
/// README, "Dense centring"). The bundle's own means are taken over the stored int8 rows,
/// so `jikji update` recomputes them as a full build does.
pub const MEASURED_BUNDLE_PRIOR: f32 = 50.0;

impl Default for CentringSettings {
    /// α = [`DEFAULT_ALPHA`], [`QuerySide::Shift`], bundle prior
    /// [`MEASURED_BUNDLE_PRIOR`]: of the variants measured (README, "Dense centring") the one
    /// that lifts the mixed-language set most (dense nDCG@10 0.025 → 0.737) while leaving
    /// every single-language bundle's ranking as the model's own (a one-language bundle's
    /// chunks all shift by the same offset).
    fn default() -> Self {
        CentringSettings {
            alpha: DEFAULT_ALPHA,
            query_side: QuerySide::Shift,
            bundle_prior: Some(MEASURED_BUNDLE_PRIOR),
        }
    }
}

impl CentringSettings {
    /// The settings a manifest's centring record was made with. Errors on a query side this
    /// build does not know.
    pub fn of_record(c: &Centring) -> Result<Self> {
        let query_side = QuerySide::parse(&c.query_side).ok_or_else(|| BuildError::Model {
            path: PathBuf::from(jikji_format::manifest::MANIFEST_FILE),
            message: format!("unknown model.centring.query_side {:?}", c.query_side),
        })?;
        Ok(CentringSettings {
            alpha: c.alpha,
            query_side,
            bundle_prior: c.bundle_prior,
        })
    }
}

/// One language's means.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LangMean {
    /// Reference chunks averaged.
    pub chunks: usize,
    /// Mean `passage: ` vector (`dim` f32s).
    pub passage_mean: Vec<f32>,
    /// Mean `query: ` vector of the same texts (`dim` f32s).
    pub query_mean: Vec<f32>,
}

/// One reference file the means were computed from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatsSource {
    /// Language its chunks were counted under.
    pub lang: String,
    /// Where it was read (as given to `jikji-lang-means`).
    pub path: String,
    /// Lowercase hex SHA-256 of its bytes.
    pub sha256: String,
    /// Chunks of it in the sample.
    pub chunks: usize,
}

/// The contents of `lang-means.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LangStats {
    /// `lang-mean-v1`.
    pub method: String,
    /// SHA-256 of the `model.onnx` whose vectors were averaged.
    pub model_sha256: String,
    /// Vector dimension.
    pub dim: usize,
    /// Language code → means.
    pub languages: BTreeMap<String, LangMean>,
    /// The reference sample.
    #[serde(default)]
    pub sources: Vec<StatsSource>,
}

/// A loaded statistics file and its SHA-256 (what the manifest names).
#[derive(Debug, Clone)]
pub struct LoadedStats {
    /// Parsed contents.
    pub stats: LangStats,
    /// Lowercase hex SHA-256 of the file's bytes.
    pub sha256: String,
}

impl LoadedStats {
    /// Reads and checks `path`: JSON of [`LangStats`], method `lang-mean-v1`, made for the
    /// model with SHA-256 `model_sha` (hex), every mean `dim` finite components and `dim`
    /// = `jikji_embed::DIM`. Errors name the file ([`BuildError::Model`]).
    pub fn load(path: &Path, model_sha: &str) -> Result<Self> {
        let bad = |message: String| BuildError::Model {
            path: path.to_path_buf(),
            message,
        };
        let bytes = std::fs::read(path).map_err(|e| {
            bad(format!(
                "cannot read the language statistics ({e}); run scripts/setup-model, \
                 or build with --centring off"
            ))
        })?;
        let stats: LangStats = serde_json::from_slice(&bytes)
            .map_err(|e| bad(format!("not a lang-means file: {e}")))?;
        if stats.method != jikji_engine::centring::STATS_METHOD {
            return Err(bad(format!("unknown method {:?}", stats.method)));
        }
        if stats.model_sha256 != model_sha {
            return Err(bad(format!(
                "made for model sha256 {}, the model folder's model.onnx is {model_sha}",
                stats.model_sha256
            )));
        }
        if stats.dim != jikji_embed::DIM {
            return Err(bad(format!(
                "dim {} (the model's is {})",
                stats.dim,
                jikji_embed::DIM
            )));
        }
        for (lang, m) in &stats.languages {
            for (what, v) in [
                ("passage_mean", &m.passage_mean),
                ("query_mean", &m.query_mean),
            ] {
                if v.len() != stats.dim || v.iter().any(|x| !x.is_finite()) {
                    return Err(bad(format!(
                        "languages.{lang}.{what}: expected {} finite numbers",
                        stats.dim
                    )));
                }
            }
        }
        Ok(LoadedStats {
            stats,
            sha256: sha256_hex(&bytes),
        })
    }

    /// The manifest record ([`jikji_engine::centring::METHOD`]) for `settings`: the query
    /// offsets of every language, the `passage` offsets `o[l]` of the chunks' languages
    /// ([`Self::passage_offsets`]) and each chunk's language `langs[i]` as runs (the rows
    /// themselves stay as the model gave them; the engine applies the offsets).
    pub fn record(
        &self,
        settings: CentringSettings,
        passage: BTreeMap<String, Vec<f32>>,
        langs: &[Option<&str>],
    ) -> Centring {
        let a = settings.alpha;
        let langs_stats = &self.stats.languages;
        let dim = self.stats.dim;
        let mut delta = vec![0f32; dim];
        for m in langs_stats.values() {
            for (d, (q, p)) in delta
                .iter_mut()
                .zip(m.query_mean.iter().zip(&m.passage_mean))
            {
                *d += (q - p) / langs_stats.len() as f32;
            }
        }
        let query = langs_stats
            .iter()
            .filter(|_| settings.query_side != QuerySide::Shift)
            .map(|(l, m)| {
                let v: Vec<f32> = match settings.query_side {
                    QuerySide::Shift => unreachable!("filtered out above"),
                    QuerySide::QueryMean => m.query_mean.iter().map(|x| a * x).collect(),
                    QuerySide::PassageMean => m.passage_mean.iter().map(|x| a * x).collect(),
                    QuerySide::PassageMeanOffset => m
                        .passage_mean
                        .iter()
                        .zip(&delta)
                        .map(|(p, d)| a * (p + d))
                        .collect(),
                };
                (l.clone(), v)
            })
            .collect();
        let round = |m: BTreeMap<String, Vec<f32>>| -> BTreeMap<String, Vec<f32>> {
            m.into_iter().map(|(l, v)| (l, rounded(&v))).collect()
        };
        Centring {
            method: jikji_engine::centring::METHOD.to_string(),
            stats_sha256: self.sha256.clone(),
            alpha: a,
            query_side: settings.query_side.name().to_string(),
            query: round(query),
            bundle_prior: settings.bundle_prior,
            passage: round(passage),
            chunks: Some(jikji_engine::centring::write_runs(langs.iter().copied())),
        }
    }

    /// The language a chunk is centred as: among the languages with means whose script
    /// makes up at least [`CANDIDATE_SHARE`] of the chunk's letters
    /// ([`jikji_engine::centring::script_shares`]; all languages with means when none does),
    /// the one whose `passage_mean` has the largest dot product with the chunk's vector `v`
    /// (ties: the first in code order). `None` only when the statistics have no language.
    ///
    /// Not the text detector's single answer: a Chinese Wikipedia chunk full of Latin
    /// names counts as `en` by letters (each Latin letter is one, each Han character one)
    /// but its vector carries the Chinese offset; shifted by the English mean it gained
    /// `q·(μ_zh − μ_en)` ≈ 0.06 over every other chunk and stood in the top 10 of most
    /// queries (cmrc2018-dev dense nDCG@10 0.9735 → 0.8864). The vector decides among the
    /// scripts the text really has; a pure English chunk stays `en` whatever its vector.
    pub fn language_of(&self, v: &[f32], text: &str) -> Option<&str> {
        let shares = jikji_engine::centring::script_shares(text);
        let langs = &self.stats.languages;
        let candidate = |l: &str| match shares {
            Some(sh) => jikji_engine::centring::SCRIPT_LANGS
                .iter()
                .position(|x| *x == l)
                .is_some_and(|i| sh[i] >= CANDIDATE_SHARE),
            None => false,
        };
        let any = langs.keys().any(|l| candidate(l));
        let dot = |m: &[f32]| v.iter().zip(m).map(|(a, b)| a * b).sum::<f32>();
        let mut best: Option<(&str, f32)> = None;
        for (l, m) in langs {
            if any && !candidate(l) {
                continue;
            }
            let d = dot(&m.passage_mean);
            if best.is_none_or(|(_, b)| d > b) {
                best = Some((l.as_str(), d));
            }
        }
        best.map(|(l, _)| l)
    }

    /// The offset subtracted from each language's passages, `α · μ[l]` for every language
    /// of the chunks (`langs[i]`, from [`Self::language_of`]; `None` entries ignored). With
    /// no bundle prior `μ[l]` is the reference `passage_mean`. With a prior `K` it is
    /// `w · bundle_mean[l] + (1 − w) · passage_mean[l]`, `bundle_mean[l]` the mean of the
    /// stored (int8, dequantized) `rows` of the language's chunks — the rows, not the model's
    /// f32 vectors, so that `jikji update`, which has only the old chunks' rows, finds the
    /// offsets a full build finds — and `w = s / (s + K)`, `s` the number of
    /// distinct `sources` among them: the bundle's own mean also holds its domain's offset
    /// (Wikipedia passages are not manual pages), but in a bundle of one book per language
    /// it is that book's topic, and subtracting it would cancel the book's relevance to
    /// every query on it (why issue 2's bundle-mean centring lost 學而時習之 to Hamlet), so
    /// it counts only as far as the language's passages come from many files.
    pub fn passage_offsets(
        &self,
        rows: &Vectors,
        langs: &[Option<&str>],
        sources: &[&str],
        settings: CentringSettings,
    ) -> BTreeMap<String, Vec<f32>> {
        let dim = self.stats.dim;
        // lang → (sum of vectors, chunks, source files)
        let mut acc: BTreeMap<&str, (Vec<f64>, usize, std::collections::BTreeSet<&str>)> =
            BTreeMap::new();
        // Without a prior the rows are not read (the reference means alone).
        let with_rows = settings.bundle_prior.is_some();
        for (i, (l, src)) in langs.iter().zip(sources).enumerate() {
            let Some(l) = l else { continue };
            let v = if with_rows && i < rows.len() {
                rows.get(i)
            } else {
                Vec::new()
            };
            let e = acc
                .entry(l)
                .or_insert_with(|| (vec![0f64; dim], 0, Default::default()));
            for (a, x) in e.0.iter_mut().zip(&v) {
                *a += *x as f64;
            }
            e.1 += 1;
            e.2.insert(src);
        }
        acc.into_iter()
            .filter_map(|(l, (sum, n, files))| {
                let reference = &self.stats.languages.get(l)?.passage_mean;
                let w = match settings.bundle_prior {
                    Some(k) => files.len() as f64 / (files.len() as f64 + k.max(0.0) as f64),
                    None => 0.0,
                };
                let mean = sum.iter().zip(reference).map(|(s, r)| {
                    let m = w * (s / n as f64) + (1.0 - w) * *r as f64;
                    settings.alpha * m as f32
                });
                Some((l.to_string(), mean.collect()))
            })
            .collect()
    }

    /// The centring of a bundle's passages (`vectors`, the model's, one per chunk, and
    /// `rows`, the same quantized as stored: texts `texts`, source files `sources`): each
    /// chunk's language [`Self::language_of`]`(vectors[i], texts[i])` and the offsets
    /// [`Self::passage_offsets`] of `rows`; give both to [`Self::record`].
    /// The vectors are not changed.
    pub fn assign<'s>(
        &'s self,
        vectors: &[Vec<f32>],
        rows: &Vectors,
        texts: &[&str],
        sources: &[&str],
        settings: CentringSettings,
    ) -> (Vec<Option<&'s str>>, BTreeMap<String, Vec<f32>>) {
        let langs: Vec<Option<&str>> = vectors
            .iter()
            .zip(texts)
            .map(|(v, t)| self.language_of(v, t))
            .collect();
        let offsets = self.passage_offsets(rows, &langs, sources, settings);
        (langs, offsets)
    }

    /// The offsets a bundle's centring record gives new passages (`jikji update`): its
    /// `passage` offsets, and `α · passage_mean` of these statistics for a language it has
    /// none for (a language new to the bundle), [`rounded`] as [`Self::record`] stores them.
    pub fn recorded_offsets(&self, c: &Centring) -> BTreeMap<String, Vec<f32>> {
        let mut out: BTreeMap<String, Vec<f32>> = self
            .stats
            .languages
            .iter()
            .map(|(l, m)| {
                (
                    l.clone(),
                    rounded(
                        &m.passage_mean
                            .iter()
                            .map(|x| c.alpha * x)
                            .collect::<Vec<_>>(),
                    ),
                )
            })
            .collect();
        for (l, v) in &c.passage {
            if v.len() == self.stats.dim {
                out.insert(l.clone(), v.clone());
            }
        }
        out
    }
}

/// Decimals an offset is stored with in the manifest ([`rounded`]).
pub const OFFSET_DECIMALS: i32 = 5;

/// `v` rounded to [`OFFSET_DECIMALS`] decimals: what [`LoadedStats::record`] stores. The
/// offsets are read from the bundle's entry on every page load, and their components (means
/// of unit vectors, |x| < 0.2) need no more: a query's `q·o` moves by at most
/// `√384 · 5·10⁻⁶ ≈ 10⁻⁴`, a twentieth of the int8 rows' own error; 3 offsets take ~8 KB of
/// JSON instead of ~14 KB.
pub fn rounded(v: &[f32]) -> Vec<f32> {
    let k = 10f64.powi(OFFSET_DECIMALS);
    v.iter()
        .map(|x| ((*x as f64 * k).round() / k) as f32)
        .collect()
}

/// Letter share from which a script's language is a candidate for [`LoadedStats::language_of`].
pub const CANDIDATE_SHARE: f64 = 0.1;

/// What the engine scores chunk vector `x` of centring language `offset`'s as, for a query
/// vector already through the query side: `x − o` (query side [`QuerySide::Shift`], not
/// renormalised) or `normalise(x − o)`; `x` itself for a chunk without an offset. The rows
/// are stored as `x`: this is the reference the engine's
/// [`jikji_engine::centring::DenseScorer`] is tested against.
pub fn centred(x: &[f32], offset: Option<&[f32]>, query_side: QuerySide) -> Vec<f32> {
    match offset {
        None => x.to_vec(),
        Some(o) if query_side == QuerySide::Shift => x.iter().zip(o).map(|(a, b)| a - b).collect(),
        Some(o) => jikji_engine::centring::centre(x, o),
    }
}

/// One reference input of [`compute`]: chunks of `path` (a `.md`/`.txt` file, a `.jsonl`
/// file whose records have a `text` field, or a folder of such files, recursively) whose
/// detected language is `lang` count towards `lang`'s means.
#[derive(Debug, Clone)]
pub struct Reference {
    /// Language code ([`jikji_engine::centring::detect_lang`]'s).
    pub lang: String,
    /// File or folder.
    pub path: PathBuf,
}

/// Computes the statistics of `refs` with the model in `model_dir`: every input's texts are
/// cut by the default chunker (`hierarchical`, 512 chars / 64 overlap, sized with the
/// model's tokenizer); chunks of at least 50 chars whose detected language is the input's
/// are pooled per language and, per language, the `per_lang` with the smallest SHA-256 of
/// their text are kept (a deterministic sample spread over all inputs); each is embedded with
/// `passage: ` (through the vector cache in `cache_dir`) and `query: `, and the vectors are
/// averaged. Errors: an input cannot be read or holds no chunk of its language, the model
/// is missing, embedding fails.
pub fn compute(
    refs: &[Reference],
    model_dir: &Path,
    cache_dir: Option<&Path>,
    per_lang: usize,
    threads: usize,
) -> Result<LangStats> {
    use crate::chunker::{ChunkParams, Strategy};
    use sha2::{Digest, Sha256};
    let chunking =
        crate::ingest::Chunking::new(Strategy::default(), ChunkParams::default(), Some(model_dir))?;
    // lang → (text hash, text, source index)
    let mut pool: BTreeMap<String, Vec<([u8; 32], String, usize)>> = BTreeMap::new();
    let mut sources = Vec::new();
    for r in refs {
        let files: Vec<PathBuf> = if r.path.is_dir() {
            let mut v: Vec<PathBuf> = walkdir::WalkDir::new(&r.path)
                .into_iter()
                .filter_map(|e| e.ok())
                .filter(|e| e.file_type().is_file())
                .map(|e| e.into_path())
                .filter(|p| {
                    matches!(
                        p.extension().and_then(|e| e.to_str()),
                        Some("md" | "txt" | "jsonl")
                    )
                })
                .collect();
            v.sort();
            v
        } else {
            vec![r.path.clone()]
        };
        let mut found = 0;
        for f in files {
            let bytes = std::fs::read(&f).map_err(|e| BuildError::io("reading", &f, e))?;
            let text = String::from_utf8(bytes.clone()).map_err(|e| BuildError::Corpus {
                path: f.clone(),
                message: format!("not UTF-8 at byte {}", e.utf8_error().valid_up_to()),
            })?;
            let docs: Vec<String> = if f.extension().is_some_and(|e| e == "jsonl") {
                let mut docs = Vec::new();
                for (n, line) in text.lines().enumerate() {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let v: serde_json::Value =
                        serde_json::from_str(line).map_err(|e| BuildError::Corpus {
                            path: f.clone(),
                            message: format!("line {}: {e}", n + 1),
                        })?;
                    if let Some(t) = v.get("text").and_then(|t| t.as_str()) {
                        docs.push(t.to_string());
                    }
                }
                docs
            } else {
                vec![text]
            };
            let src = sources.len();
            let mut n = 0;
            for d in &docs {
                for c in chunking.strategy.chunk_body(d, &chunking.limits()).chunks {
                    if c.text.chars().count() < 50
                        || jikji_engine::centring::detect_lang(&c.text) != r.lang
                    {
                        continue;
                    }
                    let h: [u8; 32] = Sha256::digest(c.text.as_bytes()).into();
                    pool.entry(r.lang.clone())
                        .or_default()
                        .push((h, c.text, src));
                    n += 1;
                }
            }
            found += n;
            sources.push(StatsSource {
                lang: r.lang.clone(),
                path: f.display().to_string(),
                sha256: sha256_hex(&bytes),
                chunks: 0,
            });
        }
        if found == 0 {
            return Err(BuildError::Corpus {
                path: r.path.clone(),
                message: format!("no chunk detected as {:?}", r.lang),
            });
        }
    }
    let info = crate::ingest::model_info(model_dir)?;
    let mut embedder = None;
    let mut languages = BTreeMap::new();
    for (lang, mut chunks) in pool {
        chunks.sort();
        chunks.dedup_by(|a, b| a.0 == b.0);
        chunks.truncate(per_lang);
        for c in &chunks {
            sources[c.2].chunks += 1;
        }
        let texts: Vec<&str> = chunks.iter().map(|c| c.1.as_str()).collect();
        let passages = crate::ingest::embed::embed_passages(
            &texts,
            model_dir,
            cache_dir,
            threads,
            false,
            &mut embedder,
        )?;
        let e = match &mut embedder {
            Some(e) => e,
            None => embedder.insert(crate::encoder::Encoder::load(model_dir, &info.sha256)?),
        };
        let queries = e.embed_many(
            &texts,
            jikji_embed::Prefix::Query,
            threads,
            "reference texts",
            &|_| {},
        )?;
        languages.insert(
            lang,
            LangMean {
                chunks: texts.len(),
                passage_mean: mean(&passages.vectors),
                query_mean: mean(&queries.vectors),
            },
        );
    }
    sources.retain(|s| s.chunks > 0);
    Ok(LangStats {
        method: jikji_engine::centring::STATS_METHOD.to_string(),
        model_sha256: info.sha256,
        dim: jikji_embed::DIM,
        languages,
        sources,
    })
}

/// Component-wise mean of equal-length vectors (empty: zeros of [`jikji_embed::DIM`]).
fn mean(vs: &[Vec<f32>]) -> Vec<f32> {
    let mut m = vec![0f64; vs.first().map_or(jikji_embed::DIM, Vec::len)];
    for v in vs {
        for (a, b) in m.iter_mut().zip(v) {
            *a += *b as f64;
        }
    }
    m.into_iter()
        .map(|a| (a / vs.len().max(1) as f64) as f32)
        .collect()
}

/// The statistics file of a build: `path` if given, else [`LANG_MEANS_FILE`] in `model_dir`.
pub fn stats_path(model_dir: &Path, path: Option<&Path>) -> PathBuf {
    path.map_or_else(|| model_dir.join(LANG_MEANS_FILE), Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats() -> LoadedStats {
        let v = |x: f32| {
            let mut a = vec![0f32; jikji_embed::DIM];
            a[0] = x;
            a
        };
        let languages = BTreeMap::from([
            (
                "en".to_string(),
                LangMean {
                    chunks: 1,
                    passage_mean: v(0.2),
                    query_mean: v(0.4),
                },
            ),
            (
                "zh".to_string(),
                LangMean {
                    chunks: 1,
                    passage_mean: v(-0.2),
                    query_mean: v(0.0),
                },
            ),
        ]);
        LoadedStats {
            stats: LangStats {
                method: jikji_engine::centring::STATS_METHOD.into(),
                model_sha256: "m".into(),
                dim: jikji_embed::DIM,
                languages,
                sources: vec![],
            },
            sha256: "s".into(),
        }
    }

    fn settings(query_side: QuerySide, alpha: f32, bundle_prior: Option<f32>) -> CentringSettings {
        CentringSettings {
            alpha,
            query_side,
            bundle_prior,
        }
    }

    /// `vs` as a bundle stores them (int8 rows).
    fn rows(vs: &[Vec<f32>]) -> Vectors {
        Vectors::open(&jikji_format::vectors::write_vectors(jikji_embed::DIM, vs).unwrap()).unwrap()
    }

    fn vector(x0: f32, x1: f32) -> Vec<f32> {
        let mut a = vec![0f32; jikji_embed::DIM];
        a[0] = x0;
        a[1] = x1;
        a
    }

    #[test]
    fn query_sides_give_their_offsets() {
        let s = stats();
        let r = |q| s.record(settings(q, 0.5, None), BTreeMap::new(), &[]);
        let q = r(QuerySide::QueryMean);
        assert_eq!((q.query["en"][0], q.query["zh"][0]), (0.2, 0.0));
        let p = r(QuerySide::PassageMean);
        assert_eq!((p.query["en"][0], p.query["zh"][0]), (0.1, -0.1));
        // δ = mean(0.4 − 0.2, 0.0 + 0.2) = 0.2.
        let o = r(QuerySide::PassageMeanOffset);
        assert!((o.query["en"][0] - 0.2).abs() < 1e-6 && o.query["zh"][0].abs() < 1e-6);
        assert_eq!(o.query_side, "passage-mean+offset");
        assert_eq!(
            CentringSettings::of_record(&o).unwrap().query_side,
            QuerySide::PassageMeanOffset
        );
    }

    #[test]
    fn passages_are_centred_by_their_language() {
        let s = stats();
        let a = vector(0.6, 0.8);
        let vs = vec![a.clone(), vector(-0.6, 0.8)];
        let texts = ["hello", "學而時習之"];
        let qm = settings(QuerySide::QueryMean, 1.0, None);
        let (langs, offsets) = s.assign(&vs, &rows(&vs), &texts, &["f", "g"], qm);
        assert_eq!(langs, [Some("en"), Some("zh")]);
        let c = centred(
            &a,
            offsets.get("en").map(Vec::as_slice),
            QuerySide::QueryMean,
        );
        let n = (0.4f32 * 0.4 + 0.8 * 0.8).sqrt();
        assert!((c[0] - 0.4 / n).abs() < 1e-6 && (c[1] - 0.8 / n).abs() < 1e-6);
        // The record names each chunk's language and has the offsets of both.
        let r = s.record(qm, offsets, &langs);
        assert_eq!(r.chunks.as_deref(), Some("en*1 zh*1"));
        assert_eq!(r.method, jikji_engine::centring::METHOD);
        assert!((r.passage["zh"][0] + 0.2).abs() < 1e-6 && r.query.len() == 2);
        // Shift: subtracted, not renormalised, and no query offsets.
        let shift = settings(QuerySide::Shift, 0.5, None);
        let (langs, offsets) = s.assign(&vs[..1], &rows(&vs[..1]), &texts[..1], &["f"], shift);
        let c = centred(&a, offsets.get("en").map(Vec::as_slice), QuerySide::Shift);
        assert!((c[0] - 0.5).abs() < 1e-6 && c[1] == 0.8);
        let r = s.record(shift, offsets, &langs);
        assert!(r.query.is_empty() && r.bundle_prior.is_none());
        assert_eq!(r.passage.keys().collect::<Vec<_>>(), ["en"]);
    }

    /// cmrc2018-dev: Chinese chunks full of Latin names were detected as `en` by letters
    /// and shifted by the English mean, which lifted them above every other chunk (dense
    /// nDCG@10 0.9735 → 0.8864). Among the scripts a chunk has, its vector now decides.
    #[test]
    fn mixed_script_chunks_were_shifted_by_the_wrong_language() {
        let s = stats();
        let shift = settings(QuerySide::Shift, 1.0, None);
        // Latin letters outnumber the Han characters (detected `en`), but the vector is
        // nearer the zh mean (x·μ_zh = 0.12 > x·μ_en = −0.12): shifted by μ_zh = −0.2.
        let text = "Stephen Switzer、William Kent 著名园艺设计师";
        assert_eq!(jikji_engine::centring::detect_lang(text), "en");
        let vs = vec![vector(-0.6, 0.8)];
        let (langs, offsets) = s.assign(&vs, &rows(&vs), &[text], &["f"], shift);
        assert_eq!(langs, [Some("zh")]);
        let c = centred(
            &vs[0],
            offsets.get("zh").map(Vec::as_slice),
            QuerySide::Shift,
        );
        assert!((c[0] + 0.4).abs() < 1e-6, "{:?}", &c[..2]);
        // A chunk with Latin letters only stays `en` whatever its vector.
        assert_eq!(
            s.language_of(&vector(-0.6, 0.8), "Shift of bias"),
            Some("en")
        );
        // No letters (or only scripts without means): every language is a candidate.
        assert_eq!(s.language_of(&vector(-0.6, 0.8), "1984."), Some("zh"));
        assert_eq!(s.language_of(&vector(0.6, 0.8), "Съешь же"), Some("en"));
    }

    #[test]
    fn bundle_mean_counts_by_source_files() {
        let s = stats();
        // Two en chunks of one file with mean x0 = 0.6, reference 0.2, prior K = 1:
        // w = 1/2, offset 0.4; of two files: w = 2/3, offset (2·0.6 + 0.2)/3.
        let vs = vec![vector(0.5, 0.0), vector(0.7, 0.0)];
        let langs = [Some("en"), Some("en")];
        let p = settings(QuerySide::Shift, 1.0, Some(1.0));
        let one = s.passage_offsets(&rows(&vs), &langs, &["a", "a"], p);
        assert!((one["en"][0] - 0.4).abs() < 1e-6, "{}", one["en"][0]);
        let two = s.passage_offsets(&rows(&vs), &langs, &["a", "b"], p);
        assert!((two["en"][0] - 1.4 / 3.0).abs() < 1e-6);
        // α scales it; no prior: the reference alone; languages without chunks: none.
        let half = s.passage_offsets(
            &rows(&vs),
            &langs,
            &["a", "b"],
            settings(QuerySide::Shift, 0.5, Some(1.0)),
        );
        assert!((half["en"][0] - 0.7 / 3.0).abs() < 1e-6);
        let none = s.passage_offsets(
            &rows(&vs),
            &langs,
            &["a", "b"],
            settings(QuerySide::Shift, 1.0, None),
        );
        assert!((none["en"][0] - 0.2).abs() < 1e-6 && !none.contains_key("zh"));
        // The record keeps them for update; update falls back to the reference elsewhere.
        let r = s.record(p, two.clone(), &langs);
        assert_eq!(r.passage["en"], rounded(&two["en"]));
        let back = s.recorded_offsets(&r);
        assert_eq!(back["en"], r.passage["en"]);
        assert!((back["zh"][0] + 0.2).abs() < 1e-6);
    }

    #[test]
    fn a_file_for_another_model_is_refused() {
        let dir = std::env::temp_dir().join(format!("jikji-lang-means-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(LANG_MEANS_FILE);
        std::fs::write(&p, serde_json::to_vec(&stats().stats).unwrap()).unwrap();
        assert!(LoadedStats::load(&p, "m").is_ok());
        let e = LoadedStats::load(&p, "other").unwrap_err().to_string();
        assert!(
            e.contains("lang-means.json") && e.contains("made for model"),
            "{e}"
        );
        std::fs::write(&p, b"{\"method\": 1}").unwrap();
        assert!(LoadedStats::load(&p, "m").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! Option groups shared by several commands (`#[command(flatten)]`), with their defaults
//! written once, and the typed values of `--mode`, `--strategy` and `--fusion`.

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use jikji_builder::chunker::{ChunkParams, Strategy};
use jikji_builder::corpus::CheckOptions;
use jikji_builder::ingest::{default_cache_dir, default_threads, BundleSettings};
use jikji_builder::lang_means::{CentringSettings, QuerySide};
use jikji_engine::{Fusion, Mode};
use jikji_format::analyzer::AnalyzerOptions;
use jikji_format::Bm25Params;

/// The model folder used when neither `--model` nor `JIKJI_MODEL_DIR` is given.
pub const DEFAULT_MODEL: &str = "models/e5-small";

/// A ranking mode (`--mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Lexical BM25 only.
    Bm25,
    /// Dense (embedding) search only.
    Dense,
    /// Fusion of BM25 and dense (see `--fusion`).
    Hybrid,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Bm25 => Mode::Bm25,
            ModeArg::Dense => Mode::Dense,
            ModeArg::Hybrid => Mode::Hybrid,
        }
    }
}

/// A chunking strategy (`--strategy`); see `jikji_builder::chunker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StrategyArg {
    /// `---` only; fixed windows.
    Fixed,
    /// `---`, paragraphs, lines, words.
    Recursive,
    /// `---` and headings.
    Heading,
    /// `---`, headings, paragraphs, sentences (default).
    Hierarchical,
    /// Hierarchical children pointing to parent sections.
    ParentChild,
}

impl StrategyArg {
    /// The strategy, `parent_size` chars for `parent-child`.
    pub fn strategy(self, parent_size: usize) -> Strategy {
        match self {
            StrategyArg::Fixed => Strategy::Fixed,
            StrategyArg::Recursive => Strategy::Recursive,
            StrategyArg::Heading => Strategy::Heading,
            StrategyArg::Hierarchical => Strategy::Hierarchical,
            StrategyArg::ParentChild => Strategy::ParentChild { parent_size },
        }
    }
}

/// Parses `--fusion`: `rrf`, `weighted` (the bundle's dense weight) or `weighted:W`.
pub fn parse_fusion(s: &str) -> Result<Fusion, String> {
    s.trim()
        .parse()
        .map_err(|e: jikji_engine::EngineError| e.to_string())
}

/// Chunk size, overlap and parent size.
#[derive(Debug, clap::Args)]
pub struct ChunkingArgs {
    /// Maximum chunk length in characters (Unicode scalar values).
    #[arg(long, default_value_t = ChunkParams::default().size)]
    pub chunk_size: usize,
    /// Characters repeated from the end of the previous chunk of the same section.
    #[arg(long, default_value_t = ChunkParams::default().overlap)]
    pub overlap: usize,
    /// parent-child: largest parent section in characters (default 4 × --chunk-size).
    #[arg(long)]
    pub parent_size: Option<usize>,
}

impl ChunkingArgs {
    /// Size and overlap; errors unless 0 < overlap + 1 ≤ chunk size.
    pub fn params(&self) -> anyhow::Result<ChunkParams> {
        anyhow::ensure!(self.chunk_size > 0, "--chunk-size must be at least 1");
        anyhow::ensure!(
            self.overlap < self.chunk_size,
            "--overlap ({}) must be smaller than --chunk-size ({})",
            self.overlap,
            self.chunk_size
        );
        Ok(ChunkParams {
            size: self.chunk_size,
            overlap: self.overlap,
        })
    }

    /// `s` with this parent size; errors when the parent size is below the chunk size.
    pub fn strategy(&self, s: StrategyArg) -> anyhow::Result<Strategy> {
        let parent_size = self.parent_size.unwrap_or(4 * self.chunk_size);
        anyhow::ensure!(
            parent_size >= self.chunk_size,
            "--parent-size ({parent_size}) must be at least --chunk-size ({})",
            self.chunk_size
        );
        Ok(s.strategy(parent_size))
    }
}

/// Analyzer switches, the Hanja table and BM25 parameters (recorded in the manifest).
#[derive(Debug, clap::Args)]
pub struct IndexArgs {
    /// Do not stem English words (Snowball English stemmer is on by default).
    #[arg(long)]
    pub no_stem: bool,
    /// Drop English stopwords (Lucene's 33-word list).
    #[arg(long)]
    pub stopwords: bool,
    /// Do not add the particle-stripped lemma of Korean words as a term.
    #[arg(long)]
    pub no_korean_particles: bool,
    /// Do not fold Traditional Chinese characters to Simplified.
    #[arg(long)]
    pub no_fold_chinese: bool,
    /// Index Han/kana runs by bigrams only (no character unigrams).
    #[arg(long)]
    pub no_han_unigrams: bool,
    /// Also index each Korean word longer than two syllables whole (analyzer version 1 did).
    #[arg(long)]
    pub korean_whole_words: bool,
    /// Also index the bigram that joins a Korean stem to its stripped particle (`트가` of
    /// `앙투아네트가`; off by default, measured to hurt).
    #[arg(long)]
    pub korean_particle_bigrams: bool,
    /// Do not write the Hangul ↔ Hanja reading table (hanja.fst) for Han/Hangul corpora.
    #[arg(long)]
    pub no_hanja: bool,
    /// BM25 term-frequency saturation k1 (recorded in the bundle's manifest).
    #[arg(long, allow_negative_numbers = true, default_value_t = Bm25Params::default().k1)]
    pub k1: f32,
    /// BM25 length normalisation b, 0 (none) to 1 (full).
    #[arg(long, allow_negative_numbers = true, default_value_t = Bm25Params::default().b)]
    pub b: f32,
    /// Per-language centring of the dense vectors (issue 15): `shift` (default) subtracts
    /// the language's passage mean from passages only, without renormalising; or passages
    /// and queries are centred and renormalised, the query offset being the language's
    /// `query-mean`, its `passage-mean`, or `passage-mean+offset` (one offset shared by all
    /// languages); `off` stores the vectors as the model gives them.
    #[arg(long, default_value = "shift")]
    pub centring: String,
    /// Centring strength α in [0, 1] (1 = subtract the whole mean).
    #[arg(long, default_value_t = jikji_builder::lang_means::DEFAULT_ALPHA)]
    pub centring_alpha: f32,
    /// How many source files of a language weigh as much as the reference mean when the
    /// bundle's own mean of that language (over its stored rows) is mixed in: 50, the
    /// default, measured best on mixed-language sets; `none`: the reference means alone.
    #[arg(long, default_value = "50")]
    pub centring_prior: String,
    /// Language statistics for the centring (default: lang-means.json in the model folder).
    #[arg(long)]
    pub lang_means: Option<PathBuf>,
    /// Dense index (issue 14): `exact` scans every vector; `ivf` (or `ivf:NLIST`) writes a
    /// paged IVF index (round(2·√chunks) lists by default), so a dense query fetches the
    /// centroids and a share of the lists instead of every vector page; `ivf-binary` (or
    /// `ivf-binary:NLIST`) the same with lists of sign bits (49 B a chunk with e5-small) and
    /// int8 rescoring of the best candidates; `auto` (default) writes it from 100,000
    /// chunks on (docs/design/dense-index.md).
    #[arg(
        long,
        default_value = "auto",
        value_name = "exact|ivf|ivf:NLIST|ivf-binary|ivf-binary:NLIST|auto"
    )]
    pub dense_index: String,
}

impl IndexArgs {
    /// The analyzer options.
    pub fn analyzer(&self) -> AnalyzerOptions {
        AnalyzerOptions {
            stem: !self.no_stem,
            stopwords: self.stopwords,
            korean_particles: !self.no_korean_particles,
            fold_chinese: !self.no_fold_chinese,
            korean_whole_words: self.korean_whole_words,
            han_unigrams: !self.no_han_unigrams,
            korean_particle_bigrams: self.korean_particle_bigrams,
        }
    }

    /// BM25 parameters; errors on k1 < 0 or b outside [0, 1].
    pub fn bm25(&self) -> anyhow::Result<Bm25Params> {
        anyhow::ensure!(
            self.k1.is_finite() && self.k1 >= 0.0,
            "--k1 must be a number ≥ 0, got {}",
            self.k1
        );
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.b),
            "--b must be in [0, 1], got {}",
            self.b
        );
        Ok(Bm25Params {
            k1: self.k1,
            b: self.b,
        })
    }

    /// Every setting the bundle's bytes depend on, from these switches, `chunking` and
    /// `strategy`; `allow_ai_draft` from the corpus-check options.
    pub fn settings(
        &self,
        chunking: &ChunkingArgs,
        strategy: StrategyArg,
        allow_ai_draft: bool,
    ) -> anyhow::Result<BundleSettings> {
        Ok(BundleSettings {
            strategy: chunking.strategy(strategy)?,
            params: chunking.params()?,
            analyzer: self.analyzer(),
            hanja: !self.no_hanja,
            bm25: self.bm25()?,
            allow_ai_draft,
            centring: self.centring()?,
            dense_index: jikji_builder::ivf::DenseIndex::parse(&self.dense_index).ok_or_else(
                || {
                    anyhow::anyhow!(
                        "--dense-index must be exact, ivf, ivf:NLIST, ivf-binary, ivf-binary:NLIST (NLIST ≥ 1) or auto, got {:?}",
                        self.dense_index
                    )
                },
            )?,
        })
    }

    /// `--centring`, `--centring-alpha` and `--centring-prior`; errors on an unknown name, α
    /// outside [0, 1] or a prior that is not `none` or a finite number ≥ 0.
    pub fn centring(&self) -> anyhow::Result<Option<CentringSettings>> {
        if self.centring == "off" {
            return Ok(None);
        }
        let query_side = QuerySide::parse(&self.centring).ok_or_else(|| {
            anyhow::anyhow!(
                "--centring must be query-mean, passage-mean, passage-mean+offset, shift or off, got {:?}",
                self.centring
            )
        })?;
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.centring_alpha),
            "--centring-alpha must be in [0, 1], got {}",
            self.centring_alpha
        );
        let bundle_prior = match self.centring_prior.as_str() {
            "none" => None,
            p => Some(
                p.parse::<f32>()
                    .ok()
                    .filter(|k| k.is_finite() && *k >= 0.0)
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "--centring-prior must be `none` or a number ≥ 0, got {p:?}"
                        )
                    })?,
            ),
        };
        Ok(Some(CentringSettings {
            alpha: self.centring_alpha,
            query_side,
            bundle_prior,
        }))
    }
}

/// What the corpus check admits and where rejected files are copied.
#[derive(Debug, clap::Args)]
pub struct CheckArgs {
    /// Include files whose front matter says `provenance: ai-draft` (tagged in results).
    #[arg(long)]
    pub allow_ai_draft: bool,
    /// Copy files with errors into this folder (originals are never moved or deleted).
    #[arg(long)]
    pub quarantine: Option<PathBuf>,
}

impl CheckArgs {
    /// The check options.
    pub fn options(&self) -> CheckOptions {
        CheckOptions {
            allow_ai_draft: self.allow_ai_draft,
            drop_bodies: false,
        }
    }
}

/// The model folder.
#[derive(Debug, clap::Args)]
pub struct ModelArgs {
    /// Model folder with model.onnx and tokenizer.json (made by scripts/setup-model).
    #[arg(long, env = "JIKJI_MODEL_DIR", default_value = DEFAULT_MODEL)]
    pub model: PathBuf,
}

/// The embedding cache folder and threads.
#[derive(Debug, clap::Args)]
pub struct EmbedArgs {
    /// Embedding cache folder (vectors keyed by chunk-text hash). Default: `.jikji-cache`
    /// beside the bundle (`jikji eval`: in the current folder).
    #[arg(long)]
    pub cache: Option<PathBuf>,
    /// Embedding threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

impl EmbedArgs {
    /// The cache folder: `--cache`, else `.jikji-cache` beside `bundle`.
    pub fn cache_dir(&self, bundle: &Path) -> PathBuf {
        self.cache
            .clone()
            .unwrap_or_else(|| default_cache_dir(bundle))
    }

    /// `--threads`, else all cores; errors on 0.
    pub fn threads(&self) -> anyhow::Result<usize> {
        match self.threads {
            Some(0) => anyhow::bail!("--threads must be at least 1"),
            Some(n) => Ok(n),
            None => Ok(default_threads()),
        }
    }
}

/// The clock for expiry.
#[derive(Debug, clap::Args)]
pub struct ClockArgs {
    /// The clock for expiry (ISO 8601; default: now). Chunks whose `expires` is at or
    /// before it are left out of results.
    #[arg(long)]
    pub now: Option<String>,
}

impl ClockArgs {
    /// `--now` parsed as ISO 8601, else the system time, in Unix milliseconds.
    pub fn now_ms(&self) -> anyhow::Result<i64> {
        match &self.now {
            Some(s) => jikji_format::time::parse_iso8601_ms(s).ok_or_else(|| {
                anyhow::anyhow!("--now {s:?}: not an ISO 8601 date or date-time (e.g. 2026-11-30 or 2026-11-30T12:00:00Z)")
            }),
            None => Ok(std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0)),
        }
    }
}

/// The tier, language and folder filters of `jikji search` and `jikji eval --bundle`.
#[derive(Debug, clap::Args)]
pub struct FilterArgs {
    /// Only chunks of these tiers: `N` or `A-B` (inclusive; the tier folder's number,
    /// `1. api` → 1). Chunks outside every tier folder are left out. Applied before top-k
    /// is cut, in every mode.
    #[arg(long, value_name = "RANGE")]
    pub tier: Option<String>,
    /// Only chunks in these languages (comma-separated: ko, zh, ja, en, other).
    #[arg(long, value_name = "LANGS")]
    pub lang: Option<String>,
    /// Only chunks whose source file is in this folder or below it (whole path components,
    /// relative to the corpus root: `--folder "1. Gutenberg"`).
    #[arg(long, value_name = "PREFIX")]
    pub folder: Option<String>,
}

impl FilterArgs {
    /// The engine's filters. Errors: a tier range or language that does not parse.
    pub fn filters(&self) -> anyhow::Result<jikji_engine::Filters> {
        Ok(jikji_engine::Filters {
            tier: match &self.tier {
                Some(t) => Some(
                    jikji_engine::Filters::parse_tier(t)
                        .map_err(|e| anyhow::anyhow!("--tier: {e}"))?,
                ),
                None => None,
            },
            langs: match &self.lang {
                Some(l) => jikji_engine::Filters::parse_langs(l)
                    .map_err(|e| anyhow::anyhow!("--lang: {e}"))?,
                None => Vec::new(),
            },
            folder: self.folder.clone(),
        })
    }
}

/// The query-model pack a bundle with vectors carries as pages (`jikji build`, `jikji update`).
#[derive(Debug, clap::Args)]
pub struct PackArgs {
    /// Query-model pack folder (`jikji model-pack`) whose pages the bundle carries for the
    /// browser's query model. Default: the model folder's name + `-pack` beside it
    /// (models/e5-small-pack) when it holds a pack.json; a pack made for another model is
    /// refused.
    #[arg(long, value_name = "DIR", conflicts_with = "no_query_model")]
    pub query_model: Option<PathBuf>,
    /// Write no query-model pages (the browser then has no semantic search for this bundle).
    #[arg(long)]
    pub no_query_model: bool,
}

impl PackArgs {
    /// The pack folder to use for a bundle embedded with `model` (`None`: BM25-only).
    pub fn dir(&self, model: Option<&Path>) -> Option<PathBuf> {
        if self.no_query_model {
            return None;
        }
        let model = model?;
        self.query_model
            .clone()
            .or_else(|| jikji_builder::ingest::default_query_model(model))
    }
}

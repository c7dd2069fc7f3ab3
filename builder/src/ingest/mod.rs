//! The ingest pipeline shared by `jikji build`, `jikji update` and `jikji eval`: typed
//! stages from a corpus folder to a bundle.
//!
//! | stage | function | in → out |
//! |---|---|---|
//! | scan + check | [`scan_corpus`] | corpus folder → [`Scan`]: checked [`SourceFile`]s, findings (strict: errors fail) |
//! | chunk | [`chunk::chunk_files`] | files + [`Chunking`] → [`chunk::Chunked`]: chunk records, parents, sources table |
//! | index | [`index::index`] | records + [`BundleSettings`] → [`index::Indexed`]: `terms.fst`, `postings.bin`, `hanja.fst` |
//! | embed | [`embed::embed_passages`] | chunk texts → passage vectors (through the [`crate::vector_cache`]) |
//! | conflicts | [`annotate_conflicts`] | records + vectors → records noting their contradiction candidates (bundles with vectors) |
//! | calibrate | [`crate::calibrate`] | the bundle's data files (+ embedder) → score calibration |
//! | write | [`write::write_bundle`] | [`write::BundleParts`] → the bundle, atomically; manifest records the settings |
//!
//! [`build`] runs them all on a folder, [`build_files`] on files already read (eval sets);
//! [`crate::update::update`] runs the same stages, taking chunk records and vectors of
//! unchanged files from the old bundle and every [`BundleSettings`] from its manifest
//! ([`BundleSettings::of_manifest`]), so an update equals a full build with the same
//! settings (`builder/tests/update_settings.rs` checks it switch by switch).

pub mod chunk;
pub mod embed;
pub mod import;
pub mod index;
pub mod report;
pub mod write;

use std::path::{Path, PathBuf};
use std::time::Instant;

use jikji_format::analyzer::AnalyzerOptions;
use jikji_format::{Bm25Params, Manifest};

pub use chunk::{chunk_id, Chunking, TokenSizer};
pub use embed::{load_build_embedder, model_info};
pub use report::{print_report, BuildReport};

use crate::chunker::report::Dist;
use crate::chunker::{ChunkParams, Strategy};
use crate::corpus::{quarantine, scan, CheckOptions, Scan, Severity, SourceFile};
use crate::error::{BuildError, Result};
use crate::lang_means::CentringSettings;

/// Every choice that changes a bundle's bytes, recorded in its manifest (`chunking`,
/// `chunk_size`, `overlap`, `analyzer`, `bm25`, `hanja`, `allow_ai_draft`,
/// `model.centring`) so that
/// `jikji update` rebuilds with the same ones. Whether chunks are token-limited follows
/// from whether the bundle is embedded (a model folder), not from these settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BundleSettings {
    /// Chunking strategy (default `hierarchical`).
    pub strategy: Strategy,
    /// Chunk size and overlap in chars (default 512 / 64).
    pub params: ChunkParams,
    /// Analyzer options (the engine analyzes queries the same way).
    pub analyzer: AnalyzerOptions,
    /// Write the Hangul ↔ Hanja reading table (`hanja.fst`) when the corpus has Han or
    /// Hangul text (see [`index::hanja_table`]); `--no-hanja` turns it off.
    pub hanja: bool,
    /// BM25 k1 and b (the engine ranks with them).
    pub bm25: Bm25Params,
    /// Files marked `provenance: ai-draft` are admitted (tagged in results).
    pub allow_ai_draft: bool,
    /// Per-language centring of the vectors ([`crate::lang_means`]); `None` (`--centring
    /// off`) stores them as the model gives them. Only used when the bundle is embedded.
    pub centring: Option<CentringSettings>,
    /// The dense index to write ([`crate::ivf::DenseIndex`], default `auto`).
    pub dense_index: crate::ivf::DenseIndex,
}

impl Default for BundleSettings {
    /// The defaults of `jikji build`: `hierarchical`, 512 / 64 chars, default analyzer,
    /// `hanja.fst` on, BM25 k1 0.7 / b 0.75, no AI drafts, centring `shift` at α = 1.
    fn default() -> Self {
        BundleSettings {
            strategy: Strategy::default(),
            params: ChunkParams::default(),
            analyzer: AnalyzerOptions::default(),
            hanja: true,
            bm25: Bm25Params::default(),
            allow_ai_draft: false,
            centring: Some(CentringSettings::default()),
            dense_index: crate::ivf::DenseIndex::Auto,
        }
    }
}

impl BundleSettings {
    /// The settings a bundle was built with, from its manifest. Manifests from before a
    /// setting was recorded give that setting's default of the time: no `chunking` →
    /// `hierarchical`; analyzer version 1 → the current default options (such a bundle is
    /// rebuilt with the current analyzer); no `hanja` → true; no `allow_ai_draft` → false;
    /// no `model.centring` → no centring (no `model` at all, a BM25-only bundle: the default
    /// centring, which has no effect there). Errors when the manifest names a strategy or
    /// centring this build does not know.
    pub fn of_manifest(m: &Manifest) -> Result<Self> {
        let params = ChunkParams {
            size: m.chunk_size,
            overlap: m.overlap,
        };
        let strategy = match &m.chunking {
            None => Strategy::Hierarchical,
            Some(c) => Strategy::parse(&c.strategy, c.parent_size.unwrap_or(4 * params.size))
                .map_err(BuildError::Chunking)?,
        };
        Ok(BundleSettings {
            strategy,
            params,
            analyzer: if m.analyzer_version >= 2 {
                m.analyzer
            } else {
                AnalyzerOptions::default()
            },
            hanja: m.hanja,
            bm25: m.bm25,
            allow_ai_draft: m.allow_ai_draft,
            dense_index: match m.dense_index.as_deref() {
                None => crate::ivf::DenseIndex::Auto,
                Some(s) => crate::ivf::DenseIndex::parse(s).ok_or_else(|| {
                    BuildError::Ivf(format!("manifest.json: unknown dense_index {s:?}"))
                })?,
            },
            // A bundle without vectors records no centring (it has nothing to centre): it
            // reads as the default, which is what `jikji build` was given unless `--centring`.
            centring: match &m.model {
                None => BundleSettings::default().centring,
                Some(i) => match &i.centring {
                    Some(c) => Some(CentringSettings::of_record(c)?),
                    None => None,
                },
            },
        })
    }
}

/// How a build or update runs: where it reads and writes, the model and cache, threads,
/// progress and the corpus-check policy. What the bundle's bytes depend on is in
/// [`BundleSettings`] instead.
#[derive(Debug, Clone)]
pub struct IngestOptions {
    /// Corpus folder.
    pub corpus: PathBuf,
    /// Bundle folder to write (replaced atomically; the previous one becomes `BUNDLE.prev`).
    pub bundle: PathBuf,
    /// Model folder (`model.onnx`, `tokenizer.json`); `None` builds a BM25-only bundle.
    pub model_dir: Option<PathBuf>,
    /// Embedding cache folder ([`crate::vector_cache`]); `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Embedding threads.
    pub threads: usize,
    /// Show progress bars on stderr.
    pub progress: bool,
    /// Fail on any corpus error instead of leaving the bad files out.
    pub strict: bool,
    /// Copy files with errors into this folder (the originals stay in place).
    pub quarantine: Option<PathBuf>,
    /// The language statistics for centring; `None`: `lang-means.json` in the model folder
    /// ([`crate::lang_means::stats_path`]).
    pub lang_means: Option<PathBuf>,
    /// Import the chunk vectors from this `.npy` file and its `.json` sidecar instead of
    /// embedding them ([`import`]); needs `model_dir` (checked against the sidecar, and
    /// used for the calibration).
    pub vectors: Option<PathBuf>,
    /// The query-model pack folder (`jikji model-pack`) whose pages a bundle with vectors
    /// carries for the browser ([`jikji_query_model::paged::write_pages`]); `None`: none.
    /// The CLI's default is [`default_query_model`].
    pub query_model: Option<PathBuf>,
}

impl IngestOptions {
    /// Options with no model, no cache, one thread, no progress bar, not strict, no
    /// quarantine.
    pub fn new(corpus: impl Into<PathBuf>, bundle: impl Into<PathBuf>) -> Self {
        IngestOptions {
            corpus: corpus.into(),
            bundle: bundle.into(),
            model_dir: None,
            cache_dir: None,
            threads: 1,
            progress: false,
            strict: false,
            quarantine: None,
            lang_means: None,
            vectors: None,
            query_model: None,
        }
    }
}

/// The query-model pack found like the model: the folder beside `model_dir` named after it
/// with `-pack` (`models/e5-small` → `models/e5-small-pack`), when it holds a `pack.json`.
pub fn default_query_model(model_dir: &Path) -> Option<PathBuf> {
    let name = model_dir.file_name()?.to_str()?;
    let dir = model_dir.with_file_name(format!("{name}-pack"));
    dir.join(jikji_query_model::pack::INFO_FILE)
        .is_file()
        .then_some(dir)
}

/// The name of the embedding cache folder when none is given.
pub const CACHE_DIR_NAME: &str = ".jikji-cache";

/// The embedding cache folder used when none is given: [`CACHE_DIR_NAME`] beside the bundle.
pub fn default_cache_dir(bundle: &Path) -> PathBuf {
    bundle
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join(CACHE_DIR_NAME)
}

/// Threads to use when none are given: all cores (1 if unknown).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Scan and check stage: scans `corpus` ([`scan`]) and adds `jikji check`'s expiry
/// warnings by the system clock (`expired`, `bad-expires`); with `strict`, any corpus
/// error fails with [`BuildError::CorpusErrors`] listing the error findings (warnings are
/// not errors).
pub fn scan_corpus(corpus: &Path, check: CheckOptions, strict: bool) -> Result<Scan> {
    let mut scanned = scan(corpus, check)?;
    // What `jikji check` says about `expires` (already expired, or not a date) is worth
    // seeing when the bundle is made, by the system clock.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    scanned
        .findings
        .extend(crate::corpus::expiry_findings(&scanned.files, now, 0));
    if strict && scanned.errors() > 0 {
        return Err(BuildError::CorpusErrors {
            findings: scanned
                .findings
                .into_iter()
                .filter(|f| f.severity == Severity::Error)
                .collect(),
        });
    }
    Ok(scanned)
}

/// [`scan_corpus`] plus the quarantine copies and the "no usable file" check, as `build`
/// and `update` both need. Returns the scan and the quarantined copies.
pub fn checked_corpus(opts: &IngestOptions, check: CheckOptions) -> Result<(Scan, Vec<PathBuf>)> {
    let scanned = scan_corpus(&opts.corpus, check, opts.strict)?;
    let quarantined = match &opts.quarantine {
        Some(dir) => quarantine(&opts.corpus, &scanned.rejected, dir)?,
        None => Vec::new(),
    };
    if scanned.files.is_empty() {
        // Say why each file was left out: an empty folder and a folder of rejected files
        // need different fixes.
        let why: Vec<String> = scanned
            .findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .map(|f| format!("\n  {f}"))
            .collect();
        return Err(BuildError::Corpus {
            path: opts.corpus.clone(),
            message: if why.is_empty() {
                "no usable .md or .txt files".into()
            } else {
                format!(
                    "no usable .md or .txt files: {} left out by the corpus check{}",
                    why.len(),
                    why.concat()
                )
            },
        });
    }
    Ok((scanned, quarantined))
}

/// Builds a bundle at `opts.bundle` from the corpus folder `opts.corpus` with `settings`.
/// The corpus text is dropped once the files are chunked (the chunk records hold what the
/// later stages need), so it is not held with the index and the pages at 1M chunks
/// (`docs/design/scale-1m.md`). Errors: corpus errors with `strict`, no usable file, a
/// missing or broken model, I/O.
pub fn build(opts: &IngestOptions, settings: &BundleSettings) -> Result<BuildReport> {
    let t = Instant::now();
    let check = CheckOptions {
        allow_ai_draft: settings.allow_ai_draft,
    };
    let (scanned, quarantined) = checked_corpus(opts, check)?;
    let mut seconds = vec![("read".to_string(), t.elapsed().as_secs_f64())];
    let Scan {
        files, findings, ..
    } = scanned;
    let chunked = chunk_stage(&files, opts, settings)?;
    drop(files);
    let mut report = build_chunked(chunked, opts, settings)?;
    seconds.append(&mut report.seconds);
    report.seconds = seconds;
    report.findings = findings;
    report.quarantined = quarantined;
    Ok(report)
}

/// Builds a bundle at `opts.bundle` from files already read and checked (`opts.corpus`,
/// `strict` and `quarantine` are not used). A file's `rel` is its source id in the chunk
/// records; an empty `path` means no modification date to fall back on. Versions of one
/// document (see [`crate::versions`]) are all indexed; all but the newest are `archived`.
pub fn build_files(
    files: &[SourceFile],
    opts: &IngestOptions,
    settings: &BundleSettings,
) -> Result<BuildReport> {
    build_chunked(chunk_stage(files, opts, settings)?, opts, settings)
}

/// What [`chunk_stage`] hands to the later stages: the chunks and what the report says of
/// the files (the files themselves are no longer needed).
pub struct ChunkStage {
    chunking: Chunking,
    chunked: chunk::Chunked,
    version_notes: Vec<crate::versions::VersionNote>,
    files: usize,
    corpus_bytes: u64,
    seconds: f64,
    /// CPU seconds from the start of the chunk stage (the build's first lap, `chunk`).
    cpu: report::CpuLaps,
}

/// The chunk stage of a build: versions resolved, every file chunked with `settings`.
pub fn chunk_stage(
    files: &[SourceFile],
    opts: &IngestOptions,
    settings: &BundleSettings,
) -> Result<ChunkStage> {
    let t = Instant::now();
    let cpu = report::CpuLaps::start();
    let chunking = Chunking::new(
        settings.strategy,
        settings.params,
        opts.model_dir.as_deref(),
    )?;
    let versions = crate::versions::resolve(files);
    let version_notes = crate::versions::notes(files, &versions);
    let chunked = chunk::chunk_files(files, &versions, &chunking);
    Ok(ChunkStage {
        chunking,
        chunked,
        version_notes,
        files: files.len(),
        corpus_bytes: files.iter().map(|f| f.text.len() as u64).sum(),
        seconds: t.elapsed().as_secs_f64(),
        cpu,
    })
}

/// The stages after chunking (index, embed, conflicts, calibrate, write) of a build.
fn build_chunked(
    stage: ChunkStage,
    opts: &IngestOptions,
    settings: &BundleSettings,
) -> Result<BuildReport> {
    let ChunkStage {
        chunking,
        mut chunked,
        version_notes,
        files,
        corpus_bytes,
        seconds: chunk_seconds,
        mut cpu,
    } = stage;
    let mut seconds = Vec::new();
    let t = Instant::now();
    let mut chunk_chars: Vec<usize> = chunked
        .records
        .iter()
        .map(|r| r.text.chars().count())
        .collect();
    let chunk_chars = Dist::of(&mut chunk_chars);
    seconds.push((
        "chunk".to_string(),
        chunk_seconds + t.elapsed().as_secs_f64(),
    ));
    cpu.lap("chunk");

    let t = Instant::now();
    let indexed = index::index(&chunked.records, settings)?;
    let terms = indexed.terms;
    seconds.push(("index".to_string(), t.elapsed().as_secs_f64()));
    cpu.lap("index");

    let t = Instant::now();
    let mut embedder = None;
    let mut embedded = None;
    let mut imported = 0;
    let texts: Vec<&str> = chunked.records.iter().map(|r| r.text.as_str()).collect();
    let sources: Vec<&str> = chunked.records.iter().map(|r| r.source.as_str()).collect();
    match (&opts.model_dir, &opts.vectors) {
        (Some(dir), Some(npy)) => {
            let im = import::import_vectors(npy, &chunked.records, dir)?;
            imported = im.embedded.vectors.len();
            embedded = Some(embed::pack_vectors(
                im.embedded,
                &texts,
                &sources,
                dir,
                opts,
                settings.centring,
            )?);
        }
        (Some(dir), None) => {
            embedded = Some(embed::embed_vectors(
                &texts,
                &sources,
                dir,
                opts,
                settings.centring,
                &mut embedder,
            )?);
        }
        (None, Some(npy)) => {
            return Err(BuildError::InvalidInput {
                path: npy.clone(),
                line: None,
                message: "importing vectors needs the model folder (--model DIR): its SHA-256 is checked and the calibration embeds queries with it".into(),
            })
        }
        (None, None) => {}
    }
    seconds.push(("embed".to_string(), t.elapsed().as_secs_f64()));
    cpu.lap("embed");

    let t = Instant::now();
    let conflicts = match &embedded {
        Some(e) => Some(annotate_conflicts(&mut chunked.records, &e.vectors_bin)?),
        None => None,
    };
    seconds.push(("conflicts".to_string(), t.elapsed().as_secs_f64()));
    cpu.lap("conflicts");

    let t = Instant::now();
    if let (Some(dir), None) = (&opts.model_dir, &embedder) {
        embedder = Some(crate::encoder::Encoder::load(
            dir,
            &model_info(dir)?.sha256,
        )?);
    }
    let calibrated = crate::calibrate::calibrate_with_queries(
        &indexed.terms_fst,
        &indexed.postings,
        jikji_format::chunks::write_chunks(&chunked.records)?,
        embedded.as_ref().map(|e| e.vectors_bin.clone()),
        embedder.as_ref(),
        embedded.as_ref().and_then(|e| e.model.centring.as_ref()),
        opts.threads,
        settings.analyzer,
        settings.bm25,
    )?;
    seconds.push(("calibrate".to_string(), t.elapsed().as_secs_f64()));
    cpu.lap("calibrate");

    let t = Instant::now();
    let (tokens, truncated, cached, embedded_now, chunk_tokens) = match &embedded {
        Some(e) => (
            e.stats.tokens,
            e.stats.truncated,
            e.stats.cached,
            e.stats.embedded,
            Some(Dist::of(&mut e.stats.per_text.clone())),
        ),
        None => (0, 0, 0, 0, None),
    };
    let (_, file_bytes, pages) = write::write_bundle(
        &opts.bundle,
        write::BundleParts {
            records: &chunked.records,
            parents: &chunked.parents,
            chunking: chunking.info(chunked.parents.len()),
            indexed,
            vectors: embedded.map(|e| (e.model, e.vectors_bin)),
            sources: chunked.sources,
            calibration: calibrated.calibration,
            probe_queries: &calibrated.query_vectors,
            settings: *settings,
            query_model: opts.query_model.as_deref(),
            threads: opts.threads,
            previous: None,
            kept_index: None,
            kept_chosen_by: None,
            refit_note: None,
            row_map: jikji_query_model::paged::RowMapChoice::Count,
        },
    )?;
    seconds.push(("write".to_string(), t.elapsed().as_secs_f64()));
    cpu.lap("write");
    seconds.extend(pages.seconds);
    Ok(BuildReport {
        files,
        findings: Vec::new(),
        quarantined: Vec::new(),
        corpus_bytes,
        strategy: chunking.strategy.name().to_string(),
        chunks: chunked.records.len(),
        parents: chunked.parents.len(),
        chunk_chars,
        chunk_tokens,
        terms,
        tokens,
        truncated,
        cached,
        embedded: embedded_now,
        imported,
        seconds,
        cpu_seconds: cpu.laps,
        file_bytes,
        versions: version_notes,
        conflicts,
    })
}

/// Conflicts stage: records on the chunks the contradiction candidates among them
/// ([`crate::conflicts::annotate`]), from the bundle's `vectors.bin` bytes; returns the
/// pairs found. Errors only if the vector bytes are corrupt.
pub fn annotate_conflicts(
    records: &mut [jikji_format::ChunkRecord],
    vectors_bin: &[u8],
) -> Result<usize> {
    let v = jikji_format::vectors::Vectors::open(vectors_bin)?;
    let flat = crate::dedup::FlatVectors::from_vectors(&v);
    Ok(crate::conflicts::annotate(records, &flat))
}

//! The ingest pipeline shared by `jikji build`, `jikji update` and `jikji eval`: typed
//! stages from a corpus folder to a bundle.
//!
//! | stage | function | in → out |
//! |---|---|---|
//! | scan + check | [`scan_corpus`] | corpus folder → [`Scan`]: checked [`SourceFile`]s, findings (strict: errors fail) |
//! | chunk + index | [`chunk_stage`] | files + [`BundleSettings`] → [`ChunkStage`]: `chunks.bin` and [`index::Indexed`] (`terms.fst`, `postings.bin`, `hanja.fst`), streamed through a temporary folder ([`Spill`]), the sources table |
//! | embed | [`embed::embed_passages`] | chunk texts → passage vectors (through the [`crate::vector_cache`]) |
//! | conflicts | [`annotate_conflicts`] | records + vectors → records noting their contradiction candidates (bundles with vectors) |
//! | calibrate | [`crate::calibrate`] | the bundle's data files (+ embedder) → score calibration |
//! | write | [`write::write_bundle`] | [`write::BundleParts`] → the bundle, atomically; manifest records the settings |
//!
//! [`build`] runs them all on a folder, [`build_files`] on files already read (eval sets);
//! a build holds one window of chunk records at a time, never the corpus's
//! (`docs/design/scale-1m.md` "Streamed build"). [`crate::update::update`] indexes the
//! records it holds with [`index::index`] and runs the same later stages, taking chunk records and vectors of
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
    /// Bytes of postings a build holds before it writes a sorted run to its temporary
    /// folder ([`index::PostingsWriter::with_spill`]; default [`POSTINGS_BUDGET`]). The
    /// bundle's bytes do not depend on it.
    pub index_budget: usize,
}

impl IngestOptions {
    /// Options with no model, no cache, one thread, no progress bar, not strict, no
    /// quarantine, the default index budget.
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
            index_budget: POSTINGS_BUDGET,
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
        // Each body is read again when it is chunked ([`chunk::chunk_windows`]).
        drop_bodies: true,
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

/// A build's temporary folder beside the bundle (`.jikji-build-*`, removed when dropped):
/// the chunk store and postings are written there as the corpus is chunked and indexed and
/// read back mapped ([`jikji_format::bytes::Bytes::map`]), so a build holds neither in
/// memory (`docs/design/scale-1m.md` "Streamed build").
pub struct Spill {
    dir: tempfile::TempDir,
    /// `.lock` in the folder, locked exclusively while the build runs (released when the
    /// process ends, however it ends): how a later build tells a folder left by a killed
    /// build from one in use ([`Spill::beside`]).
    _lock: std::fs::File,
}

/// The prefix of a build's temporary folder ([`Spill`]).
const SPILL_PREFIX: &str = ".jikji-build-";

impl Spill {
    /// A new temporary folder in the bundle's parent folder (the same file system as the
    /// bundle), after removing the `.jikji-build-*` folders there that a killed build left
    /// (their `.lock` file not locked by any process; folders without one, or in use, are
    /// left alone). Errors: I/O, naming the parent folder or the file.
    pub fn beside(bundle: &Path) -> Result<Spill> {
        let parent = bundle
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| BuildError::io("creating", parent, e))?;
        for stale in stale_spills(parent) {
            match std::fs::remove_dir_all(&stale) {
                Ok(()) => eprintln!(
                    "note: removed {}, left by an interrupted build",
                    stale.display()
                ),
                Err(e) => eprintln!(
                    "warning: could not remove {}, left by an interrupted build: {e}",
                    stale.display()
                ),
            }
        }
        let dir = tempfile::Builder::new()
            .prefix(SPILL_PREFIX)
            .tempdir_in(parent)
            .map_err(|e| BuildError::io("creating a temporary folder in", parent, e))?;
        // Locked, then written (this process's id): a sweep takes a folder for stale only
        // when it can lock a non-empty `.lock`, so a build between creating and locking it
        // (an empty file) is never swept by another starting at the same moment.
        let lock_path = dir.path().join(".lock");
        let lock = std::fs::File::create(&lock_path)
            .and_then(|mut f| {
                f.lock()?;
                std::io::Write::write_all(&mut f, std::process::id().to_string().as_bytes())?;
                Ok(f)
            })
            .map_err(|e| BuildError::io("locking", &lock_path, e))?;
        Ok(Spill { dir, _lock: lock })
    }

    /// The folder.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Creates (or truncates) the file `name` in the folder, readable and writable.
    pub fn create(&self, name: &str) -> Result<std::fs::File> {
        let path = self.dir.path().join(name);
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(|e| BuildError::io("creating", &path, e))
    }

    /// Maps the file `file` (created by [`Spill::create`] as `name`, fully written).
    fn map(&self, file: &std::fs::File, name: &str) -> Result<jikji_format::bytes::Bytes> {
        jikji_format::bytes::Bytes::map(file)
            .map_err(|e| BuildError::io("mapping", self.dir.path().join(name), e))
    }
}

/// The `.jikji-build-*` folders of `parent` whose `.lock` no process holds and is not empty:
/// left by a build that was killed (a build's lock is released with its process). A folder
/// without a `.lock`, or with an empty one (being created, or left by a build from before
/// the locks), is not listed.
fn stale_spills(parent: &Path) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(SPILL_PREFIX))
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .filter(|p| {
            std::fs::OpenOptions::new()
                .write(true)
                .open(p.join(".lock"))
                .is_ok_and(|f| f.try_lock().is_ok() && f.metadata().is_ok_and(|m| m.len() > 0))
        })
        .collect()
}

/// Bytes of postings a build holds in memory by default before it writes a sorted run to
/// its temporary folder ([`IngestOptions::index_budget`]).
pub const POSTINGS_BUDGET: usize = 256 << 20;

/// What [`chunk_stage`] hands to the later stages: the chunk store and the lexical index,
/// both written to the build's temporary folder, and what the report says of the files
/// (the files themselves are no longer needed).
pub struct ChunkStage {
    chunking: Chunking,
    /// `chunks.bin` (indexed chunks, then parents), mapped from the temporary folder.
    chunks: jikji_format::bytes::Bytes,
    /// Indexed chunks (the parents follow them in `chunks`).
    n_chunks: usize,
    parents: usize,
    sources: Vec<jikji_format::SourceEntry>,
    indexed: index::Indexed,
    /// Sorted runs the postings spilled ([`BuildReport::postings_runs`]).
    postings_runs: usize,
    chunk_chars: Vec<usize>,
    version_notes: Vec<crate::versions::VersionNote>,
    files: usize,
    corpus_bytes: u64,
    /// Wall seconds of chunking and of indexing (the two alternate window by window).
    seconds: (f64, f64),
    /// CPU seconds of the same two.
    cpu_seconds: (f64, f64),
    cpu: report::CpuLaps,
    /// Holds the temporary files (removed when dropped, after the write).
    spill: Spill,
}

/// The chunk and index stages of a build, streamed: versions resolved, the files chunked
/// with `settings` a window at a time ([`chunk::chunk_windows`]), each window's records
/// written to the temporary chunk store and analyzed into the postings (which spill sorted
/// runs past [`IngestOptions::index_budget`]), so the peak memory is one window of records, the
/// postings budget and the term keys, not the corpus's records. Errors: the model's
/// tokenizer, I/O on the temporary folder.
pub fn chunk_stage(
    files: &[SourceFile],
    opts: &IngestOptions,
    settings: &BundleSettings,
) -> Result<ChunkStage> {
    let cpu = report::CpuLaps::start();
    let cpu0 = report::cpu_seconds();
    let t = Instant::now();
    let chunking = Chunking::new(
        settings.strategy,
        settings.params,
        opts.model_dir.as_deref(),
    )?;
    let versions = crate::versions::resolve(files);
    let version_notes = crate::versions::notes(files, &versions);
    let spill = Spill::beside(&opts.bundle)?;
    let mut store = jikji_format::chunks::ChunksFileWriter::new(
        spill.create("records.tmp")?,
        spill.create("parents.tmp")?,
        spill.path().join("records.tmp"),
    );
    let analyzer = jikji_format::analyzer::Analyzer::new(
        jikji_format::analyzer::ANALYZER_VERSION,
        settings.analyzer,
    )?;
    let runs = spill.path().join("runs");
    std::fs::create_dir_all(&runs).map_err(|e| BuildError::io("creating", &runs, e))?;
    let mut postings = index::PostingsWriter::with_spill(opts.index_budget, runs);
    let mut chars = index::ScriptChars::default();
    let mut chunk_chars = Vec::new();
    let mut sources = Vec::with_capacity(files.len());
    // Each chunk's parent (an index into the parents), for its `parent_doc`.
    let mut parent_of: Vec<Option<u32>> = Vec::new();
    let (mut wall, mut cpu_s) = (
        (t.elapsed().as_secs_f64(), 0.0),
        (report::cpu_seconds() - cpu0, 0.0),
    );
    let mut at = (Instant::now(), report::cpu_seconds());
    chunk::chunk_windows(files, &versions, &chunking, |range, window| {
        let lap = |at: &mut (Instant, f64), w: &mut f64, c: &mut f64| {
            let now = (Instant::now(), report::cpu_seconds());
            *w += now.0.duration_since(at.0).as_secs_f64();
            *c += now.1 - at.1;
            *at = now;
        };
        lap(&mut at, &mut wall.0, &mut cpu_s.0);
        let mut records = Vec::new();
        for (i, fc) in range.zip(window) {
            sources.push(chunk::source_entry(
                &files[i],
                &versions[i],
                fc.chunks.len(),
            ));
            let first = store.parents();
            for p in &fc.parents {
                store.push_parent(p)?;
            }
            for (c, p) in fc.chunks.iter().zip(&fc.parent_of) {
                parent_of.push(p.map(|j| (first + j) as u32));
                chunk_chars.push(c.text.chars().count());
                store.push(c)?;
            }
            records.extend(fc.chunks);
        }
        lap(&mut at, &mut wall.0, &mut cpu_s.0);
        if settings.hanja {
            for r in &records {
                chars.add(&analyzer, &r.text);
            }
        }
        for batch in records.chunks(index::ANALYZE_BATCH) {
            for terms in index::analyze_records(batch, &analyzer) {
                postings.add_doc(&terms);
            }
        }
        lap(&mut at, &mut wall.1, &mut cpu_s.1);
        Ok::<(), BuildError>(())
    })?;
    let n_chunks = store.len();
    let parents = store.parents();
    // The chunk store, each chunk with a parent given its doc id (parents follow the chunks).
    let chunks_file = store.finish(
        spill.create("chunks.bin")?,
        &mut |doc, json| match parent_of.get(doc as usize).copied().flatten() {
            Some(p) => {
                let mut r: jikji_format::ChunkRecord =
                    serde_json::from_slice(json).map_err(|source| {
                        jikji_format::FormatError::Json {
                            file: "chunks.bin".into(),
                            source,
                        }
                    })?;
                r.parent_doc = Some(n_chunks as u32 + p);
                Ok(Some(jikji_format::chunks::record_json(&r)?))
            }
            None => Ok(None),
        },
    )?;
    drop(parent_of);
    let chunks = spill.map(&chunks_file, "chunks.bin")?;
    let t_write = (Instant::now(), report::cpu_seconds());
    wall.0 += t_write.0.duration_since(at.0).as_secs_f64();
    cpu_s.0 += t_write.1 - at.1;
    let postings_runs = postings.num_runs();
    let postings_file = spill.create("postings.bin")?;
    let (terms_fst, terms, postings_file) =
        postings.finish_to(std::io::BufWriter::with_capacity(1 << 20, postings_file))?;
    let postings_file = postings_file.into_inner().map_err(|e| {
        BuildError::io("writing", spill.path().join("postings.bin"), e.into_error())
    })?;
    let hanja = if settings.hanja {
        index::hanja_table_of(&chars, &analyzer)?
    } else {
        None
    };
    let indexed = index::Indexed {
        terms_fst,
        postings: spill.map(&postings_file, "postings.bin")?,
        terms,
        hanja,
    };
    wall.1 += t_write.0.elapsed().as_secs_f64();
    cpu_s.1 += report::cpu_seconds() - t_write.1;
    Ok(ChunkStage {
        chunking,
        chunks,
        n_chunks,
        parents,
        sources,
        indexed,
        postings_runs,
        chunk_chars,
        version_notes,
        files: files.len(),
        corpus_bytes: files.iter().map(SourceFile::len).sum(),
        seconds: wall,
        cpu_seconds: cpu_s,
        cpu,
        spill,
    })
}

/// The stages after chunking and indexing (embed, conflicts, calibrate, write) of a build.
fn build_chunked(
    stage: ChunkStage,
    opts: &IngestOptions,
    settings: &BundleSettings,
) -> Result<BuildReport> {
    let ChunkStage {
        chunking,
        mut chunks,
        n_chunks,
        parents,
        sources,
        indexed,
        postings_runs,
        mut chunk_chars,
        version_notes,
        files,
        corpus_bytes,
        seconds: (chunk_seconds, index_seconds),
        cpu_seconds: (chunk_cpu, index_cpu),
        mut cpu,
        spill,
    } = stage;
    let mut seconds = vec![
        ("chunk".to_string(), chunk_seconds),
        ("index".to_string(), index_seconds),
    ];
    let chunk_chars = Dist::of(&mut chunk_chars);
    cpu.measured("chunk", chunk_cpu);
    cpu.measured("index", index_cpu);
    let terms = indexed.terms;

    let t = Instant::now();
    let mut embedder = None;
    let mut embedded = None;
    let mut imported = 0;
    // The embedding and conflict stages need every chunk's record: read back from the
    // store (a BM25-only build never holds them).
    let mut records: Vec<jikji_format::ChunkRecord> = Vec::new();
    if opts.model_dir.is_some() || opts.vectors.is_some() {
        let store = jikji_format::chunks::ChunkStore::open(chunks.clone())?;
        records = (0..n_chunks as u32)
            .map(|d| store.get(d))
            .collect::<std::result::Result<_, _>>()?;
    }
    let texts: Vec<&str> = records.iter().map(|r| r.text.as_str()).collect();
    let srcs: Vec<&str> = records.iter().map(|r| r.source.as_str()).collect();
    match (&opts.model_dir, &opts.vectors) {
        (Some(dir), Some(npy)) => {
            let im = import::import_vectors(npy, &records, dir)?;
            imported = im.embedded.vectors.len();
            embedded = Some(embed::pack_vectors(
                im.embedded,
                &texts,
                &srcs,
                dir,
                opts,
                settings.centring,
            )?);
        }
        (Some(dir), None) => {
            embedded = Some(embed::embed_vectors(
                &texts,
                &srcs,
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
    drop((texts, srcs));
    seconds.push(("embed".to_string(), t.elapsed().as_secs_f64()));
    cpu.lap("embed");

    let t = Instant::now();
    let conflicts = match &embedded {
        Some(e) => {
            let found = annotate_conflicts(&mut records, &e.vectors_bin)?;
            if records.iter().any(|r| !r.conflicts.is_empty()) {
                // The notes go into the records: the store is written again (in memory,
                // as a bundle with vectors holds its records here anyway).
                let store = jikji_format::chunks::ChunkStore::open(chunks.clone())?;
                let parent_records = (n_chunks..n_chunks + parents)
                    .map(|d| store.get(d as u32))
                    .collect::<std::result::Result<Vec<_>, _>>()?;
                records.extend(parent_records);
                chunks = jikji_format::chunks::write_chunks(&records)?.into();
            }
            Some(found)
        }
        None => None,
    };
    drop(records);
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
        chunks.clone(),
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
            chunks,
            n_chunks,
            chunking: chunking.info(parents),
            indexed,
            vectors: embedded.map(|e| (e.model, e.vectors_bin)),
            sources,
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
    drop(spill);
    seconds.push(("write".to_string(), t.elapsed().as_secs_f64()));
    cpu.lap("write");
    seconds.extend(pages.seconds);
    Ok(BuildReport {
        files,
        findings: Vec::new(),
        quarantined: Vec::new(),
        corpus_bytes,
        strategy: chunking.strategy.name().to_string(),
        chunks: n_chunks,
        parents,
        chunk_chars,
        chunk_tokens,
        terms,
        postings_runs,
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

//! The eval runner: builds a bundle from an eval set's corpus with the ingest pipeline,
//! runs every judged query per mode and fusion, and reports metrics, latency and the
//! calibration check ([`run`]). `jikji eval` prints its [`EvalReport`].

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use jikji_engine::{Engine, Expansion, Fusion, Mode, SearchOptions};
use serde::Serialize;

use super::{
    bands, ece, load_queries, mean, metrics, percentile, protocol_checks, Band, EvalSet, Metrics,
    ProtocolCheck,
};
use crate::corpus::{FrontMatter, SourceFile};
use crate::error::{BuildError, Result};
use crate::ingest::{build_files, load_build_embedder, BundleSettings, IngestOptions};
use crate::vector_cache::{cache_key, CacheEntry, VectorCache};
use jikji_embed::Prefix;

/// What `jikji eval` runs.
#[derive(Debug, Clone)]
pub struct EvalOptions {
    /// Ranking modes, in order; dense and hybrid embed the whole corpus first.
    pub modes: Vec<Mode>,
    /// Fusions evaluated for [`Mode::Hybrid`], each a row.
    pub fusions: Vec<Fusion>,
    /// Model folder (for dense and hybrid).
    pub model: PathBuf,
    /// Embedding cache folder ([`crate::vector_cache`]).
    pub cache: PathBuf,
    /// Embedding threads.
    pub threads: usize,
    /// Evaluate only the first N judged queries.
    pub limit: Option<usize>,
    /// Queries file used instead of the set's `queries.jsonl`.
    pub queries: Option<PathBuf>,
    /// Every query counts as having no answer in the corpus (another set's queries).
    pub unanswerable: bool,
    /// Write a TREC run file (`qid Q0 docid rank score jikji-MODE`; spaces and `%` in a
    /// docid, as in a bundle's source paths, written `%20` and `%25`).
    pub run: Option<PathBuf>,
    /// Write every query's top 30 hits as JSON lines, for score-calibration studies: one
    /// line per query and mode, `{"mode", "qid", "q", "nrel", "hits": [[docid, score,
    /// raw_score, source, grade, coverage], …]}` (score calibrated in [0, 1], raw_score the
    /// ranker's own, grade from the qrels, 0 when unjudged; coverage `[terms, idf,
    /// unknown]`, the shares of [`jikji_engine::scores::Coverage`], or `null` where the
    /// engine gives none (a dense search through a dense index, parent-child bundles);
    /// duplicates of a docid left out as in the metrics).
    pub hits_out: Option<PathBuf>,
    /// Show progress bars on stderr while building.
    pub progress: bool,
    /// Chunking, analyzer, BM25 and centring settings of the bundle built from the corpus.
    pub settings: BundleSettings,
    /// The language statistics for the centring (`None`: the model folder's).
    pub lang_means: Option<PathBuf>,
    /// Query expansion weights.
    pub expansion: Expansion,
    /// The clock for expiry filtering, in ms since the Unix epoch (`None`: none). An eval
    /// set's own corpus has no `expires`; an existing bundle's files may.
    pub now_ms: Option<i64>,
    /// Hits of this tier win ties ([`jikji_engine::Engine::set_prefer_tier`]).
    pub prefer_tier: Option<u32>,
    /// Tier, language and folder filters ([`jikji_engine::Engine::set_filters`]).
    pub filters: jikji_engine::Filters,
    /// Query-model pack folder (`jikji model-pack`): dense and hybrid queries are embedded
    /// by it ([`crate::query_model::PackEmbedder`], the browser's code) instead of tract;
    /// the corpus is still embedded with `model`.
    pub query_model: Option<PathBuf>,
    /// Dense index lists per dense query (`None`: the bundle's `nprobe`).
    pub nprobe: Option<usize>,
    /// Oversampling of a binary index's rescoring (`None`: the bundle's `rescore`).
    pub rescore: Option<usize>,
}

/// Chunks the dense-index comparison asks for ([`IndexRow`]): a visitor's top 10 plus the
/// duplicates of documents; the eval's own rows ask 300 (documents for R@100), which
/// through the index would scan lists until 300 chunks are found.
pub const COMPARE_DEPTH: usize = 30;

/// A dense or hybrid ranking through the bundle's dense index, against the exact scan of
/// the same bundle in the same run (every query cold: the page cache emptied before it).
#[derive(Debug, Clone, Serialize)]
pub struct IndexRow {
    /// Lists of the index.
    pub nlist: usize,
    /// Lists a query starts with (scans more when filters leave fewer than asked).
    pub nprobe: usize,
    /// How the builder chose the bundle's default `nprobe` (`pages.ivf.nprobe_from`).
    pub nprobe_from: Option<String>,
    /// What the lists hold (`int8` or `binary`).
    pub codes: String,
    /// The oversampling of a binary index's rescoring (0 for int8 lists).
    pub rescore: usize,
    /// Bytes of list pages per chunk of the bundle (all `j` pages / chunks, as stored).
    pub list_bytes_per_vector: f64,
    /// Mean bytes of the int8 row pages (`i`) a binary index's rescoring reads per query.
    pub row_bytes_mean: f64,
    /// Mean over the queries of |top-10 chunks ∩ exact top-10| / |exact top-10|.
    pub recall_10_vs_exact: f64,
    /// Metrics through the index, documents ranked from the first [`COMPARE_DEPTH`] chunks
    /// (nDCG@10 and MRR@10 are what a visitor's top 10 gets; R@100 is cut by the depth).
    pub index: Metrics,
    /// The exact scan's metrics on the same queries, at the same depth.
    pub exact: Metrics,
    /// Mean bytes of list pages (`j`) per query, as stored (= transferred).
    pub list_bytes_mean: f64,
    /// Bytes of the centroid (`g`) and background sample (`w`) pages, fetched once.
    pub centroid_bytes: u64,
    /// Bytes of the vector pages (`v`) the exact scan reads per query.
    pub exact_vector_bytes: u64,
    /// Median rounds after the entry of a cold query through the index.
    pub rounds_median: f64,
    /// Median query time in ms through the index / with the exact scan (cold cache: page
    /// reads from disk included, query embedding excluded).
    pub median_ms: f64,
    /// The exact scan's median ms.
    pub exact_median_ms: f64,
}

/// One evaluated ranking: a mode (and fusion, for hybrid).
#[derive(Debug, Clone, Serialize)]
pub struct ModeRow {
    /// `bm25`, `dense`, `hybrid-rrf` or `hybrid-wW`.
    pub mode: String,
    /// Mean metrics over the judged queries (0 in unanswerable runs).
    pub metrics: Metrics,
    /// Median query latency in ms (query embedding excluded).
    pub median_ms: f64,
    /// 95th percentile latency in ms.
    pub p95_ms: f64,
    /// Top-1 results per calibrated score band and how many were relevant.
    pub top1_bands: Vec<Band>,
    /// Top-1 expected calibration error (10 bins).
    pub top1_ece: f64,
    /// The readers' protocol checks on the top-1 bands and ECE (issue 19's targets;
    /// [`protocol_checks`]).
    pub protocol: Vec<ProtocolCheck>,
    /// Queries with no hit at all.
    pub no_hit: usize,
    /// Through the bundle's dense index: recall against the exact scan, bytes, rounds
    /// (dense and hybrid rows of a bundle with one).
    pub dense_index: Option<IndexRow>,
}

/// What [`run`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    /// The eval set folder.
    pub set: PathBuf,
    /// The bundle evaluated ([`run_bundle`]); `None` when the eval built its own from
    /// `corpus.jsonl` ([`run`]).
    pub bundle: Option<PathBuf>,
    /// The queries file, if not the set's own.
    pub queries_file: Option<PathBuf>,
    /// Whether every query counted as unanswerable.
    pub unanswerable: bool,
    /// Documents in the corpus ([`run_bundle`]: files in the bundle's sources table).
    pub documents: usize,
    /// Queries evaluated.
    pub queries: usize,
    /// BM25 parameters of the bundle.
    pub bm25: jikji_format::Bm25Params,
    /// Analyzer options of the bundle.
    pub analyzer: jikji_format::analyzer::AnalyzerOptions,
    /// Chunk size in chars.
    pub chunk_size: usize,
    /// Overlap in chars.
    pub overlap: usize,
    /// Query expansion weights.
    pub expansion: ExpansionReport,
    /// Chunks indexed.
    pub chunks: usize,
    /// How the bundle's dense index was chosen (its manifest's `dense_index_chosen_by`:
    /// `auto`'s cost model, or forced); `None` without vectors or for older bundles.
    pub dense_index_chosen_by: Option<String>,
    /// Bundle bytes (all files the manifest lists).
    pub bundle_bytes: u64,
    /// Seconds to build the bundle ([`run_bundle`]: to open it and load the model).
    pub build_s: f64,
    /// Seconds per build phase (chunk+index, embed, conflicts, calibrate, write); empty
    /// for [`run_bundle`].
    pub build_phases: Vec<(String, f64)>,
    /// Whether the bundle has a score calibration.
    pub calibrated: bool,
    /// The calibration block of the manifest.
    pub calibration: Option<jikji_format::Calibration>,
    /// The dense centring of the bundle (`model.centring` of the manifest, without its
    /// offsets): `query-side α=A prior=K|none stats=<sha256 prefix>`, or `None` (off, or no
    /// vectors).
    pub centring: Option<String>,
    /// Median query-embedding time in ms (NaN, `null` in JSON, without dense/hybrid).
    pub query_embed_median_ms: f64,
    /// One row per ranking.
    pub modes: Vec<ModeRow>,
    /// Things the run left out that the user should know (qrels query ids that no query
    /// has); printed first by [`Self::to_text`].
    pub warnings: Vec<String>,
    /// Readers'-protocol checks over all rows ([`ModeRow::protocol`]), and how many of them
    /// were missed (`jikji eval --fail-on-miss` exits 1 when this is not 0).
    pub protocol_checks: usize,
    /// Of [`Self::protocol_checks`], the missed ones.
    pub protocol_missed: usize,
}

/// Query expansion weights as reported.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ExpansionReport {
    /// Prefix expansion weight.
    pub prefix: f32,
    /// Typo expansion weight.
    pub fuzzy: f32,
    /// Hangul ↔ Hanja expansion weight.
    pub hanja: f32,
    /// Korean query-word normalisation exponent.
    pub hangul_norm: f32,
}

/// Runs an eval set (`dir` with `corpus.jsonl`, `queries.jsonl`, `qrels.tsv`): builds a
/// bundle from the corpus (one file per document, `title` as front matter) in a temp
/// folder, evaluates every judged query (or, `unanswerable`, every query as unanswered)
/// for each mode and fusion, documents ranked by their best chunk (top 100 documents from
/// 300 chunks). Errors: the set cannot be read, the queries file does not match the run
/// (judged queries without `unanswerable`, none with it), the model is missing, I/O.
pub fn run(dir: &Path, o: &EvalOptions) -> Result<EvalReport> {
    let mut set = EvalSet::load(dir)?;
    if let Some(q) = &o.queries {
        set.queries = load_queries(q)?;
    }
    let warnings = check_judged(&set, o, dir)?;
    let needs_model = o.modes.iter().any(|m| *m != Mode::Bm25);
    let files: Vec<SourceFile> = set
        .corpus
        .iter()
        .map(|d| SourceFile {
            path: PathBuf::new(),
            rel: d.id.clone(),
            tier: None,
            text: d.body(),
            body_byte: 0,
            body_char: 0,
            source_url: None,
            front: FrontMatter {
                title: (!d.title.is_empty()).then(|| d.title.clone()),
                ..FrontMatter::default()
            },
            dropped: None,
        })
        .collect();
    let out = std::env::temp_dir().join(format!("jikji-eval-{}", std::process::id()));
    let ingest = IngestOptions {
        model_dir: needs_model.then(|| o.model.clone()),
        cache_dir: Some(o.cache.clone()),
        threads: o.threads,
        progress: o.progress,
        lang_means: o.lang_means.clone(),
        ..IngestOptions::new(dir, &out)
    };
    let t = Instant::now();
    let built = build_files(&files, &ingest, &o.settings)?;
    let build_s = t.elapsed().as_secs_f64();
    // Read whole (every page, verified): the folder is removed right after. Paged and
    // whole reads answer identically (engine-wasm/tests/compat_v2.rs). A bundle with a
    // dense index is read paged (the index is read through the page cache), and the
    // folder removed after the queries.
    let has_index = built_has_index(&out);
    let opened: Result<Engine> = if has_index {
        Engine::open_dir_paged(&out).map_err(Into::into)
    } else {
        jikji_format::Bundle::open_dir(&out)
            .map(Engine::new)
            .map_err(Into::into)
    };
    let bytes: u64 = walkdir::WalkDir::new(&out)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    // All list pages (`p/j-*`, as stored) per chunk: the index's bytes per vector.
    let list_bytes: u64 = std::fs::read_dir(out.join("p"))
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("j-"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    if !has_index {
        let _ = std::fs::remove_dir_all(&out);
    }
    let measured = opened.and_then(|mut engine| {
        if needs_model && o.query_model.is_none() {
            engine.set_embedder(load_build_embedder(&o.model)?);
        }
        engine.set_nprobe(o.nprobe);
        engine.set_rescore(o.rescore);
        let m = evaluate(&mut engine, &mut set, o, |h| h.source.clone())?;
        Ok((m, engine))
    });
    let _ = std::fs::remove_dir_all(&out);
    let (mut measured, engine) = measured?;
    let m = engine.bundle().manifest();
    for r in &mut measured.rows {
        if let Some(i) = r.dense_index.as_mut() {
            i.list_bytes_per_vector = list_bytes as f64 / m.counts.chunks.max(1) as f64;
        }
    }
    Ok(EvalReport {
        documents: set.corpus.len(),
        chunks: built.chunks,
        bundle_bytes: bytes,
        build_s,
        build_phases: built.seconds.clone(),
        warnings,
        ..report(dir, o, m, measured)
    })
}

/// True if the bundle folder `dir` has a dense index (`pages.ivf` in its entry).
fn built_has_index(dir: &Path) -> bool {
    std::fs::read(dir.join(jikji_format::paged::ENTRY_FILE))
        .ok()
        .and_then(|b| jikji_format::Manifest::parse(&b).ok())
        .and_then(|m| m.pages)
        .is_some_and(|p| p.ivf.is_some())
}

/// Evaluates an existing bundle (`jikji eval --bundle BUNDLE DIR`): `dir` holds
/// `queries.jsonl` and `qrels.tsv` (no corpus), whose document column names a source path
/// of the bundle (`2. mobile/ios-requirements.md`, as in search results) or a `doc_id` (the
/// versions of one document, front matter `doc_id` or the file name without its version
/// suffix). The bundle is searched as `jikji search` does: archived versions left out, files
/// whose `expires` is at or before `o.now_ms` left out, AI drafts present only if the bundle
/// admitted them, so what is measured is what its users get. A hit counts for a qrels name
/// that equals its `source`, else its `doc_id`; documents rank by their best chunk.
///
/// With `o.unanswerable`, `qrels.tsv` may be missing (no query has an answer), and the
/// queries are `o.queries` or else `DIR/queries.jsonl`.
///
/// Errors: a qrels name that is neither a source path nor a doc_id of the bundle, or that
/// names an archived version (searches leave it out, so it could never be found), naming
/// `qrels.tsv` and the line (a typo or a renamed file would otherwise count as a miss
/// silently), the checks of [`run`] on the queries, a bundle without vectors for a dense or
/// hybrid mode, a model that is not the bundle's, I/O.
pub fn run_bundle(bundle: &Path, dir: &Path, o: &EvalOptions) -> Result<EvalReport> {
    let queries = match &o.queries {
        Some(q) => load_queries(q)?,
        None => load_queries(&dir.join("queries.jsonl"))?,
    };
    let qpath = dir.join("qrels.tsv");
    let (qrels, named) = if o.unanswerable && !qpath.exists() {
        (HashMap::new(), Vec::new())
    } else {
        super::load_qrels(&qpath)?
    };
    let mut set = EvalSet {
        corpus: Vec::new(),
        queries,
        qrels,
    };
    let warnings = check_judged(&set, o, dir)?;
    let t = Instant::now();
    let b = jikji_format::Bundle::open_dir(bundle)?;
    let m = b.manifest().clone();
    let paths: HashSet<&str> = m.sources.iter().map(|s| s.path.as_str()).collect();
    let doc_ids: HashSet<&str> = m
        .sources
        .iter()
        .filter_map(|s| s.doc_id.as_deref())
        .collect();
    if m.sources.is_empty() {
        return Err(BuildError::Eval {
            path: bundle.to_path_buf(),
            message:
                "the bundle has no sources table (built before it existed): run `jikji build` once"
                    .into(),
        });
    }
    // How a name is compared for a "did you mean": case, `\` for `/`, a leading `./` and the
    // Unicode form (macOS writes Korean file names decomposed, NFD) do not count.
    let loose = |s: &str| -> String {
        use unicode_normalization::UnicodeNormalization;
        let s = s.replace('\\', "/");
        s.trim_start_matches("./")
            .nfc()
            .collect::<String>()
            .to_lowercase()
    };
    for (line, name) in &named {
        if !paths.contains(name.as_str()) && !doc_ids.contains(name.as_str()) {
            let want = loose(name);
            let near = m
                .sources
                .iter()
                .flat_map(|s| std::iter::once(s.path.as_str()).chain(s.doc_id.as_deref()))
                .find(|p| loose(p) == want)
                .or_else(|| {
                    m.sources.iter().map(|s| s.path.as_str()).find(|p| {
                        let p = loose(p);
                        p.ends_with(&want) || want.ends_with(&p)
                    })
                });
            let hint = near
                .map(|p| format!(" (did you mean {p:?}?)"))
                .unwrap_or_default();
            let example = m
                .sources
                .iter()
                .find(|s| !s.archived)
                .map_or("2. mobile/ios-requirements.md", |s| s.path.as_str());
            return Err(BuildError::InvalidInput {
                path: qpath,
                line: Some(*line),
                message: format!(
                    "{name:?} is neither a source path nor a doc_id of the bundle {}{hint}; \
                     name a file as search results do ({example:?}) or a doc_id \
                     (files the build left out, which `jikji check` lists, are not in the bundle)",
                    bundle.display()
                ),
            });
        }
        // An archived version is in the sources table but never in results: judging it
        // would count a miss for every query whatever the ranking.
        if let Some(old) = m.sources.iter().find(|s| s.archived && s.path == *name) {
            let doc = old.doc_id.as_deref().unwrap_or_default();
            let current = m
                .sources
                .iter()
                .find(|s| !s.archived && s.doc_id.as_deref() == Some(doc))
                .map(|s| format!(", or the current version {:?}", s.path))
                .unwrap_or_default();
            return Err(BuildError::InvalidInput {
                path: qpath,
                line: Some(*line),
                message: format!(
                    "{name:?} is an archived version in the bundle {} (a newer version of {doc:?} \
                     replaces it, and searches leave it out): judge the doc_id {doc:?}{current}",
                    bundle.display()
                ),
            });
        }
    }
    let mut engine = Engine::new(b);
    let needs_model = o.modes.iter().any(|m| *m != Mode::Bm25);
    if needs_model {
        if !engine.bundle().has_vectors() {
            return Err(jikji_engine::EngineError::NoVectors(Mode::Dense).into());
        }
        let info = crate::ingest::model_info(&o.model)?;
        engine.check_model(&info.sha256)?;
        if o.query_model.is_none() {
            engine.set_embedder(load_build_embedder(&o.model)?);
        }
    }
    let open_s = t.elapsed().as_secs_f64();
    let judged_names: HashSet<String> =
        set.qrels.values().flat_map(|j| j.keys().cloned()).collect();
    let key = |h: &jikji_engine::Hit| match &h.doc_id {
        Some(d) if !judged_names.contains(&h.source) && judged_names.contains(d) => d.clone(),
        _ => h.source.clone(),
    };
    let measured = evaluate(&mut engine, &mut set, o, key)?;
    let bytes: u64 = walkdir::WalkDir::new(bundle)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    Ok(EvalReport {
        bundle: Some(bundle.to_path_buf()),
        documents: m.sources.len(),
        chunks: m.counts.chunks,
        bundle_bytes: bytes,
        build_s: open_s,
        warnings,
        ..report(dir, o, &m, measured)
    })
}

/// The report's fields that come from the options, the bundle's manifest `m` and the
/// measurements, the same for a set's own corpus and an existing bundle; the caller sets
/// `bundle`, `documents`, `chunks`, `bundle_bytes`, `build_s` and `build_phases` (here
/// `None`, 0 and empty).
fn report(
    dir: &Path,
    o: &EvalOptions,
    m: &jikji_format::Manifest,
    measured: Measured,
) -> EvalReport {
    EvalReport {
        set: dir.to_path_buf(),
        bundle: None,
        queries_file: o.queries.clone(),
        unanswerable: o.unanswerable,
        documents: 0,
        queries: measured.queries,
        bm25: m.bm25,
        analyzer: m.analyzer,
        chunk_size: m.chunk_size,
        overlap: m.overlap,
        expansion: ExpansionReport {
            prefix: o.expansion.prefix,
            fuzzy: o.expansion.fuzzy,
            hanja: o.expansion.hanja,
            hangul_norm: o.expansion.hangul_norm,
        },
        chunks: 0,
        dense_index_chosen_by: m.dense_index_chosen_by.clone(),
        bundle_bytes: 0,
        build_s: 0.0,
        build_phases: Vec::new(),
        calibrated: m.calibration.is_some(),
        calibration: m.calibration.clone(),
        centring: centring_label(m),
        query_embed_median_ms: measured.embed_median_ms,
        warnings: Vec::new(),
        protocol_checks: measured.rows.iter().map(|r| r.protocol.len()).sum(),
        protocol_missed: measured
            .rows
            .iter()
            .flat_map(|r| &r.protocol)
            .filter(|c| !c.ok)
            .count(),
        modes: measured.rows,
    }
}

/// A queries file must match the run: judged queries, or (`unanswerable`) none judged,
/// and at least one query. Returns warnings: qrels query ids that no query has (a typo, or
/// a query left out of the file: they are not evaluated).
fn check_judged(set: &EvalSet, o: &EvalOptions, dir: &Path) -> Result<Vec<String>> {
    let usage = |message: String| BuildError::Eval {
        path: dir.to_path_buf(),
        message,
    };
    let qfile = o
        .queries
        .clone()
        .unwrap_or_else(|| dir.join("queries.jsonl"));
    if set.queries.is_empty() {
        return Err(usage(format!("{} holds no queries", qfile.display())));
    }
    let mut warnings = Vec::new();
    let ids: HashSet<&str> = set.queries.iter().map(|(id, _)| id.as_str()).collect();
    let mut orphans: Vec<&str> = set
        .qrels
        .iter()
        .filter(|(q, j)| !ids.contains(q.as_str()) && j.values().any(|&g| g > 0))
        .map(|(q, _)| q.as_str())
        .collect();
    if !orphans.is_empty() && !o.unanswerable {
        orphans.sort_unstable();
        let shown: Vec<String> = orphans.iter().take(5).map(|q| format!("{q:?}")).collect();
        warnings.push(format!(
            "{} judged query id(s) of {} are in no query of {} and are not evaluated: {}{}",
            orphans.len(),
            dir.join("qrels.tsv").display(),
            qfile.display(),
            shown.join(", "),
            if orphans.len() > 5 { ", …" } else { "" }
        ));
    }
    // A queries file must match the run: judged queries, or (unanswerable) none judged.
    let has_relevant = |qrels: &HashMap<String, HashMap<String, i32>>, id: &str| {
        qrels.get(id).is_some_and(|j| j.values().any(|&g| g > 0))
    };
    let judged_ids = set
        .queries
        .iter()
        .filter(|(id, _)| has_relevant(&set.qrels, id))
        .count();
    if o.unanswerable && judged_ids > 0 {
        return Err(usage(format!(
            "--unanswerable: {judged_ids} of the {} queries have relevant documents in {}; \
             it is for queries this corpus cannot answer (another set's queries.jsonl: pass \
             them with --queries FILE)",
            set.queries.len(),
            dir.join("qrels.tsv").display()
        )));
    }
    if !o.unanswerable && judged_ids == 0 {
        return Err(usage(format!(
            "none of the {} queries has a relevant document in {}{}",
            set.queries.len(),
            dir.join("qrels.tsv").display(),
            if o.queries.is_some() {
                " (queries of another set? add --unanswerable to measure their top-1 scores)"
            } else {
                ""
            }
        )));
    }
    Ok(warnings)
}

/// What [`evaluate`] measured.
struct Measured {
    queries: usize,
    embed_median_ms: f64,
    rows: Vec<ModeRow>,
}

/// Runs the judged queries of `set` (every query when `o.unanswerable`) on `engine` for
/// each mode and fusion of `o` and measures them; `key` names a hit's document as the
/// qrels do (a document ranks by its best chunk: its first hit).
fn evaluate(
    engine: &mut Engine,
    set: &mut EvalSet,
    o: &EvalOptions,
    key: impl Fn(&jikji_engine::Hit) -> String,
) -> Result<Measured> {
    let has_relevant = |qrels: &HashMap<String, HashMap<String, i32>>, id: &str| {
        qrels.get(id).is_some_and(|j| j.values().any(|&g| g > 0))
    };
    let needs_model = o.modes.iter().any(|m| *m != Mode::Bm25);
    engine.set_expansion(o.expansion);
    // The hits file carries every hit's query coverage (a calibration feature).
    engine.set_coverage(o.hits_out.is_some());
    engine.set_prefer_tier(o.prefer_tier);
    engine.set_filters(o.filters.clone());
    engine.set_search_options(SearchOptions {
        now_ms: o.now_ms,
        ..SearchOptions::default()
    });
    let pack = match (&o.query_model, needs_model) {
        (Some(dir), true) => Some(crate::query_model::PackEmbedder::open(dir, engine, None)?),
        _ => None,
    };
    // Unanswerable runs: every query, none with a relevant document.
    if o.unanswerable {
        set.qrels = set
            .queries
            .iter()
            .map(|(id, _)| (id.clone(), HashMap::new()))
            .collect();
    }
    let judged: Vec<&(String, String)> = set
        .queries
        .iter()
        .filter(|(id, _)| o.unanswerable || has_relevant(&set.qrels, id))
        .take(o.limit.unwrap_or(usize::MAX))
        .collect();
    // Embed each query once; every dense and hybrid run reuses the vector. Query vectors
    // go through the embedding cache too (`query: ` keys), so re-running a set embeds only
    // queries it has not seen; the embedding latency is timed on those. A query-model pack's
    // vectors are never cached nor read from the cache (the cache holds tract's): every
    // query is embedded by the pack, so what is measured is the pack.
    let mut qvecs = Vec::new();
    let mut embed_ms = Vec::new();
    if needs_model {
        let sha = crate::ingest::model_info(&o.model)?.sha256;
        let mut cache = VectorCache::open(Some(&o.cache), &sha)?;
        for (_, q) in &judged {
            // Queries are embedded by tract (the f32 path) here.
            let key = cache_key(&sha, "f32", Prefix::Query, q);
            if pack.is_none() {
                if let Some(c) = cache.get(&key) {
                    qvecs.push(Some(c.vector.clone()));
                    continue;
                }
            }
            let t = Instant::now();
            let v = match &pack {
                Some(p) => p.embed_query(q)?,
                None => engine.embed_query(q, Mode::Dense)?,
            };
            embed_ms.push(t.elapsed().as_secs_f64() * 1e3);
            if pack.is_some() {
                qvecs.push(Some(v));
                continue;
            }
            cache.insert(
                key,
                CacheEntry {
                    tokens: 0,
                    truncated: false,
                    vector: v.clone(),
                },
            );
            qvecs.push(Some(v));
        }
        cache.flush()?;
    } else {
        qvecs.resize(judged.len(), None);
    }
    embed_ms.sort_by(f64::total_cmp);
    // Written beside their paths and renamed over them at the end: a run that fails (another
    // output path unwritable, an I/O error) leaves an earlier run's files as they were.
    let beside = |p: &PathBuf| -> Result<std::io::BufWriter<tempfile::NamedTempFile>> {
        let dir = match p.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        tempfile::Builder::new()
            .prefix(".jikji-eval-")
            .tempfile_in(dir)
            .map(std::io::BufWriter::new)
            .map_err(|e| BuildError::io("creating", p, e))
    };
    let mut run_out = o.run.as_ref().map(beside).transpose()?;
    let mut hits_out = o.hits_out.as_ref().map(beside).transpose()?;
    let mut runs: Vec<(Mode, Option<Fusion>)> = Vec::new();
    for &m in &o.modes {
        if m == Mode::Hybrid {
            runs.extend(o.fusions.iter().map(|f| (m, Some(*f))));
        } else {
            runs.push((m, None));
        }
    }
    let mut rows = Vec::new();
    for (mode, fusion) in runs {
        if let Some(f) = fusion {
            engine.set_fusion(f);
        }
        let label = match engine.fusion() {
            Fusion::Rrf if mode == Mode::Hybrid => "hybrid-rrf".to_string(),
            Fusion::Weighted { dense_weight } if mode == Mode::Hybrid => {
                format!("hybrid-w{dense_weight}")
            }
            _ => mode.to_string(),
        };
        let mut per_query = Vec::new();
        let mut top1 = Vec::new();
        let mut no_hit = 0usize;
        let mut ms = Vec::new();
        let index = (mode != Mode::Bm25)
            .then(|| {
                engine.dense_index().map(|r| {
                    (
                        r.nlist,
                        r.nprobe,
                        r.nprobe_from.clone(),
                        r.codes.clone(),
                        r.rescore,
                    )
                })
            })
            .flatten();
        let mut vs = IndexTally::default();
        if index.is_some() {
            engine.set_cache_budget(0);
        }
        for ((qid, q), qv) in judged.iter().zip(&qvecs) {
            let t = Instant::now();
            let r = engine.search_with_vector(q, qv.as_deref(), mode, 300)?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            if index.is_some() {
                // What a visitor's query does: COMPARE_DEPTH chunks through the index, then
                // the exact scan to the same depth.
                let t = Instant::now();
                let r = engine.search_with_vector(q, qv.as_deref(), mode, COMPARE_DEPTH)?;
                vs.ms.push(t.elapsed().as_secs_f64() * 1e3);
                let f = engine.last_fetch();
                let kind = |k: &str| f.by_kind.get(k).map_or(0, |b| b.1);
                vs.list_bytes.push(kind("j") as f64);
                vs.row_bytes.push(kind("i") as f64);
                vs.centroid_bytes = vs.centroid_bytes.max(kind("g") + kind("w"));
                vs.rounds.push(f.rounds as f64);
                engine.set_exact_dense(true);
                let t = Instant::now();
                let ex = engine.search_with_vector(q, qv.as_deref(), mode, COMPARE_DEPTH);
                vs.exact_ms.push(t.elapsed().as_secs_f64() * 1e3);
                engine.set_exact_dense(false);
                let ex = ex?;
                vs.exact_vector_bytes = vs
                    .exact_vector_bytes
                    .max(engine.last_fetch().by_kind.get("v").map_or(0, |b| b.1));
                let mut seen = HashSet::new();
                let ids: Vec<String> = r
                    .hits
                    .iter()
                    .map(&key)
                    .filter(|d| seen.insert(d.clone()))
                    .collect();
                vs.index.push(metrics(&ids, &set.qrels[qid]));
                let top: HashSet<&str> = r.hits.iter().take(10).map(|h| h.id.as_str()).collect();
                let ex_top: Vec<&str> = ex.hits.iter().take(10).map(|h| h.id.as_str()).collect();
                if !ex_top.is_empty() {
                    let hit = ex_top.iter().filter(|id| top.contains(*id)).count();
                    vs.recall.push(hit as f64 / ex_top.len() as f64);
                }
                let mut seen = HashSet::new();
                let ids: Vec<String> = ex
                    .hits
                    .iter()
                    .map(&key)
                    .filter(|d| seen.insert(d.clone()))
                    .collect();
                vs.exact.push(metrics(&ids, &set.qrels[qid]));
            }
            let mut seen = HashSet::new();
            let ranked: Vec<(String, f32)> = r
                .hits
                .iter()
                .map(|h| (key(h), h.score))
                .filter(|(d, _)| seen.insert(d.clone()))
                .take(100)
                .collect();
            if let (Some(w), Some(p)) = (run_out.as_mut(), &o.run) {
                for (i, (d, s)) in ranked.iter().enumerate() {
                    // Run files are whitespace-separated: a source path's spaces (and
                    // its `%`) are percent-encoded.
                    let d = d.replace('%', "%25").replace(' ', "%20");
                    writeln!(w, "{qid} Q0 {d} {} {s} jikji-{label}", i + 1)
                        .map_err(|e| BuildError::io("writing", p, e))?;
                }
            }
            let judged = &set.qrels[qid];
            if let (Some(w), Some(p)) = (hits_out.as_mut(), &o.hits_out) {
                let mut seen = HashSet::new();
                let hits: Vec<serde_json::Value> = r
                    .hits
                    .iter()
                    .map(|h| (key(h), h))
                    .filter(|(k, _)| seen.insert(k.clone()))
                    .take(30)
                    .map(|(k, h)| {
                        let grade = judged.get(&k).copied().unwrap_or(0);
                        let cov = h.coverage.map(|c| [c.terms, c.idf, c.unknown]);
                        serde_json::json!([k, h.score, h.raw_score, h.source, grade, cov])
                    })
                    .collect();
                let nrel = judged.values().filter(|&&g| g > 0).count();
                let line = serde_json::json!({"mode": label, "qid": qid, "q": q, "nrel": nrel, "hits": hits});
                writeln!(w, "{line}").map_err(|e| BuildError::io("writing", p, e))?;
            }
            match ranked.first() {
                Some((d, s)) => top1.push((*s, judged.get(d).is_some_and(|&g| g > 0))),
                None => no_hit += 1,
            }
            let ids: Vec<String> = ranked.into_iter().map(|(d, _)| d).collect();
            per_query.push(metrics(&ids, judged));
        }
        ms.sort_by(f64::total_cmp);
        if index.is_some() {
            engine.set_cache_budget(jikji_format::paged::cache::DEFAULT_BUDGET);
        }
        let dense_index = index.map(|(nlist, nprobe, from, codes, rescore)| IndexRow {
            codes,
            rescore: rescore.map_or(0, |r| o.rescore.unwrap_or(r)),
            ..vs.row(nlist, o.nprobe.unwrap_or(nprobe), from)
        });
        let (top1_bands, top1_ece) = (bands(&top1), ece(&top1, 10));
        rows.push(ModeRow {
            dense_index,
            mode: label,
            metrics: mean(&per_query),
            median_ms: percentile(&ms, 0.5),
            p95_ms: percentile(&ms, 0.95),
            protocol: protocol_checks(&top1_bands, top1_ece, o.unanswerable),
            top1_bands,
            top1_ece,
            no_hit,
        });
    }
    for (w, p) in [(run_out, &o.run), (hits_out, &o.hits_out)] {
        if let (Some(w), Some(p)) = (w, p) {
            let f = w
                .into_inner()
                .map_err(|e| BuildError::io("writing", p, e.into_error()))?;
            #[cfg(unix)]
            {
                // A temporary file is 0600; an output file is 0644 as `File::create` made it.
                use std::os::unix::fs::PermissionsExt;
                let _ = f
                    .as_file()
                    .set_permissions(std::fs::Permissions::from_mode(0o644));
            }
            f.persist(p)
                .map_err(|e| BuildError::io("writing", p, e.error))?;
        }
    }
    Ok(Measured {
        queries: judged.len(),
        embed_median_ms: percentile(&embed_ms, 0.5),
        rows,
    })
}

/// Per-query measurements of a ranking through the dense index.
#[derive(Default)]
struct IndexTally {
    recall: Vec<f64>,
    index: Vec<Metrics>,
    ms: Vec<f64>,
    exact: Vec<Metrics>,
    list_bytes: Vec<f64>,
    row_bytes: Vec<f64>,
    centroid_bytes: u64,
    exact_vector_bytes: u64,
    rounds: Vec<f64>,
    exact_ms: Vec<f64>,
}

impl IndexTally {
    fn row(mut self, nlist: usize, nprobe: usize, nprobe_from: Option<String>) -> IndexRow {
        let avg = |v: &[f64]| {
            if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            }
        };
        self.rounds.sort_by(f64::total_cmp);
        self.exact_ms.sort_by(f64::total_cmp);
        self.ms.sort_by(f64::total_cmp);
        IndexRow {
            nlist,
            nprobe: nprobe.clamp(1, nlist),
            nprobe_from,
            codes: String::new(),
            rescore: 0,
            list_bytes_per_vector: 0.0,
            row_bytes_mean: avg(&self.row_bytes),
            recall_10_vs_exact: avg(&self.recall),
            exact: mean(&self.exact),
            index: mean(&self.index),
            list_bytes_mean: avg(&self.list_bytes),
            centroid_bytes: self.centroid_bytes,
            exact_vector_bytes: self.exact_vector_bytes,
            rounds_median: percentile(&self.rounds, 0.5),
            median_ms: percentile(&self.ms, 0.5),
            exact_median_ms: percentile(&self.exact_ms, 0.5),
        }
    }
}

impl EvalReport {
    /// The text report `jikji eval` prints: a header line, then one row per ranking with
    /// nDCG@10, R@10, R@100, MRR@10, median and p95 ms, ECE and the top-1 bands.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        match &self.bundle {
            Some(b) => {
                let _ =
                    writeln!(
                    s,
                    "{} on bundle {}: {} files, {} chunks, {} {}, bundle {} bytes, open {:.1} s",
                    self.set.display(),
                    b.display(),
                    self.documents,
                    self.chunks,
                    self.queries,
                    if self.unanswerable { "unanswerable queries" } else { "judged queries" },
                    self.bundle_bytes,
                    self.build_s
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "{}: {} documents, {} chunks, {} {}, bundle {} bytes, build {:.1} s",
                    self.set.display(),
                    self.documents,
                    self.chunks,
                    self.queries,
                    if self.unanswerable {
                        "unanswerable queries"
                    } else {
                        "judged queries"
                    },
                    self.bundle_bytes,
                    self.build_s
                );
            }
        }
        for w in &self.warnings {
            let _ = writeln!(s, "warning: {w}");
        }
        if let Some(c) = &self.dense_index_chosen_by {
            let _ = writeln!(s, "dense index: {c}");
        }
        if !self.build_phases.is_empty() {
            let p: Vec<String> = self
                .build_phases
                .iter()
                .map(|(k, v)| format!("{k} {v:.2}s"))
                .collect();
            let _ = writeln!(s, "build phases: {}", p.join(", "));
        }
        if self.unanswerable {
            let _ = writeln!(
                s,
                "unanswerable: every query counts as having no answer here; read the top-1 bands"
            );
        }
        if !self.query_embed_median_ms.is_nan() {
            let _ = writeln!(
                s,
                "query embedding: median {:.1} ms (not included in the latencies below)",
                self.query_embed_median_ms
            );
        }
        if let Some(c) = &self.centring {
            let _ = writeln!(s, "dense centring: {c}");
        }
        let _ = writeln!(
            s,
            "{:<14}{:>9}{:>9}{:>10}{:>9}{:>11}{:>9}{:>8}   top-1 relevant by score band",
            "mode", "nDCG@10", "R@10", "R@100", "MRR@10", "median ms", "p95 ms", "ECE"
        );
        for r in &self.modes {
            let bands: Vec<String> = r
                .top1_bands
                .iter()
                .map(|b| format!("[{:.1},{:.1}): {}/{}", b.from, b.to, b.relevant, b.queries))
                .collect();
            let no_hit = if r.no_hit > 0 {
                format!("  no hit: {}", r.no_hit)
            } else {
                String::new()
            };
            let x = &r.metrics;
            let _ = writeln!(
                s,
                "{:<14}{:>9.4}{:>9.4}{:>10.4}{:>9.4}{:>11.2}{:>9.2}{:>8.3}   {}{}",
                r.mode,
                x.ndcg_10,
                x.recall_10,
                x.recall_100,
                x.mrr_10,
                r.median_ms,
                r.p95_ms,
                r.top1_ece,
                bands.join("  "),
                no_hit
            );
            if let Some(i) = &r.dense_index {
                let _ = writeln!(
                    s,
                    "  dense index {} nlist {} nprobe {} rescore {}: recall@10 vs exact {:.4}, nDCG@10 {:.4} vs exact {:.4} (Δ {:+.4}, top {COMPARE_DEPTH} chunks); \
                     list bytes/query {:.0} ({:.1} B/vector), row bytes/query {:.0}, centroids+sample {} B once, exact scan {} B/query; \
                     rounds (cold) median {:.0}; median ms {:.2} (exact {:.2}, both cold); default nprobe from {}",
                    i.codes,
                    i.nlist,
                    i.nprobe,
                    i.rescore,
                    i.recall_10_vs_exact,
                    i.index.ndcg_10,
                    i.exact.ndcg_10,
                    i.index.ndcg_10 - i.exact.ndcg_10,
                    i.list_bytes_mean,
                    i.list_bytes_per_vector,
                    i.row_bytes_mean,
                    i.centroid_bytes,
                    i.exact_vector_bytes,
                    i.rounds_median,
                    i.median_ms,
                    i.exact_median_ms,
                    i.nprobe_from.as_deref().unwrap_or("(not recorded)")
                );
            }
        }
        s.push_str(&self.protocol_text());
        s
    }

    /// The readers'-protocol block of [`Self::to_text`]: per mode row, each check's value,
    /// target and `ok` / `MISS`, then how many were missed.
    fn protocol_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        if self.unanswerable {
            let _ = writeln!(
                s,
                "readers' protocol, unanswerable queries (issue 19: at most 1 % of top-1s may reach >= 0.6, \"cite\"):"
            );
        } else {
            let _ = writeln!(
                s,
                "readers' protocol (issue 19: >= 0.6 cite, >= 90 % of those top-1s right; < 0.3 drop, <= 30 % right; top-1 ECE <= 0.10):"
            );
        }
        for r in &self.modes {
            let cells: Vec<String> = r
                .protocol
                .iter()
                .map(|c| {
                    let v = match (c.check, c.value) {
                        (_, None) => "empty".to_string(),
                        ("ece", Some(v)) => format!("{v:.3}"),
                        (_, Some(v)) => format!("{:.1} % of {}", v * 100.0, c.queries),
                    };
                    let what = match c.check {
                        "cite" => ">= 0.6 right",
                        "drop" => "< 0.3 right",
                        "ece" => "ECE",
                        _ => "top-1s >= 0.6",
                    };
                    format!(
                        "{what} {v} ({}) {}",
                        c.target,
                        if c.ok { "ok" } else { "MISS" }
                    )
                })
                .collect();
            let _ = writeln!(s, "  {:<14}{}", r.mode, cells.join("   "));
        }
        let _ = writeln!(
            s,
            "  missed {} of {} checks",
            self.protocol_missed, self.protocol_checks
        );
        s
    }
}

/// How the bundle's dense vectors are centred, for the report (`None`: not centred).
fn centring_label(m: &jikji_format::Manifest) -> Option<String> {
    m.model.as_ref().and_then(|i| i.centring.as_ref()).map(|c| {
        format!(
            "{} α={} prior={} stats={}",
            c.query_side,
            c.alpha,
            c.bundle_prior.map_or("none".to_string(), |k| k.to_string()),
            c.stats_sha256.get(..12).unwrap_or(&c.stats_sha256)
        )
    })
}

//! The eval runner: builds a bundle from an eval set's corpus with the ingest pipeline,
//! runs every judged query per mode and fusion, and reports metrics, latency and the
//! calibration check ([`run`]). `jikji eval` prints its [`EvalReport`].

use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use jikji_engine::{Engine, Expansion, Fusion, Mode};
use serde::Serialize;

use super::{bands, ece, load_queries, mean, metrics, percentile, Band, EvalSet, Metrics};
use crate::corpus::{FrontMatter, SourceFile};
use crate::error::{BuildError, Result};
use crate::ingest::{build_files, load_build_embedder, BundleSettings, IngestOptions};

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
    /// Write a TREC run file (`qid Q0 docid rank score jikji-MODE`).
    pub run: Option<PathBuf>,
    /// Show progress bars on stderr while building.
    pub progress: bool,
    /// Chunking, analyzer and BM25 settings of the bundle built from the corpus.
    pub settings: BundleSettings,
    /// Query expansion weights.
    pub expansion: Expansion,
    /// Query-model pack folder (`jikji model-pack`): dense and hybrid queries are embedded
    /// by it ([`crate::query_model::PackEmbedder`], the browser's code) instead of tract;
    /// the corpus is still embedded with `model`.
    pub query_model: Option<PathBuf>,
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
    /// Queries with no hit at all.
    pub no_hit: usize,
}

/// What [`run`] measured.
#[derive(Debug, Clone, Serialize)]
pub struct EvalReport {
    /// The eval set folder.
    pub set: PathBuf,
    /// The queries file, if not the set's own.
    pub queries_file: Option<PathBuf>,
    /// Whether every query counted as unanswerable.
    pub unanswerable: bool,
    /// Documents in the corpus.
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
    /// Bundle bytes (all files the manifest lists).
    pub bundle_bytes: u64,
    /// Seconds to build the bundle.
    pub build_s: f64,
    /// Whether the bundle has a score calibration.
    pub calibrated: bool,
    /// The calibration block of the manifest.
    pub calibration: Option<jikji_format::Calibration>,
    /// Median query-embedding time in ms (NaN, `null` in JSON, without dense/hybrid).
    pub query_embed_median_ms: f64,
    /// One row per ranking.
    pub modes: Vec<ModeRow>,
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
    let usage = |message: String| BuildError::Eval {
        path: dir.to_path_buf(),
        message,
    };
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
             it is for queries this corpus cannot answer (another set's queries.jsonl)",
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
        })
        .collect();
    let out = std::env::temp_dir().join(format!("jikji-eval-{}", std::process::id()));
    let ingest = IngestOptions {
        model_dir: needs_model.then(|| o.model.clone()),
        cache_dir: Some(o.cache.clone()),
        threads: o.threads,
        progress: o.progress,
        ..IngestOptions::new(dir, &out)
    };
    let t = Instant::now();
    let built = build_files(&files, &ingest, &o.settings)?;
    let build_s = t.elapsed().as_secs_f64();
    // Read whole (every page, verified): the folder is removed right after. Paged and
    // whole reads answer identically (engine-wasm/tests/compat_v2.rs).
    let opened = jikji_format::Bundle::open_dir(&out).map(Engine::new);
    let bytes: u64 = walkdir::WalkDir::new(&out)
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.len())
        .sum();
    let _ = std::fs::remove_dir_all(&out);
    let mut engine = opened?;
    engine.set_expansion(o.expansion);
    let pack = match (&o.query_model, needs_model) {
        (Some(dir), true) => Some(crate::query_model::PackEmbedder::open(dir, &engine)?),
        _ => None,
    };
    if needs_model && pack.is_none() {
        engine.set_embedder(load_build_embedder(&o.model)?);
    }
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
    // Embed each query once; every dense and hybrid run reuses the vector.
    let mut qvecs = Vec::new();
    let mut embed_ms = Vec::new();
    if needs_model {
        for (_, q) in &judged {
            let t = Instant::now();
            qvecs.push(Some(match &pack {
                Some(p) => p.embed_query(q)?,
                None => engine.embed_query(q, Mode::Dense)?,
            }));
            embed_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
    } else {
        qvecs.resize(judged.len(), None);
    }
    embed_ms.sort_by(f64::total_cmp);
    let mut run_out = match &o.run {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(|e| BuildError::io("creating", p, e))?,
        )),
        None => None,
    };
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
        for ((qid, q), qv) in judged.iter().zip(&qvecs) {
            let t = Instant::now();
            let r = engine.search_with_vector(q, qv.as_deref(), mode, 300)?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            let mut seen = HashSet::new();
            let ranked: Vec<(String, f32)> = r
                .hits
                .iter()
                .filter(|h| seen.insert(h.source.clone()))
                .take(100)
                .map(|h| (h.source.clone(), h.score))
                .collect();
            if let (Some(w), Some(p)) = (run_out.as_mut(), &o.run) {
                for (i, (d, s)) in ranked.iter().enumerate() {
                    writeln!(w, "{qid} Q0 {d} {} {s} jikji-{label}", i + 1)
                        .map_err(|e| BuildError::io("writing", p, e))?;
                }
            }
            let judged = &set.qrels[qid];
            match ranked.first() {
                Some((d, s)) => top1.push((*s, judged.get(d).is_some_and(|&g| g > 0))),
                None => no_hit += 1,
            }
            let ids: Vec<String> = ranked.into_iter().map(|(d, _)| d).collect();
            per_query.push(metrics(&ids, judged));
        }
        ms.sort_by(f64::total_cmp);
        rows.push(ModeRow {
            mode: label,
            metrics: mean(&per_query),
            median_ms: percentile(&ms, 0.5),
            p95_ms: percentile(&ms, 0.95),
            top1_bands: bands(&top1),
            top1_ece: ece(&top1, 10),
            no_hit,
        });
    }
    if let (Some(w), Some(p)) = (run_out.as_mut(), &o.run) {
        w.flush().map_err(|e| BuildError::io("writing", p, e))?;
    }
    let m = engine.bundle().manifest();
    Ok(EvalReport {
        set: dir.to_path_buf(),
        queries_file: o.queries.clone(),
        unanswerable: o.unanswerable,
        documents: set.corpus.len(),
        queries: judged.len(),
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
        chunks: built.chunks,
        bundle_bytes: bytes,
        build_s,
        calibrated: m.calibration.is_some(),
        calibration: m.calibration.clone(),
        query_embed_median_ms: percentile(&embed_ms, 0.5),
        modes: rows,
    })
}

impl EvalReport {
    /// The text report `jikji eval` prints: a header line, then one row per ranking with
    /// nDCG@10, R@10, R@100, MRR@10, median and p95 ms, ECE and the top-1 bands.
    pub fn to_text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{}: {} documents, {} chunks, {} judged queries, bundle {} bytes, build {:.1} s",
            self.set.display(),
            self.documents,
            self.chunks,
            self.queries,
            self.bundle_bytes,
            self.build_s
        );
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
        }
        s
    }
}

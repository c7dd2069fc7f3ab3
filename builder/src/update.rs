//! `jikji update BUNDLE DIR`: brings a bundle up to date with its corpus folder without a
//! full rebuild.
//!
//! 1. **scan**: reads and checks every file of `DIR` (as `jikji build` does) and hashes it
//!    (SHA-256); against the bundle's sources table (`manifest.json` `sources`) each file
//!    is *new*, *changed* (different hash; a different mtime alone is not a change) or
//!    *unchanged*; files in the table but no longer usable in `DIR` are *deleted*.
//! 2. **chunk**: the records of unchanged files are taken from the old bundle (only
//!    `updated`, which falls back to the file's modification date, and the version facts
//!    `doc_id` / `archived`, which depend on other files, are recomputed); new and changed
//!    files are chunked with the bundle's own chunk size and overlap. Deleted files' chunks
//!    are dropped.
//! 3. **index**: the term dictionary and postings are rebuilt from all records (BM25
//!    statistics are corpus-wide, so they cannot be patched).
//! 4. **embed**: a chunk whose text is in the old bundle reuses that vector *as stored*
//!    (the int8 row and its scale, bit for bit: no dequantize/requantize drift); only
//!    texts not in the old bundle are embedded (through the vector cache, if given).
//! 5. **calibrate**: the score calibration is fitted again on the new bundle, as a build
//!    does (300 pseudo-queries spread over all chunks, embedded with the model), unless the
//!    data files are byte for byte the old ones (then the old calibration is kept).
//! 6. **write**: a new bundle through [`jikji_format::BundleWriter`] (temp folder, atomic
//!    swap; the old bundle stays valid until the swap and becomes `BUNDLE.prev`).
//!
//! The result equals a full `jikji build` of the same files: same chunk ids, records and
//! postings byte for byte, vectors copied from the old bundle bit for bit; a text embedded
//! by the update itself may differ from the same text embedded in another batch in the
//! last float bits (the model's output depends slightly on the batch's padding), and so
//! may the dense calibration fitted on it. `builder/tests/update.rs` checks all of it.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use jikji_format::chunks::write_chunks;
use jikji_format::vectors::write_quantized;
use jikji_format::{sha256_hex, Bundle, ChunkRecord};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::build::{
    chunk_file, embed_passages, hanja_table, index_records, load_build_embedder, model_info,
    scan_corpus, source_entry, updated_of, write_bundle, BundleParts, Chunking,
};
use crate::calibrate::calibrate;
use crate::chunker::ChunkParams;
use crate::corpus::{quarantine, CheckOptions, Finding};
use crate::error::{BuildError, Result};

/// Options of `jikji update`.
#[derive(Debug, Clone)]
pub struct UpdateOptions {
    /// The bundle to update (replaced atomically; the old one is kept as `BUNDLE.prev`).
    pub bundle: PathBuf,
    /// The corpus folder.
    pub corpus: PathBuf,
    /// Model folder, needed only when the bundle has vectors and some chunk text is new.
    pub model_dir: Option<PathBuf>,
    /// Embedding cache folder for the new chunks (`None`: no cache).
    pub cache_dir: Option<PathBuf>,
    /// Embedding threads.
    pub threads: usize,
    /// Progress bar on stderr.
    pub progress: bool,
    /// What the corpus check accepts.
    pub check: CheckOptions,
    /// Fail on any corpus error instead of leaving the bad files out.
    pub strict: bool,
    /// Copy files with errors into this folder.
    pub quarantine: Option<PathBuf>,
}

impl UpdateOptions {
    /// Defaults: no model, no cache, one thread, no progress, default checks.
    pub fn new(bundle: impl Into<PathBuf>, corpus: impl Into<PathBuf>) -> Self {
        UpdateOptions {
            bundle: bundle.into(),
            corpus: corpus.into(),
            model_dir: None,
            cache_dir: None,
            threads: 1,
            progress: false,
            check: CheckOptions::default(),
            strict: false,
            quarantine: None,
        }
    }
}

/// What an update did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct UpdateReport {
    /// Files not in the bundle before.
    pub added: Vec<String>,
    /// Files whose content hash changed.
    pub changed: Vec<String>,
    /// Files in the bundle that are gone from the folder (or now fail the checks).
    pub deleted: Vec<String>,
    /// Number of unchanged files.
    pub unchanged: usize,
    /// Files archived by this update (a newer version arrived).
    pub archived: Vec<String>,
    /// Files no longer archived (their newer version was deleted).
    pub unarchived: Vec<String>,
    /// Chunk records taken from the old bundle.
    pub chunks_kept: usize,
    /// Chunk records made now (new and changed files).
    pub chunks_new: usize,
    /// Chunk records of the old bundle dropped (changed and deleted files).
    pub chunks_dropped: usize,
    /// Vectors copied from the old bundle.
    pub vectors_reused: usize,
    /// Vectors of new texts (embedded now or found in the cache).
    pub vectors_new: usize,
    /// Of those, texts actually embedded now (not in the cache).
    pub embedded: usize,
    /// Chunks in the new bundle.
    pub chunks: usize,
    /// Corpus check findings.
    pub findings: Vec<Finding>,
    /// True if a new bundle was written; false when nothing changed.
    pub written: bool,
    /// True if the old calibration was kept because the data files are unchanged.
    pub calibration_reused: bool,
    /// Seconds per phase: open, scan, chunk, index, embed, calibrate, write.
    pub seconds: Vec<(String, f64)>,
}

fn text_key(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Updates `opts.bundle` from `opts.corpus`. See the module doc. Errors: the bundle cannot
/// be opened or has no sources table (built by an older `jikji`: build it once), the model
/// differs from the bundle's, a corpus error with `strict`, or an I/O error.
///
/// When nothing changed (same files, hashes, version facts and `updated` dates) the bundle
/// is left as it is and `written` is false.
pub fn update(opts: &UpdateOptions) -> Result<UpdateReport> {
    let mut report = UpdateReport::default();
    let t = Instant::now();
    let prev = PathBuf::from(format!("{}.prev", opts.bundle.display()));
    if !opts.bundle.exists() && prev.exists() {
        return Err(BuildError::Bundle {
            path: opts.bundle.clone(),
            message: format!(
                "missing, but {} exists (an interrupted write on a system without atomic exchange); move it back, then update",
                prev.display()
            ),
        });
    }
    let old = Bundle::open_dir(&opts.bundle).map_err(|source| BuildError::OpenBundle {
        path: opts.bundle.clone(),
        source,
    })?;
    let m = old.manifest();
    if m.sources.is_empty() {
        return Err(BuildError::Bundle {
            path: opts.bundle.clone(),
            message:
                "the bundle has no sources table (built by an older jikji); run `jikji build` once"
                    .into(),
        });
    }
    let params = ChunkParams {
        size: m.chunk_size,
        overlap: m.overlap,
    };
    if m.parents() > 0 {
        return Err(BuildError::Bundle {
            path: opts.bundle.clone(),
            message: "a parent-child bundle; jikji update does not re-link parent sections yet, run `jikji build --strategy parent-child`".into(),
        });
    }
    // Changed files are chunked as the bundle was (strategy, limits, tokenizer).
    let chunking = Chunking::of_manifest(m, opts.model_dir.as_deref())?;
    // Old records per source path.
    let mut old_records: Vec<ChunkRecord> = Vec::with_capacity(old.chunks().len());
    for i in 0..old.chunks().len() {
        old_records.push(old.chunks().get(i as u32)?);
    }
    let mut old_ranges: HashMap<&str, (usize, usize, usize)> = HashMap::new();
    let mut at = 0;
    for (k, s) in m.sources.iter().enumerate() {
        old_ranges.insert(s.path.as_str(), (at, at + s.chunks, k));
        at += s.chunks;
    }
    if at != old_records.len() {
        return Err(BuildError::Bundle {
            path: opts.bundle.clone(),
            message: format!(
                "the sources table counts {at} chunks but chunks.bin has {}; rebuild the bundle",
                old_records.len()
            ),
        });
    }
    report
        .seconds
        .push(("open".into(), t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let scanned = scan_corpus(&opts.corpus, opts.check, opts.strict)?;
    if let Some(dir) = &opts.quarantine {
        quarantine(&opts.corpus, &scanned.rejected, dir)?;
    }
    if scanned.files.is_empty() {
        return Err(BuildError::Corpus {
            path: opts.corpus.clone(),
            message: "no usable .md or .txt files".into(),
        });
    }
    let files = &scanned.files;
    report.findings = scanned.findings.clone();
    let versions = crate::versions::resolve(files);
    report
        .seconds
        .push(("scan".into(), t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let present: BTreeSet<&str> = files.iter().map(|f| f.rel.as_str()).collect();
    let mut records: Vec<ChunkRecord> = Vec::with_capacity(old_records.len());
    let mut from_old: Vec<Option<usize>> = Vec::with_capacity(old_records.len());
    let mut sources = Vec::with_capacity(files.len());
    let mut dirty = false;
    for (f, v) in files.iter().zip(&versions) {
        let sha = sha256_hex(f.text.as_bytes());
        let old_entry = old_ranges
            .get(f.rel.as_str())
            .map(|&(a, b, k)| (a, b, &m.sources[k]));
        match old_entry {
            Some((a, b, e)) if e.sha256 == sha => {
                report.unchanged += 1;
                if e.archived != v.archived {
                    dirty = true;
                    if v.archived {
                        report.archived.push(f.rel.clone());
                    } else {
                        report.unarchived.push(f.rel.clone());
                    }
                }
                let updated = updated_of(f);
                for (i, r) in old_records[a..b].iter().enumerate() {
                    let mut r = r.clone();
                    if r.updated != updated || r.doc_id != v.doc_id || r.archived != v.archived {
                        dirty = true;
                    }
                    r.updated = updated.clone();
                    r.doc_id = v.doc_id.clone();
                    r.archived = v.archived;
                    records.push(r);
                    from_old.push(Some(a + i));
                }
                report.chunks_kept += b - a;
                let entry = source_entry(f, v, b - a);
                if entry != *e {
                    dirty = true;
                }
                sources.push(entry);
            }
            other => {
                dirty = true;
                match other {
                    Some((a, b, _)) => {
                        report.changed.push(f.rel.clone());
                        report.chunks_dropped += b - a;
                    }
                    None => report.added.push(f.rel.clone()),
                }
                if v.archived {
                    report.archived.push(f.rel.clone());
                }
                let recs = chunk_file(f, &chunking, v).chunks;
                report.chunks_new += recs.len();
                sources.push(source_entry(f, v, recs.len()));
                from_old.extend(std::iter::repeat_n(None, recs.len()));
                records.extend(recs);
            }
        }
    }
    for (k, s) in m.sources.iter().enumerate() {
        if !present.contains(s.path.as_str()) {
            dirty = true;
            report.deleted.push(s.path.clone());
            report.chunks_dropped += m.sources[k].chunks;
        }
    }
    report.chunks = records.len();
    report
        .seconds
        .push(("chunk".into(), t.elapsed().as_secs_f64()));
    if !dirty {
        report.written = false;
        return Ok(report);
    }

    let t = Instant::now();
    // The bundle's own analyzer options (a version 1 bundle is rebuilt with the defaults).
    let analyzer_options = if m.analyzer_version >= 2 {
        m.analyzer
    } else {
        jikji_format::analyzer::AnalyzerOptions::default()
    };
    let analyzer = jikji_format::analyzer::Analyzer::new(
        jikji_format::analyzer::ANALYZER_VERSION,
        analyzer_options,
    )?;
    let (terms_fst, postings, terms) = index_records(&records, &analyzer)?;
    let hanja = hanja_table(&records, &analyzer)?;
    report
        .seconds
        .push(("index".into(), t.elapsed().as_secs_f64()));

    let t = Instant::now();
    // A bundle with vectors needs its model: for new chunk texts and for the calibration.
    // It is loaded at most once, and only when needed.
    let mut embedder = None;
    let model_dir = match (old.vectors(), &m.model) {
        (Some(_), Some(info)) => {
            let dir = opts.model_dir.as_deref().ok_or_else(|| BuildError::Bundle {
                path: opts.bundle.clone(),
                message: "the bundle has vectors; give the model folder (--model DIR) to embed new chunks and calibrate".into(),
            })?;
            let now = model_info(dir)?;
            if now.sha256 != info.sha256 {
                return Err(BuildError::Model {
                    path: dir.to_path_buf(),
                    message: format!(
                        "model sha256 {} differs from the bundle's {} ({}); run a full `jikji build`",
                        now.sha256, info.sha256, info.id
                    ),
                });
            }
            Some(dir)
        }
        _ => None,
    };
    let vectors = match (old.vectors(), &m.model) {
        (Some(ov), Some(info)) => {
            // Old vectors by text, for chunks of changed files whose text did not change.
            let by_text: HashMap<[u8; 32], usize> = old_records
                .iter()
                .enumerate()
                .map(|(i, r)| (text_key(&r.text), i))
                .collect();
            let mut rows: Vec<Option<usize>> = Vec::with_capacity(records.len());
            let mut todo: Vec<usize> = Vec::new();
            for (i, r) in records.iter().enumerate() {
                let old_row = from_old[i].or_else(|| by_text.get(&text_key(&r.text)).copied());
                if old_row.is_none() {
                    todo.push(i);
                }
                rows.push(old_row);
            }
            report.vectors_reused = records.len() - todo.len();
            report.vectors_new = todo.len();
            let mut fresh: HashMap<usize, (f32, Vec<i8>)> = HashMap::new();
            if !todo.is_empty() {
                let dir = model_dir.expect("checked above: a bundle with vectors needs the model");
                let texts: Vec<&str> = todo.iter().map(|&i| records[i].text.as_str()).collect();
                let e = embed_passages(
                    &texts,
                    dir,
                    opts.cache_dir.as_deref(),
                    opts.threads,
                    opts.progress,
                    &mut embedder,
                )?;
                report.embedded = e.embedded;
                for (&i, v) in todo.iter().zip(&e.vectors) {
                    fresh.insert(i, jikji_format::vectors::quantize(v));
                }
            }
            let bytes = write_quantized(
                ov.dim(),
                rows.iter().enumerate().map(|(i, r)| match r {
                    Some(o) => ov.row(*o),
                    None => {
                        let (s, q) = &fresh[&i];
                        (*s, q.as_slice())
                    }
                }),
            )?;
            Some((info.clone(), bytes))
        }
        _ => None,
    };
    report
        .seconds
        .push(("embed".into(), t.elapsed().as_secs_f64()));

    // The calibration is a function of the bundle's data files and the model: when those
    // are byte for byte the old bundle's (only the sources table changed, e.g. a touched
    // file), the old calibration is the one a full build would fit. Otherwise it is fitted
    // on the whole new bundle exactly as `jikji build` does (its pseudo-queries are spread
    // over all chunks, so it cannot be patched).
    let t = Instant::now();
    let chunks_bin = write_chunks(&records)?;
    let same = |name: &str, bytes: &[u8]| {
        m.files
            .get(name)
            .is_some_and(|e| e.sha256 == sha256_hex(bytes))
    };
    let unchanged_data = same(jikji_format::chunks::CHUNKS_FILE, &chunks_bin)
        && same(jikji_format::postings::TERMS_FILE, &terms_fst)
        && same(jikji_format::postings::POSTINGS_FILE, &postings)
        && match &vectors {
            Some((_, bytes)) => same(jikji_format::vectors::VECTORS_FILE, bytes),
            None => !m.files.contains_key(jikji_format::vectors::VECTORS_FILE),
        };
    let calibration = match (&m.calibration, unchanged_data) {
        (Some(c), true) if c.method == crate::calibrate::METHOD => {
            report.calibration_reused = true;
            Some(c.clone())
        }
        _ => {
            if let (Some(dir), None, Some(_)) = (model_dir, &embedder, &vectors) {
                embedder = Some(load_build_embedder(dir)?);
            }
            calibrate(
                &terms_fst,
                &postings,
                &chunks_bin,
                vectors.as_ref().map(|(_, bytes)| bytes.clone()),
                embedder.as_ref(),
                opts.threads,
                analyzer_options,
                m.bm25,
            )?
        }
    };
    report
        .seconds
        .push(("calibrate".into(), t.elapsed().as_secs_f64()));

    let t = Instant::now();
    write_bundle(
        &opts.bundle,
        BundleParts {
            records: &records,
            parents: &[],
            chunking: Some(chunking.info(0)),
            terms_fst,
            postings,
            terms,
            vectors,
            params,
            sources,
            calibration,
            analyzer: analyzer_options,
            hanja,
            bm25: m.bm25,
        },
    )?;
    report.written = true;
    report
        .seconds
        .push(("write".into(), t.elapsed().as_secs_f64()));
    Ok(report)
}

/// Prints what changed and the time per phase (stderr).
pub fn print_update_report(r: &UpdateReport, bundle: &Path) {
    if r.written {
        eprintln!("updated {}", bundle.display());
    } else {
        eprintln!("{}: up to date, nothing written", bundle.display());
    }
    for (label, list) in [
        ("added", &r.added),
        ("changed", &r.changed),
        ("deleted", &r.deleted),
        ("archived (newer version present)", &r.archived),
        ("unarchived", &r.unarchived),
    ] {
        for p in list {
            eprintln!("  {label}: {p}");
        }
    }
    eprintln!(
        "  files: {} added, {} changed, {} deleted, {} unchanged",
        r.added.len(),
        r.changed.len(),
        r.deleted.len(),
        r.unchanged
    );
    eprintln!(
        "  chunks: {} kept, {} new, {} dropped, {} in the bundle; vectors: {} reused, {} new ({} embedded now)",
        r.chunks_kept, r.chunks_new, r.chunks_dropped, r.chunks, r.vectors_reused, r.vectors_new, r.embedded
    );
    for f in &r.findings {
        eprintln!("  {f}");
    }
    let secs: Vec<String> = r
        .seconds
        .iter()
        .map(|(p, s)| format!("{p} {s:.2}s"))
        .collect();
    eprintln!("  time: {}", secs.join(", "));
}

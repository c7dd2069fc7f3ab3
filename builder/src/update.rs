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
//! 5. **calibrate**: the old calibration is kept when the data files are byte for byte the
//!    old ones (it is then exactly the one a full build fits), or when the edit is too small
//!    to move it ([`Recalibrate::WhenMoved`], the default: at most [`KEEP_CALIBRATION_SHARE`]
//!    of the chunk texts added or removed, in a bundle of at least
//!    [`KEEP_CALIBRATION_MIN_CHUNKS`] chunks; `builder/tests/update_calibration.rs` measures
//!    how far a full build's refit is then). Otherwise it is fitted again on the new bundle,
//!    as a build does (300 pseudo-queries spread over all chunks, embedded with the model).
//! 6. **write**: a new bundle through [`jikji_format::BundleWriter`] (temp folder, atomic
//!    swap; the old bundle stays valid until the swap and becomes `BUNDLE.prev`); then the
//!    older generations are rotated ([`crate::generations`]): the replaced bundle becomes
//!    `BUNDLE.prev.1`, the one before `BUNDLE.prev.2`, up to [`UpdateOptions::keep`].
//!    A page whose bytes the new bundle would write again is hard-linked from the old
//!    bundle instead, unread, when it is proven unchanged
//!    ([`jikji_format::bundle::PreviousPages`]): the same name (content-derived: the same
//!    bytes) or, for the query model's row pages, the same token ids at the same number
//!    under the same pack, **and** the file still has the device, inode, size and
//!    modification time its writer recorded in `.jikji-pages`. The query model's layer and
//!    tokenizer pages are then not even read from the pack. A page rewritten since, or a
//!    bundle copied from elsewhere (other inodes), proves nothing: its pages are made and
//!    written again. Generations share linked page files (pages are immutable).
//!    **Row map**: after a small edit ([`RowMapRule`], [`keeps_row_map`]: the calibration's
//!    1 % in 1,000+ chunks) the query model's row map is the old bundle's, so every row page
//!    keeps its name and file and no chunk text is tokenized; queries embed bit for bit as
//!    with a full build's map (only which ids share a row page differs from a full build).
//!
//! **Opening** a paged bundle reads only its entry and the pages the update needs as input
//! (chunk records, vectors, sources table), each verified as any page is (header, SHA-256,
//! name); the dictionary, postings, typo, Hanja, expansion, columns, Unicode and query-model
//! pages are not read at all (they are made from the records, or linked).
//!
//! **Deletion guard**: after the chunk stage, before anything is written, an update that
//! would delete more files than [`UpdateOptions::max_deletions`] allows (default 20% of the
//! files in the bundle's sources table) fails with [`BuildError::TooManyDeletions`] unless
//! [`UpdateOptions::allow_deletions`]: a corpus folder given by mistake, or not mounted,
//! does not empty the bundle.
//!
//! The result equals a full `jikji build` of the same files: same chunk ids, records and
//! postings byte for byte, vectors copied from the old bundle bit for bit; a text embedded
//! by the update itself may differ from the same text embedded in another batch in the
//! last float bits (the model's output depends slightly on the batch's padding), and so
//! may the dense calibration fitted on it. `builder/tests/update.rs` checks all of it.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Instant;

use jikji_format::bundle::PreviousPages;
use jikji_format::chunks::write_chunks;
use jikji_format::vectors::write_quantized;
use jikji_format::{sha256_hex, Bundle, ChunkRecord};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::corpus::{CheckOptions, Finding};
use crate::error::{BuildError, Result};
use crate::ingest::chunk::{chunk_file, source_entry, updated_of};
use crate::ingest::embed::embed_passages;
use crate::ingest::write::{write_bundle, BundleParts};
use crate::ingest::{checked_corpus, index, model_info, BundleSettings, Chunking, IngestOptions};

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
    /// For each file in `archived`: which newer version archived it and why.
    pub versions: Vec<crate::versions::VersionNote>,
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
    /// True if the old calibration was kept (see [`Recalibrate`]).
    pub calibration_reused: bool,
    /// Why the calibration was kept or fitted, e.g. `kept: 2 of 6333 chunk texts changed
    /// (≤ 1%)`.
    pub calibration_note: String,
    /// Contradiction candidates recorded on their chunks, found again over the whole new
    /// bundle ([`crate::ingest::annotate_conflicts`]); `None` when not looked for (no vectors,
    /// or nothing written).
    pub conflicts: Option<usize>,
    /// The query model's row map was asked to be kept from the old bundle ([`RowMapRule`];
    /// the writer still counts when the old bundle has none of the same pack and layout).
    pub row_map_kept: bool,
    /// Pages of the new bundle encoded and written.
    pub pages_written: usize,
    /// Pages of the new bundle hard-linked from the old one, unread: proven unchanged by
    /// the old writer's records ([`jikji_format::bundle::PreviousPages`]).
    pub pages_linked: usize,
    /// Seconds per phase: open, scan, chunk, index, embed, conflicts, calibrate, write, and
    /// the write's parts (`write.pages`, `write.query-model`, `write.finish`).
    pub seconds: Vec<(String, f64)>,
    /// CPU seconds (user + system, all threads) per phase from open to write.
    pub cpu_seconds: Vec<(String, f64)>,
    /// What happened to the dense index (`pages.ivf`): `kept centroids: …, 2 of 48 list
    /// pages rewritten`, or `refitted: <the rule that fired>`
    /// ([`crate::ivf::plan_update`]); `None` without an index.
    pub dense_index: Option<String>,
}

/// How many of a bundle's files one update may delete: a count (`3`) or a percentage of
/// the files in the bundle's sources table (`20%`, rounded down).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DeletionLimit {
    /// At most this many files.
    Files(usize),
    /// At most this share of the bundle's files, in percent (0–100).
    Percent(f64),
}

impl Default for DeletionLimit {
    /// 20% of the bundle's files.
    fn default() -> Self {
        DeletionLimit::Percent(20.0)
    }
}

impl DeletionLimit {
    /// The most files that may be deleted from a bundle of `total` files.
    pub fn limit(&self, total: usize) -> usize {
        match *self {
            DeletionLimit::Files(n) => n,
            DeletionLimit::Percent(p) => ((total as f64) * p / 100.0).floor() as usize,
        }
    }
}

impl std::fmt::Display for DeletionLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeletionLimit::Files(n) => write!(f, "--max-deletions {n}"),
            DeletionLimit::Percent(p) => write!(f, "--max-deletions {p}%"),
        }
    }
}

impl std::str::FromStr for DeletionLimit {
    type Err = String;
    /// `N` (files) or `P%` (percent, 0–100, decimals allowed).
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let t = s.trim();
        if let Some(p) = t.strip_suffix('%') {
            let v: f64 = p
                .trim()
                .parse()
                .map_err(|_| format!("{s:?}: expected N (files) or P% (percent)"))?;
            if !(0.0..=100.0).contains(&v) {
                return Err(format!("{s:?}: a percentage from 0% to 100%"));
            }
            Ok(DeletionLimit::Percent(v))
        } else {
            t.parse()
                .map(DeletionLimit::Files)
                .map_err(|_| format!("{s:?}: expected N (files) or P% (percent)"))
        }
    }
}

/// The choices of one update that are not bundle settings (those come from the manifest).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateOptions {
    /// Also admit AI drafts (`provenance: ai-draft`) if the bundle did not.
    pub allow_ai_draft: bool,
    /// Deletion guard (see the module doc).
    pub max_deletions: DeletionLimit,
    /// Turn the deletion guard off.
    pub allow_deletions: bool,
    /// Older generations kept (`BUNDLE.prev.1..=keep`, [`crate::generations`]).
    pub keep: usize,
    /// When the score calibration is fitted again ([`Recalibrate`]).
    pub recalibrate: Recalibrate,
    /// When the query model's row map is kept ([`RowMapRule`]).
    pub row_map: RowMapRule,
}

/// When `jikji update` keeps the previous bundle's query-model row map (the `u-` page: which
/// token ids share a row page) instead of counting every chunk's tokens again.
///
/// The row map only lays the rows out (the most frequent corpus tokens first, so a query
/// fetches few pages); every token id has a slot in it whatever the corpus, so a query
/// embeds bit for bit the same with a kept map as with a counted one (tested:
/// `builder/tests/update_pages.rs`). Keeping it links every row page (same names, same
/// bytes) and skips tokenizing 6,000+ chunk texts; what it costs is layout: tokens the edit
/// made frequent stay where the old corpus put them (a query with one of them may fetch one
/// row page more).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RowMapRule {
    /// Keep it when the edit is small by the calibration's measure: at most
    /// [`KEEP_CALIBRATION_SHARE`] of the chunk texts added or removed, in a bundle of at
    /// least [`KEEP_CALIBRATION_MIN_CHUNKS`] chunks ([`keeps_row_map`]); otherwise count.
    /// The share is measured against the bundle being updated, so a series of small edits
    /// keeps one map; a full `jikji build` (or a larger edit) counts again.
    #[default]
    WhenSmall,
    /// Always keep it when the previous bundle has one of the same pack and layout.
    Always,
    /// Always count (what a full build does).
    Never,
}

/// The rule of [`RowMapRule::WhenSmall`]: `changed` chunk texts (added plus removed) of `of`
/// (the larger of the old and new chunk counts) are few enough to keep the row map: `of` ≥
/// [`KEEP_CALIBRATION_MIN_CHUNKS`] and `changed` ≤ [`KEEP_CALIBRATION_SHARE`] × `of`.
pub fn keeps_row_map(changed: usize, of: usize) -> bool {
    of >= KEEP_CALIBRATION_MIN_CHUNKS && changed as f64 <= KEEP_CALIBRATION_SHARE * of as f64
}

impl Default for UpdateOptions {
    /// No extra AI drafts, at most 20% of the files deleted, 2 generations kept, the
    /// calibration refitted and the row map counted only when the edit can move them.
    fn default() -> Self {
        UpdateOptions {
            allow_ai_draft: false,
            max_deletions: DeletionLimit::default(),
            allow_deletions: false,
            keep: crate::generations::DEFAULT_KEEP,
            recalibrate: Recalibrate::default(),
            row_map: RowMapRule::default(),
        }
    }
}

fn text_key(text: &str) -> [u8; 32] {
    Sha256::digest(text.as_bytes()).into()
}

/// Largest share of a bundle's chunk texts (added + removed, over the larger of the old and
/// new chunk counts) that an update may change and still keep the old calibration under
/// [`Recalibrate::WhenMoved`]: 1%.
///
/// Why the calibration cannot move then: it is a Platt fit on 300 pseudo-queries drawn from
/// the chunks; a change of at most 1% of the texts replaces in expectation at most 3 of their
/// source chunks and moves the BM25 statistics (chunk count, document frequencies, mean
/// length) by about 1%, well inside the fit's own sampling noise (a full build of the edited
/// corpus draws a different set of 300 spans, since the spans are picked by chunk position).
/// Measured: `builder/tests/update_calibration.rs`.
pub const KEEP_CALIBRATION_SHARE: f64 = 0.01;

/// Fewest chunks a bundle must have for [`Recalibrate::WhenMoved`] to keep its calibration
/// after a change (smaller bundles are refitted: there, 300 pseudo-queries cover a large share
/// of the chunks, and the fit is fast).
pub const KEEP_CALIBRATION_MIN_CHUNKS: usize = 1000;

/// When `jikji update` fits the score calibration again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Recalibrate {
    /// Keep the old calibration when the data files are byte for byte the old ones, or when at
    /// most [`KEEP_CALIBRATION_SHARE`] of the chunk texts changed in a bundle of at least
    /// [`KEEP_CALIBRATION_MIN_CHUNKS`] chunks (and the old calibration is of the current
    /// method, for a bundle with the same kind of data: vectors or not); otherwise refit.
    #[default]
    WhenMoved,
    /// Keep it only when the data files are byte for byte the old ones (the result is then
    /// exactly what a full build fits); otherwise refit (`jikji update --recalibrate`).
    Always,
}

/// [`update_with`] with the default [`UpdateOptions`] and `allow_ai_draft`.
pub fn update(opts: &IngestOptions, allow_ai_draft: bool) -> Result<UpdateReport> {
    update_with(
        opts,
        &UpdateOptions {
            allow_ai_draft,
            ..UpdateOptions::default()
        },
    )
}

/// Updates `opts.bundle` from `opts.corpus` with the bundle's own [`BundleSettings`] (its
/// manifest's; `u.allow_ai_draft` true also admits AI drafts if the bundle did not, and a
/// bundle that holds AI-draft chunks admits them even if its manifest predates the
/// `allow_ai_draft` field). See the module doc. Errors: the bundle cannot be opened or has
/// no sources table (built by an older `jikji`: build it once), the model differs from the
/// bundle's, a corpus error with `strict`, too many deletions
/// ([`BuildError::TooManyDeletions`], nothing written), a generation folder that is not a
/// bundle (nothing written), or an I/O error.
///
/// When nothing changed (same files, hashes, version facts and `updated` dates) the bundle
/// is left as it is and `written` is false.
pub fn update_with(opts: &IngestOptions, u: &UpdateOptions) -> Result<UpdateReport> {
    let mut report = UpdateReport::default();
    let mut cpu = crate::ingest::report::CpuLaps::start();
    let timed = |name: &str,
                 t: Instant,
                 report: &mut UpdateReport,
                 cpu: &mut crate::ingest::report::CpuLaps| {
        report
            .seconds
            .push((name.to_string(), t.elapsed().as_secs_f64()));
        cpu.lap(name);
        report.cpu_seconds = cpu.laps.clone();
    };

    let t = Instant::now();
    // Chunking a changed file of a bundle with vectors, and embedding its new chunks, need
    // the model's tokenizer (~0.8 s to parse): parsed on another core while the bundle is
    // opened (a BM25-only bundle given --model wastes that core's work, nothing else).
    if let Some(dir) = &opts.model_dir {
        crate::encoder::preload_tokenizer(&dir.join("tokenizer.json"));
    }
    let old = Old::open(&opts.bundle)?;
    let m = &old.manifest;
    let mut settings = BundleSettings::of_manifest(m)?;
    // A bundle that holds AI drafts was built admitting them, whatever its manifest says
    // (manifests before `allow_ai_draft` was recorded read as false).
    let has_drafts = old
        .records
        .iter()
        .any(|r| r.provenance.as_deref() == Some("ai-draft"));
    settings.allow_ai_draft |= u.allow_ai_draft || has_drafts;
    // Changed files are chunked as the bundle was (strategy, limits, tokenizer).
    let chunking = Chunking::of_manifest(m, opts.model_dir.as_deref())?;
    timed("open", t, &mut report, &mut cpu);

    let t = Instant::now();
    let check = CheckOptions {
        allow_ai_draft: settings.allow_ai_draft,
        drop_bodies: false,
    };
    let (scanned, _quarantined) = checked_corpus(opts, check)?;
    report.findings = scanned.findings.clone();
    let versions = crate::versions::resolve(&scanned.files);
    timed("scan", t, &mut report, &mut cpu);

    let t = Instant::now();
    let chunked = chunk(&old, &scanned.files, &versions, &chunking, &mut report);
    report.versions = crate::versions::notes(&scanned.files, &versions)
        .into_iter()
        .filter(|n| report.archived.contains(&n.file))
        .collect();
    timed("chunk", t, &mut report, &mut cpu);
    let Some(Rechunked {
        mut records,
        from_old,
        sources,
    }) = chunked
    else {
        report.written = false;
        return Ok(report);
    };
    let total = m.sources.len();
    let limit = u.max_deletions.limit(total);
    if !u.allow_deletions && report.deleted.len() > limit {
        return Err(BuildError::TooManyDeletions {
            bundle: opts.bundle.clone(),
            deleted: report.deleted.len(),
            total,
            limit,
            rule: u.max_deletions.to_string(),
            files: report.deleted.clone(),
        });
    }
    // Before anything is written: no generation name may hold a user's folder.
    crate::generations::check(&opts.bundle, u.keep)?;

    let t = Instant::now();
    let model_dir = old.model_dir(opts)?;
    // A bundle with vectors needs its model for new chunk texts (and for the calibration).
    // When some chunk text is not in the old bundle, the encoder (~0.6 s: pack read, weights
    // dequantised) is loaded on another core while the index is made; it is then unused
    // only if the vector cache has every such text. A failed load here is not an error: the
    // embed stage loads it again, if it needs it, and reports the error.
    let old_rows = old.rows_of(&records, &from_old);
    let load_encoder = model_dir
        .filter(|_| old.bundle.vectors().is_some() && old_rows.iter().any(Option::is_none));
    // The bundle's own analyzer options, hanja choice and BM25 parameters (a version 1
    // bundle is rebuilt with the current analyzer's defaults).
    let (indexed, mut embedder) = std::thread::scope(|s| {
        let loading = load_encoder.map(|dir| {
            s.spawn(move || crate::encoder::Encoder::load(dir, &model_info(dir)?.sha256))
        });
        let indexed = index::index(&records, &settings);
        let embedder = loading.and_then(|h| h.join().expect("encoder loading thread").ok());
        (indexed, embedder)
    });
    let indexed = indexed?;
    timed("index", t, &mut report, &mut cpu);

    let t = Instant::now();
    let (vectors, rows_from) = vectors(
        &old,
        &records,
        old_rows,
        model_dir,
        opts,
        &mut embedder,
        &mut report,
    )?;
    timed("embed", t, &mut report, &mut cpu);

    let t = Instant::now();
    // Over all records: a new file can contradict an unchanged one, and a deleted file's
    // notes must go (the old records carry the old bundle's).
    report.conflicts = match &vectors {
        Some((_, bytes)) => Some(crate::ingest::annotate_conflicts(&mut records, bytes)?),
        None => None,
    };
    timed("conflicts", t, &mut report, &mut cpu);

    let t = Instant::now();
    let chunks_bin = write_chunks(&records)?;
    let same_data = old.same_data(&chunks_bin, vectors.as_ref())?;
    let small = (u.recalibrate == Recalibrate::WhenMoved)
        .then(|| old.small_change(&records, vectors.is_some()))
        .flatten();
    let mut probe_queries = Vec::new();
    let calibration = if same_data {
        // The calibration is a function of the bundle's data files and the model: when
        // those are byte for byte the old bundle's (only the sources table changed, e.g. a
        // touched file), the old calibration is the one a full build would fit.
        report.calibration_reused = true;
        report.calibration_note = "kept: data files unchanged".into();
        m.calibration.clone()
    } else if let Some((changed, of)) = small {
        report.calibration_reused = true;
        report.calibration_note = format!(
            "kept: {changed} of {of} chunk texts changed (≤ {}%; --recalibrate refits)",
            KEEP_CALIBRATION_SHARE * 100.0
        );
        m.calibration.clone()
    } else {
        report.calibration_note = "fitted".into();
        // Otherwise it is fitted on the whole new bundle exactly as `jikji build` does
        // (its pseudo-queries are spread over all chunks, so it cannot be patched).
        if let (Some(dir), None, Some(_)) = (model_dir, &embedder, &vectors) {
            embedder = Some(crate::encoder::Encoder::load(
                dir,
                &model_info(dir)?.sha256,
            )?);
        }
        let c = crate::calibrate::calibrate_with_queries(
            &indexed.terms_fst,
            &indexed.postings,
            chunks_bin.clone().into(),
            vectors.as_ref().map(|(_, bytes)| bytes.clone()),
            embedder.as_ref(),
            vectors.as_ref().and_then(|(m, _)| m.centring.as_ref()),
            opts.threads,
            settings.analyzer,
            settings.bm25,
        )?;
        probe_queries = c.query_vectors;
        c.calibration
    };
    // `auto` chose the exact scan and the calibration is kept (a small edit): the choice
    // is kept too, without embedding the pseudo-queries to measure the index again.
    let kept_exact = (settings.dense_index == crate::ivf::DenseIndex::Auto
        && report.calibration_reused
        && old.bundle.pages().is_some_and(|p| p.ivf.is_none()))
    .then(|| m.dense_index_chosen_by.clone())
    .flatten()
    .filter(|c| c.starts_with("auto: exact"));
    if probe_queries.is_empty()
        && vectors.is_some()
        && kept_exact.is_none()
        && settings.dense_index.nlist_for(records.len()).is_some()
    {
        // A kept calibration has no pseudo-query vectors, but the dense index's default
        // nprobe is measured on them: embed the ones a full build would (same chunks, same
        // seeds), so the update's index equals a full build's.
        if let (Some(dir), None) = (model_dir, &embedder) {
            embedder = Some(crate::encoder::Encoder::load(
                dir,
                &model_info(dir)?.sha256,
            )?);
        }
        probe_queries = crate::calibrate::calibrate_with_queries(
            &indexed.terms_fst,
            &indexed.postings,
            chunks_bin.clone().into(),
            vectors.as_ref().map(|(_, bytes)| bytes.clone()),
            embedder.as_ref(),
            vectors.as_ref().and_then(|(m, _)| m.centring.as_ref()),
            opts.threads,
            settings.analyzer,
            settings.bm25,
        )?
        .query_vectors;
    }
    timed("calibrate", t, &mut report, &mut cpu);

    let t = Instant::now();
    let keep_map = match u.row_map {
        RowMapRule::Always => true,
        RowMapRule::Never => false,
        RowMapRule::WhenSmall => {
            let (changed, of) = old.text_changes(&records);
            keeps_row_map(changed, of)
        }
    };
    report.row_map_kept = keep_map && vectors.is_some() && opts.query_model.is_some();
    let row_map = if keep_map {
        jikji_query_model::paged::RowMapChoice::KeepPrevious
    } else {
        jikji_query_model::paged::RowMapChoice::Count
    };
    // A `BUNDLE.prev` left by `jikji build` (or an interrupted update) joins the
    // generations first, so the writer does not replace it.
    let (kept_index, index_note) = match &kept_exact {
        Some(c) => (None, Some(format!("exact scan kept ({c})"))),
        None => kept_index(&old, &settings, vectors.as_ref(), &rows_from)?,
    };
    crate::generations::rotate(&opts.bundle, u.keep)?;
    let (_, _, pages) = write_bundle(
        &opts.bundle,
        BundleParts {
            chunks: chunks_bin.into(),
            n_chunks: records.len(),
            chunking: chunking.info(0),
            indexed,
            vectors,
            sources,
            calibration,
            probe_queries: &probe_queries,
            settings,
            query_model: opts.query_model.as_deref(),
            threads: opts.threads,
            previous: Some(&old.previous),
            kept_index,
            kept_chosen_by: kept_exact,
            refit_note: index_note.clone().filter(|n| n.starts_with("refitted: ")),
            row_map,
        },
    )?;
    crate::generations::rotate(&opts.bundle, u.keep)?;
    report.dense_index = match (index_note, pages.ivf_lists) {
        (Some(n), Some(l)) if l.row_pages_kept + l.row_pages_rewritten > 0 => Some(format!(
            "{n}; {} of {} list pages and {} of {} row pages rewritten",
            l.rewritten,
            l.kept + l.rewritten,
            l.row_pages_rewritten,
            l.row_pages_kept + l.row_pages_rewritten
        )),
        (Some(n), Some(l)) => Some(format!(
            "{n}; {} of {} list pages rewritten",
            l.rewritten,
            l.kept + l.rewritten
        )),
        (n, _) => n,
    };
    report.pages_written = pages.written;
    report.pages_linked = pages.linked;
    report.written = true;
    timed("write", t, &mut report, &mut cpu);
    report.seconds.extend(pages.seconds);
    Ok(report)
}

/// The bundle being updated, with its chunk records and each source's record range.
struct Old {
    path: PathBuf,
    bundle: Bundle,
    /// Its manifest, with the sources table.
    manifest: jikji_format::Manifest,
    /// Its page files as its writer's records prove them (empty for a format 1 bundle).
    previous: PreviousPages,
    records: Vec<ChunkRecord>,
    /// Source path → (first record, end, index in the sources table).
    ranges: HashMap<String, (usize, usize, usize)>,
}

impl Old {
    /// Opens and checks the bundle: it exists (not only as `BUNDLE.prev`), has a sources
    /// table that counts its chunks, and is not `parent-child`.
    fn open(path: &Path) -> Result<Self> {
        let bundle_error = |message: String| BuildError::Bundle {
            path: path.to_path_buf(),
            message,
        };
        let prev = PathBuf::from(format!("{}.prev", path.display()));
        if !path.exists() && prev.exists() {
            return Err(bundle_error(format!(
                "missing, but {} exists (an interrupted write on a system without atomic exchange); move it back, then update",
                prev.display()
            )));
        }
        let opened = |source| BuildError::OpenBundle {
            path: path.to_path_buf(),
            source,
        };
        // A paged bundle: only the pages an update reads (records, vectors, sources table),
        // each verified as it is read; the others are taken over unread when proven
        // unchanged (`PreviousPages`), or rebuilt.
        let (bundle, manifest, previous) = if path.join(jikji_format::paged::ENTRY_FILE).exists() {
            let bundle = Bundle::open_paged_dir(path).map_err(opened)?;
            let root = bundle
                .pages()
                .cloned()
                .expect("a paged bundle has page roots");
            // Read, inflated and verified on every core (each page is independent; the
            // cache is shared and thread-safe).
            let names = jikji_format::paged::record_pages(&root);
            let threads = crate::ingest::default_threads().clamp(1, 16);
            let per = names.len().div_ceil(threads).max(1);
            std::thread::scope(|s| {
                let handles: Vec<_> = names
                    .chunks(per)
                    .map(|part| {
                        let b = &bundle;
                        s.spawn(move || b.load_pages(part))
                    })
                    .collect();
                handles
                    .into_iter()
                    .try_for_each(|h| h.join().expect("page loading thread").map(drop))
            })
            .map_err(opened)?;
            let mut manifest = bundle.manifest().clone();
            manifest.sources = jikji_format::paged::sources_table(
                &root,
                bundle.cache().expect("a paged bundle has a cache"),
            )
            .map_err(opened)?;
            bundle.vectors_checked().map_err(opened)?;
            (bundle, manifest, PreviousPages::open(path, Some(root)))
        } else {
            let bundle = Bundle::open_dir(path).map_err(opened)?;
            let manifest = bundle.manifest().clone();
            (bundle, manifest, PreviousPages::open(path, None))
        };
        let m = &manifest;
        if m.sources.is_empty() {
            return Err(bundle_error(
                "the bundle has no sources table (built by an older jikji); run `jikji build` once"
                    .into(),
            ));
        }
        if m.parents() > 0 {
            return Err(bundle_error("a parent-child bundle; jikji update does not re-link parent sections yet, run `jikji build --strategy parent-child`".into()));
        }
        // Records parsed on every core, in doc-id order.
        let n = bundle.chunks().len() as u32;
        let threads = crate::ingest::default_threads().clamp(1, 16) as u32;
        let per = n.div_ceil(threads).max(1);
        let records: Vec<ChunkRecord> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..n)
                .step_by(per as usize)
                .map(|a| {
                    let c = bundle.chunks();
                    s.spawn(move || {
                        (a..(a + per).min(n))
                            .map(|i| c.get(i))
                            .collect::<std::result::Result<Vec<_>, _>>()
                    })
                })
                .collect();
            handles.into_iter().try_fold(Vec::new(), |mut all, h| {
                all.extend(h.join().expect("record parsing thread")?);
                Ok::<_, jikji_format::FormatError>(all)
            })
        })?;
        let mut ranges = HashMap::new();
        let mut at = 0;
        for (k, s) in m.sources.iter().enumerate() {
            ranges.insert(s.path.clone(), (at, at + s.chunks, k));
            at += s.chunks;
        }
        if at != records.len() {
            return Err(bundle_error(format!(
                "the sources table counts {at} chunks but chunks.bin has {}; rebuild the bundle",
                records.len()
            )));
        }
        Ok(Old {
            path: path.to_path_buf(),
            bundle,
            manifest,
            previous,
            records,
            ranges,
        })
    }

    /// The old record whose stored vector each of `records` can reuse: the one it comes
    /// from (`from_old`, a chunk of an unchanged file), else one with the same text (a
    /// chunk of a changed file whose text did not change); `None` for a text the old bundle
    /// lacks ([`vectors`] embeds it, unless the vector cache has it). One entry per record.
    fn rows_of(&self, records: &[ChunkRecord], from_old: &[Option<usize>]) -> Vec<Option<usize>> {
        let by_text: HashMap<[u8; 32], usize> = self
            .records
            .iter()
            .enumerate()
            .map(|(i, r)| (text_key(&r.text), i))
            .collect();
        records
            .iter()
            .zip(from_old)
            .map(|(r, f)| f.or_else(|| by_text.get(&text_key(&r.text)).copied()))
            .collect()
    }

    /// The model folder, checked against the bundle's model, when the bundle has vectors;
    /// `None` for a BM25-only bundle.
    fn model_dir<'a>(&self, opts: &'a IngestOptions) -> Result<Option<&'a Path>> {
        let (Some(_), Some(info)) = (self.bundle.vectors(), &self.manifest.model) else {
            return Ok(None);
        };
        let dir = opts.model_dir.as_deref().ok_or_else(|| BuildError::Bundle {
            path: self.path.clone(),
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
        Ok(Some(dir))
    }

    /// True when the new data equal the old bundle's and the old calibration is of the
    /// current method (so a full build would fit the same one): the chunk records
    /// (`chunks.bin`, byte for byte), the vector rows (bit for bit, or neither has vectors)
    /// and the analyzer version. The term dictionary and postings are a function of the
    /// records and the manifest's settings, which the update keeps ([`BundleSettings::of_manifest`]),
    /// so they are equal too once the analyzer is the current one (a bundle of an older
    /// analyzer version is reindexed with the current rules: not the same data).
    /// Errors: corrupt new vector bytes.
    fn same_data(
        &self,
        chunks_bin: &[u8],
        vectors: Option<&(jikji_format::ModelInfo, Vec<u8>)>,
    ) -> Result<bool> {
        let m = &self.manifest;
        if m.calibration
            .as_ref()
            .is_none_or(|c| c.method != crate::calibrate::METHOD)
            || m.analyzer_version != jikji_format::analyzer::ANALYZER_VERSION
            || write_chunks(&self.records)? != chunks_bin
        {
            return Ok(false);
        }
        Ok(match (vectors, self.bundle.vectors()) {
            (None, None) => true,
            (Some((_, bytes)), Some(old)) => {
                let new = jikji_format::vectors::Vectors::open(bytes)?;
                new.len() == old.len()
                    && new.dim() == old.dim()
                    && (0..new.len()).all(|i| {
                        let ((sa, qa), (sb, qb)) = (new.row(i), old.row(i));
                        sa.to_bits() == sb.to_bits() && qa == qb
                    })
            }
            _ => false,
        })
    }
}

impl Old {
    /// `Some((changed, of))` when the new `records` change at most
    /// [`KEEP_CALIBRATION_SHARE`] of the chunk texts (`changed`: texts added plus texts
    /// removed, as multisets; `of`: the larger chunk count), the bundle has at least
    /// [`KEEP_CALIBRATION_MIN_CHUNKS`] chunks, has a calibration of the current method, and
    /// keeps having vectors (or not); `None` otherwise.
    fn small_change(&self, records: &[ChunkRecord], has_vectors: bool) -> Option<(usize, usize)> {
        let m = &self.manifest;
        let of = records.len().max(self.records.len());
        if of < KEEP_CALIBRATION_MIN_CHUNKS
            || m.calibration
                .as_ref()
                .is_none_or(|c| c.method != crate::calibrate::METHOD)
            || has_vectors != self.bundle.has_vectors()
        {
            return None;
        }
        let (changed, of) = self.text_changes(records);
        (changed as f64 <= KEEP_CALIBRATION_SHARE * of as f64).then_some((changed, of))
    }

    /// `(changed, of)`: chunk texts added plus removed between the old records and
    /// `records` (as multisets), and the larger of the two chunk counts.
    fn text_changes(&self, records: &[ChunkRecord]) -> (usize, usize) {
        let of = records.len().max(self.records.len());
        let mut count: HashMap<[u8; 32], i64> = HashMap::new();
        for r in &self.records {
            *count.entry(text_key(&r.text)).or_default() -= 1;
        }
        for r in records {
            *count.entry(text_key(&r.text)).or_default() += 1;
        }
        let changed = count
            .values()
            .map(|c| c.unsigned_abs() as usize)
            .sum::<usize>();
        (changed, of)
    }
}

/// The dense index an update writes: the old int8 index's centroids kept with the lists of
/// [`crate::ivf::plan_update`] when the bundle has one and its rule keeps it, else `None`
/// (the writer builds the settings' index afresh, as a full build does), and the note for
/// the report (`kept centroids: …` or `refitted: …`; `None` when no index is written).
/// `rows_from[d]`: the old row new chunk `d`'s vector was copied from.
fn kept_index(
    old: &Old,
    settings: &BundleSettings,
    vectors: Option<&(jikji_format::ModelInfo, Vec<u8>)>,
    rows_from: &[Option<usize>],
) -> Result<(Option<crate::ingest::write::KeptIndex>, Option<String>)> {
    let Some((info, bytes)) = vectors else {
        return Ok((None, None));
    };
    let n = rows_from.len();
    let Some(nlist) = settings.dense_index.nlist_for(n) else {
        return Ok((None, None));
    };
    let refit = |why: String| Ok((None, Some(format!("refitted: {why}"))));
    let Some(r) = old.bundle.pages().and_then(|p| p.ivf.clone()) else {
        return refit("the old bundle has no dense index".into());
    };
    if r.is_binary() != settings.dense_index.binary_for(n) {
        return refit(format!(
            "{} lists asked, the index has {} lists",
            if settings.dense_index.binary_for(n) {
                "binary"
            } else {
                "int8"
            },
            r.codes
        ));
    }
    if r.is_binary() && r.list_rows.is_none() {
        return refit(
            "binary lists with rows in list order (written before rows per list) are rebuilt once"
                .into(),
        );
    }
    let Some(ov) = old.bundle.vectors() else {
        return refit("the old bundle has no vectors".into());
    };
    let v = jikji_format::vectors::Vectors::open(bytes)?;
    if let crate::ivf::DenseIndex::Ivf { nlist: Some(_), .. } = settings.dense_index {
        // More lists than asked are those an earlier update split past the cap (a build
        // below `BALANCE_MIN_CHUNKS` makes exactly the lists asked): kept. Fewer (asked more
        // lists than the chunks allowed when it was built) refit.
        if n < crate::ivf::BALANCE_MIN_CHUNKS && r.nlist < nlist {
            return refit(format!("{nlist} lists asked, the index has {}", r.nlist));
        }
    }
    let old_centring = old
        .manifest
        .model
        .as_ref()
        .and_then(|m| m.centring.as_ref());
    if v.dim() != ov.dim() {
        return refit("the vectors' dimension changed".into());
    }
    if let Some(why) = crate::ivf::centring_refit(old_centring, info.centring.as_ref()) {
        return refit(why);
    }
    let mut bodies = Vec::with_capacity(r.centroids.pages);
    for p in 0..r.centroids.pages {
        match old.previous.body(&r.centroid_page(p)) {
            Some(b) => bodies.push(b),
            None => return refit(format!("centroid page {} unreadable", r.centroid_page(p))),
        }
    }
    let mut old_lists = Vec::with_capacity(r.nlist);
    for j in 0..r.nlist {
        let name = r.list_page(j);
        let Some(b) = old.previous.body(&name) else {
            return refit(format!("list page {name} unreadable"));
        };
        old_lists.push(if r.is_binary() {
            r.open_list(&name, &b, ov.len(), ov.dim())?.docs
        } else {
            jikji_format::paged::ivf::ListPage::open(&name, &b, ov.len(), ov.dim())?.docs
        });
    }
    let centroids = crate::ingest::write::stored_centroids(&r, &bodies, v.dim())?;
    let centring = match &info.centring {
        Some(c) => jikji_engine::centring::ChunkCentring::langs_of(c, n, v.dim())
            .map_err(|e| BuildError::Ivf(e.to_string()))?,
        None => None,
    };
    let scoring = |i: usize| crate::ivf::scoring_vector(&v, centring.as_ref(), i);
    let mut cap = crate::ivf::update_cap(n, &old_lists);
    if let (Some(s), Some(rows)) = (r.list_rows, &r.rows) {
        // A binary list may not pass the row page numbers reserved for it: `per_page` rows
        // a page, or with grouped rows groups of at least `⌊per_page/2⌋ + 1` rows once a
        // list is split (`ivf::row_groups`), so at most `S` groups.
        let room = if r.grouped() {
            rows.per_page / 2 + 1
        } else {
            rows.per_page
        };
        cap = cap.min(s.saturating_mul(room));
    }
    // A list past the cap is split: a binary index's parts get row page numbers of their
    // own (`list_rows` per list; binary lists written before rows per list refit above);
    // an int8 list holds its rows in its own page, so one number a list.
    let split = if r.is_binary() { r.list_rows } else { Some(1) };
    match crate::ivf::plan_update_with(
        &centroids,
        &old_lists,
        ov.len(),
        rows_from,
        &scoring,
        cap,
        split,
    ) {
        crate::ivf::UpdatePlan::Refit(why) => refit(why),
        crate::ivf::UpdatePlan::Keep {
            lists,
            assigned,
            changed,
            split,
        } => {
            let mut note = format!(
                "kept centroids: {changed} of {} vectors new, changed or dropped (refit above {}%), {assigned} assigned to the nearest centroid",
                n.max(ov.len()),
                crate::ivf::REFIT_CHANGED_SHARE * 100.0
            );
            let (r, bodies) = if split.is_empty() {
                (r, bodies)
            } else {
                let cut: Vec<String> = split
                    .iter()
                    .filter(|x| x.0 < r.nlist)
                    .map(|x| x.0.to_string())
                    .collect();
                note.push_str(&format!(
                    "; split past the cap {cap}: list{} {} into {} lists ({} → {})",
                    if cut.len() == 1 { "" } else { "s" },
                    cut.join(", "),
                    split.len(),
                    r.nlist,
                    lists.len()
                ));
                jikji_format::paged::ivf::edit_centroids(&r, &bodies, &split, lists.len(), v.dim())?
            };
            Ok((
                Some(crate::ingest::write::KeptIndex {
                    old: r,
                    centroid_bodies: bodies,
                    lists,
                    note: format!("update: {note}"),
                }),
                Some(note),
            ))
        }
    }
}

/// The chunk stage of an update: the new bundle's records, where each came from, and the
/// sources table.
struct Rechunked {
    records: Vec<ChunkRecord>,
    /// For each record, its index in the old bundle if taken from there.
    from_old: Vec<Option<usize>>,
    sources: Vec<jikji_format::SourceEntry>,
}

/// Classifies every file against the old sources table (new / changed / unchanged /
/// deleted, by SHA-256), keeps unchanged files' records (recomputing `updated` and the
/// version facts), chunks new and changed files with `chunking`, and fills the report.
/// `None` when nothing at all changed.
fn chunk(
    old: &Old,
    files: &[crate::corpus::SourceFile],
    versions: &[crate::versions::VersionInfo],
    chunking: &Chunking,
    report: &mut UpdateReport,
) -> Option<Rechunked> {
    let m = &old.manifest;
    let present: BTreeSet<&str> = files.iter().map(|f| f.rel.as_str()).collect();
    let mut records: Vec<ChunkRecord> = Vec::with_capacity(old.records.len());
    let mut from_old: Vec<Option<usize>> = Vec::with_capacity(old.records.len());
    let mut sources = Vec::with_capacity(files.len());
    let mut dirty = false;
    for (f, v) in files.iter().zip(versions) {
        let sha = sha256_hex(f.text.as_bytes());
        let old_entry = old
            .ranges
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
                for (i, r) in old.records[a..b].iter().enumerate() {
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
                    Some((a, b, e)) => {
                        report.changed.push(f.rel.clone());
                        report.chunks_dropped += b - a;
                        if e.archived && !v.archived {
                            report.unarchived.push(f.rel.clone());
                        }
                    }
                    None => report.added.push(f.rel.clone()),
                }
                if v.archived {
                    report.archived.push(f.rel.clone());
                }
                let recs = chunk_file(f, chunking, v).chunks;
                report.chunks_new += recs.len();
                sources.push(source_entry(f, v, recs.len()));
                from_old.extend(std::iter::repeat_n(None, recs.len()));
                records.extend(recs);
            }
        }
    }
    for s in &m.sources {
        if !present.contains(s.path.as_str()) {
            dirty = true;
            report.deleted.push(s.path.clone());
            report.chunks_dropped += s.chunks;
        }
    }
    report.chunks = records.len();
    dirty.then_some(Rechunked {
        records,
        from_old,
        sources,
    })
}

/// The embed stage of an update: `vectors.bin` for `records` when the old bundle has
/// vectors. A record with an old row in `rows` ([`Old::rows_of`]: one per record) gets that
/// old int8 row and scale copied bit for bit; only the others are embedded
/// (through the cache), loading the model into `embedder` if needed. With a centring
/// record, the rows stay as the model gave them and the record's per-chunk languages and
/// offsets are made for `records` (a `lang-mean-v1` record, whose rows were stored
/// centred, is refused: a full build is needed).
#[allow(clippy::type_complexity)]
fn vectors(
    old: &Old,
    records: &[ChunkRecord],
    rows: Vec<Option<usize>>,
    model_dir: Option<&Path>,
    opts: &IngestOptions,
    embedder: &mut Option<crate::encoder::Encoder>,
    report: &mut UpdateReport,
) -> Result<(
    Option<(jikji_format::ModelInfo, Vec<u8>)>,
    Vec<Option<usize>>,
)> {
    let (Some(ov), Some(info)) = (old.bundle.vectors(), &old.manifest.model) else {
        return Ok((None, vec![None; records.len()]));
    };
    // Rows without an old vector are embedded.
    let todo: Vec<usize> = (0..records.len()).filter(|&i| rows[i].is_none()).collect();
    report.vectors_reused = records.len() - todo.len();
    report.vectors_new = todo.len();
    let mut fresh: HashMap<usize, (f32, Vec<i8>)> = HashMap::new();
    let mut new_langs: HashMap<usize, Option<String>> = HashMap::new();
    let mut stats = None;
    if !todo.is_empty() {
        let dir = model_dir.ok_or_else(|| BuildError::Bundle {
            path: old.path.clone(),
            message: "the bundle has vectors; give the model folder (--model DIR)".into(),
        })?;
        let texts: Vec<&str> = todo.iter().map(|&i| records[i].text.as_str()).collect();
        let e = embed_passages(
            &texts,
            dir,
            opts.cache_dir.as_deref(),
            opts.threads,
            opts.progress,
            embedder,
        )?;
        // Rows stay as the model gave them; the new chunks' centring languages are found
        // as a full build finds them (below).
        if info.centring.is_some() {
            let means = centring_stats(info, dir, opts)?;
            for (&i, v) in todo.iter().zip(&e.vectors) {
                new_langs.insert(i, means.language_of(v, &records[i].text).map(String::from));
            }
            stats = Some(means);
        }
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
    // With a bundle prior the offsets are recomputed (below): they need the statistics
    // even when no chunk was embedded (a file deleted).
    let prior = info.centring.as_ref().and_then(|c| c.bundle_prior);
    let stats = match (stats, prior, model_dir) {
        (Some(s), _, _) => Some(s),
        (None, Some(_), Some(dir)) => Some(centring_stats(info, dir, opts)?),
        (None, _, _) => None,
    };
    let mut info = info.clone();
    if let Some(c) = &mut info.centring {
        if c.method != jikji_engine::centring::METHOD {
            return Err(BuildError::Bundle {
                path: old.path.clone(),
                message: format!(
                    "model.centring.method {:?}: its rows were stored centred; run a full `jikji build`",
                    c.method
                ),
            });
        }
        // Each chunk's language: an old row's from the old record (a full build finds the
        // same: same text, same vector), a new one's from its vector and text.
        let old_runs = c.chunks.as_deref().unwrap_or_default();
        let old_langs: Vec<&str> = jikji_engine::centring::parse_runs(old_runs, ov.len())
            .map_err(|e| BuildError::Bundle {
                path: old.path.clone(),
                message: e.to_string(),
            })?
            .into_iter()
            .flat_map(|(code, n)| std::iter::repeat_n(code, n))
            .collect();
        let langs: Vec<Option<&str>> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| match r {
                Some(o) => Some(old_langs[*o]).filter(|l| *l != jikji_engine::centring::NO_LANG),
                None => new_langs[&i].as_deref(),
            })
            .collect();
        // The offsets of the languages the bundle now has. With a bundle prior they are
        // recomputed from the stored rows as a full build computes them (the rows, not the
        // model's vectors, so old and new chunks count alike); without one, the recorded
        // ones and the reference means for a language new to the bundle.
        let settings = crate::lang_means::CentringSettings::of_record(c)?;
        let offsets = match &stats {
            Some(s) if settings.bundle_prior.is_some() => {
                let stored = jikji_format::vectors::Vectors::open(&bytes)?;
                let sources: Vec<&str> = records.iter().map(|r| r.source.as_str()).collect();
                s.passage_offsets(&stored, &langs, &sources, settings)
                    .into_iter()
                    .map(|(l, o)| (l, crate::lang_means::rounded(&o)))
                    .collect()
            }
            Some(s) => s.recorded_offsets(c),
            None => c.passage.clone(),
        };
        let present: std::collections::BTreeSet<&str> = langs.iter().flatten().copied().collect();
        let passage = offsets
            .into_iter()
            .filter(|(l, _)| present.contains(l.as_str()))
            .collect();
        let runs = jikji_engine::centring::write_runs(langs.iter().copied());
        // A binary index in the per-list row layout codes each row against the scoring
        // vector `x̂ − o[l]`: recomputed offsets would change every list's codes (hence
        // every page name). While the offsets move within the refit rule's
        // `REFIT_OFFSET_SHIFT` (same languages), the update keeps the recorded ones, as it
        // keeps the centroids (`docs/design/update.md`, "Binary lists kept").
        let binary_kept = old
            .bundle
            .pages()
            .and_then(|p| p.ivf.as_ref())
            .is_some_and(|i| i.is_binary() && i.list_rows.is_some());
        let small = crate::ivf::offsets_shift(&c.passage, &passage)
            .is_some_and(|x| x <= crate::ivf::REFIT_OFFSET_SHIFT);
        if !(binary_kept && small) {
            c.passage = passage;
        }
        c.chunks = Some(runs);
    }
    Ok((Some((info, bytes)), rows))
}

/// The language statistics a bundle's centring was made with, for `jikji update`: the
/// model folder's (or `opts.lang_means`), refused when its SHA-256 is not the record's.
fn centring_stats(
    info: &jikji_format::ModelInfo,
    dir: &Path,
    opts: &IngestOptions,
) -> Result<crate::lang_means::LoadedStats> {
    let c = info.centring.as_ref().expect("called with a centring");
    let path = crate::lang_means::stats_path(dir, opts.lang_means.as_deref());
    let means = crate::lang_means::LoadedStats::load(&path, &info.sha256)?;
    if means.sha256 != c.stats_sha256 {
        return Err(BuildError::Model {
            path,
            message: format!(
                "sha256 {} differs from the bundle's centring statistics {}; \
                 run a full `jikji build`",
                means.sha256, c.stats_sha256
            ),
        });
    }
    Ok(means)
}

/// Prints what changed and the time per phase (stderr).
pub fn print_update_report(r: &UpdateReport, bundle: &Path) {
    if r.written {
        eprintln!("updated {}", bundle.display());
    } else {
        eprintln!("{}: up to date, nothing written", bundle.display());
    }
    for v in &r.versions {
        eprintln!("  archived: {v}");
    }
    let explained: Vec<&String> = r.versions.iter().map(|v| &v.file).collect();
    let archived: Vec<String> = r
        .archived
        .iter()
        .filter(|a| !explained.contains(a))
        .cloned()
        .collect();
    for (label, list) in [
        ("added", &r.added),
        ("changed", &r.changed),
        ("deleted", &r.deleted),
        ("archived (newer version present)", &archived),
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
    if r.written {
        eprintln!(
            "  pages: {} written, {} linked unchanged from the old bundle",
            r.pages_written, r.pages_linked
        );
        eprintln!("  calibration {}", r.calibration_note);
        if let Some(d) = &r.dense_index {
            eprintln!("  dense index {d}");
        }
        if r.row_map_kept {
            eprintln!("  query-model row map kept (small edit; --recalibrate recounts it)");
        }
        eprintln!("  {}", crate::ingest::report::conflicts_line(r.conflicts));
    }
    let secs: Vec<String> = r
        .seconds
        .iter()
        .map(|(p, s)| format!("{p} {s:.2}s"))
        .collect();
    eprintln!("  time: {}", secs.join(", "));
    let cpu: Vec<String> = r
        .cpu_seconds
        .iter()
        .map(|(p, s)| format!("{p} {s:.2}s"))
        .collect();
    eprintln!("  CPU: {}", cpu.join(", "));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The row map rule: 1 % of the chunk texts in 1,000+ chunks, the calibration's bounds.
    #[test]
    fn the_row_map_is_kept_for_at_most_one_percent_in_a_thousand_chunks() {
        assert!(keeps_row_map(0, 1000));
        assert!(keeps_row_map(2, 6333));
        assert!(keeps_row_map(63, 6333));
        assert!(!keeps_row_map(64, 6333));
        assert!(keeps_row_map(10, 1000));
        assert!(!keeps_row_map(11, 1000));
        // Small bundles are always recounted (the count is cheap there).
        assert!(!keeps_row_map(0, 999));
        assert_eq!(RowMapRule::default(), RowMapRule::WhenSmall);
        assert_eq!(UpdateOptions::default().row_map, RowMapRule::WhenSmall);
    }
}

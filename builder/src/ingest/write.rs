//! Write stage: everything a bundle holds → the bundle folder, atomically
//! ([`BundleWriter`]: a temp folder renamed into place, the previous bundle kept as
//! `BUNDLE.prev`), with a manifest that records the [`BundleSettings`].

use std::path::Path;

use jikji_format::bundle::PreviousPages;
use jikji_format::chunks::ChunkStore;
use jikji_format::hanja::HanjaMap;
use jikji_format::paged::page::Encoded;
use jikji_format::paged::{PageSink, ENTRY_FILE};
use jikji_format::postings::LexicalIndex;
use jikji_format::vectors::Vectors;
use jikji_format::{
    analyzer, BundleWriter, ChunkingInfo, Counts, Manifest, ModelInfo, SourceEntry,
};

use super::index::Indexed;
use super::BundleSettings;
use crate::error::Result;

/// Everything a bundle holds, ready to write.
pub struct BundleParts<'a> {
    /// `chunks.bin`: the chunk records (doc id = index), then the parent sections
    /// (`parent-child`, not indexed); in memory or a build's mapped temporary file.
    pub chunks: jikji_format::bytes::Bytes,
    /// The number of indexed chunks (the records before the parents).
    pub n_chunks: usize,
    /// How the chunks were cut ([`super::Chunking::info`]).
    pub chunking: ChunkingInfo,
    /// The lexical files ([`super::index::index`]).
    pub indexed: Indexed,
    /// Model and `vectors.bin` bytes, if the bundle has vectors.
    pub vectors: Option<(ModelInfo, Vec<u8>)>,
    /// The source files table.
    pub sources: Vec<SourceEntry>,
    /// Score calibration ([`crate::calibrate`]).
    pub calibration: Option<jikji_format::Calibration>,
    /// The calibration's pseudo-query vectors ([`crate::calibrate::Calibrated`]): the dense
    /// index's default `nprobe` is the fewest lists whose recall on them reaches
    /// [`crate::ivf::PROBE_RECALL_TARGET`]; empty: [`crate::ivf::default_nprobe`].
    pub probe_queries: &'a [Vec<f32>],
    /// The settings the bundle was built with (recorded in the manifest).
    pub settings: BundleSettings,
    /// A query-model pack folder: a bundle with vectors then carries its pages
    /// ([`jikji_query_model::paged::write_pages`]); ignored without vectors.
    pub query_model: Option<&'a Path>,
    /// Threads for counting the chunks' tokens (the row order of the query model's pages).
    pub threads: usize,
    /// The page files of the bundle this one replaces (`jikji update`): a page it has, proven
    /// unchanged ([`PreviousPages::proven`]), is hard-linked instead of encoded and written
    /// again ([`jikji_format::paged::PageSink`]). `None`: every page is written.
    pub previous: Option<&'a PreviousPages>,
    /// `jikji update`'s kept dense index ([`crate::ivf::plan_update`]): written with the old
    /// centroids and these lists instead of a k-means ([`KeptIndex`]). `None`: the
    /// settings' index is built afresh.
    pub kept_index: Option<KeptIndex>,
    /// `jikji update` keeping an `auto` bundle's exact scan without measuring the index
    /// again: the old `dense_index_chosen_by`, recorded again, and no index is written.
    /// `None` otherwise.
    pub kept_chosen_by: Option<String>,
    /// `jikji update` refitting the dense index: why ([`crate::ivf::plan_update`]'s rule,
    /// e.g. `refitted: 30 of 100 vectors new, changed or dropped (> 20%)`), recorded as
    /// `update: <it>; <how the index was chosen>` in the entry. `None` otherwise.
    pub refit_note: Option<String>,
    /// Where the query model's row map comes from: counted from the chunks' texts (a build), or the
    /// previous bundle's kept (`jikji update` after a small edit, [`crate::update`] "row
    /// map"; [`jikji_query_model::paged::RowMapChoice`]).
    pub row_map: jikji_query_model::paged::RowMapChoice,
}

/// A dense index (int8 lists, or binary ones with rows per list) whose centroids an update keeps ([`crate::ivf::UpdatePlan::Keep`]).
pub struct KeptIndex {
    /// The old bundle's `pages.ivf`; after lists split past the cap, that root with the
    /// split lists' centroids replaced and appended
    /// ([`jikji_format::paged::ivf::edit_centroids`]: `nlist` = `lists.len()`).
    pub old: jikji_format::paged::ivf::IvfRoot,
    /// The raw bodies of its centroid pages, in order (the edited ones after a split).
    pub centroid_bodies: Vec<Vec<u8>>,
    /// The new lists (doc ids of the new bundle, ascending).
    pub lists: Vec<Vec<u32>>,
    /// How they were made, for the entry's `chosen_by` (e.g. `update: kept centroids, 3 of
    /// 581 vectors changed, 2 assigned`).
    pub note: String,
}

/// Where [`write_bundle`]'s pages go: a [`BundleWriter`]'s page store (its own, or another of its
/// folder on a second thread: [`BundleWriter::page_store`]), counting bytes per page kind,
/// linking the previous bundle's proven pages.
struct WriterSink<'a> {
    w: &'a mut jikji_format::bundle::PageStore,
    previous: Option<&'a PreviousPages>,
    per_kind: std::collections::BTreeMap<String, u64>,
}

impl WriterSink<'_> {
    fn count(&mut self, name: &str, bytes: u64) {
        *self
            .per_kind
            .entry(format!("p/{}-*", &name[..1]))
            .or_default() += bytes;
    }
}

impl PageSink for WriterSink<'_> {
    fn put(&mut self, page: Encoded) -> jikji_format::Result<()> {
        self.w.add_page(&page.name, &page.bytes)?;
        self.count(&page.name, page.bytes.len() as u64);
        Ok(())
    }

    fn reuse(&mut self, name: &str, old: &str) -> jikji_format::Result<bool> {
        let Some((path, rec)) = self.previous.and_then(|p| p.proven(old)) else {
            return Ok(false);
        };
        if !self.w.link_page(name, &path, rec)? {
            return Ok(false);
        }
        self.count(name, rec.bytes);
        Ok(true)
    }

    fn previous_root(&self) -> Option<&jikji_format::paged::PagesRoot> {
        self.previous.and_then(PreviousPages::root)
    }

    fn previous_body(&self, name: &str) -> Option<Vec<u8>> {
        self.previous.and_then(|p| p.body(name))
    }
}

/// The seed of the dense index's k-means (fixed: a rebuild of the same rows gives the same
/// pages).
pub const IVF_SEED: u64 = 0x6a696b6a69; // "jikji"

/// Environment variable forcing the centroid pages' codes of a new dense index (for
/// measurement): `int8` or `int4-centred` ([`centroid_codes_for`]). Unset or empty: the
/// builder's choice.
pub const IVF_CENTROIDS_ENV: &str = "JIKJI_IVF_CENTROIDS";

/// Environment variable forcing the background sample page's codes of a new dense index
/// (for measurement): `int8` or `binary` (binary lists only; [`coded_sample_for`]). Unset
/// or empty: the builder's choice.
pub const IVF_SAMPLE_ENV: &str = "JIKJI_IVF_SAMPLE";

/// How a new dense index over `n` chunks codes its centroid pages: 4-bit centred from
/// [`crate::ivf::AUTO_MIN_CHUNKS`] chunks on (at 1M chunks 1.91 MB instead of 4.58 MB for
/// recall 0.901 instead of 0.907: `docs/design/dense-pq.md` §4.4), int8 below (small
/// bundles keep the routing of today's indexes); `forced` (the value of
/// [`IVF_CENTROIDS_ENV`]) overrides. Errors: an unknown forced value
/// ([`crate::error::BuildError::BadEnv`]).
pub fn centroid_codes_for(
    n: usize,
    forced: Option<&str>,
) -> Result<jikji_format::paged::ivf::CentroidCodes> {
    use jikji_format::paged::ivf::CentroidCodes;
    match forced.filter(|v| !v.is_empty()) {
        None if n >= crate::ivf::AUTO_MIN_CHUNKS => Ok(CentroidCodes::Int4Centred),
        None => Ok(CentroidCodes::Int8),
        Some(v) => CentroidCodes::parse(v).ok_or_else(|| crate::error::BuildError::BadEnv {
            name: IVF_CENTROIDS_ENV,
            value: v.to_string(),
            expected: "int8 or int4-centred",
        }),
    }
}

/// Whether a new dense index codes its background sample page
/// ([`jikji_format::paged::ivf::SAMPLE_BINARY`]): with binary lists (`binary`) it does
/// (~13 kB instead of 99 kB with e5-small), int8 lists keep int8 rows; `forced` (the value
/// of [`IVF_SAMPLE_ENV`]) overrides. Errors: an unknown forced value, or `binary` for int8
/// lists ([`crate::error::BuildError::BadEnv`]).
pub fn coded_sample_for(binary: bool, forced: Option<&str>) -> Result<bool> {
    match forced.filter(|v| !v.is_empty()) {
        None => Ok(binary),
        Some(jikji_format::paged::ivf::SAMPLE_INT8) => Ok(false),
        Some(jikji_format::paged::ivf::SAMPLE_BINARY) if binary => Ok(true),
        Some(v) => Err(crate::error::BuildError::BadEnv {
            name: IVF_SAMPLE_ENV,
            value: v.to_string(),
            expected: if binary {
                "int8 or binary"
            } else {
                "int8 (a binary sample needs binary lists)"
            },
        }),
    }
}

/// Builds the dense index of `v` ([`crate::ivf::build`], `nlist` lists) in the centred
/// space of `model`'s centring and hands its pages to `sink`. The default `nprobe`: the
/// fewest lists whose recall@[`crate::ivf::PROBE_DEPTH`] against the exact scan reaches
/// [`crate::ivf::PROBE_RECALL_TARGET`] on `queries` (the calibration's pseudo-queries,
/// centred; [`crate::ivf::choose_nprobe`]), or [`crate::ivf::default_nprobe`] without
/// them; for binary lists from [`crate::ivf::BALANCE_MIN_CHUNKS`] chunks on at most
/// [`crate::ivf::budget_nprobe`] lists ([`crate::ivf::FINE_QUERY_BUDGET`] a query);
/// `nprobe_from` in the entry says which.
///
/// `auto`: the index is written only when [`crate::ivf::auto_cost`] finds it cheaper than
/// the exact scan for this bundle (its `nprobe` and the rows it probes measured on the
/// pseudo-queries); `Ok((None, note))` keeps the exact scan. The note (the cost model's
/// inputs and figures) is the entry's `pages.ivf.chosen_by` and the manifest's
/// `dense_index_chosen_by`.
#[allow(clippy::too_many_arguments)]
fn write_dense_index(
    v: &Vectors,
    model: &ModelInfo,
    nlist: usize,
    binary: bool,
    auto: bool,
    queries: &[Vec<f32>],
    threads: usize,
    sink: &mut dyn FnMut(jikji_format::paged::page::Encoded) -> jikji_format::Result<()>,
) -> Result<(Option<jikji_format::paged::ivf::IvfRoot>, String)> {
    let engine_error = |e: jikji_engine::EngineError| crate::error::BuildError::Ivf(e.to_string());
    let centring = match &model.centring {
        Some(c) => jikji_engine::centring::ChunkCentring::langs_of(c, v.len(), v.dim())
            .map_err(engine_error)?,
        None => None,
    };
    let ivf = crate::ivf::build(v, centring.as_ref(), nlist, IVF_SEED, threads)?;
    let centroid_codes =
        centroid_codes_for(v.len(), std::env::var(IVF_CENTROIDS_ENV).ok().as_deref())?;
    let coded_sample = coded_sample_for(binary, std::env::var(IVF_SAMPLE_ENV).ok().as_deref())?;
    // The stored centroids (int8 rows of the dequantized ones for 4-bit codes): `nprobe`
    // is measured under the routing the engine will have.
    let cents = Vectors::open(&jikji_format::vectors::write_vectors(
        v.dim(),
        &match centroid_codes {
            jikji_format::paged::ivf::CentroidCodes::Int8 => ivf.centroids.clone(),
            c => jikji_format::paged::ivf::dequantized_centroids(&ivf.centroids, c, v.dim())?,
        },
    )?)?;
    let cap = fine_nprobe_cap(v.len(), v.dim(), ivf.lists.len(), binary);
    let (nprobe, nprobe_from) = measure_nprobe(v, model, &ivf, &cents, queries, cap)?;
    let auto_note = if auto && !binary {
        let qs: Vec<Vec<f32>> = queries
            .iter()
            .filter(|q| q.len() == v.dim())
            .cloned()
            .collect();
        let cost = crate::ivf::auto_cost(
            v.len(),
            v.dim(),
            ivf.lists.len(),
            nprobe,
            crate::ivf::probed_rows(&ivf, &cents, &qs, nprobe),
            jikji_format::paged::cache::DEFAULT_BUDGET,
        );
        if !cost.ivf() {
            return Ok((None, cost.note()));
        }
        Some(cost.note())
    } else {
        None
    };
    let scoring = |i: usize| crate::ivf::scoring_vector(v, centring.as_ref(), i);
    let grouping = |docs: &[u32]| {
        crate::ivf::row_groups(&scoring, docs, crate::ivf::default_rows_per_page(v.len()))
    };
    let codes = if binary {
        jikji_format::paged::ivf::ListCodes::Binary {
            scoring: &scoring,
            rows_per_page: crate::ivf::default_rows_per_page(v.len()),
            rescore: crate::ivf::default_rescore(v.len()),
        }
    } else {
        jikji_format::paged::ivf::ListCodes::Int8
    };
    let mut root = jikji_format::paged::ivf::write_pages_with(
        &jikji_format::paged::ivf::IvfParts {
            centroids: &ivf.centroids,
            lists: &ivf.lists,
            nprobe,
            codes,
        },
        &jikji_format::paged::ivf::PageOptions {
            centroids: centroid_codes,
            coded_sample,
            sample_queries: queries,
            rows_per_list: binary,
            row_groups: (binary && crate::ivf::default_row_groups(v.len()))
                .then_some(&grouping as &jikji_format::paged::ivf::RowGrouping),
        },
        v,
        sink,
    )?;
    root.nprobe_from = Some(nprobe_from);
    let cost = crate::ivf::query_cost(
        v.len(),
        v.dim(),
        root.nlist,
        root.nprobe,
        root.rescore
            .zip(root.rows.as_ref().map(|r| r.per_page))
            .map(|(x, per)| (x, per, root.grouped())),
    );
    let note = auto_note.unwrap_or_else(|| {
        format!(
            "forced ({}); per dense query at {} chunks: exact scan {:.1} kB, this index {:.1} kB + {:.1} kB once",
            if auto { "auto: binary lists" } else { "--dense-index" },
            v.len(),
            cost.exact / 1e3,
            cost.index / 1e3,
            cost.once / 1e3
        )
    });
    root.chosen_by = Some(note.clone());
    Ok((Some(root), note))
}

/// The default `nprobe` of an index of `ivf`'s lists under the stored centroids `cents`:
/// the fewest lists whose recall@[`crate::ivf::PROBE_DEPTH`] against the exact scan
/// reaches [`crate::ivf::PROBE_RECALL_TARGET`] on `queries` (centred pseudo-queries), or
/// [`crate::ivf::default_nprobe`] without them, at most `cap` lists ([`fine_nprobe_cap`]);
/// and how it was chosen (`nprobe_from`, with the recall at the capped value).
fn measure_nprobe(
    v: &Vectors,
    model: &ModelInfo,
    ivf: &crate::ivf::Ivf,
    cents: &Vectors,
    queries: &[Vec<f32>],
    cap: Option<usize>,
) -> Result<(usize, String)> {
    let engine_error = |e: jikji_engine::EngineError| crate::error::BuildError::Ivf(e.to_string());
    let queries: Vec<&Vec<f32>> = queries.iter().filter(|q| q.len() == v.dim()).collect();
    Ok(if queries.is_empty() {
        let p = crate::ivf::default_nprobe(ivf.lists.len());
        let note = format!("share {}", crate::ivf::DEFAULT_PROBE_SHARE);
        match cap {
            Some(c) if c < p => (
                c,
                format!(
                    "{note}: {p} lists; capped at {c} by the {:.0} kB budget a query",
                    crate::ivf::FINE_QUERY_BUDGET / 1e3
                ),
            ),
            _ => (p, note),
        }
    } else {
        // The engine's exact score (with the centred norms of every row).
        let full = match &model.centring {
            Some(c) => jikji_engine::centring::ChunkCentring::of(c, v).map_err(engine_error)?,
            None => None,
        };
        let scorers: Vec<jikji_engine::centring::DenseScorer> = queries
            .iter()
            .map(|q| jikji_engine::centring::DenseScorer::new(v, full.as_ref(), q))
            .collect();
        let owned: Vec<Vec<f32>> = queries.iter().map(|q| q.to_vec()).collect();
        let curve = crate::ivf::recall_curve(
            ivf,
            cents,
            v.len(),
            &owned,
            &|qi, d| scorers[qi].score(d),
            crate::ivf::PROBE_DEPTH,
        );
        let (p, r) = crate::ivf::choose_nprobe(&curve, crate::ivf::PROBE_RECALL_TARGET);
        let note = format!(
            "pseudo-queries: recall@{} {r:.4} over {} (target {})",
            crate::ivf::PROBE_DEPTH,
            owned.len(),
            crate::ivf::PROBE_RECALL_TARGET
        );
        match cap {
            Some(c) if c < p => (
                c,
                format!(
                    "{note} at {p} lists; capped at {c} by the {:.0} kB budget a query (recall@{} {:.4} there)",
                    crate::ivf::FINE_QUERY_BUDGET / 1e3,
                    crate::ivf::PROBE_DEPTH,
                    curve[c - 1]
                ),
            ),
            _ => (p, note),
        }
    })
}

/// The most lists a dense query probes by default: for binary lists from
/// [`crate::ivf::BALANCE_MIN_CHUNKS`] chunks on, [`crate::ivf::budget_nprobe`] within
/// [`crate::ivf::FINE_QUERY_BUDGET`] (the builder's defaults: [`crate::ivf::default_rescore`]
/// × 10 rescoring rows, [`crate::ivf::default_rows_per_page`]); `None` (no cap) otherwise.
fn fine_nprobe_cap(n: usize, dim: usize, nlist: usize, binary: bool) -> Option<usize> {
    (binary && n >= crate::ivf::BALANCE_MIN_CHUNKS).then(|| {
        crate::ivf::budget_nprobe(
            n,
            dim,
            nlist,
            (
                crate::ivf::default_rescore(n),
                crate::ivf::default_rows_per_page(n),
                crate::ivf::default_row_groups(n),
            ),
            crate::ivf::FINE_QUERY_BUDGET,
        )
    })
}

/// The stored centroids of index `root` from the raw bodies of its centroid pages, as one
/// [`Vectors`] (row `j`: centroid `j`; int8 centroids: its int8 row and scale as stored;
/// 4-bit centred ones: the dequantized centroid quantized to int8 again, within 1/254 of
/// its largest component). Errors: DataCorruption naming the page when a body does not
/// decode ([`jikji_format::paged::ivf::StoredCentroids::open`]).
pub fn stored_centroids(
    root: &jikji_format::paged::ivf::IvfRoot,
    bodies: &[Vec<u8>],
    dim: usize,
) -> Result<Vectors> {
    if root.centroid_codes() == jikji_format::paged::ivf::CentroidCodes::Int8 {
        let mut rows: Vec<(f32, Vec<i8>)> = Vec::with_capacity(root.nlist);
        for (p, body) in bodies.iter().enumerate() {
            let c = jikji_format::paged::ivf::open_rows(
                &root.centroid_page(p),
                body,
                jikji_format::paged::ivf::centroids_on_page(root, p),
                dim,
            )?;
            rows.extend((0..c.len()).map(|j| {
                let (s, r) = c.row(j);
                (s, r.to_vec())
            }));
        }
        return Ok(Vectors::open(&jikji_format::vectors::write_quantized(
            dim,
            rows.iter().map(|(s, r)| (*s, r.as_slice())),
        )?)?);
    }
    let c = jikji_format::paged::ivf::StoredCentroids::open(root, bodies, dim)?;
    let rows: Vec<Vec<f32>> = (0..c.len()).map(|j| c.get(j)).collect();
    Ok(Vectors::open(&jikji_format::vectors::write_vectors(
        dim, &rows,
    )?)?)
}

/// Writes `kept`'s index (the old centroids, the update's lists:
/// [`jikji_format::paged::ivf::write_pages_kept`]) for the rows `v` to `sink`, with the
/// default `nprobe` measured as [`write_dense_index`] measures it. Returns the root and
/// what happened to the list pages.
fn write_kept_index(
    v: &Vectors,
    model: &ModelInfo,
    kept: &KeptIndex,
    queries: &[Vec<f32>],
    sink: &mut dyn PageSink,
) -> Result<(
    jikji_format::paged::ivf::IvfRoot,
    jikji_format::paged::ivf::KeptLists,
)> {
    let cents = stored_centroids(&kept.old, &kept.centroid_bodies, v.dim())?;
    let ivf = crate::ivf::Ivf {
        centroids: (0..cents.len()).map(|j| cents.get(j)).collect(),
        lists: kept.lists.clone(),
    };
    let cap = fine_nprobe_cap(v.len(), v.dim(), ivf.lists.len(), kept.old.is_binary());
    let (nprobe, nprobe_from) = measure_nprobe(v, model, &ivf, &cents, queries, cap)?;
    let (mut root, stats) = if kept.old.is_binary() {
        let centring = match &model.centring {
            Some(c) => jikji_engine::centring::ChunkCentring::langs_of(c, v.len(), v.dim())
                .map_err(|e| crate::error::BuildError::Ivf(e.to_string()))?,
            None => None,
        };
        let scoring = |i: usize| crate::ivf::scoring_vector(v, centring.as_ref(), i);
        let per = kept.old.rows.as_ref().map_or(1, |r| r.per_page);
        let grouping = |docs: &[u32]| crate::ivf::row_groups(&scoring, docs, per);
        jikji_format::paged::ivf::write_pages_kept_binary(
            &kept.old,
            &kept.centroid_bodies,
            &kept.lists,
            nprobe,
            v,
            &scoring,
            kept.old
                .grouped()
                .then_some(&grouping as &jikji_format::paged::ivf::RowGrouping),
            queries,
            sink,
        )?
    } else {
        jikji_format::paged::ivf::write_pages_kept(
            &kept.old,
            &kept.centroid_bodies,
            &kept.lists,
            nprobe,
            v,
            sink,
        )?
    };
    root.nprobe_from = Some(nprobe_from);
    root.chosen_by = Some(if root.is_binary() {
        format!(
            "{}; {} of {} list pages and {} of {} row pages rewritten",
            kept.note,
            stats.rewritten,
            root.nlist,
            stats.row_pages_rewritten,
            stats.row_pages_kept + stats.row_pages_rewritten
        )
    } else {
        format!(
            "{}; {} of {} list pages rewritten",
            kept.note, stats.rewritten, root.nlist
        )
    });
    Ok((root, stats))
}

/// Writes a bundle atomically at `out`, as a paged bundle (format 2: `jikji.json` and
/// pages under `p/`, see [`jikji_format::paged`]). Returns the manifest (as the entry holds
/// it, `sources` included), the bytes per part (`jikji.json`, then per page kind: `p/d-*`
/// dictionary, `p/o-*` postings, …; linked pages count their size) and how many pages were
/// written and linked. Errors: I/O on the temp folder or the swap; corrupt parts.
pub fn write_bundle(out: &Path, p: BundleParts) -> Result<Written> {
    // The parts are moved, not copied, and each page goes to disk as soon as it is made
    // (peak memory at 1M chunks: docs/design/scale-1m.md).
    let n_terms = p.indexed.terms;
    let lexical = LexicalIndex::open(p.indexed.terms_fst, p.indexed.postings)?;
    let store = ChunkStore::open(p.chunks)?;
    let n_chunks = p.n_chunks;
    let hanja = p.indexed.hanja.map(HanjaMap::open).transpose()?;
    let vectors = p
        .vectors
        .as_ref()
        .map(|(_, bytes)| Vectors::open(bytes))
        .transpose()?;
    let mut seconds = Vec::new();
    let mut t = std::time::Instant::now();
    let lap = |seconds: &mut Vec<(String, f64)>, name: &str, t: &mut std::time::Instant| {
        seconds.push((name.to_string(), t.elapsed().as_secs_f64()));
        *t = std::time::Instant::now();
    };
    // The query model's pages (~31,000 on the books, nearly all linked by an update) are
    // stored on a second thread, into their own store of the same folder, while this one
    // stores the index's pages; its records are taken back in after them, so the bundle
    // and its page records are what a sequential write gives.
    let query_model = match (p.query_model, &p.vectors) {
        (Some(dir), Some((model, _))) => {
            // Refuse a pack made for another model before writing 60 MB of its pages.
            let info = jikji_query_model::QueryPack::read_info(dir)?;
            if info.model_sha256 != model.sha256 {
                return Err(crate::error::BuildError::QueryModelMismatch {
                    dir: dir.to_path_buf(),
                    pack: info.model_sha256,
                    bundle_id: model.id.clone(),
                    bundle: model.sha256.clone(),
                });
            }
            Some(dir)
        }
        _ => None,
    };
    let mut w = BundleWriter::create(out)?;
    let mut qstore = w.page_store();
    let previous = p.previous;
    let threads = p.threads;
    let row_map = p.row_map;
    let store_ref = &store;
    let (pages, qm) = std::thread::scope(|s| {
        let qm = query_model.map(|dir| {
            let qstore = &mut qstore;
            s.spawn(move || {
                let t = std::time::Instant::now();
                // The chunks' texts, read back from the store.
                let texts = (0..n_chunks as u32)
                    .map(|d| store_ref.get_as::<ChunkText>(d).map(|c| c.text))
                    .collect::<std::result::Result<Vec<String>, _>>()?;
                let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
                let mut qsink = WriterSink {
                    w: qstore,
                    previous,
                    per_kind: Default::default(),
                };
                let q = jikji_query_model::paged::write_pages_keeping(
                    dir,
                    &texts,
                    threads,
                    jikji_query_model::paged::RowLayout::default(),
                    row_map,
                    &mut qsink,
                )?;
                Ok::<_, crate::error::BuildError>((q, qsink.per_kind, t.elapsed().as_secs_f64()))
            })
        });
        let pages = (|| {
            let mut sink = WriterSink {
                w: w.pages_mut(),
                previous,
                per_kind: Default::default(),
            };
            let mut root = jikji_format::paged::write_pages_into(
                &jikji_format::paged::Parts {
                    lexical: &lexical,
                    chunks: &store,
                    vectors: vectors.as_ref(),
                    hanja: hanja.as_ref(),
                    sources: &p.sources,
                },
                &mut sink,
            )?;
            let mut ivf_lists = None;
            let mut chosen_by = p.kept_chosen_by.clone();
            if let (Some(v), Some((model, _)), Some(kept)) = (&vectors, &p.vectors, &p.kept_index) {
                let (r, stats) = write_kept_index(v, model, kept, p.probe_queries, &mut sink)?;
                chosen_by = r.chosen_by.clone();
                root.ivf = Some(r);
                ivf_lists = Some(stats);
            } else if let (Some(v), Some((model, _)), None) =
                (&vectors, &p.vectors, &p.kept_chosen_by)
            {
                if let Some(nlist) = p.settings.dense_index.nlist_for(v.len()) {
                    let (r, note) = write_dense_index(
                        v,
                        model,
                        nlist,
                        p.settings.dense_index.binary_for(v.len()),
                        p.settings.dense_index == crate::ivf::DenseIndex::Auto,
                        p.probe_queries,
                        p.threads,
                        &mut |page| sink.put(page),
                    )?;
                    let note = match &p.refit_note {
                        Some(why) => format!("update: {why}; {note}"),
                        None => note,
                    };
                    root.ivf = r.map(|mut r| {
                        r.chosen_by = Some(note.clone());
                        r
                    });
                    chosen_by = Some(note);
                } else if p.settings.dense_index == crate::ivf::DenseIndex::Auto {
                    chosen_by = Some(format!(
                        "auto: exact below {} chunks (not measured)",
                        crate::ivf::AUTO_MIN_MEASURED
                    ));
                }
            }
            Ok::<_, crate::error::BuildError>((root, ivf_lists, chosen_by, sink.per_kind))
        })();
        let qm = qm.map(|h| h.join().expect("query-model page thread"));
        (pages, qm)
    });
    let (mut root, ivf_lists, chosen_by, mut per_kind) = pages?;
    drop((lexical, store, hanja, vectors));
    lap(&mut seconds, "write.pages", &mut t);
    if let Some(qm) = qm {
        let (q, kinds, secs) = qm?;
        for (k, b) in kinds {
            *per_kind.entry(k).or_default() += b;
        }
        root.query_model = Some(q);
        // Its own time, spent beside write.pages.
        seconds.push(("write.query-model".to_string(), secs));
    }
    w.absorb(qstore);
    let written = w.written();
    let linked = w.linked();
    let model = p.vectors.map(|(info, _)| info);
    let s = p.settings;
    let manifest = Manifest {
        format_version: jikji_format::PAGED_FORMAT_VERSION,
        analyzer_version: analyzer::ANALYZER_VERSION,
        analyzer: s.analyzer,
        generator: format!("jikji {}", env!("CARGO_PKG_VERSION")),
        built_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        chunk_size: s.params.size,
        overlap: s.params.overlap,
        bm25: s.bm25,
        counts: Counts {
            files: p.sources.len(),
            chunks: n_chunks,
            terms: n_terms,
            vectors: if model.is_some() { n_chunks } else { 0 },
        },
        model,
        files: Default::default(),
        calibration: p.calibration,
        sources: p.sources,
        chunking: Some(p.chunking),
        hanja: s.hanja,
        allow_ai_draft: s.allow_ai_draft,
        dense_index: Some(s.dense_index.name()),
        dense_index_chosen_by: chosen_by,
        pages: Some(root),
    };
    let sources = manifest.sources.clone();
    let mut entry = manifest;
    entry.sources = Vec::new(); // in the sources pages
    let mut manifest = w.finish(entry)?;
    manifest.sources = sources;
    lap(&mut seconds, "write.finish", &mut t);
    let pages = PageCounts {
        written,
        linked,
        seconds,
        ivf_lists,
    };
    let elen = std::fs::metadata(out.join(ENTRY_FILE))
        .map(|m| m.len())
        .unwrap_or(0);
    let mut file_bytes = vec![(ENTRY_FILE.to_string(), elen)];
    file_bytes.extend(per_kind);
    Ok((manifest, file_bytes, pages))
}

/// A chunk record's text alone (the rest of its JSON is skipped unparsed).
#[derive(serde::Deserialize)]
struct ChunkText {
    text: String,
}

/// What writing a bundle returns: its manifest, each file's `(name, bytes)`, and the pages written / linked.
pub type Written = (Manifest, Vec<(String, u64)>, PageCounts);

/// How [`write_bundle`] stored a paged bundle's pages, and how long its parts took.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PageCounts {
    /// Pages encoded and written.
    pub written: usize,
    /// Pages hard-linked from the previous bundle, unread ([`BundleParts::previous`]).
    pub linked: usize,
    /// Seconds of `write.pages` (the index's pages and the dense index),
    /// `write.query-model` (its pages, when written: on a second thread, during
    /// `write.pages`, so the two overlap) and `write.finish` (entry, page records, sync,
    /// swap).
    pub seconds: Vec<(String, f64)>,
    /// With a kept dense index ([`BundleParts::kept_index`]): list pages kept and
    /// rewritten.
    pub ivf_lists: Option<jikji_format::paged::ivf::KeptLists>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use jikji_format::paged::ivf::CentroidCodes;

    #[test]
    fn centroids_are_4_bit_from_auto_min_chunks() {
        let n = crate::ivf::AUTO_MIN_CHUNKS;
        assert_eq!(
            centroid_codes_for(n, None).unwrap(),
            CentroidCodes::Int4Centred
        );
        assert_eq!(
            centroid_codes_for(1_000_000, Some("")).unwrap(),
            CentroidCodes::Int4Centred
        );
        assert_eq!(
            centroid_codes_for(n - 1, None).unwrap(),
            CentroidCodes::Int8
        );
        // Forced either way (measurement), an unknown value refused.
        assert_eq!(
            centroid_codes_for(n, Some("int8")).unwrap(),
            CentroidCodes::Int8
        );
        assert_eq!(
            centroid_codes_for(500, Some("int4-centred")).unwrap(),
            CentroidCodes::Int4Centred
        );
        let e = centroid_codes_for(500, Some("int4"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(IVF_CENTROIDS_ENV) && e.contains("int4-centred"),
            "{e}"
        );
    }

    #[test]
    fn the_sample_is_coded_with_binary_lists() {
        assert!(coded_sample_for(true, None).unwrap());
        assert!(!coded_sample_for(false, None).unwrap());
        assert!(!coded_sample_for(true, Some("int8")).unwrap());
        assert!(coded_sample_for(true, Some("binary")).unwrap());
        assert!(coded_sample_for(false, Some("binary")).is_err());
        assert!(coded_sample_for(true, Some("pq")).is_err());
    }
}

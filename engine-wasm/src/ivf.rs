//! Dense search through a paged bundle's dense index (issue 14; pages:
//! [`jikji_format::paged::ivf`], design `docs/design/dense-index.md`).
//!
//! A query (centred as for the exact scan, [`crate::centring::centre_query`]) reads in its
//! first round the centroid pages and the background sample page (cached after the first
//! query), ranks the lists by `q·c_j` (centroids live in the space of the centred score,
//! see the format module), and reads in its second round the pages of the `nprobe` best
//! lists. Each listed chunk is scored with [`RowScorer`], exactly the exact scan's score
//! for the same row bytes. Chunks the search filters leave out (tier, language, folder: the
//! one mask of [`crate::Filters::allowed`] that the exact scan and BM25 also skip by) are
//! skipped while scanning and take no ranking slot; when fewer allowed chunks than the hits
//! asked for were scanned, more lists are read (one more round: at least twice as many,
//! more when most chunks were left out), so the ranking stays full when the bundle has that
//! many allowed chunks. The lifecycle filters (archived, expired) stay where the exact scan
//! has them (stage 4 of [`crate::pipeline`]); the hits asked for (`fill`) include the
//! number of chunks they leave out, as the exact scan's depth does.
//!
//! Hybrid fusion needs a dense score for BM25 hits that were not scanned: they get the
//! lowest score scanned ([`IvfScan::score_of`]), a floor under every scanned chunk (those
//! chunks lie in lists whose centroids the query is farther from).
//!
//! Binary lists ([`jikji_format::paged::ivf::BinaryList`]): each scanned chunk gets the
//! estimate `q·ĉ_j + α_i·(q·sign(r_i))` of its exact score; the `rescore · min(k, 10)`
//! best allowed estimates are the candidates, whose int8 rows the `i` pages bring in one
//! more round, scored exactly as the exact scan scores them. The ranking is the
//! candidates by exact score, then (to keep it `k` deep) the other scanned chunks by
//! estimate, each capped at the lowest rescored score so the order stays monotone; fusion
//! sees exact scores for the candidates and estimates for the others.

use std::collections::HashMap;

use jikji_format::paged::ivf::{self, BinaryList, IvfRoot, ListPage, SignTables};
use jikji_format::{Bundle, FormatError};

use crate::centring::RowScorer;
use crate::search::{allows, top_k, Scored};
use crate::EngineError;

/// The outcome of one dense scan through the index.
pub(crate) struct IvfScan {
    /// The `k` best allowed chunks, best first.
    pub ranked: Vec<Scored>,
    /// Every scanned chunk's score (allowed or not).
    pub scanned: HashMap<u32, f32>,
    /// The lowest scanned score (0 when nothing was scanned).
    pub floor: f32,
    /// Mean and standard deviation of the background sample's scores (as
    /// [`crate::fusion::dense_background`] of an exact scan).
    pub background: (f32, f32),
}

impl IvfScan {
    /// The dense score of `doc`: scanned, else the floor.
    pub fn score_of(&self, doc: u32) -> f32 {
        self.scanned.get(&doc).copied().unwrap_or(self.floor)
    }
}

/// Hits whose candidates a binary index rescores per unit of oversampling: the recall the
/// rescoring protects is recall@10.
pub const RESCORE_DEPTH: usize = 10;

/// The lists of `root` ranked for the query of `scorer`: `(list, q·c)`, best first, ties by
/// list number. Errors: PageMissing (a centroid page not loaded: recorded), DataCorruption.
fn ranked_lists(
    cache: &dyn IndexPages,
    root: &IvfRoot,
    scorer: &RowScorer,
    dim: usize,
) -> Result<Vec<(u32, f32)>, EngineError> {
    // Ask for every centroid page and the sample page before failing, so they come in one
    // round.
    let bodies: Vec<_> = (0..root.centroids.pages)
        .map(|n| cache.page(&root.centroid_page(n)))
        .collect();
    let sample = cache.page(&root.sample_page());
    if bodies.iter().any(Option::is_none) || sample.is_none() {
        return Err(FormatError::PageMissing {
            name: root.centroid_page(0),
        }
        .into());
    }
    let q = scorer.query();
    let mut out = Vec::with_capacity(root.nlist);
    for (n, body) in bodies.into_iter().enumerate() {
        let body = body.expect("checked");
        let rows = ivf::centroids_on_page(root, n);
        let c = ivf::open_rows(&root.centroid_page(n), &body, rows, dim)?;
        for j in 0..rows {
            out.push(((n * ivf::CENTROIDS_PER_PAGE + j) as u32, c.dot(j, q)));
        }
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(out)
}

/// The background `(mean, std)` of the query over the sample page (floored at 1e-4, as
/// [`crate::fusion::dense_background`]).
fn background(
    cache: &dyn IndexPages,
    root: &IvfRoot,
    scorer: &RowScorer,
    chunks: usize,
    dim: usize,
) -> Result<(f32, f32), EngineError> {
    let name = root.sample_page();
    let body = cache
        .page(&name)
        .ok_or(FormatError::PageMissing { name: name.clone() })?;
    let docs: Vec<usize> = ivf::sample_docs(chunks).collect();
    if docs.is_empty() {
        return Ok((0.0, 1.0));
    }
    let rows = ivf::open_rows(&name, &body, docs.len(), dim)?;
    let xs: Vec<f32> = docs
        .iter()
        .enumerate()
        .map(|(j, &d)| scorer.score(d, &rows, j))
        .collect();
    let take = xs.len() as f32;
    let mean = xs.iter().sum::<f32>() / take;
    let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / take;
    Ok((mean, var.sqrt().max(1e-4)))
}

/// Scans the index for the `k` best chunks `allow` lets through (`None`: all,
/// [`crate::search::allows`]), starting with `nprobe` lists
/// (clamped to `1..=nlist`) and reading more while fewer than `min(k, max(fill, chunks of
/// the first nprobe lists))` allowed chunks were scanned: the filters never make the
/// ranking shorter than the unfiltered scan of those lists, nor shorter than `fill` (the
/// hits asked for). Errors: PageMissing (pages recorded in the cache: the caller
/// fetches them and runs the pass again), DataCorruption naming a page.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan(
    bundle: &Bundle,
    root: &IvfRoot,
    scorer: &RowScorer,
    k: usize,
    nprobe: usize,
    rescore: Option<usize>,
    fill: usize,
    allow: Option<&[bool]>,
) -> Result<IvfScan, EngineError> {
    let cache = bundle.cache().ok_or_else(not_paged)?;
    let at = Place {
        chunks: bundle.manifest().counts.chunks,
        dim: bundle.pages().map_or(0, |p| p.dim),
    };
    scan_pages(
        cache.as_ref(),
        at,
        root,
        scorer,
        k,
        nprobe,
        rescore,
        fill,
        allow,
    )
}

/// Where a scan reads: the bundle's chunk count and vector dimension.
#[derive(Debug, Clone, Copy)]
pub struct Place {
    /// Chunks of the bundle (`counts.chunks`).
    pub chunks: usize,
    /// Vector dimension (`pages.dim`).
    pub dim: usize,
}

/// The pages a dense-index scan reads: a paged bundle's page cache, or (benches) any
/// map of page bodies that records what it lacks.
pub trait IndexPages {
    /// The raw body of page `name`, or `None` when it is not at hand (the source records
    /// the name, so the caller can fetch it and run the scan again).
    fn page(&self, name: &str) -> Option<std::sync::Arc<Vec<u8>>>;
}

impl IndexPages for jikji_format::paged::cache::PageCache {
    fn page(&self, name: &str) -> Option<std::sync::Arc<Vec<u8>>> {
        self.get(name)
    }
}

/// The `k` best chunks of a centred query `q` (no per-language centring: the rows scored
/// as stored) through the dense index `root` over `pages`, exactly as the engine's dense
/// mode ranks them without filters: `(doc, score)`, best first. `nprobe` lists (clamped to
/// `1..=nlist`); `rescore` the binary oversampling (`None`: the root's). For benches of
/// indexes built outside a bundle (the 1M-vector bench, `jikji_builder::ivf`). Errors:
/// PageMissing (the first page of a round the source lacks; the source recorded all of
/// them), DataCorruption naming a page.
pub fn search_pages(
    pages: &dyn IndexPages,
    at: Place,
    root: &IvfRoot,
    q: &[f32],
    k: usize,
    nprobe: usize,
    rescore: Option<usize>,
) -> Result<Vec<Scored>, EngineError> {
    let scorer = RowScorer::new(None, q);
    Ok(scan_pages(pages, at, root, &scorer, k, nprobe, rescore, k, None)?.ranked)
}

/// [`scan`] over any page source.
#[allow(clippy::too_many_arguments)]
fn scan_pages(
    cache: &dyn IndexPages,
    at: Place,
    root: &IvfRoot,
    scorer: &RowScorer,
    k: usize,
    nprobe: usize,
    rescore: Option<usize>,
    fill: usize,
    allow: Option<&[bool]>,
) -> Result<IvfScan, EngineError> {
    if root.is_binary() {
        let x = rescore.or(root.rescore).unwrap_or(ivf::DEFAULT_RESCORE);
        return scan_binary(cache, at, root, scorer, k, nprobe, x, fill, allow);
    }
    let Place { chunks, dim } = at;
    let order = ranked_lists(cache, root, scorer, dim)?;
    let background = background(cache, root, scorer, chunks, dim)?;
    let mut probe = nprobe.clamp(1, root.nlist);
    let mut target = None;
    loop {
        let probed = &order[..probe.min(order.len())];
        let bodies: Vec<_> = probed
            .iter()
            .map(|(j, _)| cache.page(&root.list_page(*j as usize)))
            .collect();
        if bodies.iter().any(Option::is_none) {
            return Err(FormatError::PageMissing {
                name: root.list_page(probed[0].0 as usize),
            }
            .into());
        }
        let mut scanned = HashMap::new();
        let mut allowed = Vec::new();
        for ((j, _), body) in probed.iter().zip(bodies) {
            let name = root.list_page(*j as usize);
            let list = ListPage::open(&name, &body.expect("checked"), chunks, dim)?;
            for (i, &doc) in list.docs.iter().enumerate() {
                let s = scorer.score(doc as usize, &list.rows, i);
                scanned.insert(doc, s);
                if allows(allow, doc) {
                    allowed.push((doc, s));
                }
            }
        }
        let want = *target.get_or_insert(k.min(fill.max(scanned.len())));
        if allowed.len() >= want || probed.len() == order.len() {
            let floor = scanned.values().copied().fold(f32::INFINITY, f32::min);
            return Ok(IvfScan {
                ranked: top_k(allowed, k),
                floor: if floor.is_finite() { floor } else { 0.0 },
                scanned,
                background,
            });
        }
        // Too few allowed chunks: read more lists in one more round, as many as the share
        // of allowed chunks so far suggests (at least twice as many), so that a filter
        // leaving out most chunks costs a few rounds, not one per list.
        let ratio = want.div_ceil(allowed.len().max(1));
        probe = probe.saturating_mul(2).max(probe.saturating_mul(ratio));
    }
}

/// [`scan`] through binary lists, rescoring `rescore · min(k, RESCORE_DEPTH)` candidates
/// (`rescore` 0: none, the ranking is by estimate alone).
#[allow(clippy::too_many_arguments)]
fn scan_binary(
    cache: &dyn IndexPages,
    at: Place,
    root: &IvfRoot,
    scorer: &RowScorer,
    k: usize,
    nprobe: usize,
    rescore: usize,
    fill: usize,
    allow: Option<&[bool]>,
) -> Result<IvfScan, EngineError> {
    let Place { chunks, dim } = at;
    let order = ranked_lists(cache, root, scorer, dim)?;
    let background = background(cache, root, scorer, chunks, dim)?;
    let tables = SignTables::new(scorer.query());
    let mut probe = nprobe.clamp(1, root.nlist);
    let mut target = None;
    // (doc, estimate, list-order position) of every scanned chunk, and of the allowed ones.
    let (estimates, allowed) = loop {
        let probed = &order[..probe.min(order.len())];
        let bodies: Vec<_> = probed
            .iter()
            .map(|(j, _)| cache.page(&root.list_page(*j as usize)))
            .collect();
        if bodies.iter().any(Option::is_none) {
            return Err(FormatError::PageMissing {
                name: root.list_page(probed[0].0 as usize),
            }
            .into());
        }
        let mut estimates: Vec<(u32, f32, usize)> = Vec::new();
        let mut allowed: Vec<(u32, f32, usize)> = Vec::new();
        for ((j, qc), body) in probed.iter().zip(bodies) {
            let name = root.list_page(*j as usize);
            let list = BinaryList::open(&name, &body.expect("checked"), chunks, dim)?;
            for (i, &doc) in list.docs.iter().enumerate() {
                let e = (doc, list.estimate(i, *qc, &tables), list.first + i);
                estimates.push(e);
                if allows(allow, doc) {
                    allowed.push(e);
                }
            }
        }
        let want = *target.get_or_insert(k.min(fill.max(estimates.len())));
        if allowed.len() >= want || probed.len() == order.len() {
            break (estimates, allowed);
        }
        let ratio = want.div_ceil(allowed.len().max(1));
        probe = probe.saturating_mul(2).max(probe.saturating_mul(ratio));
    };
    let by_estimate =
        |a: &(u32, f32, usize), b: &(u32, f32, usize)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    let mut allowed = allowed;
    allowed.sort_by(by_estimate);
    let take = rescore
        .saturating_mul(k.min(RESCORE_DEPTH))
        .min(allowed.len());
    let candidates = &allowed[..take];
    // Ask for every candidate's row page before failing, so they come in one round.
    let mut pages: Vec<(String, usize)> = candidates
        .iter()
        .map(|c| {
            root.row_page(c.2)
                .ok_or_else(|| corrupt_root("a binary index without row pages"))
        })
        .collect::<Result<_, _>>()?;
    let bodies: HashMap<String, _> = {
        let mut names: Vec<&String> = pages.iter().map(|p| &p.0).collect();
        names.sort();
        names.dedup();
        names
            .into_iter()
            .map(|n| (n.clone(), cache.page(n)))
            .collect()
    };
    if let Some((name, _)) = bodies.iter().find(|(_, b)| b.is_none()) {
        return Err(FormatError::PageMissing { name: name.clone() }.into());
    }
    let per = root.rows.as_ref().map_or(1, |r| r.per_page.max(1));
    let mut opened: HashMap<String, jikji_format::vectors::Vectors> = HashMap::new();
    let mut exact: Vec<Scored> = Vec::with_capacity(take);
    for (c, (name, at)) in candidates.iter().zip(pages.drain(..)) {
        if !opened.contains_key(&name) {
            let body = bodies[&name].as_ref().expect("checked");
            let rows = root.rows_on_page(c.2 / per, chunks);
            let v = ivf::open_rows(&name, body, rows, dim)?;
            opened.insert(name.clone(), v);
        }
        exact.push((c.0, scorer.score(c.0 as usize, &opened[&name], at)));
    }
    let mut ranked = top_k(exact.clone(), k);
    let cap = exact.iter().map(|e| e.1).fold(f32::INFINITY, f32::min);
    if ranked.len() < k {
        // The rest by estimate, under every rescored score.
        ranked.extend(
            allowed[take..]
                .iter()
                .take(k - ranked.len())
                .map(|e| (e.0, e.1.min(cap))),
        );
    }
    let mut scanned: HashMap<u32, f32> = estimates.iter().map(|e| (e.0, e.1.min(cap))).collect();
    scanned.extend(exact.iter().copied());
    let floor = scanned.values().copied().fold(f32::INFINITY, f32::min);
    Ok(IvfScan {
        ranked,
        floor: if floor.is_finite() { floor } else { 0.0 },
        scanned,
        background,
    })
}

fn corrupt_root(m: &str) -> EngineError {
    EngineError::Format(FormatError::corrupt(
        jikji_format::paged::ENTRY_FILE,
        0,
        m.to_string(),
    ))
}

fn not_paged() -> EngineError {
    EngineError::Format(FormatError::InvalidInput(
        "the dense index is read through a paged bundle".into(),
    ))
}

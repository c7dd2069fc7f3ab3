//! The nearest row of a bundle to one vector, natively: what `jikji dedup --new` needs of
//! each new chunk ([`crate::dedup::classify_new_with`]: its best cosine and which chunk
//! has it).
//!
//! Two ways, one score. The exact scan computes `Vectors::dot(i, q)` (f32 vector × int8
//! row × the row's scale) for every row `i` of the bundle: `n · dim` multiply-adds per new
//! chunk, 66 ms at 100k rows and 887 ms at 1M (one thread, `docs/design/dense-index.md`,
//! "HNSW: measured"). A bundle with a dense index (`pages.ivf`: every bundle from 100,000
//! chunks, or any bundle built with `--dense-index ivf|ivf-binary`) already partitions its
//! rows into lists with a centroid each, so [`DenseRoute`] ranks the lists by the stored
//! centroids (the format's [`StoredCentroids`], int8 or 4-bit centred, as the engine ranks
//! them), reads the list pages of the best-ranked lists (the format's [`ListPage`] /
//! [`jikji_format::paged::ivf::BinaryList`] readers: their doc ids) and scores those lists' rows with the same
//! `Vectors::dot` over the same bytes (the bundle's `v` rows, which a list page of int8
//! codes and the `i` pages of binary codes hold byte for byte; FORMAT.md "Dense index
//! pages"). A scored row therefore gets bit for bit its exact-scan cosine, and ties go to
//! the lower doc id as in the exact scan, so the routed best equals the exact best
//! whenever the lists probed hold it.
//!
//! How many lists: the dedup thresholds need the best match's cosine, not a top 10, so the
//! route *widens until the best is stable*: it probes the lists in rank order, [`ROUND`]
//! lists a round, and stops after the first round past the first that did not raise the
//! best cosine (or when every list is probed). A new chunk usually costs two rounds. A
//! best just below a class threshold (within [`GUARD_MARGIN`]) keeps it widening up to
//! [`guard_lists`] lists ([`DenseRoute::with_guard`]): that is where a miss would change
//! the class. Measured at 100k and 1M rows (`builder/examples/bench_dedup.rs`,
//! `docs/bench/s28-dedup.txt`; `docs/design/dense-index.md`, "Dedup through the index").
//!
//! Routing with a per-language centring (`model.centring`, `lang-mean-v2`): the lists were
//! clustered in the space of the *scoring vectors* `normalise(x − o[l])`, so the new
//! chunk's vector is centred the same way before ranking the lists
//! ([`jikji_engine::centring::centre`]), with the passage offset of the language chosen as
//! the builder chooses a chunk's ([`crate::lang_means::LoadedStats::language_of`]: among the
//! languages whose script makes up ≥ [`crate::lang_means::CANDIDATE_SHARE`] of its
//! letters, the offset with the largest dot product with the vector). Only the ranking of
//! the lists uses it; rows are scored raw, as the exact scan scores them.

use std::path::{Path, PathBuf};

use jikji_format::paged::ivf::{IvfRoot, ListPage, StoredCentroids};
use jikji_format::paged::page::decode_stored;
use jikji_format::paged::PAGES_DIR;
use jikji_format::vectors::Vectors;
use jikji_format::{Bundle, FormatError};
use serde::Serialize;

/// Lists a round of [`DenseRoute`] probes (the default of `jikji dedup --new`): 16, the
/// `nprobe` at which session 27 measured the same class as the exact scan for 300 of 300
/// new chunks at 100k and 1M rows (`docs/design/dense-index.md`, "HNSW: measured"); the
/// route probes at least two rounds.
pub const ROUND: usize = 16;

/// How far below a threshold a route's best keeps it widening ([`DenseRoute::with_guard`]):
/// 0.05, above the largest miss of the stable route measured with the default seed (0.041
/// at 100k rows, 0.027 at 1M); seed 2's, out of sample, was 0.0487 (`docs/bench/s28-dedup.txt`).
pub const GUARD_MARGIN: f32 = 0.05;

/// Lists a route probes at most while its best is near a threshold, per square root of the
/// index's list count ([`guard_lists`]).
pub const GUARD_LISTS_PER_SQRT: f64 = 4.0;

/// Lists a route of an index of `nlist` lists probes at most while its best is near a
/// threshold ([`DenseRoute::with_guard`]): `⌈4·√nlist⌉` ([`GUARD_LISTS_PER_SQRT`]), 161 of
/// 1,608 lists at 100k rows and 437 of 11,933 at 1M. The lists holding a best the stable
/// route missed ranked 68th–120th at 100k and 32nd–171st at 1M (`docs/bench/s28-dedup.txt`):
/// the rank grows with the index, slower than the list count.
pub fn guard_lists(nlist: usize) -> usize {
    (GUARD_LISTS_PER_SQRT * (nlist as f64).sqrt()).ceil() as usize
}

/// What finding the nearest rows cost, summed over the vectors looked up.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Work {
    /// Vectors looked up.
    pub lookups: u64,
    /// Rows scored (`Vectors::dot` calls): the bundle's rows once per lookup for the exact
    /// scan, the probed lists' rows through the index.
    pub rows: u64,
    /// Lists probed (0 for the exact scan).
    pub lists: u64,
    /// List pages read from disk and decoded (each at most once per [`DenseRoute`]).
    pub pages: u64,
}

/// The nearest rows of a bundle through its dense index (see the module doc). Holds the
/// decoded centroids and, once read, each probed list's doc ids (4 bytes a chunk at most).
pub struct DenseRoute {
    dir: PathBuf,
    root: IvfRoot,
    chunks: usize,
    dim: usize,
    round: usize,
    centroids: StoredCentroids,
    /// Passage offsets by language (empty: route with the vector as it is).
    offsets: Vec<(String, Vec<f32>)>,
    lists: Vec<Option<Vec<u32>>>,
    /// Thresholds a best just below which keeps the route widening ([`Self::with_guard`]).
    guard: Vec<f32>,
    margin: f32,
    guard_lists: usize,
}

/// Reads and verifies page `name` of the bundle at `dir` (`p/<name>`): its raw body.
/// Errors: I/O naming the file, DataCorruption naming the page.
fn read_page(dir: &Path, name: &str) -> crate::Result<Vec<u8>> {
    if !jikji_format::bundle::valid_page_name(name) {
        return Err(FormatError::corrupt(
            jikji_format::paged::ENTRY_FILE,
            0,
            format!("page name {name:?} in pages.ivf"),
        )
        .into());
    }
    let path = dir.join(PAGES_DIR).join(name);
    let bytes = std::fs::read(&path).map_err(|e| FormatError::io(&path, e))?;
    Ok(decode_stored(name, &bytes)?)
}

impl DenseRoute {
    /// The route through the dense index of `bundle`, opened from folder `dir` (its pages
    /// are read from `dir/p/`), probing `round` lists a round (clamped to `1..=nlist`).
    /// `Ok(None)` when the bundle has no dense index (format 1, or a paged bundle written
    /// without one: below 100,000 chunks by default) or no vectors. Reads and decodes the
    /// centroid pages (int8: 388 B a centroid with e5-small; 4-bit: 196 B); list pages are
    /// read when first probed. Errors: the entry's `pages.ivf` does not fit the bundle
    /// (DataCorruption naming `jikji.json`), a centroid page missing (I/O) or corrupt
    /// (DataCorruption naming it), a centring record the engine refuses.
    pub fn open(dir: &Path, bundle: &Bundle, round: usize) -> crate::Result<Option<Self>> {
        let Some(pages) = bundle.manifest().pages.as_ref() else {
            return Ok(None);
        };
        let (Some(root), Some(v)) = (pages.ivf.as_ref(), bundle.vectors()) else {
            return Ok(None);
        };
        let chunks = bundle.manifest().counts.chunks;
        root.check(chunks)?;
        let dim = v.dim();
        let bodies: Vec<Vec<u8>> = (0..root.centroids.pages)
            .map(|n| read_page(dir, &root.centroid_page(n)))
            .collect::<crate::Result<_>>()?;
        let centroids = StoredCentroids::open(root, &bodies, dim)?;
        if centroids.len() != root.nlist {
            return Err(FormatError::corrupt(
                jikji_format::paged::ENTRY_FILE,
                0,
                format!(
                    "{} centroids for pages.ivf.nlist {}",
                    centroids.len(),
                    root.nlist
                ),
            )
            .into());
        }
        let offsets = match bundle
            .manifest()
            .model
            .as_ref()
            .and_then(|m| m.centring.as_ref())
        {
            Some(c) if c.method == jikji_engine::centring::METHOD => {
                // The engine's own check of the record (runs, offsets' lengths).
                jikji_engine::centring::ChunkCentring::langs_of(c, chunks, dim)
                    .map_err(|e| crate::BuildError::Ivf(e.to_string()))?;
                c.passage
                    .iter()
                    .filter(|(_, o)| o.len() == dim)
                    .map(|(l, o)| (l.clone(), o.clone()))
                    .collect()
            }
            _ => Vec::new(),
        };
        Ok(Some(DenseRoute {
            dir: dir.to_path_buf(),
            round: round.clamp(1, root.nlist),
            lists: vec![None; root.nlist],
            root: root.clone(),
            chunks,
            dim,
            centroids,
            offsets,
            guard: Vec::new(),
            margin: 0.0,
            guard_lists: 0,
        }))
    }

    /// This route, widening past a stable best while that best is below one of
    /// `thresholds` by at most `margin` (cosines), until `lists` lists are probed (at least
    /// the rounds stability asks; at most the index's lists): a class decided by a
    /// threshold changes only when the exact best is at or above it and the route's below,
    /// and a route's miss is a few hundredths (measured: 0.004–0.049), so the chunks near
    /// a threshold pay for more lists and the others do not. `jikji dedup --new` passes its duplicate and partial
    /// thresholds, [`GUARD_MARGIN`] and [`guard_lists`] of the index.
    pub fn with_guard(mut self, thresholds: &[f32], margin: f32, lists: usize) -> Self {
        self.guard = thresholds.to_vec();
        self.margin = margin;
        self.guard_lists = lists.min(self.root.nlist);
        self
    }

    /// Number of lists of the index.
    pub fn nlist(&self) -> usize {
        self.root.nlist
    }

    /// Lists probed a round (≥ 1, ≤ [`Self::nlist`]).
    pub fn round(&self) -> usize {
        self.round
    }

    /// True if the lists hold binary codes (their rows are scored from the bundle's `v`
    /// rows, byte for byte the `i` pages' rows).
    pub fn is_binary(&self) -> bool {
        self.root.is_binary()
    }

    /// The vector the lists are ranked by for a chunk of text `text` and vector `q`: `q`
    /// centred by the passage offset of its language when the bundle has a per-language
    /// centring (module doc), else `q` itself.
    fn routing_vector(&self, q: &[f32], text: &str) -> Vec<f32> {
        use jikji_engine::centring::{centre, script_shares, SCRIPT_LANGS};
        if self.offsets.is_empty() {
            return q.to_vec();
        }
        let shares = script_shares(text);
        let candidate = |l: &str| match shares {
            Some(sh) => SCRIPT_LANGS
                .iter()
                .position(|x| *x == l)
                .is_some_and(|i| sh[i] >= crate::lang_means::CANDIDATE_SHARE),
            None => false,
        };
        let any = self.offsets.iter().any(|(l, _)| candidate(l));
        let mut best: Option<(&[f32], f32)> = None;
        for (l, o) in &self.offsets {
            if any && !candidate(l) {
                continue;
            }
            let d: f32 = q.iter().zip(o).map(|(a, b)| a * b).sum();
            if best.is_none_or(|(_, b)| d > b) {
                best = Some((o, d));
            }
        }
        match best {
            Some((o, _)) => centre(q, o),
            None => q.to_vec(),
        }
    }

    /// The doc ids of list `j` (read and decoded on first use).
    fn list(&mut self, j: usize, work: &mut Work) -> crate::Result<&[u32]> {
        if self.lists[j].is_none() {
            let name = self.root.list_page(j);
            let body = read_page(&self.dir, &name)?;
            let docs = if self.root.is_binary() {
                // (grouped rows too: `open_list` reads the page as the index lays it out)
                self.root
                    .open_list(&name, &body, self.chunks, self.dim)?
                    .docs
            } else {
                ListPage::open(&name, &body, self.chunks, self.dim)?.docs
            };
            work.pages += 1;
            self.lists[j] = Some(docs);
        }
        Ok(self.lists[j].as_deref().expect("read above"))
    }

    /// Where chunk `doc` is for a lookup of `q` (text `text`): its list's rank in the
    /// route's order (0 = probed first) and the list's number; `None` if no list holds it.
    /// Reads every list page not read yet (a diagnostic for benches: why a lookup missed).
    /// Errors: as [`Self::best`].
    pub fn rank_of(
        &mut self,
        q: &[f32],
        text: &str,
        doc: u32,
    ) -> crate::Result<Option<(usize, usize)>> {
        let order = self.order(q, text);
        let mut work = Work::default();
        for (rank, &(j, _)) in order.iter().enumerate() {
            if self
                .list(j as usize, &mut work)?
                .binary_search(&doc)
                .is_ok()
            {
                return Ok(Some((rank, j as usize)));
            }
        }
        Ok(None)
    }

    /// The lists ranked for `q` (text `text`): `(list, r·ĉ)` best first, ties by list
    /// number, `r` the routing vector.
    fn order(&self, q: &[f32], text: &str) -> Vec<(u32, f32)> {
        let r = self.routing_vector(q, text);
        let mut order: Vec<(u32, f32)> = self
            .centroids
            .dots(&r)
            .into_iter()
            .enumerate()
            .map(|(j, d)| (j as u32, d))
            .collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        order
    }

    /// The row of `vectors` (the bundle's, `chunks × dim`) with the largest cosine with
    /// `q` (`dim` floats, L2-normalised as the model gives it) among the probed lists, and
    /// that cosine: `(doc, q·x_doc)`, ties to the lower doc; `None` if no probed list has
    /// a row (an empty bundle). `text` is the chunk's text (for the routing language only).
    /// Errors: a list page missing (I/O) or corrupt (DataCorruption naming the page), a
    /// `vectors` that is not the bundle's (InvalidInput).
    pub fn best(
        &mut self,
        vectors: &Vectors,
        q: &[f32],
        text: &str,
        work: &mut Work,
    ) -> crate::Result<Option<(usize, f32)>> {
        if vectors.len() != self.chunks || vectors.dim() != self.dim || q.len() != self.dim {
            return Err(FormatError::InvalidInput(format!(
                "{} rows of {} and a vector of {} for an index over {} rows of {}",
                vectors.len(),
                vectors.dim(),
                q.len(),
                self.chunks,
                self.dim
            ))
            .into());
        }
        let order = self.order(q, text);
        work.lookups += 1;
        let mut best: Option<(usize, f32)> = None;
        let mut probed = 0;
        let mut rounds = 0;
        while probed < order.len() {
            let before = best;
            let end = (probed + self.round).min(order.len());
            for &(j, _) in &order[probed..end] {
                let docs = self.list(j as usize, work)?;
                work.lists += 1;
                work.rows += docs.len() as u64;
                for &d in docs {
                    let d = d as usize;
                    let c = vectors.dot(d, q);
                    if best.is_none_or(|(bd, bc)| c > bc || (c == bc && d < bd)) {
                        best = Some((d, c));
                    }
                }
            }
            probed = end;
            rounds += 1;
            let Some((_, c)) = best else { continue };
            let stable = rounds >= 2 && before.map(|b| b.1) == Some(c);
            let near = probed < self.guard_lists
                && self.guard.iter().any(|&t| c < t && c >= t - self.margin);
            if stable && !near {
                break;
            }
        }
        Ok(best)
    }
}

/// The row of `vectors` with the largest cosine with `q` by the exact scan (every row,
/// `Vectors::dot`; ties to the lower doc): `(doc, cosine)`, `None` without rows.
pub fn exact_best(vectors: &Vectors, q: &[f32], work: &mut Work) -> Option<(usize, f32)> {
    work.lookups += 1;
    work.rows += vectors.len() as u64;
    let mut best: Option<(usize, f32)> = None;
    for i in 0..vectors.len() {
        let c = vectors.dot(i, q);
        if best.is_none_or(|(_, bc)| c > bc) {
            best = Some((i, c));
        }
    }
    best
}

/// How [`NearestRows`] finds a vector's nearest row.
pub enum Way {
    /// Every row ([`exact_best`]).
    Exact,
    /// Through the bundle's dense index ([`DenseRoute`]).
    Index(Box<DenseRoute>),
}

/// A bundle's rows and the way to find a vector's nearest one, with the [`Work`] done.
pub struct NearestRows<'a> {
    vectors: &'a Vectors,
    way: Way,
    work: Work,
}

impl<'a> NearestRows<'a> {
    /// The exact scan of `vectors` (the bundle's rows).
    pub fn exact(vectors: &'a Vectors) -> Self {
        NearestRows {
            vectors,
            way: Way::Exact,
            work: Work::default(),
        }
    }

    /// Through `route` (the index of the bundle whose rows are `vectors`).
    pub fn through(vectors: &'a Vectors, route: DenseRoute) -> Self {
        NearestRows {
            vectors,
            way: Way::Index(Box::new(route)),
            work: Work::default(),
        }
    }

    /// The nearest row to `q` (`dim` floats) and its cosine, `None` without rows; `text`
    /// is the vector's chunk text (routing language). Errors: as [`DenseRoute::best`]
    /// (never for the exact scan).
    pub fn best(&mut self, q: &[f32], text: &str) -> crate::Result<Option<(usize, f32)>> {
        match &mut self.way {
            Way::Exact => Ok(exact_best(self.vectors, q, &mut self.work)),
            Way::Index(r) => r.best(self.vectors, q, text, &mut self.work),
        }
    }

    /// The work done so far.
    pub fn work(&self) -> Work {
        self.work
    }

    /// The way taken.
    pub fn way(&self) -> &Way {
        &self.way
    }

    /// One line for a report: `exact scan of N rows`, or the index's lists (count, codes),
    /// the lists a round and the guard ([`DenseRoute::with_guard`]) if any.
    pub fn describe(&self) -> String {
        match &self.way {
            Way::Exact => format!("exact scan of {} rows", self.vectors.len()),
            Way::Index(r) => format!(
                "the bundle's dense index: {} {} lists of {} rows, {} lists a round until the best is stable{}",
                r.nlist(),
                if r.is_binary() { "binary" } else { "int8" },
                self.vectors.len(),
                r.round(),
                if r.guard.is_empty() {
                    String::new()
                } else {
                    format!(
                        ", up to {} while it is within {} under {}",
                        r.guard_lists,
                        r.margin,
                        r.guard
                            .iter()
                            .map(|t| t.to_string())
                            .collect::<Vec<_>>()
                            .join(" or ")
                    )
                }
            ),
        }
    }
}

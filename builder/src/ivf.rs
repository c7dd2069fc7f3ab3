//! The dense index's build (issue 14): spherical k-means (Dhillon & Modha 2001, "Concept
//! decompositions for large sparse text data using clustering") over the chunks' *scoring
//! vectors* (the int8 rows dequantized and centred as the engine scores them,
//! [`ChunkCentring::scoring_vector`]), seeded and deterministic, then every chunk assigned
//! to its nearest centroid. The pages are laid out by [`jikji_format::paged::ivf`]; the
//! engine reads them in `jikji_engine::ivf`. Design and measurements:
//! `docs/design/dense-index.md`.
//!
//! `jikji update` keeps the centroids when few vectors changed ([`plan_update`]): the kept
//! chunks stay in their lists, only new and changed vectors are assigned to the nearest
//! stored centroid, and only the list pages whose bytes changed get new names
//! (`jikji_format::paged::ivf::write_pages_kept`); otherwise it refits (the same k-means
//! as a full build, so the update then equals a full build of the same corpus).

use jikji_engine::centring::ChunkCentring;
use jikji_format::vectors::Vectors;

use crate::error::{BuildError, Result};

/// Below this many chunks `--dense-index auto` keeps the exact scan. The cost model
/// (`docs/design/dense-index.md` §3): a dense query costs the exact scan `n·(dim + 4)` bytes
/// (every `v` page, one round), the index `f·n·(dim + 5)` bytes of lists plus the centroids
/// once (`nlist·(dim + 4)`) and one more round, where `f` is the share of chunks scanned
/// for recall@10 ≥ 0.95 and nDCG@10 within 0.003 of exact (measured 0.25–0.4 on the eval
/// sets, [`DEFAULT_PROBE_SHARE`]). Both are bytes the browser fetches once per query and
/// the index saves at most `(1 − f)` of them, for the round trip and a recall loss; below
/// 100,000 chunks (39 MB of `v` pages, the size where an exact scan stops fitting a phone's
/// page-cache budget of 32 MiB) the exact scan is kept.
pub const AUTO_MIN_CHUNKS: usize = 100_000;

/// Below this many chunks `--dense-index auto` keeps the exact scan without measuring the
/// index. Measured (session 17, `jikji eval scifact`, 22,121 chunks, load ~5): measuring
/// cost 160 s of build (k-means of 297 lists and the `nprobe` search over the
/// pseudo-queries; the write stage 6 → 169 s) and [`auto_cost`] then kept the exact scan
/// (8.6 MB and 46 s a visit against the index's 60.2 MB and 320 s: the pseudo-queries need
/// 217 of 297 lists). On the eval sets (248–22,121 chunks) the lists needed are 69–88 % of
/// the chunks (docs/performance.md "Dense index"), so measuring below 100,000 chunks costs
/// build time for no change; from [`AUTO_MIN_CHUNKS`] on `auto` writes binary lists as
/// before (the cost model compares int8 lists only).
pub const AUTO_MIN_MEASURED: usize = AUTO_MIN_CHUNKS;

/// The link `auto`'s cost model assumes, in bytes per millisecond: DevTools' "slow 4G"
/// profile (1.47 Mbit/s down), the one the phone bench measures (`tests/e2e/bench-phone.mjs`).
pub const AUTO_BYTES_PER_MS: f64 = 1474.56 * 1024.0 / 8.0 / 1000.0;

/// The round trip `auto`'s cost model assumes, in ms (the same profile's 562.5 ms latency):
/// the index costs one more dependent round once (its centroids and sample before the
/// lists).
pub const AUTO_ROUND_MS: f64 = 562.5;

/// Dense queries per visit in `auto`'s cost model: the once-costs (the exact scan's rows
/// when they fit the engine's page cache, the index's centroids and sample) are shared by
/// this many queries.
pub const AUTO_QUERIES_PER_VISIT: f64 = 10.0;

/// CPU time of scoring one int8 row, in ns: the native exact scan of the 1M-vector bench
/// (503 ms for 1,000,000 rows on one thread, docs/performance.md "Dense index"); the
/// index scores its centroids and the probed rows at the same cost.
pub const SCAN_NS_PER_ROW: f64 = 503.0;

/// The inputs and figures of `auto`'s choice ([`auto_cost`]), per visit of
/// [`AUTO_QUERIES_PER_VISIT`] dense queries on the [`AUTO_BYTES_PER_MS`] /
/// [`AUTO_ROUND_MS`] link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoCost {
    /// Chunks.
    pub n: usize,
    /// Lists of the measured index.
    pub nlist: usize,
    /// Its default `nprobe` (the builder's measurement).
    pub nprobe: usize,
    /// Rows in the `nprobe` nearest lists, mean over the pseudo-queries (measured).
    pub rows_per_query: f64,
    /// Bytes the exact scan fetches per visit: every row once when they fit the engine's
    /// page cache, else every row every query.
    pub exact_bytes: f64,
    /// Bytes the index fetches per visit: centroids and sample once, the probed lists every
    /// query (no list counted as cached).
    pub ivf_bytes: f64,
    /// Transfer plus scan time per visit, ms.
    pub exact_ms: f64,
    /// Transfer, the extra round and scan time per visit, ms.
    pub ivf_ms: f64,
}

impl AutoCost {
    /// True when the index is cheaper.
    pub fn ivf(&self) -> bool {
        self.ivf_ms < self.exact_ms
    }

    /// The entry's record of the choice (`chosen_by`).
    pub fn note(&self) -> String {
        format!(
            "auto: {} by the cost model per visit of {} dense queries at {:.1} kB/s, {} ms a round: exact {:.1} kB, {:.0} ms; ivf {:.1} kB, {:.0} ms (n {}, nlist {}, nprobe {}, {:.0} rows a query measured)",
            if self.ivf() { "ivf" } else { "exact" },
            AUTO_QUERIES_PER_VISIT,
            AUTO_BYTES_PER_MS,
            AUTO_ROUND_MS,
            self.exact_bytes / 1e3,
            self.exact_ms,
            self.ivf_bytes / 1e3,
            self.ivf_ms,
            self.n,
            self.nlist,
            self.nprobe,
            self.rows_per_query
        )
    }
}

/// `auto`'s cost model (`docs/design/dense-index.md` §3): for `n` chunks of `dim`, an int8
/// index of `nlist` lists whose `nprobe` nearest hold `rows_per_query` rows on average
/// (measured on the pseudo-queries, [`probed_rows`]), the time of a visit
/// ([`AUTO_QUERIES_PER_VISIT`] queries) with each: bytes over [`AUTO_BYTES_PER_MS`], the
/// index's extra round ([`AUTO_ROUND_MS`], once), rows scored at [`SCAN_NS_PER_ROW`]. The
/// exact scan's rows are fetched once when they fit `cache_bytes` (the engine's page
/// cache), else every query.
pub fn auto_cost(
    n: usize,
    dim: usize,
    nlist: usize,
    nprobe: usize,
    rows_per_query: f64,
    cache_bytes: usize,
) -> AutoCost {
    let q = AUTO_QUERIES_PER_VISIT;
    let row = (dim + 4) as f64;
    let all = n as f64 * row;
    let exact_bytes = if all <= cache_bytes as f64 {
        all
    } else {
        q * all
    };
    let once = (nlist + n.min(jikji_format::paged::ivf::SAMPLE_ROWS)) as f64 * row;
    let ivf_bytes = once + q * rows_per_query * (dim + 6) as f64;
    let ns = SCAN_NS_PER_ROW / 1e6;
    AutoCost {
        n,
        nlist,
        nprobe,
        rows_per_query,
        exact_bytes,
        ivf_bytes,
        exact_ms: exact_bytes / AUTO_BYTES_PER_MS + q * n as f64 * ns,
        ivf_ms: ivf_bytes / AUTO_BYTES_PER_MS
            + AUTO_ROUND_MS
            + q * (nlist as f64 + rows_per_query) * ns,
    }
}

/// Mean rows in the `nprobe` lists whose stored centroids (`centroids`) score highest for
/// each of `queries` (ties to the lower list, the engine's order); `nprobe/nlist` of the
/// chunks without queries.
pub fn probed_rows(ivf: &Ivf, centroids: &Vectors, queries: &[Vec<f32>], nprobe: usize) -> f64 {
    let nlist = ivf.lists.len();
    let n: usize = ivf.lists.iter().map(Vec::len).sum();
    if queries.is_empty() || nlist == 0 {
        return n as f64 * nprobe.min(nlist) as f64 / nlist.max(1) as f64;
    }
    let mut sum = 0usize;
    for q in queries {
        let mut order: Vec<(usize, f32)> = (0..nlist).map(|j| (j, centroids.dot(j, q))).collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        sum += order
            .iter()
            .take(nprobe)
            .map(|(j, _)| ivf.lists[*j].len())
            .sum::<usize>();
    }
    sum as f64 / queries.len() as f64
}

/// The share of lists a query probes by default (`nprobe = ⌈share · nlist⌉`), measured on
/// the eval sets (README, "Dense index (issue 14)").
pub const DEFAULT_PROBE_SHARE: f64 = 0.25;

/// k-means iterations at most (it stops earlier when no assignment changes).
pub const MAX_ITERATIONS: usize = 25;

/// Training points per list at most: larger corpora train on an evenly spaced sample and
/// then assign every chunk.
pub const TRAIN_PER_LIST: usize = 256;

/// Which dense index a build writes (`--dense-index`), recorded in the manifest
/// (`dense_index`) so `jikji update` makes the same choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DenseIndex {
    /// Exact scan only (no index pages).
    Exact,
    /// The IVF index, with `nlist` lists (`None`: [`default_nlist`]).
    Ivf {
        /// Number of lists.
        nlist: Option<usize>,
        /// Binary codes with int8 rescoring (`ivf-binary`) instead of int8 lists.
        binary: bool,
    },
    /// The cheaper of the exact scan and an int8 index by [`auto_cost`] (measured from
    /// [`AUTO_MIN_MEASURED`] chunks on; binary lists from [`AUTO_MIN_CHUNKS`]) (default).
    #[default]
    Auto,
}

impl DenseIndex {
    /// Parses `exact`, `ivf`, `ivf:NLIST`, `ivf-binary`, `ivf-binary:NLIST` or `auto`;
    /// `None` otherwise.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "exact" => Some(DenseIndex::Exact),
            "auto" => Some(DenseIndex::Auto),
            "ivf" => Some(DenseIndex::Ivf {
                nlist: None,
                binary: false,
            }),
            "ivf-binary" => Some(DenseIndex::Ivf {
                nlist: None,
                binary: true,
            }),
            _ => {
                let (binary, n) = match s.strip_prefix("ivf-binary:") {
                    Some(n) => (true, n),
                    None => (false, s.strip_prefix("ivf:")?),
                };
                let n: usize = n.parse().ok()?;
                (n > 0).then_some(DenseIndex::Ivf {
                    nlist: Some(n),
                    binary,
                })
            }
        }
    }

    /// The name [`DenseIndex::parse`] reads back.
    pub fn name(self) -> String {
        match self {
            DenseIndex::Exact => "exact".into(),
            DenseIndex::Auto => "auto".into(),
            DenseIndex::Ivf { nlist, binary } => {
                let kind = if binary { "ivf-binary" } else { "ivf" };
                match nlist {
                    None => kind.into(),
                    Some(n) => format!("{kind}:{n}"),
                }
            }
        }
    }

    /// True if the lists of an index built for `n` chunks hold binary codes.
    pub fn binary_for(self, n: usize) -> bool {
        match self {
            DenseIndex::Ivf { binary, .. } => binary,
            DenseIndex::Auto => n >= AUTO_MIN_CHUNKS,
            DenseIndex::Exact => false,
        }
    }

    /// The number of lists to build (or, for `auto`, to measure against the exact scan) for
    /// `n` chunks, or `None` for the exact scan.
    pub fn nlist_for(self, n: usize) -> Option<usize> {
        if n == 0 {
            return None;
        }
        match self {
            DenseIndex::Exact => None,
            DenseIndex::Auto if n < AUTO_MIN_MEASURED => None,
            DenseIndex::Auto | DenseIndex::Ivf { nlist: None, .. } => Some(default_nlist(n)),
            DenseIndex::Ivf { nlist: Some(l), .. } => Some(l.clamp(1, n)),
        }
    }
}

/// Bytes a dense query transfers (bodies; page headers not counted), from the cost model of
/// `docs/design/dense-index.md` §3, for `n` chunks of `dim`: the exact scan reads every row
/// (`n·(dim + 4)`); an index of `nlist` lists probing `nprobe` reads that share of the
/// chunks' list entries (`dim + 6` B each as int8 rows, `⌈dim/8⌉ + 3` B as binary codes),
/// binary codes also `rescore · 10` rows of `rows_per_page · (dim + 4)` B pages at most,
/// and once the centroids (`nlist·(dim + 4)`) and the background sample
/// (`min(n, 256)·(dim + 4)`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryCost {
    /// The exact scan, per query.
    pub exact: f64,
    /// The index's lists (and rescoring rows), per query.
    pub index: f64,
    /// The index's centroids and sample, once.
    pub once: f64,
}

/// [`QueryCost`] of an index (`rescore` `None`: int8 lists).
pub fn query_cost(
    n: usize,
    dim: usize,
    nlist: usize,
    nprobe: usize,
    rescore: Option<(usize, usize)>,
) -> QueryCost {
    let row = (dim + 4) as f64;
    let share = nprobe.min(nlist) as f64 / nlist.max(1) as f64;
    let index = match rescore {
        None => share * n as f64 * (dim + 6) as f64,
        Some((rescore, per_page)) => {
            share * n as f64 * (dim.div_ceil(8) + 3) as f64
                + (rescore * 10).min(n) as f64 * per_page as f64 * row
        }
    };
    QueryCost {
        exact: n as f64 * row,
        index,
        once: (nlist + n.min(256)) as f64 * row,
    }
}

/// `round(2·√n)` lists, at least 1 and at most `n`: lists of ~√n/2 chunks (SciFact's 22,121
/// chunks: 297 lists of ~75).
pub fn default_nlist(n: usize) -> usize {
    ((2.0 * (n as f64).sqrt()).round() as usize).clamp(1, n.max(1))
}

/// `⌈DEFAULT_PROBE_SHARE · nlist⌉`, at least 1.
pub fn default_nprobe(nlist: usize) -> usize {
    ((DEFAULT_PROBE_SHARE * nlist as f64).ceil() as usize).clamp(1, nlist.max(1))
}

/// The index: a normalised centroid per list and each list's chunks (ascending).
#[derive(Debug, Clone, PartialEq)]
pub struct Ivf {
    /// One per list, `dim` long, L2-normalised (zero if its list has no length).
    pub centroids: Vec<Vec<f32>>,
    /// Doc ids of each list, ascending; every chunk is in exactly one list.
    pub lists: Vec<Vec<u32>>,
}

/// A splitmix64 step (Steele, Lea & Flood 2014): the seeded, platform-independent random
/// numbers of the initial centroids.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `a·b` with eight partial sums (so the compiler vectorizes it; the k-means' cost is this
/// dot product): the lanes are added pairwise at the end, then the tail. Deterministic.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

fn normalise(v: &mut [f32]) {
    let n = dot(v, v).sqrt();
    if n.is_finite() && n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// The nearest centroid of each point (largest dot product, ties to the lower list), on
/// `threads` threads.
fn assign(points: &[Vec<f32>], centroids: &[Vec<f32>], threads: usize) -> Vec<(u32, f32)> {
    let per = points.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = points
            .chunks(per)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|p| {
                            let mut best = (0u32, f32::NEG_INFINITY);
                            for (j, c) in centroids.iter().enumerate() {
                                let d = dot(p, c);
                                if d > best.1 {
                                    best = (j as u32, d);
                                }
                            }
                            best
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("k-means worker panicked"))
            .collect()
    })
}

/// Normalised means of `points` by `labels` over `k` lists; an empty list is reseeded with
/// the point least similar to its own centroid (`sims`) that no earlier reseed took.
fn update(points: &[Vec<f32>], labels: &[(u32, f32)], k: usize, dim: usize) -> Vec<Vec<f32>> {
    let mut sums = vec![vec![0f32; dim]; k];
    let mut counts = vec![0usize; k];
    for (p, &(l, _)) in points.iter().zip(labels) {
        counts[l as usize] += 1;
        sums[l as usize]
            .iter_mut()
            .zip(p)
            .for_each(|(s, x)| *s += x);
    }
    let mut far: Vec<usize> = (0..points.len()).collect();
    far.sort_by(|&a, &b| labels[a].1.total_cmp(&labels[b].1).then(a.cmp(&b)));
    let mut far = far.into_iter();
    for (j, s) in sums.iter_mut().enumerate() {
        if counts[j] == 0 {
            if let Some(i) = far.next() {
                s.clone_from(&points[i]);
            }
        }
        normalise(s);
    }
    sums
}

/// Builds the index of `vectors` (doc id = row) with `nlist` lists (clamped to `1..=n`):
/// scoring vectors by `centring` (the bundle's, [`ChunkCentring::langs_of`]; `None`: the
/// rows), k-means seeded by `seed` (farthest-point seeding) on at most [`TRAIN_PER_LIST`]` · nlist` evenly spaced
/// chunks for at most [`MAX_ITERATIONS`] rounds, then every chunk assigned and the
/// centroids recomputed from their lists. From [`BALANCE_MIN_CHUNKS`] chunks on, lists
/// longer than [`default_cap`] are then bisected ([`cap_lists`]), so the index may have
/// more than `nlist` lists (`ivf.lists.len()` is the count); below it the lists are the
/// k-means' own. Deterministic for the same inputs whatever `threads` is. Errors: no
/// vectors.
pub fn build(
    vectors: &Vectors,
    centring: Option<&ChunkCentring>,
    nlist: usize,
    seed: u64,
    threads: usize,
) -> Result<Ivf> {
    let points = scoring_points(vectors, centring)?;
    let ivf = kmeans(
        &points,
        vectors.dim(),
        nlist,
        seed,
        threads,
        TRAIN_PER_LIST,
        MAX_ITERATIONS,
    );
    Ok(if points.len() >= BALANCE_MIN_CHUNKS {
        let cap = default_cap(points.len(), ivf.lists.len());
        cap_points(&points, &ivf, cap)
    } else {
        ivf
    })
}

/// From this many chunks on [`build`] caps the lists ([`cap_lists`]): the size from which
/// `--dense-index auto` writes an index ([`AUTO_MIN_CHUNKS`]); smaller bundles keep the
/// k-means' lists unchanged (their lists are read at a share of 0.7–0.9 of the chunks,
/// where list sizes do not decide the bytes).
pub const BALANCE_MIN_CHUNKS: usize = AUTO_MIN_CHUNKS;

/// The largest list [`build`] keeps, as a multiple of the mean list size `n / nlist`
/// (measured at 1M vectors: `docs/performance.md`, "Balanced lists").
pub const LIST_CAP_FACTOR: f64 = 2.0;

/// `⌈LIST_CAP_FACTOR · n / nlist⌉`, at least 2: the list cap of [`build`] at scale.
pub fn default_cap(n: usize, nlist: usize) -> usize {
    ((LIST_CAP_FACTOR * n as f64 / nlist.max(1) as f64).ceil() as usize).max(2)
}

/// Power-iteration rounds of a bisection's principal direction ([`cap_lists`]).
const POWER_ROUNDS: usize = 8;

/// Caps every list of `ivf` at `cap` chunks (at least 2): a longer list is bisected at the
/// median of its chunks' projections on their principal direction (the top eigenvector of
/// the list's covariance of scoring vectors, by [`POWER_ROUNDS`] power-iteration rounds
/// from the chunk farthest from the list mean), recursively, until every part has at most
/// `cap` chunks, each part with the normalised mean of its scoring vectors as centroid
/// (the balanced bisection of principal-direction divisive partitioning, Boley 1998,
/// "Principal direction divisive partitioning", with a median cut; SPANN, Chen et al. 2021
/// §3.2, bounds its posting lists the same way by hierarchical balanced clustering). A
/// bisected list keeps its index and its second half is appended, so lists that were at
/// most `cap` long keep their number and centroid; parts are `cap/2 .. cap` long. A chunk
/// stays in a part of the list the k-means gave it (no reassignment across lists).
/// `vectors` and `centring` as for [`build`]. Deterministic. Errors: no vectors, or
/// `ivf` does not partition the rows.
pub fn cap_lists(
    vectors: &Vectors,
    centring: Option<&ChunkCentring>,
    ivf: &Ivf,
    cap: usize,
) -> Result<Ivf> {
    let points = scoring_points(vectors, centring)?;
    let mut seen = vec![false; points.len()];
    for &d in ivf.lists.iter().flatten() {
        match seen.get_mut(d as usize) {
            Some(s) if !*s => *s = true,
            _ => {
                return Err(BuildError::Ivf(format!(
                    "doc {d} is out of range or in two lists"
                )))
            }
        }
    }
    if seen.iter().any(|s| !s) || ivf.centroids.len() != ivf.lists.len() {
        return Err(BuildError::Ivf(
            "the lists do not partition the rows".into(),
        ));
    }
    Ok(cap_points(&points, ivf, cap))
}

/// [`cap_lists`] over the scoring vectors `points`.
fn cap_points(points: &[Vec<f32>], ivf: &Ivf, cap: usize) -> Ivf {
    let cap = cap.max(2);
    let mut lists = ivf.lists.clone();
    let mut centroids = ivf.centroids.clone();
    let mut todo: Vec<usize> = (0..lists.len()).rev().collect();
    while let Some(j) = todo.pop() {
        if lists[j].len() <= cap {
            continue;
        }
        let (a, b) = bisect(points, &lists[j]);
        centroids[j] = mean_of(points, &a);
        centroids.push(mean_of(points, &b));
        lists[j] = a;
        lists.push(b);
        todo.push(lists.len() - 1);
        todo.push(j);
    }
    Ivf { centroids, lists }
}

/// The normalised mean of the scoring vectors of `docs`.
fn mean_of(points: &[Vec<f32>], docs: &[u32]) -> Vec<f32> {
    let dim = points.first().map_or(0, Vec::len);
    let mut s = vec![0f32; dim];
    for &d in docs {
        s.iter_mut()
            .zip(&points[d as usize])
            .for_each(|(a, x)| *a += x);
    }
    normalise(&mut s);
    s
}

/// Splits `docs` (at least 2) into two halves (ascending ids each, sizes `⌊m/2⌋` and
/// `⌈m/2⌉`) at the median of their projections on the principal direction of their scoring
/// vectors; ties and a degenerate list (all points equal) by doc id.
fn bisect(points: &[Vec<f32>], docs: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let dim = points.first().map_or(0, Vec::len);
    let m = docs.len().max(1) as f32;
    let mut mu = vec![0f32; dim];
    for &d in docs {
        mu.iter_mut()
            .zip(&points[d as usize])
            .for_each(|(a, x)| *a += x / m);
    }
    // Start: the chunk farthest from the mean, centred.
    let far = docs
        .iter()
        .map(|&d| {
            let x = &points[d as usize];
            (d, dot(x, x) - 2.0 * dot(x, &mu))
        })
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
        .map_or(0, |x| x.0);
    let mut u: Vec<f32> = points[far as usize]
        .iter()
        .zip(&mu)
        .map(|(x, a)| x - a)
        .collect();
    normalise(&mut u);
    for _ in 0..POWER_ROUNDS {
        let mu_u = dot(&mu, &u);
        let mut w = vec![0f32; dim];
        let mut tsum = 0f32;
        for &d in docs {
            let x = &points[d as usize];
            let t = dot(x, &u) - mu_u;
            tsum += t;
            w.iter_mut().zip(x).for_each(|(a, b)| *a += t * b);
        }
        w.iter_mut().zip(&mu).for_each(|(a, b)| *a -= tsum * b);
        let len = dot(&w, &w).sqrt();
        if !(len.is_finite() && len > 0.0) {
            break;
        }
        w.iter_mut().for_each(|a| *a /= len);
        u = w;
    }
    let mut t: Vec<(f32, u32)> = docs
        .iter()
        .map(|&d| (dot(&points[d as usize], &u), d))
        .collect();
    t.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let half = docs.len() / 2;
    let mut a: Vec<u32> = t[..half].iter().map(|x| x.1).collect();
    let mut b: Vec<u32> = t[half..].iter().map(|x| x.1).collect();
    a.sort_unstable();
    b.sort_unstable();
    (a, b)
}

/// The scoring vectors of `vectors`' rows ([`ChunkCentring::scoring_vector`], or the rows).
/// Errors: no vectors.
fn scoring_points(vectors: &Vectors, centring: Option<&ChunkCentring>) -> Result<Vec<Vec<f32>>> {
    let n = vectors.len();
    if n == 0 {
        return Err(BuildError::Ivf("no vectors to index".into()));
    }
    Ok((0..n)
        .map(|i| {
            let (scale, row) = vectors.row(i);
            match centring {
                Some(c) => c.scoring_vector(i, scale, row),
                None => vectors.get(i),
            }
        })
        .collect())
}

/// [`build`] with `train_per_list` training points per list at most (instead of
/// [`TRAIN_PER_LIST`]) and at most `iterations` k-means rounds (instead of
/// [`MAX_ITERATIONS`]): the 1M-vector bench trains on fewer points (Faiss warns below 39
/// per centroid) to fit its time; the k-means' lists, never capped (the bench caps them
/// with [`cap_lists`]). Errors: no vectors.
pub fn build_with(
    vectors: &Vectors,
    centring: Option<&ChunkCentring>,
    nlist: usize,
    seed: u64,
    threads: usize,
    train_per_list: usize,
    iterations: usize,
) -> Result<Ivf> {
    let points = scoring_points(vectors, centring)?;
    Ok(kmeans(
        &points,
        vectors.dim(),
        nlist,
        seed,
        threads,
        train_per_list,
        iterations,
    ))
}

/// The k-means of [`build_with`] over the scoring vectors `points` (at least one).
fn kmeans(
    points: &[Vec<f32>],
    dim: usize,
    nlist: usize,
    seed: u64,
    threads: usize,
    train_per_list: usize,
    iterations: usize,
) -> Ivf {
    let n = points.len();
    let k = nlist.clamp(1, n);
    let train_n = n.min(train_per_list.max(1).saturating_mul(k));
    let train: Vec<Vec<f32>> = (0..train_n)
        .map(|t| points[t * n / train_n].clone())
        .collect();
    // Initial centroids: farthest-point seeding (Gonzalez 1985; k-means++ without the
    // randomness) over at most 32·k evenly spaced training points, the first chosen by
    // `seed`: each next centroid is the point least similar to every centroid so far.
    let m = train.len().min(32usize.saturating_mul(k));
    let cand: Vec<&Vec<f32>> = (0..m).map(|t| &train[t * train.len() / m]).collect();
    let mut state = seed;
    let first = (splitmix(&mut state) % m as u64) as usize;
    let mut best = vec![f32::NEG_INFINITY; m];
    let mut chosen = vec![first];
    while chosen.len() < k {
        let last = cand[*chosen.last().expect("one chosen")];
        for (b, c) in best.iter_mut().zip(&cand) {
            *b = b.max(dot(last, c));
        }
        for &c in &chosen {
            best[c] = f32::INFINITY;
        }
        let next = (0..m)
            .min_by(|&a, &b| best[a].total_cmp(&best[b]).then(a.cmp(&b)))
            .expect("candidates");
        chosen.push(next);
    }
    let mut centroids: Vec<Vec<f32>> = chosen
        .iter()
        .map(|&i| {
            let mut c = cand[i].clone();
            normalise(&mut c);
            c
        })
        .collect();
    let mut labels: Vec<(u32, f32)> = Vec::new();
    for _ in 0..iterations {
        let next = assign(&train, &centroids, threads);
        let same = next.iter().map(|l| l.0).eq(labels.iter().map(|l| l.0));
        labels = next;
        if same {
            break;
        }
        centroids = update(&train, &labels, k, dim);
    }
    let all = assign(points, &centroids, threads);
    let centroids = update(points, &all, k, dim);
    let mut lists = vec![Vec::new(); k];
    for (doc, &(l, _)) in all.iter().enumerate() {
        lists[l as usize].push(doc as u32);
    }
    Ivf { centroids, lists }
}

/// `jikji update` refits the centroids (a full k-means, as a build) when more than this
/// share of the vectors changed: new or changed chunks plus dropped ones, over the larger
/// of the old and new chunk counts. Below it the centroids and the kept chunks' lists stay
/// ([`plan_update`]); the recall cost of kept centroids at this share is measured in
/// `docs/design/dense-index.md` §5.
pub const REFIT_CHANGED_SHARE: f64 = 0.2;

/// `jikji update` refits when a language's centring offset (`model.centring.passage`, which
/// the bundle prior recomputes from the rows) moved by more than this share of its length
/// ([`offsets_shift`]): every scoring vector of that language moves by the same offset, so
/// the kept centroids, means of the old scoring vectors, would be off by it.
pub const REFIT_OFFSET_SHIFT: f32 = 0.05;

/// The largest relative move `‖o_new − o_old‖ / ‖o_old‖` of a language's offset between
/// two centring records' `passage` offsets; `None` when they name different languages or
/// an offset's length differs.
pub fn offsets_shift(
    old: &std::collections::BTreeMap<String, Vec<f32>>,
    new: &std::collections::BTreeMap<String, Vec<f32>>,
) -> Option<f32> {
    if !old.keys().eq(new.keys()) {
        return None;
    }
    let mut worst = 0f32;
    for (l, a) in old {
        let b = &new[l];
        if a.len() != b.len() {
            return None;
        }
        let d: f32 = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y) * (x - y))
            .sum::<f32>()
            .sqrt();
        let n = dot(a, a).sqrt();
        worst = worst.max(if n > 0.0 {
            d / n
        } else if d > 0.0 {
            f32::INFINITY
        } else {
            0.0
        });
    }
    Some(worst)
}

/// The refit rule's centring part ([`plan_update`] has the rest): why kept centroids would
/// no longer rank the lists in the space of the exact score, or `None` when they still do.
/// Refits when the bundle gained or lost its centring, when its `method` or `query_side`
/// changed (the scoring vectors are then made differently), when the languages differ or an
/// offset's length changed, and when a language's offset moved by more than
/// [`REFIT_OFFSET_SHIFT`] of its length ([`offsets_shift`]).
pub fn centring_refit(
    old: Option<&jikji_format::manifest::Centring>,
    new: Option<&jikji_format::manifest::Centring>,
) -> Option<String> {
    match (old, new) {
        (None, None) => None,
        (Some(a), Some(b)) if a.method == b.method && a.query_side == b.query_side => {
            match offsets_shift(&a.passage, &b.passage) {
                Some(x) if x <= REFIT_OFFSET_SHIFT => None,
                Some(x) => Some(format!(
                    "a language offset moved by {x:.3} of its length (> {REFIT_OFFSET_SHIFT})"
                )),
                None => Some("the bundle's languages changed".into()),
            }
        }
        _ => Some("the centring changed".into()),
    }
}

/// What `jikji update` does with an int8 index ([`plan_update`]).
#[derive(Debug, Clone, PartialEq)]
pub enum UpdatePlan {
    /// Keep the centroids: these lists (new doc ids, ascending), of which `assigned` chunks
    /// were assigned now (the others kept their list).
    Keep {
        /// Doc ids of each list.
        lists: Vec<Vec<u32>>,
        /// Chunks assigned to the nearest stored centroid now.
        assigned: usize,
        /// New or changed plus dropped vectors, the rule's numerator.
        changed: usize,
    },
    /// Refit the index (a full k-means), for the reason given (e.g. `30 of 100 vectors
    /// changed (> 20%)`, `list 4 would hold 900 chunks (cap 500)`).
    Refit(String),
}

/// The refit rule of `jikji update` and, when the centroids are kept, the new lists.
/// `centroids`: the old index's stored centroids (its `g` pages, dequantized by
/// [`Vectors::dot`] as the engine ranks lists); `old_lists`: its lists (old doc ids, every
/// old chunk in one); `from_old[d]`: the old row new chunk `d`'s vector was copied from bit
/// for bit (`None`: embedded now); `scoring(d)`: new chunk `d`'s scoring vector (as
/// [`build`] clusters them, with the new bundle's centring); `cap`: the longest list
/// allowed. Refits when more than [`REFIT_CHANGED_SHARE`] of the vectors changed, when a
/// list would be empty, or longer than `cap`; otherwise a kept chunk stays in its old
/// list and a new one joins the list of its nearest stored centroid (largest dot
/// product, ties to the lower list: the engine's order). Deterministic.
pub fn plan_update(
    centroids: &Vectors,
    old_lists: &[Vec<u32>],
    old_n: usize,
    from_old: &[Option<usize>],
    scoring: &(dyn Fn(usize) -> Vec<f32> + Sync),
    cap: usize,
) -> UpdatePlan {
    let nlist = old_lists.len();
    if nlist == 0 || centroids.len() != nlist {
        return UpdatePlan::Refit(format!("{} centroids for {nlist} lists", centroids.len()));
    }
    let mut list_of = vec![u32::MAX; old_n];
    for (j, l) in old_lists.iter().enumerate() {
        for &d in l {
            match list_of.get_mut(d as usize) {
                Some(x) if *x == u32::MAX => *x = j as u32,
                _ => {
                    return UpdatePlan::Refit(format!(
                        "old list {j} names chunk {d} twice or out of range"
                    ))
                }
            }
        }
    }
    if list_of.contains(&u32::MAX) {
        return UpdatePlan::Refit("an old chunk is in no list".into());
    }
    let n = from_old.len();
    let mut used = vec![false; old_n];
    let mut fresh = 0usize;
    for o in from_old {
        match o {
            Some(o) if *o < old_n => used[*o] = true,
            _ => fresh += 1,
        }
    }
    let dropped = used.iter().filter(|u| !**u).count();
    let changed = fresh + dropped;
    let of = n.max(old_n).max(1);
    if changed as f64 > REFIT_CHANGED_SHARE * of as f64 {
        return UpdatePlan::Refit(format!(
            "{changed} of {of} vectors new, changed or dropped (> {}%)",
            REFIT_CHANGED_SHARE * 100.0
        ));
    }
    let mut lists = vec![Vec::new(); nlist];
    for (d, o) in from_old.iter().enumerate() {
        let j = match o {
            Some(o) if *o < old_n => list_of[*o] as usize,
            _ => {
                let y = scoring(d);
                let mut best = (0usize, f32::NEG_INFINITY);
                for j in 0..nlist {
                    let s = centroids.dot(j, &y);
                    if s > best.1 {
                        best = (j, s);
                    }
                }
                best.0
            }
        };
        lists[j].push(d as u32);
    }
    if let Some(j) = lists.iter().position(Vec::is_empty) {
        return UpdatePlan::Refit(format!("list {j} would be empty"));
    }
    if let Some((j, l)) = lists.iter().enumerate().find(|(_, l)| l.len() > cap) {
        return UpdatePlan::Refit(format!(
            "list {j} would hold {} chunks (cap {cap})",
            l.len()
        ));
    }
    UpdatePlan::Keep {
        lists,
        assigned: fresh,
        changed,
    }
}

/// The longest list [`plan_update`] allows an update of an index of `old_lists` to make, for
/// `n` chunks and `nlist` lists asked for: from [`BALANCE_MIN_CHUNKS`] on the cap a build
/// applies ([`default_cap`]), below it [`LIST_CAP_FACTOR`] times the longest old list (a
/// k-means' lists are uncapped there).
pub fn update_cap(n: usize, nlist: usize, old_lists: &[Vec<u32>]) -> usize {
    if n >= BALANCE_MIN_CHUNKS {
        default_cap(n, nlist)
    } else {
        let longest = old_lists.iter().map(Vec::len).max().unwrap_or(1);
        ((LIST_CAP_FACTOR * longest as f64).ceil() as usize).max(2)
    }
}

/// Recall@[`PROBE_DEPTH`] against the exact scan that the builder's default `nprobe` must
/// reach on the calibration's pseudo-queries ([`choose_nprobe`]). Above the target's 0.95
/// because pseudo-queries (spans of a chunk's own text) find their lists more easily than
/// real questions do (measured on the eval sets: README, "Dense index (issue 14)").
pub const PROBE_RECALL_TARGET: f64 = 0.99;

/// Depth of the recall [`choose_nprobe`] measures: 10 (the target's recall@10).
pub const PROBE_DEPTH: usize = 10;

/// Mean recall@`depth` against the exact scan of `queries` through `ivf`, for every `nprobe`
/// from 1 to `nlist` (entry `p − 1`). `score(q, doc)` is a query's exact score of a chunk
/// (the engine's centred score) and `centroids` the centroids as the pages store them (so
/// the lists are ranked as the engine ranks them, ties to the lower list). A chunk of the
/// exact top `depth` is found at `nprobe = p` iff its list is among the `p` best: the
/// scanned chunks keep their exact scores, so every found one stays in the top `depth`
/// (ties aside). Queries with no chunk count as recall 1. Cost: one exact scan per query.
pub fn recall_curve(
    ivf: &Ivf,
    centroids: &Vectors,
    n: usize,
    queries: &[Vec<f32>],
    score: &(dyn Fn(usize, usize) -> f32 + Sync),
    depth: usize,
) -> Vec<f64> {
    let nlist = ivf.lists.len();
    let mut list_of = vec![0usize; n];
    for (j, l) in ivf.lists.iter().enumerate() {
        for &d in l {
            if let Some(x) = list_of.get_mut(d as usize) {
                *x = j;
            }
        }
    }
    let mut found = vec![0f64; nlist];
    let mut counted = 0usize;
    for (qi, q) in queries.iter().enumerate() {
        let mut exact: Vec<(usize, f32)> = (0..n).map(|d| (d, score(qi, d))).collect();
        let k = depth.min(n);
        if k == 0 {
            continue;
        }
        exact.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut order: Vec<(usize, f32)> = (0..nlist).map(|j| (j, centroids.dot(j, q))).collect();
        order.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let mut rank = vec![0usize; nlist];
        for (r, (j, _)) in order.iter().enumerate() {
            rank[*j] = r;
        }
        counted += 1;
        // found[p − 1] += share of the top k whose list ranks below p.
        for &(d, _) in &exact[..k] {
            found[rank[list_of[d]]] += 1.0 / k as f64;
        }
    }
    if counted == 0 {
        return vec![1.0; nlist];
    }
    let mut acc = 0.0;
    found
        .iter()
        .map(|f| {
            acc += f;
            (acc / counted as f64).min(1.0)
        })
        .collect()
}

/// The fewest lists whose recall in `curve` ([`recall_curve`]) reaches `target`, and the
/// recall there; `nlist` (the exact ranking) when none does.
pub fn choose_nprobe(curve: &[f64], target: f64) -> (usize, f64) {
    curve.iter().position(|&r| r >= target - 1e-9).map_or(
        (curve.len().max(1), curve.last().copied().unwrap_or(1.0)),
        |p| (p + 1, curve[p]),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use jikji_format::vectors::write_vectors;

    fn clustered(n: usize) -> Vectors {
        // Four directions, each point a small deterministic perturbation of one.
        let mut s = 7u64;
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                let mut v = vec![0f32; 8];
                v[i % 4] = 1.0;
                for x in v.iter_mut() {
                    *x += (splitmix(&mut s) % 1000) as f32 / 10_000.0;
                }
                normalise(&mut v);
                v
            })
            .collect();
        Vectors::open(&write_vectors(8, &rows).unwrap()).unwrap()
    }

    #[test]
    fn clusters_are_found_and_partition_the_chunks() {
        let v = clustered(200);
        let ivf = build(&v, None, 4, 1, 3).unwrap();
        let mut all: Vec<u32> = ivf.lists.concat();
        all.sort_unstable();
        assert_eq!(all, (0..200).collect::<Vec<u32>>());
        for l in &ivf.lists {
            assert_eq!(l.len(), 50, "{:?}", ivf.lists);
            assert!(l.iter().all(|d| d % 4 == l[0] % 4));
        }
        // The same index whatever the thread count.
        assert_eq!(build(&v, None, 4, 1, 1).unwrap(), ivf);
    }

    /// Two clusters of very different sizes (150 and 10 points of 8 dimensions).
    fn unbalanced() -> Vectors {
        let mut s = 11u64;
        let rows: Vec<Vec<f32>> = (0..160)
            .map(|i| {
                let mut v = vec![0f32; 8];
                v[usize::from(i % 16 == 0)] = 1.0;
                for x in v.iter_mut() {
                    *x += (splitmix(&mut s) % 1000) as f32 / 10_000.0;
                }
                normalise(&mut v);
                v
            })
            .collect();
        Vectors::open(&write_vectors(8, &rows).unwrap()).unwrap()
    }

    #[test]
    fn capped_lists_are_parts_of_the_kmeans_lists_at_most_cap_long() {
        let v = unbalanced();
        let ivf = build(&v, None, 2, 1, 2).unwrap();
        let sizes: Vec<usize> = ivf.lists.iter().map(Vec::len).collect();
        assert!(sizes.contains(&150) && sizes.contains(&10), "{sizes:?}");
        // Small bundles keep the k-means' lists.
        assert_eq!(
            build_with(&v, None, 2, 1, 2, TRAIN_PER_LIST, MAX_ITERATIONS).unwrap(),
            ivf
        );
        let capped = cap_lists(&v, None, &ivf, 40).unwrap();
        let mut all: Vec<u32> = capped.lists.concat();
        all.sort_unstable();
        assert_eq!(all, (0..160).collect::<Vec<u32>>());
        // 150 → 75 + 75 → four parts of 37/38; the list of 10 is kept with its number.
        let big = sizes.iter().position(|&s| s == 150).unwrap();
        let small = 1 - big;
        assert_eq!(capped.lists.len(), 5);
        assert_eq!(capped.lists[small], ivf.lists[small]);
        assert_eq!(capped.centroids[small], ivf.centroids[small]);
        for (j, l) in capped.lists.iter().enumerate() {
            assert!(l.len() <= 40 && l.windows(2).all(|w| w[0] < w[1]), "{l:?}");
            if j != small {
                assert!(l.len() >= 20 && l.iter().all(|d| ivf.lists[big].contains(d)));
            }
            let c = &capped.centroids[j];
            assert!((dot(c, c) - 1.0).abs() < 1e-4);
            assert_eq!(
                c,
                &mean_of(&(0..160).map(|i| v.get(i)).collect::<Vec<_>>(), l)
            );
        }
        // Deterministic; a cap above every list changes nothing; a bad partition is refused.
        assert_eq!(cap_lists(&v, None, &ivf, 40).unwrap(), capped);
        assert_eq!(cap_lists(&v, None, &ivf, 150).unwrap(), ivf);
        let mut bad = ivf.clone();
        let moved = bad.lists[big][0];
        bad.lists[small].push(moved);
        assert!(cap_lists(&v, None, &bad, 40).is_err());
        assert_eq!(default_cap(1_000_000, 2000), 1000);
    }

    #[test]
    fn bisection_splits_along_the_spread() {
        // Points spread along dimension 2 around dimension 0: the halves are the low and
        // the high ends of dimension 2.
        let points: Vec<Vec<f32>> = (0..10)
            .map(|i| {
                let mut v = vec![1.0, 0.01 * (i % 3) as f32, (i as f32 - 4.5) * 0.1, 0.0];
                normalise(&mut v);
                v
            })
            .collect();
        let docs: Vec<u32> = (0..10).collect();
        let (a, b) = bisect(&points, &docs);
        let (lo, hi) = if a.contains(&0) { (a, b) } else { (b, a) };
        assert_eq!(lo, [0, 1, 2, 3, 4]);
        assert_eq!(hi, [5, 6, 7, 8, 9]);
        // Equal points split by id.
        let same = vec![vec![1.0, 0.0]; 5];
        let (a, b) = bisect(&same, &[0, 1, 2, 3, 4]);
        assert_eq!((a.len(), b.len()), (2, 3));
    }

    #[test]
    fn the_lane_dot_product_equals_the_plain_one() {
        let a: Vec<f32> = (0..21).map(|i| (i as f32 * 0.3).sin()).collect();
        let b: Vec<f32> = (0..21).map(|i| (i as f32 * 0.7).cos()).collect();
        let plain: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&a, &b) - plain).abs() < 1e-5);
        assert_eq!(
            dot(&a[..3], &b[..3]),
            a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
        );
    }

    #[test]
    fn settings_parse_and_choose() {
        for s in [
            "exact",
            "auto",
            "ivf",
            "ivf:64",
            "ivf-binary",
            "ivf-binary:64",
        ] {
            assert_eq!(DenseIndex::parse(s).unwrap().name(), s);
        }
        assert!(DenseIndex::parse("ivf:0").is_none() && DenseIndex::parse("hnsw").is_none());
        assert_eq!(DenseIndex::Auto.nlist_for(AUTO_MIN_MEASURED - 1), None);
        assert_eq!(DenseIndex::Auto.nlist_for(5_000), None);
        assert_eq!(
            DenseIndex::Auto.nlist_for(AUTO_MIN_MEASURED),
            Some(default_nlist(AUTO_MIN_MEASURED))
        );
        assert_eq!(DenseIndex::Auto.nlist_for(1_000_000), Some(2000));
        let ivf = |nlist| DenseIndex::Ivf {
            nlist,
            binary: false,
        };
        assert_eq!(ivf(None).nlist_for(22_121), Some(297));
        assert_eq!(ivf(Some(50)).nlist_for(10), Some(10));
        assert!(DenseIndex::parse("ivf-binary:8").unwrap().binary_for(10));
        assert!(DenseIndex::parse("ivf-binary:x").is_none());
        assert_eq!(DenseIndex::Exact.nlist_for(1_000_000), None);
        assert_eq!(default_nprobe(297), 75);
    }

    #[test]
    fn an_update_keeps_the_centroids_below_the_refit_rule() {
        let v = clustered(200);
        let ivf = build(&v, None, 4, 1, 2).unwrap();
        let cents = Vectors::open(&write_vectors(8, &ivf.centroids).unwrap()).unwrap();
        let scoring = |d: usize| v.get(d % 200);
        // 10 new chunks appended (5%; copies of chunks 0..10 embedded "now"): each joins
        // its cluster's list, the others keep theirs.
        let mut from: Vec<Option<usize>> = (0..200).map(Some).collect();
        from.extend(std::iter::repeat_n(None, 10));
        let cap = update_cap(210, 4, &ivf.lists);
        assert_eq!(cap, 100);
        let UpdatePlan::Keep {
            lists,
            assigned,
            changed,
        } = plan_update(&cents, &ivf.lists, 200, &from, &scoring, cap)
        else {
            panic!("kept")
        };
        assert_eq!((assigned, changed), (10, 10));
        let mut sizes: Vec<usize> = lists.iter().map(Vec::len).collect();
        sizes.sort_unstable();
        assert_eq!(sizes, [52, 52, 53, 53]);
        for l in &lists {
            assert!(l.iter().all(|&d| d % 4 == l[0] % 4), "{l:?}");
            let old: Vec<u32> = l.iter().copied().filter(|&d| d < 200).collect();
            assert!(ivf.lists.contains(&old));
        }
        // Dropping chunk 3 shifts nothing in the plan: its list simply loses it.
        let from: Vec<Option<usize>> = (0..200).filter(|&o| o != 3).map(Some).collect();
        let UpdatePlan::Keep { lists, changed, .. } =
            plan_update(&cents, &ivf.lists, 200, &from, &scoring, cap)
        else {
            panic!("kept")
        };
        assert_eq!((changed, lists.concat().len()), (1, 199));
        // 21 chunks re-embedded (each new + its old row dropped: 42 of 200 > 20%): refit;
        // 20 (40 = 20%): kept.
        let mut from: Vec<Option<usize>> = (0..200).map(Some).collect();
        for f in from.iter_mut().take(21) {
            *f = None;
        }
        let p = plan_update(&cents, &ivf.lists, 200, &from, &scoring, cap);
        assert!(
            matches!(&p, UpdatePlan::Refit(r) if r.contains("42 of 200")),
            "{p:?}"
        );
        from[20] = Some(20);
        assert!(matches!(
            plan_update(&cents, &ivf.lists, 200, &from, &scoring, cap),
            UpdatePlan::Keep { changed: 40, .. }
        ));
        // A list over the cap, or emptied, refits.
        let mut from: Vec<Option<usize>> = (0..200).map(Some).collect();
        from.extend(std::iter::repeat_n(None, 10));
        let p = plan_update(&cents, &ivf.lists, 200, &from, &scoring, 51);
        assert!(
            matches!(&p, UpdatePlan::Refit(r) if r.contains("cap 51")),
            "{p:?}"
        );
        let u = unbalanced();
        let two = build(&u, None, 2, 1, 2).unwrap();
        let c2 = Vectors::open(&write_vectors(8, &two.centroids).unwrap()).unwrap();
        let small = two.lists.iter().position(|l| l.len() == 10).unwrap();
        let from: Vec<Option<usize>> = (0..160usize)
            .filter(|o| !two.lists[small].contains(&(*o as u32)))
            .map(Some)
            .collect();
        let su = |d: usize| u.get(d);
        let p = plan_update(&c2, &two.lists, 160, &from, &su, 1000);
        assert!(
            matches!(&p, UpdatePlan::Refit(r) if r.contains("empty")),
            "{p:?}"
        );
        assert_eq!(update_cap(BALANCE_MIN_CHUNKS, 100, &ivf.lists), 2000);
        let m = |v: Vec<f32>| std::collections::BTreeMap::from([("en".to_string(), v)]);
        assert_eq!(
            offsets_shift(&m(vec![3.0, 4.0]), &m(vec![3.0, 4.0])),
            Some(0.0)
        );
        assert_eq!(
            offsets_shift(&m(vec![3.0, 4.0]), &m(vec![3.0, 4.5])),
            Some(0.1)
        );
        let other = std::collections::BTreeMap::from([("ko".to_string(), vec![3.0, 4.0])]);
        assert_eq!(offsets_shift(&m(vec![3.0, 4.0]), &other), None);
    }

    #[test]
    fn each_centring_change_refits() {
        let c = |method: &str, side: &str, passage: Vec<(&str, Vec<f32>)>| {
            jikji_format::manifest::Centring {
                method: method.into(),
                stats_sha256: "00".repeat(32),
                alpha: 1.0,
                query_side: side.into(),
                query: Default::default(),
                bundle_prior: None,
                passage: passage
                    .into_iter()
                    .map(|(l, v)| (l.to_string(), v))
                    .collect(),
                chunks: None,
            }
        };
        let base = c("lang-mean-v2", "shift", vec![("en", vec![3.0, 4.0])]);
        assert_eq!(centring_refit(None, None), None);
        assert_eq!(centring_refit(Some(&base), Some(&base)), None);
        // 0.04 of the length: kept; 0.1: refit.
        let near = c("lang-mean-v2", "shift", vec![("en", vec![3.0, 4.2])]);
        assert_eq!(centring_refit(Some(&base), Some(&near)), None);
        let far = c("lang-mean-v2", "shift", vec![("en", vec![3.0, 4.5])]);
        let why = centring_refit(Some(&base), Some(&far)).unwrap();
        assert!(why.contains("moved by 0.100"), "{why}");
        let lang = c("lang-mean-v2", "shift", vec![("ko", vec![3.0, 4.0])]);
        assert!(centring_refit(Some(&base), Some(&lang))
            .unwrap()
            .contains("languages"));
        let short = c("lang-mean-v2", "shift", vec![("en", vec![3.0])]);
        assert!(centring_refit(Some(&base), Some(&short))
            .unwrap()
            .contains("languages"));
        for other in [
            c("lang-mean-v1", "shift", vec![("en", vec![3.0, 4.0])]),
            c("lang-mean-v2", "query-mean", vec![("en", vec![3.0, 4.0])]),
        ] {
            assert!(centring_refit(Some(&base), Some(&other))
                .unwrap()
                .contains("centring changed"));
        }
        assert!(centring_refit(None, Some(&base)).is_some());
        assert!(centring_refit(Some(&base), None).is_some());
    }

    #[test]
    fn auto_picks_the_cheaper_by_the_cost_model() {
        let cache = 32 << 20;
        // xquad-en's measured index (581 chunks, nprobe 37 of 48, ~450 rows a query): the
        // rows fit the cache, fetched once (226 kB) against 10 × the lists: exact.
        let c = auto_cost(581, 384, 48, 37, 450.0, cache);
        assert!(!c.ivf(), "{c:?}");
        assert!((c.exact_bytes - 581.0 * 388.0).abs() < 1e-6);
        assert!(
            c.note().starts_with("auto: exact by the cost model"),
            "{}",
            c.note()
        );
        // 100,000 chunks (38.8 MB, over the cache: fetched every query), 5% probed: ivf.
        let c = auto_cost(100_000, 384, 632, 32, 5_000.0, cache);
        assert!(
            c.ivf() && c.exact_bytes == 10.0 * 100_000.0 * 388.0,
            "{c:?}"
        );
        // Probing everything never wins.
        let c = auto_cost(100_000, 384, 632, 632, 100_000.0, cache);
        assert!(!c.ivf(), "{c:?}");
        // The probed rows: queries on a cluster direction find its 50 chunks in one list.
        let v = clustered(200);
        let ivf = build(&v, None, 4, 1, 2).unwrap();
        let cents = Vectors::open(&write_vectors(8, &ivf.centroids).unwrap()).unwrap();
        let q: Vec<Vec<f32>> = (0..4)
            .map(|d| (0..8).map(|i| f32::from(i == d)).collect())
            .collect();
        assert_eq!(probed_rows(&ivf, &cents, &q, 1), 50.0);
        assert_eq!(probed_rows(&ivf, &cents, &q, 2), 100.0);
        assert_eq!(probed_rows(&ivf, &cents, &[], 1), 50.0);
    }

    #[test]
    fn the_recall_curve_counts_the_lists_of_the_exact_top() {
        let v = clustered(200);
        let ivf = build(&v, None, 4, 1, 3).unwrap();
        let cents = Vectors::open(&write_vectors(8, &ivf.centroids).unwrap()).unwrap();
        // Queries on a cluster direction: their exact top 10 lie in one list.
        let queries: Vec<Vec<f32>> = (0..4)
            .map(|d| {
                let mut q = vec![0f32; 8];
                q[d] = 1.0;
                q
            })
            .collect();
        let score = |qi: usize, d: usize| v.dot(d, &queries[qi]);
        let curve = recall_curve(&ivf, &cents, 200, &queries, &score, 10);
        assert_eq!(curve, vec![1.0; 4]);
        assert_eq!(choose_nprobe(&curve, 0.99), (1, 1.0));
        // A query between two directions needs both lists for its top 20.
        let mut q = vec![0f32; 8];
        q[0] = 1.0;
        q[1] = 1.0;
        normalise(&mut q);
        let both = [q];
        let score = |_: usize, d: usize| v.dot(d, &both[0]);
        let curve = recall_curve(&ivf, &cents, 200, &both, &score, 100);
        assert!(curve[0] < 0.9 && curve[1] == 1.0, "{curve:?}");
        assert_eq!(choose_nprobe(&curve, 0.99).0, 2);
        assert_eq!(choose_nprobe(&[0.5, 0.7], 0.99), (2, 0.7));
    }
}

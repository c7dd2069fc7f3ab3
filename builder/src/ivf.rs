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

/// k-means iterations at most below [`BALANCE_MIN_CHUNKS`] chunks (it stops earlier when
/// no assignment changes).
pub const MAX_ITERATIONS: usize = 25;

/// Training points per list at most below [`BALANCE_MIN_CHUNKS`] chunks: larger corpora
/// train on an evenly spaced sample and then assign every chunk.
pub const TRAIN_PER_LIST: usize = 256;

/// k-means iterations at most from [`BALANCE_MIN_CHUNKS`] chunks on: 12, the rounds of the
/// prototype's faiss k-means whose lists reached recall@10 0.907 at 142 kB a query at 1M
/// (`docs/design/dense-pq.md` §3, k4000c125).
pub const FINE_ITERATIONS: usize = 12;

/// Training points per list at most from [`BALANCE_MIN_CHUNKS`] chunks on: 64, an evenly
/// spaced sample, as the prototype's faiss k-means trained (`docs/design/dense-pq.md` §2;
/// faiss warns below 39 a centroid). At 1M rows and 4,000 lists: 256,000 points.
pub const FINE_TRAIN_PER_LIST: usize = 64;

/// Lists per `√n` from [`BALANCE_MIN_CHUNKS`] chunks on ([`default_nlist`]): `4·√n` k-means
/// lists (4,000 at 1M), then capped at [`FINE_LIST_CAP`] (`docs/design/dense-pq.md` §0
/// item 2: k4000c125, 11,794 lists at 1M).
pub const FINE_NLIST_PER_SQRT: f64 = 4.0;

/// Lists per `√n` below [`BALANCE_MIN_CHUNKS`] chunks ([`default_nlist`]): lists of ~√n/2
/// chunks (SciFact's 22,121 chunks: 297 lists of ~75), measured on the eval sets (README,
/// "Dense index (issue 14)").
pub const NLIST_PER_SQRT: f64 = 2.0;

/// How the k-means picks its initial centroids ([`KmeansParams`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seeding {
    /// Farthest-point seeding (Gonzalez 1985; k-means++ without the randomness) over at
    /// most `32·k` evenly spaced training points, the first chosen by the seed: each next
    /// centroid is the point least similar to every centroid so far. `k` passes over the
    /// candidates on one thread: `O(k²·32·dim)`, minutes at 4,000 lists.
    FarthestPoint,
    /// `k` distinct training points drawn by a seeded Fisher–Yates shuffle (faiss's
    /// k-means seeds the same way, from a random sample): no dot products.
    Sample,
}

/// The k-means' settings ([`build_with`]): training points per list at most, rounds at
/// most, seeding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KmeansParams {
    /// Training points per list at most (an evenly spaced sample of the chunks).
    pub train_per_list: usize,
    /// Rounds at most (it stops earlier when no training assignment changes).
    pub iterations: usize,
    /// The initial centroids.
    pub seeding: Seeding,
}

impl KmeansParams {
    /// What [`build`] uses for `n` chunks: below [`BALANCE_MIN_CHUNKS`] farthest-point
    /// seeding, [`TRAIN_PER_LIST`] and [`MAX_ITERATIONS`] (the lists the eval sets were
    /// measured with); from it on sampled seeding, [`FINE_TRAIN_PER_LIST`] and
    /// [`FINE_ITERATIONS`] (`docs/design/dense-pq.md` §5.3b).
    pub fn for_chunks(n: usize) -> Self {
        if n >= BALANCE_MIN_CHUNKS {
            KmeansParams {
                train_per_list: FINE_TRAIN_PER_LIST,
                iterations: FINE_ITERATIONS,
                seeding: Seeding::Sample,
            }
        } else {
            KmeansParams {
                train_per_list: TRAIN_PER_LIST,
                iterations: MAX_ITERATIONS,
                seeding: Seeding::FarthestPoint,
            }
        }
    }
}

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
/// binary codes also `rescore · 10` rows of `rows_per_page · (dim + 4)` B pages at most
/// (grouped rows, [`row_groups`]: `rescore · 10 + rows_per_page` rows, whole groups),
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

/// [`QueryCost`] of an index (`rescore` `None`: int8 lists; else the oversampling, the
/// rows an `i` page holds and whether the rows are grouped).
pub fn query_cost(
    n: usize,
    dim: usize,
    nlist: usize,
    nprobe: usize,
    rescore: Option<(usize, usize, bool)>,
) -> QueryCost {
    let row = (dim + 4) as f64;
    let share = nprobe.min(nlist) as f64 / nlist.max(1) as f64;
    let index = match rescore {
        None => share * n as f64 * (dim + 6) as f64,
        Some((rescore, per_page, grouped)) => {
            let rows = if grouped {
                (rescore * 10 + per_page).min(n)
            } else {
                (rescore * 10).min(n) * per_page
            };
            share * n as f64 * (dim.div_ceil(8) + 3 + usize::from(grouped)) as f64
                + rows as f64 * row
        }
    };
    QueryCost {
        exact: n as f64 * row,
        index,
        once: (nlist + n.min(256)) as f64 * row,
    }
}

/// The k-means' lists for `n` chunks, at least 1 and at most `n`: `round(2·√n)`
/// ([`NLIST_PER_SQRT`]) below [`BALANCE_MIN_CHUNKS`] (SciFact's 22,121 chunks: 297 lists of
/// ~75), `round(4·√n)` ([`FINE_NLIST_PER_SQRT`]) from it on (1M: 4,000; [`build`] then caps
/// them at [`FINE_LIST_CAP`], ~12,000 lists).
pub fn default_nlist(n: usize) -> usize {
    let per = if n >= BALANCE_MIN_CHUNKS {
        FINE_NLIST_PER_SQRT
    } else {
        NLIST_PER_SQRT
    };
    ((per * (n as f64).sqrt()).round() as usize).clamp(1, n.max(1))
}

/// Chunk `i`'s scoring vector (`dim` f32): its row as the engine scores it, centred by its
/// language offset and normalised under a per-language `centring`, the dequantized row
/// without. Panics when `i` is out of range.
pub fn scoring_vector(v: &Vectors, centring: Option<&ChunkCentring>, i: usize) -> Vec<f32> {
    let (scale, row) = v.row(i);
    match centring {
        Some(c) => c.scoring_vector(i, scale, row),
        None => v.get(i),
    }
}

/// The default oversampling of a binary index's int8 rescoring (`pages.ivf.rescore`) for
/// `n` chunks: [`FINE_RESCORE`] whenever the rows are grouped ([`default_row_groups`]: the
/// groups with the best estimates until they hold `rescore · 10` rows; whole groups cover
/// fewer distinct candidates than as many single rows), [`UNGROUPED_FINE_RESCORE`] from
/// [`BALANCE_MIN_CHUNKS`] on without groups, the format's `DEFAULT_RESCORE` (8) below.
pub fn default_rescore(n: usize) -> usize {
    if default_row_groups(n) {
        FINE_RESCORE
    } else if n >= BALANCE_MIN_CHUNKS {
        UNGROUPED_FINE_RESCORE
    } else {
        jikji_format::paged::ivf::DEFAULT_RESCORE
    }
}

/// The oversampling of binary lists from [`BALANCE_MIN_CHUNKS`] chunks on: the groups of
/// rows ([`row_groups`]) holding the best estimates are rescored until they hold
/// `24 · min(k, 10)` rows. Source: `scripts/prototype-row-pages.py` at 1M
/// (`docs/design/dense-pq.md`, "Grouped rows": groups of ≤ 32, 240 rows at nprobe 16:
/// recall@10 0.914, 27 requests and 175 kB a query, against one row a page with ×16:
/// 0.918, 176 requests, 149 kB).
pub const FINE_RESCORE: usize = 24;

/// The oversampling from [`BALANCE_MIN_CHUNKS`] on when the rows are not grouped (one row
/// an `i` page, `JIKJI_IVF_ROW_GROUPS=0`): the `16 · min(k, 10)` best estimates are
/// rescored. Source: the prototype at 1M (`docs/design/dense-pq.md` §3, k4000c125: ×16
/// at nprobe 16 recall@10 0.907 at 142 kB a warm query).
pub const UNGROUPED_FINE_RESCORE: usize = 16;

/// Rows per `i` page (the binary index's rescoring rows) for `n` chunks: from
/// [`BALANCE_MIN_CHUNKS`] on at most [`FINE_ROWS_PER_PAGE`], the rows grouped by position
/// within their list ([`row_groups`]), the format's `INDEX_ROWS_PER_PAGE` (4) in list order
/// below.
pub fn default_rows_per_page(n: usize) -> usize {
    if let Some(per) = forced_row_groups() {
        per.max(2)
    } else if n >= BALANCE_MIN_CHUNKS && !default_row_groups(n) {
        1
    } else if n >= BALANCE_MIN_CHUNKS {
        FINE_ROWS_PER_PAGE
    } else {
        jikji_format::paged::ivf::INDEX_ROWS_PER_PAGE
    }
}

/// True when a binary index of `n` chunks groups its rows ([`row_groups`]): from
/// [`BALANCE_MIN_CHUNKS`] on. The environment's [`ROW_GROUPS_ENV`] overrides it: `0` (one
/// row an `i` page in list order from 100,000 chunks, ×16 rescoring: the layout of bundles
/// written before 2026-12-07, for measuring one against the other), or `N` ≥ 2 (groups of
/// at most `N` rows at any size: tests of small bundles).
pub fn default_row_groups(n: usize) -> bool {
    match std::env::var(ROW_GROUPS_ENV).ok().as_deref() {
        Some("0") => false,
        _ if forced_row_groups().is_some() => true,
        _ => n >= BALANCE_MIN_CHUNKS,
    }
}

/// The environment variable that overrides [`default_row_groups`].
pub const ROW_GROUPS_ENV: &str = "JIKJI_IVF_ROW_GROUPS";

/// `N` when [`ROW_GROUPS_ENV`] is a number ≥ 2.
fn forced_row_groups() -> Option<usize> {
    std::env::var(ROW_GROUPS_ENV)
        .ok()?
        .parse::<usize>()
        .ok()
        .filter(|&n| n >= 2)
}

/// The most rows of a group ([`row_groups`]) from [`BALANCE_MIN_CHUNKS`] on: 32 (groups of
/// 16–32 rows, 4–8 a list of [`FINE_LIST_CAP`]). Source: `scripts/prototype-row-pages.py`
/// (groups of 8–32 measured; 32 asks the fewest pages for the same recall).
pub const FINE_ROWS_PER_PAGE: usize = 32;

/// The group of each row of list `docs` (ascending doc ids; `points(d)` chunk `d`'s
/// scoring vector): the list bisected at the median of its rows' projections on their
/// principal direction ([`cap_lists`]' bisection), recursively, until a part holds at most
/// `max` rows (parts of `⌊max/2⌋ + 1 ..= max` rows once split), the parts numbered in the
/// order of their first row, so rows near one another in the scoring space share an `i`
/// page and a query's rescoring candidates ask few pages. Deterministic. A list of at
/// most `max` rows is one group.
pub fn row_groups(
    points: &(dyn Fn(usize) -> Vec<f32> + Sync),
    docs: &[u32],
    max: usize,
) -> Vec<u8> {
    let local: Vec<Vec<f32>> = docs.iter().map(|&d| points(d as usize)).collect();
    let mut parts: Vec<Vec<u32>> = Vec::new();
    let mut todo: Vec<Vec<u32>> = vec![(0..docs.len() as u32).collect()];
    let max = max.max(2);
    while let Some(p) = todo.pop() {
        if p.len() <= max {
            parts.push(p);
            continue;
        }
        let (a, b) = bisect(&local, &p);
        todo.push(b);
        todo.push(a);
    }
    parts.sort_by_key(|p| p.first().copied().unwrap_or(u32::MAX));
    let mut out = vec![0u8; docs.len()];
    for (g, p) in parts.iter().enumerate() {
        for &i in p {
            out[i as usize] = u8::try_from(g).unwrap_or(u8::MAX);
        }
    }
    out
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
/// dot product): the lanes are added pairwise at the end, then the tail. Deterministic,
/// and bit for bit what [`assign`]'s tiles compute.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail = tail_dot(ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    lanes_sum(&acc, tail)
}

/// The dot product of the last `len % 8` coordinates, in order from 0.
#[inline(always)]
fn tail_dot(a: &[f32], b: &[f32]) -> f32 {
    let mut t = 0f32;
    for (x, y) in a.iter().zip(b) {
        t += x * y;
    }
    t
}

/// [`dot`]'s last step: the eight lanes added pairwise, then the tail.
#[inline(always)]
fn lanes_sum(acc: &[f32; 8], tail: f32) -> f32 {
    ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail
}

fn normalise(v: &mut [f32]) {
    let n = dot(v, v).sqrt();
    if n.is_finite() && n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// Points in [`assign`]'s register tile (and centroids: a tile is `TILE × TILE` dot
/// products, `TILE²` eight-lane accumulators).
const TILE: usize = 3;

/// Points [`assign`] takes at once: their rows (36 × 1.5 kB at 384 dimensions) stay in L1/L2
/// while a block of centroids streams past.
const POINT_BLOCK: usize = 36;

/// Centroids [`assign`] takes at once: 240 × 1.5 kB = 360 kB at 384 dimensions, within a
/// core's L2.
const CENTROID_BLOCK: usize = 240;

/// The `TILE × TILE` dot products of `rows` (each `dim` long at least) with `cents` (the
/// same), each computed as [`dot`] computes it (eight lanes in dimension order, added
/// pairwise, then the tail; separate multiplies and adds), so bit for bit equal to it.
#[inline(always)]
fn tile(rows: [&[f32]; TILE], cents: [&[f32]; TILE], dim: usize) -> [[f32; TILE]; TILE] {
    let blocks = dim / 8;
    let rb: [&[[f32; 8]]; TILE] = rows.map(|r| &r[..dim].as_chunks::<8>().0[..blocks]);
    let cb: [&[[f32; 8]]; TILE] = cents.map(|c| &c[..dim].as_chunks::<8>().0[..blocks]);
    let mut acc = [[[0f32; 8]; TILE]; TILE];
    for k in 0..blocks {
        for j in 0..TILE {
            let y = &cb[j][k];
            for i in 0..TILE {
                let x = &rb[i][k];
                for l in 0..8 {
                    acc[i][j][l] += x[l] * y[l];
                }
            }
        }
    }
    let mut out = [[0f32; TILE]; TILE];
    for i in 0..TILE {
        for j in 0..TILE {
            let tail = tail_dot(&rows[i][blocks * 8..dim], &cents[j][blocks * 8..dim]);
            out[i][j] = lanes_sum(&acc[i][j], tail);
        }
    }
    out
}

/// [`tile`] with AVX2 intrinsics: the same eight lanes per product, each step a separate
/// multiply and add (`vmulps`, `vaddps`; no FMA), so the same bits. Nine accumulators
/// held in registers (the plain-Rust [`tile`] is not reliably vectorized).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn tile_avx2(rows: [&[f32]; TILE], cents: [&[f32]; TILE], dim: usize) -> [[f32; TILE]; TILE] {
    use std::arch::x86_64::{__m256, _mm256_storeu_ps};
    use std::arch::x86_64::{_mm256_add_ps, _mm256_loadu_ps, _mm256_mul_ps, _mm256_setzero_ps};
    let blocks = dim / 8;
    let r: [&[f32]; TILE] = rows.map(|x| &x[..blocks * 8]);
    let c: [&[f32]; TILE] = cents.map(|x| &x[..blocks * 8]);
    let z = _mm256_setzero_ps();
    let (mut a00, mut a01, mut a02) = (z, z, z);
    let (mut a10, mut a11, mut a12) = (z, z, z);
    let (mut a20, mut a21, mut a22) = (z, z, z);
    for k in 0..blocks {
        let o = k * 8;
        // SAFETY: every slice is `blocks * 8` long (sliced above) and `o + 8 <= blocks * 8`.
        unsafe {
            let x0 = _mm256_loadu_ps(r[0].as_ptr().add(o));
            let x1 = _mm256_loadu_ps(r[1].as_ptr().add(o));
            let x2 = _mm256_loadu_ps(r[2].as_ptr().add(o));
            let y = _mm256_loadu_ps(c[0].as_ptr().add(o));
            a00 = _mm256_add_ps(a00, _mm256_mul_ps(x0, y));
            a10 = _mm256_add_ps(a10, _mm256_mul_ps(x1, y));
            a20 = _mm256_add_ps(a20, _mm256_mul_ps(x2, y));
            let y = _mm256_loadu_ps(c[1].as_ptr().add(o));
            a01 = _mm256_add_ps(a01, _mm256_mul_ps(x0, y));
            a11 = _mm256_add_ps(a11, _mm256_mul_ps(x1, y));
            a21 = _mm256_add_ps(a21, _mm256_mul_ps(x2, y));
            let y = _mm256_loadu_ps(c[2].as_ptr().add(o));
            a02 = _mm256_add_ps(a02, _mm256_mul_ps(x0, y));
            a12 = _mm256_add_ps(a12, _mm256_mul_ps(x1, y));
            a22 = _mm256_add_ps(a22, _mm256_mul_ps(x2, y));
        }
    }
    let acc: [[__m256; TILE]; TILE] = [[a00, a01, a02], [a10, a11, a12], [a20, a21, a22]];
    let mut out = [[0f32; TILE]; TILE];
    for i in 0..TILE {
        for j in 0..TILE {
            let mut lanes = [0f32; 8];
            // SAFETY: `lanes` holds 8 f32.
            unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc[i][j]) };
            let tail = tail_dot(&rows[i][blocks * 8..dim], &cents[j][blocks * 8..dim]);
            out[i][j] = lanes_sum(&lanes, tail);
        }
    }
    out
}

/// [`assign`] over one thread's points, into `out` (one per point), with `tile` computing
/// the `TILE × TILE` products ([`tile`] or [`tile_avx2`]).
fn assign_part<T>(
    points: &[&[f32]],
    centroids: &[&[f32]],
    dim: usize,
    out: &mut [(u32, f32)],
    tile: T,
) where
    T: Fn([&[f32]; TILE], [&[f32]; TILE], usize) -> [[f32; TILE]; TILE],
{
    let better = |best: &mut (u32, f32), j: usize, d: f32| {
        if d > best.1 {
            *best = (j as u32, d);
        }
    };
    for (pb, ob) in points.chunks(POINT_BLOCK).zip(out.chunks_mut(POINT_BLOCK)) {
        ob.fill((0, f32::NEG_INFINITY));
        for (b, cblock) in centroids.chunks(CENTROID_BLOCK).enumerate() {
            let base = b * CENTROID_BLOCK;
            let mut i = 0;
            while i < pb.len() {
                let r = (pb.len() - i).min(TILE);
                let mut j = 0;
                while j < cblock.len() {
                    let c = (cblock.len() - j).min(TILE);
                    if r == TILE && c == TILE {
                        let s = tile(
                            [pb[i], pb[i + 1], pb[i + 2]],
                            [cblock[j], cblock[j + 1], cblock[j + 2]],
                            dim,
                        );
                        for (a, row) in s.iter().enumerate() {
                            for (e, &d) in row.iter().enumerate() {
                                better(&mut ob[i + a], base + j + e, d);
                            }
                        }
                    } else {
                        for a in 0..r {
                            for e in 0..c {
                                let d = dot(&pb[i + a][..dim], &cblock[j + e][..dim]);
                                better(&mut ob[i + a], base + j + e, d);
                            }
                        }
                    }
                    j += c;
                }
                i += r;
            }
        }
    }
}

/// [`assign_part`] with the widest vectors this CPU has ([`tile_avx2`] when AVX2 is
/// detected, else [`tile`]).
fn assign_part_fast(points: &[&[f32]], centroids: &[&[f32]], dim: usize, out: &mut [(u32, f32)]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        let t = |r: [&[f32]; TILE], c: [&[f32]; TILE], d: usize| unsafe { tile_avx2(r, c, d) };
        assign_part(points, centroids, dim, out, t);
        return;
    }
    assign_part(points, centroids, dim, out, tile);
}

/// The nearest centroid of each point (largest dot product, ties to the lower list, `(0,
/// −∞)` when there are no centroids or every product is NaN) and that product, on
/// `threads` threads over contiguous ranges of points. Every point and centroid must be at
/// least `dim` long; only the first `dim` coordinates count. The products are [`dot`]'s bit
/// for bit (computed in `3 × 3` register tiles over blocks of [`POINT_BLOCK`] points and
/// [`CENTROID_BLOCK`] centroids), so the result is the brute-force argmax and does not
/// depend on `threads` or the CPU.
fn assign(points: &[&[f32]], centroids: &[&[f32]], dim: usize, threads: usize) -> Vec<(u32, f32)> {
    let mut out = vec![(0u32, f32::NEG_INFINITY); points.len()];
    let per = points.len().div_ceil(threads.max(1)).max(1);
    std::thread::scope(|s| {
        for (part, o) in points.chunks(per).zip(out.chunks_mut(per)) {
            s.spawn(move || assign_part_fast(part, centroids, dim, o));
        }
    });
    out
}

/// Normalised means of `points` by `labels` over `k` lists; an empty list is reseeded with
/// the point least similar to its own centroid (`sims`) that no earlier reseed took.
fn update(points: &[&[f32]], labels: &[(u32, f32)], k: usize, dim: usize) -> Vec<Vec<f32>> {
    let mut sums = vec![vec![0f32; dim]; k];
    let mut counts = vec![0usize; k];
    for (p, &(l, _)) in points.iter().zip(labels) {
        counts[l as usize] += 1;
        sums[l as usize]
            .iter_mut()
            .zip(*p)
            .for_each(|(s, x)| *s += x);
    }
    let mut far = if counts.contains(&0) {
        let mut far: Vec<usize> = (0..points.len()).collect();
        far.sort_by(|&a, &b| labels[a].1.total_cmp(&labels[b].1).then(a.cmp(&b)));
        far
    } else {
        Vec::new()
    }
    .into_iter();
    for (j, s) in sums.iter_mut().enumerate() {
        if counts[j] == 0 {
            if let Some(i) = far.next() {
                s.copy_from_slice(&points[i][..dim]);
            }
        }
        normalise(s);
    }
    sums
}

/// Builds the index of `vectors` (doc id = row) with `nlist` lists (clamped to `1..=n`):
/// scoring vectors by `centring` (the bundle's, [`ChunkCentring::langs_of`]; `None`: the
/// rows), k-means seeded by `seed` with [`KmeansParams::for_chunks`] (below
/// [`BALANCE_MIN_CHUNKS`] chunks farthest-point seeding, ≤ [`TRAIN_PER_LIST`]` · nlist`
/// evenly spaced training chunks, ≤ [`MAX_ITERATIONS`] rounds; from it on sampled seeding,
/// ≤ [`FINE_TRAIN_PER_LIST`]` · nlist` and ≤ [`FINE_ITERATIONS`]), then every chunk assigned
/// and the centroids recomputed from their lists. From [`BALANCE_MIN_CHUNKS`] chunks on,
/// lists longer than [`FINE_LIST_CAP`] are then bisected ([`cap_lists`]), so the index
/// may have more than `nlist` lists (`ivf.lists.len()` is the count; ~`n/85` at 1M); below
/// it the lists are the k-means' own. Deterministic for the same inputs whatever `threads`
/// is and on every CPU. Errors: no vectors.
pub fn build(
    vectors: &Vectors,
    centring: Option<&ChunkCentring>,
    nlist: usize,
    seed: u64,
    threads: usize,
) -> Result<Ivf> {
    let points = scoring_points(vectors, centring)?;
    let n = points.len();
    let ivf = kmeans(
        &points,
        vectors.dim(),
        nlist,
        seed,
        threads,
        KmeansParams::for_chunks(n),
    );
    Ok(match default_cap(n) {
        Some(cap) => cap_points(&points, &ivf, cap),
        None => ivf,
    })
}

/// From this many chunks on [`build`] caps the lists ([`cap_lists`]) and uses the fine-list
/// settings ([`FINE_NLIST_PER_SQRT`], [`FINE_LIST_CAP`], [`KmeansParams::for_chunks`],
/// [`default_rescore`]): the size from which `--dense-index auto` writes an index
/// ([`AUTO_MIN_CHUNKS`]); smaller bundles keep the k-means' lists unchanged (their lists
/// are read at a share of 0.7–0.9 of the chunks, where list sizes do not decide the bytes).
pub const BALANCE_MIN_CHUNKS: usize = AUTO_MIN_CHUNKS;

/// Below [`BALANCE_MIN_CHUNKS`], the longest list [`update_cap`] lets `jikji update` make,
/// as a multiple of the longest old list (measured at 1M vectors as a multiple of the
/// mean list: `docs/performance.md`, "Balanced lists").
pub const LIST_CAP_FACTOR: f64 = 2.0;

/// The longest list [`build`] keeps from [`BALANCE_MIN_CHUNKS`] chunks on, in chunks: 125.
/// Source: the 1M prototype (`docs/design/dense-pq.md` §0 item 2 and §3): the K = 4,000
/// k-means capped at 125 (11,794 lists, median 82 rows) read 142 kB a warm query for
/// recall@10 0.907 (binary codes, ×16 rescoring, nprobe 16), against 0.819 at 194 kB with
/// the earlier cap `⌈2n/nlist⌉` (1,000) and 0.898 at best within 200 kB at cap 250.
pub const FINE_LIST_CAP: usize = 125;

/// The list cap of [`build`] for `n` chunks: [`FINE_LIST_CAP`] from [`BALANCE_MIN_CHUNKS`]
/// on (whatever `nlist` was asked), `None` (the k-means' lists) below.
pub fn default_cap(n: usize) -> Option<usize> {
    (n >= BALANCE_MIN_CHUNKS).then_some(FINE_LIST_CAP)
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

/// [`build`]'s k-means with the settings `params` instead of [`KmeansParams::for_chunks`]:
/// the k-means' lists, never capped (the 1M-vector bench caps them with [`cap_lists`]).
/// Errors: no vectors.
pub fn build_with(
    vectors: &Vectors,
    centring: Option<&ChunkCentring>,
    nlist: usize,
    seed: u64,
    threads: usize,
    params: KmeansParams,
) -> Result<Ivf> {
    let points = scoring_points(vectors, centring)?;
    Ok(kmeans(&points, vectors.dim(), nlist, seed, threads, params))
}

/// The k-means of [`build_with`] over the scoring vectors `points` (at least one, each
/// `dim` long).
fn kmeans(
    points: &[Vec<f32>],
    dim: usize,
    nlist: usize,
    seed: u64,
    threads: usize,
    params: KmeansParams,
) -> Ivf {
    let n = points.len();
    let k = nlist.clamp(1, n);
    let train_n = n.min(params.train_per_list.max(1).saturating_mul(k));
    let train: Vec<&[f32]> = (0..train_n)
        .map(|t| points[t * n / train_n].as_slice())
        .collect();
    let mut state = seed;
    let mut centroids: Vec<Vec<f32>> = match params.seeding {
        Seeding::FarthestPoint => {
            let m = train.len().min(32usize.saturating_mul(k));
            let cand: Vec<&[f32]> = (0..m).map(|t| train[t * train.len() / m]).collect();
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
            chosen.iter().map(|&i| cand[i].to_vec()).collect()
        }
        Seeding::Sample => {
            let mut order: Vec<usize> = (0..train.len()).collect();
            for i in 0..k {
                let j = i + (splitmix(&mut state) % (order.len() - i) as u64) as usize;
                order.swap(i, j);
            }
            order[..k].iter().map(|&i| train[i].to_vec()).collect()
        }
    };
    centroids.iter_mut().for_each(|c| normalise(c));
    let mut labels: Vec<(u32, f32)> = Vec::new();
    for _ in 0..params.iterations {
        let refs: Vec<&[f32]> = centroids.iter().map(Vec::as_slice).collect();
        let next = assign(&train, &refs, dim, threads);
        let same = next.iter().map(|l| l.0).eq(labels.iter().map(|l| l.0));
        labels = next;
        if same {
            break;
        }
        centroids = update(&train, &labels, k, dim);
    }
    let all_points: Vec<&[f32]> = points.iter().map(Vec::as_slice).collect();
    let refs: Vec<&[f32]> = centroids.iter().map(Vec::as_slice).collect();
    let all = assign(&all_points, &refs, dim, threads);
    let centroids = update(&all_points, &all, k, dim);
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
        /// Lists split past the cap ([`plan_update_with`] with `split`): the new centroid of
        /// each list `j` that was bisected (`j` below the old `nlist`, its first part kept
        /// under `j`) and of each appended list (`j` from the old `nlist` on, in order), the
        /// normalised mean of its chunks' scoring vectors, ascending `j`; empty when no list
        /// passed the cap.
        split: Vec<(usize, Vec<f32>)>,
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
    plan_update_with(centroids, old_lists, old_n, from_old, scoring, cap, None)
}

/// [`plan_update`], and with `split` = `Some(S)` (a binary index with `S` row page numbers
/// per list, `pages.ivf.list_rows`; an int8 index, whose rows are in its list pages: 1) a
/// list longer than `cap` is not a refit: it is bisected
/// as [`cap_lists`] bisects (principal direction, median cut, recursively until every part
/// holds at most `cap` chunks), its first part kept under its number and the others
/// appended as new lists, each part's centroid the normalised mean of its chunks' scoring
/// vectors ([`UpdatePlan::Keep::split`]); the other lists and centroids are untouched
/// (design `docs/design/update.md`, "Splits past the cap"). Still refits when the lists
/// would then number more than [`jikji_format::paged::ivf::MAX_LISTS`] or `nlist · S`
/// would pass a page header's u32 (row page numbers `j·S + p`), saying so. Deterministic.
pub fn plan_update_with(
    centroids: &Vectors,
    old_lists: &[Vec<u32>],
    old_n: usize,
    from_old: &[Option<usize>],
    scoring: &(dyn Fn(usize) -> Vec<f32> + Sync),
    cap: usize,
    split: Option<usize>,
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
    let mut split_centroids = Vec::new();
    let over: Vec<usize> = (0..nlist).filter(|&j| lists[j].len() > cap).collect();
    if let Some(&j) = over.first() {
        let Some(s) = split else {
            return UpdatePlan::Refit(format!(
                "list {j} would hold {} chunks (cap {cap})",
                lists[j].len()
            ));
        };
        let longest = lists[j].len();
        for &j in &over {
            let mut parts = split_list(scoring, &lists[j], cap).into_iter();
            let (first, c) = parts.next().expect("a part");
            lists[j] = first;
            split_centroids.push((j, c));
            for (l, c) in parts {
                split_centroids.push((lists.len(), c));
                lists.push(l);
            }
        }
        let total = lists.len();
        if total > jikji_format::paged::ivf::MAX_LISTS
            || total.checked_mul(s).is_none_or(|x| x > u32::MAX as usize)
        {
            return UpdatePlan::Refit(format!(
                "splitting list {j} ({longest} chunks, cap {cap}) would make {total} lists: {total} · list_rows {s} row page numbers pass 2^32 − 1, or more than {} lists",
                jikji_format::paged::ivf::MAX_LISTS
            ));
        }
        split_centroids.sort_by_key(|x| x.0);
    }
    UpdatePlan::Keep {
        lists,
        assigned: fresh,
        changed,
        split: split_centroids,
    }
}

/// `docs` (ascending) bisected as [`cap_lists`] bisects a list longer than `cap`, over the
/// scoring vectors `scoring(d)`: its parts (ascending ids, each at most `cap.max(2)` long),
/// the first the one kept under the list's number, the others in the order [`cap_lists`]
/// appends them, each with the normalised mean of its scoring vectors.
fn split_list(
    scoring: &(dyn Fn(usize) -> Vec<f32> + Sync),
    docs: &[u32],
    cap: usize,
) -> Vec<(Vec<u32>, Vec<f32>)> {
    let points: Vec<Vec<f32>> = docs.iter().map(|&d| scoring(d as usize)).collect();
    let local = Ivf {
        centroids: vec![mean_of(
            &points,
            &(0..docs.len() as u32).collect::<Vec<_>>(),
        )],
        lists: vec![(0..docs.len() as u32).collect()],
    };
    let parts = cap_points(&points, &local, cap);
    // Local ids ascend with the docs, so each part's docs stay ascending.
    parts
        .lists
        .into_iter()
        .zip(parts.centroids)
        .map(|(l, c)| (l.into_iter().map(|i| docs[i as usize]).collect(), c))
        .collect()
}

/// The longest list [`plan_update`] allows an update of an index of `old_lists` to make, for
/// `n` chunks: from [`BALANCE_MIN_CHUNKS`] on the cap a build applies ([`default_cap`]:
/// [`FINE_LIST_CAP`]), below it [`LIST_CAP_FACTOR`] times the longest old list (a
/// k-means' lists are uncapped there).
///
/// The environment's [`UPDATE_CAP_ENV`] (a number ≥ 2) overrides it, for tests and
/// measurements of splits past the cap on small bundles.
pub fn update_cap(n: usize, old_lists: &[Vec<u32>]) -> usize {
    if let Some(c) = std::env::var(UPDATE_CAP_ENV)
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    {
        return c.max(2);
    }
    default_cap(n).unwrap_or_else(|| {
        let longest = old_lists.iter().map(Vec::len).max().unwrap_or(1);
        ((LIST_CAP_FACTOR * longest as f64).ceil() as usize).max(2)
    })
}

/// Environment variable forcing [`update_cap`] (chunks a list may hold after `jikji
/// update`, at least 2), e.g. `JIKJI_IVF_UPDATE_CAP=8`; unset or not a number: the default.
pub const UPDATE_CAP_ENV: &str = "JIKJI_IVF_UPDATE_CAP";

/// Recall@[`PROBE_DEPTH`] against the exact scan that the builder's default `nprobe` must
/// reach on the calibration's pseudo-queries ([`choose_nprobe`]). Above the target's 0.95
/// because pseudo-queries (spans of a chunk's own text) find their lists more easily than
/// real questions do (measured on the eval sets: README, "Dense index (issue 14)").
pub const PROBE_RECALL_TARGET: f64 = 0.99;

/// From [`BALANCE_MIN_CHUNKS`] on, the most bytes a dense query of a binary index may read
/// by default (its lists and rescoring rows, as [`query_cost`] estimates them): the
/// builder's default `nprobe` is the fewest lists reaching [`PROBE_RECALL_TARGET`], but
/// at most the most lists within this budget ([`budget_nprobe`]). Fine lists (capped at
/// [`FINE_LIST_CAP`]) need ~200 lists for recall 0.99 of the lists at 1M chunks (~920 kB
/// a query, measured in session 27's browser bench); with grouped rows (×24, groups of ≤ 32)
/// 180 kB estimated is 16 lists there, recall@10 ≈ 0.91, ~175 kB p50 / 185 kB p90 as stored
/// (`scripts/prototype-row-pages.py`; issue 14's ≤ 200 kB a query).
pub const FINE_QUERY_BUDGET: f64 = 180_000.0;

/// The most lists (≥ 1, ≤ `nlist`) a query of an index of `n` rows of `dim` in `nlist`
/// binary lists (`rescore` × 10 rescoring rows, `per_page` rows an `i` page) can probe with
/// [`query_cost`]'s `index` bytes within `budget` (bytes).
pub fn budget_nprobe(
    n: usize,
    dim: usize,
    nlist: usize,
    rescore: (usize, usize, bool),
    budget: f64,
) -> usize {
    let fits = |p: usize| query_cost(n, dim, nlist, p, Some(rescore)).index <= budget;
    // `index` grows with p: the largest p that fits, by bisection.
    let (mut lo, mut hi) = (1usize, nlist.max(1));
    if fits(hi) {
        return hi;
    }
    while lo + 1 < hi {
        let mid = lo + (hi - lo) / 2;
        if fits(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo
}

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
    fn row_groups_put_near_rows_together_in_parts_of_at_most_max() {
        // A list of 40 rows around four far apart points (10 each, interleaved; the first
        // principal direction splits them two and two, the second one by one): groups of
        // ≤ 10 are the four clouds; of ≤ 4, each cloud's rows in groups of 2..=4.
        let corners = [
            [1.0f32, 0.5, 0.0],
            [1.0, -0.5, 0.0],
            [-1.0, 0.5, 0.0],
            [-1.0, -0.5, 0.0],
        ];
        let point = |d: usize| -> Vec<f32> {
            let c = corners[d % 4];
            let e = (d / 4) as f32 * 0.01;
            vec![c[0] + e, c[1] - e, c[2] + 0.5 * e]
        };
        let docs: Vec<u32> = (0..40).collect();
        let g = row_groups(&point, &docs, 10);
        assert_eq!(jikji_format::paged::ivf::check_groups(&g, 40, 10), Ok(4));
        for (d, &x) in g.iter().enumerate() {
            assert_eq!(x, g[d % 4], "row {d}");
        }
        let g = row_groups(&point, &docs, 4);
        let m = jikji_format::paged::ivf::check_groups(&g, 40, 4).unwrap();
        assert!((10..=20).contains(&m), "{m} groups");
        for a in 0..40 {
            for b in 0..40 {
                if g[a] == g[b] {
                    assert_eq!(
                        a % 4,
                        b % 4,
                        "rows {a} and {b} of different clouds share a group"
                    );
                }
            }
        }
        // A list no longer than max is one group.
        assert_eq!(row_groups(&point, &docs[..7], 10), vec![0; 7]);
    }

    #[test]
    fn the_byte_budget_bounds_the_default_nprobe_of_fine_binary_lists() {
        // 1M chunks of 384 dims in 11,759 lists, groups of up to 32 rows read until they
        // hold 240: 16 lists fit 180 kB (estimate), 17 do not.
        let p = budget_nprobe(1_000_000, 384, 11_759, (24, 32, true), FINE_QUERY_BUDGET);
        assert_eq!(p, 16);
        let cost = |p| query_cost(1_000_000, 384, 11_759, p, Some((24, 32, true))).index;
        assert!(cost(p) <= FINE_QUERY_BUDGET && cost(p + 1) > FINE_QUERY_BUDGET);
        // A budget every list fits in: nlist; one no list fits in: 1.
        assert_eq!(budget_nprobe(1000, 8, 10, (8, 4, false), 1e12), 10);
        assert_eq!(budget_nprobe(1000, 8, 10, (8, 4, false), 0.0), 1);
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
            build_with(&v, None, 2, 1, 2, KmeansParams::for_chunks(160)).unwrap(),
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
        assert_eq!(default_cap(1_000_000), Some(FINE_LIST_CAP));
        assert_eq!(default_cap(BALANCE_MIN_CHUNKS - 1), None);
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

    /// Deterministic pseudo-random values in [−1, 1).
    fn noise(s: &mut u64, n: usize) -> Vec<f32> {
        (0..n)
            .map(|_| (splitmix(s) >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
            .collect()
    }

    /// The brute-force argmax: every centroid in order, [`dot`], the first largest wins.
    fn argmax(p: &[f32], centroids: &[&[f32]]) -> (u32, f32) {
        let mut best = (0u32, f32::NEG_INFINITY);
        for (j, c) in centroids.iter().enumerate() {
            let d = dot(p, c);
            if d > best.1 {
                best = (j as u32, d);
            }
        }
        best
    }

    #[test]
    fn the_tiled_assignment_equals_the_brute_force_argmax() {
        let mut s = 42u64;
        // 21 dimensions (two lane blocks and a tail of 5), 384 (e5-small), and 5 (tail only);
        // point and centroid counts that leave partial tiles and blocks.
        for (dim, n, k) in [(21, 101, 250), (384, 40, 487), (5, 77, 13)] {
            let unit = |s: &mut u64| {
                let mut v = noise(s, dim);
                normalise(&mut v);
                v
            };
            let points: Vec<Vec<f32>> = (0..n).map(|_| unit(&mut s)).collect();
            let mut cents: Vec<Vec<f32>> = (0..k).map(|_| unit(&mut s)).collect();
            // Exact ties: copies of earlier centroids further on, and (k ≥ 120) pairs of
            // centroids equal to a point (its best: both; the lower must win).
            for j in 0..10 {
                cents[k - 1 - j] = cents[j].clone();
            }
            let ties = k >= 120;
            if ties {
                for i in 0..5 {
                    cents[100 - i] = points[i].clone();
                    cents[k - 11 - i] = points[i].clone();
                }
            }
            let pr: Vec<&[f32]> = points.iter().map(Vec::as_slice).collect();
            let cr: Vec<&[f32]> = cents.iter().map(Vec::as_slice).collect();
            let brute: Vec<(u32, f32)> = pr.iter().map(|p| argmax(p, &cr)).collect();
            for threads in [1, 2, 3] {
                let fast = assign(&pr, &cr, dim, threads);
                assert_eq!(fast.len(), n);
                for (i, (f, b)) in fast.iter().zip(&brute).enumerate() {
                    assert_eq!(f.0, b.0, "dim {dim} point {i} threads {threads}");
                    assert_eq!(f.1.to_bits(), b.1.to_bits(), "dim {dim} point {i}");
                }
            }
            // The plain-Rust path (no AVX2) gives the same bits.
            let mut plain = vec![(0u32, 0f32); n];
            assign_part(&pr, &cr, dim, &mut plain, tile);
            assert!(plain
                .iter()
                .zip(&brute)
                .all(|(a, b)| a.0 == b.0 && a.1.to_bits() == b.1.to_bits()));
            // Ties went to the lower list: the points copied into two centroids.
            for (i, b) in brute.iter().enumerate().take(if ties { 5 } else { 0 }) {
                assert_eq!(b.0 as usize, 100 - i, "dim {dim} point {i}");
            }
        }
        // No centroids: (0, −∞) as the brute force.
        let p = [vec![1f32; 8]];
        let pr: Vec<&[f32]> = p.iter().map(Vec::as_slice).collect();
        assert_eq!(assign(&pr, &[], 8, 2), vec![(0, f32::NEG_INFINITY)]);
    }

    #[test]
    fn from_100k_chunks_the_defaults_are_4_sqrt_n_lists_capped_at_125() {
        // The settings: 4·√n k-means lists (2·√n below), cap 125, ×16 rescoring, 1 row a
        // page, 64 training points a list, 12 rounds, sampled seeding.
        let n = BALANCE_MIN_CHUNKS;
        assert_eq!(default_nlist(n), 1265);
        assert_eq!(default_nlist(1_000_000), 4000);
        assert_eq!(default_nlist(n - 1), 632);
        assert_eq!(DenseIndex::Auto.nlist_for(n), Some(1265));
        assert_eq!((default_cap(n), default_cap(n - 1)), (Some(125), None));
        assert_eq!((default_rescore(n), default_rescore(n - 1)), (24, 8));
        assert_eq!(
            (default_rows_per_page(n), default_rows_per_page(n - 1)),
            (32, 4)
        );
        assert_eq!(
            (default_row_groups(n), default_row_groups(n - 1)),
            (true, false)
        );
        assert_eq!(
            KmeansParams::for_chunks(n),
            KmeansParams {
                train_per_list: 64,
                iterations: 12,
                seeding: Seeding::Sample
            }
        );
        assert_eq!(
            KmeansParams::for_chunks(n - 1).seeding,
            Seeding::FarthestPoint
        );
        // A build of 100,000 unit vectors of 3 dimensions (uniform on the sphere's upper
        // half, so list sizes vary): its lists are the 1,265 k-means lists (`build_with`
        // at the same settings) bisected until at most 125 long.
        let mut s = 5u64;
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|_| {
                let mut v = noise(&mut s, 3);
                v[2] = v[2].abs() + 0.05;
                normalise(&mut v);
                v
            })
            .collect();
        let v = Vectors::open(&write_vectors(3, &rows).unwrap()).unwrap();
        let nlist = DenseIndex::Auto.nlist_for(n).unwrap();
        let km = build_with(&v, None, nlist, 9, 2, KmeansParams::for_chunks(n)).unwrap();
        assert_eq!(km.lists.len(), 1265);
        assert!(km.lists.iter().any(|l| l.len() > FINE_LIST_CAP));
        let ivf = build(&v, None, nlist, 9, 2).unwrap();
        assert_eq!(ivf, cap_lists(&v, None, &km, FINE_LIST_CAP).unwrap());
        assert!(ivf.lists.len() > 1265);
        assert!(ivf.lists.iter().all(|l| !l.is_empty() && l.len() <= 125));
        assert_eq!(ivf.lists.iter().map(Vec::len).sum::<usize>(), n);
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
        assert_eq!(DenseIndex::Auto.nlist_for(1_000_000), Some(4000));
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
        let cap = update_cap(210, &ivf.lists);
        assert_eq!(cap, 100);
        let UpdatePlan::Keep {
            lists,
            assigned,
            changed,
            ..
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
        // With rows per list (`split`), each list over the cap is bisected instead: its
        // first half under its number, the second appended, both with their parts' means.
        let UpdatePlan::Keep { lists, split, .. } =
            plan_update_with(&cents, &ivf.lists, 200, &from, &scoring, 51, Some(4))
        else {
            panic!("split")
        };
        assert_eq!(lists.len(), 8);
        assert!(
            lists.iter().all(|l| (26..=51).contains(&l.len())),
            "{lists:?}"
        );
        assert_eq!(
            split.iter().map(|x| x.0).collect::<Vec<_>>(),
            (0..8).collect::<Vec<_>>()
        );
        let pts: Vec<Vec<f32>> = (0..210).map(&scoring).collect();
        for (j, c) in &split {
            assert_eq!(c, &mean_of(&pts, &lists[*j]), "list {j}");
            assert!(lists[*j].iter().all(|&d| d % 4 == lists[*j][0] % 4));
        }
        // Unless the row page numbers `nlist · S` would pass a u32.
        let p = plan_update_with(
            &cents,
            &ivf.lists,
            200,
            &from,
            &scoring,
            51,
            Some(u32::MAX as usize / 5),
        );
        assert!(
            matches!(&p, UpdatePlan::Refit(r) if r.contains("2^32")),
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
        assert_eq!(update_cap(BALANCE_MIN_CHUNKS, &ivf.lists), FINE_LIST_CAP);
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

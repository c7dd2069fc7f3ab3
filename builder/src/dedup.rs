//! Duplicate detection: new files against a bundle, and pairs within a bundle.
//!
//! - **Exact duplicates** are found first, by SHA-256 of the chunk text with whitespace
//!   runs collapsed ([`text_hash`]), before anything is embedded.
//! - **New against existing** ([`classify_new_with`]): each chunk of the new files gets its
//!   best cosine similarity against the vectors of the bundle and is classified
//!   `duplicate` (≥ `duplicate`), `partial` (≥ `partial`) or `new`. The best is found
//!   through the bundle's dense index when it has one (every bundle from 100,000 chunks:
//!   the nearest lists' rows, scored exactly, widening until the best is stable;
//!   [`crate::nearest`]), else (or with [`Route::Exact`], `--exact`) by the exact scan of
//!   every vector (O(new × bundle) dot products).
//! - **Within a bundle** ([`near_duplicate_pairs`]): pairs of chunks from *different*
//!   source files with cosine ≥ the self-dedup threshold. Chunks of one file are never
//!   paired (neighbours share their overlap), nor versions of one document (same
//!   `doc_id`: that is what versions are). Candidates come from random-hyperplane LSH
//!   (Charikar 2002, "Similarity estimation techniques from rounding algorithms"; banding
//!   as in Leskovec, Rajaraman & Ullman, *Mining of Massive Datasets* ch. 3) on vectors
//!   centred on the bundle's mean (E5 vectors share a large common component, which would
//!   put most vectors in a few buckets); every candidate is then re-scored exactly
//!   with the int8 vectors, so the LSH can miss a pair but never invent one.
//! - **Values decide**: two chunks that state different values of one thing (a timeout
//!   of 30 s against 60 s, 3 months against 6 months, see
//!   [`crate::conflicts::value_differences`]) are never duplicates however similar —
//!   deleting one of them could delete the newer fact. Within a bundle such pairs are
//!   returned apart ([`NearDuplicates::conflicting`]); a new chunk whose best match differs
//!   in values is [`Class::Conflict`].
//!
//! Thresholds are in E5 (multilingual-e5-small) cosine terms; the defaults and how they
//! were measured are in the README ("Dedup thresholds").

use std::collections::{HashMap, HashSet};

use jikji_format::vectors::Vectors;
use jikji_format::ChunkRecord;

use crate::nearest::{DenseRoute, NearestRows, Work};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Default E5 cosine at or above which a new chunk is a duplicate of a bundle chunk (the
/// counterpart of MiniLM 0.92): every lightly edited copy measured (≈12% of the chars
/// deleted) scored ≥ 0.9659, and 99% of chunks' nearest neighbour in another file < 0.965
/// (README "Dedup thresholds", `tests/dedup_calibration.rs`).
pub const DUPLICATE: f32 = 0.965;
/// Default E5 cosine at or above which a new chunk partly repeats a bundle chunk (add
/// after review): about half of the chunks sharing half their text score above it, and
/// ~5% of chunks' nearest neighbour in another file.
pub const PARTIAL: f32 = 0.93;
/// Default E5 cosine at or above which two chunks of one bundle are reported (the
/// counterpart of MiniLM 0.95): every copy with 2% of its chars deleted scored ≥ 0.9875.
pub const SELF_DUPLICATE: f32 = 0.985;

/// SHA-256 of `text` with leading/trailing whitespace removed and inner whitespace runs
/// collapsed to one space: equal for chunks that differ only in spacing or line breaks.
pub fn text_hash(text: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    let mut first = true;
    for w in text.split_whitespace() {
        if !first {
            h.update(b" ");
        }
        h.update(w.as_bytes());
        first = false;
    }
    h.finalize().into()
}

/// What a new chunk is, relative to a bundle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    /// Same text as a bundle chunk, or cosine ≥ the duplicate threshold: do not add.
    Duplicate,
    /// Cosine between the partial and duplicate thresholds: add after review.
    Partial,
    /// Below the partial threshold.
    New,
    /// Similar enough to be a duplicate or partial, but the values differ from the match
    /// (see the module doc): a contradiction to resolve, not a copy to drop.
    Conflict,
}

/// The verdict on one new chunk.
#[derive(Debug, Clone, Serialize)]
pub struct NewChunk {
    /// Source file (relative to the new folder) and chunk id as a build would make them.
    pub source: String,
    /// Chunk id.
    pub id: String,
    /// Heading path of the chunk.
    pub heading_path: Vec<String>,
    /// Classification.
    pub class: Class,
    /// True if found by text hash (no embedding needed).
    pub exact: bool,
    /// Cosine with the best bundle chunk (1.0 for an exact duplicate).
    pub cosine: f32,
    /// The best bundle chunk: id and source.
    pub match_id: String,
    /// Source of the best bundle chunk.
    pub match_source: String,
    /// For [`Class::Conflict`]: what the new chunk (`newer`) and the match (`older`)
    /// disagree on.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub differences: Vec<crate::conflicts::Difference>,
}

/// Classifies new chunks against a bundle by the exact scan ([`classify_new_with`] with
/// [`NearestRows::exact`]).
///
/// `bundle` holds the bundle's records (doc id = index) and `vectors` its vectors;
/// `new` are the new chunks with their vectors (`None` where not embedded: only allowed
/// for chunks whose text hash is in the bundle). Thresholds are cosines in [-1, 1].
/// Panics if a chunk without an exact text match has no vector.
pub fn classify_new(
    bundle: &[ChunkRecord],
    vectors: &Vectors,
    new: &[(ChunkRecord, Option<Vec<f32>>)],
    duplicate: f32,
    partial: f32,
) -> Vec<NewChunk> {
    classify_new_with(
        bundle,
        &mut NearestRows::exact(vectors),
        new,
        duplicate,
        partial,
    )
    .expect("the exact scan does not fail")
}

/// Classifies new chunks against a bundle, each chunk's best match found by `nearest`
/// (the exact scan, or the bundle's dense index: [`crate::nearest`]; its [`NearestRows::work`]
/// says what it cost).
///
/// `bundle` holds the bundle's records (doc id = index); `new` are the new chunks with their
/// vectors (`None` where not embedded: only allowed for chunks whose text hash is in the
/// bundle). Thresholds are cosines in [-1, 1]. A chunk whose text (up to whitespace) is a
/// bundle chunk's is an exact duplicate of it (cosine 1, no lookup); the others get the
/// best cosine over the rows `nearest` scores and are classified as the module doc says.
/// Errors: as [`NearestRows::best`] (a list page of the index missing or corrupt). Panics
/// if a chunk without an exact text match has no vector.
pub fn classify_new_with(
    bundle: &[ChunkRecord],
    nearest: &mut NearestRows,
    new: &[(ChunkRecord, Option<Vec<f32>>)],
    duplicate: f32,
    partial: f32,
) -> crate::Result<Vec<NewChunk>> {
    let by_hash: HashMap<[u8; 32], usize> = bundle
        .iter()
        .enumerate()
        .map(|(i, r)| (text_hash(&r.text), i))
        .collect();
    let mut out = Vec::with_capacity(new.len());
    for (r, v) in new {
        let (best, cosine, exact) = match by_hash.get(&text_hash(&r.text)) {
            Some(&i) => (i, 1.0, true),
            None => {
                let q = v
                    .as_deref()
                    .expect("a chunk without an exact match needs its vector");
                let (best, cosine) = nearest.best(q, &r.text)?.unwrap_or((0, f32::NEG_INFINITY));
                (best, cosine, false)
            }
        };
        let mut differences = Vec::new();
        let class = if exact {
            Class::Duplicate
        } else if cosine >= partial {
            differences = bundle
                .get(best)
                .map(|b| crate::conflicts::value_differences(r, b))
                .unwrap_or_default();
            if !differences.is_empty() {
                Class::Conflict
            } else if cosine >= duplicate {
                Class::Duplicate
            } else {
                Class::Partial
            }
        } else {
            Class::New
        };
        out.push(NewChunk {
            source: r.source.clone(),
            id: r.id.clone(),
            heading_path: r.heading_path.clone(),
            class,
            exact,
            cosine,
            match_id: bundle.get(best).map(|b| b.id.clone()).unwrap_or_default(),
            match_source: bundle
                .get(best)
                .map(|b| b.source.clone())
                .unwrap_or_default(),
            differences,
        });
    }
    Ok(out)
}

/// Int8 vectors in one flat array, for fast pairwise dot products.
pub struct FlatVectors {
    dim: usize,
    scales: Vec<f32>,
    data: Vec<i8>,
}

impl FlatVectors {
    /// Copies a bundle's vectors.
    pub fn from_vectors(v: &Vectors) -> Self {
        let mut data = Vec::with_capacity(v.len() * v.dim());
        let mut scales = Vec::with_capacity(v.len());
        for i in 0..v.len() {
            let (s, q) = v.row(i);
            scales.push(s);
            data.extend_from_slice(q);
        }
        FlatVectors {
            dim: v.dim(),
            scales,
            data,
        }
    }

    /// From rows `(scale, int8 components)` of dimension `dim`.
    pub fn from_rows(dim: usize, rows: impl IntoIterator<Item = (f32, Vec<i8>)>) -> Self {
        let mut data = Vec::new();
        let mut scales = Vec::new();
        for (s, q) in rows {
            assert_eq!(q.len(), dim, "row of the wrong dimension");
            scales.push(s);
            data.extend(q);
        }
        FlatVectors { dim, scales, data }
    }

    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.scales.len()
    }

    /// True if there are none.
    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    fn row(&self, i: usize) -> &[i8] {
        &self.data[i * self.dim..(i + 1) * self.dim]
    }

    /// Cosine similarity of vectors `i` and `j` (both stored L2-normalised, so the scaled
    /// int8 dot product).
    pub fn cosine(&self, i: usize, j: usize) -> f32 {
        let (a, b) = (self.row(i), self.row(j));
        let dot: i32 = a
            .iter()
            .zip(b)
            .map(|(&x, &y)| i32::from(x) * i32::from(y))
            .sum();
        dot as f32 * self.scales[i] * self.scales[j]
    }
}

/// LSH parameters: `bands` hash tables, each keyed by `bits` random-hyperplane signs.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct LshParams {
    /// Number of bands (hash tables).
    pub bands: usize,
    /// Sign bits per band (≤ 64).
    pub bits: usize,
    /// Seed of the random hyperplanes.
    pub seed: u64,
}

impl Default for LshParams {
    /// 32 bands of 12 bits. On the books bundle (6,402 chunks) it finds every pair at
    /// cosine ≥ 0.97 (155/155) and ≥ 0.985 (37/37), 783/903 at ≥ 0.95, from 369,344
    /// candidates (1.8% of all pairs); see README.
    fn default() -> Self {
        LshParams {
            bands: 32,
            bits: 12,
            seed: 0x6a696b6a69,
        }
    }
}

/// splitmix64: a small deterministic generator for the hyperplanes.
fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn gaussian(state: &mut u64) -> f32 {
    // Box–Muller.
    let u1 = ((splitmix(state) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
    let u2 = ((splitmix(state) >> 11) as f64) / (1u64 << 53) as f64;
    ((-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()) as f32
}

/// Candidate pairs `(i, j)`, `i < j`, that share at least one LSH band key. Cost:
/// `n × bands × bits × dim` multiply-adds to hash, plus the sum over buckets of
/// `size²/2` pairs.
pub fn lsh_candidates(v: &FlatVectors, p: LshParams) -> Vec<(u32, u32)> {
    let n = v.len();
    let dim = v.dim;
    if n < 2 || p.bands == 0 {
        return Vec::new();
    }
    // Mean vector (dequantized), to centre.
    let mut mean = vec![0f32; dim];
    for i in 0..n {
        let s = v.scales[i];
        for (m, &q) in mean.iter_mut().zip(v.row(i)) {
            *m += f32::from(q) * s;
        }
    }
    for m in &mut mean {
        *m /= n as f32;
    }
    let mut state = p.seed;
    let planes: Vec<f32> = (0..p.bands * p.bits * dim)
        .map(|_| gaussian(&mut state))
        .collect();
    // Offset of each plane against the mean: h(x) = sign(w·x·s − w·mean).
    let offsets: Vec<f32> = planes
        .chunks_exact(dim)
        .map(|w| w.iter().zip(&mean).map(|(a, b)| a * b).sum())
        .collect();
    // Each row's keys on its own (rows shared out to all cores; the arithmetic per row is
    // the same on any number of threads, so are the keys). The planes are transposed so
    // that one pass over a row's components adds that component's term to every plane's
    // dot product at once (vectorized across planes): each dot product still adds its
    // terms one after the other in component order, from -0.0 as `Iterator::sum` does, so
    // every sum, and every key, is bit for bit the one a plane-by-plane loop gives.
    let n_planes = p.bands * p.bits;
    let mut by_component = vec![0f32; n_planes * dim];
    for (plane, w) in planes.chunks_exact(dim).enumerate() {
        for (t, &x) in w.iter().enumerate() {
            by_component[t * n_planes + plane] = x;
        }
    }
    let mut keys = vec![0u64; n * p.bands];
    let row_keys = |i: usize, out: &mut [u64], dots: &mut [f32]| {
        let row = v.row(i);
        let s = v.scales[i];
        dots.fill(-0.0);
        for (t, &q) in row.iter().enumerate() {
            let q = f32::from(q);
            let w = &by_component[t * n_planes..(t + 1) * n_planes];
            for (d, &a) in dots.iter_mut().zip(w) {
                *d += a * q;
            }
        }
        for (b, slot) in out.iter_mut().enumerate() {
            let mut key = 0u64;
            for k in 0..p.bits {
                let plane = b * p.bits + k;
                if dots[plane] * s > offsets[plane] {
                    key |= 1 << k;
                }
            }
            *slot = key;
        }
    };
    let threads = crate::ingest::default_threads().clamp(1, 64);
    let per = n.div_ceil(threads).max(1);
    std::thread::scope(|sc| {
        for (t, part) in keys.chunks_mut(per * p.bands).enumerate() {
            let row_keys = &row_keys;
            sc.spawn(move || {
                let mut dots = vec![0f32; n_planes];
                for (r, out) in part.chunks_mut(p.bands).enumerate() {
                    row_keys(t * per + r, out, &mut dots);
                }
            });
        }
    });
    let mut pairs: Vec<u64> = Vec::new();
    let mut order: Vec<u32> = (0..n as u32).collect();
    for b in 0..p.bands {
        let key = |i: u32| keys[i as usize * p.bands + b];
        order.sort_unstable_by_key(|&i| (key(i), i));
        for run in order.chunk_by(|&x, &y| key(x) == key(y)) {
            for (x, &i) in run.iter().enumerate() {
                for &j in &run[x + 1..] {
                    pairs.push(u64::from(i) << 32 | u64::from(j));
                }
            }
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    pairs
        .into_iter()
        .map(|p| ((p >> 32) as u32, p as u32))
        .collect()
}

/// One reported pair of a bundle.
#[derive(Debug, Clone, Serialize)]
pub struct Pair {
    /// Doc ids in the bundle (`a < b`).
    pub a: u32,
    /// Second doc id.
    pub b: u32,
    /// Cosine similarity (1.0 for an exact text duplicate).
    pub cosine: f32,
    /// True if the texts are equal up to whitespace.
    pub exact: bool,
}

/// May chunks `a` and `b` be reported as duplicates of each other? Only if they come from
/// different source files and are not versions of one document.
pub fn comparable(a: &ChunkRecord, b: &ChunkRecord) -> bool {
    a.source != b.source && !(a.doc_id.is_some() && a.doc_id == b.doc_id)
}

/// Pairs of chunks of a bundle with cosine ≥ `threshold` that state no different values
/// ([`near_duplicates`]`.pairs`).
pub fn near_duplicate_pairs(
    records: &[ChunkRecord],
    vectors: Option<&FlatVectors>,
    threshold: f32,
    lsh: LshParams,
) -> Vec<Pair> {
    near_duplicates(records, vectors, threshold, lsh).pairs
}

/// The similar pairs of a bundle, split by whether their values agree.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NearDuplicates {
    /// Duplicates: exact text duplicates first, then by cosine descending.
    pub pairs: Vec<Pair>,
    /// Pairs at or above the threshold whose values differ (not duplicates), by cosine
    /// descending, each with what the first (`a`, as `newer`) and second (`b`, as `older`)
    /// disagree on.
    pub conflicting: Vec<(Pair, Vec<crate::conflicts::Difference>)>,
}

/// Pairs of chunks of a bundle with cosine ≥ `threshold` (see the module doc), split into
/// duplicates and pairs whose values differ. `vectors` is `None` for a BM25-only bundle
/// (exact duplicates only).
pub fn near_duplicates(
    records: &[ChunkRecord],
    vectors: Option<&FlatVectors>,
    threshold: f32,
    lsh: LshParams,
) -> NearDuplicates {
    let mut conflicting = Vec::new();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut by_hash: HashMap<[u8; 32], Vec<u32>> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        by_hash
            .entry(text_hash(&r.text))
            .or_default()
            .push(i as u32);
    }
    for group in by_hash.values() {
        for (x, &i) in group.iter().enumerate() {
            for &j in &group[x + 1..] {
                if comparable(&records[i as usize], &records[j as usize]) {
                    seen.insert((i, j));
                    out.push(Pair {
                        a: i,
                        b: j,
                        cosine: 1.0,
                        exact: true,
                    });
                }
            }
        }
    }
    if let Some(v) = vectors {
        for (i, j) in lsh_candidates(v, lsh) {
            if seen.contains(&(i, j)) || !comparable(&records[i as usize], &records[j as usize]) {
                continue;
            }
            let c = v.cosine(i as usize, j as usize);
            if c >= threshold {
                let p = Pair {
                    a: i,
                    b: j,
                    cosine: c,
                    exact: false,
                };
                let d =
                    crate::conflicts::value_differences(&records[i as usize], &records[j as usize]);
                if d.is_empty() {
                    out.push(p);
                } else {
                    conflicting.push((p, d));
                }
            }
        }
    }
    out.sort_by(|x, y| {
        y.exact
            .cmp(&x.exact)
            .then(y.cosine.total_cmp(&x.cosine))
            .then((x.a, x.b).cmp(&(y.a, y.b)))
    });
    conflicting.sort_by(|x, y| {
        y.0.cosine
            .total_cmp(&x.0.cosine)
            .then((x.0.a, x.0.b).cmp(&(y.0.a, y.0.b)))
    });
    NearDuplicates {
        pairs: out,
        conflicting,
    }
}

/// All pairs `i < j` with cosine ≥ `threshold` by brute force (O(n²)): the reference the
/// LSH's recall is measured against.
pub fn exact_pairs(v: &FlatVectors, threshold: f32) -> Vec<(u32, u32)> {
    let mut out = Vec::new();
    for i in 0..v.len() {
        for j in i + 1..v.len() {
            if v.cosine(i, j) >= threshold {
                out.push((i as u32, j as u32));
            }
        }
    }
    out
}

/// How `jikji dedup --new` finds each new chunk's best match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// Through the bundle's dense index when it has one (every bundle from 100,000 chunks),
    /// probing this many lists a round until the best is stable, more while it is just
    /// below the duplicate or partial threshold ([`DenseRoute`], [`DenseRoute::with_guard`]);
    /// the exact scan otherwise.
    Index {
        /// Lists a round (≥ 1; [`crate::nearest::ROUND`] by default).
        round: usize,
    },
    /// The exact scan of every row, index or not (`jikji dedup --new --exact`).
    Exact,
}

impl Default for Route {
    fn default() -> Self {
        Route::Index {
            round: crate::nearest::ROUND,
        }
    }
}

/// The outcome of [`check_new_files_with`].
#[derive(Debug, Clone, Serialize)]
pub struct NewReport {
    /// Every chunk of the new files, in file and chunk order.
    pub chunks: Vec<NewChunk>,
    /// How the best matches were found ([`NearestRows::describe`]).
    pub way: String,
    /// True if they were found through the bundle's dense index.
    pub routed: bool,
    /// What finding them cost (rows scored, lists probed, list pages read).
    pub work: Work,
    /// Milliseconds spent classifying (lookups included, embedding and chunking not).
    pub classify_ms: f64,
}

/// [`check_new_files_with`] with the default [`Route`], returning the chunks only.
pub fn check_new_files(
    bundle_dir: &std::path::Path,
    dir: &std::path::Path,
    model_dir: &std::path::Path,
    cache_dir: Option<&std::path::Path>,
    threads: usize,
    duplicate: f32,
    partial: f32,
) -> crate::Result<Vec<NewChunk>> {
    Ok(check_new_files_with(
        bundle_dir,
        dir,
        model_dir,
        cache_dir,
        threads,
        duplicate,
        partial,
        Route::default(),
    )?
    .chunks)
}

/// Chunks the usable files of `dir` with the bundle's chunk size and overlap and
/// classifies each chunk against the bundle at `bundle_dir` ([`classify_new`]). Chunks
/// whose text is already in the bundle are not embedded; the others are embedded with the
/// model in `model_dir` (which must be the bundle's) through the vector cache `cache_dir`.
/// Each chunk's best match is found as `route` says (through the bundle's dense index when
/// it has one, by default: [`Route`]). Errors: the bundle cannot be opened or has no
/// vectors, the model differs, a page of the dense index is missing or corrupt, I/O.
#[allow(clippy::too_many_arguments)]
pub fn check_new_files_with(
    bundle_dir: &std::path::Path,
    dir: &std::path::Path,
    model_dir: &std::path::Path,
    cache_dir: Option<&std::path::Path>,
    threads: usize,
    duplicate: f32,
    partial: f32,
    route: Route,
) -> crate::Result<NewReport> {
    let b = jikji_format::Bundle::open_dir(bundle_dir).map_err(|source| {
        crate::BuildError::OpenBundle {
            path: bundle_dir.to_path_buf(),
            source,
        }
    })?;
    let vectors = b.vectors().ok_or_else(|| crate::BuildError::Bundle {
        path: bundle_dir.to_path_buf(),
        message: "the bundle has no vectors (built with --no-embed); dedup needs them".into(),
    })?;
    let info = crate::ingest::model_info(model_dir)?;
    if let Some(m) = &b.manifest().model {
        if m.sha256 != info.sha256 {
            return Err(crate::BuildError::Model {
                path: model_dir.to_path_buf(),
                message: format!(
                    "model sha256 {} differs from the bundle's {}",
                    info.sha256, m.sha256
                ),
            });
        }
    }
    // The indexed chunks (a parent-child bundle stores its parent sections after them).
    let records: Vec<ChunkRecord> = (0..b.manifest().counts.chunks as u32)
        .map(|i| b.chunks().get(i))
        .collect::<Result<_, _>>()?;
    // New files are chunked as the bundle was.
    let chunking = crate::ingest::Chunking::of_manifest(b.manifest(), Some(model_dir))?;
    let scanned = crate::corpus::scan(dir, crate::corpus::CheckOptions::default())?;
    let mut new: Vec<ChunkRecord> = Vec::new();
    for f in &scanned.files {
        new.extend(
            crate::ingest::chunk::chunk_file(
                f,
                &chunking,
                &crate::versions::VersionInfo::default(),
            )
            .chunks,
        );
    }
    let known: HashSet<[u8; 32]> = records.iter().map(|r| text_hash(&r.text)).collect();
    let todo: Vec<usize> = (0..new.len())
        .filter(|&i| !known.contains(&text_hash(&new[i].text)))
        .collect();
    let texts: Vec<&str> = todo.iter().map(|&i| new[i].text.as_str()).collect();
    let mut vecs: HashMap<usize, Vec<f32>> = HashMap::new();
    if !texts.is_empty() {
        let e = crate::ingest::embed::embed_passages(
            &texts, model_dir, cache_dir, threads, false, &mut None,
        )?;
        vecs = todo.iter().copied().zip(e.vectors).collect();
    }
    let pairs: Vec<(ChunkRecord, Option<Vec<f32>>)> = new
        .into_iter()
        .enumerate()
        .map(|(i, r)| (r, vecs.remove(&i)))
        .collect();
    let t = std::time::Instant::now();
    let index = match route {
        Route::Index { round } => DenseRoute::open(bundle_dir, &b, round)?.map(|r| {
            let lists = crate::nearest::guard_lists(r.nlist());
            r.with_guard(&[partial, duplicate], crate::nearest::GUARD_MARGIN, lists)
        }),
        Route::Exact => None,
    };
    let routed = index.is_some();
    let mut nearest = match index {
        Some(r) => NearestRows::through(vectors, r),
        None => NearestRows::exact(vectors),
    };
    let chunks = classify_new_with(&records, &mut nearest, &pairs, duplicate, partial)?;
    Ok(NewReport {
        chunks,
        way: nearest.describe(),
        routed,
        work: nearest.work(),
        classify_ms: t.elapsed().as_secs_f64() * 1e3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use jikji_format::vectors::quantize;

    fn unit(v: Vec<f32>) -> Vec<f32> {
        let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        v.into_iter().map(|x| x / n).collect()
    }

    #[test]
    fn text_hash_ignores_spacing_only() {
        assert_eq!(text_hash("a  b\nc "), text_hash("a b c"));
        assert_ne!(text_hash("a b c"), text_hash("a b d"));
    }

    fn rec(id: &str, source: &str, doc_id: Option<&str>, text: &str) -> ChunkRecord {
        ChunkRecord {
            id: id.into(),
            source: source.into(),
            source_url: None,
            tier: None,
            heading_path: vec![],
            lang: "en".into(),
            section: 0,
            start: 0,
            end: 0,
            text: text.into(),
            title: None,
            author: None,
            version: None,
            updated: None,
            expires: None,
            provenance: None,
            doc_id: doc_id.map(String::from),
            archived: false,
            parent_id: None,
            parent_doc: None,
            conflicts: Vec::new(),
        }
    }

    /// Same-file neighbours and versions of one document are never paired, however
    /// similar; chunks of different files are.
    #[test]
    fn only_different_files_that_are_not_versions_are_paired() {
        let v = unit(vec![1.0, 0.2, 0.1, 0.0]);
        let recs = vec![
            rec("a1", "a.md", None, "one"),
            rec("a2", "a.md", None, "two"),
            rec("p1", "plan_v1.md", Some("plan"), "three"),
            rec("p2", "plan_v2.md", Some("plan"), "four"),
            rec("b1", "b.md", None, "five"),
        ];
        let flat = FlatVectors::from_rows(4, (0..5).map(|_| quantize(&v)));
        let pairs = near_duplicate_pairs(&recs, Some(&flat), 0.99, LshParams::default());
        let got: Vec<(u32, u32)> = pairs.iter().map(|p| (p.a, p.b)).collect();
        // a1–a2 (same file) and p1–p2 (versions) are missing; all cross pairs are there.
        assert_eq!(
            got,
            [
                (0, 2),
                (0, 3),
                (0, 4),
                (1, 2),
                (1, 3),
                (1, 4),
                (2, 4),
                (3, 4)
            ]
        );
    }

    #[test]
    fn new_chunks_are_classified_by_their_best_cosine() {
        use jikji_format::vectors::write_vectors;
        let bundle = vec![rec("x", "x.md", None, "alpha beta")];
        let base = unit(vec![1.0, 0.0, 0.0]);
        let vectors = Vectors::open(&write_vectors(3, &[base]).unwrap()).unwrap();
        let at = |c: f32| Some(vec![c, (1.0 - c * c).sqrt(), 0.0]);
        let new = vec![
            (rec("n1", "n.md", None, "alpha  beta"), None), // exact (spacing only)
            (rec("n2", "n.md", None, "dup"), at(0.97)),
            (rec("n3", "n.md", None, "part"), at(0.94)),
            (rec("n4", "n.md", None, "new"), at(0.5)),
        ];
        let out = classify_new(&bundle, &vectors, &new, DUPLICATE, PARTIAL);
        let got: Vec<(Class, bool)> = out.iter().map(|c| (c.class, c.exact)).collect();
        assert_eq!(
            got,
            [
                (Class::Duplicate, true),
                (Class::Duplicate, false),
                (Class::Partial, false),
                (Class::New, false)
            ]
        );
        assert!(out.iter().all(|c| c.match_source == "x.md"));
    }

    /// Random unit vectors with planted near-duplicates: the LSH finds every planted pair
    /// (cosine ≥ 0.97), and nothing it reports is below the threshold.
    #[test]
    fn lsh_finds_planted_near_duplicates() {
        let dim = 64;
        let mut st = 7u64;
        let mut rows = Vec::new();
        let base: Vec<f32> = (0..dim).map(|_| gaussian(&mut st)).collect();
        for _ in 0..300 {
            // A shared component, like E5's, plus noise.
            let v: Vec<f32> = base.iter().map(|b| b + 0.8 * gaussian(&mut st)).collect();
            rows.push(unit(v));
        }
        for k in 0..20 {
            let v: Vec<f32> = rows[k * 7]
                .iter()
                .map(|x| x + 0.02 * gaussian(&mut st))
                .collect();
            rows.push(unit(v));
        }
        let flat = FlatVectors::from_rows(dim, rows.iter().map(|r| quantize(r)));
        let truth = exact_pairs(&flat, 0.97);
        assert!(truth.len() >= 20, "{}", truth.len());
        let cands: HashSet<(u32, u32)> = lsh_candidates(&flat, LshParams::default())
            .into_iter()
            .collect();
        let missed: Vec<_> = truth.iter().filter(|p| !cands.contains(p)).collect();
        assert!(missed.is_empty(), "missed {missed:?}");
        assert!(
            cands.len() < 300 * 320 / 2 / 4,
            "candidates {}",
            cands.len()
        );
    }

    /// The keys as the plane-by-plane loop computed them before the planes were transposed:
    /// the candidates of [`lsh_candidates`] are exactly these keys' collisions.
    fn reference_candidates(v: &FlatVectors, p: LshParams) -> Vec<(u32, u32)> {
        let (n, dim) = (v.len(), v.dim);
        let mut mean = vec![0f32; dim];
        for i in 0..n {
            for (m, &q) in mean.iter_mut().zip(v.row(i)) {
                *m += f32::from(q) * v.scales[i];
            }
        }
        for m in &mut mean {
            *m /= n as f32;
        }
        let mut state = p.seed;
        let planes: Vec<f32> = (0..p.bands * p.bits * dim)
            .map(|_| gaussian(&mut state))
            .collect();
        let offsets: Vec<f32> = planes
            .chunks_exact(dim)
            .map(|w| w.iter().zip(&mean).map(|(a, b)| a * b).sum())
            .collect();
        let key = |i: usize, b: usize| {
            let mut key = 0u64;
            for k in 0..p.bits {
                let plane = b * p.bits + k;
                let w = &planes[plane * dim..(plane + 1) * dim];
                let dot: f32 = w.iter().zip(v.row(i)).map(|(a, &q)| a * f32::from(q)).sum();
                if dot * v.scales[i] > offsets[plane] {
                    key |= 1 << k;
                }
            }
            key
        };
        let mut pairs = std::collections::BTreeSet::new();
        for b in 0..p.bands {
            let keys: Vec<u64> = (0..n).map(|i| key(i, b)).collect();
            for i in 0..n {
                for j in i + 1..n {
                    if keys[i] == keys[j] {
                        pairs.insert((i as u32, j as u32));
                    }
                }
            }
        }
        pairs.into_iter().collect()
    }

    /// Vectorized across planes, the keys are bit for bit the plane-by-plane loop's: the
    /// same candidates, on E5-like rows and few bits (many collisions, many near-ties).
    #[test]
    fn lsh_keys_equal_the_plane_by_plane_loop() {
        let dim = 384;
        let mut st = 11u64;
        let base: Vec<f32> = (0..dim).map(|_| gaussian(&mut st)).collect();
        let rows: Vec<Vec<f32>> = (0..400)
            .map(|_| unit(base.iter().map(|b| b + 0.7 * gaussian(&mut st)).collect()))
            .collect();
        let flat = FlatVectors::from_rows(dim, rows.iter().map(|r| quantize(r)));
        for p in [
            LshParams::default(),
            LshParams {
                bands: 5,
                bits: 6,
                seed: 3,
            },
        ] {
            let got = lsh_candidates(&flat, p);
            assert!(!got.is_empty());
            assert_eq!(got, reference_candidates(&flat, p), "{p:?}");
        }
    }
}

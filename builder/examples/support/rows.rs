//! Seeded random rows shared by the dense-index benches (`bench_ivf_1m`, `bench_hnsw`,
//! `bench_update_binary`): splitmix64 (Steele, Lea & Flood 2014), uniform and Box–Muller
//! Gaussian draws, and `bench_ivf_1m`'s synthetic base (see its header). One copy, so the
//! benches draw the same rows from the same seeds.
#![allow(dead_code)] // each bench uses a part

use std::collections::{HashMap, HashSet};
use std::io::BufRead;

use sha2::{Digest, Sha256};

/// Bytes of a cache record with e5-small rows (384 f32): key, 4 + 1 bytes, the row.
pub const RECORD: usize = 32 + 4 + 1 + 4 * 384;

/// splitmix64: the next value of `state`.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in `[0, 1)`, 24 bits.
pub fn uniform(s: &mut u64) -> f32 {
    (splitmix(s) >> 40) as f32 / (1u64 << 24) as f32
}

/// Standard normal (Box–Muller).
pub fn gauss(s: &mut u64) -> f32 {
    let u = uniform(s).max(1e-7);
    let v = uniform(s);
    (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
}

/// Dot product of two equally long rows.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Scales `v` to unit length (a zero row stays zero).
pub fn normalise(v: &mut [f32]) {
    let n = dot(v, v).sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `x` rotated by an angle uniform in `[0, max]` radians towards
/// `0.7·(w − μ)/‖w − μ‖ + 0.3·g/‖g‖` (made orthogonal to `x`; `g` Gaussian): the
/// perturbation `bench_ivf_1m` extends real rows with (its header).
pub fn rotate(x: &[f32], w: &[f32], mu: &[f32], max: f32, s: &mut u64) -> Vec<f32> {
    let mut d: Vec<f32> = w.iter().zip(mu).map(|(a, m)| a - m).collect();
    normalise(&mut d);
    let mut g: Vec<f32> = (0..x.len()).map(|_| gauss(s)).collect();
    normalise(&mut g);
    let mut u: Vec<f32> = d.iter().zip(&g).map(|(a, b)| 0.7 * a + 0.3 * b).collect();
    let p = dot(&u, x);
    u.iter_mut().zip(x.iter()).for_each(|(a, b)| *a -= p * b);
    normalise(&mut u);
    let th = uniform(s) * max;
    let mut y: Vec<f32> = x
        .iter()
        .zip(&u)
        .map(|(a, b)| th.cos() * a + th.sin() * b)
        .collect();
    normalise(&mut y);
    y
}

/// A synthetic base of `n` unit passages of `dim` dimensions and `q` queries: a shared
/// mean direction, Zipf-weighted topics (`n / 40`) with 8 subtopics each and Gaussian
/// noise; a query is a passage plus noise. Seeded: the same rows every run.
pub fn synthetic(n: usize, q: usize, dim: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut s = 0x5e_u64;
    let unit = |s: &mut u64| {
        let mut g: Vec<f32> = (0..dim).map(|_| gauss(s)).collect();
        normalise(&mut g);
        g
    };
    let mu = unit(&mut s);
    let topics = (n / 40).max(1);
    let tau: Vec<Vec<f32>> = (0..topics).map(|_| unit(&mut s)).collect();
    let sigma: Vec<Vec<f32>> = (0..topics * 8).map(|_| unit(&mut s)).collect();
    let weights: Vec<f64> = (0..topics)
        .map(|t| 1.0 / ((t + 1) as f64).powf(0.8))
        .collect();
    let total: f64 = weights.iter().sum();
    let mut cdf = Vec::with_capacity(topics);
    let mut acc = 0.0;
    for w in &weights {
        acc += w / total;
        cdf.push(acc);
    }
    let passage = |s: &mut u64| {
        let r = f64::from(uniform(s));
        let t = cdf.partition_point(|&c| c < r).min(topics - 1);
        let sub = (splitmix(s) % 8) as usize;
        let g = unit(s);
        let mut v: Vec<f32> = (0..dim)
            .map(|k| 1.2 * mu[k] + 0.55 * tau[t][k] + 0.4 * sigma[t * 8 + sub][k] + 0.45 * g[k])
            .collect();
        normalise(&mut v);
        v
    };
    let base: Vec<Vec<f32>> = (0..n).map(|_| passage(&mut s)).collect();
    let queries: Vec<Vec<f32>> = (0..q)
        .map(|_| {
            let x = passage(&mut s);
            let g = unit(&mut s);
            let mut v: Vec<f32> = x.iter().zip(&g).map(|(a, b)| a + 0.6 * b).collect();
            normalise(&mut v);
            v
        })
        .collect();
    (base, queries)
}

/// The rows of the embedding cache file `cache` (records of 32-byte key, 4 + 1 bytes, `dim`
/// f32: `jikji_builder::vector_cache`) for model folder `model` (its `model.onnx` hash names
/// the keys): the queries of the `query_files` (eval `queries.jsonl`) found there, and every
/// other row (passages and pseudo-queries) as the base, in key order; the count of held-out
/// queries. Prints how many of each file's queries the cache has. Panics on unreadable files.
///
/// `cache` may end in `@N`: only the file's first `N` records are read. The cache is
/// append-only and shared, so other runs' embeddings (pseudo-queries too) join the base as
/// it grows; `@39382` is the file as sessions 26–27 read it (28,848 base rows), so 1M figures
/// stay comparable across sessions.
pub fn from_cache(
    model: &str,
    cache: &str,
    query_files: &[String],
) -> (Vec<Vec<f32>>, Vec<Vec<f32>>, usize) {
    // The model's hash names the cache keys.
    let onnx = std::fs::read(format!("{model}/model.onnx")).expect("reading model.onnx");
    let sha = hex(&Sha256::digest(&onnx));
    let (cache, records) = match cache.rsplit_once('@') {
        Some((file, n)) if n.parse::<usize>().is_ok() => (file, n.parse::<usize>().ok()),
        _ => (cache, None),
    };
    let bytes = std::fs::read(cache).expect("reading the cache file");
    let mut by_key: HashMap<[u8; 32], Vec<f32>> = HashMap::new();
    let take = records.unwrap_or(usize::MAX);
    for r in bytes.chunks_exact(RECORD).take(take) {
        let key: [u8; 32] = r[..32].try_into().unwrap();
        let v: Vec<f32> = r[37..]
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        by_key.insert(key, v);
    }
    drop(bytes);
    let mut queries: Vec<Vec<f32>> = Vec::new();
    let mut qkeys = HashSet::new();
    for path in query_files {
        let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let mut found = 0;
        let mut lines = 0;
        for line in std::io::BufReader::new(f).lines() {
            let line = line.expect("reading queries");
            let j: serde_json::Value = serde_json::from_str(&line).expect("a JSON line");
            let Some(text) = j["text"].as_str() else {
                continue;
            };
            lines += 1;
            let key = jikji_builder::vector_cache::cache_key(
                &sha,
                "f32",
                jikji_embed::Prefix::Query,
                text,
            );
            if let Some(v) = by_key.get(&key) {
                if qkeys.insert(key) {
                    queries.push(v.clone());
                    found += 1;
                }
            }
        }
        println!("{path}: {found} of {lines} queries in the cache");
    }
    let mut keys: Vec<&[u8; 32]> = by_key.keys().filter(|k| !qkeys.contains(*k)).collect();
    keys.sort();
    let base: Vec<Vec<f32>> = keys.iter().map(|k| by_key[*k].clone()).collect();
    let held = qkeys.len();
    (base, queries, held)
}

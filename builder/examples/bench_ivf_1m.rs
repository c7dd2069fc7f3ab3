//! The dense index at 1M vectors (issue 14): real e5-small vectors extended to `--n` by
//! perturbation, the builder's k-means and the format's pages, searched by the engine's
//! own scan (`jikji_engine::ivf::search_pages`) over an in-memory page map that records
//! what each pass lacks, so rounds and bytes are what a browser would fetch (pages as
//! stored: header, deflate when it pays). Side by side in one run: the exact int8 scan
//! (the recall reference and its bytes), and for each list cap of `--caps` (0 = the
//! k-means' lists as they are; else `jikji_builder::ivf::cap_lists`, lists bisected until
//! at most that long) IVF with int8 lists and IVF with binary lists for each oversampling
//! (0 = binary-only) and each number of rescoring rows per `i` page (`--rows-per-page`),
//! and for each centroid code of `--centroid-codes` (`int8`; `int4-centred`: 4-bit centred
//! centroid pages and, with binary lists, the binary-coded sample page, shown as `…/c4`).
//!
//! ```text
//! cargo run --release -p jikji-builder --example bench_ivf_1m -- \
//!     --cache target/h14-cache/vectors-<h16>.bin --model models/e5-small \
//!     --queries ../shared/eval/xquad-en/queries.jsonl,... [--n 1000000] [--nlist 2000] \
//!     [--caps 0,1000] [--nprobe 4,8,16] [--rescore 0,4,8,16] [--codes int8,binary] \
//!     [--rows-per-page 1,4] [--max-queries 300] [--train-per-list 64] [--iterations 12] \
//!     [--seeding sample|farthest] [--threads 2] [--dump target/rows.f32] [--kmeans-only 1]
//! # without an embedding cache: a synthetic base of N vectors (see `synthetic`)
//! cargo run --release -p jikji-builder --example bench_ivf_1m -- --synthetic 27000 ...
//! # the browser's bundle (scripts/bench-ivf-browser): one configuration, the builder's own
//! # writer and defaults, then the native engine driven as the worker drives it
//! cargo run --release -p jikji-builder --example bench_ivf_1m -- --cache … --model … \
//!     --queries … --n 1000000 --max-queries 300 --probe-queries 200 --nprobe 16 --write DIR
//! cargo run --release -p jikji-builder --example bench_ivf_1m -- --search DIR --nprobe 16
//! ```
//!
//! `--write DIR` replaces the grid below: see `write_and_search` (the bundle, its stand-in
//! chunks, `DIR.queries.json`) and `search_native` (what is measured). `--nprobe` there is one
//! value (0: the bundle's measured `nprobe`).
//!
//! Vectors. Base: every vector of the embedding cache file (passages of the eval corpora
//! and books embedded so far, and the calibration's pseudo-queries) except the eval queries
//! named by `--queries` (found by their cache key, `query: ` + text), which are the
//! queries. Copy `c ≥ 1` of base vector `x` is `cos θ·x + sin θ·u`: `u` a unit vector
//! orthogonal to `x` in the direction of `0.7·(w − μ)/‖w − μ‖ + 0.3·g/‖g‖` (`w` another
//! base vector chosen at random, `μ` the base mean, `g` Gaussian noise), `θ` uniform in
//! `[0, --max-angle]` degrees: a rotation of `x` by a small angle, mostly within the
//! subspace the real vectors span, that keeps its unit norm. Copy 0 is `x` itself. No
//! per-language centring (the rows are scored as stored). Seeded: the same run gives the
//! same vectors.
//!
//! k-means: `jikji_builder::ivf::build_with` with the builder's settings for `--n` chunks
//! (`KmeansParams::for_chunks`: from 100k rows 64 training points a list, 12 rounds, sampled
//! seeding) unless `--train-per-list`, `--iterations` or `--seeding` say otherwise. Printed
//! for the k-means lists and for each cap: seconds, list sizes, and the quality `mean dot`
//! (the mean over the rows of the dot product of the row, as the k-means sees it, with its
//! list's centroid, the normalised mean of the list). `--dump FILE` writes those rows (n ×
//! 384 little-endian f32, the int8 rows dequantized) for `scripts/compare-kmeans-faiss`;
//! `--kmeans-only 1` stops after the k-means and the caps.
//!
//! Per configuration: recall@10 against the exact int8 scan (mean over the queries), list
//! bytes per vector, bytes per warm query (centroids and sample cached; mean, p50, p90),
//! centroids + sample once, list and row bytes (means), index rounds warm (p50; the chunk
//! pages add one), and the engine's native time with its pages at hand (p50, p95).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use jikji_engine::ivf::{search_pages, IndexPages, Place};
use jikji_format::paged::ivf::{self, IvfParts, IvfRoot, ListCodes};
use jikji_format::paged::page::decode_stored;
use jikji_format::vectors::{write_vectors, Vectors};
use sha2::{Digest, Sha256};

#[path = "support/rows.rs"]
mod rows;
use rows::{dot, from_cache, hex, rotate, splitmix, synthetic};

const DIM: usize = 384;

struct Args {
    cache: String,
    model: String,
    queries: Vec<String>,
    n: usize,
    nlist: usize,
    nprobe: Vec<usize>,
    rescore: Vec<usize>,
    codes: Vec<String>,
    rows_per_page: usize,
    max_queries: usize,
    train_per_list: usize,
    iterations: usize,
    threads: usize,
    max_angle: f32,
    synthetic: usize,
    caps: Vec<usize>,
    rows_per_page_list: Vec<usize>,
    seeding: Option<jikji_builder::ivf::Seeding>,
    train_set: bool,
    iterations_set: bool,
    dump: String,
    kmeans_only: bool,
    /// `--centroid-codes int8,int4-centred`: the centroid pages' codes to compare (the
    /// compact variant also codes the background sample when the lists are binary).
    centroid_codes: Vec<String>,
    /// `--write DIR`: write the rows as a bundle with the builder's writer and search it
    /// through the engine as the browser does (see [`write_and_search`]) instead of the grid.
    write: String,
    /// `--search DIR`: the native search of an earlier `--write DIR` again (its queries
    /// from `DIR.queries.json`, which it rewrites), without making the vectors.
    search: String,
    /// `--rescore` was given (`--search` then uses its last value; else the bundle's).
    rescore_set: bool,
    /// `--probe-queries N`: with `--write`, held-out queries (none of the measured ones)
    /// given to the writer as its pseudo-queries (`nprobe` measure, background sample).
    probe_queries: usize,
}

fn args() -> Args {
    let mut a = Args {
        cache: String::new(),
        model: "models/e5-small".into(),
        queries: Vec::new(),
        n: 1_000_000,
        nlist: 2000,
        nprobe: vec![4, 8, 16],
        rescore: vec![0, 4, 8, 16],
        codes: vec!["int8".into(), "binary".into()],
        rows_per_page: 1,
        max_queries: 300,
        train_per_list: jikji_builder::ivf::FINE_TRAIN_PER_LIST,
        iterations: jikji_builder::ivf::FINE_ITERATIONS,
        threads: 2,
        max_angle: 25.0,
        synthetic: 0,
        caps: vec![0],
        rows_per_page_list: Vec::new(),
        seeding: None,
        train_set: false,
        iterations_set: false,
        dump: String::new(),
        kmeans_only: false,
        centroid_codes: vec!["int8".into()],
        write: String::new(),
        search: String::new(),
        rescore_set: false,
        probe_queries: 200,
    };
    let list =
        |s: &str| -> Vec<usize> { s.split(',').map(|x| x.parse().expect("a number")).collect() };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--cache" => a.cache = v,
            "--model" => a.model = v,
            "--queries" => a.queries = v.split(',').map(String::from).collect(),
            "--n" => a.n = v.parse().expect("--n"),
            "--nlist" => a.nlist = v.parse().expect("--nlist"),
            "--nprobe" => a.nprobe = list(&v),
            "--rescore" => {
                a.rescore = list(&v);
                a.rescore_set = true;
            }
            "--codes" => a.codes = v.split(',').map(String::from).collect(),
            "--rows-per-page" => a.rows_per_page_list = list(&v),
            "--max-queries" => a.max_queries = v.parse().expect("--max-queries"),
            "--train-per-list" => {
                a.train_per_list = v.parse().expect("--train-per-list");
                a.train_set = true;
            }
            "--iterations" => {
                a.iterations = v.parse().expect("--iterations");
                a.iterations_set = true;
            }
            "--seeding" => {
                a.seeding = Some(match v.as_str() {
                    "sample" => jikji_builder::ivf::Seeding::Sample,
                    "farthest" => jikji_builder::ivf::Seeding::FarthestPoint,
                    _ => panic!("--seeding sample|farthest"),
                })
            }
            "--dump" => a.dump = v,
            "--kmeans-only" => a.kmeans_only = v != "0",
            "--threads" => a.threads = v.parse().expect("--threads"),
            "--max-angle" => a.max_angle = v.parse().expect("--max-angle"),
            "--synthetic" => a.synthetic = v.parse().expect("--synthetic"),
            "--caps" => a.caps = list(&v),
            "--centroid-codes" => a.centroid_codes = v.split(',').map(String::from).collect(),
            "--write" => a.write = v,
            "--search" => a.search = v,
            "--probe-queries" => a.probe_queries = v.parse().expect("--probe-queries"),
            _ => panic!("unknown argument {k}"),
        }
    }
    assert!(
        !a.cache.is_empty() || a.synthetic > 0 || !a.search.is_empty(),
        "--cache FILE or --synthetic N is required"
    );
    if a.rows_per_page_list.is_empty() {
        a.rows_per_page_list = vec![a.rows_per_page];
    }
    a
}

/// The in-memory bundle: page name → (stored bytes, raw body); `have` what a browser
/// holds, `need` what the last pass lacked.
struct Pages {
    all: HashMap<String, (usize, Arc<Vec<u8>>)>,
    have: Mutex<HashSet<String>>,
    need: Mutex<Vec<String>>,
}

impl IndexPages for Pages {
    fn page(&self, name: &str) -> Option<Arc<Vec<u8>>> {
        if self.have.lock().unwrap().contains(name) {
            return self.all.get(name).map(|p| p.1.clone());
        }
        self.need.lock().unwrap().push(name.to_string());
        None
    }
}

fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let a = args();
    let t0 = Instant::now();
    let load = || std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load at start: {}", load().trim());
    if !a.search.is_empty() {
        // --search DIR: the queries of an earlier --write, searched again natively.
        let dir = std::path::PathBuf::from(&a.search);
        let j: serde_json::Value = serde_json::from_slice(
            &std::fs::read(format!("{}.queries.json", dir.display())).expect("DIR.queries.json"),
        )
        .expect("JSON");
        let queries: Vec<Vec<f32>> = serde_json::from_value(j["queries"].clone()).expect("queries");
        let exact: Vec<Vec<u32>> = serde_json::from_value(j["exact"].clone()).expect("exact");
        let nprobe = a.nprobe.last().copied().unwrap_or(0);
        let rescore = a
            .rescore_set
            .then(|| a.rescore.last().copied().unwrap_or(0));
        search_native(&dir, &queries, &exact, nprobe, rescore);
        println!("load at the end: {}", load().trim());
        return;
    }
    let (base, queries, held_out) = if a.synthetic > 0 {
        let (b, q) = synthetic(a.synthetic, a.max_queries, DIM);
        println!(
            "synthetic base: {} vectors, {} queries (no embedding cache: see the module doc)",
            b.len(),
            q.len()
        );
        let h = q.len();
        (b, q, h)
    } else {
        from_cache(&a.model, &a.cache, &a.queries)
    };
    let base: Vec<&Vec<f32>> = base.iter().collect();
    let b = base.len();
    assert!(
        b > 0 && !queries.is_empty(),
        "no base vectors or no queries"
    );
    // Queries evenly spaced over the sets' order, at most max_queries.
    let take = queries.len().min(a.max_queries);
    // With --write: other held-out queries, the next one after each measured query, as the
    // writer's pseudo-queries (disjoint from the measured ones while take ≤ half of them).
    let probe: Vec<Vec<f32>> = if a.write.is_empty() {
        Vec::new()
    } else {
        let m = a.probe_queries.min(take);
        assert!(
            2 * take <= queries.len(),
            "--write needs twice --max-queries held-out queries"
        );
        (0..m)
            .map(|i| queries[(i * take / m) * queries.len() / take + 1].clone())
            .collect()
    };
    let queries: Vec<Vec<f32>> = (0..take)
        .map(|i| queries[i * queries.len() / take].clone())
        .collect();
    let mut mu = vec![0f32; DIM];
    for x in &base {
        mu.iter_mut()
            .zip(x.iter())
            .for_each(|(m, v)| *m += v / b as f32);
    }
    // Extend to n.
    let mut s = 0x31_4d_u64;
    let max = a.max_angle.to_radians();
    let mut rows: Vec<Vec<f32>> = Vec::with_capacity(a.n);
    let mut cos_sum = 0f64;
    for i in 0..a.n {
        let x = base[i % b];
        if i < b {
            rows.push(x.clone());
            continue;
        }
        let w = base[(splitmix(&mut s) % b as u64) as usize];
        let y = rotate(x, w, &mu, max, &mut s);
        cos_sum += f64::from(dot(&y, x));
        rows.push(y);
    }
    let vbytes = write_vectors(DIM, &rows).expect("quantizing");
    drop(rows);
    let v = Vectors::open(&vbytes).expect("vectors");
    println!(
        "vectors: {} base (+{} queries held out), extended to {} (copies: mean cos to their original {:.3}, angle ≤ {}°), {:.1} s",
        b,
        held_out,
        v.len(),
        cos_sum / (a.n.saturating_sub(b)).max(1) as f64,
        a.max_angle,
        t0.elapsed().as_secs_f64()
    );
    let n = v.len();
    // The exact int8 top 10 of each query (the reference), and its time.
    let t = Instant::now();
    let per = queries.len().div_ceil(a.threads.max(1));
    let exact: Vec<Vec<u32>> = if a.kmeans_only {
        Vec::new()
    } else {
        std::thread::scope(|sc| {
            let hs: Vec<_> = queries
                .chunks(per)
                .map(|part| {
                    let v = &v;
                    sc.spawn(move || {
                        part.iter()
                            .map(|q| {
                                let mut s: Vec<(u32, f32)> =
                                    (0..n).map(|d| (d as u32, v.dot(d, q))).collect();
                                s.select_nth_unstable_by(9, |a, b| {
                                    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
                                });
                                s.truncate(10);
                                s.into_iter().map(|x| x.0).collect::<Vec<u32>>()
                            })
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        })
    };
    let exact_ms = t.elapsed().as_secs_f64() * 1e3 * a.threads as f64 / queries.len() as f64;
    let exact_bytes = n * (DIM + 4);
    println!(
        "exact int8 scan: {:.1} ms/query (one thread, {} queries), {:.1} MB of rows per query",
        exact_ms,
        queries.len(),
        exact_bytes as f64 / 1e6
    );
    if !a.dump.is_empty() {
        use std::io::Write;
        let t = Instant::now();
        let mut w = std::io::BufWriter::new(std::fs::File::create(&a.dump).expect("--dump"));
        for i in 0..n {
            for x in v.get(i) {
                w.write_all(&x.to_le_bytes()).expect("writing --dump");
            }
        }
        w.flush().expect("writing --dump");
        println!(
            "dumped the {n} rows as f32 ({DIM} dims) to {} in {:.1} s",
            a.dump,
            t.elapsed().as_secs_f64()
        );
    }
    if !a.write.is_empty() {
        write_and_search(&a, &v, &vbytes, &queries, &probe, &exact);
        println!(
            "total {:.0} s; load at the end: {}",
            t0.elapsed().as_secs_f64(),
            load().trim()
        );
        return;
    }
    // k-means.
    let mut params = jikji_builder::ivf::KmeansParams::for_chunks(n);
    if a.train_set {
        params.train_per_list = a.train_per_list;
    }
    if a.iterations_set {
        params.iterations = a.iterations;
    }
    if let Some(s) = a.seeding {
        params.seeding = s;
    }
    println!("load before the k-means: {}", load().trim());
    let t = Instant::now();
    let kmeans = jikji_builder::ivf::build_with(&v, None, a.nlist, 0x6a696b6a69, a.threads, params)
        .expect("k-means");
    let kmeans_s = t.elapsed().as_secs_f64();
    let (min, med, max) = size_stats(&kmeans);
    println!(
        "k-means: nlist {}, {} training points per list, ≤ {} rounds, {:?} seeding, {} threads: {:.1} s; list sizes min {} median {} max {}; mean dot {:.4}",
        a.nlist,
        params.train_per_list,
        params.iterations,
        params.seeding,
        a.threads,
        kmeans_s,
        min,
        med,
        max,
        mean_dot(&v, &kmeans)
    );
    println!("load now: {}", load().trim());
    println!(
        "{:<6}{:>10}{:>4}{:>5}{:>7}{:>10}{:>7}{:>10}{:>9}{:>9}{:>9}{:>9}{:>9}{:>7}{:>8}{:>8}",
        "cap",
        "codes",
        "rpp",
        "resc",
        "nprobe",
        "recall@10",
        "B/vec",
        "warm mean",
        "p50 kB",
        "p90 kB",
        "once kB",
        "lists kB",
        "rows kB",
        "rounds",
        "p50 ms",
        "p95 ms"
    );
    for &cap in &a.caps {
        let t = Instant::now();
        let index = if cap == 0 {
            kmeans.clone()
        } else {
            jikji_builder::ivf::cap_lists(&v, None, &kmeans, cap).expect("capping")
        };
        let cap_s = t.elapsed().as_secs_f64();
        let mut sizes: Vec<usize> = index.lists.iter().map(Vec::len).collect();
        sizes.sort_unstable();
        println!(
            "cap {}: {} lists in {:.1} s (k-means + capping {:.1} s), sizes min {} median {} p90 {} max {}; mean dot {:.4}; load {}",
            if cap == 0 {
                "none".to_string()
            } else {
                cap.to_string()
            },
            sizes.len(),
            cap_s,
            kmeans_s + cap_s,
            sizes[0],
            sizes[sizes.len() / 2],
            sizes[sizes.len() * 9 / 10],
            sizes[sizes.len() - 1],
            mean_dot(&v, &index),
            load().trim()
        );
        if a.kmeans_only {
            continue;
        }
        for codes in &a.codes {
            let binary = codes == "binary";
            let rpps = if binary {
                a.rows_per_page_list.clone()
            } else {
                vec![1]
            };
            for (&rpp, cc) in rpps
                .iter()
                .flat_map(|r| a.centroid_codes.iter().map(move |c| (r, c)))
            {
                let ccodes =
                    ivf::CentroidCodes::parse(cc).expect("--centroid-codes int8,int4-centred");
                let compact = ccodes != ivf::CentroidCodes::Int8;
                let codes = &if compact {
                    format!("{codes}/c4")
                } else {
                    codes.clone()
                };
                let scoring = |i: usize| v.get(i);
                let lc = if binary {
                    ListCodes::Binary {
                        scoring: &scoring,
                        rows_per_page: rpp,
                        rescore: 8,
                    }
                } else {
                    ListCodes::Int8
                };
                let mut all = HashMap::new();
                let root: IvfRoot = ivf::write_pages_with(
                    &IvfParts {
                        centroids: &index.centroids,
                        lists: &index.lists,
                        nprobe: 1,
                        codes: lc,
                    },
                    &ivf::PageOptions {
                        centroids: ccodes,
                        coded_sample: compact && binary,
                        sample_queries: &[],
                        rows_per_list: true,
                        row_groups: None,
                    },
                    &v,
                    &mut |p| {
                        let body = decode_stored(&p.name, &p.bytes)?;
                        all.insert(p.name.clone(), (p.bytes.len(), Arc::new(body)));
                        Ok(())
                    },
                )
                .expect("pages");
                let list_total: usize = all
                    .iter()
                    .filter(|(k, _)| k.starts_with("j-"))
                    .map(|(_, p)| p.0)
                    .sum();
                let once: Vec<String> = (0..root.centroids.pages)
                    .map(|i| root.centroid_page(i))
                    .chain([root.sample_page()])
                    .collect();
                let once_bytes: usize = once.iter().map(|p| all[p].0).sum();
                let once_sample = all[&root.sample_page()].0;
                let pages = Pages {
                    all,
                    have: Mutex::new(HashSet::new()),
                    need: Mutex::new(Vec::new()),
                };
                let at = Place {
                    chunks: n,
                    dim: DIM,
                };
                let rescores: Vec<Option<usize>> = if binary {
                    a.rescore.iter().map(|&r| Some(r)).collect()
                } else {
                    vec![None]
                };
                for &np in &a.nprobe {
                    for &rs in &rescores {
                        let mut recall = 0f64;
                        let mut warm_bytes = Vec::new();
                        let mut list_b = Vec::new();
                        let mut row_b = Vec::new();
                        let mut rounds = Vec::new();
                        let mut ms = Vec::new();
                        for (q, ex) in queries.iter().zip(&exact) {
                            // Warm: the centroids and the sample cached, nothing else.
                            *pages.have.lock().unwrap() = once.iter().cloned().collect();
                            let (mut bytes, mut lb, mut rb, mut r) =
                                (0usize, 0usize, 0usize, 0usize);
                            let hits = loop {
                                pages.need.lock().unwrap().clear();
                                let t = Instant::now();
                                match search_pages(&pages, at, &root, q, 10, np, rs) {
                                    Ok(h) => {
                                        ms.push(t.elapsed().as_secs_f64() * 1e3);
                                        break h;
                                    }
                                    Err(jikji_engine::EngineError::Format(
                                        jikji_format::FormatError::PageMissing { .. },
                                    )) => {
                                        r += 1;
                                        let need: Vec<String> =
                                            std::mem::take(&mut *pages.need.lock().unwrap());
                                        let mut have = pages.have.lock().unwrap();
                                        for p in need {
                                            if have.insert(p.clone()) {
                                                let b = pages.all.get(&p).map_or(0, |x| x.0);
                                                bytes += b;
                                                if p.starts_with("j-") {
                                                    lb += b;
                                                } else if p.starts_with("i-") {
                                                    rb += b;
                                                }
                                            }
                                        }
                                        assert!(r < 20, "more than 20 rounds");
                                    }
                                    Err(e) => panic!("{e}"),
                                }
                            };
                            let top: HashSet<u32> = hits.iter().take(10).map(|h| h.0).collect();
                            recall += ex.iter().filter(|d| top.contains(d)).count() as f64
                                / ex.len() as f64;
                            warm_bytes.push(bytes as f64);
                            list_b.push(lb as f64);
                            row_b.push(rb as f64);
                            rounds.push(r as f64);
                        }
                        let m = queries.len() as f64;
                        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
                        let w = mean(&warm_bytes);
                        println!(
                    "{:<6}{:>10}{:>4}{:>5}{:>7}{:>10.4}{:>7.1}{:>10.1}{:>9.1}{:>9.1}{:>9.1}{:>9.1}{:>9.1}{:>7.0}{:>8.2}{:>8.2}",
                    if cap == 0 { "none".to_string() } else { cap.to_string() },
                    codes,
                    if binary { rpp.to_string() } else { "-".to_string() },
                    rs.map_or("-".to_string(), |r| r.to_string()),
                    np,
                    recall / m,
                    list_total as f64 / n as f64,
                    w / 1e3,
                    percentile(&mut warm_bytes.clone(), 0.5) / 1e3,
                    percentile(&mut warm_bytes, 0.9) / 1e3,
                    once_bytes as f64 / 1e3,
                    mean(&list_b) / 1e3,
                    mean(&row_b) / 1e3,
                    percentile(&mut rounds, 0.5),
                    percentile(&mut ms.clone(), 0.5),
                    percentile(&mut ms, 0.95),
                );
                    }
                }
                println!(
            "  {codes} (cap {cap}, rpp {rpp}): {} lists, centroids + sample {:.1} kB once (centroids {:.1}, sample {:.1}; first query = warm + this); rounds: index rounds with the centroids cached (chunk pages: +1)",
            index.lists.len(),
            once_bytes as f64 / 1e3,
            (once_bytes - once_sample) as f64 / 1e3,
            once_sample as f64 / 1e3
        );
            }
        }
    }
    println!(
        "total {:.0} s; load at the end: {}",
        t0.elapsed().as_secs_f64(),
        load().trim()
    );
}

/// Smallest, median and largest list of `ivf`.
fn size_stats(ivf: &jikji_builder::ivf::Ivf) -> (usize, usize, usize) {
    let mut s: Vec<usize> = ivf.lists.iter().map(Vec::len).collect();
    s.sort_unstable();
    (s[0], s[s.len() / 2], s[s.len() - 1])
}

/// The mean over the rows of `v` (dequantized, as the k-means sees them without centring)
/// of the dot product with their list's centroid in `ivf` (the k-means' quality: higher is
/// tighter lists).
fn mean_dot(v: &Vectors, ivf: &jikji_builder::ivf::Ivf) -> f64 {
    let mut sum = 0f64;
    let mut count = 0usize;
    for (l, c) in ivf.lists.iter().zip(&ivf.centroids) {
        for &d in l {
            sum += f64::from(dot(&v.get(d as usize), c));
            count += 1;
        }
    }
    sum / count.max(1) as f64
}

/// One query's pages and times through the engine driven as the browser's worker drives it.
#[derive(Default, Clone)]
struct Run {
    /// Fetch rounds (engine answers "need").
    rounds: usize,
    /// Pages read, and their stored bytes: all, index (`g`/`w`/`j`/`i`), chunk pages (`c`).
    pages: usize,
    bytes: usize,
    index_bytes: usize,
    chunk_bytes: usize,
    other_bytes: usize,
    /// Time in `search_with_vector` over every pass, in the final pass alone, and reading +
    /// adding pages (file read, inflate, SHA-256, `add_page`), ms.
    engine_ms: f64,
    last_pass_ms: f64,
    fetch_ms: f64,
    /// Each pass's time, ms.
    passes_ms: Vec<f64>,
    /// The hits' row numbers (chunk ids are the row number in hex).
    top: Vec<u32>,
}

/// Reads page `name` of bundle `dir` (stored bytes) and gives its header + raw body to
/// `engine`, as the worker does; returns the stored length.
fn add_stored_page(engine: &jikji_engine::Engine, dir: &std::path::Path, name: &str) -> usize {
    let stored =
        std::fs::read(dir.join("p").join(name)).unwrap_or_else(|e| panic!("p/{name}: {e}"));
    let raw = decode_stored(name, &stored).expect("decoding a page");
    let mut bytes = stored[..jikji_format::paged::page::HEADER_LEN].to_vec();
    bytes.extend_from_slice(&raw);
    engine.add_page(name, &bytes).expect("adding a page");
    stored.len()
}

/// One dense query through `engine` (an entry-opened engine: pages come only by
/// `add_page`), its missing pages read from `dir` round after round as the worker fetches
/// them (the cache trimmed before the query, as the wasm engine does for a new query).
fn run_query(engine: &jikji_engine::Engine, dir: &std::path::Path, q: &[f32], tag: &str) -> Run {
    engine.trim_cache();
    let mut r = Run::default();
    loop {
        let t = Instant::now();
        let res = engine.search_with_vector(tag, Some(q), jikji_engine::Mode::Dense, 10);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        r.engine_ms += ms;
        r.passes_ms.push(ms);
        match res {
            Ok(res) => {
                r.last_pass_ms = ms;
                r.top = res
                    .hits
                    .iter()
                    .map(|h| u32::from_str_radix(&h.chunk.id, 16).expect("a row id"))
                    .collect();
                return r;
            }
            Err(jikji_engine::EngineError::NeedPages(need)) => {
                r.rounds += 1;
                assert!(r.rounds <= 8, "more than 8 rounds");
                let t = Instant::now();
                for name in &need {
                    let b = add_stored_page(engine, dir, name);
                    r.pages += 1;
                    r.bytes += b;
                    match name.as_bytes()[0] {
                        b'g' | b'w' | b'j' | b'i' => r.index_bytes += b,
                        b'c' => r.chunk_bytes += b,
                        _ => r.other_bytes += b,
                    }
                }
                r.fetch_ms += t.elapsed().as_secs_f64() * 1e3;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// `--write DIR`: writes the `n` rows `v` as a paged bundle at `dir` with the builder's own
/// writer (`jikji_builder::ingest::write::write_bundle`, what `jikji build` runs: the dense
/// index with the builder's defaults for `n` chunks — k-means, capped lists, binary codes,
/// rescoring, 4-bit centroids, coded sample — `nprobe` measured on `probe`, every page
/// content-checked and named as the format names it) and searches it natively through the
/// engine as the browser's worker does (`search_with_vector`, "need" → read the pages →
/// `add_page` → again). The chunks are stand-ins: row `d` is chunk `d` (id `d` in 16 hex
/// digits), text `row d (copy c of base vector b)`, 1,000 rows a source file, language en,
/// tier 1; BM25 is built over those texts (dense queries never read it). Prints the
/// index's settings, the first query cold (nothing cached) and with the once pages
/// prefetched, then every query in order on one engine (its page cache kept, as in the
/// worker); writes `DIR.queries.json` (query vectors, exact top 10, nprobe, the native
/// runs) for `scripts/bench-ivf-browser`.
fn write_and_search(
    a: &Args,
    v: &Vectors,
    vbytes: &[u8],
    queries: &[Vec<f32>],
    probe: &[Vec<f32>],
    exact: &[Vec<u32>],
) {
    use jikji_builder::ingest::write::{write_bundle, BundleParts};
    let dir = std::path::PathBuf::from(&a.write);
    let n = v.len();
    let t = Instant::now();
    let per_file = 1000;
    let records: Vec<jikji_format::ChunkRecord> = (0..n)
        .map(|d| jikji_format::ChunkRecord {
            id: format!("{d:016x}"),
            source: format!("rows/{:05}.md", d / per_file),
            tier: Some(1),
            lang: "en".into(),
            start: d % per_file * 64,
            end: d % per_file * 64 + 48,
            text: format!(
                "row {d} (copy {} of base vector {})",
                d / 28_848,
                d % 28_848
            ),
            ..Default::default()
        })
        .collect();
    let sources: Vec<jikji_format::manifest::SourceEntry> = (0..n.div_ceil(per_file))
        .map(|f| jikji_format::manifest::SourceEntry {
            path: format!("rows/{f:05}.md"),
            sha256: hex(&Sha256::digest(format!("rows/{f:05}.md").as_bytes())),
            bytes: 64 * per_file as u64,
            chunks: per_file.min(n - f * per_file),
            ..Default::default()
        })
        .collect();
    let settings = jikji_builder::ingest::BundleSettings {
        hanja: false,
        centring: None,
        ..Default::default()
    };
    let indexed = jikji_builder::ingest::index::index(&records, &settings).expect("indexing");
    let chunks = jikji_format::chunks::write_chunks(&records).expect("chunk records");
    drop(records);
    let mut model =
        jikji_builder::ingest::model_info(std::path::Path::new(&a.model)).expect("model info");
    model.centring = None;
    println!(
        "stand-in chunks and BM25 index of {n} rows: {:.1} s; writing {} with the builder's writer (probe queries {})",
        t.elapsed().as_secs_f64(),
        dir.display(),
        probe.len()
    );
    let t = Instant::now();
    let (_, file_bytes, pages) = write_bundle(
        &dir,
        BundleParts {
            chunks: chunks.into(),
            n_chunks: n,
            chunking: jikji_format::manifest::ChunkingInfo {
                strategy: "fixed".into(),
                chunk_size: 512,
                overlap: 0,
                max_tokens: None,
                parent_size: None,
                parents: 0,
            },
            indexed,
            vectors: Some((model, vbytes.to_vec())),
            sources,
            calibration: None,
            probe_queries: probe,
            settings,
            query_model: None,
            threads: a.threads,
            previous: None,
            kept_index: None,
            kept_chosen_by: None,
            refit_note: None,
            row_map: Default::default(),
        },
    )
    .expect("writing the bundle");
    println!(
        "written in {:.1} s ({} pages; load {}): {}",
        t.elapsed().as_secs_f64(),
        pages.written,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim(),
        file_bytes
            .iter()
            .map(|(k, b)| format!("{k} {:.1} MB", *b as f64 / 1e6))
            .collect::<Vec<_>>()
            .join(", ")
    );
    for (k, s) in &pages.seconds {
        println!("  {k}: {s:.1} s");
    }
    let nprobe = a.nprobe.last().copied().unwrap_or(0);
    search_native(&dir, queries, exact, nprobe, None);
}

/// The native half of `--write` (and `--search DIR`, which reads the queries back from
/// `DIR.queries.json`): every query through the engine as the worker drives it; writes
/// `DIR.queries.json`. `rescore`: the oversampling (`None`: the bundle's; `--rescore X`
/// with `--search`).
fn search_native(
    dir: &std::path::Path,
    queries: &[Vec<f32>],
    exact: &[Vec<u32>],
    nprobe: usize,
    rescore: Option<usize>,
) {
    let entry = std::fs::read(dir.join("jikji.json")).expect("jikji.json");
    let open = || jikji_engine::Engine::open_entry(&entry).expect("opening the entry");
    let engine0 = open();
    let root = engine0.dense_index().expect("a dense index").clone();
    println!(
        "pages.ivf: nlist {}, nprobe {} ({}), codes {}, rescore {:?}, rows a page {:?}, centroids {:?}, sample {:?}; chosen by: {}",
        root.nlist,
        root.nprobe,
        root.nprobe_from.clone().unwrap_or_default(),
        root.codes,
        root.rescore,
        root.rows.as_ref().map(|r| r.per_page),
        root.centroid_codes,
        root.sample_codes,
        root.chosen_by.clone().unwrap_or_default()
    );
    let used = if nprobe == 0 { root.nprobe } else { nprobe };
    println!(
        "searching with nprobe {used} ({})",
        if nprobe == 0 {
            "the bundle's"
        } else {
            "--nprobe; the worker passes it with set_nprobe"
        }
    );
    let setup = |e: &mut jikji_engine::Engine| {
        if nprobe > 0 {
            e.set_nprobe(Some(nprobe));
        }
        if rescore.is_some() {
            e.set_rescore(rescore);
        }
    };
    // First query, cold.
    let mut e = open();
    setup(&mut e);
    let cold = run_query(&e, dir, &queries[0], "q0");
    // First query with the once pages prefetched.
    let mut e = open();
    setup(&mut e);
    let t = Instant::now();
    let once: usize = e
        .dense_once_pages()
        .iter()
        .map(|p| add_stored_page(&e, dir, p))
        .sum();
    let once_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut runs = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        runs.push(run_query(&e, dir, q, &format!("q{i}")));
    }
    let show = |what: &str, r: &Run| {
        println!(
            "{what}: rounds {}, pages {}, {:.1} kB (index {:.1}, chunk pages {:.1}, other {:.1}), engine {:.2} ms (last pass {:.2}), read+add {:.2} ms",
            r.rounds,
            r.pages,
            r.bytes as f64 / 1e3,
            r.index_bytes as f64 / 1e3,
            r.chunk_bytes as f64 / 1e3,
            r.other_bytes as f64 / 1e3,
            r.engine_ms,
            r.last_pass_ms,
            r.fetch_ms
        );
    };
    println!(
        "native (this process, entry-opened engine, pages read from {}):",
        dir.display()
    );
    show("  first query, cold", &cold);
    println!(
        "  once pages prefetched: {} pages, {:.1} kB, read+add {:.1} ms",
        e.dense_once_pages().len(),
        once as f64 / 1e3,
        once_ms
    );
    show("  first query after the prefetch", &runs[0]);
    let warm = &runs[1..];
    let col = |f: &dyn Fn(&Run) -> f64| -> (f64, f64) {
        let mut x: Vec<f64> = warm.iter().map(f).collect();
        (percentile(&mut x.clone(), 0.5), percentile(&mut x, 0.9))
    };
    let recall: f64 = runs
        .iter()
        .zip(exact)
        .map(|(r, ex)| ex.iter().filter(|d| r.top.contains(d)).count() as f64 / ex.len() as f64)
        .sum::<f64>()
        / runs.len() as f64;
    for (name, f) in [
        (
            "engine ms (all passes)",
            &(|r: &Run| r.engine_ms) as &dyn Fn(&Run) -> f64,
        ),
        ("engine ms (last pass)", &|r: &Run| r.last_pass_ms),
        ("read+add ms", &|r: &Run| r.fetch_ms),
        ("rounds", &|r: &Run| r.rounds as f64),
        ("requests", &|r: &Run| r.pages as f64),
        ("new kB", &|r: &Run| r.bytes as f64 / 1e3),
        ("index kB", &|r: &Run| r.index_bytes as f64 / 1e3),
        ("chunk kB", &|r: &Run| r.chunk_bytes as f64 / 1e3),
    ] {
        let (p50, p90) = col(f);
        println!(
            "  warm ({} queries) {name}: p50 {p50:.2}, p90 {p90:.2}",
            warm.len()
        );
    }
    println!(
        "  recall@10 vs the exact int8 scan: {recall:.4} ({} queries)",
        runs.len()
    );
    let json = serde_json::json!({
        "nlist": root.nlist,
        "nprobe": used,
        "bundle_nprobe": root.nprobe,
        "rescore": rescore,
        "queries": queries,
        "exact": exact,
        "native": {
            "cold": run_json(&cold),
            "once_bytes": once,
            "runs": runs.iter().map(run_json).collect::<Vec<_>>(),
        },
    });
    let out = format!("{}.queries.json", dir.display());
    std::fs::write(&out, serde_json::to_vec(&json).unwrap()).expect("writing the queries");
    println!("wrote {out}");
}

fn run_json(r: &Run) -> serde_json::Value {
    serde_json::json!({
        "rounds": r.rounds, "pages": r.pages, "bytes": r.bytes, "index_bytes": r.index_bytes,
        "chunk_bytes": r.chunk_bytes, "other_bytes": r.other_bytes, "engine_ms": r.engine_ms,
        "last_pass_ms": r.last_pass_ms, "fetch_ms": r.fetch_ms, "passes_ms": r.passes_ms, "top": r.top,
    })
}

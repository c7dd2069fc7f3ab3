//! HNSW where it could win (issue 14), measured against the flat and IVF alternatives in
//! one run, on the vectors of `bench_ivf_1m` (the real e5 passage vectors of the
//! embedding cache rotated to `--n` rows; the held-out eval queries as queries):
//!
//! 1. **Native nearest neighbours** over the bundle's rows, as `jikji dedup --new`
//!    (`classify_new`: the best cosine of each new chunk over every row) and `jikji search`
//!    would find them: the exact scan, the builder's IVF lists (k-means K = `--nlist`,
//!    capped at 125 as the builder does from 100k chunks; centroids f32, probed lists'
//!    int8 rows scored exactly), our HNSW (`support/hnsw.rs`) and the `instant-distance`
//!    crate (0.6; M = 32 fixed by the crate). Every query path scores a row with the same
//!    kernel as the product (`Vectors::dot`: f32 query × int8 row); graph construction
//!    uses the int8 × int8 cosine of `dedup::FlatVectors`. Two query sets: the real eval
//!    queries (recall@10 against the exact scan) and "new chunks" (fresh rotations, ≤ 25°,
//!    of random base vectors: what a re-added or edited passage looks like; agreement of
//!    the best match and of `classify_new`'s class at the default 0.965 / 0.93 with the
//!    exact scan's).
//! 2. **Similar pairs** (`--pairs 1`), as `jikji conflicts` finds them (every pair ≥ 0.95):
//!    the exact O(n²) join, the product's LSH (`dedup::lsh_candidates`, defaults), an
//!    HNSW self-join (each row's `--pair-k` nearest by our graph) and an IVF self-join
//!    (each row against the rows of its `nprobe` nearest lists).
//! 3. **Routing over the centroids** (`--centroid-caps`, e.g. 125 = the s26 1M index,
//!    11,759 lists; 20 ≈ the list count of a 5M-chunk bundle): the IVF pages as the
//!    builder writes them from 100k chunks (binary lists, ×16 rescoring, 1 row an `i`
//!    page, 4-bit centred centroids), a query's engine time split into centroid page
//!    decoding, the centroid scan, list page decoding, the list scan and rescoring (the
//!    engine's own steps, run one by one with the format's types; checked to give
//!    `search_pages`' top 10 for every query), and routing by HNSW over the dequantized
//!    centroids against the flat scan: coverage of the exact top 10 by the probed lists,
//!    recall@10 at the same `nprobe`, time, similarities computed, and the graph's bytes
//!    (what a browser would fetch once). `--wasm-dump DIR` writes the centroid pages and
//!    the queries for `tools/bench-centroids-wasm` (the same scans in wasm, in node).
//!
//! ```text
//! cargo run --release -p jikji-builder --example bench_hnsw -- \
//!     --cache /work/evalcache/vectors-92ddd8e92dce2dc0.bin --model models/e5-small \
//!     --queries ../shared/eval/xquad-en/queries.jsonl,... --n 100000 --nlist 1265 \
//!     [--nprobe 16,32] [--m 16] [--efc 100] [--ef 16,32,64,128] [--crate 1] [--pairs 1] \
//!     [--centroid-caps 125,20] [--centroid-m 8,16] [--ivf-cache DIR] [--wasm-dump DIR]
//! ```
//!
//! One `--n` a process (the crate's points read a process-wide row store).

#[path = "support/hnsw.rs"]
mod hnsw;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use jikji_builder::dedup::FlatVectors;
use jikji_engine::ivf::{search_pages, IndexPages, Place};
use jikji_engine::search::top_k;
use jikji_format::paged::ivf::{
    self, BinaryList, CentroidCodes, IvfParts, IvfRoot, ListCodes, PageOptions, SignTables,
    StoredCentroids,
};
use jikji_format::paged::page::decode_stored;
use jikji_format::vectors::{write_vectors, Vectors};

#[path = "support/rows.rs"]
mod rows;
use rows::{dot, from_cache, rotate, splitmix};

const DIM: usize = 384;
const DUPLICATE: f32 = 0.965;

/// A ranking: `(row, score)`, best first.
type Top = Vec<(u32, f32)>;
const PARTIAL: f32 = 0.93;

struct Args {
    cache: String,
    model: String,
    queries: Vec<String>,
    n: usize,
    nlist: usize,
    nprobe: Vec<usize>,
    m: Vec<usize>,
    efc: usize,
    ef: Vec<usize>,
    krate: bool,
    crate_ef: usize,
    pairs: bool,
    pair_k: usize,
    centroid_caps: Vec<usize>,
    centroid_m: Vec<usize>,
    centroid_ef: Vec<usize>,
    max_queries: usize,
    new_chunks: usize,
    threads: usize,
    ivf_cache: String,
    wasm_dump: String,
    native: bool,
}

fn args() -> Args {
    let mut a = Args {
        cache: String::new(),
        model: "models/e5-small".into(),
        queries: Vec::new(),
        n: 100_000,
        nlist: 0,
        nprobe: vec![16, 32],
        m: vec![16],
        efc: 100,
        ef: vec![16, 32, 64, 128],
        krate: true,
        crate_ef: 64,
        pairs: false,
        pair_k: 32,
        centroid_caps: Vec::new(),
        centroid_m: vec![8, 16],
        centroid_ef: vec![16, 32, 64],
        max_queries: 300,
        new_chunks: 300,
        threads: 2,
        ivf_cache: String::new(),
        wasm_dump: String::new(),
        native: true,
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
            "--m" => a.m = list(&v),
            "--efc" => a.efc = v.parse().expect("--efc"),
            "--ef" => a.ef = list(&v),
            "--crate" => a.krate = v != "0",
            "--crate-ef" => a.crate_ef = v.parse().expect("--crate-ef"),
            "--pairs" => a.pairs = v != "0",
            "--pair-k" => a.pair_k = v.parse().expect("--pair-k"),
            "--centroid-caps" => a.centroid_caps = list(&v),
            "--centroid-m" => a.centroid_m = list(&v),
            "--centroid-ef" => a.centroid_ef = list(&v),
            "--max-queries" => a.max_queries = v.parse().expect("--max-queries"),
            "--new" => a.new_chunks = v.parse().expect("--new"),
            "--threads" => a.threads = v.parse().expect("--threads"),
            "--ivf-cache" => a.ivf_cache = v,
            "--wasm-dump" => a.wasm_dump = v,
            "--native" => a.native = v != "0",
            _ => panic!("unknown argument {k}"),
        }
    }
    assert!(!a.cache.is_empty(), "--cache FILE is required");
    if a.nlist == 0 {
        a.nlist = (4.0 * (a.n as f64).sqrt()).round() as usize;
    }
    a
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The rows as one flat int8 store, for the crate's points (process-wide).
struct Store {
    v: Vectors,
    flat: FlatVectors,
}

static STORE: OnceLock<Store> = OnceLock::new();

/// `instant-distance`'s point: a row of the store, or a query (f32).
#[derive(Clone)]
enum Pt {
    Row(u32),
    Query(Arc<Vec<f32>>),
}

impl instant_distance::Point for Pt {
    fn distance(&self, other: &Self) -> f32 {
        let s = STORE.get().expect("store");
        1.0 - match (self, other) {
            (Pt::Row(a), Pt::Row(b)) => s.flat.cosine(*a as usize, *b as usize),
            (Pt::Row(a), Pt::Query(q)) | (Pt::Query(q), Pt::Row(a)) => s.v.dot(*a as usize, q),
            (Pt::Query(a), Pt::Query(b)) => dot(a, b),
        }
    }
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut v = v.to_vec();
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

/// `classify_new`'s class from the best cosine (no text hashes, no value differences).
fn class(c: f32) -> u8 {
    if c >= DUPLICATE {
        2
    } else if c >= PARTIAL {
        1
    } else {
        0
    }
}

/// Quality of one method's answers against the exact ones.
struct Score {
    recall: f64,
    top1: f64,
    class: f64,
    q_ms: Vec<f64>,
    n_ms: Vec<f64>,
    evals: f64,
}

fn score(
    exact_q: &[Vec<(u32, f32)>],
    exact_n: &[Vec<(u32, f32)>],
    got_q: &[Vec<(u32, f32)>],
    got_n: &[Vec<(u32, f32)>],
) -> (f64, f64, f64) {
    let mut recall = 0f64;
    for (e, g) in exact_q.iter().zip(got_q) {
        let top: HashSet<u32> = g.iter().take(10).map(|x| x.0).collect();
        recall += e.iter().filter(|x| top.contains(&x.0)).count() as f64 / e.len() as f64;
    }
    let (mut top1, mut cls) = (0f64, 0f64);
    for (e, g) in exact_n.iter().zip(got_n) {
        let best = g.first().map_or(f32::NEG_INFINITY, |x| x.1);
        // The same best cosine (a tie with another row counts).
        top1 += f64::from(u8::from((best - e[0].1).abs() < 1e-6));
        cls += f64::from(u8::from(class(best) == class(e[0].1)));
    }
    (
        recall / exact_q.len().max(1) as f64,
        top1 / exact_n.len().max(1) as f64,
        cls / exact_n.len().max(1) as f64,
    )
}

fn print_row(method: &str, params: &str, build_s: f64, s: &Score) {
    println!(
        "{:<16}{:<22}{:>9.1}{:>10.3}{:>10.3}{:>10.4}{:>10.3}{:>8.4}{:>8.4}{:>10.0}",
        method,
        params,
        build_s,
        percentile(&s.q_ms, 0.5),
        percentile(&s.q_ms, 0.95),
        s.recall,
        percentile(&s.n_ms, 0.5),
        s.top1,
        s.class,
        s.evals
    );
}

/// The builder's k-means at `n` rows (`--nlist` lists), cached in `--ivf-cache` when
/// given (`kmeans-<n>-<nlist>.bin`: the same rows give the same lists), and its seconds.
fn kmeans_for(v: &Vectors, a: &Args) -> (jikji_builder::ivf::Ivf, f64) {
    let path = (!a.ivf_cache.is_empty())
        .then(|| format!("{}/kmeans-{}-{}.bin", a.ivf_cache, a.n, a.nlist));
    if let Some(p) = &path {
        if let Ok(b) = std::fs::read(p) {
            let mut at = 0usize;
            let u32_at = |at: &mut usize| {
                let x = u32::from_le_bytes(b[*at..*at + 4].try_into().unwrap());
                *at += 4;
                x
            };
            let secs = f64::from(f32::from_bits(u32_at(&mut at)));
            let k = u32_at(&mut at) as usize;
            let mut centroids = Vec::with_capacity(k);
            let mut lists = Vec::with_capacity(k);
            for _ in 0..k {
                centroids.push((0..DIM).map(|_| f32::from_bits(u32_at(&mut at))).collect());
                let len = u32_at(&mut at) as usize;
                lists.push((0..len).map(|_| u32_at(&mut at)).collect());
            }
            println!("k-means read from {p} (built in {secs:.1} s)");
            return (jikji_builder::ivf::Ivf { centroids, lists }, secs);
        }
    }
    let t = Instant::now();
    let params = jikji_builder::ivf::KmeansParams::for_chunks(v.len());
    let km = jikji_builder::ivf::build_with(v, None, a.nlist, 0x6a696b6a69, a.threads, params)
        .expect("k-means");
    let secs = t.elapsed().as_secs_f64();
    println!(
        "k-means K {} in {secs:.1} s ({} threads); load {}",
        a.nlist,
        a.threads,
        load()
    );
    if let Some(p) = &path {
        let mut b = Vec::new();
        b.extend((secs as f32).to_bits().to_le_bytes());
        b.extend((km.lists.len() as u32).to_le_bytes());
        for (c, l) in km.centroids.iter().zip(&km.lists) {
            c.iter().for_each(|x| b.extend(x.to_bits().to_le_bytes()));
            b.extend((l.len() as u32).to_le_bytes());
            l.iter().for_each(|x| b.extend(x.to_le_bytes()));
        }
        std::fs::write(p, b).expect("writing the k-means cache");
    }
    (km, secs)
}

/// The k-means' lists capped at `cap` rows (`cap_lists`, as the builder does from 100k
/// chunks with 125), and the seconds of k-means + capping.
fn capped(
    v: &Vectors,
    km: &(jikji_builder::ivf::Ivf, f64),
    cap: usize,
) -> (jikji_builder::ivf::Ivf, f64) {
    let t = Instant::now();
    let ivf = jikji_builder::ivf::cap_lists(v, None, &km.0, cap).expect("capping");
    let secs = km.1 + t.elapsed().as_secs_f64();
    println!(
        "IVF: {} k-means lists capped at {cap} → {} lists ({secs:.1} s with the k-means); load {}",
        km.0.lists.len(),
        ivf.lists.len(),
        load()
    );
    (ivf, secs)
}

/// The IVF's `k` best rows for `q` with `nprobe` lists (centroids f32, rows exact).
fn ivf_query(
    v: &Vectors,
    ivf: &jikji_builder::ivf::Ivf,
    q: &[f32],
    k: usize,
    nprobe: usize,
) -> (Vec<(u32, f32)>, usize) {
    let mut order: Vec<(u32, f32)> = ivf
        .centroids
        .iter()
        .enumerate()
        .map(|(j, c)| (j as u32, dot(c, q)))
        .collect();
    let np = nprobe.min(order.len());
    order.select_nth_unstable_by(np - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut scored = Vec::new();
    for &(j, _) in &order[..np] {
        for &d in &ivf.lists[j as usize] {
            scored.push((d, v.dot(d as usize, q)));
        }
    }
    let evals = ivf.centroids.len() + scored.len();
    (top_k(scored, k), evals)
}

fn exact_query(v: &Vectors, q: &[f32], k: usize) -> Vec<(u32, f32)> {
    top_k(
        (0..v.len() as u32)
            .map(|d| (d, v.dot(d as usize, q)))
            .collect(),
        k,
    )
}

/// Runs `f` over `qs` on `threads` threads; returns the answers and each one's ms.
fn run_all<T: Send>(
    qs: &[Vec<f32>],
    threads: usize,
    f: impl Fn(&[f32]) -> T + Sync,
) -> (Vec<T>, Vec<f64>) {
    let per = qs.len().div_ceil(threads.max(1)).max(1);
    let out: Vec<(T, f64)> = std::thread::scope(|sc| {
        let hs: Vec<_> = qs
            .chunks(per)
            .map(|part| {
                let f = &f;
                sc.spawn(move || {
                    part.iter()
                        .map(|q| {
                            let t = Instant::now();
                            let r = f(q);
                            (r, t.elapsed().as_secs_f64() * 1e3)
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    out.into_iter().unzip()
}

fn main() {
    let a = args();
    let t0 = Instant::now();
    println!("load at start: {}", load());
    let (base, queries, _) = from_cache(&a.model, &a.cache, &a.queries);
    let b = base.len();
    let take = queries.len().min(a.max_queries);
    let queries: Vec<Vec<f32>> = (0..take)
        .map(|i| queries[i * queries.len() / take].clone())
        .collect();
    let mut mu = vec![0f32; DIM];
    for x in &base {
        mu.iter_mut().zip(x).for_each(|(m, v)| *m += v / b as f32);
    }
    // Rows: bench_ivf_1m's extension (same seed, same rows).
    let mut s = 0x31_4d_u64;
    let max = 25f32.to_radians();
    let mut rows: Vec<Vec<f32>> = Vec::with_capacity(a.n);
    for i in 0..a.n {
        let x = &base[i % b];
        if i < b {
            rows.push(x.clone());
            continue;
        }
        let w = &base[(splitmix(&mut s) % b as u64) as usize];
        rows.push(rotate(x, w, &mu, max, &mut s));
    }
    // New chunks: fresh rotations (another seed) of random base vectors.
    let mut s2 = 0x6e_65_77_u64;
    let news: Vec<Vec<f32>> = (0..a.new_chunks)
        .map(|_| {
            let x = &base[(splitmix(&mut s2) % b as u64) as usize];
            let w = &base[(splitmix(&mut s2) % b as u64) as usize];
            rotate(x, w, &mu, max, &mut s2)
        })
        .collect();
    let vbytes = write_vectors(DIM, &rows).expect("quantizing");
    drop(rows);
    let v = Vectors::open(&vbytes).expect("vectors");
    let flat = FlatVectors::from_vectors(&v);
    assert!(STORE
        .set(Store {
            v: Vectors::open(&vbytes).unwrap(),
            flat
        })
        .is_ok());
    let store = STORE.get().unwrap();
    let n = v.len();
    println!(
        "rows: {n} ({b} real e5 passages rotated ≤ 25°), {} eval queries, {} new chunks; {:.1} s; load {}",
        queries.len(),
        news.len(),
        t0.elapsed().as_secs_f64(),
        load()
    );

    // The IVF the builder makes from 100k chunks (cap 125).
    let km = kmeans_for(&v, &a);
    let (ivf, ivf_s) = capped(&v, &km, 125);

    // The exact top 10 of every query: the reference of every section.
    let (eq, eq_ms) = run_all(&queries, a.threads, |q| exact_query(&v, q, 10));
    for &cap in &a.centroid_caps {
        let index = if cap == 125 {
            ivf.clone()
        } else {
            capped(&v, &km, cap).0
        };
        centroids(&a, &v, &index, cap, &queries, &eq);
    }
    if a.native {
        native(&a, &v, store, &ivf, ivf_s, &queries, &news, (&eq, eq_ms));
    }
    if a.pairs {
        pairs(&a, store, &ivf);
    }
    println!(
        "total {:.0} s; load at the end: {}",
        t0.elapsed().as_secs_f64(),
        load()
    );
}

#[allow(clippy::too_many_arguments)]
fn native(
    a: &Args,
    v: &Vectors,
    store: &Store,
    ivf: &jikji_builder::ivf::Ivf,
    ivf_s: f64,
    queries: &[Vec<f32>],
    news: &[Vec<f32>],
    exact: (&[Top], Vec<f64>),
) {
    let n = v.len();
    println!(
        "\n== native nearest neighbours, {n} rows: per query one thread (the run's {} threads share the queries); \
         recall@10 over {} eval queries against the exact scan; new chunks ({}): best match and class (≥ {DUPLICATE} duplicate, ≥ {PARTIAL} partial) as the exact scan's; load {}",
        a.threads,
        queries.len(),
        news.len(),
        load()
    );
    println!(
        "{:<16}{:<22}{:>9}{:>10}{:>10}{:>10}{:>10}{:>8}{:>8}{:>10}",
        "method",
        "params",
        "build s",
        "q p50 ms",
        "q p95 ms",
        "recall@10",
        "new p50",
        "top1",
        "class",
        "evals/q"
    );
    let (eq, q_ms) = exact;
    let (en, n_ms) = run_all(news, a.threads, |q| exact_query(v, q, 1));
    let mut dist = [0usize; 3];
    for e in &en {
        dist[class(e[0].1) as usize] += 1;
    }
    print_row(
        "exact",
        "every row",
        0.0,
        &Score {
            recall: 1.0,
            top1: 1.0,
            class: 1.0,
            q_ms,
            n_ms,
            evals: n as f64,
        },
    );
    for &np in &a.nprobe {
        let (gq, q_ms) = run_all(queries, a.threads, |q| ivf_query(v, ivf, q, 10, np));
        let (gn, n_ms) = run_all(news, a.threads, |q| ivf_query(v, ivf, q, 1, np));
        let evals = mean(&gq.iter().map(|x| x.1 as f64).collect::<Vec<_>>());
        let gq: Vec<_> = gq.into_iter().map(|x| x.0).collect();
        let gn: Vec<_> = gn.into_iter().map(|x| x.0).collect();
        let (recall, top1, cls) = score(eq, &en, &gq, &gn);
        print_row(
            "ivf (bundle's)",
            &format!("{} lists, nprobe {np}", ivf.lists.len()),
            ivf_s,
            &Score {
                recall,
                top1,
                class: cls,
                q_ms,
                n_ms,
                evals,
            },
        );
    }
    for &m in &a.m {
        let t = Instant::now();
        let mut g = hnsw::Hnsw::build(n, m, a.efc, 0x6873, |x, y| {
            store.flat.cosine(x as usize, y as usize)
        });
        let build_s = t.elapsed().as_secs_f64();
        let (raw, varint, deflated) = g.bytes();
        println!(
            "  our HNSW M {m} efc {}: built in {build_s:.1} s on one thread; graph {:.1} MB raw, {:.1} MB varint, {:.1} MB deflated; load {}",
            a.efc,
            raw as f64 / 1e6,
            varint as f64 / 1e6,
            deflated as f64 / 1e6,
            load()
        );
        for &ef in &a.ef {
            // One thread: the graph's visited stamps are its own.
            let mut q_ms = Vec::new();
            let mut evals = 0usize;
            let mut gq = Vec::new();
            for q in queries {
                let t = Instant::now();
                let (r, w) = g.search(10, ef, |x| v.dot(x as usize, q));
                q_ms.push(t.elapsed().as_secs_f64() * 1e3);
                evals += w.evals;
                gq.push(r);
            }
            let mut n_ms = Vec::new();
            let mut gn = Vec::new();
            for q in news {
                let t = Instant::now();
                let (r, _) = g.search(1, ef, |x| v.dot(x as usize, q));
                n_ms.push(t.elapsed().as_secs_f64() * 1e3);
                gn.push(r);
            }
            let (recall, top1, cls) = score(eq, &en, &gq, &gn);
            print_row(
                "hnsw (ours)",
                &format!("M {m} efc {} ef {ef}", a.efc),
                build_s,
                &Score {
                    recall,
                    top1,
                    class: cls,
                    q_ms,
                    n_ms,
                    evals: evals as f64 / queries.len() as f64,
                },
            );
        }
    }
    if a.krate {
        // The crate fixes ef_search when it builds (no setter): one build, at `--crate-ef`.
        let ef = a.crate_ef;
        let t = Instant::now();
        let points: Vec<Pt> = (0..n as u32).map(Pt::Row).collect();
        let ids: Vec<u32> = (0..n as u32).collect();
        let map = instant_distance::Builder::default()
            .ef_construction(a.efc)
            .ef_search(ef)
            .seed(0x6873)
            .build(points, ids);
        let build_s = t.elapsed().as_secs_f64();
        println!(
            "  instant-distance 0.6 (M 32, efc {}, ef {ef}): built in {build_s:.1} s on rayon's threads ({}); load {}",
            a.efc,
            rayon_threads(),
            load()
        );
        let ask = |q: &[f32], k: usize| {
            let mut search = instant_distance::Search::default();
            let p = Pt::Query(Arc::new(q.to_vec()));
            map.search(&p, &mut search)
                .take(k)
                .map(|x| (*x.value, 1.0 - x.distance))
                .collect::<Vec<_>>()
        };
        let (gq, q_ms) = run_all(queries, a.threads, |q| ask(q, 10));
        let (gn, n_ms) = run_all(news, a.threads, |q| ask(q, 1));
        let (recall, top1, cls) = score(eq, &en, &gq, &gn);
        print_row(
            "instant-distance",
            &format!("M 32 efc {} ef {ef}", a.efc),
            build_s,
            &Score {
                recall,
                top1,
                class: cls,
                q_ms,
                n_ms,
                evals: f64::NAN,
            },
        );
    }
    println!(
        "  new chunks by the exact scan's class: {} new, {} partial, {} duplicate",
        dist[0], dist[1], dist[2]
    );
}

fn rayon_threads() -> String {
    std::env::var("RAYON_NUM_THREADS").unwrap_or_else(|_| "all cores".into())
}

/// Similar pairs (cosine ≥ 0.95, `jikji conflicts`' same-language threshold) four ways.
fn pairs(a: &Args, store: &Store, ivf: &jikji_builder::ivf::Ivf) {
    const T: f32 = 0.95;
    let f = &store.flat;
    let n = f.len();
    println!(
        "\n== similar pairs ≥ {T} over {n} rows (jikji conflicts' candidates); load {}",
        load()
    );
    let key = |i: u32, j: u32| (u64::from(i.min(j)) << 32) | u64::from(i.max(j));
    let t = Instant::now();
    let exact: HashSet<u64> = if n <= 200_000 {
        let threads = a.threads.max(1);
        std::thread::scope(|sc| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    sc.spawn(move || {
                        let mut out = Vec::new();
                        let mut i = t;
                        while i < n {
                            for j in i + 1..n {
                                if f.cosine(i, j) >= T {
                                    out.push(key(i as u32, j as u32));
                                }
                            }
                            i += threads;
                        }
                        out
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
        })
    } else {
        HashSet::new()
    };
    let exact_s = t.elapsed().as_secs_f64();
    let have_exact = n <= 200_000;
    if have_exact {
        println!(
            "exact O(n²) (int8 cosine, {} threads): {} pairs in {exact_s:.1} s",
            a.threads,
            exact.len()
        );
    } else {
        println!("exact: not run above 200,000 rows (n²/2 cosines)");
    }
    let report = |name: &str, found: &HashSet<u64>, secs: f64, extra: String| {
        let recall = if have_exact {
            format!(
                "{:.4}",
                found.intersection(&exact).count() as f64 / exact.len().max(1) as f64
            )
        } else {
            "-".into()
        };
        println!(
            "{name:<34} {:>10} pairs  recall {recall:>7}  {secs:>8.1} s  {extra}",
            found.len()
        );
    };
    // LSH (the product's).
    let t = Instant::now();
    let cands = jikji_builder::dedup::lsh_candidates(f, jikji_builder::dedup::LshParams::default());
    let nc = cands.len();
    let lsh: HashSet<u64> = cands
        .into_iter()
        .filter(|&(i, j)| f.cosine(i as usize, j as usize) >= T)
        .map(|(i, j)| key(i, j))
        .collect();
    report(
        "lsh (32 bands × 12 bits, product)",
        &lsh,
        t.elapsed().as_secs_f64(),
        format!("{nc} candidates; load {}", load()),
    );
    // HNSW self-join.
    for &m in &a.m {
        let t = Instant::now();
        let mut g = hnsw::Hnsw::build(n, m, a.efc, 0x6873, |x, y| f.cosine(x as usize, y as usize));
        let build = t.elapsed().as_secs_f64();
        let mut found = HashSet::new();
        for i in 0..n as u32 {
            let (r, _) = g.search(a.pair_k, a.pair_k.max(64), |x| {
                f.cosine(i as usize, x as usize)
            });
            for (j, c) in r {
                if j != i && c >= T {
                    found.insert(key(i, j));
                }
            }
        }
        report(
            &format!("hnsw (ours) M {m} k {}", a.pair_k),
            &found,
            t.elapsed().as_secs_f64(),
            format!("build {build:.1} s of it, one thread; load {}", load()),
        );
    }
    // IVF self-join: each row against the rows of its nprobe nearest lists.
    let np = a.nprobe[0];
    let t = Instant::now();
    let threads = a.threads.max(1);
    let found: HashSet<u64> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..threads)
            .map(|t| {
                sc.spawn(move || {
                    let mut out = Vec::new();
                    let mut x = vec![0f32; DIM];
                    let mut i = t;
                    while i < n {
                        let (s, r) = store.v.row(i);
                        x.iter_mut()
                            .zip(r)
                            .for_each(|(a, &b)| *a = f32::from(b) * s);
                        let mut order: Vec<(u32, f32)> = ivf
                            .centroids
                            .iter()
                            .enumerate()
                            .map(|(j, c)| (j as u32, dot(c, &x)))
                            .collect();
                        let k = np.min(order.len());
                        order.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1));
                        for &(j, _) in &order[..k] {
                            for &d in &ivf.lists[j as usize] {
                                if d as usize != i && f.cosine(i, d as usize) >= T {
                                    out.push(key(i as u32, d));
                                }
                            }
                        }
                        i += threads;
                    }
                    out
                })
            })
            .collect();
        hs.into_iter().flat_map(|h| h.join().unwrap()).collect()
    });
    report(
        &format!("ivf self-join nprobe {np}"),
        &found,
        t.elapsed().as_secs_f64(),
        format!(
            "{} lists, {} threads; load {}",
            ivf.lists.len(),
            a.threads,
            load()
        ),
    );
}

/// A page map with every page at hand.
struct Mem(HashMap<String, (usize, Arc<Vec<u8>>)>);

impl IndexPages for Mem {
    fn page(&self, name: &str) -> Option<Arc<Vec<u8>>> {
        self.0.get(name).map(|p| p.1.clone())
    }
}

/// Per-query times of the engine's steps (ms).
#[derive(Default)]
struct Steps {
    centroid_decode: Vec<f64>,
    centroid_scan: Vec<f64>,
    list_decode: Vec<f64>,
    list_scan: Vec<f64>,
    rescore: Vec<f64>,
}

/// The engine's binary scan (`ivf::scan_binary` without filters) of the lists `probed`
/// (`(list, q·ĉ)`, best first): the top `k` by exact score of the `rescore·min(k, 10)`
/// best estimates, then the rest by estimate capped under them. Times the steps.
fn scan_lists(
    pages: &Mem,
    root: &IvfRoot,
    n: usize,
    q: &[f32],
    probed: &[(u32, f32)],
    rescore: usize,
    steps: &mut Steps,
) -> Vec<(u32, f32)> {
    let k = 10;
    let t = Instant::now();
    let lists: Vec<BinaryList> = probed
        .iter()
        .map(|(j, _)| {
            let name = root.list_page(*j as usize);
            BinaryList::open(&name, &pages.0[&name].1, n, DIM).expect("list")
        })
        .collect();
    steps.list_decode.push(t.elapsed().as_secs_f64() * 1e3);
    let t = Instant::now();
    let tables = SignTables::new(q);
    let mut est: Vec<(u32, f32, usize)> = Vec::new();
    for ((_, qc), list) in probed.iter().zip(&lists) {
        for (i, &doc) in list.docs.iter().enumerate() {
            est.push((doc, list.estimate(i, *qc, &tables), list.first + i));
        }
    }
    est.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    steps.list_scan.push(t.elapsed().as_secs_f64() * 1e3);
    let t = Instant::now();
    let take = (rescore * k.min(10)).min(est.len());
    let per = root.rows.as_ref().map_or(1, |r| r.per_page.max(1));
    let mut opened: HashMap<String, Vectors> = HashMap::new();
    let mut exact = Vec::with_capacity(take);
    for c in &est[..take] {
        let (name, at) = root.row_page(c.2).expect("row pages");
        if !opened.contains_key(&name) {
            let rows = root.rows_on_page(c.2 / per, n);
            let body = &pages.0[&name].1;
            opened.insert(
                name.clone(),
                ivf::open_rows(&name, body, rows, DIM).expect("rows"),
            );
        }
        exact.push((c.0, opened[&name].dot(at, q)));
    }
    let mut ranked = top_k(exact.clone(), k);
    let cap = exact.iter().map(|e| e.1).fold(f32::INFINITY, f32::min);
    if ranked.len() < k {
        ranked.extend(
            est[take..]
                .iter()
                .take(k - ranked.len())
                .map(|e| (e.0, e.1.min(cap))),
        );
    }
    steps.rescore.push(t.elapsed().as_secs_f64() * 1e3);
    ranked
}

/// Routing over the centroids: the flat scan against HNSW (see the module doc, 3).
fn centroids(
    a: &Args,
    v: &Vectors,
    index: &jikji_builder::ivf::Ivf,
    cap: usize,
    queries: &[Vec<f32>],
    exact: &[Vec<(u32, f32)>],
) {
    let n = v.len();
    let nlist = index.lists.len();
    const RESCORE: usize = 16;
    let scoring = |i: usize| v.get(i);
    let mut all = HashMap::new();
    let t = Instant::now();
    let root: IvfRoot = ivf::write_pages_with(
        &IvfParts {
            centroids: &index.centroids,
            lists: &index.lists,
            nprobe: 16,
            codes: ListCodes::Binary {
                scoring: &scoring,
                rows_per_page: 1,
                rescore: RESCORE,
            },
        },
        &PageOptions {
            centroids: CentroidCodes::Int4Centred,
            coded_sample: true,
            sample_queries: &[],
            rows_per_list: true,
            row_groups: None,
        },
        v,
        &mut |p| {
            let body = decode_stored(&p.name, &p.bytes)?;
            all.insert(p.name.clone(), (p.bytes.len(), Arc::new(body)));
            Ok(())
        },
    )
    .expect("pages");
    let pages = Mem(all);
    let gnames: Vec<String> = (0..root.centroids.pages)
        .map(|i| root.centroid_page(i))
        .collect();
    let gstored: usize = gnames.iter().map(|g| pages.0[g].0).sum();
    let once = gstored + pages.0[&root.sample_page()].0;
    println!(
        "\n== routing over {nlist} centroids (cap {cap}; {n} rows; binary lists, ×{RESCORE} rescoring, 4-bit centred centroids: {:.1} kB of g pages as stored, {:.1} kB once with the sample; pages in {:.1} s); {} queries; load {}",
        gstored as f64 / 1e3,
        once as f64 / 1e3,
        t.elapsed().as_secs_f64(),
        queries.len(),
        load()
    );
    let bodies: Vec<&[u8]> = gnames.iter().map(|g| pages.0[g].1.as_slice()).collect();
    let c = StoredCentroids::open(&root, &bodies, DIM).expect("centroids");
    let cf: Vec<Vec<f32>> = (0..c.len()).map(|j| c.get(j)).collect();
    // The exact top 10 and each row's list.
    let mut list_of = vec![0u32; n];
    for (j, l) in index.lists.iter().enumerate() {
        for &d in l {
            list_of[d as usize] = j as u32;
        }
    }
    let at = Place {
        chunks: n,
        dim: DIM,
    };
    let maxp = *a.nprobe.iter().max().unwrap();
    let flat_route = |q: &[f32]| -> Vec<(u32, f32)> {
        let mut o: Vec<(u32, f32)> = c
            .dots(q)
            .into_iter()
            .enumerate()
            .map(|(j, d)| (j as u32, d))
            .collect();
        o.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        o
    };
    if !a.wasm_dump.is_empty() {
        let dir = format!("{}/cap-{cap}", a.wasm_dump);
        std::fs::create_dir_all(&dir).expect("--wasm-dump");
        std::fs::write(
            format!("{dir}/root.json"),
            serde_json::to_vec(&root).unwrap(),
        )
        .unwrap();
        for (i, b) in bodies.iter().enumerate() {
            std::fs::write(format!("{dir}/g-{i}.bin"), b).unwrap();
        }
        let mut qb = Vec::new();
        let mut top = Vec::new();
        for q in queries {
            q.iter().for_each(|x| qb.extend(x.to_le_bytes()));
            top.extend(flat_route(q)[..maxp].iter().map(|x| x.0));
        }
        std::fs::write(format!("{dir}/queries.f32"), qb).unwrap();
        std::fs::write(
            format!("{dir}/flat-top.json"),
            serde_json::to_vec(&top).unwrap(),
        )
        .unwrap();
        println!(
            "wasm dump: {dir} ({} g pages, {} queries, the flat top {maxp} lists of each)",
            bodies.len(),
            queries.len()
        );
    }
    let coverage = |probed: &[(u32, f32)], e: &[(u32, f32)]| {
        let set: HashSet<u32> = probed.iter().map(|x| x.0).collect();
        e.iter()
            .filter(|x| set.contains(&list_of[x.0 as usize]))
            .count() as f64
            / e.len() as f64
    };
    let recall = |got: &[(u32, f32)], e: &[(u32, f32)]| {
        let top: HashSet<u32> = got.iter().map(|x| x.0).collect();
        e.iter().filter(|x| top.contains(&x.0)).count() as f64 / e.len() as f64
    };
    println!(
        "{:<34}{:>7}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>10}{:>12}",
        "routing",
        "nprobe",
        "coverage",
        "recall@10",
        "route p50",
        "route p95",
        "list dec",
        "list scan",
        "rescore",
        "total p50",
        "sims/query"
    );
    for &np in &a.nprobe {
        // The flat scan through the engine's steps, one by one, checked against search_pages.
        let mut st = Steps::default();
        let (mut cov, mut rec, mut total, mut mism) = (0f64, 0f64, Vec::new(), 0usize);
        let mut f32_ms = Vec::new();
        for (q, e) in queries.iter().zip(exact) {
            let t = Instant::now();
            let c2 = StoredCentroids::open(&root, &bodies, DIM).expect("centroids");
            st.centroid_decode.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let mut o: Vec<(u32, f32)> = c2
                .dots(q)
                .into_iter()
                .enumerate()
                .map(|(j, d)| (j as u32, d))
                .collect();
            o.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            st.centroid_scan.push(t.elapsed().as_secs_f64() * 1e3);
            let probed = &o[..np.min(o.len())];
            let got = scan_lists(&pages, &root, n, q, probed, RESCORE, &mut st);
            let t = Instant::now();
            let engine = search_pages(&pages, at, &root, q, 10, np, Some(RESCORE)).expect("search");
            total.push(t.elapsed().as_secs_f64() * 1e3);
            mism += usize::from(
                engine.iter().map(|x| x.0).collect::<Vec<_>>()
                    != got.iter().map(|x| x.0).collect::<Vec<_>>(),
            );
            cov += coverage(probed, e);
            rec += recall(&got, e);
            // The same flat scan over f32 centroids (HNSW's kernel), for the ratio.
            let t = Instant::now();
            let mut o: Vec<(u32, f32)> = cf
                .iter()
                .enumerate()
                .map(|(j, x)| (j as u32, dot(x, q)))
                .collect();
            o.select_nth_unstable_by(np - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
            f32_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let m = queries.len() as f64;
        println!(
            "{:<34}{:>7}{:>10.4}{:>10.4}{:>10.3}{:>10.3}{:>10.3}{:>10.3}{:>10.3}{:>10.3}{:>12}",
            "flat, 4-bit (engine)",
            np,
            cov / m,
            rec / m,
            percentile(&st.centroid_scan, 0.5),
            percentile(&st.centroid_scan, 0.95),
            percentile(&st.list_decode, 0.5),
            percentile(&st.list_scan, 0.5),
            percentile(&st.rescore, 0.5),
            percentile(&total, 0.5),
            nlist
        );
        println!(
            "  engine steps p50 ms: centroid page decode {:.3} (every query: StoredCentroids::open), centroid scan {:.3}, list decode {:.3}, list scan {:.3}, rescoring {:.3}; search_pages total {:.3} (also the sample's background); top 10 equal to search_pages' for {} of {}",
            percentile(&st.centroid_decode, 0.5),
            percentile(&st.centroid_scan, 0.5),
            percentile(&st.list_decode, 0.5),
            percentile(&st.list_scan, 0.5),
            percentile(&st.rescore, 0.5),
            percentile(&total, 0.5),
            queries.len() - mism,
            queries.len()
        );
        println!(
            "{:<34}{:>7}{:>10}{:>10}{:>10.3}{:>10.3}",
            "flat, f32 (HNSW's kernel)",
            np,
            "same",
            "same",
            percentile(&f32_ms, 0.5),
            percentile(&f32_ms, 0.95)
        );
        for &m in &a.centroid_m {
            let t = Instant::now();
            let mut g = hnsw::Hnsw::build(nlist, m, a.efc, 0x6873, |x, y| {
                dot(&cf[x as usize], &cf[y as usize])
            });
            let build_s = t.elapsed().as_secs_f64();
            let (raw, varint, deflated) = g.bytes();
            for &ef in &a.centroid_ef {
                if ef < np {
                    continue;
                }
                let mut st = Steps::default();
                let (mut cov, mut rec, mut ms, mut sims) = (0f64, 0f64, Vec::new(), 0usize);
                for (q, e) in queries.iter().zip(exact) {
                    let t = Instant::now();
                    let (probed, w) = g.search(np, ef, |x| dot(&cf[x as usize], q));
                    ms.push(t.elapsed().as_secs_f64() * 1e3);
                    sims += w.evals;
                    let got = scan_lists(&pages, &root, n, q, &probed, RESCORE, &mut st);
                    cov += coverage(&probed, e);
                    rec += recall(&got, e);
                }
                println!(
                    "{:<34}{:>7}{:>10.4}{:>10.4}{:>10.3}{:>10.3}{:>10}{:>10}{:>10}{:>10}{:>12.0}",
                    format!("hnsw M {m} efc {} ef {ef}", a.efc),
                    np,
                    cov / queries.len() as f64,
                    rec / queries.len() as f64,
                    percentile(&ms, 0.5),
                    percentile(&ms, 0.95),
                    "",
                    "",
                    "",
                    "",
                    sims as f64 / queries.len() as f64
                );
            }
            println!(
                "  hnsw M {m}: built in {build_s:.1} s (one thread); graph once: {:.1} kB raw ids, {:.1} kB varint gaps, {:.1} kB deflated (vs {:.1} kB of g pages); load {}",
                raw as f64 / 1e3,
                varint as f64 / 1e3,
                deflated as f64 / 1e3,
                gstored as f64 / 1e3,
                load()
            );
        }
    }
}

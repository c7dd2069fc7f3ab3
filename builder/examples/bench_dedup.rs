//! `jikji dedup --new` on a large bundle (issue 14's "natively for dedup"): the product's
//! `dedup::classify_new_with` with the exact scan against the same call routed through the
//! bundle's dense index (`nearest::DenseRoute`, one run per `--rounds` value), side by side
//! on one bundle and one set of new chunks.
//!
//! Bundle: one written by `bench_ivf_1m --write DIR` (the builder's own writer and defaults:
//! at 100k / 1M rows binary lists, 4-bit centroids; rows are the real e5 passage vectors of
//! the embedding cache rotated ≤ 25°). New chunks: as `bench_hnsw` makes them (the same
//! seed): `--new` fresh rotations (≤ 25°) of random base vectors — what a re-added or edited
//! passage looks like — with stand-in texts that match no bundle text (so every chunk is
//! looked up) and state no values. The base is read from the same cache with the same
//! `--queries` held out as `bench_ivf_1m`, so it is the bundle's base.
//!
//! Printed per way: ms a new chunk for the lookup alone (`NearestRows::best`, one thread:
//! p50, p95, mean; the route's list pages are read from disk the first time a list is
//! probed, as in the product), rows scored and lists probed a chunk, the whole
//! `classify_new_with` call's wall time, and against the exact scan: the share of chunks
//! with the same class (duplicate / partial / new at the default 0.965 / 0.93) and the same
//! best match (same doc id; its cosine is then bit for bit the same, checked), and where the
//! match differs how much lower the routed cosine is. Load at start and end.
//!
//! ```text
//! cargo run --release -p jikji-builder --example bench_dedup -- --bundle DIR \
//!     --cache /work/evalcache/vectors-92ddd8e92dce2dc0.bin --model models/e5-small \
//!     --queries ../shared/eval/xquad-en/queries.jsonl,... [--new 300] [--rounds 4,8,16,32] \
//!     [--guard 0|1] [--seed 7234935] [--exact-lookups 0]
//! ```
//!
//! `--guard 0` / `1`: only the routes without / with `DenseRoute::with_guard` (the
//! thresholds 0.93 / 0.965, `GUARD_MARGIN`, `guard_lists`; default both); `--seed`: the
//! new chunks' seed (default bench_hnsw's, 0x6e6577 = 7234935); `--exact-lookups 0`: the
//! exact scan only through the product call (at 1M rows each pass costs ~1 s a chunk),
//! its ms a chunk the call's mean (p50 = p95 = mean).

use std::time::Instant;

use jikji_builder::dedup::{classify_new_with, Class, NewChunk, DUPLICATE, PARTIAL};
use jikji_builder::nearest::{guard_lists, DenseRoute, NearestRows, GUARD_MARGIN};
use jikji_format::{Bundle, ChunkRecord};

#[path = "support/rows.rs"]
mod rows;
use rows::{from_cache, rotate, splitmix};

const DIM: usize = 384;

struct Args {
    bundle: String,
    cache: String,
    model: String,
    queries: Vec<String>,
    new_chunks: usize,
    rounds: Vec<usize>,
    guard: Option<bool>,
    seed: u64,
    exact_lookups: bool,
}

fn args() -> Args {
    let mut a = Args {
        bundle: String::new(),
        cache: String::new(),
        model: "models/e5-small".into(),
        queries: Vec::new(),
        new_chunks: 300,
        rounds: vec![4, 8, 16, 32],
        guard: None,
        seed: 0x6e_65_77,
        exact_lookups: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| panic!("{k} needs a value"));
        match k.as_str() {
            "--bundle" => a.bundle = v,
            "--cache" => a.cache = v,
            "--model" => a.model = v,
            "--queries" => a.queries = v.split(',').map(String::from).collect(),
            "--new" => a.new_chunks = v.parse().expect("--new"),
            "--guard" => a.guard = Some(v != "0"),
            "--seed" => a.seed = v.parse().expect("--seed"),
            "--exact-lookups" => a.exact_lookups = v != "0",
            "--rounds" => a.rounds = v.split(',').map(|x| x.parse().expect("n")).collect(),
            _ => panic!("unknown argument {k}"),
        }
    }
    assert!(
        !a.bundle.is_empty() && !a.cache.is_empty(),
        "--bundle DIR and --cache FILE are required"
    );
    a
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

fn percentile(v: &[f64], p: f64) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[((s.len() - 1) as f64 * p).round() as usize]
}

/// One way's run: per-chunk lookup ms, the work, and the product call's chunks and time.
struct Run {
    ms: Vec<f64>,
    rows: f64,
    lists: f64,
    pages: u64,
    chunks: Vec<NewChunk>,
    call_ms: f64,
}

fn run<'v>(
    records: &[ChunkRecord],
    make: &dyn Fn() -> NearestRows<'v>,
    new: &[(ChunkRecord, Option<Vec<f32>>)],
    lookups: bool,
) -> Run {
    // The lookups alone, one chunk at a time (skipped: the call's mean for each).
    let mut nearest = make();
    let mut ms = Vec::with_capacity(new.len());
    for (r, v) in new.iter().filter(|_| lookups) {
        let t = Instant::now();
        let best = nearest
            .best(v.as_deref().unwrap(), &r.text)
            .expect("lookup");
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(best);
    }
    // The product call (a fresh route: its list pages read again).
    let mut called = make();
    let t = Instant::now();
    let chunks =
        classify_new_with(records, &mut called, new, DUPLICATE, PARTIAL).expect("classify");
    let call_ms = t.elapsed().as_secs_f64() * 1e3;
    if !lookups {
        ms = vec![call_ms / new.len() as f64; new.len()];
        nearest = called;
    }
    let w = nearest.work();
    Run {
        ms,
        rows: w.rows as f64 / w.lookups.max(1) as f64,
        lists: w.lists as f64 / w.lookups.max(1) as f64,
        pages: w.pages,
        chunks,
        call_ms,
    }
}

fn main() {
    let a = args();
    let t0 = Instant::now();
    println!("load at start: {}", load());
    let (base, _, _) = from_cache(&a.model, &a.cache, &a.queries);
    let b = base.len();
    let mut mu = vec![0f32; DIM];
    for x in &base {
        mu.iter_mut().zip(x).for_each(|(m, v)| *m += v / b as f32);
    }
    // New chunks: bench_hnsw's (its seed by default, the same rotations).
    let max = 25f32.to_radians();
    let mut s2 = a.seed;
    let news: Vec<Vec<f32>> = (0..a.new_chunks)
        .map(|_| {
            let x = &base[(splitmix(&mut s2) % b as u64) as usize];
            let w = &base[(splitmix(&mut s2) % b as u64) as usize];
            rotate(x, w, &mu, max, &mut s2)
        })
        .collect();
    drop(base);
    let dir = std::path::PathBuf::from(&a.bundle);
    let t = Instant::now();
    let bundle = Bundle::open_dir(&dir).expect("opening the bundle");
    let v = bundle.vectors().expect("vectors");
    let records: Vec<ChunkRecord> = (0..bundle.manifest().counts.chunks as u32)
        .map(|i| bundle.chunks().get(i).expect("record"))
        .collect();
    let ivf = bundle
        .manifest()
        .pages
        .as_ref()
        .and_then(|p| p.ivf.as_ref())
        .expect("the bundle has no dense index");
    println!(
        "bundle {}: {} rows, opened whole in {:.1} s; pages.ivf: nlist {}, codes {}, centroids {:?}, nprobe {}; {} new chunks ({b} base vectors rotated ≤ 25°); load {}",
        dir.display(),
        v.len(),
        t.elapsed().as_secs_f64(),
        ivf.nlist,
        ivf.codes,
        ivf.centroid_codes,
        ivf.nprobe,
        news.len(),
        load()
    );
    let new: Vec<(ChunkRecord, Option<Vec<f32>>)> = news
        .into_iter()
        .enumerate()
        .map(|(i, q)| {
            (
                ChunkRecord {
                    id: format!("new-{i:04}"),
                    source: "new/chunks.md".into(),
                    lang: "en".into(),
                    text: format!("new chunk number {i} (a stand-in text)"),
                    ..Default::default()
                },
                Some(q),
            )
        })
        .collect();
    println!(
        "\n{:<34}{:>9}{:>9}{:>9}{:>11}{:>10}{:>8}{:>9}{:>8}{:>8}",
        "way",
        "p50 ms",
        "p95 ms",
        "mean ms",
        "rows/chunk",
        "lists",
        "pages",
        "call s",
        "class",
        "match"
    );
    let exact = run(&records, &|| NearestRows::exact(v), &new, a.exact_lookups);
    let dist = |c: Class| exact.chunks.iter().filter(|n| n.class == c).count();
    let line = |name: &str, r: &Run| {
        let same = |f: &dyn Fn(&NewChunk, &NewChunk) -> bool| {
            r.chunks
                .iter()
                .zip(&exact.chunks)
                .filter(|(x, y)| f(x, y))
                .count() as f64
                / new.len() as f64
        };
        let class = same(&|x, y| x.class == y.class);
        let top1 = same(&|x, y| x.match_id == y.match_id);
        // Same match, same bits.
        assert!(r
            .chunks
            .iter()
            .zip(&exact.chunks)
            .all(|(x, y)| x.match_id != y.match_id || x.cosine.to_bits() == y.cosine.to_bits()));
        println!(
            "{name:<34}{:>9.3}{:>9.3}{:>9.3}{:>11.0}{:>10.1}{:>8}{:>9.2}{:>8.4}{:>8.4}",
            percentile(&r.ms, 0.5),
            percentile(&r.ms, 0.95),
            r.ms.iter().sum::<f64>() / r.ms.len() as f64,
            r.rows,
            r.lists,
            r.pages,
            r.call_ms / 1e3,
            class,
            top1
        );
    };
    line("exact scan", &exact);
    let guards: Vec<bool> = match a.guard {
        Some(g) => vec![g],
        None => vec![false, true],
    };
    for (round, guard) in a
        .rounds
        .iter()
        .flat_map(|&r| guards.iter().map(move |&g| (r, g)))
    {
        let t = Instant::now();
        let route = DenseRoute::open(&dir, &bundle, round)
            .expect("opening the route")
            .expect("an index");
        let open_ms = t.elapsed().as_secs_f64() * 1e3;
        let make = || {
            let r = DenseRoute::open(&dir, &bundle, round).unwrap().unwrap();
            NearestRows::through(
                v,
                if guard {
                    let lists = guard_lists(r.nlist());
                    r.with_guard(&[PARTIAL, DUPLICATE], GUARD_MARGIN, lists)
                } else {
                    r
                },
            )
        };
        drop(route);
        let r = run(&records, &make, &new, true);
        line(
            &format!(
                "index, {round} a round{} (open {open_ms:.0} ms)",
                if guard { ", guard" } else { "" }
            ),
            &r,
        );
        let missed: Vec<String> = r
            .chunks
            .iter()
            .zip(&exact.chunks)
            .filter(|(x, y)| x.class != y.class)
            .map(|(x, y)| format!("{} {:.4}/{:.4}", x.id, x.cosine, y.cosine))
            .collect();
        let gaps: Vec<f32> = r
            .chunks
            .iter()
            .zip(&exact.chunks)
            .filter(|(x, y)| x.match_id != y.match_id)
            .map(|(x, y)| y.cosine - x.cosine)
            .collect();
        if !gaps.is_empty() {
            println!(
                "    other best match for {}: exact minus routed cosine mean {:.4}, max {:.4}",
                gaps.len(),
                gaps.iter().sum::<f32>() / gaps.len() as f32,
                gaps.iter().fold(0f32, |m, g| m.max(*g))
            );
        }
        if !missed.is_empty() {
            println!(
                "    class differs (routed/exact cosine): {}",
                missed.join(", ")
            );
        }
        // Where the exact best sat: its list's rank in the route's order.
        let mut route = DenseRoute::open(&dir, &bundle, round).unwrap().unwrap();
        let mut ranks = Vec::new();
        for (i, (x, y)) in r.chunks.iter().zip(&exact.chunks).enumerate() {
            if x.match_id != y.match_id {
                let doc = records.iter().position(|c| c.id == y.match_id).unwrap() as u32;
                let (q, t) = (new[i].1.as_deref().unwrap(), &new[i].0.text);
                let (rank, list) = route.rank_of(q, t, doc).unwrap().unwrap();
                ranks.push(format!("{} rank {rank} (list {list})", x.id));
            }
        }
        if !ranks.is_empty() {
            println!("    the exact best's list: {}", ranks.join(", "));
        }
    }
    println!(
        "\nby the exact scan: {} duplicate, {} partial, {} new, {} conflict; total {:.0} s; load at the end: {}",
        dist(Class::Duplicate),
        dist(Class::Partial),
        dist(Class::New),
        dist(Class::Conflict),
        t0.elapsed().as_secs_f64(),
        load()
    );
}

//! Native speed check:
//! `cargo run --release -p jikji-embed --example bench [MODEL_DIR] [N] [f32|4bit]`.
//! Prints load time, ms for one ~20-token query, and passages/second for ~200-token passages
//! with `embed_many` at 1 and 2 threads (N passages, default 48), then single-thread
//! throughput of `embed` by batch size.

use std::time::Instant;

use jikji_embed::{Embedder, Prefix, Weights};

fn passage(seed: usize, words: usize) -> String {
    let vocab = [
        "the",
        "river",
        "ran",
        "quietly",
        "past",
        "old",
        "stone",
        "houses",
        "where",
        "scholars",
        "once",
        "read",
        "classics",
        "by",
        "lamplight",
        "and",
        "argued",
        "about",
        "virtue",
        "harvest",
        "mountain",
        "letters",
        "emperor",
        "garden",
        "winter",
        "travellers",
    ];
    (0..words)
        .map(|i| vocab[(i * 7 + seed * 13 + i / 3) % vocab.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args
        .next()
        .or_else(|| std::env::var("JIKJI_MODEL_DIR").ok())
        .unwrap_or_else(|| concat!(env!("CARGO_MANIFEST_DIR"), "/../models/e5-small").into());
    let n: usize = args.next().map(|s| s.parse().unwrap()).unwrap_or(48);
    let weights = match args.next().as_deref() {
        None | Some("f32") => Weights::Float32,
        Some("4bit") => Weights::Packed4Bit,
        Some(w) => panic!("weights: f32 or 4bit, not {w}"),
    };

    let t = Instant::now();
    let e = Embedder::from_dir_with(std::path::Path::new(&dir), weights).expect("load model");
    println!(
        "{weights:?}: load {:.0} ms",
        t.elapsed().as_secs_f64() * 1e3
    );

    let q = "how do scholars explain the meaning of learning and practice in the Analects";
    let qt = e.count_tokens(q, Prefix::Query).unwrap();
    for _ in 0..3 {
        e.embed_query(q).unwrap();
    }
    let mut times: Vec<f64> = (0..20)
        .map(|_| {
            let t = Instant::now();
            e.embed_query(q).unwrap();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "query ({qt} tokens): median {:.1} ms, min {:.1} ms, max {:.1} ms",
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    );

    // ~200-token passages.
    let mut words = 100;
    while e.count_tokens(&passage(0, words), Prefix::Passage).unwrap() < 200 {
        words += 2;
    }
    let owned: Vec<String> = (0..n).map(|s| passage(s, words)).collect();
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    let mean_tokens = texts
        .iter()
        .map(|t| e.count_tokens(t, Prefix::Passage).unwrap())
        .sum::<usize>() as f64
        / n as f64;
    e.embed(&texts[..2], Prefix::Passage).unwrap();
    for threads in [1, 2] {
        let t = Instant::now();
        let out = e
            .embed_many(&texts, Prefix::Passage, threads, &|_| {})
            .unwrap();
        let s = t.elapsed().as_secs_f64();
        assert_eq!(out.len(), n);
        println!(
            "embed_many threads={threads}: {n} passages of {mean_tokens:.0} tokens in {s:.2} s = {:.2} passages/s",
            n as f64 / s
        );
    }
    for bs in [1usize, 2, 4, 8] {
        let m = n.min(16);
        let t = Instant::now();
        for c in texts[..m].chunks(bs) {
            e.embed(c, Prefix::Passage).unwrap();
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "embed, batch {bs}: {:.2} passages/s (1 thread)",
            m as f64 / s
        );
    }

    // Short texts (~20 tokens): does batching pay?
    let shorts: Vec<String> = (0..64).map(|s| passage(s, 14)).collect();
    let shorts: Vec<&str> = shorts.iter().map(String::as_str).collect();
    let st = e.count_tokens(shorts[0], Prefix::Query).unwrap();
    for bs in [1usize, 4, 8, 16] {
        let t = Instant::now();
        for c in shorts.chunks(bs) {
            e.embed(c, Prefix::Query).unwrap();
        }
        let s = t.elapsed().as_secs_f64();
        println!(
            "embed {st}-token texts, batch {bs}: {:.1} texts/s (1 thread)",
            shorts.len() as f64 / s
        );
    }
}

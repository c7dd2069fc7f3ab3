//! Measurements behind the dedup thresholds and the cost of within-bundle dedup (README
//! "Dedup thresholds"). Ignored by default: it needs the full books bundle
//! (`JIKJI_BOOKS_BUNDLE`, default `/work/main/bundles/books`, or `bundles/books`) and the
//! model, and embeds ~120 texts. Run:
//! `cargo test --release -p jikji-builder --test dedup_calibration -- --ignored --nocapture`

mod common;

use std::collections::HashSet;
use std::path::PathBuf;
use std::time::Instant;

use jikji_builder::dedup::{exact_pairs, lsh_candidates, FlatVectors, LshParams};
use jikji_builder::ingest::embed::embed_passages;
use jikji_format::vectors::quantize;
use jikji_format::Bundle;

fn books_bundle() -> PathBuf {
    std::env::var_os("JIKJI_BOOKS_BUNDLE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let main = PathBuf::from("/work/main/bundles/books");
            if main.is_dir() {
                main
            } else {
                common::root().join("bundles/books")
            }
        })
}

/// Deletes `n` spans of `frac` of the text's chars each, evenly spread (not at the ends).
fn delete_spans(text: &str, n: usize, frac: f32) -> String {
    let chars: Vec<char> = text.chars().collect();
    let len = chars.len();
    let span = ((len as f32 * frac) as usize).max(1);
    let mut keep = vec![true; len];
    for k in 0..n {
        let start = len * (k + 1) / (n + 1);
        for x in keep.iter_mut().skip(start).take(span) {
            *x = false;
        }
    }
    chars
        .iter()
        .zip(keep)
        .filter(|(_, k)| *k)
        .map(|(c, _)| c)
        .collect()
}

fn pct(v: &mut [f32], p: f32) -> f32 {
    v.sort_by(f32::total_cmp);
    let i = ((v.len() - 1) as f32 * p).round() as usize;
    v[i]
}

fn summary(name: &str, v: &mut [f32]) {
    println!(
        "{name:<44} n={:<5} min {:.4}  p5 {:.4}  p25 {:.4}  p50 {:.4}  p75 {:.4}  p95 {:.4}  p99 {:.4}  max {:.4}",
        v.len(),
        pct(v, 0.0),
        pct(v, 0.05),
        pct(v, 0.25),
        pct(v, 0.5),
        pct(v, 0.75),
        pct(v, 0.95),
        pct(v, 0.99),
        pct(v, 1.0)
    );
}

#[test]
#[ignore]
fn dedup_threshold_and_cost_measurements() {
    let dir = books_bundle();
    let b = Bundle::open_dir(&dir).unwrap();
    let v = b.vectors().expect("the books bundle needs vectors");
    let n = b.chunks().len();
    let records: Vec<_> = (0..n as u32).map(|i| b.chunks().get(i).unwrap()).collect();
    let flat = FlatVectors::from_vectors(v);
    println!("bundle {}: {n} chunks", dir.display());

    // Sample chunks of at least 300 chars, evenly spread over the bundle.
    let long: Vec<usize> = (0..n)
        .filter(|&i| records[i].text.chars().count() >= 300)
        .collect();
    let sample: Vec<usize> = (0..48).map(|k| long[k * long.len() / 48]).collect();
    let mut texts = Vec::new();
    for (k, &i) in sample.iter().enumerate() {
        let t = &records[i].text;
        texts.push(delete_spans(t, 1, 0.02)); // tiny edit: 2% of the chars dropped
        texts.push(delete_spans(t, 3, 0.04)); // light edit: 3 × 4% dropped
                                              // partial: first half of this chunk + second half of an unrelated one
        let other = &records[sample[(k + 24) % sample.len()]].text;
        let a: String = t.chars().take(t.chars().count() / 2).collect();
        let bb: String = other.chars().skip(other.chars().count() / 2).collect();
        texts.push(format!("{a}{bb}"));
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t = Instant::now();
    let e = embed_passages(
        &refs,
        &common::model_dir(),
        Some(&common::cache_dir()),
        2,
        false,
        &mut None,
    )
    .unwrap();
    println!(
        "embedded {} variants in {:.1} s ({} from cache)",
        refs.len(),
        t.elapsed().as_secs_f64(),
        e.cached
    );
    let (mut tiny, mut light, mut partial) = (Vec::new(), Vec::new(), Vec::new());
    for (k, &i) in sample.iter().enumerate() {
        tiny.push(v.dot(i, &e.vectors[3 * k]));
        light.push(v.dot(i, &e.vectors[3 * k + 1]));
        partial.push(v.dot(i, &e.vectors[3 * k + 2]));
    }
    // Non-duplicates: random pairs, and each sampled chunk's nearest neighbour in another
    // file (topically related).
    let mut st = 12345u64;
    let mut rnd = || {
        st ^= st << 13;
        st ^= st >> 7;
        st ^= st << 17;
        st
    };
    let mut random = Vec::new();
    while random.len() < 5000 {
        let (i, j) = ((rnd() % n as u64) as usize, (rnd() % n as u64) as usize);
        if records[i].source != records[j].source {
            random.push(flat.cosine(i, j));
        }
    }
    let mut nearest = Vec::new();
    let probe: Vec<usize> = (0..400).map(|k| k * n / 400).collect();
    for &i in &probe {
        let best = (0..n)
            .filter(|&j| records[j].source != records[i].source)
            .map(|j| flat.cosine(i, j))
            .fold(f32::MIN, f32::max);
        nearest.push(best);
    }
    summary("tiny edit (2% of chars deleted)", &mut tiny);
    summary("light edit (3 x 4% of chars deleted)", &mut light);
    summary("partial (half the chunk + half another)", &mut partial);
    summary("random pair, different files", &mut random);
    summary("nearest neighbour in another file", &mut nearest);

    // Within-bundle dedup cost and LSH recall on the real vectors.
    let mut truths = Vec::new();
    for thr in [0.95f32, 0.97, 0.985] {
        let t = Instant::now();
        let truth = exact_pairs(&flat, thr);
        println!(
            "n={n} threshold {thr}: exact all-pairs {:.1} s, {} pairs",
            t.elapsed().as_secs_f64(),
            truth.len()
        );
        truths.push((thr, truth));
    }
    for (bands, bits) in [(24, 14), (32, 12), (48, 12), (64, 12), (48, 10)] {
        let p = LshParams {
            bands,
            bits,
            ..LshParams::default()
        };
        let t = Instant::now();
        let cands: HashSet<(u32, u32)> = lsh_candidates(&flat, p).into_iter().collect();
        let lsh_s = t.elapsed().as_secs_f64();
        let recall: Vec<String> = truths
            .iter()
            .map(|(thr, truth)| {
                let found = truth.iter().filter(|p| cands.contains(p)).count();
                format!("{thr}: {found}/{}", truth.len())
            })
            .collect();
        println!(
            "LSH {bands} bands x {bits} bits: {lsh_s:.2} s, {} candidates, recall {}",
            cands.len(),
            recall.join(", ")
        );
    }
    // Synthetic scale: the real vectors repeated with noise (σ = 0.02 per component before
    // renormalising, cosine to the original ≈ 0.93), to 10k and 100k.
    let base: Vec<Vec<f32>> = (0..n).map(|i| v.get(i)).collect();
    let mut gs = 99u64;
    let mut gauss = move || {
        let mut u = || {
            gs = gs.wrapping_add(0x9e3779b97f4a7c15);
            let mut z = gs;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58476d1ce4e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d049bb133111eb);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
        };
        let (a, b) = (u().max(1e-12), u());
        ((-2.0 * a.ln()).sqrt() * (2.0 * std::f64::consts::PI * b).cos()) as f32
    };
    for target in [10_000usize, 100_000] {
        let rows: Vec<(f32, Vec<i8>)> = (0..target)
            .map(|k| {
                let x = &base[k % n];
                if k < n {
                    return quantize(x);
                }
                let y: Vec<f32> = x.iter().map(|a| a + 0.02 * gauss()).collect();
                let norm = y.iter().map(|a| a * a).sum::<f32>().sqrt();
                quantize(&y.iter().map(|a| a / norm).collect::<Vec<_>>())
            })
            .collect();
        let big = FlatVectors::from_rows(v.dim(), rows);
        let t = Instant::now();
        let cands = lsh_candidates(&big, LshParams::default());
        let lsh_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut kept = 0usize;
        for &(i, j) in &cands {
            if big.cosine(i as usize, j as usize) >= 0.97 {
                kept += 1;
            }
        }
        let rerank_s = t.elapsed().as_secs_f64();
        // Exact all-pairs cost, measured on the first 2,000 rows and scaled by n².
        let t = Instant::now();
        let mut acc = 0f32;
        for i in 0..2000 {
            for j in i + 1..2000 {
                acc += big.cosine(i, j);
            }
        }
        let per_pair = t.elapsed().as_secs_f64() / (2000.0 * 1999.0 / 2.0);
        println!(
            "synthetic n={target}: LSH hashing+bucketing {lsh_s:.1} s, {} candidate pairs, exact rerank {rerank_s:.1} s ({kept} ≥ 0.97); exact all-pairs would be {:.0} s ({:.1} ns/pair; checksum {acc:.0})",
            cands.len(),
            per_pair * (target as f64) * (target as f64 - 1.0) / 2.0,
            per_pair * 1e9
        );
    }
}

//! `jikji-bench`: performance figures of the native builder and engine, as a bench binary
//! that prints them (timings on this noisy 2-core machine are compared as ratios within
//! one run, never asserted in tests).
//!
//! Reports:
//! - lexical build speed: chunk + index seconds per MB of corpus (BM25-only build of the
//!   whole corpus, `--reps` times, median);
//! - embedding speed: chunks and tokens per second, embedding a sample of the corpus's
//!   chunks without cache on all cores; and the embedding seconds per MB this implies;
//! - bundle bytes by file (of `--bundle`);
//! - native query latency per mode on `--bundle` (median, p95; dense and hybrid include
//!   embedding the query).
//!
//! Usage: `jikji-bench --corpus books --bundle target/e2e-bundle [--model models/e5-small]
//! [--queries tests/bench/queries.txt] [--sample 256] [--reps 5] [--json FILE]`
//!
//! `jikji-bench embed --chunks CHUNKS.jsonl --out VECTORS.npy [--threads N]`: embeds the
//! `text` of every line of a `jikji chunk` output exactly as `jikji build` does
//! (`load_build_embedder` + `embed_many`, `passage: ` prefix) and prints one JSON line of
//! figures (chunks, tokens, seconds, model load); `scripts/bench-embed` runs it beside
//! onnxruntime on the same chunks.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use jikji_builder::chunker::{chunk_text, ChunkParams};
use jikji_builder::corpus::{scan, CheckOptions};
use jikji_builder::encoder::Encoder;
use jikji_builder::eval::percentile;
use jikji_builder::ingest::{build, load_build_embedder, BundleSettings, IngestOptions};
use jikji_embed::Prefix;
use jikji_engine::{Engine, Mode};
use serde_json::json;

#[derive(Parser)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,
    #[command(flatten)]
    all: Args,
}

#[derive(clap::Subcommand)]
enum Cmd {
    /// Embedding throughput only, on the chunks of a `jikji chunk` output.
    Embed(EmbedArgs),
}

#[derive(clap::Args)]
struct EmbedArgs {
    /// `jikji chunk` output (JSON lines with a `text` field).
    #[arg(long)]
    chunks: PathBuf,
    /// Write the vectors here (`.npy`, float32 [chunks, 384], input order).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Model folder.
    #[arg(long, default_value = "models/e5-small")]
    model: PathBuf,
    /// Threads (default: all cores).
    #[arg(long)]
    threads: Option<usize>,
    /// `build`: what `jikji build` embeds with (`Encoder::load`: the pack's passage encoder
    /// when the model's pack is beside it); `tract`: the tract embedder
    /// (`load_build_embedder`) even then.
    #[arg(long, default_value = "build")]
    engine: String,
}

/// User + system CPU seconds of this process so far (`getrusage`).
fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// `jikji-bench embed`.
fn embed_bench(a: EmbedArgs) -> anyhow::Result<()> {
    let threads = a
        .threads
        .unwrap_or_else(jikji_builder::ingest::default_threads);
    let text = std::fs::read_to_string(&a.chunks)
        .with_context(|| format!("reading {}", a.chunks.display()))?;
    let mut texts = Vec::new();
    for (i, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Value = serde_json::from_str(line)
            .with_context(|| format!("{}:{}: not JSON", a.chunks.display(), i + 1))?;
        let t = v["text"]
            .as_str()
            .with_context(|| format!("{}:{}: no \"text\" string", a.chunks.display(), i + 1))?;
        texts.push(t.to_string());
    }
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    let t = Instant::now();
    let info = jikji_builder::ingest::model_info(&a.model)?;
    let encoder = match a.engine.as_str() {
        "build" => Encoder::load(&a.model, &info.sha256)?,
        "tract" => Encoder::Tract(Box::new(load_build_embedder(&a.model)?)),
        other => anyhow::bail!("--engine {other}: expected build or tract"),
    };
    let load_s = t.elapsed().as_secs_f64();
    let cpu0 = cpu_seconds();
    let t = Instant::now();
    let out = encoder
        .embed_many(&refs, Prefix::Passage, threads, "chunks", &|_| {})
        .context("embedding")?;
    let secs = t.elapsed().as_secs_f64();
    let cpu = cpu_seconds() - cpu0;
    let tokens: usize = out.tokens.iter().sum();
    if let Some(p) = &a.out {
        jikji_builder::npy::write_f32(p, &out.vectors, jikji_embed::DIM)?;
    }
    println!(
        "{}",
        json!({"engine": format!("jikji {encoder:?}"), "threads": threads, "cpu_seconds": cpu, "chunks": refs.len(), "tokens": tokens,
               "seconds": secs, "chunks_per_s": refs.len() as f64 / secs,
               "tokens_per_s": tokens as f64 / secs, "model_load_s": load_s})
    );
    Ok(())
}

#[derive(clap::Args)]
struct Args {
    /// Corpus folder for the build figures.
    #[arg(long, default_value = "books")]
    corpus: PathBuf,
    /// Bundle (with vectors) for the query-latency figures.
    #[arg(long, required = true)]
    bundle: Option<PathBuf>,
    /// Model folder.
    #[arg(long, default_value = "models/e5-small")]
    model: PathBuf,
    /// Queries, one per line.
    #[arg(long, default_value = "tests/bench/queries.txt")]
    queries: PathBuf,
    /// Chunks embedded for the embedding-speed figure (evenly spaced over the corpus).
    #[arg(long, default_value_t = 256)]
    sample: usize,
    /// Repetitions of each timed step.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Results per query.
    #[arg(long, default_value_t = 10)]
    top_k: usize,
    /// Write the figures as JSON here too.
    #[arg(long)]
    json: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    if let Some(Cmd::Embed(e)) = cli.cmd {
        return embed_bench(e);
    }
    let a = cli.all;
    let bundle_path = a.bundle.clone().expect("clap requires --bundle");
    let threads = jikji_builder::ingest::default_threads();

    // 1. Lexical build of the whole corpus.
    let files = scan(&a.corpus, CheckOptions::default())?.files;
    let mb = files.iter().map(|f| f.text.len()).sum::<usize>() as f64 / 1e6;
    let tmp = std::env::temp_dir().join(format!("jikji-bench-{}", std::process::id()));
    let mut lex_secs = Vec::new();
    let mut chunks_total = 0;
    for _ in 0..a.reps {
        let t = Instant::now();
        let r = build(
            &IngestOptions {
                threads,
                ..IngestOptions::new(&a.corpus, tmp.join("bm25"))
            },
            &BundleSettings::default(),
        )?;
        lex_secs.push(t.elapsed().as_secs_f64());
        chunks_total = r.chunks;
    }
    let _ = std::fs::remove_dir_all(&tmp);
    let _ = std::fs::remove_dir_all(tmp.with_extension("prev"));
    lex_secs.sort_by(f64::total_cmp);
    let lex_med = percentile(&lex_secs, 0.5);

    // 2. Embedding speed on a sample of the corpus's chunks.
    let texts: Vec<String> = files
        .iter()
        .flat_map(|f| {
            chunk_text(&f.text[f.body_byte..], ChunkParams::default())
                .into_iter()
                .map(|c| c.text)
        })
        .collect();
    let step = (texts.len() / a.sample.max(1)).max(1);
    let sample: Vec<&str> = texts
        .iter()
        .step_by(step)
        .take(a.sample)
        .map(String::as_str)
        .collect();
    let t = Instant::now();
    let embedder = load_build_embedder(&a.model)?;
    let load_secs = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let out = embedder
        .embed_many(&sample, Prefix::Passage, threads, &|_| {})
        .context("embedding the sample")?;
    let embed_secs = t.elapsed().as_secs_f64();
    let tokens: usize = out.tokens.iter().sum();
    let chunks_per_s = sample.len() as f64 / embed_secs;
    let embed_secs_per_mb = (texts.len() as f64 / chunks_per_s) / mb;

    // 3. Bundle bytes, 4. query latency.
    let mut engine = Engine::open_dir(&bundle_path)
        .with_context(|| format!("opening {}", bundle_path.display()))?;
    // Bytes on disk per file (format 1) or per page kind (format 2: `p/d-*`, …).
    let mut per: std::collections::BTreeMap<String, u64> = Default::default();
    for e in walkdir::WalkDir::new(&bundle_path)
        .into_iter()
        .filter_map(|e| e.ok())
    {
        if !e.file_type().is_file() {
            continue;
        }
        let rel = e.path().strip_prefix(&bundle_path).unwrap_or(e.path());
        let key = match rel.parent().and_then(|p| p.to_str()) {
            Some("p") => format!(
                "p/{}-*",
                &rel.file_name().unwrap_or_default().to_string_lossy()[..1]
            ),
            _ => rel.display().to_string(),
        };
        *per.entry(key).or_default() += e.metadata().map(|m| m.len()).unwrap_or(0);
    }
    let bytes = per.into_iter().collect::<Vec<_>>();
    let t = Instant::now();
    engine.set_embedder(load_build_embedder(&a.model)?);
    let engine_model_secs = t.elapsed().as_secs_f64();
    let queries: Vec<String> = std::fs::read_to_string(&a.queries)
        .with_context(|| format!("reading {}", a.queries.display()))?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    let mut modes = serde_json::Map::new();
    for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
        let mut ms = Vec::new();
        for q in &queries {
            engine.search(q, mode, a.top_k)?; // warm-up
            for _ in 0..a.reps {
                let t = Instant::now();
                std::hint::black_box(engine.search(q, mode, a.top_k)?);
                ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        ms.sort_by(f64::total_cmp);
        modes.insert(
            mode.to_string(),
            json!({"median_ms": percentile(&ms, 0.5), "p95_ms": percentile(&ms, 0.95), "min_ms": ms[0], "max_ms": ms[ms.len() - 1], "count": ms.len()}),
        );
    }

    let report = json!({
        "engine": "native",
        "threads": threads,
        "corpus": {"files": files.len(), "mb": mb, "chunks": chunks_total},
        "lexical_build": {"median_s": lex_med, "s_per_mb": lex_med / mb},
        "embedding": {
            "sample_chunks": sample.len(), "sample_tokens": tokens, "seconds": embed_secs,
            "chunks_per_s": chunks_per_s, "tokens_per_s": tokens as f64 / embed_secs,
            "model_load_s": load_secs, "implied_s_per_mb": embed_secs_per_mb,
        },
        "build_s_per_mb": lex_med / mb + embed_secs_per_mb,
        "bundle": {"path": bundle_path, "chunks": engine.bundle().manifest().counts.chunks, "bytes": bytes.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>()},
        "engine_model_load_s": engine_model_secs,
        "queries": queries.len(),
        "modes": modes,
    });
    println!(
        "corpus: {} files, {:.2} MB, {} chunks",
        files.len(),
        mb,
        chunks_total
    );
    println!(
        "lexical build (chunk + index + write): {:.3} s = {:.3} s/MB",
        lex_med,
        lex_med / mb
    );
    println!(
        "embedding ({threads} threads, {} sampled chunks, {} tokens): {:.2} chunks/s, {:.0} tokens/s => {:.0} s/MB",
        sample.len(),
        tokens,
        chunks_per_s,
        tokens as f64 / embed_secs,
        embed_secs_per_mb
    );
    println!(
        "full build estimate: {:.0} s/MB",
        lex_med / mb + embed_secs_per_mb
    );
    println!("bundle {}:", bundle_path.display());
    for (f, b) in &bytes {
        println!("  {f:<14} {b:>10} bytes");
    }
    println!(
        "native query latency over {} queries x {} reps (top-{}):",
        queries.len(),
        a.reps,
        a.top_k
    );
    for (m, v) in &modes {
        println!(
            "  {m:<7} median {:>8.2} ms  p95 {:>8.2} ms",
            v["median_ms"].as_f64().unwrap(),
            v["p95_ms"].as_f64().unwrap()
        );
    }
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

//! `jikji-lang-means`: computes `lang-means.json`, the per-language mean vectors of the
//! dense centring (issue 15; [`jikji_builder::lang_means`]), from reference texts.
//!
//! Usage: `jikji-lang-means --model models/e5-small --out FILE [--per-lang 200]
//! [--cache DIR] [--threads N] LANG=PATH...` where PATH is a `.md`/`.txt`/`.jsonl` file or a
//! folder of them, and LANG a language code of the detector (`en`, `zh`, `ko`, `ja`); only
//! chunks detected as LANG count. `scripts/lang-means` runs it on the shipped reference
//! sample (README, "Dense centring").

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use jikji_builder::lang_means::{compute, Reference};

#[derive(Parser)]
#[command(about = "Per-language mean vectors for the dense centring")]
struct Args {
    /// Model folder.
    #[arg(long, default_value = "models/e5-small")]
    model: PathBuf,
    /// Output file (JSON).
    #[arg(long)]
    out: PathBuf,
    /// Reference chunks per language.
    #[arg(long, default_value_t = 200)]
    per_lang: usize,
    /// Embedding cache folder for the passage vectors.
    #[arg(long)]
    cache: Option<PathBuf>,
    /// Embedding threads.
    #[arg(long, default_value_t = 2)]
    threads: usize,
    /// LANG=PATH inputs.
    #[arg(required = true)]
    inputs: Vec<String>,
}

fn main() -> anyhow::Result<()> {
    let a = Args::parse();
    anyhow::ensure!(a.per_lang > 0, "--per-lang must be at least 1");
    let refs = a
        .inputs
        .iter()
        .map(|s| {
            let (lang, path) = s
                .split_once('=')
                .with_context(|| format!("{s:?}: expected LANG=PATH"))?;
            Ok(Reference {
                lang: lang.to_string(),
                path: PathBuf::from(path),
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let stats = compute(
        &refs,
        &a.model,
        a.cache.as_deref(),
        a.per_lang,
        a.threads.max(1),
    )?;
    for (l, m) in &stats.languages {
        eprintln!("{l}: {} chunks", m.chunks);
    }
    let json = serde_json::to_string_pretty(&stats)?;
    std::fs::write(&a.out, json).with_context(|| format!("writing {}", a.out.display()))?;
    Ok(())
}

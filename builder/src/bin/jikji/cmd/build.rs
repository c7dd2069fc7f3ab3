//! `jikji build`.

use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::ingest::{build, print_report, IngestOptions};

use crate::args::{
    CheckArgs, ChunkingArgs, EmbedArgs, IndexArgs, ModelArgs, PackArgs, StrategyArg,
};

/// Arguments of `jikji build`.
#[derive(clap::Args)]
pub struct Args {
    /// Corpus folder.
    dir: PathBuf,
    /// Bundle folder to write (replaced atomically; the previous one is kept as BUNDLE.prev).
    #[arg(long)]
    out: PathBuf,
    #[command(flatten)]
    chunking: ChunkingArgs,
    /// Chunking strategy.
    #[arg(long, value_enum, default_value_t = StrategyArg::Hierarchical)]
    strategy: StrategyArg,
    #[command(flatten)]
    model: ModelArgs,
    /// Build a BM25-only bundle (no vectors; dense and hybrid search unavailable).
    #[arg(long)]
    no_embed: bool,
    #[command(flatten)]
    embed: EmbedArgs,
    #[command(flatten)]
    pack: PackArgs,
    /// Print the summary as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    check: CheckArgs,
    /// Fail on any corpus error instead of building from the good files.
    #[arg(long)]
    strict: bool,
    #[command(flatten)]
    index: IndexArgs,
    /// Import the chunk vectors from FILE.npy (float32 [chunks, 384]) and its sidecar
    /// FILE.json (model sha256, prefix, dim, and each row's chunk id and text sha256) instead of
    /// embedding them here, e.g. made by scripts/ray-embed.py from `jikji chunk` output; a
    /// mismatch in any of them is refused, naming the field. Format: README, "Embedding
    /// elsewhere".
    #[arg(long, value_name = "FILE.npy", conflicts_with = "no_embed")]
    vectors: Option<PathBuf>,
    /// Memory for the postings being built, in MB: past it, sorted runs go to a temporary
    /// folder beside the bundle and are merged at the end (the bundle's bytes do not
    /// change).
    #[arg(long, value_name = "MB", default_value_t = jikji_builder::ingest::POSTINGS_BUDGET >> 20, value_parser = clap::value_parser!(usize))]
    index_memory: usize,
}

/// Builds the bundle and prints the summary.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let settings = a
        .index
        .settings(&a.chunking, a.strategy, a.check.allow_ai_draft)?;
    let model_dir = if a.no_embed {
        None
    } else {
        let model = a.model.model;
        anyhow::ensure!(
            model.join("model.onnx").exists(),
            "{}: no model.onnx; run scripts/setup-model, pass --model DIR, or build BM25-only with --no-embed",
            model.display()
        );
        Some(model)
    };
    let query_model = a.pack.dir(model_dir.as_deref());
    let opts = IngestOptions {
        query_model,
        model_dir,
        cache_dir: Some(a.embed.cache_dir(&a.out)),
        threads: a.embed.threads()?,
        progress: !a.quiet && !a.json,
        strict: a.strict,
        quarantine: a.check.quarantine,
        lang_means: a.index.lang_means.clone(),
        vectors: a.vectors,
        index_budget: a.index_memory.max(1) << 20,
        ..IngestOptions::new(a.dir, &a.out)
    };
    let report = build(&opts, &settings)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, &a.out);
    }
    Ok(ExitCode::SUCCESS)
}

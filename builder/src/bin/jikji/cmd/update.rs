//! `jikji update`.

use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::ingest::IngestOptions;
use jikji_builder::update::{print_update_report, update};

use crate::args::{CheckArgs, EmbedArgs, ModelArgs};

/// Arguments of `jikji update`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder (made by `jikji build`; replaced atomically, the old one kept as BUNDLE.prev).
    bundle: PathBuf,
    /// Corpus folder.
    dir: PathBuf,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    embed: EmbedArgs,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
    /// No progress bar.
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    check: CheckArgs,
    /// Fail on any corpus error instead of updating from the good files.
    #[arg(long)]
    strict: bool,
}

/// Updates the bundle and prints what changed.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let model = a.model.model;
    let opts = IngestOptions {
        model_dir: model.join("model.onnx").exists().then_some(model),
        cache_dir: Some(a.embed.cache_dir(&a.bundle)),
        threads: a.embed.threads()?,
        progress: !a.quiet && !a.json,
        strict: a.strict,
        quarantine: a.check.quarantine,
        ..IngestOptions::new(a.dir, &a.bundle)
    };
    let report = update(&opts, a.check.allow_ai_draft)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_update_report(&report, &a.bundle);
    }
    Ok(ExitCode::SUCCESS)
}

//! `jikji update`.

use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::ingest::IngestOptions;
use jikji_builder::update::{print_update_report, update_with, Recalibrate};

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
    /// Fit the score calibration again whenever the data files change (default: keep it
    /// when at most 1% of the chunk texts changed in a bundle of 1,000+ chunks).
    #[arg(long)]
    recalibrate: bool,
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
    let recalibrate = if a.recalibrate {
        Recalibrate::Always
    } else {
        Recalibrate::WhenMoved
    };
    let report = update_with(&opts, a.check.allow_ai_draft, recalibrate)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_update_report(&report, &a.bundle);
    }
    Ok(ExitCode::SUCCESS)
}

//! `jikji update`.

use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::ingest::IngestOptions;
use jikji_builder::update::{
    print_update_report, update_with, DeletionLimit, Recalibrate, RowMapRule, UpdateOptions,
};

use crate::args::{CheckArgs, EmbedArgs, ModelArgs, PackArgs};

/// Arguments of `jikji update`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder (made by `jikji build`; replaced atomically, the old one kept as
    /// BUNDLE.prev.1, older ones as BUNDLE.prev.2 … up to --keep).
    bundle: PathBuf,
    /// Corpus folder.
    dir: PathBuf,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    embed: EmbedArgs,
    #[command(flatten)]
    pack: PackArgs,
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
    /// Refuse (exit 1, bundle untouched) to delete more than this many of the bundle's
    /// files: N files or P% of them.
    #[arg(long, default_value = "20%", value_parser = str::parse::<DeletionLimit>)]
    max_deletions: DeletionLimit,
    /// Delete files gone from the folder however many there are.
    #[arg(long)]
    allow_deletions: bool,
    /// Older generations to keep (BUNDLE.prev.1 … BUNDLE.prev.N).
    #[arg(long, default_value_t = jikji_builder::generations::DEFAULT_KEEP as u16,
          value_parser = clap::value_parser!(u16).range(1..))]
    keep: u16,
}

/// Updates the bundle and prints what changed.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let model = a.model.model;
    let model_dir = model.join("model.onnx").exists().then_some(model);
    let opts = IngestOptions {
        query_model: a.pack.dir(model_dir.as_deref()),
        model_dir,
        cache_dir: Some(a.embed.cache_dir(&a.bundle)),
        threads: a.embed.threads()?,
        progress: !a.quiet && !a.json,
        strict: a.strict,
        quarantine: a.check.quarantine,
        ..IngestOptions::new(a.dir, &a.bundle)
    };
    let report = update_with(
        &opts,
        &UpdateOptions {
            allow_ai_draft: a.check.allow_ai_draft,
            max_deletions: a.max_deletions,
            allow_deletions: a.allow_deletions,
            keep: usize::from(a.keep),
            recalibrate: if a.recalibrate {
                Recalibrate::Always
            } else {
                Recalibrate::WhenMoved
            },
            // --recalibrate also lays the query model's rows out again from the corpus.
            row_map: if a.recalibrate {
                RowMapRule::Never
            } else {
                RowMapRule::WhenSmall
            },
        },
    )?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_update_report(&report, &a.bundle);
    }
    Ok(ExitCode::SUCCESS)
}

//! `jikji dedup`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use jikji_builder::dedup::{
    check_new_files, near_duplicate_pairs, Class, FlatVectors, LshParams, DUPLICATE, PARTIAL,
    SELF_DUPLICATE,
};

use crate::args::{EmbedArgs, ModelArgs};

/// Arguments of `jikji dedup`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder.
    bundle: PathBuf,
    /// Folder of new files to classify against the bundle (duplicate / partial / new).
    #[arg(long)]
    new: Option<PathBuf>,
    /// New chunk is a duplicate at or above this cosine (MiniLM 0.92 equivalent).
    #[arg(long, allow_negative_numbers = true, default_value_t = DUPLICATE)]
    duplicate: f32,
    /// New chunk is a partial duplicate at or above this cosine.
    #[arg(long, allow_negative_numbers = true, default_value_t = PARTIAL)]
    partial: f32,
    /// Within the bundle: report pairs at or above this cosine (MiniLM 0.95 equivalent).
    #[arg(long, allow_negative_numbers = true, default_value_t = SELF_DUPLICATE)]
    threshold: f32,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    embed: EmbedArgs,
    /// Show at most this many pairs / chunks in text output.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Classifies new files, or lists near-duplicate pairs within the bundle.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    match &a.new {
        Some(dir) => new_files(&a, dir),
        None => within(&a),
    }?;
    Ok(ExitCode::SUCCESS)
}

fn new_files(a: &Args, dir: &Path) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.partial <= a.duplicate,
        "--partial ({}) must not exceed --duplicate ({})",
        a.partial,
        a.duplicate
    );
    let cache = a.embed.cache_dir(&a.bundle);
    let out = check_new_files(
        &a.bundle,
        dir,
        &a.model.model,
        Some(&cache),
        a.embed.threads()?,
        a.duplicate,
        a.partial,
    )?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    let count = |c: Class| out.iter().filter(|n| n.class == c).count();
    for n in out.iter().filter(|n| n.class != Class::New).take(a.limit) {
        println!(
            "{:<9} {:.3}{}  {} [{}]  ≈ {} ({})",
            format!("{:?}", n.class).to_lowercase(),
            n.cosine,
            if n.exact { " exact" } else { "" },
            n.source,
            n.heading_path.join(" › "),
            n.match_source,
            n.match_id
        );
    }
    println!(
        "{} new chunk(s): {} duplicate (do not add), {} partial (review), {} new",
        out.len(),
        count(Class::Duplicate),
        count(Class::Partial),
        count(Class::New)
    );
    Ok(())
}

fn within(a: &Args) -> anyhow::Result<()> {
    let b = super::open_bundle(&a.bundle)?;
    let records = super::all_records(&b)?;
    let flat = b.vectors().map(FlatVectors::from_vectors);
    let t = std::time::Instant::now();
    let pairs = near_duplicate_pairs(&records, flat.as_ref(), a.threshold, LshParams::default());
    let secs = t.elapsed().as_secs_f64();
    if a.json {
        let v: Vec<_> = pairs
            .iter()
            .map(|p| {
                let (x, y) = (&records[p.a as usize], &records[p.b as usize]);
                serde_json::json!({"cosine": p.cosine, "exact": p.exact,
                    "a": {"id": x.id, "source": x.source, "heading_path": x.heading_path},
                    "b": {"id": y.id, "source": y.source, "heading_path": y.heading_path}})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for p in pairs.iter().take(a.limit) {
        let (x, y) = (&records[p.a as usize], &records[p.b as usize]);
        println!(
            "{:.3}{}  {} [{}] ({})\n        {} [{}] ({})",
            p.cosine,
            if p.exact { " exact" } else { "" },
            x.source,
            x.heading_path.join(" › "),
            x.id,
            y.source,
            y.heading_path.join(" › "),
            y.id
        );
    }
    if flat.is_none() {
        eprintln!("note: the bundle has no vectors; only exact duplicates were looked for");
    }
    println!(
        "{} pair(s) from different files at cosine ≥ {} among {} chunks ({secs:.2} s)",
        pairs.len(),
        a.threshold,
        records.len()
    );
    Ok(())
}

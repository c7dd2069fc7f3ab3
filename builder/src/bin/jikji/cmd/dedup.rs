//! `jikji dedup`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use jikji_builder::dedup::{
    check_new_files_with, near_duplicates, Class, FlatVectors, LshParams, Route, DUPLICATE,
    PARTIAL, SELF_DUPLICATE,
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
    /// With --new: find each new chunk's best match by the exact scan of every vector even
    /// when the bundle has a dense index. By default a bundle with one (every bundle from
    /// 100,000 chunks) is searched through it: the lists nearest the chunk, their rows
    /// scored exactly, more lists until the best cosine is stable and while it is within
    /// 0.05 under --partial or --duplicate (measured: the same class and best match as the
    /// exact scan for every new chunk, 6x less time at 100k chunks, 17-19x at 1M).
    #[arg(long)]
    exact: bool,
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

/// Classifies new files, or lists near-duplicate pairs within the bundle. Exit code 1 when
/// something was found (like `jikji check`): a pair within the bundle (duplicate or values
/// differing), or a new chunk that is not `new`.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let found = match &a.new {
        Some(dir) => new_files(&a, dir),
        None => within(&a),
    }?;
    Ok(if found {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints what two chunks disagree on.
fn print_differences(d: &[jikji_builder::conflicts::Difference], first: &str, second: &str) {
    for d in d {
        println!(
            "        values differ: {}: {} ({first}) vs {} ({second})",
            d.subject,
            d.newer.join(", "),
            d.older.join(", ")
        );
    }
}

fn new_files(a: &Args, dir: &Path) -> anyhow::Result<bool> {
    anyhow::ensure!(
        a.partial <= a.duplicate,
        "--partial ({}) must not exceed --duplicate ({})",
        a.partial,
        a.duplicate
    );
    let cache = a.embed.cache_dir(&a.bundle);
    let report = check_new_files_with(
        &a.bundle,
        dir,
        &a.model.model,
        Some(&cache),
        a.embed.threads()?,
        a.duplicate,
        a.partial,
        if a.exact {
            Route::Exact
        } else {
            Route::default()
        },
    )?;
    let out = &report.chunks;
    let w = report.work;
    eprintln!(
        "best matches: {}; {} lookups, {} rows scored{} in {:.0} ms",
        report.way,
        w.lookups,
        w.rows,
        if report.routed {
            format!(", {} lists probed ({} pages read)", w.lists, w.pages)
        } else {
            String::new()
        },
        report.classify_ms
    );
    let found = out.iter().any(|n| n.class != Class::New);
    if a.json {
        println!("{}", serde_json::to_string_pretty(out)?);
        return Ok(found);
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
        print_differences(&n.differences, "new", "bundle");
    }
    println!(
        "{} new chunk(s): {} duplicate (do not add), {} partial (review), {} conflict (similar, values differ: resolve), {} new",
        out.len(),
        count(Class::Duplicate),
        count(Class::Partial),
        count(Class::Conflict),
        count(Class::New)
    );
    Ok(found)
}

fn within(a: &Args) -> anyhow::Result<bool> {
    let b = super::open_bundle(&a.bundle)?;
    let records = super::all_records(&b)?;
    let flat = b.vectors().map(FlatVectors::from_vectors);
    let t = std::time::Instant::now();
    let near = near_duplicates(&records, flat.as_ref(), a.threshold, LshParams::default());
    let pairs = &near.pairs;
    let secs = t.elapsed().as_secs_f64();
    let found = !pairs.is_empty() || !near.conflicting.is_empty();
    if a.json {
        let side = |i: u32| {
            let x = &records[i as usize];
            serde_json::json!({"id": x.id, "source": x.source, "heading_path": x.heading_path, "updated": x.updated})
        };
        let v: Vec<_> = pairs
            .iter()
            .map(|p| serde_json::json!({"cosine": p.cosine, "exact": p.exact, "a": side(p.a), "b": side(p.b)}))
            .collect();
        // Pairs whose values differ are listed apart: conflicts, not duplicates.
        let c: Vec<_> = near
            .conflicting
            .iter()
            .map(|(p, d)| serde_json::json!({"cosine": p.cosine, "a": side(p.a), "b": side(p.b), "differences": d}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(
                &serde_json::json!({"duplicates": v, "values_differ": c})
            )?
        );
        return Ok(found);
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
    for (p, d) in near.conflicting.iter().take(a.limit) {
        let (x, y) = (&records[p.a as usize], &records[p.b as usize]);
        println!(
            "{:.3} NOT a duplicate, values differ  {} [{}] ({})\n        {} [{}] ({})",
            p.cosine,
            x.source,
            x.heading_path.join(" › "),
            x.id,
            y.source,
            y.heading_path.join(" › "),
            y.id
        );
        print_differences(d, &x.source, &y.source);
    }
    if flat.is_none() {
        eprintln!("note: the bundle has no vectors; only exact duplicates were looked for");
    }
    println!(
        "{} pair(s) from different files at cosine ≥ {} among {} chunks ({secs:.2} s); {} similar pair(s) whose values differ (conflicts, not duplicates)",
        pairs.len(),
        a.threshold,
        records.len(),
        near.conflicting.len()
    );
    Ok(found)
}

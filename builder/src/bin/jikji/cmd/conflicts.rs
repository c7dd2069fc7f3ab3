//! `jikji conflicts`.

use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::conflicts::{find_conflicts, ConflictOptions, SIMILAR, SIMILAR_CROSS};
use jikji_builder::dedup::{FlatVectors, LshParams};

/// Arguments of `jikji conflicts`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder.
    bundle: PathBuf,
    /// Compare same-language chunk pairs at or above this cosine.
    #[arg(long, allow_negative_numbers = true, default_value_t = SIMILAR)]
    similar: f32,
    /// Compare chunk pairs of different languages at or above this cosine (when they are
    /// each other's nearest neighbour across the two languages).
    #[arg(long, allow_negative_numbers = true, default_value_t = SIMILAR_CROSS)]
    similar_cross: f32,
    /// Show at most this many in text output.
    #[arg(long, default_value_t = 50)]
    limit: usize,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

/// Lists contradiction candidates; exit code 1 when there are any (like `jikji check`).
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let b = super::open_bundle(&a.bundle)?;
    let v = b.vectors().ok_or_else(|| {
        anyhow::anyhow!(
            "{}: no vectors (built with --no-embed); conflicts needs them",
            a.bundle.display()
        )
    })?;
    let records = super::all_records(&b)?;
    let flat = FlatVectors::from_vectors(v);
    let o = ConflictOptions {
        similar: a.similar,
        similar_cross: a.similar_cross,
        lsh: LshParams::default(),
    };
    let found = find_conflicts(&records, &flat, &o);
    let code = if found.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    };
    if a.json {
        println!("{}", serde_json::to_string_pretty(&found)?);
        return Ok(code);
    }
    for c in found.iter().take(a.limit) {
        println!(
            "cosine {:.3}{}; newer by {}\n  newer: {} [{}] updated {}\n  older: {} [{}] updated {}",
            c.cosine,
            if c.cross_language {
                format!(" ({} / {})", c.newer.lang, c.older.lang)
            } else {
                String::new()
            },
            c.newer_by,
            c.newer.source,
            c.newer.heading_path.join(" › "),
            c.newer.updated.as_deref().unwrap_or("?"),
            c.older.source,
            c.older.heading_path.join(" › "),
            c.older.updated.as_deref().unwrap_or("?"),
        );
        for d in &c.differences {
            println!(
                "  {}: {} (newer) vs {} (older)",
                d.subject,
                d.newer.join(", "),
                d.older.join(", ")
            );
        }
    }
    println!("{} contradiction candidate(s)", found.len());
    Ok(code)
}

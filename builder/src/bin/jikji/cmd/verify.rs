//! `jikji verify`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `jikji verify`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder.
    bundle: PathBuf,
    /// Print the report as JSON on stdout.
    #[arg(long)]
    json: bool,
}

/// Exit 0 when every page passed, 1 when one is damaged or missing (all of them named).
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    super::is_bundle_folder(&a.bundle)?;
    let r = jikji_builder::verify::verify(&a.bundle)
        .with_context(|| format!("verifying bundle {}", a.bundle.display()))?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&r)?);
    } else {
        for e in &r.errors {
            eprintln!("error: {e}");
        }
        for u in &r.unreferenced {
            eprintln!("note: p/{u}: not named by jikji.json (no reader asks for it)");
        }
        let what = if r.format == 2 { "pages" } else { "files" };
        if r.ok() {
            println!(
                "verified {} (format {}): {} {what}, {:.2} MB as stored, every one decoded and checked; parts cross-checked",
                r.bundle.display(),
                r.format,
                r.pages,
                r.stored_bytes as f64 / 1e6
            );
        } else {
            println!(
                "{}: {} of {} {what} damaged or missing",
                r.bundle.display(),
                r.errors.len(),
                r.pages
            );
        }
    }
    Ok(if r.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

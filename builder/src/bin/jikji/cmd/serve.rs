//! `jikji serve`.

use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::serve::{serve, ServeOptions};

use crate::args::ModelArgs;

/// Arguments of `jikji serve`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder.
    bundle: PathBuf,
    /// Address to listen on (port 0 picks a free port).
    #[arg(long, default_value = "127.0.0.1:8080")]
    addr: String,
    /// The page's folder: the page as scripts/build-js builds it from web/ (bundled, minified).
    #[arg(long, default_value = "pkg/web")]
    web: PathBuf,
    /// wasm-pack output folder.
    #[arg(long, default_value = "pkg")]
    pkg: PathBuf,
    #[command(flatten)]
    model: ModelArgs,
    /// Print one line per request to stderr (`request GET /bundle/jikji.json 200`).
    #[arg(long)]
    log_requests: bool,
}

/// Serves until killed.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let model = a.model.model;
    serve(&ServeOptions {
        addr: a.addr,
        web: a.web,
        pkg: a.pkg,
        bundle: a.bundle,
        model: model.exists().then_some(model),
        log_requests: a.log_requests,
    })?;
    Ok(ExitCode::SUCCESS)
}

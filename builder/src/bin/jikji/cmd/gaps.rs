//! `jikji gaps`.

use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::gaps::{
    append_run, default_history, last_run, print_run, read_queries, run_queries,
};
use jikji_engine::{Mode, SearchOptions};

use crate::args::{ClockArgs, ModeArg, ModelArgs};

/// Arguments of `jikji gaps`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder.
    bundle: PathBuf,
    /// Queries file: JSON lines {"query": "…", "min_score": 0.5} (optional "id", "mode").
    queries: PathBuf,
    /// Default mode for queries that do not name one.
    #[arg(long, value_enum, default_value_t = ModeArg::Hybrid)]
    mode: ModeArg,
    /// History file (JSON lines). Default: QUERIES without extension + `.history.jsonl`.
    #[arg(long)]
    history: Option<PathBuf>,
    /// A query whose best score fell by at least this much since the last run is a drop.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.2)]
    drop: f32,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    clock: ClockArgs,
    /// JSON output (the run record).
    #[arg(long)]
    json: bool,
}

/// Runs the core queries; exit code 1 on gaps or drops.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let qs = read_queries(&a.queries)?;
    let mode: Mode = a.mode.into();
    let mut engine = super::open_engine(&a.bundle)?;
    engine.set_search_options(SearchOptions {
        now_ms: Some(a.clock.now_ms()?),
        include_archived: false,
    });
    let needs_model = qs.iter().any(|q| {
        q.mode
            .as_deref()
            .map_or(mode != Mode::Bm25, |m| !m.eq_ignore_ascii_case("bm25"))
    });
    if needs_model {
        super::load_model(&mut engine, &a.model.model)?;
    }
    let history = a.history.unwrap_or_else(|| default_history(&a.queries));
    let prev = last_run(&history)?;
    let time = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let run = run_queries(&engine, &a.bundle, &qs, mode, a.drop, prev.as_ref(), time)?;
    append_run(&history, &run)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&run)?);
    } else {
        print_run(&run);
        eprintln!("appended to {}", history.display());
    }
    Ok(if run.gaps() + run.drops() > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

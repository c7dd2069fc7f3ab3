//! `jikji gaps`.

use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::gaps::{
    append_run, default_history, print_run, read_queries, run_queries, Accept, History, RunOptions,
    Thresholds,
};
use jikji_engine::{Mode, SearchOptions};

use crate::args::{ClockArgs, ModeArg, ModelArgs};

/// Arguments of `jikji gaps`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder.
    bundle: PathBuf,
    /// Queries file: JSON lines {"query": "…", "min_score": 0.5} (optional "id", "mode",
    /// "expect": source path, glob or doc_id, or a list of them).
    queries: PathBuf,
    /// Default mode for queries that do not name one.
    #[arg(long, value_enum, default_value_t = ModeArg::Hybrid)]
    mode: ModeArg,
    /// History file (JSON lines). Default: QUERIES without extension + `.history.jsonl`.
    #[arg(long)]
    history: Option<PathBuf>,
    /// A query whose best score fell by at least this much below its baseline or the
    /// previous run is a drop.
    #[arg(long, allow_negative_numbers = true, default_value_t = Thresholds::default().drop)]
    drop: f32,
    /// A query whose best score is at least this much below its baseline (and no drop) is
    /// a slide.
    #[arg(long, allow_negative_numbers = true, default_value_t = Thresholds::default().slide)]
    slide: f32,
    /// Pin this run as every query's baseline (accepts the current state).
    #[arg(long, conflicts_with = "accept")]
    set_baseline: bool,
    /// Accept the current state: `--accept` for every query, `--accept=ID,ID` for some.
    /// Their outcomes become their baseline; their drops and slides do not fail this run.
    #[arg(long, num_args = 0..=1, require_equals = true, value_delimiter = ',')]
    accept: Option<Vec<String>>,
    /// Also fail (exit 1) when scores are uncalibrated (raw scores against min_score).
    #[arg(long)]
    strict: bool,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    clock: ClockArgs,
    /// JSON output (the run record).
    #[arg(long)]
    json: bool,
}

/// Runs the core queries; exit code 1 on any alert (gap, wrong source, drop, slide not
/// accepted), or with --strict on uncalibrated scores.
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
    let past = History::read(&history)?;
    let accept = match (a.set_baseline, a.accept) {
        (true, _) => Accept::All,
        (false, Some(ids)) if ids.is_empty() => Accept::All,
        (false, Some(ids)) => {
            for id in &ids {
                anyhow::ensure!(
                    qs.iter().any(|q| q.key() == id),
                    "--accept {id:?}: no query with that id in {}",
                    a.queries.display()
                );
            }
            Accept::Ids(ids)
        }
        (false, None) => Accept::Nothing,
    };
    let time = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let thresholds = Thresholds {
        drop: a.drop,
        slide: a.slide,
    };
    let o = RunOptions {
        mode,
        thresholds,
        accept,
    };
    let run = run_queries(&engine, &a.bundle, &qs, &o, &past, time)?;
    append_run(&history, &run)?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&run)?);
    } else {
        print_run(&run);
        eprintln!("appended to {}", history.display());
    }
    let raw = !run.uncalibrated().is_empty();
    if a.json && raw {
        eprintln!("warning: uncalibrated scores (see \"calibrated\": false)");
    }
    Ok(if run.alerts() > 0 || (a.strict && raw) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

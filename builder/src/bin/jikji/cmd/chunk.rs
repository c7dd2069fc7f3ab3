//! `jikji chunk`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::chunker::report::{table, StatsBuilder};
use jikji_builder::chunker::{Limits, Sizer, Strategy, TokenLimit};
use jikji_builder::corpus::{scan, CheckOptions};
use jikji_builder::ingest::TokenSizer;

use crate::args::{ChunkingArgs, ModelArgs, StrategyArg};

/// `--strategy` of `jikji chunk`: one strategy or all of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Which {
    /// `fixed`.
    Fixed,
    /// `recursive`.
    Recursive,
    /// `heading`.
    Heading,
    /// `hierarchical` (default).
    Hierarchical,
    /// `parent-child`.
    ParentChild,
    /// Every strategy (with --report: one row each).
    All,
}

impl Which {
    fn strategies(self) -> Vec<StrategyArg> {
        use StrategyArg as S;
        match self {
            Which::Fixed => vec![S::Fixed],
            Which::Recursive => vec![S::Recursive],
            Which::Heading => vec![S::Heading],
            Which::Hierarchical => vec![S::Hierarchical],
            Which::ParentChild => vec![S::ParentChild],
            Which::All => vec![
                S::Fixed,
                S::Recursive,
                S::Heading,
                S::Hierarchical,
                S::ParentChild,
            ],
        }
    }
}

/// Arguments of `jikji chunk`.
#[derive(clap::Args)]
pub struct Args {
    /// Corpus folder.
    dir: PathBuf,
    #[command(flatten)]
    chunking: ChunkingArgs,
    /// A strategy, or `all` (with --report: one row per strategy).
    #[arg(long, value_enum, default_value_t = Which::Hierarchical)]
    strategy: Which,
    #[command(flatten)]
    model: ModelArgs,
    /// Characters only, no token limit (as a `--no-embed` build).
    #[arg(long)]
    no_embed: bool,
    /// Print the comparison table instead of the chunks.
    #[arg(long)]
    report: bool,
    /// With --report: JSON instead of a markdown table.
    #[arg(long)]
    json: bool,
}

/// Chunks every file that passes the corpus checks with each strategy and prints the
/// chunks (JSON lines) or the comparison table.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let params = a.chunking.params()?;
    let strategies: Vec<Strategy> = a
        .strategy
        .strategies()
        .into_iter()
        .map(|s| a.chunking.strategy(s))
        .collect::<anyhow::Result<_>>()?;
    let model = &a.model.model;
    let sizer = if a.no_embed {
        None
    } else {
        anyhow::ensure!(
            model.join("tokenizer.json").exists(),
            "{}: no tokenizer.json; run scripts/setup-model, pass --model DIR, or count characters only with --no-embed",
            model.display()
        );
        Some(TokenSizer::load(model)?)
    };
    let sizer = sizer.as_ref();
    let scanned = scan(&a.dir, CheckOptions::default())?;
    if scanned.errors() > 0 {
        eprintln!(
            "{} file(s) left out by corpus errors (see `jikji check {}`)",
            scanned.rejected.len(),
            a.dir.display()
        );
    }
    let limits = Limits {
        params,
        tokens: sizer.map(|s| TokenLimit {
            sizer: s as &dyn Sizer,
            max: jikji_embed::MAX_TOKENS,
        }),
    };
    let count = sizer.map(|s| (s as &dyn Sizer, jikji_embed::MAX_TOKENS));
    let mut rows = Vec::new();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    for strategy in &strategies {
        let chunker = strategy.chunker();
        let mut stats = StatsBuilder::new(chunker.name(), count);
        for f in &scanned.files {
            let body = &f.text[f.body_byte..];
            let chunked = strategy.chunk_body(body, &limits);
            if a.report {
                stats.add(body, &chunked);
                continue;
            }
            for c in &chunked.chunks {
                let line = serde_json::json!({
                    "id": jikji_builder::ingest::chunk_id(&f.rel, c.section, c.position),
                    "strategy": chunker.name(),
                    "source": f.rel,
                    "section": c.section,
                    "position": c.position,
                    "heading_path": c.heading_path,
                    "start": f.body_char + c.start,
                    "end": f.body_char + c.end,
                    "chars": c.text.chars().count(),
                    "tokens": sizer.map(|s| s.len(&c.text)),
                    "parent": c.parent.map(|i| {
                        let p = &chunked.parents[i];
                        serde_json::json!({"start": f.body_char + p.start, "end": f.body_char + p.end})
                    }),
                    "text": c.text,
                });
                if let Err(e) = writeln!(out, "{line}") {
                    if e.kind() == std::io::ErrorKind::BrokenPipe {
                        return Ok(ExitCode::SUCCESS);
                    }
                    return Err(e.into());
                }
            }
        }
        rows.push(stats.finish());
    }
    if a.report {
        if a.json {
            writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        } else {
            writeln!(
                out,
                "{}: {} files, chunk size {} chars, overlap {}, {}",
                a.dir.display(),
                scanned.files.len(),
                params.size,
                params.overlap,
                match sizer {
                    Some(_) => format!("≤ {} model tokens", jikji_embed::MAX_TOKENS),
                    None => "chars only".to_string(),
                }
            )?;
            write!(out, "{}", table(&rows))?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

//! `jikji eval`.

use std::path::PathBuf;
use std::process::ExitCode;

use jikji_builder::eval::{run as run_eval, EvalOptions};
use jikji_engine::{Expansion, Fusion, Mode};

use crate::args::{
    parse_fusion, ChunkingArgs, ClockArgs, EmbedArgs, FilterArgs, IndexArgs, ModeArg, ModelArgs,
    StrategyArg,
};

/// Arguments of `jikji eval`.
#[derive(clap::Args)]
pub struct Args {
    /// Folder with corpus.jsonl, queries.jsonl, qrels.tsv (with --bundle: queries.jsonl
    /// and qrels.tsv naming the bundle's source paths or doc_ids).
    dir: PathBuf,
    /// Evaluate this existing bundle instead of building one from DIR/corpus.jsonl: the
    /// qrels name source paths (as search results show them) or doc_ids; archived versions
    /// and expired files are left out as `jikji search` leaves them out.
    #[arg(long, value_name = "BUNDLE")]
    bundle: Option<PathBuf>,
    /// With --bundle: the clock for expiry (default: now).
    #[command(flatten)]
    clock: ClockArgs,
    /// Hits of this tier win ties (see `jikji search --prefer-tier`).
    #[arg(long, value_name = "TIER")]
    prefer_tier: Option<u32>,
    /// With --bundle: search only chunks these filters allow (see `jikji search --tier`).
    #[command(flatten)]
    filter: FilterArgs,
    /// Comma-separated modes (dense and hybrid embed the whole corpus first).
    #[arg(long, value_enum, value_delimiter = ',', default_value = "bm25")]
    modes: Vec<ModeArg>,
    #[command(flatten)]
    model: ModelArgs,
    #[command(flatten)]
    embed: EmbedArgs,
    /// Evaluate only the first N judged queries.
    #[arg(long)]
    limit: Option<usize>,
    /// Queries file to use instead of DIR/queries.jsonl (e.g. another language's queries
    /// with the same ids, for cross-lingual retrieval).
    #[arg(long)]
    queries: Option<PathBuf>,
    /// Treat every query as having no answer in the corpus (with --queries from another set,
    /// or, with --bundle, DIR/queries.jsonl, DIR/qrels.tsv then optional): runs all queries
    /// and reports where their top-1 scores fall, i.e. how often a query the bundle cannot
    /// answer still gets a "reliable" (>= 0.6) top hit.
    #[arg(long)]
    unanswerable: bool,
    /// Comma-separated hybrid fusions to evaluate: rrf, weighted, weighted:W.
    #[arg(long, value_delimiter = ',', default_value = "weighted", value_parser = parse_fusion)]
    fusion: Vec<Fusion>,
    /// Write a TREC run file (qid Q0 docid rank score jikji-MODE).
    #[arg(long)]
    run: Option<PathBuf>,
    /// Write each query's top 30 hits (docid, calibrated and raw score, source, grade, query
    /// coverage [terms, idf, unknown] or null) as JSON lines, for score-calibration studies
    /// (`scripts/study-bands.py`).
    #[arg(long)]
    hits_out: Option<PathBuf>,
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// Exit with status 1 when a readers'-protocol check is missed (a cited top hit wrong too
    /// often, right answers under 0.3, ECE over 0.10, unanswerable queries reaching 0.6),
    /// after printing the report: for CI jobs that gate a bundle on its score bands.
    #[arg(long)]
    fail_on_miss: bool,
    #[command(flatten)]
    index: IndexArgs,
    #[command(flatten)]
    chunking: ChunkingArgs,
    /// Chunking strategy.
    #[arg(long, value_enum, default_value_t = StrategyArg::Hierarchical)]
    strategy: StrategyArg,
    /// Weight of prefix expansions of the last query word (0 = off).
    #[arg(long, allow_negative_numbers = true, default_value_t = Expansion::default().prefix)]
    prefix_weight: f32,
    /// Weight of typo (Levenshtein) expansions (0 = off).
    #[arg(long, allow_negative_numbers = true, default_value_t = Expansion::default().fuzzy)]
    fuzzy_weight: f32,
    /// Weight of Hangul ↔ Hanja expansions (0 = off).
    #[arg(long, allow_negative_numbers = true, default_value_t = Expansion::default().hanja)]
    hanja_weight: f32,
    /// Korean query word normalisation: each of a word's n terms weighs n^-α (0 = off).
    #[arg(long, allow_negative_numbers = true, default_value_t = Expansion::default().hangul_norm)]
    hangul_norm: f32,
    /// Embed the queries with this query-model pack folder (`jikji model-pack`, e.g.
    /// models/e5-small-pack: the browser's tokenizer and forward pass) instead of tract; the
    /// corpus is still embedded with --model. Refused when it stands for another model.
    #[arg(long, value_name = "DIR")]
    query_model: Option<PathBuf>,
    /// Dense index lists per dense query (default: the bundle's nprobe); with a dense index
    /// (`--dense-index ivf`) every dense and hybrid row also reports recall@10 against the
    /// exact scan, bytes and rounds.
    #[arg(long)]
    nprobe: Option<usize>,
    /// Oversampling of a binary dense index's int8 rescoring (default: the bundle's
    /// `pages.ivf.rescore`; `--dense-index ivf-binary`); 0: none (binary-only ranking).
    #[arg(long)]
    rescore: Option<usize>,
}

/// Runs the set and prints the report.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    let opts = EvalOptions {
        modes: a.modes.iter().map(|&m| Mode::from(m)).collect(),
        fusions: a.fusion,
        model: a.model.model,
        // The eval's bundle is a temp folder: the cache defaults to the current folder.
        cache: a
            .embed
            .cache
            .clone()
            .unwrap_or_else(|| PathBuf::from(jikji_builder::ingest::CACHE_DIR_NAME)),
        threads: a.embed.threads()?,
        limit: a.limit,
        queries: a.queries,
        unanswerable: a.unanswerable,
        run: a.run,
        hits_out: a.hits_out,
        progress: !a.json,
        settings: a.index.settings(&a.chunking, a.strategy, false)?,
        lang_means: a.index.lang_means.clone(),
        expansion: Expansion {
            prefix: a.prefix_weight,
            fuzzy: a.fuzzy_weight,
            hanja: a.hanja_weight,
            hangul_norm: a.hangul_norm,
        },
        // An eval set's own corpus has no `expires`; a bundle is searched as of now.
        now_ms: match &a.bundle {
            Some(_) => Some(a.clock.now_ms()?),
            None => None,
        },
        prefer_tier: a.prefer_tier,
        filters: a.filter.filters()?,
        query_model: a.query_model,
        nprobe: a.nprobe,
        rescore: a.rescore,
    };
    anyhow::ensure!(
        a.bundle.is_some() || opts.filters.is_empty(),
        "--tier, --lang and --folder filter an existing bundle: give it with --bundle"
    );
    anyhow::ensure!(a.nprobe != Some(0), "--nprobe must be at least 1");
    let report = match &a.bundle {
        Some(b) => {
            super::is_bundle_folder(b)?;
            jikji_builder::eval::run_bundle(b, &a.dir, &opts)?
        }
        None => run_eval(&a.dir, &opts)?,
    };
    if a.json {
        for w in &report.warnings {
            eprintln!("warning: {w}");
        }
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.to_text());
    }
    if a.fail_on_miss && report.protocol_missed > 0 {
        eprintln!(
            "jikji eval --fail-on-miss: {} of {} readers'-protocol checks missed",
            report.protocol_missed, report.protocol_checks
        );
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}

//! `jikji search`.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use jikji_engine::{Fusion, Mode, SearchOptions, SearchResult};

use crate::args::{parse_fusion, ClockArgs, FilterArgs, ModeArg, ModelArgs};

/// Arguments of `jikji search`.
#[derive(clap::Args)]
pub struct Args {
    /// Bundle folder.
    bundle: PathBuf,
    /// Queries.
    #[arg(required_unless_present = "queries_file")]
    queries: Vec<String>,
    /// Results per query.
    #[arg(long, default_value_t = 10)]
    top_k: usize,
    /// Ranking mode. Default: hybrid when the bundle has vectors, else bm25.
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Hybrid fusion: rrf, weighted (the bundle's dense weight) or weighted:W (0 ≤ W ≤ 1).
    /// Default: weighted when the bundle is calibrated, else rrf.
    #[arg(long, value_parser = parse_fusion)]
    fusion: Option<Fusion>,
    /// Drop hits whose score is below this. On a calibrated bundle scores are in 0..1:
    /// ≥ 0.6 reliable, 0.3–0.6 use with care, < 0.3 noise; an uncalibrated bundle (built
    /// before calibration, or too small to calibrate) reports raw scores, filtered as such.
    #[arg(long, allow_negative_numbers = true, default_value_t = 0.0)]
    min_score: f32,
    /// JSON output: an array with one {query, mode, hits} object per query.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    model: ModelArgs,
    /// Embed queries with this query-model pack folder (`jikji model-pack`, e.g.
    /// models/e5-small-pack: the browser's tokenizer and forward pass) instead of tract;
    /// refused when it stands for another model than the bundle's.
    #[arg(long, value_name = "DIR")]
    query_model: Option<PathBuf>,
    /// Also return archived chunks (older versions of a document).
    #[arg(long)]
    include_archived: bool,
    /// Hits of this tier (the tier folder's number: `1. api` → 1) win ties: among hits whose
    /// scores are within 0.01 of the best of their group, this tier's come first. Scores are
    /// unchanged; only the order within a tie (README "Trust signals").
    #[arg(long, value_name = "TIER")]
    prefer_tier: Option<u32>,
    #[command(flatten)]
    clock: ClockArgs,
    #[command(flatten)]
    filter: FilterArgs,
    /// Also run the queries of this file (JSON lines with a `text` field, as the eval sets'
    /// `queries.jsonl`), after those given as arguments.
    #[arg(long, value_name = "FILE")]
    queries_file: Option<std::path::PathBuf>,
    /// Print to stderr, per query, what a browser would fetch from this paged bundle with
    /// the pages of earlier queries cached: rounds after the entry, pages and bytes (pages
    /// as stored), then the first query's bytes and the mean and median of later ones.
    #[arg(long)]
    fetch_stats: bool,
    /// With --fetch-stats: start every query with an empty page cache (each one is a
    /// visitor's first query).
    #[arg(long, requires = "fetch_stats")]
    cold: bool,
    /// Dense index lists to scan per dense query (default: the bundle's `pages.ivf.nprobe`;
    /// clamped to 1..=nlist). More lists: closer to the exact scan, more bytes.
    #[arg(long)]
    nprobe: Option<usize>,
    /// Oversampling of a binary dense index's int8 rescoring (default: the bundle's
    /// `pages.ivf.rescore`): `RESCORE · min(top-k, 10)` best estimates get their int8 rows;
    /// 0: none (binary-only ranking).
    #[arg(long)]
    rescore: Option<usize>,
    /// Scan every vector even when the bundle has a dense index (the exact reference).
    #[arg(long)]
    exact_dense: bool,
}

/// Runs every query and prints the results.
pub fn run(a: Args) -> anyhow::Result<ExitCode> {
    anyhow::ensure!(a.top_k > 0, "--top-k must be at least 1");
    if let Some(i) = a.queries.iter().position(|q| q.trim().is_empty()) {
        // An empty query matched nothing in BM25 but gave ten dense hits of the empty
        // string's embedding in dense and hybrid (regression: empty_query_gave_hits).
        anyhow::bail!("query {} is empty: give words to search for", i + 1);
    }
    let mut engine = super::open_engine(&a.bundle)?;
    anyhow::ensure!(
        a.min_score.is_finite() && a.min_score >= 0.0,
        "--min-score must be a number ≥ 0, got {}",
        a.min_score
    );
    anyhow::ensure!(
        engine.bundle().manifest().calibration.is_none() || a.min_score <= 1.0,
        "--min-score {}: {} is calibrated, so its scores lie in [0, 1] \
         (≥ 0.6 reliable, 0.3–0.6 use with care, < 0.3 noise)",
        a.min_score,
        a.bundle.display()
    );
    let mode: Mode = match a.mode {
        Some(m) => m.into(),
        None if engine.bundle().has_vectors() => Mode::Hybrid,
        None => Mode::Bm25,
    };
    if let Some(f) = a.fusion {
        engine.set_fusion(f);
    }
    engine.set_min_score(a.min_score);
    engine.set_prefer_tier(a.prefer_tier);
    engine.set_filters(a.filter.filters()?);
    anyhow::ensure!(a.nprobe != Some(0), "--nprobe must be at least 1");
    engine.set_nprobe(a.nprobe);
    engine.set_rescore(a.rescore);
    engine.set_exact_dense(a.exact_dense);
    engine.set_search_options(SearchOptions {
        now_ms: Some(a.clock.now_ms()?),
        include_archived: a.include_archived,
    });
    if mode != Mode::Bm25 && !engine.bundle().has_vectors() {
        // Say so before looking for a model the bundle could not use anyway.
        return Err(jikji_engine::EngineError::NoVectors(mode).into());
    }
    let pack = match &a.query_model {
        Some(dir) if mode != Mode::Bm25 => Some(
            jikji_builder::query_model::PackEmbedder::open(dir, &engine, Some(&a.bundle))
                .with_context(|| format!("--query-model {}", dir.display()))?,
        ),
        _ => None,
    };
    if mode != Mode::Bm25 && pack.is_none() {
        super::load_model(&mut engine, &a.model.model)?;
    }
    let mut queries = a.queries.clone();
    if let Some(f) = &a.queries_file {
        let text =
            std::fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let v: serde_json::Value = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not JSON", f.display(), i + 1))?;
            let t = v["text"]
                .as_str()
                .with_context(|| format!("{}:{}: no \"text\" string", f.display(), i + 1))?;
            anyhow::ensure!(
                !t.trim().is_empty(),
                "{}:{}: the query text is empty",
                f.display(),
                i + 1
            );
            queries.push(t.to_string());
        }
    }
    anyhow::ensure!(!queries.is_empty(), "no queries given");
    if a.cold {
        engine.set_cache_budget(0);
    }
    let mut results = Vec::new();
    let mut fetched = Vec::new();
    for q in &queries {
        results.push(match &pack {
            Some(p) => {
                let v = p.embed_query(q)?;
                engine.search_with_vector(q, Some(&v), mode, a.top_k)?
            }
            None => engine.search(q, mode, a.top_k)?,
        });
        let f = engine.last_fetch();
        if a.fetch_stats {
            let kinds: Vec<String> = f
                .by_kind
                .iter()
                .map(|(k, (n, b))| format!("{k}:{n}/{b}"))
                .collect();
            eprintln!(
                "fetch: rounds {} pages {} bytes {} [{}] ({q}) rounds: [{}]",
                f.rounds,
                f.pages,
                f.bytes,
                kinds.join(" "),
                f.per_round.join("] [")
            );
        }
        fetched.push(f.bytes);
    }
    if a.fetch_stats {
        let entry = std::fs::metadata(a.bundle.join(jikji_format::paged::ENTRY_FILE))
            .map(|m| m.len())
            .unwrap_or(0);
        let later = if a.cold { &fetched[..] } else { &fetched[1..] };
        let mean = if later.is_empty() {
            0.0
        } else {
            later.iter().sum::<u64>() as f64 / later.len() as f64
        };
        let mut sorted = later.to_vec();
        sorted.sort_unstable();
        let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
        eprintln!(
            "fetch summary: entry {entry} B; first query {} B of pages; {} {} queries: mean {:.0} B, median {median} B",
            fetched[0],
            if a.cold { "all" } else { "later" },
            later.len(),
            mean
        );
    }
    super::quiet_pipe(print_results(&results, a.json))?;
    Ok(ExitCode::SUCCESS)
}

fn print_results(results: &[SearchResult], json: bool) -> std::io::Result<()> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, results)?;
        writeln!(out)?;
        return Ok(());
    }
    for r in results {
        let how = match (r.mode, r.fusion) {
            (Mode::Hybrid, None) => " — dense only: no word of the query is in the bundle",
            _ => "",
        };
        let raw = if r.calibrated { "" } else { ", raw scores" };
        writeln!(out, "# {} ({}{raw}{how})", r.query, r.mode)?;
        if r.hits.is_empty() {
            writeln!(out, "  no results")?;
        }
        for h in &r.hits {
            let tier = h.tier.map(|t| t.to_string()).unwrap_or_else(|| "-".into());
            // Tags a reader must see without --json: an older version, an AI-written draft.
            let mut tags = String::new();
            if h.archived {
                tags.push_str("  (archived: an older version)");
            }
            if h.provenance.as_deref() == Some("ai-draft") {
                tags.push_str("  (ai-draft)");
            }
            // The heading path in brackets, when the chunk has one (no empty `[]`).
            let heading = if h.heading_path.is_empty() {
                String::new()
            } else {
                format!("  [{}]", h.heading_path.join(" › "))
            };
            writeln!(
                out,
                "{:>3}. {:.4}  {}{heading}  tier {}  {}{tags}",
                h.rank, h.score, h.source, tier, h.lang
            )?;
            if let Some(u) = &h.source_url {
                writeln!(out, "     {u}")?;
            }
            // A known contradiction candidate (recorded at build/update time).
            for c in &h.conflicts {
                let which = match c.newer.as_str() {
                    "this" => "this one is newer",
                    "other" => "the other is newer",
                    _ => "newer unknown",
                };
                writeln!(
                    out,
                    "     CONFLICT with {}: {} {} here vs {} there ({which})",
                    c.source,
                    c.subject,
                    c.this.join(", "),
                    c.other.join(", ")
                )?;
            }
            let snippet: String = h
                .text
                .chars()
                .take(200)
                .collect::<String>()
                .replace('\n', " ");
            let more = if h.text.chars().count() > 200 {
                "…"
            } else {
                ""
            };
            writeln!(out, "     {snippet}{more}")?;
        }
        writeln!(out)?;
    }
    Ok(())
}

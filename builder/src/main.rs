//! `jikji`: build a search bundle from a corpus folder, search it, serve the web page.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Parser, Subcommand};
use jikji_builder::build::{build, print_report, BuildOptions};
use jikji_builder::chunker::{ChunkParams, Strategy, STRATEGY_NAMES};
use jikji_builder::corpus::{expiry_findings, quarantine, scan, CheckOptions};
use jikji_builder::serve::{serve, ServeOptions};
use jikji_builder::update::{print_update_report, update, UpdateOptions};
use jikji_engine::{Engine, Expansion, Fusion, Mode, SearchOptions};
use jikji_format::analyzer::AnalyzerOptions;
use jikji_format::Bm25Params;

#[derive(Parser)]
#[command(
    name = "jikji",
    version,
    about = "Offline search for books: build static bundles, search them natively or in the browser"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

const DEFAULT_MODEL: &str = "models/e5-small";

#[derive(clap::Args)]
struct CheckArgs {
    /// Include files whose front matter says `provenance: ai-draft` (tagged in results).
    #[arg(long)]
    allow_ai_draft: bool,
    /// Copy files with errors into this folder (originals are never moved or deleted).
    #[arg(long)]
    quarantine: Option<PathBuf>,
}

/// Analyzer switches of `jikji build` and `jikji eval` (recorded in the manifest).
#[derive(clap::Args)]
struct AnalyzerArgs {
    /// Do not stem English words (Snowball English stemmer is on by default).
    #[arg(long)]
    no_stem: bool,
    /// Drop English stopwords (Lucene's 33-word list).
    #[arg(long)]
    stopwords: bool,
    /// Do not add the particle-stripped lemma of Korean words as a term.
    #[arg(long)]
    no_korean_particles: bool,
    /// Do not fold Traditional Chinese characters to Simplified.
    #[arg(long)]
    no_fold_chinese: bool,
    /// Index Han/kana runs by bigrams only (no character unigrams).
    #[arg(long)]
    no_han_unigrams: bool,
    /// Also index each Korean word longer than two syllables whole (analyzer version 1 did).
    #[arg(long)]
    korean_whole_words: bool,
    /// Also index the bigram that joins a Korean stem to its stripped particle (`트가` of
    /// `앙투아네트가`; off by default, measured to hurt).
    #[arg(long)]
    korean_particle_bigrams: bool,
    /// Do not write the Hangul ↔ Hanja reading table (hanja.fst) for Han/Hangul corpora.
    #[arg(long)]
    no_hanja: bool,
    /// BM25 term-frequency saturation k1 (recorded in the bundle's manifest).
    #[arg(long, default_value_t = Bm25Params::default().k1)]
    k1: f32,
    /// BM25 length normalisation b, 0 (none) to 1 (full).
    #[arg(long, default_value_t = Bm25Params::default().b)]
    b: f32,
}

impl AnalyzerArgs {
    fn options(&self) -> AnalyzerOptions {
        AnalyzerOptions {
            stem: !self.no_stem,
            stopwords: self.stopwords,
            korean_particles: !self.no_korean_particles,
            fold_chinese: !self.no_fold_chinese,
            korean_whole_words: self.korean_whole_words,
            han_unigrams: !self.no_han_unigrams,
            korean_particle_bigrams: self.korean_particle_bigrams,
        }
    }

    /// BM25 parameters; errors on k1 < 0 or b outside [0, 1].
    fn bm25(&self) -> anyhow::Result<Bm25Params> {
        anyhow::ensure!(
            self.k1.is_finite() && self.k1 >= 0.0,
            "--k1 must be a number ≥ 0, got {}",
            self.k1
        );
        anyhow::ensure!(
            (0.0..=1.0).contains(&self.b),
            "--b must be in [0, 1], got {}",
            self.b
        );
        Ok(Bm25Params {
            k1: self.k1,
            b: self.b,
        })
    }
}

#[derive(clap::Args)]
struct ChunkingArgs {
    /// Chunking strategy: fixed, recursive, heading, hierarchical or parent-child.
    #[arg(long, default_value = "hierarchical")]
    strategy: String,
    /// parent-child: largest parent section in characters (default 4 × --chunk-size).
    #[arg(long)]
    parent_size: Option<usize>,
}

impl ChunkingArgs {
    fn strategy(&self, name: &str, chunk_size: usize) -> anyhow::Result<Strategy> {
        let parent_size = self.parent_size.unwrap_or(4 * chunk_size);
        if parent_size < chunk_size {
            anyhow::bail!(
                "--parent-size ({parent_size}) must be at least --chunk-size ({chunk_size})"
            );
        }
        Strategy::parse(name, parent_size).map_err(anyhow::Error::msg)
    }
}

#[derive(Subcommand)]
enum Cmd {
    /// Chunk a corpus folder without building: print the chunks (JSON lines) or, with
    /// --report, compare strategies (chunk count, lengths in chars and model tokens, code
    /// blocks and tables intact, heading context, duplicated text from overlap).
    Chunk {
        /// Corpus folder.
        dir: PathBuf,
        /// Maximum chunk length in characters.
        #[arg(long, default_value_t = 512)]
        chunk_size: usize,
        /// Characters repeated from the end of the previous chunk.
        #[arg(long, default_value_t = 64)]
        overlap: usize,
        /// A strategy name, or `all` (with --report: one row per strategy).
        #[arg(long, default_value = "hierarchical")]
        strategy: String,
        /// parent-child: largest parent section in characters (default 4 × --chunk-size).
        #[arg(long)]
        parent_size: Option<usize>,
        /// Model folder whose tokenizer.json limits and counts tokens, as `jikji build` does.
        #[arg(long, env = "JIKJI_MODEL_DIR", default_value = DEFAULT_MODEL)]
        model: PathBuf,
        /// Characters only, no token limit (as a `--no-embed` build).
        #[arg(long)]
        no_embed: bool,
        /// Print the comparison table instead of the chunks.
        #[arg(long)]
        report: bool,
        /// With --report: JSON instead of a markdown table.
        #[arg(long)]
        json: bool,
    },
    /// Build a bundle from a corpus folder (.md / .txt files, tier folders like `1. name`).
    Build {
        /// Corpus folder.
        dir: PathBuf,
        /// Bundle folder to write (replaced atomically; the previous one is kept as BUNDLE.prev).
        #[arg(long)]
        out: PathBuf,
        /// Maximum chunk length in characters (Unicode scalar values).
        #[arg(long, default_value_t = 512)]
        chunk_size: usize,
        /// Characters repeated from the end of the previous chunk of the same section.
        #[arg(long, default_value_t = 64)]
        overlap: usize,
        #[command(flatten)]
        chunking: ChunkingArgs,
        /// Model folder with model.onnx and tokenizer.json (made by scripts/setup-model).
        #[arg(long, env = "JIKJI_MODEL_DIR", default_value = DEFAULT_MODEL)]
        model: PathBuf,
        /// Build a BM25-only bundle (no vectors; dense and hybrid search unavailable).
        #[arg(long)]
        no_embed: bool,
        /// Embedding cache folder (vectors keyed by chunk-text hash). Default: `.jikji-cache` beside the bundle.
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Embedding threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Print the summary as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
        #[command(flatten)]
        check: CheckArgs,
        /// Fail on any corpus error instead of building from the good files.
        #[arg(long)]
        strict: bool,
        #[command(flatten)]
        analyzer: AnalyzerArgs,
    },
    /// Check a corpus folder: sources, provenance, encoding, structure, expiry. Exit code 1 on errors.
    Check {
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
        /// The clock for expiry (ISO 8601; default: now).
        #[arg(long)]
        now: Option<String>,
    },
    /// Update a bundle from its corpus folder: re-chunk and re-embed only new and changed
    /// files, drop deleted ones, retire older versions; written atomically.
    Update {
        /// Bundle folder (made by `jikji build`; replaced atomically, the old one kept as BUNDLE.prev).
        bundle: PathBuf,
        /// Corpus folder.
        dir: PathBuf,
        /// Model folder, to embed new chunk texts.
        #[arg(long, env = "JIKJI_MODEL_DIR", default_value = DEFAULT_MODEL)]
        model: PathBuf,
        /// Embedding cache folder for new chunks. Default: `.jikji-cache` beside the bundle.
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Embedding threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
        /// Print the report as JSON on stdout.
        #[arg(long)]
        json: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
        #[command(flatten)]
        check: CheckArgs,
        /// Fail on any corpus error instead of updating from the good files.
        #[arg(long)]
        strict: bool,
    },
    /// Search a bundle with one or more queries.
    Search {
        /// Bundle folder.
        bundle: PathBuf,
        /// Queries.
        #[arg(required = true)]
        queries: Vec<String>,
        /// Results per query.
        #[arg(long, default_value_t = 10)]
        top_k: usize,
        /// bm25, dense or hybrid (fusion of both, see --fusion). Default: hybrid when the
        /// bundle has vectors, else bm25.
        #[arg(long)]
        mode: Option<String>,
        /// Hybrid fusion: rrf, weighted (the bundle's dense weight) or weighted:W (0 ≤ W ≤ 1).
        /// Default: weighted when the bundle is calibrated, else rrf.
        #[arg(long)]
        fusion: Option<String>,
        /// Drop hits whose score is below this. On a calibrated bundle scores are in 0..1:
        /// ≥ 0.6 reliable, 0.3–0.6 use with care, < 0.3 noise; an uncalibrated bundle (built
        /// before calibration, or too small to calibrate) reports raw scores, filtered as such.
        #[arg(long, default_value_t = 0.0)]
        min_score: f32,
        /// JSON output: an array with one {query, mode, hits} object per query.
        #[arg(long)]
        json: bool,
        /// Model folder (for dense and hybrid).
        #[arg(long, env = "JIKJI_MODEL_DIR", default_value = DEFAULT_MODEL)]
        model: PathBuf,
        /// Also return archived chunks (older versions of a document).
        #[arg(long)]
        include_archived: bool,
        /// The clock for expiry filtering (ISO 8601; default: now). Chunks whose `expires` is at or before it are left out.
        #[arg(long)]
        now: Option<String>,
    },
    /// Find duplicates: of new files against the bundle (--new DIR), or between chunks of
    /// different files within the bundle. Thresholds are E5 cosines (see README).
    Dedup {
        /// Bundle folder.
        bundle: PathBuf,
        /// Folder of new files to classify against the bundle (duplicate / partial / new).
        #[arg(long)]
        new: Option<PathBuf>,
        /// New chunk is a duplicate at or above this cosine (MiniLM 0.92 equivalent).
        #[arg(long, default_value_t = jikji_builder::dedup::DUPLICATE)]
        duplicate: f32,
        /// New chunk is a partial duplicate at or above this cosine.
        #[arg(long, default_value_t = jikji_builder::dedup::PARTIAL)]
        partial: f32,
        /// Within the bundle: report pairs at or above this cosine (MiniLM 0.95 equivalent).
        #[arg(long, default_value_t = jikji_builder::dedup::SELF_DUPLICATE)]
        threshold: f32,
        /// Model folder (to embed new files).
        #[arg(long, env = "JIKJI_MODEL_DIR", default_value = DEFAULT_MODEL)]
        model: PathBuf,
        /// Embedding cache folder. Default: `.jikji-cache` beside the bundle.
        #[arg(long)]
        cache: Option<PathBuf>,
        /// Show at most this many pairs / chunks in text output.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Run core queries; report gaps (best score below the expected minimum) and sharp drops
    /// since the last run; append the run to a history file. Exit code 1 on gaps or drops.
    Gaps {
        /// Bundle folder.
        bundle: PathBuf,
        /// Queries file: JSON lines {"query": "…", "min_score": 0.5} (optional "id", "mode").
        queries: PathBuf,
        /// Default mode for queries that do not name one.
        #[arg(long, default_value = "hybrid")]
        mode: String,
        /// History file (JSON lines). Default: QUERIES without extension + `.history.jsonl`.
        #[arg(long)]
        history: Option<PathBuf>,
        /// A query whose best score fell by at least this much since the last run is a drop.
        #[arg(long, default_value_t = 0.2)]
        drop: f32,
        /// Model folder (for dense and hybrid).
        #[arg(long, env = "JIKJI_MODEL_DIR", default_value = DEFAULT_MODEL)]
        model: PathBuf,
        /// The clock for expiry filtering (ISO 8601; default: now).
        #[arg(long)]
        now: Option<String>,
        /// JSON output (the run record).
        #[arg(long)]
        json: bool,
    },
    /// List contradiction candidates: highly similar chunks of different sources that state
    /// different numbers, dates or versions of the same thing; newest source first.
    Conflicts {
        /// Bundle folder.
        bundle: PathBuf,
        /// Compare chunk pairs at or above this cosine.
        #[arg(long, default_value_t = jikji_builder::conflicts::SIMILAR)]
        similar: f32,
        /// Show at most this many in text output.
        #[arg(long, default_value_t = 50)]
        limit: usize,
        /// JSON output.
        #[arg(long)]
        json: bool,
    },
    /// Retrieval quality on a labeled set: nDCG@10, Recall@10/100, MRR@10 and latency per mode.
    Eval {
        /// Folder with corpus.jsonl, queries.jsonl, qrels.tsv.
        dir: PathBuf,
        /// Comma-separated modes (dense and hybrid embed the whole corpus first).
        #[arg(long, default_value = "bm25")]
        modes: String,
        /// Model folder (for dense and hybrid).
        #[arg(long, env = "JIKJI_MODEL_DIR", default_value = DEFAULT_MODEL)]
        model: PathBuf,
        /// Embedding cache folder.
        #[arg(long, default_value = ".jikji-cache")]
        cache: PathBuf,
        /// Evaluate only the first N judged queries.
        #[arg(long)]
        limit: Option<usize>,
        /// Queries file to use instead of DIR/queries.jsonl (e.g. another language's queries
        /// with the same ids, for cross-lingual retrieval).
        #[arg(long)]
        queries: Option<PathBuf>,
        /// Treat every query as having no answer in the corpus (use with --queries from another
        /// set): runs all queries and reports where their top-1 scores fall, i.e. how often a
        /// query the bundle cannot answer still gets a "reliable" (>= 0.6) top hit.
        #[arg(long, requires = "queries")]
        unanswerable: bool,
        /// Comma-separated hybrid fusions to evaluate: rrf, weighted, weighted:W.
        #[arg(long, default_value = "weighted")]
        fusion: String,
        /// Write a TREC run file (qid Q0 docid rank score jikji-MODE).
        #[arg(long)]
        run: Option<PathBuf>,
        /// JSON output.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        analyzer: AnalyzerArgs,
        /// Weight of prefix expansions of the last query word (0 = off).
        #[arg(long, default_value_t = Expansion::default().prefix)]
        prefix_weight: f32,
        /// Weight of typo (Levenshtein) expansions (0 = off).
        #[arg(long, default_value_t = Expansion::default().fuzzy)]
        fuzzy_weight: f32,
        /// Weight of Hangul ↔ Hanja expansions (0 = off).
        #[arg(long, default_value_t = Expansion::default().hanja)]
        hanja_weight: f32,
        /// Korean query word normalisation: each of a word's n terms weighs n^-α (0 = off).
        #[arg(long, default_value_t = Expansion::default().hangul_norm)]
        hangul_norm: f32,
        /// Maximum chunk length in characters.
        #[arg(long, default_value_t = ChunkParams::default().size)]
        chunk_size: usize,
        /// Characters repeated from the previous chunk.
        #[arg(long, default_value_t = ChunkParams::default().overlap)]
        overlap: usize,
    },
    /// Serve the web page, the wasm engine and a bundle on 127.0.0.1.
    Serve {
        /// Bundle folder.
        bundle: PathBuf,
        /// Address to listen on (port 0 picks a free port).
        #[arg(long, default_value = "127.0.0.1:8080")]
        addr: String,
        /// The page's folder.
        #[arg(long, default_value = "web")]
        web: PathBuf,
        /// wasm-pack output folder.
        #[arg(long, default_value = "pkg")]
        pkg: PathBuf,
        /// Model folder served at /model/.
        #[arg(long, env = "JIKJI_MODEL_DIR", default_value = DEFAULT_MODEL)]
        model: PathBuf,
    },
}

fn main() -> anyhow::Result<()> {
    // A closed pipe (`jikji check --json | head`) ends the process quietly, as for other
    // Unix tools, instead of a panic in `println!`.
    #[cfg(unix)]
    // SAFETY: restores the default SIGPIPE disposition before any thread or I/O starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match Cli::parse().cmd {
        Cmd::Chunk {
            dir,
            chunk_size,
            overlap,
            strategy,
            parent_size,
            model,
            no_embed,
            report,
            json,
        } => {
            check_chunk_size(chunk_size, overlap)?;
            let args = ChunkingArgs {
                strategy: strategy.clone(),
                parent_size,
            };
            let names: Vec<&str> = if strategy == "all" {
                STRATEGY_NAMES.to_vec()
            } else {
                vec![strategy.as_str()]
            };
            let strategies: Vec<Strategy> = names
                .iter()
                .map(|n| args.strategy(n, chunk_size))
                .collect::<anyhow::Result<_>>()?;
            let sizer = if no_embed {
                None
            } else {
                if !model.join("tokenizer.json").exists() {
                    anyhow::bail!(
                        "{}: no tokenizer.json; run scripts/setup-model, pass --model DIR, or count characters only with --no-embed",
                        model.display()
                    );
                }
                Some(jikji_builder::build::TokenSizer::load(&model)?)
            };
            let params = ChunkParams {
                size: chunk_size,
                overlap,
            };
            chunk_cmd(&dir, params, &strategies, sizer.as_ref(), report, json)?;
        }
        Cmd::Eval {
            dir,
            modes,
            model,
            cache,
            limit,
            queries,
            unanswerable,
            fusion,
            run,
            json,
            analyzer,
            prefix_weight,
            fuzzy_weight,
            hanja_weight,
            hangul_norm,
            chunk_size,
            overlap,
        } => {
            check_chunk_size(chunk_size, overlap)?;
            let fusions: Vec<Fusion> = fusion
                .split(',')
                .map(|f| f.parse())
                .collect::<Result<_, _>>()?;
            let opts = EvalOpts {
                modes: &modes,
                fusions: &fusions,
                model: &model,
                cache: &cache,
                limit,
                queries: queries.as_deref(),
                unanswerable,
                run: run.as_deref(),
                json,
                analyzer: &analyzer,
                expansion: Expansion {
                    prefix: prefix_weight,
                    fuzzy: fuzzy_weight,
                    hanja: hanja_weight,
                    hangul_norm,
                },
                chunking: ChunkParams {
                    size: chunk_size,
                    overlap,
                },
            };
            eval_cmd(&dir, &opts)?;
        }
        Cmd::Check {
            dir,
            json,
            check,
            expiring,
            now,
        } => {
            let opts = CheckOptions {
                allow_ai_draft: check.allow_ai_draft,
            };
            let mut scanned = scan(&dir, opts)?;
            let now = now_ms(now.as_deref())?;
            let expiry = expiry_findings(&scanned.files, now, expiring);
            scanned.findings.extend(expiry);
            let copies = match &check.quarantine {
                Some(q) => quarantine(&dir, &scanned.rejected, q)?,
                None => Vec::new(),
            };
            let errors = scanned.errors();
            let warnings = scanned.findings.len() - errors;
            if json {
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
            if errors > 0 {
                std::process::exit(1);
            }
        }
        Cmd::Build {
            dir,
            out,
            chunk_size,
            overlap,
            chunking,
            model,
            no_embed,
            cache,
            threads,
            json,
            quiet,
            check,
            strict,
            analyzer,
        } => {
            check_chunk_size(chunk_size, overlap)?;
            let model_dir = if no_embed {
                None
            } else {
                if !model.join("model.onnx").exists() {
                    anyhow::bail!(
                        "{}: no model.onnx; run scripts/setup-model, pass --model DIR, or build BM25-only with --no-embed",
                        model.display()
                    );
                }
                Some(model)
            };
            let cache = cache
                .unwrap_or_else(|| out.parent().unwrap_or(Path::new(".")).join(".jikji-cache"));
            let opts = BuildOptions {
                corpus: dir,
                out: out.clone(),
                params: ChunkParams {
                    size: chunk_size,
                    overlap,
                },
                strategy: chunking.strategy(&chunking.strategy, chunk_size)?,
                model_dir,
                cache_dir: Some(cache),
                threads: threads.unwrap_or_else(|| {
                    std::thread::available_parallelism()
                        .map(|n| n.get())
                        .unwrap_or(1)
                }),
                progress: !quiet && !json,
                check: CheckOptions {
                    allow_ai_draft: check.allow_ai_draft,
                },
                strict,
                quarantine: check.quarantine,
                analyzer: analyzer.options(),
                hanja: !analyzer.no_hanja,
                bm25: analyzer.bm25()?,
            };
            let report = build(&opts)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_report(&report, &out);
            }
        }
        Cmd::Update {
            bundle,
            dir,
            model,
            cache,
            threads,
            json,
            quiet,
            check,
            strict,
        } => {
            let cache = cache.unwrap_or_else(|| {
                bundle
                    .parent()
                    .unwrap_or(Path::new("."))
                    .join(".jikji-cache")
            });
            let opts = UpdateOptions {
                model_dir: model.join("model.onnx").exists().then_some(model),
                cache_dir: Some(cache),
                threads: threads.unwrap_or_else(|| {
                    std::thread::available_parallelism()
                        .map(|n| n.get())
                        .unwrap_or(1)
                }),
                progress: !quiet && !json,
                check: CheckOptions {
                    allow_ai_draft: check.allow_ai_draft,
                },
                strict,
                quarantine: check.quarantine,
                ..UpdateOptions::new(&bundle, &dir)
            };
            let report = update(&opts)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_update_report(&report, &bundle);
            }
        }
        Cmd::Dedup {
            bundle,
            new,
            duplicate,
            partial,
            threshold,
            model,
            cache,
            limit,
            json,
        } => dedup_cmd(
            &bundle,
            new.as_deref(),
            duplicate,
            partial,
            threshold,
            &model,
            cache,
            limit,
            json,
        )?,
        Cmd::Gaps {
            bundle,
            queries,
            mode,
            history,
            drop,
            model,
            now,
            json,
        } => {
            use jikji_builder::gaps::*;
            let qs = read_queries(&queries)?;
            let mode: Mode = mode.parse()?;
            let mut engine = Engine::open_dir(&bundle)
                .with_context(|| format!("opening bundle {}", bundle.display()))?;
            engine.set_search_options(SearchOptions {
                now_ms: Some(now_ms(now.as_deref())?),
                include_archived: false,
            });
            let needs_model = qs.iter().any(|q| {
                q.mode
                    .as_deref()
                    .map_or(mode != Mode::Bm25, |m| !m.eq_ignore_ascii_case("bm25"))
            });
            if needs_model {
                let info = jikji_builder::build::model_info(&model)?;
                engine.check_model(&info.sha256)?;
                engine.set_embedder(jikji_builder::build::load_build_embedder(&model)?);
            }
            let history = history.unwrap_or_else(|| default_history(&queries));
            let prev = last_run(&history)?;
            let time = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
            let run = run_queries(&engine, &bundle, &qs, mode, drop, prev.as_ref(), time)?;
            append_run(&history, &run)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&run)?);
            } else {
                print_run(&run);
                eprintln!("appended to {}", history.display());
            }
            if run.gaps() + run.drops() > 0 {
                std::process::exit(1);
            }
        }
        Cmd::Conflicts {
            bundle,
            similar,
            limit,
            json,
        } => {
            use jikji_builder::dedup::{FlatVectors, LshParams};
            let b = jikji_format::Bundle::open_dir(&bundle)
                .with_context(|| format!("opening bundle {}", bundle.display()))?;
            let v = b.vectors().ok_or_else(|| {
                anyhow::anyhow!(
                    "{}: no vectors (built with --no-embed); conflicts needs them",
                    bundle.display()
                )
            })?;
            let records: Vec<_> = (0..b.chunks().len() as u32)
                .map(|i| b.chunks().get(i))
                .collect::<Result<_, _>>()?;
            let flat = FlatVectors::from_vectors(v);
            let found = jikji_builder::conflicts::find_conflicts(
                &records,
                &flat,
                similar,
                LshParams::default(),
            );
            if json {
                println!("{}", serde_json::to_string_pretty(&found)?);
            } else {
                for c in found.iter().take(limit) {
                    println!(
                        "cosine {:.3}\n  newer: {} [{}] updated {}\n  older: {} [{}] updated {}",
                        c.cosine,
                        c.newer.source,
                        c.newer.heading_path.join(" › "),
                        c.newer.updated.as_deref().unwrap_or("?"),
                        c.older.source,
                        c.older.heading_path.join(" › "),
                        c.older.updated.as_deref().unwrap_or("?"),
                    );
                    for d in &c.differences {
                        println!(
                            "  {}: {} (newer) vs {} (older)",
                            d.subject,
                            d.newer.join(", "),
                            d.older.join(", ")
                        );
                    }
                }
                println!("{} contradiction candidate(s)", found.len());
            }
        }
        Cmd::Search {
            bundle,
            queries,
            top_k,
            mode,
            fusion,
            min_score,
            json,
            model,
            include_archived,
            now,
        } => {
            anyhow::ensure!(top_k > 0, "--top-k must be at least 1");
            let mut engine = Engine::open_dir(&bundle)
                .with_context(|| format!("opening bundle {}", bundle.display()))?;
            anyhow::ensure!(
                min_score.is_finite() && min_score >= 0.0,
                "--min-score must be a number ≥ 0, got {min_score}"
            );
            anyhow::ensure!(
                engine.bundle().manifest().calibration.is_none() || min_score <= 1.0,
                "--min-score {min_score}: {} is calibrated, so its scores lie in [0, 1] \
                 (≥ 0.6 reliable, 0.3–0.6 use with care, < 0.3 noise)",
                bundle.display()
            );
            let mode: Mode = match mode {
                Some(m) => m.parse()?,
                None if engine.bundle().vectors().is_some() => Mode::Hybrid,
                None => Mode::Bm25,
            };
            if let Some(f) = fusion {
                engine.set_fusion(f.parse()?);
            }
            engine.set_min_score(min_score);
            engine.set_search_options(SearchOptions {
                now_ms: Some(now_ms(now.as_deref())?),
                include_archived,
            });
            if mode != Mode::Bm25 && engine.bundle().vectors().is_none() {
                // Say so before looking for a model the bundle could not use anyway.
                return Err(jikji_engine::EngineError::NoVectors(mode).into());
            }
            if mode != Mode::Bm25 {
                let info = jikji_builder::build::model_info(&model)?;
                engine.check_model(&info.sha256)?;
                engine.set_embedder(jikji_builder::build::load_build_embedder(&model)?);
            }
            let mut results = Vec::new();
            for q in &queries {
                results.push(engine.search(q, mode, top_k)?);
            }
            if let Err(e) = print_results(&results, json) {
                // A closed pipe (`jikji search … | head`) is not an error.
                if e.kind() != std::io::ErrorKind::BrokenPipe {
                    return Err(e.into());
                }
            }
        }
        Cmd::Serve {
            bundle,
            addr,
            web,
            pkg,
            model,
        } => {
            let model = model.exists().then_some(model);
            serve(&ServeOptions {
                addr,
                web,
                pkg,
                bundle,
                model,
            })?;
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn dedup_cmd(
    bundle: &Path,
    new: Option<&Path>,
    duplicate: f32,
    partial: f32,
    threshold: f32,
    model: &Path,
    cache: Option<PathBuf>,
    limit: usize,
    json: bool,
) -> anyhow::Result<()> {
    use jikji_builder::dedup::*;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if let Some(dir) = new {
        if partial > duplicate {
            anyhow::bail!("--partial ({partial}) must not exceed --duplicate ({duplicate})");
        }
        let cache = cache.unwrap_or_else(|| {
            bundle
                .parent()
                .unwrap_or(Path::new("."))
                .join(".jikji-cache")
        });
        let out = check_new_files(
            bundle,
            dir,
            model,
            Some(&cache),
            threads,
            duplicate,
            partial,
        )?;
        if json {
            println!("{}", serde_json::to_string_pretty(&out)?);
            return Ok(());
        }
        let count = |c: Class| out.iter().filter(|n| n.class == c).count();
        for n in out.iter().filter(|n| n.class != Class::New).take(limit) {
            println!(
                "{:<9} {:.3}{}  {} [{}]  ≈ {} ({})",
                format!("{:?}", n.class).to_lowercase(),
                n.cosine,
                if n.exact { " exact" } else { "" },
                n.source,
                n.heading_path.join(" › "),
                n.match_source,
                n.match_id
            );
        }
        println!(
            "{} new chunk(s): {} duplicate (do not add), {} partial (review), {} new",
            out.len(),
            count(Class::Duplicate),
            count(Class::Partial),
            count(Class::New)
        );
        return Ok(());
    }
    let b = jikji_format::Bundle::open_dir(bundle)
        .with_context(|| format!("opening bundle {}", bundle.display()))?;
    let records: Vec<_> = (0..b.chunks().len() as u32)
        .map(|i| b.chunks().get(i))
        .collect::<Result<_, _>>()?;
    let flat = b.vectors().map(FlatVectors::from_vectors);
    let t = std::time::Instant::now();
    let pairs = near_duplicate_pairs(&records, flat.as_ref(), threshold, LshParams::default());
    let secs = t.elapsed().as_secs_f64();
    if json {
        let v: Vec<_> = pairs
            .iter()
            .map(|p| {
                let (a, b) = (&records[p.a as usize], &records[p.b as usize]);
                serde_json::json!({"cosine": p.cosine, "exact": p.exact,
                    "a": {"id": a.id, "source": a.source, "heading_path": a.heading_path},
                    "b": {"id": b.id, "source": b.source, "heading_path": b.heading_path}})
            })
            .collect();
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    for p in pairs.iter().take(limit) {
        let (a, b) = (&records[p.a as usize], &records[p.b as usize]);
        println!(
            "{:.3}{}  {} [{}] ({})\n        {} [{}] ({})",
            p.cosine,
            if p.exact { " exact" } else { "" },
            a.source,
            a.heading_path.join(" › "),
            a.id,
            b.source,
            b.heading_path.join(" › "),
            b.id
        );
    }
    if flat.is_none() {
        eprintln!("note: the bundle has no vectors; only exact duplicates were looked for");
    }
    println!(
        "{} pair(s) from different files at cosine ≥ {threshold} among {} chunks ({secs:.2} s)",
        pairs.len(),
        records.len()
    );
    Ok(())
}

/// The clock: `--now` parsed as ISO 8601, else the system time, in Unix milliseconds.
fn now_ms(now: Option<&str>) -> anyhow::Result<i64> {
    match now {
        Some(s) => jikji_format::time::parse_iso8601_ms(s).ok_or_else(|| {
            anyhow::anyhow!("--now {s:?}: not an ISO 8601 date or date-time (e.g. 2026-11-30 or 2026-11-30T12:00:00Z)")
        }),
        None => Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)),
    }
}

/// `jikji chunk`: chunks every file that passes the corpus checks with each strategy and
/// prints the chunks (JSON lines) or the comparison table.
fn chunk_cmd(
    dir: &Path,
    params: ChunkParams,
    strategies: &[Strategy],
    sizer: Option<&jikji_builder::build::TokenSizer>,
    report: bool,
    json: bool,
) -> anyhow::Result<()> {
    use jikji_builder::chunker::report::{table, StatsBuilder};
    use jikji_builder::chunker::{Limits, Sizer, TokenLimit};
    use std::io::Write;

    let scanned = scan(dir, CheckOptions::default())?;
    if scanned.errors() > 0 {
        eprintln!(
            "{} file(s) left out by corpus errors (see `jikji check {}`)",
            scanned.rejected.len(),
            dir.display()
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
    for strategy in strategies {
        let chunker = strategy.chunker();
        let mut stats = StatsBuilder::new(chunker.name(), count);
        for f in &scanned.files {
            let body = &f.text[f.body_byte..];
            let chunked = chunker.chunk(body, &limits);
            if report {
                stats.add(body, &chunked);
                continue;
            }
            for c in &chunked.chunks {
                let line = serde_json::json!({
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
                        return Ok(());
                    }
                    return Err(e.into());
                }
            }
        }
        rows.push(stats.finish());
    }
    if report {
        if json {
            writeln!(out, "{}", serde_json::to_string_pretty(&rows)?)?;
        } else {
            writeln!(
                out,
                "{}: {} files, chunk size {} chars, overlap {}, {}",
                dir.display(),
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
    Ok(())
}

/// `--chunk-size` must be positive and larger than `--overlap`.
fn check_chunk_size(chunk_size: usize, overlap: usize) -> anyhow::Result<()> {
    anyhow::ensure!(chunk_size > 0, "--chunk-size must be at least 1");
    anyhow::ensure!(
        overlap < chunk_size,
        "--overlap ({overlap}) must be smaller than --chunk-size ({chunk_size})"
    );
    Ok(())
}

fn print_results(results: &[jikji_engine::SearchResult], json: bool) -> std::io::Result<()> {
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
            writeln!(
                out,
                "{:>3}. {:.4}  {}  [{}]  tier {}  {}{tags}",
                h.rank,
                h.score,
                h.source,
                h.heading_path.join(" › "),
                tier,
                h.lang
            )?;
            if let Some(u) = &h.source_url {
                writeln!(out, "     {u}")?;
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

/// Options of `jikji eval`.
struct EvalOpts<'a> {
    modes: &'a str,
    fusions: &'a [Fusion],
    model: &'a Path,
    cache: &'a Path,
    limit: Option<usize>,
    queries: Option<&'a Path>,
    unanswerable: bool,
    run: Option<&'a Path>,
    json: bool,
    analyzer: &'a AnalyzerArgs,
    expansion: Expansion,
    chunking: ChunkParams,
}

fn eval_cmd(dir: &Path, o: &EvalOpts) -> anyhow::Result<()> {
    use jikji_builder::corpus::{FrontMatter, SourceFile};
    use jikji_builder::eval::{bands, ece, load_queries, mean, metrics, percentile, EvalSet};
    use std::collections::{HashMap, HashSet};
    use std::io::Write;
    use std::time::Instant;

    let mut set = EvalSet::load(dir)?;
    if let Some(q) = o.queries {
        set.queries = load_queries(q)?;
    }
    // A queries file must match the run: judged queries, or (--unanswerable) none judged.
    let has_relevant = |qrels: &HashMap<String, HashMap<String, i32>>, id: &str| {
        qrels.get(id).is_some_and(|j| j.values().any(|&g| g > 0))
    };
    let judged_ids = set
        .queries
        .iter()
        .filter(|(id, _)| has_relevant(&set.qrels, id))
        .count();
    if o.unanswerable && judged_ids > 0 {
        anyhow::bail!(
            "--unanswerable: {judged_ids} of the {} queries have relevant documents in {}; \
             it is for queries this corpus cannot answer (another set's queries.jsonl)",
            set.queries.len(),
            dir.join("qrels.tsv").display()
        );
    }
    if !o.unanswerable && judged_ids == 0 {
        anyhow::bail!(
            "none of the {} queries has a relevant document in {}{}",
            set.queries.len(),
            dir.join("qrels.tsv").display(),
            if o.queries.is_some() {
                " (queries of another set? add --unanswerable to measure their top-1 scores)"
            } else {
                ""
            }
        );
    }
    let modes: Vec<Mode> = o
        .modes
        .split(',')
        .map(|m| m.trim().parse())
        .collect::<Result<_, _>>()?;
    let needs_model = modes.iter().any(|m| *m != Mode::Bm25);
    let files: Vec<SourceFile> = set
        .corpus
        .iter()
        .map(|d| SourceFile {
            path: PathBuf::new(),
            rel: d.id.clone(),
            tier: None,
            text: d.body(),
            body_byte: 0,
            body_char: 0,
            source_url: None,
            front: FrontMatter {
                title: (!d.title.is_empty()).then(|| d.title.clone()),
                ..FrontMatter::default()
            },
        })
        .collect();
    let out = std::env::temp_dir().join(format!("jikji-eval-{}", std::process::id()));
    let opts = BuildOptions {
        model_dir: needs_model.then(|| o.model.to_path_buf()),
        cache_dir: Some(o.cache.to_path_buf()),
        threads: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
        progress: !o.json,
        analyzer: o.analyzer.options(),
        hanja: !o.analyzer.no_hanja,
        bm25: o.analyzer.bm25()?,
        params: o.chunking,
        ..BuildOptions::new(dir, &out)
    };
    let t = Instant::now();
    let report = jikji_builder::build::build_files(&files, &opts)?;
    let build_s = t.elapsed().as_secs_f64();
    let mut engine = Engine::open_dir(&out)?;
    engine.set_expansion(o.expansion);
    let bytes: u64 = engine
        .bundle()
        .manifest()
        .files
        .values()
        .map(|f| f.bytes)
        .sum();
    let _ = std::fs::remove_dir_all(&out);
    if needs_model {
        engine.set_embedder(jikji_builder::build::load_build_embedder(o.model)?);
    }
    // Unanswerable runs: every query, none with a relevant document.
    if o.unanswerable {
        set.qrels = set
            .queries
            .iter()
            .map(|(id, _)| (id.clone(), HashMap::new()))
            .collect();
    }
    let judged: Vec<&(String, String)> = set
        .queries
        .iter()
        .filter(|(id, _)| o.unanswerable || has_relevant(&set.qrels, id))
        .take(o.limit.unwrap_or(usize::MAX))
        .collect();
    // Embed each query once; every dense and hybrid run reuses the vector.
    let mut qvecs = Vec::new();
    let mut embed_ms = Vec::new();
    if needs_model {
        for (_, q) in &judged {
            let t = Instant::now();
            qvecs.push(Some(engine.embed_query(q, Mode::Dense)?));
            embed_ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
    } else {
        qvecs.resize(judged.len(), None);
    }
    embed_ms.sort_by(f64::total_cmp);
    let mut run_out = match o.run {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };
    let mut runs: Vec<(Mode, Option<Fusion>)> = Vec::new();
    for &m in &modes {
        if m == Mode::Hybrid {
            runs.extend(o.fusions.iter().map(|f| (m, Some(*f))));
        } else {
            runs.push((m, None));
        }
    }
    let mut rows = Vec::new();
    for (mode, fusion) in runs {
        if let Some(f) = fusion {
            engine.set_fusion(f);
        }
        let label = match engine.fusion() {
            Fusion::Rrf if mode == Mode::Hybrid => "hybrid-rrf".to_string(),
            Fusion::Weighted { dense_weight } if mode == Mode::Hybrid => {
                format!("hybrid-w{dense_weight}")
            }
            _ => mode.to_string(),
        };
        let mut per_query = Vec::new();
        let mut top1 = Vec::new();
        let mut no_hit = 0usize;
        let mut ms = Vec::new();
        for ((qid, q), qv) in judged.iter().zip(&qvecs) {
            let t = Instant::now();
            let r = engine.search_with_vector(q, qv.as_deref(), mode, 300)?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            let mut seen = HashSet::new();
            let ranked: Vec<(String, f32)> = r
                .hits
                .iter()
                .filter(|h| seen.insert(h.source.clone()))
                .take(100)
                .map(|h| (h.source.clone(), h.score))
                .collect();
            if let Some(w) = run_out.as_mut() {
                for (i, (d, s)) in ranked.iter().enumerate() {
                    writeln!(w, "{qid} Q0 {d} {} {s} jikji-{label}", i + 1)?;
                }
            }
            let judged = &set.qrels[qid];
            match ranked.first() {
                Some((d, s)) => top1.push((*s, judged.get(d).is_some_and(|&g| g > 0))),
                None => no_hit += 1,
            }
            let ids: Vec<String> = ranked.into_iter().map(|(d, _)| d).collect();
            per_query.push(metrics(&ids, judged));
        }
        ms.sort_by(f64::total_cmp);
        rows.push((
            label,
            mean(&per_query),
            percentile(&ms, 0.5),
            percentile(&ms, 0.95),
            bands(&top1),
            ece(&top1, 10),
            no_hit,
        ));
    }
    let calibrated = engine.bundle().manifest().calibration.is_some();
    if o.json {
        let v: Vec<_> = rows
            .iter()
            .map(|(m, x, med, p95, b, e, nh)| serde_json::json!({"mode": m, "metrics": x, "median_ms": med, "p95_ms": p95, "top1_bands": b, "top1_ece": e, "no_hit": nh}))
            .collect();
        let m = engine.bundle().manifest();
        let doc = serde_json::json!({"set": dir, "queries_file": o.queries, "unanswerable": o.unanswerable, "documents": set.corpus.len(), "queries": judged.len(),
            "bm25": m.bm25, "analyzer": m.analyzer, "chunk_size": m.chunk_size, "overlap": m.overlap, "expansion": {
                "prefix": o.expansion.prefix, "fuzzy": o.expansion.fuzzy, "hanja": o.expansion.hanja,
                "hangul_norm": o.expansion.hangul_norm},
            "chunks": report.chunks, "bundle_bytes": bytes, "build_s": build_s, "calibrated": calibrated,
            "calibration": m.calibration,
            "query_embed_median_ms": percentile(&embed_ms, 0.5), "modes": v});
        println!("{}", serde_json::to_string_pretty(&doc)?);
    } else {
        println!(
            "{}: {} documents, {} chunks, {} judged queries, bundle {} bytes, build {:.1} s",
            dir.display(),
            set.corpus.len(),
            report.chunks,
            judged.len(),
            bytes,
            build_s
        );
        if o.unanswerable {
            println!(
                "unanswerable: every query counts as having no answer here; read the top-1 bands"
            );
        }
        if !embed_ms.is_empty() {
            println!(
                "query embedding: median {:.1} ms (not included in the latencies below)",
                percentile(&embed_ms, 0.5)
            );
        }
        println!(
            "{:<14}{:>9}{:>9}{:>10}{:>9}{:>11}{:>9}{:>8}   top-1 relevant by score band",
            "mode", "nDCG@10", "R@10", "R@100", "MRR@10", "median ms", "p95 ms", "ECE"
        );
        for (m, x, med, p95, b, e, nh) in &rows {
            let bands: Vec<String> = b
                .iter()
                .map(|b| format!("[{:.1},{:.1}): {}/{}", b.from, b.to, b.relevant, b.queries))
                .collect();
            let no_hit = if *nh > 0 {
                format!("  no hit: {nh}")
            } else {
                String::new()
            };
            println!(
                "{:<14}{:>9.4}{:>9.4}{:>10.4}{:>9.4}{:>11.2}{:>9.2}{:>8.3}   {}{}",
                m,
                x.ndcg_10,
                x.recall_10,
                x.recall_100,
                x.mrr_10,
                med,
                p95,
                e,
                bands.join("  "),
                no_hit
            );
        }
    }
    Ok(())
}

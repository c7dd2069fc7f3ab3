//! `jikji gaps BUNDLE QUERIES`: runs a file of core queries and reports, per query:
//!
//! - a **gap**: the best hit scores below the query's `min_score`, or nothing is found;
//! - a **wrong source**: the query has an `expect` (source paths, globs or doc_ids) and
//!   the best hit comes from none of them ("iOS minimum version" answered by the Android
//!   page);
//! - a **drop**: the best score fell by at least `drop` (default 0.2) below the query's
//!   *baseline* or below the *previous* run. The baseline is the query's first run in the
//!   history, or the last run that pinned it (`--set-baseline`, or `--accept` for some or
//!   all queries). Because the baseline stays until someone accepts the new state, an alert
//!   is repeated by every run (a CI retry does not clear it);
//! - a **slide**: the score is at least `slide` (default 0.1) below the baseline without a
//!   drop: the slow decline no single run shows;
//! - a **top-source change** against the baseline (reported; an alert only through
//!   `expect`).
//!
//! Every run is appended to a history file (JSON lines of [`Run`]).
//!
//! The queries file is JSON lines, one object per query:
//! `{"query": "request timeout", "min_score": 0.6}` with optional `"id"` (default: the
//! query text; the key that matches runs in the history), `"mode"` (default: the
//! command's `--mode`) and `"expect"` (a string or a list of strings; each is a source path
//! such as `2. mobile/ios.md`, a glob over source paths such as `2. mobile/ios-*.md`
//! (`globset` syntax: `*` within a folder, `**` across folders), or a document id as in
//! [`crate::versions`]). Blank lines are skipped. Scores are the engine's `Hit.score` of
//! the best hit, 0 when nothing is found; they are calibrated probabilities only when the
//! bundle has a score calibration for the mode ([`Run::uncalibrated`] lists the queries
//! compared on raw scores, which `min_score` values such as 0.6 do not mean).

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use std::collections::HashMap;

use jikji_engine::{Engine, Mode};
use serde::{Deserialize, Serialize};

use crate::error::{BuildError, Result};

/// One core query.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct CoreQuery {
    /// Key of the query in the history (default: the query text).
    #[serde(default)]
    pub id: Option<String>,
    /// The query text.
    pub query: String,
    /// Expected minimum score of the best hit.
    pub min_score: f32,
    /// Search mode for this query (`bm25`, `dense`, `hybrid`), else the run's default.
    #[serde(default)]
    pub mode: Option<String>,
    /// Where the best hit must come from: source paths, globs or doc_ids (see the module
    /// doc); empty: any source.
    #[serde(default, deserialize_with = "one_or_many")]
    pub expect: Vec<String>,
}

/// `"a"` or `["a", "b"]` as a list.
fn one_or_many<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// A query's `expect`, compiled: exact source paths and doc_ids, and globs.
#[derive(Debug, Clone)]
pub struct Expect {
    exact: Vec<String>,
    globs: globset::GlobSet,
}

impl Expect {
    /// Compiles `patterns` (a pattern with `*`, `?`, `[` or `{` is a glob). Errors: an
    /// invalid glob (message from `globset`).
    pub fn new(patterns: &[String]) -> std::result::Result<Self, String> {
        let mut b = globset::GlobSetBuilder::new();
        let mut exact = Vec::new();
        for p in patterns {
            if p.contains(['*', '?', '[', '{']) {
                let g = globset::GlobBuilder::new(p)
                    .literal_separator(true)
                    .build()
                    .map_err(|e| format!("expect {p:?}: {e}"))?;
                b.add(g);
            } else {
                exact.push(p.clone());
            }
        }
        Ok(Expect {
            exact,
            globs: b.build().map_err(|e| e.to_string())?,
        })
    }

    /// True if a hit from `source` (with document id `doc_id`) is what was expected.
    pub fn matches(&self, source: &str, doc_id: Option<&str>) -> bool {
        self.exact
            .iter()
            .any(|e| e == source || doc_id == Some(e.as_str()))
            || self.globs.is_match(source)
    }
}

impl CoreQuery {
    /// The history key.
    pub fn key(&self) -> &str {
        self.id.as_deref().unwrap_or(&self.query)
    }
}

/// Reads a queries file (see the module doc). Errors name the file and line.
pub fn read_queries(path: &Path) -> Result<Vec<CoreQuery>> {
    let mut out = Vec::new();
    for (line, q) in crate::eval::read_jsonl::<CoreQuery>(
        path,
        "expected {\"query\": \"…\", \"min_score\": 0.5}",
    )? {
        if !q.min_score.is_finite() {
            return Err(BuildError::InvalidInput {
                path: path.to_path_buf(),
                line: Some(line),
                message: "min_score is not a number".into(),
            });
        }
        if let Some(Err(e)) = q.mode.as_deref().map(str::parse::<Mode>) {
            return Err(BuildError::InvalidInput {
                path: path.to_path_buf(),
                line: Some(line),
                message: e.to_string(),
            });
        }
        if let Err(message) = Expect::new(&q.expect) {
            return Err(BuildError::InvalidInput {
                path: path.to_path_buf(),
                line: Some(line),
                message,
            });
        }
        out.push(q);
    }
    if out.is_empty() {
        return Err(BuildError::InvalidInput {
            path: path.to_path_buf(),
            line: None,
            message: "no queries".into(),
        });
    }
    Ok(out)
}

/// The outcome of one query in one run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryOutcome {
    /// History key.
    pub id: String,
    /// Query text.
    pub query: String,
    /// Mode used.
    pub mode: String,
    /// Expected minimum.
    pub min_score: f32,
    /// Best hit's score (0 if none).
    pub score: f32,
    /// Best hit's chunk id and source, if any.
    #[serde(default)]
    pub top_id: Option<String>,
    /// Best hit's source file.
    #[serde(default)]
    pub top_source: Option<String>,
    /// Best hit's document id, if it has one.
    #[serde(default)]
    pub top_doc_id: Option<String>,
    /// True if `score < min_score` or nothing was found.
    pub gap: bool,
    /// Score in the previous run of this query, if any.
    #[serde(default)]
    pub previous: Option<f32>,
    /// Score in the query's baseline run (see the module doc), if any.
    #[serde(default)]
    pub baseline: Option<f32>,
    /// Best hit's source in the baseline run.
    #[serde(default)]
    pub baseline_source: Option<String>,
    /// When the baseline run was made (RFC 3339).
    #[serde(default)]
    pub baseline_time: Option<String>,
    /// True if `baseline − score` or `previous − score` is at least the drop threshold.
    pub drop: bool,
    /// True if `baseline − score` is at least the slide threshold but there is no drop.
    #[serde(default)]
    pub slide: bool,
    /// The query's `expect` patterns (empty: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expect: Vec<String>,
    /// True if the query has an `expect` and the best hit is from none of them (or
    /// nothing was found).
    #[serde(default)]
    pub wrong_source: bool,
    /// True if the best hit's source differs from the baseline's.
    #[serde(default)]
    pub top_changed: bool,
    /// True if the score is a calibrated probability (the bundle has a calibration for
    /// this mode); false: a raw score.
    #[serde(default = "yes")]
    pub calibrated: bool,
    /// True if this run made its outcome the query's new baseline (`--accept`,
    /// `--set-baseline`, or its first run): its drop and slide are accepted, not failures
    /// (a gap or a wrong source still fails: `min_score` and `expect` are requirements).
    #[serde(default)]
    pub accepted: bool,
}

fn yes() -> bool {
    true
}

impl QueryOutcome {
    /// True if this outcome fails the run: a gap, a wrong source, or a drop or slide that
    /// was not accepted in this run.
    pub fn alert(&self) -> bool {
        self.gap || self.wrong_source || (!self.accepted && (self.drop || self.slide))
    }
}

/// One run, as appended to the history file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// When (UTC, RFC 3339).
    pub time: String,
    /// Bundle folder.
    pub bundle: String,
    /// The bundle's `built_at` (Unix seconds).
    pub built_at: u64,
    /// Per query.
    pub results: Vec<QueryOutcome>,
}

impl Run {
    /// Number of gaps.
    pub fn gaps(&self) -> usize {
        self.results.iter().filter(|r| r.gap).count()
    }
    /// Number of drops (against the baseline or the previous run).
    pub fn drops(&self) -> usize {
        self.results.iter().filter(|r| r.drop).count()
    }
    /// Number of slides (below the baseline by the slide threshold, no drop).
    pub fn slides(&self) -> usize {
        self.results.iter().filter(|r| r.slide).count()
    }
    /// Number of queries whose best hit is not from their `expect`.
    pub fn wrong_sources(&self) -> usize {
        self.results.iter().filter(|r| r.wrong_source).count()
    }
    /// Number of outcomes that fail the run ([`QueryOutcome::alert`]).
    pub fn alerts(&self) -> usize {
        self.results.iter().filter(|r| r.alert()).count()
    }
    /// Ids of the queries whose scores are raw (no calibration for their mode).
    pub fn uncalibrated(&self) -> Vec<&str> {
        self.results
            .iter()
            .filter(|r| !r.calibrated)
            .map(|r| r.id.as_str())
            .collect()
    }
}

/// Which queries a run pins as their new baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Accept {
    /// None (queries without any history still get their first run as the baseline).
    #[default]
    Nothing,
    /// Every query (`--set-baseline`, or `--accept` with no ids).
    All,
    /// These query ids (`--accept ID,ID`).
    Ids(Vec<String>),
}

/// The history of a query: its baseline and its previous outcome.
#[derive(Debug, Clone, Default)]
pub struct History {
    /// (id, mode) → (baseline outcome, its run's time).
    baseline: HashMap<(String, String), (QueryOutcome, String)>,
    /// (id, mode) → the last outcome.
    previous: HashMap<(String, String), QueryOutcome>,
}

impl History {
    /// Folds runs in order: a query's baseline is its first outcome, replaced by any later
    /// outcome marked `accepted`.
    pub fn of_runs<'a>(runs: impl IntoIterator<Item = &'a Run>) -> Self {
        let mut h = History::default();
        for run in runs {
            for o in &run.results {
                let key = (o.id.clone(), o.mode.clone());
                if o.accepted || !h.baseline.contains_key(&key) {
                    h.baseline
                        .insert(key.clone(), (o.clone(), run.time.clone()));
                }
                h.previous.insert(key, o.clone());
            }
        }
        h
    }

    /// Reads a history file (absent: empty) and folds its runs. Errors name the file and
    /// line of an unreadable record.
    pub fn read(path: &Path) -> Result<Self> {
        Ok(History::of_runs(&read_runs(path)?))
    }
}

/// The last run recorded in a history file (`None` if the file is absent or empty).
/// Errors name the file and line of an unreadable record.
pub fn last_run(history: &Path) -> Result<Option<Run>> {
    Ok(read_runs(history)?.pop())
}

/// Every run of a history file, in order (empty if the file is absent). Errors name the
/// file and line of an unreadable record.
pub fn read_runs(history: &Path) -> Result<Vec<Run>> {
    let Ok(f) = std::fs::File::open(history) else {
        return Ok(Vec::new());
    };
    let mut runs = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|source| BuildError::ReadLine {
            path: history.to_path_buf(),
            line: i + 1,
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        runs.push(
            serde_json::from_str(&line).map_err(|source| BuildError::DataCorruption {
                path: history.to_path_buf(),
                line: i + 1,
                message: "not a run record".into(),
                source: Some(source),
            })?,
        );
    }
    Ok(runs)
}

/// Alert thresholds of a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Thresholds {
    /// A fall of at least this much below the baseline or the previous run is a drop.
    pub drop: f32,
    /// A fall of at least this much below the baseline (and no drop) is a slide.
    pub slide: f32,
}

impl Default for Thresholds {
    /// Drop 0.2, slide 0.1.
    fn default() -> Self {
        Thresholds {
            drop: 0.2,
            slide: 0.1,
        }
    }
}

/// How a run judges its queries.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Mode of the queries that do not name one.
    pub mode: Mode,
    /// Drop and slide thresholds.
    pub thresholds: Thresholds,
    /// Which queries this run pins as their new baseline.
    pub accept: Accept,
}

/// Runs every query on `engine` (default mode `o.mode`), compares with the `history`
/// (baseline and previous run, [`Thresholds`]), marks the outcomes `o.accept` pins as the
/// new baseline, and returns the run. `time` is the run's timestamp (RFC 3339).
pub fn run_queries(
    engine: &Engine,
    bundle: &Path,
    queries: &[CoreQuery],
    o: &RunOptions,
    history: &History,
    time: String,
) -> Result<Run> {
    let (mode, t, accept) = (o.mode, o.thresholds, &o.accept);
    let mut results = Vec::with_capacity(queries.len());
    for q in queries {
        let m: Mode = match &q.mode {
            Some(s) => s.parse()?,
            None => mode,
        };
        let r = engine
            .search(&q.query, m, 1)
            .map_err(|source| BuildError::Query {
                query: q.query.clone(),
                source,
            })?;
        let top = r.hits.first();
        let score = top.map_or(0.0, |h| h.score);
        let key = (q.key().to_string(), m.to_string());
        let prev = history.previous.get(&key).map(|o| o.score);
        let base = history.baseline.get(&key);
        let top_source = top.map(|h| h.chunk.source.clone());
        let top_doc_id = top.and_then(|h| h.chunk.doc_id.clone());
        let wrong_source = !q.expect.is_empty()
            && !top.is_some_and(|h| {
                Expect::new(&q.expect)
                    .is_ok_and(|e| e.matches(&h.chunk.source, h.chunk.doc_id.as_deref()))
            });
        let fell = |from: Option<f32>, by: f32| from.is_some_and(|p| p - score >= by);
        let drop = fell(base.map(|b| b.0.score), t.drop) || fell(prev, t.drop);
        let slide = !drop && fell(base.map(|b| b.0.score), t.slide);
        let accepted = base.is_none()
            || match accept {
                Accept::Nothing => false,
                Accept::All => true,
                Accept::Ids(ids) => ids.iter().any(|i| i == q.key()),
            };
        results.push(QueryOutcome {
            id: q.key().to_string(),
            query: q.query.clone(),
            mode: m.to_string(),
            min_score: q.min_score,
            score,
            top_id: top.map(|h| h.id.clone()),
            top_source: top_source.clone(),
            top_doc_id,
            gap: top.is_none() || score < q.min_score,
            previous: prev,
            baseline: base.map(|b| b.0.score),
            baseline_source: base.and_then(|b| b.0.top_source.clone()),
            baseline_time: base.map(|b| b.1.clone()),
            drop,
            slide,
            expect: q.expect.clone(),
            wrong_source,
            top_changed: base.is_some_and(|b| b.0.top_source != top_source),
            calibrated: r.calibrated,
            accepted,
        });
    }
    Ok(Run {
        time,
        bundle: bundle.display().to_string(),
        built_at: engine.bundle().manifest().built_at,
        results,
    })
}

/// Appends `run` as one JSON line to `history` (created if absent; a line break is added
/// first if the file does not end with one).
pub fn append_run(history: &Path, run: &Run) -> Result<()> {
    if let Some(p) = history.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(p).map_err(|e| BuildError::io("creating", p, e))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(history)
        .map_err(|e| BuildError::io("opening", history, e))?;
    let mut line =
        serde_json::to_vec(run).map_err(|e| BuildError::io("appending to", history, e.into()))?;
    line.push(b'\n');
    // A file edited by hand may lack its last line break: the record starts a new line.
    let len = f
        .metadata()
        .map_err(|e| BuildError::io("appending to", history, e))?
        .len();
    if len > 0 {
        use std::io::{Read, Seek, SeekFrom};
        let mut last = [0u8];
        let mut r =
            std::fs::File::open(history).map_err(|e| BuildError::io("reading", history, e))?;
        r.seek(SeekFrom::Start(len - 1))
            .and_then(|_| r.read_exact(&mut last))
            .map_err(|e| BuildError::io("reading", history, e))?;
        if last[0] != b'\n' {
            line.insert(0, b'\n');
        }
    }
    f.write_all(&line)
        .map_err(|e| BuildError::io("appending to", history, e))?;
    Ok(())
}

/// Default history file: `<queries without extension>.history.jsonl` beside the queries.
pub fn default_history(queries: &Path) -> PathBuf {
    let stem = queries
        .file_stem()
        .map(|s| s.to_string_lossy().to_string())
        .unwrap_or_else(|| "queries".into());
    queries.with_file_name(format!("{stem}.history.jsonl"))
}

/// Prints the run: one line per query (flags, score, minimum, baseline and previous
/// scores, mode, query, best source), a note per top-source change and wrong source, then
/// a summary line and a warning when scores are uncalibrated.
pub fn print_run(run: &Run) {
    for r in &run.results {
        let mut flags = Vec::new();
        for (on, name) in [
            (r.gap, "GAP"),
            (r.wrong_source, "WRONG-SOURCE"),
            (r.drop, "DROP"),
            (r.slide, "SLIDE"),
        ] {
            if on {
                flags.push(name);
            }
        }
        let mut flag = if flags.is_empty() {
            "ok".to_string()
        } else {
            flags.join("+")
        };
        if r.accepted && (r.drop || r.slide) {
            flag = format!("{flag} (accepted)");
        }
        let mut refs = Vec::new();
        if let Some(b) = r.baseline {
            refs.push(format!("baseline {b:.3}"));
        }
        if let Some(p) = r.previous {
            refs.push(format!("previous {p:.3}"));
        }
        let refs = if refs.is_empty() {
            String::new()
        } else {
            format!(" ({})", refs.join(", "))
        };
        let top = r.top_source.as_deref().unwrap_or("nothing found");
        println!(
            "{flag:<8} {:.3} (min {:.3}){refs}  [{}] {}  → {top}",
            r.score, r.min_score, r.mode, r.query
        );
        if r.wrong_source {
            println!("         expected a hit from {}", r.expect.join(" | "));
        }
        if r.top_changed {
            println!(
                "         top source changed since the baseline ({}): {} → {top}",
                r.baseline_time.as_deref().unwrap_or("?"),
                r.baseline_source.as_deref().unwrap_or("nothing found")
            );
        }
    }
    println!(
        "{} queries, {} gap(s), {} wrong source(s), {} drop(s), {} slide(s); {} alert(s)",
        run.results.len(),
        run.gaps(),
        run.wrong_sources(),
        run.drops(),
        run.slides(),
        run.alerts()
    );
    let raw = run.uncalibrated();
    if !raw.is_empty() {
        eprintln!(
            "warning: {} of {} queries compared raw scores: the bundle has no score calibration for their mode (rebuild it with this jikji), so min_score and the drop thresholds are not probabilities",
            raw.len(),
            run.results.len()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Carried-over note: an unknown `mode` in a queries file failed only when its query
    /// ran, without naming the file or the line.
    #[test]
    fn unknown_mode_did_not_name_the_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("core.jsonl");
        std::fs::write(
            &path,
            "{\"query\": \"lamp\", \"min_score\": 0.5}\n{\"query\": \"bay\", \"min_score\": 0.5, \"mode\": \"fuzzy\"}\n",
        )
        .unwrap();
        let e = read_queries(&path).unwrap_err().to_string();
        assert!(e.contains("core.jsonl:2"), "{e}");
        assert!(e.contains("fuzzy"), "{e}");
    }
}

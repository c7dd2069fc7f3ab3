//! `jikji gaps BUNDLE QUERIES`: runs a file of core queries, reports *gaps* (the best
//! hit scores below the query's expected minimum, or nothing is found) and *drops* (the
//! best score fell sharply since the last run, e.g. 0.85 → 0.45: a document was removed
//! or changed), and appends the run to a history file (JSON lines) for the next
//! comparison.
//!
//! The queries file is JSON lines, one object per query:
//! `{"query": "request timeout", "min_score": 0.6}` with optional `"id"` (default: the
//! query text; the key that matches runs in the history) and `"mode"` (default: the
//! command's `--mode`). Blank lines are skipped. Scores are the engine's `Hit.score` of the
//! best hit (calibrated scores, where the engine provides them), 0 when nothing is found.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

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
    /// True if `score < min_score` or nothing was found.
    pub gap: bool,
    /// Score in the previous run of this query, if any.
    #[serde(default)]
    pub previous: Option<f32>,
    /// True if `previous − score ≥` the drop threshold.
    pub drop: bool,
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
    /// Number of drops.
    pub fn drops(&self) -> usize {
        self.results.iter().filter(|r| r.drop).count()
    }
}

/// The last run recorded in a history file (`None` if the file is absent or empty).
/// Errors name the file and line of an unreadable record.
pub fn last_run(history: &Path) -> Result<Option<Run>> {
    let Ok(f) = std::fs::File::open(history) else {
        return Ok(None);
    };
    let mut last = None;
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let line = line.map_err(|source| BuildError::ReadLine {
            path: history.to_path_buf(),
            line: i + 1,
            source,
        })?;
        if line.trim().is_empty() {
            continue;
        }
        last = Some(
            serde_json::from_str(&line).map_err(|source| BuildError::DataCorruption {
                path: history.to_path_buf(),
                line: i + 1,
                message: "not a run record".into(),
                source: Some(source),
            })?,
        );
    }
    Ok(last)
}

/// Runs every query on `engine` (default mode `mode`), compares with `previous` (drop if
/// the score fell by `drop` or more), and returns the run. `time` is the run's timestamp.
pub fn run_queries(
    engine: &Engine,
    bundle: &Path,
    queries: &[CoreQuery],
    mode: Mode,
    drop: f32,
    previous: Option<&Run>,
    time: String,
) -> Result<Run> {
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
        let prev = previous.and_then(|p| {
            p.results
                .iter()
                .find(|o| o.id == q.key() && o.mode == m.to_string())
                .map(|o| o.score)
        });
        results.push(QueryOutcome {
            id: q.key().to_string(),
            query: q.query.clone(),
            mode: m.to_string(),
            min_score: q.min_score,
            score,
            top_id: top.map(|h| h.id.clone()),
            top_source: top.map(|h| h.source.clone()),
            gap: top.is_none() || score < q.min_score,
            previous: prev,
            drop: prev.is_some_and(|p| p - score >= drop),
        });
    }
    Ok(Run {
        time,
        bundle: bundle.display().to_string(),
        built_at: engine.bundle().manifest().built_at,
        results,
    })
}

/// Appends `run` as one JSON line to `history` (created if absent).
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

/// Prints the run: every gap and drop, then a summary line.
pub fn print_run(run: &Run) {
    for r in &run.results {
        let prev = r
            .previous
            .map(|p| format!(" (previous {p:.3})"))
            .unwrap_or_default();
        let top = r.top_source.as_deref().unwrap_or("nothing found");
        let flag = match (r.gap, r.drop) {
            (true, true) => "GAP+DROP",
            (true, false) => "GAP",
            (false, true) => "DROP",
            _ => "ok",
        };
        println!(
            "{flag:<8} {:.3} (min {:.3}){prev}  [{}] {}  → {top}",
            r.score, r.min_score, r.mode, r.query
        );
    }
    println!(
        "{} queries, {} gap(s), {} drop(s)",
        run.results.len(),
        run.gaps(),
        run.drops()
    );
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

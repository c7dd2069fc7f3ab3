//! `jikji eval`: retrieval quality on a labeled set (`corpus.jsonl`, `queries.jsonl`,
//! `qrels.tsv`, as in `../shared/eval/*`).
//!
//! Each corpus record becomes one document (title + text, chunked as usual); a document's
//! rank is that of its best chunk. Metrics follow trec_eval / pytrec_eval definitions:
//! - nDCG@k: gain = the qrels grade, discount 1/log2(rank + 1), ideal DCG from the query's
//!   judged grades sorted descending (Järvelin & Kekäläinen 2002);
//! - Recall@k: relevant (grade > 0) documents in the top k / all relevant documents;
//! - MRR@10: 1 / rank of the first relevant document within the top 10, else 0.
//!
//! Queries with no relevant document in the qrels are skipped (as trec_eval does); metrics
//! are means over the remaining queries.

mod run;

pub use run::{run, run_bundle, EvalOptions, EvalReport, ModeRow};

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;

use serde::Serialize;

use crate::error::{BuildError, Result};

/// One corpus record of an eval set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalDoc {
    /// Document id (as in `qrels.tsv`).
    pub id: String,
    /// Title (may be empty).
    pub title: String,
    /// Text.
    pub text: String,
}

impl EvalDoc {
    /// The file body the eval builds from: `title + "\n\n" + text` (just `text` without a
    /// title). The title is also given as the file's front matter `title`, so every chunk of
    /// the document is indexed under it ([`jikji_format::ChunkRecord::indexed_text`]).
    pub fn body(&self) -> String {
        if self.title.is_empty() {
            self.text.clone()
        } else {
            format!("{}\n\n{}", self.title, self.text)
        }
    }
}

/// A labeled retrieval set.
pub struct EvalSet {
    /// The documents, in file order.
    pub corpus: Vec<EvalDoc>,
    /// `(id, text)` per query.
    pub queries: Vec<(String, String)>,
    /// Query id → document id → grade.
    pub qrels: HashMap<String, HashMap<String, i32>>,
}

/// Reads a JSON-lines file: each non-blank line parsed as a `T`, returned with its 1-based
/// line number. Errors name the file and line; `problem` says what a line should hold.
pub(crate) fn read_jsonl<T: serde::de::DeserializeOwned>(
    path: &Path,
    problem: &'static str,
) -> Result<Vec<(usize, T)>> {
    let f = std::fs::File::open(path).map_err(|e| BuildError::io("opening", path, e))?;
    let mut out = Vec::new();
    for (i, line) in std::io::BufReader::new(f).lines().enumerate() {
        let mut line = line.map_err(|source| BuildError::ReadLine {
            path: path.to_path_buf(),
            line: i + 1,
            source,
        })?;
        if i == 0 && line.starts_with('\u{feff}') {
            line.drain(..3); // a UTF-8 byte order mark (Windows editors write one)
        }
        if line.trim().is_empty() {
            continue;
        }
        let v = serde_json::from_str(&line).map_err(|source| BuildError::Json {
            path: path.to_path_buf(),
            line: i + 1,
            problem,
            source,
        })?;
        out.push((i + 1, v));
    }
    Ok(out)
}

fn field(v: &serde_json::Value, k: &str) -> String {
    match v.get(k) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => String::new(),
    }
}

/// A record's id: `id`, or BEIR's `_id` (a string or a number). Errors name the file and
/// line of a record with neither.
fn id_of(path: &Path, line: usize, v: &serde_json::Value) -> Result<String> {
    let id = field(v, "id");
    let id = if id.is_empty() { field(v, "_id") } else { id };
    if id.is_empty() {
        return Err(BuildError::InvalidInput {
            path: path.to_path_buf(),
            line: Some(line),
            message: "no \"id\" (or BEIR \"_id\") field: each line is {\"id\": …, \"text\": …}"
                .into(),
        });
    }
    Ok(id)
}

/// Reads a `queries.jsonl` file ({id, text} per line; BEIR's `_id` is read as `id`) as
/// `(id, text)` pairs. Errors name the file and line: a record without an id, without a
/// non-empty `text` (it would run as an empty query and count as a miss), or with an id
/// an earlier line has (a run file would hold the query twice).
pub fn load_queries(path: &Path) -> Result<Vec<(String, String)>> {
    let mut first: HashMap<String, usize> = HashMap::new();
    read_jsonl::<serde_json::Value>(path, "invalid JSON")?
        .iter()
        .map(|(line, v)| {
            let id = id_of(path, *line, v)?;
            let text = field(v, "text");
            let bad = |message: String| BuildError::InvalidInput {
                path: path.to_path_buf(),
                line: Some(*line),
                message,
            };
            if text.trim().is_empty() {
                return Err(bad(format!(
                    "query {id:?} has no \"text\" (or an empty one): each line is {{\"id\": …, \"text\": …}}"
                )));
            }
            if let Some(l) = first.insert(id.clone(), *line) {
                return Err(bad(format!("query id {id:?} again (first on line {l})")));
            }
            Ok((id, text))
        })
        .collect()
}

/// Calibration check: how many top-1 results fall in a score band and how many of those
/// are relevant (grade > 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Band {
    /// Lower bound of the band (inclusive).
    pub from: f32,
    /// Upper bound (exclusive; the top band includes 1.0).
    pub to: f32,
    /// Queries whose top-1 score is in the band.
    pub queries: usize,
    /// Of those, how many have a relevant top-1 document.
    pub relevant: usize,
}

/// The score bands users rely on: [0.6, 1], [0.3, 0.6), [0, 0.3), filled from
/// `(top-1 score, top-1 relevant?)` per query.
pub fn bands(top1: &[(f32, bool)]) -> Vec<Band> {
    let mut out = vec![
        Band {
            from: 0.6,
            to: 1.0,
            ..Band::default()
        },
        Band {
            from: 0.3,
            to: 0.6,
            ..Band::default()
        },
        Band {
            from: 0.0,
            to: 0.3,
            ..Band::default()
        },
    ];
    for &(s, rel) in top1 {
        let i = if s >= 0.6 {
            0
        } else if s >= 0.3 {
            1
        } else {
            2
        };
        out[i].queries += 1;
        out[i].relevant += usize::from(rel);
    }
    out
}

/// The readers' protocol the score bands are read by (issue 19): a top hit scoring ≥ 0.6 is
/// cited as is, one in 0.3–0.6 is used only if nothing else is on the topic, one under 0.3
/// is dropped. Its targets, per ranking of an answerable run: at least this share of the
/// top-1s scoring ≥ 0.6 are right.
pub const CITE_MIN_RIGHT: f64 = 0.90;
/// At most this share of the top-1s scoring < 0.3 are right (issue 19).
pub const DROP_MAX_RIGHT: f64 = 0.30;
/// Top-1 ECE (10 bins, [`ece`]) at most this (issue 19).
pub const ECE_MAX: f64 = 0.10;
/// In an unanswerable run (`--unanswerable`), at most this share of the top-1s reach ≥ 0.6
/// (issue 19).
pub const UNANSWERABLE_MAX_CITED: f64 = 0.01;

/// One check of the readers' protocol on one ranking (`jikji eval` prints and serializes
/// them per mode row).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProtocolCheck {
    /// `cite` (≥ 0.6 band: share right), `drop` (< 0.3 band: share right), `ece` (top-1
    /// ECE) or `unanswerable-cite` (share of an unanswerable run's top-1s at ≥ 0.6).
    pub check: &'static str,
    /// The measured share (0..1) or ECE; `None` when the band holds no top-1 (the check
    /// then holds: nothing in it can mislead).
    pub value: Option<f64>,
    /// Top-1s the value is measured on (the band's, or all with a hit).
    pub queries: usize,
    /// The target, e.g. `>= 0.90`.
    pub target: &'static str,
    /// Whether the target is met.
    pub ok: bool,
}

/// The protocol's checks for one ranking, from its top-1 [`bands`] (the order [`bands`]
/// returns: ≥ 0.6, 0.3–0.6, < 0.3) and top-1 [`ece`]: `cite`, `drop` and `ece` for an
/// answerable run, `unanswerable-cite` alone for an unanswerable one (every top-1 there
/// is wrong, so only how many reach "cite" says anything). Source: issue 19's targets, as
/// `scripts/study-bands.py` scores them.
pub fn protocol_checks(bands: &[Band], top1_ece: f64, unanswerable: bool) -> Vec<ProtocolCheck> {
    let band = |from: f32| {
        bands
            .iter()
            .find(|b| b.from == from)
            .copied()
            .unwrap_or_default()
    };
    let share = |b: Band| (b.queries > 0).then(|| b.relevant as f64 / b.queries as f64);
    let (cite, drop) = (band(0.6), band(0.0));
    let all: usize = bands.iter().map(|b| b.queries).sum();
    if unanswerable {
        let v = (all > 0).then(|| cite.queries as f64 / all as f64);
        return vec![ProtocolCheck {
            check: "unanswerable-cite",
            value: v,
            queries: all,
            target: "<= 0.01",
            ok: v.is_none_or(|v| v <= UNANSWERABLE_MAX_CITED),
        }];
    }
    vec![
        ProtocolCheck {
            check: "cite",
            value: share(cite),
            queries: cite.queries,
            target: ">= 0.90",
            ok: share(cite).is_none_or(|v| v >= CITE_MIN_RIGHT),
        },
        ProtocolCheck {
            check: "drop",
            value: share(drop),
            queries: drop.queries,
            target: "<= 0.30",
            ok: share(drop).is_none_or(|v| v <= DROP_MAX_RIGHT),
        },
        ProtocolCheck {
            check: "ece",
            value: (all > 0).then_some(top1_ece),
            queries: all,
            target: "<= 0.10",
            ok: top1_ece <= ECE_MAX,
        },
    ]
}

/// Expected calibration error of the top-1 scores (Naeini, Cooper & Hauskrecht 2015;
/// Guo et al. 2017): the `(score, relevant?)` pairs are split into `bins` equal-width score
/// bins over [0, 1], and each bin's |mean score − share relevant| is weighted by its share
/// of the queries. 0 is perfect; 0 for no queries.
pub fn ece(top1: &[(f32, bool)], bins: usize) -> f64 {
    let bins = bins.max(1);
    let mut sum = vec![(0.0f64, 0.0f64, 0usize); bins];
    for &(s, rel) in top1 {
        let i = ((s.clamp(0.0, 1.0) as f64 * bins as f64) as usize).min(bins - 1);
        sum[i].0 += s as f64;
        sum[i].1 += f64::from(u8::from(rel));
        sum[i].2 += 1;
    }
    let n = top1.len().max(1) as f64;
    sum.iter()
        .filter(|b| b.2 > 0)
        .map(|&(s, r, c)| (s / c as f64 - r / c as f64).abs() * c as f64 / n)
        .sum()
}

/// Query id → document name → grade, as read from a qrels file.
pub type Qrels = HashMap<String, HashMap<String, i32>>;

/// Reads a `qrels.tsv` file: tab-separated `query-id  doc  grade` (TREC's four columns
/// `query-id 0 doc grade` also work; a first line whose grade is not an integer is a
/// header). Returns the judgements and, per document name, the 1-based line that first
/// names it (for errors about unknown names). Errors name the file and line.
pub fn load_qrels(qpath: &Path) -> Result<(Qrels, Vec<(usize, String)>)> {
    let mut qrels: Qrels = HashMap::new();
    let mut named: Vec<(usize, String)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let bytes = std::fs::read(qpath).map_err(|e| BuildError::io("reading", qpath, e))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let b = e.as_bytes();
        BuildError::InvalidInput {
            path: qpath.to_path_buf(),
            line: Some(b[..at].iter().filter(|&&c| c == b'\n').count() + 1),
            message: format!(
                "not UTF-8 at byte {at} (saved as UTF-16, CP949 or Latin-1?): save it as UTF-8"
            ),
        }
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
    for (i, line) in text.lines().enumerate() {
        // Ids and names are trimmed: a trailing space (`pw \t…`) is never meant.
        let cols: Vec<&str> = line.split('\t').map(str::trim).collect();
        if line.trim().is_empty() {
            continue;
        }
        let (q, d, g) = match cols.as_slice() {
            [q, d, g] => (q, d, g),
            [q, _, d, g] => (q, d, g), // TREC qrels with an iteration column
            _ => {
                return Err(BuildError::InvalidInput {
                    path: qpath.to_path_buf(),
                    line: Some(i + 1),
                    message: "expected query-id, corpus-id, score (tab-separated)".into(),
                })
            }
        };
        let Ok(g) = g.trim().parse::<i32>() else {
            if i == 0 {
                continue; // header
            }
            return Err(BuildError::InvalidInput {
                path: qpath.to_path_buf(),
                line: Some(i + 1),
                message: format!("score {g:?} is not an integer"),
            });
        };
        if seen.insert(d.to_string()) {
            named.push((i + 1, d.to_string()));
        }
        qrels
            .entry(q.to_string())
            .or_default()
            .insert(d.to_string(), g);
    }
    Ok((qrels, named))
}

impl EvalSet {
    /// Reads `dir/{corpus.jsonl, queries.jsonl, qrels.tsv}` (ids in `id` or BEIR's `_id`);
    /// errors name the file and line.
    pub fn load(dir: &Path) -> Result<Self> {
        let cpath = dir.join("corpus.jsonl");
        let corpus = read_jsonl::<serde_json::Value>(&cpath, "invalid JSON")?
            .iter()
            .map(|(line, v)| {
                Ok(EvalDoc {
                    id: id_of(&cpath, *line, v)?,
                    title: field(v, "title"),
                    text: field(v, "text"),
                })
            })
            .collect::<Result<_>>()?;
        let queries = load_queries(&dir.join("queries.jsonl"))?;
        let (qrels, _) = load_qrels(&dir.join("qrels.tsv"))?;
        Ok(EvalSet {
            corpus,
            queries,
            qrels,
        })
    }
}

/// Metrics of one ranking for one query; `ranked` are document ids, best first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Metrics {
    /// nDCG@10.
    pub ndcg_10: f64,
    /// Recall@10.
    pub recall_10: f64,
    /// Recall@100.
    pub recall_100: f64,
    /// MRR@10.
    pub mrr_10: f64,
}

/// Computes [`Metrics`] for `ranked` against one query's judgements.
pub fn metrics(ranked: &[String], judged: &HashMap<String, i32>) -> Metrics {
    let relevant = judged.values().filter(|&&g| g > 0).count();
    let grade = |d: &str| judged.get(d).copied().unwrap_or(0).max(0) as f64;
    let dcg: f64 = ranked
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, d)| grade(d) / ((i + 2) as f64).log2())
        .sum();
    let mut ideal: Vec<f64> = judged.values().map(|&g| g.max(0) as f64).collect();
    ideal.sort_by(|a, b| b.total_cmp(a));
    let idcg: f64 = ideal
        .iter()
        .take(10)
        .enumerate()
        .map(|(i, g)| g / ((i + 2) as f64).log2())
        .sum();
    let recall = |k: usize| {
        if relevant == 0 {
            return 0.0;
        }
        ranked.iter().take(k).filter(|d| grade(d) > 0.0).count() as f64 / relevant as f64
    };
    let mrr = ranked
        .iter()
        .take(10)
        .position(|d| grade(d) > 0.0)
        .map(|p| 1.0 / (p + 1) as f64)
        .unwrap_or(0.0);
    Metrics {
        ndcg_10: if idcg > 0.0 { dcg / idcg } else { 0.0 },
        recall_10: recall(10),
        recall_100: recall(100),
        mrr_10: mrr,
    }
}

/// The `q`-quantile (0..=1) of ascending `sorted` values, nearest rank; NaN if empty.
/// Used for latency medians (q = 0.5) and p95 (q = 0.95).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// Mean of per-query metrics.
pub fn mean(ms: &[Metrics]) -> Metrics {
    let n = ms.len().max(1) as f64;
    Metrics {
        ndcg_10: ms.iter().map(|m| m.ndcg_10).sum::<f64>() / n,
        recall_10: ms.iter().map(|m| m.recall_10).sum::<f64>() / n,
        recall_100: ms.iter().map(|m| m.recall_100).sum::<f64>() / n,
        mrr_10: ms.iter().map(|m| m.mrr_10).sum::<f64>() / n,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hand-checked against the trec_eval definitions.
    #[test]
    fn metrics_match_hand_computed_values() {
        let judged: HashMap<String, i32> = [("a", 2), ("b", 1), ("c", 0), ("d", 1)]
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect();
        let ranked: Vec<String> = ["x", "b", "c", "a"].iter().map(|s| s.to_string()).collect();
        let m = metrics(&ranked, &judged);
        // DCG = 1/log2(3) + 2/log2(5); IDCG = 2/log2(2) + 1/log2(3) + 1/log2(4).
        let dcg = 1.0 / 3f64.log2() + 2.0 / 5f64.log2();
        let idcg = 2.0 + 1.0 / 3f64.log2() + 0.5;
        assert!((m.ndcg_10 - dcg / idcg).abs() < 1e-12, "{m:?}");
        assert!((m.recall_10 - 2.0 / 3.0).abs() < 1e-12);
        assert!((m.mrr_10 - 0.5).abs() < 1e-12);
        assert_eq!(metrics(&[], &judged), Metrics::default());
    }

    #[test]
    fn protocol_checks_follow_the_issue_19_targets() {
        // 10 top-1s at ≥ 0.6, 9 right (90 %: met); 4 under 0.3, 2 right (50 %: missed).
        let mut top1 = vec![(0.9f32, true); 9];
        top1.push((0.7, false));
        top1.extend([(0.1, true), (0.1, true), (0.2, false), (0.2, false)]);
        let c = protocol_checks(&bands(&top1), ece(&top1, 10), false);
        let by = |k: &str| c.iter().find(|x| x.check == k).unwrap().clone();
        assert!(by("cite").ok && (by("cite").value.unwrap() - 0.9).abs() < 1e-9);
        assert_eq!(by("cite").queries, 10);
        assert!(!by("drop").ok && (by("drop").value.unwrap() - 0.5).abs() < 1e-9);
        let e = ece(&top1, 10);
        assert_eq!(by("ece").ok, e <= 0.10, "{e}");
        // An empty band cannot mislead: its check holds, with no value.
        let c = protocol_checks(&bands(&[(0.65, true), (0.4, true)]), 0.05, false);
        let drop = c.iter().find(|x| x.check == "drop").unwrap();
        assert!(drop.ok && drop.value.is_none() && drop.queries == 0);
        // Unanswerable: only the share reaching "cite" counts; 1 of 100 is the limit.
        let mut un = vec![(0.2f32, false); 99];
        un.push((0.7, false));
        let c = protocol_checks(&bands(&un), ece(&un, 10), true);
        assert_eq!(c.len(), 1);
        assert!(c[0].ok && c[0].check == "unanswerable-cite" && c[0].queries == 100);
        un[0] = (0.61, false);
        assert!(!protocol_checks(&bands(&un), 0.0, true)[0].ok);
    }

    #[test]
    fn ece_matches_a_hand_computed_value() {
        // Bin [0.9, 1]: scores 0.95, 0.95, one right → |0.95 − 0.5| · 2/4.
        // Bin [0.2, 0.3): scores 0.25, 0.25, both wrong → |0.25 − 0| · 2/4.
        let top1 = [(0.95, true), (0.95, false), (0.25, false), (0.25, false)];
        assert!((ece(&top1, 10) - (0.45 * 0.5 + 0.25 * 0.5)).abs() < 1e-6);
        assert_eq!(ece(&[(1.0, true)], 10), 0.0);
        assert_eq!(ece(&[], 10), 0.0);
    }
}

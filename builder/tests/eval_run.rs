//! The eval runner in-process (`jikji_builder::eval::run`): exact metrics on a tiny set,
//! the TREC run file, and the errors of a queries file that does not fit the run.

mod common;

use jikji_builder::eval::{run, EvalOptions};
use jikji_builder::ingest::BundleSettings;
use jikji_builder::BuildError;
use jikji_engine::{Expansion, Fusion, Mode};

fn options(tmp: &std::path::Path) -> EvalOptions {
    EvalOptions {
        modes: vec![Mode::Bm25],
        fusions: vec![Fusion::Rrf],
        model: common::model_dir(),
        cache: tmp.join("cache"),
        threads: 1,
        limit: None,
        queries: None,
        unanswerable: false,
        run: Some(tmp.join("run.trec")),
        hits_out: Some(tmp.join("hits.jsonl")),
        progress: false,
        settings: BundleSettings::default(),
        lang_means: None,
        expansion: Expansion::default(),
        now_ms: None,
        prefer_tier: None,
        filters: Default::default(),
        query_model: None,
        nprobe: None,
        rescore: None,
    }
}

#[test]
fn eval_run_computes_exact_metrics_in_process() {
    let tmp = tempfile::tempdir().unwrap();
    let set = tmp.path().join("set");
    common::write_eval_set(
        &set,
        &[
            ("q1", "lamp at dusk"),
            ("q2", "apples from the orchard"),
            ("q3", "no label"),
        ],
        // q1 has two relevant documents; only the lighthouse shares a word with it.
        &[("q1", "lighthouse"), ("q1", "glacier"), ("q2", "orchard")],
    );
    let o = options(tmp.path());
    let r = run(&set, &o).unwrap();
    assert_eq!((r.documents, r.queries, r.chunks), (12, 2, 12));
    assert_eq!(r.modes.len(), 1);
    let m = &r.modes[0].metrics;
    // q1: DCG 1, ideal DCG 1 + 1/log2(3); q2: 1. Recall@10 q1 1/2, q2 1.
    let q1 = 1.0 / (1.0 + 1.0 / 3f64.log2());
    assert!((m.ndcg_10 - (q1 + 1.0) / 2.0).abs() < 1e-9, "{m:?}");
    assert!((m.recall_10 - 0.75).abs() < 1e-9, "{m:?}");
    assert!((m.mrr_10 - 1.0).abs() < 1e-9, "{m:?}");
    assert_eq!(r.modes[0].no_hit, 0);
    let run_file = std::fs::read_to_string(tmp.path().join("run.trec")).unwrap();
    let first: Vec<&str> = run_file.lines().next().unwrap().split(' ').collect();
    assert_eq!(&first[..4], ["q1", "Q0", "lighthouse", "1"], "{run_file}");
    assert!(run_file.lines().all(|l| l.ends_with(" jikji-bm25")));
    // The hits file: one line per judged query, top hits with their grades.
    let hits = std::fs::read_to_string(tmp.path().join("hits.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = hits
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{hits}");
    assert_eq!(
        (lines[0]["qid"].as_str(), lines[0]["mode"].as_str()),
        (Some("q1"), Some("bm25"))
    );
    assert_eq!(lines[0]["nrel"], 2);
    let top = &lines[0]["hits"][0];
    assert_eq!(
        (top[0].as_str(), top[4].as_i64()),
        (Some("lighthouse"), Some(1)),
        "{hits}"
    );
    assert!(top[2].as_f64().unwrap() > 0.0 && (0.0..=1.0).contains(&top[1].as_f64().unwrap()));
    // The text report shows the row with the same numbers.
    let text = r.to_text();
    assert!(text.contains(&format!("{:.4}", (q1 + 1.0) / 2.0)), "{text}");
}

#[test]
fn eval_run_refuses_queries_that_do_not_fit_the_run() {
    let tmp = tempfile::tempdir().unwrap();
    let set = tmp.path().join("set");
    common::write_eval_set(&set, &[("q1", "lamp at dusk")], &[("q1", "lighthouse")]);
    let o = EvalOptions {
        unanswerable: true,
        ..options(tmp.path())
    };
    match run(&set, &o) {
        Err(BuildError::Eval { message, .. }) => {
            assert!(message.contains("--unanswerable"), "{message}")
        }
        other => panic!("expected an Eval error, got {:?}", other.map(|r| r.queries)),
    }
    let other = tmp.path().join("other.jsonl");
    std::fs::write(&other, "{\"id\": \"x1\", \"text\": \"stars\"}\n").unwrap();
    let o = EvalOptions {
        queries: Some(other),
        ..options(tmp.path())
    };
    match run(&set, &o) {
        Err(BuildError::Eval { message, .. }) => {
            assert!(message.contains("none of the 1 queries"), "{message}")
        }
        other => panic!("expected an Eval error, got {:?}", other.map(|r| r.queries)),
    }
}

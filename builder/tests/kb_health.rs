//! Corpus health as a knowledge-base team runs it in CI, on the Korean and English fixture
//! knowledge base `tests/fixtures/kb-health` (made up for these tests): the update guard
//! and generations, gap alerts that stick, conflicts across languages, the source rule,
//! version grouping, and eval on a bundle.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_builder::update::{update_with, DeletionLimit, UpdateOptions};
use jikji_format::Bundle;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kb-health")
}

fn copy_dir(from: &Path, to: &Path) {
    for e in walkdir::WalkDir::new(from) {
        let e = e.unwrap();
        let dst = to.join(e.path().strip_prefix(from).unwrap());
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
}

/// A copy of the fixture under `dir`.
fn corpus(dir: &Path) -> PathBuf {
    let c = dir.join("kb");
    copy_dir(&fixture(), &c);
    c
}

fn jikji(args: &[&str], paths: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(args)
        .args(paths)
        .current_dir(common::root())
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A BM25-only bundle of `corpus` (drafts admitted, as the fixture has one).
fn build_bm25(corpus: &Path, bundle: &Path) {
    build(
        &IngestOptions::new(corpus, bundle),
        &BundleSettings {
            allow_ai_draft: true,
            ..BundleSettings::default()
        },
    )
    .unwrap();
}

fn sources(bundle: &Path) -> Vec<String> {
    Bundle::open_dir(bundle)
        .unwrap()
        .manifest()
        .sources
        .iter()
        .map(|s| s.path.clone())
        .collect()
}

/// Every file of a bundle folder (pages under `p/` included), by path, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().is_file())
        .map(|e| {
            (
                e.path().strip_prefix(dir).unwrap().display().to_string(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// The scenario's mistake: updating against a folder that holds 1 of the bundle's files.
#[test]
fn update_deleted_most_of_the_bundle_without_asking() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let total = sources(&bundle).len();
    assert_eq!(total, 14, "README.md is not a corpus file");
    let before = files(&bundle);

    let one = tmp.path().join("one");
    std::fs::create_dir_all(one.join("1. api")).unwrap();
    std::fs::copy(
        kb.join("1. api/payment-api.md"),
        one.join("1. api/payment-api.md"),
    )
    .unwrap();
    let out = jikji(&["update", "--quiet"], &[&bundle, &one]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("would delete 13 of the bundle's 14 files, more than the 2 allowed (--max-deletions 20%)"),
        "{e}"
    );
    assert!(e.contains("--allow-deletions"), "{e}");
    assert_eq!(files(&bundle), before, "the bundle is untouched");
    assert!(!PathBuf::from(format!("{}.prev.1", bundle.display())).exists());

    // A count works too, and --allow-deletions lets it through.
    let out = jikji(
        &["update", "--quiet", "--max-deletions", "12"],
        &[&bundle, &one],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let out = jikji(
        &["update", "--quiet", "--allow-deletions"],
        &[&bundle, &one],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(sources(&bundle), ["1. api/payment-api.md"]);
    // The refused attempts left no generation behind; the allowed one kept the old bundle.
    assert_eq!(
        sources(Path::new(&format!("{}.prev.1", bundle.display()))).len(),
        14
    );
}

/// At the limit is allowed, one more is refused (20% of 14 files = 2).
#[test]
fn deletion_limit_is_a_share_of_the_bundle_rounded_down() {
    assert_eq!(DeletionLimit::Percent(20.0).limit(15), 3);
    assert_eq!(DeletionLimit::Percent(20.0).limit(24), 4);
    assert_eq!(DeletionLimit::Files(7).limit(24), 7);
    assert_eq!(
        "25%".parse::<DeletionLimit>(),
        Ok(DeletionLimit::Percent(25.0))
    );
    assert_eq!("5".parse::<DeletionLimit>(), Ok(DeletionLimit::Files(5)));
    assert!("120%".parse::<DeletionLimit>().is_err());
    assert!("many".parse::<DeletionLimit>().is_err());

    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    for f in ["5. plans/sprint-plan_v1.md", "3. policy/cart-limits.md"] {
        std::fs::remove_file(kb.join(f)).unwrap();
    }
    let opts = IngestOptions::new(&kb, &bundle);
    let r = update_with(&opts, &UpdateOptions::default()).unwrap();
    assert_eq!(r.deleted.len(), 2);
    std::fs::remove_file(kb.join("2. mobile/android-requirements.md")).unwrap();
    std::fs::remove_file(kb.join("2. mobile/ios-requirements.md")).unwrap();
    std::fs::remove_file(kb.join("1. api/auth-api_v1.md")).unwrap();
    // 3 of the 12 files left is 25%: above 20%.
    let e = update_with(&opts, &UpdateOptions::default()).unwrap_err();
    assert!(
        e.to_string()
            .contains("would delete 3 of the bundle's 12 files, more than the 2 allowed"),
        "{e}"
    );
}

fn prev(bundle: &Path, k: usize) -> PathBuf {
    PathBuf::from(format!("{}.prev.{k}", bundle.display()))
}

fn append(path: &Path, text: &str) {
    let mut s = std::fs::read_to_string(path).unwrap();
    s.push_str(text);
    std::fs::write(path, s).unwrap();
}

/// Two generations by default (`BUNDLE.prev.1`, `BUNDLE.prev.2`), rotated on each update;
/// a user's folder under one of those names is never replaced.
#[test]
fn update_kept_only_one_previous_generation() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let cart = kb.join("3. policy/cart-limits.md");
    let chunks = |b: &Path| Bundle::open_dir(b).unwrap().manifest().counts.chunks;
    let mut built = vec![std::fs::read(bundle.join("jikji.json")).unwrap()];
    for round in 1..=3 {
        append(
            &cart,
            &format!("\n## Note {round}\n\nRound {round} of edits.\n"),
        );
        let out = jikji(&["update", "--quiet"], &[&bundle, &kb]);
        assert!(out.status.success(), "{}", stderr(&out));
        built.push(std::fs::read(bundle.join("jikji.json")).unwrap());
    }
    // Generation k is the bundle as it was k updates ago.
    assert_eq!(
        std::fs::read(prev(&bundle, 1).join("jikji.json")).unwrap(),
        built[2]
    );
    assert_eq!(
        std::fs::read(prev(&bundle, 2).join("jikji.json")).unwrap(),
        built[1]
    );
    assert!(!prev(&bundle, 3).exists());
    assert!(!PathBuf::from(format!("{}.prev", bundle.display())).exists());
    assert!(chunks(&prev(&bundle, 2)) < chunks(&bundle));

    // --keep 3 keeps one more.
    append(&cart, "\n## Note 4\n\nRound 4.\n");
    let out = jikji(&["update", "--quiet", "--keep", "3"], &[&bundle, &kb]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read(prev(&bundle, 3).join("jikji.json")).unwrap(),
        built[1]
    );

    // A folder of notes named like generation 2: refused before anything is written.
    std::fs::remove_dir_all(prev(&bundle, 2)).unwrap();
    std::fs::create_dir_all(prev(&bundle, 2)).unwrap();
    std::fs::write(prev(&bundle, 2).join("notes.txt"), "mine\n").unwrap();
    let before = files(&bundle);
    append(&cart, "\n## Note 5\n\nRound 5.\n");
    let out = jikji(&["update", "--quiet"], &[&bundle, &kb]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("bundle.prev.2 exists and is not a jikji bundle"),
        "{}",
        stderr(&out)
    );
    assert_eq!(files(&bundle), before);
    assert_eq!(
        std::fs::read_to_string(prev(&bundle, 2).join("notes.txt")).unwrap(),
        "mine\n"
    );
}

/// A bundle built with `--allow-ai-draft`: a plain update keeps the draft (the policy is
/// the bundle's), also when the manifest predates the `allow_ai_draft` field.
#[test]
fn plain_update_reported_an_ai_draft_as_deleted() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let draft = "6. drafts/release-notes.md";
    assert!(sources(&bundle).iter().any(|s| s == draft));
    append(&kb.join("3. policy/cart-limits.md"), "\nEdited.\n");
    let out = jikji(&["update"], &[&bundle, &kb]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("deleted: "), "{}", stderr(&out));
    assert!(stderr(&out).contains("0 deleted"), "{}", stderr(&out));
    assert!(sources(&bundle).iter().any(|s| s == draft));

    // A manifest written before `allow_ai_draft` was recorded (the field absent).
    let mpath = bundle.join("jikji.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m.as_object_mut().unwrap().remove("allow_ai_draft");
    std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    assert!(!Bundle::open_dir(&bundle).unwrap().manifest().allow_ai_draft);
    append(&kb.join("3. policy/cart-limits.md"), "\nEdited again.\n");
    let out = jikji(&["update", "--json", "--quiet"], &[&bundle, &kb]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(r["deleted"], serde_json::json!([]), "{r}");
    assert!(sources(&bundle).iter().any(|s| s == draft));
    assert!(Bundle::open_dir(&bundle).unwrap().manifest().allow_ai_draft);
}

/// `jikji gaps --mode bm25 --json` on `bundle` with `queries` (+ `extra` options): exit code,
/// the run record and stderr.
fn gaps(bundle: &Path, queries: &Path, extra: &[&str]) -> (i32, serde_json::Value, String) {
    let mut args = vec!["gaps", "--mode", "bm25", "--json"];
    args.extend_from_slice(extra);
    let out = jikji(&args, &[bundle, queries]);
    let run =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", stderr(&out)));
    (out.status.code().unwrap(), run, stderr(&out))
}

fn outcome<'a>(run: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    run["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in {run}"))
}

const CORE: &str = r#"{"id": "ios", "query": "minimum supported iOS version", "min_score": 0.01, "expect": "2. mobile/ios-*.md"}
{"id": "retention", "query": "how long are access logs kept", "min_score": 0.01}
{"id": "timeout", "query": "payment request timeout", "min_score": 0.01, "expect": ["1. api/payment-api.md", "1. api/결제-API.md"]}
"#;

/// The scenario's two gaps failures: a drop that a retry forgot, and an iOS query answered
/// by the Android page that passed on its score.
#[test]
fn gaps_alert_disappeared_on_a_retry() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let queries = tmp.path().join("core.jsonl");
    std::fs::write(&queries, CORE).unwrap();

    let (code, first, _) = gaps(&bundle, &queries, &[]);
    assert_eq!(code, 0, "{first}");
    assert_eq!(
        outcome(&first, "ios")["top_source"],
        "2. mobile/ios-requirements.md"
    );
    assert_eq!(outcome(&first, "ios")["wrong_source"], false);
    assert_eq!(
        outcome(&first, "ios")["accepted"],
        true,
        "the first run is the baseline"
    );
    let base = outcome(&first, "retention")["score"].as_f64().unwrap();

    // The iOS page is removed and the retention page rewritten without its key words.
    std::fs::remove_file(kb.join("2. mobile/ios-requirements.md")).unwrap();
    std::fs::write(
        kb.join("3. policy/privacy-retention.md"),
        "Source: https://kb.example.com/policy/retention\n\n# Privacy\n\nWe delete what we no longer need; ask support about access to your data.\n",
    )
    .unwrap();
    let out = jikji(&["update", "--quiet"], &[&bundle, &kb]);
    assert!(out.status.success(), "{}", stderr(&out));

    let (code, second, _) = gaps(&bundle, &queries, &["--drop", "0.05"]);
    assert_eq!(code, 1, "{second}");
    let ios = outcome(&second, "ios");
    assert_eq!(ios["top_source"], "2. mobile/android-requirements.md");
    assert_eq!(ios["wrong_source"], true, "{ios}");
    assert_eq!(ios["top_changed"], true);
    assert_eq!(ios["baseline_source"], "2. mobile/ios-requirements.md");
    let r = outcome(&second, "retention");
    let now = r["score"].as_f64().unwrap();
    assert!(base - now >= 0.05, "{base} → {now}");
    assert_eq!(r["drop"], true);
    assert_eq!(outcome(&second, "timeout")["drop"], false);

    // The retry on the same bundle: the drop is still measured against the baseline.
    let (code, third, _) = gaps(&bundle, &queries, &["--drop", "0.05"]);
    assert_eq!(code, 1, "the alert persists on a retry: {third}");
    let r = outcome(&third, "retention");
    assert_eq!(r["drop"], true);
    assert!((r["previous"].as_f64().unwrap() - now).abs() < 1e-6);
    assert!((r["baseline"].as_f64().unwrap() - base).abs() < 1e-6);

    // Accepting the new retention page clears its drop (from now on); iOS still fails.
    let (code, fourth, _) = gaps(&bundle, &queries, &["--drop", "0.05", "--accept=retention"]);
    assert_eq!(code, 1);
    assert_eq!(outcome(&fourth, "retention")["accepted"], true);
    assert_eq!(outcome(&fourth, "ios")["wrong_source"], true);
    let (code, fifth, _) = gaps(&bundle, &queries, &["--drop", "0.05"]);
    assert_eq!(code, 1, "{fifth}");
    assert_eq!(outcome(&fifth, "retention")["drop"], false);
    assert!((outcome(&fifth, "retention")["baseline"].as_f64().unwrap() - now).abs() < 1e-6);
    // Text output names the expected source and the change of top source.
    let out = jikji(
        &["gaps", "--mode", "bm25", "--drop", "0.05"],
        &[&bundle, &queries],
    );
    let text = stdout(&out);
    assert!(text.contains("WRONG-SOURCE"), "{text}");
    assert!(
        text.contains("expected a hit from 2. mobile/ios-*.md"),
        "{text}"
    );
    assert!(
        text.contains("2. mobile/ios-requirements.md → 2. mobile/android-requirements.md"),
        "{text}"
    );
    // --set-baseline accepts everything, but a wrong source is a requirement: still 1.
    let (code, _, _) = gaps(&bundle, &queries, &["--set-baseline"]);
    assert_eq!(code, 1);
}

/// Small falls that no single run flags add up below the baseline: a slide.
#[test]
fn gaps_never_alerted_a_slow_slide() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let queries = tmp.path().join("core.jsonl");
    std::fs::write(
        &queries,
        "{\"id\": \"cart\", \"query\": \"how many items fit in a cart\", \"min_score\": 0.01}\n",
    )
    .unwrap();
    let (code, first, _) = gaps(&bundle, &queries, &[]);
    assert_eq!(code, 0);
    let s = outcome(&first, "cart")["score"].as_f64().unwrap();
    assert!(s > 0.0, "{s}");
    // A history of earlier, slightly better runs: 0.15 above today at the baseline, then
    // 0.07 and 0.03 above (each step under the drop threshold 0.2).
    let history = tmp.path().join("core.history.jsonl");
    let record = |score: f64, accepted: bool| {
        let mut run = first.clone();
        run["results"][0]["score"] = serde_json::json!(score);
        run["results"][0]["accepted"] = serde_json::json!(accepted);
        serde_json::to_string(&run).unwrap()
    };
    std::fs::write(
        &history,
        [
            record(s + 0.15, true),
            record(s + 0.07, false),
            record(s + 0.03, false),
        ]
        .join("\n"),
    )
    .unwrap();
    let (code, run, _) = gaps(&bundle, &queries, &[]);
    assert_eq!(code, 1, "{run}");
    let r = outcome(&run, "cart");
    assert_eq!(r["drop"], false);
    assert_eq!(r["slide"], true);
    let out = jikji(&["gaps", "--mode", "bm25"], &[&bundle, &queries]);
    assert!(stdout(&out).starts_with("SLIDE"), "{}", stdout(&out));
}

/// Raw scores compared with min_score said nothing; now a warning, and exit 1 with
/// --strict.
#[test]
fn gaps_compared_raw_scores_on_an_uncalibrated_bundle_silently() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let mpath = bundle.join("jikji.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m.as_object_mut().unwrap().remove("calibration");
    std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let queries = tmp.path().join("core.jsonl");
    std::fs::write(
        &queries,
        "{\"id\": \"cart\", \"query\": \"cart items\", \"min_score\": 0.01}\n",
    )
    .unwrap();
    let (code, run, err) = gaps(&bundle, &queries, &[]);
    assert_eq!(code, 0, "{run}");
    assert_eq!(outcome(&run, "cart")["calibrated"], false);
    let out = jikji(&["gaps", "--mode", "bm25"], &[&bundle, &queries]);
    assert!(
        stderr(&out).contains("warning: 1 of 1 queries compared raw scores"),
        "{}",
        stderr(&out)
    );
    let _ = err;
    let (code, _, _) = gaps(&bundle, &queries, &["--strict"]);
    assert_eq!(code, 1);
}

/// A bundle of `corpus` with vectors (the real model; vectors cached in
/// `target/jikji-test-cache`), drafts admitted.
fn build_dense(corpus: &Path, bundle: &Path) {
    build(
        &IngestOptions {
            model_dir: Some(common::model_dir()),
            cache_dir: Some(common::cache_dir()),
            threads: 2,
            ..IngestOptions::new(corpus, bundle)
        },
        &BundleSettings {
            allow_ai_draft: true,
            ..BundleSettings::default()
        },
    )
    .unwrap();
}

fn jikji_model(args: &[&str], paths: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(args)
        .args(paths)
        .env("JIKJI_MODEL_DIR", common::model_dir())
        .output()
        .unwrap()
}

/// The scenario's two contradictions between an English and a Korean page (60 s / 30초,
/// 6 months / 3개월) were missed even at a low threshold, and `conflicts` exited 0.
#[test]
fn conflicts_missed_contradictions_across_languages() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    build_dense(&fixture(), &bundle);
    let out = jikji_model(&["conflicts", "--json"], &[&bundle]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "findings exit 1: {}",
        stderr(&out)
    );
    let found: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let pairs: Vec<(String, String, String, String, String)> = found
        .iter()
        .map(|c| {
            let d = &c["differences"][0];
            (
                c["newer"]["source"].as_str().unwrap().to_string(),
                c["older"]["source"].as_str().unwrap().to_string(),
                d["newer"][0].as_str().unwrap().to_string(),
                d["older"][0].as_str().unwrap().to_string(),
                c["newer_by"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let want = |n: &str, o: &str, vn: &str, vo: &str, by: &str| {
        (
            n.to_string(),
            o.to_string(),
            vn.to_string(),
            vo.to_string(),
            by.to_string(),
        )
    };
    assert_eq!(
        pairs,
        [
            want(
                "1. api/payment-api.md",
                "1. api/결제-API.md",
                "60 s",
                "30 s",
                "updated 2026-09-01 > 2026-03-02"
            ),
            want(
                "3. policy/privacy-retention.md",
                "3. policy/개인정보-보관.md",
                "6 months",
                "3 months",
                "updated 2026-08-01 > 2026-02-10"
            ),
        ],
        "exactly the two planted contradictions (the promotion pages agree on dates and amounts written differently)"
    );
    assert!(found.iter().all(|c| c["cross_language"] == true));
    let out = jikji_model(&["conflicts"], &[&bundle]);
    let text = stdout(&out);
    assert!(
        text.contains("timeout / 설정값: 60 s (newer) vs 30 s (older)"),
        "{text}"
    );
    assert!(text.contains("2 contradiction candidate(s)"), "{text}");
}

/// A lightly edited copy that changes the timeout was reported as a 0.99 duplicate: the
/// side holding the newer fact could have been deleted.
#[test]
fn dedup_called_a_pair_with_different_values_a_duplicate() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    build_dense(&fixture(), &bundle);
    let new = tmp.path().join("new");
    std::fs::create_dir_all(&new).unwrap();
    let payment = std::fs::read_to_string(fixture().join("1. api/payment-api.md")).unwrap();
    std::fs::write(
        new.join("payment-copy.md"),
        payment.replace("timeout is 60 seconds", "timeout is 30 seconds"),
    )
    .unwrap();
    std::fs::copy(
        fixture().join("3. policy/cart-limits.md"),
        new.join("cart-copy.md"),
    )
    .unwrap();
    let out = jikji_model(&["dedup", "--json", "--new"], &[&new, &bundle]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let v: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let timeout = v
        .iter()
        .find(|c| c["heading_path"].to_string().contains("Request timeout"))
        .unwrap();
    assert!(timeout["cosine"].as_f64().unwrap() >= 0.965, "{timeout}");
    assert_eq!(timeout["class"], "conflict", "{timeout}");
    assert_eq!(timeout["differences"][0]["newer"][0], "30 s");
    assert_eq!(timeout["differences"][0]["older"][0], "60 s");
    assert!(v
        .iter()
        .filter(|c| c["source"] == "cart-copy.md")
        .all(|c| c["class"] == "duplicate"));
    // The unchanged retry section of the copy is still a duplicate.
    let retries = v
        .iter()
        .find(|c| c["heading_path"].to_string().contains("Retries"))
        .unwrap();
    assert_eq!(retries["class"], "duplicate");

    // Within a bundle that holds both: listed as values differing, not as duplicates.
    let kb = corpus(tmp.path());
    std::fs::copy(
        new.join("payment-copy.md"),
        kb.join("1. api/payment-copy.md"),
    )
    .unwrap();
    let both = tmp.path().join("both");
    build_dense(&kb, &both);
    let out = jikji_model(&["dedup", "--json"], &[&both]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dup_sources: Vec<(String, String)> = v["duplicates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["a"]["heading_path"].to_string(),
                p["b"]["heading_path"].to_string(),
            )
        })
        .collect();
    assert!(
        dup_sources
            .iter()
            .all(|(a, _)| !a.contains("Request timeout")),
        "{dup_sources:?}"
    );
    let differ = v["values_differ"].as_array().unwrap();
    assert!(
        differ.iter().any(|p| p["a"]["heading_path"]
            .to_string()
            .contains("Request timeout")),
        "{v}"
    );
}

fn kb_sources() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kb-sources")
}

/// `출처 : 고객센터 공지` (a space before the colon, no URL) was rejected, and a URL in a code
/// span counted as the source, with its backtick.
#[test]
fn source_rule_counted_a_code_example_and_rejected_a_spaced_notice() {
    use jikji_builder::corpus::{scan, CheckOptions};
    let s = scan(&kb_sources(), CheckOptions::default()).unwrap();
    assert!(s.findings.is_empty(), "{:#?}", s.findings);
    let src = |rel: &str| {
        s.files
            .iter()
            .find(|f| f.rel == rel)
            .unwrap_or_else(|| panic!("{rel} not accepted"))
            .source_url
            .clone()
    };
    assert_eq!(
        src("고객센터-안내.md").as_deref(),
        Some("고객센터 공지 2026-11호")
    );
    assert_eq!(
        src("refunds.md").as_deref(),
        Some("https://kb.example.com/policy/refunds")
    );
    // The code examples come first; the source is the URL in the text, without its '.'.
    assert_eq!(
        src("orders-api.md").as_deref(),
        Some("https://kb.example.com/api/orders")
    );
    assert_eq!(
        src("handbook.md").as_deref(),
        Some("Support team handbook, 3rd edition (printed)")
    );
    assert_eq!(
        src("shipping.md").as_deref(),
        Some("https://kb.example.com/ko/shipping")
    );

    // A file whose only URLs are examples in code has no source: an error, and a warning
    // naming the line of the example.
    let tmp = tempfile::tempdir().unwrap();
    let c = tmp.path().join("c");
    copy_dir(&kb_sources(), &c);
    std::fs::write(
        c.join("webhooks.md"),
        "# Webhooks\n\nRegister a hook:\n\n    POST with `curl -X POST https://api.example.com/v2/hooks`\n\n```json\n{\"url\": \"https://example.com/hook\"}\n```\n",
    )
    .unwrap();
    let out = jikji(&["check"], &[&c]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out) + &stderr(&out);
    assert!(
        text.contains("warning[url-in-code] webhooks.md:5: the only URL, https://api.example.com/v2/hooks, is inside code"),
        "{text}"
    );
    assert!(
        text.contains("error[no-source] webhooks.md: no source:"),
        "{text}"
    );
    assert!(
        text.contains("5 file(s) ok, 1 error(s), 1 warning(s)"),
        "{text}"
    );
}

/// `auth-api_v1.md` ("still supported until 2027-06-30") was archived next to
/// `auth-api_v2.md` by its file-name suffix, and nothing said so.
#[test]
fn version_grouping_archived_a_live_api_silently() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    let out = jikji(
        &[
            "build",
            "--no-embed",
            "--allow-ai-draft",
            "--quiet",
            "--out",
        ],
        &[&bundle, &kb],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let e = stderr(&out);
    assert!(
        e.contains("archived: 5. plans/sprint-plan_v1.md (v1) archived by 5. plans/sprint-plan_v2.md (v2): same name but the version suffix (document 5. plans/sprint-plan)"),
        "{e}"
    );
    assert!(
        !e.contains("auth-api_v1.md (v1) archived"),
        "versioning: none: {e}"
    );
    let archived = |b: &Path| -> Vec<String> {
        Bundle::open_dir(b)
            .unwrap()
            .manifest()
            .sources
            .iter()
            .filter(|s| s.archived)
            .map(|s| s.path.clone())
            .collect()
    };
    assert_eq!(archived(&bundle), ["5. plans/sprint-plan_v1.md"]);

    // Without the opt-out the suffix groups the two APIs, and the update says which and why.
    let v1 = kb.join("1. api/auth-api_v1.md");
    let text = std::fs::read_to_string(&v1).unwrap();
    std::fs::write(&v1, text.replace("versioning: none\n", "")).unwrap();
    let out = jikji(&["update", "--quiet"], &[&bundle, &kb]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("archived: 1. api/auth-api_v1.md (v1) archived by 1. api/auth-api_v2.md (v2): same name but the version suffix (document 1. api/auth-api); if both are current, put `versioning: none` in the older one's front matter"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        archived(&bundle),
        ["1. api/auth-api_v1.md", "5. plans/sprint-plan_v1.md"]
    );
    // A doc_id of its own also keeps it apart.
    std::fs::write(
        &v1,
        text.replace("versioning: none", "doc_id: auth-api-cookies"),
    )
    .unwrap();
    let out = jikji(&["update", "--quiet"], &[&bundle, &kb]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("unarchived: 1. api/auth-api_v1.md"),
        "{}",
        stderr(&out)
    );
    assert_eq!(archived(&bundle), ["5. plans/sprint-plan_v1.md"]);
}

/// BEIR's `_id` gave "none of the 3 queries has a relevant document": it is read as `id`,
/// and a record with neither is an error naming the file and line.
#[test]
fn eval_read_beir_ids_as_empty() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kb-eval-beir");
    let out = jikji(&["eval", "--modes", "bm25", "--json"], &[&dir]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["queries"], 3, "{r}");
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("set");
    copy_dir(&dir, &bad);
    std::fs::write(
        bad.join("queries.jsonl"),
        "{\"_id\": \"q1\", \"text\": \"timeout\"}\n{\"qid\": \"q2\", \"text\": \"iOS\"}\n",
    )
    .unwrap();
    let out = jikji(&["eval", "--modes", "bm25"], &[&bad]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("queries.jsonl:2: no \"id\" (or BEIR \"_id\") field"),
        "{}",
        stderr(&out)
    );
}

fn kb_eval() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kb-health-eval")
}

/// `jikji eval` could only build its own bundle from `corpus.jsonl`, so a real bundle's
/// versions, expiry and provenance never applied. `--bundle` evaluates an existing one,
/// with qrels naming source paths or doc_ids.
#[test]
fn eval_could_not_evaluate_an_existing_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    // The cart limits expire at the end of 2026.
    let cart = kb.join("3. policy/cart-limits.md");
    let text = std::fs::read_to_string(&cart).unwrap();
    std::fs::write(
        &cart,
        text.replacen(
            "updated: 2026-04-01",
            "updated: 2026-04-01\nexpires: 2026-12-31",
            1,
        ),
    )
    .unwrap();
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let run = tmp.path().join("run.trec");
    let eval = |now: &str| {
        let out = jikji(
            &["eval", "--modes", "bm25", "--json", "--now", now, "--run"],
            &[&run, Path::new("--bundle"), &bundle, &kb_eval()],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let lines = std::fs::read_to_string(&run).unwrap();
        (r, lines)
    };
    let (r, lines) = eval("2026-12-01");
    assert_eq!(r["queries"], 5, "{r}");
    assert_eq!(r["documents"], 14);
    assert_eq!(r["bundle"], bundle.display().to_string());
    let m = &r["modes"][0]["metrics"];
    assert_eq!(
        m["ndcg_10"], 1.0,
        "every query finds its document first: {r}\n{lines}"
    );
    // The sprint plan is judged by its doc_id: the current version (v2) counts for it, and
    // the archived v1 is never returned. Spaces in names are %20 in the run file.
    assert!(
        lines.contains("sprint Q0 5.%20plans/sprint-plan 1 "),
        "{lines}"
    );
    assert!(!lines.contains("sprint-plan_v1"), "{lines}");
    assert!(
        lines.contains("timeout-ko Q0 1.%20api/결제-API.md 1 "),
        "{lines}"
    );

    // After the cart limits expire, their query has no right answer any more.
    let (r, lines) = eval("2027-01-15");
    assert!(!lines.contains("cart-limits"), "{lines}");
    let m = &r["modes"][0]["metrics"];
    assert!((m["recall_10"].as_f64().unwrap() - 0.8).abs() < 1e-9, "{r}");

    // A name that is neither a source path nor a doc_id is an error naming the line.
    let bad = tmp.path().join("bad");
    copy_dir(&kb_eval(), &bad);
    std::fs::write(
        bad.join("qrels.tsv"),
        "query-id\tcorpus-id\tscore\nios\tios-requirements.md\t1\n",
    )
    .unwrap();
    let out = jikji(&["eval", "--modes", "bm25", "--bundle"], &[&bundle, &bad]);
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(e.contains("qrels.tsv:2"), "{e}");
    assert!(
        e.contains("\"ios-requirements.md\" is neither a source path nor a doc_id"),
        "{e}"
    );
    assert!(
        e.contains("did you mean \"2. mobile/ios-requirements.md\"?"),
        "{e}"
    );
}

/// Session 31 (issue 19's knowledge-base scenario): a qrels line judging an archived version
/// (`5. plans/sprint-plan_v1.md`, replaced by `_v2`) was accepted, and its query counted a
/// miss whatever the ranking (searches leave archived versions out).
#[test]
fn eval_bundle_accepted_an_archived_version_in_qrels() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let bad = tmp.path().join("bad");
    copy_dir(&kb_eval(), &bad);
    std::fs::write(
        bad.join("qrels.tsv"),
        "query-id\tcorpus-id\tscore\nsprint\t5. plans/sprint-plan_v1.md\t1\n",
    )
    .unwrap();
    let out = jikji(&["eval", "--modes", "bm25", "--bundle"], &[&bundle, &bad]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let e = stderr(&out);
    assert!(e.contains("qrels.tsv:2"), "{e}");
    assert!(
        e.contains("\"5. plans/sprint-plan_v1.md\" is an archived version")
            && e.contains("judge the doc_id \"5. plans/sprint-plan\"")
            && e.contains("the current version \"5. plans/sprint-plan_v2.md\""),
        "{e}"
    );
}

/// Session 31 newcomer run: a qrels name written with other case, a Windows `\\`, or in
/// decomposed Unicode (macOS file names) got no "did you mean", and the NFD error printed a
/// name that looked identical to the real one.
#[test]
fn eval_bundle_gave_no_hint_for_a_name_written_differently() {
    use unicode_normalization::UnicodeNormalization;
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let nfd: String = "1. api/결제-API.md".nfd().collect();
    for (written, meant) in [
        (
            "2. Mobile/iOS-Requirements.md",
            "2. mobile/ios-requirements.md",
        ),
        (
            "2. mobile\\ios-requirements.md",
            "2. mobile/ios-requirements.md",
        ),
        (nfd.as_str(), "1. api/결제-API.md"),
    ] {
        let bad = tmp.path().join("bad");
        let _ = std::fs::remove_dir_all(&bad);
        copy_dir(&kb_eval(), &bad);
        std::fs::write(
            bad.join("qrels.tsv"),
            format!("query-id\tcorpus-id\tscore\nios\t{written}\t1\n"),
        )
        .unwrap();
        let out = jikji(&["eval", "--modes", "bm25", "--bundle"], &[&bundle, &bad]);
        assert_eq!(out.status.code(), Some(1));
        let e = stderr(&out);
        assert!(
            e.contains("qrels.tsv:2") && e.contains(&format!("did you mean {meant:?}?")),
            "{written:?}: {e}"
        );
    }
}

/// Session 31: measuring a knowledge base's unanswerable questions with `--bundle` needed
/// `--queries` although DIR/queries.jsonl held them, and a `qrels.tsv` although no query has
/// an answer; the report called them "judged queries".
#[test]
fn eval_bundle_unanswerable_needed_queries_and_qrels() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let un = tmp.path().join("unanswerable");
    std::fs::create_dir_all(&un).unwrap();
    std::fs::write(
        un.join("queries.jsonl"),
        "{\"id\": \"u1\", \"text\": \"how do I reset my password\"}\n\
         {\"id\": \"u2\", \"text\": \"현금영수증 발급 방법\"}\n",
    )
    .unwrap();
    let out = jikji(
        &["eval", "--modes", "bm25", "--unanswerable", "--bundle"],
        &[&bundle, &un],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("2 unanswerable queries"), "{text}");
    assert!(
        text.contains("readers' protocol, unanswerable queries"),
        "{text}"
    );
    // A bundle path with nothing there, or a folder that is not a bundle, says so (it named
    // a missing manifest.json); the same check as `jikji search` and `jikji verify`.
    for (path, says) in [
        (tmp.path().join("nope"), "not found"),
        (kb.clone(), "not a bundle folder"),
    ] {
        let out = jikji(
            &["eval", "--modes", "bm25", "--bundle"],
            &[&path, &kb_eval()],
        );
        assert_eq!(out.status.code(), Some(1));
        assert!(stderr(&out).contains(says), "{}", stderr(&out));
    }
    // The set's own judged queries are still refused, pointing at --queries.
    let out = jikji(
        &["eval", "--modes", "bm25", "--unanswerable", "--bundle"],
        &[&bundle, &kb_eval()],
    );
    assert_eq!(out.status.code(), Some(1));
    let e = stderr(&out);
    assert!(
        e.contains("have relevant documents") && e.contains("--queries FILE"),
        "{e}"
    );
}

/// Hits carried tier and provenance, but nothing let a curated tier win a tie:
/// `--prefer-tier` puts that tier first among hits whose scores are within 0.01.
#[test]
fn a_curated_tier_could_not_win_a_tie() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    // The same page copied from an online source into a less curated tier folder.
    std::fs::create_dir_all(kb.join("9. online")).unwrap();
    std::fs::copy(
        kb.join("3. policy/cart-limits.md"),
        kb.join("9. online/cart-limits-copy.md"),
    )
    .unwrap();
    let bundle = tmp.path().join("bundle");
    build_bm25(&kb, &bundle);
    let search = |extra: &[&str]| -> Vec<serde_json::Value> {
        let mut args = vec!["search", "--mode", "bm25", "--json", "--top-k", "3"];
        args.extend_from_slice(extra);
        let out = jikji(
            &args,
            &[
                &bundle,
                Path::new("how many items can a shopping cart hold"),
            ],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v[0]["hits"].as_array().unwrap().clone()
    };
    let tiers = |hits: &[serde_json::Value]| -> Vec<u64> {
        hits.iter().map(|h| h["tier"].as_u64().unwrap()).collect()
    };
    let plain = search(&[]);
    assert_eq!(plain[0]["score"], plain[1]["score"], "the copies tie");
    assert_eq!(
        tiers(&plain)[..2],
        [3, 9],
        "by default the corpus order breaks the tie"
    );
    let nine = search(&["--prefer-tier", "9"]);
    assert_eq!(tiers(&nine)[..2], [9, 3]);
    assert_eq!(nine[0]["source"], "9. online/cart-limits-copy.md");
    assert_eq!(nine[0]["rank"], 1);
    assert_eq!(nine[1]["rank"], 2);
    assert_eq!(
        nine[0]["score"], plain[1]["score"],
        "scores are not changed"
    );
    // A tier that is not in the tie does not jump it.
    let one = search(&["--prefer-tier", "1"]);
    assert_eq!(tiers(&one)[..2], [3, 9]);

    // Provenance is on every hit that declares it (the AI draft), with its tier, in JSON
    // and in the text output.
    let out = jikji(
        &["search", "--mode", "bm25", "--json", "--top-k", "1"],
        &[&bundle, Path::new("release 3.2 saved cards")],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let h = &v[0]["hits"][0];
    assert_eq!(h["source"], "6. drafts/release-notes.md", "{v}");
    assert_eq!(h["provenance"], "ai-draft");
    assert_eq!(h["tier"], 6);
    let out = jikji(
        &["search", "--mode", "bm25", "--top-k", "1"],
        &[&bundle, Path::new("release 3.2 saved cards")],
    );
    let text = stdout(&out);
    assert!(
        text.contains("tier 6") && text.contains("(ai-draft)"),
        "{text}"
    );

    // Eval takes the option too.
    let out = jikji(
        &[
            "eval",
            "--modes",
            "bm25",
            "--json",
            "--prefer-tier",
            "9",
            "--bundle",
        ],
        &[&bundle, &kb_eval()],
    );
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Conflicts were only listed by `jikji conflicts`: a search hit that is one side of a
/// known contradiction said nothing. Build and update record them on the chunks.
#[test]
fn a_hit_in_a_known_conflict_pair_did_not_say_so() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_dense(&kb, &bundle);
    let search = |q: &str, json: bool| -> Output {
        let mut args = vec!["search", "--mode", "bm25", "--top-k", "5"];
        if json {
            args.push("--json");
        }
        jikji(&args, &[&bundle, Path::new(q)])
    };
    let hits = |q: &str| -> Vec<serde_json::Value> {
        let out = search(q, true);
        assert!(out.status.success(), "{}", stderr(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v[0]["hits"].as_array().unwrap().clone()
    };
    let find = |hits: &[serde_json::Value], heading: &str| -> serde_json::Value {
        hits.iter()
            .find(|h| h["heading_path"].to_string().contains(heading))
            .unwrap_or_else(|| panic!("{heading} not in {hits:?}"))
            .clone()
    };
    let h = hits("payment request timeout 결제 요청 타임아웃");
    let en = find(&h, "Request timeout");
    let c = &en["conflicts"][0];
    assert_eq!(c["source"], "1. api/결제-API.md", "{en}");
    assert_eq!(c["newer"], "this");
    assert_eq!(c["this"][0], "60 s");
    assert_eq!(c["other"][0], "30 s");
    let ko = find(&h, "요청 타임아웃");
    assert_eq!(ko["conflicts"][0]["newer"], "other", "{ko}");
    assert_eq!(ko["conflicts"][0]["with"], en["id"]);
    // Pages that agree carry nothing.
    let promo = hits("summer promotion free shipping");
    assert!(
        promo.iter().all(|h| h.get("conflicts").is_none()),
        "{promo:?}"
    );
    let text = stdout(&search("payment request timeout", false));
    assert!(
        text.contains("CONFLICT with 1. api/결제-API.md: timeout / 설정값 60 s here vs 30 s there (this one is newer)"),
        "{text}"
    );

    // An update finds them again over the whole bundle: the Korean page corrected, the
    // English page's note is gone.
    let ko_page = kb.join("1. api/결제-API.md");
    let t = std::fs::read_to_string(&ko_page).unwrap();
    std::fs::write(&ko_page, t.replace("30초", "60초")).unwrap();
    let out = jikji_model(
        &["update", "--cache"],
        &[&common::cache_dir(), &bundle, &kb],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("conflicts: 1 contradiction candidate(s) recorded"),
        "the retention pair remains: {}",
        stderr(&out)
    );
    let h = hits("payment request timeout");
    assert!(h.iter().all(|h| h.get("conflicts").is_none()), "{h:?}");

    // Without vectors the build says it did not look.
    let plain = tmp.path().join("plain");
    let out = jikji(
        &["build", "--no-embed", "--allow-ai-draft", "--out"],
        &[&plain, &kb],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("conflicts: not looked for (no vectors: built with --no-embed"),
        "{}",
        stderr(&out)
    );
}

/// The issue's scenario on its 27 documents (`kb-health` + `kb-scenario`): check rejects
/// 3, the bundle holds 24; the 23-of-24 deletion is refused, both cross-language
/// contradictions are found, the iOS answer from the Android page fails its expected
/// source, and the alert persists on a retry.
#[test]
fn issue_18_scenario() {
    let tmp = tempfile::tempdir().unwrap();
    let kb = corpus(tmp.path());
    copy_dir(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kb-scenario"),
        &kb,
    );
    let out = jikji(&["check", "--allow-ai-draft"], &[&kb]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let bundle = tmp.path().join("bundle");
    build_dense(&kb, &bundle);
    assert_eq!(sources(&bundle).len(), 24);

    let queries = tmp.path().join("core.jsonl");
    std::fs::write(&queries, CORE).unwrap();
    let (code, first, _) = gaps(&bundle, &queries, &[]);
    assert_eq!(code, 0, "{first}");

    let one = tmp.path().join("one");
    std::fs::create_dir_all(one.join("1. api")).unwrap();
    std::fs::copy(
        kb.join("1. api/payment-api.md"),
        one.join("1. api/payment-api.md"),
    )
    .unwrap();
    let out = jikji(&["update", "--quiet"], &[&bundle, &one]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("would delete 23 of the bundle's 24 files"),
        "{}",
        stderr(&out)
    );

    let out = jikji_model(&["conflicts", "--json"], &[&bundle]);
    assert_eq!(out.status.code(), Some(1));
    let found: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let pairs: Vec<(&str, &str)> = found
        .iter()
        .map(|c| {
            (
                c["newer"]["source"].as_str().unwrap(),
                c["older"]["source"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("1. api/payment-api.md", "1. api/결제-API.md"),
            (
                "3. policy/privacy-retention.md",
                "3. policy/개인정보-보관.md"
            )
        ]
    );

    std::fs::remove_file(kb.join("2. mobile/ios-requirements.md")).unwrap();
    let out = jikji_model(
        &["update", "--quiet", "--cache"],
        &[&common::cache_dir(), &bundle, &kb],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let (code, second, _) = gaps(&bundle, &queries, &[]);
    assert_eq!(code, 1, "{second}");
    assert_eq!(outcome(&second, "ios")["wrong_source"], true);
    let (code, third, _) = gaps(&bundle, &queries, &[]);
    assert_eq!(code, 1, "the alert persists on a retry: {third}");
    assert_eq!(outcome(&third, "ios")["wrong_source"], true);
}

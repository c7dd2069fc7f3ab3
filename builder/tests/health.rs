//! `jikji dedup`, `jikji conflicts` and `jikji gaps` on the made-up service corpus
//! (`tests/fixtures/service-docs`, new files in `tests/fixtures/service-docs-new`), with
//! the real model (vectors cached in `target/jikji-test-cache`).

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use jikji_builder::conflicts::{find_conflicts, ConflictOptions};
use jikji_builder::dedup::{
    check_new_files, near_duplicate_pairs, near_duplicates, Class, FlatVectors, LshParams,
    DUPLICATE, PARTIAL, SELF_DUPLICATE,
};
use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_format::{Bundle, ChunkRecord};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
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

fn build_with_model(corpus: &Path, out: &Path) {
    build(
        &IngestOptions {
            model_dir: Some(common::model_dir()),
            cache_dir: Some(common::cache_dir()),
            threads: 2,
            ..IngestOptions::new(corpus, out)
        },
        &BundleSettings::default(),
    )
    .unwrap();
}

fn records(b: &Bundle) -> Vec<ChunkRecord> {
    (0..b.chunks().len() as u32)
        .map(|i| b.chunks().get(i).unwrap())
        .collect()
}

#[test]
fn dedup_within_a_bundle_pairs_different_files_only() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b");
    build_with_model(&fixture("service-docs"), &bundle);
    let b = Bundle::open_dir(&bundle).unwrap();
    let recs = records(&b);
    let flat = FlatVectors::from_vectors(b.vectors().unwrap());
    // A low threshold, to show what is never reported even when similar.
    let near = near_duplicates(&recs, Some(&flat), 0.9, LshParams::default());
    let pairs: Vec<_> = near
        .pairs
        .iter()
        .chain(near.conflicting.iter().map(|(p, _)| p))
        .collect();
    // gateway.md and faq.md are near-identical but give the timeout as 30 s and 60 s: a
    // conflict, never a duplicate (deleting one could delete the newer fact).
    assert!(near.pairs.is_empty(), "{:?}", near.pairs);
    assert_eq!(near.conflicting.len(), 1);
    assert_eq!(near.conflicting[0].1[0].subject, "timeout");
    let named: Vec<(&str, &str)> = pairs
        .iter()
        .map(|p| {
            (
                recs[p.a as usize].source.as_str(),
                recs[p.b as usize].source.as_str(),
            )
        })
        .collect();
    assert!(
        named.contains(&("1. platform/gateway.md", "2. support/faq.md")),
        "{named:?}"
    );
    for p in &pairs {
        let (a, b) = (&recs[p.a as usize], &recs[p.b as usize]);
        assert_ne!(a.source, b.source, "chunks of one file are never paired");
        assert!(
            a.doc_id.is_none() || a.doc_id != b.doc_id,
            "versions of one document are not duplicates: {} / {}",
            a.source,
            b.source
        );
    }
    // plan_v1 and plan_v2 are near-identical, but versions of one document.
    let v1v2 = (0..recs.len()).any(|i| {
        (0..recs.len()).any(|j| {
            recs[i].source.ends_with("plan_v1.md")
                && recs[j].source.ends_with("plan_v2.md")
                && flat.cosine(i, j) >= 0.9
        })
    });
    assert!(v1v2, "the fixture should have similar plan versions");
    // The CLI prints the pair and the summary.
    let out = jikji(&["dedup", "--threshold", "0.95"], &[&bundle]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("0 pair(s) from different files")
            && text.contains("1 similar pair(s) whose values differ"),
        "{text}"
    );
    assert!(text.contains("NOT a duplicate, values differ"), "{text}");
    assert_eq!(out.status.code(), Some(1), "findings exit 1");
}

#[test]
fn exact_duplicates_are_found_by_hash_without_vectors() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("c");
    copy_dir(&fixture("service-docs"), &corpus);
    std::fs::copy(
        corpus.join("1. platform/backups.md"),
        corpus.join("2. support/backups-again.md"),
    )
    .unwrap();
    let bundle = tmp.path().join("b");
    build(
        &IngestOptions::new(&corpus, &bundle),
        &BundleSettings::default(),
    )
    .unwrap();
    let b = Bundle::open_dir(&bundle).unwrap();
    assert!(b.vectors().is_none());
    let recs = records(&b);
    let pairs = near_duplicate_pairs(&recs, None, SELF_DUPLICATE, LshParams::default());
    assert!(!pairs.is_empty());
    for p in &pairs {
        assert!(p.exact && p.cosine == 1.0);
        let mut s = [
            recs[p.a as usize].source.as_str(),
            recs[p.b as usize].source.as_str(),
        ];
        s.sort();
        assert_eq!(s, ["1. platform/backups.md", "2. support/backups-again.md"]);
    }
}

#[test]
fn dedup_new_files_against_the_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b");
    build_with_model(&fixture("service-docs"), &bundle);
    let out = check_new_files(
        &bundle,
        &fixture("service-docs-new"),
        &common::model_dir(),
        Some(&common::cache_dir()),
        2,
        DUPLICATE,
        PARTIAL,
    )
    .unwrap();
    let by_file = |name: &str| -> Vec<Class> {
        out.iter()
            .filter(|c| c.source.ends_with(name))
            .map(|c| c.class)
            .collect()
    };
    // A byte-for-byte copy: every chunk an exact duplicate, found by hash.
    assert!(out
        .iter()
        .filter(|c| c.source.ends_with("backups-copy.md"))
        .all(|c| c.exact
            && c.class == Class::Duplicate
            && c.match_source == "1. platform/backups.md"));
    // A lightly reworded paragraph: a duplicate by cosine.
    let rate = out
        .iter()
        .find(|c| c.source.ends_with("gateway-limits.md") && !c.exact)
        .unwrap();
    assert_eq!(rate.class, Class::Duplicate, "cosine {}", rate.cosine);
    assert_eq!(rate.match_source, "1. platform/gateway.md");
    // A new topic.
    assert_eq!(by_file("webhooks.md"), [Class::New]);
}

#[test]
fn conflicts_list_different_values_newest_source_first() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("b");
    build_with_model(&fixture("service-docs"), &bundle);
    let b = Bundle::open_dir(&bundle).unwrap();
    let recs = records(&b);
    let flat = FlatVectors::from_vectors(b.vectors().unwrap());
    let found = find_conflicts(&recs, &flat, &ConflictOptions::default());
    assert_eq!(found.len(), 1, "{found:#?}");
    let c = &found[0];
    assert_eq!(c.newer.source, "2. support/faq.md");
    assert_eq!(c.older.source, "1. platform/gateway.md");
    assert_eq!(c.differences.len(), 1);
    assert_eq!(c.differences[0].subject, "timeout");
    assert_eq!(c.differences[0].newer, ["60 s"]);
    assert_eq!(c.differences[0].older, ["30 s"]);
    // pricing-2025 / pricing-2026 differ in price too, but are versions of one document.
    let out = jikji(&["conflicts"], &[&bundle]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("timeout: 60 s (newer) vs 30 s (older)"),
        "{text}"
    );
    assert!(!text.contains("pricing"), "{text}");
}

fn jikji(args: &[&str], paths: &[&Path]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(args)
        .args(paths)
        .env("JIKJI_MODEL_DIR", common::model_dir())
        .output()
        .unwrap();
    assert!(
        out.status.code().is_some(),
        "killed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn gaps_report_missing_topics_and_drops_and_keep_a_history() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("c");
    copy_dir(&fixture("service-docs"), &corpus);
    let bundle = tmp.path().join("b");
    build(
        &IngestOptions::new(&corpus, &bundle),
        &BundleSettings::default(),
    )
    .unwrap();
    let queries = tmp.path().join("core.jsonl");
    std::fs::write(
        &queries,
        "{\"query\": \"password reset link\", \"min_score\": 0.0001}\n\n{\"id\": \"k8s\", \"query\": \"kubernetes autoscaling\", \"min_score\": 0.0001}\n",
    )
    .unwrap();
    let run = |extra: &[&str]| -> (i32, serde_json::Value) {
        let mut args = vec!["gaps", "--mode", "bm25", "--json", "--drop", "0.01"];
        args.extend_from_slice(extra);
        let out = jikji(&args, &[&bundle, &queries]);
        (
            out.status.code().unwrap(),
            serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr))),
        )
    };
    let (code, first) = run(&[]);
    assert_eq!(code, 1, "a gap makes the exit code non-zero");
    let r = first["results"].as_array().unwrap();
    assert_eq!(r[0]["gap"], false);
    assert_eq!(r[0]["top_source"], "2. support/faq.md");
    assert_eq!(r[1]["id"], "k8s");
    assert_eq!(r[1]["gap"], true, "nothing about kubernetes in the corpus");
    assert!(r[0]["previous"].is_null());
    let history = tmp.path().join("core.history.jsonl");
    assert_eq!(
        std::fs::read_to_string(&history).unwrap().lines().count(),
        1
    );

    // The FAQ is removed: the password query now finds nothing, a gap and a sharp drop.
    std::fs::remove_file(corpus.join("2. support/faq.md")).unwrap();
    jikji_builder::update::update(
        &jikji_builder::ingest::IngestOptions::new(&corpus, &bundle),
        false,
    )
    .unwrap();
    let (code, second) = run(&[]);
    assert_eq!(code, 1);
    let r = second["results"].as_array().unwrap();
    let before = first["results"][0]["score"].as_f64().unwrap();
    assert!(before > 0.0);
    assert_eq!(r[0]["gap"], true);
    assert_eq!(r[0]["drop"], true);
    assert_eq!(r[0]["previous"].as_f64().unwrap(), before);
    assert_eq!(r[1]["drop"], false, "0 → 0 is not a drop");
    assert_eq!(
        std::fs::read_to_string(&history).unwrap().lines().count(),
        2
    );

    // Only covered topics, no drop: exit code 0.
    let ok = tmp.path().join("ok.jsonl");
    std::fs::write(
        &ok,
        "{\"query\": \"object storage plan\", \"min_score\": 0.0001}\n",
    )
    .unwrap();
    let out = jikji(&["gaps", "--mode", "bm25"], &[&bundle, &ok]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // A bad queries file names the file and line.
    let bad = tmp.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"query\": \"x\", \"min_score\": 0.1}\n{\"query\": \"y\"}\n",
    )
    .unwrap();
    let out = jikji(&["gaps", "--mode", "bm25"], &[&bundle, &bad]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bad.jsonl:2"), "{err}");
}

/// Issue 15's first centring stored the rows centred (`x − o[l]`), while dedup, conflicts
/// and `jikji update` embed new files raw and their thresholds were measured on raw E5
/// cosines: a new file's duplicate scored 0.24 against the bundle and the conflict above
/// was not found. The rows are now the model's vectors whatever the centring (the engine
/// applies the offsets recorded in `model.centring`), so a centred bundle's vectors are
/// byte for byte those of the same bundle without centring.
#[test]
fn centred_rows_broke_dedup_and_conflicts() {
    let tmp = tempfile::tempdir().unwrap();
    let (on, off) = (tmp.path().join("on"), tmp.path().join("off"));
    build_with_model(&fixture("service-docs"), &on);
    build(
        &IngestOptions {
            model_dir: Some(common::model_dir()),
            cache_dir: Some(common::cache_dir()),
            threads: 2,
            ..IngestOptions::new(fixture("service-docs"), &off)
        },
        &BundleSettings {
            centring: None,
            ..BundleSettings::default()
        },
    )
    .unwrap();
    let (a, b) = (
        Bundle::open_dir(&on).unwrap(),
        Bundle::open_dir(&off).unwrap(),
    );
    let c = a.manifest().model.as_ref().unwrap().centring.as_ref();
    assert!(c.is_some_and(|c| c.chunks.is_some()), "{c:?}");
    assert!(b.manifest().model.as_ref().unwrap().centring.is_none());
    let (va, vb) = (a.vectors().unwrap(), b.vectors().unwrap());
    assert_eq!(va.len(), vb.len());
    for i in 0..va.len() {
        assert_eq!(va.row(i), vb.row(i), "row {i}");
    }
    // The vector pages themselves are the same files.
    let pages = |d: &Path| -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(d.join("p"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("v-"))
            .collect();
        v.sort();
        v
    };
    assert!(!pages(&on).is_empty());
    assert_eq!(pages(&on), pages(&off));
    // And dedup of a new file against the centred bundle sees the raw cosine.
    let out = check_new_files(
        &on,
        &fixture("service-docs-new"),
        &common::model_dir(),
        Some(&common::cache_dir()),
        2,
        DUPLICATE,
        PARTIAL,
    )
    .unwrap();
    let rate = out
        .iter()
        .find(|c| c.source.ends_with("gateway-limits.md") && !c.exact)
        .unwrap();
    assert_eq!(rate.class, Class::Duplicate, "cosine {}", rate.cosine);
}

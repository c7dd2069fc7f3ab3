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

/// Every file of a bundle folder, by name, with its bytes.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
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
    let mut built = vec![std::fs::read(bundle.join("manifest.json")).unwrap()];
    for round in 1..=3 {
        append(
            &cart,
            &format!("\n## Note {round}\n\nRound {round} of edits.\n"),
        );
        let out = jikji(&["update", "--quiet"], &[&bundle, &kb]);
        assert!(out.status.success(), "{}", stderr(&out));
        built.push(std::fs::read(bundle.join("manifest.json")).unwrap());
    }
    // Generation k is the bundle as it was k updates ago.
    assert_eq!(
        std::fs::read(prev(&bundle, 1).join("manifest.json")).unwrap(),
        built[2]
    );
    assert_eq!(
        std::fs::read(prev(&bundle, 2).join("manifest.json")).unwrap(),
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
        std::fs::read(prev(&bundle, 3).join("manifest.json")).unwrap(),
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
    let mpath = bundle.join("manifest.json");
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

//! `jikji update` on the made-up service corpus (`tests/fixtures/service-docs`): the
//! updated bundle equals a full build of the same files (bundle files byte for byte,
//! hence chunk ids, records, postings, vectors and search results), versions retire,
//! and a crash at any point of the write leaves a valid bundle.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_builder::update::{update, UpdateReport};
use jikji_engine::{Engine, Mode, SearchOptions};
use jikji_format::Bundle;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/service-docs")
}

/// Copies the fixture corpus into `dir/corpus`.
fn corpus(dir: &Path) -> PathBuf {
    let to = dir.join("corpus");
    for e in walkdir::WalkDir::new(fixture()) {
        let e = e.unwrap();
        let rel = e.path().strip_prefix(fixture()).unwrap();
        let dst = to.join(rel);
        if e.file_type().is_dir() {
            std::fs::create_dir_all(&dst).unwrap();
        } else {
            std::fs::copy(e.path(), &dst).unwrap();
        }
    }
    to
}

const DATA_FILES: [&str; 3] = ["terms.fst", "postings.bin", "chunks.bin"];

fn close(a: f32, b: f32, rel: f32) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-6)
}

/// Asserts an updated bundle equals a full build of the same files: `terms.fst`,
/// `postings.bin` and `chunks.bin` byte for byte (so chunk ids and records), the same
/// sources table and counts, and the same search results.
///
/// Vectors: with `noisy_rows == 0` `vectors.bin` must be byte-identical too. Otherwise up
/// to `noisy_rows` rows — the texts the update embedded itself, in a different batch than
/// the full build's cache did — may differ by float noise (the model's output depends in
/// its last bits on the batch's padding): int8 components within 1, scale within 1e-5
/// relative; every other row must be bit-identical. The calibration (fitted on those
/// vectors) and the scores then agree to 1e-4 relative, the rankings exactly.
fn assert_same_bundle(updated: &Path, full: &Path, modes: &[Mode], noisy_rows: usize) {
    let a = Bundle::open_dir(updated).unwrap();
    let b = Bundle::open_dir(full).unwrap();
    // The pages rebuilt whole: their format 1 encodings' SHA-256 (see Bundle::open_dir).
    for f in DATA_FILES {
        assert!(
            a.manifest().files[f] == b.manifest().files[f],
            "{f} differs between the updated bundle and a full build"
        );
    }
    match (a.vectors(), b.vectors()) {
        (None, None) => {}
        (Some(va), Some(vb)) => {
            assert_eq!(va.len(), vb.len());
            let mut noisy = 0;
            for i in 0..va.len() {
                let ((sa, qa), (sb, qb)) = (va.row(i), vb.row(i));
                if sa.to_bits() == sb.to_bits() && qa == qb {
                    continue;
                }
                noisy += 1;
                assert!(close(sa, sb, 1e-5), "row {i}: scale {sa} vs {sb}");
                assert!(
                    qa.iter()
                        .zip(qb)
                        .all(|(x, y)| (i16::from(*x) - i16::from(*y)).abs() <= 1),
                    "row {i}: int8 components differ by more than 1"
                );
            }
            assert!(
                noisy <= noisy_rows,
                "{noisy} rows differ, at most {noisy_rows} may"
            );
        }
        _ => panic!("one bundle has vectors, the other not"),
    }
    assert_eq!(a.manifest().sources, b.manifest().sources);
    assert_eq!(a.manifest().counts, b.manifest().counts);
    // The centring offsets are means over the stored rows when the bundle mixes its own
    // mean in (`bundle_prior`): noisy rows may move them by rounding (5 decimals).
    let (mut ma, mut mb) = (a.manifest().model.clone(), b.manifest().model.clone());
    let passages = |m: &mut Option<jikji_format::ModelInfo>| {
        m.as_mut()
            .and_then(|m| m.centring.as_mut())
            .map(|c| std::mem::take(&mut c.passage))
            .unwrap_or_default()
    };
    let (pa, pb) = (passages(&mut ma), passages(&mut mb));
    assert_eq!(ma, mb);
    assert_eq!(pa.keys().collect::<Vec<_>>(), pb.keys().collect::<Vec<_>>());
    let tolerance = if noisy_rows == 0 { 0.0 } else { 2e-5 };
    for (l, oa) in &pa {
        let worst = oa
            .iter()
            .zip(&pb[l])
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(
            worst <= tolerance,
            "offset of {l}: components differ by {worst}"
        );
    }
    let (ca, cb) = (
        a.manifest().calibration.clone().unwrap(),
        b.manifest().calibration.clone().unwrap(),
    );
    if noisy_rows == 0 {
        assert_eq!(ca, cb);
    } else {
        assert_eq!(
            (ca.method.clone(), ca.queries, ca.pairs),
            (cb.method.clone(), cb.queries, cb.pairs)
        );
        assert_eq!(
            ca.bm25, cb.bm25,
            "BM25 calibration does not depend on vectors"
        );
        for (x, y) in [
            (ca.dense, cb.dense),
            (ca.weighted, cb.weighted),
            (ca.rrf, cb.rrf),
        ] {
            let (x, y) = (x.unwrap(), y.unwrap());
            assert!(
                close(x.a, y.a, 1e-4) && close(x.b, y.b, 1e-4),
                "{x:?} vs {y:?}"
            );
        }
    }
    let ids = |x: &Bundle| {
        (0..x.chunks().len() as u32)
            .map(|i| x.chunks().get(i).unwrap())
            .collect::<Vec<_>>()
    };
    assert_eq!(ids(&a), ids(&b));
    let ea = Engine::open_dir(updated).unwrap();
    let eb = Engine::open_dir(full).unwrap();
    let qvec_engine = modes.iter().any(|m| *m != Mode::Bm25).then(|| {
        let mut e = Engine::open_dir(full).unwrap();
        e.set_embedder(jikji_builder::ingest::load_build_embedder(&common::model_dir()).unwrap());
        e
    });
    for q in [
        "request timeout",
        "object storage plan",
        "outbound traffic price",
        "password reset link",
        "support hours",
    ] {
        for &m in modes {
            let v = qvec_engine
                .as_ref()
                .filter(|_| m != Mode::Bm25)
                .map(|e| e.embed_query(q, m).unwrap());
            let ra = ea.search_with_vector(q, v.as_deref(), m, 10).unwrap();
            let rb = eb.search_with_vector(q, v.as_deref(), m, 10).unwrap();
            assert!(!ra.hits.is_empty(), "{q} ({m}) found nothing");
            if noisy_rows == 0 {
                assert_eq!(ra, rb, "{q} ({m})");
                continue;
            }
            let hits = |r: &jikji_engine::SearchResult| -> Vec<String> {
                r.hits.iter().map(|h| h.id.clone()).collect()
            };
            assert_eq!(hits(&ra), hits(&rb), "{q} ({m}): rankings differ");
            for (x, y) in ra.hits.iter().zip(&rb.hits) {
                assert!(
                    close(x.score, y.score, 1e-4),
                    "{q} ({m}): {} vs {}",
                    x.score,
                    y.score
                );
            }
        }
    }
}

/// Edits the corpus: changes one file, adds a third plan version, deletes a file.
fn edit(corpus: &Path) {
    let gw = corpus.join("1. platform/gateway.md");
    let text = std::fs::read_to_string(&gw)
        .unwrap()
        .replace("600 requests per minute", "1,200 requests per minute");
    std::fs::write(&gw, text).unwrap();
    let v2 = std::fs::read_to_string(corpus.join("1. platform/plan_v2.md")).unwrap();
    std::fs::write(
        corpus.join("1. platform/plan_v3.md"),
        v2.replace("version: 2", "version: 3")
            .replace("200 GB", "500 GB"),
    )
    .unwrap();
    std::fs::remove_file(corpus.join("1. platform/backups.md")).unwrap();
}

fn names(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn check_edit_report(r: &UpdateReport) {
    assert!(r.written);
    assert_eq!(names(&r.changed), ["1. platform/gateway.md"]);
    assert_eq!(names(&r.added), ["1. platform/plan_v3.md"]);
    assert_eq!(names(&r.deleted), ["1. platform/backups.md"]);
    assert_eq!(names(&r.archived), ["1. platform/plan_v2.md"]);
    assert_eq!(r.unchanged, 6);
    assert!(r.chunks_kept > 0 && r.chunks_new > 0 && r.chunks_dropped > 0);
    assert!(!r.calibration_reused);
}

#[test]
fn update_equals_full_rebuild_bm25() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build(
        &IngestOptions::new(&corpus, &bundle),
        &BundleSettings::default(),
    )
    .unwrap();
    edit(&corpus);
    let r = update(&IngestOptions::new(&corpus, &bundle), false).unwrap();
    check_edit_report(&r);
    let full = tmp.path().join("full");
    build(
        &IngestOptions::new(&corpus, &full),
        &BundleSettings::default(),
    )
    .unwrap();
    assert_same_bundle(&bundle, &full, &[Mode::Bm25], 0);
    // The replaced bundle is kept as BUNDLE.prev.1 and is still the old one.
    let prev = Bundle::open_dir(&tmp.path().join("bundle.prev.1")).unwrap();
    assert!(prev
        .manifest()
        .sources
        .iter()
        .any(|s| s.path == "1. platform/backups.md"));
}

#[test]
fn update_equals_full_rebuild_with_vectors_without_the_cache() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    let with_model = |out: &Path, cache: Option<PathBuf>| IngestOptions {
        model_dir: Some(common::model_dir()),
        cache_dir: cache,
        threads: 2,
        ..IngestOptions::new(&corpus, out)
    };
    let defaults = BundleSettings::default();
    build(&with_model(&bundle, Some(common::cache_dir())), &defaults).unwrap();
    edit(&corpus);
    // No cache: unchanged chunks' vectors must come from the old bundle itself.
    let r = update(&with_model(&bundle, None), false).unwrap();
    check_edit_report(&r);
    assert_eq!(
        r.vectors_new, r.embedded,
        "no cache: every new text embedded"
    );
    assert!(
        r.vectors_new < r.chunks_new,
        "plan_v3 repeats most of plan_v2's chunk texts: their vectors are reused"
    );
    assert_eq!(r.vectors_reused + r.vectors_new, r.chunks);
    // A full build with the shared cache (vectors embedded earlier, in other batches).
    let full = tmp.path().join("full");
    build(&with_model(&full, Some(common::cache_dir())), &defaults).unwrap();
    // The update embedded its new texts itself (no cache), the full build took them from
    // the cache, filled by other batches: those rows may differ by float noise.
    assert_same_bundle(
        &bundle,
        &full,
        &[Mode::Bm25, Mode::Dense, Mode::Hybrid],
        r.vectors_new,
    );
}

/// With a bundle prior (`--centring-prior 50`) the offsets mix in the bundle's own mean
/// per language; `jikji update` kept the first build's offsets, so after an edit an updated
/// bundle ranked differently from a full rebuild. The offsets are now means over the stored
/// rows, which an update has for old and new chunks alike, and are recomputed by the update.
#[test]
fn update_kept_the_first_builds_offsets_with_a_bundle_prior() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    let opts = |out: &Path| IngestOptions {
        model_dir: Some(common::model_dir()),
        cache_dir: Some(common::cache_dir()),
        threads: 2,
        ..IngestOptions::new(&corpus, out)
    };
    let settings = BundleSettings {
        centring: Some(jikji_builder::lang_means::CentringSettings {
            bundle_prior: Some(jikji_builder::lang_means::MEASURED_BUNDLE_PRIOR),
            ..Default::default()
        }),
        ..BundleSettings::default()
    };
    build(&opts(&bundle), &settings).unwrap();
    let offsets = |dir: &Path| {
        let b = Bundle::open_dir(dir).unwrap();
        let c = b.manifest().model.clone().unwrap().centring.unwrap();
        assert_eq!(c.bundle_prior, Some(50.0));
        c.passage
    };
    let before = offsets(&bundle);
    edit(&corpus);
    let r = update(&opts(&bundle), false).unwrap();
    check_edit_report(&r);
    let full = tmp.path().join("full");
    build(&opts(&full), &settings).unwrap();
    assert_ne!(
        offsets(&bundle),
        before,
        "the edit moves the bundle's mean, so its offsets"
    );
    // Rows from the cache: bit-identical, so the offsets and everything else equal.
    assert_same_bundle(&bundle, &full, &[Mode::Bm25, Mode::Dense, Mode::Hybrid], 0);
}

#[test]
fn unchanged_corpus_writes_nothing_and_touch_alone_is_not_a_change() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build(
        &IngestOptions::new(&corpus, &bundle),
        &BundleSettings::default(),
    )
    .unwrap();
    let before = std::fs::read(bundle.join("jikji.json")).unwrap();
    let r = update(&IngestOptions::new(&corpus, &bundle), false).unwrap();
    assert!(!r.written && r.changed.is_empty() && r.added.is_empty() && r.deleted.is_empty());
    assert_eq!(std::fs::read(bundle.join("jikji.json")).unwrap(), before);
    assert!(!tmp.path().join("bundle.prev").exists());

    // New mtime, same bytes: not a changed file (the sources table's mtime is refreshed).
    let f = std::fs::File::options()
        .write(true)
        .open(corpus.join("1. platform/backups.md"))
        .unwrap();
    f.set_modified(
        std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000),
    )
    .unwrap();
    drop(f);
    let r = update(&IngestOptions::new(&corpus, &bundle), false).unwrap();
    assert!(r.changed.is_empty() && r.added.is_empty());
    assert_eq!(r.chunks_new, 0);
    assert!(
        r.written && r.calibration_reused,
        "same data files: same calibration"
    );
    let full = tmp.path().join("full");
    build(
        &IngestOptions::new(&corpus, &full),
        &BundleSettings::default(),
    )
    .unwrap();
    assert_same_bundle(&bundle, &full, &[Mode::Bm25], 0);
}

#[test]
fn older_versions_are_archived_and_searchable_only_on_request() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build(
        &IngestOptions::new(&corpus, &bundle),
        &BundleSettings::default(),
    )
    .unwrap();
    let mut e = Engine::open_dir(&bundle).unwrap();
    // Sources of the hits that are plans or price lists (other files match common words).
    let sources = |e: &Engine, q: &str, only: &str| {
        let mut s: Vec<String> = e
            .search(q, Mode::Bm25, 20)
            .unwrap()
            .hits
            .iter()
            .map(|h| h.source.clone())
            .filter(|s| s.contains(only))
            .collect();
        s.sort();
        s.dedup();
        s
    };
    let q = "standard plan object storage";
    assert_eq!(sources(&e, q, "plan_v"), ["1. platform/plan_v2.md"]);
    assert_eq!(
        sources(&e, "outbound traffic gigabyte", "pricing"),
        ["2. support/pricing-2026.md"],
        "front matter doc_id + version: 2026.1 is newer than 2025.1"
    );
    e.set_search_options(SearchOptions {
        include_archived: true,
        ..Default::default()
    });
    assert_eq!(
        sources(&e, q, "plan_v"),
        ["1. platform/plan_v1.md", "1. platform/plan_v2.md"]
    );
    let archived = e.search(q, Mode::Bm25, 20).unwrap();
    let plans: Vec<_> = archived
        .hits
        .iter()
        .filter(|h| h.source.contains("plan_v"))
        .collect();
    assert!(plans
        .iter()
        .all(|h| h.archived == (h.source == "1. platform/plan_v1.md")));
    assert!(plans
        .iter()
        .all(|h| h.doc_id.as_deref() == Some("1. platform/plan")));

    // v3 arrives: the next update retires v2.
    edit(&corpus);
    update(&IngestOptions::new(&corpus, &bundle), false).unwrap();
    let e = Engine::open_dir(&bundle).unwrap();
    assert_eq!(sources(&e, q, "plan_v"), ["1. platform/plan_v3.md"]);
    let m = Bundle::open_dir(&bundle).unwrap().manifest().clone();
    let archived: Vec<&str> = m
        .sources
        .iter()
        .filter(|s| s.archived)
        .map(|s| s.path.as_str())
        .collect();
    assert_eq!(
        archived,
        [
            "1. platform/plan_v1.md",
            "1. platform/plan_v2.md",
            "2. support/pricing-2025.md"
        ]
    );
}

#[test]
fn expired_chunks_are_filtered_at_search_time_with_the_clock_given() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build(
        &IngestOptions::new(&corpus, &bundle),
        &BundleSettings::default(),
    )
    .unwrap();
    let mut e = Engine::open_dir(&bundle).unwrap();
    let q = "billing console maintenance";
    let hit_sources = |e: &Engine| -> Vec<String> {
        e.search(q, Mode::Bm25, 10)
            .unwrap()
            .hits
            .iter()
            .map(|h| h.source.clone())
            .collect()
    };
    let at = |s: &str| jikji_format::time::parse_iso8601_ms(s);
    // No clock: nothing expires.
    assert!(hit_sources(&e).contains(&"2. support/holiday-notice.md".to_string()));
    e.set_search_options(SearchOptions {
        now_ms: at("2026-10-04T23:59:59Z"),
        include_archived: false,
    });
    assert!(hit_sources(&e).contains(&"2. support/holiday-notice.md".to_string()));
    e.set_search_options(SearchOptions {
        now_ms: at("2026-10-05"),
        include_archived: false,
    });
    let after = hit_sources(&e);
    assert!(!after.contains(&"2. support/holiday-notice.md".to_string()));
    // Still top_k deep where the bundle has enough other matches.
    assert!(!after.is_empty());
}

#[test]
fn check_lists_expired_and_soon_expiring_files() {
    let dir = fixture();
    let f = dir.to_str().unwrap();
    let out = common::jikji_ok([
        "check",
        "--json",
        "--now",
        "2026-09-20",
        "--expiring",
        "30",
        f,
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let codes: Vec<(String, String)> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["code"].as_str().unwrap().starts_with("expire"))
        .map(|f| {
            (
                f["code"].as_str().unwrap().into(),
                f["path"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert_eq!(
        codes,
        [(
            "expires-soon".to_string(),
            "2. support/holiday-notice.md".to_string()
        )]
    );
    let out = Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(["check", "--now", "2026-11-30"])
        .arg(fixture())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("warning[expired] 2. support/holiday-notice.md:4: expired 2026-10-05"),
        "{text}"
    );
}

/// Carried-over note: `jikji build` did not say that a file had expired (only `jikji check`
/// did), so a bundle could silently leave a file's chunks out of every search.
#[test]
fn build_did_not_warn_about_expired_files() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    std::fs::write(
        corpus.join("2. support/bad-date.md"),
        "---\ntitle: Console move\nexpires: next tuesday\n---\nSource: https://support.example.com/move\n\nThe billing console moves.\n",
    )
    .unwrap();
    let report = build(
        &IngestOptions::new(&corpus, tmp.path().join("bundle")),
        &BundleSettings::default(),
    )
    .unwrap();
    let expiry: Vec<(&str, &str)> = report
        .findings
        .iter()
        .filter(|f| f.code.contains("expire"))
        .map(|f| (f.code, f.path.as_str()))
        .collect();
    // holiday-notice.md expires 2026-10-05, before this test could first run.
    assert_eq!(
        expiry,
        [
            ("bad-expires", "2. support/bad-date.md"),
            ("expired", "2. support/holiday-notice.md")
        ]
    );
}

/// Carried-over note: `jikji search --include-archived` printed archived versions like
/// current ones; only `--json` said `archived`.
#[test]
fn text_output_did_not_mark_archived_hits() {
    let tmp = tempfile::tempdir().unwrap();
    let bundle = tmp.path().join("bundle");
    build(
        &IngestOptions::new(fixture(), &bundle),
        &BundleSettings::default(),
    )
    .unwrap();
    let search = |extra: &[&str]| {
        let b = bundle.to_str().unwrap();
        let base = ["search", "--mode", "bm25", "--top-k", "10", b];
        common::jikji_ok(
            base.iter()
                .chain(&["object storage per project"])
                .chain(extra),
        )
    };
    let with = search(&["--include-archived"]);
    let marked: Vec<&str> = with
        .lines()
        .filter(|l| l.contains("(archived: an older version)"))
        .collect();
    assert!(!marked.is_empty(), "{with}");
    assert!(
        marked
            .iter()
            .all(|l| l.contains("plan_v1.md") || l.contains("pricing-2025.md")),
        "{with}"
    );
    assert!(with
        .lines()
        .any(|l| l.contains("plan_v2.md") && !l.contains("archived")));
    assert!(!search(&[]).contains("archived"));
}

/// Runs `jikji update` with `JIKJI_CRASH_AT=point`: the process aborts there.
fn crash_update(bundle: &Path, corpus: &Path, point: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(["update", "--quiet", "--model", "/nonexistent"])
        .arg(bundle)
        .arg(corpus)
        .env("JIKJI_CRASH_AT", point)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "{point}: the update should have aborted: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_crash_at_any_point_of_the_write_leaves_a_valid_bundle() {
    for point in ["before-swap", "after-swap"] {
        let tmp = tempfile::tempdir().unwrap();
        let corpus = corpus(tmp.path());
        let bundle = tmp.path().join("bundle");
        build(
            &IngestOptions::new(&corpus, &bundle),
            &BundleSettings::default(),
        )
        .unwrap();
        let old_sources = Bundle::open_dir(&bundle)
            .unwrap()
            .manifest()
            .sources
            .clone();
        edit(&corpus);
        crash_update(&bundle, &corpus, point);
        let b = Bundle::open_dir(&bundle)
            .unwrap_or_else(|e| panic!("{point}: no valid bundle after the crash: {e}"));
        let full = tmp.path().join("full");
        build(
            &IngestOptions::new(&corpus, &full),
            &BundleSettings::default(),
        )
        .unwrap();
        let new_sources = Bundle::open_dir(&full).unwrap().manifest().sources.clone();
        match point {
            "before-swap" => assert_eq!(b.manifest().sources, old_sources, "{point}"),
            _ => assert_eq!(b.manifest().sources, new_sources, "{point}"),
        }
        // The next update completes and equals a full build.
        update(&IngestOptions::new(&corpus, &bundle), false).unwrap();
        assert_same_bundle(&bundle, &full, &[Mode::Bm25], 0);
    }
}

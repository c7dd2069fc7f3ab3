//! When `jikji update` keeps the old score calibration (`Recalibrate::WhenMoved`, at most 1% of
//! the chunk texts changed in a bundle of 1,000+ chunks) and how far that is from what a full
//! build of the edited corpus fits: on all of `../shared/books` (BM25-only, so no model is
//! needed), one edited file, every search result's calibrated score within
//! [`SCORE_TOLERANCE`] of the full build's, rankings and data files identical; with
//! `--recalibrate` (`Recalibrate::Always`) the calibration equals the full build's exactly; an
//! edit over 1% refits.

mod common;

use std::path::{Path, PathBuf};

use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_builder::update::{update, update_with, Recalibrate, UpdateOptions};
use jikji_engine::{Engine, Mode};

/// Largest difference allowed between a calibrated score of the updated bundle (old
/// calibration kept) and of a full build (calibration fitted on the edited corpus).
const SCORE_TOLERANCE: f32 = 0.05;

const EDITED: &str = "2. Gutenberg classics/sunzi-art-of-war-giles.txt";

const QUERIES: &[&str] = &[
    "all warfare is based on deception",
    "to be or not to be",
    "學而時習之",
    "메밀꽃 필 무렵",
    "the supreme art of war is to subdue the enemy without fighting",
    "pride and prejudice",
    "道可道非常道",
    "sonnet summer's day",
    "witches on the heath",
    "大學之道在明明德",
    "봄봄",
    "a storm at sea and a shipwreck",
];

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dst);
        } else if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

fn bm25_build(corpus: &Path, out: &Path) {
    build(&IngestOptions::new(corpus, out), &BundleSettings::default()).unwrap();
}

fn append_paragraph(corpus: &Path) {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(corpus.join(EDITED))
        .unwrap();
    // Five paragraphs (~2,600 chars): new chunks, so the chunks after this file move and a full
    // build draws its pseudo-queries from other positions.
    for i in 0..5 {
        writeln!(
            f,
            "\n\nNote {i} added by the test. The general who wins a battle makes many calculations in his \
             temple before the battle is fought; the general who loses makes but few. Thus do many \
             calculations lead to victory, and few to defeat: how much more no calculation at all! \
             It is by attention to this point that I can foresee who is likely to win or lose, \
             and whether the army that marches {i} days will find its supplies at the river."
        )
        .unwrap();
    }
}

/// Max |calibrated score difference| over the top 10 of every query, after checking that
/// both bundles rank the same hits with the same raw scores.
fn max_score_diff(a: &Path, b: &Path) -> f32 {
    let (ea, eb) = (Engine::open_dir(a).unwrap(), Engine::open_dir(b).unwrap());
    let mut worst = 0f32;
    for q in QUERIES {
        let (ra, rb) = (
            ea.search(q, Mode::Bm25, 10).unwrap(),
            eb.search(q, Mode::Bm25, 10).unwrap(),
        );
        assert_eq!(ra.hits.len(), rb.hits.len(), "{q}");
        for (x, y) in ra.hits.iter().zip(&rb.hits) {
            assert_eq!((&x.source, x.raw_score), (&y.source, y.raw_score), "{q}");
            worst = worst.max((x.score - y.score).abs());
        }
    }
    worst
}

/// The term dictionary, postings and chunk records are byte for byte equal (their format 1
/// encodings, rebuilt from the pages: `Bundle::open_dir` lists their SHA-256).
fn data_files_equal(a: &Path, b: &Path) {
    let (a, b) = (
        jikji_format::Bundle::open_dir(a).unwrap(),
        jikji_format::Bundle::open_dir(b).unwrap(),
    );
    for f in ["terms.fst", "postings.bin", "chunks.bin"] {
        assert!(
            a.manifest().files[f] == b.manifest().files[f],
            "{f} differs"
        );
    }
}

struct Setup {
    _tmp: tempfile::TempDir,
    corpus: PathBuf,
    bundle: PathBuf,
    pristine: PathBuf,
}

/// The books, a BM25-only bundle of them (and a copy of it), then the edit.
fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("books");
    copy_tree(&common::shared_books(), &corpus);
    let bundle = tmp.path().join("bundle");
    bm25_build(&corpus, &bundle);
    let pristine = tmp.path().join("pristine");
    copy_tree(&bundle, &pristine);
    Setup {
        _tmp: tmp,
        corpus,
        bundle,
        pristine,
    }
}

#[test]
fn a_one_file_edit_keeps_the_calibration_within_tolerance_of_a_full_build() {
    let s = setup();
    append_paragraph(&s.corpus);
    let r = update(&IngestOptions::new(&s.corpus, &s.bundle), false).unwrap();
    assert!(r.written && r.calibration_reused, "{r:?}");
    assert!(r.calibration_note.starts_with("kept: "), "{r:?}");
    eprintln!("{} ({} chunks)", r.calibration_note, r.chunks);

    let full = s.corpus.parent().unwrap().join("full");
    bm25_build(&s.corpus, &full);
    data_files_equal(&s.bundle, &full);
    let worst = max_score_diff(&s.bundle, &full);
    eprintln!("max calibrated-score difference, kept vs refitted: {worst:.6}");
    assert!(worst <= SCORE_TOLERANCE, "{worst}");

    // --recalibrate on the same edit: exactly the full build's calibration.
    let again = s.corpus.parent().unwrap().join("again");
    copy_tree(&s.pristine, &again);
    let r = update_with(
        &IngestOptions::new(&s.corpus, &again),
        &UpdateOptions {
            recalibrate: Recalibrate::Always,
            ..UpdateOptions::default()
        },
    )
    .unwrap();
    assert!(
        !r.calibration_reused && r.calibration_note == "fitted",
        "{r:?}"
    );
    let cal = |p: &Path| {
        Engine::open_dir(p)
            .unwrap()
            .bundle()
            .manifest()
            .calibration
            .clone()
    };
    assert_eq!(cal(&again), cal(&full));
    assert_eq!(max_score_diff(&again, &full), 0.0);
}

#[test]
fn an_edit_over_one_percent_refits_the_calibration() {
    let s = setup();
    // Drop whole files until well over 1% of the chunks are gone.
    let m = Engine::open_dir(&s.bundle)
        .unwrap()
        .bundle()
        .manifest()
        .clone();
    let total = m.counts.chunks;
    let mut gone = 0;
    for src in &m.sources {
        if gone * 100 > 2 * total {
            break;
        }
        std::fs::remove_file(s.corpus.join(&src.path)).unwrap();
        gone += src.chunks;
    }
    let r = update(&IngestOptions::new(&s.corpus, &s.bundle), false).unwrap();
    assert!(r.written && !r.calibration_reused, "{r:?}");
    assert_eq!(r.calibration_note, "fitted");
    let full = s.corpus.parent().unwrap().join("full");
    bm25_build(&s.corpus, &full);
    assert_eq!(max_score_diff(&s.bundle, &full), 0.0);
}

//! `jikji update` on a paged bundle (issue 17): the pages it can prove unchanged are
//! hard-linked from the old bundle, unread (the old writer's `.jikji-pages` records: same
//! name, or for the query model's row pages the same token ids, and the same device, inode,
//! size and modification time); everything else is written again; and the result is the
//! bundle a full build writes: the same page names with the same bytes, the same entry but
//! `built_at`. A page rewritten since, or a copied bundle, proves nothing.
//!
//! The first test needs the model and its E5S1 source (`scripts/setup-model`); a missing one
//! fails the test.

mod common;

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::*;
use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_builder::update::{update_with, UpdateOptions, UpdateReport};
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

/// Appends a paragraph to one file (the bench's edit, `scripts/bench-build`).
fn edit(corpus: &Path) {
    let f = corpus.join("2. support/faq.md");
    let mut text = std::fs::read_to_string(&f).unwrap();
    text.push_str("\n\nAn added paragraph for the update bench: the reader turned the page and found a note in the margin, written in a hand she did not know.\n");
    std::fs::write(&f, text).unwrap();
}

/// Every page of a bundle: name → (inode, bytes).
fn pages(bundle: &Path) -> BTreeMap<String, (u64, Vec<u8>)> {
    std::fs::read_dir(bundle.join("p"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let ino = e.metadata().unwrap().ino();
            (
                e.file_name().into_string().unwrap(),
                (ino, std::fs::read(e.path()).unwrap()),
            )
        })
        .collect()
}

/// The entry without `built_at`.
fn entry(bundle: &Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("jikji.json")).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("built_at");
    v
}

/// The updated bundle and the full build have the same pages, byte for byte, and the same
/// entry but `built_at`.
fn assert_same_pages(updated: &Path, full: &Path) {
    let (a, b) = (pages(updated), pages(full));
    assert_eq!(
        a.keys().collect::<Vec<_>>(),
        b.keys().collect::<Vec<_>>(),
        "page names differ between the update and a full build"
    );
    for (name, (_, bytes)) in &a {
        assert!(
            bytes == &b[name].1,
            "p/{name} differs from the full build's"
        );
    }
    assert_eq!(entry(updated), entry(full));
}

/// How many pages of `now` are the same files (inodes) as pages of `before`.
fn shared(now: &BTreeMap<String, (u64, Vec<u8>)>, before: &BTreeMap<String, u64>) -> usize {
    let inos: std::collections::BTreeSet<u64> = before.values().copied().collect();
    now.values().filter(|(i, _)| inos.contains(i)).count()
}

fn inodes(bundle: &Path) -> BTreeMap<String, u64> {
    pages(bundle)
        .into_iter()
        .map(|(n, (i, _))| (n, i))
        .collect()
}

fn print(r: &UpdateReport) {
    eprintln!(
        "update: {} written, {} linked; {:?}",
        r.pages_written, r.pages_linked, r.seconds
    );
}

/// Writes a pack of the model into `dir` with `jikji model-pack`.
fn make_pack(dir: &Path) -> PathBuf {
    let model = model_dir();
    let e5s1 = model.join("e5-small-q4.bin");
    assert!(
        e5s1.exists(),
        "{}: no E5S1 source; run scripts/setup-model",
        e5s1.display()
    );
    let pack = dir.join("e5-small-pack");
    jikji_ok([
        "model-pack".as_ref(),
        "--e5s1".as_ref(),
        e5s1.as_os_str(),
        "--model".as_ref(),
        model.as_os_str(),
        "--out".as_ref(),
        pack.as_os_str(),
    ]);
    pack
}

#[test]
fn update_links_the_unchanged_query_model_pages_and_equals_a_full_build() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let pack = make_pack(tmp.path());
    let bundle = tmp.path().join("bundle");
    // One cache for all runs: the texts the update embeds are the full build's too, so
    // the vectors, the calibration and every page are equal bit for bit.
    let opts = |out: &Path| IngestOptions {
        model_dir: Some(model_dir()),
        cache_dir: Some(tmp.path().join("cache")),
        threads: 2,
        query_model: Some(pack.clone()),
        ..IngestOptions::new(&corpus, out)
    };
    let defaults = BundleSettings::default();
    build(&opts(&bundle), &defaults).unwrap();
    let before = inodes(&bundle);
    edit(&corpus);
    let r = update_with(&opts(&bundle), &UpdateOptions::default()).unwrap();
    print(&r);
    assert!(r.written);
    let full = tmp.path().join("full");
    build(&opts(&full), &defaults).unwrap();
    assert_same_pages(&bundle, &full);

    let now = pages(&bundle);
    // The pack's layer and tokenizer pages are the old files (same pack: not even read).
    let model_pages: Vec<&String> = now
        .keys()
        .filter(|n| n.starts_with("m-") || n.starts_with("k-"))
        .collect();
    assert!(model_pages.len() >= 13, "{model_pages:?}");
    for n in &model_pages {
        assert_eq!(now[*n].0, before[*n], "p/{n} was written again");
    }
    // Every linked page is counted, and is an old file; the rest are new files.
    assert_eq!(shared(&now, &before), r.pages_linked);
    assert_eq!(r.pages_linked + r.pages_written, now.len());
    let rows = now.keys().filter(|n| n.starts_with("r-")).count();
    let old_inodes: std::collections::BTreeSet<u64> = before.values().copied().collect();
    let rows_linked = now
        .iter()
        .filter(|(n, (i, _))| n.starts_with("r-") && old_inodes.contains(i))
        .count();
    eprintln!("row pages: {rows_linked} of {rows} linked");
    // The full build shares nothing with the old bundle.
    assert_eq!(shared(&pages(&full), &before), 0);
    // The old bundle is intact (every page verified).
    Bundle::open_dir(&tmp.path().join("bundle.prev.1")).unwrap();
}

#[test]
fn a_page_rewritten_since_or_a_copied_bundle_is_not_linked() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    let opts = |out: &Path| IngestOptions::new(&corpus, out);
    build(&opts(&bundle), &BundleSettings::default()).unwrap();
    // A copy (other inodes) of the same bundle, before the edit.
    let copy = tmp.path().join("copy");
    std::fs::create_dir_all(copy.join("p")).unwrap();
    for e in std::fs::read_dir(&bundle).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), copy.join(e.file_name())).unwrap();
        }
    }
    for e in std::fs::read_dir(bundle.join("p")).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), copy.join("p").join(e.file_name())).unwrap();
    }
    let before = inodes(&bundle);
    // The Unicode table pages are the same in every bundle: linked by an update, unless the
    // file was written since its writer recorded it (same bytes, later mtime).
    let unicode: Vec<String> = before
        .keys()
        .filter(|n| n.starts_with("n-"))
        .cloned()
        .collect();
    assert_eq!(unicode.len(), 2);
    std::thread::sleep(std::time::Duration::from_millis(20));
    let tampered = bundle.join("p").join(&unicode[0]);
    let bytes = std::fs::read(&tampered).unwrap();
    std::fs::write(&tampered, &bytes).unwrap();
    edit(&corpus);

    let r = update_with(&opts(&bundle), &UpdateOptions::default()).unwrap();
    print(&r);
    let now = pages(&bundle);
    assert_eq!(
        now[&unicode[1]].0, before[&unicode[1]],
        "an unchanged, untouched page is linked"
    );
    assert_ne!(
        now[&unicode[0]].0, before[&unicode[0]],
        "a page written since its record is written again, not linked"
    );
    assert_eq!(now[&unicode[0]].1, bytes);
    assert_eq!(shared(&now, &before), r.pages_linked);
    assert!(r.pages_linked >= 1);

    // The copy proves nothing: every page is written.
    let r = update_with(&opts(&copy), &UpdateOptions::default()).unwrap();
    print(&r);
    assert_eq!(r.pages_linked, 0);
    assert_same_pages(&copy, &bundle);
    // Both old generations still verify.
    Bundle::open_dir(&tmp.path().join("bundle.prev.1")).unwrap();
    Bundle::open_dir(&tmp.path().join("copy.prev.1")).unwrap();
}

/// The row map kept ([`RowMapRule::Always`]; on the books, [`RowMapRule::WhenSmall`] keeps it
/// for a one-file edit): the update links the old `u-` page and every row page (same names,
/// same files), tokenizes nothing, and every other page is the full build's byte for byte.
/// Queries embed bit for bit from either bundle's pages (the kept map only groups the ids'
/// rows into other pages), words new to the edit included.
#[test]
fn a_kept_row_map_links_every_row_page_and_writes_every_other_page_as_a_full_build() {
    use jikji_builder::update::RowMapRule;

    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let pack = make_pack(tmp.path());
    let bundle = tmp.path().join("bundle");
    let opts = |out: &Path| IngestOptions {
        model_dir: Some(model_dir()),
        cache_dir: Some(tmp.path().join("cache")),
        threads: 2,
        query_model: Some(pack.clone()),
        ..IngestOptions::new(&corpus, out)
    };
    let defaults = BundleSettings::default();
    build(&opts(&bundle), &defaults).unwrap();
    let before = inodes(&bundle);
    let old_qm = entry(&bundle)["pages"]["query_model"].clone();
    edit(&corpus);
    let r = update_with(
        &opts(&bundle),
        &UpdateOptions {
            row_map: RowMapRule::Always,
            ..UpdateOptions::default()
        },
    )
    .unwrap();
    print(&r);
    assert!(r.written && r.row_map_kept);
    let full = tmp.path().join("full");
    build(&opts(&full), &defaults).unwrap();

    let (now, fb) = (pages(&bundle), pages(&full));
    let new_qm = entry(&bundle)["pages"]["query_model"].clone();
    assert_eq!(new_qm["row_map"], old_qm["row_map"]);
    assert_eq!(new_qm["rows"], old_qm["rows"]);
    // The edit adds tokens the old corpus lacked: a full build counts another map.
    assert_ne!(
        entry(&full)["pages"]["query_model"]["row_map"],
        old_qm["row_map"]
    );
    let mut rows = 0;
    for (n, (ino, _)) in &now {
        if n.starts_with("r-") || n.starts_with("u-") {
            rows += 1;
            assert_eq!(Some(ino), before.get(n), "p/{n} was not linked");
        } else {
            assert!(
                fb.get(n).is_some_and(|f| f.1 == now[n].1),
                "p/{n} differs from the full build's"
            );
        }
    }
    assert!(rows > 1000, "{rows} row pages");
    let others = |m: &BTreeMap<String, (u64, Vec<u8>)>| {
        m.keys()
            .filter(|n| !n.starts_with("r-") && !n.starts_with("u-"))
            .cloned()
            .collect::<Vec<_>>()
    };
    assert_eq!(others(&now), others(&fb));

    // Each query through the browser's code path (PagedQueryModel reading only the pages
    // it needs) from the updated bundle and from the full build: the same f32 bits.
    let model = |b: &Path| {
        let opened = Bundle::open_paged_dir(b).unwrap();
        let root = opened.pages().unwrap().query_model.clone().unwrap();
        let sha = opened.manifest().model.as_ref().map(|m| m.sha256.clone());
        jikji_query_model::paged::PagedQueryModel::new(root, sha.as_deref()).unwrap()
    };
    let (mut kept, mut rebuilt) = (model(&bundle), model(&full));
    let queries = [
        "the reader turned the page and found a note in the margin",
        "written in a hand she did not know",
        "how do I reset my password",
        "갑목(甲木) 인월(寅月) 用神",
        "學而時習之 不亦說乎",
    ];
    for q in queries {
        let a = kept.embed_query_from_dir(&bundle, q).unwrap();
        let b = rebuilt.embed_query_from_dir(&full, q).unwrap();
        assert_eq!(a.len(), b.len(), "{q}");
        assert!(
            a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()),
            "{q}: the kept row map embeds the query differently"
        );
        assert!(a.iter().any(|x| *x != 0.0), "{q}: a zero vector");
    }
}

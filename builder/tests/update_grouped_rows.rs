//! Grouped rows (`pages.ivf.row_groups`, what the builder writes from 100,000 chunks on;
//! forced here on a 41-chunk bundle with `JIKJI_IVF_ROW_GROUPS=3` and
//! `--dense-index ivf-binary`): each group of a list is one `i` page holding exactly its
//! rows (the `v` pages' int8 rows, in list order); `jikji update` below the refit rule keeps
//! the centroids, regroups only the changed lists and keeps the other lists' list and group
//! pages under their names; the engine reads the grouped layout natively and through the
//! browser's entry-opened loop, with the exact ranking when every list is probed and every
//! group rescored.
//!
//! Its own test binary: the environment variable is process-wide, and this is the only
//! test here, so no other build in the process sees it.

mod common;

use jikji_builder::ingest::build;
use jikji_format::paged::{ivf, page};
use jikji_format::Bundle;
use std::path::Path;

fn body(bundle: &Path, name: &str) -> Vec<u8> {
    page::decode_stored(name, &std::fs::read(bundle.join("p").join(name)).unwrap()).unwrap()
}

/// Checks every list of `bundle` (of `n` chunks): its groups' pages hold exactly the
/// group's rows as the `v` pages have them, in list order. Returns each list's docs and
/// the names of its list page and group pages.
fn check_groups(bundle: &Path, n: usize) -> Vec<(Vec<u32>, Vec<String>)> {
    let root = common::ivf_root(bundle);
    root.check(n).unwrap();
    assert!(root.grouped(), "{root:?}");
    assert_eq!(root.rows.as_ref().unwrap().per_page, 3);
    let b = Bundle::open_dir(bundle).unwrap();
    let v = b.vectors().unwrap();
    let mut out = Vec::new();
    for j in 0..root.nlist {
        let name = root.list_page(j);
        let l = root
            .open_list(&name, &body(bundle, &name), n, v.dim())
            .unwrap();
        let m = ivf::check_groups(&l.groups, l.docs.len(), 3).unwrap();
        assert!(
            l.docs.len() <= 3 || m >= 2,
            "list {j}: {} rows in {m} groups",
            l.docs.len()
        );
        let mut names = vec![name];
        for g in 0..m {
            let page = root.group_page(j, g).unwrap();
            let docs: Vec<u32> = l
                .docs
                .iter()
                .zip(&l.groups)
                .filter(|(_, &x)| usize::from(x) == g)
                .map(|(&d, _)| d)
                .collect();
            let rows = ivf::open_rows(&page, &body(bundle, &page), docs.len(), v.dim()).unwrap();
            for (at, &d) in docs.iter().enumerate() {
                assert_eq!(rows.row(at), v.row(d as usize), "list {j} group {g}");
            }
            names.push(page);
        }
        out.push((l.docs, names));
    }
    out
}

#[test]
fn grouped_rows_are_written_kept_by_update_and_searched_exactly() {
    std::env::set_var(jikji_builder::ivf::ROW_GROUPS_ENV, "3");
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::topic_corpus(tmp.path(), 40);
    let bundle = tmp.path().join("bundle");
    let settings = jikji_builder::ingest::BundleSettings {
        dense_index: jikji_builder::ivf::DenseIndex::Ivf {
            nlist: Some(6),
            binary: true,
        },
        ..jikji_builder::ingest::BundleSettings::default()
    };
    build(&common::with_model(&corpus, &bundle), &settings).unwrap();
    let before = check_groups(&bundle, 40);
    let old_root = common::ivf_root(&bundle);

    common::edit_topic_corpus(&corpus);
    let r = jikji_builder::update::update(&common::with_model(&corpus, &bundle), false).unwrap();
    let note = r.dense_index.clone().unwrap();
    assert!(
        note.starts_with("kept centroids: 3 of 41 vectors"),
        "{note}"
    );
    let after = check_groups(&bundle, 41);
    let root = common::ivf_root(&bundle);
    assert_eq!(root.centroids, old_root.centroids);
    assert_eq!(root.list_rows, old_root.list_rows);
    // A list whose chunks kept their ids and texts keeps its page names; at least one
    // list changed and was renamed with its group pages.
    let old = Bundle::open_dir(&bundle).unwrap();
    let mut renamed = 0;
    for (j, ((docs_b, names_b), (docs_a, names_a))) in before.iter().zip(&after).enumerate() {
        if names_a != names_b {
            renamed += 1;
            for name in names_a {
                assert!(bundle.join("p").join(name).exists(), "list {j}: {name}");
            }
        } else {
            assert_eq!(docs_a, docs_b, "list {j} kept its names but not its chunks");
        }
    }
    assert!((1..6).contains(&renamed), "{renamed} of 6 lists renamed");

    // Every list probed, every group rescored: the exact scan's dense ranking, natively
    // and through the browser's loop (entry-opened engine fed the pages it asks for).
    common::assert_dense_equals_exact(&bundle, 6, &common::pair_queries(old.vectors().unwrap()));

    // `jikji dedup --new` through the grouped index (regression: its list reader took a
    // grouped list page for a corrupt one) finds the exact scan's classes and best matches.
    let incoming = tmp.path().join("incoming");
    std::fs::create_dir_all(incoming.join("1. new")).unwrap();
    // Reworded notes (not byte copies, which a text hash would match without a lookup).
    for n in ["note-03.md", "note-11.md", "note-30.md"] {
        let text = std::fs::read_to_string(corpus.join("1. docs").join(n)).unwrap();
        std::fs::write(
            incoming.join("1. new").join(n),
            text.replace("Teams ask about", "People often ask about"),
        )
        .unwrap();
    }
    let check = |route| {
        jikji_builder::dedup::check_new_files_with(
            &bundle,
            &incoming,
            &common::model_dir(),
            Some(&common::cache_dir()),
            2,
            jikji_builder::dedup::DUPLICATE,
            jikji_builder::dedup::PARTIAL,
            route,
        )
        .unwrap()
    };
    let routed = check(jikji_builder::dedup::Route::Index {
        round: jikji_builder::nearest::ROUND,
    });
    let exact = check(jikji_builder::dedup::Route::Exact);
    assert!(routed.routed && !exact.routed);
    assert!(routed.work.lists > 0, "{:?}", routed.work);
    let summary = |r: &jikji_builder::dedup::NewReport| -> Vec<String> {
        r.chunks.iter().map(|c| format!("{c:?}")).collect()
    };
    assert_eq!(summary(&routed), summary(&exact));
}

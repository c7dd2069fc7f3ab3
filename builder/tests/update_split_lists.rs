//! `jikji update` splitting a binary list past the cap instead of refitting the index
//! (issue 14; design `docs/design/update.md`, "Splits past the cap"): the list is bisected
//! as `ivf::cap_lists` bisects, its first part kept under its number, the others appended
//! as new lists with their centroids; unchanged lists keep their page names, the centroid
//! pages get per-page generations (`pages.ivf.centroids.gens`, group 1) so a centroid page
//! holding no changed centroid keeps its name, and an entry with hostile generations is
//! refused naming `jikji.json`.
//!
//! Its own test binary: `JIKJI_IVF_UPDATE_CAP` (the update's list cap, forced small on a
//! 40-chunk bundle) is process-wide (the tests that set it hold `CAP_ENV`). Binary and int8
//! lists alike (int8 lists refitted past the cap before session 30).

mod common;

use jikji_builder::ingest::build;
use jikji_engine::Engine;
use jikji_format::paged::ivf::{self, IvfParts, IvfRoot, ListCodes, PageOptions};
use jikji_format::paged::page;
use jikji_format::vectors::{write_vectors, Vectors};
use jikji_format::Bundle;
use std::path::Path;

fn body(bundle: &Path, name: &str) -> Vec<u8> {
    page::decode_stored(name, &std::fs::read(bundle.join("p").join(name)).unwrap()).unwrap()
}

/// Each list of `bundle` (of `n` chunks): its docs and the names of its list page and `i`
/// pages (binary lists; each of which exists).
fn lists(bundle: &Path, n: usize) -> Vec<(Vec<u32>, Vec<String>)> {
    let root = common::ivf_root(bundle);
    root.check(n).unwrap();
    let dim = Bundle::open_dir(bundle).unwrap().vectors().unwrap().dim();
    (0..root.nlist)
        .map(|j| {
            let name = root.list_page(j);
            let docs = if root.is_binary() {
                root.open_list(&name, &body(bundle, &name), n, dim)
                    .unwrap()
                    .docs
            } else {
                ivf::ListPage::open(&name, &body(bundle, &name), n, dim)
                    .unwrap()
                    .docs
            };
            let mut names = vec![name];
            names.extend(root.list_row_pages(j, docs.len()));
            for p in &names {
                assert!(bundle.join("p").join(p).exists(), "list {j}: {p}");
            }
            (docs, names)
        })
        .collect()
}

/// `JIKJI_IVF_UPDATE_CAP` is process-wide: the tests that set it take this lock.
static CAP_ENV: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let d = |x: &[f32], y: &[f32]| x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>();
    d(a, b) / (d(a, a).sqrt() * d(b, b).sqrt())
}

#[test]
fn an_update_past_the_cap_splits_the_list_and_keeps_the_other_pages() {
    splits_past_the_cap(true);
}

/// Int8 lists (`--dense-index ivf` / `ivf:N`) split as binary ones do (session 30; they
/// refitted before).
#[test]
fn an_update_past_the_cap_splits_an_int8_list_too() {
    splits_past_the_cap(false);
}

/// A 40-chunk bundle with 12 lists forced (`ivf-binary:12` or `ivf:12`), four notes on one
/// subject added with the update's cap at the longest list: that list is split, the others
/// keep their pages; then one more note: the next update keeps the centroids again.
fn splits_past_the_cap(binary: bool) {
    let _env = CAP_ENV.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::topic_corpus(tmp.path(), 40);
    let bundle = tmp.path().join("bundle");
    let settings = jikji_builder::ingest::BundleSettings {
        dense_index: jikji_builder::ivf::DenseIndex::Ivf {
            nlist: Some(12),
            binary,
        },
        ..jikji_builder::ingest::BundleSettings::default()
    };
    build(&common::with_model(&corpus, &bundle), &settings).unwrap();
    let old_root = common::ivf_root(&bundle);
    assert_eq!(old_root.is_binary(), binary);
    assert_eq!(old_root.list_rows.is_some(), binary, "{old_root:?}");
    let before = lists(&bundle, 40);
    let longest = before.iter().map(|l| l.0.len()).max().unwrap();
    let old_dense = {
        let b = Bundle::open_dir(&bundle).unwrap();
        let cb: Vec<Vec<u8>> = (0..old_root.centroids.pages)
            .map(|p| body(&bundle, &old_root.centroid_page(p)))
            .collect();
        let c = ivf::StoredCentroids::open(&old_root, &cb, b.vectors().unwrap().dim()).unwrap();
        (0..c.len()).map(|j| c.get(j)).collect::<Vec<_>>()
    };

    // Four more notes on one subject (4 of 44 vectors: below the refit rule), after every
    // other file so no doc id shifts; the cap is the longest list the build made, so the
    // list they join passes it and no other does.
    for i in 90..94 {
        std::fs::write(
            corpus.join(format!("1. docs/note-{i}.md")),
            format!(
                "Source: https://docs.example.com/notes/{i}\n\n# Note {i}: database backups and restore drills\n\n\
                 This note, number {i}, explains database backups and restore drills. Teams ask about \
                 database backups and restore drills every week; see step {} of the backup guide.\n",
                i % 5 + 1
            ),
        )
        .unwrap();
    }
    std::env::set_var(jikji_builder::ivf::UPDATE_CAP_ENV, longest.to_string());
    let r = jikji_builder::update::update(&common::with_model(&corpus, &bundle), false).unwrap();
    let note = r.dense_index.clone().unwrap();
    assert!(
        note.starts_with("kept centroids: 4 of 44 vectors") && note.contains("split past the cap"),
        "{note}"
    );
    let root = common::ivf_root(&bundle);
    root.check(44).unwrap();
    assert!(root.nlist > old_root.nlist, "{} lists", root.nlist);
    let after = lists(&bundle, 44);
    assert!(after.iter().all(|l| l.0.len() <= longest));
    let mut all: Vec<u32> = after.iter().flat_map(|l| l.0.clone()).collect();
    all.sort_unstable();
    assert_eq!(all, (0..44).collect::<Vec<u32>>());

    // Lists whose chunks did not change keep their list and row page names; the list that
    // received the new chunks is the one split: its parts are the old list plus the new
    // chunks, bisected as `cap_lists` bisects, each with the parts' centroid.
    let new_docs: Vec<u32> = (40..44).collect();
    let mut split = Vec::new();
    for (j, (docs_b, names_b)) in before.iter().enumerate() {
        let (docs_a, names_a) = &after[j];
        if docs_a == docs_b {
            assert_eq!(names_a, names_b, "list {j} kept its chunks, not its names");
        } else {
            split.push(j);
        }
    }
    assert_eq!(split.len(), 1, "lists changed: {split:?}");
    let j = split[0];
    let parts: Vec<usize> = std::iter::once(j)
        .chain(old_root.nlist..root.nlist)
        .collect();
    let mut whole: Vec<u32> = parts.iter().flat_map(|&p| after[p].0.clone()).collect();
    whole.sort_unstable();
    let mut want_whole = before[j].0.clone();
    want_whole.extend(&new_docs);
    assert_eq!(whole, want_whole, "the split list's parts are its chunks");
    assert_eq!(
        before.len() - 1,
        (0..old_root.nlist)
            .filter(|&k| after[k].1 == before[k].1)
            .count()
    );

    let b = Bundle::open_dir(&bundle).unwrap();
    let v = b.vectors().unwrap();
    let centring = b
        .manifest()
        .model
        .as_ref()
        .and_then(|m| m.centring.as_ref())
        .map(|c| {
            jikji_engine::centring::ChunkCentring::langs_of(c, v.len(), v.dim())
                .unwrap()
                .unwrap()
        });
    let capped = jikji_builder::ivf::cap_lists(
        v,
        centring.as_ref(),
        &jikji_builder::ivf::Ivf {
            centroids: vec![vec![0.0; v.dim()], vec![0.0; v.dim()]],
            lists: vec![
                want_whole.clone(),
                (0..44).filter(|d| !want_whole.contains(d)).collect(),
            ],
        },
        longest,
    )
    .unwrap();
    let cb: Vec<Vec<u8>> = (0..root.centroids.pages)
        .map(|p| body(&bundle, &root.centroid_page(p)))
        .collect();
    let stored = ivf::StoredCentroids::open(&root, &cb, v.dim()).unwrap();
    // `cap_lists` keeps the list's number for its first part and appends the others, list
    // 0's parts (bisected to the end first) before those of list 1 (the other chunks).
    let expect: Vec<usize> = std::iter::once(0).chain(2..1 + parts.len()).collect();
    assert_eq!(expect.len(), parts.len());
    for (&e, &p) in expect.iter().zip(&parts) {
        assert_eq!(after[p].0, capped.lists[e], "part {p}");
        let c = cosine(&stored.get(p), &capped.centroids[e]);
        assert!(c > 0.999, "part {p}: centroid cosine {c}");
    }
    // Every other centroid is the old one, bit for bit.
    for (k, c) in old_dense.iter().enumerate() {
        if k != j {
            assert_eq!(&stored.get(k), c, "centroid {k}");
        }
    }
    assert_eq!((root.centroids.group, root.centroids.gens.len()), (1, 1));
    assert_ne!(root.centroid_page(0), old_root.centroid_page(0));

    // Every list probed, every row rescored: the exact scan's dense ranking, natively and
    // through the browser's loop.
    common::assert_dense_equals_exact(&bundle, root.nlist, &common::pair_queries(v));
    drop(b);

    // Hostile centroid generations in the entry are refused, naming jikji.json.
    let entry = std::fs::read_to_string(bundle.join("jikji.json")).unwrap();
    let mut j: serde_json::Value = serde_json::from_str(&entry).unwrap();
    for gens in [
        serde_json::json!([]),
        serde_json::json!(["zz"]),
        serde_json::json!(["0123456789abcdef", "0123456789abcdef"]),
    ] {
        j["pages"]["ivf"]["centroids"]["gens"] = gens.clone();
        std::fs::write(
            bundle.join("jikji.json"),
            serde_json::to_string(&j).unwrap(),
        )
        .unwrap();
        let e = Engine::open_dir_paged(&bundle).err().expect("refused");
        let m = e.to_string();
        assert!(
            m.contains("jikji.json") && m.contains("ivf.centroids"),
            "{gens}: {m}"
        );
    }
    std::fs::write(bundle.join("jikji.json"), entry).unwrap();
    assert!(Engine::open_dir_paged(&bundle).is_ok());

    // Regression (update_after_a_split_refitted): with the list count forced, the next
    // update refitted the whole index ("12 lists asked, the index has 13") because the
    // split had added lists. One more note, on another subject: the centroids are kept.
    std::fs::write(
        corpus.join("1. docs/note-94.md"),
        "Source: https://docs.example.com/notes/94\n\n# Note 94: invoices\n\n\
         This note explains invoices and refunds for the billing team.\n",
    )
    .unwrap();
    let r = jikji_builder::update::update(&common::with_model(&corpus, &bundle), false).unwrap();
    let note = r.dense_index.clone().unwrap();
    assert!(
        note.starts_with("kept centroids: 1 of 45 vectors"),
        "{note}"
    );
    let next = common::ivf_root(&bundle);
    next.check(45).unwrap();
    assert!(next.nlist >= root.nlist && next.is_binary() == binary);
    std::env::remove_var(jikji_builder::ivf::UPDATE_CAP_ENV);
}

/// A binary index of `n` rows of dimension 8 in `nlist` lists of two rows (rows per list),
/// centroids coded as `codes`: the root and every page's raw body by name.
fn small_index(
    n: usize,
    nlist: usize,
    codes: ivf::CentroidCodes,
) -> (Vectors, IvfRoot, std::collections::HashMap<String, Vec<u8>>) {
    let rows: Vec<Vec<f32>> = (0..n)
        .map(|i| {
            (0..8)
                .map(|t| ((i * 7 + t * 3) % 11) as f32 - 5.0 + (i / 2) as f32 * 0.01)
                .collect()
        })
        .collect();
    let v = Vectors::open(&write_vectors(8, &rows).unwrap()).unwrap();
    let lists: Vec<Vec<u32>> = (0..nlist)
        .map(|j| (0..n as u32).filter(|d| *d as usize % nlist == j).collect())
        .collect();
    let centroids: Vec<Vec<f32>> = lists
        .iter()
        .map(|l| {
            let mut c = [0f32; 8];
            for &d in l {
                c.iter_mut()
                    .zip(v.get(d as usize))
                    .for_each(|(a, x)| *a += x);
            }
            let s = c.iter().map(|x| x * x).sum::<f32>().sqrt();
            c.iter().map(|x| x / s).collect()
        })
        .collect();
    let scoring = |i: usize| v.get(i);
    let mut pages = std::collections::HashMap::new();
    let root = ivf::write_pages_with(
        &IvfParts {
            centroids: &centroids,
            lists: &lists,
            nprobe: 4,
            codes: ListCodes::Binary {
                scoring: &scoring,
                rows_per_page: 1,
                rescore: 4,
            },
        },
        &PageOptions {
            centroids: codes,
            coded_sample: false,
            sample_queries: &[],
            rows_per_list: true,
            row_groups: None,
        },
        &v,
        &mut |p| {
            let raw = page::decode_stored(&p.name, &p.bytes).unwrap();
            pages.insert(p.name, raw);
            Ok(())
        },
    )
    .unwrap();
    (v, root, pages)
}

#[test]
fn edited_centroids_rename_only_the_pages_holding_a_changed_centroid() {
    for codes in [ivf::CentroidCodes::Int8, ivf::CentroidCodes::Int4Centred] {
        // 600 lists: centroid pages of 256, 256 and 88.
        let (_, root, pages) = small_index(1200, 600, codes);
        assert_eq!(root.centroids.pages, 3);
        assert!(
            root.centroids.gens.is_empty(),
            "a full build names the run by one gen"
        );
        let bodies: Vec<Vec<u8>> = (0..3)
            .map(|p| pages[&root.centroid_page(p)].clone())
            .collect();
        let old = ivf::StoredCentroids::open(&root, &bodies, 8).unwrap();
        let unit = |k: usize| -> Vec<f32> {
            let mut c = vec![0f32; 8];
            c[k % 8] = 0.6;
            c[(k + 3) % 8] = -0.8;
            c
        };
        // List 3 split: its centroid replaced (page 0), list 600 appended (page 2).
        let (base, nb) =
            ivf::edit_centroids(&root, &bodies, &[(3, unit(3)), (600, unit(600))], 601, 8).unwrap();
        base.check(1200).unwrap();
        assert_eq!(
            (base.nlist, base.lists.pages, base.centroids.pages),
            (601, 601, 3)
        );
        assert_eq!((base.centroids.group, base.centroids.gens.len()), (1, 3));
        assert_ne!(base.centroid_page(0), root.centroid_page(0));
        assert_eq!(base.centroid_page(1), root.centroid_page(1), "{codes:?}");
        assert_eq!(nb[1], bodies[1]);
        assert_ne!(base.centroid_page(2), root.centroid_page(2));
        let new = ivf::StoredCentroids::open(&base, &nb, 8).unwrap();
        assert_eq!(new.len(), 601);
        for k in 0..600 {
            if k != 3 {
                assert_eq!(new.get(k), old.get(k), "{codes:?} centroid {k}");
            }
        }
        for k in [3, 600] {
            let c = cosine(&new.get(k), &unit(k));
            assert!(c > 0.99, "{codes:?} centroid {k}: cosine {c}");
        }
        // A second update from there: appending on a full page adds a page, and page 0 (no
        // changed centroid now) keeps the name the first update gave it.
        let (next, nb2) =
            ivf::edit_centroids(&base, &nb, &[(300, unit(1)), (601, unit(2))], 602, 8).unwrap();
        next.check(1200).unwrap();
        assert_eq!(next.centroid_page(0), base.centroid_page(0));
        assert_ne!(next.centroid_page(1), base.centroid_page(1));
        assert_ne!(next.centroid_page(2), base.centroid_page(2));
        assert_eq!(nb2[0], nb[0]);
        // Bad edits are refused.
        assert!(ivf::edit_centroids(&root, &bodies, &[], 601, 8).is_err());
        assert!(
            ivf::edit_centroids(&root, &bodies, &[(3, unit(3)), (3, unit(3))], 600, 8).is_err()
        );
        assert!(ivf::edit_centroids(&root, &bodies, &[(700, unit(3))], 601, 8).is_err());
        assert!(ivf::edit_centroids(&root, &bodies, &[(3, vec![1.0; 4])], 600, 8).is_err());
        // Hostile generations are refused naming jikji.json.
        for gens in [
            vec![],
            vec!["0123456789abcdef".to_string(); 2],
            vec!["0123456789ABCDEF".to_string(); 3],
        ] {
            let mut bad = base.clone();
            bad.centroids.gens = gens;
            let e = bad.check(1200).unwrap_err().to_string();
            assert!(
                e.contains("jikji.json") && e.contains("ivf.centroids"),
                "{e}"
            );
        }
    }
}

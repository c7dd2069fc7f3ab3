//! `jikji update` of a binary dense index (sign-bit lists, int8 rows for rescoring in `i`
//! pages numbered per list, 4-bit centred centroids: what the builder writes from 100,000
//! chunks on; forced here on a 41-chunk bundle with `--dense-index ivf-binary` and
//! `JIKJI_IVF_CENTROIDS`): below the refit rule the update keeps the centroid pages, puts a
//! new vector in the list of its nearest stored centroid, codes it against that stored
//! centroid as a full build would, and renames only the changed lists' pages and *their*
//! row pages; the engine reads the new layout natively and through the browser loop, with
//! recall within 0.005 of a full rebuild and the exact ranking when every list is probed
//! and every candidate rescored; hostile pages are refused naming the page.
//!
//! Its own test binary: the environment variable is process-wide, and this is the only
//! test here, so no other build in the process sees it.

mod common;

use jikji_builder::ingest::{build, BundleSettings};
use jikji_builder::ivf::DenseIndex;
use jikji_engine::centring::ChunkCentring;
use jikji_engine::{Engine, EngineError, Mode};
use jikji_format::paged::{ivf, page};
use jikji_format::Bundle;
use std::path::Path;

fn settings() -> BundleSettings {
    BundleSettings {
        dense_index: DenseIndex::Ivf {
            nlist: Some(6),
            binary: true,
        },
        ..BundleSettings::default()
    }
}

fn body(bundle: &Path, name: &str) -> Vec<u8> {
    page::decode_stored(name, &std::fs::read(bundle.join("p").join(name)).unwrap()).unwrap()
}

fn list(bundle: &Path, root: &ivf::IvfRoot, j: usize, n: usize, dim: usize) -> ivf::BinaryList {
    let name = root.list_page(j);
    ivf::BinaryList::open(&name, &body(bundle, &name), n, dim).unwrap()
}

#[test]
fn update_keeps_binary_lists_and_renames_only_changed_lists_and_their_rows() {
    std::env::set_var(
        jikji_builder::ingest::write::IVF_CENTROIDS_ENV,
        "int4-centred",
    );
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::topic_corpus(tmp.path(), 40);
    let bundle = tmp.path().join("bundle");
    build(&common::with_model(&corpus, &bundle), &settings()).unwrap();
    let before = common::ivf_root(&bundle);
    assert!(before.is_binary());
    assert_eq!(before.centroid_codes(), ivf::CentroidCodes::Int4Centred);
    assert_eq!(before.sample_codes.as_deref(), Some(ivf::SAMPLE_BINARY));
    let s = before.list_rows.expect("rows numbered per list");
    let dim = Bundle::open_dir(&bundle).unwrap().vectors().unwrap().dim();
    let old = Bundle::open_dir(&bundle).unwrap();
    let old_texts: Vec<String> = (0..40u32)
        .map(|d| old.chunks().get(d).unwrap().text)
        .collect();
    drop(old);
    let old_lists: Vec<ivf::BinaryList> =
        (0..6).map(|j| list(&bundle, &before, j, 40, dim)).collect();
    let old_rows: Vec<Vec<String>> = (0..6)
        .map(|j| before.list_row_pages(j, old_lists[j].docs.len()))
        .collect();
    for (j, l) in old_lists.iter().enumerate() {
        assert_eq!(l.first, 0);
        assert!(old_rows[j]
            .iter()
            .enumerate()
            .all(|(p, n)| n.ends_with(&format!("-{}", j * s + p))));
    }

    // One file edited, one added: 3 of 41 vectors changed (below the refit rule).
    common::edit_topic_corpus(&corpus);
    let r = jikji_builder::update::update(&common::with_model(&corpus, &bundle), false).unwrap();
    let note = r.dense_index.clone().unwrap();
    assert!(
        note.starts_with("kept centroids: 3 of 41 vectors") && note.contains("2 assigned"),
        "{note}"
    );
    let after = common::ivf_root(&bundle);
    after.check(41).unwrap();
    assert!(after.is_binary());
    assert_eq!(after.list_rows, Some(s));
    // The 4-bit centroid pages are kept (names, codes).
    assert_eq!(after.centroids, before.centroids);
    assert_eq!(after.centroid_codes, before.centroid_codes);

    let new = Bundle::open_dir(&bundle).unwrap();
    let v = new.vectors().unwrap();
    let new_texts: Vec<String> = (0..41u32)
        .map(|d| new.chunks().get(d).unwrap().text)
        .collect();
    let lists: Vec<ivf::BinaryList> = (0..6).map(|j| list(&bundle, &after, j, 41, dim)).collect();
    // Kept chunks stay in their old list; a new one is in the list of its nearest stored
    // (dequantized 4-bit) centroid, in the centred space the index is built in.
    let cbodies: Vec<Vec<u8>> = (0..after.centroids.pages)
        .map(|p| body(&bundle, &after.centroid_page(p)))
        .collect();
    let cents = jikji_builder::ingest::write::stored_centroids(&after, &cbodies, dim).unwrap();
    let stored = ivf::StoredCentroids::open(&after, &cbodies, dim).unwrap();
    let model = new.manifest().model.as_ref().unwrap();
    let centring =
        ChunkCentring::langs_of(model.centring.as_ref().unwrap(), v.len(), v.dim()).unwrap();
    let scoring = |d: usize| {
        let (scale, row) = v.row(d);
        match &centring {
            Some(c) => c.scoring_vector(d, scale, row),
            None => v.get(d),
        }
    };
    let mut want = vec![Vec::new(); 6];
    for (d, text) in new_texts.iter().enumerate() {
        let j = match old_texts.iter().position(|t| t == text) {
            Some(o) => old_lists
                .iter()
                .position(|l| l.docs.contains(&(o as u32)))
                .unwrap(),
            None => {
                let y = scoring(d);
                (0..6)
                    .max_by(|&a, &b| {
                        cents
                            .dot(a, &y)
                            .total_cmp(&cents.dot(b, &y))
                            .then(b.cmp(&a))
                    })
                    .unwrap()
            }
        };
        want[j].push(d as u32);
    }
    let got: Vec<Vec<u32>> = lists.iter().map(|l| l.docs.clone()).collect();
    assert_eq!(got, want);
    // Each row's sign bits are those of its residual against the list's stored
    // (dequantized) centroid, as a full build codes them (`p = y·ĉ / ĉ·ĉ`, bit t set iff
    // `y_t − p·ĉ_t > 0`).
    let nb = ivf::code_bytes(dim);
    for (j, l) in lists.iter().enumerate() {
        assert_eq!(l.first, 0);
        let c = stored.get(j);
        let cc: f32 = c.iter().map(|x| x * x).sum();
        for (i, &d) in l.docs.iter().enumerate() {
            let y = scoring(d as usize);
            let yc: f32 = y.iter().zip(&c).map(|(a, b)| a * b).sum();
            let p = yc / cc;
            let mut bits = vec![0u8; nb];
            for (t, (a, b)) in y.iter().zip(&c).enumerate() {
                if a - p * b > 0.0 {
                    bits[t / 8] |= 1 << (t % 8);
                }
            }
            assert_eq!(
                &l.codes[i * nb..(i + 1) * nb],
                &bits[..],
                "list {j} row {i}"
            );
        }
    }

    // Renamed: exactly the lists whose chunks or rows changed, with their row pages; every
    // other list page and its row pages keep their names (and files).
    let changed: Vec<usize> = (0..6)
        .filter(|&j| {
            want[j] != old_lists[j].docs
                || want[j]
                    .iter()
                    .any(|&d| old_texts.get(d as usize) != Some(&new_texts[d as usize]))
        })
        .collect();
    assert!(!changed.is_empty() && changed.len() < 6, "{changed:?}");
    let (mut renamed_rows, mut all_rows) = (0, 0);
    for j in 0..6 {
        let rows = after.list_row_pages(j, lists[j].docs.len());
        all_rows += rows.len();
        for n in rows.iter().chain([&after.list_page(j)]) {
            assert!(bundle.join("p").join(n).is_file(), "{n}");
        }
        if changed.contains(&j) {
            assert_ne!(after.list_page(j), before.list_page(j), "list {j}");
            assert!(rows.iter().all(|n| !old_rows[j].contains(n)), "list {j}");
            renamed_rows += rows.len();
        } else {
            assert_eq!(after.list_page(j), before.list_page(j), "list {j}");
            assert_eq!(rows, old_rows[j], "list {j}");
        }
    }
    let gens = after.list_gens.clone().unwrap();
    let mut renamed: Vec<usize> = gens
        .iter()
        .flat_map(|g| g.lists.iter().map(|&j| j as usize))
        .collect();
    renamed.sort_unstable();
    assert_eq!(renamed, changed);
    assert!(
        note.ends_with(&format!(
            "{} of 6 list pages and {renamed_rows} of {all_rows} row pages rewritten",
            changed.len()
        )),
        "{note}"
    );

    // Against a full rebuild (its own k-means, same codes): recall@10 vs the exact scan
    // within 0.005 at each bundle's default nprobe; every list probed and every candidate
    // rescored, both give the exact ranking.
    let full = tmp.path().join("full");
    build(&common::with_model(&corpus, &full), &settings()).unwrap();
    let fr = common::ivf_root(&full);
    assert!(fr.is_binary() && fr.list_rows.is_some());
    assert_eq!(fr.centroid_codes(), ivf::CentroidCodes::Int4Centred);
    let exact = Engine::open_dir(&bundle).unwrap();
    let exact_full = Engine::open_dir(&full).unwrap();
    let (mut eu, mut ef) = (
        Engine::open_dir_paged(&bundle).unwrap(),
        Engine::open_dir_paged(&full).unwrap(),
    );
    let queries = common::pair_queries(v);
    let (ru, rf) = (
        common::recall_at_10(&eu, &exact, &queries),
        common::recall_at_10(&ef, &exact_full, &queries),
    );
    eprintln!("update recall@10 {ru:.4}; full rebuild recall@10 {rf:.4}");
    assert!(ru >= rf - 0.005, "update {ru} vs full rebuild {rf}");
    for e in [&mut eu, &mut ef] {
        e.set_nprobe(Some(6));
        e.set_rescore(Some(1000));
    }
    let mut browser =
        Engine::open_entry(&std::fs::read(bundle.join("jikji.json")).unwrap()).unwrap();
    browser.set_nprobe(Some(6));
    browser.set_rescore(Some(1000));
    // Dense rankings (hybrid fusion takes the coded sample's background, not the exact
    // scan's, so it may differ from the exact engine's at the tail).
    for q in &queries {
        {
            let mode = Mode::Dense;
            let e = exact
                .search_with_vector("restore drills", Some(q), mode, 10)
                .unwrap()
                .hits;
            // (The update keeps the recorded centring offsets, the rebuild recomputes
            // them: each is compared with its own bundle's exact scan.)
            // Rankings (a coded background sample shifts the z-scores a little from the
            // exact scan's: `FORMAT.md`, "Coded background sample").
            let ids = |h: Vec<jikji_engine::Hit>| -> Vec<String> {
                h.into_iter().map(|h| h.chunk.id).collect()
            };
            let got = eu
                .search_with_vector("restore drills", Some(q), mode, 10)
                .unwrap()
                .hits;
            let (a, b) = (ids(got), ids(e.clone()));
            assert!(a == b, "update, {mode}: {a:?} {b:?}");
            let (got, want) = (
                ef.search_with_vector("restore drills", Some(q), mode, 10)
                    .unwrap()
                    .hits,
                exact_full
                    .search_with_vector("restore drills", Some(q), mode, 10)
                    .unwrap()
                    .hits,
            );
            assert!(ids(got) == ids(want), "full rebuild, {mode}");
            // The browser's loop: the engine names the pages it lacks, they are added.
            let got = common::browser_search(&browser, &bundle, "restore drills", q, mode);
            assert!(ids(got) == ids(e), "browser loop, {mode}");
        }
    }

    // Hostile pages (valid header, digest and name; hostile body): refused naming the page.
    let j = changed[0];
    let lname = after.list_page(j);
    let good = std::fs::read(bundle.join("p").join(&lname)).unwrap();
    let raw = body(&bundle, &lname);
    let gen = after.list_gen(j).to_string();
    let count = lists[j].docs.len();
    let mut hostile: Vec<(String, Vec<u8>, page::Kind, u32)> = Vec::new();
    // `first` ≠ 0 in the per-list layout (byte 1: the varint after the count).
    let mut b = raw.clone();
    assert!(count < 128 && b[1] == 0);
    b[1] = 1;
    hostile.push((lname.clone(), b, page::Kind::Lists, j as u32));
    // A row page that lost its last byte.
    let rname = after.list_row_pages(j, count)[0].clone();
    let rraw = body(&bundle, &rname);
    hostile.push((
        rname.clone(),
        rraw[..rraw.len() - 1].to_vec(),
        page::Kind::IndexRows,
        (j * s) as u32,
    ));
    for (name, bad, kind, n) in hostile {
        let path = bundle.join("p").join(&name);
        let keep = std::fs::read(&path).unwrap();
        std::fs::write(&path, page::encode_numbered(kind, &gen, n, &bad).bytes).unwrap();
        let mut e = Engine::open_dir_paged(&bundle).unwrap();
        e.set_nprobe(Some(6));
        e.set_rescore(Some(1000));
        let err = e
            .search_with_vector("q", Some(&queries[0]), Mode::Dense, 10)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&format!("p/{name}")), "{name}: {err}");
        std::fs::write(&path, keep).unwrap();
    }
    assert_eq!(std::fs::read(bundle.join("p").join(&lname)).unwrap(), good);
    // An entry whose `list_rows` leaves a list without room, or overflows page numbers.
    let entry: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("jikji.json")).unwrap()).unwrap();
    for (value, what) in [(1u64, "p/j-"), (u64::from(u32::MAX), "jikji.json")] {
        let mut e2 = entry.clone();
        e2["pages"]["ivf"]["list_rows"] = serde_json::json!(value);
        let res = Engine::open_entry(&serde_json::to_vec(&e2).unwrap()).and_then(|mut b| {
            b.set_nprobe(Some(6));
            loop {
                match b.search_with_vector("q", Some(&queries[0]), Mode::Dense, 10) {
                    Err(EngineError::NeedPages(names)) => {
                        for n in names {
                            let Ok(stored) = std::fs::read(bundle.join("p").join(&n)) else {
                                return Err(EngineError::NeedPages(vec![n]));
                            };
                            let raw = page::decode_stored(&n, &stored).unwrap();
                            let mut bytes = stored[..page::HEADER_LEN].to_vec();
                            bytes.extend_from_slice(&raw);
                            b.add_page(&n, &bytes).unwrap();
                        }
                    }
                    r => return r.map(|_| ()),
                }
            }
        });
        let err = res.expect_err("refused").to_string();
        assert!(err.contains(what), "list_rows {value}: {err}");
    }
}

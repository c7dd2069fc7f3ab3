//! The paged dense index (issue 14, `pages.ivf`): searching through it equals the exact
//! scan when every list is probed, a scanned chunk scores bit for bit as in the exact
//! scan, the lifecycle and the tier/language filters keep the top-k full (applied while
//! scanning, with the one mask the exact scan uses), hostile list pages are refused with
//! the page's name, and `jikji update` keeps the centroids below its refit rule (only the
//! changed lists renamed, new vectors in the nearest stored centroid's list, recall within
//! 0.005 of a full rebuild) and rebuilds the index as a full build does past it.
//!
//! The first three tests index the frozen centring fixture (`format/tests/compat/
//! v2-centring`: real e5 vectors, `shift` centring, query vectors in `queries.json`), so
//! they need no model; the last three build the service-docs fixture with the model.

mod common;

use std::path::{Path, PathBuf};

use jikji_builder::ingest::{build, BundleSettings};
use jikji_builder::ivf::DenseIndex;
use jikji_engine::centring::ChunkCentring;
use jikji_engine::{Engine, EngineError, Mode, SearchOptions};
use jikji_format::paged::{ivf, page};
use jikji_format::Bundle;

fn compat(name: &str) -> PathBuf {
    common::root().join("format/tests/compat").join(name)
}

#[derive(serde::Deserialize)]
struct Query {
    text: String,
    vector: Vec<f32>,
}

fn queries() -> Vec<Query> {
    serde_json::from_slice(&std::fs::read(compat("v2-centring/queries.json")).unwrap()).unwrap()
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

/// A copy of the centring fixture under `dir` with a dense index of `nlist` lists (default
/// `nprobe` 1) written by the builder's code: its pages under `p/`, `pages.ivf` in the entry.
fn indexed_fixture(dir: &Path, nlist: usize) -> PathBuf {
    indexed_fixture_with(dir, nlist, false)
}

/// [`indexed_fixture`] with binary lists (`binary`: sign bits of the residuals, int8 rows
/// for the rescoring in `i` pages of 4 rows, oversampling 8) or int8 lists.
fn indexed_fixture_with(dir: &Path, nlist: usize, binary: bool) -> PathBuf {
    let out = dir.join("bundle");
    copy_dir(&compat("v2-centring/bundle"), &out);
    let whole = Bundle::open_dir(&out).unwrap();
    let v = whole.vectors().unwrap();
    let model = whole.manifest().model.as_ref().unwrap();
    let centring =
        ChunkCentring::langs_of(model.centring.as_ref().unwrap(), v.len(), v.dim()).unwrap();
    let index = jikji_builder::ivf::build(v, centring.as_ref(), nlist, 1, 2).unwrap();
    let scoring = |i: usize| {
        let (scale, row) = v.row(i);
        match &centring {
            Some(c) => c.scoring_vector(i, scale, row),
            None => v.get(i),
        }
    };
    let root = ivf::write_pages(
        &ivf::IvfParts {
            centroids: &index.centroids,
            lists: &index.lists,
            nprobe: 1,
            codes: if binary {
                ivf::ListCodes::Binary {
                    scoring: &scoring,
                    rows_per_page: 4,
                    rescore: 8,
                }
            } else {
                ivf::ListCodes::Int8
            },
        },
        v,
        &mut |p| {
            std::fs::write(out.join("p").join(&p.name), &p.bytes).unwrap();
            Ok(())
        },
    )
    .unwrap();
    let entry_path = out.join("jikji.json");
    let mut entry: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&entry_path).unwrap()).unwrap();
    entry["pages"]["ivf"] = serde_json::to_value(&root).unwrap();
    std::fs::write(&entry_path, serde_json::to_vec(&entry).unwrap()).unwrap();
    out
}

#[test]
fn ivf_probing_every_list_equals_the_exact_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = indexed_fixture(tmp.path(), 4);
    let root = common::ivf_root(&dir);
    assert_eq!(
        (root.nlist, root.nprobe, root.codes.as_str()),
        (4, 1, "int8")
    );
    let whole = Engine::open_dir(&dir).unwrap();
    let mut paged = Engine::open_dir_paged(&dir).unwrap();
    paged.set_cache_budget(0); // every query cold: its fetch stats count every page
    for q in queries() {
        for mode in [Mode::Dense, Mode::Hybrid] {
            let exact = whole
                .search_with_vector(&q.text, Some(&q.vector), mode, 10)
                .unwrap();
            paged.set_nprobe(Some(4));
            // Fewer lists than the ranking needs: the scan reads more (the top-k stays full).
            let all = paged
                .search_with_vector(&q.text, Some(&q.vector), mode, 10)
                .unwrap();
            assert_eq!(all.hits, exact.hits, "{} {mode}: every list probed", q.text);
            let f = paged.last_fetch();
            assert!(
                !f.by_kind.contains_key("v"),
                "{}: the index read vector pages {:?}",
                q.text,
                f.by_kind
            );
            assert_eq!(f.by_kind.get("j").map(|k| k.0), Some(4), "{:?}", f.by_kind);
        }
    }
}

/// Binary lists: with every list probed and every scanned chunk rescored, the ranking is
/// the exact scan's (dense and hybrid: every fused chunk then has its exact score); at the
/// default oversampling the rescoring reads `i` pages, never `v` pages; binary-only
/// (oversampling 0) reads no rows at all.
#[test]
fn binary_lists_rescored_in_full_equal_the_exact_scan() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = indexed_fixture_with(tmp.path(), 4, true);
    let root = common::ivf_root(&dir);
    assert_eq!((root.codes.as_str(), root.rescore), ("binary", Some(8)));
    let whole = Engine::open_dir(&dir).unwrap();
    let n = whole.bundle().manifest().counts.chunks;
    let mut paged = Engine::open_dir_paged(&dir).unwrap();
    paged.set_cache_budget(0);
    for q in queries() {
        for mode in [Mode::Dense, Mode::Hybrid] {
            let exact = whole
                .search_with_vector(&q.text, Some(&q.vector), mode, 10)
                .unwrap();
            paged.set_nprobe(Some(4));
            paged.set_rescore(Some(n.div_ceil(10)));
            let all = paged
                .search_with_vector(&q.text, Some(&q.vector), mode, 10)
                .unwrap();
            assert_eq!(
                all.hits, exact.hits,
                "{} {mode}: every chunk rescored",
                q.text
            );
            let f = paged.last_fetch();
            assert!(!f.by_kind.contains_key("v"), "{:?}", f.by_kind);
            assert_eq!(f.by_kind.get("j").map(|k| k.0), Some(4), "{:?}", f.by_kind);
            assert_eq!(
                f.by_kind.get("i").map(|k| k.0),
                Some(root.rows.as_ref().unwrap().pages),
                "{:?}",
                f.by_kind
            );
            paged.set_nprobe(None);
            paged.set_rescore(None);
            let some = paged
                .search_with_vector(&q.text, Some(&q.vector), mode, 10)
                .unwrap();
            assert_eq!(some.hits.len(), exact.hits.len(), "{} {mode}", q.text);
            let f = paged.last_fetch();
            assert!(f.by_kind.contains_key("i") && !f.by_kind.contains_key("v"));
            paged.set_rescore(Some(0));
            paged
                .search_with_vector(&q.text, Some(&q.vector), mode, 10)
                .unwrap();
            let f = paged.last_fetch();
            assert!(
                !f.by_kind.contains_key("i"),
                "binary-only read rows: {:?}",
                f.by_kind
            );
            paged.set_rescore(None);
        }
    }
}

/// Hostile binary list and row pages: errors naming the page, never a panic.
#[test]
fn hostile_binary_pages_are_refused_naming_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = indexed_fixture_with(tmp.path(), 2, true);
    let root = common::ivf_root(&dir);
    let q = &queries()[0];
    let rows = root.rows.clone().unwrap();
    for (name, kind, gen, n) in [
        (root.list_page(0), page::Kind::Lists, &root.lists.gen, 0),
        (root.list_page(1), page::Kind::Lists, &root.lists.gen, 1),
        (
            root.row_page(0).unwrap().0,
            page::Kind::IndexRows,
            &rows.gen,
            0,
        ),
    ] {
        let path = dir.join("p").join(&name);
        let good = std::fs::read(&path).unwrap();
        let raw = page::decode_stored(&name, &good).unwrap();
        // A valid page (header, digest, name) whose body lost its last byte.
        let bad = page::encode_numbered(kind, gen, n, &raw[..raw.len() - 1]);
        std::fs::write(&path, &bad.bytes).unwrap();
        let mut e = Engine::open_dir_paged(&dir).unwrap();
        e.set_nprobe(Some(2));
        e.set_rescore(Some(1000));
        let err = e
            .search_with_vector(&q.text, Some(&q.vector), Mode::Dense, 10)
            .unwrap_err()
            .to_string();
        assert!(err.contains(&name), "{name}: {err}");
        std::fs::write(&path, &good).unwrap();
    }
}

#[test]
fn ivf_through_the_browser_loop_equals_the_native_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = indexed_fixture(tmp.path(), 3);
    let native = Engine::open_dir_paged(&dir).unwrap();
    let entry = std::fs::read(dir.join("jikji.json")).unwrap();
    let browser = Engine::open_entry(&entry).unwrap();
    for q in queries() {
        for mode in [Mode::Dense, Mode::Hybrid] {
            let want = native
                .search_with_vector(&q.text, Some(&q.vector), mode, 10)
                .unwrap();
            let mut rounds = 0;
            let got = loop {
                match browser.search_with_vector(&q.text, Some(&q.vector), mode, 10) {
                    Ok(r) => break r,
                    Err(EngineError::NeedPages(names)) => {
                        rounds += 1;
                        assert!(rounds <= 4, "{}: too many rounds", q.text);
                        assert!(names.iter().all(|n| !n.starts_with("v-")), "{names:?}");
                        for n in names {
                            let stored = std::fs::read(dir.join("p").join(&n)).unwrap();
                            let raw = page::decode_stored(&n, &stored).unwrap();
                            let mut bytes = stored[..page::HEADER_LEN].to_vec();
                            bytes.extend_from_slice(&raw);
                            browser.add_page(&n, &bytes).unwrap();
                        }
                    }
                    Err(e) => panic!("{}: {e}", q.text),
                }
            };
            assert_eq!(got.hits, want.hits, "{} {mode}", q.text);
        }
    }
}

#[test]
fn hostile_list_pages_are_refused_naming_the_page() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = indexed_fixture(tmp.path(), 2);
    let root = common::ivf_root(&dir);
    let q = &queries()[0];
    for (what, body) in [
        ("a count beyond the page", {
            let mut b = vec![0xff, 0xff, 0xff, 0xff, 0x0f];
            b.extend_from_slice(&[1; 64]);
            b
        }),
        ("a doc id past the chunks", {
            let mut b = vec![1, 200];
            b.extend(jikji_format::vectors::write_vectors(384, &[vec![0.0; 384]]).unwrap());
            b
        }),
        ("rows of another dimension", {
            let mut b = vec![1, 0];
            b.extend(jikji_format::vectors::write_vectors(3, &[vec![0.0; 3]]).unwrap());
            b
        }),
    ] {
        // Valid pages (header, digest, name) with a hostile body, for both lists.
        for j in 0..2 {
            let name = root.list_page(j);
            let p = page::encode_numbered(page::Kind::Lists, &root.lists.gen, j as u32, &body);
            std::fs::write(dir.join("p").join(&name), &p.bytes).unwrap();
        }
        let e = Engine::open_dir_paged(&dir).unwrap();
        let err = e
            .search_with_vector(&q.text, Some(&q.vector), Mode::Dense, 10)
            .unwrap_err()
            .to_string();
        assert!(err.contains("p/j-"), "{what}: {err}");
    }
}

fn service_corpus(dir: &Path) -> PathBuf {
    let from = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/service-docs");
    let to = dir.join("corpus");
    copy_dir(&from, &to);
    to
}

#[test]
fn ivf_filters_keep_the_top_k_full() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = service_corpus(tmp.path());
    let out = tmp.path().join("bundle");
    build(
        &common::with_model(&corpus, &out),
        &common::ivf_settings(usize::MAX),
    )
    .unwrap();
    let whole = Engine::open_dir(&out).unwrap();
    let mut paged = Engine::open_dir_paged(&out).unwrap();
    let root = paged.dense_index().unwrap().clone();
    let n = whole.bundle().manifest().counts.chunks;
    assert_eq!(root.nlist, n, "one chunk per list");
    paged.set_nprobe(Some(1));
    let v = whole.bundle().vectors().unwrap();
    let opts = SearchOptions::default(); // archived chunks left out
    let allowed = whole
        .search_with_options("q", Some(&v.get(0)), Mode::Dense, n, &opts)
        .unwrap()
        .hits
        .len();
    assert!(allowed < n, "the fixture has archived versions");
    for doc in 0..n {
        let q = v.get(doc);
        let exact = whole
            .search_with_options("q", Some(&q), Mode::Dense, allowed, &opts)
            .unwrap();
        let got = paged
            .search_with_options("q", Some(&q), Mode::Dense, allowed, &opts)
            .unwrap();
        assert_eq!(
            got.hits.len(),
            allowed,
            "query = chunk {doc}: top-k not full"
        );
        assert_eq!(got.hits, exact.hits, "query = chunk {doc}");
    }
}

#[test]
fn update_past_the_refit_rule_rebuilds_the_dense_index_as_a_full_build() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = service_corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build(
        &common::with_model(&corpus, &bundle),
        &common::ivf_settings(3),
    )
    .unwrap();
    let plan = std::fs::read_to_string(corpus.join("1. platform/plan_v2.md")).unwrap();
    std::fs::write(
        corpus.join("1. platform/plan_v3.md"),
        plan.replace("version: 2", "version: 3")
            .replace("200 GB", "500 GB"),
    )
    .unwrap();
    std::fs::remove_file(corpus.join("1. platform/backups.md")).unwrap();
    let gw = corpus.join("1. platform/gateway.md");
    let g = std::fs::read_to_string(&gw).unwrap();
    std::fs::write(&gw, g.replace("gateway", "edge gateway")).unwrap();
    let r = jikji_builder::update::update(&common::with_model(&corpus, &bundle), false).unwrap();
    assert!(r.written);
    // A new file, a deleted one and an edited one of eight: more than 20% of the vectors
    // changed.
    let note = r.dense_index.clone().unwrap();
    assert!(
        note.starts_with("refitted: ") && note.contains("(> 20%)"),
        "{note}"
    );
    let full = tmp.path().join("full");
    build(
        &common::with_model(&corpus, &full),
        &common::ivf_settings(3),
    )
    .unwrap();
    let (mut a, mut b) = (common::ivf_root(&bundle), common::ivf_root(&full));
    // The entry records the refit and its reason; the pages are the full build's.
    let chosen = a.chosen_by.take().unwrap();
    assert!(
        chosen.starts_with("update: refitted: ") && chosen.contains("(> 20%); forced"),
        "{chosen}"
    );
    assert_eq!(
        Bundle::open_dir(&bundle)
            .unwrap()
            .manifest()
            .dense_index_chosen_by
            .as_deref(),
        Some(chosen.as_str())
    );
    assert!(b
        .chosen_by
        .take()
        .unwrap()
        .starts_with("forced (--dense-index)"));
    assert_eq!(a, b, "the updated index's pages are the full build's");
    for name in a.all_pages() {
        assert_eq!(
            std::fs::read(bundle.join("p").join(&name)).unwrap(),
            std::fs::read(full.join("p").join(&name)).unwrap(),
            "{name}"
        );
    }
    let m = Bundle::open_dir(&bundle).unwrap();
    assert_eq!(m.manifest().dense_index.as_deref(), Some("ivf:3"));
    let (ea, eb) = (
        Engine::open_dir_paged(&bundle).unwrap(),
        Engine::open_dir_paged(&full).unwrap(),
    );
    let v = m.vectors().unwrap();
    for doc in 0..v.len() {
        let q = v.get(doc);
        for mode in [Mode::Dense, Mode::Hybrid] {
            assert_eq!(
                ea.search_with_vector("backup plan", Some(&q), mode, 5)
                    .unwrap()
                    .hits,
                eb.search_with_vector("backup plan", Some(&q), mode, 5)
                    .unwrap()
                    .hits,
                "chunk {doc} {mode}"
            );
        }
    }
}

/// The service docs plus a Chinese and a Korean file in the tier-2 folder, so the tier and
/// language filters each leave out a part of every list order.
fn mixed_corpus(dir: &Path) -> PathBuf {
    let corpus = service_corpus(dir);
    std::fs::write(
        corpus.join("2. support/help-zh.md"),
        "Source: https://docs.example.com/zh/help\n\n# 常见问题\n\n备份每天凌晨两点运行，保留三十天。存储按月计费，每个项目包含二百GB对象存储。\n\n\
         ## 账户\n\n忘记密码时，请在登录页面点击重置链接，系统会发送邮件。\n",
    )
    .unwrap();
    std::fs::write(
        corpus.join("2. support/help-ko.md"),
        "Source: https://docs.example.com/ko/help\n\n# 자주 묻는 질문\n\n백업은 매일 새벽 두 시에 실행되며 삼십 일 동안 보관됩니다. 저장 공간은 매달 청구됩니다.\n\n\
         ## 계정\n\n비밀번호를 잊으면 로그인 화면에서 재설정 링크를 누르세요. 메일이 발송됩니다.\n",
    )
    .unwrap();
    corpus
}

#[test]
fn ivf_tier_and_language_filters_keep_the_top_k_full() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = mixed_corpus(tmp.path());
    let out = tmp.path().join("bundle");
    build(
        &common::with_model(&corpus, &out),
        &common::ivf_settings(usize::MAX),
    )
    .unwrap();
    let mut whole = Engine::open_dir(&out).unwrap();
    let mut paged = Engine::open_dir_paged(&out).unwrap();
    let n = whole.bundle().manifest().counts.chunks;
    assert_eq!(paged.dense_index().unwrap().nlist, n, "one chunk per list");
    // One list per query: every other allowed chunk is in a list the scan must add.
    paged.set_nprobe(Some(1));
    let qs: Vec<Vec<f32>> = {
        let v = whole.bundle().vectors().unwrap();
        (0..n).map(|d| v.get(d)).collect()
    };
    let opts = SearchOptions::default(); // archived chunks left out as well
    let filters = [
        jikji_engine::Filters {
            tier: Some((1, 1)),
            ..Default::default()
        },
        jikji_engine::Filters {
            langs: vec!["zh".into(), "ko".into()],
            ..Default::default()
        },
        jikji_engine::Filters {
            tier: Some((2, 2)),
            langs: vec!["en".into()],
            ..Default::default()
        },
    ];
    for f in filters {
        whole.set_filters(f.clone());
        paged.set_filters(f.clone());
        let allowed = whole
            .search_with_options("q", Some(&qs[0]), Mode::Dense, n, &opts)
            .unwrap()
            .hits
            .len();
        assert!(allowed > 0 && allowed < n, "{f:?} leaves {allowed} of {n}");
        for (doc, q) in qs.iter().enumerate() {
            let q = q.clone();
            let exact = whole
                .search_with_options("q", Some(&q), Mode::Dense, allowed, &opts)
                .unwrap();
            let got = paged
                .search_with_options("q", Some(&q), Mode::Dense, allowed, &opts)
                .unwrap();
            assert_eq!(
                got.hits.len(),
                allowed,
                "{f:?}, query = chunk {doc}: not full"
            );
            assert_eq!(got.hits, exact.hits, "{f:?}, query = chunk {doc}");
            let hybrid = paged
                .search_with_options("backup storage", Some(&q), Mode::Hybrid, allowed, &opts)
                .unwrap();
            let exact_hybrid = whole
                .search_with_options("backup storage", Some(&q), Mode::Hybrid, allowed, &opts)
                .unwrap();
            assert_eq!(
                hybrid.hits.len(),
                exact_hybrid.hits.len(),
                "{f:?}, hybrid, query = chunk {doc}: not full"
            );
        }
    }
}

#[test]
fn update_keeps_the_centroids_and_renames_only_changed_lists() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::topic_corpus(tmp.path(), 40);
    let bundle = tmp.path().join("bundle");
    build(
        &common::with_model(&corpus, &bundle),
        &common::ivf_settings(6),
    )
    .unwrap();
    let before = common::ivf_root(&bundle);
    let old = Bundle::open_dir(&bundle).unwrap();
    let old_n = old.manifest().counts.chunks;
    let dim = old.vectors().unwrap().dim();
    assert_eq!((before.nlist, old_n), (6, 40));
    let old_texts: Vec<String> = (0..old_n as u32)
        .map(|d| old.chunks().get(d).unwrap().text)
        .collect();
    let old_lists: Vec<Vec<u32>> = (0..before.nlist)
        .map(|j| {
            let name = before.list_page(j);
            let bytes = std::fs::read(bundle.join("p").join(&name)).unwrap();
            let body = page::decode_stored(&name, &bytes).unwrap();
            ivf::ListPage::open(&name, &body, old_n, dim).unwrap().docs
        })
        .collect();
    drop(old);
    // One file edited, one added (at the end of the path order): 3 of 41 vectors changed.
    common::edit_topic_corpus(&corpus);
    let r = jikji_builder::update::update(&common::with_model(&corpus, &bundle), false).unwrap();
    let note = r.dense_index.clone().unwrap();
    assert!(
        note.starts_with("kept centroids: 3 of 41 vectors") && note.contains("2 assigned"),
        "{note}"
    );
    let after = common::ivf_root(&bundle);
    after.check(41).unwrap();
    // The centroid pages keep their names (and bytes); unchanged lists keep their names.
    assert_eq!(after.centroids, before.centroids);
    let kept: Vec<usize> = (0..6)
        .filter(|&j| after.list_page(j) == before.list_page(j))
        .collect();
    let gens = after.list_gens.clone().unwrap_or_default();
    let renamed: Vec<u32> = gens.iter().flat_map(|g| g.lists.clone()).collect();
    assert_eq!(kept.len() + renamed.len(), 6, "{kept:?} {renamed:?}");
    assert!(
        !kept.is_empty() && !renamed.is_empty(),
        "{kept:?} {renamed:?}"
    );
    assert!(
        note.ends_with(&format!("{} of 6 list pages rewritten", renamed.len())),
        "{note}"
    );
    for name in after.all_pages() {
        assert!(bundle.join("p").join(&name).is_file(), "{name}");
    }
    // The lists, recomputed here: a kept chunk (same text, hence the same row) in its old
    // list, a new one in the list of its nearest stored centroid (centred as the engine
    // centres it).
    let new = Bundle::open_dir(&bundle).unwrap();
    let v = new.vectors().unwrap();
    let model = new.manifest().model.as_ref().unwrap();
    let centring =
        ChunkCentring::langs_of(model.centring.as_ref().unwrap(), v.len(), v.dim()).unwrap();
    let mut cents = Vec::new();
    for p in 0..after.centroids.pages {
        let name = after.centroid_page(p);
        let bytes = std::fs::read(bundle.join("p").join(&name)).unwrap();
        let body = page::decode_stored(&name, &bytes).unwrap();
        let c = ivf::open_rows(&name, &body, ivf::centroids_on_page(&after, p), v.dim()).unwrap();
        cents.extend((0..c.len()).map(|j| c.get(j)));
    }
    let mut want = vec![Vec::new(); 6];
    for d in 0..v.len() {
        let text = new.chunks().get(d as u32).unwrap().text;
        let j = match old_texts.iter().position(|t| *t == text) {
            Some(o) => old_lists
                .iter()
                .position(|l| l.contains(&(o as u32)))
                .unwrap(),
            None => {
                let (scale, row) = v.row(d);
                let y = match &centring {
                    Some(c) => c.scoring_vector(d, scale, row),
                    None => v.get(d),
                };
                let score = |c: &Vec<f32>| c.iter().zip(&y).map(|(a, b)| a * b).sum::<f32>();
                (0..6)
                    .max_by(|&a, &b| {
                        score(&cents[a])
                            .total_cmp(&score(&cents[b]))
                            .then(b.cmp(&a))
                    })
                    .unwrap()
            }
        };
        want[j].push(d as u32);
    }
    let got: Vec<Vec<u32>> = (0..6)
        .map(|j| {
            let name = after.list_page(j);
            let bytes = std::fs::read(bundle.join("p").join(&name)).unwrap();
            let body = page::decode_stored(&name, &bytes).unwrap();
            ivf::ListPage::open(&name, &body, 41, v.dim()).unwrap().docs
        })
        .collect();
    assert_eq!(got, want);
    // The renamed lists are exactly those whose bytes changed: other chunks, or a chunk
    // whose row changed (a new text at that doc id); every other list page keeps its name.
    let changed: Vec<u32> = (0..6u32)
        .filter(|&j| {
            let l = &want[j as usize];
            *l != old_lists[j as usize]
                || l.iter()
                    .any(|&d| old_texts.get(d as usize) != Some(&new.chunks().get(d).unwrap().text))
        })
        .collect();
    let mut renamed_sorted = renamed.clone();
    renamed_sorted.sort_unstable();
    assert_eq!(renamed_sorted, changed);
    assert_eq!(kept.len(), 6 - changed.len());
    // The entry records the decision (the list pages' and the manifest's `chosen_by`).
    let chosen = after.chosen_by.clone().unwrap();
    assert!(
        chosen.starts_with("update: kept centroids: 3 of 41 vectors")
            && chosen.ends_with(&format!("{} of 6 list pages rewritten", changed.len())),
        "{chosen}"
    );
    assert_eq!(
        new.manifest().dense_index_chosen_by.as_deref(),
        Some(chosen.as_str())
    );
    // Against a full rebuild (its own k-means): recall@10 vs exact within 0.005 at each
    // bundle's default nprobe; every list probed, both give the exact ranking.
    let full = tmp.path().join("full");
    build(
        &common::with_model(&corpus, &full),
        &common::ivf_settings(6),
    )
    .unwrap();
    let exact = Engine::open_dir(&bundle).unwrap();
    let (mut eu, mut ef) = (
        Engine::open_dir_paged(&bundle).unwrap(),
        Engine::open_dir_paged(&full).unwrap(),
    );
    let queries = common::pair_queries(v);
    let (ru, rf) = (
        common::recall_at_10(&eu, &exact, &queries),
        common::recall_at_10(&ef, &exact, &queries),
    );
    eprintln!(
        "update nprobe {} recall@10 {ru:.4}; full rebuild nprobe {} recall@10 {rf:.4}",
        after.nprobe,
        common::ivf_root(&full).nprobe
    );
    assert!(ru >= rf - 0.005, "update {ru} vs full rebuild {rf}");
    eu.set_nprobe(Some(6));
    ef.set_nprobe(Some(6));
    for q in &queries {
        for mode in [Mode::Dense, Mode::Hybrid] {
            let e = exact
                .search_with_vector("restore drills", Some(q), mode, 10)
                .unwrap()
                .hits;
            assert_eq!(
                eu.search_with_vector("restore drills", Some(q), mode, 10)
                    .unwrap()
                    .hits,
                e
            );
            assert_eq!(
                ef.search_with_vector("restore drills", Some(q), mode, 10)
                    .unwrap()
                    .hits,
                e
            );
        }
    }
}

/// Binary lists (rows numbered per list) keep their centroids below the refit rule, as int8
/// lists do (`update_binary_lists.rs` tests the pages).
#[test]
fn update_of_binary_lists_keeps_the_centroids() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::topic_corpus(tmp.path(), 40);
    let bundle = tmp.path().join("bundle");
    let settings = BundleSettings {
        dense_index: DenseIndex::Ivf {
            nlist: Some(6),
            binary: true,
        },
        ..BundleSettings::default()
    };
    build(&common::with_model(&corpus, &bundle), &settings).unwrap();
    let before = common::ivf_root(&bundle);
    assert!(before.is_binary() && before.list_rows.is_some());
    // One file edited (2 of 40 vectors changed: below the share rule).
    let edited = corpus.join("1. docs/note-07.md");
    let text = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, text.replace("every week", "every single day")).unwrap();
    let r = jikji_builder::update::update(&common::with_model(&corpus, &bundle), false).unwrap();
    let note = r.dense_index.clone().unwrap();
    assert!(
        note.starts_with("kept centroids: 2 of 40 vectors"),
        "{note}"
    );
    let after = common::ivf_root(&bundle);
    assert!(after.is_binary() && after.list_gens.is_some());
    assert_eq!(after.centroids, before.centroids);
}

#[test]
fn auto_records_its_choice() {
    let tmp = tempfile::tempdir().unwrap();
    // Below `AUTO_MIN_MEASURED` chunks (100,000): exact, not measured, and the entry says so.
    for (name, n) in [("small", 40), ("big", 300)] {
        let dir = tmp.path().join(name);
        std::fs::create_dir_all(&dir).unwrap();
        let corpus = common::topic_corpus(&dir, n);
        let out = tmp.path().join(format!("{name}-bundle"));
        build(
            &common::with_model(&corpus, &out),
            &BundleSettings::default(),
        )
        .unwrap();
        let b = Bundle::open_dir(&out).unwrap();
        assert_eq!(b.manifest().counts.chunks, n);
        assert!(Engine::open_dir_paged(&out)
            .unwrap()
            .dense_index()
            .is_none());
        assert_eq!(
            b.manifest().dense_index_chosen_by.as_deref(),
            Some("auto: exact below 100000 chunks (not measured)")
        );
    }
}

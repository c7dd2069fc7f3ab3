//! The query model as a bundle's pages (`jikji_query_model::paged`): the pages written from a
//! pack give, read back page by page, exactly the vectors of the whole pack; bad pages are
//! named errors. Needs the pack (see `tests/common`: missing model files FAIL unless
//! `JIKJI_SKIP_MODEL_TESTS=1`).

#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::collections::HashMap;

use common::*;
use jikji_format::paged::page;
use jikji_format::paged::qmodel::RowOrder;
use jikji_query_model::paged::{write_pages, write_pages_with, PagedQueryModel, RowLayout};
use jikji_query_model::QueryPack;

/// Pages written into memory: name → header + raw body (what the browser hands over).
fn pages_of(
    dir: &std::path::Path,
    texts: &[&str],
) -> (
    jikji_format::paged::qmodel::QueryModelRoot,
    HashMap<String, Vec<u8>>,
) {
    pages_with(dir, texts, None)
}

/// The layout written before `row_order` (16 rows a page, the tail in id order).
const OLD: RowLayout = RowLayout {
    per_page: 16,
    order: RowOrder::Id,
};

fn pages_with(
    dir: &std::path::Path,
    texts: &[&str],
    layout: Option<RowLayout>,
) -> (
    jikji_format::paged::qmodel::QueryModelRoot,
    HashMap<String, Vec<u8>>,
) {
    let mut pages = HashMap::new();
    let mut sink = |p: page::Encoded| {
        let raw = page::decode_stored(&p.name, &p.bytes)?;
        let mut joined = p.bytes[..page::HEADER_LEN].to_vec();
        joined.extend_from_slice(&raw);
        pages.insert(p.name, joined);
        Ok(())
    };
    let root = match layout {
        None => write_pages(dir, texts, 2, &mut sink),
        Some(l) => write_pages_with(dir, texts, 2, l, &mut sink),
    }
    .expect("write the query model's pages");
    (root, pages)
}

fn add(m: &mut PagedQueryModel, pages: &HashMap<String, Vec<u8>>, names: &[String]) {
    for n in names {
        m.add_page(n, &pages[n])
            .unwrap_or_else(|e| panic!("{n}: {e}"));
    }
}

#[test]
fn paged_query_model_equals_the_whole_pack() {
    let Some(dir) = pack_dir() else { return };
    // Today's layout, and the one of bundles written before it (still read).
    for layout in [None, Some(OLD)] {
        same_vectors_as_the_pack(&dir, layout);
    }
}

fn same_vectors_as_the_pack(dir: &std::path::Path, layout: Option<RowLayout>) {
    let texts = [
        "The quality of mercy is not strained",
        "學而時習之，不亦說乎",
        "메밀꽃 필 무렵",
    ];
    let (root, pages) = pages_with(dir, &texts, layout);
    assert_eq!(root.layers.len(), 12);
    match layout {
        None => assert_eq!((root.rows.per_page, root.row_order), (8, RowOrder::Script)),
        Some(l) => assert_eq!((root.rows.per_page, root.row_order), (l.per_page, l.order)),
    }
    let dir = dir.to_path_buf();
    let pack = QueryPack::open(&dir).unwrap();
    let mut m = PagedQueryModel::new(root.clone(), Some(&pack.info.model_sha256)).unwrap();
    assert!(!m.is_ready());
    let base = m.missing_base();
    add(&mut m, &pages, &base);
    assert!(m.is_ready());
    for q in [
        "to be or not to be",
        "學而時習之",
        "메밀꽃",
        "mercy",
        "a query with words the corpus lacks: zygote",
    ] {
        // Every call asks for the base pages again, as the native path does per query.
        assert!(
            m.missing_base().is_empty(),
            "base pages asked for again after they were all added"
        );
        let ids = m.token_ids(q).unwrap();
        assert_eq!(ids, pack.tokenizer.query_ids(q));
        let need = m.missing_rows(&ids).unwrap();
        assert!(
            m.embed_ids(&ids).is_err() || need.is_empty(),
            "embedded without its rows"
        );
        add(&mut m, &pages, &need);
        assert!(m.missing_rows(&ids).unwrap().is_empty());
        assert_eq!(
            m.embed_ids(&ids).unwrap(),
            pack.embed_query(q).unwrap(),
            "{q}"
        );
    }
    // The corpus's own tokens come first: a query of corpus words needs few row pages.
    let ids = m.token_ids("The quality of mercy").unwrap();
    let fresh = PagedQueryModel::new(root.clone(), Some(&pack.info.model_sha256)).unwrap();
    let mut f = fresh;
    let base = f.missing_base();
    add(&mut f, &pages, &base);
    let need = f.missing_rows(&ids).unwrap();
    assert!(
        need.len() * root.rows.per_page <= 32,
        "{} row pages of {} for {} corpus tokens: {need:?}",
        need.len(),
        root.rows.per_page,
        ids.len()
    );
}

/// Later queries whose tokens the corpus lacks fetched one 16-row page (3.5 kB) per new
/// token: the tail was in id order, where a Han or Hangul piece sits among every other
/// script's. Now 8-row pages and the tail grouped by script: fewer row bytes for such
/// queries, one after the other with the pages kept (as the browser does).
#[test]
fn absent_tokens_fetched_a_page_each_in_id_order() {
    let Some(dir) = pack_dir() else { return };
    let corpus = ["The quality of mercy is not strained"];
    let queries = [
        "學而時習之，不亦說乎",
        "有朋自遠方來，不亦樂乎",
        "人不知而不慍，不亦君子乎",
        "메밀꽃 필 무렵",
        "허 생원은 봉평 장터에서",
        "달밤의 메밀밭 길",
    ];
    let pack = QueryPack::open(&dir).unwrap();
    let bytes = |layout: Option<RowLayout>| {
        let (root, pages) = pages_with(&dir, &corpus, layout);
        let mut m = PagedQueryModel::new(root.clone(), Some(&pack.info.model_sha256)).unwrap();
        let base = m.missing_base();
        add(&mut m, &pages, &base);
        let mut total = 0;
        for q in queries {
            let ids = m.token_ids(q).unwrap();
            let need = m.missing_rows(&ids).unwrap();
            total += need.iter().map(|n| pages[n].len()).sum::<usize>();
            add(&mut m, &pages, &need);
            assert_eq!(m.embed_ids(&ids).unwrap(), pack.embed_query(q).unwrap());
        }
        total
    };
    let (old, new) = (bytes(Some(OLD)), bytes(None));
    let by_id_8 = bytes(Some(RowLayout {
        per_page: 8,
        order: RowOrder::Id,
    }));
    eprintln!(
        "row bytes for {} queries: 16/id {old}, 8/id {by_id_8}, 8/script {new}",
        queries.len()
    );
    assert!(
        new < by_id_8 && by_id_8 < old,
        "16/id {old}, 8/id {by_id_8}, 8/script {new}"
    );
}

/// The base pages were asked for again after the layers were assembled (the parts were
/// handed over and looked missing), so the native path re-added them and failed with "the
/// parts add up to more than … bytes".
#[test]
fn base_pages_are_not_asked_for_again_once_assembled() {
    let Some(dir) = pack_dir() else { return };
    let (root, pages) = pages_of(&dir, &["x"]);
    let pack = QueryPack::open(&dir).unwrap();
    let mut m = PagedQueryModel::new(root, Some(&pack.info.model_sha256)).unwrap();
    let base = m.missing_base();
    add(&mut m, &pages, &base);
    assert_eq!(m.missing_base(), Vec::<String>::new());
    // Adding a base page again is a no-op, not an error.
    add(&mut m, &pages, &base);
    assert!(m.is_ready());
}

#[test]
fn bad_query_model_pages_are_named_errors() {
    let Some(dir) = pack_dir() else { return };
    let (root, pages) = pages_of(&dir, &["x"]);
    let pack = QueryPack::open(&dir).unwrap();
    // Another model's bundle.
    let e = PagedQueryModel::new(root.clone(), Some("00"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("jikji.json") && e.contains("query_model"), "{e}");
    let mut m = PagedQueryModel::new(root.clone(), Some(&pack.info.model_sha256)).unwrap();
    // A flipped byte in a layer page.
    let name = &root.layers[3];
    let mut bad = pages[name].clone();
    let n = bad.len();
    bad[n - 7] ^= 1;
    let e = m.add_page(name, &bad).unwrap_err().to_string();
    assert!(e.contains(&format!("p/{name}")), "{e}");
    // A page of another kind under a row page's name, and a page this model does not list.
    let row0 = root.row_page(0);
    let e = m
        .add_page(&row0, &pages[&root.row_map])
        .unwrap_err()
        .to_string();
    assert!(e.contains(&row0), "{e}");
    let e = m
        .add_page("r-0123456789abcdef-0", &pages[&row0])
        .unwrap_err()
        .to_string();
    assert!(e.contains("r-0123456789abcdef-0"), "{e}");
    // Queries before the base pages: a named error, no panic.
    let e = m.token_ids("q").unwrap_err().to_string();
    assert!(e.contains("not all added"), "{e}");
    // Truncated pages never panic.
    for cut in [0, 10, 47, 48, 100] {
        assert!(m
            .add_page(
                &root.row_map,
                &pages[&root.row_map][..cut.min(pages[&root.row_map].len() - 1)]
            )
            .is_err());
    }
}

/// The root records what the layer and tokenizer pages weigh as stored (what the page's
/// "Load semantic search (… MB)" and the model's progress say), equal to the pages written.
#[test]
fn root_records_the_stored_bytes_of_the_model_pages() {
    let Some(dir) = pack_dir() else { return };
    let mut stored: HashMap<String, u64> = HashMap::new();
    let mut sink = |p: page::Encoded| {
        stored.insert(p.name, p.bytes.len() as u64);
        Ok(())
    };
    let root = write_pages(&dir, &["學而時習之", "mercy"], 2, &mut sink).expect("write pages");
    let sum = |names: &[String]| names.iter().map(|n| stored[n]).sum::<u64>();
    assert_eq!(root.layers_stored, Some(sum(&root.layers)));
    assert_eq!(root.tokenizer_stored, Some(sum(&root.tokenizer)));
    // Stored is what the browser downloads: at most the raw files plus a header a page.
    let headers = (page::HEADER_LEN * (root.layers.len() + root.tokenizer.len())) as u64;
    assert!(
        sum(&root.layers) + sum(&root.tokenizer)
            <= root.layers_bytes + root.tokenizer_bytes + headers
    );
    // The entry JSON carries them.
    let json = serde_json::to_string(&root).unwrap();
    assert!(json.contains("\"layers_stored\":"), "{json}");
}

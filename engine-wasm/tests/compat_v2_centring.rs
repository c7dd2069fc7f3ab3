//! Format 2 with a dense centring record (issue 15, `model.centring` method `lang-mean-v2`):
//! the frozen fixture `format/tests/compat/v2-centring/` (the format 1 fixtures' corpus,
//! 論語 + Hamlet + 메밀꽃 필 무렵, built with the default `shift` centring; never rebuilt, see
//! its README) with the query vectors of a few queries (`queries.json`, made with the
//! model when the fixture was built, so this test needs no model). Checked: the record is
//! what FORMAT.md says; every dense score the engine reports is `q·x̂_i − q·o[l]` computed
//! here from the rows, the runs and the offsets; the dense rankings equal the frozen ones;
//! the Korean rendering of 學而時習之 finds 論語 first (on the same corpus without
//! centring, `../v2/bundle`, a chunk of the Korean novel); a paged read equals a whole read.

use std::path::{Path, PathBuf};

use jikji_engine::centring::{parse_runs, METHOD, NO_LANG};
use jikji_engine::{Engine, EngineError, Mode, SearchResult};
use jikji_format::paged::page;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../format/tests/compat")
        .join(name)
}

#[derive(serde::Deserialize)]
struct Query {
    text: String,
    /// The model's `query: ` vector (L2-normalised).
    vector: Vec<f32>,
    /// Chunk ids of the dense top 5 when the fixture was built.
    dense_top5: Vec<String>,
}

fn queries() -> Vec<Query> {
    let bytes = std::fs::read(fixture("v2-centring/queries.json")).unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The browser's loop, run natively (as in `compat_v2.rs`).
fn browser_search(dir: &Path, engine: &Engine, q: &Query, mode: Mode) -> SearchResult {
    for _ in 0..=jikji_engine::MAX_ROUNDS {
        match engine.search_with_vector(&q.text, Some(&q.vector), mode, 10) {
            Ok(r) => return r,
            Err(EngineError::NeedPages(names)) => {
                for n in names {
                    let stored = std::fs::read(dir.join("p").join(&n)).unwrap();
                    let raw = page::decode_stored(&n, &stored).unwrap();
                    let mut bytes = stored[..page::HEADER_LEN].to_vec();
                    bytes.extend_from_slice(&raw);
                    engine.add_page(&n, &bytes).unwrap();
                }
            }
            Err(e) => panic!("{}: {e}", q.text),
        }
    }
    panic!("{}: too many rounds", q.text)
}

#[test]
fn centring_fixture_scores_raw_rows_with_the_recorded_offsets() {
    let dir = fixture("v2-centring/bundle");
    let engine = Engine::open_dir(&dir).unwrap();
    let b = engine.bundle();
    let model = b.manifest().model.as_ref().unwrap();
    let c = model.centring.as_ref().unwrap();
    assert_eq!(
        (c.method.as_str(), c.query_side.as_str()),
        (METHOD, "shift")
    );
    assert!(c.query.is_empty());
    let v = b.vectors().unwrap();
    let n = v.len();
    let langs: Vec<&str> = parse_runs(c.chunks.as_deref().unwrap(), n)
        .unwrap()
        .into_iter()
        .flat_map(|(code, k)| std::iter::repeat_n(code, k))
        .collect();
    // The three books' languages, each with its offset.
    for l in ["en", "ko", "zh"] {
        assert!(langs.contains(&l) && c.passage[l].len() == model.dim, "{l}");
    }
    let doc_of = |id: &str| {
        (0..n as u32)
            .find(|&i| b.chunks().get(i).unwrap().id == id)
            .unwrap() as usize
    };
    let qs = queries();
    assert!(qs.len() >= 3);
    for q in &qs {
        let r = engine
            .search_with_vector(&q.text, Some(&q.vector), Mode::Dense, n)
            .unwrap();
        assert_eq!(r.hits.len(), n);
        for h in &r.hits {
            let i = doc_of(&h.chunk.id);
            let x = v.get(i);
            let dot = |o: &[f32]| q.vector.iter().zip(o).map(|(a, b)| a * b).sum::<f32>();
            let want = match langs[i] {
                NO_LANG => dot(&x),
                l => dot(&x) - dot(&c.passage[l]),
            };
            assert!(
                (h.raw_score - want).abs() < 1e-4,
                "{}: chunk {i} ({}) {} vs {want}",
                q.text,
                langs[i],
                h.raw_score
            );
        }
        let top5: Vec<&str> = r.hits[..5].iter().map(|h| h.chunk.id.as_str()).collect();
        assert_eq!(top5, q.dense_top5, "{}", q.text);
        // Paged, as the browser reads it: the same hits in dense and hybrid.
        let entry = std::fs::read(dir.join("jikji.json")).unwrap();
        let browser = Engine::open_entry(&entry).unwrap();
        for mode in [Mode::Dense, Mode::Hybrid] {
            let whole = engine
                .search_with_vector(&q.text, Some(&q.vector), mode, 10)
                .unwrap();
            assert_eq!(whole.hits, browser_search(&dir, &browser, q, mode).hits);
        }
    }
    // The bug the centring fixes: a Korean rendering of 學而時習之 gets the Korean novel
    // without centring, 論語 with it (same corpus, same model).
    let ko = qs.iter().find(|q| q.text.starts_with("배우고")).unwrap();
    let top = |e: &Engine| {
        e.search_with_vector(&ko.text, Some(&ko.vector), Mode::Dense, 1)
            .unwrap()
            .hits[0]
            .chunk
            .source
            .clone()
    };
    assert!(top(&engine).contains("lunyu"), "{}", top(&engine));
    let plain = Engine::open_dir(&fixture("v2/bundle")).unwrap();
    assert!(plain
        .bundle()
        .manifest()
        .model
        .as_ref()
        .unwrap()
        .centring
        .is_none());
    assert!(top(&plain).contains("Buckwheat"), "{}", top(&plain));
}

//! Shared helpers of the builder's integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Repository root.
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `../shared/books` beside the repository (or `$JIKJI_SHARED/books`).
pub fn shared_books() -> PathBuf {
    let shared = std::env::var_os("JIKJI_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("../shared"));
    let books = shared.join("books");
    assert!(
        books.is_dir(),
        "{} not found: the real-book tests need ../shared/books",
        books.display()
    );
    books
}

/// The model folder, or a panic that says how to make it. Tests that need the model
/// must not pass silently without it.
pub fn model_dir() -> PathBuf {
    let dir = std::env::var_os("JIKJI_MODEL_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("models/e5-small"));
    assert!(
        dir.join("model.onnx").exists(),
        "{}: no model.onnx; run scripts/setup-model",
        dir.display()
    );
    dir
}

/// Embedding cache shared by test runs (vectors keyed by model + chunk text), so the
/// same chunks are embedded once per machine.
pub fn cache_dir() -> PathBuf {
    root().join("target/jikji-test-cache")
}

/// Copies `files` (paths relative to the shared books folder, tier folders included)
/// into a fresh corpus folder under `dir`.
pub fn subset_corpus(dir: &Path, files: &[&str]) -> PathBuf {
    let src = shared_books();
    let corpus = dir.join("books");
    for f in files {
        let to = corpus.join(f);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::copy(src.join(f), &to).unwrap_or_else(|e| panic!("copying {f}: {e}"));
    }
    corpus
}

/// The real-book subset used by the end-to-end tests: all three tiers.
pub const REAL_SUBSET: &[&str] = &[
    "1. 漢文 古典/lunyu.md",
    "1. 漢文 古典/daxue.md",
    "2. Gutenberg classics/shakespeare-hamlet.txt",
    "99. 온라인 자료 (정리 X)/16_When_Buckwheat_Flowers_Blossom.md",
    "99. 온라인 자료 (정리 X)/23_Spring_Spring.md",
];

/// Runs the built `jikji` binary with `args` and returns its stdout; panics with its
/// stderr if it exits with an error.
pub fn jikji_ok<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes a tiny labeled eval set (12 one-sentence documents with titles, the given
/// queries and qrels, grade 1) into `dir`.
pub fn write_eval_set(dir: &Path, queries: &[(&str, &str)], qrels: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    let topics = [
        (
            "lighthouse",
            "The lighthouse keeper climbed the stairs at dusk to light the lamp.",
        ),
        (
            "harbour",
            "Fishing boats returned to the harbour before the storm broke over the bay.",
        ),
        (
            "orchard",
            "The orchard behind the mill gave apples every autumn to the village.",
        ),
        (
            "caravan",
            "A caravan crossed the desert by night, guided by the stars alone.",
        ),
        (
            "library",
            "The library kept its oldest maps in a locked room under the hall.",
        ),
        (
            "monastery",
            "Snow closed the mountain pass for four months; the monastery waited.",
        ),
        (
            "quarry",
            "Workers cut granite blocks from the quarry and hauled them down by cart.",
        ),
        (
            "meadow",
            "Cows grazed the meadow by the river while the farmer mended the fence.",
        ),
        (
            "forge",
            "The smith kept the forge burning and hammered copper into bowls.",
        ),
        (
            "glacier",
            "The glacier crept down the valley, grinding stones into fine grey sand.",
        ),
        (
            "market",
            "On market day the square filled with cheese, cloth and loud bargaining.",
        ),
        (
            "observatory",
            "From the observatory the astronomer charted comets through the winter.",
        ),
    ];
    let corpus: String = topics
        .iter()
        .map(|(id, text)| {
            serde_json::json!({"id": id, "title": id.to_uppercase(), "text": text}).to_string()
                + "\n"
        })
        .collect();
    std::fs::write(dir.join("corpus.jsonl"), corpus).unwrap();
    let q: String = queries
        .iter()
        .map(|(id, text)| serde_json::json!({"id": id, "text": text}).to_string() + "\n")
        .collect();
    std::fs::write(dir.join("queries.jsonl"), q).unwrap();
    let r: String = qrels
        .iter()
        .map(|(q, d)| format!("{q}\t{d}\t1\n"))
        .collect();
    std::fs::write(dir.join("qrels.tsv"), r).unwrap();
}

pub fn with_model(corpus: &Path, out: &Path) -> jikji_builder::ingest::IngestOptions {
    jikji_builder::ingest::IngestOptions {
        model_dir: Some(model_dir()),
        cache_dir: Some(cache_dir()),
        threads: 2,
        ..jikji_builder::ingest::IngestOptions::new(corpus, out)
    }
}

pub fn ivf_settings(nlist: usize) -> jikji_builder::ingest::BundleSettings {
    jikji_builder::ingest::BundleSettings {
        dense_index: jikji_builder::ivf::DenseIndex::Ivf {
            nlist: Some(nlist),
            binary: false,
        },
        ..jikji_builder::ingest::BundleSettings::default()
    }
}

pub fn ivf_root(dir: &Path) -> jikji_format::paged::ivf::IvfRoot {
    let e = jikji_engine::Engine::open_dir_paged(dir).unwrap();
    e.dense_index().unwrap().clone()
}

/// A corpus of `n` one-paragraph files, each on its own topic (a few sentences about one
/// of 12 subjects, so the chunks cluster), in one tier folder.
pub fn topic_corpus(dir: &Path, n: usize) -> PathBuf {
    const SUBJECTS: [&str; 12] = [
        "database backups and restore drills",
        "invoice payment and billing cycles",
        "password reset and account recovery",
        "network gateway timeouts and retries",
        "holiday opening hours of the support desk",
        "storage quotas for object buckets",
        "deploying containers to the cluster",
        "encryption keys and their rotation",
        "monitoring dashboards and alert rules",
        "mobile app push notifications",
        "data export to spreadsheets",
        "single sign-on with company directories",
    ];
    let corpus = dir.join("topics");
    std::fs::create_dir_all(corpus.join("1. docs")).unwrap();
    for i in 0..n {
        let s = SUBJECTS[i % SUBJECTS.len()];
        std::fs::write(
            corpus.join(format!("1. docs/note-{i:02}.md")),
            format!(
                "Source: https://docs.example.com/notes/{i}\n\n# Note {i}: {s}\n\n\
                 This note, number {i}, explains {s}. Teams ask about {s} every week; \
                 the short answer is in step {} of the guide on {s}, and the long one in \
                 the appendix of release {}.\n",
                i % 5 + 1,
                i / 3 + 1
            ),
        )
        .unwrap();
    }
    corpus
}

/// Mean recall@10 of `engine`'s dense hits against `exact`'s over `queries`.
pub fn recall_at_10(
    engine: &jikji_engine::Engine,
    exact: &jikji_engine::Engine,
    queries: &[Vec<f32>],
) -> f64 {
    let mut sum = 0.0;
    for q in queries {
        let ids = |e: &jikji_engine::Engine| -> Vec<String> {
            let r = e
                .search_with_vector("q", Some(q), jikji_engine::Mode::Dense, 10)
                .unwrap();
            r.hits.iter().map(|h| h.id.clone()).collect()
        };
        let (want, got) = (ids(exact), ids(engine));
        sum += want.iter().filter(|d| got.contains(d)).count() as f64 / want.len().max(1) as f64;
    }
    sum / queries.len() as f64
}

/// The update step of the [`topic_corpus`] tests: `note-07` edited and `note-99` added
/// (at the end of the path order), so 3 of the 41 vectors are new, changed or dropped.
pub fn edit_topic_corpus(corpus: &Path) {
    let edited = corpus.join("1. docs/note-07.md");
    let text = std::fs::read_to_string(&edited).unwrap();
    std::fs::write(&edited, text.replace("every week", "every single day")).unwrap();
    std::fs::write(
        corpus.join("1. docs/note-99.md"),
        "Source: https://docs.example.com/notes/99\n\n# Note 99: restore drills\n\n\
         This note explains database restore drills after a failed backup: teams run them \
         every month and check the restored rows against the originals.\n",
    )
    .unwrap();
}

/// One dense query per row of `v`: the sum of that row and the row 7 further on (between
/// two chunks, so the top 10 spans lists).
pub fn pair_queries(v: &jikji_format::vectors::Vectors) -> Vec<Vec<f32>> {
    (0..v.len())
        .map(|d| {
            let (a, b) = (v.get(d), v.get((d + 7) % v.len()));
            a.iter().zip(&b).map(|(x, y)| x + y).collect()
        })
        .collect()
}

/// The browser's loop natively: `engine` (opened from `bundle`'s entry,
/// `Engine::open_entry`) searches `q`; while it names pages it lacks, they are read from
/// `bundle`'s `p/` folder and added (header + raw body, as the worker adds them), at most 6
/// rounds. Returns the hits.
pub fn browser_search(
    engine: &jikji_engine::Engine,
    bundle: &Path,
    query: &str,
    q: &[f32],
    mode: jikji_engine::Mode,
) -> Vec<jikji_engine::Hit> {
    use jikji_format::paged::page;
    let mut rounds = 0;
    loop {
        match engine.search_with_vector(query, Some(q), mode, 10) {
            Ok(r) => return r.hits,
            Err(jikji_engine::EngineError::NeedPages(names)) => {
                rounds += 1;
                assert!(rounds <= 6, "too many rounds");
                for n in names {
                    let stored = std::fs::read(bundle.join("p").join(&n)).unwrap();
                    let raw = page::decode_stored(&n, &stored).unwrap();
                    let mut bytes = stored[..page::HEADER_LEN].to_vec();
                    bytes.extend_from_slice(&raw);
                    engine.add_page(&n, &bytes).unwrap();
                }
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// Every list probed and every row rescored (`nprobe` lists, ×1000), `bundle`'s dense
/// top 10 for each of `queries` equals the exact scan's (`Engine::open_dir`), natively
/// (`Engine::open_dir_paged`) and through the browser's loop ([`browser_search`]).
/// Panics naming the query's index otherwise.
pub fn assert_dense_equals_exact(bundle: &Path, nprobe: usize, queries: &[Vec<f32>]) {
    use jikji_engine::{Engine, Mode};
    let exact = Engine::open_dir(bundle).unwrap();
    let mut paged = Engine::open_dir_paged(bundle).unwrap();
    paged.set_nprobe(Some(nprobe));
    paged.set_rescore(Some(1000));
    let mut browser =
        Engine::open_entry(&std::fs::read(bundle.join("jikji.json")).unwrap()).unwrap();
    browser.set_nprobe(Some(nprobe));
    browser.set_rescore(Some(1000));
    let ids =
        |h: Vec<jikji_engine::Hit>| -> Vec<String> { h.into_iter().map(|h| h.chunk.id).collect() };
    for (i, q) in queries.iter().enumerate() {
        let want = ids(exact
            .search_with_vector("q", Some(q), Mode::Dense, 10)
            .unwrap()
            .hits);
        let got = ids(paged
            .search_with_vector("q", Some(q), Mode::Dense, 10)
            .unwrap()
            .hits);
        assert_eq!(got, want, "query {i}: the paged engine");
        let got = ids(browser_search(&browser, bundle, "q", q, Mode::Dense));
        assert_eq!(got, want, "query {i}: the browser's loop");
    }
}

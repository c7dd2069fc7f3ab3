//! Shared by `tests/agree.rs` and `examples/bench.rs`: where the model, its E5S1 source, the
//! pack and the eval sets are, and loading them. A missing file FAILS (panics with what to
//! run) unless `JIKJI_SKIP_MODEL_TESTS=1`, as in `jikji-embed`'s model tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use jikji_query_model::{QueryModel, RowTable};

/// The repo root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// `JIKJI_MODEL_DIR`, else `<repo>/models/e5-small` (model.onnx, tokenizer.json).
pub fn model_dir() -> PathBuf {
    match std::env::var_os("JIKJI_MODEL_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => repo().join("models/e5-small"),
    }
}

/// `JIKJI_SHARED`, else `<repo>/../shared` (as `scripts/test`): holds `eval/<set>/queries.jsonl`.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("JIKJI_SHARED") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => repo().join("../shared"),
    }
}

/// True when `JIKJI_SKIP_MODEL_TESTS=1`.
pub fn skip_model_tests() -> bool {
    std::env::var("JIKJI_SKIP_MODEL_TESTS").is_ok_and(|v| v == "1")
}

pub fn missing(what: &str, path: &Path, fix: &str) -> ! {
    panic!(
        "{what} not found at {} — {fix} (JIKJI_SKIP_MODEL_TESTS=1 skips the model tests)",
        path.display()
    )
}

/// The pack folder (made once per process): `JIKJI_QUERY_MODEL_DIR` if set; else a pack written now by
/// `jikji_query_model::pack::write_pack_dir` from the E5S1 source `JIKJI_E5S1` (default
/// `<model dir>/e5-small-q4.bin`, kept by scripts/setup-model) into `<target>/query-model-pack`.
/// `None` only when model tests are skipped.
pub fn pack_dir() -> Option<PathBuf> {
    static DIR: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    DIR.get_or_init(make_pack_dir).clone()
}

fn make_pack_dir() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("JIKJI_QUERY_MODEL_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    let src = std::env::var_os("JIKJI_E5S1")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| model_dir().join("e5-small-q4.bin"));
    if !src.exists() {
        if skip_model_tests() {
            eprintln!(
                "JIKJI_SKIP_MODEL_TESTS=1: skipping (no E5S1 file at {})",
                src.display()
            );
            return None;
        }
        missing(
            "the E5S1 model source",
            &src,
            "run scripts/setup-model, or set JIKJI_E5S1 to the file or JIKJI_QUERY_MODEL_DIR to a pack",
        );
    }
    let tok = model_dir().join("tokenizer.json");
    let onnx = model_dir().join("model.onnx");
    for p in [&tok, &onnx] {
        if !p.exists() {
            if skip_model_tests() {
                return None;
            }
            missing("the model", p, "run scripts/setup-model");
        }
    }
    let out = repo().join("target/query-model-pack");
    let bytes = std::fs::read(&src).unwrap();
    let tj = std::fs::read(&tok).unwrap();
    let sha = jikji_query_model::pack::sha256_hex(&std::fs::read(&onnx).unwrap());
    jikji_query_model::pack::write_pack_dir(
        &jikji_query_model::pack::PackSource {
            e5s1: &bytes,
            tokenizer_json: &tj,
            tokenizer_file: &tok.display().to_string(),
            model_id: "multilingual-e5-small-q4",
            model_sha256: &sha,
        },
        &out,
    )
    .expect("write the pack");
    Some(out)
}

/// The pack, loaded.
pub fn load_pack() -> Option<(QueryModel, RowTable)> {
    let dir = pack_dir()?;
    eprintln!("query-model pack: {}", dir.display());
    Some(QueryModel::from_pack_dir(&dir).expect("load the pack"))
}

/// The compact tokenizer of the pack, loaded.
pub fn load_tokenizer() -> Option<jikji_query_model::tokenizer::Tokenizer> {
    let p = pack_dir()?.join(jikji_query_model::tokenizer::TOKENIZER_FILE);
    let b = std::fs::read(&p).unwrap();
    Some(jikji_query_model::tokenizer::Tokenizer::from_bytes(&b, &p.display().to_string()).unwrap())
}

/// `tokenizers`' tokenizer (`jikji-embed`, tokenizer.json): the reference.
pub fn load_reference_tokenizer() -> Option<jikji_embed::EmbedTokenizer> {
    let p = model_dir().join("tokenizer.json");
    let Ok(b) = std::fs::read(&p) else {
        if skip_model_tests() {
            return None;
        }
        missing("tokenizer.json", &p, "run scripts/setup-model");
    };
    Some(jikji_embed::EmbedTokenizer::from_bytes(&b).unwrap())
}

/// tract's embedder (`jikji-embed`, model.onnx, float32 weights: the native default).
pub fn load_tract() -> Option<jikji_embed::Embedder> {
    let dir = model_dir();
    if !dir.join("model.onnx").exists() {
        if skip_model_tests() {
            return None;
        }
        missing(
            "model.onnx",
            &dir.join("model.onnx"),
            "run scripts/setup-model",
        );
    }
    Some(jikji_embed::Embedder::from_dir(&dir).expect("load model.onnx"))
}

/// The eval sets under `<shared>/eval` with a `queries.jsonl`, sorted by name.
pub fn eval_sets() -> Option<Vec<(String, Vec<String>)>> {
    let root = shared_dir().join("eval");
    let Ok(rd) = std::fs::read_dir(&root) else {
        if skip_model_tests() {
            return None;
        }
        missing(
            "the eval sets",
            &root,
            "set JIKJI_SHARED to the folder holding eval/",
        );
    };
    let mut sets = Vec::new();
    for e in rd {
        let p = e.unwrap().path().join("queries.jsonl");
        if !p.exists() {
            continue;
        }
        let name = p
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&p).unwrap();
        let qs = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["text"].as_str().expect("query text").to_string()
            })
            .collect();
        sets.push((name, qs));
    }
    sets.sort();
    assert!(
        !sets.is_empty(),
        "no eval set with queries.jsonl under {}",
        root.display()
    );
    Some(sets)
}

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

//! Shared helpers for the jikji-embed integration tests: where the model lives, the reference
//! values from `shared/notes/model.md`, and an optional `tests/reference.json`.
#![allow(dead_code)]

#[cfg(not(target_arch = "wasm32"))]
use std::path::PathBuf;
#[cfg(not(target_arch = "wasm32"))]
use std::sync::OnceLock;

use jikji_embed::Prefix;
#[cfg(not(target_arch = "wasm32"))]
use jikji_embed::{EmbedTokenizer, Embedder, Weights};

/// `JIKJI_MODEL_DIR`, else `<repo>/models/e5-small`.
#[cfg(not(target_arch = "wasm32"))]
pub fn model_dir() -> PathBuf {
    match std::env::var_os("JIKJI_MODEL_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../models/e5-small"),
    }
}

/// True when `JIKJI_SKIP_MODEL_TESTS=1`: model-dependent tests then pass without running.
#[cfg(not(target_arch = "wasm32"))]
pub fn skip_model_tests() -> bool {
    std::env::var("JIKJI_SKIP_MODEL_TESTS")
        .map(|v| v == "1")
        .unwrap_or(false)
}

#[cfg(not(target_arch = "wasm32"))]
fn missing(what: &str, path: &std::path::Path) -> ! {
    panic!(
        "{what} not found at {} — run scripts/setup-model (or set JIKJI_MODEL_DIR to the \
         directory holding model.onnx and tokenizer.json; JIKJI_SKIP_MODEL_TESTS=1 skips these tests)",
        path.display()
    )
}

/// The tokenizer: `<model dir>/tokenizer.json`, else the file named by `JIKJI_TOKENIZER`.
/// `None` only when model tests are skipped; otherwise a missing file fails the test.
#[cfg(not(target_arch = "wasm32"))]
pub fn tokenizer() -> Option<&'static EmbedTokenizer> {
    static TOK: OnceLock<Option<EmbedTokenizer>> = OnceLock::new();
    TOK.get_or_init(|| {
        let mut path = model_dir().join("tokenizer.json");
        if !path.exists() {
            if let Some(p) = std::env::var_os("JIKJI_TOKENIZER").filter(|p| !p.is_empty()) {
                path = PathBuf::from(p);
            }
        }
        if !path.exists() {
            if skip_model_tests() {
                eprintln!(
                    "JIKJI_SKIP_MODEL_TESTS=1: skipping (no tokenizer at {})",
                    path.display()
                );
                return None;
            }
            missing("tokenizer.json", &path);
        }
        eprintln!("tokenizer: {}", path.display());
        let bytes = std::fs::read(&path).unwrap();
        Some(EmbedTokenizer::from_bytes(&bytes).expect("tokenizer.json parses"))
    })
    .as_ref()
}

/// The embedder from [`model_dir`] with default (float32) weights, loaded once per test
/// binary. `None` only when model tests are skipped; otherwise a missing model fails the test
/// with a pointer to scripts/setup-model.
#[cfg(not(target_arch = "wasm32"))]
pub fn embedder() -> Option<&'static Embedder> {
    static EMB: OnceLock<Option<Embedder>> = OnceLock::new();
    EMB.get_or_init(|| load(Weights::Float32)).as_ref()
}

/// As [`embedder`], keeping the weights 4-bit (the wasm32 default).
#[cfg(not(target_arch = "wasm32"))]
pub fn embedder_4bit() -> Option<&'static Embedder> {
    static EMB: OnceLock<Option<Embedder>> = OnceLock::new();
    EMB.get_or_init(|| load(Weights::Packed4Bit)).as_ref()
}

#[cfg(not(target_arch = "wasm32"))]
fn load(weights: Weights) -> Option<Embedder> {
    let dir = model_dir();
    let onnx = dir.join("model.onnx");
    if !onnx.exists() {
        if skip_model_tests() {
            eprintln!(
                "JIKJI_SKIP_MODEL_TESTS=1: skipping (no model at {})",
                onnx.display()
            );
            return None;
        }
        missing("model.onnx", &onnx);
    }
    let t = std::time::Instant::now();
    let e = Embedder::from_dir_with(&dir, weights).expect("model loads");
    eprintln!(
        "loaded {} ({weights:?}) in {:?}",
        dir.display(),
        t.elapsed()
    );
    Some(e)
}

/// One reference row: input, its token ids, the first dims of its sentence embedding.
pub struct RefRow {
    pub text: String,
    pub prefix: Prefix,
    pub ids: Option<Vec<u32>>,
    pub head: Option<Vec<f32>>,
}

/// Cosine between rows `a` and `b` (0-based).
pub struct RefCos {
    pub a: usize,
    pub b: usize,
    pub cos: f32,
}

/// The five reference texts of shared/notes/model.md (4-bit model, onnxruntime; tract matched
/// to 2e-7).
pub fn model_md_rows() -> Vec<RefRow> {
    let rows: [(&str, Prefix, &[u32], [f32; 8]); 5] = [
        (
            "學而時習之，不亦說乎",
            Prefix::Query,
            &[
                0, 41, 1294, 12, 6, 5020, 1107, 1545, 44293, 1420, 4, 562, 13915, 2640, 37882, 2,
            ],
            [
                0.0631, -0.02508, -0.06882, -0.04706, 0.07586, -0.03437, -0.01244, 0.0552,
            ],
        ),
        (
            "배우고 때때로 익히면 또한 기쁘지 아니한가",
            Prefix::Query,
            &[
                0, 41, 1294, 12, 53050, 1077, 8978, 45182, 1083, 6, 23966, 7194, 4253, 21702, 7463,
                137750, 1190, 32028, 993, 713, 2,
            ],
            [
                0.02504, -0.02292, -0.05801, -0.04223, 0.09861, -0.05446, 0.01911, 0.01826,
            ],
        ),
        (
            "Is it not pleasant to learn with a constant perseverance and application?",
            Prefix::Query,
            &[
                0, 41, 1294, 12, 2071, 442, 959, 208331, 47, 30698, 678, 10, 53697, 217734, 3956,
                136, 38415, 32, 2,
            ],
            [
                0.02165, -0.02303, -0.01997, -0.03789, 0.05268, -0.07355, 0.0274, 0.00784,
            ],
        ),
        (
            "메밀꽃 필 무렵",
            Prefix::Passage,
            &[0, 46692, 12, 33004, 56730, 102924, 57999, 8143, 236343, 2],
            [
                0.06762, -0.01138, 0.00194, -0.07715, 0.12185, -0.0307, -0.01378, -0.01004,
            ],
        ),
        (
            "how to bake sourdough bread",
            Prefix::Query,
            &[
                0, 41, 1294, 12, 3642, 47, 122597, 221, 84093, 72089, 179967, 2,
            ],
            [
                0.0323, -0.04118, -0.03541, -0.07028, 0.10658, -0.06891, 0.05969, 0.03182,
            ],
        ),
    ];
    rows.into_iter()
        .map(|(t, p, ids, head)| RefRow {
            text: t.to_string(),
            prefix: p,
            ids: Some(ids.to_vec()),
            head: Some(head.to_vec()),
        })
        .collect()
}

/// Cosines of model.md, 0-based row indexes.
pub fn model_md_cosines() -> Vec<RefCos> {
    [
        (1, 2, 0.8937),
        (1, 3, 0.8387),
        (2, 3, 0.8547),
        (1, 5, 0.7456),
        (3, 5, 0.7719),
    ]
    .into_iter()
    .map(|(a, b, cos)| RefCos {
        a: a - 1,
        b: b - 1,
        cos,
    })
    .collect()
}

/// `tests/reference.json`, if present (written by `scripts/check_model.py` from onnxruntime):
///
/// ```json
/// {"model": "...", "source": "...", "tolerance": 0.001,
///  "texts": [{"text": "query: ...", "ids": [0, ...], "first8": [0.0631, ...]}, ...],
///  "cosines": [[0, 1, 0.893725], ...]}
/// ```
///
/// Read tolerantly: rows may also be a top-level array or sit under `rows`/`entries`/`items`;
/// the prefix is taken from the text (`query: `/`passage: `) or a `prefix` member; dims may be
/// under `head`/`embedding`/`vector` (first 8 used); cosines may be `[i, j, cos]` triples
/// (0-based row indexes, as the script writes them) or an object keyed `"1,2"` (1-based, as in
/// model.md). Returns `None` if the file is absent; panics if it is present but holds nothing
/// recognisable, so a format change cannot silently disable the check.
#[cfg(not(target_arch = "wasm32"))]
pub fn reference_json() -> Option<(Vec<RefRow>, Vec<RefCos>)> {
    use serde_json::Value;
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/reference.json");
    let text = std::fs::read_to_string(&path).ok()?;
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));

    fn pick<'a>(o: &'a Value, keys: &[&str]) -> Option<&'a Value> {
        keys.iter().find_map(|k| o.get(*k))
    }
    let rows_v = if v.is_array() {
        Some(&v)
    } else {
        pick(&v, &["texts", "rows", "entries", "items"])
    };
    let mut rows = Vec::new();
    for r in rows_v.and_then(Value::as_array).into_iter().flatten() {
        let Some(raw) = pick(r, &["text", "input"]).and_then(Value::as_str) else {
            continue;
        };
        let (prefix, text) = if let Some(t) = raw.strip_prefix("query: ") {
            (Prefix::Query, t)
        } else if let Some(t) = raw.strip_prefix("passage: ") {
            (Prefix::Passage, t)
        } else {
            let p = match r.get("prefix").and_then(Value::as_str) {
                Some(p) if p.trim_end().trim_end_matches(':') == "passage" => Prefix::Passage,
                _ => Prefix::Query,
            };
            (p, raw)
        };
        let ids = pick(r, &["ids", "token_ids", "input_ids"])
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .map(|x| x.as_u64().expect("integer id") as u32)
                    .collect::<Vec<u32>>()
            });
        let head = pick(
            r,
            &[
                "first8",
                "first_8",
                "head",
                "first_dims",
                "embedding",
                "sentence_embedding",
                "vector",
            ],
        )
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .take(8)
                .map(|x| x.as_f64().expect("number") as f32)
                .collect::<Vec<_>>()
        });
        rows.push(RefRow {
            text: text.to_string(),
            prefix,
            ids,
            head,
        });
    }

    let mut cos = Vec::new();
    if let Some(c) = pick(&v, &["cosines", "cosine"]) {
        if let Some(o) = c.as_object() {
            for (k, val) in o {
                let nums: Vec<usize> = k
                    .split(|ch: char| !ch.is_ascii_digit())
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().unwrap())
                    .collect();
                if let ([a, b], Some(x)) = (nums.as_slice(), val.as_f64()) {
                    cos.push(RefCos {
                        a: a - 1,
                        b: b - 1,
                        cos: x as f32,
                    });
                }
            }
        } else {
            for e in c.as_array().into_iter().flatten() {
                if let Some([a, b, x]) = e.as_array().map(Vec::as_slice) {
                    cos.push(RefCos {
                        a: a.as_u64().expect("row index") as usize,
                        b: b.as_u64().expect("row index") as usize,
                        cos: x.as_f64().expect("cosine") as f32,
                    });
                }
            }
        }
    }

    assert!(
        rows.iter().any(|r| r.ids.is_some() || r.head.is_some()) || !cos.is_empty(),
        "{} exists but no reference rows or cosines could be read from it; update \
         embed/tests/common/mod.rs::reference_json for its format",
        path.display()
    );
    Some((rows, cos))
}

pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

pub fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// A long, varied English text of `words` words.
pub fn long_text(words: usize) -> String {
    let vocab = [
        "the",
        "river",
        "ran",
        "quietly",
        "past",
        "old",
        "stone",
        "houses",
        "where",
        "scholars",
        "once",
        "read",
        "classics",
        "by",
        "lamplight",
        "and",
        "argued",
        "about",
        "virtue",
    ];
    (0..words)
        .map(|i| vocab[(i * 7 + i / 3) % vocab.len()])
        .collect::<Vec<_>>()
        .join(" ")
}

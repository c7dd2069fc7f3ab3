//! The lean forward pass gives the full model's vectors: against tract running
//! `models/e5-small/model.onnx` (`jikji-embed`), cosine ≥ 0.999 and max abs diff ≤ 1e-3 on the
//! reference texts of shared/notes/model.md and on the first 25 queries of every eval set
//! (`examples/bench.rs` runs every query of every set). Needs the model and the eval sets:
//! missing ones FAIL unless `JIKJI_SKIP_MODEL_TESTS=1` (see `tests/common`).

#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::*;
use jikji_embed::Prefix;

/// `shared/notes/model.md`: text, token ids, first 8 dims of the 4-bit model's embedding
/// (onnxruntime).
const REFERENCE: &[(&str, &[u32], [f32; 8])] = &[
    (
        "學而時習之，不亦說乎",
        &[
            0, 41, 1294, 12, 6, 5020, 1107, 1545, 44293, 1420, 4, 562, 13915, 2640, 37882, 2,
        ],
        [
            0.0631, -0.02508, -0.06882, -0.04706, 0.07586, -0.03437, -0.01244, 0.0552,
        ],
    ),
    (
        "how to bake sourdough bread",
        &[
            0, 41, 1294, 12, 3642, 47, 122597, 221, 84093, 72089, 179967, 2,
        ],
        [
            0.0323, -0.04118, -0.03541, -0.07028, 0.10658, -0.06891, 0.05969, 0.03182,
        ],
    ),
];

#[test]
fn pack_matches_model_md_reference_values() {
    let Some((m, rows)) = load_pack() else { return };
    for (text, ids, head) in REFERENCE {
        let v = m.embed_ids(ids, &rows).unwrap();
        assert_eq!(v.len(), 384);
        assert!((dot(&v, &v) - 1.0).abs() < 1e-5);
        let d = max_abs_diff(&v[..8], head);
        eprintln!("{text:?}: first 8 dims max diff {d:.2e}");
        // The reference values are printed with 4-5 significant digits.
        assert!(d < 6e-5, "{text:?}: first dims {:?} vs {head:?}", &v[..8]);
    }
}

#[test]
fn pack_agrees_with_tract_on_eval_queries() {
    let Some((m, rows)) = load_pack() else { return };
    let Some(tract) = load_tract() else { return };
    let Some(sets) = eval_sets() else { return };
    let tok = tract.tokenizer();
    let (mut worst_cos, mut worst_diff, mut n) = (1.0f32, 0.0f32, 0);
    for (name, queries) in &sets {
        for q in queries.iter().take(25) {
            let ids = tok.token_ids(q, Prefix::Query).unwrap();
            let want = tract.embed_query(q).unwrap();
            let got = m.embed_ids(&ids, &rows).unwrap();
            let cos = dot(&want, &got);
            let diff = max_abs_diff(&want, &got);
            assert!(
                cos >= 0.999 && diff <= 1e-3,
                "{name}: {q:?}: cosine {cos}, max abs diff {diff}"
            );
            worst_cos = worst_cos.min(cos);
            worst_diff = worst_diff.max(diff);
            n += 1;
        }
    }
    eprintln!(
        "{n} queries of {} sets: min cosine {worst_cos:.7}, max abs diff {worst_diff:.2e}",
        sets.len()
    );
}

#[test]
fn bad_token_ids_and_lengths_are_errors() {
    let Some((m, rows)) = load_pack() else { return };
    let e = m
        .embed_ids(&[0, 250_002, 2], &rows)
        .unwrap_err()
        .to_string();
    assert!(e.contains("token id 250002 at position 1"), "{e}");
    assert!(m
        .embed_ids(&[], &rows)
        .unwrap_err()
        .to_string()
        .contains("0 tokens"));
    let long = vec![5u32; 513];
    assert!(m
        .embed_ids(&long, &rows)
        .unwrap_err()
        .to_string()
        .contains("513 tokens"));
    // The longest input runs.
    let mut max = vec![6u32; 512];
    max[0] = 0;
    max[511] = 2;
    assert_eq!(m.embed_ids(&max, &rows).unwrap().len(), 384);
}

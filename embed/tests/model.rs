//! Tests that run the ONNX model (`models/e5-small`, made by scripts/setup-model; override
//! with `JIKJI_MODEL_DIR`). A missing model FAILS these tests unless `JIKJI_SKIP_MODEL_TESTS=1`.

mod common;

use std::sync::Mutex;

use common::*;
use jikji_embed::{Prefix, DIM, MAX_TOKENS};

#[test]
fn reference_embeddings_and_cosines() {
    let Some(e) = embedder() else { return };
    check_reference(e);
}

/// The 4-bit graph as tract runs it in the browser: same references, and the same vectors as
/// the float32-dequantized graph to 1e-5.
#[test]
fn packed_4bit_weights_match_reference_and_float32() {
    let Some(e4) = embedder_4bit() else { return };
    check_reference(e4);
    let e32 = embedder().unwrap();
    let texts = [
        "學而時習之，不亦說乎",
        "how to bake sourdough bread",
        &long_text(120),
    ];
    let a = e4.embed(&texts, Prefix::Query).unwrap();
    let b = e32.embed(&texts, Prefix::Query).unwrap();
    for (x, y) in a.vectors.iter().zip(&b.vectors) {
        let d = max_abs_diff(x, y);
        eprintln!("4-bit vs float32: max diff {d:.2e}");
        assert!(d <= 1e-5, "4-bit and float32 weights differ by {d}");
    }
}

fn check_reference(e: &jikji_embed::Embedder) {
    let mut sets = vec![("shared/notes/model.md", model_md_rows(), model_md_cosines())];
    if let Some((rows, cos)) = reference_json() {
        // Cosine indexes in reference.json refer to its own rows if it has any.
        let rows = if rows.is_empty() {
            model_md_rows()
        } else {
            rows
        };
        sets.push(("embed/tests/reference.json", rows, cos));
    }
    for (source, rows, cosines) in sets {
        let mut vecs = Vec::new();
        for r in &rows {
            let out = e.embed(&[&r.text], r.prefix).unwrap();
            let v = out.vectors.into_iter().next().unwrap();
            assert_eq!(v.len(), DIM);
            let norm = dot(&v, &v).sqrt();
            assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
            if let Some(head) = &r.head {
                let d = max_abs_diff(&v[..head.len()], head);
                eprintln!("[{source}] {:?}: first dims max diff {d:.2e}", r.text);
                assert!(
                    d <= 1e-3,
                    "[{source}] {:?}: first dims {:?}, expected {:?}",
                    r.text,
                    &v[..head.len()],
                    head
                );
            }
            vecs.push(v);
        }
        for c in &cosines {
            let got = dot(&vecs[c.a], &vecs[c.b]);
            eprintln!(
                "[{source}] cos({},{}) = {got:.4} (ref {:.4})",
                c.a + 1,
                c.b + 1,
                c.cos
            );
            assert!(
                (got - c.cos).abs() <= 1e-3,
                "[{source}] cos(rows {},{}) = {got}, expected {}",
                c.a + 1,
                c.b + 1,
                c.cos
            );
        }
    }
}

#[test]
fn embed_query_is_embed_with_query_prefix() {
    let Some(e) = embedder() else { return };
    let q = e.embed_query("how to bake sourdough bread").unwrap();
    let b = e
        .embed(&["how to bake sourdough bread"], Prefix::Query)
        .unwrap();
    assert_eq!(q, b.vectors[0]);
    assert_eq!(b.tokens, vec![12]);
    assert_eq!(b.truncated, vec![false]);
    let p = e
        .embed(&["how to bake sourdough bread"], Prefix::Passage)
        .unwrap();
    assert!(
        max_abs_diff(&q, &p.vectors[0]) > 1e-3,
        "the prefix must matter"
    );
}

#[test]
fn batch_invariance() {
    let Some(e) = embedder() else { return };
    let short = "메밀꽃 필 무렵";
    let alone = e.embed(&[short], Prefix::Passage).unwrap();
    let longer1 = long_text(60);
    let longer2 = "學而時習之，不亦說乎？有朋自遠方來，不亦樂乎？人不知而不慍，不亦君子乎？";
    let batch = e
        .embed(&[&longer1, short, longer2], Prefix::Passage)
        .unwrap();
    assert_eq!(batch.len(), 3);
    assert!(batch.tokens[0] > batch.tokens[1] && batch.tokens[2] > batch.tokens[1]);
    let d = max_abs_diff(&alone.vectors[0], &batch.vectors[1]);
    eprintln!("padded vs alone: max diff {d:.2e}");
    assert!(d <= 1e-4, "padding changed the vector by {d}");
    assert_eq!(alone.tokens[0], batch.tokens[1]);
    // The longer texts too, against their own single runs.
    let l2 = e.embed(&[longer2], Prefix::Passage).unwrap();
    assert!(max_abs_diff(&l2.vectors[0], &batch.vectors[2]) <= 1e-4);
}

#[test]
fn truncation_of_a_3000_word_text() {
    let Some(e) = embedder() else { return };
    let text = long_text(3000);
    assert!(e.count_tokens(&text, Prefix::Passage).unwrap() > MAX_TOKENS);
    let out = e.embed(&[&text, "short"], Prefix::Passage).unwrap();
    assert_eq!(out.tokens, vec![MAX_TOKENS, 5]);
    assert_eq!(out.truncated, vec![true, false]);
    let n = dot(&out.vectors[0], &out.vectors[0]).sqrt();
    assert!((n - 1.0).abs() < 1e-4 && out.vectors[0].iter().all(|x| x.is_finite()));
}

#[test]
fn embed_many_matches_embed_in_input_order() {
    let Some(e) = embedder() else { return };
    let owned: Vec<String> = (0..21)
        .map(|i| match i % 4 {
            0 => long_text(5 + i * 9),
            1 => format!("question {i}: 學而時習之"),
            2 => "배우고 때때로 익히면 또한 기쁘지 아니한가".repeat(1 + i % 3),
            _ => format!("{i}"),
        })
        .collect();
    let texts: Vec<&str> = owned.iter().map(String::as_str).collect();
    for threads in [1, 2, 3] {
        let seen = Mutex::new(Vec::new());
        let out = e
            .embed_many(&texts, Prefix::Passage, threads, &|n| {
                seen.lock().unwrap().push(n)
            })
            .unwrap();
        assert_eq!(out.len(), texts.len());
        let seen = seen.into_inner().unwrap();
        assert!(
            seen.windows(2).all(|w| w[0] < w[1]),
            "progress not increasing: {seen:?}"
        );
        assert_eq!(seen.last(), Some(&texts.len()));
        for (i, t) in texts.iter().enumerate() {
            let one = e.embed(&[t], Prefix::Passage).unwrap();
            assert_eq!(out.tokens[i], one.tokens[0], "tokens of text {i}");
            assert_eq!(out.truncated[i], one.truncated[0]);
            let d = max_abs_diff(&out.vectors[i], &one.vectors[0]);
            assert!(d <= 1e-4, "text {i} ({threads} threads): diff {d}");
        }
    }
    let empty = e
        .embed_many(&[], Prefix::Query, 2, &|_| panic!("no progress"))
        .unwrap();
    assert!(empty.is_empty());
    assert!(e.embed(&[], Prefix::Query).unwrap().is_empty());
}

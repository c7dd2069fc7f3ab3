//! Tokenizer ids must match the reference ids of shared/notes/model.md exactly (Python
//! `tokenizers` produced them), natively here and — same crate, same features — in wasm32.
//! Needs only tokenizer.json: `<model dir>/tokenizer.json`, or the file named by
//! `JIKJI_TOKENIZER` while the model is not set up yet.

mod common;

use common::*;
use jikji_embed::{Prefix, MAX_TOKENS};

#[test]
fn reference_token_ids() {
    let Some(tok) = tokenizer() else { return };
    let mut rows = model_md_rows();
    if let Some((json_rows, _)) = reference_json() {
        rows.extend(json_rows.into_iter().filter(|r| r.ids.is_some()));
    }
    for r in &rows {
        let want = r.ids.as_ref().unwrap();
        let got = tok.token_ids(&r.text, r.prefix).unwrap();
        assert_eq!(&got, want, "ids of {:?} {:?}", r.prefix, r.text);
        assert_eq!(tok.count_tokens(&r.text, r.prefix).unwrap(), want.len());
    }
}

#[test]
fn prefixes() {
    let Some(tok) = tokenizer() else { return };
    assert_eq!(Prefix::Query.as_str(), "query: ");
    assert_eq!(Prefix::Passage.as_str(), "passage: ");
    // "query: x" and "passage: x" differ only in the prefix pieces.
    let q = tok.token_ids("x", Prefix::Query).unwrap();
    let p = tok.token_ids("x", Prefix::Passage).unwrap();
    assert_eq!(&q[..4], &[0, 41, 1294, 12]);
    assert_eq!(&p[..3], &[0, 46692, 12]);
    assert_eq!(q[4..], p[3..]);
    assert_eq!(tok.pad_id(), 1);
}

#[test]
fn no_padding_or_truncation_from_tokenizer_json() {
    let Some(tok) = tokenizer() else { return };
    // A short text is not padded (some tokenizer.json files pad to 128). The trailing space of
    // "query: " becomes a lone "▁" (6), as in Python `tokenizers`.
    assert_eq!(
        tok.token_ids("", Prefix::Query).unwrap(),
        vec![0, 41, 1294, 12, 6, 2]
    );
    assert_eq!(tok.count_tokens("", Prefix::Query).unwrap(), 6);
    // Runs of spaces collapse (the Replace normalizer, a regex: fancy-regex here).
    assert_eq!(
        tok.token_ids("how  to   bake sourdough bread", Prefix::Query)
            .unwrap(),
        tok.token_ids("how to bake sourdough bread", Prefix::Query)
            .unwrap()
    );
}

#[test]
fn long_text_is_truncated_to_512_with_eos_last() {
    let Some(tok) = tokenizer() else { return };
    let text = long_text(3000);
    let n = tok.count_tokens(&text, Prefix::Passage).unwrap();
    assert!(
        n > MAX_TOKENS,
        "3000 words should exceed 512 tokens, got {n}"
    );
    let ids = tok.token_ids(&text, Prefix::Passage).unwrap();
    assert_eq!(ids.len(), MAX_TOKENS);
    assert_eq!(ids[0], 0);
    assert_eq!(ids[MAX_TOKENS - 1], 2);
    assert!(!ids[1..MAX_TOKENS - 1].contains(&2));
    // The kept part is the untruncated prefix.
    let full_short = tok.token_ids(&long_text(200), Prefix::Passage).unwrap();
    assert_eq!(
        ids[..full_short.len() - 1],
        full_short[..full_short.len() - 1]
    );
}

/// `tests/fixtures/tokenizer_parity.json`: 109 texts (lines of the public-domain classics in
/// shared/books, plus Unicode edge cases: NFKC forms, emoji ZWJ sequences, control chars,
/// full-width and ideographic spaces, archaic Hangul jamo, CJK ext. B, literal `<s>`), with the
/// ids Python `tokenizers` 0.23.3 gives for `prefix + ": " + text` (no padding/truncation).
#[test]
fn parity_with_python_tokenizers() {
    let Some(tok) = tokenizer() else { return };
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/tokenizer_parity.json"
    );
    let rows: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let rows = rows.as_array().unwrap();
    assert!(rows.len() > 100);
    for r in rows {
        let text = r["text"].as_str().unwrap();
        let prefix = match r["prefix"].as_str().unwrap() {
            "query" => Prefix::Query,
            "passage" => Prefix::Passage,
            p => panic!("bad prefix {p}"),
        };
        let want: Vec<u32> = r["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        assert!(
            want.len() <= MAX_TOKENS,
            "fixture rows stay under the truncation limit"
        );
        assert_eq!(
            tok.token_ids(text, prefix).unwrap(),
            want,
            "{prefix:?} {text:?}"
        );
        assert_eq!(tok.count_tokens(text, prefix).unwrap(), want.len());
    }
}

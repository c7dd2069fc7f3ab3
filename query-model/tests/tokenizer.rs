//! The compact tokenizer (`jikji_query_model::tokenizer`, from the pack's `tokenizer.bin`)
//! gives exactly the ids of `tokenizers` with the model's `tokenizer.json`
//! (`jikji_embed::EmbedTokenizer`): on every query of every eval set, on texts chosen for the
//! normaliser's and Viterbi's corner cases, and on random strings (proptest) over scripts,
//! whitespace, emoji, combining marks and the added tokens. Needs the model files and eval
//! sets: missing ones FAIL unless `JIKJI_SKIP_MODEL_TESTS=1` (see `tests/common`).

#![cfg(not(target_arch = "wasm32"))]

mod common;

use common::*;
use jikji_embed::Prefix;
use proptest::prelude::*;

#[test]
fn compact_tokenizer_equals_tokenizers_on_every_eval_query() {
    let Some(tok) = load_tokenizer() else { return };
    let Some(reference) = load_reference_tokenizer() else {
        return;
    };
    let Some(sets) = eval_sets() else { return };
    let (mut n, mut bad) = (0usize, Vec::new());
    for (name, queries) in &sets {
        for q in queries {
            let want = reference.token_ids(q, Prefix::Query).unwrap();
            let got = tok.query_ids(q);
            if want != got {
                bad.push(format!(
                    "{name}: {q:?}\n  tokenizers {want:?}\n  compact    {got:?}"
                ));
            }
            n += 1;
        }
    }
    eprintln!("{n} queries of {} sets: {} differ", sets.len(), bad.len());
    assert!(
        bad.is_empty(),
        "{} of {n} queries differ:\n{}",
        bad.len(),
        bad.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
    );
}

/// Texts for each rule the tokenizer reproduces.
const CORNER_CASES: &[&str] = &[
    "",
    " ",
    "   leading and  double   spaces  ",
    "tab\tnew\nline\r\nform\u{c}feed",
    "ＦＵＬＬ ｗｉｄｔｈ ＡＢＣ １２３", // NFKC-ish rules
    "e\u{301}te\u{301} cafe\u{301}",     // decomposed accents: grapheme rules
    "Ａ\u{301}",                         // a rule key that is a prefix of the grapheme
    "ﬁﬂ ﬃ ㍿ ㎏ ½ ⅷ",                    // multi-char replacements
    "\u{200b}zero\u{200d}width\u{feff}", // removed chars
    "a\u{0}b",                           // NUL
    "<s>x</s><pad><unk><mask>",          // added tokens in the text
    "<s<s>>",                            // leftmost-longest
    "＜ｓ＞ and ＜ｍａｓｋ＞",           // normalised to an added token's text
    "▁already▁metaspace ▁ ▁▁",
    "👍🏽 👨‍👩‍👧‍👦 🇰🇷 ❤️",
    "學而時習之，不亦說乎",
    "한국어 문장과 漢字語 混用",
    "ﾊﾝｶｸｶﾀｶﾅ ｶﾞｷﾞ",
    "𠀀𠀁 𪚥 unknown-ish \u{e000}\u{10ffff}",
    "\u{1100}\u{1161}\u{11a8} 가각",
    "x",
];

#[test]
fn compact_tokenizer_equals_tokenizers_on_corner_cases() {
    let Some(tok) = load_tokenizer() else { return };
    let Some(reference) = load_reference_tokenizer() else {
        return;
    };
    let long = "the quick brown fox jumps over the lazy dog ".repeat(60);
    for t in CORNER_CASES.iter().copied().chain([long.as_str()]) {
        assert_eq!(
            tok.query_ids(t),
            reference.token_ids(t, Prefix::Query).unwrap(),
            "{t:?}"
        );
    }
}

/// Chars drawn from the ranges where the rules live.
fn text_strategy() -> impl Strategy<Value = String> {
    let ch = prop_oneof![
        3 => proptest::char::range('a', 'z'),
        1 => proptest::char::range('A', 'Z'),
        1 => prop::sample::select(vec![' ', ' ', '\t', '\n', '\u{3000}', '\u{a0}', '▁', '<', '>', '/', '\u{0}']),
        2 => proptest::char::range('\u{4e00}', '\u{9fff}'),   // CJK
        2 => proptest::char::range('\u{ac00}', '\u{d7a3}'),   // Hangul syllables
        1 => proptest::char::range('\u{1100}', '\u{11ff}'),   // Hangul jamo
        1 => proptest::char::range('\u{300}', '\u{36f}'),     // combining marks
        1 => proptest::char::range('\u{ff00}', '\u{ffef}'),   // full/half width
        1 => proptest::char::range('\u{1f300}', '\u{1faff}'), // emoji
        1 => prop::sample::select(vec!['\u{200d}', '\u{fe0f}', '\u{1f3fd}', '\u{20e3}']),
        1 => proptest::char::range('\u{2000}', '\u{33ff}'),   // punctuation, letterlike, CJK compat
        1 => proptest::char::any(),
    ];
    let piece = prop_oneof![
        8 => ch.prop_map(|c| c.to_string()),
        1 => prop::sample::select(vec!["<s>", "</s>", "<pad>", "<unk>", "<mask>", "  ", "ﬁ", "e\u{301}"])
            .prop_map(str::to_string),
    ];
    prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]
    #[test]
    fn compact_tokenizer_equals_tokenizers_on_random_strings(t in text_strategy()) {
        let (Some(tok), Some(reference)) = (tokenizer(), reference()) else { return Ok(()) };
        prop_assert_eq!(tok.query_ids(&t), reference.token_ids(&t, Prefix::Query).unwrap(), "{:?}", t);
    }
}

fn tokenizer() -> Option<&'static jikji_query_model::tokenizer::Tokenizer> {
    static T: std::sync::OnceLock<Option<jikji_query_model::tokenizer::Tokenizer>> =
        std::sync::OnceLock::new();
    T.get_or_init(load_tokenizer).as_ref()
}

fn reference() -> Option<&'static jikji_embed::EmbedTokenizer> {
    static T: std::sync::OnceLock<Option<jikji_embed::EmbedTokenizer>> = std::sync::OnceLock::new();
    T.get_or_init(load_reference_tokenizer).as_ref()
}

/// `tokenizer.bin` bytes are untrusted: every cut of the header and the rule table, cuts
/// through the pieces, ids and scores, and flipped bytes give a named error (or, for a flip
/// that keeps the file valid, a tokenizer that still encodes), never a panic.
#[test]
fn truncated_or_corrupt_tokenizer_bin_is_a_named_error() {
    let Some(dir) = pack_dir() else { return };
    let p = dir.join(jikji_query_model::tokenizer::TOKENIZER_FILE);
    let b = std::fs::read(&p).unwrap();
    let cuts = (0..4096).chain((4096..b.len()).step_by(104_729));
    for k in cuts {
        let e = jikji_query_model::tokenizer::Tokenizer::from_bytes(&b[..k], "tok.bin")
            .expect_err("a cut file must not load")
            .to_string();
        assert!(e.starts_with("tok.bin, byte "), "cut at {k}: {e}");
    }
    let mut c = b.clone();
    for at in (0..b.len()).step_by(65_537).chain([8, 12, 20, 28, 40]) {
        c[at] ^= 0x5a;
        if let Ok(t) = jikji_query_model::tokenizer::Tokenizer::from_bytes(&c, "tok.bin") {
            t.query_ids("flipped byte 한국어 漢字 <s>");
        }
        c[at] = b[at];
    }
}

/// A `tokenizer.json` of another shape (here: a Lowercase normaliser added, byte fallback
/// on) is refused with an error naming the file and what differs.
#[test]
fn unsupported_tokenizer_json_is_refused_by_name() {
    let p = model_dir().join("tokenizer.json");
    let Ok(b) = std::fs::read(&p) else {
        assert!(skip_model_tests(), "no {}", p.display());
        return;
    };
    let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
    let mut lower = v.clone();
    lower["normalizer"]["normalizers"]
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"type": "Lowercase"}));
    let mut bytes = v.clone();
    bytes["model"]["byte_fallback"] = serde_json::Value::Bool(true);
    for (bad, what) in [(lower, "normalizer"), (bytes, "byte_fallback")] {
        let e = jikji_query_model::tokenizer::compact_tokenizer_json(
            &serde_json::to_vec(&bad).unwrap(),
            "my/tokenizer.json",
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("my/tokenizer.json: ") && e.contains(what),
            "{e}"
        );
    }
    let e = jikji_query_model::tokenizer::compact_tokenizer_json(b"{", "t.json")
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("t.json: not JSON"), "{e}");
}

proptest! {
    /// Hostile charsmaps: errors, never a panic or a hang.
    #[test]
    fn hostile_charsmaps_do_not_panic(head in 0u32..4096, body in prop::collection::vec(any::<u8>(), 0..4096)) {
        let mut m = head.to_le_bytes().to_vec();
        m.extend(body);
        let _ = jikji_query_model::tokenizer::charsmap_rules(&m);
    }
}

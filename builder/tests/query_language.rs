//! How well the language detector (`jikji_engine::centring::detect_lang`, which picks the
//! query's centring offset) does on short queries: the first 1–5 words of every query of
//! each eval set (a "word" of Chinese text, which has no spaces, is 2 characters). A
//! measurement for README's "Dense centring" table, run with
//! `cargo test --release -p jikji-builder --test query_language -- --ignored --nocapture`.

mod common;

use jikji_engine::centring::detect_lang;

/// The first `n` words of `q`: whitespace-separated words, or for text without spaces
/// (Chinese), its first `2n` characters.
fn first_words(q: &str, n: usize) -> String {
    let words: Vec<&str> = q.split_whitespace().collect();
    if words.len() > 1 {
        words[..n.min(words.len())].join(" ")
    } else {
        q.chars().take(2 * n).collect()
    }
}

#[test]
#[ignore = "measurement over ../shared/eval; run with --ignored --nocapture"]
fn query_language_detector_on_short_queries() {
    let eval = common::shared_books().parent().unwrap().join("eval");
    let sets = [
        ("xquad-en", "en"),
        ("scifact", "en"),
        ("xquad-zh", "zh"),
        ("cmrc2018-dev", "zh"),
        ("classical-zh-dev", "zh"),
        ("korquad-dev", "ko"),
    ];
    println!("| set (expected) | queries | 1 word | 2 | 3 | 4 | 5 | whole query | other answers (whole) |");
    println!("|---|---|---|---|---|---|---|---|---|");
    for (set, want) in sets {
        let path = eval.join(set).join("queries.jsonl");
        let Ok(text) = std::fs::read_to_string(&path) else {
            panic!("{}: missing (../shared/eval)", path.display());
        };
        let queries: Vec<String> = text
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["text"].as_str().unwrap().to_string()
            })
            .collect();
        let mut cells = Vec::new();
        for n in 1..=5 {
            let ok = queries
                .iter()
                .filter(|q| detect_lang(&first_words(q, n)) == want)
                .count();
            cells.push(format!("{:.1}%", 100.0 * ok as f64 / queries.len() as f64));
        }
        let mut other = std::collections::BTreeMap::new();
        let mut ok = 0;
        for q in &queries {
            let l = detect_lang(q);
            if l == want {
                ok += 1;
            } else {
                *other.entry(l).or_insert(0) += 1;
            }
        }
        println!(
            "| {set} ({want}) | {} | {} | {:.1}% | {other:?} |",
            queries.len(),
            cells.join(" | "),
            100.0 * ok as f64 / queries.len() as f64
        );
    }
    // The labelled Korean set and the issue's own examples.
    for (q, want) in [
        ("배우고 때때로 익히면 기쁘지 아니한가", "ko"),
        ("學而時習之", "zh"),
        ("學而", "zh"),
        ("to be", "en"),
        ("메밀꽃", "ko"),
        ("論語 배우고", "ko"),
    ] {
        assert_eq!(detect_lang(q), want, "{q}");
    }
}

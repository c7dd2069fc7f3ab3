//! The text analyzer: one function, used unchanged at build time (builder) and at
//! query time (engine, natively and in wasm), so that both sides produce the same terms.
//!
//! Rules (analyzer version [`ANALYZER_VERSION`]):
//! 1. Unicode NFKC normalisation (folds full-width forms: `ＡＢＣ` = `ABC`), then lowercase.
//! 2. Latin/other alphabetic words and numbers: maximal runs of alphanumeric characters
//!    outside the CJK and Hangul blocks form one term each.
//! 3. Han and kana runs (Chinese, Japanese): overlapping character bigrams; a run of one
//!    character is a unigram. This is the standard CJK bigram indexing of Lucene's
//!    `CJKBigramFilter`.
//! 4. Hangul runs: character bigrams as for Han, and the whole run (the space-separated
//!    Korean word, e.g. `메밀꽃`) kept as one term as well when it is longer than two
//!    characters.
//!
//! Everything else (punctuation, spaces, symbols) separates terms.

use unicode_normalization::UnicodeNormalization;

/// Version of the analyzer rules; stored in the manifest. A bundle built with another
/// analyzer version is refused, because its terms would not match the queries' terms.
pub const ANALYZER_VERSION: u32 = 1;

/// Writing system of one character, as used by the analyzer and by language detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Script {
    /// Hangul syllables and jamo (Korean).
    Hangul,
    /// Han ideographs (CJK Unified Ideographs incl. extensions and compatibility forms).
    Han,
    /// Hiragana and katakana (Japanese).
    Kana,
    /// Any other letter or digit (Latin, Cyrillic, Greek, digits...).
    Alnum,
    /// Not part of any term: spaces, punctuation, symbols.
    Other,
}

/// Classifies one character. Ranges from the Unicode block chart (Unicode 15).
pub fn script_of(c: char) -> Script {
    let u = c as u32;
    match u {
        0xAC00..=0xD7AF | 0x1100..=0x11FF | 0x3130..=0x318F | 0xA960..=0xA97F | 0xD7B0..=0xD7FF => {
            Script::Hangul
        }
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2FFFF
        | 0xF900..=0xFAFF
        | 0x3005
        | 0x3007 => Script::Han,
        0x3040..=0x309F | 0x30A0..=0x30FF | 0x31F0..=0x31FF | 0xFF66..=0xFF9F => Script::Kana,
        _ if c.is_alphanumeric() => Script::Alnum,
        _ => Script::Other,
    }
}

/// Normalises text the way the analyzer sees it: NFKC, then lowercase.
pub fn normalize(text: &str) -> String {
    text.nfkc().collect::<String>().to_lowercase()
}

/// Splits `text` into index terms (see the module doc for the rules).
///
/// Returns terms in text order, with repetitions (term frequency is their count).
/// Never fails; empty or punctuation-only text gives an empty vector.
pub fn analyze(text: &str) -> Vec<String> {
    let norm = normalize(text);
    let mut out = Vec::new();
    let mut run: Vec<char> = Vec::new();
    let mut run_script = Script::Other;
    for c in norm.chars() {
        let mut s = script_of(c);
        if s == Script::Kana {
            s = Script::Han; // Japanese: kana and kanji runs are bigrammed together.
        }
        if s != run_script && !run.is_empty() {
            flush(&run, run_script, &mut out);
            run.clear();
        }
        run_script = s;
        if s != Script::Other {
            run.push(c);
        }
    }
    if !run.is_empty() {
        flush(&run, run_script, &mut out);
    }
    out
}

fn flush(run: &[char], script: Script, out: &mut Vec<String>) {
    match script {
        Script::Other => {}
        Script::Alnum => out.push(run.iter().collect()),
        Script::Han | Script::Kana | Script::Hangul => {
            if run.len() == 1 {
                out.push(run[0].to_string());
            } else {
                for w in run.windows(2) {
                    out.push(w.iter().collect());
                }
                if script == Script::Hangul && run.len() > 2 {
                    out.push(run.iter().collect());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin_words_lowercased_and_width_folded() {
        assert_eq!(
            analyze("To be, or NOT ＡＢＣ 42!"),
            ["to", "be", "or", "not", "abc", "42"]
        );
    }

    #[test]
    fn han_runs_become_bigrams_and_lone_unigrams() {
        assert_eq!(
            analyze("學而時習之，乎"),
            ["學而", "而時", "時習", "習之", "乎"]
        );
    }

    #[test]
    fn hangul_bigrams_plus_whole_word() {
        assert_eq!(
            analyze("메밀꽃 필 무렵"),
            ["메밀", "밀꽃", "메밀꽃", "필", "무렵"]
        );
    }

    #[test]
    fn mixed_scripts_split_at_script_changes() {
        assert_eq!(analyze("BTS의 노래"), ["bts", "의", "노래"]);
        assert_eq!(analyze("学校に行く"), ["学校", "校に", "に行", "行く"]);
    }

    #[test]
    fn punctuation_only_gives_nothing() {
        assert!(analyze("  ... —— 「」 ").is_empty());
    }
}

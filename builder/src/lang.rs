//! Language detection of a chunk by the share of each script among its letters.

use jikji_format::analyzer::{script_of, Script};

/// Detects `ko`, `ja`, `zh`, `en` or `other` for `text`.
///
/// Counts letters by script ([`script_of`]): Hangul share ≥ 30 % → `ko`; else kana
/// ≥ 10 % → `ja` (Japanese mixes kana with kanji); else Han ≥ 30 % → `zh`; else ASCII
/// letters ≥ 50 % → `en`; otherwise (or with no letters) `other`.
pub fn detect(text: &str) -> &'static str {
    let (mut hangul, mut han, mut kana, mut ascii, mut total) =
        (0usize, 0usize, 0usize, 0usize, 0usize);
    for c in text.chars() {
        match script_of(c) {
            Script::Hangul => hangul += 1,
            Script::Han => han += 1,
            Script::Kana => kana += 1,
            Script::Alnum if c.is_ascii_alphabetic() => ascii += 1,
            Script::Alnum if c.is_alphabetic() => {}
            _ => continue,
        }
        total += 1;
    }
    if total == 0 {
        return "other";
    }
    let share = |n: usize| n as f64 / total as f64;
    if share(hangul) >= 0.3 {
        "ko"
    } else if share(kana) >= 0.1 {
        "ja"
    } else if share(han) >= 0.3 {
        "zh"
    } else if share(ascii) >= 0.5 {
        "en"
    } else {
        "other"
    }
}

#[cfg(test)]
mod tests {
    use super::detect;

    #[test]
    fn detects_each_language() {
        assert_eq!(detect("메밀꽃 필 무렵, 허 생원은 장을 떠났다."), "ko");
        assert_eq!(detect("子曰：學而時習之，不亦說乎？"), "zh");
        assert_eq!(detect("学校に行きました。"), "ja");
        assert_eq!(detect("To be, or not to be, that is the question."), "en");
        assert_eq!(detect("Съешь же ещё этих мягких булок"), "other");
        assert_eq!(detect("…… 123"), "other");
    }
}

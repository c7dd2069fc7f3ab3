//! Per-language mean centring of dense vectors (issue 15), the query side of it, and the
//! language detector both sides use.
//!
//! multilingual-e5-small (Wang et al. 2024, arXiv:2402.05672) adds a language-specific
//! offset to every vector: a query scores any passage in its own language above the right
//! passage in another (on `xquad-zh2en-mixed`, Chinese questions with English answers among
//! Chinese distractors, dense nDCG@10 was 0.025). Subtracting each language's mean vector
//! removes most of it (the "language-agnostic" re-centring of Libovický et al., *On the
//! Language Neutrality of Pre-trained Multilingual Representations*, Findings of EMNLP 2020).
//! The means come from a reference sample of each language shipped with the model
//! (`lang-means.json` in the model folder, see `jikji_builder::lang_means`), not from the
//! bundle's own passages, so a query in a language the bundle has no passage in is
//! corrected too.
//!
//! The builder stores each chunk vector as [`centre`]`(x, alpha · passage_mean[lang])` (or,
//! with query side `shift`, as `x − alpha · passage_mean[lang]` without renormalising) and
//! records a [`Centring`] in the manifest's `model`; the engine applies [`centre_query`] to
//! every query vector before ranking (natively and in wasm, the same code; `shift` has no
//! query offsets). A bundle whose manifest has no `centring` is searched with the query
//! vector as given.

use jikji_format::analyzer::{script_of, Script};
use jikji_format::manifest::MANIFEST_FILE;
use jikji_format::{Centring, FormatError};

use crate::EngineError;

/// The method name recorded in [`Centring::method`].
pub const METHOD: &str = "lang-mean-v1";

/// The languages [`script_shares`] reports, in its order.
pub const SCRIPT_LANGS: [&str; 4] = ["ko", "ja", "zh", "en"];

/// The share (0–1) of Hangul (`ko`), kana (`ja`), Han (`zh`) and ASCII (`en`) letters among
/// the letters of `text`, in [`SCRIPT_LANGS`] order, by [`script_of`]; other letters
/// (Cyrillic, accented Latin…) count in the total only; digits and punctuation are not
/// counted. `None` when `text` has no letter.
pub fn script_shares(text: &str) -> Option<[f64; 4]> {
    let (mut n, mut total) = ([0usize; 4], 0usize);
    for c in text.chars() {
        match script_of(c) {
            Script::Hangul => n[0] += 1,
            Script::Kana => n[1] += 1,
            Script::Han => n[2] += 1,
            Script::Alnum if c.is_ascii_alphabetic() => n[3] += 1,
            Script::Alnum if c.is_alphabetic() => {}
            _ => continue,
        }
        total += 1;
    }
    (total > 0).then(|| n.map(|k| k as f64 / total as f64))
}

/// Detects `ko`, `ja`, `zh`, `en` or `other` for `text` (a chunk or a query).
///
/// By [`script_shares`]: Hangul share ≥ 30 % → `ko`; else kana ≥ 10 % → `ja` (Japanese
/// mixes kana with kanji); else Han ≥ 30 % → `zh`; else ASCII letters ≥ 50 % → `en`;
/// otherwise (or with no letters) `other`. Classical and modern Chinese are both `zh`.
pub fn detect_lang(text: &str) -> &'static str {
    let Some([hangul, kana, han, ascii]) = script_shares(text) else {
        return "other";
    };
    if hangul >= 0.3 {
        "ko"
    } else if kana >= 0.1 {
        "ja"
    } else if han >= 0.3 {
        "zh"
    } else if ascii >= 0.5 {
        "en"
    } else {
        "other"
    }
}

/// `normalise(x − offset)`: `x` and `offset` of the same length; the result is L2-normalised.
/// When the difference has no length (or is not finite), `x` is returned unchanged.
pub fn centre(x: &[f32], offset: &[f32]) -> Vec<f32> {
    let d: Vec<f32> = x.iter().zip(offset).map(|(a, b)| a - b).collect();
    let norm = d.iter().map(|v| v * v).sum::<f32>().sqrt();
    if !(norm.is_finite() && norm > 0.0) {
        return x.to_vec();
    }
    d.into_iter().map(|v| v / norm).collect()
}

/// The query vector the bundle's vectors are to be compared with: `qvec` centred by the
/// manifest's offset for the query's language ([`detect_lang`] of `query`), or `qvec`
/// itself when the bundle has no centring or no offset for that language.
///
/// Errors: [`EngineError::Format`] (naming `manifest.json`) when the offset does not have
/// `qvec.len()` finite components — a manifest that is not what a builder writes.
pub fn centre_query(
    centring: Option<&Centring>,
    query: &str,
    qvec: &[f32],
) -> Result<Vec<f32>, EngineError> {
    let Some(c) = centring else {
        return Ok(qvec.to_vec());
    };
    let lang = detect_lang(query);
    let Some(offset) = c.query.get(lang) else {
        return Ok(qvec.to_vec());
    };
    if offset.len() != qvec.len() || offset.iter().any(|v| !v.is_finite()) {
        return Err(EngineError::Format(FormatError::corrupt(
            MANIFEST_FILE,
            0,
            format!(
                "model.centring.query.{lang} has {} components (finite: {}), the query vector {}",
                offset.len(),
                offset.iter().all(|v| v.is_finite()),
                qvec.len()
            ),
        )));
    }
    Ok(centre(qvec, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn detects_each_language() {
        assert_eq!(detect_lang("메밀꽃 필 무렵, 허 생원은 장을 떠났다."), "ko");
        assert_eq!(detect_lang("子曰：學而時習之，不亦說乎？"), "zh");
        assert_eq!(detect_lang("学校に行きました。"), "ja");
        assert_eq!(
            detect_lang("To be, or not to be, that is the question."),
            "en"
        );
        assert_eq!(detect_lang("Съешь же ещё этих мягких булок"), "other");
        assert_eq!(detect_lang("…… 123"), "other");
        let s = script_shares("ab 가나 學").unwrap();
        assert!((s[0] - 0.4).abs() < 1e-9 && s[1] == 0.0 && (s[2] - 0.2).abs() < 1e-9);
        assert!((s[3] - 0.4).abs() < 1e-9);
        assert_eq!(script_shares("12 …"), None);
    }

    fn centring(lang: &str, v: Vec<f32>) -> Centring {
        Centring {
            method: METHOD.into(),
            stats_sha256: "00".into(),
            alpha: 1.0,
            query_side: "query-mean".into(),
            query: BTreeMap::from([(lang.to_string(), v)]),
            bundle_prior: None,
            passage: BTreeMap::new(),
        }
    }

    #[test]
    fn query_of_the_language_is_centred_and_normalised() {
        let c = centring("en", vec![0.5, 0.0, 0.0]);
        let q = [0.6f32, 0.8, 0.0];
        let out = centre_query(Some(&c), "hello world", &q).unwrap();
        let n = (0.1f32 * 0.1 + 0.8 * 0.8).sqrt();
        assert!((out[0] - 0.1 / n).abs() < 1e-6 && (out[1] - 0.8 / n).abs() < 1e-6);
        // Another language, or no centring: unchanged.
        assert_eq!(centre_query(Some(&c), "學而時習之", &q).unwrap(), q);
        assert_eq!(centre_query(None, "hello", &q).unwrap(), q);
    }

    #[test]
    fn offset_of_the_wrong_length_is_a_format_error() {
        let c = centring("en", vec![0.5, 0.0]);
        let e = centre_query(Some(&c), "hello", &[1.0, 0.0, 0.0]).unwrap_err();
        assert!(e.to_string().contains("manifest.json"), "{e}");
        let c = centring("en", vec![f32::NAN, 0.0, 0.0]);
        assert!(centre_query(Some(&c), "hello", &[1.0, 0.0, 0.0]).is_err());
    }

    #[test]
    fn centring_to_nothing_keeps_the_vector() {
        assert_eq!(centre(&[1.0, 0.0], &[1.0, 0.0]), vec![1.0, 0.0]);
    }
}

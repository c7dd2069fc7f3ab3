//! Contradiction candidates: pairs of highly similar chunks from different sources that
//! state different numbers, dates or versions of the same thing ("the request timeout is
//! 30 s" / "… is 60 s"), for a person to resolve.
//!
//! Pairs come from [`crate::dedup`] (LSH candidates re-scored exactly, different source
//! files, not versions of one document) at a cosine threshold below the duplicate one:
//! texts about the same thing. In each chunk, every *value* — a token with a digit
//! (`30`, `1,200`, `0.09`, `2026-10-05`, `9:00`, `v2.1`, `TLS 1.3`) with the unit word
//! that follows it, if short (`s`, `GB`, `USD`, `days`) — is attached to its *subject*: the
//! nearest content word before it in the same sentence (stop words skipped). A pair is a
//! candidate when both chunks give a subject values and the values differ (neither set
//! contains the other). The newer source (front matter `updated`) is listed first.

use std::collections::{BTreeMap, BTreeSet};

use jikji_format::ChunkRecord;
use serde::Serialize;

use crate::dedup::{comparable, lsh_candidates, FlatVectors, LshParams};

/// Default cosine at or above which two chunks are compared (E5 terms): above the
/// nearest neighbour in another file for 95% of the books' chunks (0.934), so the pairs
/// are about the same thing. The default LSH finds 87% of the books' pairs at 0.95 and all
/// at 0.97 (README "Dedup thresholds").
pub const SIMILAR: f32 = 0.95;

const STOP: &[&str] = &[
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "of", "to", "in", "on", "at",
    "for", "by", "with", "and", "or", "it", "its", "this", "that", "after", "before", "from",
    "each", "every", "per", "than", "up", "as", "has", "have", "will", "can", "may", "set", "sets",
    "now", "only", "about", "over", "under", "within", "until", "all", "first", "last",
];

/// Units kept with the number before them.
fn is_unit(w: &str) -> bool {
    let w = w.to_lowercase();
    w.chars().count() <= 8
        && w.chars().all(char::is_alphabetic)
        && !STOP.contains(&w.as_str())
        && matches!(
            w.as_str(),
            "s" | "ms"
                | "sec"
                | "secs"
                | "second"
                | "seconds"
                | "min"
                | "mins"
                | "minute"
                | "minutes"
                | "h"
                | "hour"
                | "hours"
                | "day"
                | "days"
                | "week"
                | "weeks"
                | "month"
                | "months"
                | "year"
                | "years"
                | "kb"
                | "mb"
                | "gb"
                | "tb"
                | "b"
                | "bytes"
                | "usd"
                | "eur"
                | "krw"
                | "won"
                | "percent"
                | "requests"
                | "times"
                | "users"
                | "gib"
                | "mib"
                | "kib"
                | "utc"
                | "kst"
                | "am"
                | "pm"
        )
}

/// The subject → values facts of one text (see the module doc).
pub fn facts(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    // Sentences end at ! ? 。 a newline, or a '.' followed by a space or the end (so
    // "0.09" and "v2.1" stay whole).
    let mut sentences = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        cur.push(c);
        let next = chars.get(i + 1).copied();
        let end = matches!(c, '!' | '?' | '\n' | '。')
            || (c == '.' && next.is_none_or(char::is_whitespace));
        if end {
            sentences.push(std::mem::take(&mut cur));
        }
    }
    sentences.push(cur);
    for s in sentences {
        let words: Vec<String> = s
            .split_whitespace()
            .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()).to_string())
            .filter(|w| !w.is_empty())
            .collect();
        let mut subject: Option<String> = None;
        let mut i = 0;
        while i < words.len() {
            let w = &words[i];
            if w.chars().any(|c| c.is_ascii_digit()) {
                let mut value = w.to_lowercase();
                if let Some(u) = words.get(i + 1).filter(|u| is_unit(u)) {
                    value = format!("{value} {}", u.to_lowercase());
                    i += 1;
                }
                if let Some(subj) = &subject {
                    out.entry(subj.clone()).or_default().insert(value);
                }
            } else {
                let l = w.to_lowercase();
                if !STOP.contains(&l.as_str()) && !is_unit(&l) && l.chars().count() > 1 {
                    subject = Some(l);
                }
            }
            i += 1;
        }
    }
    out
}

/// One disagreement inside a pair: a subject and each side's values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// The subject word (e.g. `timeout`).
    pub subject: String,
    /// Values in the newer chunk.
    pub newer: Vec<String>,
    /// Values in the older chunk.
    pub older: Vec<String>,
}

/// A contradiction candidate.
#[derive(Debug, Clone, Serialize)]
pub struct Conflict {
    /// The newer chunk (by `updated`, then source path).
    pub newer: ChunkRecord,
    /// The older chunk.
    pub older: ChunkRecord,
    /// Cosine similarity of the two chunks.
    pub cosine: f32,
    /// What they disagree on.
    pub differences: Vec<Difference>,
}

/// The differences between two texts' facts (subjects both state, with different values).
pub fn differences(newer: &str, older: &str) -> Vec<Difference> {
    let (a, b) = (facts(newer), facts(older));
    let mut out = Vec::new();
    for (subject, va) in &a {
        let Some(vb) = b.get(subject) else { continue };
        if va.is_subset(vb) || vb.is_subset(va) {
            continue;
        }
        out.push(Difference {
            subject: subject.clone(),
            newer: va.difference(vb).cloned().collect(),
            older: vb.difference(va).cloned().collect(),
        });
    }
    out
}

/// Contradiction candidates among `records` (doc id = index) with vectors `v`: pairs with
/// cosine ≥ `similar` from different sources that disagree on a value. Sorted newest
/// first (by the newer chunk's `updated`, descending), then by cosine.
pub fn find_conflicts(
    records: &[ChunkRecord],
    v: &FlatVectors,
    similar: f32,
    lsh: LshParams,
) -> Vec<Conflict> {
    let mut out = Vec::new();
    for (i, j) in lsh_candidates(v, lsh) {
        let (a, b) = (&records[i as usize], &records[j as usize]);
        if !comparable(a, b) || a.archived || b.archived {
            continue;
        }
        let c = v.cosine(i as usize, j as usize);
        if c < similar {
            continue;
        }
        let a_newer =
            (a.updated.as_deref(), a.source.as_str()) >= (b.updated.as_deref(), b.source.as_str());
        let (newer, older) = if a_newer { (a, b) } else { (b, a) };
        let d = differences(&newer.text, &older.text);
        if !d.is_empty() {
            out.push(Conflict {
                newer: newer.clone(),
                older: older.clone(),
                cosine: c,
                differences: d,
            });
        }
    }
    out.sort_by(|x, y| {
        y.newer
            .updated
            .cmp(&x.newer.updated)
            .then(y.cosine.total_cmp(&x.cosine))
            .then(x.newer.id.cmp(&y.newer.id))
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_attach_to_their_subject_with_units() {
        let f = facts("The request timeout is 30 s for every route. Each key may send 600 requests per minute.");
        assert_eq!(f["timeout"], BTreeSet::from(["30 s".to_string()]));
        // The nearest content word before the number, here the verb.
        assert_eq!(f["send"], BTreeSet::from(["600 requests".to_string()]));
    }

    #[test]
    fn decimals_and_dates_are_values_not_sentence_ends() {
        let f = facts("Outbound traffic costs 0.09 USD per gigabyte. Released 2026-10-05.");
        assert_eq!(f["costs"], BTreeSet::from(["0.09 usd".to_string()]));
        assert_eq!(f["released"], BTreeSet::from(["2026-10-05".to_string()]));
    }

    #[test]
    fn different_values_of_one_subject_differ_and_equal_ones_do_not() {
        let d = differences(
            "The request timeout is 60 s for every route.",
            "The request timeout is 30 s for every route.",
        );
        assert_eq!(
            d,
            [Difference {
                subject: "timeout".into(),
                newer: vec!["60 s".into()],
                older: vec!["30 s".into()],
            }]
        );
        assert!(differences("Timeout is 30 s.", "The timeout is 30 s here.").is_empty());
        assert!(differences("Timeout is 30 s.", "Retries: 3 times.").is_empty());
    }
}

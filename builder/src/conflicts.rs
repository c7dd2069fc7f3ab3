//! Contradiction candidates: pairs of similar chunks from different sources that state
//! different numbers, durations, dates or amounts of the same thing ("the request timeout
//! is 30 s" / "결제 요청 타임아웃 설정값은 60초입니다"), for a person to resolve.
//!
//! **Values.** In each sentence every *value* is read and normalised ([`Value`]): a number
//! with its unit, written apart or attached, in English or Korean, with Korean particles
//! and endings after the unit ignored (`30초입니다`, `3회까지`) — durations in seconds
//! (`30초` = `30 s` = `30 seconds`; `1 day` = `86400 s`, shown as `1 d`), months (`3개월` =
//! `3 months`; `1 year` = `12 months`), amounts of money (`30,000원` = `30000 won` =
//! `30000 krw`), counts (`3회` = `3 times`, `50개` = `50 items`), sizes, percentages,
//! and dates in the common forms (`2026-07-01`, `2026.07.01`, `2026/7/1`, `2026년 7월 1일`,
//! `July 1, 2026`, `1 July 2026`; without a year `7월 1일` / `July 1` → `07-01`). Other
//! tokens with a digit (`v2.1`, `TLS 1.3`) are plain values.
//!
//! **Subjects.** A value's subject is the nearest content word before it in the same
//! sentence (stop words skipped), lowercased, a Korean word without its particle or ending
//! ([`jikji_format::analyzer::korean_stem`]: `설정값은` → `설정값`).
//!
//! **Pairs.** Candidates are chunk pairs from different source files, not versions of one
//! document, neither archived ([`crate::dedup::comparable`]); in bundles of up to
//! [`EXACT_MAX`] chunks every pair is scored exactly, above that the LSH candidates of
//! [`crate::dedup`] are.
//! - Same language: cosine ≥ `similar` (default [`SIMILAR`]); a difference is a subject
//!   both chunks state with different values (neither set contains the other).
//! - Different languages (the chunks' `lang`): subjects are words of different languages
//!   and cannot be matched, and E5 scores translations lower than same-language text, so
//!   the pair must be *mutual nearest neighbours* across the two languages among the chunks
//!   that state a value of the same kind (the alignment rule of bitext mining: Artetxe &
//!   Schwenk 2019, "Margin-based parallel corpus mining with multilingual sentence
//!   embeddings"), with cosine ≥ `similar_cross` (default [`SIMILAR_CROSS`]); a difference
//!   is a kind of value (durations, months, dates, won…) both state with different values.
//!
//! The newer source is listed first: by the chunks' `updated` (front matter, else the
//! file's modification date), then path; [`Conflict::newer_by`] says which applied.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

use jikji_format::analyzer::korean_stem;
use jikji_format::{ChunkRecord, ConflictNote};
use serde::Serialize;

use crate::dedup::{comparable, lsh_candidates, FlatVectors, LshParams};

/// Default cosine at or above which two chunks of one language are compared (E5 terms):
/// above the nearest neighbour in another file for 95% of the books' chunks (0.934), so
/// the pairs are about the same thing. The default LSH finds 87% of the books' pairs at
/// 0.95 and all at 0.97 (README "Dedup thresholds").
pub const SIMILAR: f32 = 0.95;

/// Default cosine at or above which two chunks of different languages may be compared
/// (they must also be mutual nearest neighbours, see the module doc). On the fixture
/// knowledge base (`tests/fixtures/kb-health`) the two translated sections that disagree
/// score 0.892 and 0.837, while unrelated cross-language sections score up to 0.847, so the
/// cosine alone does not separate them; the mutual-neighbour rule does.
pub const SIMILAR_CROSS: f32 = 0.8;

/// Bundles of up to this many chunks are compared pair by pair (≈ 8 M int8 dot products,
/// about 1.5 s at the 190 ns per pair measured in README "Dedup thresholds"); larger ones
/// through the LSH candidates only.
pub const EXACT_MAX: usize = 4000;

const STOP: &[&str] = &[
    "a", "an", "the", "is", "are", "was", "were", "be", "been", "of", "to", "in", "on", "at",
    "for", "by", "with", "and", "or", "it", "its", "this", "that", "after", "before", "from",
    "each", "every", "per", "than", "up", "as", "has", "have", "will", "can", "may", "set", "sets",
    "now", "only", "about", "over", "under", "within", "until", "all", "first", "last", "most",
    "least", "max", "min", "then",
];

/// Korean words that are never subjects (adverbs and function words around numbers).
const KO_STOP: &[&str] = &[
    "최대",
    "최소",
    "동안",
    "이상",
    "이하",
    "미만",
    "초과",
    "약",
    "매",
    "총",
    "각",
    "그",
    "부터",
    "까지",
    "까지입니다",
    "입니다",
    "이며",
    "이고",
    "에서",
    "으로",
    "로",
    "사이에",
];

/// What a value measures; values of one kind are comparable.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub enum Kind {
    /// A duration in seconds (seconds … weeks).
    Seconds,
    /// A duration in months (months, years).
    Months,
    /// A calendar date (`YYYY-MM-DD`, `YYYY-MM` or `MM-DD`).
    Date,
    /// An amount of the named unit (currency, `times`, `items`, `bytes`, `%` …).
    Unit(String),
    /// A number or token without a known unit.
    Plain,
}

/// A normalised value: its kind and canonical text (what is compared and shown).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Value {
    /// Kind.
    pub kind: Kind,
    /// Canonical text, e.g. `30 s`, `3 months`, `2026-07-01`, `30000 krw`.
    pub text: String,
}

/// A number written with digits, commas and one decimal point (`30,000`, `0.09`) as a
/// canonical string (`30000`, `0.09`), or `None`.
fn number(s: &str) -> Option<f64> {
    let t: String = s.chars().filter(|&c| c != ',').collect();
    if t.is_empty() || !t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return None;
    }
    t.parse().ok().filter(|v: &f64| v.is_finite())
}

fn fmt_num(v: f64) -> String {
    let r = (v * 1000.0).round() / 1000.0;
    format!("{r}")
}

/// The unit a word names (English word or Korean suffix), as (kind, factor): a duration's
/// factor converts to seconds or months; other kinds' factor is 1 (or the byte multiple).
fn unit(w: &str) -> Option<(Kind, f64)> {
    let unit = |u: &str| Kind::Unit(u.to_string());
    Some(match w {
        "ms" => (Kind::Seconds, 0.001),
        "s" | "sec" | "secs" | "second" | "seconds" | "초" => (Kind::Seconds, 1.0),
        "min" | "mins" | "minute" | "minutes" | "분" => (Kind::Seconds, 60.0),
        "h" | "hr" | "hrs" | "hour" | "hours" | "시간" => (Kind::Seconds, 3600.0),
        "day" | "days" | "일" => (Kind::Seconds, 86400.0),
        "week" | "weeks" | "주" | "주일" => (Kind::Seconds, 604800.0),
        "month" | "months" | "개월" | "달" => (Kind::Months, 1.0),
        "year" | "years" | "년" => (Kind::Months, 12.0),
        "usd" | "달러" => (unit("usd"), 1.0),
        "eur" | "유로" => (unit("eur"), 1.0),
        "krw" | "won" | "원" => (unit("krw"), 1.0),
        "times" | "time" | "회" | "번" => (unit("times"), 1.0),
        "items" | "item" | "개" => (unit("items"), 1.0),
        "requests" | "request" | "건" => (unit("requests"), 1.0),
        "users" | "user" | "people" | "명" => (unit("users"), 1.0),
        "percent" | "%" | "퍼센트" => (unit("%"), 1.0),
        "b" | "bytes" | "byte" | "바이트" => (unit("bytes"), 1.0),
        "kb" | "kib" => (unit("bytes"), 1024.0),
        "mb" | "mib" => (unit("bytes"), 1024.0 * 1024.0),
        "gb" | "gib" => (unit("bytes"), 1024.0 * 1024.0 * 1024.0),
        "tb" | "tib" => (unit("bytes"), 1024f64.powi(4)),
        "utc" | "kst" | "am" | "pm" => (unit(w), 1.0),
        _ => return None,
    })
}

/// Korean unit suffixes, longest first, for numbers with the unit attached (`30초입니다`).
const KO_UNITS: &[&str] = &[
    "개월",
    "시간",
    "주일",
    "퍼센트",
    "바이트",
    "달러",
    "유로",
    "초",
    "분",
    "일",
    "주",
    "달",
    "년",
    "원",
    "회",
    "번",
    "개",
    "건",
    "명",
    "%",
];

fn value_of(n: f64, kind: Kind, factor: f64) -> Value {
    let v = n * factor;
    let text = match &kind {
        Kind::Seconds if v >= 86400.0 && (v / 86400.0).fract() == 0.0 => {
            format!("{} d", fmt_num(v / 86400.0))
        }
        Kind::Seconds if v >= 3600.0 && (v / 3600.0).fract() == 0.0 => {
            format!("{} h", fmt_num(v / 3600.0))
        }
        Kind::Seconds => format!("{} s", fmt_num(v)),
        Kind::Months => format!("{} months", fmt_num(v)),
        Kind::Unit(u) => format!("{} {u}", fmt_num(v)),
        Kind::Date | Kind::Plain => fmt_num(v),
    };
    Value { kind, text }
}

const MONTHS: &[&str] = &[
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

fn month_of(w: &str) -> Option<u32> {
    let l = w.to_lowercase();
    let l = l.trim_end_matches('.');
    if l.len() < 3 {
        return None;
    }
    let full = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    MONTHS
        .iter()
        .zip(full)
        .position(|(m, f)| l == *m || l == f || (l.len() >= 4 && f.starts_with(l)))
        .map(|i| i as u32 + 1)
}

fn date(y: Option<u32>, m: u32, d: Option<u32>) -> Option<String> {
    if !(1..=12).contains(&m) || d.is_some_and(|d| !(1..=31).contains(&d)) {
        return None;
    }
    Some(match (y, d) {
        (Some(y), Some(d)) => format!("{y:04}-{m:02}-{d:02}"),
        (Some(y), None) => format!("{y:04}-{m:02}"),
        (None, Some(d)) => format!("{m:02}-{d:02}"),
        (None, None) => return None,
    })
}

/// Marks every date of `s` (the forms in the module doc) with a placeholder word
/// `\u{1}YYYY-MM-DD`, so the word loop reads it as one value.
fn mark_dates(s: &str) -> String {
    static RES: OnceLock<[regex::Regex; 4]> = OnceLock::new();
    let res = RES.get_or_init(|| {
        [
            // 2026-07-01, 2026.07.01, 2026/7/1
            regex::Regex::new(r"\b(\d{4})[-./](\d{1,2})[-./](\d{1,2})\b").unwrap(),
            // 2026년 7월 1일, 7월 1일 (particles after 일 are left as they are)
            regex::Regex::new(r"(?:(\d{4})\s*년\s*)?(\d{1,2})\s*월\s*(?:(\d{1,2})\s*일)?").unwrap(),
            // July 1, 2026 / Jul. 1 2026 / July 1
            regex::Regex::new(
                r"(?i)\b([a-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4})\b)?",
            )
            .unwrap(),
            // 1 July 2026
            regex::Regex::new(r"(?i)\b(\d{1,2})\s+([a-z]{3,9})\.?,?\s+(\d{4})\b").unwrap(),
        ]
    });
    let num = |m: Option<regex::Match>| m.and_then(|m| m.as_str().parse::<u32>().ok());
    let s = res[0].replace_all(s, |c: &regex::Captures| {
        match date(num(c.get(1)), num(c.get(2)).unwrap_or(0), num(c.get(3))) {
            Some(d) => format!(" \u{1}{d} "),
            None => c[0].to_string(),
        }
    });
    let s = res[1].replace_all(&s, |c: &regex::Captures| {
        let y = num(c.get(1));
        let d = num(c.get(3));
        if y.is_none() && d.is_none() {
            return c[0].to_string();
        }
        match date(y, num(c.get(2)).unwrap_or(0), d) {
            Some(d) => format!(" \u{1}{d} "),
            None => c[0].to_string(),
        }
    });
    let s = res[2].replace_all(&s, |c: &regex::Captures| {
        match month_of(&c[1]).and_then(|m| date(num(c.get(3)), m, num(c.get(2)))) {
            Some(d) => format!(" \u{1}{d} "),
            None => c[0].to_string(),
        }
    });
    let s = res[3].replace_all(&s, |c: &regex::Captures| {
        match month_of(&c[2]).and_then(|m| date(num(c.get(3)), m, num(c.get(1)))) {
            Some(d) => format!(" \u{1}{d} "),
            None => c[0].to_string(),
        }
    });
    s.into_owned()
}

/// The sentences of `text`: ends at ! ? 。 a newline, or a '.' followed by a space or the
/// end (so `0.09` and `v2.1` stay whole).
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        cur.push(c);
        let next = chars.get(i + 1).copied();
        let end = matches!(c, '!' | '?' | '\n' | '。')
            || (c == '.' && next.is_none_or(char::is_whitespace));
        if end {
            out.push(std::mem::take(&mut cur));
        }
    }
    out.push(cur);
    out
}

/// The value a word starts, reading the next word as its unit if it is one: (value, words
/// used). `None` if the word has no digit.
fn read_value(w: &str, next: Option<&str>) -> Option<(Value, usize)> {
    if let Some(d) = w.strip_prefix('\u{1}') {
        return Some((
            Value {
                kind: Kind::Date,
                text: d.to_string(),
            },
            1,
        ));
    }
    if !w.chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    let lower = w.to_lowercase();
    // Digits (with , and .) first, then what is attached.
    let split = lower
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == ',' || c == '.'))
        .map_or(lower.len(), |(i, _)| i);
    let (num_part, rest) = lower.split_at(split);
    let num_part = num_part.trim_end_matches(['.', ',']);
    let Some(n) = number(num_part).filter(|_| lower.starts_with(|c: char| c.is_ascii_digit()))
    else {
        // `v2.1`, `TLS1.3`, `API29`: a plain token.
        return Some((
            Value {
                kind: Kind::Plain,
                text: lower,
            },
            1,
        ));
    };
    if !rest.is_empty() {
        // Attached unit: `30s`, `200mb`, `30초입니다`, `3개월`, `50%`.
        if let Some((k, f)) = unit(rest) {
            return Some((value_of(n, k, f), 1));
        }
        if let Some(u) = KO_UNITS.iter().find(|u| rest.starts_with(*u)) {
            let (k, f) = unit(u).expect("every Korean unit is known");
            return Some((value_of(n, k, f), 1));
        }
        return Some((
            Value {
                kind: Kind::Plain,
                text: lower,
            },
            1,
        ));
    }
    if let Some(u) = next {
        let u = u.to_lowercase();
        if let Some((k, f)) = unit(&u) {
            return Some((value_of(n, k, f), 2));
        }
        if let Some(ku) = KO_UNITS.iter().find(|k| u.starts_with(*k)) {
            let (k, f) = unit(ku).expect("every Korean unit is known");
            return Some((value_of(n, k, f), 2));
        }
    }
    Some((value_of(n, Kind::Plain, 1.0), 1))
}

/// A subject word: lowercased, a Korean word without its particle or ending; `None` for
/// stop words, units and one-letter words.
fn subject_word(w: &str) -> Option<String> {
    let l = w.to_lowercase();
    if STOP.contains(&l.as_str()) || unit(&l).is_some() {
        return None;
    }
    let hangul = l.chars().any(|c| ('가'..='힣').contains(&c));
    let s = if hangul {
        korean_stem(&l).map_or(l.clone(), str::to_string)
    } else {
        l
    };
    if KO_STOP.contains(&s.as_str()) || (!hangul && s.chars().count() <= 1) {
        return None;
    }
    Some(s)
}

/// Every value of `text` with its subject (see the module doc), in text order.
pub fn values(text: &str) -> Vec<(Option<String>, Value)> {
    let mut out = Vec::new();
    // Dates first, so that `Jul. 1` does not end a sentence.
    for s in sentences(&mark_dates(text)) {
        let words: Vec<String> = s
            .split_whitespace()
            .map(|w| {
                w.trim_matches(|c: char| !(c.is_alphanumeric() || c == '\u{1}' || c == '%'))
                    .to_string()
            })
            .filter(|w| !w.is_empty())
            .collect();
        let mut subject: Option<String> = None;
        let mut i = 0;
        while i < words.len() {
            if let Some((v, used)) = read_value(&words[i], words.get(i + 1).map(String::as_str)) {
                out.push((subject.clone(), v));
                i += used;
                continue;
            }
            if let Some(w) = subject_word(&words[i]) {
                subject = Some(w);
            }
            i += 1;
        }
    }
    out
}

/// The subject → values facts of one text (see the module doc), values as canonical text.
pub fn facts(text: &str) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (subject, v) in values(text) {
        if let Some(s) = subject {
            out.entry(s).or_default().insert(v.text);
        }
    }
    out
}

/// Kind → (values, subjects) of one text, for kinds with a unit or dates (plain numbers
/// are too generic to compare across languages).
fn facts_by_kind(text: &str) -> KindFacts {
    let mut out: KindFacts = BTreeMap::new();
    for (subject, v) in values(text) {
        if v.kind == Kind::Plain {
            continue;
        }
        let e = out.entry(v.kind.clone()).or_default();
        if let Some(s) = subject {
            e.1.entry(v.text.clone()).or_insert(s);
        }
        e.0.insert(v.text);
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
    /// The newer chunk (see [`Conflict::newer_by`]).
    pub newer: ChunkRecord,
    /// The older chunk.
    pub older: ChunkRecord,
    /// How the newer one was told: `updated 2026-09-01 > 2026-03-02`, or `unknown (…)`
    /// when the dates are equal or missing (then the later path is listed first).
    pub newer_by: String,
    /// Cosine similarity of the two chunks.
    pub cosine: f32,
    /// True if the chunks are of different languages (matched by kind of value).
    pub cross_language: bool,
    /// What they disagree on.
    pub differences: Vec<Difference>,
}

/// The differences between two texts' facts (subjects both state, with different values).
pub fn differences(newer: &str, older: &str) -> Vec<Difference> {
    diff_facts(&facts(newer), &facts(older))
}

/// [`differences`] of two texts' [`facts`].
fn diff_facts(
    a: &BTreeMap<String, BTreeSet<String>>,
    b: &BTreeMap<String, BTreeSet<String>>,
) -> Vec<Difference> {
    let mut out = Vec::new();
    for (subject, va) in a {
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

/// The differences between two texts by kind of value (durations, months, dates, an
/// amount of one unit): kinds both state with different values (neither set contains the
/// other). The subject shown is `newer subject / older subject` of the differing values.
pub fn differences_by_kind(newer: &str, older: &str) -> Vec<Difference> {
    kind_differences(newer, older)
        .into_iter()
        .map(|(_, d)| d)
        .collect()
}

fn kind_differences(newer: &str, older: &str) -> Vec<(Kind, Difference)> {
    diff_kinds(&facts_by_kind(newer), &facts_by_kind(older))
}

/// Kind → (values, subjects) of one text ([`facts_by_kind`]).
type KindFacts = BTreeMap<Kind, (BTreeSet<String>, BTreeMap<String, String>)>;

/// [`kind_differences`] of two texts' [`facts_by_kind`].
fn diff_kinds(a: &KindFacts, b: &KindFacts) -> Vec<(Kind, Difference)> {
    let mut out = Vec::new();
    for (kind, (va, sa)) in a {
        let Some((vb, sb)) = b.get(kind) else {
            continue;
        };
        if va.is_subset(vb) || vb.is_subset(va) {
            continue;
        }
        let newer: Vec<String> = va.difference(vb).cloned().collect();
        let older: Vec<String> = vb.difference(va).cloned().collect();
        let names = |vals: &[String], subj: &BTreeMap<String, String>| {
            let mut v: Vec<&str> = vals
                .iter()
                .filter_map(|x| subj.get(x))
                .map(String::as_str)
                .collect();
            v.dedup();
            v.join(", ")
        };
        let (na, nb) = (names(&newer, sa), names(&older, sb));
        let subject = match (na.is_empty(), nb.is_empty()) {
            (false, false) if na == nb => na,
            (false, false) => format!("{na} / {nb}"),
            (false, true) => na,
            (true, false) => nb,
            (true, true) => format!("{kind:?}").to_lowercase(),
        };
        out.push((
            kind.clone(),
            Difference {
                subject,
                newer,
                older,
            },
        ));
    }
    out
}

/// What chunk `a` and chunk `b` disagree on (`a`'s values as `newer`): by subject when
/// they are of one language, else (or when no subject matches) by kind of value. Used by
/// dedup, which must never call such a pair a duplicate.
pub fn value_differences(a: &ChunkRecord, b: &ChunkRecord) -> Vec<Difference> {
    if a.lang == b.lang {
        let d = differences(&a.text, &b.text);
        if !d.is_empty() {
            return d;
        }
    }
    differences_by_kind(&a.text, &b.text)
}

/// Which pairs [`find_conflicts`] compares.
#[derive(Debug, Clone, Copy)]
pub struct ConflictOptions {
    /// Same-language pairs at or above this cosine.
    pub similar: f32,
    /// Cross-language pairs at or above this cosine (and mutual nearest neighbours).
    pub similar_cross: f32,
    /// LSH parameters for bundles above [`EXACT_MAX`] chunks.
    pub lsh: LshParams,
}

impl Default for ConflictOptions {
    /// [`SIMILAR`], [`SIMILAR_CROSS`], the default LSH.
    fn default() -> Self {
        ConflictOptions {
            similar: SIMILAR,
            similar_cross: SIMILAR_CROSS,
            lsh: LshParams::default(),
        }
    }
}

/// Orders a pair newer first and says why (see [`Conflict::newer_by`]).
fn order<'a>(a: &'a ChunkRecord, b: &'a ChunkRecord) -> (&'a ChunkRecord, &'a ChunkRecord, String) {
    let a_newer =
        (a.updated.as_deref(), a.source.as_str()) >= (b.updated.as_deref(), b.source.as_str());
    let (n, o) = if a_newer { (a, b) } else { (b, a) };
    let why = match (n.updated.as_deref(), o.updated.as_deref()) {
        (Some(x), Some(y)) if x != y => format!("updated {x} > {y}"),
        (Some(x), Some(_)) => format!("unknown (both updated {x})"),
        (Some(x), None) => format!("updated {x}; the other has no date"),
        _ => "unknown (no updated dates)".to_string(),
    };
    (n, o, why)
}

/// `f(x)` for every `x` of `items`, computed on up to [`crate::ingest::default_threads`]
/// threads (at most 16), keyed by `x`.
fn on_threads<T: Send>(
    items: &BTreeSet<usize>,
    f: impl Fn(usize) -> T + Sync,
) -> BTreeMap<usize, T> {
    let items: Vec<usize> = items.iter().copied().collect();
    let threads = crate::ingest::default_threads().clamp(1, 16);
    if threads == 1 || items.len() < 64 {
        return items.into_iter().map(|x| (x, f(x))).collect();
    }
    let per = items.len().div_ceil(threads);
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = items
            .chunks(per)
            .map(|part| s.spawn(move || part.iter().map(|&x| (x, f(x))).collect::<Vec<_>>()))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("conflict facts thread"))
            .collect()
    })
}

/// Contradiction candidates among `records` (doc id = index) with vectors `v` (see the
/// module doc). Sorted newest first (by the newer chunk's `updated`, descending), then by
/// cosine.
pub fn find_conflicts(
    records: &[ChunkRecord],
    v: &FlatVectors,
    o: &ConflictOptions,
) -> Vec<Conflict> {
    let n = records.len().min(v.len());
    let ok = |i: usize, j: usize| {
        let (a, b) = (&records[i], &records[j]);
        comparable(a, b) && !a.archived && !b.archived
    };
    // Candidate pairs with their cosines.
    // Pairs below both thresholds are never used: not kept (an exact scan of 4,000 chunks
    // has 8 M pairs).
    let least = o.similar.min(o.similar_cross);
    let pairs: Vec<(usize, usize, f32)> = if n <= EXACT_MAX {
        (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
            .filter(|&(i, j)| ok(i, j))
            .map(|(i, j)| (i, j, v.cosine(i, j)))
            .filter(|p| p.2 >= least)
            .collect()
    } else {
        lsh_candidates(v, o.lsh)
            .into_iter()
            .map(|(i, j)| (i as usize, j as usize))
            .filter(|&(i, j)| ok(i, j))
            .map(|(i, j)| (i, j, v.cosine(i, j)))
            .filter(|p| p.2 >= least)
            .collect()
    };
    // The kinds of value each chunk states, only for the chunks of a cross-language pair
    // above its threshold (parsing every chunk's values was most of the time on the books:
    // 6,333 chunks, almost none in such a pair).
    // Each text is parsed once (a chunk can be in many pairs: parsing per pair was most of
    // the time on the books).
    let mut want_kinds = BTreeSet::new();
    let mut want_subjects = BTreeSet::new();
    for &(i, j, c) in &pairs {
        let cross = records[i].lang != records[j].lang;
        if cross && c >= o.similar_cross {
            want_kinds.extend([i, j]);
        } else if !cross && c >= o.similar {
            want_subjects.extend([i, j]);
        }
    }
    // Parsed on every core (each text on its own; the maps are the same in any order).
    let kinds: BTreeMap<usize, KindFacts> =
        on_threads(&want_kinds, |x| facts_by_kind(&records[x].text));
    let subjects: BTreeMap<usize, BTreeMap<String, BTreeSet<String>>> =
        on_threads(&want_subjects, |x| facts(&records[x].text));
    // Cross-language: each chunk's best partner per (other language, kind of value).
    let mut best: BTreeMap<(usize, &str, &Kind), (f32, usize)> = BTreeMap::new();
    for &(i, j, c) in &pairs {
        let (a, b) = (&records[i], &records[j]);
        if a.lang == b.lang || c < o.similar_cross {
            continue;
        }
        let (ki, kj) = (&kinds[&i], &kinds[&j]);
        for k in ki.keys().filter(|k| kj.contains_key(*k)) {
            for (x, y) in [(i, j), (j, i)] {
                let e = best
                    .entry((x, records[y].lang.as_str(), k))
                    .or_insert((c, y));
                if c > e.0 || (c == e.0 && y < e.1) {
                    *e = (c, y);
                }
            }
        }
    }
    let mutual = |i: usize, j: usize, k: &Kind| {
        best.get(&(i, records[j].lang.as_str(), k)).map(|e| e.1) == Some(j)
            && best.get(&(j, records[i].lang.as_str(), k)).map(|e| e.1) == Some(i)
    };
    let mut out = Vec::new();
    for &(i, j, c) in &pairs {
        let (a, b) = (&records[i], &records[j]);
        let cross = a.lang != b.lang;
        let d = if cross {
            if c < o.similar_cross {
                continue;
            }
            let (newer, _, _) = order(a, b);
            let (n, o) = if std::ptr::eq(newer, a) {
                (i, j)
            } else {
                (j, i)
            };
            // Only the kinds on which the two are each other's nearest neighbours.
            diff_kinds(&kinds[&n], &kinds[&o])
                .into_iter()
                .filter(|(k, _)| mutual(i, j, k))
                .map(|(_, d)| d)
                .collect()
        } else {
            if c < o.similar {
                continue;
            }
            let (newer, _, _) = order(a, b);
            let (n, o) = if std::ptr::eq(newer, a) {
                (i, j)
            } else {
                (j, i)
            };
            diff_facts(&subjects[&n], &subjects[&o])
        };
        if d.is_empty() {
            continue;
        }
        let (newer, older, newer_by) = order(a, b);
        out.push(Conflict {
            newer: newer.clone(),
            older: older.clone(),
            newer_by,
            cosine: c,
            cross_language: cross,
            differences: d,
        });
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

/// Records on every chunk of `records` (doc id = index, vectors `v`) the contradiction
/// candidates it is part of ([`find_conflicts`] with the default [`ConflictOptions`], as
/// `jikji conflicts` finds them), replacing what the records held (an update carries the
/// old bundle's notes); one [`ConflictNote`] per side and difference. `jikji build` and
/// `jikji update` run it on bundles with vectors (after embedding, before the calibration)
/// so that a search hit says it is part of a known conflict pair. Returns the number of
/// pairs found.
pub fn annotate(records: &mut [ChunkRecord], v: &FlatVectors) -> usize {
    for r in records.iter_mut() {
        r.conflicts.clear();
    }
    let found = find_conflicts(records, v, &ConflictOptions::default());
    let index: BTreeMap<&str, usize> = records
        .iter()
        .enumerate()
        .map(|(i, r)| (r.id.as_str(), i))
        .collect();
    let known = |c: &Conflict| c.newer_by.starts_with("updated ") && !c.newer_by.contains(';');
    let mut notes: Vec<(usize, ConflictNote)> = Vec::new();
    for c in &found {
        let (Some(&n), Some(&o)) = (
            index.get(c.newer.id.as_str()),
            index.get(c.older.id.as_str()),
        ) else {
            continue;
        };
        let (newer, older) = if known(c) {
            ("this", "other")
        } else {
            ("unknown", "unknown")
        };
        for d in &c.differences {
            notes.push((
                n,
                ConflictNote {
                    with: c.older.id.clone(),
                    source: c.older.source.clone(),
                    newer: newer.into(),
                    subject: d.subject.clone(),
                    this: d.newer.clone(),
                    other: d.older.clone(),
                },
            ));
            notes.push((
                o,
                ConflictNote {
                    with: c.newer.id.clone(),
                    source: c.newer.source.clone(),
                    newer: older.into(),
                    subject: d.subject.clone(),
                    this: d.older.clone(),
                    other: d.newer.clone(),
                },
            ));
        }
    }
    for (i, note) in notes {
        records[i].conflicts.push(note);
    }
    found.len()
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

    fn texts(t: &str) -> Vec<String> {
        values(t).into_iter().map(|(_, v)| v.text).collect()
    }

    #[test]
    fn units_are_normalised_across_languages() {
        for t in ["30초", "30 s", "30 seconds", "30 sec", "30s", "30초입니다"] {
            assert_eq!(texts(t), ["30 s"], "{t}");
        }
        assert_eq!(texts("15 minutes"), ["900 s"]);
        assert_eq!(texts("2 hours"), ["2 h"]);
        assert_eq!(texts("14 days and 1주"), ["14 d", "7 d"]);
        for t in ["3개월", "3 months", "3개월 동안", "3 month"] {
            assert_eq!(texts(t), ["3 months"], "{t}");
        }
        assert_eq!(texts("1 year"), ["12 months"]);
        assert_eq!(texts("30,000원 이상"), ["30000 krw"]);
        assert_eq!(texts("30,000 won"), ["30000 krw"]);
        assert_eq!(texts("최대 3회까지"), ["3 times"]);
        assert_eq!(texts("at most 3 times"), ["3 times"]);
        assert_eq!(texts("200 MB"), ["209715200 bytes"]);
        assert_eq!(texts("v2.1 and TLS 1.3"), ["v2.1", "1.3"]);
    }

    #[test]
    fn dates_in_common_forms_are_one_value() {
        for t in [
            "2026-07-01",
            "2026.07.01",
            "2026/7/1",
            "2026년 7월 1일",
            "2026년 7월 1일부터",
            "July 1, 2026",
            "Jul. 1 2026",
            "1 July 2026",
        ] {
            assert_eq!(texts(t), ["2026-07-01"], "{t}");
        }
        assert_eq!(texts("7월 31일까지"), ["07-31"]);
        assert_eq!(texts("July 31"), ["07-31"]);
        // Not dates: a month count, a lone number of days.
        assert_eq!(texts("3개월"), ["3 months"]);
        assert_eq!(texts("30일"), ["30 d"]);
    }

    #[test]
    fn korean_particles_and_endings_leave_subjects_and_values() {
        let d = differences("설정값은: 60초입니다.", "설정값은 30초입니다.");
        assert_eq!(
            d,
            [Difference {
                subject: "설정값".into(),
                newer: vec!["60 s".into()],
                older: vec!["30 s".into()],
            }]
        );
        let f = facts("접속 기록은 3개월 동안 보관합니다.");
        assert_eq!(f["기록"], BTreeSet::from(["3 months".to_string()]));
    }

    #[test]
    fn across_languages_values_of_one_kind_are_compared() {
        let d = differences_by_kind(
            "The payment request timeout is 60 seconds.",
            "결제 요청 타임아웃 설정값은 30초입니다.",
        );
        assert_eq!(d.len(), 1, "{d:?}");
        assert_eq!(
            (d[0].newer.as_slice(), d[0].older.as_slice()),
            (&["60 s".to_string()][..], &["30 s".to_string()][..])
        );
        assert_eq!(d[0].subject, "timeout / 설정값");
        // The same dates and amount in two languages: no difference.
        assert!(differences_by_kind(
            "The summer promotion runs from July 1, 2026 to July 31, 2026. Orders over 30,000 won ship free.",
            "여름 프로모션 기간은 2026년 7월 1일부터 2026년 7월 31일까지입니다. 30,000원 이상 주문은 무료 배송입니다.",
        )
        .is_empty());
    }
}

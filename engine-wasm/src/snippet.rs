//! What a results list shows for a hit besides its score: a readable title ([`label`]) and a
//! snippet of the chunk's text around its best match with the query's terms marked
//! ([`snippet`]). Both run in the engine, natively and in the browser (the `wasm` module's
//! `snippet` and `label`), so the match positions come from the same analyzer that built the
//! index: a query term is marked where the text yields the same index term (English words
//! after stemming, `fathers` for `father`; Han text by the bigrams the index holds, folded
//! Traditional → Simplified, so `學而` marks `学而`; Korean by the word, eojeol: a Hangul
//! word whose lemma — the word without its particle or ending ([`korean_stem`]), or the word
//! itself — is matched whole by the query's terms is marked whole, particle included, as a
//! reader takes it, so `논어를` marks `논어를` and `논어는`, `공자가` marks `공자께서`; a term that
//! covers only part of the lemma, `메밀` in `메밀꽃을`, marks that part). The window is chosen to
//! hold the most distinct query terms (then the most matches), like Lucene's unified
//! highlighter's passage scoring reduced to one passage.
//!
//! The text shown is the chunk's text with its Markdown heading markers (`# `, `## `, …)
//! removed and its whitespace runs (newlines included) collapsed to one space: the heading
//! path is shown apart, as a breadcrumb.

use jikji_format::analyzer::{korean_stem, script_of, Analyzer, Script};

/// Display width of a snippet window, in columns: a wide character ([`is_wide`]: CJK, Hangul, kana,
/// fullwidth punctuation) is 2, any other 1. 240 columns are about two lines of English or 120 CJK characters.
pub const SNIPPET_WIDTH: usize = 240;

/// Most matches considered when choosing the window (the first ones in the text).
const MAX_MATCHES: usize = 512;

/// A window of a chunk's text for display.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snippet {
    /// The window's text in pieces that alternate unmarked, marked, unmarked, …: `parts[0]`
    /// is unmarked (possibly empty), `parts[1]` a run of matched terms, and so on. Joined, they
    /// are the window's text. A caller renders marked parts as `<mark>` text nodes.
    pub parts: Vec<String>,
    /// True when the window starts after the text's start (show an ellipsis before it).
    pub cut_start: bool,
    /// True when the window ends before the text's end (show an ellipsis after it).
    pub cut_end: bool,
}

impl Snippet {
    /// The window's text (its parts joined).
    pub fn text(&self) -> String {
        self.parts.concat()
    }

    /// The marked parts, in order.
    pub fn marked(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().skip(1).step_by(2).map(String::as_str)
    }
}

/// `text` without Markdown heading markers, whitespace runs collapsed to one space and trimmed.
/// A line whose first non-blank characters are 1–6 `#` followed by a space (or the line's end)
/// loses them, and a closing run of `#` after a space (ATX headings, CommonMark §4.2).
pub fn display_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut l = line.trim();
        let hashes = l.bytes().take_while(|&b| b == b'#').count();
        if (1..=6).contains(&hashes) {
            let rest = &l[hashes..];
            if rest.is_empty() || rest.starts_with([' ', '\t']) {
                l = rest.trim();
                let closing = l.trim_end_matches('#');
                if closing.len() < l.len() && (closing.is_empty() || closing.ends_with([' ', '\t']))
                {
                    l = closing.trim_end();
                }
            }
        }
        for word in l.split_whitespace() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(word);
        }
    }
    out
}

/// One character of the display text: where it is, its normalised form and its class.
struct Ch {
    byte: usize,
    class: Script,
    norm: String,
    wide: bool,
}

/// The class the analyzer splits words by: kana counts as Han (Japanese runs are bigrammed
/// together), characters normalising to nothing as `Other`.
fn class_of(norm: &str) -> Script {
    match norm.chars().next().map(script_of) {
        Some(Script::Kana) => Script::Han,
        Some(s) => s,
        None => Script::Other,
    }
}

/// True for a character shown two columns wide: Hangul Jamo, the CJK blocks from CJK Radicals
/// to Yi (kana, CJK punctuation, Han, …), Hangul syllables, CJK compatibility ideographs,
/// fullwidth forms, and Han beyond the BMP (a coarse reading of UAX #11 East Asian Width: W/F).
pub fn is_wide(c: char) -> bool {
    let u = c as u32;
    (0x1100..=0x115F).contains(&u)
        || (0x2E80..=0xA4CF).contains(&u)
        || (0xAC00..=0xD7A3).contains(&u)
        || (0xF900..=0xFAFF).contains(&u)
        || (0xFE30..=0xFE4F).contains(&u)
        || (0xFF00..=0xFF60).contains(&u)
        || (0xFFE0..=0xFFE6).contains(&u)
        || (0x20000..=0x3FFFD).contains(&u)
}

/// The index terms a query's matches are marked by: its terms as the analyzer makes them,
/// except that a Han or kana word of two or more characters gives only its bigrams (not the
/// single characters a `han_unigrams` bundle also indexes, which would mark every occurrence
/// of each character).
pub fn mark_terms(analyzer: &Analyzer, query: &str) -> Terms {
    let mut terms = Vec::new();
    for (word, script) in analyzer.words(query) {
        if matches!(script, Script::Han | Script::Kana) && word.len() >= 2 {
            for w in word.windows(2) {
                terms.push(w.iter().collect());
            }
        } else {
            let w: String = word.iter().collect();
            terms.extend(analyzer.analyze(&w));
        }
    }
    jikji_format::sort::sort(&mut terms);
    terms.dedup();
    Terms(terms)
}

/// A query's mark terms ([`mark_terms`]), sorted (a sorted vector rather than a hash set: the
/// browser's engine wasm stays smaller).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Terms(pub Vec<String>);

impl Terms {
    /// True if `t` is one of the terms.
    pub fn contains(&self, t: &str) -> bool {
        self.0.binary_search_by(|x| x.as_str().cmp(t)).is_ok()
    }
}

/// `a` followed by `b`.
fn concat2(a: &str, b: &str) -> String {
    let mut s = String::with_capacity(a.len() + b.len());
    s.push_str(a);
    s.push_str(b);
    s
}

/// A match: characters `start..end` of the display text, and which term.
struct Match {
    start: usize,
    end: usize,
    term: usize,
}

/// The term a Korean word `word` (one normalised Hangul run, an eojeol) is marked whole by,
/// or `None`. Its lemma is [`korean_stem`]'s stem, or the word itself when nothing is stripped;
/// the word is marked whole when the lemma is matched whole: the lemma (or the word) is one of
/// `terms` (a one-syllable stem, a two-syllable stem — its only bigram —, or a longer lemma the
/// analyzer made a term of), or every bigram of the lemma is (a bundle without Korean lemma
/// terms). Returns the matching term (the lemma, the word, or the lemma's first bigram).
fn eojeol_match<'a>(word: &'a str, terms: &Terms) -> Option<&'a str> {
    if word.chars().count() > 2 && terms.contains(word) {
        return Some(word);
    }
    let lemma = korean_stem(word).unwrap_or(word);
    if terms.contains(lemma) {
        return Some(lemma);
    }
    let bounds: Vec<usize> = lemma
        .char_indices()
        .map(|(b, _)| b)
        .chain([lemma.len()])
        .collect();
    if bounds.len() < 4 {
        return None; // one or two syllables: handled above
    }
    let all = bounds
        .windows(3)
        .all(|b| terms.contains(&lemma[b[0]..b[2]]));
    all.then_some(&lemma[..bounds[2]])
}

/// The matches of `terms` in `chars`, in text order (see the module doc for the rules).
fn find_matches(
    analyzer: &Analyzer,
    chars: &[Ch],
    terms: &Terms,
    ids: &mut Vec<String>,
) -> Vec<Match> {
    let id_of = |t: &str, ids: &mut Vec<String>| match ids.iter().position(|x| x == t) {
        Some(i) => i,
        None => {
            ids.push(t.to_string());
            ids.len() - 1
        }
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let class = chars[i].class;
        let s = i;
        while i < chars.len() && chars[i].class == class {
            i += 1;
        }
        let run = &chars[s..i];
        let word = || run.iter().map(|c| c.norm.as_str()).collect::<String>();
        match class {
            Script::Other => {}
            Script::Alnum => {
                let w = word();
                if let Some(t) = analyzer.analyze(&w).into_iter().find(|t| terms.contains(t)) {
                    out.push(Match {
                        start: s,
                        end: i,
                        term: id_of(&t, ids),
                    });
                }
            }
            _ => {
                let hangul = class == Script::Hangul;
                let w = word();
                if hangul {
                    if let Some(lemma) = eojeol_match(&w, terms) {
                        // The whole word, particle included; counted as its lemma's term, so
                        // `논어를` and `논어는` are one distinct term of the window.
                        out.push(Match {
                            start: s,
                            end: i,
                            term: id_of(lemma, ids),
                        });
                        continue;
                    }
                }
                let mut j = s;
                while j < i {
                    if j + 1 < i {
                        let pair = concat2(&chars[j].norm, &chars[j + 1].norm);
                        if terms.contains(&pair) {
                            // Consecutive matching bigrams (a longer query word) make one match.
                            let mut end = j + 2;
                            while end < i
                                && terms.contains(&concat2(&chars[end - 1].norm, &chars[end].norm))
                            {
                                end += 1;
                            }
                            out.push(Match {
                                start: j,
                                end,
                                term: id_of(&pair, ids),
                            });
                            j = end;
                            continue;
                        }
                    }
                    if terms.contains(&chars[j].norm) {
                        out.push(Match {
                            start: j,
                            end: j + 1,
                            term: id_of(&chars[j].norm, ids),
                        });
                    }
                    j += 1;
                }
            }
        }
        if out.len() >= MAX_MATCHES {
            break;
        }
    }
    out
}

/// The snippet of chunk text `text` for `query`: the [`display_text`] window of at most `width`
/// columns (see [`SNIPPET_WIDTH`]) holding the most distinct query terms, then the most matches,
/// the earliest such window, starting about a fifth of the width before its first match; its
/// matches marked (see the module doc). A text without a match (a dense hit) gives its start.
/// Never fails: an empty text gives an empty snippet. In the browser the analyzer normalises
/// with the Unicode table pages the query loaded; a character needing a table that is not
/// loaded is compared ASCII-lowercased only.
pub fn snippet(analyzer: &Analyzer, query: &str, text: &str, width: usize) -> Snippet {
    let shown = display_text(text);
    let mut chars = Vec::with_capacity(shown.len());
    let mut buf = [0u8; 4];
    for (byte, c) in shown.char_indices() {
        let norm = analyzer.normalize(c.encode_utf8(&mut buf));
        chars.push(Ch {
            byte,
            class: class_of(&norm),
            norm,
            wide: is_wide(c),
        });
    }
    let n = chars.len();
    if n == 0 {
        return Snippet {
            parts: vec![String::new()],
            ..Snippet::default()
        };
    }
    let terms = mark_terms(analyzer, query);
    let mut ids = Vec::new();
    let matches = find_matches(analyzer, &chars, &terms, &mut ids);
    // Column prefix sums: cols[k] = width of chars[..k].
    let mut cols = Vec::with_capacity(n + 1);
    cols.push(0usize);
    for c in &chars {
        cols.push(cols.last().copied().unwrap_or(0) + if c.wide { 2 } else { 1 });
    }
    let width = width.max(8);
    // The furthest end such that chars[start..end] fits in `width` columns.
    let end_of = |start: usize| cols.partition_point(|&x| x <= cols[start] + width) - 1;
    let (mut start, mut end) = if cols[n] <= width {
        (0, n)
    } else if matches.is_empty() {
        (0, end_of(0))
    } else {
        let lead = width / 5;
        let mut best = (0usize, 0usize, 0usize, 0usize); // (distinct, count, start, end)
        let mut seen = vec![false; ids.len()];
        for m in &matches {
            // Start `lead` columns before the match, but keep the window full at the end.
            let mut s = cols.partition_point(|&x| x + lead < cols[m.start]);
            let latest = cols.partition_point(|&x| x + width < cols[n]);
            s = s.min(latest).min(m.start);
            let e = end_of(s).max(m.end.min(n));
            seen.iter_mut().for_each(|x| *x = false);
            let (mut distinct, mut count) = (0, 0);
            for w in matches.iter().filter(|w| w.start >= s && w.end <= e) {
                count += 1;
                if !seen[w.term] {
                    seen[w.term] = true;
                    distinct += 1;
                }
            }
            if (distinct, count) > (best.0, best.1) {
                best = (distinct, count, s, e);
            }
        }
        (best.2, best.3)
    };
    let first_match = matches
        .iter()
        .find(|m| m.start >= start)
        .map_or(end, |m| m.start);
    let alnum = |k: usize| chars[k].class == Script::Alnum;
    let space = |k: usize| chars[k].norm.trim().is_empty();
    // Do not start inside a word or its punctuation: in spaced text, start after the next space
    // when one comes within 20 characters and before the first match.
    if start > 0 && !space(start - 1) && !chars[start].wide {
        let mut k = start;
        while k < first_match.min(start + 20) && !space(k) {
            k += 1;
        }
        if k < n && space(k) && k <= first_match {
            start = k + 1;
        }
    }
    if end < n && alnum(end - 1) && alnum(end) {
        let mut k = end;
        while k > start + (end - start) / 2 && alnum(k - 1) {
            k -= 1;
        }
        if !alnum(k - 1) || k == start {
            end = k.max(start + 1);
        }
    }
    start = start.min(end);
    while start < end && space(start) {
        start += 1;
    }
    while end > start && space(end - 1) {
        end -= 1;
    }
    let mut marked = vec![false; n];
    for m in &matches {
        marked[m.start..m.end].iter_mut().for_each(|x| *x = true);
    }
    let byte = |k: usize| if k < n { chars[k].byte } else { shown.len() };
    let mut parts = vec![String::new()];
    let mut k = start;
    while k < end {
        let on = marked[k];
        let mut j = k;
        while j < end && marked[j] == on {
            j += 1;
        }
        if on != (parts.len() % 2 == 0) {
            parts.push(String::new());
        }
        parts
            .last_mut()
            .expect("parts is never empty")
            .push_str(&shown[byte(k)..byte(j)]);
        k = j;
    }
    Snippet {
        parts,
        cut_start: start > 0,
        cut_end: end < n,
    }
}

/// A hit's title for display: its front matter `title` when it has a non-blank one, else a
/// readable form of its source file's name: the last path component of `source`, without its
/// extension (1–5 ASCII letters or digits after the last `.`) and its leading number (`16_`,
/// `03-`, `1. `), `_` and `-` as spaces, the first letter in upper case when it is ASCII
/// (`2. Gutenberg classics/shakespeare-hamlet.txt` → `Shakespeare hamlet`,
/// `16_When_Buckwheat_Flowers_Blossom.md` → `When Buckwheat Flowers Blossom`). When nothing
/// is left, the file name itself; for an empty source, `""`.
pub fn label(source: &str, title: Option<&str>) -> String {
    if let Some(t) = title.map(str::trim).filter(|t| !t.is_empty()) {
        return t.to_string();
    }
    let file = source.rsplit('/').next().unwrap_or(source);
    let mut name = file;
    if let Some((stem, ext)) = name.rsplit_once('.') {
        if !stem.is_empty()
            && (1..=5).contains(&ext.len())
            && ext.bytes().all(|b| b.is_ascii_alphanumeric())
        {
            name = stem;
        }
    }
    let digits = name.bytes().take_while(u8::is_ascii_digit).count();
    if digits > 0 {
        let rest = name[digits..]
            .trim_start_matches(['.', '_', '-', ')'])
            .trim_start();
        if rest.len() < name.len() - digits && !rest.is_empty() {
            name = rest;
        }
    }
    let words: Vec<&str> = name
        .split(['_', '-', ' '])
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = jikji_format::strs::join(&words, " ");
    if out.is_empty() {
        return file.to_string();
    }
    if let Some(first) = out.get(..1) {
        if first.bytes().all(|b| b.is_ascii_lowercase()) {
            out.replace_range(..1, &first.to_ascii_uppercase());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marked(s: &Snippet) -> Vec<&str> {
        s.marked().collect()
    }

    #[test]
    fn heading_markers_are_removed_and_whitespace_collapsed() {
        assert_eq!(
            display_text("# 論語\n\n## 學而篇第一\n\n子曰：「學而時習之」\n#hashtag ## closed ##"),
            "論語 學而篇第一 子曰：「學而時習之」 #hashtag ## closed ##"
        );
        assert_eq!(display_text("### Title ###\nbody"), "Title body");
        assert_eq!(display_text("####### seven"), "####### seven");
    }

    #[test]
    fn the_window_holds_the_most_distinct_terms() {
        let a = Analyzer::default();
        let text = format!("{}beta gamma{}", "alpha ".repeat(100), " delta".repeat(100));
        let s = snippet(&a, "alpha beta gamma", &text, 80);
        let m = marked(&s);
        assert!(
            m.contains(&"beta") && m.contains(&"gamma") && m.contains(&"alpha"),
            "{m:?}"
        );
        assert!(s.cut_start && s.cut_end);
        assert!(s.text().chars().count() <= 80);
    }

    /// Issue 16: a Korean query marked only the stem (`논어` of `논어를`); a reader expects the
    /// word, eojeol = stem + particle.
    #[test]
    fn korean_marks_the_whole_eojeol_not_the_stem() {
        let a = Analyzer::default();
        let text = "나는 논어를 읽었다. 논어는 공자의 말을 모은 책이다.";
        assert_eq!(
            marked(&snippet(&a, "논어를", text, 240)),
            ["논어를", "논어는"]
        );
        assert_eq!(
            marked(&snippet(&a, "논어", text, 240)),
            ["논어를", "논어는"]
        );
        let text = "공자가 말하였다. 공자께서 이르시되 배우고 때로 익히면 기쁘지 아니한가.";
        assert_eq!(
            marked(&snippet(&a, "공자가", text, 240)),
            ["공자가", "공자께서"]
        );
        // A longer lemma (a term of its own), and a one-syllable stem.
        let s = snippet(
            &a,
            "메밀꽃",
            "달밤에 메밀꽃을 보았다. 메밀꽃이 핀 산이 있다.",
            240,
        );
        assert_eq!(marked(&s), ["메밀꽃을", "메밀꽃이"]);
        assert_eq!(marked(&snippet(&a, "산", "산이 높다", 240)), ["산이"]);
    }

    #[test]
    fn a_korean_term_covering_part_of_the_lemma_marks_that_part() {
        let a = Analyzer::default();
        // `메밀` is in `메밀꽃을`, whose lemma is `메밀꽃`: only `메밀` is the query's.
        assert_eq!(
            marked(&snippet(&a, "메밀", "메밀꽃을 보았다", 240)),
            ["메밀"]
        );
        assert_eq!(
            marked(&snippet(&a, "논어", "논어집주를 읽었다", 240)),
            ["논어"]
        );
        assert_eq!(
            marked(&snippet(&a, "민국", "대한민국에서 왔다", 240)),
            ["민국"]
        );
    }

    #[test]
    fn han_folding_and_english_stems_still_mark() {
        let a = Analyzer::default();
        // Traditional query, Simplified text and the reverse (folded as the index folds them).
        assert_eq!(
            marked(&snippet(&a, "學而", "子曰：学而时习之", 240)),
            ["学而"]
        );
        assert_eq!(
            marked(&snippet(&a, "学而", "子曰：「學而時習之」", 240)),
            ["學而"]
        );
        assert_eq!(
            marked(&snippet(
                &a,
                "學而時習之",
                "子曰：「學而時習之，不亦說乎」",
                240
            )),
            ["學而時習之"]
        );
        // English by the stem: `father` marks `fathers`, `running` marks `run`.
        let s = snippet(
            &a,
            "father running",
            "Our fathers brought forth; we run.",
            240,
        );
        assert_eq!(marked(&s), ["fathers", "run"]);
    }

    #[test]
    fn labels() {
        assert_eq!(
            label("2. Gutenberg classics/shakespeare-hamlet.txt", None),
            "Shakespeare hamlet"
        );
        assert_eq!(
            label(
                "99. 온라인 자료 (정리 X)/16_When_Buckwheat_Flowers_Blossom.md",
                None
            ),
            "When Buckwheat Flowers Blossom"
        );
        assert_eq!(label("1. 漢文 古典/lunyu.md", Some("  ")), "Lunyu");
        assert_eq!(label("1. 漢文 古典/lunyu.md", Some("論語")), "論語");
        assert_eq!(label("a/2024.md", None), "2024");
        assert_eq!(label("a/b/봄봄.txt", None), "봄봄");
        assert_eq!(label("", None), "");
        assert_eq!(label("notes.backup-file", None), "Notes.backup file");
    }
}

//! Snippets and titles of hits (`jikji_engine::snippet`, what `<jikji-search>` shows) on real
//! chunks: the builder's chunker over real classics from ../shared/books (論語, Hamlet, a Korean
//! story), with the analyzer a bundle is built with. The window holds the query's matches, its
//! matched terms are marked as the index matches them (Traditional/Simplified folding, English
//! stems, Korean particles), Markdown heading markers are gone, and the window fits its width.

mod common;

use jikji_builder::chunker::{chunk_text, Chunk, ChunkParams};
use jikji_builder::corpus::{front_matter, skip_source_lines};
use jikji_engine::snippet::{label, snippet, Snippet, SNIPPET_WIDTH};
use jikji_format::analyzer::Analyzer;

fn chunks(rel: &str) -> Vec<Chunk> {
    let text = std::fs::read_to_string(common::shared_books().join(rel)).unwrap();
    let (_, fm_end) = front_matter(&text, 0);
    chunk_text(
        &text[skip_source_lines(&text, fm_end)..],
        ChunkParams::default(),
    )
}

/// The first chunk of `rel` whose text contains `needle`.
fn chunk_with(rel: &str, needle: &str) -> Chunk {
    chunks(rel)
        .into_iter()
        .find(|c| c.text.contains(needle))
        .unwrap_or_else(|| panic!("no chunk of {rel} contains {needle:?}"))
}

/// Display columns: CJK, Hangul and kana 2, anything else 1 (the snippet's own measure).
fn columns(s: &str) -> usize {
    s.chars()
        .map(|c| {
            let u = c as u32;
            if (0x1100..=0x115F).contains(&u)
                || (0x2E80..=0xA4CF).contains(&u)
                || (0xAC00..=0xD7A3).contains(&u)
                || (0xF900..=0xFAFF).contains(&u)
                || (0xFE30..=0xFE4F).contains(&u)
                || (0xFF00..=0xFF60).contains(&u)
                || (0xFFE0..=0xFFE6).contains(&u)
                || (0x20000..=0x3FFFD).contains(&u)
            {
                2
            } else {
                1
            }
        })
        .sum()
}

fn marked(s: &Snippet) -> Vec<&str> {
    s.marked().collect()
}

fn check_shape(s: &Snippet, chunk: &Chunk) {
    let text = s.text();
    assert!(!text.contains('#'), "heading marker left: {text:?}");
    assert!(!text.contains('\n'), "{text:?}");
    assert!(
        columns(&text) <= SNIPPET_WIDTH,
        "{} columns: {text:?}",
        columns(&text)
    );
    assert!(s.parts.len() % 2 == 1 || !s.parts.last().unwrap().is_empty());
    // The window is a piece of the chunk's text (whitespace collapsed).
    let flat: String = chunk.text.split_whitespace().collect::<Vec<_>>().join(" ");
    let window: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let flat = flat.replace("## ", "").replace("# ", "");
    assert!(flat.contains(&window), "{window:?} is not in {flat:?}");
}

#[test]
fn lunyu_marks_the_phrase_in_traditional_and_simplified_queries() {
    let a = Analyzer::default();
    let c = chunk_with("1. 漢文 古典/lunyu.md", "學而時習之");
    assert!(
        c.text.contains("# 論語"),
        "the first chunk has the headings: {:?}",
        c.text
    );
    for q in ["學而時習之", "学而时习之"] {
        let s = snippet(&a, q, &c.text, SNIPPET_WIDTH);
        check_shape(&s, &c);
        assert!(marked(&s).contains(&"學而時習之"), "{q}: {:?}", s.parts);
        assert!(
            s.text().starts_with("論語 學而篇第一"),
            "{q}: {:?}",
            s.text()
        );
        assert!(!s.cut_start && s.cut_end, "{q}: {s:?}");
    }
    // A later saying: the window moves to it and starts before it.
    let c = chunk_with("1. 漢文 古典/lunyu.md", "學而不思則罔");
    let s = snippet(&a, "思而不學則殆", &c.text, SNIPPET_WIDTH);
    check_shape(&s, &c);
    assert!(marked(&s).contains(&"思而不學則殆"), "{:?}", s.parts);
}

#[test]
fn hamlet_marks_stemmed_words_and_centres_the_window_on_them() {
    let a = Analyzer::default();
    let c = chunk_with(
        "2. Gutenberg classics/shakespeare-hamlet.txt",
        "Frailty, thy name is woman",
    );
    let s = snippet(&a, "frailties woman", &c.text, SNIPPET_WIDTH);
    check_shape(&s, &c);
    let m = marked(&s);
    assert!(
        m.contains(&"Frailty") && m.contains(&"woman"),
        "{:?}",
        s.parts
    );
    // A plural query marks the possessive in the text ("my poor father's body").
    let s = snippet(&a, "fathers", &c.text, SNIPPET_WIDTH);
    check_shape(&s, &c);
    assert_eq!(marked(&s), ["father"], "{:?}", s.parts);
    assert!(s.text().contains("father's"), "{:?}", s.text());
    // The chunk is longer than the window and the match is not at its start.
    assert!(c.text.chars().count() > SNIPPET_WIDTH);
    let start = c.text.find("father").unwrap();
    assert!(start > SNIPPET_WIDTH, "the test needs a late match");
    assert!(s.cut_start, "{s:?}");
    // Words are not cut at the window's edges.
    let text = s.text();
    let first = text.split(' ').next().unwrap();
    let flat: Vec<&str> = c.text.split_whitespace().collect();
    assert!(
        flat.contains(&first),
        "window starts inside a word: {first:?}"
    );
}

/// Issue 16: a Korean word (eojeol) is marked whole, particle included, when the query matches
/// its stem: `달밤을` marks `달밤에는`, not `달밤` alone.
#[test]
fn korean_marks_whole_words_with_their_particles() {
    let a = Analyzer::default();
    let rel = "99. 온라인 자료 (정리 X)/16_When_Buckwheat_Flowers_Blossom.md";
    let c = chunk_with(rel, "달밤에는");
    let s = snippet(&a, "달밤을", &c.text, SNIPPET_WIDTH);
    check_shape(&s, &c);
    let m = marked(&s);
    assert!(m.contains(&"달밤에는"), "{:?}", s.parts);
    let hangul = |c: Option<char>| c.is_some_and(|c| ('\u{ac00}'..='\u{d7a3}').contains(&c));
    for (i, w) in s.parts.iter().enumerate().skip(1).step_by(2) {
        let before = s.parts[i - 1].chars().next_back();
        let after = s.parts.get(i + 1).and_then(|p| p.chars().next());
        assert!(
            w.starts_with("달밤") && !hangul(before) && !hangul(after),
            "{w:?} is not a whole word of 달밤: {:?}",
            s.parts
        );
    }
    let c = chunk_with(rel, "장돌뱅이");
    // The analyzer reads 장돌뱅이 as 장돌뱅 + the particle 이 (in the query and in the text alike):
    // the word is marked whole.
    let s = snippet(&a, "장돌뱅이", &c.text, SNIPPET_WIDTH);
    check_shape(&s, &c);
    assert!(marked(&s).contains(&"장돌뱅이"), "{:?}", s.parts);
    // The title line of the story, without its heading marker.
    let c = chunk_with(rel, "# 메밀꽃 필 무렵");
    let s = snippet(&a, "메밀꽃", &c.text, SNIPPET_WIDTH);
    check_shape(&s, &c);
    assert!(s.text().starts_with("메밀꽃 필 무렵"), "{:?}", s.text());
    assert_eq!(marked(&s).first(), Some(&"메밀꽃"), "{:?}", s.parts);
}

#[test]
fn a_hit_without_a_matching_term_shows_the_start_of_its_chunk() {
    let a = Analyzer::default();
    let c = chunk_with("2. Gutenberg classics/shakespeare-hamlet.txt", "Frailty");
    let s = snippet(&a, "grief of a son", &c.text, SNIPPET_WIDTH);
    check_shape(&s, &c);
    assert!(!s.cut_start);
    let first_words: Vec<&str> = c.text.split_whitespace().take(3).collect();
    assert!(
        s.text().starts_with(&first_words.join(" ")),
        "{:?}",
        s.text()
    );
    let s = snippet(&a, "", "", SNIPPET_WIDTH);
    assert_eq!(s.parts, [""]);
}

#[test]
fn titles_of_the_real_files() {
    assert_eq!(label("1. 漢文 古典/lunyu.md", None), "Lunyu");
    assert_eq!(
        label("2. Gutenberg classics/shakespeare-hamlet.txt", None),
        "Shakespeare hamlet"
    );
    assert_eq!(
        label("99. 온라인 자료 (정리 X)/23_Spring_Spring.md", None),
        "Spring Spring"
    );
    assert_eq!(label("x/notes.md", Some("Field notes")), "Field notes");
}

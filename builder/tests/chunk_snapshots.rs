//! Snapshot tests of the chunkers on real classics from ../shared/books (論語 學而篇, the
//! first act of Hamlet, a Korean story written one sentence per line) and on a committed
//! fixture with a code fence, a table and questions (`fixtures/chunking/fences-and-tables.md`).
//! Each snapshot row holds a chunk's section, position in the section, heading path, char
//! offsets in the file, length, overlap with the previous chunk **and its text** (line by line), so a change
//! to the chunker shows up as a reviewable diff of the chunks themselves (as text-splitter's
//! snapshot tests do). The books are read from ../shared and are not committed.

mod common;

use jikji_builder::chunker::{chunk_text, Chunk, ChunkParams, Limits, Strategy, STRATEGY_NAMES};
use jikji_builder::corpus::{front_matter, skip_source_lines};
use serde::Serialize;

#[derive(Serialize)]
struct Row {
    section: u32,
    position: u32,
    heading_path: String,
    start: usize,
    end: usize,
    chars: usize,
    overlap: usize,
    /// The chunk text split at `\n` (joined with `\n` it is the text exactly), one YAML
    /// item per line so that a diff shows which lines moved.
    text: Vec<String>,
}

fn rows(chunks: &[Chunk]) -> Vec<Row> {
    let mut prev_end = 0usize;
    let mut prev_section = u32::MAX;
    chunks
        .iter()
        .map(|c| {
            let overlap = if c.section == prev_section {
                prev_end.saturating_sub(c.start)
            } else {
                0
            };
            prev_end = c.end;
            prev_section = c.section;
            Row {
                section: c.section,
                position: c.position,
                heading_path: c.heading_path.join(" › "),
                start: c.start,
                end: c.end,
                chars: c.end - c.start,
                overlap,
                text: c.text.split('\n').map(String::from).collect(),
            }
        })
        .collect()
}

fn read(rel: &str) -> String {
    let text = std::fs::read_to_string(common::shared_books().join(rel)).unwrap();
    let (_, fm_end) = front_matter(&text, 0);
    text[skip_source_lines(&text, fm_end)..].to_string()
}

/// The text between the first line equal to `from` and the next line starting with `until`.
fn slice(text: &str, from: &str, until: &str) -> String {
    let start = text
        .find(from)
        .unwrap_or_else(|| panic!("{from:?} not found"));
    let rest = &text[start + from.len()..];
    let end = rest
        .find(until)
        .map(|e| start + from.len() + e)
        .unwrap_or(text.len());
    text[start..end].to_string()
}

#[test]
fn lunyu_xue_er() {
    let text = read("1. 漢文 古典/lunyu.md");
    let part = slice(&text, "# 論語", "## 為政篇第二");
    insta::assert_yaml_snapshot!(rows(&chunk_text(&part, ChunkParams::default())));
}

/// This edition has no `ACT II.` line, so the first act's section runs up to `ACT III.`.
#[test]
fn hamlet_act_one() {
    let text = read("2. Gutenberg classics/shakespeare-hamlet.txt");
    let part = slice(&text, "ACT I.", "\nACT ");
    insta::assert_yaml_snapshot!(rows(&chunk_text(&part, ChunkParams::default())));
}

#[test]
fn korean_story_one_sentence_per_line() {
    let text = read("99. 온라인 자료 (정리 X)/16_When_Buckwheat_Flowers_Blossom.md");
    let chunks = chunk_text(&text, ChunkParams::default());
    assert!(chunks.iter().all(|c| c.text.chars().count() <= 512));
    insta::assert_yaml_snapshot!(rows(&chunks));
}

/// Every strategy on the fixture: a code fence and a table longer than a chunk (re-fenced
/// and header-repeating parts), a question kept with its answer. `parent-child` also shows
/// its parent sections.
#[test]
fn fences_and_tables_every_strategy() {
    let path = common::root().join("builder/tests/fixtures/chunking/fences-and-tables.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let params = ChunkParams::default();
    for name in STRATEGY_NAMES {
        let strategy = Strategy::parse(name, 4 * params.size).unwrap();
        let out = strategy.chunker().chunk(&text, &Limits::chars(params));
        insta::assert_yaml_snapshot!(format!("fences_and_tables_{name}"), rows(&out.chunks));
        if !out.parents.is_empty() {
            insta::assert_yaml_snapshot!(
                format!("fences_and_tables_{name}_parents"),
                rows(&out.parents)
            );
        }
    }
}

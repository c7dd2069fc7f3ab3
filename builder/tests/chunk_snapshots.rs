//! Snapshot tests of the default chunking on real classics from ../shared/books: 論語 學而篇,
//! the first act of Hamlet, and a Korean story (one sentence per line, no blank lines). The
//! snapshots hold each chunk's section, heading path, char offsets, length, overlap with the
//! previous chunk and a SHA-256 prefix of its text — not the text itself (the books are not
//! committed). Any change to the chunker's boundaries shows up as a reviewed snapshot diff.

mod common;

use jikji_builder::chunker::{chunk_text, Chunk, ChunkParams};
use jikji_builder::corpus::{front_matter, skip_source_lines};
use serde::Serialize;

#[derive(Serialize)]
struct Row {
    section: u32,
    heading_path: String,
    start: usize,
    end: usize,
    chars: usize,
    overlap: usize,
    sha: String,
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
                heading_path: c.heading_path.join(" › "),
                start: c.start,
                end: c.end,
                chars: c.end - c.start,
                overlap,
                sha: jikji_format::sha256_hex(c.text.as_bytes())[..12].to_string(),
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

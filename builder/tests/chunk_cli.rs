//! `jikji chunk --report` on a small corpus with a code fence, a table and headings, and
//! the token limit on a real classic with the real tokenizer.

mod common;

use std::process::Command;

use jikji_builder::chunker::{ChunkParams, Limits, Sizer, Strategy, TokenLimit, STRATEGY_NAMES};
use jikji_builder::corpus::{front_matter, skip_source_lines};
use jikji_builder::ingest::TokenSizer;

#[test]
fn chunk_report_compares_every_strategy() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("books/1. test");
    std::fs::create_dir_all(&dir).unwrap();
    let mut t = String::from("Source: https://example.org/x\n\n# Guide\n\n## Install\n\n");
    t.push_str(&"Some words about installing the tool. ".repeat(12));
    t.push_str("\n\n```sh\ncargo build --release\n./jikji --help\n```\n\n## Data\n\n| k | v |\n|---|---|\n| a | 1 |\n| b | 2 |\n\n");
    t.push_str(&"More words about the data and its fields. ".repeat(12));
    std::fs::write(dir.join("guide.md"), t).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args([
            "chunk",
            "--strategy",
            "all",
            "--report",
            "--json",
            "--no-embed",
        ])
        .args(["--chunk-size", "200", "--overlap", "40"])
        .arg(tmp.path().join("books"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    let names: Vec<&str> = rows
        .iter()
        .map(|r| r["strategy"].as_str().unwrap())
        .collect();
    assert_eq!(names, STRATEGY_NAMES);
    let row = |n: &str| rows.iter().find(|r| r["strategy"] == n).unwrap();
    for n in ["recursive", "heading", "hierarchical", "parent-child"] {
        let r = row(n);
        assert_eq!(
            (r["code_blocks"].as_u64(), r["code_blocks_intact"].as_u64()),
            (Some(1), Some(1)),
            "{n}"
        );
        assert_eq!(
            (r["tables"].as_u64(), r["tables_intact"].as_u64()),
            (Some(1), Some(1)),
            "{n}"
        );
        assert!(r["chars"]["max"].as_u64().unwrap() <= 200, "{n}");
        assert!(r["tokens"].is_null(), "--no-embed counts no tokens");
    }
    assert_eq!(row("heading")["overlap_chars"], 0);
    assert!(row("hierarchical")["overlap_chars"].as_u64().unwrap() > 0);
    assert!(row("parent-child")["parents"].as_u64().unwrap() >= 2);
    assert_eq!(
        row("hierarchical")["with_heading"],
        row("hierarchical")["chunks"]
    );

    // The markdown table of the same run.
    let out = Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(["chunk", "--strategy", "all", "--report", "--no-embed"])
        .arg(tmp.path().join("books"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("| strategy | chunks |"), "{text}");
    assert_eq!(
        text.lines().filter(|l| l.starts_with("| ")).count(),
        1 + STRATEGY_NAMES.len(),
        "{text}"
    );
}

/// 論語 at 2048 characters per chunk: counting characters only, chunks run past the model's
/// 512 tokens (the model would truncate them); with the tokenizer as second limit, none do.
#[test]
fn no_chunk_exceeds_the_model_max_tokens_on_a_real_classic() {
    let text =
        std::fs::read_to_string(common::shared_books().join("1. 漢文 古典/lunyu.md")).unwrap();
    let (_, fm_end) = front_matter(&text, 0);
    let body = &text[skip_source_lines(&text, fm_end)..];
    let sizer = TokenSizer::load(&common::root().join("models/e5-small")).unwrap();
    let params = ChunkParams {
        size: 2048,
        overlap: 128,
    };
    let max = jikji_embed::MAX_TOKENS;
    let over = |chunks: &[jikji_builder::chunker::Chunk]| {
        chunks.iter().filter(|c| sizer.len(&c.text) > max).count()
    };
    let chars_only = Strategy::Hierarchical
        .chunker()
        .chunk(body, &Limits::chars(params))
        .chunks;
    assert!(
        over(&chars_only) > 0,
        "the test text no longer needs the token limit"
    );
    for s in STRATEGY_NAMES {
        let limits = Limits {
            params,
            tokens: Some(TokenLimit { sizer: &sizer, max }),
        };
        let chunks = Strategy::parse(s, 4 * 2048)
            .unwrap()
            .chunker()
            .chunk(body, &limits)
            .chunks;
        assert_eq!(over(&chunks), 0, "{s}");
        assert!(chunks.iter().all(|c| c.text.chars().count() <= 2048), "{s}");
    }
}

/// Newcomer run: `--chunk-size 0` was reported as "--overlap (64) must be smaller than
/// --chunk-size (0)", naming the wrong option.
#[test]
fn chunk_size_zero_blamed_the_overlap() {
    let tmp = tempfile::tempdir().unwrap();
    for cmd in ["chunk", "build"] {
        let out = Command::new(env!("CARGO_BIN_EXE_jikji"))
            .args([cmd, "--chunk-size", "0", "--no-embed"])
            .arg(tmp.path())
            .args(if cmd == "build" {
                vec![
                    "--out".to_string(),
                    tmp.path().join("b").display().to_string(),
                ]
            } else {
                vec![]
            })
            .env_remove("RUST_BACKTRACE")
            .output()
            .unwrap();
        assert!(!out.status.success(), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--chunk-size must be at least 1"),
            "{cmd}: {err}"
        );
    }
}

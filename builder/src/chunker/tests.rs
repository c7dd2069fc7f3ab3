//! Unit, regression and property tests of the chunking strategies.

use super::*;

fn p(size: usize, overlap: usize) -> ChunkParams {
    ChunkParams { size, overlap }
}

#[test]
fn dashes_are_hard_boundaries() {
    let t = "aaa bbb\n\n---\n\nccc ddd\n";
    let c = chunk_text(t, p(100, 10));
    assert_eq!(c.len(), 2);
    assert_eq!(c[0].text, "aaa bbb");
    assert_eq!(c[1].text, "ccc ddd");
    assert_eq!((c[0].section, c[1].section), (0, 1));
}

#[test]
fn heading_path_drops_stale_deeper_levels() {
    let t = "# A\n\n## B\n\n### C\n\ntext c\n\n## D\n\ntext d\n";
    let c = chunk_text(t, p(100, 0));
    let last = c.last().unwrap();
    assert_eq!(last.heading_path, ["A", "D"]);
    assert!(last.text.starts_with("## D"));
    assert!(c.iter().any(|x| x.heading_path == ["A", "B", "C"]));
}

#[test]
fn hash_inside_code_fence_is_not_a_heading() {
    let t = "# Top\n\n```sh\n# comment\n```\n";
    let c = chunk_text(t, p(100, 0));
    assert!(c.iter().all(|x| x.heading_path == ["Top"]));
}

#[test]
fn chunks_never_exceed_size_and_are_exact_slices() {
    let t = "One. Two three four. Five six seven eight nine ten.\n\nEleven twelve. Thirteen!";
    let chars: Vec<char> = t.chars().collect();
    for size in [5, 10, 20, 40] {
        for c in chunk_text(t, p(size, 4)) {
            assert!(c.end - c.start <= size, "{c:?}");
            assert_eq!(c.text, chars[c.start..c.end].iter().collect::<String>());
        }
    }
}

#[test]
fn overlap_comes_from_previous_chunk() {
    let t = "aaaa bbbb cccc dddd. eeee ffff gggg hhhh. iiii jjjj kkkk llll.";
    let c = chunk_text(t, p(30, 8));
    assert!(c.len() >= 2);
    for w in c.windows(2) {
        assert!(
            w[1].start < w[0].end,
            "second chunk should start inside the first: {w:?}"
        );
        assert_eq!(
            t.chars().nth(w[1].start - 1),
            Some(' '),
            "overlap starts mid-word: {w:?}"
        );
    }
}

#[test]
fn chinese_without_spaces_splits_after_full_stops() {
    let t = "子曰：「學而時習之，不亦說乎？」有朋自遠方來，不亦樂乎。人不知而不慍，不亦君子乎。";
    let c = chunk_text(t, p(20, 0));
    assert!(c.len() >= 2);
    assert!(
        c[0].text.ends_with('」') || c[0].text.ends_with('。'),
        "{:?}",
        c[0].text
    );
}

#[test]
fn korean_one_sentence_per_line_without_blank_lines() {
    let t = "첫째 문장이다.\n둘째 문장이요.\n셋째 문장임.\n넷째 문장이다.\n";
    let c = chunk_text(t, p(17, 0));
    assert!(c.len() >= 2);
    assert!(c.iter().all(|x| x.text.chars().count() <= 17));
    assert_eq!(c[0].text, "첫째 문장이다.\n둘째 문장이요.");
}

#[test]
fn long_sentence_is_cut_at_the_limit() {
    let t = "x".repeat(25);
    let c = chunk_text(&t, p(10, 0));
    assert_eq!(
        c.iter().map(|x| x.text.len()).collect::<Vec<_>>(),
        [10, 10, 5]
    );
}

fn all_strategies() -> Vec<Strategy> {
    STRATEGY_NAMES
        .iter()
        .map(|n| Strategy::parse(n, 0).unwrap())
        .collect()
}

fn run(s: Strategy, text: &str, size: usize, overlap: usize) -> Chunked {
    s.chunker().chunk(text, &Limits::chars(p(size, overlap)))
}

// Regression tests, one per reported case.

#[test]
fn hash_in_code_fence_is_not_a_heading_in_any_strategy() {
    let t = "# Top\n\n```sh\n# comment\nls\n```\n\nafter\n";
    for s in all_strategies() {
        let c = run(s, t, 100, 0).chunks;
        assert!(
            c.iter().all(|x| x.heading_path == ["Top"]),
            "{}: {c:?}",
            s.name()
        );
    }
}

#[test]
fn stale_h3_dropped_after_new_h2() {
    let t = "# A\n\n## B\n\n### C\n\ntext c\n\n## D\n\ntext d\n";
    for name in ["heading", "hierarchical", "parent-child"] {
        let c = run(Strategy::parse(name, 0).unwrap(), t, 100, 0).chunks;
        let d = c.iter().find(|x| x.text.contains("text d")).unwrap();
        assert_eq!(d.heading_path, ["A", "D"], "{name}");
    }
}

#[test]
fn title_directly_followed_by_subheading_is_not_a_chunk_alone() {
    // `# 論語` made a 4-char chunk of its own.
    let t = "# 論語\n\n## 學而篇第一\n\n子曰：「學而時習之，不亦說乎？」\n";
    for s in all_strategies() {
        let c = run(s, t, 512, 64).chunks;
        assert_eq!(c.len(), 1, "{}: {c:?}", s.name());
        assert!(c[0].text.starts_with("# 論語"), "{}", s.name());
    }
    let c = chunk_text(t, ChunkParams::default());
    assert_eq!(c[0].heading_path, ["論語", "學而篇第一"]);
}

#[test]
fn heading_before_long_paragraph_leads_its_chunk() {
    let body = "word ".repeat(30);
    let t = format!("# Title\n\n{body}\n");
    let c = chunk_text(&t, p(60, 0));
    assert!(c[0].text.starts_with("# Title\n\nword"), "{c:?}");
    assert!(c.iter().all(|x| x.text.chars().count() <= 60));
}

#[test]
fn table_longer_than_limit_repeats_its_header() {
    let mut t = String::from("intro\n\n| name | value |\n|---|---|\n");
    for i in 0..30 {
        t.push_str(&format!("| row{i} | {i} |\n"));
    }
    t.push_str("\nafter\n");
    for name in ["recursive", "heading", "hierarchical", "parent-child"] {
        let c = run(Strategy::parse(name, 120).unwrap(), &t, 120, 20).chunks;
        let parts: Vec<&Chunk> = c.iter().filter(|x| x.text.contains("| row")).collect();
        assert!(parts.len() >= 2, "{name}: {c:?}");
        for x in &parts {
            assert!(x.text.chars().count() <= 120, "{name}: {x:?}");
            assert!(
                x.text.starts_with("| name | value |\n|---|---|\n"),
                "{name}: part without the header: {:?}",
                x.text
            );
            // Rows are never cut.
            assert!(
                x.text
                    .lines()
                    .filter(|l| l.starts_with('|'))
                    .all(|l| l.ends_with('|')),
                "{name}: {x:?}"
            );
        }
        // Every row is in some part.
        for i in 0..30 {
            assert!(
                parts
                    .iter()
                    .any(|x| x.text.contains(&format!("| row{i} |"))),
                "{name}: row{i}"
            );
        }
    }
}

#[test]
fn code_fence_longer_than_limit_is_refenced_between_lines() {
    let mut t = String::from("text\n\n```rust\n");
    for i in 0..40 {
        t.push_str(&format!("let x{i} = {i};\n"));
    }
    t.push_str("```\n");
    for name in ["recursive", "heading", "hierarchical", "parent-child"] {
        let c = run(Strategy::parse(name, 150).unwrap(), &t, 150, 20).chunks;
        let parts: Vec<&Chunk> = c.iter().filter(|x| x.text.contains("let x")).collect();
        assert!(parts.len() >= 2, "{name}");
        for x in &parts {
            assert!(x.text.chars().count() <= 150, "{name}: {x:?}");
            let lines: Vec<&str> = x.text.lines().collect();
            let open = lines.iter().position(|l| *l == "```rust").unwrap();
            assert_eq!(*lines.last().unwrap(), "```", "{name}: {:?}", x.text);
            assert!(
                lines[open + 1..lines.len() - 1]
                    .iter()
                    .all(|l| l.starts_with("let x") && l.ends_with(';')),
                "{name}: a line was cut: {:?}",
                x.text
            );
        }
    }
}

#[test]
fn small_code_fence_stays_whole() {
    let t = format!(
        "{}\n\n```py\nprint(1)\nprint(2)\n```\n\n{}\n",
        "a ".repeat(30),
        "b ".repeat(30)
    );
    for name in ["recursive", "heading", "hierarchical", "parent-child"] {
        let c = run(Strategy::parse(name, 200).unwrap(), &t, 70, 10).chunks;
        assert!(
            c.iter()
                .any(|x| x.text.contains("```py\nprint(1)\nprint(2)\n```")),
            "{name}: {c:?}"
        );
    }
}

#[test]
fn question_stays_with_its_answer() {
    let t = format!(
        "{}\n\nQ: How do I build a bundle?\n\nA: Run jikji build with a corpus folder.\n",
        "filler words here. ".repeat(3)
    );
    for name in ["recursive", "hierarchical", "parent-child"] {
        let c = run(Strategy::parse(name, 200).unwrap(), &t, 90, 0).chunks;
        let q = c.iter().find(|x| x.text.contains("Q: How")).unwrap();
        assert!(q.text.contains("A: Run jikji"), "{name}: {c:?}");
    }
}

#[test]
fn overlap_on_a_chunk_already_at_the_limit() {
    // The second paragraph is exactly the limit: no room for overlap, and no chunk over it.
    let a = "a".repeat(10);
    let b = "b".repeat(20);
    let t = format!("{a}\n\n{b}\n");
    for s in all_strategies() {
        let c = run(s, &t, 20, 8).chunks;
        assert!(
            c.iter().all(|x| x.text.chars().count() <= 20),
            "{}: {c:?}",
            s.name()
        );
    }
    let c = chunk_text(&t, p(20, 8));
    assert_eq!(c[1].text, b);
}

#[test]
fn chinese_without_spaces_or_ascii_punctuation() {
    let t = "學而時習之不亦說乎有朋自遠方來不亦樂乎人不知而不慍不亦君子乎".repeat(4);
    let chars: Vec<char> = t.chars().collect();
    for s in all_strategies() {
        let c = run(s, &t, 25, 5).chunks;
        assert!(c.len() >= 4, "{}", s.name());
        let mut covered = vec![false; chars.len()];
        for x in &c {
            assert!(x.text.chars().count() <= 25, "{}: {x:?}", s.name());
            covered[x.start..x.end].iter_mut().for_each(|v| *v = true);
        }
        assert!(covered.iter().all(|&v| v), "{}: text lost", s.name());
    }
}

#[test]
fn korean_one_sentence_per_line_no_blank_lines_all_strategies() {
    let t = "첫째 문장이다.\n둘째 문장이요.\n셋째 문장임.\n넷째 문장이다.\n다섯째 문장이다.\n";
    for name in ["recursive", "heading", "hierarchical"] {
        let c = run(Strategy::parse(name, 0).unwrap(), t, 17, 0).chunks;
        assert!(c.len() >= 3, "{name}");
        for x in &c {
            assert!(x.text.chars().count() <= 17);
            // Cut only at line ends: every chunk is whole lines.
            assert!(
                x.text.lines().all(|l| t.lines().any(|o| o == l)),
                "{name}: {x:?}"
            );
        }
    }
}

/// Counts whitespace-separated words: stands in for a model tokenizer.
struct Words;
impl Sizer for Words {
    fn len(&self, text: &str) -> usize {
        text.split_whitespace().count()
    }
}

#[test]
fn token_limit_applies_besides_chars() {
    let t = "a b c d e f g h i j k l m n o p q r s t u v w x y z. ".repeat(6);
    for s in all_strategies() {
        let limits = Limits {
            params: p(10_000, 4),
            tokens: Some(TokenLimit {
                sizer: &Words,
                max: 12,
            }),
        };
        let c = s.chunker().chunk(&t, &limits).chunks;
        assert!(c.len() >= 13, "{}: {}", s.name(), c.len());
        for x in &c {
            assert!(Words.len(&x.text) <= 12, "{}: {x:?}", s.name());
        }
    }
}

#[test]
fn parent_child_children_lie_in_their_parent() {
    let t = "# A\n\none two three. four five six. seven eight nine.\n\n## B\n\nten eleven twelve. thirteen.\n\n---\n\nfourteen fifteen.\n";
    let out = Strategy::ParentChild { parent_size: 200 }
        .chunker()
        .chunk(t, &Limits::chars(p(20, 0)));
    assert_eq!(out.parents.len(), 3, "{:?}", out.parents);
    assert!(out.chunks.len() > out.parents.len());
    for c in &out.chunks {
        let par = &out.parents[c.parent.unwrap()];
        assert!(par.start <= c.start && c.end <= par.end, "{c:?} {par:?}");
        assert_eq!(c.heading_path, par.heading_path);
        assert_eq!(c.section, par.section);
    }
    let mut ids: Vec<(u32, u32)> = out.chunks.iter().map(|c| (c.section, c.position)).collect();
    ids.dedup();
    assert_eq!(ids.len(), out.chunks.len(), "child positions repeat");
}

#[test]
fn report_counts_intact_fences_and_overlap() {
    let mut t = String::from("# T\n\n```\nshort\n```\n\n");
    t.push_str(&"word ".repeat(40));
    let chars = p(60, 10);
    let mut rows = Vec::new();
    for s in all_strategies() {
        let out = s.chunker().chunk(&t, &Limits::chars(chars));
        let mut b = report::StatsBuilder::new(s.name(), None);
        b.add(&t, &out);
        rows.push(b.finish());
    }
    let fixed = &rows[0];
    let hier = &rows[3];
    assert_eq!((hier.code_blocks, hier.code_blocks_intact), (1, 1));
    assert_eq!(hier.with_heading, hier.chunks);
    assert!(fixed.overlap_chars > 0 && hier.overlap_chars > 0);
    assert!(
        rows[2].overlap_chars == 0,
        "heading strategy has no overlap"
    );
    assert!(report::table(&rows).contains("| hierarchical |"));
}

mod properties {
    use super::super::{
        ChunkParams, Chunked, Limits, Strategy as ChunkingStrategy, STRATEGY_NAMES,
    };
    use proptest::prelude::*;

    /// Markdown-ish documents: paragraphs of words and CJK/Hangul runs, headings, `---`
    /// dividers, code fences, tables, FAQ questions, single newlines and blank lines.
    fn doc() -> impl Strategy<Value = String> {
        let word = prop_oneof![
            "[a-z]{1,12}",
            "[가-힣]{1,6}",
            "[一-龥]{1,20}",
            Just(".".to_string()),
            Just("。".to_string()),
            Just("다.".to_string()),
        ];
        let code_line = "[a-z]{1,8}\\(\\)?;?";
        let fence = (
            prop_oneof![Just("```"), Just("```rust"), Just("~~~py")],
            proptest::collection::vec(code_line, 1..25),
        )
            .prop_map(|(open, lines)| {
                let close = &open[..3];
                format!("{open}\n{}\n{close}", lines.join("\n"))
            });
        let table = proptest::collection::vec("[a-z0-9]{1,6}", 1..20).prop_map(|cells| {
            let mut t = String::from("| k | v |\n|---|---|");
            for (i, c) in cells.iter().enumerate() {
                t.push_str(&format!("\n| {i} | {c} |"));
            }
            t
        });
        let line = prop_oneof![
            8 => proptest::collection::vec(word, 1..30).prop_map(|w| w.join(" ")),
            1 => "#{1,3} [a-z]{1,8}".prop_map(String::from),
            1 => Just("---".to_string()),
            1 => fence,
            1 => table,
            1 => "Q: [a-z ]{1,20}\\?".prop_map(String::from),
            2 => Just(String::new()),
        ];
        proptest::collection::vec(line, 1..40).prop_map(|l| l.join("\n"))
    }

    /// Char ranges of divider lines outside code fences, and of every fence's lines.
    /// A fence line: start, end, and the room a part holding just that line needs.
    type FenceLine = (usize, usize, usize);

    fn structure(text: &str) -> (Vec<(usize, usize)>, Vec<Vec<FenceLine>>) {
        let chars: Vec<char> = text.chars().collect();
        let mut dividers = Vec::new();
        let mut fences = Vec::new();
        for item in super::super::scan::scan(&chars) {
            match item.kind {
                super::super::scan::ItemKind::Divider => dividers.push((item.s, item.e)),
                super::super::scan::ItemKind::Fence { opener, closer } => {
                    // Lines, with the room a part holding just that line needs.
                    let extra = opener.chars().count() + closer.chars().count() + 2;
                    let lines = super::super::scan::split_lines(&chars[item.s..item.e])
                        .into_iter()
                        .map(|(a, b)| (item.s + a, item.s + b, b - a + extra))
                        .collect();
                    fences.push(lines);
                }
                _ => {}
            }
        }
        (dividers, fences)
    }

    fn check(
        name: &str,
        text: &str,
        out: &Chunked,
        size: usize,
        overlap: usize,
    ) -> Result<(), TestCaseError> {
        let overlap = overlap.min(size / 2);
        let chars: Vec<char> = text.chars().collect();
        let (dividers, fences) = structure(text);
        let chunks = &out.chunks;
        let mut covered = vec![false; chars.len()];
        for (i, c) in chunks.iter().enumerate() {
            prop_assert!(
                c.text.chars().count() <= size,
                "{name}: chunk over size: {c:?}"
            );
            let slice: String = chars[c.start..c.end].iter().collect();
            prop_assert_eq!(
                &c.text,
                &format!("{}{}{}", c.prefix, slice, c.suffix),
                "{}",
                name
            );
            prop_assert!(
                !dividers.iter().any(|&(s, e)| c.start < e && s < c.end),
                "{name}: chunk crosses ---: {c:?}"
            );
            if i > 0 && chunks[i - 1].section == c.section && c.start < chunks[i - 1].end {
                prop_assert!(
                    chunks[i - 1].end - c.start <= overlap,
                    "{name}: overlap too long: {:?} {c:?}",
                    chunks[i - 1]
                );
            }
            if name != "fixed" {
                // A chunk boundary inside a fence falls at a line end, unless that line
                // re-fenced alone is longer than the limit.
                for lines in &fences {
                    for b in [c.start, c.end] {
                        if lines.iter().any(|&(_, _, need)| need > size) {
                            continue; // some line cannot fit re-fenced: cut as text
                        }
                        let mid_line = lines.iter().any(|&(ls, le, _)| ls < b && b < le);
                        prop_assert!(!mid_line, "{name}: fence split mid-line at {b}: {c:?}");
                    }
                }
            }
            covered[c.start..c.end].iter_mut().for_each(|v| *v = true);
        }
        // Concatenating the chunks minus their overlap gives back each section's text
        // (up to whitespace between pieces and the `---` lines).
        let mut sections: Vec<String> = vec![String::new()];
        let mut k = 0;
        for &(s, e) in &dividers {
            sections
                .last_mut()
                .unwrap()
                .extend(chars[k..s].iter().filter(|c| !c.is_whitespace()));
            sections.push(String::new());
            k = e;
        }
        sections
            .last_mut()
            .unwrap()
            .extend(chars[k..].iter().filter(|c| !c.is_whitespace()));
        let mut rebuilt: Vec<String> = vec![String::new(); sections.len()];
        let mut last_end: Option<(u32, usize)> = None;
        for c in chunks {
            let from = match last_end {
                Some((s, e)) if s == c.section => e.max(c.start),
                _ => c.start,
            };
            let from = from.min(c.end);
            rebuilt[c.section as usize]
                .extend(chars[from..c.end].iter().filter(|c| !c.is_whitespace()));
            last_end = Some((
                c.section,
                c.end
                    .max(last_end.filter(|l| l.0 == c.section).map_or(0, |l| l.1)),
            ));
        }
        for (i, (a, b)) in sections.iter().zip(&rebuilt).enumerate() {
            prop_assert_eq!(a, b, "{}: section {} not rebuilt", name, i);
        }
        for (k, ch) in chars.iter().enumerate() {
            let in_divider = dividers.iter().any(|&(s, e)| s <= k && k < e);
            prop_assert!(
                covered[k] || ch.is_whitespace() || in_divider,
                "{name}: char {k} {ch:?} is in no chunk"
            );
        }
        for c in &out.chunks {
            if let Some(pi) = c.parent {
                let par = &out.parents[pi];
                prop_assert!(
                    par.start <= c.start && c.end <= par.end,
                    "{name}: child outside its parent"
                );
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn every_strategy_respects_size_overlap_dividers_fences_and_covers_the_text(
            text in doc(), size in 8usize..200, overlap in 0usize..40
        ) {
            for name in STRATEGY_NAMES {
                let s = ChunkingStrategy::parse(name, size * 4).unwrap();
                let out = s.chunker().chunk(&text, &Limits::chars(ChunkParams { size, overlap }));
                check(name, &text, &out, size, overlap)?;
                if !out.parents.is_empty() {
                    check("parent-child parents", &text, &Chunked { chunks: out.parents.clone(), parents: vec![] }, size * 4, 0)?;
                }
            }
        }
    }
}

/// Session 31 newcomer run: `# Shipping FAQ`, then `Source: https://…`, then the sections
/// made a 65-character chunk of a heading and a URL, which hybrid search ranked first for
/// Korean questions about other pages. Every strategy leaves it out now; the heading stays
/// in the next chunks' heading path, and a chunk with text beside a source line is kept.
#[test]
fn a_title_and_source_line_became_a_chunk_of_their_own() {
    let text = "# Shipping FAQ\n\nSource: https://help.example/shipping/faq\n\n\
                ## What is the maximum parcel weight?\n\nThe maximum weight for a parcel is 30 kg.\n\n\
                ## Can I change the delivery address?\n\nYes, once, until it is out for delivery.\n";
    for name in STRATEGY_NAMES {
        let s = Strategy::parse(name, 2048).unwrap();
        let out = s.chunk_body(text, &Limits::chars(p(120, 16)));
        assert!(!out.chunks.is_empty(), "{name}");
        for c in &out.chunks {
            assert!(
                !is_metadata_only(&c.text),
                "{name}: a metadata-only chunk {:?}",
                c.text
            );
        }
        let weight = out
            .chunks
            .iter()
            .find(|c| c.text.contains("30 kg"))
            .unwrap_or_else(|| panic!("{name}: the weight answer is in no chunk"));
        if *name != "fixed" && *name != "recursive" {
            assert_eq!(weight.heading_path[0], "Shipping FAQ", "{name}");
        }
    }
    // A file of only a title and its source keeps it: found by its title, not dropped.
    for name in STRATEGY_NAMES {
        let s = Strategy::parse(name, 2048).unwrap();
        let out = s.chunk_body(
            "# Title only\n\nSource: https://x.example/a\n",
            &Limits::chars(p(120, 16)),
        );
        assert_eq!(out.chunks.len(), 1, "{name}");
    }
    assert!(is_metadata_only("# T\n\n출처 : 고객센터 공지"));
    assert!(is_metadata_only("## A\nSource: https://a.org/x\n"));
    assert!(!is_metadata_only("# Only a title"));
    assert!(!is_metadata_only(
        "# T\n\nSource: https://a.org\n\nA sentence."
    ));
    assert!(!is_metadata_only("#hashtag\nSource: https://a.org"));
}

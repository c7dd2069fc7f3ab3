//! Hierarchical chunking of one source file.
//!
//! Rules, in order of precedence:
//! 1. A line that is only `---` ends a *section*: no chunk (and no overlap) crosses it.
//! 2. A markdown heading (`#`…`######` + space, outside code fences) starts a new chunk
//!    and updates the heading path (a new `##` drops any deeper `###` from the path). The
//!    heading line is the first line of its chunk.
//! 3. Blank lines split paragraphs. A paragraph longer than the size limit splits into
//!    sentences: after `。！？` (plus closing quotes), after `. ! ?` followed by a space or
//!    a line end (which covers Korean final endings such as `다.` `요.` `함.`), and at
//!    newlines. A sentence longer than the limit is cut at the limit.
//! 4. Pieces are packed greedily into chunks of at most `size` characters (Unicode scalar
//!    values). Each chunk after the first of a heading block starts with up to `overlap`
//!    characters from the end of the previous chunk; the overlap shrinks rather than push
//!    a chunk past `size`.
//!
//! A chunk's text is always the exact slice `[start, end)` of the file (offsets in chars),
//! trimmed of surrounding whitespace.

/// Chunking limits, in characters (Unicode scalar values).
#[derive(Debug, Clone, Copy)]
pub struct ChunkParams {
    /// Maximum chunk length (default 512).
    pub size: usize,
    /// Characters repeated from the end of the previous chunk (default 64; < size).
    pub overlap: usize,
}

impl Default for ChunkParams {
    fn default() -> Self {
        ChunkParams {
            size: 512,
            overlap: 64,
        }
    }
}

/// One chunk of a file.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    /// `---`-delimited section index, from 0.
    pub section: u32,
    /// Position of the chunk within its section, from 0.
    pub position: u32,
    /// Heading texts (without `#`), outermost first.
    pub heading_path: Vec<String>,
    /// Start offset in chars, inclusive.
    pub start: usize,
    /// End offset in chars, exclusive.
    pub end: usize,
    /// `chars[start..end]` of the file.
    pub text: String,
}

/// Splits `text` into chunks. `params.overlap` must be smaller than `params.size`
/// (it is clamped to `size / 2` otherwise).
pub fn chunk_text(text: &str, params: ChunkParams) -> Vec<Chunk> {
    let size = params.size.max(1);
    let overlap = params.overlap.min(size / 2);
    let chars: Vec<char> = text.chars().collect();
    let lines = split_lines(&chars);

    let mut out = Vec::new();
    let mut headings: Vec<(usize, String)> = Vec::new();
    let mut section = 0u32;
    let mut position = 0u32;
    // Pieces of the current heading block, and the paragraph being collected.
    let mut block: Vec<(usize, usize)> = Vec::new();
    let mut para: Option<(usize, usize)> = None;
    let mut in_fence = false;

    // Ends the current heading block: its last paragraph becomes pieces, the pieces chunks.
    let end_block = |para: &mut Option<(usize, usize)>,
                     block: &mut Vec<(usize, usize)>,
                     section: u32,
                     position: &mut u32,
                     headings: &[(usize, String)],
                     out: &mut Vec<Chunk>| {
        flush_para(&chars, para, block, size);
        let path: Vec<String> = headings.iter().map(|(_, t)| t.clone()).collect();
        pack(&chars, block, size, overlap, section, position, &path, out);
        block.clear();
    };

    for &(ls, le) in &lines {
        let line: String = chars[ls..le].iter().collect();
        let trimmed = line.trim();
        let is_fence = trimmed.starts_with("```") || trimmed.starts_with("~~~");
        if !in_fence && trimmed == "---" {
            end_block(
                &mut para,
                &mut block,
                section,
                &mut position,
                &headings,
                &mut out,
            );
            section += 1;
            position = 0;
            continue;
        }
        if is_fence {
            in_fence = !in_fence;
        }
        if !in_fence && !is_fence {
            if let Some((level, title)) = heading(trimmed) {
                end_block(
                    &mut para,
                    &mut block,
                    section,
                    &mut position,
                    &headings,
                    &mut out,
                );
                while headings.last().is_some_and(|(l, _)| *l >= level) {
                    headings.pop();
                }
                headings.push((level, title));
                // The heading line is its own paragraph, the first of the new block.
                para = Some((ls, le));
                flush_para(&chars, &mut para, &mut block, size);
                continue;
            }
        }
        if trimmed.is_empty() && !in_fence {
            flush_para(&chars, &mut para, &mut block, size);
            continue;
        }
        para = Some(match para {
            Some((ps, _)) => (ps, le),
            None => (ls, le),
        });
    }
    end_block(
        &mut para,
        &mut block,
        section,
        &mut position,
        &headings,
        &mut out,
    );
    out
}

/// `(start, end)` char ranges of lines, without the line break.
fn split_lines(chars: &[char]) -> Vec<(usize, usize)> {
    let mut lines = Vec::new();
    let mut s = 0;
    for (i, &c) in chars.iter().enumerate() {
        if c == '\n' {
            let e = if i > s && chars[i - 1] == '\r' {
                i - 1
            } else {
                i
            };
            lines.push((s, e));
            s = i + 1;
        }
    }
    if s < chars.len() {
        lines.push((s, chars.len()));
    }
    lines
}

/// A markdown ATX heading: level and text.
fn heading(line: &str) -> Option<(usize, String)> {
    let level = line.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &line[level..];
    if !rest.is_empty() && !rest.starts_with(' ') && !rest.starts_with('\t') {
        return None;
    }
    let title = rest.trim().trim_end_matches('#').trim().to_string();
    Some((level, title))
}

fn trim_range(chars: &[char], mut s: usize, mut e: usize) -> (usize, usize) {
    while s < e && chars[s].is_whitespace() {
        s += 1;
    }
    while e > s && chars[e - 1].is_whitespace() {
        e -= 1;
    }
    (s, e)
}

/// Moves the finished paragraph into `block` as one piece, or as sentence pieces if it
/// is longer than `size`.
fn flush_para(
    chars: &[char],
    para: &mut Option<(usize, usize)>,
    block: &mut Vec<(usize, usize)>,
    size: usize,
) {
    let Some((ps, pe)) = para.take() else { return };
    let (ps, pe) = trim_range(chars, ps, pe);
    if ps == pe {
        return;
    }
    if pe - ps <= size {
        block.push((ps, pe));
        return;
    }
    for (ss, se) in sentences(chars, ps, pe) {
        let (ss, se) = trim_range(chars, ss, se);
        let mut s = ss;
        while s < se {
            let e = (s + size).min(se);
            let (a, b) = trim_range(chars, s, e);
            if a < b {
                block.push((a, b));
            }
            s = e;
        }
    }
}

const CLOSERS: &[char] = &['"', '\'', '”', '’', '」', '』', ')', '）', '》', '〉', ']'];

/// Sentence ranges covering `[s, e)`.
fn sentences(chars: &[char], s: usize, e: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = s;
    let mut i = s;
    while i < e {
        let c = chars[i];
        let mut cut = None;
        if c == '\n' {
            cut = Some(i + 1);
        } else if matches!(c, '。' | '！' | '？') {
            let mut j = i + 1;
            while j < e && CLOSERS.contains(&chars[j]) {
                j += 1;
            }
            cut = Some(j);
        } else if matches!(c, '.' | '!' | '?') {
            let mut j = i + 1;
            while j < e && CLOSERS.contains(&chars[j]) {
                j += 1;
            }
            if j == e || chars[j].is_whitespace() {
                cut = Some(j);
            }
        }
        if let Some(j) = cut {
            if j > start {
                out.push((start, j));
            }
            start = j;
            i = j;
        } else {
            i += 1;
        }
    }
    if start < e {
        out.push((start, e));
    }
    out
}

/// Moves an overlap start `os` forward (never past `ps`, the next piece's start) so the
/// overlap begins at a line or sentence start if the window has one, else at a word start;
/// text with neither (e.g. Chinese) keeps `os`.
fn snap_overlap(chars: &[char], os: usize, ps: usize) -> usize {
    // A candidate is useful only if some non-space text remains between it and `ps`.
    let useful = |i: usize| (i..ps).any(|j| !chars[j].is_whitespace());
    let sentence_start = |i: usize| {
        i > 0
            && (chars[i - 1] == '\n'
                || matches!(chars[i - 1], '。' | '！' | '？')
                || (matches!(chars[i - 1], '.' | '!' | '?') && chars[i].is_whitespace()))
    };
    if let Some(i) = (os..ps).find(|&i| sentence_start(i) && useful(i)) {
        return i;
    }
    if os > 0 && !chars[os - 1].is_whitespace() && !chars[os].is_whitespace() {
        if let Some(i) = (os..ps).find(|&i| chars[i].is_whitespace() && useful(i)) {
            return i;
        }
    }
    os
}

/// Packs the pieces of one heading block into chunks with overlap.
#[allow(clippy::too_many_arguments)]
fn pack(
    chars: &[char],
    pieces: &[(usize, usize)],
    size: usize,
    overlap: usize,
    section: u32,
    position: &mut u32,
    heading_path: &[String],
    out: &mut Vec<Chunk>,
) {
    let mut cur: Option<(usize, usize)> = None; // current chunk [start, end)
    let mut prev: Option<(usize, usize)> = None;
    let emit = |s: usize, e: usize, position: &mut u32, out: &mut Vec<Chunk>| {
        out.push(Chunk {
            section,
            position: *position,
            heading_path: heading_path.to_vec(),
            start: s,
            end: e,
            text: chars[s..e].iter().collect(),
        });
        *position += 1;
    };
    for &(ps, pe) in pieces {
        if let Some((cs, _)) = cur {
            if pe - cs <= size {
                cur = Some((cs, pe));
                continue;
            }
            let (s, e) = cur.take().unwrap();
            emit(s, e, position, out);
            prev = Some((s, e));
        }
        // Start a new chunk at this piece, with overlap from the previous chunk.
        let mut start = ps;
        if let Some((s0, e0)) = prev {
            if overlap > 0 {
                let want = e0.saturating_sub(overlap).max(s0 + 1);
                let fit = pe.saturating_sub(size);
                let os = want.max(fit);
                if os < ps {
                    start = trim_range(chars, snap_overlap(chars, os, ps), ps).0;
                }
            }
        }
        cur = Some((start, pe));
    }
    if let Some((s, e)) = cur {
        emit(s, e, position, out);
    }
}

#[cfg(test)]
mod tests {
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
        let t =
            "子曰：「學而時習之，不亦說乎？」有朋自遠方來，不亦樂乎。人不知而不慍，不亦君子乎。";
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
}

#[cfg(test)]
mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Markdown-ish documents: paragraphs of words and CJK/Hangul runs, headings, `---`
    /// dividers, single newlines and blank lines.
    fn doc() -> impl Strategy<Value = String> {
        let word = prop_oneof![
            "[a-z]{1,12}",
            "[가-힣]{1,6}",
            "[一-龥]{1,20}",
            Just(".".to_string()),
            Just("。".to_string()),
            Just("다.".to_string()),
        ];
        let line = prop_oneof![
            8 => proptest::collection::vec(word, 1..30).prop_map(|w| w.join(" ")),
            1 => "#{1,3} [a-z]{1,8}".prop_map(String::from),
            1 => Just("---".to_string()),
            2 => Just(String::new()),
        ];
        proptest::collection::vec(line, 1..40).prop_map(|l| l.join("\n"))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn chunks_respect_size_overlap_dividers_and_cover_the_text(text in doc(), size in 8usize..200, overlap in 0usize..40) {
            let params = ChunkParams { size, overlap };
            let overlap = overlap.min(size / 2);
            let chars: Vec<char> = text.chars().collect();
            let chunks = chunk_text(&text, params);
            // Char ranges of divider lines.
            let mut dividers = Vec::new();
            let mut pos = 0;
            for line in text.split('\n') {
                let n = line.chars().count();
                if line.trim() == "---" {
                    dividers.push((pos, pos + n));
                }
                pos += n + 1;
            }
            let mut covered = vec![false; chars.len()];
            for (i, c) in chunks.iter().enumerate() {
                prop_assert!(c.end - c.start <= size, "chunk over size: {c:?}");
                prop_assert_eq!(&c.text, &chars[c.start..c.end].iter().collect::<String>());
                prop_assert!(!dividers.iter().any(|&(s, e)| c.start < e && s < c.end), "chunk crosses ---: {c:?}");
                if i > 0 && chunks[i - 1].section == c.section && c.start < chunks[i - 1].end {
                    prop_assert!(chunks[i - 1].end - c.start <= overlap, "overlap too long: {:?} {c:?}", chunks[i - 1]);
                }
                for k in c.start..c.end {
                    covered[k] = true;
                }
            }
            for (k, ch) in chars.iter().enumerate() {
                let in_divider = dividers.iter().any(|&(s, e)| s <= k && k < e);
                prop_assert!(covered[k] || ch.is_whitespace() || in_divider, "char {k} {ch:?} is in no chunk");
            }
        }
    }
}

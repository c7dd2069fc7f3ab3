//! Line scanner shared by the strategies: a file's chars → structural items (dividers,
//! headings, paragraphs, code fences, tables). Blank lines only end paragraphs.

/// One structural item; `s..e` is its char range (whole lines, without the final line break).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Item {
    pub kind: ItemKind,
    pub s: usize,
    pub e: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ItemKind {
    /// A line that is only `---`.
    Divider,
    /// An ATX heading: level 1–6 and its text.
    Heading { level: usize, title: String },
    /// Consecutive non-blank lines that are nothing else.
    Para,
    /// A fenced code block from its opening line to its closing line (or the end of the
    /// file if unclosed). `opener` is the opening line trimmed (marker + info string),
    /// `closer` the marker (e.g. ```` ``` ````).
    Fence { opener: String, closer: String },
    /// A table: header row, delimiter row, body rows. `rows` are the row ranges.
    Table { rows: Vec<(usize, usize)> },
}

/// `(start, end)` char ranges of lines, without the line break (`\n` or `\r\n`).
pub(crate) fn split_lines(chars: &[char]) -> Vec<(usize, usize)> {
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
pub(crate) fn heading(line: &str) -> Option<(usize, String)> {
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

/// The fence marker of an opening line (```` ``` ```` or `~~~`, three or more), if any.
fn fence_marker(trimmed: &str) -> Option<String> {
    let c = trimmed.chars().next()?;
    if c != '`' && c != '~' {
        return None;
    }
    let n = trimmed.chars().take_while(|&x| x == c).count();
    (n >= 3).then(|| std::iter::repeat_n(c, n).collect())
}

/// True if `trimmed` closes a fence opened with `marker`.
fn closes(trimmed: &str, marker: &str) -> bool {
    let c = marker.chars().next().unwrap_or('`');
    let n = trimmed.chars().take_while(|&x| x == c).count();
    n >= marker.chars().count() && trimmed.chars().skip(n).all(char::is_whitespace)
}

/// A table delimiter row such as `|---|:--:|` or `--- | ---`.
fn is_delimiter_row(trimmed: &str) -> bool {
    trimmed.contains('-')
        && trimmed.contains('|')
        && trimmed
            .chars()
            .all(|c| matches!(c, '|' | '-' | ':' | ' ' | '\t'))
}

/// Trims whitespace off both ends of `s..e`.
pub(crate) fn trim_range(chars: &[char], mut s: usize, mut e: usize) -> (usize, usize) {
    while s < e && chars[s].is_whitespace() {
        s += 1;
    }
    while e > s && chars[e - 1].is_whitespace() {
        e -= 1;
    }
    (s, e)
}

/// Scans `chars` into items.
pub(crate) fn scan(chars: &[char]) -> Vec<Item> {
    let lines = split_lines(chars);
    let text = |(s, e): (usize, usize)| chars[s..e].iter().collect::<String>();
    let mut items = Vec::new();
    let mut para: Option<(usize, usize)> = None;
    let flush = |para: &mut Option<(usize, usize)>, items: &mut Vec<Item>| {
        if let Some((s, e)) = para.take() {
            items.push(Item {
                kind: ItemKind::Para,
                s,
                e,
            });
        }
    };
    let mut i = 0;
    while i < lines.len() {
        let (ls, le) = lines[i];
        let line = text(lines[i]);
        let trimmed = line.trim();
        if trimmed == "---" {
            flush(&mut para, &mut items);
            items.push(Item {
                kind: ItemKind::Divider,
                s: ls,
                e: le,
            });
            i += 1;
            continue;
        }
        if let Some(marker) = fence_marker(trimmed) {
            flush(&mut para, &mut items);
            let mut j = i + 1;
            while j < lines.len() && !closes(text(lines[j]).trim(), &marker) {
                j += 1;
            }
            let last = j.min(lines.len() - 1);
            items.push(Item {
                kind: ItemKind::Fence {
                    opener: trimmed.to_string(),
                    closer: marker,
                },
                s: ls,
                e: lines[last].1,
            });
            i = last + 1;
            continue;
        }
        if let Some((level, title)) = heading(trimmed) {
            flush(&mut para, &mut items);
            items.push(Item {
                kind: ItemKind::Heading { level, title },
                s: ls,
                e: le,
            });
            i += 1;
            continue;
        }
        if trimmed.starts_with('|')
            && i + 1 < lines.len()
            && is_delimiter_row(text(lines[i + 1]).trim())
        {
            flush(&mut para, &mut items);
            let mut rows = vec![lines[i], lines[i + 1]];
            let mut j = i + 2;
            while j < lines.len() && text(lines[j]).trim().starts_with('|') {
                rows.push(lines[j]);
                j += 1;
            }
            items.push(Item {
                kind: ItemKind::Table { rows },
                s: ls,
                e: lines[j - 1].1,
            });
            i = j;
            continue;
        }
        if trimmed.is_empty() {
            flush(&mut para, &mut items);
        } else {
            para = Some(match para {
                Some((ps, _)) => (ps, le),
                None => (ls, le),
            });
        }
        i += 1;
    }
    flush(&mut para, &mut items);
    items
}

/// Closing quotes and brackets that stay with the sentence they end.
pub(crate) const CLOSERS: &[char] = &['"', '\'', '”', '’', '」', '』', ')', '）', '》', '〉', ']'];

/// Sentence ranges covering `[s, e)`: cuts after `。！？` (plus closers), after `. ! ?`
/// (plus closers) followed by whitespace or the end, and after newlines.
pub(crate) fn sentences(chars: &[char], s: usize, e: usize) -> Vec<(usize, usize)> {
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

/// True if the paragraph text starts like a FAQ question (`Q:`, `Q.`, `Q1.`, `Question:`,
/// `**Q`, `질문:`, `문:`, `問:`).
pub(crate) fn is_question(text: &str) -> bool {
    let t = text.trim_start().trim_start_matches("**");
    let after_q = |rest: &str| {
        let rest = rest.trim_start_matches(|c: char| c.is_ascii_digit());
        rest.starts_with([':', '.', ')', '：'])
    };
    if let Some(rest) = t.strip_prefix('Q') {
        return after_q(rest);
    }
    let lower = t.to_lowercase();
    if lower.starts_with("question:") {
        return true;
    }
    for p in ["질문", "문", "問"] {
        if let Some(rest) = t.strip_prefix(p) {
            if rest.trim_start().starts_with([':', '：', '.']) {
                return true;
            }
        }
    }
    false
}

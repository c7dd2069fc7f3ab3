//! `fixed`: windows of `size` characters with `overlap`, blind to structure but `---`.

use super::scan::{scan, trim_range, ItemKind};
use super::{effective_overlap, Chunk, ChunkStrategy, Chunked, Limits};

/// The baseline: each `---` section is cut into consecutive windows of at most `size`
/// characters (and the token limit), each starting `overlap` characters before the end of
/// the previous one. Windows ignore headings, paragraphs, sentences, code fences and tables;
/// a chunk's heading path is the one in force at its start.
#[derive(Debug, Clone, Copy, Default)]
pub struct Fixed;

impl ChunkStrategy for Fixed {
    fn name(&self) -> &'static str {
        "fixed"
    }

    fn chunk(&self, text: &str, limits: &Limits) -> Chunked {
        let chars: Vec<char> = text.chars().collect();
        let size = limits.params.size.max(1);
        let overlap = effective_overlap(limits.params);
        // Sections between dividers, and the heading path in force from each heading on.
        let mut sections = Vec::new();
        let mut headings: Vec<(usize, Vec<String>)> = Vec::new();
        let mut stack: Vec<(usize, String)> = Vec::new();
        let mut from = 0;
        for item in scan(&chars) {
            match item.kind {
                ItemKind::Divider => {
                    sections.push((from, item.s));
                    from = item.e;
                }
                ItemKind::Heading { level, title } => {
                    while stack.last().is_some_and(|(l, _)| *l >= level) {
                        stack.pop();
                    }
                    stack.push((level, title));
                    headings.push((item.s, stack.iter().map(|(_, t)| t.clone()).collect()));
                }
                _ => {}
            }
        }
        sections.push((from, chars.len()));
        let path_at = |pos: usize| {
            let i = headings.partition_point(|(s, _)| *s <= pos);
            if i == 0 {
                Vec::new()
            } else {
                headings[i - 1].1.clone()
            }
        };
        let fits = |s: usize, e: usize| {
            e - s <= size
                && limits
                    .tokens
                    .is_none_or(|t| t.sizer.len(&chars[s..e].iter().collect::<String>()) <= t.max)
        };
        let mut out = Vec::new();
        for (section, &(a, b)) in sections.iter().enumerate() {
            let (mut s, b) = trim_range(&chars, a, b);
            let mut position = 0;
            while s < b {
                // Largest window end that fits (binary search; at least one char).
                let (mut lo, mut hi) = (s + 1, (s + size).min(b));
                while lo < hi {
                    let mid = lo + (hi - lo).div_ceil(2);
                    if fits(s, mid) {
                        lo = mid;
                    } else {
                        hi = mid - 1;
                    }
                }
                let e = lo;
                let (cs, ce) = trim_range(&chars, s, e);
                if cs < ce {
                    out.push(Chunk {
                        section: section as u32,
                        position,
                        heading_path: path_at(cs),
                        start: cs,
                        end: ce,
                        text: chars[cs..ce].iter().collect(),
                        prefix: String::new(),
                        suffix: String::new(),
                        parent: None,
                    });
                    position += 1;
                }
                if e >= b {
                    break;
                }
                let next = e.saturating_sub(overlap).max(s + 1);
                s = trim_range(&chars, next, b).0;
            }
        }
        Chunked {
            chunks: out,
            parents: Vec::new(),
        }
    }
}

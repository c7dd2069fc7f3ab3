//! The packing engine shared by `recursive`, `heading`, `hierarchical` and `parent-child`:
//! structural items → pieces (paragraphs or their sentences, lines, whole fences, whole
//! tables) → chunks packed greedily within the limits, with overlap, keeping headings and
//! questions with what follows, and splitting over-long fences and tables between lines.

use std::collections::VecDeque;

use super::scan::{is_question, scan, sentences, split_lines, trim_range, ItemKind};
use super::{Chunk, Limits};

/// How a strategy drives the engine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opts {
    /// Headings end the block being packed (no chunk spans two heading sections).
    pub heading_blocks: bool,
    /// How running text is cut into pieces.
    pub units: Units,
    /// Overlap in chars.
    pub overlap: usize,
}

/// Pieces of running text, coarsest first; each level is used only for what does not fit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Units {
    /// Paragraphs, then sentences, then the limit (`hierarchical`).
    Paragraphs,
    /// Lines, then sentences, then the limit (`heading`).
    Lines,
    /// Paragraphs, then lines, then words, then the limit (`recursive`, as LangChain's
    /// separators `\n\n`, `\n`, ` `, ``).
    Recursive,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// Running text.
    Text,
    /// A heading or a FAQ question: never the last piece of a chunk when more follows.
    Lead,
    /// A code fence; `opener` is its opening line, `closer` its marker.
    Fence { opener: String, closer: String },
    /// A table; `header` is the header and delimiter rows, `rows` every row's range.
    Table {
        header: String,
        rows: Vec<(usize, usize)>,
    },
}

/// A piece (or the rest of a split piece): `prefix + chars[s..e]`.
#[derive(Debug, Clone)]
pub(crate) struct Piece {
    s: usize,
    e: usize,
    prefix: String,
    kind: Kind,
    path: usize,
}

/// The chunk being filled.
struct Cur {
    s: usize,
    e: usize,
    prefix: String,
    suffix: String,
    path: usize,
    /// Nothing may be appended (a suffix was added, or the rest of a split piece follows).
    closed: bool,
    /// Start of the trailing run of lead pieces, its path, and the end before it.
    lead: Option<(usize, usize, usize)>,
    /// End of the last piece that is not running text (overlap never reaches before it).
    floor: usize,
}

/// Chunks `text` with the shared engine.
pub(crate) fn structured(text: &str, limits: &Limits, opts: Opts) -> Vec<Chunk> {
    let chars: Vec<char> = text.chars().collect();
    let items = scan(&chars);
    let mut p = Packer {
        chars: &chars,
        limits,
        overlap: opts.overlap,
        paths: vec![Vec::new()],
        out: Vec::new(),
    };
    let mut stack: Vec<(usize, String)> = Vec::new();
    let mut path = 0usize;
    let mut block: Vec<Piece> = Vec::new();
    let (mut section, mut position) = (0u32, 0u32);
    for item in items {
        match item.kind {
            ItemKind::Divider => {
                p.pack(std::mem::take(&mut block), section, &mut position);
                section += 1;
                position = 0;
            }
            ItemKind::Heading { level, title } => {
                while stack.last().is_some_and(|(l, _)| *l >= level) {
                    stack.pop();
                }
                stack.push((level, title));
                p.paths.push(stack.iter().map(|(_, t)| t.clone()).collect());
                path = p.paths.len() - 1;
                if opts.heading_blocks {
                    // A block of headings only (a title directly followed by a subheading)
                    // is carried into the next block: it leads that block's first chunk.
                    if !block.is_empty() && block.iter().all(|x| x.kind == Kind::Lead) {
                        for x in &mut block {
                            x.path = path;
                        }
                    } else {
                        p.pack(std::mem::take(&mut block), section, &mut position);
                    }
                }
                let (s, e) = trim_range(&chars, item.s, item.e);
                block.push(Piece {
                    s,
                    e,
                    prefix: String::new(),
                    kind: Kind::Lead,
                    path,
                });
            }
            ItemKind::Para => {
                let t: String = chars[item.s..item.e].iter().collect();
                let kind = if is_question(&t) {
                    Kind::Lead
                } else {
                    Kind::Text
                };
                p.text_pieces(item.s, item.e, kind, path, opts.units, &mut block);
            }
            ItemKind::Fence { opener, closer } => block.push(Piece {
                s: item.s,
                e: item.e,
                prefix: String::new(),
                kind: Kind::Fence { opener, closer },
                path,
            }),
            ItemKind::Table { rows } => {
                let row = |(a, b): (usize, usize)| {
                    let (a, b) = trim_range(&chars, a, b);
                    chars[a..b].iter().collect::<String>()
                };
                let header = format!("{}\n{}", row(rows[0]), row(rows[1]));
                let (s, e) = trim_range(&chars, item.s, item.e);
                block.push(Piece {
                    s,
                    e,
                    prefix: String::new(),
                    kind: Kind::Table { header, rows },
                    path,
                });
            }
        }
    }
    p.pack(block, section, &mut position);
    p.out
}

struct Packer<'a, 'b> {
    chars: &'a [char],
    limits: &'a Limits<'b>,
    overlap: usize,
    paths: Vec<Vec<String>>,
    out: Vec<Chunk>,
}

impl Packer<'_, '_> {
    fn size(&self) -> usize {
        self.limits.params.size.max(1)
    }

    /// True if `prefix + chars[s..e] + suffix` is within the limits.
    fn fits(&self, prefix: &str, s: usize, e: usize, suffix: &str) -> bool {
        let n = prefix.chars().count() + (e - s) + suffix.chars().count();
        if n > self.size() {
            return false;
        }
        match self.limits.tokens {
            None => true,
            Some(t) => {
                let mut text = String::with_capacity(4 * n);
                text.push_str(prefix);
                text.extend(&self.chars[s..e]);
                text.push_str(suffix);
                t.sizer.len(&text) <= t.max
            }
        }
    }

    /// Largest `x` in `lo..=hi` with `fits(prefix, s, x, suffix)`, by binary search (the
    /// length of a prefix grows with it in chars and, all but always, in tokens).
    fn largest_fit(
        &self,
        prefix: &str,
        s: usize,
        lo: usize,
        hi: usize,
        suffix: &str,
    ) -> Option<usize> {
        let (mut lo, mut hi) = (lo, hi);
        if lo > hi || !self.fits(prefix, s, lo, suffix) {
            return None;
        }
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            if self.fits(prefix, s, mid, suffix) {
                lo = mid;
            } else {
                hi = mid - 1;
            }
        }
        Some(lo)
    }

    /// Pieces of the text range `s..e` (a paragraph), cut by `units`; a unit still too
    /// long is cut at the limit.
    fn text_pieces(
        &self,
        s: usize,
        e: usize,
        kind: Kind,
        path: usize,
        units: Units,
        out: &mut Vec<Piece>,
    ) {
        let (s, e) = trim_range(self.chars, s, e);
        if s == e {
            return;
        }
        let mut push = |a: usize, b: usize| {
            let (a, b) = trim_range(self.chars, a, b);
            if a < b {
                out.push(Piece {
                    s: a,
                    e: b,
                    prefix: String::new(),
                    kind: kind.clone(),
                    path,
                });
            }
        };
        if units != Units::Lines && self.fits("", s, e, "") {
            push(s, e);
            return;
        }
        let lines = || {
            split_lines(&self.chars[s..e])
                .into_iter()
                .map(move |(a, b)| (s + a, s + b))
        };
        let pieces: Vec<(usize, usize)> = match units {
            Units::Paragraphs => sentences(self.chars, s, e),
            Units::Lines => lines()
                .flat_map(|(a, b)| {
                    if self.fits("", a, b, "") {
                        vec![(a, b)]
                    } else {
                        sentences(self.chars, a, b)
                    }
                })
                .collect(),
            Units::Recursive => lines()
                .flat_map(|(a, b)| {
                    if self.fits("", a, b, "") {
                        vec![(a, b)]
                    } else {
                        words(self.chars, a, b)
                    }
                })
                .collect(),
        };
        for (a, b) in pieces {
            let (mut a, b) = trim_range(self.chars, a, b);
            while a < b {
                if self.fits("", a, b, "") {
                    push(a, b);
                    break;
                }
                let hi = (a + self.size()).min(b);
                let x = self.largest_fit("", a, a + 1, hi, "").unwrap_or(a + 1);
                push(a, x);
                a = x;
            }
        }
    }

    /// Splits piece `p` so that its head fits after `prefix + chars[cs..p.s]`. Returns the
    /// head's end, the suffix the head needs, and the rest (with the prefix it needs).
    /// `force`: always make progress (hard cut if no line or word boundary fits);
    /// otherwise `None` when nothing fits.
    fn cut(
        &self,
        p: &Piece,
        prefix: &str,
        cs: usize,
        force: bool,
    ) -> Option<(usize, String, Option<Piece>)> {
        let chars = self.chars;
        let rest_piece = |s: usize, pre: String, kind: Kind| {
            let (s, e) = if pre.is_empty() {
                trim_range(chars, s, p.e)
            } else {
                (s, p.e)
            };
            (s < e).then_some(Piece {
                s,
                e,
                prefix: pre,
                kind,
                path: p.path,
            })
        };
        match &p.kind {
            Kind::Fence { opener, closer } => {
                let lines: Vec<(usize, usize)> = split_lines(&chars[p.s..p.e])
                    .into_iter()
                    .map(|(a, b)| (p.s + a, p.s + b))
                    .collect();
                let n = lines.len();
                let closed_here = n >= 2 && {
                    let (a, b) = lines[n - 1];
                    let t: String = chars[a..b].iter().collect();
                    t.trim() == closer.as_str()
                };
                let content_last = if closed_here { n - 2 } else { n - 1 };
                let j_min = usize::from(p.prefix.is_empty());
                let suffix = format!("\n{closer}");
                // Largest j in j_min..content_last whose line end fits.
                let mut best = None;
                let (mut lo, mut hi) = (j_min as isize, content_last as isize - 1);
                while lo <= hi {
                    let mid = (lo + hi) / 2;
                    if self.fits(prefix, cs, lines[mid as usize].1, &suffix) {
                        best = Some(mid as usize);
                        lo = mid + 1;
                    } else {
                        hi = mid - 1;
                    }
                }
                if let Some(j) = best {
                    let rest = rest_piece(lines[j + 1].0, format!("{opener}\n"), p.kind.clone());
                    return Some((lines[j].1, suffix, rest));
                }
            }
            Kind::Table { header, rows } => {
                let rows: Vec<(usize, usize)> =
                    rows.iter().copied().filter(|r| r.0 >= p.s).collect();
                let j_min = if p.prefix.is_empty() { 2 } else { 0 };
                let mut best = None;
                let (mut lo, mut hi) = (j_min as isize, rows.len() as isize - 2);
                while lo <= hi {
                    let mid = (lo + hi) / 2;
                    if self.fits(prefix, cs, rows[mid as usize].1, "") {
                        best = Some(mid as usize);
                        lo = mid + 1;
                    } else {
                        hi = mid - 1;
                    }
                }
                if let Some(j) = best {
                    let rest = rest_piece(rows[j + 1].0, format!("{header}\n"), p.kind.clone());
                    return Some((rows[j].1, String::new(), rest));
                }
            }
            Kind::Text | Kind::Lead => {
                let hi = (cs + self.size()).min(p.e.saturating_sub(1));
                let fit = self.largest_fit(prefix, cs, p.s + 1, hi, "");
                if let Some(mut x) = fit {
                    if !force {
                        // Filling the space after a heading: end at a word or sentence
                        // boundary in the second half of the head, if there is one.
                        let half = p.s + (x - p.s) / 2;
                        if let Some(b) = (half + 1..=x).rev().find(|&i| {
                            chars[i - 1].is_whitespace()
                                || matches!(chars[i - 1], '。' | '！' | '？' | '，' | '、')
                        }) {
                            x = b;
                        }
                    }
                    let rest = rest_piece(x, String::new(), p.kind.clone());
                    return Some((x, String::new(), rest));
                }
            }
        }
        if !force {
            return None;
        }
        // Nothing fits at a line, row or word boundary (one line longer than the limit):
        // cut the rest as plain text at the limit.
        let hi = (cs + self.size()).min(p.e.saturating_sub(1));
        let x = self
            .largest_fit(prefix, cs, p.s + 1, hi, "")
            .unwrap_or(p.s + 1);
        let rest = rest_piece(x, String::new(), Kind::Text);
        Some((x, String::new(), rest))
    }

    fn emit(&mut self, c: &Cur, section: u32, position: &mut u32) -> Option<(usize, usize)> {
        let (s, e) = if c.prefix.is_empty() {
            trim_range(self.chars, c.s, c.e)
        } else {
            (c.s, trim_range(self.chars, c.s, c.e).1.max(c.s))
        };
        if s == e && c.prefix.is_empty() && c.suffix.is_empty() {
            return None;
        }
        let mut text = c.prefix.clone();
        text.extend(&self.chars[s..e]);
        text.push_str(&c.suffix);
        self.out.push(Chunk {
            section,
            position: *position,
            heading_path: self.paths[c.path].clone(),
            start: s,
            end: e,
            text,
            prefix: c.prefix.clone(),
            suffix: c.suffix.clone(),
            parent: None,
        });
        *position += 1;
        Some((s, e))
    }

    /// Start of a new chunk whose first piece is `p` (ending at `e` with `suffix`): up to
    /// `overlap` chars from the previous chunk `prev`, snapped to a sentence or word start,
    /// if the result still fits. Only running text gets overlap: headings, questions, code
    /// fences and tables start their chunk.
    fn overlap_start(
        &self,
        prev: Option<(usize, usize, usize)>,
        p: &Piece,
        e: usize,
        suffix: &str,
    ) -> usize {
        let Some((s0, e0, floor)) = prev else {
            return p.s;
        };
        if self.overlap == 0 || !p.prefix.is_empty() || p.kind != Kind::Text {
            return p.s;
        }
        let want = e0.saturating_sub(self.overlap).max(s0 + 1);
        let fit = (e + suffix.chars().count()).saturating_sub(self.size());
        let os = want.max(fit).max(floor);
        if os >= p.s {
            return p.s;
        }
        let start = trim_range(self.chars, snap_overlap(self.chars, os, p.s), p.s).0;
        if start < p.s && self.fits("", start, e, suffix) {
            start
        } else {
            p.s
        }
    }

    /// Packs the pieces of one block into chunks.
    fn pack(&mut self, pieces: Vec<Piece>, section: u32, position: &mut u32) {
        let mut q: VecDeque<Piece> = pieces.into();
        let mut cur: Option<Cur> = None;
        let mut prev: Option<(usize, usize, usize)> = None;
        while let Some(p) = q.pop_front() {
            if let Some(c) = cur.as_mut() {
                let appendable = !c.closed && p.prefix.is_empty();
                if appendable && self.fits(&c.prefix, c.s, p.e, "") {
                    if p.kind == Kind::Lead {
                        match c.lead {
                            None => c.lead = Some((p.s, p.path, c.e)),
                            // Headings only so far: the chunk takes the innermost path.
                            Some((ls, _, _)) if ls == c.s => c.path = p.path,
                            _ => {}
                        }
                    } else {
                        c.lead = None;
                    }
                    if p.kind != Kind::Text {
                        c.floor = p.e;
                    }
                    c.e = p.e;
                    continue;
                }
                if appendable {
                    if let Some((ls, lpath, before)) = c.lead {
                        if ls > c.s {
                            // The trailing headings or question lead the next chunk.
                            let c = cur.take().unwrap();
                            let lead_end = c.e;
                            let c = Cur { e: before, ..c };
                            prev = self
                                .emit(&c, section, position)
                                .map(|(s, e)| (s, e, c.floor))
                                .or(prev);
                            q.push_front(p);
                            q.push_front(Piece {
                                s: ls,
                                e: lead_end,
                                prefix: String::new(),
                                kind: Kind::Lead,
                                path: lpath,
                            });
                            continue;
                        }
                        // The chunk holds only headings/question: fill it with the head of `p`.
                        let (cp, cs) = (c.prefix.clone(), c.s);
                        if let Some((x, suffix, rest)) = self.cut(&p, &cp, cs, false) {
                            let c = cur.take().unwrap();
                            let c = Cur { e: x, suffix, ..c };
                            prev = self
                                .emit(&c, section, position)
                                .map(|(s, e)| (s, e, c.floor))
                                .or(prev);
                            if let Some(r) = rest {
                                q.push_front(r);
                            }
                            continue;
                        }
                    }
                }
                let c = cur.take().unwrap();
                prev = self
                    .emit(&c, section, position)
                    .map(|(s, e)| (s, e, c.floor))
                    .or(prev);
            }
            // Start a new chunk with `p`.
            let (e, suffix, rest) = if self.fits(&p.prefix, p.s, p.e, "") {
                (p.e, String::new(), None)
            } else {
                self.cut(&p, &p.prefix, p.s, true).unwrap()
            };
            let s = self.overlap_start(prev, &p, e, &suffix);
            cur = Some(Cur {
                s,
                e,
                prefix: p.prefix.clone(),
                closed: !suffix.is_empty() || rest.is_some(),
                suffix,
                path: p.path,
                lead: (p.kind == Kind::Lead).then_some((s, p.path, s)),
                floor: if p.kind == Kind::Text { s } else { e },
            });
            if let Some(r) = rest {
                q.push_front(r);
            }
        }
        if let Some(c) = cur {
            self.emit(&c, section, position);
        }
    }
}

/// Word ranges covering `[s, e)`: each word with the whitespace after it.
fn words(chars: &[char], s: usize, e: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = s;
    for i in s + 1..e {
        if chars[i - 1].is_whitespace() && !chars[i].is_whitespace() {
            out.push((start, i));
            start = i;
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
pub(crate) fn snap_overlap(chars: &[char], os: usize, ps: usize) -> usize {
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

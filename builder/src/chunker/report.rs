//! Chunking statistics: what `jikji chunk --report` prints per strategy and what the build
//! summary prints for the strategy it used.

use serde::Serialize;

use super::scan::{scan, trim_range, ItemKind};
use super::{Chunked, Sizer};

/// Median, 95th percentile and maximum of a length distribution (nearest-rank on the
/// sorted values, as `eval::percentile`). All 0 for no values.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Dist {
    /// Median.
    pub median: usize,
    /// 95th percentile.
    pub p95: usize,
    /// Maximum.
    pub max: usize,
}

impl Dist {
    /// The distribution of `values` (sorted here).
    pub fn of(values: &mut [usize]) -> Dist {
        if values.is_empty() {
            return Dist::default();
        }
        values.sort_unstable();
        let at = |q: f64| values[((values.len() as f64 - 1.0) * q).round() as usize];
        Dist {
            median: at(0.5),
            p95: at(0.95),
            max: values[values.len() - 1],
        }
    }
}

/// Statistics of one strategy over a corpus.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ChunkStats {
    /// Strategy name.
    pub strategy: String,
    /// Files chunked.
    pub files: usize,
    /// Chunks indexed (children for `parent-child`).
    pub chunks: usize,
    /// Parent sections (`parent-child`; else 0).
    pub parents: usize,
    /// Chunk text length in chars.
    pub chars: Dist,
    /// Chunk length in model tokens (`passage: ` prefix and specials included), if a
    /// tokenizer was given.
    pub tokens: Option<Dist>,
    /// Chunks over the model's token limit (the model would truncate them), if a tokenizer
    /// was given.
    pub truncated: Option<usize>,
    /// Fenced code blocks in the corpus.
    pub code_blocks: usize,
    /// Code blocks lying whole inside one chunk.
    pub code_blocks_intact: usize,
    /// Tables in the corpus.
    pub tables: usize,
    /// Tables lying whole inside one chunk.
    pub tables_intact: usize,
    /// Chunks with a non-empty heading path.
    pub with_heading: usize,
    /// Chars of chunk text also in the previous chunk of the same section (overlap).
    pub overlap_chars: usize,
    /// Chars of all chunk texts.
    pub total_chars: usize,
}

impl ChunkStats {
    /// Share of chunks with a heading path, 0..1.
    pub fn heading_share(&self) -> f64 {
        self.with_heading as f64 / self.chunks.max(1) as f64
    }

    /// Share of chunk text duplicated by overlap, 0..1.
    pub fn overlap_share(&self) -> f64 {
        self.overlap_chars as f64 / self.total_chars.max(1) as f64
    }
}

/// Accumulates [`ChunkStats`] file by file.
pub struct StatsBuilder<'a> {
    stats: ChunkStats,
    chars: Vec<usize>,
    tokens: Vec<usize>,
    sizer: Option<(&'a dyn Sizer, usize)>,
}

impl<'a> StatsBuilder<'a> {
    /// Starts the statistics of `strategy`; `tokens` is the model's tokenizer and its
    /// maximum (chunks are counted with it), if any.
    pub fn new(strategy: &str, tokens: Option<(&'a dyn Sizer, usize)>) -> Self {
        StatsBuilder {
            stats: ChunkStats {
                strategy: strategy.to_string(),
                truncated: tokens.map(|_| 0),
                ..Default::default()
            },
            chars: Vec::new(),
            tokens: Vec::new(),
            sizer: tokens,
        }
    }

    /// Adds one file: its body `text` and what the strategy made of it.
    pub fn add(&mut self, text: &str, out: &Chunked) {
        let s = &mut self.stats;
        s.files += 1;
        s.chunks += out.chunks.len();
        s.parents += out.parents.len();
        let chars: Vec<char> = text.chars().collect();
        for item in scan(&chars) {
            let (a, b) = trim_range(&chars, item.s, item.e);
            let whole = out.chunks.iter().any(|c| c.start <= a && b <= c.end);
            match item.kind {
                ItemKind::Fence { .. } => {
                    s.code_blocks += 1;
                    s.code_blocks_intact += usize::from(whole);
                }
                ItemKind::Table { .. } => {
                    s.tables += 1;
                    s.tables_intact += usize::from(whole);
                }
                _ => {}
            }
        }
        let mut prev: Option<(u32, usize)> = None;
        for c in &out.chunks {
            let n = c.text.chars().count();
            self.chars.push(n);
            s.total_chars += n;
            if let Some((section, end)) = prev {
                if section == c.section && c.start < end {
                    s.overlap_chars += end.min(c.end) - c.start;
                }
            }
            prev = Some((c.section, c.end));
            s.with_heading += usize::from(!c.heading_path.is_empty());
            if let Some((sizer, max)) = self.sizer {
                let t = sizer.len(&c.text);
                self.tokens.push(t);
                if t > max {
                    *s.truncated.as_mut().unwrap() += 1;
                }
            }
        }
    }

    /// The statistics.
    pub fn finish(mut self) -> ChunkStats {
        self.stats.chars = Dist::of(&mut self.chars);
        if self.sizer.is_some() {
            self.stats.tokens = Some(Dist::of(&mut self.tokens));
        }
        self.stats
    }
}

/// The comparison table (markdown) of several strategies on the same corpus.
pub fn table(rows: &[ChunkStats]) -> String {
    let mut t = String::from(
        "| strategy | chunks | chars median / max | tokens median / p95 / max | over token limit | code blocks intact | tables intact | with heading path | overlap (duplicated text) |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let chunks = if r.parents > 0 {
            format!("{} (+{} parents)", r.chunks, r.parents)
        } else {
            r.chunks.to_string()
        };
        let tokens = r
            .tokens
            .map(|d| format!("{} / {} / {}", d.median, d.p95, d.max))
            .unwrap_or_else(|| "–".into());
        let truncated = r
            .truncated
            .map(|n| n.to_string())
            .unwrap_or_else(|| "–".into());
        t.push_str(&format!(
            "| {} | {} | {} / {} | {} | {} | {}/{} | {}/{} | {:.1}% | {:.1}% |\n",
            r.strategy,
            chunks,
            r.chars.median,
            r.chars.max,
            tokens,
            truncated,
            r.code_blocks_intact,
            r.code_blocks,
            r.tables_intact,
            r.tables,
            100.0 * r.heading_share(),
            100.0 * r.overlap_share(),
        ));
    }
    t
}

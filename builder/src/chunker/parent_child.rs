//! `parent-child`: small child chunks are indexed and matched; a result returns the
//! child's parent section.

use super::pack::{structured, Opts, Units};
use super::{effective_overlap, ChunkParams, ChunkStrategy, Chunked, Limits};

/// Parents are heading sections cut as `heading` would (no overlap) at `parent_size`
/// characters, with no token limit (parents are returned, never embedded). Each parent is
/// then chunked as `hierarchical` with the run's limits (`size`, `overlap`, tokens) into
/// children; every child lies inside its parent, carries the parent's heading path and
/// points to it ([`super::Chunk::parent`]). Child positions count on across the parents of
/// a section, so (section, position) stays unique among children.
#[derive(Debug, Clone, Copy)]
pub struct ParentChild {
    /// Largest parent, in chars.
    pub parent_size: usize,
}

impl ChunkStrategy for ParentChild {
    fn name(&self) -> &'static str {
        "parent-child"
    }

    fn chunk(&self, text: &str, limits: &Limits) -> Chunked {
        let parent_limits = Limits {
            params: ChunkParams {
                size: self.parent_size.max(limits.params.size),
                overlap: 0,
            },
            tokens: None,
        };
        let parents = structured(
            text,
            &parent_limits,
            Opts {
                heading_blocks: true,
                units: Units::Paragraphs,
                overlap: 0,
            },
        );
        let child_opts = Opts {
            heading_blocks: true,
            units: Units::Paragraphs,
            overlap: effective_overlap(limits.params),
        };
        let mut chunks = Vec::new();
        let mut section = u32::MAX;
        let mut position = 0;
        for (pi, p) in parents.iter().enumerate() {
            if p.section != section {
                section = p.section;
                position = 0;
            }
            // Children are cut from the parent's text (its re-fenced or header-repeating
            // prefix included, so a split fence stays a fence) and mapped back to the file.
            let ptext: Vec<char> = p.text.chars().collect();
            let pl = p.prefix.chars().count();
            let n = p.end - p.start;
            for c in structured(&p.text, limits, child_opts) {
                let (a, b) = (c.start, c.end);
                let (fa, fb) = (a.clamp(pl, pl + n), b.clamp(pl, pl + n));
                let fb = fb.max(fa);
                let mut prefix = c.prefix.clone();
                prefix.extend(&ptext[a..fa.min(b).max(a)]);
                let mut suffix: String = ptext[fb.max(a).min(b)..b].iter().collect();
                suffix.push_str(&c.suffix);
                chunks.push(super::Chunk {
                    section,
                    position,
                    heading_path: p.heading_path.clone(),
                    start: p.start + fa - pl,
                    end: p.start + fb - pl,
                    text: c.text,
                    prefix,
                    suffix,
                    parent: Some(pi),
                });
                position += 1;
            }
        }
        Chunked { chunks, parents }
    }
}

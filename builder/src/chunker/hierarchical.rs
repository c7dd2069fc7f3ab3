//! `hierarchical` (default): `---`, then headings, paragraphs, sentences.

use super::pack::{structured, Opts, Units};
use super::{effective_overlap, ChunkStrategy, Chunked, Limits};

/// Boundaries in order of precedence: `---` sections, heading blocks (a heading starts a
/// chunk and sets the heading path), paragraphs, sentences, the limit. Pieces are packed
/// greedily up to the limit with overlap from the previous chunk of the same heading block.
#[derive(Debug, Clone, Copy, Default)]
pub struct Hierarchical;

impl ChunkStrategy for Hierarchical {
    fn name(&self) -> &'static str {
        "hierarchical"
    }

    fn chunk(&self, text: &str, limits: &Limits) -> Chunked {
        let opts = Opts {
            heading_blocks: true,
            units: Units::Paragraphs,
            overlap: effective_overlap(limits.params),
        };
        Chunked {
            chunks: structured(text, limits, opts),
            parents: Vec::new(),
        }
    }
}

//! `recursive`: recursive character splitting (paragraphs, then lines, then words, then
//! the limit) within `---` sections, headings not being boundaries.

use super::pack::{structured, Opts, Units};
use super::{effective_overlap, ChunkStrategy, Chunked, Limits};

/// As LangChain's `RecursiveCharacterTextSplitter`: text is split at the coarsest
/// separator that makes pieces fit (blank lines, then newlines, then spaces, then the
/// limit; no sentence detection) and the pieces are packed greedily with overlap. Headings are pieces like
/// any other (a chunk may hold several short sections; a chunk's heading path is the one
/// in force at its start), but a heading is never the last piece of a chunk. Code fences
/// and tables stay whole as in every structured strategy.
#[derive(Debug, Clone, Copy, Default)]
pub struct Recursive;

impl ChunkStrategy for Recursive {
    fn name(&self) -> &'static str {
        "recursive"
    }

    fn chunk(&self, text: &str, limits: &Limits) -> Chunked {
        let opts = Opts {
            heading_blocks: false,
            units: Units::Recursive,
            overlap: effective_overlap(limits.params),
        };
        Chunked {
            chunks: structured(text, limits, opts),
            parents: Vec::new(),
        }
    }
}

//! `heading`: one chunk per heading section; an over-long section is cut at line ends.

use super::pack::{structured, Opts, Units};
use super::{ChunkStrategy, Chunked, Limits};

/// Boundaries: `---` sections and headings. A heading section that fits is one chunk; a
/// longer one is packed line by line (a line over the limit splits into sentences), with
/// no overlap (the `overlap` parameter is ignored).
#[derive(Debug, Clone, Copy, Default)]
pub struct Heading;

impl ChunkStrategy for Heading {
    fn name(&self) -> &'static str {
        "heading"
    }

    fn chunk(&self, text: &str, limits: &Limits) -> Chunked {
        let opts = Opts {
            heading_blocks: true,
            units: Units::Lines,
            overlap: 0,
        };
        Chunked {
            chunks: structured(text, limits, opts),
            parents: Vec::new(),
        }
    }
}

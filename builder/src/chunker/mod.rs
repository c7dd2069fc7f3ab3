//! Chunking: one source file → chunks, by one of several strategies behind the
//! [`ChunkStrategy`] trait.
//!
//! | strategy | boundaries | overlap |
//! |---|---|---|
//! | [`Fixed`] (`fixed`) | `---` only; windows of `size` characters | yes |
//! | [`Recursive`] (`recursive`) | `---`, then paragraphs, lines, words, characters; headings are not boundaries (a chunk may hold several small sections) | yes |
//! | [`Heading`] (`heading`) | `---` and headings; an over-long heading section is cut at line ends | no |
//! | [`Hierarchical`] (`hierarchical`, default) | `---`, then headings, paragraphs, sentences | yes |
//! | [`ParentChild`] (`parent-child`) | children as `hierarchical`; each child points to its parent (a heading section of up to `parent_size` chars) | children only |
//!
//! Rules shared by every strategy but `fixed` (sentence splitting: `hierarchical`,
//! `heading`, `parent-child`):
//! - A line that is only `---` (outside code fences) ends a *section*: no chunk crosses it.
//! - A markdown ATX heading (`#`…`######` + space, outside code fences) sets the heading
//!   path; a new `##` drops any deeper `###` from it. A heading (or a run of headings, e.g.
//!   a title directly followed by a subheading) never makes a chunk alone when content
//!   follows it in its section: it leads the chunk of that content.
//! - A fenced code block (```` ``` ```` or `~~~`) stays whole; one longer than the limit
//!   is split between lines, each part re-fenced with the same opening line (language
//!   label) and closed with the same marker.
//! - A table (a `|` row followed by a `|---|` delimiter row) stays whole; one longer than
//!   the limit is split between rows, every part after the first repeating the header and
//!   delimiter rows.
//! - A question paragraph (`Q:`, `Q.`, `Question:`, `질문:`, `문:`, `問:` …) stays with its
//!   answer (the next paragraph): the chunk is not closed after the question.
//! - A paragraph longer than the limit splits into sentences: after `。！？` (plus closing
//!   quotes), after `. ! ?` followed by a space or a line end (which covers Korean final
//!   endings such as `다.`), and at newlines; a sentence longer than the limit is cut at
//!   the limit.
//! - Overlap: each chunk after the first of a heading block starts with up to `overlap`
//!   characters from the end of the previous chunk (snapped to a sentence or word start),
//!   never pushing the chunk past the limit, never before a heading or question, never
//!   into a re-fenced or header-repeating part.
//!
//! Limits: every chunk's text is at most [`ChunkParams::size`] characters (Unicode scalar
//! values) and, when a [`Limits::tokens`] sizer is given (the embedding model's tokenizer),
//! at most that many tokens.
//!
//! A chunk's text is `prefix + file[start..end] + suffix` (offsets in chars), where the
//! prefix and suffix are empty except for the re-fencing and repeated table headers above.

mod fixed;
mod heading;
mod hierarchical;
mod pack;
mod parent_child;
mod recursive;
pub mod report;
mod scan;

use serde::Serialize;

pub use fixed::Fixed;
pub use heading::Heading;
pub use hierarchical::Hierarchical;
pub use parent_child::ParentChild;
pub use recursive::Recursive;

/// Chunking limits, in characters (Unicode scalar values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

/// Measures a text in some unit (characters, model tokens, …). Implemented by
/// [`CharSizer`] here and by the builder's tokenizer sizer (`ingest::TokenSizer`).
pub trait Sizer: Sync {
    /// Length of `text` in this sizer's unit.
    fn len(&self, text: &str) -> usize;
}

/// Counts Unicode scalar values.
#[derive(Debug, Clone, Copy, Default)]
pub struct CharSizer;

impl Sizer for CharSizer {
    fn len(&self, text: &str) -> usize {
        text.chars().count()
    }
}

/// A second limit on each chunk's text, besides [`ChunkParams::size`] characters: at most
/// `max` units of `sizer` (e.g. 512 model tokens, `passage: ` prefix and specials included).
#[derive(Clone, Copy)]
pub struct TokenLimit<'a> {
    /// The measure (e.g. the embedding model's tokenizer).
    pub sizer: &'a dyn Sizer,
    /// Largest length allowed, in the sizer's unit.
    pub max: usize,
}

/// Limits of one chunking run.
#[derive(Clone, Copy)]
pub struct Limits<'a> {
    /// Size and overlap in characters.
    pub params: ChunkParams,
    /// Optional second limit in model tokens; `None` (BM25-only builds) counts characters only.
    pub tokens: Option<TokenLimit<'a>>,
}

impl<'a> Limits<'a> {
    /// Character limits only.
    pub fn chars(params: ChunkParams) -> Self {
        Limits {
            params,
            tokens: None,
        }
    }

    /// True if `text` is within both limits.
    pub fn fits(&self, text: &str) -> bool {
        if text.chars().count() > self.params.size.max(1) {
            return false;
        }
        match self.tokens {
            Some(t) => t.sizer.len(text) <= t.max,
            None => true,
        }
    }
}

/// One chunk of a file.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// `prefix + chars[start..end] + suffix` of the file.
    pub text: String,
    /// Text repeated before the slice: a split code fence's opening line (`` ```rust ``
    /// + newline) or a split table's header and delimiter rows (+ newline); usually empty.
    pub prefix: String,
    /// Text added after the slice: a split code fence's closing line (newline + `` ``` ``);
    /// usually empty.
    pub suffix: String,
    /// Index of this chunk's parent in [`Chunked::parents`] (`parent-child` only).
    pub parent: Option<usize>,
}

/// The output of one strategy on one file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Chunked {
    /// The chunks that are indexed and embedded, in file order.
    pub chunks: Vec<Chunk>,
    /// Parent sections (`parent-child`): returned as results, not indexed. Empty for other
    /// strategies.
    pub parents: Vec<Chunk>,
}

/// A way of cutting a file into chunks.
pub trait ChunkStrategy: Send + Sync {
    /// The strategy's name as `--strategy` spells it.
    fn name(&self) -> &'static str;
    /// Chunks `text` (one file body) within `limits`.
    fn chunk(&self, text: &str, limits: &Limits) -> Chunked;
}

/// The strategies `--strategy` offers, with their own parameters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "name", rename_all = "kebab-case")]
pub enum Strategy {
    /// [`Fixed`].
    Fixed,
    /// [`Recursive`].
    Recursive,
    /// [`Heading`].
    Heading,
    /// [`Hierarchical`] (default).
    #[default]
    Hierarchical,
    /// [`ParentChild`]: `parent_size` is the largest parent section, in characters.
    ParentChild {
        /// Largest parent, in chars (default 4 × chunk size).
        parent_size: usize,
    },
}

/// Names accepted by [`Strategy::parse`], in the order reports list them.
pub const STRATEGY_NAMES: &[&str] = &[
    "fixed",
    "recursive",
    "heading",
    "hierarchical",
    "parent-child",
];

impl Strategy {
    /// Parses a `--strategy` name; `parent_size` applies to `parent-child`.
    ///
    /// # Errors
    /// An error message listing the valid names.
    pub fn parse(name: &str, parent_size: usize) -> Result<Self, String> {
        Ok(match name {
            "fixed" => Strategy::Fixed,
            "recursive" => Strategy::Recursive,
            "heading" => Strategy::Heading,
            "hierarchical" => Strategy::Hierarchical,
            "parent-child" => Strategy::ParentChild { parent_size },
            _ => {
                return Err(format!(
                    "unknown chunking strategy {name:?} (expected one of: {})",
                    STRATEGY_NAMES.join(", ")
                ))
            }
        })
    }

    /// The strategy's name.
    pub fn name(&self) -> &'static str {
        self.chunker().name()
    }

    /// The overlap in chars this strategy uses for `params`: 0 for `heading`, else
    /// `params.overlap` (at most half the size).
    pub fn overlap(&self, params: ChunkParams) -> usize {
        match self {
            Strategy::Heading => 0,
            _ => effective_overlap(params),
        }
    }

    /// `parent-child`: the largest parent, in chars.
    pub fn parent_size(&self) -> Option<usize> {
        match *self {
            Strategy::ParentChild { parent_size } => Some(parent_size),
            _ => None,
        }
    }

    /// Chunks one file body as the build does: this strategy's chunks, without those that
    /// hold nothing but heading lines and source lines ([`is_metadata_only`]: `# Shipping
    /// FAQ` + `Source: https://…` before the first section). Such a chunk is file metadata —
    /// the heading is in the next chunks' heading path, the source in their `source_url` —
    /// and, left in, it ranked first for unrelated questions. Positions keep their gaps, so
    /// the other chunks' ids do not change. A file with nothing else (a title and its
    /// source) keeps its chunks, so it can still be found by its title.
    pub fn chunk_body(&self, text: &str, limits: &Limits) -> Chunked {
        let mut out = self.chunker().chunk(text, limits);
        if out.chunks.iter().any(|c| !is_metadata_only(&c.text)) {
            out.chunks.retain(|c| !is_metadata_only(&c.text));
        }
        out
    }

    /// The strategy object.
    pub fn chunker(&self) -> Box<dyn ChunkStrategy> {
        match *self {
            Strategy::Fixed => Box::new(Fixed),
            Strategy::Recursive => Box::new(Recursive),
            Strategy::Heading => Box::new(Heading),
            Strategy::Hierarchical => Box::new(Hierarchical),
            Strategy::ParentChild { parent_size } => Box::new(ParentChild { parent_size }),
        }
    }
}

/// Splits `text` with the default strategy ([`Hierarchical`]) and character limits only,
/// as [`Strategy::chunk_body`] does. `params.overlap` must be smaller than `params.size`
/// (it is clamped to `size / 2` otherwise).
pub fn chunk_text(text: &str, params: ChunkParams) -> Vec<Chunk> {
    Strategy::Hierarchical
        .chunk_body(text, &Limits::chars(params))
        .chunks
}

/// True if every non-blank line of `text` is a markdown heading (`#` to `######` and a
/// space) or a source line ([`crate::corpus::is_source_line`]), and at least one is a
/// source line. A chunk of only
/// headings is kept (a file may be just a title).
pub fn is_metadata_only(text: &str) -> bool {
    let mut source = false;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        let hashes = t.len() - t.trim_start_matches('#').len();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
            continue;
        }
        if crate::corpus::is_source_line(t) {
            source = true;
            continue;
        }
        return false;
    }
    source
}

/// The overlap actually used for `params`: at most half the size.
pub(crate) fn effective_overlap(params: ChunkParams) -> usize {
    params.overlap.min(params.size.max(1) / 2)
}

#[cfg(test)]
mod tests;

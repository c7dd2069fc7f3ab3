//! Chunk stage: source files → chunk records (with front matter and version facts), the
//! parent sections of `parent-child`, and the bundle's sources table.

use std::path::Path;

use jikji_embed::{EmbedTokenizer, Prefix};
use jikji_format::{ChunkRecord, ChunkingInfo, Manifest, SourceEntry};
use sha2::{Digest, Sha256};

use crate::chunker::{ChunkParams, Limits, Sizer, Strategy, TokenLimit};
use crate::corpus::SourceFile;
use crate::error::{BuildError, Result};
use crate::versions::VersionInfo;

/// Corpus bytes chunked per window by [`chunk_windows`]: the records of one window are
/// held at once (about twice its text).
pub const CHUNK_WINDOW_BYTES: usize = 16 << 20;

/// Chunks the files in order, a window of files at a time (at least one file, then files
/// until [`CHUNK_WINDOW_BYTES`] of text, read again if the scan dropped their bodies; each window on all cores), and
/// hands each window's file range and chunks (in file order) to `each`, so a corpus of
/// any size is chunked holding one window's records. Stops at `each`'s first error.
pub fn chunk_windows(
    files: &[SourceFile],
    versions: &[VersionInfo],
    chunking: &Chunking,
    mut each: impl FnMut(std::ops::Range<usize>, Vec<FileChunks>) -> Result<()>,
) -> Result<()> {
    let n = files.len().min(versions.len());
    let mut start = 0;
    while start < n {
        let mut end = start;
        let mut bytes = 0;
        while end < n && (end == start || bytes < CHUNK_WINDOW_BYTES) {
            bytes += files[end].len() as usize;
            end += 1;
        }
        let window = chunk_range(files, versions, chunking, start..end)?;
        each(start..end, window)?;
        start = end;
    }
    Ok(())
}

/// [`chunk_file`] of `files[range]`, in order, on all cores; a file whose body the scan
/// dropped is read again ([`SourceFile::whole`]). Errors: the first file that cannot be
/// read again or changed since the scan.
fn chunk_range(
    files: &[SourceFile],
    versions: &[VersionInfo],
    chunking: &Chunking,
    range: std::ops::Range<usize>,
) -> Result<Vec<FileChunks>> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Mutex;
    let one = |i: usize| -> Result<FileChunks> {
        Ok(chunk_file(&*files[i].whole()?, chunking, &versions[i]))
    };
    let base = range.start;
    let n = range.len();
    let threads = super::default_threads().clamp(1, 64).min(n.max(1));
    if threads <= 1 {
        return range.map(one).collect();
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(files[base + i].len()));
    let next = AtomicUsize::new(0);
    let out: Mutex<Vec<Option<Result<FileChunks>>>> = Mutex::new((0..n).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) else {
                    return;
                };
                let fc = one(base + i);
                out.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(fc);
            });
        }
    });
    out.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|fc| fc.expect("every file was chunked"))
        .collect()
}

/// Stable chunk id: first 16 hex digits of SHA-256(source path, section, position).
pub fn chunk_id(rel: &str, section: u32, position: u32) -> String {
    let mut h = Sha256::new();
    h.update(rel.as_bytes());
    h.update([0]);
    h.update(section.to_le_bytes());
    h.update(position.to_le_bytes());
    hex::encode(&h.finalize()[..8])
}

/// The embedding model's tokenizer as a chunk [`Sizer`]: the number of tokens the model
/// sees for a passage, `passage: ` prefix and `<s>`/`</s>` included, before truncation.
pub struct TokenSizer(pub std::sync::Arc<EmbedTokenizer>);

impl TokenSizer {
    /// Loads `tokenizer.json` from a model folder (shared with the encoder:
    /// [`crate::encoder::shared_tokenizer`]). Errors: [`BuildError::Io`] when it cannot be
    /// read, [`BuildError::Tokenizer`] when it does not parse.
    pub fn load(model_dir: &Path) -> Result<Self> {
        let path = model_dir.join("tokenizer.json");
        if let Some(t) = crate::encoder::shared_tokenizer(&path) {
            return Ok(TokenSizer(t));
        }
        // Read again for the error (the shared cache keeps none).
        let bytes = std::fs::read(&path).map_err(|e| BuildError::io("reading", &path, e))?;
        match EmbedTokenizer::from_bytes(&bytes) {
            Ok(t) => Ok(TokenSizer(std::sync::Arc::new(t))),
            Err(source) => Err(BuildError::Tokenizer { path, source }),
        }
    }
}

impl Sizer for TokenSizer {
    fn len(&self, text: &str) -> usize {
        // A text the tokenizer cannot encode is treated as too long (it gets split).
        self.0
            .count_tokens(text, Prefix::Passage)
            .unwrap_or(usize::MAX)
    }
}

/// How a build cuts files: the strategy, its character limits and, when the bundle is
/// embedded, the model's tokenizer (no chunk over [`jikji_embed::MAX_TOKENS`] tokens).
pub struct Chunking {
    /// The strategy.
    pub strategy: Strategy,
    /// Size and overlap in chars.
    pub params: ChunkParams,
    /// The model's tokenizer, if chunks are embedded.
    pub tokenizer: Option<TokenSizer>,
}

impl Chunking {
    /// `strategy` and `params`, with the tokenizer of `model_dir` if given.
    pub fn new(strategy: Strategy, params: ChunkParams, model_dir: Option<&Path>) -> Result<Self> {
        Ok(Chunking {
            strategy,
            params,
            tokenizer: model_dir.map(TokenSizer::load).transpose()?,
        })
    }

    /// The chunking a bundle was built with: its strategy and chunk size/overlap
    /// ([`super::BundleSettings::of_manifest`]) and, when its chunks were token-limited
    /// (`chunking.max_tokens`), the tokenizer of `model_dir`. Errors when the strategy is
    /// unknown or the bundle needs a tokenizer and no model folder is given.
    pub fn of_manifest(m: &Manifest, model_dir: Option<&Path>) -> Result<Self> {
        let settings = super::BundleSettings::of_manifest(m)?;
        let tokens = m.chunking.as_ref().and_then(|c| c.max_tokens);
        let model_dir = match (tokens, model_dir) {
            (None, _) => None,
            (Some(_), Some(d)) => Some(d),
            (Some(_), None) => return Err(BuildError::Chunking(
                "the bundle's chunks were sized with the model's tokenizer; give the model folder"
                    .into(),
            )),
        };
        Chunking::new(settings.strategy, settings.params, model_dir)
    }

    /// The limits: `params` and, with a tokenizer, [`jikji_embed::MAX_TOKENS`] tokens.
    pub fn limits(&self) -> Limits<'_> {
        Limits {
            params: self.params,
            tokens: self.tokenizer.as_ref().map(|t| TokenLimit {
                sizer: t,
                max: jikji_embed::MAX_TOKENS,
            }),
        }
    }

    /// The manifest's record of this chunking, with `parents` parent records.
    pub fn info(&self, parents: usize) -> ChunkingInfo {
        ChunkingInfo {
            strategy: self.strategy.name().to_string(),
            chunk_size: self.params.size,
            overlap: self.strategy.overlap(self.params),
            max_tokens: self.tokenizer.as_ref().map(|_| jikji_embed::MAX_TOKENS),
            parent_size: self.strategy.parent_size(),
            parents,
        }
    }
}

/// The chunk records of one file.
pub struct FileChunks {
    /// Indexed chunks, in order.
    pub chunks: Vec<ChunkRecord>,
    /// Parent sections (`parent-child`), in order; the chunks' `parent_id` names them,
    /// `parent_doc` is set when the chunk store is written ([`super::chunk_stage`]).
    pub parents: Vec<ChunkRecord>,
    /// For each chunk, the index of its parent in `parents`.
    pub parent_of: Vec<Option<usize>>,
}

/// The chunk records of one file, in order: chunked with `chunking`, front matter and
/// version facts (`v`) copied into each record.
pub fn chunk_file(f: &SourceFile, chunking: &Chunking, v: &VersionInfo) -> FileChunks {
    let updated = updated_of(f);
    let out = chunking
        .strategy
        .chunk_body(&f.text[f.body_byte..], &chunking.limits());
    let record = |c: crate::chunker::Chunk, id: String| ChunkRecord {
        id,
        source: f.rel.clone(),
        source_url: f.source_url.clone(),
        tier: f.tier,
        heading_path: c.heading_path,
        lang: f
            .front
            .lang
            .clone()
            .unwrap_or_else(|| crate::lang::detect(&c.text).to_string()),
        section: c.section,
        start: f.body_char + c.start,
        end: f.body_char + c.end,
        text: c.text,
        title: f.front.title.clone(),
        author: f.front.author.clone(),
        version: f.front.version.clone(),
        updated: updated.clone(),
        expires: f.front.expires.clone(),
        provenance: f.front.provenance.clone(),
        doc_id: v.doc_id.clone(),
        archived: v.archived,
        parent_id: None,
        parent_doc: None,
        conflicts: Vec::new(),
    };
    let parents: Vec<ChunkRecord> = out
        .parents
        .into_iter()
        .map(|p| {
            let id = parent_id(&f.rel, p.section, p.position);
            record(p, id)
        })
        .collect();
    let mut parent_of = Vec::with_capacity(out.chunks.len());
    let chunks = out
        .chunks
        .into_iter()
        .map(|c| {
            parent_of.push(c.parent);
            let parent = c.parent.map(|i| parents[i].id.clone());
            let id = chunk_id(&f.rel, c.section, c.position);
            ChunkRecord {
                parent_id: parent,
                ..record(c, id)
            }
        })
        .collect();
    FileChunks {
        chunks,
        parents,
        parent_of,
    }
}

/// Stable id of a parent section (`parent-child`): as [`chunk_id`] in its own namespace.
pub fn parent_id(rel: &str, section: u32, position: u32) -> String {
    chunk_id(&format!("{rel}\0parent"), section, position)
}

/// The `updated` value chunk records of `f` carry: front matter `updated`, else the
/// file's modification date.
pub fn updated_of(f: &SourceFile) -> Option<String> {
    f.front.updated.clone().or_else(|| modified_date(&f.path))
}

/// The bundle's entry for one source file (`chunks` = its number of chunk records).
pub fn source_entry(f: &SourceFile, v: &VersionInfo, chunks: usize) -> SourceEntry {
    let modified = std::fs::metadata(&f.path)
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs());
    SourceEntry {
        path: f.rel.clone(),
        sha256: f.sha256_hex(),
        bytes: f.len(),
        modified,
        chunks,
        doc_id: v.doc_id.clone(),
        version: v.version.clone(),
        archived: v.archived,
    }
}

/// The file's modification date as `YYYY-MM-DD` (UTC), if the file system has it.
fn modified_date(path: &Path) -> Option<String> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(humantime::format_rfc3339_seconds(t).to_string()[..10].to_string())
}

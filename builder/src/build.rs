//! `jikji build`: corpus folder → chunks → BM25 index + embeddings → bundle.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressStyle};
use jikji_embed::{EmbedTokenizer, Embedder, Prefix};
use jikji_format::analyzer::{Analyzer, AnalyzerOptions, Script};
use jikji_format::chunks::{write_chunks, CHUNKS_FILE};
use jikji_format::hanja::{write_hanja_fst, HANJA_FILE};
use jikji_format::postings::{LexicalIndexWriter, POSTINGS_FILE, TERMS_FILE};
use jikji_format::vectors::{write_vectors, VECTORS_FILE};
use jikji_format::{
    analyzer, sha256_hex, Bm25Params, BundleWriter, ChunkRecord, ChunkingInfo, Counts, Manifest,
    ModelInfo, SourceEntry,
};
use serde::Serialize;
use sha2::{Digest, Sha256};

use crate::chunker::report::Dist;
use crate::chunker::{ChunkParams, Limits, Sizer, Strategy, TokenLimit};
use crate::corpus::{quarantine, scan, CheckOptions, Finding, Scan, Severity, SourceFile};
use crate::error::{BuildError, Result};
use crate::versions::VersionInfo;

/// Options of one build.
#[derive(Debug, Clone)]
pub struct BuildOptions {
    /// Corpus folder.
    pub corpus: PathBuf,
    /// Bundle folder to write (replaced atomically).
    pub out: PathBuf,
    /// Chunk size and overlap.
    pub params: ChunkParams,
    /// Chunking strategy (default `hierarchical`).
    pub strategy: Strategy,
    /// Model folder (`model.onnx`, `tokenizer.json`); `None` builds a BM25-only bundle.
    pub model_dir: Option<PathBuf>,
    /// Embedding cache folder; `None` disables the cache.
    pub cache_dir: Option<PathBuf>,
    /// Embedding threads.
    pub threads: usize,
    /// Show progress bars on stderr.
    pub progress: bool,
    /// What the corpus check accepts.
    pub check: CheckOptions,
    /// Fail on any corpus error instead of leaving the bad files out.
    pub strict: bool,
    /// Copy files with errors into this folder (the originals stay in place).
    pub quarantine: Option<PathBuf>,
    /// Analyzer options (recorded in the manifest; the engine analyzes queries the same way).
    pub analyzer: AnalyzerOptions,
    /// Write the Hangul ↔ Hanja reading table (`hanja.fst`) when the corpus has Han or
    /// Hangul text (see [`hanja_table`]).
    pub hanja: bool,
    /// BM25 k1 and b (recorded in the manifest; the engine ranks with them).
    pub bm25: Bm25Params,
}

impl BuildOptions {
    /// Options with the defaults of `jikji build`: chunk size 512, overlap 64, no model,
    /// no cache, one thread, no progress bar, default checks, not strict, no quarantine.
    pub fn new(corpus: impl Into<PathBuf>, out: impl Into<PathBuf>) -> Self {
        BuildOptions {
            corpus: corpus.into(),
            out: out.into(),
            params: ChunkParams::default(),
            strategy: Strategy::default(),
            model_dir: None,
            cache_dir: None,
            threads: 1,
            progress: false,
            check: CheckOptions::default(),
            strict: false,
            quarantine: None,
            analyzer: AnalyzerOptions::default(),
            hanja: true,
            bm25: Bm25Params::default(),
        }
    }
}

/// What a build did, for the closing summary.
#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    /// Source files indexed.
    pub files: usize,
    /// Corpus check findings (errors left their file out of the bundle).
    pub findings: Vec<Finding>,
    /// Copies made in the quarantine folder.
    pub quarantined: Vec<PathBuf>,
    /// Corpus size in bytes (UTF-8) of the files indexed.
    pub corpus_bytes: u64,
    /// Chunking strategy used.
    pub strategy: String,
    /// Chunks indexed (children for `parent-child`).
    pub chunks: usize,
    /// Parent sections stored (not indexed; `parent-child` only).
    pub parents: usize,
    /// Indexed chunk lengths in chars.
    pub chunk_chars: Dist,
    /// Indexed chunk lengths in model tokens (`passage: ` prefix and specials included),
    /// if embedded.
    pub chunk_tokens: Option<Dist>,
    /// Distinct terms.
    pub terms: usize,
    /// Model tokens over all chunks (with the `passage: ` prefix and specials), if embedded.
    pub tokens: usize,
    /// Chunks longer than the model's maximum tokens (truncated when embedded).
    pub truncated: usize,
    /// Chunks whose vectors came from the cache.
    pub cached: usize,
    /// Chunks embedded in this build.
    pub embedded: usize,
    /// Seconds per phase: read, chunk+index, embed, write.
    pub seconds: Vec<(String, f64)>,
    /// Bytes per bundle file.
    pub file_bytes: Vec<(String, u64)>,
}

/// Model metadata: id from `model.json` if present, SHA-256 of `model.onnx` (the file the
/// browser loads; the engine refuses a model whose SHA-256 differs).
pub fn model_info(dir: &Path) -> Result<ModelInfo> {
    let onnx = dir.join("model.onnx");
    let bytes = std::fs::read(&onnx).map_err(|source| BuildError::ModelMissing {
        path: onnx.clone(),
        source,
    })?;
    let id = std::fs::read(dir.join("model.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("id").and_then(|i| i.as_str()).map(String::from))
        .unwrap_or_else(|| "multilingual-e5-small-q4".to_string());
    Ok(ModelInfo {
        id,
        sha256: sha256_hex(&bytes),
        dim: jikji_embed::DIM,
        max_tokens: jikji_embed::MAX_TOKENS,
    })
}

/// Loads the embedder used to embed chunks: `model-int8.onnx` if present (the same 4-bit
/// weights expanded to int8, ~3× faster in tract natively, same outputs to ~1e-7, checked
/// by `scripts/check_model.py`), else `model.onnx`.
pub fn load_build_embedder(dir: &Path) -> Result<Embedder> {
    let int8 = dir.join("model-int8.onnx");
    let onnx = if int8.exists() {
        int8
    } else {
        dir.join("model.onnx")
    };
    let tok = dir.join("tokenizer.json");
    let onnx_bytes = std::fs::read(&onnx).map_err(|e| BuildError::io("reading", &onnx, e))?;
    let tok_bytes = std::fs::read(&tok).map_err(|e| BuildError::io("reading", &tok, e))?;
    Embedder::from_bytes(&onnx_bytes, &tok_bytes)
        .map_err(|source| BuildError::LoadModel { path: onnx, source })
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

/// Scans `corpus` ([`scan`]) and adds `jikji check`'s expiry warnings by the system clock
/// (`expired`, `bad-expires`); with `strict`, any corpus error fails with
/// [`BuildError::CorpusErrors`] listing the error findings (warnings are not errors).
pub fn scan_corpus(corpus: &Path, check: CheckOptions, strict: bool) -> Result<Scan> {
    let mut scanned = scan(corpus, check)?;
    // What `jikji check` says about `expires` (already expired, or not a date) is worth
    // seeing when the bundle is made, by the system clock.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    scanned
        .findings
        .extend(crate::corpus::expiry_findings(&scanned.files, now, 0));
    if strict && scanned.errors() > 0 {
        return Err(BuildError::CorpusErrors {
            findings: scanned
                .findings
                .into_iter()
                .filter(|f| f.severity == Severity::Error)
                .collect(),
        });
    }
    Ok(scanned)
}

/// Builds a bundle. See the crate README for the format.
pub fn build(opts: &BuildOptions) -> Result<BuildReport> {
    let mut seconds = Vec::new();
    let t = Instant::now();
    let scanned = scan_corpus(&opts.corpus, opts.check, opts.strict)?;
    let quarantined = match &opts.quarantine {
        Some(dir) => quarantine(&opts.corpus, &scanned.rejected, dir)?,
        None => Vec::new(),
    };
    if scanned.files.is_empty() {
        return Err(BuildError::Corpus {
            path: opts.corpus.clone(),
            message: "no usable .md or .txt files".into(),
        });
    }
    seconds.push(("read".to_string(), t.elapsed().as_secs_f64()));
    let mut report = build_files(&scanned.files, opts)?;
    seconds.append(&mut report.seconds);
    report.seconds = seconds;
    report.findings = scanned.findings;
    report.quarantined = quarantined;
    Ok(report)
}

/// The embedding model's tokenizer as a chunk [`Sizer`]: the number of tokens the model
/// sees for a passage, `passage: ` prefix and `<s>`/`</s>` included, before truncation.
pub struct TokenSizer(pub EmbedTokenizer);

impl TokenSizer {
    /// Loads `tokenizer.json` from a model folder.
    pub fn load(model_dir: &Path) -> Result<Self> {
        let path = model_dir.join("tokenizer.json");
        let bytes = std::fs::read(&path).map_err(|e| BuildError::io("reading", &path, e))?;
        match EmbedTokenizer::from_bytes(&bytes) {
            Ok(t) => Ok(TokenSizer(t)),
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

    /// The chunking a bundle was built with (its manifest's `chunking`; bundles from
    /// before strategies existed: `hierarchical` with characters only). `model_dir`
    /// supplies the tokenizer when the bundle's chunks were token-limited.
    pub fn of_manifest(m: &Manifest, model_dir: Option<&Path>) -> Result<Self> {
        let params = ChunkParams {
            size: m.chunk_size,
            overlap: m.overlap,
        };
        let Some(c) = &m.chunking else {
            return Chunking::new(Strategy::Hierarchical, params, None);
        };
        let parent_size = c.parent_size.unwrap_or(4 * params.size);
        let strategy = Strategy::parse(&c.strategy, parent_size).map_err(BuildError::Chunking)?;
        let model_dir = match (c.max_tokens, model_dir) {
            (None, _) => None,
            (Some(_), Some(d)) => Some(d),
            (Some(_), None) => return Err(BuildError::Chunking(
                "the bundle's chunks were sized with the model's tokenizer; give the model folder"
                    .into(),
            )),
        };
        Chunking::new(strategy, params, model_dir)
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
    /// `parent_doc` is set by [`link_parents`] once every file is chunked.
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
        .chunker()
        .chunk(&f.text[f.body_byte..], &chunking.limits());
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

/// Sets `parent_doc` of every chunk that has a parent: parents are stored after the
/// `records.len()` indexed chunks, in order; `parent_of[i]` indexes them.
pub fn link_parents(records: &mut [ChunkRecord], parent_of: &[Option<usize>]) {
    let n = records.len();
    for (r, p) in records.iter_mut().zip(parent_of) {
        r.parent_doc = p.map(|i| (n + i) as u32);
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
        sha256: sha256_hex(f.text.as_bytes()),
        bytes: f.text.len() as u64,
        modified,
        chunks,
        doc_id: v.doc_id.clone(),
        version: v.version.clone(),
        archived: v.archived,
    }
}

/// Builds the term dictionary and postings of `records` (in order: doc id = index) with
/// `analyzer`, each chunk indexed under [`ChunkRecord::indexed_text`] (title and heading
/// path, then text). Returns `(terms.fst, postings.bin, number of terms)`.
pub fn index_records(
    records: &[ChunkRecord],
    analyzer: &Analyzer,
) -> Result<(Vec<u8>, Vec<u8>, usize)> {
    let mut index = LexicalIndexWriter::new();
    for r in records {
        index.add_doc(&analyzer.analyze(&r.indexed_text()));
    }
    let terms = index.num_terms();
    let (terms_fst, postings) = index.finish()?;
    Ok((terms_fst, postings, terms))
}

/// The `hanja.fst` bytes `records` need, or `None` for a corpus without Han or Hangul
/// text. Reading pairs come from the `hanja` crate's table (libhangul's `hanja.txt`,
/// BSD-3-Clause; the crate is MIT), each Hanja folded as `analyzer` folds text: Hangul →
/// Hanja pairs only for Han characters the corpus has, Hanja → Hangul pairs only for
/// Hangul syllables the corpus has, so the table holds only expansions that can match.
pub fn hanja_table(records: &[ChunkRecord], analyzer: &Analyzer) -> Result<Option<Vec<u8>>> {
    let mut han = std::collections::HashSet::new();
    let mut hangul = std::collections::HashSet::new();
    for r in records {
        for ch in analyzer.normalize(&r.text).chars() {
            match analyzer::script_of(ch) {
                Script::Han => han.insert(ch),
                Script::Hangul => hangul.insert(ch),
                _ => false,
            };
        }
    }
    if han.is_empty() && hangul.is_empty() {
        return Ok(None);
    }
    let (mut to_hanja, mut to_hangul) = (Vec::new(), Vec::new());
    for syllable in '\u{AC00}'..='\u{D7A3}' {
        if !hangul.contains(&syllable) && han.is_empty() {
            continue;
        }
        let Some(entries) = hanja::get(syllable) else {
            continue;
        };
        for &(h, _) in entries {
            let norm = analyzer.normalize(&h.to_string());
            let mut folded = norm.chars();
            let (Some(f), None) = (folded.next(), folded.next()) else {
                continue;
            };
            if han.contains(&f) {
                to_hanja.push((syllable, f));
            }
            if hangul.contains(&syllable) {
                to_hangul.push((syllable, f));
            }
        }
    }
    if to_hanja.is_empty() && to_hangul.is_empty() {
        return Ok(None);
    }
    Ok(Some(write_hanja_fst(&to_hanja, &to_hangul)?))
}

/// Passage vectors of some texts and what making them took.
pub struct Embedded {
    /// One L2-normalised vector per text, in order.
    pub vectors: Vec<Vec<f32>>,
    /// Model tokens over all texts (specials and prefix included).
    pub tokens: usize,
    /// Texts longer than the model's maximum (truncated).
    pub truncated: usize,
    /// Texts whose vector came from the cache.
    pub cached: usize,
    /// Texts embedded now.
    pub embedded: usize,
    /// Model tokens of each text, in order (specials and prefix included).
    pub per_text: Vec<usize>,
}

/// Texts embedded between two cache flushes in [`embed_passages`]: an interrupted build loses at
/// most this many vectors (about a few minutes of work on 2 cores).
const FLUSH_EVERY: usize = 512;

/// Embeds `texts` with the `passage: ` prefix, through the vector cache in `cache_dir`
/// (if any) so a text is embedded at most once per model. The model is loaded into
/// `embedder` only if some text is not in the cache (and reused if already loaded there).
pub fn embed_passages(
    texts: &[&str],
    model_dir: &Path,
    cache_dir: Option<&Path>,
    threads: usize,
    progress: bool,
    embedder: &mut Option<Embedder>,
) -> Result<Embedded> {
    let info = model_info(model_dir)?;
    let mut cache = VectorCache::open(cache_dir, &info.sha256)?;
    let keys: Vec<[u8; 32]> = texts.iter().map(|t| cache_key(&info.sha256, t)).collect();
    let missing: Vec<usize> = (0..texts.len())
        .filter(|&i| !cache.map.contains_key(&keys[i]))
        .collect();
    if !missing.is_empty() {
        let embedder = match embedder {
            Some(e) => e,
            None => embedder.insert(load_build_embedder(model_dir)?),
        };
        let bar = progress_bar(progress, missing.len() as u64, "embedding");
        // Flush the cache after every group so an interrupted build keeps what it embedded.
        let mut done = 0;
        for group in missing.chunks(FLUSH_EVERY) {
            let todo: Vec<&str> = group.iter().map(|&i| texts[i]).collect();
            let out = embedder
                .embed_many(&todo, Prefix::Passage, threads, &|n| {
                    bar.set_position((done + n) as u64)
                })
                .map_err(|source| BuildError::Embedding {
                    what: "chunks",
                    source,
                })?;
            for (j, &i) in group.iter().enumerate() {
                let entry = CacheEntry {
                    tokens: out.tokens[j] as u32,
                    truncated: out.truncated[j],
                    vector: out.vectors[j].clone(),
                };
                cache.insert(keys[i], entry);
            }
            cache.flush()?;
            done += group.len();
        }
        bar.finish_and_clear();
    }
    let mut e = Embedded {
        vectors: Vec::with_capacity(texts.len()),
        tokens: 0,
        truncated: 0,
        cached: texts.len() - missing.len(),
        embedded: missing.len(),
        per_text: Vec::with_capacity(texts.len()),
    };
    for k in &keys {
        let c = &cache.map[k];
        e.tokens += c.tokens as usize;
        e.per_text.push(c.tokens as usize);
        e.truncated += usize::from(c.truncated);
        e.vectors.push(c.vector.clone());
    }
    Ok(e)
}

/// Everything a bundle holds, ready to write.
pub struct BundleParts<'a> {
    /// Chunk records (doc id = index).
    pub records: &'a [ChunkRecord],
    /// Parent sections (`parent-child`), stored after `records`, not indexed.
    pub parents: &'a [ChunkRecord],
    /// How the chunks were cut.
    pub chunking: Option<ChunkingInfo>,
    /// `terms.fst` bytes.
    pub terms_fst: Vec<u8>,
    /// `postings.bin` bytes.
    pub postings: Vec<u8>,
    /// Number of distinct terms.
    pub terms: usize,
    /// Model and `vectors.bin` bytes, if the bundle has vectors.
    pub vectors: Option<(ModelInfo, Vec<u8>)>,
    /// Chunking parameters used.
    pub params: ChunkParams,
    /// The source files table.
    pub sources: Vec<SourceEntry>,
    /// Score calibration ([`crate::calibrate::calibrate`]).
    pub calibration: Option<jikji_format::Calibration>,
    /// Analyzer options the terms were made with (current analyzer version).
    pub analyzer: AnalyzerOptions,
    /// `hanja.fst` bytes ([`hanja_table`]), if the bundle has one.
    pub hanja: Option<Vec<u8>>,
    /// BM25 k1 and b.
    pub bm25: Bm25Params,
}

/// Writes a bundle atomically at `out` ([`BundleWriter`]). Returns the manifest and the
/// bytes per bundle file (manifest included).
pub fn write_bundle(out: &Path, p: BundleParts) -> Result<(Manifest, Vec<(String, u64)>)> {
    let chunks_bin = if p.parents.is_empty() {
        write_chunks(p.records)?
    } else {
        write_chunks(&[p.records, p.parents].concat())?
    };
    let mut w = BundleWriter::create(out)?;
    w.add_file(TERMS_FILE, &p.terms_fst)?;
    w.add_file(POSTINGS_FILE, &p.postings)?;
    w.add_file(CHUNKS_FILE, &chunks_bin)?;
    if let Some(h) = &p.hanja {
        w.add_file(HANJA_FILE, h)?;
    }
    let model = match p.vectors {
        Some((info, bytes)) => {
            w.add_file(VECTORS_FILE, &bytes)?;
            Some(info)
        }
        None => None,
    };
    let manifest = Manifest {
        format_version: jikji_format::FORMAT_VERSION,
        analyzer_version: analyzer::ANALYZER_VERSION,
        analyzer: p.analyzer,
        generator: format!("jikji {}", env!("CARGO_PKG_VERSION")),
        built_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        chunk_size: p.params.size,
        overlap: p.params.overlap,
        bm25: p.bm25,
        counts: Counts {
            files: p.sources.len(),
            chunks: p.records.len(),
            terms: p.terms,
            vectors: if model.is_some() { p.records.len() } else { 0 },
        },
        model,
        files: Default::default(),
        calibration: p.calibration,
        sources: p.sources,
        chunking: p.chunking,
    };
    let manifest = w.finish(manifest)?;
    let mut file_bytes: Vec<(String, u64)> = manifest
        .files
        .iter()
        .map(|(k, v)| (k.clone(), v.bytes))
        .collect();
    let mlen = std::fs::metadata(out.join(jikji_format::manifest::MANIFEST_FILE))
        .map(|m| m.len())
        .unwrap_or(0);
    file_bytes.push((jikji_format::manifest::MANIFEST_FILE.to_string(), mlen));
    Ok((manifest, file_bytes))
}

/// Builds a bundle at `opts.out` from files already read and checked (`opts.corpus`,
/// `check`, `strict` and `quarantine` are not used). A file's `rel` is its source id in
/// the chunk records; an empty `path` means no modification date to fall back on.
/// Versions of one document (see [`crate::versions`]) are all indexed; all but the
/// newest are marked `archived`.
pub fn build_files(files: &[SourceFile], opts: &BuildOptions) -> Result<BuildReport> {
    let mut seconds = Vec::new();
    let corpus_bytes = files.iter().map(|f| f.text.len() as u64).sum();

    let t = Instant::now();
    let versions = crate::versions::resolve(files);
    let chunking = Chunking::new(opts.strategy, opts.params, opts.model_dir.as_deref())?;
    let mut records = Vec::new();
    let mut parents = Vec::new();
    let mut parent_of = Vec::new();
    let mut sources = Vec::with_capacity(files.len());
    for (f, v) in files.iter().zip(&versions) {
        let fc = chunk_file(f, &chunking, v);
        sources.push(source_entry(f, v, fc.chunks.len()));
        let first = parents.len();
        parent_of.extend(fc.parent_of.iter().map(|p| p.map(|i| first + i)));
        records.extend(fc.chunks);
        parents.extend(fc.parents);
    }
    link_parents(&mut records, &parent_of);
    let mut chunk_chars: Vec<usize> = records.iter().map(|r| r.text.chars().count()).collect();
    let chunk_chars = Dist::of(&mut chunk_chars);
    let analyzer = Analyzer::new(analyzer::ANALYZER_VERSION, opts.analyzer)?;
    let (terms_fst, postings, terms) = index_records(&records, &analyzer)?;
    let hanja = if opts.hanja {
        hanja_table(&records, &analyzer)?
    } else {
        None
    };
    seconds.push(("chunk+index".to_string(), t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let mut emb = None;
    let mut embedder = None;
    let (mut tokens, mut truncated, mut cached, mut embedded) = (0, 0, 0, 0);
    let mut chunk_tokens = None;
    if let Some(dir) = &opts.model_dir {
        let info = model_info(dir)?;
        let texts: Vec<&str> = records.iter().map(|r| r.text.as_str()).collect();
        let e = embed_passages(
            &texts,
            dir,
            opts.cache_dir.as_deref(),
            opts.threads,
            opts.progress,
            &mut embedder,
        )?;
        (tokens, truncated, cached, embedded) = (e.tokens, e.truncated, e.cached, e.embedded);
        chunk_tokens = Some(Dist::of(&mut e.per_text.clone()));
        emb = Some((info, write_vectors(jikji_embed::DIM, &e.vectors)?));
    }
    seconds.push(("embed".to_string(), t.elapsed().as_secs_f64()));

    let t = Instant::now();
    if let (Some(dir), None) = (&opts.model_dir, &embedder) {
        embedder = Some(load_build_embedder(dir)?);
    }
    let calibration = crate::calibrate::calibrate(
        &terms_fst,
        &postings,
        &write_chunks(&records)?,
        emb.as_ref().map(|(_, bytes)| bytes.clone()),
        embedder.as_ref(),
        opts.threads,
        opts.analyzer,
        opts.bm25,
    )?;
    seconds.push(("calibrate".to_string(), t.elapsed().as_secs_f64()));

    let t = Instant::now();
    let (_, file_bytes) = write_bundle(
        &opts.out,
        BundleParts {
            records: &records,
            parents: &parents,
            chunking: Some(chunking.info(parents.len())),
            terms_fst,
            postings,
            terms,
            vectors: emb,
            params: opts.params,
            sources,
            calibration,
            analyzer: opts.analyzer,
            hanja,
            bm25: opts.bm25,
        },
    )?;
    seconds.push(("write".to_string(), t.elapsed().as_secs_f64()));
    Ok(BuildReport {
        files: files.len(),
        findings: Vec::new(),
        quarantined: Vec::new(),
        corpus_bytes,
        strategy: chunking.strategy.name().to_string(),
        chunks: records.len(),
        parents: parents.len(),
        chunk_chars,
        chunk_tokens,
        terms,
        tokens,
        truncated,
        cached,
        embedded,
        seconds,
        file_bytes,
    })
}

/// The file's modification date as `YYYY-MM-DD` (UTC), if the file system has it.
fn modified_date(path: &Path) -> Option<String> {
    let t = std::fs::metadata(path).ok()?.modified().ok()?;
    Some(humantime::format_rfc3339_seconds(t).to_string()[..10].to_string())
}

fn progress_bar(show: bool, len: u64, msg: &'static str) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} chunks ({per_sec}, eta {eta})")
            .unwrap()
            .progress_chars("=> "),
    );
    bar.set_message(msg);
    bar
}

fn cache_key(model_sha: &str, text: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(model_sha.as_bytes());
    h.update([0]);
    h.update(Prefix::Passage.as_str().as_bytes());
    h.update(text.as_bytes());
    h.finalize().into()
}

struct CacheEntry {
    tokens: u32,
    truncated: bool,
    vector: Vec<f32>,
}

/// Append-only cache of passage vectors keyed by SHA-256(model, prefix, chunk text), one
/// file per model: records of `key[32] | u32 tokens | u8 truncated | f32[DIM]`. A torn
/// final record (crash while appending) is ignored on load.
struct VectorCache {
    path: Option<PathBuf>,
    map: HashMap<[u8; 32], CacheEntry>,
    pending: Vec<u8>,
}

const RECORD: usize = 32 + 4 + 1 + 4 * jikji_embed::DIM;

impl VectorCache {
    fn open(dir: Option<&Path>, model_sha: &str) -> Result<Self> {
        let Some(dir) = dir else {
            return Ok(VectorCache {
                path: None,
                map: HashMap::new(),
                pending: Vec::new(),
            });
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| BuildError::io("creating cache folder", dir, e))?;
        let path = dir.join(format!("vectors-{}.bin", &model_sha[..16]));
        let mut map = HashMap::new();
        if let Ok(mut f) = std::fs::File::open(&path) {
            let mut buf = Vec::new();
            f.read_to_end(&mut buf)
                .map_err(|e| BuildError::io("reading", &path, e))?;
            for rec in buf.chunks_exact(RECORD) {
                let key: [u8; 32] = rec[..32].try_into().unwrap();
                let tokens = u32::from_le_bytes(rec[32..36].try_into().unwrap());
                let truncated = rec[36] != 0;
                let vector = rec[37..]
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                map.insert(
                    key,
                    CacheEntry {
                        tokens,
                        truncated,
                        vector,
                    },
                );
            }
        }
        Ok(VectorCache {
            path: Some(path),
            map,
            pending: Vec::new(),
        })
    }

    fn insert(&mut self, key: [u8; 32], e: CacheEntry) {
        if self.path.is_some() {
            self.pending.extend_from_slice(&key);
            self.pending.extend_from_slice(&e.tokens.to_le_bytes());
            self.pending.push(u8::from(e.truncated));
            for v in &e.vector {
                self.pending.extend_from_slice(&v.to_le_bytes());
            }
        }
        self.map.insert(key, e);
    }

    fn flush(&mut self) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if self.pending.is_empty() {
            return Ok(());
        }
        // Drop a torn tail first so records stay aligned.
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false) // keep the records; only a torn tail is cut below
            .write(true)
            .open(path)
            .map_err(|e| BuildError::io("opening", path, e))?;
        f.set_len(len - len % RECORD as u64)
            .map_err(|e| BuildError::io("truncating", path, e))?;
        drop(f);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| BuildError::io("opening", path, e))?;
        f.write_all(&self.pending)
            .map_err(|e| BuildError::io("writing", path, e))?;
        self.pending.clear();
        Ok(())
    }
}

/// Prints the closing summary.
pub fn print_report(r: &BuildReport, out: &Path) {
    eprintln!("built {}", out.display());
    eprintln!(
        "  files {}  chunks {}  terms {}  model tokens {}  truncated {}  embedded {} (cached {})",
        r.files, r.chunks, r.terms, r.tokens, r.truncated, r.embedded, r.cached
    );
    let parents = if r.parents > 0 {
        format!(" (+{} parent sections, returned as results)", r.parents)
    } else {
        String::new()
    };
    eprintln!(
        "  chunking {}{parents}: chars median {} p95 {} max {}",
        r.strategy, r.chunk_chars.median, r.chunk_chars.p95, r.chunk_chars.max
    );
    match &r.chunk_tokens {
        Some(t) => eprintln!(
            "  model tokens per chunk: median {} p95 {} max {} (limit {}); truncated {}",
            t.median,
            t.p95,
            t.max,
            jikji_embed::MAX_TOKENS,
            r.truncated
        ),
        None => eprintln!("  model tokens per chunk: not counted (no model: chars only)"),
    }
    for f in &r.findings {
        eprintln!("  {f}");
    }
    let errors = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    if errors > 0 {
        eprintln!("  {errors} file error(s): those files were left out (see `jikji check`)");
    }
    for q in &r.quarantined {
        eprintln!("  quarantined a copy: {}", q.display());
    }
    let secs: Vec<String> = r
        .seconds
        .iter()
        .map(|(p, s)| format!("{p} {s:.2}s"))
        .collect();
    eprintln!("  time: {}", secs.join(", "));
    let bytes: Vec<String> = r
        .file_bytes
        .iter()
        .map(|(f, b)| format!("{f} {b}"))
        .collect();
    eprintln!("  bytes: {}", bytes.join(", "));
}

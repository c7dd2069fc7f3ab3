//! Write stage: everything a bundle holds → the bundle folder, atomically
//! ([`BundleWriter`]: a temp folder renamed into place, the previous bundle kept as
//! `BUNDLE.prev`), with a manifest that records the [`BundleSettings`].

use std::path::Path;

use jikji_format::chunks::{write_chunks, CHUNKS_FILE};
use jikji_format::hanja::HANJA_FILE;
use jikji_format::manifest::MANIFEST_FILE;
use jikji_format::postings::{POSTINGS_FILE, TERMS_FILE};
use jikji_format::vectors::VECTORS_FILE;
use jikji_format::{
    analyzer, BundleWriter, ChunkRecord, ChunkingInfo, Counts, Manifest, ModelInfo, SourceEntry,
};

use super::index::Indexed;
use super::BundleSettings;
use crate::error::Result;

/// Everything a bundle holds, ready to write.
pub struct BundleParts<'a> {
    /// Chunk records (doc id = index).
    pub records: &'a [ChunkRecord],
    /// Parent sections (`parent-child`), stored after `records`, not indexed.
    pub parents: &'a [ChunkRecord],
    /// How the chunks were cut ([`super::Chunking::info`]).
    pub chunking: ChunkingInfo,
    /// The lexical files ([`super::index::index`]).
    pub indexed: Indexed,
    /// Model and `vectors.bin` bytes, if the bundle has vectors.
    pub vectors: Option<(ModelInfo, Vec<u8>)>,
    /// The source files table.
    pub sources: Vec<SourceEntry>,
    /// Score calibration ([`crate::calibrate`]).
    pub calibration: Option<jikji_format::Calibration>,
    /// The settings the bundle was built with (recorded in the manifest).
    pub settings: BundleSettings,
}

/// Writes a bundle atomically at `out`. Returns the manifest and the bytes per bundle
/// file (manifest included). Errors: I/O on the temp folder or the swap.
pub fn write_bundle(out: &Path, p: BundleParts) -> Result<(Manifest, Vec<(String, u64)>)> {
    let chunks_bin = if p.parents.is_empty() {
        write_chunks(p.records)?
    } else {
        write_chunks(&[p.records, p.parents].concat())?
    };
    let mut w = BundleWriter::create(out)?;
    w.add_file(TERMS_FILE, &p.indexed.terms_fst)?;
    w.add_file(POSTINGS_FILE, &p.indexed.postings)?;
    w.add_file(CHUNKS_FILE, &chunks_bin)?;
    if let Some(h) = &p.indexed.hanja {
        w.add_file(HANJA_FILE, h)?;
    }
    let model = match p.vectors {
        Some((info, bytes)) => {
            w.add_file(VECTORS_FILE, &bytes)?;
            Some(info)
        }
        None => None,
    };
    let s = p.settings;
    let manifest = Manifest {
        format_version: jikji_format::FORMAT_VERSION,
        analyzer_version: analyzer::ANALYZER_VERSION,
        analyzer: s.analyzer,
        generator: format!("jikji {}", env!("CARGO_PKG_VERSION")),
        built_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
        chunk_size: s.params.size,
        overlap: s.params.overlap,
        bm25: s.bm25,
        counts: Counts {
            files: p.sources.len(),
            chunks: p.records.len(),
            terms: p.indexed.terms,
            vectors: if model.is_some() { p.records.len() } else { 0 },
        },
        model,
        files: Default::default(),
        calibration: p.calibration,
        sources: p.sources,
        chunking: Some(p.chunking),
        hanja: s.hanja,
        allow_ai_draft: s.allow_ai_draft,
    };
    let manifest = w.finish(manifest)?;
    let mut file_bytes: Vec<(String, u64)> = manifest
        .files
        .iter()
        .map(|(k, v)| (k.clone(), v.bytes))
        .collect();
    let mlen = std::fs::metadata(out.join(MANIFEST_FILE))
        .map(|m| m.len())
        .unwrap_or(0);
    file_bytes.push((MANIFEST_FILE.to_string(), mlen));
    Ok((manifest, file_bytes))
}

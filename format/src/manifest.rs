//! `manifest.json`: what a bundle holds and how to check it.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::{FormatError, Result};

/// File name of the manifest in a bundle.
pub const MANIFEST_FILE: &str = "manifest.json";
/// Version of the bundle format as a whole; bumped on any incompatible change of any file.
pub const FORMAT_VERSION: u32 = 1;

/// Size and SHA-256 of one bundle file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FileEntry {
    /// Lowercase hex SHA-256 (FIPS 180-4) of the file's bytes.
    pub sha256: String,
    /// Size in bytes.
    pub bytes: u64,
}

/// The embedding model whose vectors the bundle holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelInfo {
    /// Model id, e.g. `multilingual-e5-small-q4`.
    pub id: String,
    /// Lowercase hex SHA-256 of the ONNX file the vectors were made with.
    pub sha256: String,
    /// Vector dimension.
    pub dim: usize,
    /// Maximum sequence length in tokens, specials included.
    pub max_tokens: usize,
}

/// Counts of what the bundle holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    /// Source files indexed.
    pub files: usize,
    /// Chunks (documents of the index).
    pub chunks: usize,
    /// Distinct terms in the term dictionary.
    pub terms: usize,
    /// Dense vectors (equal to `chunks` when the bundle has vectors, else 0).
    pub vectors: usize,
}

/// BM25 parameters (Robertson & Zaragoza 2009, "The Probabilistic Relevance Framework").
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bm25Params {
    /// Term-frequency saturation k1.
    pub k1: f32,
    /// Length normalisation b.
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Bm25Params { k1: 1.2, b: 0.75 }
    }
}

/// The bundle manifest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Bundle format version ([`FORMAT_VERSION`]).
    pub format_version: u32,
    /// Analyzer version used for the terms ([`crate::analyzer::ANALYZER_VERSION`]).
    pub analyzer_version: u32,
    /// Builder that wrote it, e.g. `jikji 0.1.0`.
    pub generator: String,
    /// Build time, seconds since the Unix epoch (UTC).
    pub built_at: u64,
    /// Chunking parameters: size and overlap in chars.
    pub chunk_size: usize,
    /// Overlap in chars.
    pub overlap: usize,
    /// BM25 parameters.
    pub bm25: Bm25Params,
    /// Embedding model, if the bundle has vectors.
    pub model: Option<ModelInfo>,
    /// Counts.
    pub counts: Counts,
    /// Every other file of the bundle with its size and checksum.
    pub files: BTreeMap<String, FileEntry>,
}

impl Manifest {
    /// Parses manifest bytes and checks the format and analyzer versions.
    pub fn parse(bytes: &[u8]) -> Result<Self> {
        #[derive(Deserialize)]
        struct VersionOnly {
            format_version: u32,
        }
        let v: VersionOnly = serde_json::from_slice(bytes).map_err(|source| FormatError::Json {
            file: MANIFEST_FILE.into(),
            source,
        })?;
        if v.format_version != FORMAT_VERSION {
            return Err(FormatError::FormatVersion {
                file: MANIFEST_FILE.into(),
                found: v.format_version,
                expected: FORMAT_VERSION,
            });
        }
        let m: Manifest = serde_json::from_slice(bytes).map_err(|source| FormatError::Json {
            file: MANIFEST_FILE.into(),
            source,
        })?;
        if m.analyzer_version != crate::analyzer::ANALYZER_VERSION {
            return Err(FormatError::corrupt(
                MANIFEST_FILE,
                0,
                format!(
                    "analyzer version {} differs from this engine's {}; rebuild the bundle",
                    m.analyzer_version,
                    crate::analyzer::ANALYZER_VERSION
                ),
            ));
        }
        Ok(m)
    }
}

//! Importing passage vectors made elsewhere (`jikji build --vectors FILE.npy`), e.g. by
//! `scripts/ray-embed.py` on a Ray cluster, instead of embedding the chunks here.
//!
//! A vectors file is two files side by side:
//! - `FILE.npy`: float32 `[n, 384]`, little-endian, C order ([`crate::npy`]); row `i` is the
//!   L2-normalised `sentence_embedding` of chunk `i` of the sidecar, embedded with the
//!   `passage: ` prefix;
//! - `FILE.json` (the same path with the extension `.json`), UTF-8 JSON:
//!
//! ```json
//! {"format": "jikji-vectors", "version": 1,
//!  "model": {"file": "model-int8.onnx", "sha256": "<hex SHA-256 of that file>"},
//!  "prefix": "passage: ", "dim": 384, "count": 2,
//!  "chunks": [{"id": "<chunk id of `jikji chunk`>", "text_sha256": "<hex SHA-256 of its text>",
//!              "tokens": 181, "truncated": false}, …]}
//! ```
//!
//! `chunks[i]` describes row `i`: `id` is the `id` field of `jikji chunk` (first 16 hex digits of
//! SHA-256 of source path, section and position: [`super::chunk_id`]), `text_sha256` the SHA-256
//! of the chunk's `text` field (UTF-8), `tokens` the tokens fed to the model (≤ 512, `<s>`,
//! `</s>` and prefix included), `truncated` whether the text was cut at 512 tokens.
//!
//! The import refuses, naming the file and the field: another `format` or `version`; a
//! `model.sha256` that is neither the SHA-256 of the build's `model.onnx` nor of its
//! `model-int8.onnx` (the same weights; the builder embeds with the latter); a `prefix` other
//! than `passage: `; a `dim` other than 384 or other than the `.npy`'s columns; a `count`
//! other than the `.npy`'s rows or the number of `chunks`; a chunk of the build whose `id` is
//! missing or whose `text_sha256` differs (the corpus or the chunking changed since
//! `jikji chunk`); a row that is not finite or not of unit length (|‖v‖ − 1| > 1e-3). Rows for
//! chunks the build does not have are ignored (and counted).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use jikji_format::{sha256_hex, ChunkRecord};
use serde::Deserialize;

use super::embed::Embedded;
use crate::error::{BuildError, Result};

/// The `format` of a sidecar.
pub const FORMAT: &str = "jikji-vectors";
/// The `version` of a sidecar this build reads.
pub const VERSION: u32 = 1;

#[derive(Deserialize)]
struct Sidecar {
    format: String,
    version: u32,
    model: SidecarModel,
    prefix: String,
    dim: usize,
    count: usize,
    chunks: Vec<SidecarChunk>,
}

#[derive(Deserialize)]
struct SidecarModel {
    #[serde(default)]
    file: String,
    sha256: String,
}

#[derive(Deserialize)]
struct SidecarChunk {
    id: String,
    text_sha256: String,
    #[serde(default)]
    tokens: usize,
    #[serde(default)]
    truncated: bool,
}

/// The sidecar of `npy`: the same path with the extension `.json`.
pub fn sidecar_path(npy: &Path) -> PathBuf {
    npy.with_extension("json")
}

/// Vectors imported for a build, and what the file held beyond the build's chunks.
pub struct Imported {
    /// One vector per record, in record order, with the sidecar's token counts.
    pub embedded: Embedded,
    /// Rows of the file whose chunk id the build does not have (ignored).
    pub extra_rows: usize,
}

/// Reads `npy` and its sidecar and returns one vector per record of `records` (the build's
/// chunks, in order), after the checks of the module doc against the model in `model_dir`.
///
/// # Errors
/// [`BuildError::Io`] if a file cannot be read (or hashed); [`BuildError::InvalidInput`]
/// naming the `.npy` or sidecar file and the field or row that does not match.
pub fn import_vectors(npy: &Path, records: &[ChunkRecord], model_dir: &Path) -> Result<Imported> {
    let side = sidecar_path(npy);
    let bad = |path: &Path, message: String| BuildError::InvalidInput {
        path: path.to_path_buf(),
        line: None,
        message,
    };
    let bytes = std::fs::read(&side).map_err(|e| BuildError::io("reading", &side, e))?;
    let s: Sidecar = serde_json::from_slice(&bytes).map_err(|e| {
        bad(
            &side,
            format!("not a vectors sidecar ({e}); see `jikji build --help` for the format"),
        )
    })?;
    if s.format != FORMAT || s.version != VERSION {
        return Err(bad(
            &side,
            format!(
                "field \"format\"/\"version\" is {:?}/{}, expected {FORMAT:?}/{VERSION}",
                s.format, s.version
            ),
        ));
    }
    if s.prefix != jikji_embed::Prefix::Passage.as_str() {
        return Err(bad(
            &side,
            format!(
                "field \"prefix\" is {:?}, expected \"passage: \" (chunks are embedded as passages)",
                s.prefix
            ),
        ));
    }
    if s.dim != jikji_embed::DIM {
        return Err(bad(
            &side,
            format!(
                "field \"dim\" is {}, the model's vectors have {}",
                s.dim,
                jikji_embed::DIM
            ),
        ));
    }
    let mut model_shas = Vec::new();
    for name in ["model.onnx", "model-int8.onnx"] {
        let p = model_dir.join(name);
        if p.exists() {
            let b = std::fs::read(&p).map_err(|e| BuildError::io("reading", &p, e))?;
            model_shas.push((name, sha256_hex(&b)));
        }
    }
    if !model_shas
        .iter()
        .any(|(_, h)| h.eq_ignore_ascii_case(&s.model.sha256))
    {
        let have: Vec<String> = model_shas.iter().map(|(n, h)| format!("{n} {h}")).collect();
        return Err(bad(
            &side,
            format!(
                "field \"model.sha256\" is {} ({}), which is none of the model files in {}: {}; the vectors come from another model",
                s.model.sha256,
                if s.model.file.is_empty() { "no file named" } else { &s.model.file },
                model_dir.display(),
                have.join(", ")
            ),
        ));
    }
    if s.count != s.chunks.len() {
        return Err(bad(
            &side,
            format!(
                "field \"count\" is {} but \"chunks\" lists {}",
                s.count,
                s.chunks.len()
            ),
        ));
    }
    let m = crate::npy::read_f32(npy)?;
    if m.cols != s.dim {
        return Err(bad(
            npy,
            format!(
                "has {} columns, the sidecar's field \"dim\" says {}",
                m.cols, s.dim
            ),
        ));
    }
    if m.rows != s.count {
        return Err(bad(
            npy,
            format!(
                "has {} rows, the sidecar's field \"count\" says {}",
                m.rows, s.count
            ),
        ));
    }
    let mut by_id: HashMap<&str, usize> = HashMap::with_capacity(s.chunks.len());
    for (i, c) in s.chunks.iter().enumerate() {
        if let Some(j) = by_id.insert(c.id.as_str(), i) {
            return Err(bad(
                &side,
                format!(
                    "field \"chunks\": id {} is listed twice (rows {j} and {i})",
                    c.id
                ),
            ));
        }
        if c.tokens > jikji_embed::MAX_TOKENS {
            return Err(bad(
                &side,
                format!(
                    "field \"chunks[{i}].tokens\" is {}, over the model's {}",
                    c.tokens,
                    jikji_embed::MAX_TOKENS
                ),
            ));
        }
    }
    let mut out = Embedded {
        vectors: Vec::with_capacity(records.len()),
        tokens: 0,
        truncated: 0,
        cached: 0,
        embedded: 0,
        per_text: Vec::with_capacity(records.len()),
    };
    for r in records {
        let &row = by_id.get(r.id.as_str()).ok_or_else(|| {
            bad(
                &side,
                format!(
                    "field \"chunks\" has no id {} ({} section {}, chars {}–{}): run `jikji chunk` on this corpus and embed again",
                    r.id, r.source, r.section, r.start, r.end
                ),
            )
        })?;
        let c = &s.chunks[row];
        let want = sha256_hex(r.text.as_bytes());
        if !c.text_sha256.eq_ignore_ascii_case(&want) {
            return Err(bad(
                &side,
                format!(
                    "field \"chunks[{row}].text_sha256\" of id {} ({}) is {}, the chunk's text now hashes to {want}: the corpus or the chunking changed since `jikji chunk`",
                    r.id, r.source, c.text_sha256
                ),
            ));
        }
        let v = m.row(row);
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if !norm.is_finite() || (norm - 1.0).abs() > 1e-3 {
            return Err(bad(
                npy,
                format!(
                    "row {row} (id {}) has length {norm}, not a unit vector (a sentence_embedding is L2-normalised)",
                    r.id
                ),
            ));
        }
        out.vectors.push(v.to_vec());
        out.tokens += c.tokens;
        out.per_text.push(c.tokens);
        out.truncated += usize::from(c.truncated);
    }
    out.cached = records.len();
    let extra_rows = s.count - records.len().min(s.count);
    Ok(Imported {
        embedded: out,
        extra_rows,
    })
}

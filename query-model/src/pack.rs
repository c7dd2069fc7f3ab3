//! The query-model pack: the files [`write_pack_dir`] makes from an E5S1 file and
//! [`crate::QueryModel::from_pack_dir`] reads. Design and measurements:
//! `docs/design/query-model-pack.md`.
//!
//! A pack folder (e.g. `models/e5-small-pack/`) holds four files, all integers little-endian:
//!
//! - [`LAYERS_FILE`] (`layers.bin`, 12,973,092 B for e5-small): magic `JKQL`, u32 version (= 1),
//!   u32 hidden, layers, heads, ffn, vocab, max_pos, f32 LayerNorm eps (36 bytes); then, with
//!   no padding: the position table with token-type row 0 added (`max_pos × hidden` f32); the
//!   embedding LayerNorm weight and bias (`hidden` f32 each); per layer, in order: Wq, bq, Wk,
//!   bk, Wv, bv, Wao, bao, aln weight, aln bias, Wfi, bfi, Wfo, bfo, oln weight, oln bias —
//!   matrices in Q4_0 exactly as in E5S1 (row-major out × in, see
//!   [`crate::kernels::Q4Matrix`]), vectors as f32. The file's length must be exactly what
//!   the header implies.
//! - [`ROWS_FILE`] (`rows.bin`, 54,000,448 B): magic `JKQR`, u32 version (= 1), u32 rows (the
//!   tokenizer's 250,002 pieces; E5S1's 35 extra table rows are never looked up), u32 hidden;
//!   then one Q4_0 row of `hidden` weights (216 bytes for 384) per token id, in id order. The
//!   browser will fetch these rows as pages (the design document); natively the file is read
//!   whole.
//! - [`crate::tokenizer::TOKENIZER_FILE`] (`tokenizer.bin`): the compact Unigram tokenizer
//!   made from the model's `tokenizer.json` (layout in [`crate::tokenizer`]).
//! - [`INFO_FILE`] (`pack.json`, [`PackInfo`]): which ONNX model the pack stands for (its
//!   id and the SHA-256 of `model.onnx`, the hash a bundle's manifest records for its
//!   vectors) and the byte length and SHA-256 of each of the three files above, checked when
//!   the pack is opened ([`crate::QueryPack::open`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::e5s1::{Dtype, E5s1};
use crate::kernels::Q4Matrix;
use crate::ModelError;

/// Name of the transformer-layer file in a pack folder.
pub const LAYERS_FILE: &str = "layers.bin";
/// Name of the token-embedding-row file in a pack folder.
pub const ROWS_FILE: &str = "rows.bin";
/// Magic of [`LAYERS_FILE`].
pub const LAYERS_MAGIC: &[u8; 4] = b"JKQL";
/// Magic of [`ROWS_FILE`].
pub const ROWS_MAGIC: &[u8; 4] = b"JKQR";
/// Version of both files.
pub const PACK_VERSION: u32 = 1;
/// Bytes of the [`LAYERS_FILE`] header.
pub const LAYERS_HEADER: usize = 36;
/// Bytes of the [`ROWS_FILE`] header.
pub const ROWS_HEADER: usize = 16;
/// Name of the pack's description file.
pub const INFO_FILE: &str = "pack.json";
/// [`PackInfo::format`] of a pack.
pub const INFO_FORMAT: &str = "jikji-query-model-pack";

/// One file of a pack as [`INFO_FILE`] records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackFile {
    /// Length in bytes.
    pub bytes: u64,
    /// SHA-256 of the bytes, lowercase hex.
    pub sha256: String,
}

/// [`INFO_FILE`]: what a pack stands for and what it holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackInfo {
    /// Always [`INFO_FORMAT`].
    pub format: String,
    /// [`PACK_VERSION`].
    pub version: u32,
    /// Id of the ONNX model the pack reproduces (e.g. `multilingual-e5-small-q4`).
    pub model_id: String,
    /// SHA-256 (hex) of that `model.onnx`: a bundle whose manifest names another model
    /// hash refuses this pack.
    pub model_sha256: String,
    /// [`LAYERS_FILE`], [`ROWS_FILE`], [`crate::tokenizer::TOKENIZER_FILE`] by name.
    pub files: BTreeMap<String, PackFile>,
}

/// Lowercase hex SHA-256 of `b`.
pub fn sha256_hex(b: &[u8]) -> String {
    Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// The pack's hash, as a bundle's `pages.query_model.pack_sha256` records it: SHA-256 (hex)
/// of the SHA-256 hex digests of [`LAYERS_FILE`], [`ROWS_FILE`] and
/// [`crate::tokenizer::TOKENIZER_FILE`] (as `pack.json` lists them), each followed by `\n`,
/// in that order. A file missing from `info` counts as an empty digest.
pub fn pack_hash(info: &PackInfo) -> String {
    let mut h = Sha256::new();
    for name in [LAYERS_FILE, ROWS_FILE, crate::tokenizer::TOKENIZER_FILE] {
        h.update(info.files.get(name).map_or("", |f| f.sha256.as_str()));
        h.update(b"\n");
    }
    h.finalize().iter().map(|x| format!("{x:02x}")).collect()
}

/// What [`write_pack_dir`] packs.
#[derive(Debug, Clone, Copy)]
pub struct PackSource<'a> {
    /// The E5S1 file's bytes.
    pub e5s1: &'a [u8],
    /// The model's `tokenizer.json` bytes.
    pub tokenizer_json: &'a [u8],
    /// Where `tokenizer_json` came from (for errors).
    pub tokenizer_file: &'a str,
    /// [`PackInfo::model_id`].
    pub model_id: &'a str,
    /// [`PackInfo::model_sha256`]: SHA-256 of the `model.onnx` this pack reproduces.
    pub model_sha256: &'a str,
}

/// What [`write_pack_dir`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackSummary {
    /// Bytes of [`LAYERS_FILE`].
    pub layers_bytes: u64,
    /// Bytes of [`ROWS_FILE`].
    pub rows_bytes: u64,
    /// Bytes of [`crate::tokenizer::TOKENIZER_FILE`].
    pub tokenizer_bytes: u64,
    /// Token rows in [`ROWS_FILE`].
    pub rows: usize,
}

fn f32s<'a>(m: &E5s1<'a>, name: &str, n: usize) -> Result<&'a [u8], ModelError> {
    m.tensor(name, Dtype::F32, n)
}

/// Serialises the layer file's contents from a parsed E5S1 file.
pub fn layers_bytes(m: &E5s1<'_>) -> Result<Vec<u8>, ModelError> {
    let d = m.dims;
    let (h, ff) = (d.hidden, d.ffn);
    let mut out = Vec::new();
    out.extend_from_slice(LAYERS_MAGIC);
    for v in [
        PACK_VERSION,
        h as u32,
        d.layers as u32,
        d.heads as u32,
        ff as u32,
        m.n_pieces as u32,
        d.max_pos as u32,
    ] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&d.eps.to_le_bytes());
    let pos = f32s(m, "emb.pos", d.max_pos * h)?;
    let typ = f32s(m, "emb.type", d.type_vocab * h)?;
    for (i, p) in pos.chunks_exact(4).enumerate() {
        let a = f32::from_le_bytes(p.try_into().unwrap());
        let t = &typ[(i % h) * 4..(i % h) * 4 + 4];
        let b = f32::from_le_bytes(t.try_into().unwrap());
        out.extend_from_slice(&(a + b).to_le_bytes());
    }
    out.extend_from_slice(f32s(m, "emb.ln.w", h)?);
    out.extend_from_slice(f32s(m, "emb.ln.b", h)?);
    for l in 0..d.layers {
        for (name, n_out, n_in) in [
            ("q", h, h),
            ("k", h, h),
            ("v", h, h),
            ("ao", h, h),
            ("aln", h, 0),
            ("fi", ff, h),
            ("fo", h, ff),
            ("oln", h, 0),
        ] {
            if n_in == 0 {
                out.extend_from_slice(f32s(m, &format!("l{l}.{name}.w"), n_out)?);
            } else {
                out.extend_from_slice(m.tensor(
                    &format!("l{l}.{name}.w"),
                    Dtype::Q4_0,
                    n_out * n_in,
                )?);
            }
            out.extend_from_slice(f32s(m, &format!("l{l}.{name}.b"), n_out)?);
        }
    }
    Ok(out)
}

/// Serialises the row file's contents (the first `n_pieces` rows of `emb.word`).
pub fn rows_bytes(m: &E5s1<'_>) -> Result<Vec<u8>, ModelError> {
    let d = m.dims;
    let word = m.tensor("emb.word", Dtype::Q4_0, d.vocab * d.hidden)?;
    let rb = Q4Matrix::row_bytes(d.hidden);
    let mut out = Vec::with_capacity(ROWS_HEADER + m.n_pieces * rb);
    out.extend_from_slice(ROWS_MAGIC);
    for v in [PACK_VERSION, m.n_pieces as u32, d.hidden as u32] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&word[..m.n_pieces * rb]);
    Ok(out)
}

/// Writes [`LAYERS_FILE`], [`ROWS_FILE`] and [`crate::tokenizer::TOKENIZER_FILE`] into
/// `dir` (created if missing) from the E5S1 file and `tokenizer.json`, then [`INFO_FILE`].
/// Each file is written to a `.tmp` sibling and renamed over the old one, `pack.json` last,
/// so an interrupted run leaves a pack whose `pack.json` does not match (refused on opening)
/// rather than a silently mixed one; nothing else in `dir` is touched. Errors:
/// [`ModelError::E5s1`] and friends for a bad source, [`ModelError::TokenizerJson`] for an
/// unsupported tokenizer, [`ModelError::Io`] naming the file for I/O.
pub fn write_pack_dir(src: &PackSource<'_>, dir: &Path) -> Result<PackSummary, ModelError> {
    let m = E5s1::parse(src.e5s1)?;
    let layers = layers_bytes(&m)?;
    let rows = rows_bytes(&m)?;
    let tok = crate::tokenizer::compact_tokenizer_json(src.tokenizer_json, src.tokenizer_file)?;
    let parsed = crate::tokenizer::Tokenizer::from_bytes(&tok, crate::tokenizer::TOKENIZER_FILE)?;
    if parsed.vocab_size() != m.n_pieces {
        return Err(ModelError::TokenizerJson {
            file: src.tokenizer_file.to_string(),
            msg: format!(
                "{} pieces, the E5S1 file has {}",
                parsed.vocab_size(),
                m.n_pieces
            ),
        });
    }
    std::fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;
    let mut files = BTreeMap::new();
    for (name, bytes) in [
        (LAYERS_FILE, &layers),
        (ROWS_FILE, &rows),
        (crate::tokenizer::TOKENIZER_FILE, &tok),
    ] {
        write_atomic(dir, name, bytes)?;
        files.insert(
            name.to_string(),
            PackFile {
                bytes: bytes.len() as u64,
                sha256: sha256_hex(bytes),
            },
        );
    }
    let info = PackInfo {
        format: INFO_FORMAT.to_string(),
        version: PACK_VERSION,
        model_id: src.model_id.to_string(),
        model_sha256: src.model_sha256.to_string(),
        files,
    };
    let mut json = serde_json::to_vec_pretty(&info).expect("PackInfo serialises");
    json.push(b'\n');
    write_atomic(dir, INFO_FILE, &json)?;
    Ok(PackSummary {
        layers_bytes: layers.len() as u64,
        rows_bytes: rows.len() as u64,
        tokenizer_bytes: tok.len() as u64,
        rows: m.n_pieces,
    })
}

fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), ModelError> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}.tmp"));
    std::fs::write(&tmp, bytes).map_err(|e| ModelError::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| ModelError::io(&path, e))
}

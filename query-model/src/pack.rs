//! The query-model pack: the files [`write_pack_dir`] makes from an E5S1 file and
//! [`crate::QueryModel::from_pack_dir`] reads. Design and measurements:
//! `docs/design/query-model-pack.md`.
//!
//! A pack folder (e.g. `models/e5-small-pack/`) holds two files, all integers little-endian:
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

use std::path::Path;

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

/// What [`write_pack_dir`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackSummary {
    /// Bytes of [`LAYERS_FILE`].
    pub layers_bytes: u64,
    /// Bytes of [`ROWS_FILE`].
    pub rows_bytes: u64,
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

/// Writes [`LAYERS_FILE`] and [`ROWS_FILE`] into `dir` (created if missing) from the bytes
/// of an E5S1 file. Each file is written to a `.tmp` sibling and renamed over the old one, so
/// an interrupted run leaves the previous pack intact; nothing else in `dir` is touched.
/// Errors: [`ModelError::E5s1`] and friends for a bad source, [`ModelError::Io`] naming the
/// file for I/O.
pub fn write_pack_dir(e5s1: &[u8], dir: &Path) -> Result<PackSummary, ModelError> {
    let m = E5s1::parse(e5s1)?;
    let layers = layers_bytes(&m)?;
    let rows = rows_bytes(&m)?;
    std::fs::create_dir_all(dir).map_err(|e| ModelError::io(dir, e))?;
    for (name, bytes) in [(LAYERS_FILE, &layers), (ROWS_FILE, &rows)] {
        let path = dir.join(name);
        let tmp = dir.join(format!("{name}.tmp"));
        std::fs::write(&tmp, bytes).map_err(|e| ModelError::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| ModelError::io(&path, e))?;
    }
    Ok(PackSummary {
        layers_bytes: layers.len() as u64,
        rows_bytes: rows.len() as u64,
        rows: m.n_pieces,
    })
}

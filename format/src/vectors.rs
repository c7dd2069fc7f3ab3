//! Dense vectors (`vectors.bin`): int8 scalar quantization with one f32 scale per vector.
//!
//! Each input vector `x` (L2-normalised, dimension `dim`) is stored as
//! `scale = max_i |x_i| / 127` and `q_i = round(x_i / scale)` in `[-127, 127]`, so
//! `x_i ≈ q_i · scale` (maximum error `scale / 2` per component). Cosine similarity with
//! a normalised query `y` is then `scale · Σ q_i y_i`.
//!
//! Layout (little-endian):
//! ```text
//! magic "JKVE" | u32 version | u32 dim | u32 count | f32 scale[count] | i8 q[count × dim]
//! ```

use crate::codec::{put_header, Reader};
use crate::error::{FormatError, Result};

/// File name of the vectors in a bundle.
pub const VECTORS_FILE: &str = "vectors.bin";
const MAGIC: &[u8; 4] = b"JKVE";
const VERSION: u32 = 1;

/// Quantizes one vector to `(scale, int8 components)`.
pub fn quantize(x: &[f32]) -> (f32, Vec<i8>) {
    let max = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    if max == 0.0 || !max.is_finite() {
        return (0.0, vec![0; x.len()]);
    }
    let scale = max / 127.0;
    (
        scale,
        x.iter()
            .map(|v| (v / scale).round().clamp(-127.0, 127.0) as i8)
            .collect(),
    )
}

/// Serialises vectors of dimension `dim` (all must have that length), quantizing each
/// with [`quantize`].
///
/// Errors: [`FormatError::InvalidInput`] if a vector's length differs from `dim`.
pub fn write_vectors(dim: usize, vectors: &[Vec<f32>]) -> Result<Vec<u8>> {
    let mut rows = Vec::with_capacity(vectors.len());
    for (i, v) in vectors.iter().enumerate() {
        if v.len() != dim {
            return Err(FormatError::InvalidInput(format!(
                "vector {i} has {} dimensions, expected {dim}",
                v.len()
            )));
        }
        rows.push(quantize(v));
    }
    write_quantized(dim, rows.iter().map(|(s, q)| (*s, q.as_slice())))
}

/// Serialises already quantized rows `(scale, int8 components)` as they are, so vectors
/// copied from another bundle ([`Vectors::row`]) are stored bit for bit unchanged.
///
/// Errors: [`FormatError::InvalidInput`] if a row's length differs from `dim`.
pub fn write_quantized<'a>(
    dim: usize,
    rows: impl IntoIterator<Item = (f32, &'a [i8])>,
) -> Result<Vec<u8>> {
    let mut scales = Vec::new();
    let mut qs = Vec::new();
    for (i, (scale, q)) in rows.into_iter().enumerate() {
        if q.len() != dim {
            return Err(FormatError::InvalidInput(format!(
                "vector {i} has {} dimensions, expected {dim}",
                q.len()
            )));
        }
        scales.push(scale);
        qs.extend(q.iter().map(|&v| v as u8));
    }
    let mut out = Vec::with_capacity(16 + scales.len() * 4 + qs.len());
    put_header(&mut out, MAGIC, VERSION);
    out.extend_from_slice(&(dim as u32).to_le_bytes());
    out.extend_from_slice(&(scales.len() as u32).to_le_bytes());
    for s in scales {
        out.extend_from_slice(&s.to_le_bytes());
    }
    out.extend(qs);
    Ok(out)
}

/// Read side: int8 vectors with their scales.
pub struct Vectors {
    dim: usize,
    scales: Vec<f32>,
    data: Vec<i8>,
}

impl Vectors {
    /// Parses `vectors.bin`. Errors: bad magic/version, or a size that does not match
    /// `dim × count` (or overflows `usize`, which is 32 bits in wasm32).
    pub fn open(bytes: &[u8]) -> Result<Self> {
        let mut r = Reader::new(VECTORS_FILE, bytes, 0);
        r.header(MAGIC, VERSION)?;
        let dim = r.u32()? as usize;
        let count = r.u32()? as usize;
        let size = |a: usize, b: usize, what: &str| {
            a.checked_mul(b)
                .ok_or_else(|| r.corrupt(format!("{what} size overflows: {a} × {b}")))
        };
        let scales_len = size(count, 4, "scale table")?;
        let data_len = size(count, dim, "vector data")?;
        let scales_raw = r.take(scales_len)?;
        let scales = scales_raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let data_raw = r.take(data_len)?;
        if r.pos() != bytes.len() {
            return Err(r.corrupt(format!("{} trailing bytes", bytes.len() - r.pos())));
        }
        Ok(Vectors {
            dim,
            scales,
            data: data_raw.iter().map(|&b| b as i8).collect(),
        })
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.scales.len()
    }

    /// True if there are no vectors.
    pub fn is_empty(&self) -> bool {
        self.scales.is_empty()
    }

    /// Approximate dot product (= cosine similarity for normalised inputs) of vector `i`
    /// with `query` (length `dim`).
    pub fn dot(&self, i: usize, query: &[f32]) -> f32 {
        let row = &self.data[i * self.dim..(i + 1) * self.dim];
        let mut acc = 0f32;
        for (q, y) in row.iter().zip(query) {
            acc += f32::from(*q) * y;
        }
        acc * self.scales[i]
    }

    /// Vector `i` as stored: its scale and its `dim` int8 components. Panics if `i` is
    /// out of range.
    pub fn row(&self, i: usize) -> (f32, &[i8]) {
        (self.scales[i], &self.data[i * self.dim..(i + 1) * self.dim])
    }

    /// Dequantized copy of vector `i`.
    pub fn get(&self, i: usize) -> Vec<f32> {
        let s = self.scales[i];
        self.data[i * self.dim..(i + 1) * self.dim]
            .iter()
            .map(|&q| f32::from(q) * s)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_dot_close_to_exact() {
        let a = vec![0.6f32, -0.8, 0.0];
        let b = vec![0.0f32, 1.0, 0.0];
        let bytes = write_vectors(3, &[a.clone(), b.clone()]).unwrap();
        let v = Vectors::open(&bytes).unwrap();
        assert_eq!(v.len(), 2);
        assert!((v.dot(0, &b) - -0.8).abs() < 0.01);
        assert!((v.dot(1, &b) - 1.0).abs() < 0.01);
    }

    #[test]
    fn rows_copied_verbatim_give_identical_bytes() {
        let a = vec![0.6f32, -0.8, 0.0];
        let b = vec![0.1f32, 0.2, -0.97];
        let bytes = write_vectors(3, &[a, b]).unwrap();
        let v = Vectors::open(&bytes).unwrap();
        let copy = write_quantized(3, (0..v.len()).map(|i| v.row(i))).unwrap();
        assert_eq!(copy, bytes);
    }

    #[test]
    fn wrong_dim_is_refused() {
        assert!(write_vectors(3, &[vec![1.0, 0.0]]).is_err());
    }

    #[test]
    fn truncated_file_is_data_corruption() {
        let bytes = write_vectors(3, &[vec![1.0, 0.0, 0.0]]).unwrap();
        assert!(matches!(
            Vectors::open(&bytes[..bytes.len() - 1]),
            Err(FormatError::DataCorruption { .. })
        ));
    }
}

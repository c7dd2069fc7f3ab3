//! The one `.npy` layout jikji reads and writes: a little-endian float32 matrix `[rows, cols]`
//! in C order (NumPy's `np.save(path, np.asarray(a, dtype="<f4"))` of a 2-D array).
//!
//! Format: the NumPy NPY format, versions 1.0–3.0
//! (<https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html>): the magic
//! `\x93NUMPY`, a major and minor version byte, a header length (u16 LE for 1.0, u32 LE for
//! 2.0/3.0), then an ASCII Python dict literal `{'descr': '<f4', 'fortran_order': False,
//! 'shape': (R, C), }` padded with spaces and a `\n` so the data starts on a 64-byte boundary.
//!
//! The reader is written here rather than taken from a crate because a vectors file comes from
//! another machine (a distributed job) and is hostile: the header is bounded (≤ 64 KiB), only
//! `'<f4'`, C order and a 2-D shape are accepted, and the shape is checked against the file's
//! actual length before anything is allocated. Every error names the file and what is wrong.

use std::io::Write;
use std::path::Path;

use crate::error::{BuildError, Result};

const MAGIC: &[u8] = b"\x93NUMPY";
/// Largest header accepted (NumPy's own writers emit ~128 bytes).
const MAX_HEADER: usize = 64 * 1024;

fn bad(path: &Path, message: impl Into<String>) -> BuildError {
    BuildError::InvalidInput {
        path: path.to_path_buf(),
        line: None,
        message: message.into(),
    }
}

/// Writes `rows` (each of `cols` floats) to `path` as NPY 1.0, `'<f4'`, shape `(rows, cols)`.
///
/// # Errors
/// [`BuildError::InvalidInput`] if a row is not `cols` long; [`BuildError::Io`] on write.
pub fn write_f32(path: &Path, rows: &[Vec<f32>], cols: usize) -> Result<()> {
    if let Some(i) = rows.iter().position(|r| r.len() != cols) {
        return Err(bad(
            path,
            format!("row {i} has {} values, expected {cols}", rows[i].len()),
        ));
    }
    let dict = format!(
        "{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {cols}), }}",
        rows.len()
    );
    // magic(6) + version(2) + len(2) + dict + padding + '\n' ≡ 0 (mod 64)
    let unpadded = MAGIC.len() + 4 + dict.len() + 1;
    let pad = (64 - unpadded % 64) % 64;
    let mut header = dict.into_bytes();
    header.extend(std::iter::repeat_n(b' ', pad));
    header.push(b'\n');
    let mut out = Vec::with_capacity(MAGIC.len() + 4 + header.len() + rows.len() * cols * 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(&header);
    for r in rows {
        for v in r {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    let mut f = std::fs::File::create(path).map_err(|e| BuildError::io("creating", path, e))?;
    f.write_all(&out)
        .map_err(|e| BuildError::io("writing", path, e))?;
    Ok(())
}

/// A float32 matrix read from a `.npy` file: `data` holds `rows × cols` values, row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixF32 {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// `rows * cols` values, row after row.
    pub data: Vec<f32>,
}

impl MatrixF32 {
    /// Row `i` (`cols` values). Panics if `i >= rows`.
    pub fn row(&self, i: usize) -> &[f32] {
        &self.data[i * self.cols..(i + 1) * self.cols]
    }
}

/// Reads a 2-D little-endian float32 C-order `.npy` file (NPY 1.0, 2.0 or 3.0).
///
/// # Errors
/// [`BuildError::Io`] if the file cannot be read; [`BuildError::InvalidInput`] naming the file
/// and the problem (bad magic, unsupported version, a header over 64 KiB or not the expected
/// dict, a dtype other than `'<f4'`, Fortran order, a shape that is not 2-D, or a data length
/// that differs from the shape's, with both byte counts).
pub fn read_f32(path: &Path) -> Result<MatrixF32> {
    let bytes = std::fs::read(path).map_err(|e| BuildError::io("reading", path, e))?;
    parse_f32(path, &bytes)
}

/// [`read_f32`] on bytes already read; `path` only names them in errors.
///
/// # Errors
/// As [`read_f32`].
pub fn parse_f32(path: &Path, bytes: &[u8]) -> Result<MatrixF32> {
    if bytes.len() < MAGIC.len() + 4 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(bad(path, "not a .npy file (no \\x93NUMPY magic at byte 0)"));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        _ => {
            return Err(bad(
                path,
                format!("unsupported .npy version {major}.{minor} (byte 6; expected 1.0–3.0)"),
            ))
        }
    };
    if hlen > MAX_HEADER || start + hlen > bytes.len() {
        return Err(bad(
            path,
            format!(
                "header length {hlen} at byte 8 is over {MAX_HEADER} or past the end of the file ({} bytes)",
                bytes.len()
            ),
        ));
    }
    let header = std::str::from_utf8(&bytes[start..start + hlen])
        .map_err(|e| bad(path, format!("header is not text: {e}")))?;
    let field = |key: &str| -> Result<&str> {
        let k = format!("'{key}':");
        let at = header
            .find(&k)
            .ok_or_else(|| bad(path, format!("header has no {k} ({header:?})")))?;
        Ok(header[at + k.len()..].trim_start())
    };
    let descr = field("descr")?;
    if !(descr.starts_with("'<f4'") || descr.starts_with("'float32'")) {
        let shown: String = descr.chars().take(12).collect();
        return Err(bad(
            path,
            format!(
                "dtype {shown}… is not little-endian float32 ('<f4'); save with dtype=np.float32"
            ),
        ));
    }
    if !field("fortran_order")?.starts_with("False") {
        return Err(bad(
            path,
            "fortran_order is not False; save a C-order array (np.ascontiguousarray)",
        ));
    }
    let shape = field("shape")?;
    let close = shape
        .find(')')
        .filter(|_| shape.starts_with('('))
        .ok_or_else(|| bad(path, format!("shape is not a tuple: {header:?}")))?;
    let dims: Vec<&str> = shape[1..close]
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if dims.len() != 2 {
        return Err(bad(
            path,
            format!("shape {} is not 2-D (rows, dim)", &shape[..=close]),
        ));
    }
    let dim = |s: &str| {
        s.parse::<usize>()
            .map_err(|_| bad(path, format!("shape entry {s:?} is not a number")))
    };
    let (rows, cols) = (dim(dims[0])?, dim(dims[1])?);
    let data = &bytes[start + hlen..];
    let want = rows
        .checked_mul(cols)
        .and_then(|n| n.checked_mul(4))
        .ok_or_else(|| bad(path, format!("shape ({rows}, {cols}) overflows")))?;
    if data.len() != want {
        return Err(bad(
            path,
            format!(
                "shape ({rows}, {cols}) needs {want} data bytes after the {}-byte header, the file has {}",
                start + hlen,
                data.len()
            ),
        ));
    }
    let data = data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Ok(MatrixF32 { rows, cols, data })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_64_byte_alignment() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("v.npy");
        let rows = vec![vec![1.0f32, -2.5, 3.0], vec![0.0, 1e-7, f32::MAX]];
        write_f32(&p, &rows, 3).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        let hlen = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + hlen) % 64, 0);
        let m = read_f32(&p).unwrap();
        assert_eq!((m.rows, m.cols), (2, 3));
        assert_eq!(m.row(1), &rows[1][..]);
    }

    #[test]
    fn hostile_headers_are_refused_without_allocating() {
        let p = Path::new("x.npy");
        let mk = |dict: &str, data: usize| {
            let mut b = MAGIC.to_vec();
            b.extend_from_slice(&[1, 0]);
            b.extend_from_slice(&(dict.len() as u16).to_le_bytes());
            b.extend_from_slice(dict.as_bytes());
            b.extend(std::iter::repeat_n(0u8, data));
            b
        };
        let err = |b: &[u8]| parse_f32(p, b).unwrap_err().to_string();
        let huge = mk(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000000, 384), }",
            8,
        );
        assert!(err(&huge).contains("needs"), "{}", err(&huge));
        let f8 = mk(
            "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), }",
            8,
        );
        assert!(err(&f8).contains("float32"));
        let fo = mk(
            "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 1), }",
            4,
        );
        assert!(err(&fo).contains("fortran_order"));
        let d3 = mk(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1), }",
            4,
        );
        assert!(err(&d3).contains("2-D"));
        let of = mk(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551615, 2), }",
            0,
        );
        assert!(err(&of).contains("overflows"));
        assert!(err(b"PK\x03\x04").contains("magic"));
        let mut cut = mk("{'descr': '<f4', }", 0);
        cut[8] = 0xff;
        cut[9] = 0xff;
        assert!(err(&cut).contains("past the end"));
    }
}

//! Little-endian fixed-width and LEB128 varint coding with bounds-checked reads.
//!
//! Every read error becomes [`FormatError::DataCorruption`] naming the file and byte offset.

use crate::error::{FormatError, Result};

/// Appends `v` as unsigned LEB128 (1–5 bytes for u32, 1–10 for u64).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A cursor over one bundle file's bytes; every read is bounds-checked.
pub struct Reader<'a> {
    file: &'a str,
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at `pos` over `bytes` of the bundle file named `file` (used in errors).
    pub fn new(file: &'a str, bytes: &'a [u8], pos: usize) -> Self {
        Reader { file, bytes, pos }
    }

    /// Current byte offset.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// True when every byte has been read.
    pub fn at_end(&self) -> bool {
        self.pos >= self.bytes.len()
    }

    /// A data-corruption error at the current offset.
    pub fn corrupt(&self, message: impl Into<String>) -> FormatError {
        FormatError::corrupt(self.file, self.pos as u64, message)
    }

    /// Takes the next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&e| e <= self.bytes.len())
            .ok_or_else(|| {
                self.corrupt(format!(
                    "truncated: need {n} bytes, file has {}",
                    self.bytes.len()
                ))
            })?;
        let s = &self.bytes[self.pos..end];
        self.pos = end;
        Ok(s)
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap()))
    }

    /// Reads a little-endian f32.
    pub fn f32(&mut self) -> Result<f32> {
        Ok(f32::from_le_bytes(self.take(4)?.try_into().unwrap()))
    }

    /// Reads an unsigned LEB128 varint of at most 10 bytes. Errors: DataCorruption if
    /// truncated, longer than 10 bytes, or over `u64::MAX` (a 10th byte above 1).
    pub fn varint(&mut self) -> Result<u64> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let b = *self
                .bytes
                .get(self.pos)
                .ok_or_else(|| self.corrupt("truncated varint"))?;
            if i == 9 && b > 1 {
                // The 10th byte holds bit 63 only; more would not fit in a u64.
                return Err(self.corrupt("varint overflows u64"));
            }
            self.pos += 1;
            v |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.corrupt("varint longer than 10 bytes"))
    }

    /// Checks a 4-byte magic and the u32 format version that follows it.
    pub fn header(&mut self, magic: &[u8; 4], version: u32) -> Result<()> {
        let m = self.take(4)?;
        if m != magic {
            return Err(FormatError::corrupt(
                self.file,
                0,
                format!(
                    "bad magic {}, expected {}",
                    crate::quote::QuotedBytes(m),
                    crate::quote::QuotedBytes(magic)
                ),
            ));
        }
        let found = self.u32()?;
        if found != version {
            return Err(FormatError::FormatVersion {
                file: self.file.to_string(),
                found,
                expected: version,
            });
        }
        Ok(())
    }
}

/// Writes a 4-byte magic and a u32 format version.
pub fn put_header(out: &mut Vec<u8>, magic: &[u8; 4], version: u32) {
    out.extend_from_slice(magic);
    out.extend_from_slice(&version.to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip() {
        let vals = [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX];
        let mut buf = Vec::new();
        for v in vals {
            put_varint(&mut buf, v);
        }
        let mut r = Reader::new("t", &buf, 0);
        for v in vals {
            assert_eq!(r.varint().unwrap(), v);
        }
        assert!(r.varint().is_err());
    }
}

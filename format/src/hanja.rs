//! `hanja.fst` (optional bundle file): Hangul readings of Hanja (Sino-Korean characters)
//! and the reverse, so that a Hangul query term for a Sino-Korean word (`갑목`) also finds
//! its Hanja form (`甲木`) and the reverse.
//!
//! The builder writes it only for corpora with Han or Hangul text, restricted to what the
//! corpus can match (see `jikji-builder`); the engine uses it for query expansion when it
//! is present. The reading data is the character table of the `hanja` crate (MIT), which
//! is libhangul's `hanja.txt` (BSD-3-Clause, Choe Hwanjin); it is never compiled into the
//! engine.
//!
//! Layout: an [`fst::Set`] of byte keys
//! ```text
//! 'h' + UTF-8(hangul syllable) + UTF-8(han char)    Hangul reading → Hanja
//! 'c' + UTF-8(han char) + UTF-8(hangul syllable)    Hanja → Hangul reading
//! ```
//! Han characters are stored as the analyzer folds them (NFKC, Traditional → Simplified
//! for analyzer version 2), so expanded terms are index terms.

use fst::{IntoStreamer, Streamer};

use crate::error::{FormatError, Result};

/// File name of the Hanja reading table in a bundle.
pub const HANJA_FILE: &str = "hanja.fst";

/// Serialises `(hangul syllable, han char)` reading pairs: `to_hanja` pairs become
/// Hangul → Hanja keys, `to_hangul` pairs Hanja → Hangul keys. Returns the `hanja.fst`
/// bytes. Duplicates are fine. Errors only if the fst builder fails.
pub fn write_hanja_fst(to_hanja: &[(char, char)], to_hangul: &[(char, char)]) -> Result<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = Vec::with_capacity(to_hanja.len() + to_hangul.len());
    let key = |tag: u8, a: char, b: char| {
        let mut k = vec![tag];
        let mut buf = [0u8; 4];
        k.extend_from_slice(a.encode_utf8(&mut buf).as_bytes());
        k.extend_from_slice(b.encode_utf8(&mut buf).as_bytes());
        k
    };
    keys.extend(to_hanja.iter().map(|&(hangul, han)| key(b'h', hangul, han)));
    keys.extend(
        to_hangul
            .iter()
            .map(|&(hangul, han)| key(b'c', han, hangul)),
    );
    keys.sort();
    keys.dedup();
    let fst_err = |source| FormatError::Fst {
        file: HANJA_FILE.into(),
        source,
    };
    let mut b = fst::SetBuilder::memory();
    b.extend_iter(keys).map_err(fst_err)?;
    b.into_inner().map_err(fst_err)
}

/// Read side of `hanja.fst`.
pub struct HanjaMap {
    set: fst::Set<Vec<u8>>,
}

impl HanjaMap {
    /// Opens `hanja.fst` bytes. Errors: [`FormatError::Fst`] naming the file, also when
    /// the fst's CRC32C checksum does not match (corrupt nodes can make lookups panic).
    pub fn open(bytes: Vec<u8>) -> Result<Self> {
        let fst_err = |source| FormatError::Fst {
            file: HANJA_FILE.into(),
            source,
        };
        let set = fst::Set::new(bytes).map_err(fst_err)?;
        // Corrupt nodes can make fst lookups panic: check the fst's own CRC32C first.
        crate::fst_check::verify(set.as_fst()).map_err(fst_err)?;
        Ok(HanjaMap { set })
    }

    /// The `hanja.fst` bytes.
    pub fn as_bytes(&self) -> &[u8] {
        self.set.as_fst().as_bytes()
    }

    /// Number of keys (both directions).
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// True if the table is empty.
    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Every key in order (`'h'|'c'` + two chars, see the module docs).
    pub fn keys(&self) -> Vec<Vec<u8>> {
        let mut out = Vec::with_capacity(self.set.len());
        let mut s = self.set.stream();
        while let Some(k) = s.next() {
            out.push(k.to_vec());
        }
        out
    }

    /// A table of `keys` (sorted, as [`HanjaMap::keys`] gives them). Errors as [`HanjaMap::open`].
    pub fn from_keys(keys: &[Vec<u8>]) -> Result<Self> {
        let mut b = fst::SetBuilder::memory();
        b.extend_iter(keys.iter())
            .map_err(|source| FormatError::Fst {
                file: HANJA_FILE.into(),
                source,
            })?;
        Self::open(b.into_inner().map_err(|source| FormatError::Fst {
            file: HANJA_FILE.into(),
            source,
        })?)
    }

    fn lookup(&self, tag: u8, c: char) -> Vec<char> {
        let mut prefix = vec![tag];
        let mut buf = [0u8; 4];
        prefix.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        let n = prefix.len();
        let mut out = Vec::new();
        // The keys under the prefix, through the one automaton type of the engine's fst
        // searches (crate::lev::Keys: smaller in wasm than a range stream besides it).
        let mut s = self
            .set
            .search(crate::lev::Keys::Prefix(prefix))
            .into_stream();
        while let Some(k) = s.next() {
            if let Ok(rest) = std::str::from_utf8(&k[n..]) {
                out.extend(rest.chars().next());
            }
        }
        out
    }

    /// The Hanja (as folded by the analyzer) read as the Hangul syllable `hangul`.
    pub fn hanja_of(&self, hangul: char) -> Vec<char> {
        self.lookup(b'h', hangul)
    }

    /// The Hangul readings of the (folded) Han character `han`.
    pub fn readings_of(&self, han: char) -> Vec<char> {
        self.lookup(b'c', han)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_directions_roundtrip() {
        let bytes =
            write_hanja_fst(&[('갑', '甲'), ('갑', '岬'), ('목', '木')], &[('갑', '甲')]).unwrap();
        let m = HanjaMap::open(bytes).unwrap();
        let mut h = m.hanja_of('갑');
        h.sort();
        assert_eq!(h, ['岬', '甲']);
        assert_eq!(m.hanja_of('목'), ['木']);
        assert_eq!(m.readings_of('甲'), ['갑']);
        assert!(m.readings_of('木').is_empty(), "only the pairs given");
        assert!(m.hanja_of('가').is_empty());
    }

    #[test]
    fn garbage_is_an_fst_error_naming_the_file() {
        let e = HanjaMap::open(b"not an fst".to_vec()).err().unwrap();
        assert!(e.to_string().contains(HANJA_FILE), "{e}");
    }
}

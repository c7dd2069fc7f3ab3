//! One page of a paged (format 2) bundle: a 48-byte header and a body, stored as
//! `p/<name>` (see `FORMAT.md`, "Format 2").
//!
//! Header (little-endian):
//! ```text
//! 0   "JKP2"
//! 4   u8 kind (the name's letter: b'd', b'o', b'c', b'v', b'l', b'h', b't', b's', b'x',
//!     the query model's b'm', b'k', b'u', b'r', the Unicode tables' b'n', the dense
//!     index's b'g', b'j', b'w', b'i')
//! 5   u8 codec: 0 = raw, 1 = deflate-raw (RFC 1951)
//! 6   u16 0
//! 8   u32 raw_len      body length before compression
//! 12  u32 stored_len   body length as stored
//! 16  u32 number       the page's number (`c-<g>-<n>`, `v-<g>-<n>`), else 0
//! 20  28 bytes         the first 28 bytes of SHA-256 (FIPS 180-4) of the raw body
//! 48  body (stored_len bytes)
//! ```
//! A content-named page (`<kind>-<h16>`: columns, Unicode tables, the query model's layer, tokenizer and row-map pages) is named by the first 8 bytes of
//! that digest in hex; a numbered page (`<kind>-<g16>-<n>`: every other kind) carries its
//! number in the header. Readers
//! refuse a page over [`MAX_PAGE`] bytes, a digest or length that does not match, and a
//! name that does not match the header, naming the page in the error.

use sha2::{Digest, Sha256};

use crate::error::{FormatError, Result};

/// Header length in bytes.
pub const HEADER_LEN: usize = 48;
/// Largest raw or stored body accepted (16 MiB): bytes from the network are hostile.
pub const MAX_PAGE: usize = 16 << 20;
const MAGIC: &[u8; 4] = b"JKP2";

/// A page's kind: the first letter of its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Dictionary block.
    Dict,
    /// Postings page (long lists).
    Postings,
    /// Chunk records.
    Chunks,
    /// Vector rows.
    Vectors,
    /// Per-chunk columns (lifecycle, file, parent).
    Columns,
    /// Hanja readings.
    Hanja,
    /// Typo dictionary.
    Typo,
    /// Sources table.
    Sources,
    /// Bigram expansions (Hangul ↔ Hanja candidates, [`super::expand`]).
    Expansions,
    /// A part of the query model's transformer layers (`layers.bin`, [`super::qmodel`]).
    ModelLayers,
    /// A part of the query model's compact tokenizer (`tokenizer.bin`, [`super::qmodel`]).
    ModelTokenizer,
    /// The token id → row slot map of this bundle's row pages ([`super::qmodel`]).
    RowMap,
    /// Token-embedding rows of the query model ([`super::qmodel`]).
    Rows,
    /// One of the analyzer's Unicode tables ([`crate::unicode`]): NFKC + lowercase, or
    /// Traditional → Simplified.
    Unicode,
    /// Dense index centroids ([`super::ivf`]).
    Centroids,
    /// Dense index lists: doc ids and their int8 rows ([`super::ivf`]).
    Lists,
    /// Dense background sample rows ([`super::ivf`]).
    Sample,
    /// A binary-coded dense index's int8 rows in list order, read only for the candidates
    /// it rescores ([`super::ivf`]).
    IndexRows,
    /// Dictionary index: the first keys of a run of dictionary blocks and the long-list
    /// terms among them ([`super::dict`], bundles with more than
    /// [`super::dict::INLINE_KEYS_MAX`] blocks).
    DictIndex,
    /// Term bucket: exact-term entries by hash, postings inline or placed
    /// ([`super::bucket`]).
    TermBuckets,
    /// Expansion bucket: bigram keys by hash, their candidates' entries ([`super::bucket`]).
    ExpansionBuckets,
}

impl Kind {
    /// The name letter.
    pub fn letter(self) -> u8 {
        match self {
            Kind::Dict => b'd',
            Kind::Postings => b'o',
            Kind::Chunks => b'c',
            Kind::Vectors => b'v',
            Kind::Columns => b'l',
            Kind::Hanja => b'h',
            Kind::Typo => b't',
            Kind::Sources => b's',
            Kind::Expansions => b'x',
            Kind::ModelLayers => b'm',
            Kind::ModelTokenizer => b'k',
            Kind::RowMap => b'u',
            Kind::Rows => b'r',
            Kind::Unicode => b'n',
            Kind::Centroids => b'g',
            Kind::Lists => b'j',
            Kind::Sample => b'w',
            Kind::IndexRows => b'i',
            Kind::DictIndex => b'e',
            Kind::TermBuckets => b'b',
            Kind::ExpansionBuckets => b'y',
        }
    }

    /// Whether the writer tries deflate on pages of this kind. Not for the query model's row
    /// pages: Q4_0 rows deflate by 2.9 % at the median and 4.1 % at most (3,000 random
    /// 16-row pages of e5-small's `rows.bin`, zlib level 9), under the 1/16 a page must save
    /// to be stored deflated, so trying cost ~2 s of CPU per build for 15,626 pages stored raw.
    pub fn tries_deflate(self) -> bool {
        !matches!(self, Kind::Rows)
    }

    fn of_letter(b: u8) -> Option<Kind> {
        Some(match b {
            b'd' => Kind::Dict,
            b'o' => Kind::Postings,
            b'c' => Kind::Chunks,
            b'v' => Kind::Vectors,
            b'l' => Kind::Columns,
            b'h' => Kind::Hanja,
            b't' => Kind::Typo,
            b's' => Kind::Sources,
            b'x' => Kind::Expansions,
            b'm' => Kind::ModelLayers,
            b'k' => Kind::ModelTokenizer,
            b'u' => Kind::RowMap,
            b'r' => Kind::Rows,
            b'n' => Kind::Unicode,
            b'g' => Kind::Centroids,
            b'j' => Kind::Lists,
            b'w' => Kind::Sample,
            b'i' => Kind::IndexRows,
            b'e' => Kind::DictIndex,
            b'b' => Kind::TermBuckets,
            b'y' => Kind::ExpansionBuckets,
            _ => return None,
        })
    }

    /// True for kinds named by generation and number instead of content hash: every kind
    /// with many pages, so the entry lists one generation and a count instead of a name
    /// per page (the generation is a hash of all the kind's pages, so a build with other
    /// content has other names). The columns page and the query model's layer, tokenizer
    /// and row-map pages are content-named (the model pages are the same in every bundle
    /// built with the same pack, so a browser's Cache Storage shares them).
    pub fn numbered(self) -> bool {
        !matches!(
            self,
            Kind::Columns | Kind::ModelLayers | Kind::ModelTokenizer | Kind::RowMap | Kind::Unicode
        )
    }
}

/// SHA-256 of `bytes`, first 28 bytes.
fn digest28(bytes: &[u8]) -> [u8; 28] {
    let d = Sha256::digest(bytes);
    let mut out = [0u8; 28];
    out.copy_from_slice(&d[..28]);
    out
}

/// The 16-hex content id of a raw body: the first 8 bytes of its SHA-256.
pub fn content_id(raw: &[u8]) -> String {
    hex::encode(&Sha256::digest(raw)[..8])
}

/// An encoded page: its name and stored bytes (header + stored body).
#[derive(Debug, Clone)]
pub struct Encoded {
    /// File name under `p/`.
    pub name: String,
    /// Header followed by the stored body.
    pub bytes: Vec<u8>,
}

/// Encodes a content-named page of `kind` from its raw body (compressed with deflate when
/// that saves at least 1/16 of the bytes and the kind [`Kind::tries_deflate`]).
pub fn encode(kind: Kind, raw: &[u8]) -> Encoded {
    let name = format!("{}-{}", kind.letter() as char, content_id(raw));
    Encoded {
        bytes: encode_bytes(kind, raw, 0),
        name,
    }
}

/// Encodes page `number` of a numbered kind (chunks, vectors) of generation `gen` (16 hex).
pub fn encode_numbered(kind: Kind, gen: &str, number: u32, raw: &[u8]) -> Encoded {
    Encoded {
        name: numbered_name(kind, gen, number),
        bytes: encode_bytes(kind, raw, number),
    }
}

/// The name of page `number` of a numbered kind in generation `gen`.
pub fn numbered_name(kind: Kind, gen: &str, number: u32) -> String {
    format!("{}-{gen}-{number}", kind.letter() as char)
}

fn encode_bytes(kind: Kind, raw: &[u8], number: u32) -> Vec<u8> {
    let deflated = if kind.tries_deflate() {
        compress(raw)
    } else {
        None
    };
    let (codec, body): (u8, &[u8]) = match &deflated {
        Some(d) if d.len() + raw.len() / 16 < raw.len() => (1, d),
        _ => (0, raw),
    };
    let mut out = Vec::with_capacity(HEADER_LEN + body.len());
    out.extend_from_slice(MAGIC);
    out.push(kind.letter());
    out.push(codec);
    out.extend_from_slice(&0u16.to_le_bytes());
    out.extend_from_slice(&(raw.len() as u32).to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&number.to_le_bytes());
    out.extend_from_slice(&digest28(raw));
    out.extend_from_slice(body);
    out
}

#[cfg(not(target_arch = "wasm32"))]
fn compress(raw: &[u8]) -> Option<Vec<u8>> {
    Some(miniz_oxide::deflate::compress_to_vec(raw, 9))
}

#[cfg(target_arch = "wasm32")]
fn compress(_raw: &[u8]) -> Option<Vec<u8>> {
    None
}

/// A parsed header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Page kind.
    pub kind: Kind,
    /// 0 raw, 1 deflate-raw.
    pub codec: u8,
    /// Body length before compression.
    pub raw_len: usize,
    /// Body length as stored.
    pub stored_len: usize,
    /// Page number (numbered kinds).
    pub number: u32,
    digest: [u8; 28],
}

fn bad(name: &str, message: impl Into<String>) -> FormatError {
    FormatError::corrupt(&format!("p/{name}"), 0, message)
}

/// Parses and bounds-checks the header of page `name` (`bytes` holds at least the header).
pub fn header(name: &str, bytes: &[u8]) -> Result<Header> {
    if bytes.len() < HEADER_LEN {
        return Err(bad(
            name,
            format!("{} bytes, shorter than a page header", bytes.len()),
        ));
    }
    if &bytes[..4] != MAGIC {
        return Err(bad(name, "not a jikji page (bad magic)"));
    }
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().unwrap());
    let kind = Kind::of_letter(bytes[4]).ok_or_else(|| bad(name, "unknown page kind"))?;
    let codec = bytes[5];
    if codec > 1 {
        return Err(bad(name, format!("unknown codec {codec}")));
    }
    let raw_len = u32_at(8) as usize;
    let stored_len = u32_at(12) as usize;
    if raw_len > MAX_PAGE || stored_len > MAX_PAGE {
        return Err(bad(
            name,
            format!("page of {raw_len} / {stored_len} bytes exceeds the {MAX_PAGE}-byte limit"),
        ));
    }
    let mut digest = [0u8; 28];
    digest.copy_from_slice(&bytes[20..48]);
    Ok(Header {
        kind,
        codec,
        raw_len,
        stored_len,
        number: u32_at(16),
        digest,
    })
}

/// Verifies page `name` given as header + **raw** body (what the browser passes after
/// inflating) and returns the raw body. Checks the name's kind letter, the raw length, the
/// digest, and for content-named pages that the name is the digest; for numbered pages the
/// number in the name. Errors: [`FormatError::DataCorruption`] naming `p/<name>`. With
/// feature `caller-digest` the two digest checks are the caller's (the browser's worker,
/// crypto.subtle) and this checks the header, lengths and name only.
pub fn verify_raw(name: &str, bytes: &[u8]) -> Result<Vec<u8>> {
    let h = header(name, bytes)?;
    let body = &bytes[HEADER_LEN..];
    if body.len() != h.raw_len {
        return Err(bad(
            name,
            format!("body has {} bytes, header says {}", body.len(), h.raw_len),
        ));
    }
    check_name(name, &h)?;
    #[cfg(not(feature = "caller-digest"))]
    check_digest(name, &h, body)?;
    Ok(body.to_vec())
}

/// The digest checks of [`verify_raw`]: SHA-256 of the raw body against the header, and for
/// content-named pages the name against the digest. With feature `caller-digest` (the
/// browser's BM25 engine) the worker does this with crypto.subtle (web/pages.js
/// `verifyPage`, same checks, same messages) and the wasm links no SHA-256.
#[cfg(not(feature = "caller-digest"))]
fn check_digest(name: &str, h: &Header, body: &[u8]) -> Result<()> {
    if digest28(body) != h.digest {
        return Err(bad(
            name,
            "content hash does not match the page header: corrupt or tampered page",
        ));
    }
    if !h.kind.numbered() && !name.ends_with(&hex::encode(&h.digest[..8])) {
        return Err(bad(
            name,
            format!(
                "content hash {}, expected by its name",
                hex::encode(&h.digest[..8])
            ),
        ));
    }
    Ok(())
}

fn check_name(name: &str, h: &Header) -> Result<()> {
    let ok = name.as_bytes().first() == Some(&h.kind.letter())
        && name.as_bytes().get(1) == Some(&b'-')
        && if h.kind.numbered() {
            name.rsplit('-').next() == Some(h.number.to_string().as_str())
        } else {
            name.len() == 18
        };
    if ok {
        Ok(())
    } else {
        Err(bad(
            name,
            format!(
                "the name does not match the header (kind {}, number {})",
                h.kind.letter() as char,
                h.number
            ),
        ))
    }
}

/// Decodes page `name` as stored (header + stored body, as read from disk): inflates a
/// deflated body (bounded by the header's `raw_len`) and verifies it ([`verify_raw`]).
/// Returns the raw body.
#[cfg(not(target_arch = "wasm32"))]
pub fn decode_stored(name: &str, bytes: &[u8]) -> Result<Vec<u8>> {
    let h = header(name, bytes)?;
    let body = &bytes[HEADER_LEN..];
    if body.len() != h.stored_len {
        return Err(bad(
            name,
            format!(
                "stored body has {} bytes, header says {}",
                body.len(),
                h.stored_len
            ),
        ));
    }
    let raw = match h.codec {
        0 => body.to_vec(),
        _ => miniz_oxide::inflate::decompress_to_vec_with_limit(body, h.raw_len)
            .map_err(|e| bad(name, format!("deflate stream: {e:?}")))?,
    };
    let mut joined = Vec::with_capacity(HEADER_LEN + raw.len());
    joined.extend_from_slice(&bytes[..HEADER_LEN]);
    joined.extend_from_slice(&raw);
    verify_raw(name, &joined)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_tampering() {
        let raw: Vec<u8> = b"hello hello hello hello hello hello hello hello".repeat(20);
        let p = encode(Kind::Columns, &raw);
        assert!(p.name.starts_with("l-") && p.name.len() == 18);
        assert_eq!(p.bytes[5], 1, "compressible text is deflated");
        assert_eq!(decode_stored(&p.name, &p.bytes).unwrap(), raw);
        // Another page's name.
        let other = encode(Kind::Columns, b"x");
        let err = decode_stored(&other.name, &p.bytes)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&other.name) && err.contains("expected by its name"),
            "{err}"
        );
        // A flipped body byte.
        let mut bad = p.bytes.clone();
        let n = bad.len();
        bad[n - 3] ^= 0x55;
        assert!(decode_stored(&p.name, &bad).is_err());
        // A header that claims a huge page is refused before anything is allocated.
        let mut huge = p.bytes.clone();
        huge[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = decode_stored(&p.name, &huge).unwrap_err().to_string();
        assert!(err.contains("limit"), "{err}");
        // Numbered pages check their number.
        let c = encode_numbered(Kind::Chunks, "0123456789abcdef", 7, b"abc");
        assert_eq!(c.name, "c-0123456789abcdef-7");
        assert_eq!(decode_stored(&c.name, &c.bytes).unwrap(), b"abc");
        assert!(decode_stored("c-0123456789abcdef-8", &c.bytes).is_err());
        assert!(decode_stored(&c.name, &c.bytes[..20]).is_err());
    }

    #[test]
    fn row_pages_are_stored_raw_and_other_kinds_still_deflate() {
        // Even a body that would deflate well is stored raw as a row page (the writer does
        // not try), and still reads back.
        let raw: Vec<u8> = b"abcd".repeat(900);
        let r = encode_numbered(Kind::Rows, "0123456789abcdef", 3, &raw);
        assert_eq!(r.bytes[5], 0, "row pages are written raw");
        assert_eq!(decode_stored(&r.name, &r.bytes).unwrap(), raw);
        let v = encode_numbered(Kind::Vectors, "0123456789abcdef", 3, &raw);
        assert_eq!(v.bytes[5], 1, "other kinds deflate when it pays");
    }
}

//! [`Bytes`]: the bytes a whole-file reader ([`crate::chunks::ChunkStore`],
//! [`crate::postings::LexicalIndex`]) works on: in memory, or (natively) a file mapped into
//! memory, so that a builder can write `chunks.bin` and `postings.bin` to disk as it goes and
//! read them back without holding them on the heap (the 1M-chunk build,
//! `docs/design/scale-1m.md` "Streamed build").

use std::ops::Deref;
#[cfg(not(target_arch = "wasm32"))]
use std::sync::Arc;

/// Immutable bytes: owned, or a read-only memory map of a file (not in the browser).
/// Cloning a mapped one shares the map; cloning an owned one copies it.
#[derive(Clone)]
pub enum Bytes {
    /// Bytes on the heap.
    Owned(Vec<u8>),
    /// A file mapped read-only ([`Bytes::map`]); its pages are the kernel's page cache,
    /// read on access and evictable, not heap.
    #[cfg(not(target_arch = "wasm32"))]
    Mapped(Arc<memmap2::Mmap>),
}

impl Bytes {
    /// Maps the whole of `file` read-only (an empty file gives empty owned bytes: an empty
    /// map is not allowed everywhere). The file must not be changed or truncated while the
    /// map lives (reads of a truncated map fault): map only files this process wrote and
    /// owns, such as a build's temporary files. Errors: the `mmap` call's I/O error.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn map(file: &std::fs::File) -> std::io::Result<Bytes> {
        if file.metadata()?.len() == 0 {
            return Ok(Bytes::Owned(Vec::new()));
        }
        // SAFETY: the caller owns the file and does not modify it while it is mapped (the
        // contract above); the map is read-only.
        let map = unsafe { memmap2::Mmap::map(file)? };
        Ok(Bytes::Mapped(Arc::new(map)))
    }

    /// True if the bytes are a file's map.
    pub fn is_mapped(&self) -> bool {
        !matches!(self, Bytes::Owned(_))
    }
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Owned(v) => v,
            #[cfg(not(target_arch = "wasm32"))]
            Bytes::Mapped(m) => m,
        }
    }
}

impl AsRef<[u8]> for Bytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Bytes {
        Bytes::Owned(v)
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = if self.is_mapped() { "mapped" } else { "owned" };
        write!(f, "Bytes({kind}, {} bytes)", self.len())
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_mapped_file_reads_as_its_bytes() {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(b"JKCH and more").unwrap();
        let b = Bytes::map(&f).unwrap();
        assert!(b.is_mapped());
        assert_eq!(&b[..], b"JKCH and more");
        let c = b.clone();
        assert_eq!(&c[..4], b"JKCH");
        let empty = Bytes::map(&tempfile::tempfile().unwrap()).unwrap();
        assert!(empty.is_empty() && !empty.is_mapped());
    }
}

//! The one error type of the bundle format crate.

use std::path::PathBuf;

/// Everything that can go wrong while writing or reading a bundle.
///
/// Every variant names the bundle file concerned so that a user can tell which
/// file is bad and why (e.g. `postings.bin: checksum mismatch`).
#[derive(Debug, thiserror::Error)]
pub enum FormatError {
    /// An I/O error on `path`. (In wasm32, where no file is read, the message leaves out the
    /// `io::Error` text and shows the path through `to_str`: their Display, error-kind
    /// strings and lossy UTF-8 code were ~2 kB of the browser's engine.)
    #[cfg_attr(not(target_arch = "wasm32"), error("{path}: {source}"))]
    #[cfg_attr(
        target_arch = "wasm32",
        error("{}: I/O error", .path.to_str().unwrap_or("(a path that is not UTF-8)"))
    )]
    Io {
        /// The file or folder that could not be read or written.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A bundle file's bytes do not decode: truncated, bad magic, offsets out of range.
    #[error("{file}: data corruption at byte {offset}: {message}")]
    DataCorruption {
        /// Bundle file name (e.g. `postings.bin`).
        file: String,
        /// Byte offset in that file where decoding failed.
        offset: u64,
        /// What was wrong.
        message: String,
    },
    /// A bundle file was written by another (older or newer) format version.
    #[error("{file}: format version {found} is not supported (this engine reads version {expected}); rebuild the bundle")]
    FormatVersion {
        /// Bundle file name.
        file: String,
        /// Version found in the file.
        found: u32,
        /// Version this code reads.
        expected: u32,
    },
    /// A file's SHA-256 differs from the one recorded in `manifest.json`.
    #[error("{file}: checksum mismatch (manifest says sha256 {expected}, file has {actual}); the bundle is corrupt or half-copied")]
    Checksum {
        /// Bundle file name.
        file: String,
        /// SHA-256 recorded in the manifest (hex).
        expected: String,
        /// SHA-256 of the bytes found (hex).
        actual: String,
    },
    /// A file's size differs from the one recorded in `manifest.json`.
    #[error("{file}: size mismatch (manifest says {expected} bytes, file has {actual})")]
    Size {
        /// Bundle file name.
        file: String,
        /// Size recorded in the manifest, bytes.
        expected: u64,
        /// Size found, bytes.
        actual: u64,
    },
    /// A file listed in the manifest (or the manifest itself) is missing.
    #[error("{file}: missing from the bundle")]
    MissingFile {
        /// Bundle file name.
        file: String,
    },
    /// `manifest.json` (or a JSON record) does not parse. (serde_json reads nothing in wasm32,
    /// where the message leaves out its error text: its Display and strings are ~1.5 kB of the
    /// browser's engine; `crate::json`'s errors are `DataCorruption` with the byte offset.)
    #[cfg_attr(not(target_arch = "wasm32"), error("{file}: invalid JSON: {source}"))]
    #[cfg_attr(target_arch = "wasm32", error("{file}: invalid JSON"))]
    Json {
        /// Bundle file name.
        file: String,
        /// The parser's error (it carries line and column).
        #[source]
        source: serde_json::Error,
    },
    /// The term dictionary could not be built or read.
    #[error("{file}: term dictionary error: {source}")]
    Fst {
        /// Bundle file name.
        file: String,
        /// The fst crate's error.
        #[source]
        source: fst::Error,
    },
    /// Invalid input given to a writer (e.g. vectors of mixed dimensions).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The bundle was built with an analyzer version this engine cannot reproduce
    /// (its query terms would not match the bundle's terms): rebuild the bundle or update
    /// the engine.
    #[error("manifest.json: analyzer version {found} is not supported by this engine (it supports {}); rebuild the bundle with this jikji or use a newer engine", versions(.supported))]
    AnalyzerVersion {
        /// Version in the manifest.
        found: u32,
        /// Versions this engine supports.
        supported: Vec<u32>,
    },
    /// A format 1 bundle (`manifest.json`) given to a build without the format 1 reader
    /// (feature `v1` off: the browser's engine, which reads format 2 only).
    #[error("{file}: a format 1 bundle, which this build of the engine does not read (it reads format 2, jikji.json); rebuild the bundle with `jikji build`")]
    V1NotBuilt {
        /// The format 1 manifest.
        file: String,
    },
    /// A text needed one of the analyzer's Unicode tables, this build of the engine has none
    /// compiled in (the browser's: they are bundle pages), and the bundle has no Unicode
    /// table pages (built before they existed).
    #[error("{file}: this bundle has no Unicode table pages (built before they were added) and this build of the engine has no Unicode tables of its own, so it cannot analyse this text (non-ASCII letters, accents, fullwidth forms or Traditional Chinese); rebuild the bundle with `jikji build`")]
    NoUnicodeTables {
        /// The bundle's entry (or manifest).
        file: String,
    },
    /// A page of a paged (format 2) bundle that the page cache does not hold yet. Not an
    /// error of the data: the engine reports the pages a query needs, the caller fetches
    /// them (`p/<name>`) and runs the query again (see `paged`).
    #[error("page p/{name} is not loaded")]
    PageMissing {
        /// The page's name (without `p/`).
        name: String,
    },
}

/// `[1, 2]`, as `{:?}` writes a `Vec<u32>` (without linking Debug into the browser's wasm).
fn versions(v: &[u32]) -> String {
    let mut s = String::from("[");
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&x.to_string());
    }
    s.push(']');
    s
}

impl FormatError {
    /// True for [`FormatError::PageMissing`]: a paged bundle's page that is not loaded yet
    /// (fetch it and run the query again), not a fault of the data.
    pub fn is_page_missing(&self) -> bool {
        matches!(self, FormatError::PageMissing { .. })
    }

    /// Shorthand for [`FormatError::DataCorruption`].
    pub fn corrupt(file: &str, offset: u64, message: impl Into<String>) -> Self {
        FormatError::DataCorruption {
            file: file.to_string(),
            offset,
            message: message.into(),
        }
    }

    /// Shorthand for [`FormatError::Io`].
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        FormatError::Io {
            path: path.into(),
            source,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = FormatError> = std::result::Result<T, E>;

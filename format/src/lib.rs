//! The Jikji bundle format and text analyzer, shared by the builder (native) and the
//! search engine (native and WebAssembly).
//!
//! A bundle is a folder: `manifest.json` ([`manifest`]), `terms.fst` + `postings.bin`
//! ([`postings`]), `vectors.bin` ([`vectors`]) and `chunks.bin` ([`chunks`]), and optionally `hanja.fst` ([`hanja`]). Each data
//! structure has its own module with a writer and a reader; [`bundle`] ties them together.
//! Format 2, the paged bundle (`jikji.json` + pages under `p/`), is [`paged`].
#![warn(missing_docs)]

pub mod analyzer;
pub mod bundle;
pub mod chunks;
pub mod codec;
pub mod error;
mod fst_check;
pub mod hanja;
pub mod manifest;
mod nfkc;
pub mod paged;
pub mod postings;
mod t2s;
pub mod time;
pub mod vectors;

pub use bundle::{sha256_hex, Bundle, BundleWriter, TestBundle};
pub use chunks::ChunkRecord;
pub use error::{FormatError, Result};
pub use manifest::{
    Bm25Params, Calibration, Centring, ChunkingInfo, Counts, FileEntry, Manifest, MarginPlatt,
    ModelInfo, Platt, ScoreFits, SourceEntry, FORMAT_VERSION, PAGED_FORMAT_VERSION,
};

//! The Jikji bundle format and text analyzer, shared by the builder (native) and the
//! search engine (native and WebAssembly).
//!
//! A bundle is a folder: `manifest.json` ([`manifest`]), `terms.fst` + `postings.bin`
//! ([`postings`]), `vectors.bin` ([`vectors`]) and `chunks.bin` ([`chunks`]), and optionally `hanja.fst` ([`hanja`]). Each data
//! structure has its own module with a writer and a reader; [`bundle`] ties them together.
//! Format 2, the paged bundle (`jikji.json` + pages under `p/`), is [`paged`].
//!
//! Cargo feature `v1` (default): the format 1 reader and whole bundles in memory
//! ([`Bundle::from_files`], [`Bundle::open_dir`], [`Bundle::from_parts`], [`TestBundle`],
//! the `Whole` variants of [`paged::Lexicon`], [`paged::Chunks`] and [`paged::Hanja`]).
//! The browser's engine is built without it: it opens format 2 through its page cache
//! only ([`Bundle::open_entry`]), and a format 1 bundle is refused with
//! [`FormatError::V1NotBuilt`]. Every native crate of the workspace enables it.
#![warn(missing_docs)]
// scripts/build-wasm's nightly build of the browser engine: the crate is compiled for size
// (opt-level "z") but for the functions marked `optimize(speed)`, the query's hot path.
#![cfg_attr(jikji_nightly, feature(optimize_attribute))]

pub mod analyzer;
pub mod bundle;
pub mod bytes;
pub mod chunks;
pub mod codec;
pub mod error;
mod fst_check;
pub mod hanja;
pub mod hash;
pub mod json;
pub mod lev;
mod lower;
pub mod manifest;
mod nfkc;
pub mod num;
pub mod paged;
pub mod postings;
pub mod quote;
pub mod sort;
pub mod strs;
mod t2s;
pub mod time;
pub mod unicode;
pub mod vectors;

#[cfg(feature = "v1")]
pub use bundle::TestBundle;
pub use bundle::{sha256_hex, Bundle, BundleWriter};
pub use chunks::{ChunkRecord, ConflictNote};
pub use error::{FormatError, Result};
pub use manifest::{
    Bm25Params, Calibration, Centring, ChunkingInfo, Counts, FileEntry, Manifest, MarginPlatt,
    ModelInfo, NullCap, Platt, ScoreFits, SourceEntry, FORMAT_VERSION, PAGED_FORMAT_VERSION,
};

//! The `jikji` builder: reads a corpus folder, chunks it, indexes and embeds the chunks,
//! and writes a static search bundle ([`ingest`]); keeps it up to date ([`update`]);
//! checks corpus health ([`corpus`], [`versions`], [`dedup`], [`gaps`], [`conflicts`]);
//! measures retrieval quality ([`eval`]); serves the web page ([`serve`]).
//!
//! The `jikji` binary (`src/bin/jikji/`) only parses arguments and calls these modules.
#![warn(missing_docs)]

pub mod calibrate;
pub mod chunker;
pub mod conflicts;
pub mod corpus;
pub mod dedup;
pub mod encoder;
pub mod error;
pub mod eval;
pub mod gaps;
pub mod generations;
pub mod ingest;
pub mod ivf;
pub mod lang;
pub mod lang_means;
pub mod nearest;
pub mod npy;
pub mod query_model;
pub mod serve;
pub mod update;
pub mod vector_cache;
pub mod verify;
pub mod versions;

pub use error::{BuildError, Result};

//! The `jikji` builder: reads a corpus folder, chunks it, indexes and embeds the chunks,
//! and writes a static search bundle; also serves the web page.
#![warn(missing_docs)]

pub mod build;
pub mod calibrate;
pub mod chunker;
pub mod conflicts;
pub mod corpus;
pub mod dedup;
pub mod error;
pub mod eval;
pub mod gaps;
pub mod lang;
pub mod serve;
pub mod update;
pub mod versions;

pub use error::{BuildError, Result};

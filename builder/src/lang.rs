//! Language detection of a chunk by the share of each script among its letters: the
//! engine's detector ([`jikji_engine::centring::detect_lang`]), so that chunks and queries
//! are given a language by the same rules (the dense centring depends on both).

pub use jikji_engine::centring::detect_lang as detect;

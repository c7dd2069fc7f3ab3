//! The builder's text encoder: what `jikji build`, `jikji update`, the calibration and the
//! language statistics embed chunks and pseudo-queries with.
//!
//! Two engines give the same vectors (cosine ≥ 0.999 required; measured max abs diff ~4e-7):
//! - [`Encoder::Pack`]: the model's query-model pack (`models/e5-small-pack`, found beside the
//!   model folder as the bundle's query-model pages are, and only when its `pack.json` names
//!   this model's `model.onnx` SHA-256) run by [`jikji_query_model::passage::PassageModel`]:
//!   weights dequantised once into f32 panels, sequences packed without padding, AVX-512 /
//!   AVX2 kernels. The default when the pack is there (README, issue 17: throughput against
//!   onnxruntime);
//! - [`Encoder::Tract`]: `model-int8.onnx` (else `model.onnx`) under tract
//!   ([`crate::ingest::load_build_embedder`]), when there is no matching pack, or when the
//!   environment variable [`ENCODER_ENV`] is `tract` (benches compare the two that way).
//!
//! Both tokenize with the model's `tokenizer.json` (`jikji_embed::EmbedTokenizer`), so token
//! counts and truncation are identical.

use std::path::Path;

use jikji_embed::{EmbedTokenizer, Embedded, Embedder, Prefix};
use jikji_query_model::passage::PassageModel;
use jikji_query_model::{QueryModel, QueryPack};

use crate::error::{BuildError, Result};

/// Tokenizers parsed in this process, by `tokenizer.json` path and the file's length and
/// modification time (17 MB of JSON for e5-small: parsed once, then cloned, when chunking
/// and embedding both need it in one build or update).
type TokenizerCache = std::collections::HashMap<
    (std::path::PathBuf, u64, Option<std::time::SystemTime>),
    EmbedTokenizer,
>;

fn tokenizer_cache() -> &'static std::sync::Mutex<TokenizerCache> {
    static CACHE: std::sync::OnceLock<std::sync::Mutex<TokenizerCache>> =
        std::sync::OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn tokenizer_key(path: &Path) -> Option<(std::path::PathBuf, u64, Option<std::time::SystemTime>)> {
    let m = std::fs::metadata(path).ok()?;
    Some((path.to_path_buf(), m.len(), m.modified().ok()))
}

/// A clone of the tokenizer parsed earlier in this process from the file at `path`, if its
/// length and modification time are still those it had then.
pub fn cached_tokenizer(path: &Path) -> Option<EmbedTokenizer> {
    let key = tokenizer_key(path)?;
    tokenizer_cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&key)
        .cloned()
}

/// Keeps a clone of tokenizer `t`, parsed from the file at `path`, for [`cached_tokenizer`].
pub fn remember_tokenizer(path: &Path, t: &EmbedTokenizer) {
    if let Some(key) = tokenizer_key(path) {
        tokenizer_cache()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key, t.clone());
    }
}

/// `JIKJI_ENCODER=tract` makes [`Encoder::load`] choose tract even when a pack is there.
pub const ENCODER_ENV: &str = "JIKJI_ENCODER";

/// The passage engine of [`Encoder::Pack`]: the tokenizer and the encoder.
pub struct PackEncoder {
    tokenizer: EmbedTokenizer,
    model: PassageModel,
}

/// One of the two engines (module docs).
pub enum Encoder {
    /// tract on the ONNX graph.
    Tract(Box<Embedder>),
    /// The pack's passage encoder.
    Pack(Box<PackEncoder>),
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Encoder::Tract(_) => f.write_str("Encoder::Tract"),
            Encoder::Pack(p) => write!(f, "Encoder::Pack({:?})", p.model.isa()),
        }
    }
}

impl Encoder {
    /// The encoder for the model folder `dir`: [`Encoder::Pack`] when the pack beside it
    /// ([`crate::ingest::default_query_model`]) names `model_sha256` (the SHA-256 of `dir`'s
    /// `model.onnx`, [`crate::ingest::model_info`]) and [`ENCODER_ENV`] is not `tract`, else
    /// [`Encoder::Tract`].
    /// Errors: a model or pack file missing or malformed ([`BuildError::LoadModel`],
    /// [`BuildError::QueryModel`], [`BuildError::Io`]).
    pub fn load(dir: &Path, model_sha256: &str) -> Result<Self> {
        let tract_asked = std::env::var(ENCODER_ENV).is_ok_and(|v| v == "tract");
        if let Some(pack) = crate::ingest::default_query_model(dir).filter(|_| !tract_asked) {
            let info = QueryPack::read_info(&pack)?;
            if info.model_sha256 == model_sha256 {
                let tok = dir.join("tokenizer.json");
                let tokenizer = match cached_tokenizer(&tok) {
                    Some(t) => t,
                    None => {
                        let bytes =
                            std::fs::read(&tok).map_err(|e| BuildError::io("reading", &tok, e))?;
                        let t = EmbedTokenizer::from_bytes(&bytes).map_err(|source| {
                            BuildError::LoadModel {
                                path: tok.clone(),
                                source,
                            }
                        })?;
                        remember_tokenizer(&tok, &t);
                        t
                    }
                };
                let (m, rows) = QueryModel::from_pack_dir(&pack)?;
                let model = PassageModel::new(&m, rows);
                return Ok(Encoder::Pack(Box::new(PackEncoder { tokenizer, model })));
            }
        }
        Ok(Encoder::Tract(Box::new(
            crate::ingest::load_build_embedder(dir)?,
        )))
    }

    /// Embeds `texts` (each with `prefix`) on `threads` threads; vectors, token counts and
    /// truncation flags in input order, as [`Embedder::embed_many`] gives them.
    /// `on_progress(n)`: texts finished so far. `what` names the texts in errors
    /// ([`BuildError::Embedding`], [`BuildError::QueryModel`]).
    pub fn embed_many(
        &self,
        texts: &[&str],
        prefix: Prefix,
        threads: usize,
        what: &'static str,
        on_progress: &(dyn Fn(usize) + Sync),
    ) -> Result<Embedded> {
        match self {
            Encoder::Tract(e) => e
                .embed_many(texts, prefix, threads, on_progress)
                .map_err(|source| BuildError::Embedding { what, source }),
            Encoder::Pack(p) => {
                // Tokenized on the threads too (a few % of the work).
                let tokenized = jikji_embed::map_on_threads(texts, threads, |t| {
                    p.tokenizer.token_ids_truncated(t, prefix)
                })
                .map_err(|source| BuildError::Embedding { what, source })?;
                let (ids, truncated): (Vec<Vec<u32>>, Vec<bool>) = tokenized.into_iter().unzip();
                let seqs: Vec<&[u32]> = ids.iter().map(Vec::as_slice).collect();
                let vectors = p.model.embed_many(&seqs, threads, on_progress)?;
                Ok(Embedded {
                    vectors,
                    tokens: ids.iter().map(Vec::len).collect(),
                    truncated,
                })
            }
        }
    }
}

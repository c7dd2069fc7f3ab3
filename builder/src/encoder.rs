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
//!
//! On a CPU with AMX (Intel Sapphire Rapids and later) the pack's encoder multiplies in bf16 by
//! default ([`Isa::Amx`]: ~2.5× fewer CPU seconds than f32, a cold build of the books in 135 s
//! instead of 421 s; cosine ≥ 0.9999 to tract, not ~1 − 1e-7), and so on a CPU with AVX-512 BF16
//! but no AMX (AMD Zen 4: [`Isa::Avx512Bf16`], ~1.8× the f32 kernel, a cold build in 176 s
//! instead of 350 s; `docs/design/passage-bf16.md`, "Session 23"). Its vectors can reorder near-tied
//! neighbours in the top 10 against the f32 engines' (`docs/design/passage-bf16.md`, "Session
//! 21": top 1 equal for 1,186 of 1,190 xquad-en queries, 619 keep an identical top 10), so
//! `JIKJI_PASSAGE_ISA=f32` ([`PASSAGE_ISA_ENV`]) asks for the f32 path that onnxruntime's
//! vectors (`jikji build --vectors`) match. The two are different **numeric paths**
//! ([`Encoder::numerics`]), which the vector cache's keys carry so that one cache never mixes
//! them ([`crate::vector_cache::cache_key`]).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};

use jikji_embed::{EmbedTokenizer, Embedded, Embedder, Prefix};
use jikji_query_model::passage::{Isa, PassageModel};
use jikji_query_model::{QueryModel, QueryPack};

use crate::error::{BuildError, Result};

/// A `tokenizer.json` file as the cache knows it: path, length and modification time.
type TokenizerKey = (std::path::PathBuf, u64, Option<std::time::SystemTime>);

/// One file's tokenizer: parsed by the first caller while later callers wait
/// ([`std::sync::OnceLock`]); `None` when it could not be read or parsed (the caller then
/// reads it again to report the error).
type TokenizerSlot = Arc<OnceLock<Option<Arc<EmbedTokenizer>>>>;

/// Tokenizers parsed in this process, by [`TokenizerKey`] (17 MB of JSON for e5-small,
/// ~0.8 s to parse: parsed once, shared, never cloned nor dropped, when chunking and
/// embedding both need it in one build or update).
fn tokenizer_cache() -> &'static Mutex<HashMap<TokenizerKey, TokenizerSlot>> {
    static CACHE: OnceLock<Mutex<HashMap<TokenizerKey, TokenizerSlot>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

fn tokenizer_key(path: &Path) -> Option<TokenizerKey> {
    let m = std::fs::metadata(path).ok()?;
    Some((path.to_path_buf(), m.len(), m.modified().ok()))
}

fn tokenizer_slot(path: &Path) -> Option<TokenizerSlot> {
    let key = tokenizer_key(path)?;
    let mut cache = tokenizer_cache().lock().unwrap_or_else(|e| e.into_inner());
    Some(cache.entry(key).or_default().clone())
}

/// The tokenizer of the `tokenizer.json` at `path`, parsed at most once per process and
/// file version (length and modification time) and shared; a caller that asks while another
/// thread parses it ([`preload_tokenizer`]) waits for that parse. `None` when the file
/// cannot be read or parsed: the caller reads it again to report the error in its own terms
/// ([`BuildError::Tokenizer`], [`BuildError::LoadModel`]).
pub fn shared_tokenizer(path: &Path) -> Option<Arc<EmbedTokenizer>> {
    tokenizer_slot(path)?
        .get_or_init(|| {
            let bytes = std::fs::read(path).ok()?;
            EmbedTokenizer::from_bytes(&bytes).ok().map(Arc::new)
        })
        .clone()
}

/// Starts parsing the `tokenizer.json` at `path` on a background thread, so that a later
/// [`shared_tokenizer`] finds it parsed (or waits less). For work known to need it soon:
/// `jikji update` starts it before opening the bundle. Does nothing when the file is not
/// there; a failure is reported by the later caller.
pub fn preload_tokenizer(path: &Path) {
    if !path.is_file() {
        return;
    }
    let path = path.to_path_buf();
    // Detached: a process that ends before the parse does is not held back by it.
    let _ = std::thread::Builder::new()
        .name("tokenizer-preload".into())
        .spawn(move || drop(shared_tokenizer(&path)));
}

/// `JIKJI_ENCODER=tract` makes [`Encoder::load`] choose tract even when a pack is there.
pub const ENCODER_ENV: &str = "JIKJI_ENCODER";

/// `JIKJI_PASSAGE_ISA=amx|avx512bf16|avx512|avx2|portable|f32|best` picks the pack encoder's
/// kernel ([`Isa`]; `f32` = the best f32 kernel the CPU has, `best` = the best kernel, the bf16
/// ones included, [`Isa::detect`]); a kernel the CPU lacks falls back to the best it has
/// ([`Isa::resolve`]). Unset or empty: `best` (module docs: when to ask for `f32`).
pub const PASSAGE_ISA_ENV: &str = "JIKJI_PASSAGE_ISA";

/// The kernel the pack's encoder runs with in this process ([`PASSAGE_ISA_ENV`]).
/// Errors: an unknown value ([`BuildError::BadEnv`]).
pub fn passage_isa() -> Result<Isa> {
    match std::env::var(PASSAGE_ISA_ENV) {
        Err(_) => Ok(Isa::detect()),
        Ok(v) if v.is_empty() || v == "best" => Ok(Isa::detect()),
        Ok(v) if v == "f32" => Ok(Isa::resolve(Isa::Avx512)),
        Ok(v) => match Isa::parse(&v) {
            Some(i) => Ok(Isa::resolve(i)),
            None => Err(BuildError::BadEnv {
                name: PASSAGE_ISA_ENV,
                value: v,
                expected: "amx, avx512bf16, avx512, avx2, portable, f32 or best",
            }),
        },
    }
}

/// The passage engine of [`Encoder::Pack`]: the tokenizer and the encoder.
pub struct PackEncoder {
    tokenizer: Arc<EmbedTokenizer>,
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
        if let Some(pack) = Self::pack_to_use(dir, model_sha256)? {
            let tok = dir.join("tokenizer.json");
            let tokenizer = match shared_tokenizer(&tok) {
                Some(t) => t,
                None => {
                    // Read again for the error (shared_tokenizer keeps none).
                    let bytes =
                        std::fs::read(&tok).map_err(|e| BuildError::io("reading", &tok, e))?;
                    Arc::new(EmbedTokenizer::from_bytes(&bytes).map_err(|source| {
                        BuildError::LoadModel {
                            path: tok.clone(),
                            source,
                        }
                    })?)
                }
            };
            let (m, rows) = QueryModel::from_pack_dir(&pack)?;
            let model = PassageModel::with_isa(&m, rows, passage_isa()?);
            return Ok(Encoder::Pack(Box::new(PackEncoder { tokenizer, model })));
        }
        Ok(Encoder::Tract(Box::new(
            crate::ingest::load_build_embedder(dir)?,
        )))
    }

    /// The pack folder [`Encoder::load`] takes for `dir`, or `None` when it takes tract.
    fn pack_to_use(dir: &Path, model_sha256: &str) -> Result<Option<std::path::PathBuf>> {
        let tract_asked = std::env::var(ENCODER_ENV).is_ok_and(|v| v == "tract");
        if let Some(pack) = crate::ingest::default_query_model(dir).filter(|_| !tract_asked) {
            if QueryPack::read_info(&pack)?.model_sha256 == model_sha256 {
                return Ok(Some(pack));
            }
        }
        Ok(None)
    }

    /// The numeric path of this encoder's vectors: `"f32"` (tract, and the pack's f32
    /// kernels: they agree to ~4e-7) or `"bf16"` (the pack on AMX), [`Isa::numerics`].
    pub fn numerics(&self) -> &'static str {
        match self {
            Encoder::Tract(_) => "f32",
            Encoder::Pack(p) => p.model.isa().numerics(),
        }
    }

    /// What [`Encoder::numerics`] of [`Encoder::load`]`(dir, model_sha256)` would be, without
    /// loading the model (the vector cache's keys need it before anything is embedded).
    /// Errors: as [`Encoder::load`]'s reading of `pack.json` and [`passage_isa`].
    pub fn planned_numerics(dir: &Path, model_sha256: &str) -> Result<&'static str> {
        Ok(match Self::pack_to_use(dir, model_sha256)? {
            Some(_) => passage_isa()?.numerics(),
            None => "f32",
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn model_tokenizer() -> std::path::PathBuf {
        let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/e5-small/tokenizer.json");
        assert!(
            p.is_file(),
            "{}: missing; run scripts/setup-model",
            p.display()
        );
        p
    }

    /// One parse per process: the chunker's sizer, the encoder and a preload share it.
    #[test]
    fn the_tokenizer_is_parsed_once_and_shared() {
        let path = model_tokenizer();
        preload_tokenizer(&path);
        let a = shared_tokenizer(&path).expect("parses");
        let b = crate::ingest::TokenSizer::load(path.parent().unwrap()).unwrap();
        assert!(Arc::ptr_eq(&a, &b.0), "the sizer got another copy");
        assert!(Arc::ptr_eq(&a, &shared_tokenizer(&path).unwrap()));
        assert!(
            a.count_tokens("passage: 學而時習之", Prefix::Passage)
                .unwrap()
                > 3
        );
    }

    /// A broken tokenizer.json is reported with its path, and not cached as good.
    #[test]
    fn a_broken_tokenizer_is_an_error_naming_the_file() {
        let dir = std::env::temp_dir().join(format!("jikji-tok-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("tokenizer.json");
        std::fs::write(&path, b"{\"not\": \"a tokenizer\"}").unwrap();
        preload_tokenizer(&path);
        assert!(shared_tokenizer(&path).is_none());
        let e = crate::ingest::TokenSizer::load(&dir)
            .err()
            .expect("an error");
        assert!(
            matches!(&e, BuildError::Tokenizer { path: p, .. } if *p == path),
            "{e}"
        );
        assert!(e.to_string().contains("tokenizer.json"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

//! # jikji-embed — the Jikji sentence embedder
//!
//! Turns text into 384-dimensional unit vectors with **multilingual-e5-small**, the model of
//! Wang et al., *"Text Embeddings by Weakly-Supervised Contrastive Pre-training"* (2022,
//! arXiv:2212.03533) and Wang et al., *"Multilingual E5 Text Embeddings: A Technical Report"*
//! (2024, arXiv:2402.05672). The same code runs natively (the builder embeds book chunks) and
//! on `wasm32-unknown-unknown` (the engine embeds the reader's query in the browser), so both
//! sides tokenize and embed identically.
//!
//! Pieces:
//! - tokenization with the Hugging Face `tokenizers` crate (pure-Rust `fancy-regex` backend on
//!   every target, so native and wasm32 give the same ids) from the model's `tokenizer.json`
//!   (XLM-R SentencePiece Unigram, 250,002 pieces). The file's own padding/truncation settings
//!   are switched off; this crate truncates to [`MAX_TOKENS`] and right-pads itself;
//! - inference with `tract-onnx` on the project's 4-bit ONNX graph (`models/e5-small/model.onnx`,
//!   made by `scripts/setup-model`): inputs `input_ids` and `attention_mask`, both `int64
//!   [batch, seq]`, right padding with the pad id (1); output `sentence_embedding`,
//!   `float32 [batch, 384]`, already mean-pooled over the unmasked positions and L2-normalised.
//!   The linear layers' 4-bit `MatMulNBits` weights are kept 4-bit or dequantized to float32 at
//!   load time ([`Weights`]: float32 natively, several times faster; 4-bit on wasm32, smaller).
//!   Both give the same vectors.
//!
//! E5 expects a role prefix on every input: `"query: "` for searches and `"passage: "` for
//! documents ([`Prefix`]). Vectors are unit length, so the dot product of two of them is their
//! cosine similarity. Raw E5 cosines are bunched (unrelated pairs often score 0.73–0.84), so
//! compare scores relatively, not against fixed thresholds.
//!
//! ```no_run
//! # #[cfg(not(target_arch = "wasm32"))]
//! # fn main() -> Result<(), jikji_embed::EmbedError> {
//! use jikji_embed::{Embedder, Prefix};
//! let e = Embedder::from_dir(std::path::Path::new("models/e5-small"))?;
//! let q = e.embed_query("how to bake sourdough bread")?;
//! let p = e.embed(&["Sourdough is leavened with wild yeast."], Prefix::Passage)?;
//! let cosine: f32 = q.iter().zip(&p.vectors[0]).map(|(a, b)| a * b).sum();
//! # let _ = cosine; Ok(()) }
//! # #[cfg(target_arch = "wasm32")] fn main() {}
//! ```

#![warn(missing_docs)]

use std::io::Cursor;
use std::sync::Arc;

mod dequant;

use tokenizers::Tokenizer;
use tract_onnx::prelude::*;

/// Length of every embedding vector (the model's hidden size).
pub const DIM: usize = 384;

/// Longest input the model accepts, in tokens, counting the `<s>` and `</s>` specials.
/// Longer texts are truncated to this (keeping the first 510 text tokens and `</s>`).
pub const MAX_TOKENS: usize = 512;

/// Texts per batch in [`Embedder::embed_many`].
#[cfg(not(target_arch = "wasm32"))]
const MANY_BATCH_TEXTS: usize = 8;

/// Padded tokens (batch size × longest sequence) per batch in [`Embedder::embed_many`]. Past a
/// few hundred rows tract's matmuls gain nothing from larger batches, while the activations
/// outgrow the caches: measured natively, 200-token passages ran fastest one or two at a time,
/// 20–30-token texts ~25 % faster in batches of 4–8 than alone.
#[cfg(not(target_arch = "wasm32"))]
const MANY_BATCH_TOKENS: usize = 512;

/// Name of the ONNX graph's output holding the pooled, normalised embeddings.
const OUTPUT_NAME: &str = "sentence_embedding";

/// Everything that can go wrong while loading the model or embedding text.
///
/// Messages of the wrapped libraries (`tokenizers`, `tract`) are kept as strings, with their
/// full cause chain.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// Reading a model file from disk failed ([`Embedder::from_dir`] only).
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file that could not be read.
        path: std::path::PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// `tokenizer.json` could not be parsed or configured, or a text could not be encoded.
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    /// The ONNX graph could not be parsed, typed, optimised or made runnable, or it lacks the
    /// expected `input_ids` / `attention_mask` inputs or `sentence_embedding` output.
    #[error("model: {0}")]
    Model(String),
    /// Running the graph failed.
    #[error("inference: {0}")]
    Inference(String),
    /// The graph ran but its output was not `float32 [batch, 384]`.
    #[error("unexpected model output shape {shape:?} (expected [{batch}, {DIM}])")]
    BadOutput {
        /// Shape the model returned.
        shape: Vec<usize>,
        /// Batch size that was fed in.
        batch: usize,
    },
}

/// Role prefix prepended to each text before tokenization, as E5 was trained.
///
/// Use [`Prefix::Query`] for search queries and [`Prefix::Passage`] for indexed text. (For
/// symmetric tasks, such as finding similar passages, `Query` on both sides works best.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prefix {
    /// `"query: "`
    Query,
    /// `"passage: "`
    Passage,
}

impl Prefix {
    /// The literal prefix string, including its trailing space.
    pub fn as_str(self) -> &'static str {
        match self {
            Prefix::Query => "query: ",
            Prefix::Passage => "passage: ",
        }
    }
}

/// How [`Embedder`] holds the model's 4-bit linear-layer weights (`MatMulNBits`) in memory.
///
/// Both give the same vectors to ~1e-6 (the dequantized weights are exact; only summation
/// order differs). The word-embedding table stays 4-bit either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Weights {
    /// Keep them 4-bit (tract's Q4_0 block-quant storage, unpacked inside every matmul):
    /// least memory, slowest. The default on wasm32. Measured for e5-small: wasm memory
    /// 444 MiB in node (incl. the model bytes), a 21-token query 240–380 ms there; natively
    /// 530 MB peak RSS, 55–200 ms per query.
    Packed4Bit,
    /// Dequantize them to float32 once at load time (~150 MB more memory for e5-small):
    /// several times faster — measured 3–4× natively (21-token query ~22–30 ms) and 3–5× in
    /// wasm (57–123 ms in node, wasm memory 597 MiB). The default natively.
    Float32,
}

impl Default for Weights {
    /// [`Weights::Float32`] natively, [`Weights::Packed4Bit`] on wasm32.
    fn default() -> Self {
        if cfg!(target_arch = "wasm32") {
            Weights::Packed4Bit
        } else {
            Weights::Float32
        }
    }
}

/// Result of embedding a list of texts; all three vectors are parallel to the input texts.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Embedded {
    /// One L2-normalised vector of [`DIM`] `f32`s per text.
    pub vectors: Vec<Vec<f32>>,
    /// Tokens actually fed to the model per text, including `<s>`/`</s>` and the prefix, so at
    /// most [`MAX_TOKENS`].
    pub tokens: Vec<usize>,
    /// Whether the text was longer than [`MAX_TOKENS`] tokens and its tail was dropped.
    pub truncated: Vec<bool>,
}

impl Embedded {
    fn with_capacity(n: usize) -> Self {
        Embedded {
            vectors: Vec::with_capacity(n),
            tokens: Vec::with_capacity(n),
            truncated: Vec::with_capacity(n),
        }
    }

    /// Number of texts embedded.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// Whether no text was embedded.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }
}

/// One tokenized text, already truncated to [`MAX_TOKENS`].
struct Tokens {
    ids: Vec<u32>,
    truncated: bool,
}

/// The E5 tokenizer on its own (no model): what [`Embedder`] uses to turn text into ids.
///
/// Useful where only token counts are needed (e.g. sizing chunks) without loading the graph.
/// Padding and truncation settings stored in `tokenizer.json` are switched off; truncation to
/// [`MAX_TOKENS`] is done here, keeping `</s>` last.
#[derive(Clone)]
pub struct EmbedTokenizer {
    tokenizer: Tokenizer,
    eos_id: u32,
    pad_id: u32,
}

impl std::fmt::Debug for EmbedTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbedTokenizer")
            .field("vocab_size", &self.tokenizer.get_vocab_size(true))
            .field("eos_id", &self.eos_id)
            .field("pad_id", &self.pad_id)
            .finish_non_exhaustive()
    }
}

impl EmbedTokenizer {
    /// Parses a Hugging Face `tokenizer.json` (for E5: XLM-R SentencePiece Unigram).
    ///
    /// # Errors
    /// [`EmbedError::Tokenizer`] if the JSON does not parse.
    pub fn from_bytes(tokenizer_json: &[u8]) -> Result<Self, EmbedError> {
        let mut tokenizer = Tokenizer::from_bytes(tokenizer_json).map_err(tok_err)?;
        tokenizer.with_padding(None);
        tokenizer.with_truncation(None).map_err(tok_err)?;
        let eos_id = tokenizer.token_to_id("</s>").unwrap_or(2);
        let pad_id = tokenizer.token_to_id("<pad>").unwrap_or(1);
        Ok(EmbedTokenizer {
            tokenizer,
            eos_id,
            pad_id,
        })
    }

    /// Token ids of `prefix + text`, with `<s>` … `</s>`, not truncated.
    fn encode_full(&self, text: &str, prefix: Prefix) -> Result<Vec<u32>, EmbedError> {
        let input = format!("{}{}", prefix.as_str(), text);
        let enc = self.tokenizer.encode_fast(input, true).map_err(tok_err)?;
        Ok(enc.get_ids().to_vec())
    }

    /// Tokenizes and truncates to [`MAX_TOKENS`] (keeping `</s>` as the last token).
    fn tokenize(&self, text: &str, prefix: Prefix) -> Result<Tokens, EmbedError> {
        let mut ids = self.encode_full(text, prefix)?;
        let truncated = ids.len() > MAX_TOKENS;
        if truncated {
            ids.truncate(MAX_TOKENS - 1);
            ids.push(self.eos_id);
        }
        Ok(Tokens { ids, truncated })
    }

    /// Token ids exactly as the model sees them for `prefix + text`: `<s>` (0), the pieces,
    /// `</s>` (2), truncated to at most [`MAX_TOKENS`].
    ///
    /// # Errors
    /// [`EmbedError::Tokenizer`] if the text cannot be encoded.
    pub fn token_ids(&self, text: &str, prefix: Prefix) -> Result<Vec<u32>, EmbedError> {
        Ok(self.tokenize(text, prefix)?.ids)
    }

    /// [`EmbedTokenizer::token_ids`] and whether the text was longer than [`MAX_TOKENS`]
    /// tokens (its tail dropped), from one tokenization.
    ///
    /// # Errors
    /// [`EmbedError::Tokenizer`] if the text cannot be encoded.
    pub fn token_ids_truncated(
        &self,
        text: &str,
        prefix: Prefix,
    ) -> Result<(Vec<u32>, bool), EmbedError> {
        let t = self.tokenize(text, prefix)?;
        Ok((t.ids, t.truncated))
    }

    /// Number of tokens of `prefix + text`, including `<s>` and `</s>`, **before** truncation.
    ///
    /// # Errors
    /// [`EmbedError::Tokenizer`] if the text cannot be encoded.
    pub fn count_tokens(&self, text: &str, prefix: Prefix) -> Result<usize, EmbedError> {
        Ok(self.encode_full(text, prefix)?.len())
    }

    /// Id used to right-pad batches (`<pad>`, 1 for E5).
    pub fn pad_id(&self) -> u32 {
        self.pad_id
    }
}

/// A loaded tokenizer plus an optimised, runnable ONNX graph. Build it once and reuse it:
/// loading parses and optimises the whole graph (measured ~2 s natively for e5-small).
///
/// `Embedder` is `Send + Sync`; natively, several threads may call it at once (each call runs
/// its own inference state).
pub struct Embedder {
    tokenizer: EmbedTokenizer,
    plan: Arc<TypedSimplePlan>,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("tokenizer", &self.tokenizer)
            .finish_non_exhaustive()
    }
}

fn model_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Model(format!("{e:#}"))
}

fn tok_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Tokenizer(format!("{e:#}"))
}

fn infer_err(e: impl std::fmt::Display) -> EmbedError {
    EmbedError::Inference(format!("{e:#}"))
}

impl Embedder {
    /// Loads the embedder from the bytes of `model.onnx` and `tokenizer.json`, holding the
    /// weights as [`Weights::default()`] (float32 natively, 4-bit on wasm32); see
    /// [`Embedder::from_bytes_with`].
    ///
    /// # Errors
    /// As [`Embedder::from_bytes_with`].
    pub fn from_bytes(onnx: &[u8], tokenizer_json: &[u8]) -> Result<Self, EmbedError> {
        Self::from_bytes_with(onnx, tokenizer_json, Weights::default())
    }

    /// Loads the embedder from the bytes of `model.onnx` and `tokenizer.json`, holding the
    /// linear-layer weights as `weights` says.
    ///
    /// The tokenizer's own padding and truncation settings are disabled. The graph must have
    /// inputs named `input_ids` and `attention_mask` (`int64 [batch, seq]`; they are re-declared
    /// with symbolic dims `batch`, `seq`) and an output named `sentence_embedding`
    /// (`float32 [batch, 384]`).
    ///
    /// # Errors
    /// [`EmbedError::Tokenizer`] if `tokenizer_json` does not parse; [`EmbedError::Model`] if
    /// the ONNX graph does not parse, lacks those inputs/output, or cannot be optimised.
    pub fn from_bytes_with(
        onnx: &[u8],
        tokenizer_json: &[u8],
        weights: Weights,
    ) -> Result<Self, EmbedError> {
        let tokenizer = EmbedTokenizer::from_bytes(tokenizer_json)?;
        let onnx_parser = tract_onnx::onnx();
        let mut proto = onnx_parser
            .proto_model_for_read(&mut Cursor::new(onnx))
            .map_err(model_err)?;
        if weights == Weights::Float32 {
            dequant::dequantize_matmul_nbits(&mut proto)?;
        }
        let mut model = onnx_parser
            .model_for_proto_model(&proto)
            .map_err(model_err)?;
        drop(proto);
        let names: Vec<String> = model
            .input_outlets()
            .map_err(model_err)?
            .iter()
            .map(|o| model.node(o.node).name.clone())
            .collect();
        if names.len() != 2 || names[0] != "input_ids" || names[1] != "attention_mask" {
            return Err(EmbedError::Model(format!(
                "expected inputs [input_ids, attention_mask], graph has {names:?}"
            )));
        }
        // Pin both inputs to int64 [batch, seq] with symbolic dims, whatever the graph declares.
        let batch = model.sym("batch");
        let seq = model.sym("seq");
        for i in 0..2 {
            let fact = InferenceFact::dt_shape(
                i64::datum_type(),
                tvec![batch.clone().to_dim(), seq.clone().to_dim()],
            );
            model.set_input_fact(i, fact).map_err(model_err)?;
        }
        model
            .select_outputs_by_name([OUTPUT_NAME])
            .map_err(model_err)?;
        let plan = model
            .into_optimized()
            .map_err(model_err)?
            .into_runnable()
            .map_err(model_err)?;
        Ok(Embedder { tokenizer, plan })
    }

    /// Loads `model.onnx` and `tokenizer.json` from `dir` (e.g. `models/e5-small`), with
    /// [`Weights::default()`] (float32).
    ///
    /// # Errors
    /// [`EmbedError::Io`] if a file cannot be read, otherwise as [`Embedder::from_bytes`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_dir(dir: &std::path::Path) -> Result<Self, EmbedError> {
        Self::from_dir_with(dir, Weights::default())
    }

    /// Loads `model.onnx` and `tokenizer.json` from `dir`, holding the weights as `weights`
    /// says.
    ///
    /// # Errors
    /// [`EmbedError::Io`] if a file cannot be read, otherwise as [`Embedder::from_bytes_with`].
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_dir_with(dir: &std::path::Path, weights: Weights) -> Result<Self, EmbedError> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|source| EmbedError::Io { path, source })
        };
        let onnx = read("model.onnx")?;
        let tokenizer = read("tokenizer.json")?;
        Self::from_bytes_with(&onnx, &tokenizer, weights)
    }

    /// The tokenizer this embedder uses.
    pub fn tokenizer(&self) -> &EmbedTokenizer {
        &self.tokenizer
    }

    /// Number of tokens of `prefix + text`, including `<s>` and `</s>`, **before** truncation:
    /// a result above [`MAX_TOKENS`] means [`Embedder::embed`] would drop the tail. The builder
    /// uses it to size chunks. Same as [`EmbedTokenizer::count_tokens`].
    ///
    /// # Errors
    /// [`EmbedError::Tokenizer`] if the text cannot be encoded.
    pub fn count_tokens(&self, text: &str, prefix: Prefix) -> Result<usize, EmbedError> {
        self.tokenizer.count_tokens(text, prefix)
    }

    /// Embeds `texts` (each with `prefix`) as **one** right-padded batch of shape
    /// `[texts.len(), longest]`. Texts longer than [`MAX_TOKENS`] tokens are truncated (see
    /// [`Embedded::truncated`]). Padding does not change a text's vector (up to float rounding,
    /// ~1e-6). An empty `texts` gives an empty result without running the model.
    ///
    /// Cost grows with `texts.len() × longest`, so batch texts of similar length (as
    /// [`Embedder::embed_many`] does).
    ///
    /// # Errors
    /// [`EmbedError::Tokenizer`], [`EmbedError::Inference`], or [`EmbedError::BadOutput`] if
    /// the graph's output is not `[texts.len(), 384]`.
    pub fn embed(&self, texts: &[&str], prefix: Prefix) -> Result<Embedded, EmbedError> {
        let toks = texts
            .iter()
            .map(|t| self.tokenizer.tokenize(t, prefix))
            .collect::<Result<Vec<_>, _>>()?;
        let refs: Vec<&Tokens> = toks.iter().collect();
        self.run_batch(&refs)
    }

    /// Embeds one search query (with the `"query: "` prefix) and returns its unit vector of
    /// [`DIM`] floats.
    ///
    /// # Errors
    /// As [`Embedder::embed`].
    pub fn embed_query(&self, text: &str) -> Result<Vec<f32>, EmbedError> {
        let mut out = self.embed(&[text], Prefix::Query)?;
        Ok(out.vectors.pop().expect("one vector per text"))
    }

    /// Runs the graph on one batch of tokenized texts.
    fn run_batch(&self, toks: &[&Tokens]) -> Result<Embedded, EmbedError> {
        let n = toks.len();
        let mut out = Embedded::with_capacity(n);
        if n == 0 {
            return Ok(out);
        }
        let seq = toks.iter().map(|t| t.ids.len()).max().unwrap_or(0);
        let mut ids = vec![self.tokenizer.pad_id as i64; n * seq];
        let mut mask = vec![0i64; n * seq];
        for (row, t) in toks.iter().enumerate() {
            for (col, &id) in t.ids.iter().enumerate() {
                ids[row * seq + col] = id as i64;
                mask[row * seq + col] = 1;
            }
        }
        let shape = [n, seq];
        let ids = Tensor::from_shape(&shape, &ids).map_err(infer_err)?;
        let mask = Tensor::from_shape(&shape, &mask).map_err(infer_err)?;
        let result = self
            .plan
            .run(tvec![ids.into(), mask.into()])
            .map_err(infer_err)?;
        let first = result.first().ok_or(EmbedError::BadOutput {
            shape: vec![],
            batch: n,
        })?;
        let view = first
            .to_plain_array_view::<f32>()
            .map_err(|_| EmbedError::BadOutput {
                shape: first.shape().to_vec(),
                batch: n,
            })?;
        if view.shape() != [n, DIM] {
            return Err(EmbedError::BadOutput {
                shape: view.shape().to_vec(),
                batch: n,
            });
        }
        for (row, t) in view.outer_iter().zip(toks) {
            out.vectors.push(row.iter().copied().collect());
            out.tokens.push(t.ids.len());
            out.truncated.push(t.truncated);
        }
        Ok(out)
    }

    /// Embeds many texts quickly: tokenizes them all, sorts them by length into batches of at
    /// most 8 texts and at most 512 padded tokens (a longer text goes alone), runs the batches on `threads` OS
    /// threads (`std::thread::scope`; `0` is taken as 1), and returns the results **in input
    /// order**. After each batch, `on_progress(n)` is called with the number of texts finished
    /// so far in this call (monotonic across threads, ending at `texts.len()`); it may be
    /// called from any of the worker threads.
    ///
    /// Vectors equal those of [`Embedder::embed`] on each text alone (to ~1e-6).
    ///
    /// # Errors
    /// The first error met by any thread; remaining batches are then skipped.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn embed_many(
        &self,
        texts: &[&str],
        prefix: Prefix,
        threads: usize,
        on_progress: &(dyn Fn(usize) + Sync),
    ) -> Result<Embedded, EmbedError> {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Mutex;

        let n = texts.len();
        if n == 0 {
            return Ok(Embedded::default());
        }
        let threads = threads.max(1);

        // Tokenize (in parallel too: it is a noticeable share of the work for short texts).
        let toks: Vec<Tokens> =
            map_on_threads(texts, threads, |t| self.tokenizer.tokenize(t, prefix))?;

        // Sort by length (longest first, so the costly batches start early) and cut batches.
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(toks[i].ids.len()));
        let mut batches: Vec<&[usize]> = Vec::new();
        let mut start = 0;
        while start < n {
            let longest = toks[order[start]].ids.len().max(1);
            let fit = (MANY_BATCH_TOKENS / longest).clamp(1, MANY_BATCH_TEXTS);
            let end = (start + fit).min(n);
            batches.push(&order[start..end]);
            start = end;
        }

        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<EmbedError>> = Mutex::new(None);
        // Per input text: (vector, tokens, truncated).
        type Row = (Vec<f32>, usize, bool);
        let results: Mutex<Vec<Option<Row>>> = Mutex::new(vec![None; n]);
        // Progress is reported under this lock so that the counts a caller sees only grow.
        let progress_lock = Mutex::new(());

        let worker = || loop {
            if failed.load(Ordering::Relaxed) {
                return;
            }
            let b = next.fetch_add(1, Ordering::Relaxed);
            let Some(batch) = batches.get(b) else { return };
            let refs: Vec<&Tokens> = batch.iter().map(|&i| &toks[i]).collect();
            match self.run_batch(&refs) {
                Ok(emb) => {
                    {
                        let mut r = results.lock().unwrap();
                        for (k, v) in emb.vectors.into_iter().enumerate() {
                            r[batch[k]] = Some((v, emb.tokens[k], emb.truncated[k]));
                        }
                    }
                    let _g = progress_lock.lock().unwrap();
                    let d = done.fetch_add(batch.len(), Ordering::SeqCst) + batch.len();
                    on_progress(d);
                }
                Err(e) => {
                    failed.store(true, Ordering::Relaxed);
                    first_error.lock().unwrap().get_or_insert(e);
                    return;
                }
            }
        };

        let workers = threads.min(batches.len());
        if workers <= 1 {
            worker();
        } else {
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(worker);
                }
            });
        }

        if let Some(e) = first_error.into_inner().unwrap() {
            return Err(e);
        }
        let mut out = Embedded::with_capacity(n);
        for r in results.into_inner().unwrap() {
            let (v, t, tr) = r.expect("every batch ran");
            out.vectors.push(v);
            out.tokens.push(t);
            out.truncated.push(tr);
        }
        Ok(out)
    }
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Embedder>();
    is::<EmbedTokenizer>();
    is::<Embedded>();
    is::<EmbedError>();
}

/// `f` applied to every text of `texts`, in order, on up to `threads` scoped threads (one
/// contiguous share of the texts each; on the calling thread alone when `threads` ≤ 1 or
/// there are fewer than two texts per thread). Used to tokenize many texts before
/// embedding them (a noticeable share of the work for short texts).
///
/// # Errors
/// The first error `f` returns, in text order.
pub fn map_on_threads<T: Send, E: Send>(
    texts: &[&str],
    threads: usize,
    f: impl Fn(&str) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E> {
    let n = texts.len();
    let threads = threads.max(1);
    if threads == 1 || n < 2 * threads {
        return texts.iter().map(|t| f(t)).collect();
    }
    let per = n.div_ceil(threads);
    let f = &f;
    let parts: Vec<Result<Vec<T>, E>> = std::thread::scope(|s| {
        let handles: Vec<_> = texts
            .chunks(per)
            .map(|chunk| s.spawn(move || chunk.iter().map(|t| f(t)).collect()))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("tokenizer thread panicked"))
            .collect()
    });
    let mut all = Vec::with_capacity(n);
    for p in parts {
        all.extend(p?);
    }
    Ok(all)
}

#[cfg(test)]
mod map_on_threads_tests {
    use super::map_on_threads;

    #[test]
    fn keeps_text_order_and_returns_the_first_error_in_order() {
        let texts: Vec<String> = (0..37).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        for threads in [0, 1, 2, 5, 64] {
            let got: Vec<usize> =
                map_on_threads(&refs, threads, |t| t.parse::<usize>().map_err(|_| t.len()))
                    .unwrap();
            assert_eq!(got, (0..37).collect::<Vec<_>>(), "threads {threads}");
        }
        let mut bad = refs.clone();
        bad[30] = "x";
        bad[3] = "yy";
        let err = map_on_threads(&bad, 4, |t| t.parse::<usize>().map_err(|_| t.to_string()));
        assert_eq!(err.unwrap_err(), "yy");
    }
}

//! Embed stage: chunk texts → passage vectors with the model (`model-int8.onnx` natively),
//! through the [`crate::vector_cache`] so a text is embedded at most once per model.

use std::path::Path;

use indicatif::{ProgressBar, ProgressStyle};
use jikji_embed::{Embedder, Prefix};

use crate::encoder::Encoder;
use jikji_format::vectors::write_vectors;
use jikji_format::{sha256_hex, ModelInfo};

use super::IngestOptions;
use crate::error::{BuildError, Result};
use crate::lang_means::{stats_path, CentringSettings, LoadedStats};
use crate::vector_cache::{cache_key, CacheEntry, VectorCache};

/// A bundle's vectors: the model they come from, `vectors.bin` and what making them took.
pub struct EmbeddedVectors {
    /// The model ([`model_info`]).
    pub model: ModelInfo,
    /// `vectors.bin` bytes (int8 rows + scales, [`jikji_format::vectors`]).
    pub vectors_bin: Vec<u8>,
    /// Tokens, truncations, cache hits.
    pub stats: Embedded,
}

/// Embeds `texts` (chunk texts, doc order; `sources` their source files) with the model in
/// `model_dir` through `opts.cache_dir`, on `opts.threads` threads, then [`pack_vectors`].
/// The model is loaded into `embedder` only if some text is not cached. Errors: the model
/// or the statistics file is missing or broken.
pub fn embed_vectors(
    texts: &[&str],
    sources: &[&str],
    model_dir: &Path,
    opts: &IngestOptions,
    centring: Option<CentringSettings>,
    embedder: &mut Option<Encoder>,
) -> Result<EmbeddedVectors> {
    let stats = embed_passages(
        texts,
        model_dir,
        opts.cache_dir.as_deref(),
        opts.threads,
        opts.progress,
        embedder,
    )?;
    pack_vectors(stats, texts, sources, model_dir, opts, centring)
}

/// Quantizes the passage vectors of `stats` (one per chunk: texts `texts`, source files
/// `sources`) into `vectors.bin` as the model gave them, and when `centring` is given
/// records each chunk's centring language and the offsets in [`ModelInfo::centring`]
/// ([`crate::lang_means::LoadedStats::assign`]; the statistics file is `opts.lang_means` or
/// the model folder's): the engine applies them, so `vectors.bin` is the same with or
/// without centring. Embedded and imported vectors go through it alike. Errors: the model
/// or the statistics file is missing or broken.
pub fn pack_vectors(
    stats: Embedded,
    texts: &[&str],
    sources: &[&str],
    model_dir: &Path,
    opts: &IngestOptions,
    centring: Option<CentringSettings>,
) -> Result<EmbeddedVectors> {
    let mut model = model_info(model_dir)?;
    let vectors_bin = write_vectors(jikji_embed::DIM, &stats.vectors)?;
    if let Some(c) = centring {
        let path = stats_path(model_dir, opts.lang_means.as_deref());
        let means = LoadedStats::load(&path, &model.sha256)?;
        let rows = jikji_format::vectors::Vectors::open(&vectors_bin)?;
        let (langs, offsets) = means.assign(&stats.vectors, &rows, texts, sources, c);
        model.centring = Some(means.record(c, offsets, &langs));
    }
    Ok(EmbeddedVectors {
        model,
        vectors_bin,
        stats,
    })
}

/// Model metadata: id from `model.json` if present, SHA-256 of `model.onnx` (the file the
/// browser loads; the engine refuses a model whose SHA-256 differs); no centring.
pub fn model_info(dir: &Path) -> Result<ModelInfo> {
    let onnx = dir.join("model.onnx");
    // The SHA-256 of this file (74 MB) once per process, while its length and modification
    // time stay those it had (a build or update asks several times).
    type Key = (std::path::PathBuf, u64, Option<std::time::SystemTime>);
    static SHA: std::sync::OnceLock<std::sync::Mutex<std::collections::HashMap<Key, String>>> =
        std::sync::OnceLock::new();
    let key: Option<Key> = std::fs::metadata(&onnx)
        .ok()
        .map(|m| (onnx.clone(), m.len(), m.modified().ok()));
    let known = key.as_ref().and_then(|k| {
        SHA.get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(k)
            .cloned()
    });
    let sha256 = match known {
        Some(h) => h,
        None => {
            let bytes = std::fs::read(&onnx).map_err(|source| BuildError::ModelMissing {
                path: onnx.clone(),
                source,
            })?;
            let h = sha256_hex(&bytes);
            if let Some(k) = key {
                SHA.get_or_init(Default::default)
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(k, h.clone());
            }
            h
        }
    };
    let id = std::fs::read(dir.join("model.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v.get("id").and_then(|i| i.as_str()).map(String::from))
        .unwrap_or_else(|| "multilingual-e5-small-q4".to_string());
    Ok(ModelInfo {
        id,
        sha256,
        dim: jikji_embed::DIM,
        max_tokens: jikji_embed::MAX_TOKENS,
        centring: None,
    })
}

/// Loads the embedder used to embed chunks: `model-int8.onnx` if present (the same 4-bit
/// weights expanded to int8, ~3× faster in tract natively, same outputs to ~1e-7, checked
/// by `scripts/check_model.py`), else `model.onnx`.
pub fn load_build_embedder(dir: &Path) -> Result<Embedder> {
    let int8 = dir.join("model-int8.onnx");
    let onnx = if int8.exists() {
        int8
    } else {
        dir.join("model.onnx")
    };
    let tok = dir.join("tokenizer.json");
    let onnx_bytes = std::fs::read(&onnx).map_err(|e| BuildError::io("reading", &onnx, e))?;
    let tok_bytes = std::fs::read(&tok).map_err(|e| BuildError::io("reading", &tok, e))?;
    Embedder::from_bytes(&onnx_bytes, &tok_bytes)
        .map_err(|source| BuildError::LoadModel { path: onnx, source })
}

/// Passage vectors of some texts and what making them took.
pub struct Embedded {
    /// One L2-normalised vector per text, in order.
    pub vectors: Vec<Vec<f32>>,
    /// Model tokens over all texts (specials and prefix included).
    pub tokens: usize,
    /// Texts longer than the model's maximum (truncated).
    pub truncated: usize,
    /// Texts whose vector came from the cache.
    pub cached: usize,
    /// Texts embedded now.
    pub embedded: usize,
    /// Model tokens of each text, in order (specials and prefix included).
    pub per_text: Vec<usize>,
}

/// Texts embedded between two cache flushes in [`embed_passages`]: an interrupted build loses at
/// most this many vectors (about a few minutes of work on 2 cores).
const FLUSH_EVERY: usize = 512;

/// Embeds `texts` with the `passage: ` prefix, through the vector cache in `cache_dir`
/// (if any) so a text is embedded at most once per model. The model is loaded into
/// `embedder` only if some text is not in the cache (and reused if already loaded there).
pub fn embed_passages(
    texts: &[&str],
    model_dir: &Path,
    cache_dir: Option<&Path>,
    threads: usize,
    progress: bool,
    embedder: &mut Option<Encoder>,
) -> Result<Embedded> {
    let info = model_info(model_dir)?;
    let mut cache = VectorCache::open(cache_dir, &info.sha256)?;
    // The numeric path of the vectors the encoder gives (or would give, unloaded): a cache
    // filled on the f32 path is not read on the bf16 one, nor the reverse.
    let numerics = match embedder {
        Some(e) => e.numerics(),
        None => Encoder::planned_numerics(model_dir, &info.sha256)?,
    };
    let keys: Vec<[u8; 32]> = texts
        .iter()
        .map(|t| cache_key(&info.sha256, numerics, Prefix::Passage, t))
        .collect();
    let missing: Vec<usize> = (0..texts.len())
        .filter(|&i| !cache.contains(&keys[i]))
        .collect();
    if !missing.is_empty() {
        let embedder = match embedder {
            Some(e) => e,
            None => embedder.insert(Encoder::load(model_dir, &info.sha256)?),
        };
        let bar = progress_bar(progress, missing.len() as u64, "embedding");
        // Flush the cache after every group so an interrupted build keeps what it embedded.
        let mut done = 0;
        for group in missing.chunks(FLUSH_EVERY) {
            let todo: Vec<&str> = group.iter().map(|&i| texts[i]).collect();
            let out = embedder.embed_many(&todo, Prefix::Passage, threads, "chunks", &|n| {
                bar.set_position((done + n) as u64)
            })?;
            for (j, &i) in group.iter().enumerate() {
                let entry = CacheEntry {
                    tokens: out.tokens[j] as u32,
                    truncated: out.truncated[j],
                    vector: out.vectors[j].clone(),
                };
                cache.insert(keys[i], entry);
            }
            cache.flush()?;
            done += group.len();
        }
        bar.finish_and_clear();
    }
    let mut e = Embedded {
        vectors: Vec::with_capacity(texts.len()),
        tokens: 0,
        truncated: 0,
        cached: texts.len() - missing.len(),
        embedded: missing.len(),
        per_text: Vec::with_capacity(texts.len()),
    };
    for k in &keys {
        let c = cache.get(k).expect("every key was cached above");
        e.tokens += c.tokens as usize;
        e.per_text.push(c.tokens as usize);
        e.truncated += usize::from(c.truncated);
        e.vectors.push(c.vector.clone());
    }
    Ok(e)
}

/// How often [`Progress`] writes a line when stderr is not a terminal (a log file, CI).
const PROGRESS_LINE_EVERY: std::time::Duration = std::time::Duration::from_secs(15);

/// Progress of a long step on stderr: an indicatif bar on a terminal; on anything else (a log
/// file, a CI job's output) a plain line at most every [`PROGRESS_LINE_EVERY`] and one at the
/// end (`embedding: 1200/6333 chunks (19 %), 7.1 chunks/s, eta 12 min`), so a redirected build
/// still shows that it is alive; nothing when `show` is false.
pub(crate) enum Progress {
    /// Nothing shown.
    Hidden,
    /// A terminal: an indicatif bar.
    Bar(ProgressBar),
    /// Not a terminal: plain lines.
    Lines {
        /// What is done (`embedding`).
        msg: &'static str,
        /// Units in all.
        len: u64,
        /// When the step began.
        start: std::time::Instant,
        /// When a line was last written (`None`: never).
        last: std::sync::Mutex<Option<std::time::Instant>>,
    },
}

impl Progress {
    /// Reports `pos` units done of the step's length.
    pub(crate) fn set_position(&self, pos: u64) {
        match self {
            Progress::Hidden => {}
            Progress::Bar(b) => b.set_position(pos),
            Progress::Lines {
                msg,
                len,
                start,
                last,
            } => {
                let now = std::time::Instant::now();
                let mut last = last.lock().unwrap_or_else(|e| e.into_inner());
                let due = last.map_or(now.duration_since(*start), |t| now.duration_since(t));
                if due >= PROGRESS_LINE_EVERY && pos < *len {
                    *last = Some(now);
                    eprintln!(
                        "{}",
                        progress_line(msg, pos, *len, now.duration_since(*start))
                    );
                }
            }
        }
    }

    /// Ends the step: clears the bar, or writes the last line.
    pub(crate) fn finish_and_clear(&self) {
        match self {
            Progress::Hidden => {}
            Progress::Bar(b) => b.finish_and_clear(),
            Progress::Lines {
                msg, len, start, ..
            } => eprintln!("{}", progress_line(msg, *len, *len, start.elapsed())),
        }
    }
}

/// One plain progress line: `MSG: POS/LEN chunks (P %), R chunks/s, eta T` (eta left out at
/// the end and before the first unit).
fn progress_line(msg: &str, pos: u64, len: u64, elapsed: std::time::Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let rate = pos as f64 / secs;
    let pct = if len == 0 {
        100.0
    } else {
        100.0 * pos as f64 / len as f64
    };
    let mut line = format!("{msg}: {pos}/{len} chunks ({pct:.0} %), {rate:.1} chunks/s");
    if pos < len && pos > 0 {
        let eta = (len - pos) as f64 / rate;
        line.push_str(&if eta >= 90.0 {
            format!(", eta {:.0} min", eta / 60.0)
        } else {
            format!(", eta {eta:.0} s")
        });
    } else if pos >= len {
        line.push_str(&format!(" in {secs:.0} s"));
    }
    line
}

/// Progress on stderr for `len` units (hidden unless `show`; see [`Progress`]).
pub(crate) fn progress_bar(show: bool, len: u64, msg: &'static str) -> Progress {
    use std::io::IsTerminal;
    if !show {
        return Progress::Hidden;
    }
    if !std::io::stderr().is_terminal() {
        return Progress::Lines {
            msg,
            len,
            start: std::time::Instant::now(),
            last: std::sync::Mutex::new(None),
        };
    }
    let bar = ProgressBar::new(len);
    bar.set_style(
        ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} chunks ({per_sec}, eta {eta})")
            .unwrap()
            .progress_chars("=> "),
    );
    bar.set_message(msg);
    Progress::Bar(bar)
}

#[cfg(test)]
mod progress_tests {
    use super::progress_line;
    use std::time::Duration;

    #[test]
    fn plain_progress_lines_say_position_rate_and_eta() {
        assert_eq!(
            progress_line("embedding", 1200, 6333, Duration::from_secs(169)),
            "embedding: 1200/6333 chunks (19 %), 7.1 chunks/s, eta 12 min"
        );
        assert_eq!(
            progress_line("embedding", 30, 60, Duration::from_secs(10)),
            "embedding: 30/60 chunks (50 %), 3.0 chunks/s, eta 10 s"
        );
        assert_eq!(
            progress_line("embedding", 60, 60, Duration::from_secs(20)),
            "embedding: 60/60 chunks (100 %), 3.0 chunks/s in 20 s"
        );
    }
}

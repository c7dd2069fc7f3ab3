//! # jikji-query-model — a lean forward pass of multilingual-e5-small for one query
//!
//! Embeds one tokenized query into the same 384-dimensional unit vector as the full ONNX model
//! (`jikji-embed` with `models/e5-small/model.onnx`), without tract: the post-LayerNorm
//! BERT/XLM-R encoder (Devlin et al. 2019, arXiv:1810.04805; Conneau et al. 2020,
//! arXiv:1911.02116) of multilingual-e5-small (Wang et al. 2024, arXiv:2402.05672), written for
//! this one architecture in pure Rust so the same code runs natively and on
//! `wasm32-unknown-unknown`.
//!
//! - weights stay in the source's **Q4_0** blocks (the E5S1 file is 4-bit; keeping its blocks
//!   loses nothing against `model.onnx`, which holds the same blocks), multiplied with f32
//!   activations ([`kernels::matmul_q4`]);
//! - one sequence, never padded: attention has no mask, pooling is the plain mean over all
//!   positions (`<s>`, the `query: ` prefix and `</s>` included, as in the ONNX graph);
//! - exact (erf) GELU, LayerNorm eps from the file (1e-12), attention scale 1/√32;
//! - weights come from a **pack** folder ([`pack`]) that [`pack::write_pack_dir`] makes from the
//!   E5S1 file (`jikji model-pack`); the token-embedding table is read per token id through a
//!   [`RowTable`] so that the browser can fetch only the rows a query uses.
//!
//! Tokenization: [`tokenizer::Tokenizer`] (the compact form of the model's Unigram tokenizer,
//! [`tokenizer::TOKENIZER_FILE`] in the pack) gives the same ids as
//! `jikji_embed::EmbedTokenizer::token_ids(text, Prefix::Query)` (`<s>` … `</s>`, at most
//! [`MAX_TOKENS`]); [`QueryPack`] puts the pack's three files together.
//!
//! Agreement with the ONNX model: `tests/agree.rs` (cosine ≥ 0.999 required; measured figures
//! in `docs/design/query-model-pack.md`).

#![warn(missing_docs)]

use std::path::{Path, PathBuf};

pub mod e5s1;
pub mod kernels;
pub mod pack;
pub mod paged;
#[cfg(not(target_arch = "wasm32"))]
pub mod passage;
pub mod tokenizer;

use kernels::{attention, gelu_erf, layer_norm, matmul_q4, mean_pool_l2, Q4Matrix};

/// Weights per Q4_0 block.
pub const Q4_BLOCK: usize = 32;
/// Bytes per Q4_0 block (f16 scale + 16 nibble bytes).
pub const Q4_BLOCK_BYTES: usize = 18;
/// Longest input, in tokens including `<s>` and `</s>` (the position table's rows).
pub const MAX_TOKENS: usize = 512;

/// Everything that can go wrong reading a model source or pack, or embedding.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The E5S1 source file is malformed at `offset`.
    #[error("E5S1 file, byte {offset}: {msg}")]
    E5s1 {
        /// Byte offset of the bad field.
        offset: usize,
        /// What is wrong.
        msg: String,
    },
    /// The E5S1 file has no tensor of this name.
    #[error("E5S1 file: no tensor {0:?}")]
    MissingTensor(String),
    /// An E5S1 tensor has the wrong type or size.
    #[error("E5S1 file: tensor {name:?} is {msg}")]
    TensorShape {
        /// Tensor name.
        name: String,
        /// Found vs expected.
        msg: String,
    },
    /// A pack file is malformed at `offset`.
    #[error("{file}, byte {offset}: {msg}")]
    Pack {
        /// The pack file (`layers.bin` / `rows.bin`, with its folder when read from disk).
        file: String,
        /// Byte offset of the bad field.
        offset: usize,
        /// What is wrong.
        msg: String,
    },
    /// A `tokenizer.json` has a shape the compact tokenizer does not reproduce, or is not
    /// valid ([`tokenizer::compact_tokenizer_json`]).
    #[error("{file}: {msg}")]
    TokenizerJson {
        /// The `tokenizer.json` file.
        file: String,
        /// What differs from what is supported.
        msg: String,
    },
    /// A pack folder's `pack.json` is missing, malformed, or does not match its files.
    #[error("{file}: {msg}")]
    PackInfo {
        /// The `pack.json` (or the file it describes).
        file: String,
        /// What is wrong.
        msg: String,
    },
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A token id is outside the pack's table.
    #[error("token id {id} at position {pos} is outside the {rows}-row token table")]
    TokenId {
        /// The id.
        id: u32,
        /// Its position in the input.
        pos: usize,
        /// Rows in the table.
        rows: usize,
    },
    /// The input is empty or longer than the position table.
    #[error("{0} tokens: the model takes 1..={MAX_TOKENS}")]
    Length(usize),
    /// A query-model page of a paged bundle is not what the entry's `pages.query_model`
    /// says ([`paged`]): an unknown page, a size that disagrees, a page not added yet.
    #[error("{page}: {msg}")]
    Page {
        /// `p/<name>`.
        page: String,
        /// What is wrong.
        msg: String,
    },
    /// A page failed the format 2 checks (header, SHA-256, name), or the entry's root is
    /// malformed (`jikji_format`'s error names the page or `jikji.json`).
    #[error(transparent)]
    Format(#[from] jikji_format::FormatError),
}

impl ModelError {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Self {
        ModelError::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// The model's dimensions as read from a pack.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Config {
    /// Hidden size H (384).
    pub hidden: usize,
    /// Encoder layers (12).
    pub layers: usize,
    /// Attention heads (12; head width H / heads = 32).
    pub heads: usize,
    /// Feed-forward inner size (1536).
    pub ffn: usize,
    /// Token ids the row table holds (250,002).
    pub vocab: usize,
    /// Position-table rows (512).
    pub max_pos: usize,
    /// LayerNorm epsilon (1e-12).
    pub eps: f32,
}

struct Layer {
    q: (Q4Matrix, Vec<f32>),
    k: (Q4Matrix, Vec<f32>),
    v: (Q4Matrix, Vec<f32>),
    ao: (Q4Matrix, Vec<f32>),
    aln: (Vec<f32>, Vec<f32>),
    fi: (Q4Matrix, Vec<f32>),
    fo: (Q4Matrix, Vec<f32>),
    oln: (Vec<f32>, Vec<f32>),
}

/// Where the forward pass gets one token's embedding row: `hidden` weights as a Q4_0 row of
/// `hidden / 32 · 18` bytes. Natively the whole table is in memory ([`RowTable`]); in the
/// browser, rows come from fetched pages.
pub trait RowSource {
    /// The Q4_0 row of token `id`, or `None` when the source has no such row.
    fn row(&self, id: u32) -> Option<&[u8]>;
    /// Rows the table has (for error messages).
    fn rows(&self) -> usize;
}

/// The whole token-embedding table in memory: [`pack::ROWS_FILE`]'s rows.
#[derive(Debug, Clone)]
pub struct RowTable {
    row_bytes: usize,
    rows: usize,
    bytes: Vec<u8>,
}

impl RowTable {
    /// Bytes of one Q4_0 row.
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }

    /// Parses [`pack::ROWS_FILE`] bytes (`file` names it in errors), for a model of
    /// `hidden` width. Errors: [`ModelError::Pack`] with the byte offset.
    pub fn from_bytes(mut bytes: Vec<u8>, hidden: usize, file: &str) -> Result<Self, ModelError> {
        let bad = |offset: usize, msg: String| ModelError::Pack {
            file: file.to_string(),
            offset,
            msg,
        };
        if bytes.len() < pack::ROWS_HEADER {
            return Err(bad(
                0,
                format!("{} bytes, shorter than the header", bytes.len()),
            ));
        }
        if &bytes[..4] != pack::ROWS_MAGIC {
            return Err(bad(0, "bad magic, expected \"JKQR\"".into()));
        }
        let u = |i: usize| u32::from_le_bytes(bytes[4 + 4 * i..8 + 4 * i].try_into().unwrap());
        if u(0) != pack::PACK_VERSION {
            return Err(bad(
                4,
                format!("version {}, expected {}", u(0), pack::PACK_VERSION),
            ));
        }
        let (rows, h) = (u(1) as usize, u(2) as usize);
        if h != hidden {
            return Err(bad(
                12,
                format!("rows of {h} weights, the layers expect {hidden}"),
            ));
        }
        let row_bytes = Q4Matrix::row_bytes(hidden);
        let want = (rows as u64) * row_bytes as u64 + pack::ROWS_HEADER as u64;
        if bytes.len() as u64 != want {
            return Err(bad(
                bytes.len().min(want as usize),
                format!("{} bytes, expected {want} for {rows} rows", bytes.len()),
            ));
        }
        bytes.drain(..pack::ROWS_HEADER);
        Ok(RowTable {
            row_bytes,
            rows,
            bytes,
        })
    }
}

impl RowSource for RowTable {
    fn row(&self, id: u32) -> Option<&[u8]> {
        let i = id as usize;
        (i < self.rows).then(|| &self.bytes[i * self.row_bytes..(i + 1) * self.row_bytes])
    }
    fn rows(&self) -> usize {
        self.rows
    }
}

/// The encoder: everything of the model but the token-embedding rows.
pub struct QueryModel {
    cfg: Config,
    pos: Vec<f32>,
    emb_ln: (Vec<f32>, Vec<f32>),
    layers: Vec<Layer>,
}

impl std::fmt::Debug for QueryModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryModel")
            .field("cfg", &self.cfg)
            .finish()
    }
}

struct Reader<'a> {
    b: &'a [u8],
    p: usize,
    file: &'a str,
}

impl Reader<'_> {
    fn bad(&self, msg: String) -> ModelError {
        ModelError::Pack {
            file: self.file.to_string(),
            offset: self.p,
            msg,
        }
    }
    fn take(&mut self, n: usize, what: &str) -> Result<&[u8], ModelError> {
        if self.b.len() - self.p < n {
            return Err(self.bad(format!(
                "{what}: needs {n} bytes, {} left",
                self.b.len() - self.p
            )));
        }
        let s = &self.b[self.p..self.p + n];
        self.p += n;
        Ok(s)
    }
    fn f32s(&mut self, n: usize, what: &str) -> Result<Vec<f32>, ModelError> {
        Ok(self
            .take(n * 4, what)?
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect())
    }
    fn q4(&mut self, rows: usize, cols: usize, what: &str) -> Result<Q4Matrix, ModelError> {
        let bytes = self.take(rows * Q4Matrix::row_bytes(cols), what)?.to_vec();
        Ok(Q4Matrix { rows, cols, bytes })
    }
}

impl QueryModel {
    /// Parses [`pack::LAYERS_FILE`] bytes (`file` names it in errors). The dimensions are
    /// bounded (hidden ≤ 4096, ffn ≤ 16384, layers ≤ 64, max_pos = 512) before anything is
    /// allocated, and the file's length must match them exactly. Errors: [`ModelError::Pack`].
    pub fn from_bytes(bytes: &[u8], file: &str) -> Result<Self, ModelError> {
        let mut r = Reader {
            b: bytes,
            p: 0,
            file,
        };
        if r.take(4, "magic")? != pack::LAYERS_MAGIC {
            r.p = 0;
            return Err(r.bad("bad magic, expected \"JKQL\"".into()));
        }
        let mut u = |what: &str, lo: u32, hi: u32| -> Result<usize, ModelError> {
            let at = r.p;
            let v = u32::from_le_bytes(r.take(4, what)?.try_into().unwrap());
            if v < lo || v > hi {
                r.p = at;
                return Err(r.bad(format!("{what} = {v}, expected {lo}..={hi}")));
            }
            Ok(v as usize)
        };
        u("version", pack::PACK_VERSION, pack::PACK_VERSION)?;
        let hidden = u("hidden", 32, 4096)?;
        let layers = u("layers", 1, 64)?;
        let heads = u("heads", 1, 256)?;
        let ffn = u("ffn", 32, 16384)?;
        let vocab = u("vocab", 1, 1 << 22)?;
        let max_pos = u("max_pos", MAX_TOKENS as u32, MAX_TOKENS as u32)?;
        let eps = f32::from_le_bytes(r.take(4, "eps")?.try_into().unwrap());
        if !hidden.is_multiple_of(Q4_BLOCK)
            || !ffn.is_multiple_of(Q4_BLOCK)
            || !hidden.is_multiple_of(heads)
        {
            r.p = 8;
            return Err(r.bad(format!(
                "hidden {hidden}, ffn {ffn}, heads {heads}: hidden and ffn must be multiples of 32, hidden of heads"
            )));
        }
        let (h, ff) = (hidden, ffn);
        let qh = Q4Matrix::row_bytes(h);
        let qf = Q4Matrix::row_bytes(ff);
        let per_layer = 4 * (h * qh + 4 * h) + 4 * 4 * h + (ff * qh + 4 * ff) + (h * qf + 4 * h);
        let want = pack::LAYERS_HEADER + 4 * max_pos * h + 8 * h + layers * per_layer;
        if bytes.len() != want {
            r.p = bytes.len().min(want);
            return Err(r.bad(format!(
                "{} bytes, expected {want} for these dimensions",
                bytes.len()
            )));
        }
        let pos = r.f32s(max_pos * h, "position table")?;
        let emb_ln = (r.f32s(h, "emb.ln.w")?, r.f32s(h, "emb.ln.b")?);
        let mut ls = Vec::with_capacity(layers);
        for _ in 0..layers {
            let lin = |r: &mut Reader, n: usize, k: usize, what: &str| -> Result<_, ModelError> {
                Ok((r.q4(n, k, what)?, r.f32s(n, what)?))
            };
            let q = lin(&mut r, h, h, "Wq")?;
            let k = lin(&mut r, h, h, "Wk")?;
            let v = lin(&mut r, h, h, "Wv")?;
            let ao = lin(&mut r, h, h, "Wao")?;
            let aln = (r.f32s(h, "aln.w")?, r.f32s(h, "aln.b")?);
            let fi = lin(&mut r, ff, h, "Wfi")?;
            let fo = lin(&mut r, h, ff, "Wfo")?;
            let oln = (r.f32s(h, "oln.w")?, r.f32s(h, "oln.b")?);
            ls.push(Layer {
                q,
                k,
                v,
                ao,
                aln,
                fi,
                fo,
                oln,
            });
        }
        Ok(QueryModel {
            cfg: Config {
                hidden,
                layers,
                heads,
                ffn,
                vocab,
                max_pos,
                eps,
            },
            pos,
            emb_ln,
            layers: ls,
        })
    }

    /// Reads a pack folder: the encoder from [`pack::LAYERS_FILE`] and the whole row table
    /// from [`pack::ROWS_FILE`]. Errors name the file ([`ModelError::Io`], [`ModelError::Pack`]).
    pub fn from_pack_dir(dir: &Path) -> Result<(Self, RowTable), ModelError> {
        let lp = dir.join(pack::LAYERS_FILE);
        let rp = dir.join(pack::ROWS_FILE);
        let lb = std::fs::read(&lp).map_err(|e| ModelError::io(&lp, e))?;
        let model = QueryModel::from_bytes(&lb, &lp.display().to_string())?;
        let rb = std::fs::read(&rp).map_err(|e| ModelError::io(&rp, e))?;
        let rows = RowTable::from_bytes(rb, model.cfg.hidden, &rp.display().to_string())?;
        if rows.rows != model.cfg.vocab {
            return Err(ModelError::Pack {
                file: rp.display().to_string(),
                offset: 8,
                msg: format!(
                    "{} rows, {} says {}",
                    rows.rows,
                    lp.display(),
                    model.cfg.vocab
                ),
            });
        }
        Ok((model, rows))
    }

    /// The dimensions.
    pub fn config(&self) -> Config {
        self.cfg
    }

    /// Embeds one token sequence (`<s>` … `</s>`, 1..=[`MAX_TOKENS`] ids, no padding) into
    /// an L2-normalised vector of `hidden` (384) f32s: the model's `sentence_embedding`.
    /// Errors: [`ModelError::Length`], [`ModelError::TokenId`] (an id `rows` lacks).
    pub fn embed_ids(&self, ids: &[u32], rows: &dyn RowSource) -> Result<Vec<f32>, ModelError> {
        let c = self.cfg;
        let (s, h) = (ids.len(), c.hidden);
        if s == 0 || s > c.max_pos {
            return Err(ModelError::Length(s));
        }
        // Embeddings: word row + (position + type 0), then LayerNorm.
        let mut x = vec![0f32; s * h];
        for (p, &id) in ids.iter().enumerate() {
            let row = rows.row(id).ok_or(ModelError::TokenId {
                id,
                pos: p,
                rows: rows.rows(),
            })?;
            if row.len() != Q4Matrix::row_bytes(h) {
                return Err(ModelError::TokenId {
                    id,
                    pos: p,
                    rows: rows.rows(),
                });
            }
            let xr = &mut x[p * h..(p + 1) * h];
            kernels::dequant_row(row, xr);
            for (v, pp) in xr.iter_mut().zip(&self.pos[p * h..(p + 1) * h]) {
                *v += pp;
            }
        }
        layer_norm(&mut x, &self.emb_ln.0, &self.emb_ln.1, c.eps);

        let mut q = vec![0f32; s * h];
        let mut k = vec![0f32; s * h];
        let mut v = vec![0f32; s * h];
        let mut ctx = vec![0f32; s * h];
        let mut tmp = vec![0f32; s * h];
        let mut inner = vec![0f32; s * c.ffn];
        let mut scores = Vec::with_capacity(s);
        for l in &self.layers {
            matmul_q4(&x, &l.q.0, &l.q.1, &mut q);
            matmul_q4(&x, &l.k.0, &l.k.1, &mut k);
            matmul_q4(&x, &l.v.0, &l.v.1, &mut v);
            attention(&q, &k, &v, h, c.heads, &mut ctx, &mut scores);
            matmul_q4(&ctx, &l.ao.0, &l.ao.1, &mut tmp);
            for (a, b) in x.iter_mut().zip(&tmp) {
                *a += b;
            }
            layer_norm(&mut x, &l.aln.0, &l.aln.1, c.eps);
            matmul_q4(&x, &l.fi.0, &l.fi.1, &mut inner);
            gelu_erf(&mut inner);
            matmul_q4(&inner, &l.fo.0, &l.fo.1, &mut tmp);
            for (a, b) in x.iter_mut().zip(&tmp) {
                *a += b;
            }
            layer_norm(&mut x, &l.oln.0, &l.oln.1, c.eps);
        }
        Ok(mean_pool_l2(&x, h))
    }
}

/// A whole pack, opened: the encoder, the row table, the compact tokenizer and the
/// [`pack::PackInfo`] naming the ONNX model it stands for. What `jikji search/eval
/// --query-model DIR` embed queries with, natively, through the same code as the browser.
pub struct QueryPack {
    /// `pack.json`.
    pub info: pack::PackInfo,
    /// The encoder.
    pub model: QueryModel,
    /// All token rows.
    pub rows: RowTable,
    /// The tokenizer.
    pub tokenizer: tokenizer::Tokenizer,
}

impl std::fmt::Debug for QueryPack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryPack")
            .field("info", &self.info)
            .finish_non_exhaustive()
    }
}

impl QueryPack {
    /// Opens pack folder `dir`: reads [`pack::INFO_FILE`], then each file it lists, checking
    /// its length and SHA-256 against it, and parses them. Errors name the file:
    /// [`ModelError::PackInfo`] (missing, malformed or not matching `pack.json`; a folder
    /// written by an older `jikji model-pack` without a tokenizer), [`ModelError::Io`],
    /// [`ModelError::Pack`].
    pub fn open(dir: &Path) -> Result<Self, ModelError> {
        let ip = dir.join(pack::INFO_FILE);
        let bad = |file: &Path, msg: String| ModelError::PackInfo {
            file: file.display().to_string(),
            msg,
        };
        let info = Self::read_info(dir)?;
        let read = |name: &str| -> Result<(PathBuf, Vec<u8>), ModelError> {
            let p = dir.join(name);
            let want = info
                .files
                .get(name)
                .ok_or_else(|| bad(&ip, format!("lists no {name}")))?;
            let b = std::fs::read(&p).map_err(|e| ModelError::io(&p, e))?;
            if b.len() as u64 != want.bytes || pack::sha256_hex(&b) != want.sha256 {
                return Err(bad(
                    &p,
                    format!(
                        "{} bytes, sha256 {}; {} says {} bytes, sha256 {} (a file of another pack?)",
                        b.len(),
                        pack::sha256_hex(&b),
                        ip.display(),
                        want.bytes,
                        want.sha256
                    ),
                ));
            }
            Ok((p, b))
        };
        let (lp, lb) = read(pack::LAYERS_FILE)?;
        let model = QueryModel::from_bytes(&lb, &lp.display().to_string())?;
        drop(lb);
        let (rp, rb) = read(pack::ROWS_FILE)?;
        let rows = RowTable::from_bytes(rb, model.cfg.hidden, &rp.display().to_string())?;
        let (tp, tb) = read(tokenizer::TOKENIZER_FILE)?;
        let tokenizer = tokenizer::Tokenizer::from_bytes(&tb, &tp.display().to_string())?;
        if rows.rows != model.cfg.vocab || tokenizer.vocab_size() != model.cfg.vocab {
            return Err(bad(
                &ip,
                format!(
                    "{} rows and {} pieces for a {}-piece model",
                    rows.rows,
                    tokenizer.vocab_size(),
                    model.cfg.vocab
                ),
            ));
        }
        Ok(QueryPack {
            info,
            model,
            rows,
            tokenizer,
        })
    }

    /// Reads and checks pack folder `dir`'s [`pack::INFO_FILE`] only (format and version),
    /// not the files it lists. Errors: [`ModelError::PackInfo`] naming it.
    pub fn read_info(dir: &Path) -> Result<pack::PackInfo, ModelError> {
        let ip = dir.join(pack::INFO_FILE);
        let bad = |file: &Path, msg: String| ModelError::PackInfo {
            file: file.display().to_string(),
            msg,
        };
        let ib = std::fs::read(&ip).map_err(|e| {
            bad(
                &ip,
                format!("{e} (not a query-model pack folder? `jikji model-pack` writes one)"),
            )
        })?;
        let info: pack::PackInfo = serde_json::from_slice(&ib)
            .map_err(|e| bad(&ip, format!("not a pack description: {e}")))?;
        if info.format != pack::INFO_FORMAT || info.version != pack::PACK_VERSION {
            return Err(bad(
                &ip,
                format!(
                    "format {:?} version {}, expected {:?} version {}",
                    info.format,
                    info.version,
                    pack::INFO_FORMAT,
                    pack::PACK_VERSION
                ),
            ));
        }
        Ok(info)
    }

    /// Embeds a search query (without the `query: ` prefix, which is added): tokenize,
    /// truncate to [`MAX_TOKENS`], forward pass; an L2-normalised vector of 384 f32s.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>, ModelError> {
        let ids = self.tokenizer.query_ids(query);
        self.model.embed_ids(&ids, &self.rows)
    }
}

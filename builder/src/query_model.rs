//! `--query-model DIR` of `jikji search` and `jikji eval`: queries embedded by the
//! query-model pack (`jikji-query-model`: the compact tokenizer and the lean Q4_0 forward
//! pass, the code the browser runs) instead of tract, after checking that the pack stands
//! for the model the bundle's vectors were made with, and — when the bundle carries the
//! pack as pages (`pages.query_model`) — that it is the same pack (its hash).
//!
//! A paged bundle folder with the query model's pages is read as the browser reads it:
//! layers, tokenizer and row map from the bundle's pages, then per query only the row pages
//! its token ids need ([`jikji_query_model::paged::PagedQueryModel`], the code the wasm
//! module runs). Otherwise (a bundle without those pages, or one built in memory by `jikji
//! eval`) the pack folder's files are read whole.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use jikji_engine::Engine;
use jikji_query_model::paged::PagedQueryModel;
use jikji_query_model::{pack, QueryPack};

use crate::error::{BuildError, Result};

enum Source {
    Whole(Box<QueryPack>),
    Paged {
        bundle: PathBuf,
        model: Box<Mutex<PagedQueryModel>>,
    },
}

/// An opened pack, checked against a bundle.
pub struct PackEmbedder {
    dir: PathBuf,
    source: Source,
}

impl std::fmt::Debug for PackEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PackEmbedder")
            .field("dir", &self.dir)
            .field("paged", &self.is_paged())
            .finish()
    }
}

impl PackEmbedder {
    /// Opens pack folder `dir` and checks its `model_sha256` against the model `engine`'s
    /// bundle names, and its hash ([`pack::pack_hash`]) against the bundle's
    /// `pages.query_model.pack_sha256` when the bundle carries the pack. `bundle_dir`: the
    /// bundle's folder, whose query-model pages are then read page by page (the browser's
    /// path); `None` (or no such pages): [`QueryPack::open`] reads the pack's files whole.
    /// Errors: [`BuildError::QueryModel`] (names the pack file or page),
    /// [`BuildError::QueryModelMismatch`] (another model than the bundle's),
    /// [`BuildError::QueryModelPackMismatch`] (another pack than the bundle's).
    pub fn open(dir: &Path, engine: &Engine, bundle_dir: Option<&Path>) -> Result<Self> {
        let info = QueryPack::read_info(dir)?;
        let manifest = engine.bundle().manifest();
        if let Some(m) = &manifest.model {
            if m.sha256 != info.model_sha256 {
                return Err(BuildError::QueryModelMismatch {
                    dir: dir.to_path_buf(),
                    pack: info.model_sha256.clone(),
                    bundle_id: m.id.clone(),
                    bundle: m.sha256.clone(),
                });
            }
        }
        let root = engine.bundle().pages().and_then(|p| p.query_model.clone());
        if let Some(r) = &root {
            let hash = pack::pack_hash(&info);
            if hash != r.pack_sha256 {
                return Err(BuildError::QueryModelPackMismatch {
                    dir: dir.to_path_buf(),
                    pack: hash,
                    bundle: r.pack_sha256.clone(),
                });
            }
        }
        let source = match (root, bundle_dir) {
            (Some(r), Some(b)) if b.join(jikji_format::paged::ENTRY_FILE).is_file() => {
                let sha = manifest.model.as_ref().map(|m| m.sha256.as_str());
                let mut m = PagedQueryModel::new(r, sha)?;
                let base = m.missing_base();
                m.load_from_dir(b, &base)?;
                Source::Paged {
                    bundle: b.to_path_buf(),
                    model: Box::new(Mutex::new(m)),
                }
            }
            _ => Source::Whole(Box::new(QueryPack::open(dir)?)),
        };
        Ok(PackEmbedder {
            dir: dir.to_path_buf(),
            source,
        })
    }

    /// The pack folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True when queries are embedded from the bundle's query-model pages.
    pub fn is_paged(&self) -> bool {
        matches!(self.source, Source::Paged { .. })
    }

    /// The query's vector (384 f32s, unit length), `query: ` prefix added.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        Ok(match &self.source {
            Source::Whole(p) => p.embed_query(query)?,
            Source::Paged { bundle, model } => model
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .embed_query_from_dir(bundle, query)?,
        })
    }
}

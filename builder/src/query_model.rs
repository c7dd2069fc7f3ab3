//! `--query-model DIR` of `jikji search` and `jikji eval`: queries embedded by the
//! query-model pack (`jikji-query-model`: the compact tokenizer and the lean Q4_0 forward
//! pass, the code the browser runs) instead of tract, after checking that the pack stands
//! for the model the bundle's vectors were made with.

use std::path::{Path, PathBuf};

use jikji_engine::Engine;
use jikji_query_model::QueryPack;

use crate::error::{BuildError, Result};

/// An opened pack, checked against a bundle.
#[derive(Debug)]
pub struct PackEmbedder {
    dir: PathBuf,
    pack: QueryPack,
}

impl PackEmbedder {
    /// Opens pack folder `dir` ([`QueryPack::open`]: `pack.json` and each file's length and
    /// SHA-256 checked) and checks its `model_sha256` against the model `engine`'s bundle
    /// names. Errors: [`BuildError::QueryModel`] (names the pack file),
    /// [`BuildError::QueryModelMismatch`] (another model than the bundle's).
    pub fn open(dir: &Path, engine: &Engine) -> Result<Self> {
        let pack = QueryPack::open(dir)?;
        if let Some(m) = &engine.bundle().manifest().model {
            if m.sha256 != pack.info.model_sha256 {
                return Err(BuildError::QueryModelMismatch {
                    dir: dir.to_path_buf(),
                    pack: pack.info.model_sha256.clone(),
                    bundle_id: m.id.clone(),
                    bundle: m.sha256.clone(),
                });
            }
        }
        Ok(PackEmbedder {
            dir: dir.to_path_buf(),
            pack,
        })
    }

    /// The pack folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The query's vector (384 f32s, unit length), `query: ` prefix added.
    pub fn embed_query(&self, query: &str) -> Result<Vec<f32>> {
        Ok(self.pack.embed_query(query)?)
    }
}

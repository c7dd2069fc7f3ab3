//! Build-time score calibration (fitting); see `jikji_engine::calibrate`.

use jikji_embed::{Embedder, Prefix};
use jikji_format::analyzer::{self, Analyzer, AnalyzerOptions};
use jikji_format::{Bm25Params, Counts, Manifest};

use crate::error::{BuildError, Result};

/// Fits the bundle's score calibration (see `jikji_engine::calibrate`) on an in-memory
/// copy of the bundle's files: pseudo-queries from its chunks, embedded with the `query: `
/// prefix when an embedder is given. `jikji build` and `jikji update` both call it on
/// the bundle they are about to write, so an update's calibration equals a full build's.
/// `None` when fewer than [`MIN_CALIBRATION_CHUNKS`] chunks yield a pseudo-query (a few
/// short files): a fit on so little would be noise, so such a bundle reports raw scores
/// (`calibrated: false`) rather than made-up probabilities.
pub fn calibrate(
    terms_fst: &[u8],
    postings: &[u8],
    chunks_bin: &[u8],
    vectors_bin: Option<Vec<u8>>,
    embedder: Option<&Embedder>,
    threads: usize,
    analyzer: AnalyzerOptions,
    bm25: Bm25Params,
) -> Result<Option<jikji_format::Calibration>> {
    use jikji_engine::calibrate as cal;
    let bundle = jikji_format::Bundle {
        manifest: Manifest {
            format_version: jikji_format::FORMAT_VERSION,
            analyzer_version: analyzer::ANALYZER_VERSION,
            analyzer,
            generator: String::new(),
            built_at: 0,
            chunk_size: 0,
            overlap: 0,
            bm25,
            model: None,
            counts: Counts::default(),
            files: Default::default(),
            calibration: None,
            sources: Vec::new(),
            chunking: None,
            hanja: true,
            allow_ai_draft: false,
        },
        lexical: jikji_format::postings::LexicalIndex::open(terms_fst.to_vec(), postings.to_vec())?,
        vectors: vectors_bin
            .map(|b| jikji_format::vectors::Vectors::open(&b))
            .transpose()?,
        chunks: jikji_format::chunks::ChunkStore::open(chunks_bin.to_vec())?,
        analyzer: Analyzer::new(analyzer::ANALYZER_VERSION, analyzer)?,
        hanja: None,
    };
    let queries = cal::pseudo_queries(&bundle, cal::PSEUDO_QUERIES)?;
    let mut docs: Vec<u32> = queries.iter().map(|q| q.doc).collect();
    docs.sort_unstable();
    docs.dedup();
    if docs.len() < MIN_CALIBRATION_CHUNKS {
        return Ok(None);
    }
    let qvecs = match (embedder, &bundle.vectors) {
        (Some(e), Some(_)) => {
            let texts: Vec<&str> = queries.iter().map(|q| q.text.as_str()).collect();
            Some(
                e.embed_many(&texts, Prefix::Query, threads, &|_| {})
                    .map_err(|source| BuildError::Embedding {
                        what: "calibration queries",
                        source,
                    })?
                    .vectors,
            )
        }
        _ => None,
    };
    Ok(Some(cal::calibrate(
        &bundle,
        &queries,
        qvecs.as_deref(),
        cal::DEFAULT_DENSE_WEIGHT,
    )?))
}

/// Fewest distinct chunks that must yield pseudo-queries for a bundle to be calibrated
/// (see [`calibrate`]).
pub const MIN_CALIBRATION_CHUNKS: usize = 10;

//! Parent-child bundles: child chunks are indexed and ranked; a result is the child's
//! parent section (stored in the chunk store after the indexed chunks, never indexed).

use jikji_format::{Bundle, ChunkRecord, Result};

/// How many more children than results are ranked before collapsing them to parents
/// (each parent holds a few children; see `ChunkingInfo::parent_size`).
pub const PARENT_FETCH: usize = 8;

/// How many chunks to rank for `k` results: `k` × [`PARENT_FETCH`] if the bundle stores
/// parent sections (built with `--strategy parent-child`), else `k`.
pub fn rank_depth(bundle: &Bundle, k: usize) -> usize {
    if bundle.manifest().parents() > 0 {
        k.saturating_mul(PARENT_FETCH)
    } else {
        k
    }
}

/// Replaces each ranked child by its parent (the record index in `parent_doc`; `doc`
/// gives access to an entry's doc id), keeping the first (best) rank and score of every
/// parent and dropping later children of a parent already listed; at most `k` results.
/// Chunks without a parent, and every chunk of other bundles, stay as they are.
///
/// Errors only if the chunk store is corrupt.
pub fn collapse<T>(
    bundle: &Bundle,
    mut ranked: Vec<T>,
    k: usize,
    doc: impl Fn(&mut T) -> &mut u32,
) -> Result<Vec<T>> {
    if bundle.manifest().parents() == 0 {
        ranked.truncate(k);
        return Ok(ranked);
    }
    // The targets kept so far, one bit per chunk number (grown as needed: at most one bit per
    // record of the bundle, less than the query's accumulators; no hash set in the wasm).
    let mut seen: Vec<u64> = Vec::new();
    let mut out = Vec::with_capacity(k.min(ranked.len()));
    for mut r in ranked {
        if out.len() == k {
            break;
        }
        let d = doc(&mut r);
        let parent = match bundle.columns()? {
            Some(c) => c.parent.get(*d as usize).copied().flatten(),
            None => bundle.chunks().get(*d)?.parent_doc,
        };
        let target = parent.unwrap_or(*d);
        let (word, bit) = ((target / 64) as usize, 1u64 << (target % 64));
        if seen.len() <= word {
            seen.resize(word + 1, 0);
        }
        if seen[word] & bit == 0 {
            seen[word] |= bit;
            *d = target;
            out.push(r);
        }
    }
    Ok(out)
}

/// The record of result `doc`; a parent record gets `parent_id` = its own id, so results
/// say which parent section they are.
pub fn record(bundle: &Bundle, doc: u32) -> Result<ChunkRecord> {
    let mut rec = bundle.chunks().get(doc)?;
    if doc as usize >= bundle.manifest().counts.chunks && rec.parent_id.is_none() {
        rec.parent_id = Some(rec.id.clone());
    }
    Ok(rec)
}

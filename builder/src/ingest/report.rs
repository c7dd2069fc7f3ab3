//! The closing summary of a build.

use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::chunker::report::Dist;
use crate::corpus::{Finding, Severity};

/// What a build did, for the closing summary.
#[derive(Debug, Clone, Serialize)]
pub struct BuildReport {
    /// Source files indexed.
    pub files: usize,
    /// Corpus check findings (errors left their file out of the bundle).
    pub findings: Vec<Finding>,
    /// Copies made in the quarantine folder.
    pub quarantined: Vec<PathBuf>,
    /// Corpus size in bytes (UTF-8) of the files indexed.
    pub corpus_bytes: u64,
    /// Chunking strategy used.
    pub strategy: String,
    /// Chunks indexed (children for `parent-child`).
    pub chunks: usize,
    /// Parent sections stored (not indexed; `parent-child` only).
    pub parents: usize,
    /// Indexed chunk lengths in chars.
    pub chunk_chars: Dist,
    /// Indexed chunk lengths in model tokens (`passage: ` prefix and specials included),
    /// if embedded.
    pub chunk_tokens: Option<Dist>,
    /// Distinct terms.
    pub terms: usize,
    /// Model tokens over all chunks (with the `passage: ` prefix and specials), if embedded.
    pub tokens: usize,
    /// Chunks longer than the model's maximum tokens (truncated when embedded).
    pub truncated: usize,
    /// Chunks whose vectors came from the cache.
    pub cached: usize,
    /// Chunks embedded in this build.
    pub embedded: usize,
    /// Chunk vectors imported with `--vectors` (then nothing is embedded or cached).
    pub imported: usize,
    /// Seconds per phase: read, chunk+index, embed, write.
    pub seconds: Vec<(String, f64)>,
    /// Bytes per bundle file.
    pub file_bytes: Vec<(String, u64)>,
    /// Every archived file: which newer version archived it and why.
    pub versions: Vec<crate::versions::VersionNote>,
}

/// Prints the closing summary.
pub fn print_report(r: &BuildReport, out: &Path) {
    eprintln!("built {}", out.display());
    eprintln!(
        "  files {}  chunks {}  terms {}  model tokens {}  truncated {}  embedded {} (cached {}){}",
        r.files,
        r.chunks,
        r.terms,
        r.tokens,
        r.truncated,
        r.embedded,
        r.cached,
        if r.imported > 0 {
            format!("  imported {}", r.imported)
        } else {
            String::new()
        }
    );
    let parents = if r.parents > 0 {
        format!(" (+{} parent sections, returned as results)", r.parents)
    } else {
        String::new()
    };
    eprintln!(
        "  chunking {}{parents}: chars median {} p95 {} max {}",
        r.strategy, r.chunk_chars.median, r.chunk_chars.p95, r.chunk_chars.max
    );
    match &r.chunk_tokens {
        Some(t) => eprintln!(
            "  model tokens per chunk: median {} p95 {} max {} (limit {}); truncated {}",
            t.median,
            t.p95,
            t.max,
            jikji_embed::MAX_TOKENS,
            r.truncated
        ),
        None => eprintln!("  model tokens per chunk: not counted (no model: chars only)"),
    }
    for f in &r.findings {
        eprintln!("  {f}");
    }
    let errors = r
        .findings
        .iter()
        .filter(|f| f.severity == Severity::Error)
        .count();
    if errors > 0 {
        eprintln!("  {errors} file error(s): those files were left out (see `jikji check`)");
    }
    for q in &r.quarantined {
        eprintln!("  quarantined a copy: {}", q.display());
    }
    for v in &r.versions {
        eprintln!("  archived: {v}");
    }
    let secs: Vec<String> = r
        .seconds
        .iter()
        .map(|(p, s)| format!("{p} {s:.2}s"))
        .collect();
    eprintln!("  time: {}", secs.join(", "));
    let bytes: Vec<String> = r
        .file_bytes
        .iter()
        .map(|(f, b)| format!("{f} {b}"))
        .collect();
    eprintln!("  bytes: {}", bytes.join(", "));
}

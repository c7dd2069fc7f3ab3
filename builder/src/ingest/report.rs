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
    /// Sorted postings runs written to the temporary folder because the postings passed
    /// the index budget ([`super::IngestOptions::index_budget`]); 0 when they fit.
    pub postings_runs: usize,
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
    /// Wall seconds per phase: read, chunk, index, embed, conflicts, calibrate, write, and
    /// the write's parts (`write.pages`, `write.query-model`, `write.finish`).
    pub seconds: Vec<(String, f64)>,
    /// CPU seconds (user + system, all threads: `getrusage(RUSAGE_SELF)`) per phase from
    /// chunk to write, as `seconds` names them.
    pub cpu_seconds: Vec<(String, f64)>,
    /// Bytes per bundle file.
    pub file_bytes: Vec<(String, u64)>,
    /// Every archived file: which newer version archived it and why.
    pub versions: Vec<crate::versions::VersionNote>,
    /// Contradiction candidates recorded on their chunks ([`super::annotate_conflicts`]);
    /// `None` when not looked for (a bundle without vectors: `--no-embed`).
    pub conflicts: Option<usize>,
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
    if r.postings_runs > 0 {
        eprintln!(
            "  postings: {} sorted runs spilled past --index-memory and merged",
            r.postings_runs
        );
    }
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
    eprintln!("  {}", conflicts_line(r.conflicts));
    let secs: Vec<String> = r
        .seconds
        .iter()
        .map(|(p, s)| format!("{p} {s:.2}s"))
        .collect();
    eprintln!("  time: {}", secs.join(", "));
    let cpu: Vec<String> = r
        .cpu_seconds
        .iter()
        .map(|(p, s)| format!("{p} {s:.2}s"))
        .collect();
    eprintln!("  CPU: {}", cpu.join(", "));
    let bytes: Vec<String> = r
        .file_bytes
        .iter()
        .map(|(f, b)| format!("{f} {b}"))
        .collect();
    eprintln!("  bytes: {}", bytes.join(", "));
}

/// The build and update summaries' line about recorded conflicts.
pub fn conflicts_line(found: Option<usize>) -> String {
    match found {
        Some(0) => "conflicts: none found".to_string(),
        Some(n) => format!(
            "conflicts: {n} contradiction candidate(s) recorded on their chunks (search hits say so; `jikji conflicts` lists them)"
        ),
        None => "conflicts: not looked for (no vectors: built with --no-embed; the detector needs dense similarity)".to_string(),
    }
}

/// User + system CPU seconds of this process so far, all threads (`getrusage(2)`,
/// `RUSAGE_SELF`); 0 where unavailable.
pub fn cpu_seconds() -> f64 {
    #[cfg(unix)]
    {
        // SAFETY: getrusage only writes the struct it is given.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
            return 0.0;
        }
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(u.ru_utime) + tv(u.ru_stime)
    }
    #[cfg(not(unix))]
    {
        0.0
    }
}

/// CPU seconds per phase ([`cpu_seconds`] differences), as a build goes.
#[derive(Debug, Clone, Default)]
pub struct CpuLaps {
    /// `(phase, CPU seconds)` in order.
    pub laps: Vec<(String, f64)>,
    at: f64,
}

impl CpuLaps {
    /// Starts counting now.
    pub fn start() -> Self {
        CpuLaps {
            laps: Vec::new(),
            at: cpu_seconds(),
        }
    }

    /// Records the CPU seconds since the last lap (or the start) as phase `name`.
    pub fn lap(&mut self, name: &str) {
        let now = cpu_seconds();
        self.laps.push((name.to_string(), now - self.at));
        self.at = now;
    }

    /// Records `seconds` measured apart (phases that alternate, such as a streamed
    /// build's chunking and indexing) as phase `name`; the next lap counts from now.
    pub fn measured(&mut self, name: &str, seconds: f64) {
        self.laps.push((name.to_string(), seconds));
        self.at = cpu_seconds();
    }
}

//! `jikji verify`: every page of a bundle read and checked, as a CI job would before it
//! publishes a bundle to a CDN (a search reads and checks only the pages its queries need,
//! so a damaged page nobody has asked for yet goes unnoticed until a reader's query does).
//!
//! A format 2 bundle: the entry (`jikji.json`) is parsed and checked as the engine checks
//! it, then every page it names — the index's, the dense index's and the query model's —
//! is read from `p/` and decoded as the browser decodes it ([`page::decode_stored`]:
//! header, stored length, deflate stream bounded by the header's raw length, the raw body
//! against the page's name); all damaged or missing pages are listed, not only the first.
//! When every page passes, the bundle is also opened whole ([`Bundle::open_dir`]: the parts
//! rebuilt from the pages and checked against each other and the entry's counts; memory of
//! the order of the bundle's index). Files in `p/` that the entry does not name are listed
//! (left by an interrupted copy, or another bundle's): not an error. A format 1 bundle
//! (`manifest.json`): every file's size and SHA-256 against the manifest.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use jikji_format::paged::page;
use jikji_format::Bundle;

use crate::error::{BuildError, Result};

/// What [`verify`] found.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct VerifyReport {
    /// The bundle folder.
    pub bundle: PathBuf,
    /// 1 or 2.
    pub format: u32,
    /// Pages the entry names (format 2), or files the manifest lists (format 1).
    pub pages: usize,
    /// Their bytes as stored (headers included), of those that could be read.
    pub stored_bytes: u64,
    /// One line per damaged or missing page, naming it (`p/<name>: …`); empty when all
    /// passed.
    pub errors: Vec<String>,
    /// Files in `p/` the entry does not name.
    pub unreferenced: Vec<String>,
    /// The whole-bundle check ([`Bundle::open_dir`]) ran and passed (it runs only when
    /// every page passed).
    pub parts_checked: bool,
}

impl VerifyReport {
    /// True when nothing is damaged or missing.
    pub fn ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Reads and checks every page (or file) of the bundle at `dir` (see the module doc).
/// Errors: `dir` unreadable, or an entry / manifest that does not parse or check (the
/// bundle cannot be listed at all; [`BuildError::Format`] naming the file). Damaged pages
/// are not errors of this function: they are in [`VerifyReport::errors`].
pub fn verify(dir: &Path) -> Result<VerifyReport> {
    let mut r = VerifyReport {
        bundle: dir.to_path_buf(),
        ..VerifyReport::default()
    };
    if !dir.join(jikji_format::paged::ENTRY_FILE).exists() {
        r.format = 1;
        let b = Bundle::open_dir(dir)?;
        r.pages = b.manifest().files.len();
        r.stored_bytes = b.manifest().files.values().map(|f| f.bytes).sum();
        r.parts_checked = true;
        return Ok(r);
    }
    r.format = 2;
    let b = Bundle::open_paged_dir(dir)?;
    let root = b.pages().ok_or_else(|| BuildError::Bundle {
        path: dir.to_path_buf(),
        message: "the entry names no pages".into(),
    })?;
    let mut names = jikji_format::paged::all_pages(root);
    if let Some(q) = &root.query_model {
        names.extend(q.all_pages());
    }
    let names: BTreeSet<String> = names.into_iter().collect();
    r.pages = names.len();
    let pdir = dir.join(jikji_format::paged::PAGES_DIR);
    for name in &names {
        let path = pdir.join(name);
        match std::fs::read(&path) {
            Ok(bytes) => {
                r.stored_bytes += bytes.len() as u64;
                if let Err(e) = page::decode_stored(name, &bytes) {
                    // The error names the page (`p/<name>: data corruption at byte …`).
                    r.errors.push(e.to_string());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                r.errors.push(format!("p/{name}: missing"));
            }
            Err(e) => r.errors.push(format!("p/{name}: {e}")),
        }
    }
    if let Ok(entries) = std::fs::read_dir(&pdir) {
        let mut extra: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| !names.contains(n))
            .collect();
        extra.sort();
        r.unreferenced = extra;
    }
    if r.errors.is_empty() {
        match Bundle::open_dir(dir) {
            Ok(_) => r.parts_checked = true,
            Err(e) => r.errors.push(e.to_string()),
        }
    }
    Ok(r)
}

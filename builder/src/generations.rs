//! Older generations of a bundle kept by `jikji update`: `BUNDLE.prev.1` (the bundle the
//! last update replaced), `BUNDLE.prev.2` (the one before), … up to `BUNDLE.prev.N`.
//!
//! The bundle writer ([`jikji_format::BundleWriter`]) leaves the replaced bundle in
//! `BUNDLE.prev`; [`rotate`] then renames `BUNDLE.prev.(N-1)` → `BUNDLE.prev.N`, …,
//! `BUNDLE.prev.1` → `BUNDLE.prev.2`, `BUNDLE.prev` → `BUNDLE.prev.1`, removing the old
//! `BUNDLE.prev.N` first. Each step is one `rename` (atomic), so a crash part way leaves
//! every generation complete under one of these names (at worst one number is skipped);
//! the next rotation continues from there.
//!
//! Nothing that is not a bundle is ever removed or renamed over: [`check`] refuses, before
//! anything is written, when one of these names holds a file, or a folder that is neither
//! empty nor a bundle (no `manifest.json` or `jikji.json`).

use std::path::{Path, PathBuf};

use jikji_format::manifest::MANIFEST_FILE;
use jikji_format::paged::ENTRY_FILE;

use crate::error::{BuildError, Result};

/// Generations kept when none is given.
pub const DEFAULT_KEEP: usize = 2;

/// `BUNDLE.prev` (what the writer leaves) for `k == 0`, else `BUNDLE.prev.k`.
pub fn generation_path(bundle: &Path, k: usize) -> PathBuf {
    if k == 0 {
        PathBuf::from(format!("{}.prev", bundle.display()))
    } else {
        PathBuf::from(format!("{}.prev.{k}", bundle.display()))
    }
}

/// True if `dir` is absent, an empty folder, or a bundle: the rule the bundle writer
/// itself follows ([`jikji_format::bundle::replaceable`]).
fn ours(dir: &Path) -> bool {
    jikji_format::bundle::replaceable(dir)
}

/// Errors with [`BuildError::Bundle`] naming the folder if `BUNDLE.prev` or any of
/// `BUNDLE.prev.1..=keep` exists and is not a bundle (see the module doc).
pub fn check(bundle: &Path, keep: usize) -> Result<()> {
    for k in 0..=keep {
        let p = generation_path(bundle, k);
        if !ours(&p) {
            return Err(BuildError::Bundle {
                path: bundle.to_path_buf(),
                message: format!(
                    "{} exists and is not a jikji bundle (no {MANIFEST_FILE} or {ENTRY_FILE}); it would be replaced as an older generation, so nothing was written — move it away, or give --keep a smaller number",
                    p.display()
                ),
            });
        }
    }
    Ok(())
}

/// Moves `BUNDLE.prev`, if present, to `BUNDLE.prev.1`, shifting older generations up by
/// one and dropping the one beyond `keep` (see the module doc). `keep` 0 removes
/// `BUNDLE.prev`. Call [`check`] first; this re-checks each folder before removing it.
/// Errors: I/O, or a folder that is not a bundle where one is about to be removed.
pub fn rotate(bundle: &Path, keep: usize) -> Result<()> {
    let prev = generation_path(bundle, 0);
    if std::fs::symlink_metadata(&prev).is_err() {
        return Ok(());
    }
    let remove = |p: &Path| -> Result<()> {
        if std::fs::symlink_metadata(p).is_err() {
            return Ok(());
        }
        check_one(bundle, p)?;
        std::fs::remove_dir_all(p).map_err(|e| BuildError::io("removing", p, e))
    };
    if keep == 0 {
        return remove(&prev);
    }
    remove(&generation_path(bundle, keep))?;
    for k in (1..keep).rev() {
        let from = generation_path(bundle, k);
        if std::fs::symlink_metadata(&from).is_ok() {
            let to = generation_path(bundle, k + 1);
            std::fs::rename(&from, &to).map_err(|e| BuildError::io("renaming", &from, e))?;
        }
    }
    let to = generation_path(bundle, 1);
    std::fs::rename(&prev, &to).map_err(|e| BuildError::io("renaming", &prev, e))
}

fn check_one(bundle: &Path, p: &Path) -> Result<()> {
    if ours(p) {
        Ok(())
    } else {
        Err(BuildError::Bundle {
            path: bundle.to_path_buf(),
            message: format!(
                "{} is not a jikji bundle (no {MANIFEST_FILE} or {ENTRY_FILE}); it was left as it is",
                p.display()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_bundle(p: &Path, tag: &str) {
        std::fs::create_dir_all(p).unwrap();
        std::fs::write(p.join(MANIFEST_FILE), tag).unwrap();
    }

    fn tag(p: &Path) -> String {
        std::fs::read_to_string(p.join(MANIFEST_FILE)).unwrap()
    }

    #[test]
    fn generations_shift_and_the_oldest_beyond_keep_goes() {
        let d = tempfile::tempdir().unwrap();
        let b = d.path().join("bundle");
        for round in 1..=4 {
            fake_bundle(&generation_path(&b, 0), &format!("gen{round}"));
            check(&b, 2).unwrap();
            rotate(&b, 2).unwrap();
        }
        assert!(!generation_path(&b, 0).exists());
        assert_eq!(tag(&generation_path(&b, 1)), "gen4");
        assert_eq!(tag(&generation_path(&b, 2)), "gen3");
        assert!(!generation_path(&b, 3).exists());
    }

    #[test]
    fn a_folder_that_is_not_a_bundle_is_never_replaced() {
        let d = tempfile::tempdir().unwrap();
        let b = d.path().join("bundle");
        let notes = generation_path(&b, 2);
        std::fs::create_dir_all(&notes).unwrap();
        std::fs::write(notes.join("mine.txt"), "mine").unwrap();
        let e = check(&b, 2).unwrap_err().to_string();
        assert!(
            e.contains("bundle.prev.2") && e.contains("not a jikji bundle"),
            "{e}"
        );
        fake_bundle(&generation_path(&b, 0), "new");
        fake_bundle(&generation_path(&b, 1), "old");
        assert!(rotate(&b, 2).is_err());
        assert_eq!(
            std::fs::read_to_string(notes.join("mine.txt")).unwrap(),
            "mine"
        );
    }
}

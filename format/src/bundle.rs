//! A bundle: a folder of files described by `manifest.json`.
//!
//! [`BundleWriter`] writes into a temporary sibling folder and renames it into place,
//! so an existing bundle is never left half-written; the bundle it replaces is kept as
//! `<out>.prev` (the last good bundle). [`Bundle`] reads and verifies one, either from a
//! folder ([`Bundle::open_dir`]) or from bytes fetched by a browser ([`Bundle::from_files`]).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::analyzer::Analyzer;
use crate::chunks::{ChunkStore, CHUNKS_FILE};
use crate::error::{FormatError, Result};
use crate::hanja::{HanjaMap, HANJA_FILE};
use crate::manifest::{FileEntry, Manifest, MANIFEST_FILE};
use crate::postings::{LexicalIndex, POSTINGS_FILE, TERMS_FILE};
use crate::vectors::{Vectors, VECTORS_FILE};

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Writes a bundle atomically (temp folder + rename).
pub struct BundleWriter {
    out: PathBuf,
    tmp: PathBuf,
    files: BTreeMap<String, FileEntry>,
}

impl BundleWriter {
    /// Starts a bundle that will end up at `out`. Creates `<out>.tmp-<pid>` beside it.
    pub fn create(out: &Path) -> Result<Self> {
        let name = out.file_name().ok_or_else(|| {
            FormatError::InvalidInput(format!("{}: not a folder name", out.display()))
        })?;
        let parent = out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent).map_err(|e| FormatError::io(parent, e))?;
        let tmp = parent.join(format!(
            "{}.tmp-{}",
            name.to_string_lossy(),
            std::process::id()
        ));
        if tmp.exists() {
            std::fs::remove_dir_all(&tmp).map_err(|e| FormatError::io(&tmp, e))?;
        }
        std::fs::create_dir(&tmp).map_err(|e| FormatError::io(&tmp, e))?;
        Ok(BundleWriter {
            out: out.to_path_buf(),
            tmp,
            files: BTreeMap::new(),
        })
    }

    /// Writes one file into the bundle and records its size and checksum.
    pub fn add_file(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        let path = self.tmp.join(name);
        std::fs::write(&path, bytes).map_err(|e| FormatError::io(&path, e))?;
        self.files.insert(
            name.to_string(),
            FileEntry {
                sha256: sha256_hex(bytes),
                bytes: bytes.len() as u64,
            },
        );
        Ok(())
    }

    /// Files written so far, with sizes and checksums.
    pub fn files(&self) -> &BTreeMap<String, FileEntry> {
        &self.files
    }

    /// Writes `manifest.json` (with `files` filled in), syncs, and moves the folder into
    /// place; the bundle it replaces, if any, becomes `<out>.prev` (replacing an older
    /// `.prev`). Returns the manifest written.
    ///
    /// Crash safety: on Linux an existing bundle is swapped with the new one in one
    /// `renameat2(RENAME_EXCHANGE)` call, so `out` always holds a complete bundle, the old
    /// one until the swap and the new one after; a crash after the swap leaves the old
    /// bundle in `<out>.tmp-<pid>` instead of `<out>.prev`. Where the exchange is not
    /// available (other systems, or a file system that refuses it), `out` is renamed to
    /// `<out>.prev` and the new folder to `out`: a crash between those two renames leaves no
    /// `out`, and the last good bundle is `<out>.prev`.
    ///
    /// Setting the environment variable `JIKJI_CRASH_AT` to `before-swap`, `after-swap`
    /// or `between-renames` aborts the process at that point (crash tests use it).
    pub fn finish(self, mut manifest: Manifest) -> Result<Manifest> {
        manifest.files = self.files.clone();
        let json = serde_json::to_vec_pretty(&manifest).map_err(|source| FormatError::Json {
            file: MANIFEST_FILE.into(),
            source,
        })?;
        let mpath = self.tmp.join(MANIFEST_FILE);
        std::fs::write(&mpath, &json).map_err(|e| FormatError::io(&mpath, e))?;
        for name in self.files.keys().map(String::as_str).chain([MANIFEST_FILE]) {
            let p = self.tmp.join(name);
            std::fs::File::open(&p)
                .and_then(|f| f.sync_all())
                .map_err(|e| FormatError::io(&p, e))?;
        }
        sync_dir(&self.tmp);
        crash_point("before-swap");
        let parent = self
            .out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let prev = PathBuf::from(format!("{}.prev", self.out.display()));
        if self.out.exists() {
            if exchange(&self.tmp, &self.out).is_ok() {
                // `out` is the new bundle; `tmp` now holds the old one.
                sync_dir(&parent);
                crash_point("after-swap");
                if prev.exists() {
                    std::fs::remove_dir_all(&prev).map_err(|e| FormatError::io(&prev, e))?;
                }
                std::fs::rename(&self.tmp, &prev).map_err(|e| FormatError::io(&prev, e))?;
                sync_dir(&parent);
                return Ok(manifest);
            }
            if prev.exists() {
                std::fs::remove_dir_all(&prev).map_err(|e| FormatError::io(&prev, e))?;
            }
            std::fs::rename(&self.out, &prev).map_err(|e| FormatError::io(&self.out, e))?;
            crash_point("between-renames");
        }
        std::fs::rename(&self.tmp, &self.out).map_err(|e| FormatError::io(&self.out, e))?;
        sync_dir(&parent);
        Ok(manifest)
    }
}

/// Aborts the process if `JIKJI_CRASH_AT` names this point (crash-safety tests).
fn crash_point(name: &str) {
    if std::env::var("JIKJI_CRASH_AT").is_ok_and(|v| v == name) {
        std::process::abort();
    }
}

/// Best-effort fsync of a folder, so renames in it survive a power loss.
fn sync_dir(dir: &Path) {
    if let Ok(f) = std::fs::File::open(dir) {
        let _ = f.sync_all();
    }
}

/// Atomically swaps two paths (Linux `renameat2(RENAME_EXCHANGE)`, since kernel 3.15).
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let ca = CString::new(a.as_os_str().as_bytes())?;
    let cb = CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: both are valid NUL-terminated paths; the syscall only reads them.
    let r = unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> std::io::Result<()> {
    Err(std::io::Error::new(
        std::io::ErrorKind::Unsupported,
        "atomic exchange is only implemented on Linux",
    ))
}

impl Drop for BundleWriter {
    fn drop(&mut self) {
        // If `finish` was not reached, do not leave a half-written temp folder behind.
        if self.tmp.exists() {
            let _ = std::fs::remove_dir_all(&self.tmp);
        }
    }
}

/// A verified, parsed bundle.
pub struct Bundle {
    /// The manifest.
    pub manifest: Manifest,
    /// Term dictionary + postings.
    pub lexical: LexicalIndex,
    /// Dense vectors, if the bundle has them.
    pub vectors: Option<Vectors>,
    /// Chunk records.
    pub chunks: ChunkStore,
    /// The analyzer of the manifest's version and options (for queries).
    pub analyzer: Analyzer,
    /// The optional Hanja reading table (`hanja.fst`), for Hangul ↔ Hanja query expansion.
    pub hanja: Option<HanjaMap>,
}

impl Bundle {
    /// Reads every file the manifest lists from `dir` and verifies it (see [`Bundle::from_files`]).
    pub fn open_dir(dir: &Path) -> Result<Self> {
        let mpath = dir.join(MANIFEST_FILE);
        if !mpath.exists() {
            return Err(FormatError::MissingFile {
                file: mpath.display().to_string(),
            });
        }
        let mbytes = std::fs::read(&mpath).map_err(|e| FormatError::io(&mpath, e))?;
        let manifest = Manifest::parse(&mbytes)?;
        let mut files = HashMap::new();
        files.insert(MANIFEST_FILE.to_string(), mbytes);
        for name in manifest.files.keys() {
            let p = dir.join(name);
            match std::fs::read(&p) {
                Ok(b) => {
                    files.insert(name.clone(), b);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(FormatError::MissingFile {
                        file: p.display().to_string(),
                    })
                }
                Err(e) => return Err(FormatError::io(&p, e)),
            }
        }
        Self::from_files(files)
    }

    /// Builds a bundle from its files' bytes keyed by file name (`manifest.json` included).
    ///
    /// Checks, in order: manifest format and analyzer version; every listed file present,
    /// with the manifest's size and SHA-256; then each file's own header. Errors name the
    /// file: [`FormatError::MissingFile`], [`FormatError::Size`], [`FormatError::Checksum`],
    /// [`FormatError::FormatVersion`], [`FormatError::DataCorruption`].
    pub fn from_files(mut files: HashMap<String, Vec<u8>>) -> Result<Self> {
        let mbytes = files
            .remove(MANIFEST_FILE)
            .ok_or_else(|| FormatError::MissingFile {
                file: MANIFEST_FILE.into(),
            })?;
        let manifest = Manifest::parse(&mbytes)?;
        for (name, entry) in &manifest.files {
            let bytes = files
                .get(name)
                .ok_or_else(|| FormatError::MissingFile { file: name.clone() })?;
            if bytes.len() as u64 != entry.bytes {
                return Err(FormatError::Size {
                    file: name.clone(),
                    expected: entry.bytes,
                    actual: bytes.len() as u64,
                });
            }
            let actual = sha256_hex(bytes);
            if actual != entry.sha256 {
                return Err(FormatError::Checksum {
                    file: name.clone(),
                    expected: entry.sha256.clone(),
                    actual,
                });
            }
        }
        let mut take = |name: &str| {
            files
                .remove(name)
                .ok_or_else(|| FormatError::MissingFile { file: name.into() })
        };
        let lexical = LexicalIndex::open(take(TERMS_FILE)?, take(POSTINGS_FILE)?)?;
        let chunks = ChunkStore::open(take(CHUNKS_FILE)?)?;
        let vectors = if manifest.files.contains_key(VECTORS_FILE) {
            Some(Vectors::open(&take(VECTORS_FILE)?)?)
        } else {
            None
        };
        // Parent records (parent-child bundles) follow the indexed chunks.
        let n = chunks
            .len()
            .checked_sub(manifest.parents())
            .ok_or_else(|| {
                FormatError::corrupt(
                    MANIFEST_FILE,
                    0,
                    format!(
                        "{} parent records but chunks.bin holds {} records",
                        manifest.parents(),
                        chunks.len()
                    ),
                )
            })?;
        if lexical.num_docs() != n
            || vectors.as_ref().is_some_and(|v| v.len() != n)
            || manifest.counts.chunks != n
        {
            return Err(FormatError::corrupt(
                MANIFEST_FILE,
                0,
                format!(
                    "files disagree on the number of chunks: manifest {}, chunks.bin {n}, postings.bin {}, vectors.bin {:?}",
                    manifest.counts.chunks,
                    lexical.num_docs(),
                    vectors.as_ref().map(Vectors::len)
                ),
            ));
        }
        if let (Some(v), Some(m)) = (&vectors, &manifest.model) {
            if v.dim() != m.dim {
                return Err(FormatError::corrupt(
                    VECTORS_FILE,
                    8,
                    format!("dimension {} but model says {}", v.dim(), m.dim),
                ));
            }
        }
        let hanja = if manifest.files.contains_key(HANJA_FILE) {
            Some(HanjaMap::open(files.remove(HANJA_FILE).ok_or_else(
                || FormatError::MissingFile {
                    file: HANJA_FILE.into(),
                },
            )?)?)
        } else {
            None
        };
        let analyzer = manifest.analyzer()?;
        Ok(Bundle {
            manifest,
            lexical,
            vectors,
            chunks,
            analyzer,
            hanja,
        })
    }
}

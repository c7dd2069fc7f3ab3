//! A bundle: a folder of files described by `manifest.json`.
//!
//! [`BundleWriter`] writes into a temporary sibling folder and renames it into place,
//! so an existing bundle is never left half-written; the bundle it replaces is kept as
//! `<out>.prev` (the last good bundle). [`Bundle`] reads and verifies one, either from a
//! folder ([`Bundle::open_dir`]) or from bytes fetched by a browser ([`Bundle::from_files`]);
//! [`Bundle::from_parts`] assembles one from readers already opened in memory, and
//! [`TestBundle`] builds a small one from chunk records for tests.

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
    ///
    /// Never replaces what is not a bundle: errors with [`FormatError::InvalidInput`] when
    /// `out` exists and is not an empty folder or a bundle (a folder with `manifest.json`),
    /// or when `<out>.prev` (which [`finish`](Self::finish) replaces) exists and is not a
    /// bundle — so a mistyped `--out` (the corpus folder, a folder of notes) loses nothing.
    pub fn create(out: &Path) -> Result<Self> {
        let name = out.file_name().ok_or_else(|| {
            FormatError::InvalidInput(format!("{}: not a folder name", out.display()))
        })?;
        let prev = PathBuf::from(format!("{}.prev", out.display()));
        for (dir, role) in [
            (out, "the bundle folder"),
            (prev.as_path(), "the previous bundle's folder"),
        ] {
            if !replaceable(dir) {
                return Err(FormatError::InvalidInput(format!(
                    "{}: exists and is not a jikji bundle (no {MANIFEST_FILE}); it would be replaced as {role}, so nothing was written — choose another output folder, or move it away yourself",
                    dir.display()
                )));
            }
        }
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

/// True if a bundle write may replace `dir`: it does not exist, is an empty folder, or is
/// a bundle (a folder holding `manifest.json`).
fn replaceable(dir: &Path) -> bool {
    match std::fs::symlink_metadata(dir) {
        Err(_) => true,
        Ok(m) if m.is_dir() => {
            dir.join(MANIFEST_FILE).is_file()
                || std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_none())
        }
        Ok(_) => false,
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

/// A verified, parsed bundle: the manifest and each file's reader, checked against each
/// other (see [`Bundle::from_files`]). Read-only; the parts are reached through accessors
/// so a `Bundle` always holds parts that passed those checks.
pub struct Bundle {
    manifest: Manifest,
    lexical: LexicalIndex,
    vectors: Option<Vectors>,
    chunks: ChunkStore,
    analyzer: Analyzer,
    hanja: Option<HanjaMap>,
}

impl Bundle {
    /// The manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Term dictionary + postings (`terms.fst`, `postings.bin`).
    pub fn lexical(&self) -> &LexicalIndex {
        &self.lexical
    }

    /// Dense vectors (`vectors.bin`), if the bundle has them.
    pub fn vectors(&self) -> Option<&Vectors> {
        self.vectors.as_ref()
    }

    /// Chunk records (`chunks.bin`): the indexed chunks, then any parent records.
    pub fn chunks(&self) -> &ChunkStore {
        &self.chunks
    }

    /// The analyzer of the manifest's version and options (for queries).
    pub fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }

    /// The optional Hanja reading table (`hanja.fst`), for Hangul ↔ Hanja query expansion.
    pub fn hanja(&self) -> Option<&HanjaMap> {
        self.hanja.as_ref()
    }

    /// A bundle from parts already opened by their readers ([`LexicalIndex::open`],
    /// [`ChunkStore::open`], [`Vectors::open`], [`HanjaMap::open`]), for a bundle that
    /// exists only in memory: the builder fits the score calibration on the files it is
    /// about to write, before their checksums are in a manifest.
    ///
    /// Why parts and not a file map through [`Bundle::from_files`]: the checks of
    /// `from_files` that concern bytes (sizes and SHA-256 against `manifest.files`) would
    /// only compare bytes with checksums made from those same bytes a moment earlier; what
    /// can really be wrong with parts is that they disagree with each other, and that is
    /// checked here exactly as `from_files` checks it (the same code): the number of
    /// indexed chunks in the manifest (`counts.chunks`), the postings and the vectors must
    /// agree, `chunks.bin` must hold those plus the manifest's parent records, the vectors'
    /// dimension must be the manifest model's, and the manifest's analyzer version must be
    /// one this build supports. `manifest.files` is not compared with the parts (no file
    /// was read).
    ///
    /// Errors: [`FormatError::DataCorruption`] naming `manifest.json` or `vectors.bin` when
    /// the parts disagree, [`FormatError::AnalyzerVersion`].
    pub fn from_parts(
        manifest: Manifest,
        lexical: LexicalIndex,
        vectors: Option<Vectors>,
        chunks: ChunkStore,
        hanja: Option<HanjaMap>,
    ) -> Result<Self> {
        check_parts(&manifest, &lexical, vectors.as_ref(), &chunks)?;
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
        let hanja = if manifest.files.contains_key(HANJA_FILE) {
            Some(HanjaMap::open(files.remove(HANJA_FILE).ok_or_else(
                || FormatError::MissingFile {
                    file: HANJA_FILE.into(),
                },
            )?)?)
        } else {
            None
        };
        Bundle::from_parts(manifest, lexical, vectors, chunks, hanja)
    }
}

/// The cross-file checks of a bundle (see [`Bundle::from_parts`]), in the order
/// [`Bundle::from_files`] has always made them.
fn check_parts(
    manifest: &Manifest,
    lexical: &LexicalIndex,
    vectors: Option<&Vectors>,
    chunks: &ChunkStore,
) -> Result<()> {
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
        || vectors.is_some_and(|v| v.len() != n)
        || manifest.counts.chunks != n
    {
        return Err(FormatError::corrupt(
                MANIFEST_FILE,
                0,
                format!(
                    "files disagree on the number of chunks: manifest {}, chunks.bin {n}, postings.bin {}, vectors.bin {:?}",
                    manifest.counts.chunks,
                    lexical.num_docs(),
                    vectors.map(Vectors::len)
                ),
            ));
    }
    if let (Some(v), Some(m)) = (vectors, &manifest.model) {
        if v.dim() != m.dim {
            return Err(FormatError::corrupt(
                VECTORS_FILE,
                8,
                format!("dimension {} but model says {}", v.dim(), m.dim),
            ));
        }
    }
    Ok(())
}

/// Builds a small bundle in memory from chunk records, for tests and examples that need a
/// real bundle without a corpus or the builder: each record is indexed under
/// [`ChunkRecord::indexed_text`](crate::ChunkRecord::indexed_text) with the analyzer of the
/// options given (default [`AnalyzerOptions`](crate::analyzer::AnalyzerOptions)), the
/// files are written by the format's own writers and the bundle is read back through
/// [`Bundle::from_files`], checksums included, so a test bundle is held to every check a
/// bundle on disk is.
///
/// Doc ids are the records' positions. No model is recorded (`manifest.model` is `None`),
/// so vectors of any dimension are accepted. [`TestBundle::sources_table`] adds a manifest
/// sources table as `jikji build` writes one.
#[derive(Debug, Clone, Default)]
pub struct TestBundle {
    records: Vec<crate::ChunkRecord>,
    vectors: Option<(usize, Vec<Vec<f32>>)>,
    calibration: Option<crate::Calibration>,
    analyzer: crate::analyzer::AnalyzerOptions,
    bm25: crate::Bm25Params,
    sources_table: bool,
}

impl TestBundle {
    /// A bundle of `records` (doc id = position), without vectors or calibration.
    pub fn new(records: Vec<crate::ChunkRecord>) -> Self {
        TestBundle {
            records,
            ..TestBundle::default()
        }
    }

    /// Adds `vectors.bin`: one `dim`-dimensional vector per record, in record order.
    pub fn vectors(mut self, dim: usize, vectors: Vec<Vec<f32>>) -> Self {
        self.vectors = Some((dim, vectors));
        self
    }

    /// Sets the manifest's score calibration.
    pub fn calibration(mut self, calibration: Option<crate::Calibration>) -> Self {
        self.calibration = calibration;
        self
    }

    /// Sets the analyzer options the terms are made with (and queries analyzed with).
    pub fn analyzer(mut self, options: crate::analyzer::AnalyzerOptions) -> Self {
        self.analyzer = options;
        self
    }

    /// Sets the BM25 parameters recorded in the manifest.
    pub fn bm25(mut self, params: crate::Bm25Params) -> Self {
        self.bm25 = params;
        self
    }

    /// Adds a sources table: one entry per run of consecutive records with the same
    /// `source`, with its chunk count and the first record's `doc_id` and `archived`. No
    /// source file exists, so `sha256` and `bytes` are those of the run's texts joined.
    pub fn sources_table(mut self) -> Self {
        self.sources_table = true;
        self
    }

    /// The bundle's files, `manifest.json` included, as [`Bundle::from_files`] takes them.
    ///
    /// Errors: the writers' errors, e.g. [`FormatError::InvalidInput`] for a vector whose
    /// length is not the dimension given.
    pub fn files(&self) -> Result<HashMap<String, Vec<u8>>> {
        use crate::analyzer::ANALYZER_VERSION;
        let analyzer = Analyzer::new(ANALYZER_VERSION, self.analyzer)?;
        let mut index = crate::postings::LexicalIndexWriter::new();
        for r in &self.records {
            index.add_doc(&analyzer.analyze(&r.indexed_text()));
        }
        let terms = index.num_terms();
        let (terms_fst, postings) = index.finish()?;
        let mut files = HashMap::new();
        files.insert(TERMS_FILE.to_string(), terms_fst);
        files.insert(POSTINGS_FILE.to_string(), postings);
        files.insert(
            CHUNKS_FILE.to_string(),
            crate::chunks::write_chunks(&self.records)?,
        );
        if let Some((dim, v)) = &self.vectors {
            files.insert(
                VECTORS_FILE.to_string(),
                crate::vectors::write_vectors(*dim, v)?,
            );
        }
        let mut sources: Vec<crate::SourceEntry> = Vec::new();
        let mut runs: Vec<String> = Vec::new();
        for r in &self.records {
            match sources.last_mut() {
                Some(s) if s.path == r.source => {
                    s.chunks += 1;
                    runs.last_mut()
                        .expect("one run per entry")
                        .push_str(&r.text);
                }
                _ => {
                    sources.push(crate::SourceEntry {
                        path: r.source.clone(),
                        sha256: String::new(),
                        bytes: 0,
                        modified: None,
                        chunks: 1,
                        doc_id: r.doc_id.clone(),
                        version: r.version.clone(),
                        archived: r.archived,
                    });
                    runs.push(r.text.clone());
                }
            }
        }
        for (s, text) in sources.iter_mut().zip(&runs) {
            s.sha256 = sha256_hex(text.as_bytes());
            s.bytes = text.len() as u64;
        }
        let mut distinct: Vec<&str> = sources.iter().map(|s| s.path.as_str()).collect();
        distinct.sort_unstable();
        distinct.dedup();
        let manifest = Manifest {
            format_version: crate::FORMAT_VERSION,
            analyzer_version: ANALYZER_VERSION,
            analyzer: self.analyzer,
            generator: "jikji-format TestBundle".into(),
            built_at: 0,
            chunk_size: 512,
            overlap: 64,
            bm25: self.bm25,
            model: None,
            counts: crate::Counts {
                files: distinct.len(),
                chunks: self.records.len(),
                terms,
                vectors: self.vectors.as_ref().map_or(0, |_| self.records.len()),
            },
            files: files
                .iter()
                .map(|(name, bytes)| {
                    let entry = FileEntry {
                        sha256: sha256_hex(bytes),
                        bytes: bytes.len() as u64,
                    };
                    (name.clone(), entry)
                })
                .collect(),
            calibration: self.calibration.clone(),
            sources: if self.sources_table {
                sources
            } else {
                Vec::new()
            },
            chunking: None,
            hanja: true,
            allow_ai_draft: false,
        };
        let json = serde_json::to_vec_pretty(&manifest).map_err(|source| FormatError::Json {
            file: MANIFEST_FILE.into(),
            source,
        })?;
        files.insert(MANIFEST_FILE.to_string(), json);
        Ok(files)
    }

    /// The bundle, read back from [`TestBundle::files`] by [`Bundle::from_files`].
    ///
    /// Errors: as [`TestBundle::files`] and [`Bundle::from_files`].
    pub fn build(&self) -> Result<Bundle> {
        Bundle::from_files(self.files()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ChunkRecord;

    fn records(n: usize) -> Vec<ChunkRecord> {
        (0..n)
            .map(|i| ChunkRecord {
                id: format!("c{i}"),
                source: "a.md".into(),
                text: format!("chunk number {i}"),
                ..ChunkRecord::default()
            })
            .collect()
    }

    #[test]
    fn test_bundle_reads_back_through_the_checked_reader() {
        let t = TestBundle::new(records(3)).vectors(2, vec![vec![1.0, 0.0]; 3]);
        let b = t.build().unwrap();
        assert_eq!(b.manifest().counts.chunks, 3);
        assert_eq!(b.vectors().map(Vectors::len), Some(3));
        assert_eq!(b.chunks().get(2).unwrap().text, "chunk number 2");
        assert_eq!(b.lexical().num_docs(), 3);
        // The manifest's checksums are real: a changed byte is caught.
        let mut files = t.files().unwrap();
        files.get_mut(CHUNKS_FILE).unwrap()[20] ^= 1;
        assert!(matches!(
            Bundle::from_files(files),
            Err(FormatError::Checksum { .. })
        ));
    }

    #[test]
    fn from_parts_checks_that_the_parts_agree() {
        let b = TestBundle::new(records(3)).build().unwrap();
        let files = TestBundle::new(records(3)).files().unwrap();
        let open = |m: Manifest, chunks: usize| {
            let lexical =
                LexicalIndex::open(files[TERMS_FILE].clone(), files[POSTINGS_FILE].clone())
                    .unwrap();
            let store =
                ChunkStore::open(crate::chunks::write_chunks(&records(chunks)).unwrap()).unwrap();
            Bundle::from_parts(m, lexical, None, store, None)
        };
        assert!(open(b.manifest().clone(), 3).is_ok());
        // chunks.bin with a record more than the postings index.
        assert!(matches!(
            open(b.manifest().clone(), 4),
            Err(FormatError::DataCorruption { .. })
        ));
        let mut m = b.manifest().clone();
        m.counts.chunks = 2;
        assert!(matches!(
            open(m, 3),
            Err(FormatError::DataCorruption { .. })
        ));
    }
}

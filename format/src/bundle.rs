//! A bundle: a folder of files described by `manifest.json`.
//!
//! [`BundleWriter`] writes into a temporary sibling folder and renames it into place,
//! so an existing bundle is never left half-written; the bundle it replaces is kept as
//! `<out>.prev` (the last good bundle). [`Bundle`] reads and verifies one, either from a
//! folder ([`Bundle::open_dir`]) or from bytes fetched by a browser ([`Bundle::from_files`]);
//! [`Bundle::from_parts`] assembles one from readers already opened in memory, and
//! [`TestBundle`] builds a small one from chunk records for tests.

use std::collections::BTreeMap;
#[cfg(feature = "v1")]
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};

use crate::analyzer::Analyzer;
#[cfg(feature = "v1")]
use crate::chunks::{ChunkStore, CHUNKS_FILE};
use crate::error::{FormatError, Result};
#[cfg(feature = "v1")]
use crate::hanja::{HanjaMap, HANJA_FILE};
use crate::manifest::{FileEntry, Manifest, MANIFEST_FILE, PAGED_FORMAT_VERSION};
use crate::paged::{
    check_root, Chunks, Columns, Hanja, Lexicon, PageCache, PagedChunks, PagesRoot, ENTRY_FILE,
    PAGES_DIR,
};
#[cfg(feature = "v1")]
use crate::postings::{LexicalIndex, POSTINGS_FILE, TERMS_FILE};
use crate::vectors::Vectors;
#[cfg(feature = "v1")]
use crate::vectors::VECTORS_FILE;

/// Lowercase hex SHA-256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// Writes a bundle atomically (temp folder + rename).
pub struct BundleWriter {
    out: PathBuf,
    tmp: PathBuf,
    files: BTreeMap<String, FileEntry>,
    /// Its pages (`p/`), as written or linked so far.
    store: PageStore,
}

/// Pages stored into a bundle's `p/` folder, written ([`PageStore::add_page`]) or
/// hard-linked from the previous bundle ([`PageStore::link_page`]), with what each file was
/// then ([`PAGE_RECORDS_FILE`]). A [`BundleWriter`] has one; [`BundleWriter::page_store`]
/// gives another for the same folder, so that a second thread stores a disjoint set of
/// pages (the query model's) while the writer stores the others, and
/// [`BundleWriter::absorb`] takes its records back (listed after the writer's own, as if
/// stored after them).
#[derive(Debug)]
pub struct PageStore {
    dir: PathBuf,
    dir_made: bool,
    pages: Vec<String>,
    /// What each page file was when written or linked ([`PAGE_RECORDS_FILE`]).
    records: Vec<(String, PageRecord)>,
    /// Pages hard-linked from the previous bundle (already on disk before this write).
    linked: usize,
}

impl PageStore {
    fn new(dir: PathBuf) -> Self {
        PageStore {
            dir,
            dir_made: false,
            pages: Vec::new(),
            records: Vec::new(),
            linked: 0,
        }
    }

    fn make_dir(&mut self) -> Result<()> {
        if !self.dir_made {
            // `create_dir_all`: another store of the same folder may have made it.
            std::fs::create_dir_all(&self.dir).map_err(|e| FormatError::io(&self.dir, e))?;
            self.dir_made = true;
        }
        Ok(())
    }

    /// Writes page `name` as `p/<name>`, a new file (a page already there, which may be a
    /// hard link to the previous bundle's file, is unlinked first, never written through).
    /// Errors: I/O, naming the file.
    pub fn add_page(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        self.make_dir()?;
        let path = self.dir.join(name);
        let io = |e| FormatError::io(&path, e);
        let create = || {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&path)
        };
        let mut f = match create() {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::fs::remove_file(&path).map_err(io)?;
                create().map_err(io)?
            }
            r => r.map_err(io)?,
        };
        std::io::Write::write_all(&mut f, bytes).map_err(io)?;
        if let Some(r) = f.metadata().ok().as_ref().and_then(PageRecord::of) {
            self.records.push((name.to_string(), r));
        }
        self.pages.push(name.to_string());
        Ok(())
    }

    /// Stores page `name` as a hard link to the previous bundle's page file `from`, whose
    /// record `rec` was just proven ([`PreviousPages::proven`]). Returns false when the file
    /// system refuses the link (another device, no hard links): nothing stored then.
    /// Errors: the folder cannot be made.
    pub fn link_page(&mut self, name: &str, from: &Path, rec: PageRecord) -> Result<bool> {
        self.make_dir()?;
        if std::fs::hard_link(from, self.dir.join(name)).is_err() {
            return Ok(false);
        }
        // Linking changes neither the inode, the size nor the modification time.
        self.records.push((name.to_string(), rec));
        self.linked += 1;
        Ok(true)
    }
}

/// The builder's own record of the page files it wrote, beside the entry in a paged bundle
/// folder: one line `<name> <dev> <ino> <bytes> <mtime_ns>` per page, after a first line
/// `jikji-pages 1`. Not part of the format (readers ignore it, `jikji serve` serves it like
/// any file); `jikji update` uses it to prove a page of the bundle it replaces is the file
/// its writer wrote, byte for byte, without reading it ([`PreviousPages`]).
pub const PAGE_RECORDS_FILE: &str = ".jikji-pages";
const PAGE_RECORDS_HEADER: &str = "jikji-pages 1";

/// A page file as its writer left it: device, inode, length in bytes and modification time
/// (ns since the epoch), from `stat(2)`. A file with the same four values has not been
/// written since (the quick check of git's index and rsync): its bytes are still the
/// writer's. Pages are immutable, so a later write to one is tampering; a copied bundle has
/// other inodes and proves nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageRecord {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// `st_size`, bytes.
    pub bytes: u64,
    /// `st_mtime` in ns.
    pub mtime_ns: i128,
}

impl PageRecord {
    /// The record of a file's metadata (`None` where the system gives no inode).
    pub fn of(m: &std::fs::Metadata) -> Option<Self> {
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            Some(PageRecord {
                dev: m.dev(),
                ino: m.ino(),
                bytes: m.size(),
                mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            })
        }
        #[cfg(not(unix))]
        {
            let _ = m;
            None
        }
    }
}

/// The page files of the bundle a write replaces, as far as its writer's records
/// ([`PAGE_RECORDS_FILE`]) prove them: [`PreviousPages::proven`] says whether a page may be
/// taken over without reading it. Built by `jikji update` from the bundle it updates.
#[derive(Debug, Default)]
pub struct PreviousPages {
    dir: PathBuf,
    records: std::collections::HashMap<String, PageRecord>,
    root: Option<PagesRoot>,
}

impl PreviousPages {
    /// The records of the paged bundle in folder `dir` with page roots `root`. A missing or
    /// malformed records file proves nothing (every page is then written again); never an
    /// error.
    pub fn open(dir: &Path, root: Option<PagesRoot>) -> Self {
        let mut records = std::collections::HashMap::new();
        if let Ok(text) = std::fs::read_to_string(dir.join(PAGE_RECORDS_FILE)) {
            let mut lines = text.lines();
            if lines.next() == Some(PAGE_RECORDS_HEADER) {
                for line in lines {
                    let f: Vec<&str> = line.split(' ').collect();
                    let rec = match f.as_slice() {
                        [name, dev, ino, bytes, mtime] if valid_page_name(name) => (|| {
                            Some(PageRecord {
                                dev: dev.parse().ok()?,
                                ino: ino.parse().ok()?,
                                bytes: bytes.parse().ok()?,
                                mtime_ns: mtime.parse().ok()?,
                            })
                        })(
                        ),
                        _ => None,
                    };
                    match rec {
                        Some(r) => {
                            records.insert(f[0].to_string(), r);
                        }
                        None => {
                            records.clear();
                            break;
                        }
                    }
                }
            }
        }
        PreviousPages {
            dir: dir.to_path_buf(),
            records,
            root,
        }
    }

    /// The previous bundle's page roots.
    pub fn root(&self) -> Option<&PagesRoot> {
        self.root.as_ref()
    }

    /// Pages its records list.
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// True when its records list no page.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The path and record of page `name` when the records list it and the file there now
    /// has the recorded device, inode, size and modification time (`lstat`, no symlink
    /// followed); `None` otherwise.
    pub fn proven(&self, name: &str) -> Option<(PathBuf, PageRecord)> {
        let want = self.records.get(name)?;
        let path = self.dir.join(PAGES_DIR).join(name);
        let m = std::fs::symlink_metadata(&path).ok()?;
        (m.is_file() && PageRecord::of(&m).as_ref() == Some(want)).then_some((path, *want))
    }

    /// The raw body of page `name` of the previous bundle, read and verified
    /// ([`crate::paged::page::decode_stored`]); `None` if absent or corrupt.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn body(&self, name: &str) -> Option<Vec<u8>> {
        if !valid_page_name(name) {
            return None;
        }
        let bytes = std::fs::read(self.dir.join(PAGES_DIR).join(name)).ok()?;
        crate::paged::page::decode_stored(name, &bytes).ok()
    }
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
                    "{}: exists and is not a jikji bundle (no {MANIFEST_FILE} or {ENTRY_FILE}); it would be replaced as {role}, so nothing was written — choose another output folder, or move it away yourself",
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
            store: PageStore::new(tmp.join(PAGES_DIR)),
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

    /// Writes one page of a paged bundle as `p/<name>` (not listed in `files`: a page is
    /// checked by its own header and name): [`PageStore::add_page`]. Errors: I/O.
    pub fn add_page(&mut self, name: &str, bytes: &[u8]) -> Result<()> {
        self.store.add_page(name, bytes)
    }

    /// Stores page `name` as a hard link to the previous bundle's page file `from`, whose
    /// record `rec` was just proven ([`PreviousPages::proven`]): the caller knows its bytes
    /// are those of page `name`. Nothing is read or written but a directory entry, and the
    /// two generations share the file (pages are immutable). Returns false when the file
    /// system refuses the link (another device, no hard links): nothing stored then.
    pub fn link_page(&mut self, name: &str, from: &Path, rec: PageRecord) -> Result<bool> {
        self.store.link_page(name, from, rec)
    }

    /// Its own [`PageStore`] (what [`Self::add_page`] and [`Self::link_page`] store into).
    pub fn pages_mut(&mut self) -> &mut PageStore {
        &mut self.store
    }

    /// Another [`PageStore`] of this bundle's `p/` folder, for pages stored on another
    /// thread; give it back with [`Self::absorb`] before [`Self::finish`] (pages of a store
    /// never absorbed are in the folder but not in [`PAGE_RECORDS_FILE`], so an update
    /// proves nothing about them). The two must store different page names.
    pub fn page_store(&self) -> PageStore {
        PageStore::new(self.tmp.join(PAGES_DIR))
    }

    /// Takes back a store from [`Self::page_store`]: its pages count as this writer's,
    /// recorded after the ones stored so far.
    pub fn absorb(&mut self, other: PageStore) {
        self.store.dir_made |= other.dir_made;
        self.store.pages.extend(other.pages);
        self.store.records.extend(other.records);
        self.store.linked += other.linked;
    }

    /// Pages stored by [`Self::link_page`] so far.
    pub fn linked(&self) -> usize {
        self.store.linked
    }

    /// Pages written by [`Self::add_page`] so far.
    pub fn written(&self) -> usize {
        self.store.pages.len()
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
    ///
    /// A manifest with `pages` (format 2) is written as `jikji.json`, compact, with no
    /// `files` (pages check themselves); its pages were written by [`Self::add_page`].
    pub fn finish(self, mut manifest: Manifest) -> Result<Manifest> {
        let paged = manifest.pages.is_some();
        let entry_name = if paged { ENTRY_FILE } else { MANIFEST_FILE };
        let json = if paged {
            manifest.files = BTreeMap::new();
            serde_json::to_vec(&manifest)
        } else {
            manifest.files = self.files.clone();
            serde_json::to_vec_pretty(&manifest)
        }
        .map_err(|source| FormatError::Json {
            file: entry_name.into(),
            source,
        })?;
        let mpath = self.tmp.join(entry_name);
        std::fs::write(&mpath, &json).map_err(|e| FormatError::io(&mpath, e))?;
        if paged {
            let mut text = String::with_capacity(64 * (self.store.records.len() + 1));
            text.push_str(PAGE_RECORDS_HEADER);
            text.push('\n');
            for (name, r) in &self.store.records {
                use std::fmt::Write;
                let _ = writeln!(
                    text,
                    "{name} {} {} {} {}",
                    r.dev, r.ino, r.bytes, r.mtime_ns
                );
            }
            let rpath = self.tmp.join(PAGE_RECORDS_FILE);
            std::fs::write(&rpath, text).map_err(|e| FormatError::io(&rpath, e))?;
        }
        // Thousands of pages: one syncfs of the file system instead of an fsync per page
        // (an fsync each took 20 s for the books' 3,000 pages here).
        let synced = paged && sync_fs(&self.tmp);
        let pages = self
            .store
            .pages
            .iter()
            .filter(|_| !synced)
            .map(|n| format!("{PAGES_DIR}/{n}"));
        for name in self
            .files
            .keys()
            .cloned()
            .chain(pages)
            .chain([entry_name.to_string()])
        {
            let p = self.tmp.join(name);
            std::fs::File::open(&p)
                .and_then(|f| f.sync_all())
                .map_err(|e| FormatError::io(&p, e))?;
        }
        if paged {
            sync_dir(&self.tmp.join(PAGES_DIR));
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
/// a bundle (a folder holding `manifest.json` or `jikji.json`). Never follows a symlink.
pub fn replaceable(dir: &Path) -> bool {
    match std::fs::symlink_metadata(dir) {
        Err(_) => true,
        Ok(m) if m.is_dir() => {
            dir.join(MANIFEST_FILE).is_file()
                || dir.join(ENTRY_FILE).is_file()
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

/// Flushes the file system holding `dir` (Linux `syncfs`); false where not available.
#[cfg(target_os = "linux")]
fn sync_fs(dir: &Path) -> bool {
    use std::os::fd::AsRawFd;
    match std::fs::File::open(dir) {
        // SAFETY: a valid open file descriptor; syncfs only flushes.
        Ok(f) => unsafe { libc::syncfs(f.as_raw_fd()) == 0 },
        Err(_) => false,
    }
}

#[cfg(not(target_os = "linux"))]
fn sync_fs(_dir: &Path) -> bool {
    false
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

/// A verified, parsed bundle: the manifest and each part's reader, checked against each
/// other (see [`Bundle::from_files`]). Read-only; the parts are reached through accessors
/// so a `Bundle` always holds parts that passed those checks.
///
/// Either *whole* (format 1, or format 2 read whole by [`Bundle::open_dir`]: every part in
/// memory) or *paged* (format 2 through a [`PageCache`]: [`Bundle::open_entry`] in the
/// browser, [`Bundle::open_paged_dir`] natively), where parts read pages as a query needs
/// them and report the pages that are not there (see [`crate::paged`]).
pub struct Bundle {
    manifest: Manifest,
    lexical: Lexicon,
    vectors: Option<Vectors>,
    chunks: Chunks,
    analyzer: Analyzer,
    hanja: Option<Hanja>,
    paged: Option<PagedState>,
}

struct PagedState {
    cache: Arc<PageCache>,
    dir: Option<PathBuf>,
    vectors: OnceLock<Vectors>,
    columns: OnceLock<Arc<Columns>>,
}

impl Bundle {
    /// The manifest (format 2: the entry file's fields; `sources` is filled only when the
    /// bundle was read whole).
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// This bundle with its manifest's calibration replaced by `calibration`: the builder
    /// searches the bundle it is calibrating with the fits it has just made (the null cap,
    /// `jikji_builder::calibrate`). Nothing is checked again: the calibration is no part of
    /// the checks between a bundle's parts. Never fails.
    pub fn with_calibration(mut self, calibration: Option<crate::Calibration>) -> Self {
        self.manifest.calibration = calibration;
        self
    }

    /// Term dictionary + postings.
    pub fn lexical(&self) -> &Lexicon {
        &self.lexical
    }

    /// True if the bundle has dense vectors (loaded or not).
    pub fn has_vectors(&self) -> bool {
        match &self.paged {
            Some(_) => self.pages().is_some_and(|r| r.vectors.is_some()),
            None => self.vectors.is_some(),
        }
    }

    /// Dense vectors, if the bundle has them and (paged) every vector page is loaded; a
    /// paged bundle records its missing vector pages. See [`Bundle::has_vectors`].
    pub fn vectors(&self) -> Option<&Vectors> {
        let Some(p) = &self.paged else {
            return self.vectors.as_ref();
        };
        if let Some(v) = p.vectors.get() {
            return Some(v);
        }
        let pages = self.pages()?;
        let root = pages.vectors.as_ref()?;
        match crate::paged::assemble_vectors(&p.cache, root, pages.dim, self.manifest.counts.chunks)
        {
            Ok(Some(v)) => {
                let _ = p.vectors.set(v);
                p.vectors.get()
            }
            _ => None,
        }
    }

    /// Like [`Bundle::vectors`] but says why there are none: `Ok(None)` if the bundle has no
    /// vectors, [`FormatError::PageMissing`] if a vector page is not loaded (paged), or the
    /// corruption found in a vector page.
    pub fn vectors_checked(&self) -> Result<Option<&Vectors>> {
        let Some(p) = &self.paged else {
            return Ok(self.vectors.as_ref());
        };
        let Some(pages) = self.pages() else {
            return Ok(None);
        };
        let Some(root) = &pages.vectors else {
            return Ok(None);
        };
        if p.vectors.get().is_none() {
            match crate::paged::assemble_vectors(
                &p.cache,
                root,
                pages.dim,
                self.manifest.counts.chunks,
            )? {
                Some(v) => {
                    let _ = p.vectors.set(v);
                }
                None => {
                    return Err(FormatError::PageMissing {
                        name: format!("v-{}-…", root.gen),
                    })
                }
            }
        }
        Ok(p.vectors.get())
    }

    /// Chunk records: the indexed chunks, then any parent records.
    pub fn chunks(&self) -> &Chunks {
        &self.chunks
    }

    /// The analyzer of the manifest's version and options (for queries).
    pub fn analyzer(&self) -> &Analyzer {
        &self.analyzer
    }

    /// The optional Hanja reading table, for Hangul ↔ Hanja query expansion.
    pub fn hanja(&self) -> Option<&Hanja> {
        self.hanja.as_ref()
    }

    /// True for a bundle read through its page cache.
    pub fn is_paged(&self) -> bool {
        self.paged.is_some()
    }

    /// The page cache of a paged bundle.
    pub fn cache(&self) -> Option<&Arc<PageCache>> {
        self.paged.as_ref().map(|p| &p.cache)
    }

    /// The page roots of a paged bundle (the manifest's `pages`: one copy of them, not a
    /// second in the paged state, whose clone was 0.6 kB of the browser's wasm).
    pub fn pages(&self) -> Option<&PagesRoot> {
        self.paged.as_ref().and(self.manifest.pages.as_ref())
    }

    /// Installs into the analyzer the Unicode table pages ([`crate::unicode`]) that are in
    /// the page cache and not installed yet; the engine calls it before each pass of a
    /// query. Nothing to do for compiled-in tables. Errors: a table page that does not
    /// decode (DataCorruption naming it).
    pub fn install_unicode_pages(&self) -> Result<()> {
        let tables = self.analyzer.tables();
        let (Some(p), false) = (&self.paged, tables.is_builtin()) else {
            return Ok(());
        };
        let Some(u) = self.pages().and_then(|r| r.unicode.as_ref()) else {
            return Ok(());
        };
        for t in [crate::unicode::Table::Nfkc, crate::unicode::Table::T2s] {
            let name = u.name(t);
            if !tables.has(t) && p.cache.contains(name) {
                if let Some(body) = p.cache.get(name) {
                    tables.install(t, &format!("{PAGES_DIR}/{name}"), &body)?;
                }
            }
        }
        Ok(())
    }

    /// After a pass of a query: records the Unicode table pages the analyzer needed and did
    /// not have ([`crate::unicode::UnicodeTables::take_missing`]) as missing pages of the
    /// cache, so the engine fetches them and runs the query again. Returns whether any was
    /// needed. Errors: [`FormatError::NoUnicodeTables`] if a table was needed and the bundle
    /// has no pages for it (built before they existed; only an engine without compiled-in
    /// tables — the browser's — gets here).
    pub fn request_unicode_pages(&self) -> Result<bool> {
        let missing = self.analyzer.tables().take_missing();
        if missing.is_empty() {
            return Ok(false);
        }
        match self
            .paged
            .as_ref()
            .and_then(|p| Some((p, self.pages()?.unicode.as_ref()?)))
        {
            Some((p, u)) => {
                for t in missing {
                    let _ = p.cache.get(u.name(t));
                }
                Ok(true)
            }
            None => Err(FormatError::NoUnicodeTables {
                file: if self.paged.is_some() {
                    ENTRY_FILE.into()
                } else {
                    MANIFEST_FILE.into()
                },
            }),
        }
    }

    /// After a pass that asked for phrase candidates' chunk pages
    /// ([`crate::unicode::UnicodeTables::need_chunk_tables`]; nothing otherwise): the
    /// Unicode table pages not installed yet that the chunks of the chunk pages among
    /// `missing` may need, by the chunks' languages (the columns page) and the entry's
    /// `unicode.nfkc_langs`, `t2s_langs`; every table listed for some language when the
    /// columns page is not loaded, both when the entry has no lists (bundles written before
    /// them).
    pub fn chunk_table_pages(&self, missing: &[String]) -> Vec<String> {
        use crate::unicode::Table;
        let tables = self.analyzer.tables();
        let (true, Some(p), Some(root)) = (tables.take_chunk_tables(), &self.paged, self.pages())
        else {
            return Vec::new();
        };
        let Some(u) = &root.unicode else {
            return Vec::new();
        };
        // Which tables (bit 0 NFKC, bit 1 T2S) the languages of the pages' chunks need.
        let lists = [&u.nfkc_langs, &u.t2s_langs];
        let of = |lang: Option<&String>| {
            lists
                .iter()
                .enumerate()
                .fold(0u8, |b, (i, l)| match (l, lang) {
                    (Some(l), Some(lang)) if !l.contains(lang) => b,
                    (Some(l), None) if l.is_empty() => b,
                    _ => b | 1 << i,
                })
        };
        let mut want = 0u8;
        match p.columns.get().and_then(|c| c.facets.as_ref()) {
            // Bundles written before the lists: both tables.
            _ if lists.iter().all(|l| l.is_none()) => want = 3,
            // No columns yet: every table listed for some language.
            None => want = of(None),
            Some(f) => {
                let per = root.chunks.per_page.max(1);
                for name in missing.iter().filter(|n| n.starts_with("c-")) {
                    let Some(n) = name
                        .rsplit('-')
                        .next()
                        .and_then(|x| x.parse::<usize>().ok())
                    else {
                        continue;
                    };
                    for d in n.saturating_mul(per)..n.saturating_add(1).saturating_mul(per) {
                        let Some(&l) = f.lang.get(d) else { break };
                        want |= of(f.langs.get(l as usize));
                    }
                }
            }
        }
        [(Table::Nfkc, 1), (Table::T2s, 2)]
            .into_iter()
            .filter(|&(t, b)| want & b != 0 && !tables.has(t))
            .map(|(t, _)| u.name(t).to_string())
            .filter(|n| !missing.contains(n))
            .collect()
    }

    /// The per-chunk columns of a paged bundle (`Ok(None)` for a whole bundle). Errors:
    /// [`FormatError::PageMissing`] while the columns page is not loaded, DataCorruption.
    pub fn columns(&self) -> Result<Option<Arc<Columns>>> {
        let Some(p) = &self.paged else {
            return Ok(None);
        };
        if let Some(c) = p.columns.get() {
            return Ok(Some(c.clone()));
        }
        let Some(root) = self.pages() else {
            return Ok(None);
        };
        let body = p.cache.require(&root.columns)?;
        let c = Columns::decode(&format!("p/{}", root.columns), &body, root.records)?;
        let _ = p.columns.set(Arc::new(c));
        Ok(p.columns.get().cloned())
    }

    /// Adds a page given as header + raw body (the browser inflates it first). Errors on a
    /// page that fails verification (named), or on a whole bundle.
    pub fn add_page(&self, name: &str, bytes: &[u8]) -> Result<()> {
        match &self.paged {
            Some(p) => p.cache.add_raw(name, bytes),
            None => Err(FormatError::InvalidInput(
                "not a paged bundle: pages cannot be added".into(),
            )),
        }
    }

    /// True for a paged bundle opened from a folder ([`Bundle::open_paged_dir`]), which
    /// loads its own pages ([`Bundle::load_pages`]).
    pub fn can_load_pages(&self) -> bool {
        self.paged.as_ref().is_some_and(|p| p.dir.is_some())
    }

    /// Natively, for a bundle opened with [`Bundle::open_paged_dir`]: reads pages `names`
    /// from `p/` and adds them to the cache. Errors: no folder (a browser bundle), a
    /// missing file, a page that fails verification.
    /// Returns the bytes read per page (as stored), in the order of `names`.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn load_pages(&self, names: &[String]) -> Result<Vec<u64>> {
        let mut sizes = Vec::with_capacity(names.len());
        let p = self.paged.as_ref().ok_or_else(|| {
            FormatError::InvalidInput("not a paged bundle: pages cannot be loaded".into())
        })?;
        let dir = p.dir.as_ref().ok_or_else(|| {
            FormatError::InvalidInput("this paged bundle has no folder to load pages from".into())
        })?;
        for name in names {
            if !valid_page_name(name) {
                return Err(FormatError::InvalidInput(format!(
                    "not a page name: {}",
                    crate::quote::Quoted(name)
                )));
            }
            let path = dir.join(PAGES_DIR).join(name);
            let bytes = match std::fs::read(&path) {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(FormatError::MissingFile {
                        file: path.display().to_string(),
                    })
                }
                Err(e) => return Err(FormatError::io(&path, e)),
            };
            sizes.push(bytes.len() as u64);
            p.cache.add_stored(name, &bytes)?;
        }
        Ok(sizes)
    }

    /// Opens a paged bundle from its entry file's bytes (`jikji.json`), with an empty page
    /// cache of [`crate::paged::cache::DEFAULT_BUDGET`] bytes: what the browser does. Errors:
    /// [`FormatError::FormatVersion`] for a format 1 manifest (rebuild), DataCorruption for
    /// page roots that disagree with the counts.
    pub fn open_entry(bytes: &[u8]) -> Result<Self> {
        Self::paged_from_entry(bytes, None)
    }

    fn paged_from_entry(bytes: &[u8], dir: Option<PathBuf>) -> Result<Self> {
        let manifest = Manifest::parse_named(bytes, ENTRY_FILE)?;
        let Some(root) = manifest.pages.as_ref() else {
            return Err(FormatError::FormatVersion {
                file: ENTRY_FILE.into(),
                found: manifest.format_version,
                expected: PAGED_FORMAT_VERSION,
            });
        };
        let n = manifest.counts.chunks;
        check_root(root, n, manifest.parents())?;
        #[cfg(feature = "dense")]
        if let Some(q) = &root.query_model {
            q.check(manifest.model.as_ref().map(|m| m.sha256.as_str()))?;
        }
        let cache = Arc::new(PageCache::default());
        let lexical = Lexicon::Paged(crate::paged::lexicon(
            root,
            &cache,
            n,
            manifest.counts.terms,
        ));
        let chunks = Chunks::Paged(PagedChunks::new(
            cache.clone(),
            root.chunks.clone(),
            root.records,
        ));
        let hanja = root.hanja.clone().map(|pages| Hanja::Paged {
            cache: cache.clone(),
            keys: root.hanja_keys.clone(),
            pages,
            expand: root.expand.clone().map(|x| (root.expand_keys.clone(), x)),
        });
        if let (Some(m), true) = (&manifest.model, root.vectors.is_some()) {
            if m.dim != root.dim {
                return Err(FormatError::corrupt(
                    ENTRY_FILE,
                    0,
                    format!(
                        "vector pages have dimension {} but the model says {}",
                        root.dim, m.dim
                    ),
                ));
            }
        }
        // A bundle with Unicode table pages is analysed with them, natively too (the same
        // tables as the compiled-in ones: same results; `jikji search --fetch-stats` counts
        // their bytes as the browser fetches them).
        let analyzer = if root.unicode.is_some() {
            Analyzer::with_tables(
                manifest.analyzer_version,
                manifest.analyzer,
                crate::unicode::UnicodeTables::from_pages(),
            )?
        } else {
            manifest.analyzer()?
        };
        Ok(Bundle {
            manifest,
            lexical,
            vectors: None,
            chunks,
            analyzer,
            hanja,
            paged: Some(PagedState {
                cache,
                dir,
                vectors: OnceLock::new(),
                columns: OnceLock::new(),
            }),
        })
    }

    /// Opens a format 2 bundle folder paged (natively): reads `jikji.json` only; pages are
    /// read as queries need them ([`Bundle::load_pages`]). A format 1 folder is opened whole.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn open_paged_dir(dir: &Path) -> Result<Self> {
        let entry = dir.join(ENTRY_FILE);
        if !entry.exists() {
            #[cfg(feature = "v1")]
            return Self::open_dir(dir);
            #[cfg(not(feature = "v1"))]
            return Err(FormatError::V1NotBuilt {
                file: dir.join(MANIFEST_FILE).display().to_string(),
            });
        }
        let bytes = std::fs::read(&entry).map_err(|e| FormatError::io(&entry, e))?;
        Self::paged_from_entry(&bytes, Some(dir.to_path_buf()))
    }

    #[cfg(feature = "v1")]
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
            lexical: Lexicon::Whole(lexical),
            vectors,
            chunks: Chunks::Whole(chunks),
            analyzer,
            hanja: hanja.map(Hanja::Whole),
            paged: None,
        })
    }

    /// Reads a bundle folder whole and verifies it: format 1 (`manifest.json` and every
    /// file it lists, see [`Bundle::from_files`]) or format 2 (`jikji.json` and every page,
    /// each verified, rebuilt into the whole parts; `manifest().files` then lists the
    /// SHA-256 of those parts' format 1 encodings and `sources` is filled).
    #[cfg(all(feature = "v1", not(target_arch = "wasm32")))]
    pub fn open_dir(dir: &Path) -> Result<Self> {
        if dir.join(ENTRY_FILE).exists() {
            return Self::open_v2_whole(dir);
        }
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

    #[cfg(all(feature = "v1", not(target_arch = "wasm32")))]
    fn open_v2_whole(dir: &Path) -> Result<Self> {
        let paged = Self::open_paged_dir(dir)?;
        let p = paged.paged.as_ref().expect("a format 2 folder opens paged");
        let root = paged.pages().expect("a format 2 folder has pages");
        paged.load_pages(&crate::paged::all_pages(root))?;
        let m = &paged.manifest;
        let w = crate::paged::whole_parts(root, &p.cache, m.counts.chunks, m.counts.terms)?;
        let mut manifest = paged.manifest.clone();
        manifest.sources = w.sources;
        let entry = |b: &[u8]| FileEntry {
            sha256: sha256_hex(b),
            bytes: b.len() as u64,
        };
        let mut files = BTreeMap::new();
        files.insert(TERMS_FILE.to_string(), entry(&w.terms_fst));
        files.insert(POSTINGS_FILE.to_string(), entry(&w.postings));
        files.insert(CHUNKS_FILE.to_string(), entry(&w.chunks));
        if let Some(v) = &w.vectors {
            files.insert(VECTORS_FILE.to_string(), entry(v));
        }
        if let Some(h) = &w.hanja {
            files.insert(HANJA_FILE.to_string(), entry(h));
        }
        manifest.files = files;
        let lexical = LexicalIndex::open(w.terms_fst, w.postings)?;
        let chunks = ChunkStore::open(w.chunks)?;
        let vectors = w.vectors.as_deref().map(Vectors::open).transpose()?;
        let hanja = w.hanja.map(HanjaMap::open).transpose()?;
        Bundle::from_parts(manifest, lexical, vectors, chunks, hanja)
    }

    #[cfg(feature = "v1")]
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
        if manifest.pages.is_some() {
            return Err(FormatError::FormatVersion {
                file: MANIFEST_FILE.into(),
                found: manifest.format_version,
                expected: crate::manifest::FORMAT_VERSION,
            });
        }
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

/// True for a page name as writers make them (`d-<16 hex>`, `c-<16 hex>-<n>`): no path
/// separators or dots, so a name from a hostile entry cannot reach outside `p/`.
pub fn valid_page_name(name: &str) -> bool {
    let b = name.as_bytes();
    b.len() >= 18
        && b.len() <= 40
        && b[1] == b'-'
        && b[0].is_ascii_lowercase()
        && b[2..].iter().all(|c| c.is_ascii_hexdigit() || *c == b'-')
}

#[cfg(feature = "v1")]
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

#[cfg(feature = "v1")]
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

#[cfg(feature = "v1")]
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
            dense_index: None,
            dense_index_chosen_by: None,
            pages: None,
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

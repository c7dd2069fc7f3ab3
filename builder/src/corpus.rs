//! Reading and checking a corpus folder: which files, their tier, source URL and front
//! matter, and every problem found, each naming the file and the line or byte offset.
//!
//! Errors keep a file out of the bundle: invalid UTF-8, binary content, empty file, no
//! source (no `Source:` / `출처:` line, no front matter `source`, no URL outside code; see
//! [`find_source`]), an unclosed code fence, and front matter
//! `provenance: ai-draft` (unless allowed). Warnings do not: identical content in two
//! files, over-long sections or files without structure, very long lines, a tier folder
//! without a number. Nothing on disk is modified.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{BuildError, Result};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Lines longer than this many characters get a warning (a sign of lost line breaks).
pub const LONG_LINE_CHARS: usize = 2_000;
/// A `---` section or heading block longer than this many characters gets a warning: its
/// chunks (at the default 512 chars, 64+ of them) would all share one heading path, so
/// results from it carry no context about where in the section they are.
pub const LONG_SECTION_CHARS: usize = 32_768;

/// How serious a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The file is left out of the bundle (fatal with `--strict`).
    Error,
    /// Reported; the file is indexed.
    Warning,
}

/// One problem found in the corpus.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// Error or warning.
    pub severity: Severity,
    /// Stable machine-readable code, e.g. `no-source`, `invalid-utf8`.
    pub code: &'static str,
    /// File (or folder) path relative to the corpus root.
    pub path: String,
    /// 1-based line, where one applies.
    pub line: Option<usize>,
    /// 0-based byte offset, where one applies.
    pub byte: Option<usize>,
    /// What is wrong and what to do.
    pub message: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sev = match self.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
        };
        write!(f, "{sev}[{}] {}", self.code, self.path)?;
        if let Some(l) = self.line {
            write!(f, ":{l}")?;
        }
        if let Some(b) = self.byte {
            write!(f, " (byte {b})")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// Front matter fields (a leading `---` … `---` block of `key: value` lines).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FrontMatter {
    /// `title`.
    pub title: Option<String>,
    /// `version`.
    pub version: Option<String>,
    /// `updated` (ISO 8601 date as written).
    pub updated: Option<String>,
    /// `expires` (ISO 8601 date as written).
    pub expires: Option<String>,
    /// `author`.
    pub author: Option<String>,
    /// `provenance`: `human` or `ai-draft`.
    pub provenance: Option<String>,
    /// `lang`.
    pub lang: Option<String>,
    /// `source` (a URL), also accepted as the file's source.
    pub source: Option<String>,
    /// `doc_id`: files with the same `doc_id` are versions of one document (see
    /// [`crate::versions`]).
    pub doc_id: Option<String>,
    /// `versioning`: `none` keeps a file with a version suffix in its name (`api_v1.md`)
    /// out of version grouping (see [`crate::versions`]).
    pub versioning: Option<String>,
}

/// One source file accepted into the bundle.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Path on disk.
    pub path: PathBuf,
    /// Path relative to the corpus root, `/`-separated (stored in chunk metadata).
    pub rel: String,
    /// Tier from the nearest ancestor folder named `N. name` (lower = better curated).
    pub tier: Option<u32>,
    /// The whole file text.
    pub text: String,
    /// Byte offset where the body starts (after front matter; 0 without it).
    pub body_byte: usize,
    /// Char offset where the body starts.
    pub body_char: usize,
    /// `Source:` / `출처:` URL, front matter `source`, or the first URL in the file.
    pub source_url: Option<String>,
    /// Parsed front matter.
    pub front: FrontMatter,
    /// `Some` when the scan dropped the body to save memory
    /// ([`CheckOptions::drop_bodies`]): `text` then holds only the front matter
    /// (`..body_byte`), and [`SourceFile::whole`] reads the file again.
    pub dropped: Option<DroppedBody>,
}

/// What is kept of a file whose body was dropped: its length and SHA-256, checked when it
/// is read again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedBody {
    /// The whole file's length in bytes.
    pub bytes: u64,
    /// The whole file's SHA-256.
    pub sha256: [u8; 32],
}

impl SourceFile {
    /// Drops the body (`text[body_byte..]`), keeping the front matter, the whole file's
    /// length and `sha256` (the SHA-256 of `text`).
    pub fn drop_body(&mut self, sha256: [u8; 32]) {
        if self.dropped.is_none() {
            self.dropped = Some(DroppedBody {
                bytes: self.text.len() as u64,
                sha256,
            });
            self.text.truncate(self.body_byte);
            self.text.shrink_to_fit();
        }
    }

    /// The whole file's length in bytes.
    pub fn len(&self) -> u64 {
        self.dropped
            .as_ref()
            .map_or(self.text.len() as u64, |d| d.bytes)
    }

    /// True for an empty file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The whole file's SHA-256 in hex (the sources table's `sha256`).
    pub fn sha256_hex(&self) -> String {
        match &self.dropped {
            Some(d) => hex::encode(d.sha256),
            None => jikji_format::sha256_hex(self.text.as_bytes()),
        }
    }

    /// This file with its whole text: itself, or (body dropped) read again from `path`.
    /// Errors: I/O naming the file; [`BuildError::Corpus`] when the file changed since
    /// the scan (other length or SHA-256: build again).
    pub fn whole(&self) -> Result<std::borrow::Cow<'_, SourceFile>> {
        let Some(d) = &self.dropped else {
            return Ok(std::borrow::Cow::Borrowed(self));
        };
        let changed = || {
            BuildError::Corpus {
            path: self.path.clone(),
            message: "changed while the bundle was being built (its length or SHA-256 is not what the corpus check read); build again".into(),
        }
        };
        let bytes = match read_regular(&self.path) {
            Ok(Ok(b)) => b,
            Ok(Err(_)) => return Err(changed()),
            Err(e) => return Err(BuildError::io("reading", &self.path, e)),
        };
        let sha: [u8; 32] = Sha256::digest(&bytes).into();
        if bytes.len() as u64 != d.bytes || sha != d.sha256 {
            return Err(changed());
        }
        let text = String::from_utf8(bytes).map_err(|_| changed())?;
        Ok(std::borrow::Cow::Owned(SourceFile {
            path: self.path.clone(),
            rel: self.rel.clone(),
            tier: self.tier,
            text,
            body_byte: self.body_byte,
            body_char: self.body_char,
            source_url: self.source_url.clone(),
            front: self.front.clone(),
            dropped: None,
        }))
    }
}

/// What to accept.
#[derive(Debug, Clone, Copy, Default)]
pub struct CheckOptions {
    /// Accept files whose front matter says `provenance: ai-draft`.
    pub allow_ai_draft: bool,
    /// Keep only the front matter of accepted files ([`SourceFile::drop_body`]): a build
    /// reads each body again when it chunks it, so the corpus is never all in memory.
    pub drop_bodies: bool,
}

/// The result of scanning a corpus folder.
#[derive(Debug, Default)]
pub struct Scan {
    /// Files accepted (no error findings).
    pub files: Vec<SourceFile>,
    /// Every finding, in path order.
    pub findings: Vec<Finding>,
    /// Paths (on disk) of files with errors.
    pub rejected: Vec<PathBuf>,
}

impl Scan {
    /// Number of error findings.
    pub fn errors(&self) -> usize {
        self.findings
            .iter()
            .filter(|f| f.severity == Severity::Error)
            .count()
    }
}

/// Scans the `.md` and `.txt` files under `root` (sorted by path; hidden entries and a
/// `README.md` at the root skipped),
/// checks them, and returns the accepted files with all findings. Symbolic links are
/// followed; a link that loops back to one of its ancestor folders (`symlink-loop`) or
/// points nowhere (`broken-symlink`) is skipped with a warning naming it, and so is a
/// `.md` / `.txt` name that is not a regular file (`not-a-file`: a FIFO, socket or
/// device, which is never opened for a blocking read). Fails only if `root` cannot be
/// walked (e.g. a folder cannot be listed) or a regular file cannot be read.
pub fn scan(root: &Path, opts: CheckOptions) -> Result<Scan> {
    if !root.is_dir() {
        return Err(BuildError::Corpus {
            path: root.to_path_buf(),
            message: "not a folder".into(),
        });
    }
    let mut out = Scan::default();
    let mut seen_hash: HashMap<[u8; 32], String> = HashMap::new();
    let mut warned_dirs = std::collections::BTreeSet::new();
    let walker = walkdir::WalkDir::new(root)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in walker {
        let entry = match entry {
            Ok(entry) => entry,
            Err(source) => match link_finding(root, &source) {
                // One bad link must not stop the rest of the corpus from building.
                Some(f) => {
                    out.findings.push(f);
                    continue;
                }
                None => {
                    return Err(BuildError::Walk {
                        root: root.to_path_buf(),
                        source,
                    })
                }
            },
        };
        let path = entry.path();
        let rel_path = path.strip_prefix(root).unwrap_or(path);
        let rel = rel_of(rel_path);
        if entry.file_type().is_dir() {
            if entry.depth() == 1 && tier_of(&rel).is_none() && warned_dirs.insert(rel.clone()) {
                out.findings.push(finding(Severity::Warning, "tier-unnumbered", &rel, None, None,
                    "top-level folder has no tier number; name it like `2. name` (lower = better curated)".into()));
            }
            continue;
        }
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        if ext != "md" && ext != "txt" {
            continue;
        }
        if !entry.file_type().is_file() {
            out.findings.push(not_a_file(&rel, entry.file_type()));
            continue;
        }
        // A README at the corpus root documents the folder; it is not a book.
        if entry.depth() == 1
            && entry
                .file_name()
                .to_string_lossy()
                .eq_ignore_ascii_case("readme.md")
        {
            continue;
        }
        let bytes = match read_regular(path) {
            Ok(Ok(bytes)) => bytes,
            // Swapped for a FIFO or device between the walk and the read.
            Ok(Err(file_type)) => {
                out.findings.push(not_a_file(&rel, file_type));
                continue;
            }
            Err(e) => return Err(BuildError::io("reading", path, e)),
        };
        let before = out.findings.len();
        let accepted = check_file(&rel, &bytes, opts, &mut out.findings);
        if let Some(mut file) = accepted {
            let hash: [u8; 32] = Sha256::digest(&bytes).into();
            if let Some(first) = seen_hash.get(&hash) {
                out.findings.push(finding(
                    Severity::Warning,
                    "duplicate",
                    &rel,
                    None,
                    None,
                    format!("identical content to {first}; both are indexed, results will repeat"),
                ));
            } else {
                seen_hash.insert(hash, rel.clone());
            }
            file.path = path.to_path_buf();
            if opts.drop_bodies {
                file.drop_body(hash);
            }
            file.tier = rel_path.parent().and_then(|p| {
                p.components()
                    .rev()
                    .find_map(|c| tier_of(&c.as_os_str().to_string_lossy()))
            });
            out.files.push(file);
        } else {
            debug_assert!(out.findings.len() > before);
            out.rejected.push(path.to_path_buf());
        }
    }
    Ok(out)
}

/// `/`-separated path relative to the corpus root.
fn rel_of(rel_path: &Path) -> String {
    rel_path
        .components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The warning for a walk error that concerns one link only: a symbolic link that loops
/// back to an ancestor folder, or one whose target does not exist. `None` for any other
/// error (an unreadable folder, …), which stays fatal.
fn link_finding(root: &Path, e: &walkdir::Error) -> Option<Finding> {
    let path = e.path()?;
    let rel = rel_of(path.strip_prefix(root).unwrap_or(path));
    if let Some(ancestor) = e.loop_ancestor() {
        let anc = ancestor.strip_prefix(root).unwrap_or(ancestor);
        let anc = if anc.as_os_str().is_empty() {
            "the corpus root".to_string()
        } else {
            rel_of(anc)
        };
        return Some(finding(
            Severity::Warning,
            "symlink-loop",
            &rel,
            None,
            None,
            format!("symbolic link loops back to {anc}; skipped (the rest of the corpus is read)"),
        ));
    }
    // A link to itself, or a chain of links back to itself (`a.md -> b.md -> a.md`):
    // the OS gives up resolving it (ELOOP) instead of walkdir seeing an ancestor again.
    #[cfg(unix)]
    if e.io_error().and_then(std::io::Error::raw_os_error) == Some(libc::ELOOP) {
        return Some(finding(
            Severity::Warning,
            "symlink-loop",
            &rel,
            None,
            None,
            "symbolic link that never resolves (too many levels of symbolic links); skipped"
                .to_string(),
        ));
    }
    let dangling = e.io_error().map(|io| io.kind()) == Some(std::io::ErrorKind::NotFound)
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    dangling.then(|| {
        let target = std::fs::read_link(path)
            .map(|t| t.display().to_string())
            .unwrap_or_default();
        finding(
            Severity::Warning,
            "broken-symlink",
            &rel,
            None,
            None,
            format!("symbolic link to {target:?}, which does not exist; skipped"),
        )
    })
}

/// The warning for a `.md` / `.txt` name that is not a regular file.
fn not_a_file(rel: &str, file_type: std::fs::FileType) -> Finding {
    #[cfg(unix)]
    let kind = {
        use std::os::unix::fs::FileTypeExt;
        if file_type.is_fifo() {
            "a FIFO (named pipe)"
        } else if file_type.is_socket() {
            "a socket"
        } else if file_type.is_char_device() || file_type.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        }
    };
    #[cfg(not(unix))]
    let kind = {
        let _ = file_type;
        "not a regular file"
    };
    finding(
        Severity::Warning,
        "not-a-file",
        rel,
        None,
        None,
        format!("{kind}, not a text file; skipped without reading it"),
    )
}

/// Reads a regular file whole. `Ok(Err(type))` if `path` is not a regular file: on Unix it
/// is opened with `O_NONBLOCK`, so opening or reading a FIFO whose writer never comes
/// cannot block, and the type is checked on the opened handle (no race with the walk).
fn read_regular(path: &Path) -> std::io::Result<std::result::Result<Vec<u8>, std::fs::FileType>> {
    use std::io::Read;
    let mut open = std::fs::OpenOptions::new();
    open.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        open.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let mut f = open.open(path)?;
    let meta = f.metadata()?;
    if !meta.file_type().is_file() {
        return Ok(Err(meta.file_type()));
    }
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    Ok(Ok(bytes))
}

/// Expiry findings (warnings) for accepted files, given the clock `now_ms` (Unix ms):
/// `expired` (front matter `expires` at or before now: the engine leaves its chunks out of
/// results), `expires-soon` (within `within_days` days), and `bad-expires` (a value that is
/// not an ISO 8601 date or date-time, which never filters). Each names the file and line 1
/// (the front matter).
pub fn expiry_findings(files: &[SourceFile], now_ms: i64, within_days: u32) -> Vec<Finding> {
    use jikji_format::time::{format_date, parse_iso8601_ms};
    let horizon = now_ms + i64::from(within_days) * 86_400_000;
    let mut out = Vec::new();
    for f in files {
        let Some(e) = &f.front.expires else { continue };
        let line = f.text[..f.body_byte]
            .lines()
            .position(|l| l.trim_start().to_ascii_lowercase().starts_with("expires"))
            .map(|i| i + 1);
        match parse_iso8601_ms(e) {
            None => out.push(finding(
                Severity::Warning,
                "bad-expires",
                &f.rel,
                line,
                None,
                format!("expires {e:?} is not an ISO 8601 date (YYYY-MM-DD or YYYY-MM-DDTHH:MM:SSZ); it will never expire"),
            )),
            Some(t) if t <= now_ms => out.push(finding(
                Severity::Warning,
                "expired",
                &f.rel,
                line,
                None,
                format!("expired {e} (today is {}); its chunks are left out of search results", format_date(now_ms)),
            )),
            Some(t) if t <= horizon => out.push(finding(
                Severity::Warning,
                "expires-soon",
                &f.rel,
                line,
                None,
                format!("expires {e}, in {} day(s)", (t - now_ms).div_euclid(86_400_000)),
            )),
            Some(_) => {}
        }
    }
    out
}

fn finding(
    severity: Severity,
    code: &'static str,
    path: &str,
    line: Option<usize>,
    byte: Option<usize>,
    message: String,
) -> Finding {
    Finding {
        severity,
        code,
        path: path.to_string(),
        line,
        byte,
        message,
    }
}

/// Checks one file's bytes; pushes findings; returns the file if it has no errors.
fn check_file(
    rel: &str,
    bytes: &[u8],
    opts: CheckOptions,
    findings: &mut Vec<Finding>,
) -> Option<SourceFile> {
    let err = |code, line, byte, msg: String| finding(Severity::Error, code, rel, line, byte, msg);
    let warn =
        |code, line, byte, msg: String| finding(Severity::Warning, code, rel, line, byte, msg);
    let line_of = |off: usize| bytes[..off].iter().filter(|&&b| b == b'\n').count() + 1;

    if let Some(off) = bytes.iter().position(|&b| b == 0) {
        findings.push(err(
            "binary",
            Some(line_of(off)),
            Some(off),
            "NUL byte: this is a binary file, not text".into(),
        ));
        return None;
    }
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let off = e.valid_up_to();
            findings.push(err(
                "invalid-utf8",
                Some(line_of(off)),
                Some(off),
                "invalid UTF-8; save the file as UTF-8".into(),
            ));
            return None;
        }
    };
    let bom = if text.starts_with('\u{feff}') { 3 } else { 0 };
    if text[bom..].trim().is_empty() {
        findings.push(err("empty", None, None, "empty file".into()));
        return None;
    }
    let (front, fm_end) = front_matter(text, bom);
    let found = find_source(&text[fm_end..]);
    let source_url = front.source.clone().or_else(|| found.source.clone());
    let body_byte = skip_source_lines(text, fm_end);
    let body = &text[body_byte..];
    let mut ok = true;
    if source_url.is_none() {
        if let Some((n, url)) = &found.url_in_code {
            let line = text[..fm_end].matches('\n').count() + 1 + n;
            findings.push(warn(
                "url-in-code",
                Some(line),
                None,
                format!("the only URL, {url}, is inside code: an example, not the file's source"),
            ));
        }
        findings.push(err(
            "no-source",
            None,
            None,
            "no source: add a `Source: URL` or `출처: name` line (`:` or `：`, any spacing), front matter `source:`, or a URL in the text (URLs inside code do not count)".into(),
        ));
        ok = false;
    }
    match front.provenance.as_deref() {
        Some("ai-draft") if !opts.allow_ai_draft => {
            findings.push(err("ai-draft", Some(1), None,
                "front matter says provenance: ai-draft; AI-written text is excluded (--allow-ai-draft includes it, tagged)".into()));
            ok = false;
        }
        Some("ai-draft") | Some("human") | None => {}
        Some(other) => findings.push(warn(
            "provenance",
            Some(1),
            None,
            format!("unknown provenance {other:?} (expected human or ai-draft)"),
        )),
    }

    // Line-level checks over the body: fences, long lines, section sizes.
    let first_line = text[..body_byte].matches('\n').count() + 1;
    let mut fence: Option<(usize, String)> = None;
    let mut section_chars = 0usize;
    let mut section_start = first_line;
    let mut structured = false;
    let mut byte = body_byte;
    for (i, line) in body.split('\n').enumerate() {
        let n = first_line + i;
        let t = line.trim();
        let chars = line.chars().count();
        if chars > LONG_LINE_CHARS {
            findings.push(warn("long-line", Some(n), Some(byte),
                format!("line of {chars} characters; lost line breaks? sentences will be cut at the chunk size")));
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            let marker: String = t.chars().take(3).collect();
            match &fence {
                Some((_, m)) if *m == marker => fence = None,
                Some(_) => {}
                None => fence = Some((n, marker)),
            }
        }
        let boundary = fence.is_none()
            && (t == "---" || (t.starts_with('#') && t.trim_start_matches('#').starts_with(' ')));
        if boundary {
            structured = true;
            if section_chars > LONG_SECTION_CHARS {
                findings.push(warn("long-section", Some(section_start), None, format!(
                    "section of {section_chars} characters without `---` or a heading; split it so results carry context")));
            }
            section_chars = 0;
            section_start = n + 1;
        } else {
            section_chars += chars + 1;
        }
        byte += line.len() + 1;
    }
    if section_chars > LONG_SECTION_CHARS {
        let msg = if structured {
            format!("section of {section_chars} characters without `---` or a heading; split it so results carry context")
        } else {
            format!("{section_chars} characters with no `---` or headings: if it covers several topics, separate them")
        };
        findings.push(warn(
            if structured {
                "long-section"
            } else {
                "no-structure"
            },
            Some(section_start),
            None,
            msg,
        ));
    }
    if let Some((n, m)) = fence {
        findings.push(err(
            "unclosed-fence",
            Some(n),
            None,
            format!("code fence {m} opened here is never closed"),
        ));
        ok = false;
    }
    if !ok {
        return None;
    }
    let body_char = text[..body_byte].chars().count();
    Some(SourceFile {
        path: PathBuf::new(),
        rel: rel.to_string(),
        tier: None,
        text: text.to_string(),
        body_byte,
        body_char,
        source_url,
        front,
        dropped: None,
    })
}

/// Parses a leading front matter block (`---` line, `key: value` lines, `---` line)
/// starting at byte `start`. Returns the fields and the byte offset of the body. A leading
/// `---` not closed within 50 lines, or containing a line that is not `key: value`, is not
/// front matter (it is a section divider).
pub fn front_matter(text: &str, start: usize) -> (FrontMatter, usize) {
    let mut fm = FrontMatter::default();
    // Lines with their `\n` (and a `\r` before it) kept, so that offsets count the real
    // line-break bytes: one for LF, two for CRLF.
    let mut lines = text[start..].split_inclusive('\n');
    let Some(first) = lines.next() else {
        return (fm, start);
    };
    if first.trim_end() != "---" {
        return (fm, start);
    }
    let mut off = start + first.len();
    for raw in lines.take(50) {
        let end = off + raw.len();
        let line = raw.strip_suffix('\n').unwrap_or(raw);
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim_end() == "---" {
            return (fm, end);
        }
        let Some((k, v)) = line.split_once(':') else {
            return (FrontMatter::default(), start);
        };
        let k = k.trim().to_ascii_lowercase();
        if k.is_empty() || k.contains(' ') {
            return (FrontMatter::default(), start);
        }
        let v = v.trim().trim_matches('"').trim_matches('\'').to_string();
        let slot = match k.as_str() {
            "title" => &mut fm.title,
            "version" => &mut fm.version,
            "updated" => &mut fm.updated,
            "expires" => &mut fm.expires,
            "author" => &mut fm.author,
            "provenance" => &mut fm.provenance,
            "lang" => &mut fm.lang,
            "source" => &mut fm.source,
            "doc_id" => &mut fm.doc_id,
            "versioning" => &mut fm.versioning,
            _ => {
                off = end;
                continue;
            }
        };
        if !v.is_empty() {
            *slot = Some(v);
        }
        off = end;
    }
    (FrontMatter::default(), start)
}

/// Byte offset after the leading source lines that start at `start` (`Source: URL`,
/// `출처: URL`, `원문(위키문헌): URL` — a short label, a colon, then only a URL — and the
/// `Source:` / `출처:` lines that name a source without a URL, `출처 : 고객센터 공지`, as
/// [`source_line`] reads them) and the blank lines around them. They are file metadata
/// (kept as the chunks' `source_url`), not text to search: left in, each file's first chunk
/// would be a lone URL or source name, which matched unrelated queries.
pub fn skip_source_lines(text: &str, start: usize) -> usize {
    let mut off = start;
    let mut end = start;
    for line in text[start..].split_inclusive('\n') {
        let t = line.trim();
        let is_source = is_source_line(t);
        if t.is_empty() {
            off += line.len();
        } else if is_source {
            off += line.len();
            end = off;
        } else {
            break;
        }
    }
    end
}

/// True if the (trimmed) line `t` is a source line: a `Source:` / `출처:` line naming a URL
/// or a name ([`source_line`]), or a short label (≤ 24 chars), a colon and only a URL
/// (`원문(위키문헌): https://…`).
pub fn is_source_line(t: &str) -> bool {
    source_line(t).is_some()
        || t.split_once([':', '：']).is_some_and(|(label, rest)| {
            let url = rest.trim();
            label.chars().count() <= 24
                && !label.trim().is_empty()
                && (url.starts_with("http://") || url.starts_with("https://"))
                && !url.contains(char::is_whitespace)
        })
}

/// Tier number of a folder named like `1. 漢文 古典` or `99. 온라인 자료`.
pub fn tier_of(folder: &str) -> Option<u32> {
    let (num, rest) = folder.split_once('.')?;
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) || !rest.starts_with(' ') {
        return None;
    }
    num.parse().ok()
}

/// What [`find_source`] found in a file's body.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourceFound {
    /// The source: a URL (cleaned of surrounding punctuation and backticks) or, for a
    /// `Source:` / `출처:` line that names no URL (a book, a notice), its text.
    pub source: Option<String>,
    /// When no source was found but a URL appears inside code (a fenced block or an
    /// inline code span): its 0-based line in the body and the URL.
    pub url_in_code: Option<(usize, String)>,
}

/// A `Source:` / `출처:` line: the label in any case, any spacing around a `:` or a
/// full-width `：`, optionally after a list or quote marker and in bold (`**Source:**`).
/// Returns the value, if the line is one and the value is not empty.
pub fn source_line(line: &str) -> Option<&str> {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| {
        regex::Regex::new(r"(?i)^\s*(?:[-*>]\s+)?(?:\*\*|__)?\s*(?:source|출처)\s*(?:\*\*|__)?\s*[:：]\s*(?:\*\*|__)?\s*(.*?)\s*$")
            .expect("valid regex")
    });
    let v = re.captures(line)?.get(1)?.as_str();
    let v = v.trim_matches(|c: char| c == '*' || c == '_' || c.is_whitespace());
    (!v.is_empty()).then_some(v)
}

/// The line without its inline code spans (text between backticks).
fn outside_code_spans(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(' ');
        } else if !in_code {
            out.push(c);
        } else {
            out.push(' ');
        }
    }
    out
}

/// The source of a file body (see [`SourceFound`]), in this order: the first `Source:` /
/// `출처:` line ([`source_line`]) among the first 30 lines outside code; else the first
/// `http(s)://` URL outside code; else a `Source:` / `출처:` line further down. URLs inside
/// fenced code blocks or inline code spans are examples, not sources.
pub fn find_source(text: &str) -> SourceFound {
    let mut fence: Option<String> = None;
    let mut first_url_out = None;
    let mut late_line = None;
    let mut url_in_code = None;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with("```") || t.starts_with("~~~") {
            let marker: String = t.chars().take(3).collect();
            match &fence {
                Some(m) if *m == marker => fence = None,
                Some(_) => {}
                None => fence = Some(marker),
            }
            continue;
        }
        if fence.is_some() {
            if url_in_code.is_none() {
                url_in_code = first_url(line).map(|u| (n, u));
            }
            continue;
        }
        let outside = outside_code_spans(line);
        if let Some(v) = source_line(&outside) {
            let value = first_url(v).unwrap_or_else(|| v.to_string());
            if n < 30 {
                return SourceFound {
                    source: Some(value),
                    url_in_code: None,
                };
            }
            late_line.get_or_insert(value);
        }
        if first_url_out.is_none() {
            first_url_out = first_url(&outside);
        }
        if url_in_code.is_none() && outside != line {
            url_in_code = first_url(line).map(|u| (n, u));
        }
    }
    match first_url_out.or(late_line) {
        Some(s) => SourceFound {
            source: Some(s),
            url_in_code: None,
        },
        None => SourceFound {
            source: None,
            url_in_code,
        },
    }
}

/// The file's source ([`find_source`]`.source`).
pub fn source_url(text: &str) -> Option<String> {
    find_source(text).source
}

/// The first `http(s)://` URL of `text`, without the punctuation, brackets, quotes or
/// backticks around it (`(https://a.org/x).` → `https://a.org/x`).
fn first_url(text: &str) -> Option<String> {
    let i = text.find("https://").or_else(|| text.find("http://"))?;
    let url: String = text[i..]
        .chars()
        .take_while(|c| {
            !c.is_whitespace()
                && !matches!(
                    c,
                    '>' | '"' | '\'' | ']' | '」' | '』' | '`' | '<' | '*' | '，' | '。' | '、'
                )
        })
        .collect();
    // A `)` closes the URL unless the URL opened it (`…/Rust_(language)`).
    let mut depth = 0i32;
    let mut end = url.len();
    for (k, c) in url.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => {
                end = k;
                break;
            }
            ')' => depth -= 1,
            _ => {}
        }
    }
    let url = url[..end].trim_end_matches(['.', ',', ';', ':', '!', '?']);
    (url.len() > "https://".len()).then(|| url.to_string())
}

/// Copies each rejected file into `dir`, keeping its path relative to `root` (the
/// original stays where it is). Returns the copies made.
pub fn quarantine(root: &Path, rejected: &[PathBuf], dir: &Path) -> Result<Vec<PathBuf>> {
    let mut made = Vec::new();
    for p in rejected {
        let rel = p.strip_prefix(root).unwrap_or(p);
        let to = dir.join(rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| BuildError::io("creating", parent, e))?;
        }
        if let Err(source) = std::fs::copy(p, &to) {
            return Err(BuildError::Copy {
                from: p.clone(),
                to,
                source,
            });
        }
        made.push(to);
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_from_folder_names() {
        assert_eq!(tier_of("1. 漢文 古典"), Some(1));
        assert_eq!(tier_of("99. 온라인 자료 (정리 X)"), Some(99));
        assert_eq!(tier_of("misc"), None);
        assert_eq!(tier_of("v1.2 notes"), None);
    }

    #[test]
    fn source_lines_and_fallback_urls() {
        assert_eq!(
            source_url("Source: https://a.org/x\n\ntext").as_deref(),
            Some("https://a.org/x")
        );
        assert_eq!(
            source_url("출처: https://b.kr/y\n").as_deref(),
            Some("https://b.kr/y")
        );
        assert_eq!(
            source_url("see (https://c.net/z) here").as_deref(),
            Some("https://c.net/z")
        );
        assert_eq!(source_url("no link"), None);
    }

    #[test]
    fn leading_source_lines_are_metadata_not_text() {
        let t = "출처: https://a.kr/x\n원문(위키문헌): https://ko.wikisource.org/y\n\n# 제목\n\n본문 https://z.org\n";
        assert_eq!(
            &t[skip_source_lines(t, 0)..],
            "\n# 제목\n\n본문 https://z.org\n"
        );
        assert_eq!(
            skip_source_lines("Text first.\nSource: https://a.org\n", 0),
            0
        );
    }

    #[test]
    fn a_named_source_line_became_its_own_chunk() {
        // Session 31 (issue 19's knowledge-base scenario): `출처 : 고객센터 공지` names its
        // source without a URL; it stayed in the text as a 12-character chunk of its own,
        // which dense search ranked first for unrelated questions ("webhook signature
        // verification", "회원 등급별 혜택").
        let t = "출처 : 고객센터 공지\n\n# 포인트 적립\n\n구매 금액의 1%가 적립됩니다.\n";
        assert_eq!(
            &t[skip_source_lines(t, 0)..],
            "\n# 포인트 적립\n\n구매 금액의 1%가 적립됩니다.\n"
        );
        let t = "**Source:** Customer service notice, 2026\nText.\n";
        assert_eq!(&t[skip_source_lines(t, 0)..], "Text.\n");
        // Only leading lines: a source line after the text starts stays text.
        let t = "Text first.\n출처: 고객센터 공지\n";
        assert_eq!(skip_source_lines(t, 0), 0);
    }

    #[test]
    fn front_matter_is_parsed_and_a_leading_divider_is_not() {
        let t = "---\ntitle: Plan\nprovenance: ai-draft\nexpires: 2027-01-01\n---\nbody";
        let (fm, body) = front_matter(t, 0);
        assert_eq!(fm.title.as_deref(), Some("Plan"));
        assert_eq!(fm.provenance.as_deref(), Some("ai-draft"));
        assert_eq!(&t[body..], "body");
        let t = "---\n\nSome text: with a colon\n\n---\n";
        assert_eq!(front_matter(t, 0).1, 0);
    }

    #[test]
    fn crlf_front_matter_with_cjk_values_panicked() {
        // Counting one byte per CRLF put the body offset 8 bytes early: inside `書`.
        let t = "---\r\ntitle: 論語\r\nauthor: 孔子\r\nversion: 1\r\nupdated: 2026-01-01\r\nlang: lzh\r\nsource: 書\r\n---\r\nSource: https://a.org/x\r\n\r\n# 學而\r\n";
        let (fm, body) = front_matter(t, 0);
        assert_eq!(fm.title.as_deref(), Some("論語"));
        assert_eq!(fm.source.as_deref(), Some("書"));
        assert_eq!(&t[body..], "Source: https://a.org/x\r\n\r\n# 學而\r\n");
        let mut findings = Vec::new();
        let f = check_file("a.md", t.as_bytes(), CheckOptions::default(), &mut findings).unwrap();
        assert_eq!(&f.text[f.body_byte..], "\r\n# 學而\r\n");
        assert_eq!(
            f.body_char,
            t.chars().count() - "\r\n# 學而\r\n".chars().count()
        );
        assert!(findings.is_empty(), "{findings:?}");
    }

    #[test]
    fn crlf_front_matter_leaked_closing_dashes_into_the_body() {
        let t = "---\r\ntitle: Plan\r\nsource: https://a.org/x\r\n---\r\nbody\r\n";
        let (fm, body) = front_matter(t, 0);
        assert_eq!(fm.title.as_deref(), Some("Plan"));
        assert_eq!(&t[body..], "body\r\n");
        // With a BOM, and closed at the very end of the file without a line break.
        let t = "\u{feff}---\r\ntitle: Plan\r\n---";
        assert_eq!(front_matter(t, 3).1, t.len());
    }

    proptest::proptest! {
        /// Any mix of LF and CRLF gives the same fields, and a body offset that starts
        /// exactly after the closing `---` line.
        #[test]
        fn front_matter_offsets_are_exact_with_any_line_breaks(
            values in proptest::collection::vec("[a-z論語書孔子 ]{0,6}", 1..6),
            crlf in proptest::collection::vec(proptest::bool::ANY, 8),
        ) {
            let keys = ["title", "author", "version", "lang", "doc_id", "x"];
            let eol = |i: usize| if crlf[i % crlf.len()] { "\r\n" } else { "\n" };
            let mut t = format!("---{}", eol(0));
            for (i, v) in values.iter().enumerate() {
                t += &format!("{}: {v}{}", keys[i], eol(i + 1));
            }
            t += &format!("---{}", eol(7));
            let head = t.len();
            t += "body 本文";
            let (fm, body) = front_matter(&t, 0);
            proptest::prop_assert_eq!(body, head);
            let lf = t.replace("\r\n", "\n");
            proptest::prop_assert_eq!(fm, front_matter(&lf, 0).0);
        }
    }

    #[cfg(unix)]
    #[test]
    fn fifo_named_md_is_skipped_with_a_warning_not_read() {
        // Opened for a blocking read, a FIFO with no writer never returns: the read must
        // see it is not a regular file. The watchdog turns a hang into a failure.
        use std::os::unix::ffi::OsStrExt;
        let tmp = tempfile::tempdir().unwrap();
        let fifo = tmp.path().join("pipe.md");
        let c = std::ffi::CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || tx.send(read_regular(&fifo).map(|r| r.is_err())));
        let got = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("reading a FIFO hung for 20 s");
        assert!(got.unwrap(), "a FIFO was read as a regular file");

        let regular = tmp.path().join("a.md");
        std::fs::write(&regular, "text").unwrap();
        assert_eq!(read_regular(&regular).unwrap().unwrap(), b"text");
    }
}

//! Chunk store (`chunks.bin`): each chunk's metadata and text, addressable by doc id so
//! that a later engine can fetch single records with HTTP range requests.
//!
//! Layout (little-endian):
//! ```text
//! magic "JKCH" | u32 version | u32 count | u64 offset[count + 1] | records
//! ```
//! Record `i` is the UTF-8 JSON of a [`ChunkRecord`] at bytes `offset[i]..offset[i+1]`
//! of the records area.
//!
//! Records `0..counts.chunks` are the indexed chunks (doc ids of the postings and rows of
//! the vectors). A parent-child bundle appends its parent sections after them
//! (`chunking.parents` in the manifest): returned as results, never indexed.

use serde::{Deserialize, Serialize};

use crate::bytes::Bytes;
use crate::codec::{put_header, Reader};
use crate::error::{FormatError, Result};

/// File name of the chunk store in a bundle.
pub const CHUNKS_FILE: &str = "chunks.bin";
const MAGIC: &[u8; 4] = b"JKCH";
const VERSION: u32 = 1;

/// One chunk: a piece of a source file that is indexed and returned as a search result.
/// `Default` is an empty record (empty strings, no heading path, offsets 0, every optional
/// field absent), for code and tests that set only the fields they need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChunkRecord {
    /// Stable id: hex of SHA-256 over (source path, section index, position in section),
    /// first 16 hex digits. Unchanged when other files change.
    pub id: String,
    /// Source file path relative to the corpus root, `/`-separated.
    pub source: String,
    /// The file's `Source:` / `출처:` URL, or its first URL, if any.
    pub source_url: Option<String>,
    /// Tier from the tier folder name (`1. 漢文 古典` → 1); lower is better curated.
    pub tier: Option<u32>,
    /// Markdown headings above the chunk, outermost first.
    pub heading_path: Vec<String>,
    /// Detected language: `ko`, `zh`, `ja`, `en` or `other`.
    pub lang: String,
    /// Index of the `---`-delimited section within the file (0-based).
    pub section: u32,
    /// Start offset in the file, in Unicode scalar values (chars), inclusive.
    pub start: usize,
    /// End offset in the file, in chars, exclusive.
    pub end: usize,
    /// The chunk text (including the overlap taken from the previous chunk).
    pub text: String,
    /// Front matter `title` of the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Front matter `author`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub author: Option<String>,
    /// Front matter `version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Front matter `updated` (ISO 8601 date), else the file's modification date (UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated: Option<String>,
    /// Front matter `expires` (ISO 8601 date).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires: Option<String>,
    /// Front matter `provenance` (`human`, or `ai-draft` when the build allowed it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provenance: Option<String>,
    /// Document id shared by the versions of one document: front matter `doc_id`, else
    /// the file name without a `_v2` / `-v2` / `.v2` version suffix (see the builder's
    /// `versions` module). Absent when the file is not one of several versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub doc_id: Option<String>,
    /// True for chunks of an older version of a document (a newer version is in the
    /// bundle): kept in the bundle's archive, excluded from search unless asked for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archived: bool,
    /// Parent-child bundles: on an indexed child chunk, the id of its parent section; on
    /// a search result, the id of the parent section returned. `None` otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// Parent-child bundles, child chunks only: the parent's record index in `chunks.bin`
    /// (parents follow the indexed chunks; see [`crate::manifest::ChunkingInfo::parents`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_doc: Option<u32>,
    /// Contradiction candidates this chunk is part of, found when the bundle was built or
    /// updated (the builder's `conflicts` detector with its default thresholds, as `jikji
    /// conflicts` runs it; bundles with vectors only). Empty, and absent from the JSON,
    /// when there are none, in bundles without vectors and in bundles written before the
    /// field existed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conflicts: Vec<ConflictNote>,
}

/// One side of a known contradiction candidate, as recorded on a chunk
/// ([`ChunkRecord::conflicts`]): another chunk of another source states a different value
/// of the same thing.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConflictNote {
    /// The other chunk's `id`.
    pub with: String,
    /// The other chunk's `source` (path relative to the corpus root).
    pub source: String,
    /// Which side is newer by front matter `updated` (else the file's modification date):
    /// `this`, `other`, or `unknown` when the dates are equal or missing.
    pub newer: String,
    /// What they disagree on (`timeout`, or `timeout / 설정값` across languages).
    pub subject: String,
    /// This chunk's values, normalised (`60 s`, `6 months`, `2026-07-01`).
    pub this: Vec<String>,
    /// The other chunk's values.
    pub other: Vec<String>,
}

/// A chunk record's JSON (`crate::json`), as the serde attributes above say: read into a
/// default record through one table (`Obj::fill`: less wasm than a call and an error path
/// per field; sixth and ninth rounds of docs/design/wasm-size.md).
impl crate::json::Record for ChunkRecord {
    const FIELDS: crate::json::Fields<ChunkRecord> = crate::json::json_fields!(ChunkRecord {
        "id" Error id,
        "source" Error source,
        "source_url" Error source_url,
        "tier" Error tier,
        "heading_path" Error heading_path,
        "lang" Error lang,
        "section" Error section,
        "start" Error start,
        "end" Error end,
        "text" Error text,
        "title" Error title,
        "author" Error author,
        "version" Error version,
        "updated" Error updated,
        "expires" Error expires,
        "provenance" Error provenance,
        "doc_id" Error doc_id,
        "archived" Keep archived,
        "parent_id" Error parent_id,
        "parent_doc" Error parent_doc,
        "conflicts" Keep conflicts,
    });
    fn init() -> Self {
        ChunkRecord::default()
    }
}
crate::json::record_json!(ChunkRecord);

/// A conflict note's JSON (`crate::json`), as the serde derive above writes it.
impl crate::json::Record for ConflictNote {
    const FIELDS: crate::json::Fields<ConflictNote> = crate::json::json_fields!(ConflictNote {
        "with" Error with,
        "source" Error source,
        "newer" Error newer,
        "subject" Error subject,
        "this" Error this,
        "other" Error other,
    });
    fn init() -> Self {
        ConflictNote::default()
    }
}
crate::json::record_json!(ConflictNote);

impl ChunkRecord {
    /// The text the lexical index holds for this chunk: its front matter `title` and each
    /// heading of its `heading_path` that the chunk text does not already contain, one per
    /// line, then `text`. A chunk deep in a section thus still matches the words of the
    /// document title and the headings above it (as a search page's title field would),
    /// and the first chunk of a section, which holds the heading line itself, does not count
    /// it twice. Only BM25 sees this; embeddings and phrase matching use `text`.
    pub fn indexed_text(&self) -> std::borrow::Cow<'_, str> {
        let context: Vec<&str> = self
            .title
            .iter()
            .chain(self.heading_path.iter())
            .map(|h| h.trim())
            .filter(|h| !h.is_empty() && !crate::strs::contains(&self.text, h))
            .collect();
        if context.is_empty() {
            return std::borrow::Cow::Borrowed(&self.text);
        }
        let mut s = crate::strs::join(&context, "\n");
        s.push('\n');
        s.push_str(&self.text);
        std::borrow::Cow::Owned(s)
    }
}

/// Serialises chunk records into `chunks.bin` bytes.
pub fn write_chunks(records: &[ChunkRecord]) -> Result<Vec<u8>> {
    let mut json = Vec::with_capacity(records.len());
    for r in records {
        json.push(record_json(r)?);
    }
    Ok(write_raw_records(json.iter().map(Vec::as_slice)))
}

/// Serialises records already encoded as JSON (as [`ChunkStore::raw`] returns them) into
/// `chunks.bin` bytes; also the body of a paged bundle's chunk page.
pub fn write_raw_records<'a>(records: impl Iterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut body = Vec::new();
    let mut offsets = vec![];
    for r in records {
        offsets.push(body.len() as u64);
        body.extend_from_slice(r);
    }
    let count = offsets.len();
    offsets.push(body.len() as u64);
    let mut out = Vec::with_capacity(12 + offsets.len() * 8 + body.len());
    put_header(&mut out, MAGIC, VERSION);
    out.extend_from_slice(&(count as u32).to_le_bytes());
    for o in offsets {
        out.extend_from_slice(&o.to_le_bytes());
    }
    out.extend(body);
    out
}

/// Writes `chunks.bin` to a file as records come, holding only the offsets (8 bytes per
/// record): records and parent sections go to two temporary files (the caller's, e.g. in a
/// temp folder), and [`ChunksFileWriter::finish`] writes the store, each record passed
/// through a patch (fields only known once every record is in: `parent_doc`, conflict
/// notes). Its bytes equal [`write_chunks`]'s of the same (patched) records.
#[cfg(not(target_arch = "wasm32"))]
pub struct ChunksFileWriter {
    records: std::io::BufWriter<std::fs::File>,
    parents: std::io::BufWriter<std::fs::File>,
    lens: Vec<u32>,
    parent_lens: Vec<u32>,
    path: std::path::PathBuf,
}

#[cfg(not(target_arch = "wasm32"))]
impl ChunksFileWriter {
    /// A writer whose records and parents are held in `records` and `parents` (empty,
    /// writable and readable files: e.g. `tempfile::tempfile()`); `path` names them in
    /// errors.
    pub fn new(
        records: std::fs::File,
        parents: std::fs::File,
        path: impl Into<std::path::PathBuf>,
    ) -> Self {
        ChunksFileWriter {
            records: std::io::BufWriter::with_capacity(1 << 20, records),
            parents: std::io::BufWriter::with_capacity(1 << 16, parents),
            lens: Vec::new(),
            parent_lens: Vec::new(),
            path: path.into(),
        }
    }

    /// Appends the next indexed chunk (doc id = the number of records before it). Errors:
    /// I/O, or a record whose JSON is over 4 GiB.
    pub fn push(&mut self, r: &ChunkRecord) -> Result<()> {
        let json = record_json(r)?;
        Self::put(&mut self.records, &mut self.lens, &json, &self.path)
    }

    /// Appends the next parent section (stored after every indexed chunk, in order).
    pub fn push_parent(&mut self, r: &ChunkRecord) -> Result<()> {
        let json = record_json(r)?;
        Self::put(&mut self.parents, &mut self.parent_lens, &json, &self.path)
    }

    fn put(
        w: &mut std::io::BufWriter<std::fs::File>,
        lens: &mut Vec<u32>,
        json: &[u8],
        path: &std::path::Path,
    ) -> Result<()> {
        use std::io::Write;
        let len = u32::try_from(json.len()).map_err(|_| {
            FormatError::InvalidInput(format!("a chunk record of {} bytes", json.len()))
        })?;
        w.write_all(json).map_err(|e| FormatError::io(path, e))?;
        lens.push(len);
        Ok(())
    }

    /// Indexed chunks pushed so far.
    pub fn len(&self) -> usize {
        self.lens.len()
    }

    /// True before the first [`ChunksFileWriter::push`].
    pub fn is_empty(&self) -> bool {
        self.lens.is_empty()
    }

    /// Parent sections pushed so far.
    pub fn parents(&self) -> usize {
        self.parent_lens.len()
    }

    /// Writes `chunks.bin` into `out` (an empty file, from its start): records in order,
    /// then the parents, each record's JSON replaced by what `patch(doc, json)` returns
    /// when it returns `Some` (doc ids of parents follow the records'). Returns `out`,
    /// flushed. Reads the two temporary files back once, sequentially. Errors: I/O
    /// (naming `path`), what `patch` returns, a store over the format's limits.
    pub fn finish(self, out: std::fs::File, patch: &mut RecordPatch<'_>) -> Result<std::fs::File> {
        use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
        let path = self.path;
        let io = |e| FormatError::io(&path, e);
        let count = self.lens.len() + self.parent_lens.len();
        let count32 = u32::try_from(count)
            .map_err(|_| FormatError::InvalidInput(format!("{count} chunk records")))?;
        let table_end = 12 + 8 * (count as u64 + 1);
        let mut offsets = Vec::with_capacity(count + 1);
        let mut w = BufWriter::with_capacity(1 << 20, out);
        w.seek(SeekFrom::Start(table_end)).map_err(io)?;
        let mut at = 0u64;
        let mut doc = 0u32;
        let mut buf = Vec::new();
        for (file, lens) in [
            (self.records, &self.lens),
            (self.parents, &self.parent_lens),
        ] {
            let mut file = file.into_inner().map_err(|e| io(e.into_error()))?;
            file.seek(SeekFrom::Start(0)).map_err(io)?;
            let mut r = BufReader::with_capacity(1 << 20, file);
            for &len in lens {
                buf.resize(len as usize, 0);
                r.read_exact(&mut buf).map_err(io)?;
                offsets.push(at);
                let rec = match patch(doc, &buf)? {
                    Some(p) => p,
                    None => std::mem::take(&mut buf),
                };
                w.write_all(&rec).map_err(io)?;
                at += rec.len() as u64;
                buf = rec;
                doc += 1;
            }
        }
        offsets.push(at);
        w.seek(SeekFrom::Start(0)).map_err(io)?;
        let mut head = Vec::with_capacity(12);
        put_header(&mut head, MAGIC, VERSION);
        head.extend_from_slice(&count32.to_le_bytes());
        w.write_all(&head).map_err(io)?;
        for o in offsets {
            w.write_all(&o.to_le_bytes()).map_err(io)?;
        }
        w.flush().map_err(io)?;
        w.into_inner().map_err(|e| io(e.into_error()))
    }
}

/// What [`ChunksFileWriter::finish`] calls on each record: `(doc, its JSON)` → the JSON to
/// store instead, or `None` to keep it.
#[cfg(not(target_arch = "wasm32"))]
pub type RecordPatch<'a> = dyn FnMut(u32, &[u8]) -> Result<Option<Vec<u8>>> + 'a;

/// A record's JSON as [`write_chunks`] stores it.
pub fn record_json(r: &ChunkRecord) -> Result<Vec<u8>> {
    serde_json::to_vec(r).map_err(|source| FormatError::Json {
        file: CHUNKS_FILE.into(),
        source,
    })
}

/// Read side of the chunk store; records are decoded on access. Its bytes are in memory
/// or a mapped file ([`Bytes`]).
pub struct ChunkStore {
    bytes: Bytes,
    offsets: Vec<u64>,
    body_start: usize,
}

impl ChunkStore {
    /// Parses the header and offset table of `chunks.bin`. Errors on bad magic, version,
    /// a chunk count whose offset table the file cannot hold (checked before allocating),
    /// non-monotonic offsets or offsets past the end of the file.
    pub fn open(bytes: impl Into<Bytes>) -> Result<Self> {
        let bytes = bytes.into();
        let mut r = Reader::new(CHUNKS_FILE, &bytes, 0);
        r.header(MAGIC, VERSION)?;
        let count = r.u32()? as usize;
        // The offset table is `count + 1` u64s: a count the file cannot hold is corrupt,
        // and is rejected before anything is allocated for it.
        let table = (count as u64 + 1) * 8;
        if table > (bytes.len() - r.pos()) as u64 {
            return Err(r.corrupt(format!(
                "chunk count {count} needs a {table}-byte offset table, file has {} bytes left",
                bytes.len() - r.pos()
            )));
        }
        let mut offsets = Vec::with_capacity(count + 1);
        for _ in 0..=count {
            offsets.push(r.u64()?);
        }
        let body_start = r.pos();
        let body_len = (bytes.len() - body_start) as u64;
        if offsets.windows(2).any(|w| w[0] > w[1])
            || offsets.last().copied().unwrap_or(0) != body_len
        {
            return Err(FormatError::corrupt(
                CHUNKS_FILE,
                12,
                "offset table does not match the records",
            ));
        }
        Ok(ChunkStore {
            bytes,
            offsets,
            body_start,
        })
    }

    /// The store of its first `n` records only (all of them if it has `n` or fewer): a
    /// parent-child store's indexed chunks, without the parent sections after them.
    pub fn first(mut self, n: usize) -> Self {
        self.offsets.truncate(n + 1);
        self
    }

    /// Number of chunks.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True if the store holds no chunks.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The JSON bytes of record `doc` as stored. Errors: DataCorruption if out of range.
    pub fn raw(&self, doc: u32) -> Result<&[u8]> {
        let i = doc as usize;
        if i >= self.len() {
            return Err(FormatError::corrupt(
                CHUNKS_FILE,
                0,
                format!("chunk {doc} out of range ({} chunks)", self.len()),
            ));
        }
        let a = self.body_start + self.offsets[i] as usize;
        let b = self.body_start + self.offsets[i + 1] as usize;
        Ok(&self.bytes[a..b])
    }

    /// Decodes record `doc` (with [`crate::json`]). Errors: DataCorruption if out of range
    /// or not a valid record, at the byte offset in this store of the fault.
    pub fn get(&self, doc: u32) -> Result<ChunkRecord> {
        let bytes = self.raw(doc)?;
        let a = (self.body_start + self.offsets[doc as usize] as usize) as u64;
        crate::json::from_slice(bytes, CHUNKS_FILE).map_err(|e| match e {
            FormatError::DataCorruption {
                file,
                offset,
                message,
            } => FormatError::DataCorruption {
                file,
                offset: a + offset,
                message: format!("record {doc}: {message}"),
            },
            e => e,
        })
    }

    /// Decodes only the fields of record `doc` that `T` declares (others are skipped
    /// unparsed), e.g. a struct of `archived` and `expires` for a filter. Errors as
    /// [`ChunkStore::get`].
    pub fn get_as<T: serde::de::DeserializeOwned>(&self, doc: u32) -> Result<T> {
        let bytes = self.raw(doc)?;
        let a = self.body_start + self.offsets[doc as usize] as usize;
        serde_json::from_slice(bytes)
            .map_err(|e| FormatError::corrupt(CHUNKS_FILE, a as u64, format!("record {doc}: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The streaming writer's file equals `write_chunks` of the patched records, parents
    /// after the records; a patch may change a record's length.
    #[test]
    fn chunks_file_writer_equals_write_chunks() {
        let rec = |i: usize| ChunkRecord {
            id: format!("c{i}"),
            source: "論語.md".into(),
            text: "學而時習之".repeat(i % 5),
            ..ChunkRecord::default()
        };
        for (n, p) in [(0, 0), (1, 0), (7, 3), (300, 2)] {
            let records: Vec<ChunkRecord> = (0..n).map(rec).collect();
            let parents: Vec<ChunkRecord> = (0..p).map(|i| rec(1000 + i)).collect();
            let mut w = ChunksFileWriter::new(
                tempfile::tempfile().unwrap(),
                tempfile::tempfile().unwrap(),
                "chunks.tmp",
            );
            for r in &records {
                w.push(r).unwrap();
            }
            for r in &parents {
                w.push_parent(r).unwrap();
            }
            assert_eq!((w.len(), w.parents()), (n, p));
            // Every third record gets a parent doc (the patch of a parent-child build).
            let mut expected = records.clone();
            for (i, r) in expected.iter_mut().enumerate() {
                if i.is_multiple_of(3) {
                    r.parent_doc = Some((n + i % p.max(1)) as u32);
                }
            }
            let mut out = w
                .finish(tempfile::tempfile().unwrap(), &mut |doc, json| {
                    let mut r: ChunkRecord = serde_json::from_slice(json).unwrap();
                    let i = doc as usize;
                    if i < n && i.is_multiple_of(3) {
                        r.parent_doc = Some((n + i % p.max(1)) as u32);
                        return Ok(Some(record_json(&r).unwrap()));
                    }
                    Ok(None)
                })
                .unwrap();
            use std::io::{Read, Seek};
            out.rewind().unwrap();
            let mut got = Vec::new();
            out.read_to_end(&mut got).unwrap();
            let want = write_chunks(&[expected, parents].concat()).unwrap();
            assert_eq!(got, want, "{n} records, {p} parents");
            let mapped = ChunkStore::open(crate::bytes::Bytes::map(&out).unwrap()).unwrap();
            assert_eq!(mapped.len(), n + p);
        }
    }

    #[test]
    fn indexed_text_adds_title_and_headings_not_in_text() {
        let mut rec = ChunkRecord {
            heading_path: vec!["論語".into(), "學而篇".into()],
            text: "## 學而篇\n\n學而時習之".into(),
            title: Some("The Analects".into()),
            ..ChunkRecord::default()
        };
        // The heading line is in the text: only the title and the outer heading are added.
        assert_eq!(
            rec.indexed_text(),
            "The Analects\n論語\n## 學而篇\n\n學而時習之"
        );
        rec.text = "不亦說乎".into();
        assert_eq!(rec.indexed_text(), "The Analects\n論語\n學而篇\n不亦說乎");
        rec.title = None;
        rec.heading_path.clear();
        assert!(matches!(
            rec.indexed_text(),
            std::borrow::Cow::Borrowed("不亦說乎")
        ));
    }

    #[test]
    fn roundtrip() {
        let rec = ChunkRecord {
            id: "ab".into(),
            source: "1. x/a.md".into(),
            source_url: Some("https://e.org".into()),
            tier: Some(1),
            heading_path: vec!["# 論語".into()],
            lang: "zh".into(),
            section: 0,
            start: 3,
            end: 10,
            text: "學而時習之".into(),
            title: None,
            author: Some("孔子".into()),
            version: None,
            updated: None,
            expires: None,
            provenance: None,
            doc_id: None,
            archived: false,
            parent_id: None,
            parent_doc: None,
            conflicts: vec![ConflictNote {
                with: "cd".into(),
                source: "2. y/b.md".into(),
                newer: "this".into(),
                subject: "timeout".into(),
                this: vec!["60 s".into()],
                other: vec!["30 s".into()],
            }],
        };
        let bytes = write_chunks(&[rec.clone(), rec.clone()]).unwrap();
        let s = ChunkStore::open(bytes).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s.get(1).unwrap(), rec);
        assert!(s.get(2).is_err());
    }
}

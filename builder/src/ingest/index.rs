//! Index stage: chunk records → the term dictionary (`terms.fst`), BM25 postings
//! (`postings.bin`) and the Hangul ↔ Hanja reading table (`hanja.fst`).
//!
//! The postings are accumulated by [`PostingsWriter`] (compact, delta-coded per term) and
//! the chunks are analyzed on all cores in batches, so that a 1M-chunk corpus indexes in
//! bounded time and a few bytes per posting (`docs/design/scale-1m.md`); given a memory
//! budget ([`PostingsWriter::with_spill`]) they go to sorted run files past it, merged
//! term by term into `postings.bin` at the end (SPIMI), written to a file as it goes.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};

use jikji_format::analyzer::{self, Analyzer, Script};
use jikji_format::codec::put_varint;
use jikji_format::hanja::write_hanja_fst;
use jikji_format::postings::ListsWriter;
use jikji_format::ChunkRecord;

use super::BundleSettings;
use crate::error::{BuildError, Result};

/// The lexical files of a bundle.
pub struct Indexed {
    /// `terms.fst` bytes.
    pub terms_fst: Vec<u8>,
    /// `postings.bin` bytes (a mapped temporary file in a streamed build).
    pub postings: jikji_format::bytes::Bytes,
    /// Number of distinct terms.
    pub terms: usize,
    /// `hanja.fst` bytes: `None` when `settings.hanja` is off or the corpus has no Han or
    /// Hangul text.
    pub hanja: Option<Vec<u8>>,
}

/// Indexes `records` (doc id = index) with the current analyzer version and
/// `settings.analyzer`, and makes `hanja.fst` if `settings.hanja`.
pub fn index(records: &[ChunkRecord], settings: &BundleSettings) -> Result<Indexed> {
    let analyzer = Analyzer::new(analyzer::ANALYZER_VERSION, settings.analyzer)?;
    let (terms_fst, postings, terms) = index_records(records, &analyzer)?;
    let hanja = if settings.hanja {
        hanja_table(records, &analyzer)?
    } else {
        None
    };
    Ok(Indexed {
        terms_fst,
        postings: postings.into(),
        terms,
        hanja,
    })
}

/// Builds the term dictionary and postings of `records` (in order: doc id = index) with
/// `analyzer`, each chunk indexed under [`ChunkRecord::indexed_text`] (title and heading
/// path, then text). Returns `(terms.fst, postings.bin, number of terms)`.
/// The chunks are analyzed on all cores ([`crate::ingest::default_threads`]) in batches of
/// [`ANALYZE_BATCH`] and added in doc order, so the bytes do not depend on the number of
/// threads.
pub fn index_records(
    records: &[ChunkRecord],
    analyzer: &Analyzer,
) -> Result<(Vec<u8>, Vec<u8>, usize)> {
    let mut index = PostingsWriter::new();
    for batch in records.chunks(ANALYZE_BATCH) {
        for terms in analyze_records(batch, analyzer) {
            index.add_doc(&terms);
        }
    }
    let (terms_fst, terms, postings) = index.finish_to(Vec::new())?;
    Ok((terms_fst, postings, terms))
}

/// Chunks analyzed per batch by [`index_records`] (the batch's terms are held at once).
pub const ANALYZE_BATCH: usize = 4096;

/// One term's postings as they accumulate: `(doc_delta, tf)` varint pairs, the first
/// delta from doc 0, exactly the bytes of its list in `postings.bin` after the `df` varint
/// (for the docs added since the last run was written).
#[derive(Default)]
struct TermList {
    bytes: Vec<u8>,
    df: u32,
    first: u32,
    last: u32,
}

/// Estimated bytes a term costs in [`PostingsWriter`] besides its key and its list's
/// bytes: the hash map's entry (24 B + control byte, at its load factor), the `TermList`
/// (40 B, with the vector's growth slack), and the allocator's overhead of the two
/// allocations (key, list).
const TERM_OVERHEAD: usize = 128;

/// Accumulates analyzed chunks and writes `terms.fst` + `postings.bin` (format 1 layout,
/// FORMAT.md), byte for byte what `jikji_format::postings::LexicalIndexWriter` writes,
/// in about a quarter of its memory: each term's list is kept delta- and varint-coded
/// (2–3 bytes per posting instead of 8 plus the ordered map's key comparisons), terms are
/// looked up by hash and sorted once per run.
///
/// A writer made by [`PostingsWriter::with_spill`] holds at most about `budget` bytes of
/// postings (SPIMI): past it, its terms are sorted and written to a run file in the spill
/// folder and the memory is cleared; [`PostingsWriter::finish_to`] merges the runs (and
/// what is still in memory) term by term into `postings.bin`, reading one entry per run
/// at a time. What stays in memory for the whole build is the chunk lengths (4 B per
/// chunk) and, at the end, `terms.fst`. The bytes do not depend on the budget.
/// Run files are removed by `finish_to` and when the writer is dropped.
#[derive(Default)]
pub struct PostingsWriter {
    ids: HashMap<Box<str>, u32>,
    lists: Vec<TermList>,
    doc_lens: Vec<u32>,
    tf: HashMap<u32, u32>,
    /// Estimated bytes held by `ids` and `lists`.
    held: usize,
    spill: Option<Spill>,
}

/// Where and when a [`PostingsWriter`] writes its runs.
struct Spill {
    budget: usize,
    dir: PathBuf,
    /// Run files written, in doc order (during a merge pass, also the pass's files not
    /// yet removed: every file [`Drop`] has to remove).
    runs: Vec<PathBuf>,
    /// Run files created so far (names them).
    made: usize,
    /// Runs merged at once: more runs are first merged in groups of this many.
    fan_in: usize,
    /// Distinguishes the run files of writers sharing a folder.
    tag: String,
    /// The first failure to write a run: the writer has dropped its postings since and
    /// [`PostingsWriter::finish_to`] returns it.
    failed: Option<BuildError>,
}

impl PostingsWriter {
    /// An empty writer without a memory budget: every posting is held until
    /// [`PostingsWriter::finish`] (no files).
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty writer that holds about `budget_bytes` of postings at most (estimated: list
    /// bytes, term keys and their per-term cost; not the chunk lengths, 4 B per chunk):
    /// past it, after an [`add_doc`](Self::add_doc), it writes a sorted run file
    /// (`jikji-postings-*.run`) to `dir` and clears its memory. `dir` must exist and is
    /// the caller's (e.g. a `tempfile::TempDir`); only the writer's own run files are
    /// written and removed there.
    pub fn with_spill(budget_bytes: usize, dir: PathBuf) -> Self {
        static WRITERS: AtomicU64 = AtomicU64::new(0);
        let tag = format!(
            "{}-{}",
            std::process::id(),
            WRITERS.fetch_add(1, AtomicOrdering::Relaxed)
        );
        let mut w = Self::default();
        w.spill = Some(Spill {
            budget: budget_bytes,
            dir,
            runs: Vec::new(),
            made: 0,
            fan_in: MAX_FAN_IN,
            tag,
            failed: None,
        });
        w
    }

    /// Adds the next chunk (doc id = the number of chunks added before it) with its
    /// analyzed terms (repetitions count as term frequency). Returns the doc id.
    ///
    /// With a budget ([`with_spill`](Self::with_spill)) this may write a run file; an I/O
    /// error there is not returned here but by [`finish_to`](Self::finish_to) (the writer
    /// then drops its postings and only counts chunks: see [`failed`](Self::failed)).
    pub fn add_doc(&mut self, terms: &[String]) -> u32 {
        let doc = self.doc_lens.len() as u32;
        self.doc_lens.push(terms.len() as u32);
        if self.failed() {
            return doc;
        }
        self.tf.clear();
        for t in terms {
            let id = match self.ids.get(t.as_str()) {
                Some(&id) => id,
                None => {
                    let id = self.lists.len() as u32;
                    self.ids.insert(t.as_str().into(), id);
                    self.lists.push(TermList::default());
                    self.held += t.len() + TERM_OVERHEAD;
                    id
                }
            };
            *self.tf.entry(id).or_default() += 1;
        }
        for (&id, &n) in &self.tf {
            let l = &mut self.lists[id as usize];
            let cap = l.bytes.capacity();
            let prev = if l.df == 0 {
                l.first = doc;
                0
            } else {
                l.last
            };
            put_varint(&mut l.bytes, u64::from(doc - prev));
            put_varint(&mut l.bytes, u64::from(n));
            l.df += 1;
            l.last = doc;
            self.held += l.bytes.capacity() - cap;
        }
        if let Some(spill) = &mut self.spill {
            if self.held > spill.budget {
                if let Err(e) = write_run(spill, &mut self.ids, &mut self.lists) {
                    spill.failed = Some(e);
                }
                self.ids = HashMap::new();
                self.lists = Vec::new();
                self.held = 0;
            }
        }
        doc
    }

    /// True once writing a run file failed (the error is returned by
    /// [`finish_to`](Self::finish_to)): a caller may stop adding chunks early.
    pub fn failed(&self) -> bool {
        self.spill.as_ref().is_some_and(|s| s.failed.is_some())
    }

    /// Number of chunks added.
    pub fn num_docs(&self) -> usize {
        self.doc_lens.len()
    }

    /// Number of run files written so far (0 for a writer from [`new`](Self::new)).
    pub fn num_runs(&self) -> usize {
        self.spill.as_ref().map_or(0, |s| s.runs.len())
    }

    /// Number of distinct terms held in memory: all terms so far when no run has been
    /// written; the terms since the last run otherwise (the corpus's count is what
    /// [`finish_to`](Self::finish_to) returns).
    pub fn num_terms(&self) -> usize {
        self.lists.len()
    }

    /// Serialises into `(terms.fst bytes, postings.bin bytes)`, terms in byte order:
    /// [`finish_to`](Self::finish_to) into a `Vec`.
    pub fn finish(self) -> Result<(Vec<u8>, Vec<u8>)> {
        let (terms_fst, _, postings) = self.finish_to(Vec::new())?;
        Ok((terms_fst, postings))
    }

    /// Writes `postings.bin` to `out` as it goes (many small writes: give it a
    /// `BufWriter`; it is flushed) and returns `(terms.fst bytes, number of distinct
    /// terms, out)`. The lists are merged term by term from the run files (one entry of
    /// each at a time, in run order, which is doc order) and the postings still in memory;
    /// the run files are removed. Errors: the failure of an earlier run write, I/O on a
    /// run file ([`BuildError::Io`]), writing `out` ([`jikji_format::FormatError::Io`] for
    /// `postings.bin`, wrapped in [`BuildError::Format`]).
    pub fn finish_to<W: Write>(mut self, out: W) -> Result<(Vec<u8>, usize, W)> {
        let runs = match &mut self.spill {
            Some(spill) => {
                if let Some(e) = spill.failed.take() {
                    return Err(e);
                }
                // Keep a run for the postings in memory within the fan-in.
                while spill.runs.len() >= spill.fan_in {
                    merge_pass(spill)?;
                }
                spill.runs.clone()
            }
            None => Vec::new(),
        };
        let mut sources = open_runs(&runs)?;
        sources.push(Source::Memory(sorted_terms(
            std::mem::take(&mut self.ids),
            std::mem::take(&mut self.lists),
        )));
        let doc_lens = std::mem::take(&mut self.doc_lens);
        let mut writer = ListsWriter::new(out, &doc_lens)?;
        drop(doc_lens);
        let terms = merge(&mut sources, |term, df, _, _, list| {
            Ok(writer.push_encoded(term, df, list)?)
        })?;
        drop(sources);
        let (terms_fst, out, _) = writer.finish()?;
        if let Some(spill) = &mut self.spill {
            for path in std::mem::take(&mut spill.runs) {
                std::fs::remove_file(&path).map_err(|e| BuildError::io("removing", &path, e))?;
            }
        }
        Ok((terms_fst, terms, out))
    }
}

impl Drop for PostingsWriter {
    /// Removes the run files not yet removed (errors ignored: an error path already).
    fn drop(&mut self) {
        if let Some(spill) = &self.spill {
            for path in &spill.runs {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

/// Read buffer per run file during the merge.
const RUN_BUF: usize = 64 * 1024;

/// Run files read at once (open files, [`RUN_BUF`] each): past it, runs are merged in
/// groups first.
const MAX_FAN_IN: usize = 128;

/// `ids`' terms in byte order with their lists (taken out of `lists`).
fn sorted_terms(
    ids: HashMap<Box<str>, u32>,
    mut lists: Vec<TermList>,
) -> std::vec::IntoIter<(Box<str>, TermList)> {
    let mut order: Vec<(Box<str>, u32)> = ids.into_iter().collect();
    order.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    order
        .into_iter()
        .map(|(term, id)| (term, std::mem::take(&mut lists[id as usize])))
        .collect::<Vec<_>>()
        .into_iter()
}

/// Writes the terms in memory, sorted, to a new run file in `spill.dir` and records it.
/// Run file layout (little-endian), one entry per term in byte order, no header:
/// `u32 term_len | term | u32 df | u32 first_doc | u32 last_doc | u64 list_len | list`,
/// `list` being the term's `(doc_delta, tf)` varint pairs, the first delta from doc 0.
/// On error the partial file is removed.
fn write_run(
    spill: &mut Spill,
    ids: &mut HashMap<Box<str>, u32>,
    lists: &mut Vec<TermList>,
) -> Result<()> {
    if ids.is_empty() {
        return Ok(());
    }
    let (path, mut w) = create_run(spill)?;
    let mut write = || -> std::io::Result<()> {
        for (term, l) in sorted_terms(std::mem::take(ids), std::mem::take(lists)) {
            write_entry(&mut w, term.as_bytes(), l.df, l.first, l.last, &l.bytes)?;
        }
        w.flush()
    };
    match write() {
        Ok(()) => {
            spill.runs.push(path);
            Ok(())
        }
        Err(e) => {
            let _ = std::fs::remove_file(&path);
            Err(BuildError::io("writing", &path, e))
        }
    }
}

/// Creates the next run file of `spill` (not recorded in `spill.runs`).
fn create_run(spill: &mut Spill) -> Result<(PathBuf, BufWriter<File>)> {
    let path = spill.dir.join(format!(
        "jikji-postings-{}-{:06}.run",
        spill.tag, spill.made
    ));
    spill.made += 1;
    let file = File::options()
        .write(true)
        .create_new(true)
        .open(&path)
        .map_err(|e| BuildError::io("creating", &path, e))?;
    Ok((path, BufWriter::with_capacity(RUN_BUF, file)))
}

/// Writes one run entry (layout at [`write_run`]).
fn write_entry(
    w: &mut impl Write,
    term: &[u8],
    df: u32,
    first: u32,
    last: u32,
    list: &[u8],
) -> std::io::Result<()> {
    w.write_all(&(term.len() as u32).to_le_bytes())?;
    w.write_all(term)?;
    w.write_all(&df.to_le_bytes())?;
    w.write_all(&first.to_le_bytes())?;
    w.write_all(&last.to_le_bytes())?;
    w.write_all(&(list.len() as u64).to_le_bytes())?;
    w.write_all(list)
}

/// Merges each group of `spill.fan_in` consecutive runs into one run (same layout, doc
/// order kept), removing the group's files: `spill.runs` shrinks about `fan_in` times.
fn merge_pass(spill: &mut Spill) -> Result<()> {
    let level = spill.runs.clone();
    let mut next = Vec::with_capacity(level.len().div_ceil(spill.fan_in));
    for group in level.chunks(spill.fan_in.max(2)) {
        if let [one] = group {
            next.push(one.clone());
            continue;
        }
        let (path, mut w) = create_run(spill)?;
        // Removed by Drop if this pass fails.
        spill.runs.push(path.clone());
        let mut sources = open_runs(group)?;
        merge(&mut sources, |term, df, first, last, list| {
            write_entry(&mut w, term, df, first, last, list)
                .map_err(|e| BuildError::io("writing", &path, e))
        })?;
        w.flush().map_err(|e| BuildError::io("writing", &path, e))?;
        drop(sources);
        for p in group {
            std::fs::remove_file(p).map_err(|e| BuildError::io("removing", p, e))?;
        }
        next.push(path);
    }
    spill.runs = next;
    Ok(())
}

/// Readers of `runs`, in order.
fn open_runs(runs: &[PathBuf]) -> Result<Vec<Source>> {
    runs.iter()
        .map(|path| {
            let file = File::open(path).map_err(|e| BuildError::io("opening", path, e))?;
            Ok(Source::Run {
                reader: BufReader::with_capacity(RUN_BUF, file),
                path: path.clone(),
            })
        })
        .collect()
}

/// One term's entry from a run or from memory.
struct Entry {
    term: Vec<u8>,
    df: u32,
    first: u32,
    last: u32,
    list: Vec<u8>,
}

/// Where [`merge`] reads entries from: a run file, or the terms still in memory (last:
/// their docs come after every run's).
enum Source {
    Run {
        reader: BufReader<File>,
        path: PathBuf,
    },
    Memory(std::vec::IntoIter<(Box<str>, TermList)>),
}

impl Source {
    /// The next entry, reusing `into`'s buffers, or `false` at the end.
    fn next(&mut self, into: &mut Entry) -> Result<bool> {
        match self {
            Source::Memory(it) => Ok(match it.next() {
                Some((term, l)) => {
                    into.term.clear();
                    into.term.extend_from_slice(term.as_bytes());
                    into.df = l.df;
                    into.first = l.first;
                    into.last = l.last;
                    into.list = l.bytes;
                    true
                }
                None => false,
            }),
            Source::Run { reader, path } => {
                read_entry(reader, into).map_err(|e| BuildError::io("reading", path.as_path(), e))
            }
        }
    }
}

/// Reads one run entry (layout at [`write_run`]) into `into`, or `false` at the end.
fn read_entry(r: &mut BufReader<File>, into: &mut Entry) -> std::io::Result<bool> {
    if r.fill_buf()?.is_empty() {
        return Ok(false);
    }
    let u32s = |r: &mut BufReader<File>| -> std::io::Result<u32> {
        let mut b = [0u8; 4];
        r.read_exact(&mut b)?;
        Ok(u32::from_le_bytes(b))
    };
    let term_len = u32s(r)? as usize;
    into.term.resize(term_len, 0);
    r.read_exact(&mut into.term)?;
    into.df = u32s(r)?;
    into.first = u32s(r)?;
    into.last = u32s(r)?;
    let mut b = [0u8; 8];
    r.read_exact(&mut b)?;
    let list_len = usize::try_from(u64::from_le_bytes(b))
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "list length"))?;
    into.list.resize(list_len, 0);
    r.read_exact(&mut into.list)?;
    Ok(true)
}

/// The current entry of source `src`, ordered by term then source (run order).
struct Head {
    entry: Entry,
    src: usize,
}

impl PartialEq for Head {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head {}
impl PartialOrd for Head {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap.
        (other.entry.term.as_slice(), other.src).cmp(&(self.entry.term.as_slice(), self.src))
    }
}

/// k-way merge of `sources` (each in term order, their docs in source order): calls
/// `emit(term, df, first doc, last doc, list)` for each term in byte order, its lists
/// concatenated in source order, the first delta of each later list re-coded from the
/// previous list's last doc (so `list` is delta-coded from doc 0). Returns the number of
/// terms.
fn merge(
    sources: &mut [Source],
    mut emit: impl FnMut(&[u8], u32, u32, u32, &[u8]) -> Result<()>,
) -> Result<usize> {
    let empty = || Entry {
        term: Vec::new(),
        df: 0,
        first: 0,
        last: 0,
        list: Vec::new(),
    };
    let mut heap = BinaryHeap::with_capacity(sources.len());
    for (src, s) in sources.iter_mut().enumerate() {
        let mut entry = empty();
        if s.next(&mut entry)? {
            heap.push(Head { entry, src });
        }
    }
    let mut same: Vec<Head> = Vec::new();
    let mut joined = Vec::new();
    let mut terms = 0usize;
    while let Some(head) = heap.pop() {
        same.clear();
        same.push(head);
        while heap
            .peek()
            .is_some_and(|h| h.entry.term == same[0].entry.term)
        {
            same.extend(heap.pop());
        }
        let term = &same[0].entry.term;
        if same.len() == 1 {
            let e = &same[0].entry;
            emit(term, e.df, e.first, e.last, &e.list)?;
        } else {
            joined.clear();
            let mut df = 0u32;
            let mut prev_last = None;
            for h in &same {
                let e = &h.entry;
                match prev_last {
                    None => joined.extend_from_slice(&e.list),
                    Some(last) => {
                        // The list's first delta is `e.first` (from doc 0): re-code it.
                        let skip = e.list.iter().position(|&b| b < 0x80).map_or(0, |i| i + 1);
                        put_varint(&mut joined, u64::from(e.first - last));
                        joined.extend_from_slice(&e.list[skip..]);
                    }
                }
                df += e.df;
                prev_last = Some(e.last);
            }
            let (first, last) = (same[0].entry.first, same[same.len() - 1].entry.last);
            emit(term, df, first, last, &joined)?;
        }
        terms += 1;
        for mut h in same.drain(..) {
            if sources[h.src].next(&mut h.entry)? {
                heap.push(h);
            }
        }
    }
    Ok(terms)
}

/// The analyzed terms of each of `records` (under [`ChunkRecord::indexed_text`]), in order,
/// the records shared out to all cores ([`crate::ingest::default_threads`]) in equal runs.
pub fn analyze_records(records: &[ChunkRecord], analyzer: &Analyzer) -> Vec<Vec<String>> {
    let threads = super::default_threads().max(1);
    let per = records.len().div_ceil(threads).max(1);
    let analyzed: Vec<Vec<Vec<String>>> = std::thread::scope(|s| {
        let handles: Vec<_> = records
            .chunks(per)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|r| analyzer.analyze(&r.indexed_text()))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    analyzed.into_iter().flatten().collect()
}

/// The Han and Hangul characters of a corpus, gathered chunk by chunk for [`hanja_table`]
/// (a streamed build sees each chunk once).
#[derive(Default)]
pub struct ScriptChars {
    han: std::collections::HashSet<char>,
    hangul: std::collections::HashSet<char>,
}

impl ScriptChars {
    /// Adds the characters of `text` as `analyzer` normalizes it.
    pub fn add(&mut self, analyzer: &Analyzer, text: &str) {
        for ch in analyzer.normalize(text).chars() {
            match analyzer::script_of(ch) {
                Script::Han => self.han.insert(ch),
                Script::Hangul => self.hangul.insert(ch),
                _ => false,
            };
        }
    }
}

/// The `hanja.fst` bytes `records` need, or `None` for a corpus without Han or Hangul
/// text. Reading pairs come from the `hanja` crate's table (libhangul's `hanja.txt`,
/// BSD-3-Clause; the crate is MIT), each Hanja folded as `analyzer` folds text: Hangul →
/// Hanja pairs only for Han characters the corpus has, Hanja → Hangul pairs only for
/// Hangul syllables the corpus has, so the table holds only expansions that can match.
pub fn hanja_table(records: &[ChunkRecord], analyzer: &Analyzer) -> Result<Option<Vec<u8>>> {
    let mut chars = ScriptChars::default();
    for r in records {
        chars.add(analyzer, &r.text);
    }
    hanja_table_of(&chars, analyzer)
}

/// [`hanja_table`] of the characters gathered in `chars`.
pub fn hanja_table_of(chars: &ScriptChars, analyzer: &Analyzer) -> Result<Option<Vec<u8>>> {
    let (han, hangul) = (&chars.han, &chars.hangul);
    if han.is_empty() && hangul.is_empty() {
        return Ok(None);
    }
    let (mut to_hanja, mut to_hangul) = (Vec::new(), Vec::new());
    for syllable in '\u{AC00}'..='\u{D7A3}' {
        if !hangul.contains(&syllable) && han.is_empty() {
            continue;
        }
        let Some(entries) = hanja::get(syllable) else {
            continue;
        };
        for &(h, _) in entries {
            let norm = analyzer.normalize(&h.to_string());
            let mut folded = norm.chars();
            let (Some(f), None) = (folded.next(), folded.next()) else {
                continue;
            };
            if han.contains(&f) {
                to_hanja.push((syllable, f));
            }
            if hangul.contains(&syllable) {
                to_hangul.push((syllable, f));
            }
        }
    }
    if to_hanja.is_empty() && to_hangul.is_empty() {
        return Ok(None);
    }
    Ok(Some(write_hanja_fst(&to_hanja, &to_hangul)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jikji_format::postings::LexicalIndexWriter;
    use proptest::prelude::*;

    proptest! {
        /// The compact writer's files are byte for byte the format crate's reference
        /// writer's, held in memory or spilled to many runs (a budget of a few terms) merged
        /// a few at a time: terms in some runs only, lists across runs, doc deltas over one
        /// varint byte.
        #[test]
        fn postings_writer_equals_lexical_index_writer(
            docs in prop::collection::vec(
                prop::collection::vec("[a-e]{1,3}|[가-각]{2}|[\u{4e00}-\u{4e03}]", 0..40),
                0..60,
            ),
            big_doc in 0u32..200_000,
            budget in 1usize..2000,
            fan_in in 2usize..6,
        ) {
            let dir = tempfile::tempdir().unwrap();
            let mut ours = PostingsWriter::new();
            let mut spilled = PostingsWriter::with_spill(budget, dir.path().to_path_buf());
            // Merge passes before the last merge.
            spilled.spill.as_mut().unwrap().fan_in = fan_in;
            let mut reference = LexicalIndexWriter::new();
            let mut add = |d: &[String]| {
                ours.add_doc(d);
                spilled.add_doc(d);
                reference.add_doc(d);
            };
            for d in &docs {
                add(d);
            }
            // Doc deltas over one varint byte.
            for _ in 0..big_doc % 300 {
                add(&[]);
            }
            let last: Vec<String> = vec!["a".into(), "zz".into(), "a".into()];
            add(&last);
            prop_assert_eq!(ours.num_terms(), reference.num_terms());
            prop_assert!(!spilled.failed());
            let n_terms = reference.num_terms();
            let expected = reference.finish().unwrap();
            let (fst, terms, post) = spilled.finish_to(Vec::new()).unwrap();
            prop_assert_eq!(terms, n_terms);
            prop_assert_eq!((fst, post), expected.clone());
            prop_assert_eq!(ours.finish().unwrap(), expected);
            prop_assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        }
    }

    fn doc(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn runs_are_removed_by_finish_and_drop() {
        let dir = tempfile::tempdir().unwrap();
        let files = || std::fs::read_dir(dir.path()).unwrap().count();
        let mut w = PostingsWriter::with_spill(0, dir.path().to_path_buf());
        w.spill.as_mut().unwrap().fan_in = 2;
        w.add_doc(&doc("a b"));
        w.add_doc(&[]);
        w.add_doc(&doc("b c"));
        w.add_doc(&doc("b"));
        w.add_doc(&doc("d b"));
        assert_eq!((w.num_runs(), files()), (4, 4));
        let (fst, terms, out) = w.finish_to(BufWriter::new(Vec::new())).unwrap();
        let out = out.into_inner().unwrap();
        assert_eq!((terms, files()), (4, 0));
        let idx = jikji_format::postings::LexicalIndex::open(fst, out).unwrap();
        assert_eq!(
            idx.postings("b").unwrap().unwrap(),
            [(0, 1), (2, 1), (3, 1), (4, 1)]
        );

        let mut w = PostingsWriter::with_spill(0, dir.path().to_path_buf());
        w.add_doc(&doc("a"));
        assert_eq!(files(), 1);
        drop(w);
        assert_eq!(files(), 0);
    }

    #[test]
    fn a_failed_run_write_is_returned_by_finish() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = PostingsWriter::with_spill(0, dir.path().join("missing"));
        w.add_doc(&doc("a"));
        assert!(w.failed());
        assert_eq!(w.add_doc(&doc("b")), 1);
        let err = w.finish().unwrap_err();
        assert!(
            matches!(
                &err,
                BuildError::Io {
                    action: "creating",
                    ..
                }
            ),
            "{err}"
        );
    }

    /// Not a timed test: prints the time of 200k synthetic chunks (60 terms each of a skewed
    /// 200k-term vocabulary each) unbounded and with 16 and 64 MB budgets, and the runs
    /// written.
    /// `cargo test -p jikji-builder --release --lib spill_bench -- --ignored --nocapture`
    #[test]
    #[ignore]
    fn spill_bench() {
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let docs: Vec<Vec<String>> = (0..200_000)
            .map(|_| {
                (0..60)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        // u^3 of a uniform u in [0, 1): small ids are frequent.
                        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                        format!("t{}", (u * u * u * 200_000.0) as u32)
                    })
                    .collect()
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let mut results = Vec::new();
        for budget in [None, Some(16 << 20), Some(64 << 20)] {
            let t = std::time::Instant::now();
            let mut w = match budget {
                None => PostingsWriter::new(),
                Some(b) => PostingsWriter::with_spill(b, dir.path().to_path_buf()),
            };
            for d in &docs {
                w.add_doc(d);
            }
            let runs = w.num_runs();
            let out =
                std::io::BufWriter::new(File::create(dir.path().join("postings.bin")).unwrap());
            let (fst, terms, _) = w.finish_to(out).unwrap();
            let bytes = std::fs::metadata(dir.path().join("postings.bin"))
                .unwrap()
                .len();
            println!(
                "budget {budget:?}: {:.2} s, {runs} runs, {terms} terms, postings.bin {bytes} B, terms.fst {} B",
                t.elapsed().as_secs_f64(),
                fst.len()
            );
            results.push((fst, std::fs::read(dir.path().join("postings.bin")).unwrap()));
        }
        assert!(results.iter().all(|r| *r == results[0]));
    }
}

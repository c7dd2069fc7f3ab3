//! Term dictionary (`terms.fst`) and BM25 postings (`postings.bin`).
//!
//! `terms.fst` is an [`fst::Map`] from each term's UTF-8 bytes to the byte offset of its
//! postings list in `postings.bin`.
//!
//! `postings.bin` layout (little-endian):
//! ```text
//! magic "JKPO" | u32 version | u32 n_docs | u32 doc_len[n_docs]   (terms per chunk)
//! then per term, at the offset the fst gives:
//!   varint df | df × (varint doc_delta, varint tf)     (doc ids ascending, delta-coded)
//! ```

use std::collections::BTreeMap;

use crate::codec::{put_header, put_varint, Reader};
use crate::error::{FormatError, Result};

/// File name of the term dictionary in a bundle.
pub const TERMS_FILE: &str = "terms.fst";
/// File name of the postings in a bundle.
pub const POSTINGS_FILE: &str = "postings.bin";
const MAGIC: &[u8; 4] = b"JKPO";
const VERSION: u32 = 1;

/// Accumulates analyzed documents (chunks) and serialises the term dictionary and postings.
#[derive(Default)]
pub struct LexicalIndexWriter {
    postings: BTreeMap<String, Vec<(u32, u32)>>,
    doc_lens: Vec<u32>,
}

impl LexicalIndexWriter {
    /// An empty writer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the next document (its id is the number of documents added before it) with
    /// its analyzed terms (repetitions count as term frequency). Returns the doc id.
    pub fn add_doc(&mut self, terms: &[String]) -> u32 {
        let doc = self.doc_lens.len() as u32;
        let mut tf: BTreeMap<&str, u32> = BTreeMap::new();
        for t in terms {
            *tf.entry(t.as_str()).or_default() += 1;
        }
        for (t, n) in tf {
            match self.postings.get_mut(t) {
                Some(list) => list.push((doc, n)),
                None => {
                    self.postings.insert(t.to_string(), vec![(doc, n)]);
                }
            }
        }
        self.doc_lens.push(terms.len() as u32);
        doc
    }

    /// Number of distinct terms so far.
    pub fn num_terms(&self) -> usize {
        self.postings.len()
    }

    /// Serialises into `(terms.fst bytes, postings.bin bytes)`.
    pub fn finish(self) -> Result<(Vec<u8>, Vec<u8>)> {
        write_lists(&self.doc_lens, self.postings.into_iter())
    }
}

/// Serialises `(term, postings)` in ascending term (byte) order, each list `(doc, tf)` in
/// ascending doc order, with the chunk lengths `doc_lens`, into `(terms.fst bytes,
/// postings.bin bytes)`: what [`LexicalIndexWriter::finish`] writes, and how a paged
/// bundle's dictionary is turned back into these files. Errors: [`FormatError::Fst`] if
/// terms are not in order, [`FormatError::InvalidInput`] if a list's docs descend.
/// The same bytes as [`ListsWriter`] into a `Vec`.
pub fn write_lists(
    doc_lens: &[u32],
    lists: impl Iterator<Item = (String, Vec<(u32, u32)>)>,
) -> Result<(Vec<u8>, Vec<u8>)> {
    let mut w = ListsWriter::new(Vec::new(), doc_lens)?;
    for (term, list) in lists {
        w.push(term.as_bytes(), &list)?;
    }
    let (fst_bytes, post, _) = w.finish()?;
    Ok((fst_bytes, post))
}

/// Streams `postings.bin` to `out` term by term (format 1 layout above) while building
/// `terms.fst` in memory, so a writer holds one list at a time, not the whole postings.
/// The bytes are those of [`write_lists`] for the same terms and lists.
///
/// `out` gets many small writes: give it a `BufWriter` (or a `Vec`). I/O errors are
/// [`FormatError::Io`] with the path `postings.bin`.
pub struct ListsWriter<W: std::io::Write> {
    out: W,
    terms: fst::MapBuilder<Vec<u8>>,
    /// Bytes written to `out` so far (= the offset of the next list).
    written: u64,
    n_docs: u32,
    scratch: Vec<u8>,
}

impl<W: std::io::Write> ListsWriter<W> {
    /// Writes the header and `doc_lens` (terms per chunk, by doc id: 4 bytes each) to
    /// `out`. Errors: [`FormatError::InvalidInput`] for more than `u32::MAX` docs,
    /// [`FormatError::Io`].
    pub fn new(out: W, doc_lens: &[u32]) -> Result<Self> {
        let n_docs = u32::try_from(doc_lens.len()).map_err(|_| {
            FormatError::InvalidInput(format!("{} documents, over u32", doc_lens.len()))
        })?;
        let mut w = ListsWriter {
            out,
            terms: fst::MapBuilder::memory(),
            written: 0,
            n_docs,
            scratch: Vec::new(),
        };
        let mut head = Vec::with_capacity(12);
        put_header(&mut head, MAGIC, VERSION);
        head.extend_from_slice(&n_docs.to_le_bytes());
        w.write(&head)?;
        let mut lens = Vec::with_capacity(4 * doc_lens.len().min(16 * 1024));
        for part in doc_lens.chunks(16 * 1024) {
            lens.clear();
            for l in part {
                lens.extend_from_slice(&l.to_le_bytes());
            }
            w.write(&lens)?;
        }
        Ok(w)
    }

    fn write(&mut self, bytes: &[u8]) -> Result<()> {
        self.out
            .write_all(bytes)
            .map_err(|e| FormatError::io(POSTINGS_FILE, e))?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Adds `term` (after every term added before it, in byte order) with its list
    /// already coded: `list` is `df` varint `(doc_delta, tf)` pairs, the first delta from
    /// doc 0 (exactly the bytes after the `df` varint in `postings.bin`; not checked).
    /// Errors: [`FormatError::Fst`] if `term` is not after the previous term,
    /// [`FormatError::Io`].
    pub fn push_encoded(&mut self, term: &[u8], df: u32, list: &[u8]) -> Result<()> {
        self.terms
            .insert(term, self.written)
            .map_err(|source| FormatError::Fst {
                file: TERMS_FILE.into(),
                source,
            })?;
        let mut head = std::mem::take(&mut self.scratch);
        head.clear();
        put_varint(&mut head, u64::from(df));
        let r = self.write(&head).and_then(|()| self.write(list));
        self.scratch = head;
        r
    }

    /// Adds `term` (after every term added before it, in byte order) with its `(doc, tf)`
    /// pairs in ascending doc order. Errors: [`FormatError::Fst`] if `term` is not after
    /// the previous term, [`FormatError::InvalidInput`] if the docs descend or a doc is
    /// not below the doc count, [`FormatError::Io`].
    pub fn push(&mut self, term: &[u8], list: &[(u32, u32)]) -> Result<()> {
        let df = u32::try_from(list.len())
            .map_err(|_| FormatError::InvalidInput(format!("{} postings", list.len())))?;
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        let mut prev = 0u32;
        for &(doc, tf) in list {
            if doc < prev || doc >= self.n_docs {
                self.scratch = bytes;
                return Err(FormatError::InvalidInput(format!(
                    "postings of {:?}: doc {doc} after doc {prev} of {} docs",
                    String::from_utf8_lossy(term),
                    self.n_docs
                )));
            }
            put_varint(&mut bytes, u64::from(doc - prev));
            put_varint(&mut bytes, u64::from(tf));
            prev = doc;
        }
        let r = self.push_encoded(term, df, &bytes);
        self.scratch = bytes;
        r
    }

    /// Bytes written to `out` so far: the header, the doc lengths and the lists added.
    pub fn bytes_written(&self) -> u64 {
        self.written
    }

    /// Ends the dictionary and flushes `out`. Returns `(terms.fst bytes, out, bytes
    /// written to out)`. Errors: [`FormatError::Fst`], [`FormatError::Io`] (flush).
    pub fn finish(mut self) -> Result<(Vec<u8>, W, u64)> {
        self.out
            .flush()
            .map_err(|e| FormatError::io(POSTINGS_FILE, e))?;
        let fst_bytes = self.terms.into_inner().map_err(|source| FormatError::Fst {
            file: TERMS_FILE.into(),
            source,
        })?;
        Ok((fst_bytes, self.out, self.written))
    }
}

#[cfg(test)]
mod lists_writer_tests {
    use super::*;

    fn lists() -> Vec<(String, Vec<(u32, u32)>)> {
        vec![
            ("a".into(), vec![(0, 2), (2, 1), (300, 7)]),
            ("b".into(), vec![(1, 1)]),
            ("가".into(), vec![(0, 1), (299, 1)]),
        ]
    }

    #[test]
    fn streams_the_bytes_of_write_lists() {
        let doc_lens: Vec<u32> = (0..301).map(|i| i % 5).collect();
        let (f, p) = write_lists(&doc_lens, lists().into_iter()).unwrap();
        // push and push_encoded, into a BufWriter over a Vec.
        let mut w = ListsWriter::new(std::io::BufWriter::new(Vec::new()), &doc_lens).unwrap();
        let l = lists();
        w.push(l[0].0.as_bytes(), &l[0].1).unwrap();
        // "b": doc 1 tf 1.
        w.push_encoded(b"b", 1, &[1, 1]).unwrap();
        w.push(l[2].0.as_bytes(), &l[2].1).unwrap();
        assert_eq!(w.bytes_written(), p.len() as u64);
        let (f2, out, n) = w.finish().unwrap();
        assert_eq!(
            (f2, out.into_inner().unwrap(), n),
            (f.clone(), p.clone(), p.len() as u64)
        );
        let idx = LexicalIndex::open(f, p).unwrap();
        assert_eq!(idx.postings("a").unwrap().unwrap(), l[0].1);
    }

    #[test]
    fn out_of_order_terms_and_descending_docs_are_errors() {
        let mut w = ListsWriter::new(Vec::new(), &[1, 1]).unwrap();
        w.push(b"b", &[(0, 1)]).unwrap();
        let err = w.push(b"a", &[(0, 1)]).unwrap_err();
        assert!(matches!(err, FormatError::Fst { .. }), "{err}");
        let err = w.push(b"c", &[(1, 1), (0, 1)]).unwrap_err();
        assert!(matches!(err, FormatError::InvalidInput(_)), "{err}");
        let err = w.push(b"d", &[(2, 1)]).unwrap_err();
        assert!(matches!(err, FormatError::InvalidInput(_)), "{err}");
    }

    #[test]
    fn io_errors_name_postings_bin() {
        struct Full;
        impl std::io::Write for Full {
            fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
                Err(std::io::Error::other("disk full"))
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let err = ListsWriter::new(Full, &[1]).err().unwrap();
        assert!(
            matches!(&err, FormatError::Io { path, .. } if path.as_os_str() == POSTINGS_FILE),
            "{err}"
        );
    }
}

/// Read side of the term dictionary and postings.
pub struct LexicalIndex {
    terms: fst::Map<Vec<u8>>,
    postings: crate::bytes::Bytes,
    doc_lens: Vec<u32>,
    avg_doc_len: f32,
}

impl LexicalIndex {
    /// Opens the two files' bytes. Errors: [`FormatError::Fst`] for a bad `terms.fst`
    /// (its CRC32C checksum is verified: fst lookups on corrupt nodes can panic),
    /// [`FormatError::DataCorruption`] / [`FormatError::FormatVersion`] for `postings.bin`.
    /// `postings` may be a mapped file ([`crate::bytes::Bytes::map`]).
    pub fn open(terms_fst: Vec<u8>, postings: impl Into<crate::bytes::Bytes>) -> Result<Self> {
        let postings = postings.into();
        let fst_err = |source| FormatError::Fst {
            file: TERMS_FILE.into(),
            source,
        };
        let terms = fst::Map::new(terms_fst).map_err(fst_err)?;
        // Corrupt nodes can make fst lookups panic: check the fst's own CRC32C first.
        crate::fst_check::verify(terms.as_fst()).map_err(fst_err)?;
        let mut r = Reader::new(POSTINGS_FILE, &postings, 0);
        r.header(MAGIC, VERSION)?;
        let n = r.u32()? as usize;
        let raw = r.take(
            n.checked_mul(4)
                .ok_or_else(|| r.corrupt("doc count overflow"))?,
        )?;
        let doc_lens: Vec<u32> = raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let total: u64 = doc_lens.iter().map(|&l| u64::from(l)).sum();
        let avg_doc_len = if n == 0 { 0.0 } else { total as f32 / n as f32 };
        let header_end = r.pos() as u64;
        {
            use fst::Streamer;
            let mut stream = terms.stream();
            while let Some((_, off)) = stream.next() {
                if off < header_end || off >= postings.len() as u64 {
                    return Err(FormatError::corrupt(
                        TERMS_FILE,
                        0,
                        format!("postings offset {off} out of range"),
                    ));
                }
            }
        }
        Ok(LexicalIndex {
            terms,
            postings,
            doc_lens,
            avg_doc_len,
        })
    }

    /// Number of documents (chunks).
    pub fn num_docs(&self) -> usize {
        self.doc_lens.len()
    }

    /// Number of distinct terms.
    pub fn num_terms(&self) -> usize {
        self.terms.len()
    }

    /// Length of document `doc` in terms.
    pub fn doc_len(&self, doc: u32) -> u32 {
        self.doc_lens[doc as usize]
    }

    /// Every document's length in terms, by doc id.
    pub fn doc_lens(&self) -> &[u32] {
        &self.doc_lens
    }

    /// Every term in byte order (for writers that re-lay the dictionary out).
    pub fn term_list(&self) -> Vec<String> {
        use fst::Streamer;
        let mut out = Vec::with_capacity(self.terms.len());
        let mut s = self.terms.stream();
        while let Some((k, _)) = s.next() {
            out.push(String::from_utf8_lossy(k).into_owned());
        }
        out
    }

    /// Mean document length in terms (BM25's avgdl).
    pub fn avg_doc_len(&self) -> f32 {
        self.avg_doc_len
    }

    /// The term dictionary (for prefix / fuzzy automata).
    pub fn terms(&self) -> &fst::Map<Vec<u8>> {
        &self.terms
    }

    /// Document frequency of `term` (0 if absent), read without decoding its postings.
    /// Errors on corrupt postings bytes.
    pub fn df(&self, term: &str) -> Result<u32> {
        Ok(self.doc_freq(term)?.unwrap_or(0) as u32)
    }

    /// Dictionary terms matched by `automaton`, at most `limit` of them, those with the
    /// highest document frequency first (ties in term order). At most `scan` matches are
    /// looked at. Errors on corrupt postings bytes.
    fn best_matches<A: fst::Automaton>(
        &self,
        automaton: A,
        limit: usize,
        scan: usize,
    ) -> Result<Vec<String>> {
        use fst::{IntoStreamer, Streamer};
        let mut found: Vec<(u32, String)> = Vec::new();
        let mut stream = self.terms.search(automaton).into_stream();
        while let Some((k, _)) = stream.next() {
            if found.len() >= scan {
                break;
            }
            if let Ok(t) = std::str::from_utf8(k) {
                found.push((0, t.to_string()));
            }
        }
        for f in found.iter_mut() {
            f.0 = self.df(&f.1)?;
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        found.truncate(limit);
        Ok(found.into_iter().map(|(_, t)| t).collect())
    }

    /// Terms that start with `prefix` (the prefix itself included if it is a term), at
    /// most `limit`, most frequent first (of the first 4,096 in term order).
    pub fn prefix_terms(&self, prefix: &str, limit: usize) -> Result<Vec<String>> {
        use fst::Automaton;
        self.best_matches(fst::automaton::Str::new(prefix).starts_with(), limit, 4096)
    }

    /// Terms within Levenshtein distance `distance` of `term` (in Unicode characters; the
    /// term itself included if present), at most `limit`, most frequent first. Uses fst's
    /// Levenshtein automaton (Schulz & Mihov 2002); returns no terms if the automaton would
    /// be too large (fst's state limit). Errors on corrupt postings bytes.
    pub fn fuzzy_terms(&self, term: &str, distance: u32, limit: usize) -> Result<Vec<String>> {
        match fst::automaton::Levenshtein::new(term, distance) {
            Ok(aut) => self.best_matches(aut, limit, 4096),
            Err(_) => Ok(Vec::new()),
        }
    }

    /// The postings of `term` as `(doc, tf)` pairs in ascending doc order, or `None` if
    /// the term is not in the dictionary. Errors on corrupt postings bytes.
    pub fn postings(&self, term: &str) -> Result<Option<Vec<(u32, u32)>>> {
        let Some(off) = self.terms.get(term.as_bytes()) else {
            return Ok(None);
        };
        let mut r = Reader::new(POSTINGS_FILE, &self.postings, off as usize);
        let df = r.varint()? as usize;
        if df > self.doc_lens.len() {
            return Err(r.corrupt(format!(
                "document frequency {df} > {} documents",
                self.doc_lens.len()
            )));
        }
        let mut out = Vec::with_capacity(df);
        let mut doc = 0u64;
        for _ in 0..df {
            let gap = r.varint()?;
            doc = doc
                .checked_add(gap)
                .filter(|&d| d < self.doc_lens.len() as u64)
                .ok_or_else(|| r.corrupt(format!("doc id {doc} + {gap} out of range")))?;
            let tf = r.varint()?;
            let tf = u32::try_from(tf)
                .map_err(|_| r.corrupt(format!("term frequency {tf} over u32")))?;
            out.push((doc as u32, tf));
        }
        Ok(Some(out))
    }

    /// Document frequency of `term` (the number of chunks containing it), or `None` if the
    /// term is not in the dictionary; reads only the postings list's length prefix.
    /// Errors: DataCorruption if it exceeds the number of documents.
    pub fn doc_freq(&self, term: &str) -> Result<Option<usize>> {
        let Some(off) = self.terms.get(term.as_bytes()) else {
            return Ok(None);
        };
        let mut r = Reader::new(POSTINGS_FILE, &self.postings, off as usize);
        let df = r.varint()?;
        if df > self.doc_lens.len() as u64 {
            return Err(r.corrupt(format!(
                "document frequency {df} > {} documents",
                self.doc_lens.len()
            )));
        }
        Ok(Some(df as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn roundtrip() {
        let mut w = LexicalIndexWriter::new();
        w.add_doc(&terms("a b a"));
        w.add_doc(&terms("b c"));
        w.add_doc(&terms("a"));
        let (f, p) = w.finish().unwrap();
        let idx = LexicalIndex::open(f, p).unwrap();
        assert_eq!(idx.num_docs(), 3);
        assert_eq!(idx.postings("a").unwrap().unwrap(), vec![(0, 2), (2, 1)]);
        assert_eq!(idx.postings("c").unwrap().unwrap(), vec![(1, 1)]);
        assert!(idx.postings("z").unwrap().is_none());
        assert_eq!(idx.avg_doc_len(), 2.0);
    }

    #[test]
    fn prefix_and_fuzzy_terms() {
        let mut w = LexicalIndexWriter::new();
        w.add_doc(&terms("hamlet hamlet ham shakespear"));
        w.add_doc(&terms("hamlet hamper"));
        let (f, p) = w.finish().unwrap();
        let idx = LexicalIndex::open(f, p).unwrap();
        assert_eq!(idx.df("hamlet").unwrap(), 2);
        assert_eq!(idx.df("nope").unwrap(), 0);
        assert_eq!(
            idx.prefix_terms("ham", 10).unwrap(),
            ["hamlet", "ham", "hamper"]
        );
        assert_eq!(idx.prefix_terms("ham", 1).unwrap(), ["hamlet"]);
        assert_eq!(idx.fuzzy_terms("shakspear", 1, 10).unwrap(), ["shakespear"]);
        assert!(idx.fuzzy_terms("shakspeer", 1, 10).unwrap().is_empty());
    }

    #[test]
    fn truncated_postings_is_data_corruption() {
        let mut w = LexicalIndexWriter::new();
        w.add_doc(&terms("a b"));
        let (f, p) = w.finish().unwrap();
        let err = LexicalIndex::open(f, p[..p.len() - 3].to_vec())
            .err()
            .unwrap();
        assert!(matches!(err, FormatError::DataCorruption { .. }), "{err}");
    }
}

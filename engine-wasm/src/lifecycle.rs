//! Per-chunk lifecycle facts the search filters and score margins need: which chunks are
//! archived, which expire and when, and each chunk's file number.
//!
//! Every chunk of one source file carries that file's `archived` and front matter
//! `expires`, and a bundle's sources table (`manifest.json` `sources`, written by
//! `jikji build` and `jikji update`) lists the files in chunk order with their chunk
//! counts. So the facts are read from two records per file (its first and last chunk),
//! not from every chunk's JSON; a bundle whose table does not describe its chunks (no
//! table, counts that do not add up, a run whose first or last record names another file
//! or disagrees with the other end) is read record by record instead. Parent records
//! (parent-child bundles) are not in the table and are always read one by one.

#[cfg(feature = "v1")]
use jikji_format::hash::Map as HashMap;

use jikji_format::{Bundle, Result};
#[cfg(feature = "v1")]
use serde::Deserialize;

use crate::SearchOptions;

/// The fields of a chunk record the lifecycle reads.
#[cfg(feature = "v1")]
#[derive(Deserialize)]
struct Meta {
    #[serde(default)]
    archived: bool,
    #[serde(default)]
    expires: Option<String>,
    source: String,
}

/// Per-chunk lifecycle facts of one bundle.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Lifecycle {
    /// Doc ids of archived chunks, ascending.
    archived: Vec<u32>,
    /// `(doc id, expiry in Unix ms)` of chunks with a parseable `expires`, ascending.
    expires: Vec<(u32, i64)>,
    /// Per doc: bit 0 archived, bit 1 has an expiry (then in `expires`, found by binary
    /// search: no hash map of them in the browser's wasm, issue 12).
    flags: Vec<u8>,
    /// Per doc: its file number (chunks of one source file share it, distinct files have
    /// distinct numbers), for score margins (see [`crate::scores::apart`]).
    pub file: Vec<u32>,
}

impl Lifecycle {
    /// The facts of `b`'s chunks: from the sources table where it describes the indexed
    /// chunks, else from every record (see the module doc).
    ///
    /// Errors only if the chunk store bytes are corrupt.
    pub fn read(b: &Bundle) -> Result<Self> {
        if let Some(c) = b.columns()? {
            return Ok(Self::from_columns(&c));
        }
        #[cfg(feature = "v1")]
        return match Self::from_sources(b)? {
            Some(l) => Ok(l),
            None => Self::scan(b),
        };
        // A whole bundle (only jikji-format's feature `v1` makes one) in an engine built
        // without `v1`.
        #[cfg(not(feature = "v1"))]
        Err(jikji_format::FormatError::V1NotBuilt {
            file: jikji_format::manifest::MANIFEST_FILE.into(),
        })
    }

    /// From a paged bundle's columns page: the same facts [`Lifecycle::scan`] reads from
    /// every record (the writer computed them by that scan).
    fn from_columns(c: &jikji_format::paged::Columns) -> Self {
        let mut l = Self::empty(c.len());
        for doc in 0..c.len() {
            l.set(doc as u32, c.archived[doc], c.expires[doc]);
        }
        l.file = c.file.clone();
        l
    }

    fn empty(n: usize) -> Self {
        Lifecycle {
            flags: vec![0; n],
            file: Vec::with_capacity(n),
            ..Default::default()
        }
    }

    /// Records the facts of doc `doc`.
    fn set(&mut self, doc: u32, archived: bool, expires: Option<i64>) {
        if archived {
            self.archived.push(doc);
            self.flags[doc as usize] |= 1;
        }
        if let Some(ms) = expires {
            self.expires.push((doc, ms));
            self.flags[doc as usize] |= 2;
        }
    }

    /// Reads every record's facts (bundles without a usable sources table).
    #[cfg(feature = "v1")]
    pub fn scan(b: &Bundle) -> Result<Self> {
        let chunks = b.chunks();
        let n = chunks.len();
        let mut l = Self::empty(n);
        let mut sources = Vec::with_capacity(n);
        for doc in 0..n as u32 {
            let m: Meta = chunks.get_as(doc)?;
            l.set(doc, m.archived, expiry(&m));
            sources.push(m.source);
        }
        l.file = crate::scores::number_files(sources);
        Ok(l)
    }

    /// The facts from the sources table, reading two records per file and every parent
    /// record; `None` if the table does not describe the indexed chunks. File numbers are
    /// given in order of first appearance, as [`Lifecycle::scan`] gives them.
    #[cfg(feature = "v1")]
    fn from_sources(b: &Bundle) -> Result<Option<Self>> {
        let m = b.manifest();
        let chunks = b.chunks();
        let n = chunks.len();
        let indexed = m.counts.chunks;
        let total = m
            .sources
            .iter()
            .try_fold(0usize, |sum, s| sum.checked_add(s.chunks));
        if m.sources.is_empty() || indexed > n || total != Some(indexed) {
            return Ok(None);
        }
        let mut l = Self::empty(n);
        let mut number: HashMap<String, u32> =
            jikji_format::hash::map_with_capacity(m.sources.len());
        let mut at = 0u32;
        for s in m.sources.iter().filter(|s| s.chunks > 0) {
            // In bounds: the runs add up to `indexed` ≤ `n` chunks.
            let (first, last) = (at, at + (s.chunks - 1) as u32);
            let a: Meta = chunks.get_as(first)?;
            let z: Meta = chunks.get_as(last)?;
            if a.source != s.path
                || z.source != s.path
                || a.archived != z.archived
                || a.expires != z.expires
                || number.contains_key(&s.path)
            {
                return Ok(None);
            }
            let ex = expiry(&a);
            let file = number.len() as u32;
            number.insert(a.source, file);
            for doc in first..=last {
                l.set(doc, a.archived, ex);
                l.file.push(file);
            }
            at = last + 1;
        }
        for doc in indexed as u32..n as u32 {
            let p: Meta = chunks.get_as(doc)?;
            l.set(doc, p.archived, expiry(&p));
            let next = number.len() as u32;
            l.file.push(*number.entry(p.source).or_insert(next));
        }
        Ok(Some(l))
    }

    /// True if `doc` may be returned under `o`.
    pub fn allows(&self, doc: u32, o: &SearchOptions) -> bool {
        let f = self.flags.get(doc as usize).copied().unwrap_or(0);
        if f & 1 != 0 && !o.include_archived {
            return false;
        }
        if f & 2 != 0 {
            if let Some(now) = o.now_ms {
                // `expires` is ascending by doc: every reader above sets docs in order.
                return self
                    .expires
                    .binary_search_by_key(&doc, |&(d, _)| d)
                    .is_ok_and(|i| self.expires[i].1 > now);
            }
        }
        true
    }

    /// How many chunks `o` leaves out (an upper bound is enough: it deepens the ranking).
    pub fn excluded(&self, o: &SearchOptions) -> usize {
        let a = if o.include_archived {
            0
        } else {
            self.archived.len()
        };
        let e = match o.now_ms {
            Some(now) => self.expires.iter().filter(|(_, t)| *t <= now).count(),
            None => 0,
        };
        a + e
    }
}

/// The record's expiry in Unix ms, if it has a parseable `expires`.
#[cfg(feature = "v1")]
fn expiry(m: &Meta) -> Option<i64> {
    m.expires
        .as_deref()
        .and_then(jikji_format::time::parse_iso8601_ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jikji_format::{ChunkRecord, TestBundle};

    /// Three files of 3, 1 and 4 chunks: the first archived, the third expiring.
    fn records() -> Vec<ChunkRecord> {
        let file = |f: usize, n: usize, archived: bool, expires: Option<&'static str>| {
            (0..n).map(move |i| ChunkRecord {
                id: format!("f{f}c{i}"),
                source: format!("f{f}.md"),
                lang: "en".into(),
                text: format!("file {f} chunk {i}"),
                archived,
                expires: expires.map(String::from),
                ..ChunkRecord::default()
            })
        };
        file(0, 3, true, None)
            .chain(file(1, 1, false, None))
            .chain(file(2, 4, false, Some("2026-10-05")))
            .collect()
    }

    #[test]
    fn sources_table_gives_the_facts_of_every_record() {
        let with_table = TestBundle::new(records()).sources_table().build().unwrap();
        assert_eq!(with_table.manifest().sources.len(), 3);
        let fast = Lifecycle::from_sources(&with_table)
            .unwrap()
            .expect("table used");
        let slow = Lifecycle::scan(&with_table).unwrap();
        assert_eq!(fast, slow);
        assert_eq!(fast.archived, vec![0, 1, 2]);
        assert_eq!(fast.expires.len(), 4);
        assert_eq!(fast.file, vec![0, 0, 0, 1, 2, 2, 2, 2]);
        let o = SearchOptions {
            now_ms: jikji_format::time::parse_iso8601_ms("2026-10-05"),
            include_archived: false,
        };
        assert_eq!(fast.excluded(&o), 7);
        assert!(fast.allows(3, &o) && !fast.allows(0, &o) && !fast.allows(7, &o));
    }

    #[test]
    fn a_table_that_does_not_describe_the_chunks_is_not_used() {
        // No table.
        let plain = TestBundle::new(records()).build().unwrap();
        assert!(Lifecycle::from_sources(&plain).unwrap().is_none());
        assert_eq!(
            Lifecycle::read(&plain).unwrap(),
            Lifecycle::scan(&plain).unwrap()
        );
        // A file whose last chunk disagrees with its first (expires only on the last one).
        let mut recs = records();
        recs[7].expires = None;
        let odd = TestBundle::new(recs).sources_table().build().unwrap();
        assert!(Lifecycle::from_sources(&odd).unwrap().is_none());
        assert_eq!(
            Lifecycle::read(&odd).unwrap(),
            Lifecycle::scan(&odd).unwrap()
        );
        // Two runs of one file (the table would list the path twice).
        let mut recs = records();
        recs.swap(0, 4);
        let split = TestBundle::new(recs).sources_table().build().unwrap();
        assert!(Lifecycle::from_sources(&split).unwrap().is_none());
    }
}

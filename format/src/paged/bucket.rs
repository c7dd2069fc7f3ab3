//! Term buckets (`b-…`) and expansion buckets (`y-…`) of a paged bundle: exact-term and
//! bigram-expansion lookups whose page is computable from the entry, with the postings'
//! place in the page itself (issue 12, "at most 3 rounds"; design: `docs/design/scale-1m.md`,
//! "Three rounds"). Writer and reader.
//!
//! A query's exact terms are looked up by hash: term `t` is in bucket
//! [`bucket_of`]`(t, B)` = FNV-1a 64 of its UTF-8 bytes mod `B`, page `b-<gen>-<bucket>`,
//! where the entry gives only `{gen, pages: B}`. So the first round after the entry reads
//! every exact term's bucket (and the expansion buckets of its two-character Hangul / Han
//! terms) with no index round; a bucket entry carries the df and either the postings inline
//! (lists of at most [`super::dict::INLINE_MAX`] bytes, as a dictionary block holds them) or
//! the place of a long list in the postings pages, which come in the second round. An
//! expansion bucket maps a bigram key to its candidates ([`super::expand::table`]: the same
//! lists the `x` pages hold), each with the same entry (df and postings inline or placed),
//! so a candidate needs no lookup of its own. The sorted dictionary (`d`, `e` pages) stays
//! for prefix expansion and whole reads; typo expansion still goes through `t` pages.
//!
//! Page bodies (varints are unsigned LEB128; terms sorted by UTF-8 bytes within a list,
//! front-coded against the previous term of the same list):
//! ```text
//! entry := varint keep, varint add, add bytes     the term
//!          varint df                              ≥ 1
//!          varint (len << 1 | long)
//!          long == 0: len bytes of postings        (a postings list, FORMAT.md)
//!          long == 1: varint page, varint offset  `o-<gen>-<page>`, offset < 4,096; the
//!                                                 len bytes continue over the next pages
//! b page := varint n, n × entry
//! y page := varint n_keys, n_keys × (varint keep, varint add, add bytes,   the key
//!                                    varint n_cands, n_cands × entry)
//! ```
//! Both are written for dictionaries of more than [`super::dict::INLINE_KEYS_MAX`] blocks
//! (those with dictionary index pages): smaller bundles keep their layout and their 2–3
//! rounds through the block keys in the entry.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use super::dict::{front_term, put_front, put_place, read_place, LongRef, RawPlace};
use crate::codec::{put_varint, Reader};
use crate::error::Result;

/// Target raw size of a term or expansion bucket page (bytes): the bucket count is the
/// estimated total ÷ this, so pages average about this size.
pub const BUCKET_TARGET: usize = 2048;

/// The bucket of `term` among `buckets` (≥ 1): FNV-1a 64 (offset basis
/// 0xcbf29ce484222325, prime 0x100000001b3) of its UTF-8 bytes, mod `buckets`.
pub fn bucket_of(term: &str, buckets: usize) -> usize {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in term.as_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    (h % buckets.max(1) as u64) as usize
}

/// Where an entry's postings are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// Bytes `start..end` of the page body `body`.
    Inline {
        /// The bucket page's raw body.
        body: Arc<Vec<u8>>,
        /// Start of the list in `body`.
        start: usize,
        /// End (exclusive).
        end: usize,
    },
    /// A long list in the postings pages.
    Long(LongRef),
}

/// A decoded bucket entry: a term, its df and its postings' place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The term.
    pub term: String,
    /// Document frequency.
    pub df: u32,
    /// Its postings.
    pub place: Place,
}

/// The writer's view of one term: df and its postings inline or in the postings stream.
#[derive(Debug, Clone)]
pub struct WriteEntry {
    /// The term.
    pub term: String,
    /// Document frequency.
    pub df: u32,
    /// The list bytes if inline (≤ [`super::dict::INLINE_MAX`]).
    pub inline: Option<Vec<u8>>,
    /// The long list's place otherwise (its `df` field equals `df`).
    pub long: Option<LongRef>,
}

impl WriteEntry {
    fn size(&self) -> usize {
        self.term.len() + 4 + self.inline.as_ref().map_or(8, Vec::len)
    }
}

fn put_entry(out: &mut Vec<u8>, prev: &[u8], e: &WriteEntry) {
    put_front(out, prev, e.term.as_bytes());
    put_varint(out, u64::from(e.df));
    put_place(
        out,
        e.inline.as_deref(),
        e.long.map(|l| (l.page, l.offset, l.len)),
    );
}

/// Term bucket page bodies for `entries` (sorted by term): `B` = ⌈Σ size ÷
/// [`BUCKET_TARGET`]⌉ (at least 1) buckets, each its entries in term order.
pub fn write_terms(entries: &[WriteEntry]) -> Vec<Vec<u8>> {
    let total: usize = entries.iter().map(WriteEntry::size).sum();
    let b = total.div_ceil(BUCKET_TARGET).max(1);
    let mut lists: Vec<Vec<&WriteEntry>> = vec![Vec::new(); b];
    for e in entries {
        lists[bucket_of(&e.term, b)].push(e);
    }
    lists
        .into_iter()
        .map(|list| {
            let mut body = Vec::new();
            put_varint(&mut body, list.len() as u64);
            let mut prev: &[u8] = b"";
            for e in list {
                put_entry(&mut body, prev, e);
                prev = e.term.as_bytes();
            }
            body
        })
        .collect()
}

/// Expansion bucket page bodies for `table` (key → candidate terms, [`super::expand::table`]),
/// each candidate with its entry from `entry_of` (candidates it does not know are left
/// out: the table only lists dictionary terms). `Y` = ⌈Σ size ÷ [`BUCKET_TARGET`]⌉ pages;
/// key `k` is in page [`bucket_of`]`(k, Y)`. Empty when the table is.
pub fn write_expansions<'a>(
    table: &BTreeMap<String, BTreeSet<String>>,
    entry_of: impl Fn(&str) -> Option<&'a WriteEntry>,
) -> Vec<Vec<u8>> {
    if table.is_empty() {
        return Vec::new();
    }
    let mut keyed: Vec<(&str, Vec<&WriteEntry>)> = Vec::with_capacity(table.len());
    let mut total = 0usize;
    for (k, cands) in table {
        let list: Vec<&WriteEntry> = cands.iter().filter_map(|c| entry_of(c)).collect();
        total += k.len() + 2 + list.iter().map(|e| e.size()).sum::<usize>();
        keyed.push((k, list));
    }
    let y = total.div_ceil(BUCKET_TARGET).max(1);
    let mut pages: Vec<Vec<(&str, Vec<&WriteEntry>)>> = vec![Vec::new(); y];
    for (k, list) in keyed {
        pages[bucket_of(k, y)].push((k, list));
    }
    pages
        .into_iter()
        .map(|keys| {
            let mut body = Vec::new();
            put_varint(&mut body, keys.len() as u64);
            let mut prev_key: &[u8] = b"";
            for (k, list) in keys {
                let kb = k.as_bytes();
                let keep = prev_key.iter().zip(kb).take_while(|(a, b)| a == b).count();
                put_varint(&mut body, keep as u64);
                put_varint(&mut body, (kb.len() - keep) as u64);
                body.extend_from_slice(&kb[keep..]);
                put_varint(&mut body, list.len() as u64);
                let mut prev: &[u8] = b"";
                for e in list {
                    put_entry(&mut body, prev, e);
                    prev = e.term.as_bytes();
                }
                prev_key = kb;
            }
            body
        })
        .collect()
}

/// Reads one entry (after `prev`, its list's previous term) of a page of `body`, whose
/// long lists must lie within `postings` postings pages.
fn read_entry(
    r: &mut Reader<'_>,
    body: &Arc<Vec<u8>>,
    prev: &mut Vec<u8>,
    postings: usize,
) -> Result<Entry> {
    let term = front_term(r, prev)?;
    let df = u32::try_from(r.varint()?).map_err(|_| r.corrupt("df over u32"))?;
    let place = match read_place(r, &term, postings, "the bundle's")? {
        RawPlace::Inline(start, end) => Place::Inline {
            body: body.clone(),
            start,
            end,
        },
        RawPlace::Long { page, offset, len } => Place::Long(LongRef {
            df,
            page,
            offset,
            len,
        }),
    };
    Ok(Entry { term, df, place })
}

/// The entry of `term` in term bucket page `name` (raw `body`) of a bundle with `postings`
/// postings pages; `None` if the bucket does not hold it. Every count and reference is
/// checked against the body and the bundle. Errors: DataCorruption naming `p/<name>` and
/// the byte offset (never a panic; allocation bounded by the body).
pub fn find_term(
    name: &str,
    body: &Arc<Vec<u8>>,
    term: &str,
    postings: usize,
) -> Result<Option<Entry>> {
    let file = format!("p/{name}");
    let mut r = Reader::new(&file, body, 0);
    let n = r.varint()? as usize;
    if n > body.len() {
        return Err(r.corrupt(format!("{n} terms in a {}-byte bucket", body.len())));
    }
    let mut prev = Vec::new();
    let mut last: Option<String> = None;
    for _ in 0..n {
        let e = read_entry(&mut r, body, &mut prev, postings)?;
        if last.as_deref().is_some_and(|l| l >= e.term.as_str()) {
            return Err(r.corrupt("bucket terms not in term order"));
        }
        if e.term == term {
            return Ok(Some(e));
        }
        if e.term.as_str() > term {
            return Ok(None);
        }
        last = Some(e.term);
    }
    Ok(None)
}

/// The candidates of bigram `key` in expansion bucket page `name` (raw `body`), each with
/// its entry; `None` if the page does not hold the key (no candidate). Checked as
/// [`find_term`]. Errors: DataCorruption naming `p/<name>` and the byte offset.
pub fn find_expansions(
    name: &str,
    body: &Arc<Vec<u8>>,
    key: &str,
    postings: usize,
) -> Result<Option<Vec<Entry>>> {
    let file = format!("p/{name}");
    let mut r = Reader::new(&file, body, 0);
    let n = r.varint()? as usize;
    if n > body.len() {
        return Err(r.corrupt(format!("{n} keys in a {}-byte page", body.len())));
    }
    let mut prev_key = Vec::new();
    let mut last: Option<String> = None;
    for _ in 0..n {
        let k = front_term(&mut r, &mut prev_key)?;
        if last.as_deref().is_some_and(|l| l >= k.as_str()) {
            return Err(r.corrupt("expansion keys not in key order"));
        }
        let m = r.varint()? as usize;
        if m > body.len() {
            return Err(r.corrupt(format!("{m} candidates in a {}-byte page", body.len())));
        }
        let here = k == key;
        let mut out = Vec::with_capacity(if here { m } else { 0 });
        let mut prev = Vec::new();
        for _ in 0..m {
            let e = read_entry(&mut r, body, &mut prev, postings)?;
            if out
                .last()
                .is_some_and(|l: &Entry| l.term.as_str() >= e.term.as_str())
            {
                return Err(r.corrupt("candidates not in term order"));
            }
            if here {
                out.push(e);
            }
        }
        if here {
            return Ok(Some(out));
        }
        if k.as_str() > key {
            return Ok(None);
        }
        last = Some(k);
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paged::dict::POSTINGS_PAGE;

    fn entries() -> Vec<WriteEntry> {
        let mut v: Vec<WriteEntry> = (0..500)
            .map(|i| WriteEntry {
                term: format!("t{i:04}"),
                df: 1 + i % 5,
                inline: (i % 9 != 0).then(|| vec![i as u8; 3 * (1 + i as usize % 5)]),
                long: (i % 9 == 0).then_some(LongRef {
                    df: 1 + i % 5,
                    page: i as usize / 9,
                    offset: (i as usize * 37) % POSTINGS_PAGE,
                    len: 2000,
                }),
            })
            .collect();
        v.sort_by(|a, b| a.term.cmp(&b.term));
        v
    }

    #[test]
    fn every_term_is_found_in_its_bucket_and_others_are_not() {
        let es = entries();
        let pages: Vec<Arc<Vec<u8>>> = write_terms(&es).into_iter().map(Arc::new).collect();
        assert!(pages.len() > 1);
        for e in &es {
            let b = bucket_of(&e.term, pages.len());
            let got = find_term("b-x-0", &pages[b], &e.term, 1000)
                .unwrap()
                .unwrap();
            assert_eq!(got.df, e.df);
            match got.place {
                Place::Inline { body, start, end } => {
                    assert_eq!(Some(&body[start..end]), e.inline.as_deref())
                }
                Place::Long(l) => assert_eq!(Some(l), e.long),
            }
            let other = (b + 1) % pages.len();
            assert_eq!(find_term("b", &pages[other], &e.term, 1000).unwrap(), None);
        }
        let b = bucket_of("absent", pages.len());
        assert_eq!(find_term("b", &pages[b], "absent", 1000).unwrap(), None);
    }

    #[test]
    fn expansions_carry_their_candidates_entries() {
        let es = entries();
        let mut table: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for i in 0..200 {
            let key = format!("가{}", char::from_u32(0xAC00 + i).unwrap());
            let cands = (0..(i % 4 + 1)).map(|j| format!("t{:04}", (i * 7 + j) % 500));
            table.insert(key, cands.collect());
        }
        let by = |t: &str| es.iter().find(|e| e.term == t);
        let pages: Vec<Arc<Vec<u8>>> = write_expansions(&table, by)
            .into_iter()
            .map(Arc::new)
            .collect();
        for (k, cands) in &table {
            let p = bucket_of(k, pages.len());
            let got = find_expansions("y", &pages[p], k, 1000).unwrap().unwrap();
            let terms: Vec<&str> = got.iter().map(|e| e.term.as_str()).collect();
            assert_eq!(terms, cands.iter().map(String::as_str).collect::<Vec<_>>());
            for e in got {
                assert_eq!(e.df, by(&e.term).unwrap().df);
            }
        }
        let p = bucket_of("없는", pages.len());
        assert_eq!(find_expansions("y", &pages[p], "없는", 1000).unwrap(), None);
    }

    #[test]
    fn truncated_or_flipped_pages_are_refused_without_panic() {
        let es = entries();
        let pages = write_terms(&es);
        let body = &pages[0];
        for cut in 0..body.len() {
            let b = Arc::new(body[..cut].to_vec());
            for e in es.iter().take(50) {
                let _ = find_term("b-x-0", &b, &e.term, 1000);
            }
        }
        for i in 0..body.len() {
            let mut b = body.clone();
            b[i] ^= 0xA5;
            let b = Arc::new(b);
            for e in es.iter().take(20) {
                let _ = find_term("b-x-0", &b, &e.term, 1000);
            }
        }
        // A long list placed past the bundle's postings pages is refused, naming the page.
        let long = es
            .iter()
            .find(|e| e.long.is_some_and(|l| l.page >= 2))
            .unwrap();
        let b = bucket_of(&long.term, pages.len());
        let err = find_term("b-x-1", &Arc::new(pages[b].clone()), &long.term, 1)
            .map(|_| ())
            .unwrap_err();
        assert!(err.to_string().contains("p/b-x-1"), "{err}");
    }
}

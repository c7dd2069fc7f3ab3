//! The columns page (`l-…`) of a paged bundle: per chunk, the facts filters and score
//! calibration read, as runs over doc ids, so no chunk record is decoded for them.
//!
//! Body (varints unsigned LEB128; every column is a list of runs `(varint len, value)`
//! whose lengths sum to `n`):
//! ```text
//! varint n
//! file:     varint runs, runs × (varint len, varint zigzag(file − previous run's file))
//!           files are numbered in order of first appearance, so the delta is mostly 1
//! archived: varint runs, runs × (varint len, u8 0|1)
//! expires:  varint runs, runs × (varint len, u8 has, [8 bytes i64 ms since the epoch, LE])
//! parent:   varint runs, runs × (varint len, varint parent doc + 1, 0 = none)
//! ```

use crate::codec::{put_varint, Reader};
use crate::error::Result;

/// Per-chunk columns, one entry per chunk (indexed chunks, then parent records).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Columns {
    /// Source file number (order of first appearance of the chunk's `source`).
    pub file: Vec<u32>,
    /// Archived (an older version of a document).
    pub archived: Vec<bool>,
    /// Expiry in ms since the Unix epoch (front matter `expires`, parsed; `None` when absent
    /// or unparsable, which never filters).
    pub expires: Vec<Option<i64>>,
    /// The parent record's doc id (`parent-child` bundles).
    pub parent: Vec<Option<u32>>,
}

fn runs<T: PartialEq + Copy>(xs: &[T], out: &mut Vec<u8>, mut put: impl FnMut(&mut Vec<u8>, T)) {
    let mut rs: Vec<(usize, T)> = Vec::new();
    for &x in xs {
        match rs.last_mut() {
            Some((n, v)) if *v == x => *n += 1,
            _ => rs.push((1, x)),
        }
    }
    put_varint(out, rs.len() as u64);
    for (n, v) in rs {
        put_varint(out, n as u64);
        put(out, v);
    }
}

impl Columns {
    /// Number of chunks.
    pub fn len(&self) -> usize {
        self.file.len()
    }

    /// True if there are no chunks.
    pub fn is_empty(&self) -> bool {
        self.file.is_empty()
    }

    /// Serialises the page body.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, self.len() as u64);
        let mut prev = 0i64;
        runs(&self.file, &mut out, |o, v| {
            let d = i64::from(v) - prev;
            prev = i64::from(v);
            put_varint(o, ((d << 1) ^ (d >> 63)) as u64);
        });
        runs(&self.archived, &mut out, |o, v| o.push(u8::from(v)));
        runs(&self.expires, &mut out, |o, v| match v {
            Some(ms) => {
                o.push(1);
                o.extend_from_slice(&ms.to_le_bytes());
            }
            None => o.push(0),
        });
        runs(&self.parent, &mut out, |o, v| {
            put_varint(o, v.map_or(0, |p| u64::from(p) + 1))
        });
        out
    }

    /// Parses a page body (`file` names the page in errors) that must describe `expected`
    /// chunks (the entry's count: checked before anything is allocated). Errors:
    /// DataCorruption when the count differs, a column's runs do not sum to it, or on
    /// truncation.
    pub fn decode(file: &str, body: &[u8], expected: usize) -> Result<Columns> {
        let mut r = Reader::new(file, body, 0);
        let n = r.varint()? as usize;
        if n != expected {
            return Err(r.corrupt(format!("{n} chunks, the entry says {expected}")));
        }
        fn column<T: Copy>(
            r: &mut Reader,
            n: usize,
            mut get: impl FnMut(&mut Reader) -> Result<T>,
        ) -> Result<Vec<T>> {
            let k = r.varint()? as usize;
            let mut out = Vec::new();
            for _ in 0..k {
                let len = r.varint()? as usize;
                let v = get(r)?;
                if out.len() + len > n {
                    return Err(r.corrupt("column runs exceed the chunk count"));
                }
                out.extend(std::iter::repeat_n(v, len));
            }
            if out.len() != n {
                return Err(r.corrupt("column runs do not cover every chunk"));
            }
            Ok(out)
        }
        let mut prev = 0i64;
        let file_col = column(&mut r, n, |r| {
            let z = r.varint()?;
            let d = (z >> 1) as i64 ^ -((z & 1) as i64);
            prev = prev
                .checked_add(d)
                .filter(|v| (0..=i64::from(u32::MAX)).contains(v))
                .ok_or_else(|| r.corrupt("file number out of range"))?;
            Ok(prev as u32)
        })?;
        let archived = column(&mut r, n, |r| Ok(r.take(1)?[0] != 0))?;
        let expires = column(&mut r, n, |r| {
            Ok(if r.take(1)?[0] != 0 {
                Some(i64::from_le_bytes(r.take(8)?.try_into().unwrap()))
            } else {
                None
            })
        })?;
        let parent = column(&mut r, n, |r| {
            let v = r.varint()?;
            Ok(match v {
                0 => None,
                p => Some(u32::try_from(p - 1).map_err(|_| r.corrupt("parent over u32"))?),
            })
        })?;
        Ok(Columns {
            file: file_col,
            archived,
            expires,
            parent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_bad_runs() {
        let c = Columns {
            file: vec![0, 0, 1, 2, 2, 1],
            archived: vec![true, true, false, false, false, false],
            expires: vec![None, None, Some(-5), Some(1_790_000_000_000), None, None],
            parent: vec![None, Some(4), Some(4), None, None, None],
        };
        let b = c.encode();
        assert_eq!(Columns::decode("p/l", &b, 6).unwrap(), c);
        assert!(Columns::decode("p/l", &b[..b.len() - 1], 6).is_err());
        assert!(Columns::decode("p/l", &b, 7).is_err());
        let mut wrong = b.clone();
        wrong[0] = 7; // claims 7 chunks, runs cover 6
        assert!(Columns::decode("p/l", &wrong, 7).is_err());
    }
}

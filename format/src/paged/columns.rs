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
//! -- the filter columns ([`Facets`]; absent from pages written before them, which end here) --
//! tier:     varint runs, runs × (varint len, varint tier + 1, 0 = none)
//! langs:    varint count, count × (varint len, UTF-8 bytes)   distinct `lang` values
//! lang:     varint runs, runs × (varint len, varint index into langs)
//! folders:  varint count, count × (varint len, UTF-8 bytes)   distinct source folders
//! folder:   varint runs, runs × (varint len, varint index into folders)
//! ```
//!
//! A chunk's folder is its `source` path up to its last `/` (`""` for a file at the corpus
//! root): `1. Gutenberg/shakespeare.txt` → `1. Gutenberg`.

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
    /// Tier, language and folder of each chunk, for search filters; `None` in a page
    /// written before these columns existed.
    pub facets: Option<Facets>,
}

/// The filter columns: per chunk its tier, language and source folder (see the module doc).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Facets {
    /// Tier from the tier folder name (`1. …` → 1), `None` outside a tier folder.
    pub tier: Vec<Option<u32>>,
    /// Distinct `lang` values, in order of first appearance.
    pub langs: Vec<String>,
    /// Per chunk: its index in `langs`.
    pub lang: Vec<u32>,
    /// Distinct source folders ([`folder_of`]), in order of first appearance.
    pub folders: Vec<String>,
    /// Per chunk: its index in `folders`.
    pub folder: Vec<u32>,
}

/// The folder of source path `source`: everything before its last `/`, `""` when it has
/// none.
pub fn folder_of(source: &str) -> &str {
    source.rsplit_once('/').map_or("", |(d, _)| d)
}

/// Builds [`Facets`] chunk by chunk, interning languages and folders.
#[derive(Debug, Default)]
pub struct FacetsBuilder {
    facets: Facets,
    langs: std::collections::HashMap<String, u32>,
    folders: std::collections::HashMap<String, u32>,
}

impl FacetsBuilder {
    /// Appends the next chunk's facts: its tier, `lang` and the folder of `source`.
    pub fn push(&mut self, tier: Option<u32>, lang: &str, source: &str) {
        fn intern(
            table: &mut Vec<String>,
            index: &mut std::collections::HashMap<String, u32>,
            v: &str,
        ) -> u32 {
            if let Some(&i) = index.get(v) {
                return i;
            }
            table.push(v.to_string());
            let i = (table.len() - 1) as u32;
            index.insert(v.to_string(), i);
            i
        }
        let f = &mut self.facets;
        f.tier.push(tier);
        f.lang.push(intern(&mut f.langs, &mut self.langs, lang));
        f.folder
            .push(intern(&mut f.folders, &mut self.folders, folder_of(source)));
    }

    /// The facets of the chunks pushed.
    pub fn finish(self) -> Facets {
        self.facets
    }
}

impl Facets {
    fn encode(&self, out: &mut Vec<u8>) {
        runs(&self.tier, out, |o, v| {
            put_varint(o, v.map_or(0, |t| u64::from(t) + 1))
        });
        for (table, col) in [(&self.langs, &self.lang), (&self.folders, &self.folder)] {
            put_varint(out, table.len() as u64);
            for s in table {
                put_varint(out, s.len() as u64);
                out.extend_from_slice(s.as_bytes());
            }
            runs(col, out, |o, v| put_varint(o, u64::from(v)));
        }
    }
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
        if let Some(f) = &self.facets {
            f.encode(&mut out);
        }
        out
    }

    /// Parses a page body (`file` names the page in errors) that must describe `expected`
    /// chunks (the entry's count: checked before anything is allocated). Errors:
    /// DataCorruption when the count differs, a column's runs do not sum to it, a table
    /// index is out of range, a string is not UTF-8, or on truncation. A body that ends
    /// after the parent column (written before the filter columns) has no `facets`.
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
        let facets = if r.at_end() {
            None
        } else {
            let tier = column(&mut r, n, |r| {
                Ok(match r.varint()? {
                    0 => None,
                    t => Some(u32::try_from(t - 1).map_err(|_| r.corrupt("tier over u32"))?),
                })
            })?;
            let table = |r: &mut Reader| -> Result<(Vec<String>, Vec<u32>)> {
                let count = r.varint()? as usize;
                // Every string takes at least its length byte: bounds the allocation.
                if count > body.len() {
                    return Err(r.corrupt(format!("{count} table entries in {} bytes", body.len())));
                }
                let mut strings = Vec::with_capacity(count);
                for _ in 0..count {
                    let len = r.varint()? as usize;
                    let bytes = r.take(len)?;
                    strings.push(
                        std::str::from_utf8(bytes)
                            .map_err(|_| r.corrupt("table string is not UTF-8"))?
                            .to_string(),
                    );
                }
                let col = column(r, n, |r| {
                    let v = r.varint()?;
                    if v >= count as u64 {
                        return Err(r.corrupt(format!("index {v} in a table of {count}")));
                    }
                    Ok(v as u32)
                })?;
                Ok((strings, col))
            };
            let (langs, lang) = table(&mut r)?;
            let (folders, folder) = table(&mut r)?;
            if !r.at_end() {
                return Err(r.corrupt("bytes after the last column"));
            }
            Some(Facets {
                tier,
                langs,
                lang,
                folders,
                folder,
            })
        };
        Ok(Columns {
            file: file_col,
            archived,
            expires,
            parent,
            facets,
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
            facets: None,
        };
        let b = c.encode();
        assert_eq!(Columns::decode("p/l", &b, 6).unwrap(), c);
        assert!(Columns::decode("p/l", &b[..b.len() - 1], 6).is_err());
        assert!(Columns::decode("p/l", &b, 7).is_err());
        let mut wrong = b.clone();
        wrong[0] = 7; // claims 7 chunks, runs cover 6
        assert!(Columns::decode("p/l", &wrong, 7).is_err());
    }

    #[test]
    fn filter_columns_roundtrip_and_old_pages_have_none() {
        let mut b = FacetsBuilder::default();
        for (tier, lang, src) in [
            (Some(1), "ko", "1. 漢文/a.md"),
            (Some(1), "ko", "1. 漢文/a.md"),
            (Some(2), "en", "2. Gutenberg/sub/b.txt"),
            (None, "zh", "c.md"),
        ] {
            b.push(tier, lang, src);
        }
        let f = b.finish();
        assert_eq!(f.langs, ["ko", "en", "zh"]);
        assert_eq!(f.folders, ["1. 漢文", "2. Gutenberg/sub", ""]);
        assert_eq!(f.folder, [0, 0, 1, 2]);
        let c = Columns {
            file: vec![0, 0, 1, 2],
            archived: vec![false; 4],
            expires: vec![None; 4],
            parent: vec![None; 4],
            facets: Some(f),
        };
        let b = c.encode();
        assert_eq!(Columns::decode("p/l", &b, 4).unwrap(), c);
        // A page written before the filter columns: the same bytes up to the parent column.
        let old = Columns {
            facets: None,
            ..c.clone()
        };
        let ob = old.encode();
        assert!(b.starts_with(&ob));
        assert_eq!(Columns::decode("p/l", &ob, 4).unwrap().facets, None);
        // Truncated inside the filter columns, an index out of its table, trailing bytes.
        for cut in ob.len() + 1..b.len() {
            assert!(
                Columns::decode("p/l", &b[..cut], 4).is_err(),
                "cut at {cut}"
            );
        }
        let mut extra = b.clone();
        extra.push(0);
        assert!(Columns::decode("p/l", &extra, 4).is_err());
        let mut bad = ob.clone();
        // tier: one run of 4 × none; langs: 1 entry "x"; lang: one run of 4 × index 5.
        bad.extend_from_slice(&[1, 4, 0, 1, 1, b'x', 1, 4, 5]);
        let e = Columns::decode("p/l", &bad, 4).unwrap_err().to_string();
        assert!(e.contains("index 5 in a table of 1"), "{e}");
    }
}

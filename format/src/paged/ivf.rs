//! The paged dense index (issue 14): an inverted file (IVF, Jégou, Douze & Schmid 2011,
//! "Product quantization for nearest neighbor search", §4; Faiss's `IndexIVFFlat`) over the
//! bundle's int8 vectors, so a dense query fetches the centroids once and then only the
//! lists of the `nprobe` centroids nearest to it instead of every vector page.
//! Design and measurements: `docs/design/dense-index.md`; layout: `FORMAT.md`, "Dense
//! index pages".
//!
//! Pages (all numbered, `<kind>-<gen>-<n>`):
//! - `g` centroids: [`CENTROIDS_PER_PAGE`] centroids per page as a format 1 `vectors.bin`
//!   body (int8 rows with a scale each). Centroid `j` is the normalised mean of the
//!   *scoring vectors* of list `j`'s chunks: the row as the engine scores it, i.e. centred
//!   by the chunk's language offset and normalised when the bundle has a per-language
//!   centring (`model.centring`), so `q·c_j` ranks lists in the space of the exact score.
//! - `j` lists: page `j` holds list `j`: `varint count`, `count × varint` doc-id deltas
//!   (ascending ids, the first delta is the id), then a `vectors.bin` body of the `count`
//!   rows, byte for byte the rows of the `v` pages (so a scanned chunk scores exactly as in
//!   the exact scan).
//! - `w` background sample: one page, the rows of the [`sample_docs`] chunks as a
//!   `vectors.bin` body (the dense z-score background, `jikji_engine::fusion`).
//!
//! Every read is bounds-checked before it allocates: bytes from the network are hostile.

use serde::{Deserialize, Serialize};

use super::page::{Encoded, Kind};
use super::{Numbered, ENTRY_FILE};
use crate::codec::{put_varint, Reader};
use crate::error::{FormatError, Result};
use crate::vectors::{write_quantized, Vectors};

/// Centroids per `g` page.
pub const CENTROIDS_PER_PAGE: usize = 256;

/// Rows of the background sample (`w` page): at most this many chunks, evenly spaced.
pub const SAMPLE_ROWS: usize = 256;

/// The only code kind written so far: the lists hold the `v` pages' int8 rows.
pub const CODES_INT8: &str = "int8";

/// Most lists an index may have (bounds the per-query centroid work and the entry check).
pub const MAX_LISTS: usize = 1 << 20;

/// The dense index of a paged bundle, in the entry (`pages.ivf`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IvfRoot {
    /// Number of lists (= centroids).
    pub nlist: usize,
    /// Lists a query scans by default (engines may be told another number).
    pub nprobe: usize,
    /// How the builder chose `nprobe` (informative: e.g. `pseudo-queries: recall@10 0.9912
    /// over 300 (target 0.99)`, or `share 0.25`); absent in bundles written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nprobe_from: Option<String>,
    /// How the lists store vectors: `int8` (the `v` pages' rows).
    pub codes: String,
    /// Centroid pages `g-<gen>-<n>` ([`CENTROIDS_PER_PAGE`] each).
    pub centroids: Numbered,
    /// List pages `j-<gen>-<n>`, one list per page (`per_page` 1).
    pub lists: Numbered,
    /// The background sample page `w-<gen>-0` (`per_page` = its rows).
    pub sample: Numbered,
}

impl crate::json::FromJson for IvfRoot {
    const WHAT: &'static str = "an object";
    fn from_json(j: &crate::json::Json, f: &str) -> Result<Self> {
        let o = j.obj(f)?;
        Ok(IvfRoot {
            nlist: o.req("nlist")?,
            nprobe: o.req("nprobe")?,
            nprobe_from: o.req("nprobe_from")?,
            codes: o.req("codes")?,
            centroids: o.req("centroids")?,
            lists: o.req("lists")?,
            sample: o.req("sample")?,
        })
    }
}

impl IvfRoot {
    /// The name of centroid page `n`.
    pub fn centroid_page(&self, n: usize) -> String {
        self.centroids.name(Kind::Centroids, n)
    }

    /// The name of list `j`'s page.
    pub fn list_page(&self, j: usize) -> String {
        self.lists.name(Kind::Lists, j)
    }

    /// The name of the background sample page.
    pub fn sample_page(&self) -> String {
        self.sample.name(Kind::Sample, 0)
    }

    /// Every page of the index.
    pub fn all_pages(&self) -> Vec<String> {
        let mut out: Vec<String> = (0..self.centroids.pages)
            .map(|n| self.centroid_page(n))
            .collect();
        out.extend((0..self.lists.pages).map(|j| self.list_page(j)));
        out.push(self.sample_page());
        out
    }

    /// Checks the root against the bundle's `chunks` before anything is sized from it.
    /// Errors: DataCorruption naming `jikji.json`.
    pub fn check(&self, chunks: usize) -> Result<()> {
        let bad = |m: String| Err(FormatError::corrupt(ENTRY_FILE, 0, m));
        if self.nlist == 0 || self.nlist > chunks.max(1) || self.nlist > MAX_LISTS {
            return bad(format!(
                "pages.ivf.nlist {} for {chunks} chunks (at most {MAX_LISTS})",
                self.nlist
            ));
        }
        if self.nprobe == 0 || self.nprobe > self.nlist {
            return bad(format!(
                "pages.ivf.nprobe {} outside 1..={}",
                self.nprobe, self.nlist
            ));
        }
        if self.codes != CODES_INT8 {
            return bad(format!("pages.ivf.codes {:?} is not known", self.codes));
        }
        if self.centroids.per_page != CENTROIDS_PER_PAGE
            || self.centroids.pages != self.nlist.div_ceil(CENTROIDS_PER_PAGE)
        {
            return bad(format!(
                "{} centroid pages of {} for {} lists",
                self.centroids.pages, self.centroids.per_page, self.nlist
            ));
        }
        if self.lists.per_page != 1 || self.lists.pages != self.nlist {
            return bad(format!(
                "{} list pages for {} lists",
                self.lists.pages, self.nlist
            ));
        }
        if self.sample.pages != 1 || self.sample.per_page != chunks.min(SAMPLE_ROWS) {
            return bad(format!(
                "background sample of {} pages × {} rows for {chunks} chunks",
                self.sample.pages, self.sample.per_page
            ));
        }
        Ok(())
    }
}

/// The chunks of the dense background sample of a bundle of `n` chunks: `j·n / take` for
/// `j` in `0..take`, `take = min(n, SAMPLE_ROWS)` (evenly spaced, as
/// `jikji_engine::fusion::dense_background` samples an exact scan).
pub fn sample_docs(n: usize) -> impl Iterator<Item = usize> {
    let take = n.min(SAMPLE_ROWS);
    (0..take).map(move |j| j * n / take)
}

/// What the builder computed: centroids (normalised, `dim` each) and the chunks of each
/// list (ascending doc ids; every chunk in exactly one list).
pub struct IvfParts<'a> {
    /// One centroid per list.
    pub centroids: &'a [Vec<f32>],
    /// Doc ids of each list, ascending.
    pub lists: &'a [Vec<u32>],
    /// Default lists per query.
    pub nprobe: usize,
}

/// Writes the index's pages for `vectors` (the bundle's rows, doc id = row) to `sink`.
/// Errors: [`FormatError::InvalidInput`] if the lists do not partition the rows, a
/// centroid's length is not `vectors.dim()`, or `nprobe` is outside `1..=nlist`.
pub fn write_pages(
    parts: &IvfParts,
    vectors: &Vectors,
    sink: &mut dyn FnMut(Encoded) -> Result<()>,
) -> Result<IvfRoot> {
    let n = vectors.len();
    let nlist = parts.lists.len();
    let invalid = |m: String| Err(FormatError::InvalidInput(m));
    if nlist == 0 || parts.centroids.len() != nlist || nlist > MAX_LISTS {
        return invalid(format!(
            "{} centroids for {nlist} lists",
            parts.centroids.len()
        ));
    }
    if parts.nprobe == 0 || parts.nprobe > nlist {
        return invalid(format!("nprobe {} outside 1..={nlist}", parts.nprobe));
    }
    let mut seen = vec![false; n];
    for l in parts.lists {
        for w in l.windows(2) {
            if w[0] >= w[1] {
                return invalid("list doc ids are not ascending".into());
            }
        }
        for &d in l {
            match seen.get_mut(d as usize) {
                Some(s) if !*s => *s = true,
                _ => return invalid(format!("doc {d} is out of range or in two lists")),
            }
        }
    }
    if seen.iter().any(|s| !s) {
        return invalid("a chunk is in no list".into());
    }
    let dim = vectors.dim();
    let mut cbodies = Vec::new();
    for group in parts.centroids.chunks(CENTROIDS_PER_PAGE) {
        let rows: Vec<(f32, Vec<i8>)> = group.iter().map(|c| crate::vectors::quantize(c)).collect();
        if group.iter().any(|c| c.len() != dim) {
            return invalid("a centroid's dimension differs from the vectors'".into());
        }
        cbodies.push(write_quantized(
            dim,
            rows.iter().map(|(s, q)| (*s, q.as_slice())),
        )?);
    }
    let (centroids, pages) = super::numbered(Kind::Centroids, cbodies, CENTROIDS_PER_PAGE);
    for p in pages {
        sink(p)?;
    }
    let lbodies = parts
        .lists
        .iter()
        .map(|l| list_body(l, vectors))
        .collect::<Result<Vec<_>>>()?;
    let (lists, pages) = super::numbered(Kind::Lists, lbodies, 1);
    for p in pages {
        sink(p)?;
    }
    let sbody = write_quantized(dim, sample_docs(n).map(|d| vectors.row(d)))?;
    let (sample, pages) = super::numbered(Kind::Sample, vec![sbody], n.min(SAMPLE_ROWS));
    for p in pages {
        sink(p)?;
    }
    Ok(IvfRoot {
        nlist,
        nprobe: parts.nprobe,
        nprobe_from: None,
        codes: CODES_INT8.into(),
        centroids,
        lists,
        sample,
    })
}

/// The raw body of a list page: count, id deltas, then the rows.
fn list_body(docs: &[u32], vectors: &Vectors) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(docs.len() * (vectors.dim() + 6) + 20);
    put_varint(&mut out, docs.len() as u64);
    let mut prev = 0u32;
    for (i, &d) in docs.iter().enumerate() {
        put_varint(&mut out, u64::from(if i == 0 { d } else { d - prev }));
        prev = d;
    }
    out.extend(write_quantized(
        vectors.dim(),
        docs.iter().map(|&d| vectors.row(d as usize)),
    )?);
    Ok(out)
}

/// One decoded list page: its chunks and their rows (row `i` is chunk `docs[i]`).
pub struct ListPage {
    /// Doc ids, ascending.
    pub docs: Vec<u32>,
    /// Their int8 rows.
    pub rows: Vectors,
}

impl ListPage {
    /// Decodes the raw body of page `name` of a bundle of `chunks` chunks with vectors of
    /// `dim`. Errors (DataCorruption naming `p/<name>` and the byte offset): a count larger
    /// than the body could hold, ids not ascending or not below `chunks`, rows that are not
    /// a `vectors.bin` body of `count` rows of `dim`.
    pub fn open(name: &str, body: &[u8], chunks: usize, dim: usize) -> Result<Self> {
        let file = format!("p/{name}");
        let mut r = Reader::new(&file, body, 0);
        let count = r.varint()?;
        // Each id takes at least one byte and each row dim + 4: a larger count is a lie.
        let room = (body.len() - r.pos()) / (dim + 5).max(1);
        if count > room as u64 {
            return Err(FormatError::corrupt(
                &file,
                0,
                format!("list of {count} rows in a {}-byte page", body.len()),
            ));
        }
        let count = count as usize;
        let mut docs = Vec::with_capacity(count);
        let mut prev: Option<u64> = None;
        for _ in 0..count {
            let at = r.pos() as u64;
            let delta = r.varint()?;
            let doc = match prev {
                None => delta,
                Some(p) if delta > 0 => p.saturating_add(delta),
                Some(_) => {
                    return Err(FormatError::corrupt(&file, at, "doc ids not ascending"));
                }
            };
            if doc >= chunks as u64 {
                return Err(FormatError::corrupt(
                    &file,
                    at,
                    format!("doc {doc} of a bundle of {chunks} chunks"),
                ));
            }
            docs.push(doc as u32);
            prev = Some(doc);
        }
        let at = r.pos();
        let rows = Vectors::open(&body[at..]).map_err(|e| shifted(e, &file, at))?;
        if rows.len() != count || rows.dim() != dim {
            return Err(FormatError::corrupt(
                &file,
                at as u64,
                format!(
                    "{} rows of {} for {count} ids of dimension {dim}",
                    rows.len(),
                    rows.dim()
                ),
            ));
        }
        Ok(ListPage { docs, rows })
    }
}

/// Opens a `vectors.bin` body of page `name` (centroids or sample) and checks its shape:
/// `rows` rows of `dim`. Errors: DataCorruption naming `p/<name>`.
pub fn open_rows(name: &str, body: &[u8], rows: usize, dim: usize) -> Result<Vectors> {
    let file = format!("p/{name}");
    let v = Vectors::open(body).map_err(|e| shifted(e, &file, 0))?;
    if v.len() != rows || v.dim() != dim {
        return Err(FormatError::corrupt(
            &file,
            8,
            format!("{} rows of {}, expected {rows} of {dim}", v.len(), v.dim()),
        ));
    }
    Ok(v)
}

/// `e` (raised while reading a `vectors.bin` body at byte `at` of `file`) renamed to `file`.
fn shifted(e: FormatError, file: &str, at: usize) -> FormatError {
    match e {
        FormatError::DataCorruption {
            offset, message, ..
        } => FormatError::corrupt(file, offset + at as u64, message),
        other => FormatError::corrupt(file, at as u64, other.to_string()),
    }
}

/// The page of `root`'s centroid page `n` holds how many centroids.
pub fn centroids_on_page(root: &IvfRoot, n: usize) -> usize {
    (root.nlist - n * CENTROIDS_PER_PAGE).min(CENTROIDS_PER_PAGE)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors::write_vectors;

    fn vectors(n: usize) -> Vectors {
        let rows: Vec<Vec<f32>> = (0..n)
            .map(|i| {
                let a = i as f32 * 0.37;
                vec![a.cos(), a.sin(), 0.1]
            })
            .collect();
        Vectors::open(&write_vectors(3, &rows).unwrap()).unwrap()
    }

    fn written(n: usize) -> (IvfRoot, Vec<Encoded>) {
        let v = vectors(n);
        let lists = vec![
            (0..n as u32).step_by(2).collect(),
            (1..n as u32).step_by(2).collect(),
        ];
        let centroids = vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]];
        let mut pages = Vec::new();
        let root = write_pages(
            &IvfParts {
                centroids: &centroids,
                lists: &lists,
                nprobe: 1,
            },
            &v,
            &mut |p| {
                pages.push(p);
                Ok(())
            },
        )
        .unwrap();
        (root, pages)
    }

    fn body_of(pages: &[Encoded], name: &str) -> Vec<u8> {
        let p = pages.iter().find(|p| p.name == name).unwrap();
        super::super::page::decode_stored(name, &p.bytes).unwrap()
    }

    #[test]
    fn lists_hold_the_rows_byte_for_byte() {
        let (root, pages) = written(9);
        root.check(9).unwrap();
        let v = vectors(9);
        let l = ListPage::open(
            &root.list_page(1),
            &body_of(&pages, &root.list_page(1)),
            9,
            3,
        )
        .unwrap();
        assert_eq!(l.docs, [1, 3, 5, 7]);
        for (i, &d) in l.docs.iter().enumerate() {
            assert_eq!(l.rows.row(i), v.row(d as usize));
        }
        let s = body_of(&pages, &root.sample_page());
        let s = open_rows("w", &s, 9, 3).unwrap();
        assert_eq!(s.row(8), v.row(8));
    }

    #[test]
    fn hostile_list_pages_are_refused() {
        let (root, pages) = written(9);
        let name = root.list_page(0);
        let good = body_of(&pages, &name);
        // A count far beyond the page.
        let mut b = Vec::new();
        put_varint(&mut b, u64::MAX >> 1);
        b.extend_from_slice(&good[1..]);
        let e = ListPage::open(&name, &b, 9, 3).err().unwrap().to_string();
        assert!(e.contains(&name) && e.contains("rows in a"), "{e}");
        // A doc id out of range (the bundle has 4 chunks only).
        let e = ListPage::open(&name, &good, 4, 3)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("of a bundle of 4 chunks"), "{e}");
        // A zero delta (ids not ascending).
        let mut b = good.clone();
        b[2] = 0;
        let e = ListPage::open(&name, &b, 9, 3).err().unwrap().to_string();
        assert!(e.contains("not ascending"), "{e}");
        // Truncated rows, wrong dimension.
        let e = ListPage::open(&name, &good[..good.len() - 1], 9, 3)
            .err()
            .unwrap();
        assert!(e.to_string().contains(&name), "{e}");
        assert!(ListPage::open(&name, &good, 9, 4).is_err());
        // Every truncation is an error, never a panic.
        for cut in 0..good.len() {
            assert!(ListPage::open(&name, &good[..cut], 9, 3).is_err());
        }
    }

    #[test]
    fn roots_that_disagree_are_refused() {
        let (root, _) = written(9);
        for (bad, what) in [
            (
                IvfRoot {
                    nlist: 10,
                    ..root.clone()
                },
                "nlist",
            ),
            (
                IvfRoot {
                    nprobe: 3,
                    ..root.clone()
                },
                "nprobe",
            ),
            (
                IvfRoot {
                    nprobe: 0,
                    ..root.clone()
                },
                "nprobe",
            ),
            (
                IvfRoot {
                    codes: "pq".into(),
                    ..root.clone()
                },
                "codes",
            ),
        ] {
            let e = bad.check(9).unwrap_err().to_string();
            assert!(e.contains(ENTRY_FILE) && e.contains(what), "{e}");
        }
        assert!(
            root.check(100).is_err(),
            "sample rows disagree with the chunks"
        );
    }
}

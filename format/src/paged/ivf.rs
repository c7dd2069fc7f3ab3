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
//! With binary codes (`codes` = [`CODES_BINARY`]) a `j` page holds, instead of the rows,
//! for each chunk its projection `p_i = y_i·ĉ_j / ĉ_j·ĉ_j` on the list's stored
//! (dequantized) centroid and one sign bit per dimension of the *residual* `r_i = y_i −
//! p_i·ĉ_j` (centring on the list's centroid, the IVF-ADC residual of Jégou et al. 2011
//! §4.1, taken after the projection: scoring vectors need not be unit long, e.g. with the
//! `shift` centring, and a residual to the unit centroid would spend its bits on the
//! length), with a per-row length `α_i = ‖r_i‖₁ / dim` (the least-squares scale of
//! `sign(r_i)`), so that `p_i·(q·ĉ_j) + α_i·(q·sign(r_i))` estimates the exact score
//! `q·y_i` ([`BinaryList::estimate`]).
//! The engine rescores the best estimates with their int8 rows, read from the `i` pages
//! (the `v` rows again, in list order: list 0's rows, then list 1's, …,
//! [`IvfRoot::rows`]`.per_page` per page) for the candidates only.
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

/// Lists that hold the `v` pages' int8 rows.
pub const CODES_INT8: &str = "int8";

/// Lists that hold sign bits of the residuals and a length per row; int8 rows for the
/// rescoring in `i` pages ([`BinaryList`]).
pub const CODES_BINARY: &str = "binary";

/// Rows per `i` page written by default (a page is `48 + 12 + rows·(dim + 4)` bytes: 1.6 kB
/// for four e5-small rows).
pub const INDEX_ROWS_PER_PAGE: usize = 4;

/// Most rows an `i` page may hold (bounds what a reader sizes from the entry).
pub const MAX_INDEX_ROWS_PER_PAGE: usize = 256;

/// The default oversampling of a binary index: the engine rescores `rescore · min(k, 10)`
/// best estimates with their int8 rows (`k` the hits asked for).
pub const DEFAULT_RESCORE: usize = 8;

/// Largest oversampling an entry may ask for.
pub const MAX_RESCORE: usize = 1024;

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
    /// How the lists store vectors: [`CODES_INT8`] (the `v` pages' rows) or
    /// [`CODES_BINARY`] (sign bits of the residuals, rows for rescoring in [`Self::rows`]).
    pub codes: String,
    /// Centroid pages `g-<gen>-<n>` ([`CENTROIDS_PER_PAGE`] each).
    pub centroids: Numbered,
    /// List pages `j-<gen>-<n>`, one list per page (`per_page` 1).
    pub lists: Numbered,
    /// The background sample page `w-<gen>-0` (`per_page` = its rows).
    pub sample: Numbered,
    /// Binary codes only: the int8 rows in list order (`i-<gen>-<n>`, `per_page` rows each),
    /// read for the candidates a query rescores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rows: Option<Numbered>,
    /// Binary codes only: the default oversampling (`rescore · min(k, 10)` candidates are
    /// rescored; engines may be told another number).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescore: Option<usize>,
    /// How the builder chose the index (informative): the cost model's figures for the
    /// exact scan and the index at this bundle's size, e.g. `auto: exact 226 kB/q, ivf
    /// 172 kB/q + 117 kB once`; absent in bundles written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chosen_by: Option<String>,
    /// Lists rewritten by `jikji update` under a generation of their own (the lists not
    /// named here are `lists.gen`'s): list `j` of [`ListGen::lists`] is page
    /// `j-<ListGen::gen>-<j>`, so an update renames only the list pages whose bytes
    /// changed and every unchanged page keeps its name (and the browser's cached copy).
    /// Absent after a full build; at most [`MAX_LIST_GENS`] entries, each list in at most
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_gens: Option<Vec<ListGen>>,
}

/// A set of list pages written together by an update ([`IvfRoot::list_gens`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListGen {
    /// 16 hex: the first 8 bytes of SHA-256 over the list numbers and raw bodies of the
    /// pages written under it ([`write_pages_kept`]).
    pub gen: String,
    /// The list numbers under this generation, ascending.
    pub lists: Vec<u32>,
}

impl crate::json::FromJson for ListGen {
    const WHAT: &'static str = "an object";
    fn from_json(j: &crate::json::Json, f: &str) -> Result<Self> {
        let o = j.obj(f)?;
        Ok(ListGen {
            gen: o.req("gen")?,
            lists: o.req("lists")?,
        })
    }
}

/// Most [`ListGen`]s an entry may hold: an update that would add one more rewrites every
/// list under one generation instead ([`write_pages_kept`]).
pub const MAX_LIST_GENS: usize = 16;

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
            rows: o.req("rows")?,
            rescore: o.req("rescore")?,
            chosen_by: o.req("chosen_by")?,
            list_gens: o.req("list_gens")?,
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
        let own = self
            .list_gens
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|g| u32::try_from(j).is_ok_and(|j| g.lists.binary_search(&j).is_ok()));
        match own {
            Some(g) => super::page::numbered_name(Kind::Lists, &g.gen, j as u32),
            None => self.lists.name(Kind::Lists, j),
        }
    }

    /// The name of the background sample page.
    pub fn sample_page(&self) -> String {
        self.sample.name(Kind::Sample, 0)
    }

    /// True if the lists hold binary codes ([`CODES_BINARY`]).
    pub fn is_binary(&self) -> bool {
        self.codes == CODES_BINARY
    }

    /// The `i` page holding row `pos` (list order) and the row's place on it, for a binary
    /// index; `None` for int8 lists.
    pub fn row_page(&self, pos: usize) -> Option<(String, usize)> {
        let r = self.rows.as_ref()?;
        let per = r.per_page.max(1);
        Some((r.name(Kind::IndexRows, pos / per), pos % per))
    }

    /// Rows on `i` page `n` of a bundle of `chunks` chunks (0 for int8 lists).
    pub fn rows_on_page(&self, n: usize, chunks: usize) -> usize {
        self.rows.as_ref().map_or(0, |r| {
            chunks
                .saturating_sub(n.saturating_mul(r.per_page))
                .min(r.per_page)
        })
    }

    /// Every page of the index.
    pub fn all_pages(&self) -> Vec<String> {
        let mut out: Vec<String> = (0..self.centroids.pages)
            .map(|n| self.centroid_page(n))
            .collect();
        out.extend((0..self.lists.pages).map(|j| self.list_page(j)));
        out.push(self.sample_page());
        if let Some(r) = &self.rows {
            out.extend((0..r.pages).map(|n| r.name(Kind::IndexRows, n)));
        }
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
        match (self.codes.as_str(), &self.rows, self.rescore) {
            (CODES_INT8, None, None) => {}
            (CODES_BINARY, Some(r), Some(x)) => {
                if r.per_page == 0
                    || r.per_page > MAX_INDEX_ROWS_PER_PAGE
                    || r.pages != chunks.div_ceil(r.per_page)
                {
                    return bad(format!(
                        "pages.ivf.rows: {} pages of {} rows for {chunks} chunks (1..={MAX_INDEX_ROWS_PER_PAGE} rows a page)",
                        r.pages, r.per_page
                    ));
                }
                if x == 0 || x > MAX_RESCORE {
                    return bad(format!("pages.ivf.rescore {x} outside 1..={MAX_RESCORE}"));
                }
            }
            (CODES_INT8 | CODES_BINARY, _, _) => {
                return bad(format!(
                    "pages.ivf.codes {} with rows {} and rescore {} (binary codes need both, int8 neither)",
                    crate::quote::Quoted(&self.codes),
                    if self.rows.is_some() { "present" } else { "absent" },
                    match self.rescore {
                        Some(x) => format!("Some({x})"),
                        None => "None".into(),
                    }
                ));
            }
            _ => {
                return bad(format!(
                    "pages.ivf.codes {} is not known",
                    crate::quote::Quoted(&self.codes)
                ))
            }
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
        if let Some(gens) = &self.list_gens {
            if gens.len() > MAX_LIST_GENS {
                return bad(format!(
                    "pages.ivf.list_gens has {} generations (at most {MAX_LIST_GENS})",
                    gens.len()
                ));
            }
            let mut seen = std::collections::BTreeSet::new();
            for g in gens {
                if g.gen.len() != 16 || !g.gen.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return bad(format!(
                        "pages.ivf.list_gens: generation {} is not 16 hex digits",
                        crate::quote::Quoted(&g.gen)
                    ));
                }
                if g.lists.windows(2).any(|w| w[0] >= w[1])
                    || g.lists
                        .iter()
                        .any(|&j| j as usize >= self.nlist || !seen.insert(j))
                {
                    return bad(format!(
                        "pages.ivf.list_gens {}: lists not ascending, not below {} or in two generations",
                        g.gen, self.nlist
                    ));
                }
            }
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

/// How the lists store their chunks ([`write_pages`]).
pub enum ListCodes<'a> {
    /// The int8 rows ([`CODES_INT8`]).
    Int8,
    /// Sign bits of the residuals ([`CODES_BINARY`]).
    Binary {
        /// Chunk `i`'s scoring vector `y_i` (`dim` long): the vector the centroids were
        /// computed from (the engine's exact score of a centred query `q` is `q·y_i`).
        scoring: &'a (dyn Fn(usize) -> Vec<f32> + Sync),
        /// Rows per `i` page (1..=[`MAX_INDEX_ROWS_PER_PAGE`]).
        rows_per_page: usize,
        /// Default oversampling (1..=[`MAX_RESCORE`]).
        rescore: usize,
    },
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
    /// What the lists hold.
    pub codes: ListCodes<'a>,
}

/// Writes the index's pages for `vectors` (the bundle's rows, doc id = row) to `sink`.
/// Errors: [`FormatError::InvalidInput`] if the lists do not partition the rows, a
/// centroid's or scoring vector's length is not `vectors.dim()`, `nprobe` is outside
/// `1..=nlist`, or binary codes' rows per page or oversampling are out of range.
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
    check_partition(parts.lists, n)?;
    let dim = vectors.dim();
    if let ListCodes::Binary {
        rows_per_page,
        rescore,
        ..
    } = parts.codes
    {
        if rows_per_page == 0 || rows_per_page > MAX_INDEX_ROWS_PER_PAGE {
            return invalid(format!(
                "{rows_per_page} rows per page outside 1..={MAX_INDEX_ROWS_PER_PAGE}"
            ));
        }
        if rescore == 0 || rescore > MAX_RESCORE {
            return invalid(format!("oversampling {rescore} outside 1..={MAX_RESCORE}"));
        }
    }
    let mut cbodies = Vec::new();
    // The centroids as a reader sees them (dequantized): binary residuals are taken from
    // these, so the engine's `q·ĉ_j` is the estimate's base.
    let mut stored: Vec<Vec<f32>> = Vec::with_capacity(nlist);
    for group in parts.centroids.chunks(CENTROIDS_PER_PAGE) {
        let rows: Vec<(f32, Vec<i8>)> = group.iter().map(|c| crate::vectors::quantize(c)).collect();
        if group.iter().any(|c| c.len() != dim) {
            return invalid("a centroid's dimension differs from the vectors'".into());
        }
        stored.extend(
            rows.iter()
                .map(|(s, q)| q.iter().map(|&x| f32::from(x) * s).collect::<Vec<f32>>()),
        );
        cbodies.push(write_quantized(
            dim,
            rows.iter().map(|(s, q)| (*s, q.as_slice())),
        )?);
    }
    let (centroids, pages) = super::numbered(Kind::Centroids, cbodies, CENTROIDS_PER_PAGE);
    for p in pages {
        sink(p)?;
    }
    let (lbodies, rows) = match &parts.codes {
        ListCodes::Int8 => (
            parts
                .lists
                .iter()
                .map(|l| list_body(l, vectors))
                .collect::<Result<Vec<_>>>()?,
            None,
        ),
        ListCodes::Binary {
            scoring,
            rows_per_page,
            ..
        } => {
            let mut first = 0usize;
            let mut bodies = Vec::with_capacity(nlist);
            for (l, c) in parts.lists.iter().zip(&stored) {
                bodies.push(binary_list_body(l, first, c, *scoring, dim)?);
                first += l.len();
            }
            let order: Vec<u32> = parts.lists.concat();
            let rbodies = order
                .chunks(*rows_per_page)
                .map(|part| write_quantized(dim, part.iter().map(|&d| vectors.row(d as usize))))
                .collect::<Result<Vec<_>>>()?;
            (
                bodies,
                Some(super::numbered(Kind::IndexRows, rbodies, *rows_per_page)),
            )
        }
    };
    let (lists, pages) = super::numbered(Kind::Lists, lbodies, 1);
    for p in pages {
        sink(p)?;
    }
    let rows = match rows {
        Some((r, pages)) => {
            for p in pages {
                sink(p)?;
            }
            Some(r)
        }
        None => None,
    };
    let sbody = write_quantized(dim, sample_docs(n).map(|d| vectors.row(d)))?;
    let (sample, pages) = super::numbered(Kind::Sample, vec![sbody], n.min(SAMPLE_ROWS));
    for p in pages {
        sink(p)?;
    }
    let (codes, rescore) = match parts.codes {
        ListCodes::Int8 => (CODES_INT8, None),
        ListCodes::Binary { rescore, .. } => (CODES_BINARY, Some(rescore)),
    };
    Ok(IvfRoot {
        nlist,
        nprobe: parts.nprobe,
        nprobe_from: None,
        codes: codes.into(),
        centroids,
        lists,
        sample,
        rows,
        rescore,
        chosen_by: None,
        list_gens: None,
    })
}

/// What [`write_pages_kept`] did with the list pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeptLists {
    /// List pages whose raw body equals the previous bundle's: written under their old
    /// name (hard-linked when the sink can).
    pub kept: usize,
    /// List pages written with a new name.
    pub rewritten: usize,
}

/// Writes an int8 index for `vectors` whose centroids are the previous bundle's (`old`,
/// its `g` pages' raw bodies `centroid_bodies`, in order) and whose lists are `lists`
/// (the kept chunks in their old lists, the new ones assigned by the builder): the
/// centroid pages keep their names and bytes, a list page whose raw body equals the old
/// page's (read through [`super::PageSink::previous_body`]) keeps its name, and the others
/// are written under one new generation ([`ListGen`]: SHA-256 over their numbers and
/// bodies). When more than half of the lists changed, or the entry would hold more than
/// [`MAX_LIST_GENS`] generations, every list is written under one new base generation
/// (`list_gens` absent), as a full build names them. The sample page is made as
/// [`write_pages`] makes it. Errors: [`FormatError::InvalidInput`] as [`write_pages`]
/// (the lists must partition the rows), a binary `old` index, or centroid bodies that do
/// not match `old` (count, rows, dimension); what `sink` returns.
pub fn write_pages_kept(
    old: &IvfRoot,
    centroid_bodies: &[Vec<u8>],
    lists: &[Vec<u32>],
    nprobe: usize,
    vectors: &Vectors,
    sink: &mut dyn super::PageSink,
) -> Result<(IvfRoot, KeptLists)> {
    let n = vectors.len();
    let nlist = lists.len();
    let dim = vectors.dim();
    let invalid = |m: String| Err(FormatError::InvalidInput(m));
    if old.is_binary() {
        return invalid("kept centroids for a binary index".into());
    }
    if nlist != old.nlist || centroid_bodies.len() != old.centroids.pages {
        return invalid(format!(
            "{nlist} lists and {} centroid pages for an index of {} lists on {} pages",
            centroid_bodies.len(),
            old.nlist,
            old.centroids.pages
        ));
    }
    if nprobe == 0 || nprobe > nlist {
        return invalid(format!("nprobe {nprobe} outside 1..={nlist}"));
    }
    check_partition(lists, n)?;
    for (p, body) in centroid_bodies.iter().enumerate() {
        let name = old.centroid_page(p);
        open_rows(&name, body, centroids_on_page(old, p), dim)?;
        if !sink.reuse(&name, &name)? {
            sink.put(super::page::encode_numbered(
                Kind::Centroids,
                &old.centroids.gen,
                p as u32,
                body,
            ))?;
        }
    }
    let bodies: Vec<Vec<u8>> = lists
        .iter()
        .map(|l| list_body(l, vectors))
        .collect::<Result<_>>()?;
    let same: Vec<bool> = bodies
        .iter()
        .enumerate()
        .map(|(j, b)| sink.previous_body(&old.list_page(j)).as_ref() == Some(b))
        .collect();
    let changed: Vec<u32> = (0..nlist as u32).filter(|&j| !same[j as usize]).collect();
    let mut gens: Vec<ListGen> = old.list_gens.clone().unwrap_or_default();
    for g in &mut gens {
        g.lists
            .retain(|j| same.get(*j as usize).copied().unwrap_or(false));
    }
    gens.retain(|g| !g.lists.is_empty());
    let whole = changed.len() * 2 > nlist || (!changed.is_empty() && gens.len() >= MAX_LIST_GENS);
    let (lists_root, list_gens, stats) = if whole {
        let (root, pages) = super::numbered(Kind::Lists, bodies, 1);
        let mut stats = KeptLists::default();
        for p in pages {
            if !sink.reuse(&p.name, &p.name)? {
                sink.put(p)?;
            }
            stats.rewritten += 1;
        }
        (root, None, stats)
    } else {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for &j in &changed {
            h.update(u64::from(j).to_le_bytes());
            h.update((bodies[j as usize].len() as u64).to_le_bytes());
            h.update(&bodies[j as usize]);
        }
        let gen = hex::encode(&h.finalize()[..8]);
        for (j, body) in bodies.iter().enumerate() {
            // A kept list keeps the generation its old name has (the base one or its
            // `list_gens` entry's), a changed one takes the new generation.
            let g: &str = if same[j] {
                gens.iter()
                    .find(|g| g.lists.binary_search(&(j as u32)).is_ok())
                    .map_or(old.lists.gen.as_str(), |g| g.gen.as_str())
            } else {
                &gen
            };
            let name = super::page::numbered_name(Kind::Lists, g, j as u32);
            debug_assert!(!same[j] || name == old.list_page(j));
            if !sink.reuse(&name, &name)? {
                sink.put(super::page::encode_numbered(Kind::Lists, g, j as u32, body))?;
            }
        }
        if !changed.is_empty() {
            gens.push(ListGen {
                gen,
                lists: changed.clone(),
            });
        }
        (
            old.lists.clone(),
            (!gens.is_empty()).then_some(gens),
            KeptLists {
                kept: nlist - changed.len(),
                rewritten: changed.len(),
            },
        )
    };
    let sbody = write_quantized(dim, sample_docs(n).map(|d| vectors.row(d)))?;
    let (sample, pages) = super::numbered(Kind::Sample, vec![sbody], n.min(SAMPLE_ROWS));
    for p in pages {
        if !sink.reuse(&p.name, &p.name)? {
            sink.put(p)?;
        }
    }
    Ok((
        IvfRoot {
            nlist,
            nprobe,
            nprobe_from: None,
            codes: CODES_INT8.into(),
            centroids: old.centroids.clone(),
            lists: lists_root,
            sample,
            rows: None,
            rescore: None,
            chosen_by: None,
            list_gens,
        },
        stats,
    ))
}

/// Checks that `lists` partition `0..n` with ascending ids. Errors:
/// [`FormatError::InvalidInput`].
fn check_partition(lists: &[Vec<u32>], n: usize) -> Result<()> {
    let invalid = |m: String| Err(FormatError::InvalidInput(m));
    let mut seen = vec![false; n];
    for l in lists {
        if l.windows(2).any(|w| w[0] >= w[1]) {
            return invalid("list doc ids are not ascending".into());
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
    Ok(())
}

/// Bytes of one row's sign bits for vectors of `dim`.
pub fn code_bytes(dim: usize) -> usize {
    dim.div_ceil(8)
}

/// The raw body of a binary list page: `varint count`, `varint first` (the list-order
/// position of its first row: the `i` pages hold row `first + i` for its chunk `i`), the
/// doc-id deltas, `f32` (LE) `amax`, `pmin`, `pmax`, `count` bytes `a_i` (`α_i ≈ amax ·
/// a_i / 255`), `count` bytes `b_i` (`p_i ≈ pmin + (pmax − pmin) · b_i / 255`), then
/// `count × ⌈dim/8⌉` bytes of sign bits (bit `t % 8` of byte `t / 8` set iff the
/// residual's component `t` is > 0).
fn binary_list_body(
    docs: &[u32],
    first: usize,
    centroid: &[f32],
    scoring: &(dyn Fn(usize) -> Vec<f32> + Sync),
    dim: usize,
) -> Result<Vec<u8>> {
    let nb = code_bytes(dim);
    let mut out = Vec::with_capacity(docs.len() * (nb + 3) + 24);
    put_varint(&mut out, docs.len() as u64);
    put_varint(&mut out, first as u64);
    let mut prev = 0u32;
    for (i, &d) in docs.iter().enumerate() {
        put_varint(&mut out, u64::from(if i == 0 { d } else { d - prev }));
        prev = d;
    }
    let mut alphas = Vec::with_capacity(docs.len());
    let mut projs = Vec::with_capacity(docs.len());
    let mut codes = Vec::with_capacity(docs.len() * nb);
    let cc: f32 = centroid.iter().map(|c| c * c).sum();
    for &d in docs {
        let y = scoring(d as usize);
        if y.len() != dim {
            return Err(FormatError::InvalidInput(format!(
                "scoring vector of chunk {d} has {} dimensions, expected {dim}",
                y.len()
            )));
        }
        let yc: f32 = y.iter().zip(centroid).map(|(a, c)| a * c).sum();
        let p = if cc > 0.0 && (yc / cc).is_finite() {
            yc / cc
        } else {
            0.0
        };
        let mut bits = vec![0u8; nb];
        let mut l1 = 0f32;
        for (t, (a, c)) in y.iter().zip(centroid).enumerate() {
            let r = a - p * c;
            l1 += r.abs();
            if r > 0.0 {
                bits[t / 8] |= 1 << (t % 8);
            }
        }
        let a = l1 / dim.max(1) as f32;
        alphas.push(if a.is_finite() { a } else { 0.0 });
        projs.push(p);
        codes.extend(bits);
    }
    let amax = alphas.iter().fold(0f32, |m, &a| m.max(a));
    let pmin = projs.iter().copied().fold(f32::INFINITY, f32::min);
    let pmax = projs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let (pmin, pmax) = if pmin.is_finite() {
        (pmin, pmax)
    } else {
        (0.0, 0.0)
    };
    out.extend(amax.to_le_bytes());
    out.extend(pmin.to_le_bytes());
    out.extend(pmax.to_le_bytes());
    out.extend(alphas.iter().map(|&a| {
        if amax > 0.0 {
            (a / amax * 255.0).round().clamp(0.0, 255.0) as u8
        } else {
            0
        }
    }));
    out.extend(projs.iter().map(|&p| {
        if pmax > pmin {
            ((p - pmin) / (pmax - pmin) * 255.0)
                .round()
                .clamp(0.0, 255.0) as u8
        } else {
            0
        }
    }));
    out.extend(codes);
    Ok(out)
}

/// One decoded binary list page ([`CODES_BINARY`]).
pub struct BinaryList {
    /// Doc ids, ascending.
    pub docs: Vec<u32>,
    /// List-order position of row 0 (row `i` is at `first + i` in the `i` pages).
    pub first: usize,
    /// Per-row residual length `α_i` (dequantized).
    pub alphas: Vec<f32>,
    /// Per-row projection `p_i` on the list's centroid (dequantized).
    pub projs: Vec<f32>,
    /// `docs.len() × ⌈dim/8⌉` bytes of sign bits.
    pub codes: Vec<u8>,
}

impl BinaryList {
    /// Decodes the raw body of binary list page `name` of a bundle of `chunks` chunks with
    /// vectors of `dim`. Errors (DataCorruption naming `p/<name>` and the byte offset): a
    /// count larger than the body could hold, `first + count` beyond `chunks`, ids not
    /// ascending or not below `chunks`, a non-finite or negative `amax`, a non-finite
    /// `pmin`/`pmax` or `pmin > pmax`, a body whose length is not exactly what the count
    /// needs.
    pub fn open(name: &str, body: &[u8], chunks: usize, dim: usize) -> Result<Self> {
        let file = format!("p/{name}");
        let nb = code_bytes(dim);
        let mut r = Reader::new(&file, body, 0);
        let count = r.varint()?;
        // Each row takes at least 1 id byte, 2 bytes of length and projection and nb code
        // bytes.
        let room = (body.len() - r.pos()) / (nb + 3);
        if count > room as u64 {
            return Err(FormatError::corrupt(
                &file,
                0,
                format!("list of {count} rows in a {}-byte page", body.len()),
            ));
        }
        let count = count as usize;
        let at = r.pos() as u64;
        let first = r.varint()?;
        if first.saturating_add(count as u64) > chunks as u64 {
            return Err(FormatError::corrupt(
                &file,
                at,
                format!("rows {first}.. + {count} of a bundle of {chunks} chunks"),
            ));
        }
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
        let need = 12 + count * (nb + 2);
        if body.len() - at != need {
            return Err(FormatError::corrupt(
                &file,
                at as u64,
                format!(
                    "{} bytes of lengths and codes, {need} expected for {count} rows of dimension {dim}",
                    body.len() - at
                ),
            ));
        }
        let f =
            |i: usize| f32::from_le_bytes(body[at + i..at + i + 4].try_into().expect("4 bytes"));
        let (amax, pmin, pmax) = (f(0), f(4), f(8));
        if !amax.is_finite() || amax < 0.0 {
            return Err(FormatError::corrupt(
                &file,
                at as u64,
                format!("row length scale {amax}"),
            ));
        }
        if !pmin.is_finite() || !pmax.is_finite() || pmin > pmax {
            return Err(FormatError::corrupt(
                &file,
                at as u64 + 4,
                format!("projection range {pmin}..{pmax}"),
            ));
        }
        let at = at + 12;
        let alphas = body[at..at + count]
            .iter()
            .map(|&a| amax * f32::from(a) / 255.0)
            .collect();
        let projs = body[at + count..at + 2 * count]
            .iter()
            .map(|&b| pmin + (pmax - pmin) * f32::from(b) / 255.0)
            .collect();
        let codes = body[at + 2 * count..].to_vec();
        Ok(BinaryList {
            docs,
            first: first as usize,
            alphas,
            projs,
            codes,
        })
    }

    /// The estimate of row `i`'s exact score `q·y_i`: `p_i·qc + α_i · (2·Σ_{t: bit t set}
    /// q_t − Σ_t q_t)` with `qc = q·ĉ` (the list's stored centroid) and the per-query byte
    /// tables of [`SignTables`]. Panics if `i` is out of range.
    pub fn estimate(&self, i: usize, qc: f32, t: &SignTables) -> f32 {
        let nb = t.bytes;
        let code = &self.codes[i * nb..(i + 1) * nb];
        let mut s = 0f32;
        for (p, &b) in code.iter().enumerate() {
            s += t.table[p * 256 + usize::from(b)];
        }
        self.projs[i] * qc + self.alphas[i] * (2.0 * s - t.sum)
    }
}

/// A query's sign-bit tables: for byte position `p` and byte value `v`, the sum of the
/// query components whose bits `v` sets (`table[p·256 + v]`), and the sum of all
/// components; one table lookup per code byte then gives `q·sign(r)`.
pub struct SignTables {
    table: Vec<f32>,
    sum: f32,
    bytes: usize,
}

impl SignTables {
    /// The tables of query `q` (its length is the vectors' `dim`): `⌈dim/8⌉ × 256` floats.
    pub fn new(q: &[f32]) -> Self {
        let nb = code_bytes(q.len());
        let mut table = vec![0f32; nb * 256];
        for p in 0..nb {
            let t = &mut table[p * 256..(p + 1) * 256];
            for v in 1..256usize {
                let low = v.trailing_zeros() as usize;
                let x = q.get(p * 8 + low).copied().unwrap_or(0.0);
                t[v] = t[v & (v - 1)] + x;
            }
        }
        SignTables {
            table,
            sum: q.iter().sum(),
            bytes: nb,
        }
    }
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
                codes: ListCodes::Int8,
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

    /// A sink that stores pages by name and answers `previous_body` from an earlier
    /// bundle's pages.
    struct Store {
        previous: Vec<Encoded>,
        put: Vec<Encoded>,
    }

    impl super::super::PageSink for Store {
        fn put(&mut self, page: Encoded) -> Result<()> {
            self.put.push(page);
            Ok(())
        }
        fn previous_body(&self, name: &str) -> Option<Vec<u8>> {
            let p = self.previous.iter().find(|p| p.name == name)?;
            super::super::page::decode_stored(name, &p.bytes).ok()
        }
    }

    #[test]
    fn kept_centroids_rename_only_the_changed_lists() {
        // Four lists of 12 rows; the update changes the rows of list 2 only.
        let v = vectors(12);
        let lists: Vec<Vec<u32>> = (0..4u32).map(|j| vec![j, j + 4, j + 8]).collect();
        let centroids: Vec<Vec<f32>> = (0..4)
            .map(|j| {
                let a = j as f32;
                vec![a.cos(), a.sin(), 0.0]
            })
            .collect();
        let mut old_pages = Vec::new();
        let old = write_pages(
            &IvfParts {
                centroids: &centroids,
                lists: &lists,
                nprobe: 2,
                codes: ListCodes::Int8,
            },
            &v,
            &mut |p| {
                old_pages.push(p);
                Ok(())
            },
        )
        .unwrap();
        let cbodies = vec![body_of(&old_pages, &old.centroid_page(0))];
        let mut rows: Vec<Vec<f32>> = (0..12).map(|i| v.get(i)).collect();
        rows[6] = vec![0.0, 0.0, 1.0];
        let v2 = Vectors::open(&write_vectors(3, &rows).unwrap()).unwrap();
        let mut sink = Store {
            previous: old_pages.clone(),
            put: Vec::new(),
        };
        let (root, stats) = write_pages_kept(&old, &cbodies, &lists, 2, &v2, &mut sink).unwrap();
        root.check(12).unwrap();
        assert_eq!(
            stats,
            KeptLists {
                kept: 3,
                rewritten: 1
            }
        );
        assert_eq!(root.centroids, old.centroids);
        for j in [0, 1, 3] {
            assert_eq!(root.list_page(j), old.list_page(j));
        }
        assert_ne!(root.list_page(2), old.list_page(2));
        let gens = root.list_gens.clone().unwrap();
        assert_eq!(
            (gens.len(), gens[0].lists.as_slice()),
            (1, [2u32].as_slice())
        );
        // Every page is there under the name the root gives, with the bytes a full write of
        // the same lists makes (the names aside).
        let mut full = Vec::new();
        write_pages(
            &IvfParts {
                centroids: &centroids,
                lists: &lists,
                nprobe: 2,
                codes: ListCodes::Int8,
            },
            &v2,
            &mut |p| {
                full.push(p);
                Ok(())
            },
        )
        .unwrap();
        let full_root = written_root(&full);
        for j in 0..4 {
            assert_eq!(
                body_of(&sink.put, &root.list_page(j)),
                body_of(&full, &full_root.list_page(j)),
                "list {j}"
            );
        }
        assert_eq!(
            body_of(&sink.put, &root.centroid_page(0)),
            body_of(&full, &full_root.centroid_page(0))
        );
        // A second update that changes list 1 adds a generation; list 2 keeps its own.
        rows[5] = vec![0.0, 0.7, 0.7];
        let v3 = Vectors::open(&write_vectors(3, &rows).unwrap()).unwrap();
        let mut sink2 = Store {
            previous: sink.put.clone(),
            put: Vec::new(),
        };
        let (root3, stats) = write_pages_kept(&root, &cbodies, &lists, 2, &v3, &mut sink2).unwrap();
        root3.check(12).unwrap();
        assert_eq!(
            stats,
            KeptLists {
                kept: 3,
                rewritten: 1
            }
        );
        assert_eq!(root3.list_page(2), root.list_page(2));
        assert_eq!(root3.list_gens.as_ref().unwrap().len(), 2);
        // Changing more than half of the lists renames them all under one base generation.
        let moved: Vec<Vec<u32>> =
            vec![vec![0, 1, 4], vec![5, 8, 9], vec![2, 3, 10], vec![6, 7, 11]];
        let mut sink3 = Store {
            previous: sink2.put.clone(),
            put: Vec::new(),
        };
        let (root4, stats) =
            write_pages_kept(&root3, &cbodies, &moved, 2, &v3, &mut sink3).unwrap();
        assert_eq!((stats.rewritten, root4.list_gens.is_none()), (4, true));
        root4.check(12).unwrap();
        // Not a partition; a binary index; hostile generations in the entry.
        let bad = vec![vec![0], vec![1], vec![2], vec![3]];
        assert!(write_pages_kept(&old, &cbodies, &bad, 2, &v2, &mut sink3).is_err());
        let mut b = root.clone();
        b.list_gens.as_mut().unwrap()[0].lists = vec![9];
        assert!(b.check(12).is_err());
        let mut b = root.clone();
        b.list_gens.as_mut().unwrap()[0].gen = "../x".into();
        assert!(b.check(12).unwrap_err().to_string().contains("16 hex"));
        // The entry's JSON reads back.
        let json = serde_json::to_vec(&root).unwrap();
        let j = crate::json::parse(&json, "jikji.json").unwrap();
        assert_eq!(
            <IvfRoot as crate::json::FromJson>::from_json(&j, "jikji.json").unwrap(),
            root
        );
    }

    fn written_root(pages: &[Encoded]) -> IvfRoot {
        let gen_of = |kind: &str| {
            let p = pages.iter().find(|p| p.name.starts_with(kind)).unwrap();
            p.name.split('-').nth(1).unwrap().to_string()
        };
        let (g, c) = (gen_of("j-"), gen_of("g-"));
        IvfRoot {
            nlist: 4,
            nprobe: 2,
            nprobe_from: None,
            codes: CODES_INT8.into(),
            centroids: Numbered {
                gen: c,
                per_page: CENTROIDS_PER_PAGE,
                pages: 1,
                ..Default::default()
            },
            lists: Numbered {
                gen: g,
                per_page: 1,
                pages: 4,
                ..Default::default()
            },
            sample: Numbered {
                gen: String::new(),
                per_page: 12,
                pages: 1,
                ..Default::default()
            },
            rows: None,
            rescore: None,
            chosen_by: None,
            list_gens: None,
        }
    }

    fn written_binary(n: usize) -> (IvfRoot, Vec<Encoded>) {
        let v = vectors(n);
        let lists = vec![
            (0..n as u32).step_by(2).collect(),
            (1..n as u32).step_by(2).collect(),
        ];
        let centroids = vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]];
        let scoring = |i: usize| v.get(i);
        let mut pages = Vec::new();
        let root = write_pages(
            &IvfParts {
                centroids: &centroids,
                lists: &lists,
                nprobe: 1,
                codes: ListCodes::Binary {
                    scoring: &scoring,
                    rows_per_page: 4,
                    rescore: 8,
                },
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

    #[test]
    fn binary_lists_hold_signs_of_residuals_and_rows_in_list_order() {
        let (root, pages) = written_binary(9);
        root.check(9).unwrap();
        assert!(root.is_binary());
        let v = vectors(9);
        // Rows in list order: 0 2 4 6 8 1 3 5 7, four a page.
        let rows = root.rows.as_ref().unwrap();
        assert_eq!((rows.pages, rows.per_page), (3, 4));
        assert_eq!(root.rows_on_page(2, 9), 1);
        let name = root.list_page(1);
        let l = BinaryList::open(&name, &body_of(&pages, &name), 9, 3).unwrap();
        assert_eq!((l.docs.as_slice(), l.first), ([1, 3, 5, 7].as_slice(), 5));
        for (i, &d) in l.docs.iter().enumerate() {
            let (page, at) = root.row_page(l.first + i).unwrap();
            let n = (l.first + i) / 4;
            let r = open_rows(&page, &body_of(&pages, &page), root.rows_on_page(n, 9), 3).unwrap();
            assert_eq!(r.row(at), v.row(d as usize));
            // The estimate: p·(q·c) + α·(q·sign(x − p·c)), c = (0, 1, 0) stored exactly,
            // p = x·c.
            let x = v.get(d as usize);
            let q = [0.3f32, -0.2, 0.9];
            let p = x[1];
            let r: Vec<f32> = x.iter().zip([0.0, p, 0.0]).map(|(a, c)| a - c).collect();
            let alpha = r.iter().map(|a| a.abs()).sum::<f32>() / 3.0;
            let signed: f32 = r
                .iter()
                .zip(&q)
                .map(|(a, b)| if *a > 0.0 { *b } else { -b })
                .sum();
            let want = p * -0.2 + alpha * signed;
            let got = l.estimate(i, -0.2, &SignTables::new(&q));
            assert!((got - want).abs() < 0.01, "{got} vs {want}");
        }
    }

    #[test]
    fn hostile_binary_list_pages_are_refused() {
        let (_, pages) = written_binary(9);
        let (root, _) = written_binary(9);
        let name = root.list_page(0);
        let good = body_of(&pages, &name);
        assert!(BinaryList::open(&name, &good, 9, 3).is_ok());
        for cut in 0..good.len() {
            assert!(
                BinaryList::open(&name, &good[..cut], 9, 3).is_err(),
                "cut {cut}"
            );
        }
        let mut long = good.clone();
        long.push(0);
        assert!(BinaryList::open(&name, &long, 9, 3).is_err());
        // Rows past the bundle's end (first = 0, count 5: a bundle of 4 chunks).
        let e = BinaryList::open(&name, &good, 4, 3)
            .err()
            .unwrap()
            .to_string();
        assert!(
            e.contains(&name) && e.contains("of a bundle of 4 chunks"),
            "{e}"
        );
        let mut b = Vec::new();
        put_varint(&mut b, u64::MAX >> 1);
        b.extend_from_slice(&good[1..]);
        let e = BinaryList::open(&name, &b, 9, 3).err().unwrap().to_string();
        assert!(e.contains("rows in a"), "{e}");
        // A NaN row-length scale: after count (1 B), first (1 B) and 5 deltas (5 B); an
        // empty projection range.
        let mut b = good.clone();
        b[7..11].copy_from_slice(&f32::NAN.to_le_bytes());
        let e = BinaryList::open(&name, &b, 9, 3).err().unwrap().to_string();
        assert!(e.contains("row length scale"), "{e}");
        let mut b = good.clone();
        b[11..15].copy_from_slice(&f32::MAX.to_le_bytes());
        let e = BinaryList::open(&name, &b, 9, 3).err().unwrap().to_string();
        assert!(e.contains("projection range"), "{e}");
        // Roots: binary without rows, int8 with a rescore, a zero oversampling.
        for bad in [
            IvfRoot {
                rows: None,
                ..root.clone()
            },
            IvfRoot {
                rescore: Some(0),
                ..root.clone()
            },
            IvfRoot {
                codes: CODES_INT8.into(),
                ..root.clone()
            },
        ] {
            let e = bad.check(9).unwrap_err().to_string();
            assert!(e.contains(ENTRY_FILE) && e.contains("pages.ivf"), "{e}");
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

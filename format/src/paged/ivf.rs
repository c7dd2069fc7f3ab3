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
//! Compact once-per-bundle pages (issue 14, `docs/design/dense-pq.md` §4.4, §4.6, §5.1):
//! with `centroid_codes` = [`CENTROIDS_INT4_CENTRED`] the `g` pages hold each centroid as
//! 4-bit codes of its difference to the centroids' mean ([`StoredCentroids`]: 196 B a
//! centroid with e5-small instead of 388 B); with `sample_codes` = [`SAMPLE_BINARY`] the
//! `w` page holds the sample's chunks coded as binary lists code their rows, with the
//! factor that corrects the coded scores' spread ([`CodedSample`]: ~13 kB instead of
//! 99 kB). Either field absent: the int8 bodies above (every bundle written before them).
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

/// Centroid pages as int8 rows, a `vectors.bin` body each (`centroid_codes` absent or
/// this).
pub const CENTROIDS_INT8: &str = "int8";

/// Centroid pages as 4-bit codes of each centroid's difference to the centroids' mean
/// (`centroid_codes`; [`StoredCentroids`]).
pub const CENTROIDS_INT4_CENTRED: &str = "int4-centred";

/// A background sample page of int8 rows, a `vectors.bin` body (`sample_codes` absent or
/// this).
pub const SAMPLE_INT8: &str = "int8";

/// A background sample page coded as binary lists code their rows, with a correction of
/// the scores' spread (`sample_codes`; [`CodedSample`]). Only with [`CODES_BINARY`] lists.
pub const SAMPLE_BINARY: &str = "binary";

/// Largest spread correction a coded sample page may carry (and `1 / ` it the smallest):
/// the measured factors are ~1.07 (`docs/design/dense-pq.md` §4.6).
pub const MAX_SIGMA_RATIO: f32 = 16.0;

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
    /// How the `g` pages code the centroids: [`CENTROIDS_INT8`] or
    /// [`CENTROIDS_INT4_CENTRED`]; absent (bundles written before it) = int8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub centroid_codes: Option<String>,
    /// How the `w` page codes the background sample: [`SAMPLE_INT8`] or [`SAMPLE_BINARY`]
    /// (binary lists only); absent (bundles written before it) = int8.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_codes: Option<String>,
    /// Lists rewritten by `jikji update` under a generation of their own (the lists not
    /// named here are `lists.gen`'s): list `j` of [`ListGen::lists`] is page
    /// `j-<ListGen::gen>-<j>`, so an update renames only the list pages whose bytes
    /// changed and every unchanged page keeps its name (and the browser's cached copy).
    /// Absent after a full build; at most [`MAX_LIST_GENS`] entries, each list in at most
    /// one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_gens: Option<Vec<ListGen>>,
    /// Binary codes only: the `i` pages are numbered per list, this many page numbers
    /// reserved for each list (`S`): row `k` of list `j` is on page `i-<G_j>-<j·S + ⌊k /
    /// rows.per_page⌋>`, `G_j` the generation of list `j`'s page ([`Self::list_page`]), so
    /// a list's rows do not move when another list changes and an update renames only the
    /// row pages of the lists it rewrites ([`Self::list_row`]). Absent (bundles written
    /// before it): the rows are in list order (`i-<rows.gen>-<⌊pos / per_page⌋>`, `pos` =
    /// the list page's `first` + `k`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_rows: Option<usize>,
    /// Binary codes with [`Self::list_rows`] only, bundles written from 2026-12-07: `true`
    /// when each list's rows are grouped by position (principal-direction bisection of the
    /// list's scoring vectors, [`row_groups`]) into `i` pages of at most `rows.per_page`
    /// rows: group `g` of list `j` is page `i-<G_j>-<j·S + g>` and the list page carries
    /// each row's group ([`BinaryList::groups`]), so the candidates a query rescores share
    /// pages (`docs/design/dense-pq.md`, "Grouped rows"). Absent: rows in list order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub row_groups: Option<bool>,
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
            centroid_codes: o.req("centroid_codes")?,
            sample_codes: o.req("sample_codes")?,
            list_gens: o.req("list_gens")?,
            list_rows: o.req("list_rows")?,
            row_groups: o.req("row_groups")?,
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
        super::page::numbered_name(Kind::Lists, self.list_gen(j), j as u32)
    }

    /// The name of the background sample page.
    pub fn sample_page(&self) -> String {
        self.sample.name(Kind::Sample, 0)
    }

    /// True if the lists hold binary codes ([`CODES_BINARY`]).
    pub fn is_binary(&self) -> bool {
        self.codes == CODES_BINARY
    }

    /// How the centroids are coded ([`CENTROIDS_INT8`] when the entry does not say).
    pub fn centroid_codes(&self) -> CentroidCodes {
        match self.centroid_codes.as_deref() {
            Some(CENTROIDS_INT4_CENTRED) => CentroidCodes::Int4Centred,
            _ => CentroidCodes::Int8,
        }
    }

    /// True if the `w` page is coded ([`SAMPLE_BINARY`]).
    pub fn sample_is_coded(&self) -> bool {
        self.sample_codes.as_deref() == Some(SAMPLE_BINARY)
    }

    /// The pages a dense query needs once per bundle generation, whatever the query: the
    /// centroid pages and the sample page (what the browser prefetches with the query
    /// model).
    pub fn once_pages(&self) -> Vec<String> {
        let mut out: Vec<String> = (0..self.centroids.pages)
            .map(|n| self.centroid_page(n))
            .collect();
        out.push(self.sample_page());
        out
    }

    /// The `i` page holding row `pos` (list order) and the row's place on it, for a binary
    /// index whose rows are in list order (no [`Self::list_rows`]); `None` for int8 lists.
    pub fn row_page(&self, pos: usize) -> Option<(String, usize)> {
        let r = self.rows.as_ref()?;
        let per = r.per_page.max(1);
        Some((r.name(Kind::IndexRows, pos / per), pos % per))
    }

    /// Where row `k` of binary list `j` is (its page says `first` and `count` rows, checked
    /// by [`Self::check_list`]): the `i` page's name, the row's place on it and the rows the
    /// page holds, in either layout ([`Self::list_rows`]); `None` for int8 lists or a row
    /// past the list or the bundle's `chunks`.
    pub fn list_row(
        &self,
        j: usize,
        first: usize,
        k: usize,
        count: usize,
        chunks: usize,
    ) -> Option<(String, usize, usize)> {
        let r = self.rows.as_ref()?;
        let per = r.per_page.max(1);
        if k >= count {
            return None;
        }
        match self.list_rows {
            None => {
                let pos = first.checked_add(k).filter(|&p| p < chunks)?;
                let (name, at) = self.row_page(pos)?;
                Some((name, at, self.rows_on_page(pos / per, chunks)))
            }
            Some(s) => {
                let p = k / per;
                if p >= s {
                    return None;
                }
                let n = u32::try_from(j.checked_mul(s)?.checked_add(p)?).ok()?;
                let gen = self.list_gen(j);
                Some((
                    super::page::numbered_name(Kind::IndexRows, gen, n),
                    k % per,
                    (count - p * per).min(per),
                ))
            }
        }
    }

    /// The `i` pages of binary list `j` of `count` rows in the per-list layout
    /// ([`Self::list_rows`]), in order; empty in the list-order layout or for int8 lists.
    pub fn list_row_pages(&self, j: usize, count: usize) -> Vec<String> {
        let Some(r) = &self.rows else {
            return Vec::new();
        };
        if self.list_rows.is_none() {
            return Vec::new();
        }
        let per = r.per_page.max(1);
        (0..count.div_ceil(per))
            .filter_map(|p| self.list_row(j, 0, p * per, count, usize::MAX))
            .map(|x| x.0)
            .collect()
    }

    /// True when the lists' rows are grouped ([`Self::row_groups`]).
    pub fn grouped(&self) -> bool {
        self.row_groups == Some(true) && self.list_rows.is_some()
    }

    /// The `i` page of group `g` of list `j` in the grouped layout ([`Self::row_groups`]):
    /// `i-<G_j>-<j·S + g>`; `None` without groups or for a number past a u32.
    pub fn group_page(&self, j: usize, g: usize) -> Option<String> {
        let s = self.list_rows.filter(|_| self.grouped())?;
        if g >= s {
            return None;
        }
        let n = u32::try_from(j.checked_mul(s)?.checked_add(g)?).ok()?;
        Some(super::page::numbered_name(
            Kind::IndexRows,
            self.list_gen(j),
            n,
        ))
    }

    /// Decodes binary list page `name` of list `j` as this index lays it out: with
    /// [`Self::row_groups`] the page carries each row's group ([`BinaryList::open_grouped`]),
    /// checked against `list_rows` and `rows.per_page`; then [`Self::check_list`].
    /// Errors: DataCorruption naming `p/<name>` and the byte offset.
    pub fn open_list(
        &self,
        name: &str,
        body: &[u8],
        chunks: usize,
        dim: usize,
    ) -> Result<BinaryList> {
        let list = if self.grouped() {
            let (s, per) = (
                self.list_rows.unwrap_or(0),
                self.rows.as_ref().map_or(0, |r| r.per_page),
            );
            BinaryList::open_grouped(name, body, chunks, dim, s.min(256), per)?
        } else {
            BinaryList::open(name, body, chunks, dim)?
        };
        self.check_list(name, list.first, list.docs.len())?;
        Ok(list)
    }

    /// Checks binary list page `name` (list `j`'s, holding `count` rows from `first`)
    /// against the row layout: in the per-list layout ([`Self::list_rows`] `S`) `first`
    /// must be 0 and `count` at most `S · rows.per_page`. Errors: DataCorruption naming
    /// `p/<name>`.
    pub fn check_list(&self, name: &str, first: usize, count: usize) -> Result<()> {
        let (Some(s), Some(r)) = (self.list_rows, &self.rows) else {
            return Ok(());
        };
        let room = s.saturating_mul(r.per_page);
        if first != 0 || count > room {
            return Err(FormatError::corrupt(
                &format!("p/{name}"),
                0,
                format!(
                    "list of {count} rows from {first} where the entry numbers rows per list (first 0, at most {room} rows)"
                ),
            ));
        }
        Ok(())
    }

    /// The generation in list `j`'s page name (its [`ListGen`]'s, or `lists.gen`).
    pub fn list_gen(&self, j: usize) -> &str {
        self.list_gens
            .as_deref()
            .unwrap_or_default()
            .iter()
            .find(|g| u32::try_from(j).is_ok_and(|j| g.lists.binary_search(&j).is_ok()))
            .map_or(self.lists.gen.as_str(), |g| g.gen.as_str())
    }

    /// Rows on `i` page `n` of a bundle of `chunks` chunks (0 for int8 lists).
    pub fn rows_on_page(&self, n: usize, chunks: usize) -> usize {
        self.rows.as_ref().map_or(0, |r| {
            chunks
                .saturating_sub(n.saturating_mul(r.per_page))
                .min(r.per_page)
        })
    }

    /// Every page of the index; in the per-list row layout ([`Self::list_rows`]) without
    /// the `i` pages, whose numbers depend on the lists' counts ([`Self::list_row_pages`]).
    pub fn all_pages(&self) -> Vec<String> {
        let mut out: Vec<String> = (0..self.centroids.pages)
            .map(|n| self.centroid_page(n))
            .collect();
        out.extend((0..self.lists.pages).map(|j| self.list_page(j)));
        out.push(self.sample_page());
        if let (Some(r), None) = (&self.rows, self.list_rows) {
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
                // Per list: each list's last page may be short, so between ⌈chunks /
                // per_page⌉ and `chunks` pages.
                let pages_ok = match self.list_rows {
                    None => r.pages == chunks.div_ceil(r.per_page.max(1)),
                    Some(_) => r.pages >= chunks.div_ceil(r.per_page.max(1)) && r.pages <= chunks,
                };
                if r.per_page == 0 || r.per_page > MAX_INDEX_ROWS_PER_PAGE || !pages_ok {
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
        match self.centroid_codes.as_deref() {
            None | Some(CENTROIDS_INT8 | CENTROIDS_INT4_CENTRED) => {}
            Some(c) => {
                return bad(format!(
                    "pages.ivf.centroid_codes {} is not known",
                    crate::quote::Quoted(c)
                ))
            }
        }
        match (self.sample_codes.as_deref(), self.codes.as_str()) {
            (None | Some(SAMPLE_INT8), _) | (Some(SAMPLE_BINARY), CODES_BINARY) => {}
            (Some(c), _) => {
                return bad(format!(
                    "pages.ivf.sample_codes {} with {} lists (a binary sample needs binary lists)",
                    crate::quote::Quoted(c),
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
        // Per-page centroid generations (an update that split lists past the cap,
        // [`edit_centroids`]): the run's `gens` checked as every grouped run's.
        self.centroids.check_groups("ivf.centroids")?;
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
        if let Some(s) = self.list_rows {
            // Page numbers `j·S + p` must fit a page header's u32.
            let fits = self
                .nlist
                .checked_mul(s)
                .is_some_and(|x| x <= u32::MAX as usize);
            if !self.is_binary() || s == 0 || !fits {
                return bad(format!(
                    "pages.ivf.list_rows {s} with {} lists of {} codes (binary codes only, 1 ≤ nlist · list_rows ≤ 2^32 − 1)",
                    self.nlist,
                    crate::quote::Quoted(&self.codes)
                ));
            }
        }
        if self.row_groups.is_some()
            && (self.row_groups != Some(true)
                || self.list_rows.is_none()
                || self.rows.as_ref().is_none_or(|r| r.per_page < 2))
        {
            return bad(format!(
                "pages.ivf.row_groups {:?} (true only, with binary codes, list_rows and rows.per_page ≥ 2)",
                self.row_groups
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

/// How the centroid pages code the centroids (`pages.ivf.centroid_codes`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CentroidCodes {
    /// Int8 rows with a scale each ([`CENTROIDS_INT8`], a `vectors.bin` body a page).
    #[default]
    Int8,
    /// 4-bit codes of each centroid's difference to the centroids' mean
    /// ([`CENTROIDS_INT4_CENTRED`], [`StoredCentroids`]).
    Int4Centred,
}

impl CentroidCodes {
    /// The entry's name of the codes ([`CENTROIDS_INT8`] or [`CENTROIDS_INT4_CENTRED`]).
    pub fn name(self) -> &'static str {
        match self {
            CentroidCodes::Int8 => CENTROIDS_INT8,
            CentroidCodes::Int4Centred => CENTROIDS_INT4_CENTRED,
        }
    }

    /// The codes named `s` (as [`Self::name`] writes them), `None` for another name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            CENTROIDS_INT8 => Some(CentroidCodes::Int8),
            CENTROIDS_INT4_CENTRED => Some(CentroidCodes::Int4Centred),
            _ => None,
        }
    }
}

/// How [`write_pages_with`] codes the once-per-bundle pages (centroids and background
/// sample). The default is what [`write_pages`] writes: int8 centroids, an int8 sample.
#[derive(Clone, Copy, Default)]
pub struct PageOptions<'a> {
    /// How the centroids are coded.
    pub centroids: CentroidCodes,
    /// True: the sample page is coded as the binary lists code their rows
    /// ([`SAMPLE_BINARY`]; needs [`ListCodes::Binary`]); false: int8 rows.
    pub coded_sample: bool,
    /// Centred query vectors (`dim` long; others are skipped) on which the writer measures
    /// the coded sample's spread correction ([`CodedSample::sigma_ratio`]): the builder's
    /// calibration pseudo-queries. Empty: the sample's own scoring vectors serve as
    /// queries, each against the other rows.
    pub sample_queries: &'a [Vec<f32>],
    /// True: binary lists' `i` pages are numbered per list ([`IvfRoot::list_rows`], what
    /// the builder writes, so `jikji update` can keep them); false: in list order (the
    /// layout of bundles written before it).
    pub rows_per_list: bool,
    /// Binary lists in the per-list layout only: the group of each row of a list (its
    /// doc ids, ascending → one group number a row), so that a group's rows share one `i`
    /// page ([`IvfRoot::row_groups`]); `None`: `rows_per_page` rows a page in list order.
    /// The writer checks what it returns ([`check_groups`]).
    pub row_groups: Option<&'a RowGrouping<'a>>,
}

/// The group of each row of a list, given the list's doc ids (ascending): one number a
/// row, the groups numbered `0..m` in order of their first row, each at most
/// `rows.per_page` rows ([`IvfRoot::row_groups`]).
pub type RowGrouping<'a> = dyn Fn(&[u32]) -> Vec<u8> + Sync + 'a;

/// Writes the index's pages for `vectors` (the bundle's rows, doc id = row) to `sink`,
/// with int8 centroid and sample pages ([`write_pages_with`] and the default
/// [`PageOptions`]). Errors: as [`write_pages_with`].
pub fn write_pages(
    parts: &IvfParts,
    vectors: &Vectors,
    sink: &mut dyn FnMut(Encoded) -> Result<()>,
) -> Result<IvfRoot> {
    write_pages_with(parts, &PageOptions::default(), vectors, sink)
}

/// Writes the index's pages for `vectors` (the bundle's rows, doc id = row) to `sink`, the
/// centroid and sample pages coded as `opts` says. Binary residual codes (lists and coded
/// sample) are taken against the *stored* (dequantized) centroids, the values a reader
/// ranks the lists by. Errors: [`FormatError::InvalidInput`] if the lists do not partition
/// the rows, a centroid's or scoring vector's length is not `vectors.dim()`, `nprobe` is
/// outside `1..=nlist`, binary codes' rows per page or oversampling are out of range, or a
/// coded sample is asked for int8 lists.
pub fn write_pages_with(
    parts: &IvfParts,
    opts: &PageOptions,
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
        if opts.row_groups.is_some() && (!opts.rows_per_list || rows_per_page < 2) {
            return invalid(format!(
                "grouped rows need rows numbered per list and at least 2 rows a page, not {rows_per_page}"
            ));
        }
    } else if opts.coded_sample {
        return invalid("a coded background sample needs binary lists".into());
    } else if opts.row_groups.is_some() {
        return invalid("grouped rows need binary lists".into());
    }
    if parts.centroids.iter().any(|c| c.len() != dim) {
        return invalid("a centroid's dimension differs from the vectors'".into());
    }
    // The centroids as a reader sees them (dequantized): binary residuals are taken from
    // these, so the engine's `q·ĉ_j` is the estimate's base.
    let (cbodies, stored) = centroid_bodies(parts.centroids, opts.centroids, dim)?;
    let (centroids, pages) = super::numbered(Kind::Centroids, cbodies, CENTROIDS_PER_PAGE);
    for p in pages {
        sink(p)?;
    }
    // The per-list layout's list root, list pages and `S` (its row pages are already out).
    let mut per_list: Option<(Numbered, Vec<Encoded>, usize)> = None;
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
        } if opts.rows_per_list => {
            let s = list_rows_for(parts.lists, *rows_per_page)?;
            let mut made = Vec::with_capacity(nlist);
            for (l, c) in parts.lists.iter().zip(&stored) {
                made.push(per_list_binary(
                    l,
                    c,
                    *scoring,
                    *rows_per_page,
                    opts.row_groups,
                    vectors,
                )?);
            }
            let gen = per_list_gen(made.iter().enumerate().map(|(j, (b, r))| (j, b, r)));
            let mut pages = 0usize;
            let mut lbodies = Vec::with_capacity(nlist);
            for (j, (body, rbodies)) in made.into_iter().enumerate() {
                for (p, rb) in rbodies.iter().enumerate() {
                    sink(super::page::encode_numbered(
                        Kind::IndexRows,
                        &gen,
                        (j * s + p) as u32,
                        rb,
                    ))?;
                }
                pages += rbodies.len();
                lbodies.push(body);
            }
            let pages_out: Vec<Encoded> = lbodies
                .iter()
                .enumerate()
                .map(|(j, b)| super::page::encode_numbered(Kind::Lists, &gen, j as u32, b))
                .collect();
            per_list = Some((
                Numbered {
                    gen: gen.clone(),
                    per_page: 1,
                    pages: nlist,
                    ..Numbered::default()
                },
                pages_out,
                s,
            ));
            (
                Vec::new(),
                Some((
                    Numbered {
                        gen,
                        per_page: *rows_per_page,
                        pages,
                        ..Numbered::default()
                    },
                    Vec::new(),
                )),
            )
        }
        ListCodes::Binary {
            scoring,
            rows_per_page,
            ..
        } => {
            let mut first = 0usize;
            let mut bodies = Vec::with_capacity(nlist);
            for (l, c) in parts.lists.iter().zip(&stored) {
                bodies.push(binary_list_body(l, first, c, *scoring, None, dim)?);
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
    let (lists, pages, list_rows) = match per_list {
        Some((_, _, s)) if opts.row_groups.is_some() && s > 256 => {
            return invalid(format!(
                "grouped rows number at most 256 groups a list, the longest list would need {s}"
            ));
        }
        Some((root, pages, s)) => (root, pages, Some(s)),
        None => {
            let (root, pages) = super::numbered(Kind::Lists, lbodies, 1);
            (root, pages, None)
        }
    };
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
    let sbody = match (&parts.codes, opts.coded_sample) {
        (ListCodes::Binary { scoring, .. }, true) => {
            coded_sample_body(parts.lists, &stored, *scoring, opts.sample_queries, n, dim)?
        }
        _ => write_quantized(dim, sample_docs(n).map(|d| vectors.row(d)))?,
    };
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
        centroid_codes: (opts.centroids != CentroidCodes::Int8)
            .then(|| opts.centroids.name().to_string()),
        sample_codes: opts.coded_sample.then(|| SAMPLE_BINARY.to_string()),
        list_gens: None,
        list_rows,
        row_groups: (list_rows.is_some() && opts.row_groups.is_some()).then_some(true),
    })
}

/// The page numbers reserved per list in the per-list row layout ([`IvfRoot::list_rows`])
/// for `lists` at `per` rows a page: room for the longest list to double (`⌈2·longest /
/// per⌉`, at least 1; an update that would pass it writes the index afresh), at most what
/// keeps `nlist · S` within a u32. Errors: InvalidInput when the longest list itself does
/// not fit.
fn list_rows_for(lists: &[Vec<u32>], per: usize) -> Result<usize> {
    let per = per.max(1);
    let longest = lists.iter().map(Vec::len).max().unwrap_or(0);
    let most = u32::MAX as usize / lists.len().max(1);
    let need = longest.div_ceil(per).max(1);
    if need > most {
        return Err(FormatError::InvalidInput(format!(
            "a list of {longest} rows does not fit {} lists' row page numbers",
            lists.len()
        )));
    }
    Ok((2 * longest).div_ceil(per).clamp(1, most))
}

/// Binary list `docs`'s page body in the per-list layout (`first` 0, codes against the
/// stored centroid `centroid`) and the raw bodies of its `i` pages: its int8 rows, `per` a
/// page (the last fewer) in list order, or with `grouping` one page a group, each group's
/// rows in list order (the groups checked by [`check_groups`]).
fn per_list_binary(
    docs: &[u32],
    centroid: &[f32],
    scoring: &(dyn Fn(usize) -> Vec<f32> + Sync),
    per: usize,
    grouping: Option<&RowGrouping>,
    vectors: &Vectors,
) -> Result<(Vec<u8>, Vec<Vec<u8>>)> {
    let dim = vectors.dim();
    let Some(group) = grouping else {
        let body = binary_list_body(docs, 0, centroid, scoring, None, dim)?;
        let rows = docs
            .chunks(per.max(1))
            .map(|part| write_quantized(dim, part.iter().map(|&d| vectors.row(d as usize))))
            .collect::<Result<Vec<_>>>()?;
        return Ok((body, rows));
    };
    let groups = group(docs);
    let m = check_groups(&groups, docs.len(), per)
        .map_err(|e| FormatError::InvalidInput(format!("row groups of a list: {e}")))?;
    let body = binary_list_body(docs, 0, centroid, scoring, Some(&groups), dim)?;
    let rows = (0..m)
        .map(|g| {
            write_quantized(
                dim,
                docs.iter()
                    .zip(&groups)
                    .filter(|(_, &x)| usize::from(x) == g)
                    .map(|(&d, _)| vectors.row(d as usize)),
            )
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((body, rows))
}

/// Checks the groups of a list of `count` rows (one number a row): `count` numbers, the
/// groups `0..m` numbered in order of their first row, each at most `per` rows. Returns
/// `m`; the error says what is wrong (the caller names the page or the input).
pub fn check_groups(groups: &[u8], count: usize, per: usize) -> std::result::Result<usize, String> {
    if groups.len() != count {
        return Err(format!("{} group numbers for {count} rows", groups.len()));
    }
    let mut sizes: Vec<usize> = Vec::new();
    for (k, &g) in groups.iter().enumerate() {
        let g = usize::from(g);
        if g > sizes.len() {
            return Err(format!(
                "row {k} is in group {g} before group {} has a row",
                sizes.len()
            ));
        }
        if g == sizes.len() {
            sizes.push(0);
        }
        sizes[g] += 1;
        if sizes[g] > per {
            return Err(format!("group {g} holds more than {per} rows"));
        }
    }
    Ok(sizes.len())
}

/// The generation of binary lists written together in the per-list layout (a full build's
/// `lists.gen`, or an update's [`ListGen`]): the first 8 bytes of SHA-256 over, for each
/// list in order, its number (u64 LE), its page's raw body length (u64 LE) and body, then
/// each of its `i` pages' raw body length (u64 LE) and body. The rows are in the digest:
/// their pages are named by it.
fn per_list_gen<'a>(lists: impl Iterator<Item = (usize, &'a Vec<u8>, &'a Vec<Vec<u8>>)>) -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (j, body, rows) in lists {
        h.update((j as u64).to_le_bytes());
        h.update((body.len() as u64).to_le_bytes());
        h.update(body);
        for r in rows {
            h.update((r.len() as u64).to_le_bytes());
            h.update(r);
        }
    }
    hex::encode(&h.finalize()[..8])
}

/// What [`write_pages_kept`] did with the list pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct KeptLists {
    /// List pages whose raw body equals the previous bundle's: written under their old
    /// name (hard-linked when the sink can).
    pub kept: usize,
    /// List pages written with a new name.
    pub rewritten: usize,
    /// Binary lists in the per-list row layout: `i` pages kept under their old name.
    pub row_pages_kept: usize,
    /// Binary lists in the per-list row layout: `i` pages written with a new name.
    pub row_pages_rewritten: usize,
}

/// Writes an int8 index for `vectors` whose centroids are the previous bundle's (`old`,
/// its `g` pages' raw bodies `centroid_bodies`, in order) and whose lists are `lists`
/// (the kept chunks in their old lists, the new ones assigned by the builder): the
/// centroid pages are written under `old`'s names with `centroid_bodies` (the previous
/// bundle's, or those of [`edit_centroids`] after lists were split past the cap: then `old`
/// is its root, and only pages holding a changed centroid have new names), a list page whose raw body equals the old
/// page's (read through [`super::PageSink::previous_body`]) keeps its name, and the others
/// are written under one new generation ([`ListGen`]: SHA-256 over their numbers and
/// bodies). When more than half of the lists changed, or the entry would hold more than
/// [`MAX_LIST_GENS`] generations, every list is written under one new base generation
/// (`list_gens` absent), as a full build names them. The sample page is made as
/// [`write_pages`] makes it (int8 rows). The centroids keep `old`'s codes
/// (`centroid_codes`). Errors: [`FormatError::InvalidInput`] as [`write_pages`] (the lists
/// must partition the rows), a binary `old` index; DataCorruption for centroid bodies that
/// do not decode as `old`'s (count, rows, dimension, codes); what `sink` returns.
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
    check_kept(old, centroid_bodies, lists, nprobe, n)?;
    StoredCentroids::open(old, centroid_bodies, dim)?;
    keep_centroid_pages(old, centroid_bodies, sink)?;
    let bodies: Vec<Vec<u8>> = lists
        .iter()
        .map(|l| list_body(l, vectors))
        .collect::<Result<_>>()?;
    let same: Vec<bool> = bodies
        .iter()
        .enumerate()
        .map(|(j, b)| sink.previous_body(&old.list_page(j)).as_ref() == Some(b))
        .collect();
    let (changed, mut gens, whole) = kept_gens(old, &same);
    let changed: Vec<u32> = changed.into_iter().map(|j| j as u32).collect();
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
                ..KeptLists::default()
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
            centroid_codes: old.centroid_codes.clone(),
            sample_codes: None,
            list_gens,
            list_rows: None,
            row_groups: None,
        },
        stats,
    ))
}

/// Writes a binary index in the per-list row layout ([`IvfRoot::list_rows`]) for `vectors`
/// whose centroids are the previous bundle's (`old`, its `g` pages' raw bodies
/// `centroid_bodies`) and whose lists are `lists`, as [`write_pages_kept`] does for int8
/// lists: each list's codes are taken against its stored (dequantized) centroid exactly as
/// [`write_pages_with`] takes them (`scoring`: chunk `i`'s scoring vector); a list whose
/// page and `i` pages' raw bodies all equal the old ones (under their old names) keeps its
/// names, the others are written under one new generation ([`ListGen`], the digest of
/// [`per_list_gen`]) with their `i` pages; more than half changed or [`MAX_LIST_GENS`]
/// reached: every list and `i` page under one new base generation. The sample page is coded
/// as `old`'s (`sample_queries` as [`PageOptions::sample_queries`]). Errors: InvalidInput
/// for an `old` that is not binary in the per-list layout, lists that do not partition
/// the rows or a list longer than its reserved page numbers hold (`list_rows · per_page`);
/// DataCorruption for centroid bodies that do not decode as `old`'s; what `sink` returns.
#[allow(clippy::too_many_arguments)]
pub fn write_pages_kept_binary(
    old: &IvfRoot,
    centroid_bodies: &[Vec<u8>],
    lists: &[Vec<u32>],
    nprobe: usize,
    vectors: &Vectors,
    scoring: &(dyn Fn(usize) -> Vec<f32> + Sync),
    grouping: Option<&RowGrouping>,
    sample_queries: &[Vec<f32>],
    sink: &mut dyn super::PageSink,
) -> Result<(IvfRoot, KeptLists)> {
    let n = vectors.len();
    let nlist = lists.len();
    let dim = vectors.dim();
    let invalid = |m: String| Err(FormatError::InvalidInput(m));
    let (Some(s), Some(old_rows), true) = (old.list_rows, &old.rows, old.is_binary()) else {
        return invalid("kept binary lists need an index with rows numbered per list".into());
    };
    let per = old_rows.per_page.max(1);
    if old.grouped() != grouping.is_some() {
        return invalid(format!(
            "the index's rows are {}grouped; the update {} a grouping",
            if old.grouped() { "" } else { "not " },
            if grouping.is_some() {
                "gives"
            } else {
                "gives no"
            }
        ));
    }
    check_kept(old, centroid_bodies, lists, nprobe, n)?;
    if let Some((j, l)) = lists.iter().enumerate().find(|(_, l)| l.len() > s * per) {
        return invalid(format!(
            "list {j} of {} rows passes the {} rows its page numbers hold",
            l.len(),
            s * per
        ));
    }
    let stored = StoredCentroids::open(old, centroid_bodies, dim)?;
    let stored: Vec<Vec<f32>> = (0..stored.len()).map(|j| stored.get(j)).collect();
    keep_centroid_pages(old, centroid_bodies, sink)?;
    let made: Vec<(Vec<u8>, Vec<Vec<u8>>)> = lists
        .iter()
        .zip(&stored)
        .map(|(l, c)| per_list_binary(l, c, scoring, per, grouping, vectors))
        .collect::<Result<_>>()?;
    if let Some((j, m)) = made.iter().enumerate().find(|(_, m)| m.1.len() > s) {
        return invalid(format!(
            "list {j} needs {} row pages, more than the {s} its page numbers hold",
            m.1.len()
        ));
    }
    let same: Vec<bool> = made
        .iter()
        .enumerate()
        .map(|(j, (body, rows))| {
            sink.previous_body(&old.list_page(j)).as_ref() == Some(body)
                && rows.iter().enumerate().all(|(p, rb)| {
                    old.list_row(j, 0, p * per, rows.len() * per, usize::MAX)
                        .is_some_and(|(name, _, _)| sink.previous_body(&name).as_ref() == Some(rb))
                })
        })
        .collect();
    let (changed, mut gens, whole) = kept_gens(old, &same);
    let mut stats = KeptLists::default();
    let row_pages: usize = made.iter().map(|m| m.1.len()).sum();
    let (lists_root, list_gens, rows_gen) = if whole {
        let gen = per_list_gen(made.iter().enumerate().map(|(j, (b, r))| (j, b, r)));
        (
            Numbered {
                gen: gen.clone(),
                per_page: 1,
                pages: nlist,
                ..Numbered::default()
            },
            None,
            gen,
        )
    } else {
        let gen = per_list_gen(changed.iter().map(|&j| (j, &made[j].0, &made[j].1)));
        if !changed.is_empty() {
            gens.push(ListGen {
                gen,
                lists: changed.iter().map(|&j| j as u32).collect(),
            });
        }
        (
            old.lists.clone(),
            (!gens.is_empty()).then_some(gens),
            old_rows.gen.clone(),
        )
    };
    let root = IvfRoot {
        nlist,
        nprobe,
        nprobe_from: None,
        codes: CODES_BINARY.into(),
        centroids: old.centroids.clone(),
        lists: lists_root,
        sample: Numbered::default(),
        rows: Some(Numbered {
            gen: rows_gen,
            per_page: per,
            pages: row_pages,
            ..Numbered::default()
        }),
        rescore: old.rescore,
        chosen_by: None,
        centroid_codes: old.centroid_codes.clone(),
        sample_codes: old.sample_codes.clone(),
        list_gens,
        list_rows: Some(s),
        row_groups: old.row_groups,
    };
    for (j, (body, rows)) in made.iter().enumerate() {
        let g = root.list_gen(j).to_string();
        debug_assert!(whole || !same[j] || g == old.list_gen(j));
        let kept = !whole && same[j];
        let name = super::page::numbered_name(Kind::Lists, &g, j as u32);
        if !sink.reuse(&name, &name)? {
            sink.put(super::page::encode_numbered(
                Kind::Lists,
                &g,
                j as u32,
                body,
            ))?;
        }
        for (p, rb) in rows.iter().enumerate() {
            let number = (j * s + p) as u32;
            let name = super::page::numbered_name(Kind::IndexRows, &g, number);
            if !sink.reuse(&name, &name)? {
                sink.put(super::page::encode_numbered(
                    Kind::IndexRows,
                    &g,
                    number,
                    rb,
                ))?;
            }
        }
        if kept {
            stats.kept += 1;
            stats.row_pages_kept += rows.len();
        } else {
            stats.rewritten += 1;
            stats.row_pages_rewritten += rows.len();
        }
    }
    let sbody = if old.sample_is_coded() {
        coded_sample_body(lists, &stored, scoring, sample_queries, n, dim)?
    } else {
        write_quantized(dim, sample_docs(n).map(|d| vectors.row(d)))?
    };
    let (sample, pages) = super::numbered(Kind::Sample, vec![sbody], n.min(SAMPLE_ROWS));
    for p in pages {
        if !sink.reuse(&p.name, &p.name)? {
            sink.put(p)?;
        }
    }
    Ok((IvfRoot { sample, ..root }, stats))
}

/// Checks the arguments of a kept-centroid write ([`write_pages_kept`],
/// [`write_pages_kept_binary`]): `lists` as many as `old`'s, `centroid_bodies` one per
/// centroid page, `nprobe` in `1..=nlist`, the lists a partition of `0..n`. Errors:
/// [`FormatError::InvalidInput`].
fn check_kept(
    old: &IvfRoot,
    centroid_bodies: &[Vec<u8>],
    lists: &[Vec<u32>],
    nprobe: usize,
    n: usize,
) -> Result<()> {
    let nlist = lists.len();
    if nlist != old.nlist || centroid_bodies.len() != old.centroids.pages {
        return Err(FormatError::InvalidInput(format!(
            "{nlist} lists and {} centroid pages for an index of {} lists on {} pages",
            centroid_bodies.len(),
            old.nlist,
            old.centroids.pages
        )));
    }
    if nprobe == 0 || nprobe > nlist {
        return Err(FormatError::InvalidInput(format!(
            "nprobe {nprobe} outside 1..={nlist}"
        )));
    }
    check_partition(lists, n)
}

/// Hands `old`'s centroid pages (raw bodies `centroid_bodies`) to `sink` under their old
/// names: reused (linked) when the sink can, written again otherwise.
fn keep_centroid_pages(
    old: &IvfRoot,
    centroid_bodies: &[Vec<u8>],
    sink: &mut dyn super::PageSink,
) -> Result<()> {
    for (p, body) in centroid_bodies.iter().enumerate() {
        let name = old.centroid_page(p);
        if !sink.reuse(&name, &name)? {
            sink.put(super::page::encode_numbered(
                Kind::Centroids,
                old.centroids.gen_of_page(p),
                p as u32,
                body,
            ))?;
        }
    }
    Ok(())
}

/// The centroids of an index whose lists an update split past the cap (design
/// `docs/design/update.md`, "Splits past the cap"): `old` (its `g` pages' raw bodies
/// `centroid_bodies`, one a page) with centroid `j` replaced by `c` for each `(j, c)` of
/// `edits` with `j < old.nlist`, and the centroids of lists `old.nlist..nlist` appended
/// (each exactly once in `edits`; `c` normalised, `dim` long). Returns the root an update
/// writes the index from ([`write_pages_kept_binary`]'s `old`: `old` with `nlist` lists, a
/// `lists` run of `nlist` pages and the new `centroids` run) and the new pages' raw bodies.
/// Each centroid keeps its codes (int8: its row and scale; 4-bit centred: its scale and
/// nibbles against the *stored* mean `μ̂` of page 0, which is kept); a replaced or appended
/// one is coded as a full build codes it ([`centroid_bodies`], against that `μ̂`). The run
/// gets per-page generations ([`Numbered::gens`], `group` 1): a page whose body is
/// unchanged keeps the generation in its old name, so it keeps its name (and the browser's
/// cached copy); a changed or new page takes the first 8 bytes of SHA-256 over its body's
/// length (u64 LE) and body; `gen` is the digest of the `gens` strings. Errors:
/// InvalidInput for `nlist` below `old.nlist` or above [`MAX_LISTS`], an edit out of
/// `0..nlist`, twice, missing for an appended list or not `dim` long, or bodies not one a
/// page; DataCorruption (naming the page) for bodies that do not decode as `old`'s.
pub fn edit_centroids(
    old: &IvfRoot,
    centroid_bodies: &[Vec<u8>],
    edits: &[(usize, Vec<f32>)],
    nlist: usize,
    dim: usize,
) -> Result<(IvfRoot, Vec<Vec<u8>>)> {
    let invalid = |m: String| Err(FormatError::InvalidInput(m));
    if nlist < old.nlist || nlist > MAX_LISTS {
        return invalid(format!(
            "{nlist} lists for an index of {} (at most {MAX_LISTS})",
            old.nlist
        ));
    }
    let mut edit: Vec<Option<&[f32]>> = vec![None; nlist];
    for (j, c) in edits {
        if *j >= nlist || edit[*j].is_some() || c.len() != dim {
            return invalid(format!(
                "centroid edit of list {j} (dimension {}) for {nlist} lists of dimension {dim}, or twice",
                c.len()
            ));
        }
        edit[*j] = Some(c);
    }
    if let Some(j) = (old.nlist..nlist).find(|&j| edit[j].is_none()) {
        return invalid(format!("appended list {j} has no centroid"));
    }
    // Validates the bodies against `old` (length, scales, rows) before splicing them.
    StoredCentroids::open(old, centroid_bodies, dim)?;
    let pages = nlist.div_ceil(CENTROIDS_PER_PAGE);
    let mut bodies: Vec<Vec<u8>> = Vec::with_capacity(pages);
    match old.centroid_codes() {
        CentroidCodes::Int8 => {
            let mut rows: Vec<(f32, Vec<i8>)> = Vec::with_capacity(nlist);
            for (p, b) in centroid_bodies.iter().enumerate() {
                let v = open_rows(&old.centroid_page(p), b, centroids_on_page(old, p), dim)?;
                rows.extend((0..v.len()).map(|i| {
                    let (s, q) = v.row(i);
                    (s, q.to_vec())
                }));
            }
            rows.resize(nlist, (0.0, Vec::new()));
            for (j, c) in edit.iter().enumerate() {
                if let Some(c) = c {
                    rows[j] = crate::vectors::quantize(c);
                }
            }
            for group in rows.chunks(CENTROIDS_PER_PAGE) {
                bodies.push(write_quantized(
                    dim,
                    group.iter().map(|(s, q)| (*s, q.as_slice())),
                )?);
            }
        }
        CentroidCodes::Int4Centred => {
            let hb = nibble_bytes(dim);
            let slot = 4 + hb;
            let head = &centroid_bodies[0][..4 + dim];
            let ms = f32::from_le_bytes(head[..4].try_into().expect("4 bytes"));
            let mu: Vec<f32> = head[4..].iter().map(|&x| f32::from(x as i8) * ms).collect();
            let mut slots: Vec<Vec<u8>> = Vec::with_capacity(nlist);
            for (p, b) in centroid_bodies.iter().enumerate() {
                let at = if p == 0 { 4 + dim } else { 0 };
                slots.extend(b[at..].chunks(slot).map(<[u8]>::to_vec));
            }
            slots.resize(nlist, Vec::new());
            for (j, c) in edit.iter().enumerate() {
                if let Some(c) = c {
                    let mut s = Vec::with_capacity(slot);
                    push_int4(&mut s, c, &mu, hb);
                    slots[j] = s;
                }
            }
            for (p, group) in slots.chunks(CENTROIDS_PER_PAGE).enumerate() {
                let mut body = Vec::with_capacity(group.len() * slot + 4 + dim);
                if p == 0 {
                    body.extend_from_slice(head);
                }
                group.iter().for_each(|s| body.extend_from_slice(s));
                bodies.push(body);
            }
        }
    }
    let gens: Vec<String> = bodies
        .iter()
        .enumerate()
        .map(|(p, b)| match centroid_bodies.get(p) {
            Some(o) if o == b => old.centroids.gen_of_page(p).to_string(),
            _ => super::gen_of(std::slice::from_ref(b)),
        })
        .collect();
    let root = IvfRoot {
        nlist,
        centroids: Numbered {
            gen: super::run_gen(&gens),
            per_page: CENTROIDS_PER_PAGE,
            pages,
            group: 1,
            gens,
        },
        lists: Numbered {
            pages: nlist,
            ..old.lists.clone()
        },
        ..old.clone()
    };
    Ok((root, bodies))
}

/// For a kept-centroid write whose list `j` keeps its bytes iff `same[j]`: the changed
/// lists (ascending), `old`'s list generations reduced to the lists that keep their
/// bytes (empty ones dropped), and whether every list is written anew under one base
/// generation instead (more than half changed, or [`MAX_LIST_GENS`] reached).
fn kept_gens(old: &IvfRoot, same: &[bool]) -> (Vec<usize>, Vec<ListGen>, bool) {
    let nlist = same.len();
    let changed: Vec<usize> = (0..nlist).filter(|&j| !same[j]).collect();
    let mut gens: Vec<ListGen> = old.list_gens.clone().unwrap_or_default();
    for g in &mut gens {
        g.lists
            .retain(|j| same.get(*j as usize).copied().unwrap_or(false));
    }
    gens.retain(|g| !g.lists.is_empty());
    let whole = changed.len() * 2 > nlist || (!changed.is_empty() && gens.len() >= MAX_LIST_GENS);
    (changed, gens, whole)
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
/// doc-id deltas, then the rows' codes ([`put_codes`]: `f32` (LE) `amax`, `pmin`, `pmax`,
/// `count` bytes `a_i` (`α_i ≈ amax · a_i / 255`), `count` bytes `b_i` (`p_i ≈ pmin +
/// (pmax − pmin) · b_i / 255`), then `count × ⌈dim/8⌉` bytes of sign bits (bit `t % 8` of
/// byte `t / 8` set iff the residual's component `t` is > 0)).
fn binary_list_body(
    docs: &[u32],
    first: usize,
    centroid: &[f32],
    scoring: &(dyn Fn(usize) -> Vec<f32> + Sync),
    groups: Option<&[u8]>,
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
    if let Some(g) = groups {
        out.extend_from_slice(g);
    }
    let mut alphas = Vec::with_capacity(docs.len());
    let mut projs = Vec::with_capacity(docs.len());
    let mut codes = Vec::with_capacity(docs.len() * nb);
    let cc: f32 = centroid.iter().map(|c| c * c).sum();
    for &d in docs {
        let y = scoring_of(scoring, d as usize, dim)?;
        let (p, a, bits) = code_row(&y, centroid, cc, nb);
        alphas.push(a);
        projs.push(p);
        codes.extend(bits);
    }
    put_codes(&mut out, &alphas, &projs, &codes);
    Ok(out)
}

/// Chunk `d`'s scoring vector, checked to be `dim` long. Errors: InvalidInput.
fn scoring_of(
    scoring: &(dyn Fn(usize) -> Vec<f32> + Sync),
    d: usize,
    dim: usize,
) -> Result<Vec<f32>> {
    let y = scoring(d);
    if y.len() != dim {
        return Err(FormatError::InvalidInput(format!(
            "scoring vector of chunk {d} has {} dimensions, expected {dim}",
            y.len()
        )));
    }
    Ok(y)
}

/// One row's binary code against the stored centroid `c` (`cc = c·c`): the projection `p =
/// y·c / cc` (0 when not finite), `α = ‖y − p·c‖₁ / dim` (0 when not finite) and `nb` bytes
/// of the residual's sign bits.
fn code_row(y: &[f32], c: &[f32], cc: f32, nb: usize) -> (f32, f32, Vec<u8>) {
    let yc: f32 = y.iter().zip(c).map(|(a, c)| a * c).sum();
    let p = if cc > 0.0 && (yc / cc).is_finite() {
        yc / cc
    } else {
        0.0
    };
    let mut bits = vec![0u8; nb];
    let mut l1 = 0f32;
    for (t, (a, c)) in y.iter().zip(c).enumerate() {
        let r = a - p * c;
        l1 += r.abs();
        if r > 0.0 {
            bits[t / 8] |= 1 << (t % 8);
        }
    }
    let a = l1 / y.len().max(1) as f32;
    (p, if a.is_finite() { a } else { 0.0 }, bits)
}

/// Appends the codes of rows (`alphas`, `projs`, their sign bits `codes`): `f32` (LE)
/// `amax`, `pmin`, `pmax`, the length bytes, the projection bytes, the sign bits.
fn put_codes(out: &mut Vec<u8>, alphas: &[f32], projs: &[f32], codes: &[u8]) {
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
    out.extend_from_slice(codes);
}

/// Rows' binary codes as a reader holds them (dequantized lengths and projections).
struct RowCodes {
    alphas: Vec<f32>,
    projs: Vec<f32>,
    codes: Vec<u8>,
}

/// Reads the codes of `count` rows of dimension `dim` ([`put_codes`]) from byte `at` of
/// `body` (page file `file`) to its end. Errors (DataCorruption naming `file` and the
/// offset): a length that is not exactly what `count` needs, a non-finite or negative
/// `amax`, a non-finite or inverted projection range.
fn read_codes(file: &str, body: &[u8], at: usize, count: usize, dim: usize) -> Result<RowCodes> {
    let nb = code_bytes(dim);
    let left = body.len().saturating_sub(at);
    let need = count
        .checked_mul(nb + 2)
        .and_then(|x| x.checked_add(12))
        .unwrap_or(usize::MAX);
    if left != need {
        return Err(FormatError::corrupt(
            file,
            at as u64,
            format!(
                "{left} bytes of lengths and codes, {need} expected for {count} rows of dimension {dim}"
            ),
        ));
    }
    let f = |i: usize| f32::from_le_bytes(body[at + i..at + i + 4].try_into().expect("4 bytes"));
    let (amax, pmin, pmax) = (f(0), f(4), f(8));
    if !amax.is_finite() || amax < 0.0 {
        return Err(FormatError::corrupt(
            file,
            at as u64,
            format!("row length scale {amax}"),
        ));
    }
    if !pmin.is_finite() || !pmax.is_finite() || pmin > pmax {
        return Err(FormatError::corrupt(
            file,
            at as u64 + 4,
            format!("projection range {pmin}..{pmax}"),
        ));
    }
    let at = at + 12;
    Ok(RowCodes {
        alphas: body[at..at + count]
            .iter()
            .map(|&a| amax * f32::from(a) / 255.0)
            .collect(),
        projs: body[at + count..at + 2 * count]
            .iter()
            .map(|&b| pmin + (pmax - pmin) * f32::from(b) / 255.0)
            .collect(),
        codes: body[at + 2 * count..].to_vec(),
    })
}

impl RowCodes {
    /// `p_i·qc + α_i · (2·Σ_{t: bit t set} q_t − Σ_t q_t)` ([`BinaryList::estimate`]).
    fn estimate(&self, i: usize, qc: f32, t: &SignTables) -> f32 {
        let nb = t.bytes;
        let code = &self.codes[i * nb..(i + 1) * nb];
        let mut s = 0f32;
        for (p, &b) in code.iter().enumerate() {
            s += t.table[p * 256 + usize::from(b)];
        }
        self.projs[i] * qc + self.alphas[i] * (2.0 * s - t.sum)
    }
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
    /// Grouped rows ([`IvfRoot::row_groups`]): each row's group (its `i` page is the
    /// group's), checked by [`check_groups`]; empty otherwise.
    pub groups: Vec<u8>,
}

impl BinaryList {
    /// Decodes the raw body of binary list page `name` of a bundle of `chunks` chunks with
    /// vectors of `dim`. Errors (DataCorruption naming `p/<name>` and the byte offset): a
    /// count larger than the body could hold, `first + count` beyond `chunks`, ids not
    /// ascending or not below `chunks`, a non-finite or negative `amax`, a non-finite
    /// `pmin`/`pmax` or `pmin > pmax`, a body whose length is not exactly what the count
    /// needs.
    pub fn open(name: &str, body: &[u8], chunks: usize, dim: usize) -> Result<Self> {
        Self::open_with(name, body, chunks, dim, None)
    }

    /// [`Self::open`] for a list page of the grouped layout ([`IvfRoot::row_groups`]): after
    /// the doc ids, `count` bytes give each row's group; at most `max_groups` groups of at
    /// most `per` rows, numbered in order of their first row ([`check_groups`]). Errors: as
    /// [`Self::open`], and DataCorruption (naming the page and the groups' offset) for
    /// groups that break those rules.
    pub fn open_grouped(
        name: &str,
        body: &[u8],
        chunks: usize,
        dim: usize,
        max_groups: usize,
        per: usize,
    ) -> Result<Self> {
        Self::open_with(name, body, chunks, dim, Some((max_groups, per)))
    }

    fn open_with(
        name: &str,
        body: &[u8],
        chunks: usize,
        dim: usize,
        grouped: Option<(usize, usize)>,
    ) -> Result<Self> {
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
        let mut at = r.pos();
        let mut groups = Vec::new();
        if let Some((max_groups, per)) = grouped {
            let Some(g) = body.get(at..at + count) else {
                return Err(FormatError::corrupt(
                    &file,
                    at as u64,
                    format!("truncated: {count} group numbers expected"),
                ));
            };
            match check_groups(g, count, per) {
                Ok(m) if m <= max_groups => {}
                Ok(m) => {
                    return Err(FormatError::corrupt(
                        &file,
                        at as u64,
                        format!("{m} row groups, at most {max_groups} numbered per list"),
                    ))
                }
                Err(e) => return Err(FormatError::corrupt(&file, at as u64, e)),
            }
            groups = g.to_vec();
            at += count;
        }
        let RowCodes {
            alphas,
            projs,
            codes,
        } = read_codes(&file, body, at, count, dim)?;
        Ok(BinaryList {
            docs,
            first: first as usize,
            alphas,
            projs,
            codes,
            groups,
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

/// Bytes of one centroid's 4-bit codes for vectors of `dim`: two dimensions a byte.
pub fn nibble_bytes(dim: usize) -> usize {
    dim.div_ceil(2)
}

/// Centroids as floats, `dim` each.
type Centroids = Vec<Vec<f32>>;

/// The centroid pages' raw bodies for `centroids` (each `dim` long) coded as `codes`, and
/// the centroids as a reader decodes them ([`StoredCentroids::get`], bit for bit).
///
/// Int8: a `vectors.bin` body of each page's centroids ([`crate::vectors::quantize`]).
/// 4-bit centred: `μ` = the centroids' mean, stored int8 (`(sμ, μq)`, `μ̂ = sμ·μq`); each
/// centroid `c` as a scale `s` and codes `q_t` in `−7..=7` of `c − μ̂` ([`int4_code`]:
/// `s = max_t |c_t − μ̂_t| / 7`; `ĉ = μ̂ + s·q`). Page 0 starts with `f32` `sμ` and the `dim` bytes of `μq`;
/// every page then holds per centroid `f32` `s` and [`nibble_bytes`] bytes: byte `b`'s low
/// nibble is `q_{2b} + 8`, its high nibble `q_{2b+1} + 8` (8 past an odd `dim`).
fn centroid_bodies(
    centroids: &[Vec<f32>],
    codes: CentroidCodes,
    dim: usize,
) -> Result<(Vec<Vec<u8>>, Centroids)> {
    let mut bodies = Vec::new();
    let mut stored: Vec<Vec<f32>> = Vec::with_capacity(centroids.len());
    match codes {
        CentroidCodes::Int8 => {
            for group in centroids.chunks(CENTROIDS_PER_PAGE) {
                let rows: Vec<(f32, Vec<i8>)> =
                    group.iter().map(|c| crate::vectors::quantize(c)).collect();
                stored.extend(
                    rows.iter()
                        .map(|(s, q)| q.iter().map(|&x| f32::from(x) * s).collect::<Vec<f32>>()),
                );
                bodies.push(write_quantized(
                    dim,
                    rows.iter().map(|(s, q)| (*s, q.as_slice())),
                )?);
            }
        }
        CentroidCodes::Int4Centred => {
            let n = centroids.len().max(1) as f64;
            let mean: Vec<f32> = (0..dim)
                .map(|t| (centroids.iter().map(|c| f64::from(c[t])).sum::<f64>() / n) as f32)
                .collect();
            let (ms, mq) = crate::vectors::quantize(&mean);
            let mu: Vec<f32> = mq.iter().map(|&x| f32::from(x) * ms).collect();
            let hb = nibble_bytes(dim);
            for (p, group) in centroids.chunks(CENTROIDS_PER_PAGE).enumerate() {
                let mut body = Vec::with_capacity(group.len() * (4 + hb) + 4 + dim);
                if p == 0 {
                    body.extend(ms.to_le_bytes());
                    body.extend(mq.iter().map(|&x| x as u8));
                }
                for c in group {
                    stored.push(push_int4(&mut body, c, &mu, hb));
                }
                bodies.push(body);
            }
        }
    }
    Ok((bodies, stored))
}

/// Appends centroid `c`'s 4-bit centred codes against the stored mean `mu` to `body`: `f32`
/// scale `s` and `hb` ([`nibble_bytes`]) bytes, byte `b`'s low nibble `q_{2b} + 8`, its high
/// nibble `q_{2b+1} + 8` (8 past an odd `dim`), [`int4_code`] of `c − mu`. Returns the
/// centroid as a reader decodes it (`mu + s·q`).
fn push_int4(body: &mut Vec<u8>, c: &[f32], mu: &[f32], hb: usize) -> Vec<f32> {
    let d: Vec<f32> = c.iter().zip(mu).map(|(a, m)| a - m).collect();
    let (s, q) = int4_code(&d);
    body.extend(s.to_le_bytes());
    for b in 0..hb {
        let lo = (q[2 * b] + 8) as u8;
        let hi = (q.get(2 * b + 1).copied().unwrap_or(0) + 8) as u8;
        body.push(lo | (hi << 4));
    }
    mu.iter()
        .zip(&q)
        .map(|(m, &x)| m + s * f32::from(x))
        .collect()
}

/// `centroids` (each `dim` long) as a reader decodes them once written with `codes`
/// ([`StoredCentroids::get`], bit for bit): what the binary codes are taken against and
/// what a builder measures the routing (`nprobe`) with. Errors: InvalidInput when a
/// centroid is not `dim` long.
pub fn dequantized_centroids(
    centroids: &[Vec<f32>],
    codes: CentroidCodes,
    dim: usize,
) -> Result<Vec<Vec<f32>>> {
    if centroids.iter().any(|c| c.len() != dim) {
        return Err(FormatError::InvalidInput(
            "a centroid's dimension differs from the vectors'".into(),
        ));
    }
    Ok(centroid_bodies(centroids, codes, dim)?.1)
}

/// 4-bit codes of `d`: the scale `s = max_t |d_t| / 7` and codes `q_t = round(d_t / s)`
/// in `−7..=7` (the prototype's code, `docs/design/dense-pq.md` §4.4; a scale chosen for
/// the least squared error, clipping the largest components, routed worse on the engine
/// test's vectors: recall@10 0.647 against 0.654); `(0, zeros)` for a zero or non-finite
/// `d`.
fn int4_code(d: &[f32]) -> (f32, Vec<i8>) {
    let max = d.iter().fold(0f32, |m, v| m.max(v.abs()));
    if max == 0.0 || !max.is_finite() {
        return (0.0, vec![0; d.len()]);
    }
    let s = max / 7.0;
    (
        s,
        d.iter()
            .map(|v| (v / s).round().clamp(-7.0, 7.0) as i8)
            .collect(),
    )
}

/// The centroids of an index as stored on its `g` pages, decoded ([`CENTROIDS_INT8`] or
/// [`CENTROIDS_INT4_CENTRED`]): what a reader ranks the lists by.
pub struct StoredCentroids {
    dim: usize,
    codes: Stored,
}

enum Stored {
    /// One `vectors.bin` body a page.
    Int8(Vec<Vectors>),
    /// The dequantized mean `μ̂`, each centroid's scale and [`nibble_bytes`] bytes of codes.
    Int4 {
        mean: Vec<f32>,
        scales: Vec<f32>,
        nibbles: Vec<u8>,
    },
}

/// The query padded to `2·⌈dim/2⌉` (a zero for the padding nibble) and `q·μ̂`.
fn int4_query(dim: usize, mean: &[f32], q: &[f32]) -> (Vec<f32>, f32) {
    let mut qe = vec![0f32; 2 * nibble_bytes(dim)];
    for (a, b) in qe.iter_mut().zip(q) {
        *a = *b;
    }
    (qe, mean.iter().zip(q).map(|(m, x)| m * x).sum())
}

/// `q·ĉ_j` of one 4-bit centroid (scale `s`, nibbles `row`), the plain loop: per byte the
/// low nibble's term `q_{2t}·u − 8·q_{2t}`, then the high one's, added in order. The
/// reference [`int4_dots`] equals bit for bit.
fn int4_dot_plain(qe: &[f32], qm: f32, s: f32, row: &[u8]) -> f32 {
    let mut acc = 0f32;
    for (pair, &x) in qe.chunks_exact(2).zip(row) {
        acc += pair[0] * f32::from(x & 15) - 8.0 * pair[0];
        acc += pair[1] * f32::from(x >> 4) - 8.0 * pair[1];
    }
    qm + s * acc
}

/// Centroids [`int4_dots`] scores side by side: independent sums, so the CPU (native or
/// wasm) overlaps their additions instead of waiting on one chain.
const INT4_LANES: usize = 8;

/// `q·ĉ_j` of every 4-bit centroid, equal bit for bit to [`int4_dot_plain`] of each
/// (tested): each term is read from a per-query table of the values the plain loop computes
/// (`q_{2t}·v − 8·q_{2t}` and `q_{2t+1}·v − 8·q_{2t+1}` for v in 0..16, computed by the same
/// expression), and each centroid's sum adds them in the plain loop's order; only the
/// interleaving of [`INT4_LANES`] centroids' sums differs, which changes no value. At 1M
/// chunks (11,759 centroids of 384 dims) the plain loop, one dependent float chain per
/// centroid, took 5–6 ms a pass natively and more in wasm.
fn int4_dots(dim: usize, mean: &[f32], scales: &[f32], nibbles: &[u8], q: &[f32]) -> Vec<f32> {
    let hb = nibble_bytes(dim);
    let (qe, qm) = int4_query(dim, mean, q);
    let n = scales.len();
    let mut out = Vec::with_capacity(n);
    if hb == 0 {
        out.extend(scales.iter().map(|s| qm + s * 0f32));
        return out;
    }
    // table[t·32 + v] = low term of byte t for nibble v; table[t·32 + 16 + v] = high term.
    let mut table = vec![0f32; hb * 32];
    for (t, pair) in qe.chunks_exact(2).enumerate() {
        for v in 0..16u8 {
            table[t * 32 + v as usize] = pair[0] * f32::from(v) - 8.0 * pair[0];
            table[t * 32 + 16 + v as usize] = pair[1] * f32::from(v) - 8.0 * pair[1];
        }
    }
    let blocks = n / INT4_LANES;
    for (b, block) in nibbles
        .chunks_exact(hb * INT4_LANES)
        .take(blocks)
        .enumerate()
    {
        let rows: [&[u8]; INT4_LANES] = std::array::from_fn(|c| &block[c * hb..(c + 1) * hb]);
        let mut acc = [0f32; INT4_LANES];
        for (t, terms) in table.chunks_exact(32).enumerate() {
            let (lo, hi) = terms.split_at(16);
            for c in 0..INT4_LANES {
                let x = rows[c][t];
                acc[c] += lo[usize::from(x & 15)];
                acc[c] += hi[usize::from(x >> 4)];
            }
        }
        for (c, a) in acc.iter().enumerate() {
            out.push(qm + scales[b * INT4_LANES + c] * a);
        }
    }
    for j in blocks * INT4_LANES..n {
        out.push(int4_dot_plain(
            &qe,
            qm,
            scales[j],
            &nibbles[j * hb..(j + 1) * hb],
        ));
    }
    out
}

impl StoredCentroids {
    /// Decodes the raw bodies of `root`'s centroid pages (`bodies[n]` of page `n`, every
    /// page) for vectors of `dim`, as `root.centroid_codes` says. Errors: InvalidInput when
    /// `bodies` is not one body a page; DataCorruption naming `p/<name>` and the byte
    /// offset: an int8 page that is not a `vectors.bin` body of its centroids (256, the
    /// last page fewer) of `dim`; a 4-bit page whose length is not exactly `(page 0: 4 +
    /// dim) + centroids · (4 + ⌈dim/2⌉)`, or a non-finite or negative scale.
    pub fn open<B: AsRef<[u8]>>(root: &IvfRoot, bodies: &[B], dim: usize) -> Result<Self> {
        if bodies.len() != root.centroids.pages {
            return Err(FormatError::InvalidInput(format!(
                "{} centroid page bodies for {} pages",
                bodies.len(),
                root.centroids.pages
            )));
        }
        let codes = match root.centroid_codes() {
            CentroidCodes::Int8 => Stored::Int8(
                bodies
                    .iter()
                    .enumerate()
                    .map(|(n, b)| {
                        open_rows(
                            &root.centroid_page(n),
                            b.as_ref(),
                            centroids_on_page(root, n),
                            dim,
                        )
                    })
                    .collect::<Result<_>>()?,
            ),
            CentroidCodes::Int4Centred => {
                let hb = nibble_bytes(dim);
                let mut mean = Vec::new();
                let mut scales = Vec::with_capacity(root.nlist.min(MAX_LISTS));
                let mut nibbles = Vec::new();
                for (n, b) in bodies.iter().enumerate() {
                    let body = b.as_ref();
                    let file = format!("p/{}", root.centroid_page(n));
                    let rows = centroids_on_page(root, n);
                    let head = if n == 0 { 4 + dim } else { 0 };
                    let need = rows
                        .checked_mul(4 + hb)
                        .and_then(|x| x.checked_add(head))
                        .unwrap_or(usize::MAX);
                    if body.len() != need {
                        return Err(FormatError::corrupt(
                            &file,
                            0,
                            format!(
                                "{} bytes of 4-bit centroids, {need} expected for {rows} centroids of dimension {dim}",
                                body.len()
                            ),
                        ));
                    }
                    let scale_at = |at: usize| -> Result<f32> {
                        let s = f32::from_le_bytes(body[at..at + 4].try_into().expect("4 bytes"));
                        if s.is_finite() && s >= 0.0 {
                            Ok(s)
                        } else {
                            Err(FormatError::corrupt(&file, at as u64, format!("scale {s}")))
                        }
                    };
                    if n == 0 {
                        let ms = scale_at(0)?;
                        mean = body[4..4 + dim]
                            .iter()
                            .map(|&x| f32::from(x as i8) * ms)
                            .collect();
                    }
                    for j in 0..rows {
                        let at = head + j * (4 + hb);
                        scales.push(scale_at(at)?);
                        nibbles.extend_from_slice(&body[at + 4..at + 4 + hb]);
                    }
                }
                Stored::Int4 {
                    mean,
                    scales,
                    nibbles,
                }
            }
        };
        Ok(StoredCentroids { dim, codes })
    }

    /// Number of centroids.
    pub fn len(&self) -> usize {
        match &self.codes {
            Stored::Int8(pages) => pages.iter().map(Vectors::len).sum(),
            Stored::Int4 { scales, .. } => scales.len(),
        }
    }

    /// True without centroids.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `q·ĉ_j` for every centroid `j` in order (`q` is `dim` long): int8 pages by
    /// [`Vectors::dot`]; 4-bit ones as `q·μ̂ + s_j · Σ_t q_t·(u_{j,t} − 8)` (`u` the
    /// nibbles), the same dequantized values as [`Self::get`].
    pub fn dots(&self, q: &[f32]) -> Vec<f32> {
        match &self.codes {
            Stored::Int8(pages) => pages
                .iter()
                .flat_map(|v| (0..v.len()).map(move |j| v.dot(j, q)))
                .collect(),
            Stored::Int4 {
                mean,
                scales,
                nibbles,
            } => int4_dots(self.dim, mean, scales, nibbles, q),
        }
    }

    /// Centroid `j` dequantized (`dim` floats): an int8 row times its scale, or `μ̂ + s_j ·
    /// (u_j − 8)`. Panics if `j` is out of range.
    pub fn get(&self, j: usize) -> Vec<f32> {
        match &self.codes {
            Stored::Int8(pages) => pages[j / CENTROIDS_PER_PAGE].get(j % CENTROIDS_PER_PAGE),
            Stored::Int4 {
                mean,
                scales,
                nibbles,
            } => {
                let hb = nibble_bytes(self.dim);
                let row = &nibbles[j * hb..(j + 1) * hb];
                (0..self.dim)
                    .map(|t| {
                        let u = (row[t / 2] >> (4 * (t % 2))) & 15;
                        mean[t] + scales[j] * f32::from(u as i8 - 8)
                    })
                    .collect()
            }
        }
    }
}

/// The raw body of a coded background sample page ([`SAMPLE_BINARY`]): `f32` (LE) the
/// spread correction ([`CodedSample::sigma_ratio`]), `varint count` (= `min(n, 256)`),
/// `count × varint` the list of each sample chunk ([`sample_docs`] order), then the rows'
/// codes as a binary list page has them ([`put_codes`]), each against its list's stored
/// centroid. The correction is the median over `queries` (centred, `dim` long; none: the
/// sample's own scoring vectors, each against the other rows) of `σ_exact / σ_coded`, the
/// standard deviations of the exact scores `q·y_i` and of the coded estimates over the
/// sample, clamped to `1/MAX_SIGMA_RATIO..=MAX_SIGMA_RATIO` (1 when no query measures).
fn coded_sample_body(
    lists: &[Vec<u32>],
    stored: &[Vec<f32>],
    scoring: &(dyn Fn(usize) -> Vec<f32> + Sync),
    queries: &[Vec<f32>],
    n: usize,
    dim: usize,
) -> Result<Vec<u8>> {
    let nb = code_bytes(dim);
    let mut list_of = vec![0u32; n];
    for (j, l) in lists.iter().enumerate() {
        for &d in l {
            list_of[d as usize] = j as u32;
        }
    }
    let docs: Vec<usize> = sample_docs(n).collect();
    let ccs: Vec<f32> = stored
        .iter()
        .map(|c| c.iter().map(|x| x * x).sum())
        .collect();
    let mut ys = Vec::with_capacity(docs.len());
    let (mut alphas, mut projs, mut codes) = (Vec::new(), Vec::new(), Vec::new());
    for &d in &docs {
        let y = scoring_of(scoring, d, dim)?;
        let j = list_of[d] as usize;
        let (p, a, bits) = code_row(&y, &stored[j], ccs[j], nb);
        alphas.push(a);
        projs.push(p);
        codes.extend(bits);
        ys.push(y);
    }
    let mut tail = Vec::new();
    put_varint(&mut tail, docs.len() as u64);
    for &d in &docs {
        put_varint(&mut tail, u64::from(list_of[d]));
    }
    let at = tail.len();
    put_codes(&mut tail, &alphas, &projs, &codes);
    // The estimates a reader computes: the codes decoded by the reader's own code.
    let coded = read_codes("w", &tail, at, docs.len(), dim)?;
    let own: Vec<Vec<f32>> = if queries.iter().any(|q| q.len() == dim) {
        Vec::new()
    } else {
        ys.clone()
    };
    let asked: Vec<(Option<usize>, &Vec<f32>)> = if own.is_empty() {
        queries
            .iter()
            .filter(|q| q.len() == dim)
            .map(|q| (None, q))
            .collect()
    } else {
        own.iter().enumerate().map(|(i, q)| (Some(i), q)).collect()
    };
    let sd = |xs: &[f32]| {
        let m = xs.iter().sum::<f32>() / xs.len().max(1) as f32;
        (xs.iter().map(|x| (x - m) * (x - m)).sum::<f32>() / xs.len().max(1) as f32).sqrt()
    };
    let mut ratios: Vec<f32> = Vec::new();
    for (skip, q) in asked {
        let t = SignTables::new(q);
        let (mut exact, mut est) = (Vec::new(), Vec::new());
        for (i, &d) in docs.iter().enumerate() {
            if skip == Some(i) {
                continue;
            }
            let j = list_of[d] as usize;
            let qc: f32 = q.iter().zip(&stored[j]).map(|(a, b)| a * b).sum();
            exact.push(q.iter().zip(&ys[i]).map(|(a, b)| a * b).sum::<f32>());
            est.push(coded.estimate(i, qc, &t));
        }
        let (se, sc) = (sd(&exact), sd(&est));
        if se.is_finite() && sc.is_finite() && sc > 0.0 && se > 0.0 {
            ratios.push(se / sc);
        }
    }
    ratios.sort_by(f32::total_cmp);
    let ratio = if ratios.is_empty() {
        1.0
    } else {
        ratios[ratios.len() / 2].clamp(1.0 / MAX_SIGMA_RATIO, MAX_SIGMA_RATIO)
    };
    let mut out = Vec::with_capacity(4 + tail.len());
    out.extend(ratio.to_le_bytes());
    out.extend(tail);
    Ok(out)
}

/// A decoded coded background sample page ([`SAMPLE_BINARY`]): sample row `i` is chunk
/// `sample_docs(n)[i]`, coded against the stored centroid of list `lists[i]`.
pub struct CodedSample {
    /// The factor a reader multiplies the standard deviation of the coded estimates by
    /// (coded estimates under-spread the exact scores; measured by the builder, ~1.07),
    /// in `1/MAX_SIGMA_RATIO..=MAX_SIGMA_RATIO`.
    pub sigma_ratio: f32,
    /// Each row's list (< `nlist`).
    pub lists: Vec<u32>,
    codes: RowCodes,
}

impl CodedSample {
    /// Decodes the raw body of sample page `name` holding `rows` rows of dimension `dim` of
    /// an index of `nlist` lists. Errors (DataCorruption naming `p/<name>` and the byte
    /// offset): a body shorter than its header, a spread correction that is not finite or
    /// outside `1/MAX_SIGMA_RATIO..=MAX_SIGMA_RATIO`, a count other than `rows`, a list
    /// number not below `nlist`, codes as [`BinaryList::open`] refuses them.
    pub fn open(name: &str, body: &[u8], rows: usize, nlist: usize, dim: usize) -> Result<Self> {
        let file = format!("p/{name}");
        if body.len() < 4 {
            return Err(FormatError::corrupt(
                &file,
                0,
                format!("a {}-byte coded sample page", body.len()),
            ));
        }
        let sigma_ratio = f32::from_le_bytes(body[..4].try_into().expect("4 bytes"));
        if !sigma_ratio.is_finite()
            || !(1.0 / MAX_SIGMA_RATIO..=MAX_SIGMA_RATIO).contains(&sigma_ratio)
        {
            return Err(FormatError::corrupt(
                &file,
                0,
                format!("spread correction {sigma_ratio}"),
            ));
        }
        let mut r = Reader::new(&file, body, 4);
        let count = r.varint()?;
        if count != rows as u64 || rows > body.len() {
            return Err(FormatError::corrupt(
                &file,
                4,
                format!("{count} sample rows, {rows} expected"),
            ));
        }
        let mut lists = Vec::with_capacity(rows);
        for _ in 0..rows {
            let at = r.pos() as u64;
            let j = r.varint()?;
            if j >= nlist as u64 {
                return Err(FormatError::corrupt(
                    &file,
                    at,
                    format!("list {j} of an index of {nlist} lists"),
                ));
            }
            lists.push(j as u32);
        }
        let codes = read_codes(&file, body, r.pos(), rows, dim)?;
        Ok(CodedSample {
            sigma_ratio,
            lists,
            codes,
        })
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.lists.len()
    }

    /// True without rows.
    pub fn is_empty(&self) -> bool {
        self.lists.is_empty()
    }

    /// The estimate of row `i`'s exact score `q·y_i` as [`BinaryList::estimate`] makes it,
    /// `qc = q·ĉ` of its list `lists[i]`. Panics if `i` is out of range.
    pub fn estimate(&self, i: usize, qc: f32, t: &SignTables) -> f32 {
        self.codes.estimate(i, qc, t)
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
                rewritten: 1,
                ..KeptLists::default()
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
                rewritten: 1,
                ..KeptLists::default()
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
            centroid_codes: None,
            sample_codes: None,
            list_gens: None,
            list_rows: None,
            row_groups: None,
        }
    }

    fn written_binary(n: usize) -> (IvfRoot, Vec<Encoded>) {
        written_lists(n, 4, &PageOptions::default())
    }

    /// A binary index of `n` rows in two lists (even and odd rows), `per` rows an `i` page,
    /// ×8, the pages written as `opts` says.
    fn written_lists(n: usize, per: usize, opts: &PageOptions) -> (IvfRoot, Vec<Encoded>) {
        let v = vectors(n);
        let lists = vec![
            (0..n as u32).step_by(2).collect(),
            (1..n as u32).step_by(2).collect(),
        ];
        let centroids = vec![vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]];
        let scoring = |i: usize| v.get(i);
        let mut pages = Vec::new();
        let root = write_pages_with(
            &IvfParts {
                centroids: &centroids,
                lists: &lists,
                nprobe: 1,
                codes: ListCodes::Binary {
                    scoring: &scoring,
                    rows_per_page: per,
                    rescore: 8,
                },
            },
            opts,
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

    /// A binary index of 20 rows in two lists, rows numbered per list and grouped by
    /// `group` (rows a page `per`).
    fn written_grouped(per: usize, group: &RowGrouping) -> (IvfRoot, Vec<Encoded>) {
        written_lists(
            20,
            per,
            &PageOptions {
                rows_per_list: true,
                row_groups: Some(group),
                ..PageOptions::default()
            },
        )
    }

    #[test]
    fn grouped_rows_put_each_group_on_its_page_and_hostile_groups_are_refused() {
        // 10 rows a list in groups of ≤ 4 by row number mod 3: groups 0, 1, 2 of 4, 3, 3.
        let group = |docs: &[u32]| (0..docs.len()).map(|i| (i % 3) as u8).collect::<Vec<u8>>();
        let (root, pages) = written_grouped(4, &group);
        root.check(20).unwrap();
        assert!(root.grouped());
        let v = vectors(20);
        let name = root.list_page(1);
        let body = body_of(&pages, &name);
        let l = root.open_list(&name, &body, 20, 3).unwrap();
        assert_eq!(l.groups, group(&l.docs));
        for g in 0..3 {
            let page = root.group_page(1, g).unwrap();
            let held: Vec<u32> = l.docs.iter().copied().skip(g).step_by(3).collect();
            let r = open_rows(&page, &body_of(&pages, &page), held.len(), 3).unwrap();
            for (at, &d) in held.iter().enumerate() {
                assert_eq!(r.row(at), v.row(d as usize));
            }
        }
        assert!(root.group_page(1, root.list_rows.unwrap()).is_none());
        // An old reader (no groups) refuses the page: its length is not what it expects.
        assert!(BinaryList::open(&name, &body, 20, 3).is_err());
        // The group bytes follow the doc ids (count 1 B, first 1 B, 10 deltas of 1 B).
        let at = 12;
        let bad = |edit: &dyn Fn(&mut Vec<u8>)| {
            let mut b = body.clone();
            edit(&mut b);
            root.open_list(&name, &b, 20, 3).err().unwrap().to_string()
        };
        let e = bad(&|b| b[at] = 1);
        assert!(
            e.contains(&format!("p/{name}")) && e.contains("before group"),
            "{e}"
        );
        let e = bad(&|b| b[at + 4] = 0);
        assert!(e.contains("more than 4 rows"), "{e}");
        let e = bad(&|b| b[at + 9] = 200);
        assert!(e.contains("before group 3"), "{e}");
        let e = bad(&|b| b.truncate(at + 5));
        assert!(e.contains(&format!("p/{name}")), "{e}");
        // Groups of more rows than a page holds, or more groups than page numbers: the
        // writer refuses them.
        let big = |docs: &[u32]| vec![0u8; docs.len()];
        let v = vectors(20);
        let scoring = |i: usize| v.get(i);
        let lists = vec![(0..20u32).collect::<Vec<u32>>()];
        let err = write_pages_with(
            &IvfParts {
                centroids: &[vec![1.0, 0.0, 0.0]],
                lists: &lists,
                nprobe: 1,
                codes: ListCodes::Binary {
                    scoring: &scoring,
                    rows_per_page: 4,
                    rescore: 8,
                },
            },
            &PageOptions {
                rows_per_list: true,
                row_groups: Some(&big),
                ..PageOptions::default()
            },
            &v,
            &mut |_| Ok(()),
        )
        .err()
        .unwrap()
        .to_string();
        assert!(err.contains("more than 4 rows"), "{err}");
        // A grouped entry without rows numbered per list is refused.
        let mut r = root.clone();
        r.list_rows = None;
        assert!(r.check(20).is_err());
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

    /// `n` pseudo-random rows of `dim` (a fixed LCG), with a common offset so their mean is
    /// not 0 (as e5 vectors).
    fn rows(n: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((x >> 33) as f32 / (1u64 << 31) as f32) - 0.5
        };
        (0..n)
            .map(|_| (0..dim).map(|t| next() + 0.3 * (t % 3) as f32).collect())
            .collect()
    }

    /// An index of `n` rows of `dim`, one list per row (centroid = the row), binary lists,
    /// written with `opts`.
    fn written_with(
        n: usize,
        dim: usize,
        centroids: CentroidCodes,
        coded_sample: bool,
    ) -> (IvfRoot, Vec<Encoded>, Vec<Vec<f32>>) {
        let r = rows(n, dim, 7);
        let v = Vectors::open(&write_vectors(dim, &r).unwrap()).unwrap();
        let lists: Vec<Vec<u32>> = (0..n as u32).map(|i| vec![i]).collect();
        let scoring = |i: usize| v.get(i);
        let mut pages = Vec::new();
        let root = write_pages_with(
            &IvfParts {
                centroids: &r,
                lists: &lists,
                nprobe: 1,
                codes: ListCodes::Binary {
                    scoring: &scoring,
                    rows_per_page: 4,
                    rescore: 8,
                },
            },
            &PageOptions {
                centroids,
                coded_sample,
                sample_queries: &[],
                rows_per_list: false,
                row_groups: None,
            },
            &v,
            &mut |p| {
                pages.push(p);
                Ok(())
            },
        )
        .unwrap();
        (root, pages, r)
    }

    fn centroid_bodies_of(root: &IvfRoot, pages: &[Encoded]) -> Vec<Vec<u8>> {
        (0..root.centroids.pages)
            .map(|n| body_of(pages, &root.centroid_page(n)))
            .collect()
    }

    #[test]
    fn int4_dots_equal_the_plain_loop_bit_for_bit() {
        // Counts around the lane width, odd and even dimensions, extreme nibbles and a query
        // with zeros, tiny and large components.
        for &(n, dim) in &[(1, 7), (8, 8), (13, 384), (300, 7), (1000, 384), (17, 1)] {
            let mut s = (n * 31 + dim) as u64;
            let mut next = || {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (s >> 33) as u32
            };
            let hb = nibble_bytes(dim);
            let nibbles: Vec<u8> = (0..n * hb).map(|_| next() as u8).collect();
            let scales: Vec<f32> = (0..n)
                .map(|_| next() as f32 / u32::MAX as f32 / 7.0)
                .collect();
            let mean: Vec<f32> = (0..dim)
                .map(|_| next() as f32 / u32::MAX as f32 - 0.5)
                .collect();
            let q: Vec<f32> = (0..dim)
                .map(|i| match i % 5 {
                    0 => 0.0,
                    1 => 1e-30,
                    2 => -3.5e3,
                    _ => next() as f32 / u32::MAX as f32 - 0.5,
                })
                .collect();
            let fast = int4_dots(dim, &mean, &scales, &nibbles, &q);
            let (qe, qm) = int4_query(dim, &mean, &q);
            assert_eq!(fast.len(), n);
            for j in 0..n {
                let plain = int4_dot_plain(&qe, qm, scales[j], &nibbles[j * hb..(j + 1) * hb]);
                assert_eq!(
                    fast[j].to_bits(),
                    plain.to_bits(),
                    "n {n} dim {dim} centroid {j}"
                );
            }
        }
    }

    #[test]
    fn int4_centred_centroids_decode_to_the_writers_values() {
        // 300 centroids of an odd dimension: two pages, a padding nibble.
        let (root, pages, r) = written_with(300, 7, CentroidCodes::Int4Centred, false);
        root.check(300).unwrap();
        assert_eq!(root.centroid_codes.as_deref(), Some(CENTROIDS_INT4_CENTRED));
        assert_eq!(root.centroid_codes(), CentroidCodes::Int4Centred);
        let bodies = centroid_bodies_of(&root, &pages);
        assert_eq!(bodies.len(), 2);
        assert_eq!(bodies[0].len(), 4 + 7 + 256 * (4 + 4));
        assert_eq!(bodies[1].len(), 44 * (4 + 4));
        let c = StoredCentroids::open(&root, &bodies, 7).unwrap();
        assert_eq!(c.len(), 300);
        let want = dequantized_centroids(&r, CentroidCodes::Int4Centred, 7).unwrap();
        let q: Vec<f32> = rows(1, 7, 99).remove(0);
        let dots = c.dots(&q);
        for j in 0..300 {
            // Bit for bit what the writer coded the residuals against.
            assert_eq!(c.get(j), want[j], "centroid {j}");
            let d: f32 = want[j].iter().zip(&q).map(|(a, b)| a * b).sum();
            assert!((dots[j] - d).abs() < 1e-4, "{j}: {} vs {d}", dots[j]);
            // Within half a step (max |c − μ̂| / 14) of the centroid, plus the mean's error.
            let err = r[j]
                .iter()
                .zip(&want[j])
                .fold(0f32, |m, (a, b)| m.max((a - b).abs()));
            assert!(err < 0.2, "{j}: {err}");
        }
        // The binary residuals were taken against these stored centroids: list j holds row
        // j, so its projection on its own centroid is close to 1.
        let l = BinaryList::open(
            &root.list_page(5),
            &body_of(&pages, &root.list_page(5)),
            300,
            7,
        )
        .unwrap();
        assert!((l.projs[0] - 1.0).abs() < 0.1, "{}", l.projs[0]);
        // The int8 codes decode through the same reader.
        let (root8, pages8, r8) = written_with(300, 7, CentroidCodes::Int8, false);
        assert_eq!(root8.centroid_codes, None);
        let c8 = StoredCentroids::open(&root8, &centroid_bodies_of(&root8, &pages8), 7).unwrap();
        let want8 = dequantized_centroids(&r8, CentroidCodes::Int8, 7).unwrap();
        for j in [0, 255, 256, 299] {
            assert_eq!(c8.get(j), want8[j]);
        }
        // The entry's JSON reads back with the new field.
        let json = serde_json::to_vec(&root).unwrap();
        let j = crate::json::parse(&json, "jikji.json").unwrap();
        assert_eq!(
            <IvfRoot as crate::json::FromJson>::from_json(&j, "jikji.json").unwrap(),
            root
        );
    }

    #[test]
    fn hostile_int4_centroid_pages_are_refused() {
        let (root, pages, _) = written_with(300, 7, CentroidCodes::Int4Centred, false);
        let bodies = centroid_bodies_of(&root, &pages);
        for p in 0..2 {
            let name = root.centroid_page(p);
            for cut in 0..bodies[p].len() {
                let mut b = bodies.clone();
                b[p].truncate(cut);
                let e = StoredCentroids::open(&root, &b, 7).err().unwrap();
                assert!(
                    matches!(e, FormatError::DataCorruption { .. })
                        && e.to_string().contains(&name),
                    "{e}"
                );
            }
            let mut b = bodies.clone();
            b[p].push(0);
            assert!(StoredCentroids::open(&root, &b, 7).is_err());
        }
        // A NaN mean scale, a negative centroid scale (page 1, centroid 2: at 2 · 8).
        let mut b = bodies.clone();
        b[0][..4].copy_from_slice(&f32::NAN.to_le_bytes());
        let e = StoredCentroids::open(&root, &b, 7)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("scale NaN") && e.contains("at byte 0"), "{e}");
        let mut b = bodies.clone();
        b[1][16..20].copy_from_slice(&(-1f32).to_le_bytes());
        let e = StoredCentroids::open(&root, &b, 7)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("scale -1") && e.contains("at byte 16"), "{e}");
        // Another dimension, a missing page.
        assert!(StoredCentroids::open(&root, &bodies, 8).is_err());
        assert!(StoredCentroids::open(&root, &bodies[..1], 7).is_err());
        // Unknown codes in the entry.
        let bad = IvfRoot {
            centroid_codes: Some("int2".into()),
            ..root.clone()
        };
        let e = bad.check(300).unwrap_err().to_string();
        assert!(
            e.contains("centroid_codes") && e.contains(ENTRY_FILE),
            "{e}"
        );
    }

    #[test]
    fn a_coded_sample_estimates_the_sample_scores_and_corrects_their_spread() {
        let dim = 64;
        let n = 600;
        // Lists of 6 consecutive rows, centroids their normalised means.
        let r = rows(n, dim, 3);
        let v = Vectors::open(&write_vectors(dim, &r).unwrap()).unwrap();
        let lists: Vec<Vec<u32>> = (0..100u32).map(|j| (6 * j..6 * j + 6).collect()).collect();
        let centroids: Vec<Vec<f32>> = lists
            .iter()
            .map(|l| {
                let mut c = vec![0f32; dim];
                for &d in l {
                    for (a, b) in c.iter_mut().zip(v.get(d as usize)) {
                        *a += b;
                    }
                }
                let nrm = c.iter().map(|x| x * x).sum::<f32>().sqrt();
                c.iter().map(|x| x / nrm).collect()
            })
            .collect();
        let scoring = |i: usize| v.get(i);
        let queries = rows(20, dim, 11);
        let mut pages = Vec::new();
        let root = write_pages_with(
            &IvfParts {
                centroids: &centroids,
                lists: &lists,
                nprobe: 4,
                codes: ListCodes::Binary {
                    scoring: &scoring,
                    rows_per_page: 1,
                    rescore: 16,
                },
            },
            &PageOptions {
                centroids: CentroidCodes::Int4Centred,
                coded_sample: true,
                sample_queries: &queries,
                rows_per_list: false,
                row_groups: None,
            },
            &v,
            &mut |p| {
                pages.push(p);
                Ok(())
            },
        )
        .unwrap();
        root.check(n).unwrap();
        assert!(root.sample_is_coded());
        let name = root.sample_page();
        let body = body_of(&pages, &name);
        // 4 + count + 256 list ids + 12 + 256 · (2 + 8) bytes.
        assert_eq!(body.len(), 4 + 2 + 256 + 12 + 256 * 10);
        let s = CodedSample::open(&name, &body, 256, 100, dim).unwrap();
        assert!(
            s.sigma_ratio > 0.5 && s.sigma_ratio < 2.0,
            "{}",
            s.sigma_ratio
        );
        let c = StoredCentroids::open(&root, &centroid_bodies_of(&root, &pages), dim).unwrap();
        let docs: Vec<usize> = sample_docs(n).collect();
        let q = &queries[0];
        let t = SignTables::new(q);
        let dots = c.dots(q);
        let (mut exact, mut est) = (Vec::new(), Vec::new());
        for (i, &d) in docs.iter().enumerate() {
            assert_eq!(s.lists[i] as usize, d / 6, "row {i}");
            exact.push(q.iter().zip(v.get(d)).map(|(a, b)| a * b).sum::<f32>());
            est.push(s.estimate(i, dots[s.lists[i] as usize], &t));
        }
        let mean = |x: &[f32]| x.iter().sum::<f32>() / x.len() as f32;
        let sd = |x: &[f32]| {
            let m = mean(x);
            (x.iter().map(|a| (a - m) * (a - m)).sum::<f32>() / x.len() as f32).sqrt()
        };
        let (me, mc, se, sc) = (mean(&exact), mean(&est), sd(&exact), sd(&est));
        assert!((me - mc).abs() < 0.25 * se, "means {me} vs {mc} (σ {se})");
        assert!(
            (sc * s.sigma_ratio / se - 1.0).abs() < 0.35,
            "σ {se} vs {sc} × {}",
            s.sigma_ratio
        );
        // A coded sample with int8 lists is refused, by the writer and in the entry.
        let e = IvfRoot {
            codes: CODES_INT8.into(),
            rows: None,
            rescore: None,
            ..root.clone()
        }
        .check(n)
        .unwrap_err()
        .to_string();
        assert!(e.contains("sample_codes"), "{e}");
        assert!(write_pages_with(
            &IvfParts {
                centroids: &centroids,
                lists: &lists,
                nprobe: 4,
                codes: ListCodes::Int8,
            },
            &PageOptions {
                coded_sample: true,
                ..PageOptions::default()
            },
            &v,
            &mut |_| Ok(()),
        )
        .is_err());
    }

    #[test]
    fn hostile_coded_sample_pages_are_refused() {
        let (root, pages, _) = written_with(300, 7, CentroidCodes::Int8, true);
        root.check(300).unwrap();
        let name = root.sample_page();
        let good = body_of(&pages, &name);
        let s = CodedSample::open(&name, &good, 256, 300, 7).unwrap();
        assert_eq!(s.len(), 256);
        for cut in 0..good.len() {
            let e = CodedSample::open(&name, &good[..cut], 256, 300, 7)
                .err()
                .unwrap();
            assert!(
                matches!(e, FormatError::DataCorruption { .. }) && e.to_string().contains(&name),
                "{e}"
            );
        }
        let mut long = good.clone();
        long.push(0);
        assert!(CodedSample::open(&name, &long, 256, 300, 7).is_err());
        // A NaN or huge spread correction, another row count, a list past nlist, other codes.
        for r in [f32::NAN, 0.0, 1e9] {
            let mut b = good.clone();
            b[..4].copy_from_slice(&r.to_le_bytes());
            let e = CodedSample::open(&name, &b, 256, 300, 7)
                .err()
                .unwrap()
                .to_string();
            assert!(e.contains("spread correction"), "{e}");
        }
        let e = CodedSample::open(&name, &good, 255, 300, 7)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("sample rows"), "{e}");
        let e = CodedSample::open(&name, &good, 256, 200, 7)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("of an index of 200 lists"), "{e}");
        assert!(CodedSample::open(&name, &good, 256, 300, 9).is_err());
        let bad = IvfRoot {
            sample_codes: Some("pq".into()),
            ..root.clone()
        };
        assert!(bad
            .check(300)
            .unwrap_err()
            .to_string()
            .contains("sample_codes"));
    }

    proptest::proptest! {
        /// Garbled once-per-bundle pages give an error or a value, never a panic.
        #[test]
        fn garbled_once_pages_never_panic(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..2400),
            flip in 0usize..2400,
            rows in 0usize..300,
        ) {
            let (root, pages, _) = written_with(300, 7, CentroidCodes::Int4Centred, true);
            let mut bodies = centroid_bodies_of(&root, &pages);
            if let Some(b) = bodies[0].get_mut(flip) {
                *b ^= 0x5a;
            }
            let _ = StoredCentroids::open(&root, &bodies, 7).map(|c| c.dots(&[0.1; 7]));
            bodies[1] = bytes.clone();
            let _ = StoredCentroids::open(&root, &bodies, 7);
            let _ = CodedSample::open("w-x-0", &bytes, rows, 300, 7);
            let mut s = body_of(&pages, &root.sample_page());
            if let Some(b) = s.get_mut(flip) {
                *b ^= 0xa5;
            }
            if let Ok(c) = CodedSample::open("w-x-0", &s, 256, 300, 7) {
                let t = SignTables::new(&[0.1; 7]);
                for i in 0..c.len() {
                    let _ = c.estimate(i, 0.5, &t);
                }
            }
        }
    }
}

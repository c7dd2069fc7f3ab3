//! Search filters by what a chunk is: its tier, its language and the folder of its source
//! file ([`Filters`]). Unlike the lifecycle filters (archived, expired), which remove hits
//! from the fused ranking, these are applied inside the rankers: BM25 scores and the dense
//! scan rank only the chunks a filter allows, so every ranked list is `top_k` deep in
//! allowed chunks (a filtered query still returns `top_k` hits when the bundle has that
//! many allowed ones) and a narrow filter costs no deeper ranking.
//!
//! The facts come from a paged bundle's columns page (its filter columns,
//! [`jikji_format::paged::Facets`]: no chunk page is read for them) or, for a format 1
//! bundle, from every chunk record.

use jikji_format::paged::Facets;
#[cfg(feature = "v1")]
use jikji_format::Bundle;

use crate::EngineError;

/// Which chunks a search may return by tier, language and source folder. The default
/// allows every chunk. A chunk must pass every filter that is set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    /// Inclusive tier range `(lowest, highest)` (tier: the tier folder's number, `1. …` →
    /// 1). A chunk outside every tier folder (no tier) is left out when this is set.
    pub tier: Option<(u32, u32)>,
    /// Languages (`ko`, `zh`, `ja`, `en`, `other`: the chunk's detected `lang`, compared
    /// ASCII case-insensitively); empty: any language.
    pub langs: Vec<String>,
    /// Source folder: chunks whose source file is in this folder or below it, compared by
    /// whole path components (`1. Gutenberg` matches `1. Gutenberg/a.txt` and
    /// `1. Gutenberg/old/b.txt`, not `1. Gutenberg classics/c.txt`); slashes at either end
    /// are ignored, and `""` (or `/`) matches every chunk.
    pub folder: Option<String>,
}

impl Filters {
    /// True if no filter is set (every chunk allowed).
    pub fn is_empty(&self) -> bool {
        self.tier.is_none() && self.langs.is_empty() && self.folder.is_none()
    }

    /// Parses a tier range: `N` (that tier only) or `A-B` (A ≤ B, both included).
    /// Errors: [`EngineError::BadFilter`] naming the text.
    pub fn parse_tier(s: &str) -> Result<(u32, u32), EngineError> {
        let bad = || {
            EngineError::BadFilter(format!(
                "tier range {} (expected N or A-B with A ≤ B, e.g. 0-2)",
                jikji_format::quote::Quoted(s)
            ))
        };
        let num = |t: &str| t.trim().parse::<u32>().map_err(|_| bad());
        let (lo, hi) = match s.split_once('-') {
            Some((a, b)) => (num(a)?, num(b)?),
            None => {
                let n = num(s)?;
                (n, n)
            }
        };
        if lo > hi {
            return Err(bad());
        }
        Ok((lo, hi))
    }

    /// Parses a comma-separated language list (`ko,en`); blanks are dropped. Errors: a
    /// language that is not 1–16 ASCII letters, digits or `-`.
    pub fn parse_langs(s: &str) -> Result<Vec<String>, EngineError> {
        s.split(',')
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(|l| {
                if l.len() <= 16 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
                    Ok(l.to_ascii_lowercase())
                } else {
                    Err(EngineError::BadFilter(format!(
                        "language {} (expected codes such as ko, zh, ja, en, other)",
                        jikji_format::quote::Quoted(l)
                    )))
                }
            })
            .collect()
    }

    /// Per doc id of `facets`, whether these filters allow it (one entry per record).
    pub fn allowed(&self, facets: &Facets) -> Vec<bool> {
        let lang_ok: Vec<bool> = facets
            .langs
            .iter()
            .map(|l| self.langs.is_empty() || self.langs.iter().any(|x| x.eq_ignore_ascii_case(l)))
            .collect();
        let folder_ok: Vec<bool> = facets
            .folders
            .iter()
            .map(|f| self.folder.as_deref().is_none_or(|p| in_folder(f, p)))
            .collect();
        (0..facets.tier.len())
            .map(|d| {
                let tier_ok = match (self.tier, facets.tier[d]) {
                    (None, _) => true,
                    (Some((lo, hi)), Some(t)) => (lo..=hi).contains(&t),
                    (Some(_), None) => false,
                };
                tier_ok
                    && lang_ok.get(facets.lang[d] as usize) == Some(&true)
                    && folder_ok.get(facets.folder[d] as usize) == Some(&true)
            })
            .collect()
    }
}

/// The values a bundle's chunks take for each filter, with how many chunks (records) have
/// each: what a search page offers as filter choices. Read from the facets
/// ([`FacetValues::of`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FacetValues {
    /// `(tier, chunks)` for every tier present, by tier.
    pub tiers: Vec<(u32, usize)>,
    /// Chunks outside every tier folder (no tier).
    pub untiered: usize,
    /// `(lang, chunks)` for every language present, most chunks first (then by name).
    pub langs: Vec<(String, usize)>,
    /// `(folder, chunks)` for every source folder and each folder above it (a folder filter
    /// matches a folder and everything below it; the count is of chunks at or below it), by
    /// name; the root (`""`) is left out.
    pub folders: Vec<(String, usize)>,
}

impl FacetValues {
    /// Counts `facets` (one entry per record).
    pub fn of(facets: &Facets) -> FacetValues {
        // Sorted vectors, not BTreeMaps: the browser's engine wasm stays smaller.
        let mut tiers: Vec<(u32, usize)> = Vec::new();
        let mut untiered = 0;
        for t in &facets.tier {
            match t {
                Some(t) => match tiers.binary_search_by_key(t, |e| e.0) {
                    Ok(i) => tiers[i].1 += 1,
                    Err(i) => tiers.insert(i, (*t, 1)),
                },
                None => untiered += 1,
            }
        }
        let mut lang_n = vec![0usize; facets.langs.len()];
        for &l in &facets.lang {
            if let Some(n) = lang_n.get_mut(l as usize) {
                *n += 1;
            }
        }
        let mut folder_n = vec![0usize; facets.folders.len()];
        for &f in &facets.folder {
            if let Some(n) = folder_n.get_mut(f as usize) {
                *n += 1;
            }
        }
        let mut folders: Vec<(String, usize)> = Vec::new();
        for (f, n) in facets.folders.iter().zip(folder_n) {
            let mut end = f.len();
            while end > 0 {
                let up = &f[..end];
                match folders.binary_search_by(|e| e.0.as_str().cmp(up)) {
                    Ok(i) => folders[i].1 += n,
                    Err(i) => folders.insert(i, (up.to_string(), n)),
                }
                end = up.rfind('/').unwrap_or(0);
            }
        }
        let mut langs: Vec<(String, usize)> = facets.langs.iter().cloned().zip(lang_n).collect();
        langs.retain(|(_, n)| *n > 0);
        jikji_format::sort::sort_by(&mut langs, |a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        FacetValues {
            tiers,
            untiered,
            langs,
            folders: folders.into_iter().filter(|(_, n)| *n > 0).collect(),
        }
    }
}

/// True if folder `f` (a source path's folder, no slash at either end) is `prefix` or below
/// it, by whole path components.
fn in_folder(f: &str, prefix: &str) -> bool {
    let p = prefix.trim_matches('/');
    p.is_empty()
        || f == p
        || (f.len() > p.len() && f.starts_with(p) && f.as_bytes()[p.len()] == b'/')
}

/// The facets of a format 1 bundle, read from every chunk record.
#[cfg(feature = "v1")]
pub(crate) fn scan(b: &Bundle) -> jikji_format::Result<Facets> {
    #[derive(serde::Deserialize)]
    struct Meta {
        #[serde(default)]
        tier: Option<u32>,
        #[serde(default)]
        lang: String,
        source: String,
    }
    let chunks = b.chunks();
    let mut f = jikji_format::paged::FacetsBuilder::default();
    for doc in 0..chunks.len() as u32 {
        let m: Meta = chunks.get_as(doc)?;
        f.push(m.tier, &m.lang, &m.source);
    }
    Ok(f.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_ranges_parse() {
        assert_eq!(Filters::parse_tier("0-2").unwrap(), (0, 2));
        assert_eq!(Filters::parse_tier("3").unwrap(), (3, 3));
        assert_eq!(Filters::parse_tier(" 1 - 4 ").unwrap(), (1, 4));
        for bad in ["2-1", "", "-1", "a-b", "1-", "1-2-3"] {
            let e = Filters::parse_tier(bad).unwrap_err().to_string();
            assert!(e.contains("tier range"), "{bad}: {e}");
        }
        assert_eq!(Filters::parse_langs("ko, EN,,").unwrap(), ["ko", "en"]);
        assert!(Filters::parse_langs("k o").is_err());
    }

    #[test]
    fn folders_match_by_whole_components() {
        assert!(in_folder("1. Gutenberg", "1. Gutenberg"));
        assert!(in_folder("1. Gutenberg/old", "/1. Gutenberg/"));
        assert!(!in_folder("1. Gutenberg classics", "1. Gutenberg"));
        assert!(!in_folder("", "1. Gutenberg"));
        assert!(in_folder("", "/"));
    }

    #[test]
    fn facet_values_count_chunks_and_folders_above() {
        let mut b = jikji_format::paged::FacetsBuilder::default();
        b.push(Some(1), "ko", "1. a/x.md");
        b.push(Some(1), "ko", "1. a/x.md");
        b.push(Some(2), "en", "2. b/y.md");
        b.push(None, "en", "z.md");
        b.push(Some(3), "zh", "1. a/deep/w.md");
        let v = FacetValues::of(&b.finish());
        assert_eq!(v.tiers, [(1, 2), (2, 1), (3, 1)]);
        assert_eq!(v.untiered, 1);
        let langs: Vec<(&str, usize)> = v.langs.iter().map(|(l, n)| (l.as_str(), *n)).collect();
        assert_eq!(langs, [("en", 2), ("ko", 2), ("zh", 1)]);
        let folders: Vec<(&str, usize)> = v.folders.iter().map(|(f, n)| (f.as_str(), *n)).collect();
        assert_eq!(folders, [("1. a", 3), ("1. a/deep", 1), ("2. b", 1)]);
    }

    #[test]
    fn allowed_checks_every_filter() {
        let mut b = jikji_format::paged::FacetsBuilder::default();
        b.push(Some(1), "ko", "1. a/x.md");
        b.push(Some(2), "en", "2. b/y.md");
        b.push(None, "en", "z.md");
        b.push(Some(3), "zh", "1. a/deep/w.md");
        let f = b.finish();
        let allow = |flt: Filters| flt.allowed(&f);
        assert_eq!(allow(Filters::default()), [true; 4]);
        let tier = |lo, hi| Filters {
            tier: Some((lo, hi)),
            ..Filters::default()
        };
        assert_eq!(allow(tier(0, 2)), [true, true, false, false]);
        let en = Filters {
            langs: vec!["EN".into()],
            ..Filters::default()
        };
        assert_eq!(allow(en), [false, true, true, false]);
        let folder = Filters {
            folder: Some("1. a".into()),
            ..Filters::default()
        };
        assert_eq!(allow(folder), [true, false, false, true]);
        let both = Filters {
            folder: Some("1. a".into()),
            ..tier(0, 2)
        };
        assert_eq!(allow(both), [true, false, false, false]);
    }
}

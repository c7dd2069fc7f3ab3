//! Versions of one document: which files are versions of each other, and which one is
//! the newest (searchable) while the others are archived.
//!
//! Files are versions of one document when they share a document id: front matter
//! `doc_id`, else the file name with a version suffix removed — `plan_v2.md`,
//! `plan-v2.md`, `plan.v2.md`, `plan_v2.1.md` (case-insensitive `v`) all have the id
//! `<folder>/plan`. A file with neither has no document id and is never archived. Front
//! matter `versioning: none` turns the file-name rule off for that file (`auth-api_v1.md`
//! beside `auth-api_v2.md` when v1 is still supported), as does a `doc_id` of its own.
//! [`notes`] says, for every archived file, which newer file archived it and why.
//!
//! Within a group the newest file is the one with the highest version (front matter
//! `version`, else the file name's), compared as sequences of numbers (`2.10` > `2.9` >
//! `2`; non-numeric text between numbers is ignored), then the latest `updated` date,
//! then the last path. Every other file of the group is archived.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::corpus::SourceFile;

/// Why files are versions of one document.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GroupedBy {
    /// Not grouped (no document id).
    #[default]
    None,
    /// The file name's version suffix (`_v2`, `-v2`, `.v2`).
    FileNameSuffix,
    /// Front matter `doc_id`.
    DocId,
}

/// The version facts of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionInfo {
    /// Document id, if the file is (or may become) one of several versions.
    pub doc_id: Option<String>,
    /// Version label: front matter `version`, else the file name's (`2` for `plan_v2.md`).
    pub version: Option<String>,
    /// True if another file of the same document id is newer.
    pub archived: bool,
    /// How the document id was found.
    pub grouped_by: GroupedBy,
    /// For an archived file: the newest file of its document (the one searched).
    pub archived_by: Option<String>,
}

/// Why one file is archived, for the build and update reports.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct VersionNote {
    /// The archived file.
    pub file: String,
    /// Its version label, if any.
    pub version: Option<String>,
    /// The newest file of the document, which archived it.
    pub newest: String,
    /// The newest file's version label, if any.
    pub newest_version: Option<String>,
    /// The document id they share.
    pub doc_id: String,
    /// How the document id was found.
    pub grouped_by: GroupedBy,
}

impl std::fmt::Display for VersionNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let v = |x: &Option<String>| x.as_deref().map(|v| format!(" (v{v})")).unwrap_or_default();
        write!(
            f,
            "{}{} archived by {}{}: ",
            self.file,
            v(&self.version),
            self.newest,
            v(&self.newest_version)
        )?;
        match self.grouped_by {
            GroupedBy::FileNameSuffix => write!(
                f,
                "same name but the version suffix (document {}); if both are current, put `versioning: none` in the older one's front matter",
                self.doc_id
            ),
            _ => write!(f, "same front matter doc_id {}", self.doc_id),
        }
    }
}

/// A note per archived file (same order as `files`).
pub fn notes(files: &[SourceFile], infos: &[VersionInfo]) -> Vec<VersionNote> {
    let by_rel: HashMap<&str, &VersionInfo> = files
        .iter()
        .zip(infos)
        .map(|(f, i)| (f.rel.as_str(), i))
        .collect();
    files
        .iter()
        .zip(infos)
        .filter_map(|(f, i)| {
            let newest = i.archived_by.as_ref()?;
            Some(VersionNote {
                file: f.rel.clone(),
                version: i.version.clone(),
                newest: newest.clone(),
                newest_version: by_rel.get(newest.as_str()).and_then(|n| n.version.clone()),
                doc_id: i.doc_id.clone().unwrap_or_default(),
                grouped_by: i.grouped_by,
            })
        })
        .collect()
}

/// Splits a file name stem like `plan_v2.1` into (`plan`, `2.1`).
fn name_version(stem: &str) -> Option<(&str, &str)> {
    let lower = stem.to_ascii_lowercase();
    let b = lower.as_bytes();
    // Scan back over digits and dots to the `v`.
    let mut i = b.len();
    while i > 0 && (b[i - 1].is_ascii_digit() || b[i - 1] == b'.') {
        i -= 1;
    }
    let digits = &stem[i..];
    if digits.is_empty() || !digits.as_bytes()[0].is_ascii_digit() || digits.ends_with('.') {
        return None;
    }
    if i < 2 || b[i - 1] != b'v' || !matches!(b[i - 2], b'_' | b'-' | b'.') {
        return None;
    }
    let base = &stem[..i - 2];
    (!base.is_empty()).then_some((base, digits))
}

/// Document id and version label of one file (not yet whether it is archived).
pub fn identify(f: &SourceFile) -> VersionInfo {
    let (dir, name) = match f.rel.rsplit_once('/') {
        Some((d, n)) => (Some(d), n),
        None => (None, f.rel.as_str()),
    };
    let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
    let opted_out = f
        .front
        .versioning
        .as_deref()
        .is_some_and(|v| v.eq_ignore_ascii_case("none"));
    let from_name = name_version(stem).filter(|_| !opted_out);
    let grouped_by = if f.front.doc_id.is_some() {
        GroupedBy::DocId
    } else if from_name.is_some() {
        GroupedBy::FileNameSuffix
    } else {
        GroupedBy::None
    };
    let doc_id = f.front.doc_id.clone().or_else(|| {
        from_name.map(|(base, _)| match dir {
            Some(d) => format!("{d}/{base}"),
            None => base.to_string(),
        })
    });
    let version = f
        .front
        .version
        .clone()
        .or_else(|| from_name.map(|(_, v)| v.to_string()));
    VersionInfo {
        doc_id,
        version,
        archived: false,
        grouped_by,
        archived_by: None,
    }
}

/// The numbers of a version label, in order: `v2.10-rc1` → `[2, 10, 1]`.
pub fn version_numbers(v: &str) -> Vec<u64> {
    v.split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap_or(u64::MAX))
        .collect()
}

/// Orders two versions of one document: version numbers, then `updated`, then path.
fn newer(a: (&VersionInfo, &SourceFile), b: (&VersionInfo, &SourceFile)) -> Ordering {
    let va = a.0.version.as_deref().map(version_numbers);
    let vb = b.0.version.as_deref().map(version_numbers);
    va.cmp(&vb)
        .then_with(|| a.1.front.updated.cmp(&b.1.front.updated))
        .then_with(|| a.1.rel.cmp(&b.1.rel))
}

/// Version facts of every file (same order as `files`): in each group of files sharing a
/// document id, all but the newest are archived.
pub fn resolve(files: &[SourceFile]) -> Vec<VersionInfo> {
    let mut infos: Vec<VersionInfo> = files.iter().map(identify).collect();
    let mut newest: HashMap<&str, usize> = HashMap::new();
    for (i, info) in infos.iter().enumerate() {
        let Some(id) = info.doc_id.as_deref() else {
            continue;
        };
        match newest.get(id) {
            Some(&j) if newer((info, &files[i]), (&infos[j], &files[j])) != Ordering::Greater => {}
            _ => {
                newest.insert(id, i);
            }
        }
    }
    let newest: HashMap<String, usize> = newest
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    for (i, info) in infos.iter_mut().enumerate() {
        if let Some(id) = &info.doc_id {
            info.archived = newest[id] != i;
            if info.archived {
                info.archived_by = Some(files[newest[id]].rel.clone());
            }
        }
    }
    infos
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::FrontMatter;

    fn file(rel: &str, front: FrontMatter) -> SourceFile {
        SourceFile {
            path: Default::default(),
            rel: rel.into(),
            tier: None,
            text: String::new(),
            body_byte: 0,
            body_char: 0,
            source_url: None,
            front,
            dropped: None,
        }
    }

    #[test]
    fn file_name_versions() {
        assert_eq!(name_version("plan_v2"), Some(("plan", "2")));
        assert_eq!(name_version("plan-V2.10"), Some(("plan", "2.10")));
        assert_eq!(name_version("api.v1"), Some(("api", "1")));
        assert_eq!(name_version("plan2"), None);
        assert_eq!(name_version("v2"), None);
        assert_eq!(name_version("env_v"), None);
        assert_eq!(name_version("plan_v2."), None);
    }

    #[test]
    fn newest_version_wins_numerically_and_others_are_archived() {
        let files = vec![
            file("plans/plan_v10.md", FrontMatter::default()),
            file("plans/plan_v2.md", FrontMatter::default()),
            file("plans/plan_v9.md", FrontMatter::default()),
            file("plans/other.md", FrontMatter::default()),
        ];
        let v = resolve(&files);
        assert_eq!(v[0].doc_id.as_deref(), Some("plans/plan"));
        assert!(!v[0].archived, "v10 is newer than v9 (numbers, not text)");
        assert!(v[1].archived && v[2].archived);
        assert_eq!(v[3], VersionInfo::default());
    }

    #[test]
    fn front_matter_doc_id_groups_files_with_different_names() {
        let fm = |id: &str, ver: &str| FrontMatter {
            doc_id: Some(id.into()),
            version: Some(ver.into()),
            ..Default::default()
        };
        let files = vec![
            file("a/pricing.md", fm("pricing", "2.1")),
            file("b/pricing-2024.md", fm("pricing", "2.0.9")),
            file("b/refunds.md", fm("refunds", "1")),
        ];
        let v = resolve(&files);
        assert!(!v[0].archived);
        assert!(v[1].archived);
        assert!(!v[2].archived);
    }

    #[test]
    fn equal_versions_fall_back_to_updated_then_path() {
        let fm = |u: &str| FrontMatter {
            doc_id: Some("faq".into()),
            updated: Some(u.into()),
            ..Default::default()
        };
        let files = vec![
            file("faq-new.md", fm("2026-05-01")),
            file("faq-old.md", fm("2025-01-01")),
        ];
        let v = resolve(&files);
        assert!(!v[0].archived && v[1].archived);
    }

    #[test]
    fn versioning_none_keeps_a_suffixed_file_live() {
        let live = FrontMatter {
            versioning: Some("none".into()),
            ..Default::default()
        };
        let files = vec![
            file("api/auth-api_v1.md", live),
            file("api/auth-api_v2.md", FrontMatter::default()),
            file("api/pay_v1.md", FrontMatter::default()),
            file("api/pay_v2.md", FrontMatter::default()),
        ];
        let v = resolve(&files);
        assert_eq!(v[0].doc_id, None);
        assert!(!v[0].archived && !v[1].archived);
        assert!(v[2].archived && !v[3].archived);
        let n = notes(&files, &v);
        assert_eq!(n.len(), 1);
        assert_eq!(
            n[0].to_string(),
            "api/pay_v1.md (v1) archived by api/pay_v2.md (v2): same name but the version suffix (document api/pay); if both are current, put `versioning: none` in the older one's front matter"
        );
    }
}

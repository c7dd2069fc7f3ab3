//! Versions of one document: which files are versions of each other, and which one is
//! the newest (searchable) while the others are archived.
//!
//! Files are versions of one document when they share a document id: front matter
//! `doc_id`, else the file name with a version suffix removed — `plan_v2.md`,
//! `plan-v2.md`, `plan.v2.md`, `plan_v2.1.md` (case-insensitive `v`) all have the id
//! `<folder>/plan`. A file with neither has no document id and is never archived.
//!
//! Within a group the newest file is the one with the highest version (front matter
//! `version`, else the file name's), compared as sequences of numbers (`2.10` > `2.9` >
//! `2`; non-numeric text between numbers is ignored), then the latest `updated` date,
//! then the last path. Every other file of the group is archived.

use std::cmp::Ordering;
use std::collections::HashMap;

use crate::corpus::SourceFile;

/// The version facts of one file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionInfo {
    /// Document id, if the file is (or may become) one of several versions.
    pub doc_id: Option<String>,
    /// Version label: front matter `version`, else the file name's (`2` for `plan_v2.md`).
    pub version: Option<String>,
    /// True if another file of the same document id is newer.
    pub archived: bool,
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
    let from_name = name_version(stem);
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
}

//! Reading a corpus folder: which files, their tier, and their source URL.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// One source file of the corpus.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// Absolute or given path on disk.
    pub path: PathBuf,
    /// Path relative to the corpus root, `/`-separated (stored in chunk metadata).
    pub rel: String,
    /// Tier from the nearest ancestor folder named `N. name` (lower = better curated).
    pub tier: Option<u32>,
    /// UTF-8 text.
    pub text: String,
    /// `Source:` / `출처:` URL, or the first URL in the file.
    pub source_url: Option<String>,
}

/// A file that could not be used, and why.
#[derive(Debug, Clone)]
pub struct Skipped {
    /// Path relative to the corpus root.
    pub rel: String,
    /// Reason, naming the byte offset where one applies.
    pub reason: String,
}

/// Lists the `.md` and `.txt` files under `root` (sorted by path, hidden entries skipped)
/// and reads them. Files that are not valid UTF-8 or are empty are returned in `skipped`
/// with the reason (never modified on disk).
pub fn read_corpus(root: &Path) -> anyhow::Result<(Vec<SourceFile>, Vec<Skipped>)> {
    if !root.is_dir() {
        anyhow::bail!("{}: not a folder", root.display());
    }
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let walker = walkdir::WalkDir::new(root)
        .follow_links(true)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| e.depth() == 0 || !e.file_name().to_string_lossy().starts_with('.'));
    for entry in walker {
        let entry = entry.with_context(|| format!("walking {}", root.display()))?;
        if !entry.file_type().is_file() {
            continue;
        }
        let path = entry.path();
        let ext = path
            .extension()
            .and_then(|e| e.to_str())
            .unwrap_or("")
            .to_ascii_lowercase();
        if ext != "md" && ext != "txt" {
            continue;
        }
        let rel_path = path.strip_prefix(root).unwrap_or(path);
        let rel = rel_path
            .components()
            .map(|c| c.as_os_str().to_string_lossy())
            .collect::<Vec<_>>()
            .join("/");
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let text = match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(e) => {
                let off = e.utf8_error().valid_up_to();
                let line = e.as_bytes()[..off].iter().filter(|&&b| b == b'\n').count() + 1;
                skipped.push(Skipped {
                    rel,
                    reason: format!("invalid UTF-8 at byte {off} (line {line})"),
                });
                continue;
            }
        };
        let text = text
            .strip_prefix('\u{feff}')
            .map(str::to_string)
            .unwrap_or(text);
        if text.trim().is_empty() {
            skipped.push(Skipped {
                rel,
                reason: "empty file".into(),
            });
            continue;
        }
        let tier = rel_path.parent().and_then(|p| {
            p.components()
                .rev()
                .find_map(|c| tier_of(&c.as_os_str().to_string_lossy()))
        });
        let source_url = source_url(&text);
        files.push(SourceFile {
            path: path.to_path_buf(),
            rel,
            tier,
            text,
            source_url,
        });
    }
    Ok((files, skipped))
}

/// Tier number of a folder named like `1. 漢文 古典` or `99. 온라인 자료`.
pub fn tier_of(folder: &str) -> Option<u32> {
    let (num, rest) = folder.split_once('.')?;
    if num.is_empty() || !num.chars().all(|c| c.is_ascii_digit()) || !rest.starts_with(' ') {
        return None;
    }
    num.parse().ok()
}

/// The file's source URL: the value of the first `Source:` / `출처:` line among the first
/// 30 lines, else the first `http(s)://` URL anywhere.
pub fn source_url(text: &str) -> Option<String> {
    for line in text.lines().take(30) {
        let l = line.trim();
        for key in ["Source:", "source:", "출처:", "SOURCE:"] {
            if let Some(v) = l.strip_prefix(key) {
                let v = v.trim();
                if !v.is_empty() {
                    return Some(first_url(v).unwrap_or_else(|| v.to_string()));
                }
            }
        }
    }
    first_url(text)
}

fn first_url(text: &str) -> Option<String> {
    let i = text.find("https://").or_else(|| text.find("http://"))?;
    let url: String = text[i..]
        .chars()
        .take_while(|c| !c.is_whitespace() && !matches!(c, ')' | '>' | '"' | '\'' | ']' | '」'))
        .collect();
    Some(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_from_folder_names() {
        assert_eq!(tier_of("1. 漢文 古典"), Some(1));
        assert_eq!(tier_of("99. 온라인 자료 (정리 X)"), Some(99));
        assert_eq!(tier_of("misc"), None);
        assert_eq!(tier_of("v1.2 notes"), None);
    }

    #[test]
    fn source_lines_and_fallback_urls() {
        assert_eq!(
            source_url("Source: https://a.org/x\n\ntext").as_deref(),
            Some("https://a.org/x")
        );
        assert_eq!(
            source_url("출처: https://b.kr/y\n").as_deref(),
            Some("https://b.kr/y")
        );
        assert_eq!(
            source_url("see (https://c.net/z) here").as_deref(),
            Some("https://c.net/z")
        );
        assert_eq!(source_url("no link"), None);
    }
}

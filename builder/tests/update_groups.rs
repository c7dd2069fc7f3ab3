//! Page names per group (issue 12, docs/design/update.md "page names per group"): a numbered
//! run's pages are named by the digest of their group of [`group_size`] pages, so `jikji
//! update` after editing one file renames only the groups whose bodies changed, and the result
//! is still a full build's bundle byte for byte (pages and entry but `built_at`).
//!
//! BM25-only bundles of a generated corpus of 40 files (~200 chunk pages: groups of 8), so the
//! test needs no model.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use jikji_builder::ingest::{build, BundleSettings, IngestOptions};
use jikji_builder::update::{update_with, UpdateOptions};
use jikji_format::paged::group_size;

const FILES: usize = 40;

/// Deterministic words: file `f`, section `s`, word `w`.
fn word(f: usize, s: usize, w: usize) -> String {
    const SYL: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po", "qu", "da", "fe", "gi", "ho",
        "ju",
    ];
    let x = (f * 7919 + s * 104_729 + w * 31) % 4096;
    format!(
        "{}{}{}",
        SYL[x % 16],
        SYL[(x / 16) % 16],
        SYL[(x / 256) % 16]
    )
}

/// Writes the corpus: `FILES` files over two tier folders, each with five long sections and a
/// short closing paragraph.
fn corpus(dir: &Path) -> PathBuf {
    let root = dir.join("corpus");
    for f in 0..FILES {
        let tier = if f < FILES / 2 { "1. core" } else { "2. more" };
        let mut text = format!("# Notes {f:02}\n\nSource: https://example.org/notes/{f:02}\n\n");
        for s in 0..5 {
            text.push_str(&format!("## Section {s}\n\n"));
            for p in 0..4 {
                let words: Vec<String> = (0..60).map(|w| word(f, s * 10 + p, w)).collect();
                text.push_str(&words.join(" "));
                text.push_str(".\n\n");
            }
        }
        text.push_str("The end of these notes.\n");
        let path = root.join(tier).join(format!("notes-{f:02}.md"));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    root
}

/// The corpus files in path order (the bundle's record order).
fn files(corpus: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = walkdir::WalkDir::new(corpus)
        .into_iter()
        .map(|e| e.unwrap().into_path())
        .filter(|p| p.is_file())
        .collect();
    v.sort();
    v
}

/// An edit that keeps the chunk count (here each paragraph is a chunk, so the bench's appended
/// paragraph would add one): one word of the closing sentence changed.
fn append_paragraph(f: &Path) {
    let text = std::fs::read_to_string(f).unwrap();
    let edited = text.replace("The end of these notes.", "The end of those notes.");
    assert_ne!(edited, text);
    std::fs::write(f, edited).unwrap();
}

/// A whole new section inserted at the start of a file: new chunks, so every later record
/// number shifts.
fn insert_section(f: &Path) {
    let text = std::fs::read_to_string(f).unwrap();
    let words: Vec<String> = (0..400).map(|w| word(99, 99, w)).collect();
    let (head, rest) = text.split_once("\n\n").unwrap();
    std::fs::write(
        f,
        format!("{head}\n\n## Inserted\n\n{}.\n\n{rest}", words.join(" ")),
    )
    .unwrap();
}

#[derive(Debug)]
struct Page {
    ino: u64,
    bytes: Vec<u8>,
}

fn pages(bundle: &Path) -> BTreeMap<String, Page> {
    std::fs::read_dir(bundle.join("p"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                Page {
                    ino: e.metadata().unwrap().ino(),
                    bytes: std::fs::read(e.path()).unwrap(),
                },
            )
        })
        .collect()
}

fn entry(bundle: &Path) -> serde_json::Value {
    let mut v: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bundle.join("jikji.json")).unwrap()).unwrap();
    v.as_object_mut().unwrap().remove("built_at");
    v
}

/// A numbered page's (kind letter, number, body digest from its header).
fn header(p: &Page) -> (u8, u32, [u8; 28]) {
    let b = &p.bytes;
    (
        b[4],
        u32::from_le_bytes(b[16..20].try_into().unwrap()),
        b[20..48].try_into().unwrap(),
    )
}

/// Per numbered kind letter: number → body digest.
fn bodies(p: &BTreeMap<String, Page>) -> BTreeMap<u8, BTreeMap<u32, [u8; 28]>> {
    let mut out: BTreeMap<u8, BTreeMap<u32, [u8; 28]>> = BTreeMap::new();
    for (name, page) in p {
        if name.matches('-').count() == 2 {
            let (k, n, d) = header(page);
            out.entry(k).or_default().insert(n, d);
        }
    }
    out
}

/// What the design says an update renames: per grouped kind, the pages of each group in which
/// some page's body differs from the old page of the same number (or the page count differs);
/// every other page keeps its name. Checks that the update renamed exactly those, that the
/// kept names are the old files (linked), and returns the renamed `c` pages' numbers.
fn check_renames(
    old: &BTreeMap<String, Page>,
    new: &BTreeMap<String, Page>,
    new_entry: &serde_json::Value,
) -> BTreeSet<u32> {
    let (ob, nb) = (bodies(old), bodies(new));
    let mut renamed_chunks = BTreeSet::new();
    for (&kind, pages_of_kind) in &nb {
        let count = pages_of_kind.len();
        let g = group_size(count) as u32;
        let empty = BTreeMap::new();
        let o = ob.get(&kind).unwrap_or(&empty);
        let regrouped = group_size(o.len()) as u32 != g;
        let mut changed_groups: BTreeSet<u32> = pages_of_kind
            .iter()
            .filter(|(n, d)| regrouped || o.get(n) != Some(d))
            .map(|(n, _)| n / g)
            .collect();
        // Pages gone from the end change their group's membership.
        changed_groups.extend(
            o.keys()
                .filter(|n| !pages_of_kind.contains_key(n))
                .map(|n| n / g)
                .filter(|i| (*i as usize) < count.div_ceil(g as usize)),
        );
        for (name, page) in new {
            if name.as_bytes()[0] != kind || name.matches('-').count() != 2 {
                continue;
            }
            let (_, n, _) = header(page);
            let expect_renamed = count > 1 && changed_groups.contains(&(n / g))
                || count == 1 && !changed_groups.is_empty();
            let kept = old.get(name);
            assert_eq!(
                kept.is_none(),
                expect_renamed,
                "p/{name}: group {} of {} (changed groups {changed_groups:?})",
                n / g,
                count.div_ceil(g as usize)
            );
            if let Some(o) = kept {
                assert_eq!(o.ino, page.ino, "p/{name} kept its name but was not linked");
            }
            if kind == b'c' && expect_renamed {
                renamed_chunks.insert(n);
            }
        }
    }
    // The entry holds one digest per group, at most 32 a run.
    let chunks = &new_entry["pages"]["chunks"];
    let gens = chunks["gens"].as_array().expect("pages.chunks.gens");
    assert!(gens.len() <= 32 && gens.len() > 1, "{chunks}");
    renamed_chunks
}

/// The chunk pages holding the records of corpus file `rel` (its chunks: the records whose
/// `source` is that path).
fn records_of(bundle: &Path, rel: &str) -> Vec<u32> {
    let b = jikji_format::Bundle::open_paged_dir(bundle).unwrap();
    let root = b.pages().unwrap().clone();
    b.load_pages(&jikji_format::paged::record_pages(&root))
        .unwrap();
    let per_page = root.chunks.per_page as u32;
    (0..b.chunks().len() as u32)
        .filter(|&d| b.chunks().get(d).unwrap().source == rel)
        .map(|d| d / per_page)
        .collect::<BTreeSet<u32>>()
        .into_iter()
        .collect()
}

/// Builds, edits one file, updates, builds the edited corpus in full, and checks the update
/// against the full build and the design's renames. Returns (chunk pages of the edited file
/// before, renamed chunk pages, chunk pages before, chunk pages after, chunks' group size).
fn run(which: usize, edit: fn(&Path)) -> (Vec<u32>, BTreeSet<u32>, usize, usize, u32) {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    let opts = |out: &Path| IngestOptions::new(&corpus, out);
    let defaults = BundleSettings::default();
    build(&opts(&bundle), &defaults).unwrap();
    let old = pages(&bundle);
    let old_entry = entry(&bundle);
    let f = &files(&corpus)[which];
    let rel = f
        .strip_prefix(&corpus)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let recs = records_of(&bundle, &rel);
    assert!(!recs.is_empty(), "{rel}: no records");
    edit(f);
    let r = update_with(&opts(&bundle), &UpdateOptions::default()).unwrap();
    assert!(r.written);
    let full = tmp.path().join("full");
    build(&opts(&full), &defaults).unwrap();
    // Update = full build, byte for byte.
    let (now, fb) = (pages(&bundle), pages(&full));
    assert_eq!(
        now.keys().collect::<Vec<_>>(),
        fb.keys().collect::<Vec<_>>(),
        "page names differ between the update and a full build"
    );
    for (name, p) in &now {
        assert!(
            p.bytes == fb[name].bytes,
            "p/{name} differs from the full build's"
        );
    }
    let new_entry = entry(&bundle);
    assert_eq!(new_entry, entry(&full));
    let renamed = check_renames(&old, &now, &new_entry);
    let chunks_of =
        |e: &serde_json::Value| e["pages"]["chunks"]["pages"].as_u64().unwrap() as usize;
    let g = new_entry["pages"]["chunks"]["group"].as_u64().unwrap() as u32;
    eprintln!(
        "{rel}: records {:?}, {} written, {} linked; chunk pages renamed {:?}",
        (recs.first(), recs.last()),
        r.pages_written,
        r.pages_linked,
        renamed
    );
    (
        recs,
        renamed,
        chunks_of(&old_entry),
        chunks_of(&new_entry),
        g,
    )
}

/// The groups of chunk pages `pages`.
fn groups(pages: &BTreeSet<u32>, g: u32) -> BTreeSet<u32> {
    pages.iter().map(|n| n / g).collect()
}

#[test]
fn an_edit_of_the_first_file_renames_one_chunk_group() {
    let (recs, renamed, before, after, g) = run(0, append_paragraph);
    assert_eq!(before, after, "the edit keeps the chunk count");
    assert!(g > 1);
    // Only the group of the file's changed record(s).
    let expect = groups(&recs.iter().copied().collect(), g);
    assert!(!renamed.is_empty());
    assert!(groups(&renamed, g).is_subset(&expect), "{renamed:?}");
    assert!(renamed.len() <= g as usize * expect.len());
}

#[test]
fn an_edit_of_the_last_file_renames_only_the_last_chunk_group() {
    let (_, renamed, before, after, g) = run(FILES - 1, append_paragraph);
    assert_eq!(before, after);
    let last = (after as u32 - 1) / g;
    assert_eq!(groups(&renamed, g), BTreeSet::from([last]), "{renamed:?}");
}

/// An insertion in a middle file shifts every later record: the chunk groups from the
/// file's first page's group to the end are renamed (their numbers and bodies move), none
/// before it.
#[test]
fn an_insertion_in_a_middle_file_renames_chunk_groups_from_it_to_the_end() {
    let (recs, renamed, before, after, g) = run(FILES / 2, insert_section);
    assert!(after > before, "{before} → {after} chunks");
    let first = recs[0] / g;
    let expect: BTreeSet<u32> = (first..=(after as u32 - 1) / g).collect();
    assert!(first > 0);
    assert_eq!(groups(&renamed, g), expect, "{renamed:?}");
}

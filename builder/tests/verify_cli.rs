//! `jikji verify`: every page of a bundle read and checked; each damaged or missing page
//! named (not only the first), exit 1; files the entry does not name listed; an intact
//! bundle (format 2 with vectors, format 1) passes. A search reads only the pages its
//! queries need, so before this a damaged page went unnoticed until a reader asked for it
//! (the newcomer check of session 30).

use std::path::Path;
use std::process::{Command, Output};

fn jikji(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap()
}

fn compat(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../format/tests/compat")
        .join(name)
        .join("bundle")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn verify_names_every_damaged_page_and_passes_intact_bundles() {
    for (name, format) in [
        ("v2", 2),
        ("v2-ivf-split", 2),
        ("v2-ivf8-split", 2),
        ("v1", 1),
    ] {
        let o = jikji(&["verify", compat(name).to_str().unwrap(), "--json"]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(r["format"], format, "{r}");
        assert_eq!(r["errors"], serde_json::json!([]), "{r}");
        assert_eq!(r["parts_checked"], true, "{r}");
        assert!(r["pages"].as_u64().unwrap() > 3, "{r}");
    }

    let tmp = tempfile::tempdir().unwrap();
    let b = tmp.path().join("b");
    copy_dir(&compat("v2"), &b);
    let pages = b.join("p");
    let mut names: Vec<String> = std::fs::read_dir(&pages)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let pick = |prefix: &str| {
        names
            .iter()
            .find(|n| n.starts_with(prefix))
            .unwrap()
            .clone()
    };
    let (truncated, removed, flipped) = (pick("c-"), pick("h-"), pick("d-"));
    let bytes = std::fs::read(pages.join(&truncated)).unwrap();
    std::fs::write(pages.join(&truncated), &bytes[..bytes.len() - 7]).unwrap();
    std::fs::remove_file(pages.join(&removed)).unwrap();
    let mut bytes = std::fs::read(pages.join(&flipped)).unwrap();
    // A bit in the middle of the stored body (after the 48-byte header); the last byte of
    // a deflate stream may be padding, whose flip changes nothing read.
    let mid = 48 + (bytes.len() - 48) / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(pages.join(&flipped), &bytes).unwrap();
    std::fs::write(pages.join("stray.bin"), b"not a page").unwrap();

    let o = jikji(&["verify", b.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    for n in [&truncated, &removed, &flipped] {
        assert!(err.contains(&format!("p/{n}")), "{n} not named: {err}");
    }
    assert!(err.contains(&format!("p/{removed}: missing")), "{err}");
    assert!(
        err.contains("p/stray.bin: not named by jikji.json"),
        "{err}"
    );
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("3 of "),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );

    // Not a bundle folder: named.
    let o = jikji(&["verify", tmp.path().join("nope").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not found"));
}

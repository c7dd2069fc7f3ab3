//! A build killed mid-way leaves its temporary folder (`.jikji-build-*`, the spilled chunk
//! store and postings) beside the bundle; the next build removes it, and only folders whose
//! lock no process holds (the newcomer check of session 30 found a 14 MB folder left).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A corpus that takes the build a few seconds: 300 files of ~60 kB of varied words.
fn big_corpus(dir: &Path) -> std::path::PathBuf {
    let c = dir.join("books/1. notes");
    std::fs::create_dir_all(&c).unwrap();
    for f in 0..300u64 {
        let mut text = format!("Source: https://example.org/notes/{f}\n\n# Note {f}\n\n");
        let mut x = f.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        while text.len() < 60_000 {
            for _ in 0..12 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                text.push_str(&format!("w{} ", x % 50_000));
            }
            text.push_str(".\n\n");
        }
        std::fs::write(c.join(format!("n{f}.md")), text).unwrap();
    }
    dir.join("books")
}

fn spills(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".jikji-build-"))
        .collect();
    v.sort();
    v
}

/// Regression (interrupted_build_left_its_temporary_folder).
#[test]
fn interrupted_build_left_its_temporary_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let books = big_corpus(tmp.path());
    let out = tmp.path().join("bundle");
    let build = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_jikji"));
        c.args(["build", "--no-embed", "-q", "--out"])
            .arg(&out)
            .arg(&books)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    };
    // Kill a build once its temporary folder holds its lock (locked, then the process id
    // written: a non-empty `.lock`).
    let mut child = build().spawn().unwrap();
    let t = Instant::now();
    loop {
        if spills(tmp.path())
            .iter()
            .any(|n| std::fs::metadata(tmp.path().join(n).join(".lock")).is_ok_and(|m| m.len() > 0))
        {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "no temporary folder appeared"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the build ended before it could be killed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let left = spills(tmp.path());
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(!out.exists(), "a killed build wrote the bundle");

    // Beside it: a folder in use (its lock held here), one without a lock, one whose lock
    // is still empty (a build between creating and locking it), a user's file.
    let busy = tmp.path().join(".jikji-build-busy");
    std::fs::create_dir(&busy).unwrap();
    let held = std::fs::File::create(busy.join(".lock")).unwrap();
    held.lock().unwrap();
    std::fs::write(busy.join(".lock"), "1").unwrap();
    std::fs::create_dir(tmp.path().join(".jikji-build-nolock")).unwrap();
    let starting = tmp.path().join(".jikji-build-starting");
    std::fs::create_dir(&starting).unwrap();
    std::fs::write(starting.join(".lock"), "").unwrap();
    std::fs::write(tmp.path().join(".jikji-build-notes.txt"), "mine").unwrap();

    let o = build().output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!("removed {}", tmp.path().join(&left[0]).display()))
            && err.contains("left by an interrupted build"),
        "{err}"
    );
    assert_eq!(
        spills(tmp.path()),
        [
            ".jikji-build-busy",
            ".jikji-build-nolock",
            ".jikji-build-notes.txt",
            ".jikji-build-starting"
        ],
        "the killed build's folder is gone, the others kept"
    );
    assert!(out.join("jikji.json").exists());
    drop(held);
}

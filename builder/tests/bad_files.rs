//! Issue 11: corpus files that crashed or stalled `jikji`. Each test runs the built binary
//! on a tiny corpus folder, as a user would, under a watchdog that kills it after 20 s (a
//! hang fails the test instead of stalling the suite), and checks that it exits normally,
//! names the bad file, and still reads the rest of the corpus. Unix only (symbolic
//! links and FIFOs are made with the Unix calls).
#![cfg(unix)]

use std::ffi::OsStr;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long one `jikji` run on a one- or two-file corpus may take before it counts as hung.
const WATCHDOG: Duration = Duration::from_secs(20);

/// Runs `jikji args…`, killing it (and failing the test) if it is still running after
/// [`WATCHDOG`]. Stdout and stderr are drained on their own threads so a full pipe cannot
/// stall it either.
fn jikji<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Output {
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let mut child = Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            r.read_to_end(&mut v).unwrap();
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > WATCHDOG {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("jikji {args:?} still running after {WATCHDOG:?}: it hung (killed)");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

/// Runs `jikji args…` and returns stdout + stderr; fails the test, showing both, unless it
/// exited with success (a panic exits with code 101).
fn jikji_ok<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> String {
    let args: Vec<_> = args.into_iter().map(|a| a.as_ref().to_owned()).collect();
    let o = jikji(&args);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        o.status.success(),
        "jikji {args:?} failed ({}):\n{text}",
        o.status
    );
    assert!(
        !text.contains("panicked"),
        "jikji {args:?} panicked:\n{text}"
    );
    text
}

const GOOD: &str = "Source: https://example.org/good\n\n# Good\n\nThe good file still builds.\n";

fn write(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The chunk records (`jikji chunk --no-embed`, one JSON object a line) of a corpus.
fn chunks(corpus: &Path) -> Vec<serde_json::Value> {
    jikji_ok([
        OsStr::new("chunk"),
        corpus.as_os_str(),
        OsStr::new("--no-embed"),
    ])
    .lines()
    .filter(|l| l.starts_with('{'))
    .map(|l| serde_json::from_str(l).unwrap())
    .collect()
}

/// Runs `check` and `build --no-embed` (both must succeed); returns their outputs.
fn check_and_build(corpus: &Path) -> (String, String) {
    let check = jikji_ok([OsStr::new("check"), corpus.as_os_str()]);
    let out = corpus.parent().unwrap().join("bundle");
    let build = jikji_ok([
        OsStr::new("build"),
        corpus.as_os_str(),
        OsStr::new("--out"),
        out.as_os_str(),
        OsStr::new("--no-embed"),
    ]);
    (check, build)
}

/// `check` and `build --no-embed` both succeed and both name `want` (a finding's text).
fn check_and_build_report(corpus: &Path, want: &str) -> String {
    let (check, build) = check_and_build(corpus);
    assert!(
        check.contains(want),
        "check does not say {want:?}:\n{check}"
    );
    assert!(
        build.contains(want),
        "build does not say {want:?}:\n{build}"
    );
    build
}

/// The `files` count of a `jikji build --json` report.
fn built_files(corpus: &Path) -> u64 {
    let out = corpus.parent().unwrap().join("bundle-json");
    let o = jikji([
        OsStr::new("build"),
        corpus.as_os_str(),
        OsStr::new("--out"),
        out.as_os_str(),
        OsStr::new("--no-embed"),
        OsStr::new("--json"),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    v["files"].as_u64().unwrap()
}

#[test]
fn expires_with_multibyte_char_panicked() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("books");
    write(&corpus, "good.md", GOOD);
    // `update` needs a bundle from before the bad file arrived.
    let bundle = tmp.path().join("b");
    jikji_ok([
        OsStr::new("build"),
        corpus.as_os_str(),
        OsStr::new("--out"),
        bundle.as_os_str(),
        OsStr::new("--no-embed"),
    ]);
    write(
        &corpus,
        "bad.md",
        "---\ntitle: T\nexpires: 2026-01-01T10:00+1é1\n---\nSource: https://a.org/x\n\n# H\n\nbody text\n",
    );
    let want =
        r#"warning[bad-expires] bad.md:3: expires "2026-01-01T10:00+1é1" is not an ISO 8601 date"#;
    let update = jikji_ok([OsStr::new("update"), bundle.as_os_str(), corpus.as_os_str()]);
    assert!(update.contains(want), "{update}");
    check_and_build_report(&corpus, want);
    assert_eq!(built_files(&corpus), 2);
}

#[test]
fn crlf_front_matter_with_cjk_values_panicked() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("books");
    // Counting one byte per CRLF, the body offset fell 8 bytes short: inside `書`.
    let text = "---\r\ntitle: 論語\r\nauthor: 孔子\r\nversion: 1\r\nupdated: 2026-01-01\r\nlang: lzh\r\nsource: 書\r\n---\r\nSource: https://a.org/x\r\n\r\n# 學而\r\n\r\n學而時習之，不亦說乎。\r\n";
    write(&corpus, "lunyu.md", text);
    let (check, build) = check_and_build(&corpus);
    assert!(check.contains("1 file(s) ok, 0 error(s)"), "{check}");
    assert!(build.contains("files 1 "), "{build}");
    let c = chunks(&corpus);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0]["text"], "# 學而\r\n\r\n學而時習之，不亦說乎。");
    // `start` is the char offset in the whole file: body_char is right.
    let want = text[..text.find("# 學而").unwrap()].chars().count();
    assert_eq!(c[0]["start"], want);
}

#[test]
fn crlf_front_matter_leaked_closing_dashes_into_the_body() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("books");
    let text =
        "---\r\ntitle: Plan\r\nsource: https://a.org/x\r\n---\r\n# Head\r\n\r\nbody text here\r\n";
    write(&corpus, "plan.md", text);
    let (check, build) = check_and_build(&corpus);
    assert!(check.contains("1 file(s) ok, 0 error(s)"), "{check}");
    assert!(build.contains("files 1 "), "{build}");
    let c = chunks(&corpus);
    for chunk in &c {
        let t = chunk["text"].as_str().unwrap();
        assert!(
            !t.contains("---"),
            "front matter leaked into a chunk: {t:?}"
        );
    }
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0]["start"], text.find("# Head").unwrap());
}

#[test]
fn symlink_loop_aborted_the_whole_corpus() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("books");
    write(&corpus, "1. docs/good.md", GOOD);
    std::fs::create_dir_all(corpus.join("1. docs/sub")).unwrap();
    std::os::unix::fs::symlink("../..", corpus.join("1. docs/sub/loop")).unwrap();
    check_and_build_report(
        &corpus,
        "warning[symlink-loop] 1. docs/sub/loop: symbolic link loops back to the corpus root; skipped",
    );
    assert_eq!(built_files(&corpus), 1);
}

#[test]
fn dangling_symlink_aborted_the_whole_corpus() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("books");
    write(&corpus, "1. docs/good.md", GOOD);
    std::os::unix::fs::symlink("gone.md", corpus.join("1. docs/link.md")).unwrap();
    check_and_build_report(
        &corpus,
        r#"warning[broken-symlink] 1. docs/link.md: symbolic link to "gone.md", which does not exist; skipped"#,
    );
    assert_eq!(built_files(&corpus), 1);
}

/// Makes a FIFO at `path` with mkfifo(3).
fn mkfifo(path: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: `c` is a valid NUL-terminated path that outlives the call.
    let rc = unsafe { libc::mkfifo(c.as_ptr(), 0o644) };
    assert_eq!(rc, 0, "mkfifo {}", path.display());
}

#[test]
fn fifo_named_md_is_skipped_with_a_warning_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("books");
    write(&corpus, "1. docs/good.md", GOOD);
    mkfifo(&corpus.join("1. docs/pipe.md"));
    // A link to the FIFO is followed to it, and skipped the same way.
    std::os::unix::fs::symlink("pipe.md", corpus.join("1. docs/to-pipe.md")).unwrap();
    let build = check_and_build_report(
        &corpus,
        "warning[not-a-file] 1. docs/pipe.md: a FIFO (named pipe), not a text file; skipped without reading it",
    );
    assert!(
        build.contains("warning[not-a-file] 1. docs/to-pipe.md: a FIFO"),
        "{build}"
    );
    assert_eq!(built_files(&corpus), 1);
}

/// Newcomer report: a link to itself (or `a.md -> b.md -> a.md`) made the OS fail with
/// ELOOP, which walkdir reports as a plain I/O error: `check` and `build` aborted.
#[test]
fn file_symlink_loop_aborted_the_whole_corpus() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("books");
    write(&corpus, "1. docs/good.md", GOOD);
    std::os::unix::fs::symlink("self.md", corpus.join("1. docs/self.md")).unwrap();
    std::os::unix::fs::symlink("b.md", corpus.join("1. docs/a.md")).unwrap();
    std::os::unix::fs::symlink("a.md", corpus.join("1. docs/b.md")).unwrap();
    let build = check_and_build_report(
        &corpus,
        "warning[symlink-loop] 1. docs/self.md: symbolic link that never resolves",
    );
    assert!(
        build.contains("warning[symlink-loop] 1. docs/a.md"),
        "{build}"
    );
    assert_eq!(built_files(&corpus), 1);
}

/// Newcomer report: `jikji build CORPUS --out DIR` with DIR an existing folder that is
/// not a bundle (the corpus itself, a folder of notes) moved it to DIR.prev, and the next
/// build deleted that for good.
#[test]
fn build_out_replaced_a_folder_that_was_not_a_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("books");
    write(&corpus, "1. docs/good.md", GOOD);
    let notes = tmp.path().join("notes");
    write(&notes, "keep.txt", "important\n");
    for out in [&notes, &corpus] {
        let o = jikji([
            OsStr::new("build"),
            corpus.as_os_str(),
            OsStr::new("--out"),
            out.as_os_str(),
            OsStr::new("--no-embed"),
        ]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(err.contains("is not a jikji bundle"), "{err}");
    }
    assert_eq!(
        std::fs::read_to_string(notes.join("keep.txt")).unwrap(),
        "important\n"
    );
    assert!(corpus.join("1. docs/good.md").is_file());
    assert!(!tmp.path().join("notes.prev").exists() && !tmp.path().join("books.prev").exists());
    // A `.prev` that is not a bundle is not replaced either.
    let bundle = tmp.path().join("bundle");
    write(&tmp.path().join("bundle.prev"), "mine.txt", "mine\n");
    let o = jikji([
        OsStr::new("build"),
        corpus.as_os_str(),
        OsStr::new("--out"),
        bundle.as_os_str(),
        OsStr::new("--no-embed"),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(tmp.path().join("bundle.prev/mine.txt").is_file());
    // An existing bundle is still replaced, the old one kept as `.prev`.
    std::fs::remove_dir_all(tmp.path().join("bundle.prev")).unwrap();
    for _ in 0..2 {
        jikji_ok([
            OsStr::new("build"),
            corpus.as_os_str(),
            OsStr::new("--out"),
            bundle.as_os_str(),
            OsStr::new("--no-embed"),
        ]);
    }
    assert!(tmp.path().join("bundle.prev/jikji.json").is_file());
}

#[test]
fn build_of_only_rejected_files_did_not_say_why() {
    // Every file rejected by the check: the build must fail naming each file and its reason
    // (it said only "no usable .md or .txt files"), and leave an existing bundle as it was.
    let tmp = tempfile::tempdir().unwrap();
    let corpus = tmp.path().join("books");
    write(
        &corpus,
        "1. x/nosrc.md",
        "# Title\n\nSome text without any source line.\n",
    );
    write(&corpus, "1. x/empty.md", "");
    let out = tmp.path().join("bundle");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "a user's file").unwrap();
    let r = jikji([
        "build".as_ref(),
        corpus.as_os_str(),
        "--out".as_ref(),
        out.as_os_str(),
        "--no-embed".as_ref(),
    ]);
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(!r.status.success(), "{err}");
    assert!(
        err.contains("no usable .md or .txt files: 2 left out")
            && err.contains("error[no-source] 1. x/nosrc.md")
            && err.contains("error[empty] 1. x/empty.md"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(out.join("keep.txt")).unwrap(),
        "a user's file"
    );
}

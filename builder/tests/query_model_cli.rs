//! `--query-model DIR` of `jikji search` and `jikji eval`: the query-model pack (compact
//! tokenizer + lean forward pass) ranks as tract does, and a pack made for another model is
//! refused by name. Needs the model and its E5S1 source (`scripts/setup-model`); a missing one
//! fails the test.

mod common;

use std::path::{Path, PathBuf};

use common::*;

/// Writes a pack of the model into `dir` with `jikji model-pack`.
fn make_pack(dir: &Path) -> PathBuf {
    let model = model_dir();
    let e5s1 = model.join("e5-small-q4.bin");
    assert!(
        e5s1.exists(),
        "{}: no E5S1 source; run scripts/setup-model",
        e5s1.display()
    );
    let pack = dir.join("e5-small-pack");
    jikji_ok([
        "model-pack".as_ref(),
        "--e5s1".as_ref(),
        e5s1.as_os_str(),
        "--model".as_ref(),
        model.as_os_str(),
        "--out".as_ref(),
        pack.as_os_str(),
    ]);
    pack
}

fn ndcg(report: &str) -> Vec<(String, f64)> {
    let v: serde_json::Value = serde_json::from_str(report).unwrap();
    v["modes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["mode"].as_str().unwrap().to_string(),
                m["metrics"]["ndcg_10"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn query_model_pack_ranks_as_tract_and_another_models_pack_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let set = tmp.path().join("set");
    write_eval_set(
        &set,
        &[
            ("q1", "lamp at dusk"),
            ("q2", "apples from the orchard"),
            ("q3", "boats coming home before bad weather"),
        ],
        &[("q1", "lighthouse"), ("q2", "orchard"), ("q3", "harbour")],
    );
    let pack = make_pack(tmp.path());
    let cache = cache_dir();
    let model = model_dir();
    let eval = |extra: &[&std::ffi::OsStr]| {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "eval".as_ref(),
            set.as_os_str(),
            "--modes".as_ref(),
            "dense,hybrid".as_ref(),
            "--json".as_ref(),
            "--model".as_ref(),
            model.as_os_str(),
            "--cache".as_ref(),
            cache.as_os_str(),
        ];
        args.extend_from_slice(extra);
        ndcg(&jikji_ok(args))
    };
    let tract = eval(&[]);
    let packed = eval(&["--query-model".as_ref(), pack.as_os_str()]);
    assert_eq!(tract.len(), 2);
    assert_eq!(packed, tract, "nDCG@10 with the pack vs tract");

    // jikji search: the same hits, in the same order, with (near) the same scores.
    let books = set.join("corpus-books");
    std::fs::create_dir_all(&books).unwrap();
    for (i, t) in [
        "The lighthouse keeper lit the lamp at dusk.",
        "Apples grew in the orchard.",
        "Boats came home before the storm.",
    ]
    .iter()
    .enumerate()
    {
        std::fs::write(
            books.join(format!("d{i}.md")),
            format!("Source: https://example.org/d{i}\n\n{t}\n"),
        )
        .unwrap();
    }
    // Two bundles of the same books: one without the pack's pages (`--query-model` then reads
    // the pack's files whole) and one carrying them (it reads the bundle's pages, as the
    // browser does). Both are forced: whether a pack sits beside the model must not decide
    // which path this test checks.
    let build = |name: &str, pack_flag: &[&std::ffi::OsStr]| {
        let out = tmp.path().join(name);
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "build".as_ref(),
            books.as_os_str(),
            "--out".as_ref(),
            out.as_os_str(),
            "--model".as_ref(),
            model.as_os_str(),
            "--cache".as_ref(),
            cache.as_os_str(),
        ];
        args.extend_from_slice(pack_flag);
        jikji_ok(args);
        let entry: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("jikji.json")).unwrap())
                .unwrap();
        (out, entry["pages"]["query_model"].is_object())
    };
    let (whole, has) = build("whole", &["--no-query-model".as_ref()]);
    assert!(!has, "--no-query-model wrote query-model pages");
    let (paged, has) = build("paged", &["--query-model".as_ref(), pack.as_os_str()]);
    assert!(has, "--query-model PACK wrote no query-model pages");
    let search = |bundle: &std::path::Path, extra: &[&std::ffi::OsStr]| -> Vec<(String, f64)> {
        let mut args: Vec<&std::ffi::OsStr> = vec![
            "search".as_ref(),
            bundle.as_os_str(),
            "evening light by the sea".as_ref(),
            "--mode".as_ref(),
            "dense".as_ref(),
            "--json".as_ref(),
            "--model".as_ref(),
            model.as_os_str(),
        ];
        args.extend_from_slice(extra);
        let v: serde_json::Value = serde_json::from_str(&jikji_ok(args)).unwrap();
        v[0]["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| {
                (
                    h["source"].as_str().unwrap().to_string(),
                    h["score"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    let qm: [&std::ffi::OsStr; 2] = ["--query-model".as_ref(), pack.as_os_str()];
    let t = search(&whole, &[]);
    assert_eq!(t.len(), 3);
    for (bundle, what) in [(&whole, "the pack's files"), (&paged, "the bundle's pages")] {
        let p = search(bundle, &qm);
        assert_eq!(
            t.iter().map(|h| &h.0).collect::<Vec<_>>(),
            p.iter().map(|h| &h.0).collect::<Vec<_>>(),
            "tract vs the pack through {what}"
        );
        for (a, b) in t.iter().zip(&p) {
            assert!((a.1 - b.1).abs() < 1e-4, "{what}: {t:?} vs {p:?}");
        }
    }

    // `jikji search BUNDLE --query-model PACK` that must fail: its stderr.
    let refused = |bundle: &std::path::Path| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_jikji"))
            .args([
                "search".as_ref(),
                bundle.as_os_str(),
                "lamp".as_ref(),
                "--mode".as_ref(),
                "dense".as_ref(),
            ])
            .args(qm)
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "search of {} with a bad pack succeeded",
            bundle.display()
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    // A pack whose pack.json names another model: refused on both, naming both hashes.
    let info = pack.join("pack.json");
    let text = std::fs::read_to_string(&info).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let swap = |sha: &str| {
        format!(
            "{}{}",
            if sha.starts_with('0') { "1" } else { "0" },
            &sha[1..]
        )
    };
    let sha = v["model_sha256"].as_str().unwrap().to_string();
    let other = swap(&sha);
    std::fs::write(&info, text.replace(&sha, &other)).unwrap();
    for bundle in [&whole, &paged] {
        let err = refused(bundle);
        assert!(
            err.contains("made for model sha256") && err.contains(&other) && err.contains(&sha),
            "{err}"
        );
    }
    // A file of the pack replaced: the bundle without pages reads it and refuses it by its hash.
    std::fs::write(&info, &text).unwrap();
    let tok = pack.join("tokenizer.bin");
    let tok_bytes = std::fs::read(&tok).unwrap();
    std::fs::write(&tok, b"JKQT").unwrap();
    let err = refused(&whole);
    assert!(
        err.contains("tokenizer.bin") && err.contains("a file of another pack?"),
        "{err}"
    );
    // The bundle with pages embeds from its own (verified) pages, so it checks the pack's
    // identity instead: a pack.json listing another tokenizer is another pack.
    std::fs::write(&tok, &tok_bytes).unwrap();
    let tsha = v["files"]["tokenizer.bin"]["sha256"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(&info, text.replace(&tsha, &swap(&tsha))).unwrap();
    let err = refused(&paged);
    assert!(err.contains("but the bundle was built with pack"), "{err}");
}

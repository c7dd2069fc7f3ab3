//! Search filters by tier, language and source folder (`jikji search --tier/--lang/--folder`,
//! `jikji eval --bundle`), in every mode, on a paged bundle: a filtered query returns only
//! chunks the filters allow, and still `top_k` of them when the bundle has that many, even
//! when many more chunks the filters leave out outrank them.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use jikji_builder::ingest::{build, BundleSettings, IngestOptions};

/// The word every file has.
const WORD: &str = "lighthouse";

/// 30 files in `1. core/` that say WORD many times (they outrank everything), and few files
/// that say it once each: 4 in `3. misc/` (one of them in `3. misc/deep/`), 3 Korean ones in
/// `2. 한국/`, 2 in `3. misc classics/` (a folder whose name starts like `3. misc`) and 1
/// outside any tier folder.
fn corpus(dir: &Path) -> PathBuf {
    let c = dir.join("corpus");
    let write = |rel: &str, text: String| {
        let p = c.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("Source: https://example.org/{rel}\n\n{text}")).unwrap();
    };
    let topics = [
        "harbour", "granite", "weather", "fog", "ships", "storms", "lamps", "coast", "tides",
        "rocks",
    ];
    for i in 0..30 {
        let t = topics[i % topics.len()];
        write(
            &format!("1. core/keeper-{i:02}.md"),
            format!(
                "# Keeper {i}\n\nThe {WORD} {WORD} {WORD} stood over the {t}. Every {WORD} \
                 keeper of number {i} kept the {WORD} lamp lit through the {t}.\n"
            ),
        );
    }
    let quiet = |subject: &str, i: usize| {
        format!(
            "# Notes {i} on {subject}\n\nA long note about {subject} and gardens, orchards, \
             rivers, bridges, mills and markets of the old town, where one {WORD} was seen \
             far away on the horizon by travellers going north in the year {}.\n",
            1800 + i
        )
    };
    for i in 0..3 {
        write(&format!("3. misc/note-{i}.md"), quiet("bread", i));
    }
    write("3. misc/deep/note-3.md", quiet("cheese", 3));
    for i in 0..2 {
        write(
            &format!("3. misc classics/old-{i}.md"),
            quiet("wine", 10 + i),
        );
    }
    for i in 0..3 {
        write(
            &format!("2. 한국/등대-{i}.md"),
            format!(
                "# 등대 이야기 {i}\n\n바닷가 마을의 오래된 {WORD} 등대는 밤마다 불을 밝혔고, \
                 어부들은 그 빛을 보며 항구로 돌아왔다. 마을 사람들은 등대지기를 존경했다 {i}.\n"
            ),
        );
    }
    write("loose.md", quiet("salt", 20));
    c
}

fn build_bundle(corpus: &Path, bundle: &Path, model: bool) {
    let opts = if model {
        IngestOptions {
            model_dir: Some(common::model_dir()),
            cache_dir: Some(common::cache_dir()),
            threads: 2,
            ..IngestOptions::new(corpus, bundle)
        }
    } else {
        IngestOptions::new(corpus, bundle)
    };
    build(&opts, &BundleSettings::default()).unwrap();
}

fn jikji(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(args)
        .env("JIKJI_MODEL_DIR", common::model_dir())
        .current_dir(common::root())
        .output()
        .unwrap()
}

/// The hits of one `jikji search --json` of WORD.
fn search(bundle: &Path, mode: &str, k: usize, extra: &[&str]) -> Vec<serde_json::Value> {
    let k = k.to_string();
    let mut args = vec![
        "search",
        bundle.to_str().unwrap(),
        WORD,
        "--json",
        "--mode",
        mode,
        "--top-k",
        &k,
    ];
    args.extend_from_slice(extra);
    let out = jikji(&args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v[0]["hits"].as_array().unwrap().clone()
}

/// The distinct sources of `hits`, sorted.
fn sources(hits: &[serde_json::Value]) -> Vec<String> {
    let mut s: Vec<String> = hits
        .iter()
        .map(|h| h["source"].as_str().unwrap().to_string())
        .collect();
    s.sort();
    s.dedup();
    s
}

#[test]
fn filtered_queries_return_only_allowed_chunks_and_a_full_top_k() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bundle(&c, &bundle, true);
    for mode in ["bm25", "dense", "hybrid"] {
        // Unfiltered, the loud tier-1 files fill the top 10 (BM25; the model ranks them high
        // too, but only BM25's order is certain).
        let plain = search(&bundle, mode, 10, &[]);
        assert_eq!(plain.len(), 10, "{mode}");
        if mode == "bm25" {
            assert!(
                sources(&plain).iter().all(|s| s.starts_with("1. core/")),
                "{mode}: {:?}",
                sources(&plain)
            );
        }
        // Tier 3 holds 6 chunks (3. misc and 3. misc classics): 5 asked, 5 given.
        let t3 = search(&bundle, mode, 5, &["--tier", "3"]);
        assert_eq!(t3.len(), 5, "{mode}: {:?}", sources(&t3));
        assert!(t3.iter().all(|h| h["tier"] == 3), "{mode}: {t3:?}");
        // A range: tiers 2–3 hold 9 chunks, none of tier 1.
        let t23 = search(&bundle, mode, 9, &["--tier", "2-3"]);
        assert_eq!(t23.len(), 9, "{mode}");
        assert!(
            t23.iter().all(|h| h["tier"] == 2 || h["tier"] == 3),
            "{mode}: {t23:?}"
        );
        // Asking for more than there are gives all of them: BM25 the 6 chunks that say WORD,
        // dense and hybrid every tier-3 chunk (a file's heading may be a chunk of its own).
        let all3 = search(&bundle, mode, 50, &["--tier", "3"]);
        assert!(all3.iter().all(|h| h["tier"] == 3), "{mode}");
        if mode == "bm25" {
            assert_eq!(all3.len(), 6, "{mode}");
        } else {
            assert!((6..50).contains(&all3.len()), "{mode}: {}", all3.len());
        }
        // Language.
        let ko = search(&bundle, mode, 3, &["--lang", "ko"]);
        assert_eq!(ko.len(), 3, "{mode}");
        assert!(ko.iter().all(|h| h["lang"] == "ko"), "{mode}: {ko:?}");
        // Folder, by whole path components: `3. misc` and below, not `3. misc classics`.
        let misc = sources(&search(&bundle, mode, 10, &["--folder", "3. misc"]));
        assert_eq!(
            misc,
            [
                "3. misc/deep/note-3.md",
                "3. misc/note-0.md",
                "3. misc/note-1.md",
                "3. misc/note-2.md"
            ],
            "{mode}"
        );
        assert!(search(&bundle, mode, 10, &["--folder", "3. mis"]).is_empty());
        // Filters combine: tier 3, English, under 3. misc/deep.
        let both = sources(&search(
            &bundle,
            mode,
            10,
            &["--tier", "0-3", "--lang", "en", "--folder", "3. misc/deep/"],
        ));
        assert_eq!(both, ["3. misc/deep/note-3.md"], "{mode}");
        // No tier: the file at the root is left out by any tier filter.
        assert!(!sources(&search(&bundle, mode, 50, &["--tier", "0-99"]))
            .contains(&"loose.md".to_string()));
    }
    // A bad range says what it expected.
    let out = jikji(&["search", bundle.to_str().unwrap(), WORD, "--tier", "3-1"]);
    assert!(!out.status.success());
    let e = String::from_utf8_lossy(&out.stderr);
    assert!(e.contains("--tier") && e.contains("A-B"), "{e}");
}

#[test]
fn eval_on_a_bundle_takes_the_filters() {
    let tmp = tempfile::tempdir().unwrap();
    let c = corpus(tmp.path());
    let bundle = tmp.path().join("bundle");
    build_bundle(&c, &bundle, false);
    let set = tmp.path().join("set");
    std::fs::create_dir_all(&set).unwrap();
    std::fs::write(
        set.join("queries.jsonl"),
        format!("{{\"_id\": \"q1\", \"text\": \"{WORD}\"}}\n"),
    )
    .unwrap();
    std::fs::write(
        set.join("qrels.tsv"),
        "query-id\tcorpus-id\tscore\nq1\t3. misc/note-0.md\t1\n",
    )
    .unwrap();
    let eval = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["eval", "--modes", "bm25", "--json"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--bundle", bundle.to_str().unwrap(), set.to_str().unwrap()]);
        let out = jikji(&args);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let recall = |v: &serde_json::Value| {
        v["modes"][0]["metrics"]["recall_10"]
            .as_f64()
            .unwrap_or_else(|| panic!("no recall_10 in {v}"))
    };
    // Unfiltered, the 30 loud files push the relevant note out of the top 10.
    assert_eq!(recall(&eval(&[])), 0.0);
    assert_eq!(recall(&eval(&["--folder", "3. misc"])), 1.0);
}

//! Vectors made elsewhere: `jikji chunk` → `scripts/ray-embed` (Ray Data + onnxruntime on a
//! local Ray instance; the script installs ray, onnxruntime and tokenizers from PyPI into
//! `target/ray-venv` on first use) → `jikji build --vectors`. The imported bundle's vectors are
//! checked against Jikji's own embedding of the same chunks (cosine ≥ 0.999 each) and its search
//! results (identical top 10 in every mode); and `--vectors` files that do not match the
//! build are refused, naming the field. Jikji's own side embeds on its f32 path
//! (`JIKJI_PASSAGE_ISA=f32`), the numeric path onnxruntime's vectors share: on a CPU with AMX
//! the default bf16 kernel agrees to cosine ≥ 0.9999 but can swap near-tied neighbours
//! (`query-model/tests/agree.rs` checks that kernel against tract).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use jikji_engine::{Engine, Mode};

/// A small corpus (5 files, ~66 chunks of Chinese and Korean text) so the test stays cheap.
const FILES: &[&str] = &[
    "1. 漢文 古典/daxue.md",
    "1. 漢文 古典/zhongyong.md",
    "1. 漢文 古典/xiaojing.md",
    "99. 온라인 자료 (정리 X)/16_When_Buckwheat_Flowers_Blossom.md",
    "99. 온라인 자료 (정리 X)/21_The_Death_of_Park_Chum-ji.md",
];

const QUERIES: &[&str] = &[
    "大學之道在明明德",
    "身體髮膚受之父母",
    "天命之謂性",
    "메밀꽃 필 무렵",
    "달밤에 나귀를 타고",
    "孝",
    "the way of great learning",
    "어머니와 아들",
];

fn jikji(args: &[&dyn AsRef<std::ffi::OsStr>]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_jikji"))
        .args(args)
        .env(jikji_builder::encoder::PASSAGE_ISA_ENV, "f32")
        .output()
        .unwrap()
}

/// `jikji build CORPUS --out OUT --model MODEL [--cache DIR] [--vectors FILE]`, checked.
fn build(corpus: &Path, out: &Path, cache: &Path, vectors: Option<&Path>) {
    let model = common::model_dir();
    let mut args: Vec<&dyn AsRef<std::ffi::OsStr>> = vec![
        &"build", &corpus, &"--out", &out, &"--model", &model, &"--cache", &cache, &"--quiet",
    ];
    if let Some(v) = &vectors {
        args.push(&"--vectors");
        args.push(v);
    }
    let o = jikji(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

fn chunks(corpus: &Path, dir: &Path) -> PathBuf {
    let model = common::model_dir();
    let out = common::jikji_ok([
        std::ffi::OsStr::new("chunk"),
        corpus.as_os_str(),
        std::ffi::OsStr::new("--model"),
        model.as_os_str(),
    ]);
    let p = dir.join("chunks.jsonl");
    std::fs::write(&p, out).unwrap();
    p
}

fn dequantized(e: &Engine) -> Vec<Vec<f32>> {
    // A paged bundle assembles its vectors once their pages are read: a dense query does.
    if !e.bundle().is_paged() || e.bundle().vectors().is_none() {
        let q = vec![1.0 / (384f32).sqrt(); 384];
        e.search_with_vector("x", Some(&q), Mode::Dense, 1).unwrap();
    }
    let v = e.bundle().vectors().expect("vectors");
    (0..v.len()).map(|i| v.get(i)).collect()
}

fn top10(e: &Engine, q: &str, mode: Mode) -> Vec<String> {
    e.search(q, mode, 10)
        .unwrap()
        .hits
        .iter()
        .map(|h| h.chunk.id.clone())
        .collect()
}

#[test]
fn ray_embedded_vectors_equal_jikjis_own() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::subset_corpus(tmp.path(), FILES);
    let chunks = chunks(&corpus, tmp.path());
    let npy = tmp.path().join("vectors.npy");
    let o = Command::new(common::root().join("scripts/ray-embed"))
        .arg(&chunks)
        .arg("--out")
        .arg(&npy)
        .arg("--model")
        .arg(common::model_dir())
        .args(["--num-cpus", "2"])
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "scripts/ray-embed failed (it needs python3 with venv and installs ray[data], onnxruntime, tokenizers from PyPI into target/ray-venv):\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let imported = tmp.path().join("imported");
    build(&corpus, &imported, &tmp.path().join("no-cache"), Some(&npy));
    let own = tmp.path().join("own");
    build(&corpus, &own, &common::cache_dir(), None);

    let mut a = Engine::open_dir(&imported).unwrap();
    let mut b = Engine::open_dir(&own).unwrap();
    let (va, vb) = (dequantized(&a), dequantized(&b));
    assert_eq!(va.len(), vb.len());
    assert!(va.len() > 50, "{}", va.len());
    let mut worst = 1f32;
    for (i, (x, y)) in va.iter().zip(&vb).enumerate() {
        let cos = x.iter().zip(y).map(|(p, q)| p * q).sum::<f32>()
            / (x.iter().map(|p| p * p).sum::<f32>().sqrt()
                * y.iter().map(|q| q * q).sum::<f32>().sqrt());
        assert!(cos >= 0.999, "chunk {i}: cosine {cos}");
        worst = worst.min(cos);
    }
    eprintln!(
        "{} chunks, lowest cosine imported vs own: {worst:.6}",
        va.len()
    );
    let model = common::model_dir();
    a.set_embedder(jikji_builder::ingest::load_build_embedder(&model).unwrap());
    b.set_embedder(jikji_builder::ingest::load_build_embedder(&model).unwrap());
    for q in QUERIES {
        for mode in [Mode::Bm25, Mode::Dense, Mode::Hybrid] {
            assert_eq!(top10(&a, q, mode), top10(&b, q, mode), "{q} ({mode})");
        }
    }
}

/// A vectors file made from the own bundle's vectors, then tampered with one field at a
/// time: each is refused with the field named, and the untampered one is accepted.
#[test]
fn vectors_that_do_not_match_the_build_are_refused_naming_the_field() {
    let tmp = tempfile::tempdir().unwrap();
    let corpus = common::subset_corpus(tmp.path(), &FILES[..2]);
    let chunks_file = chunks(&corpus, tmp.path());
    let own = tmp.path().join("own");
    build(&corpus, &own, &common::cache_dir(), None);
    let e = Engine::open_dir(&own).unwrap();
    let vecs = dequantized(&e);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&chunks_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), vecs.len());
    let sha = |b: &[u8]| jikji_format::sha256_hex(b);
    let model_sha = sha(&std::fs::read(common::model_dir().join("model-int8.onnx")).unwrap());
    let sidecar = serde_json::json!({
        "format": "jikji-vectors", "version": 1,
        "model": {"file": "model-int8.onnx", "sha256": model_sha},
        "prefix": "passage: ", "dim": 384, "count": vecs.len(),
        "chunks": lines.iter().map(|c| serde_json::json!({
            "id": c["id"], "text_sha256": sha(c["text"].as_str().unwrap().as_bytes()),
            "tokens": c["tokens"].as_u64().unwrap().min(512), "truncated": false,
        })).collect::<Vec<_>>(),
    });
    let try_build = |name: &str, side: &serde_json::Value, rows: &[Vec<f32>]| {
        let npy = tmp.path().join(format!("{name}.npy"));
        jikji_builder::npy::write_f32(&npy, rows, 384).unwrap();
        std::fs::write(npy.with_extension("json"), side.to_string()).unwrap();
        let out = tmp.path().join(format!("out-{name}"));
        let model = common::model_dir();
        let o = jikji(&[
            &"build",
            &corpus,
            &"--out",
            &out,
            &"--model",
            &model,
            &"--vectors",
            &npy,
            &"--quiet",
        ]);
        (
            o.status.success(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
            out,
        )
    };
    let (ok, err, out) = try_build("good", &sidecar, &vecs);
    assert!(ok, "{err}");
    assert!(Engine::open_dir(&out).unwrap().bundle().has_vectors());

    let tamper = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut s = sidecar.clone();
        f(&mut s);
        s
    };
    let cases: Vec<(&str, serde_json::Value, &str)> = vec![
        (
            "prefix",
            tamper(&|s| s["prefix"] = "query: ".into()),
            "field \"prefix\"",
        ),
        ("dim", tamper(&|s| s["dim"] = 768.into()), "field \"dim\""),
        (
            "model",
            tamper(&|s| s["model"]["sha256"] = "00".repeat(32).into()),
            "field \"model.sha256\"",
        ),
        (
            "count",
            tamper(&|s| s["count"] = 3.into()),
            "field \"count\"",
        ),
        (
            "text",
            tamper(&|s| s["chunks"][1]["text_sha256"] = "ab".repeat(32).into()),
            "text_sha256",
        ),
        (
            "id",
            tamper(&|s| s["chunks"][0]["id"] = "0000000000000000".into()),
            "has no id",
        ),
        (
            "format",
            tamper(&|s| s["version"] = 2.into()),
            "field \"format\"/\"version\"",
        ),
    ];
    for (name, side, want) in cases {
        let (ok, err, out) = try_build(name, &side, &vecs);
        assert!(!ok && err.contains(want), "{name}: {err}");
        assert!(!out.exists(), "{name}: a bundle was written");
    }
    // Rows: wrong column count (the .npy says 383), and a row that is not unit length.
    let short: Vec<Vec<f32>> = vecs.iter().map(|v| v[..383].to_vec()).collect();
    let npy = tmp.path().join("short.npy");
    jikji_builder::npy::write_f32(&npy, &short, 383).unwrap();
    std::fs::write(npy.with_extension("json"), sidecar.to_string()).unwrap();
    let model = common::model_dir();
    let o = jikji(&[
        &"build",
        &corpus,
        &"--out",
        &tmp.path().join("o1"),
        &"--model",
        &model,
        &"--vectors",
        &npy,
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("383 columns"), "{err}");
    let mut scaled = vecs.clone();
    scaled[2].iter_mut().for_each(|x| *x *= 2.0);
    let (ok, err, _) = try_build("scaled", &sidecar, &scaled);
    assert!(
        !ok && err.contains("row 2") && err.contains("unit vector"),
        "{err}"
    );
}

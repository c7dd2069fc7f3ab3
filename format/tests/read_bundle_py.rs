//! `scripts/read-bundle.py` (an independent reader written from FORMAT.md, Python standard
//! library only) decodes the frozen v1 fixture bundles exactly as this crate's readers do:
//! every term of `terms.fst` with its postings offset and list, every document length,
//! every chunk record, every vector row and scale, every `hanja.fst` key. It also refuses a
//! copy with one flipped byte, naming the file. Needs `python3` (CI has it); fails loudly
//! without it.

use std::path::{Path, PathBuf};
use std::process::Command;

use fst::{IntoStreamer, Streamer};
use jikji_format::chunks::ChunkStore;
use jikji_format::postings::LexicalIndex;
use jikji_format::vectors::Vectors;
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/compat/v1")
        .join(name)
}

/// Runs the Python reader; returns (exit code, stdout, stderr).
fn python(args: &[&std::ffi::OsStr]) -> (i32, String, String) {
    let out = Command::new("python3")
        .arg(root().join("scripts/read-bundle.py"))
        .args(args)
        .output()
        .expect("python3 is needed to run scripts/read-bundle.py (install python3)");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn python_json(bundle: &Path) -> Value {
    let (code, stdout, stderr) = python(&["--json".as_ref(), bundle.as_os_str()]);
    assert_eq!(code, 0, "read-bundle.py failed: {stderr}");
    serde_json::from_str(&stdout).unwrap()
}

fn read(bundle: &Path, name: &str) -> Vec<u8> {
    std::fs::read(bundle.join(name)).unwrap()
}

fn check_bundle(bundle: &Path, has_vectors: bool, has_hanja: bool) {
    let py = python_json(bundle);
    let manifest: Value = serde_json::from_slice(&read(bundle, "manifest.json")).unwrap();
    assert_eq!(py["counts"], manifest["counts"]);
    assert_eq!(py["format_version"], 1);

    // Terms and postings.
    let terms_fst = read(bundle, "terms.fst");
    let lex = LexicalIndex::open(terms_fst.clone(), read(bundle, "postings.bin")).unwrap();
    let py_terms = py["terms"].as_array().unwrap();
    assert_eq!(py_terms.len(), lex.num_terms());
    assert_eq!(
        py_terms.len() as u64,
        manifest["counts"]["terms"].as_u64().unwrap()
    );
    let map = fst::Map::new(terms_fst).unwrap();
    let mut stream = map.stream();
    let mut i = 0;
    while let Some((k, off)) = stream.next() {
        let term = std::str::from_utf8(k).unwrap();
        let t = &py_terms[i];
        assert_eq!(t[0], term, "term {i}");
        assert_eq!(t[1], off, "offset of {term}");
        let rust: Vec<Value> = lex
            .postings(term)
            .unwrap()
            .unwrap()
            .into_iter()
            .map(|(d, tf)| serde_json::json!([d, tf]))
            .collect();
        assert_eq!(t[2].as_array().unwrap(), &rust, "postings of {term}");
        i += 1;
    }
    assert_eq!(i, py_terms.len());
    let lens: Vec<u64> = (0..lex.num_docs() as u32)
        .map(|d| u64::from(lex.doc_len(d)))
        .collect();
    let py_lens: Vec<u64> = py["doc_lens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(py_lens, lens);

    // Chunk records, as raw JSON.
    let store = ChunkStore::open(read(bundle, "chunks.bin")).unwrap();
    let py_chunks = py["chunks"].as_array().unwrap();
    assert_eq!(py_chunks.len(), store.len());
    for (d, c) in py_chunks.iter().enumerate() {
        let rust: Value = store.get_as(d as u32).unwrap();
        assert_eq!(c, &rust, "chunk {d}");
    }

    // Vectors: every scale (f32, exactly) and component.
    if has_vectors {
        let v = Vectors::open(&read(bundle, "vectors.bin")).unwrap();
        let pv = &py["vectors"];
        assert_eq!(pv["dim"].as_u64().unwrap() as usize, v.dim());
        assert_eq!(pv["scales"].as_array().unwrap().len(), v.len());
        for r in 0..v.len() {
            let (scale, q) = v.row(r);
            // Python prints the f32 widened to f64 exactly; serde_json's float parsing is
            // not always correctly rounded in the last f64 bit, so compare as f32 bits.
            let py_scale = pv["scales"][r].as_f64().unwrap() as f32;
            assert_eq!(py_scale.to_bits(), scale.to_bits(), "scale {r}");
            let pq: Vec<i64> = pv["rows"][r]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap())
                .collect();
            let rq: Vec<i64> = q.iter().map(|&x| i64::from(x)).collect();
            assert_eq!(pq, rq, "row {r}");
        }
    } else {
        assert!(py.get("vectors").is_none());
    }

    // hanja.fst: every key, both directions.
    if has_hanja {
        let set = fst::Set::new(read(bundle, "hanja.fst")).unwrap();
        let (mut h, mut c) = (Vec::new(), Vec::new());
        let mut s = set.into_stream();
        while let Some(k) = s.next() {
            let rest = std::str::from_utf8(&k[1..]).unwrap().to_string();
            match k[0] {
                b'h' => h.push(Value::from(rest)),
                b'c' => c.push(Value::from(rest)),
                t => panic!("unexpected tag {t}"),
            }
        }
        assert!(!h.is_empty() && !c.is_empty());
        assert_eq!(py["hanja"]["hangul_to_hanja"].as_array().unwrap(), &h);
        assert_eq!(py["hanja"]["hanja_to_hangul"].as_array().unwrap(), &c);
    } else {
        assert!(py.get("hanja").is_none());
    }
}

#[test]
fn python_reader_decodes_the_v1_bundle_with_vectors_as_rust_does() {
    check_bundle(&fixture("bundle"), true, true);
}

#[test]
fn python_reader_decodes_the_v1_bm25_bundle_as_rust_does() {
    check_bundle(&fixture("bundle-bm25"), false, false);
}

#[test]
fn python_reader_prints_counts_and_a_chunk() {
    let (code, stdout, stderr) = python(&[
        fixture("bundle").as_os_str(),
        "--chunk".as_ref(),
        "4".as_ref(),
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("counts: files 3, chunks 13, terms 1461, vectors 13"),
        "{stdout}"
    );
    assert!(stdout.contains("vectors.bin: 13 × 384 int8"), "{stdout}");
    assert!(
        stdout.contains("\"source\": \"2. Gutenberg classics/hamlet-act3-scene1.txt\""),
        "{stdout}"
    );
}

/// One flipped byte in any file: the Python reader exits 1 naming that file.
#[test]
fn python_reader_refuses_a_flipped_byte_naming_the_file() {
    let src = fixture("bundle");
    for name in [
        "terms.fst",
        "postings.bin",
        "vectors.bin",
        "chunks.bin",
        "hanja.fst",
        "manifest.json",
    ] {
        let dir = std::env::temp_dir().join(format!(
            "jikji-read-bundle-py-{}-{name}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for e in std::fs::read_dir(&src).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), dir.join(e.file_name())).unwrap();
        }
        let mut bytes = std::fs::read(dir.join(name)).unwrap();
        // The manifest's first byte (`{`), so that the JSON itself breaks; else the middle.
        let at = if name == "manifest.json" {
            0
        } else {
            bytes.len() / 2
        };
        bytes[at] ^= 0x01;
        std::fs::write(dir.join(name), &bytes).unwrap();
        let (code, _, stderr) = python(&[dir.as_os_str()]);
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(code, 1, "{name}: {stderr}");
        assert!(stderr.contains(name), "{name}: {stderr}");
    }
}

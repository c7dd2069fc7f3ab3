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

/// Writes a dense index of `n` rows of `dim` (binary lists, 12 rows a list) with `opts`'
/// codes into `dir` as a format 2 bundle holds it: its pages under `p/` and a `jikji.json`
/// with the fields `read-bundle.py --ivf` reads. Returns the root and the raw page bodies.
fn write_ivf_bundle(
    dir: &Path,
    n: usize,
    dim: usize,
    centroids: jikji_format::paged::ivf::CentroidCodes,
    coded_sample: bool,
    rows_per_list: bool,
    row_groups: Option<&jikji_format::paged::ivf::RowGrouping>,
) -> (
    jikji_format::paged::ivf::IvfRoot,
    std::collections::HashMap<String, Vec<u8>>,
) {
    use jikji_format::paged::ivf;
    let rows: Vec<Vec<f32>> = (0..n)
        .map(|i| {
            (0..dim)
                .map(|t| ((i * 31 + t * 17) % 23) as f32 / 23.0 - 0.4 + 0.2 * (t % 2) as f32)
                .collect()
        })
        .collect();
    let v = Vectors::open(&jikji_format::vectors::write_vectors(dim, &rows).unwrap()).unwrap();
    let lists: Vec<Vec<u32>> = (0..n as u32)
        .collect::<Vec<_>>()
        .chunks(12)
        .map(<[u32]>::to_vec)
        .collect();
    let cents: Vec<Vec<f32>> = lists
        .iter()
        .map(|l| {
            let mut c = vec![0f32; dim];
            for &d in l {
                for (a, b) in c.iter_mut().zip(&rows[d as usize]) {
                    *a += b / l.len() as f32;
                }
            }
            c
        })
        .collect();
    let scoring = |i: usize| v.get(i);
    std::fs::create_dir_all(dir.join("p")).unwrap();
    let mut bodies = std::collections::HashMap::new();
    let root = ivf::write_pages_with(
        &ivf::IvfParts {
            centroids: &cents,
            lists: &lists,
            nprobe: 2,
            codes: ivf::ListCodes::Binary {
                scoring: &scoring,
                rows_per_page: 4,
                rescore: 8,
            },
        },
        &ivf::PageOptions {
            centroids,
            coded_sample,
            sample_queries: &[],
            rows_per_list,
            row_groups,
        },
        &v,
        &mut |p| {
            let body = jikji_format::paged::page::decode_stored(&p.name, &p.bytes).unwrap();
            bodies.insert(p.name.clone(), body);
            std::fs::write(dir.join("p").join(&p.name), &p.bytes).unwrap();
            Ok(())
        },
    )
    .unwrap();
    let entry = serde_json::json!({
        "format_version": 2,
        "counts": {"chunks": n},
        "pages": {"dim": dim, "ivf": root},
    });
    std::fs::write(dir.join("jikji.json"), serde_json::to_vec(&entry).unwrap()).unwrap();
    (root, bodies)
}

fn f32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| (x.as_f64().unwrap() as f32).to_bits())
        .collect()
}

#[test]
fn python_reader_decodes_compact_dense_index_pages_as_rust_does() {
    use jikji_format::paged::ivf::{self, CentroidCodes, StoredCentroids};
    for (codes, coded, dim) in [
        (CentroidCodes::Int4Centred, true, 9),
        (CentroidCodes::Int8, false, 8),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        // 3,300 rows: 275 lists on two centroid pages, a full 256-row sample.
        let (root, bodies) = write_ivf_bundle(tmp.path(), 3300, dim, codes, coded, false, None);
        let (code, stdout, stderr) = python(&["--ivf".as_ref(), tmp.path().as_os_str()]);
        assert_eq!(code, 0, "read-bundle.py --ivf failed: {stderr}");
        let py: Value = serde_json::from_str(&stdout).unwrap();
        assert_eq!(py["centroid_codes"], codes.name());
        let pages: Vec<&Vec<u8>> = (0..root.centroids.pages)
            .map(|p| &bodies[&root.centroid_page(p)])
            .collect();
        let c = StoredCentroids::open(&root, &pages, dim).unwrap();
        let pc = py["centroids"].as_array().unwrap();
        assert_eq!(pc.len(), c.len());
        for (j, row) in pc.iter().enumerate() {
            let want: Vec<u32> = c.get(j).iter().map(|x| x.to_bits()).collect();
            assert_eq!(f32s(row), want, "centroid {j}");
        }
        let s = &py["sample"];
        let body = &bodies[&root.sample_page()];
        if coded {
            let cs =
                ivf::CodedSample::open(&root.sample_page(), body, 256, root.nlist, dim).unwrap();
            assert_eq!(s["codes"], "binary");
            assert_eq!(
                (s["sigma_ratio"].as_f64().unwrap() as f32).to_bits(),
                cs.sigma_ratio.to_bits()
            );
            let lists: Vec<u32> = s["lists"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect();
            assert_eq!(lists, cs.lists);
            // The estimates from Python's decoded codes equal the Rust reader's.
            let q: Vec<f32> = (0..dim).map(|t| (t as f32 * 0.37).sin()).collect();
            let t = ivf::SignTables::new(&q);
            let dots = c.dots(&q);
            let (alphas, projs) = (f32s(&s["alphas"]), f32s(&s["projs"]));
            for i in 0..cs.len() {
                let signs = hex::decode(s["signs"][i].as_str().unwrap()).unwrap();
                let qs: f32 = (0..dim)
                    .map(|d| {
                        if signs[d / 8] >> (d % 8) & 1 == 1 {
                            q[d]
                        } else {
                            -q[d]
                        }
                    })
                    .sum();
                let est = f32::from_bits(projs[i]) * dots[cs.lists[i] as usize]
                    + f32::from_bits(alphas[i]) * qs;
                let rust = cs.estimate(i, dots[cs.lists[i] as usize], &t);
                assert!((est - rust).abs() < 1e-4, "row {i}: {est} vs {rust}");
            }
        } else {
            assert_eq!(s["codes"], "int8");
            let rows = ivf::open_rows(&root.sample_page(), body, 256, dim).unwrap();
            for i in [0, 100, 255] {
                let (scale, q) = rows.row(i);
                assert_eq!(
                    (s["scales"][i].as_f64().unwrap() as f32).to_bits(),
                    scale.to_bits()
                );
                let pq: Vec<i8> = s["rows"][i]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_i64().unwrap() as i8)
                    .collect();
                assert_eq!(pq, q);
            }
        }
        // One flipped byte of a centroid page: refused, naming it.
        let name = root.centroid_page(1);
        let file = tmp.path().join("p").join(&name);
        let mut bytes = std::fs::read(&file).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        std::fs::write(&file, bytes).unwrap();
        let (code, _, stderr) = python(&["--ivf".as_ref(), tmp.path().as_os_str()]);
        assert_eq!(code, 1);
        assert!(stderr.contains(&name), "{stderr}");
    }
}

/// The binary lists' pages, doc ids and row (`i`) pages as `read-bundle.py --ivf` finds them
/// equal the Rust reader's, in the three row layouts (list order; `list_rows`: numbered per
/// list; `row_groups`: grouped, rows a page by group); a per-list list page whose `first`
/// is not 0 is refused naming the page.
#[test]
fn python_reader_finds_binary_lists_and_their_rows_as_rust_does() {
    use jikji_format::paged::ivf::CentroidCodes;
    // Groups of a list by row number mod 3 (12 rows: 4, 4, 4; the last list's 2: 1, 1).
    let by_three = |docs: &[u32]| (0..docs.len()).map(|i| (i % 3) as u8).collect::<Vec<u8>>();
    for (per_list, grouped) in [(false, false), (true, false), (true, true)] {
        let tmp = tempfile::tempdir().unwrap();
        // 302 rows: 26 lists of 12 (the last 2), 4 rows an `i` page.
        let (root, bodies) = write_ivf_bundle(
            tmp.path(),
            302,
            9,
            CentroidCodes::Int4Centred,
            true,
            per_list,
            grouped.then_some(&by_three as &jikji_format::paged::ivf::RowGrouping),
        );
        assert_eq!(root.grouped(), grouped);
        assert_eq!(root.list_rows.is_some(), per_list);
        let (code, stdout, stderr) = python(&["--ivf".as_ref(), tmp.path().as_os_str()]);
        assert_eq!(code, 0, "read-bundle.py --ivf failed: {stderr}");
        let py: Value = serde_json::from_str(&stdout).unwrap();
        let lists = py["lists"].as_array().unwrap();
        assert_eq!(lists.len(), root.nlist);
        for (j, l) in lists.iter().enumerate() {
            let name = root.list_page(j);
            assert_eq!(l["page"], name.as_str());
            let b = root.open_list(&name, &bodies[&name], 302, 9).unwrap();
            let docs: Vec<u32> = l["docs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect();
            assert_eq!(docs, b.docs);
            let mut want: Vec<String> = Vec::new();
            for k in 0..b.docs.len() {
                let page = if grouped {
                    root.group_page(j, usize::from(b.groups[k])).unwrap()
                } else {
                    root.list_row(j, b.first, k, b.docs.len(), 302).unwrap().0
                };
                if !want.contains(&page) {
                    want.push(page);
                }
            }
            if grouped {
                let groups: Vec<u8> = l["groups"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap() as u8)
                    .collect();
                assert_eq!(groups, b.groups);
            } else if per_list {
                assert_eq!(want, root.list_row_pages(j, b.docs.len()));
            }
            let got: Vec<&str> = l["row_pages"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_str().unwrap())
                .collect();
            assert_eq!(got, want, "list {j}");
        }
        if per_list {
            // `first` 1 in a per-list list page (valid header, digest and name).
            let name = root.list_page(3);
            let mut body = bodies[&name].clone();
            assert_eq!(body[1], 0);
            body[1] = 1;
            let p = jikji_format::paged::page::encode_numbered(
                jikji_format::paged::page::Kind::Lists,
                root.list_gen(3),
                3,
                &body,
            );
            std::fs::write(tmp.path().join("p").join(&name), p.bytes).unwrap();
            let (code, _, stderr) = python(&["--ivf".as_ref(), tmp.path().as_os_str()]);
            assert_eq!(code, 1);
            assert!(stderr.contains(&format!("p/{name}")), "{stderr}");
        }
        if grouped {
            // Row 0 of list 5 in group 2 before groups 0 and 1: both readers refuse it
            // (list 3's good page back first).
            let good = root.list_page(3);
            let p = jikji_format::paged::page::encode_numbered(
                jikji_format::paged::page::Kind::Lists,
                root.list_gen(3),
                3,
                &bodies[&good],
            );
            std::fs::write(tmp.path().join("p").join(&good), p.bytes).unwrap();
            let name = root.list_page(5);
            let mut body = bodies[&name].clone();
            // count, first, 12 one-byte doc ids, then the groups.
            assert_eq!(body[14], 0);
            body[14] = 2;
            assert!(root.open_list(&name, &body, 302, 9).is_err());
            let p = jikji_format::paged::page::encode_numbered(
                jikji_format::paged::page::Kind::Lists,
                root.list_gen(5),
                5,
                &body,
            );
            std::fs::write(tmp.path().join("p").join(&name), p.bytes).unwrap();
            let (code, _, stderr) = python(&["--ivf".as_ref(), tmp.path().as_os_str()]);
            assert_eq!(code, 1);
            assert!(
                stderr.contains(&format!("p/{name}")) && stderr.contains("before group 0"),
                "{stderr}"
            );
        }
    }
}

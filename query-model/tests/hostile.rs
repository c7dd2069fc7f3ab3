//! Bytes of the E5S1 source and of pack files are untrusted: every truncation and a few
//! corruptions give a named error, never a panic. Uses a tiny synthetic model (no files needed).

use jikji_query_model::e5s1::E5s1;
use jikji_query_model::{pack, QueryModel, RowTable};

const H: usize = 32;
const FF: usize = 64;
const VOC: usize = 5;
const MAXP: usize = 512;

fn q4(rows: usize, cols: usize, seed: u8) -> Vec<u8> {
    let mut out = Vec::new();
    for r in 0..rows * cols / 32 {
        out.extend_from_slice(&half::f16::from_f32(0.02).to_bits().to_le_bytes());
        out.extend((0..16).map(|j| (r as u8).wrapping_mul(31).wrapping_add(j * 7 + seed)));
    }
    out
}

fn f32s(n: usize, v: f32) -> Vec<u8> {
    (0..n)
        .flat_map(|i| (v + i as f32 * 1e-3).to_le_bytes())
        .collect()
}

/// A valid E5S1 file: 1 layer, hidden 32, 1 head, ffn 64, 5 pieces.
fn synthetic_e5s1() -> Vec<u8> {
    let mut tensors: Vec<(String, u8, usize, Vec<u8>)> = vec![
        ("emb.word".into(), 1, VOC * H, q4(VOC, H, 1)),
        ("emb.pos".into(), 0, MAXP * H, f32s(MAXP * H, 0.01)),
        ("emb.type".into(), 0, 2 * H, f32s(2 * H, 0.02)),
        ("emb.ln.w".into(), 0, H, f32s(H, 1.0)),
        ("emb.ln.b".into(), 0, H, f32s(H, 0.0)),
    ];
    for (name, n, k) in [
        ("q", H, H),
        ("k", H, H),
        ("v", H, H),
        ("ao", H, H),
        ("fi", FF, H),
        ("fo", H, FF),
    ] {
        tensors.push((format!("l0.{name}.w"), 1, n * k, q4(n, k, name.len() as u8)));
        tensors.push((format!("l0.{name}.b"), 0, n, f32s(n, 0.01)));
    }
    for name in ["aln", "oln"] {
        tensors.push((format!("l0.{name}.w"), 0, H, f32s(H, 1.0)));
        tensors.push((format!("l0.{name}.b"), 0, H, f32s(H, 0.0)));
    }
    let mut b = b"E5S1".to_vec();
    for v in [1u32, H as u32, 1, 1, FF as u32, VOC as u32, MAXP as u32, 2] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&1e-12f32.to_le_bytes());
    for v in [32u32, VOC as u32, 0, 2, 1, 3] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let blob = b"abcde";
    b.extend_from_slice(&(blob.len() as u64).to_le_bytes());
    for i in 0..=VOC as u32 {
        b.extend_from_slice(&i.to_le_bytes());
    }
    b.extend(f32s(VOC, -1.0));
    b.extend_from_slice(blob);
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    b.extend_from_slice(&(tensors.len() as u32).to_le_bytes());
    let dir_len: usize = tensors.iter().map(|t| 2 + t.0.len() + 1 + 4 + 8 + 8).sum();
    let mut off = b.len() + dir_len;
    for (name, dtype, count, data) in &tensors {
        b.extend_from_slice(&(name.len() as u16).to_le_bytes());
        b.extend_from_slice(name.as_bytes());
        b.push(*dtype);
        b.extend_from_slice(&(*count as u32).to_le_bytes());
        b.extend_from_slice(&(off as u64).to_le_bytes());
        b.extend_from_slice(&(data.len() as u64).to_le_bytes());
        off += data.len();
    }
    for t in &tensors {
        b.extend_from_slice(&t.3);
    }
    b
}

fn pack_bytes() -> (Vec<u8>, Vec<u8>) {
    let src = synthetic_e5s1();
    let m = E5s1::parse(&src).unwrap();
    (
        pack::layers_bytes(&m).unwrap(),
        pack::rows_bytes(&m).unwrap(),
    )
}

#[test]
fn synthetic_model_packs_and_embeds() {
    let (l, r) = pack_bytes();
    let m = QueryModel::from_bytes(&l, "layers.bin").unwrap();
    let rows = RowTable::from_bytes(r, H, "rows.bin").unwrap();
    let v = m.embed_ids(&[0, 4, 2], &rows).unwrap();
    assert_eq!(v.len(), H);
    assert!(v.iter().all(|x| x.is_finite()));
    let n: f32 = v.iter().map(|x| x * x).sum();
    assert!((n - 1.0).abs() < 1e-5);
    // id 5 is past the 5-row table
    assert!(m.embed_ids(&[0, 5, 2], &rows).is_err());
}

#[test]
fn every_truncated_e5s1_is_an_error() {
    let src = synthetic_e5s1();
    // The header and directory in full, then a sample of the tensor data.
    let dir_end = src.len() - 2000 * 4 * 16;
    for cut in (0..dir_end.min(2000)).chain((dir_end..src.len()).step_by(997)) {
        let r = E5s1::parse(&src[..cut]).and_then(|m| pack::layers_bytes(&m));
        let e = r.expect_err(&format!("cut at {cut} parsed")).to_string();
        assert!(e.contains("E5S1"), "cut {cut}: {e}");
    }
}

#[test]
fn corrupt_e5s1_fields_are_named() {
    let mut src = synthetic_e5s1();
    src[0] = b'X';
    assert!(E5s1::parse(&src)
        .unwrap_err()
        .to_string()
        .contains("byte 0: bad magic"));
    let mut src = synthetic_e5s1();
    src[8..12].copy_from_slice(&(-5i32).to_le_bytes()); // H
    let e = E5s1::parse(&src).unwrap_err().to_string();
    assert!(e.contains("byte 8: H = -5"), "{e}");
    let mut src = synthetic_e5s1();
    src[4..8].copy_from_slice(&7u32.to_le_bytes());
    assert!(E5s1::parse(&src)
        .unwrap_err()
        .to_string()
        .contains("version 7"));
}

#[test]
fn every_truncated_or_padded_pack_file_is_an_error() {
    let (l, r) = pack_bytes();
    for cut in (0..l.len()).step_by(61).chain([l.len() - 1]) {
        let e = QueryModel::from_bytes(&l[..cut], "layers.bin")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("layers.bin, byte "), "cut {cut}: {e}");
    }
    let mut long = l.clone();
    long.push(0);
    assert!(QueryModel::from_bytes(&long, "layers.bin").is_err());
    for cut in 0..r.len() {
        let e = RowTable::from_bytes(r[..cut].to_vec(), H, "rows.bin")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("rows.bin, byte "), "cut {cut}: {e}");
    }
    // A header claiming a huge table is refused before any allocation.
    let mut huge = l.clone();
    huge[20..24].copy_from_slice(&u32::MAX.to_le_bytes()); // ffn
    let e = QueryModel::from_bytes(&huge, "layers.bin")
        .unwrap_err()
        .to_string();
    assert!(e.contains("ffn = 4294967295"), "{e}");
    assert!(RowTable::from_bytes(r, H * 2, "rows.bin").is_err());
}

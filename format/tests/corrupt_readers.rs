//! Issue 11: every bundle-file reader given corrupt bytes returns an error naming the
//! file (`DataCorruption` with the byte offset where the format has one) and never panics
//! or allocates by a length the file cannot back. Hand-made cases for the bugs found
//! (a huge chunk count, an overflowing doc-id sum, an over-long varint), then proptests that
//! open a valid file with random bytes overwritten or cut off and read everything in it.

use jikji_format::chunks::{write_chunks, ChunkRecord, ChunkStore, CHUNKS_FILE};
use jikji_format::codec::{put_varint, Reader};
use jikji_format::hanja::{write_hanja_fst, HanjaMap};
use jikji_format::postings::{LexicalIndex, LexicalIndexWriter, POSTINGS_FILE, TERMS_FILE};
use jikji_format::vectors::{write_vectors, Vectors, VECTORS_FILE};
use jikji_format::FormatError;
use proptest::prelude::*;

fn corrupt_in(e: FormatError, want_file: &str) -> u64 {
    match e {
        FormatError::DataCorruption { file, offset, .. } if file == want_file => offset,
        other => panic!("expected DataCorruption in {want_file}, got {other}"),
    }
}

fn chunks_file() -> Vec<u8> {
    let recs: Vec<ChunkRecord> = ["學而時習之", "不亦說乎", "hamlet"]
        .iter()
        .map(|t| ChunkRecord {
            id: format!("{t}-id"),
            text: (*t).into(),
            ..ChunkRecord::default()
        })
        .collect();
    write_chunks(&recs).unwrap()
}

fn lexical_files() -> (Vec<u8>, Vec<u8>) {
    let mut w = LexicalIndexWriter::new();
    for d in ["a b a", "b c", "a 論語 c", "hamlet"] {
        w.add_doc(&d.split(' ').map(String::from).collect::<Vec<_>>());
    }
    w.finish().unwrap()
}

/// Reads everything a reader offers; errors are fine, panics are not.
fn read_all_chunks(bytes: Vec<u8>) {
    if let Ok(s) = ChunkStore::open(bytes) {
        for i in 0..s.len() as u32 + 1 {
            let _ = s.get(i);
        }
    }
}

fn read_all_lexical(f: Vec<u8>, p: Vec<u8>) {
    if let Ok(idx) = LexicalIndex::open(f, p) {
        let terms: Vec<String> = {
            use fst::{IntoStreamer, Streamer};
            let mut v = Vec::new();
            let mut s = idx.terms().into_stream();
            while let Some((k, _)) = s.next() {
                v.push(String::from_utf8_lossy(k).into_owned());
            }
            v
        };
        for t in terms.iter().map(String::as_str).chain(["a", "zz"]) {
            if let Ok(Some(list)) = idx.postings(t) {
                for (doc, _) in list {
                    let _ = idx.doc_len(doc);
                }
            }
            let _ = idx.df(t);
            let _ = idx.prefix_terms(t, 5);
            let _ = idx.fuzzy_terms(t, 1, 5);
        }
    }
}

fn read_all_vectors(bytes: &[u8]) {
    if let Ok(v) = Vectors::open(bytes) {
        let q = vec![0.5f32; v.dim()];
        for i in 0..v.len() {
            let _ = v.dot(i, &q);
            let _ = v.get(i);
        }
    }
}

#[test]
fn huge_chunk_count_allocated_before_checking() {
    // Header, then count = u32::MAX: an offset table of 32 GiB the file does not hold.
    let mut bytes = chunks_file();
    bytes[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = ChunkStore::open(bytes).err().expect("must be refused");
    let offset = corrupt_in(e, CHUNKS_FILE);
    assert_eq!(offset, 12, "the count's end");
    // Truncated anywhere: an error, never a panic.
    let full = chunks_file();
    for n in 0..full.len() {
        assert!(ChunkStore::open(full[..n].to_vec()).is_err(), "cut at {n}");
    }
}

#[test]
fn postings_doc_id_sum_overflowed() {
    let (f, p) = lexical_files();
    let idx = LexicalIndex::open(f.clone(), p.clone()).unwrap();
    let off = idx.terms().get("a").unwrap() as usize;
    // df = 2: doc 1 (tf 1), then a gap of u64::MAX: the sum wraps to doc 0 in release
    // builds (a panic in debug ones) and used to be accepted, out of order.
    let mut bad = p[..off].to_vec();
    for v in [2, 1, 1, u64::MAX, 1] {
        put_varint(&mut bad, v);
    }
    bad.extend_from_slice(&p[bad.len().min(p.len())..]);
    let idx = LexicalIndex::open(f, bad).unwrap();
    let offset = corrupt_in(idx.postings("a").err().unwrap(), POSTINGS_FILE);
    assert!(
        offset as usize > off,
        "offset {offset} inside the list at {off}"
    );
}

#[test]
fn huge_document_frequency_is_corruption_not_a_df() {
    let (f, p) = lexical_files();
    let idx = LexicalIndex::open(f.clone(), p.clone()).unwrap();
    let off = idx.terms().get("hamlet").unwrap() as usize;
    let mut bad = p[..off].to_vec();
    put_varint(&mut bad, 1 << 40);
    bad.extend_from_slice(&[0; 16]);
    let idx = LexicalIndex::open(f, bad).unwrap();
    corrupt_in(idx.df("hamlet").err().unwrap(), POSTINGS_FILE);
    corrupt_in(idx.postings("hamlet").err().unwrap(), POSTINGS_FILE);
}

#[test]
fn varint_over_64_bits_was_silently_cut() {
    // Ten bytes whose last carries bits 64+: not a u64.
    let bytes = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
    let e = Reader::new("x.bin", &bytes, 0).varint().err().unwrap();
    assert_eq!(corrupt_in(e, "x.bin"), 9);
    let mut ok = Vec::new();
    put_varint(&mut ok, u64::MAX);
    assert_eq!(Reader::new("x.bin", &ok, 0).varint().unwrap(), u64::MAX);
}

#[test]
fn vectors_size_overflow_is_corruption() {
    // dim × count beyond usize (on 64-bit: beyond the file) must be refused, not wrap.
    let mut bytes = write_vectors(3, &[vec![1.0, 0.0, 0.0]]).unwrap();
    bytes[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    bytes[12..16].copy_from_slice(&u32::MAX.to_le_bytes());
    corrupt_in(Vectors::open(&bytes).err().unwrap(), VECTORS_FILE);
}

#[test]
fn corrupt_fst_is_an_fst_error_not_a_panic() {
    let (f, p) = lexical_files();
    // Flip one byte in the middle of the fst: its CRC32C no longer matches.
    let mut bad = f.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x55;
    match LexicalIndex::open(bad, p) {
        Err(FormatError::Fst { file, .. }) => assert_eq!(file, TERMS_FILE),
        Err(other) => panic!("{other}"),
        Ok(_) => panic!("a corrupt terms.fst was accepted"),
    }
    let h = write_hanja_fst(&[('갑', '甲'), ('목', '木')], &[('갑', '甲')]).unwrap();
    let mut bad = h.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x55;
    assert!(HanjaMap::open(bad).is_err());
    assert!(HanjaMap::open(h).is_ok());
}

/// A valid file with up to 4 bytes overwritten and maybe cut short.
fn mutated(base: Vec<u8>) -> impl Strategy<Value = Vec<u8>> {
    let n = base.len();
    (
        proptest::collection::vec((0..n, any::<u8>()), 1..4),
        proptest::option::of(0..n),
    )
        .prop_map(move |(edits, cut)| {
            let mut b = base.clone();
            for (i, v) in edits {
                b[i] = v;
            }
            if let Some(c) = cut {
                b.truncate(c);
            }
            b
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn chunk_store_never_panics_on_corrupt_bytes(b in mutated(chunks_file())) {
        read_all_chunks(b);
    }

    #[test]
    fn postings_never_panic_on_corrupt_bytes(p in mutated(lexical_files().1)) {
        read_all_lexical(lexical_files().0, p);
    }

    #[test]
    fn terms_fst_never_panics_on_corrupt_bytes(f in mutated(lexical_files().0)) {
        read_all_lexical(f, lexical_files().1);
    }

    #[test]
    fn vectors_never_panic_on_corrupt_bytes(
        b in mutated(write_vectors(3, &[vec![1.0, 0.0, 0.0], vec![0.0, 0.6, 0.8]]).unwrap())
    ) {
        read_all_vectors(&b);
    }

    #[test]
    fn readers_never_panic_on_arbitrary_bytes(b in proptest::collection::vec(any::<u8>(), 0..64)) {
        read_all_chunks(b.clone());
        read_all_vectors(&b);
        read_all_lexical(b.clone(), b.clone());
        let _ = HanjaMap::open(b);
    }
}

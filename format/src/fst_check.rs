//! The fst's own checksum, checked as `fst::raw::Fst::verify` does (same algorithm, same
//! errors) but without fst's 16 kB compiled-in CRC table, which is incompressible and was
//! 16.7 kB of the engine wasm's 100 kB gzip budget (README, engine wasm size).
//!
//! An fst of version ≥ 3 (every fst 0.4 writes) ends with a 4-byte little-endian checksum:
//! the CRC-32C (Castagnoli polynomial, reflected 0x82F63B78) of every byte before it,
//! "masked" as in the Snappy framing format (`((crc >> 15) | (crc << 17)) + 0xA282EAD8`).
//! Sources: fst 0.4.7 `src/raw/crc32.rs` and `Fst::verify`; RFC 3720 §12.1 (CRC-32C);
//! the Snappy framing format, "Checksum format".

use std::sync::OnceLock;

/// Reflected CRC-32C polynomial (RFC 3720 §12.1).
const CASTAGNOLI_POLY: u32 = 0x82F6_3B78;

/// Slicing-by-16 tables (`t[0]` is the byte-at-a-time table), built on first use (16 kB of
/// heap, about 4,000 table entries' work) instead of being compiled into the binary.
fn tables() -> &'static [[u32; 256]; 16] {
    static TABLES: OnceLock<Box<[[u32; 256]; 16]>> = OnceLock::new();
    TABLES.get_or_init(|| {
        let mut t = Box::new([[0u32; 256]; 16]);
        for i in 0..256u32 {
            let mut crc = i;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ CASTAGNOLI_POLY
                } else {
                    crc >> 1
                };
            }
            t[0][i as usize] = crc;
        }
        for i in 0..256 {
            let mut crc = t[0][i];
            for j in 1..16 {
                crc = (crc >> 8) ^ t[0][(crc & 0xFF) as usize];
                t[j][i] = crc;
            }
        }
        t
    })
}

/// CRC-32C of `buf` (initial value 0, final complement), slicing by 16 as fst does.
pub(crate) fn crc32c(buf: &[u8]) -> u32 {
    let t = tables();
    let mut crc: u32 = !0;
    let mut chunks = buf.chunks_exact(16);
    for c in &mut chunks {
        crc ^= u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        crc = t[0][c[15] as usize]
            ^ t[1][c[14] as usize]
            ^ t[2][c[13] as usize]
            ^ t[3][c[12] as usize]
            ^ t[4][c[11] as usize]
            ^ t[5][c[10] as usize]
            ^ t[6][c[9] as usize]
            ^ t[7][c[8] as usize]
            ^ t[8][c[7] as usize]
            ^ t[9][c[6] as usize]
            ^ t[10][c[5] as usize]
            ^ t[11][c[4] as usize]
            ^ t[12][(crc >> 24) as usize]
            ^ t[13][((crc >> 16) & 0xFF) as usize]
            ^ t[14][((crc >> 8) & 0xFF) as usize]
            ^ t[15][(crc & 0xFF) as usize];
    }
    for &b in chunks.remainder() {
        crc = t[0][((crc as u8) ^ b) as usize] ^ (crc >> 8);
    }
    !crc
}

/// Checks the checksum of an fst that `fst::raw::Fst::new` accepted: the same result as
/// `fst.verify()` — `Ok`, `ChecksumMismatch { expected, got }` or, for an fst of version
/// ≤ 2, `ChecksumMissing`.
pub(crate) fn verify<D: AsRef<[u8]>>(fst: &fst::raw::Fst<D>) -> Result<(), fst::Error> {
    let bytes = fst.as_bytes();
    // Fst::new checked that the 8-byte version header and the 4-byte checksum are present.
    let version = u64::from_le_bytes(bytes[..8].try_into().expect("fst header"));
    if version <= 2 {
        return Err(fst::raw::Error::ChecksumMissing.into());
    }
    let (body, tail) = bytes.split_at(bytes.len() - 4);
    let expected = u32::from_le_bytes(tail.try_into().expect("4 bytes"));
    let sum = crc32c(body);
    let got = (sum.rotate_right(15)).wrapping_add(0xA282_EAD8);
    if expected == got {
        Ok(())
    } else {
        Err(fst::raw::Error::ChecksumMismatch { expected, got }.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3720 §B.4 test vectors for CRC-32C.
    #[test]
    fn crc32c_matches_rfc3720_vectors() {
        assert_eq!(crc32c(&[0u8; 32]), 0x8A91_36AA);
        assert_eq!(crc32c(&[0xFFu8; 32]), 0x62A8_AB43);
        let inc: Vec<u8> = (0..32u8).collect();
        assert_eq!(crc32c(&inc), 0x46DD_794E);
        let dec: Vec<u8> = (0..32u8).rev().collect();
        assert_eq!(crc32c(&dec), 0x113F_DB5C);
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
    }

    fn sample_fst(n: usize) -> Vec<u8> {
        let mut keys: Vec<String> = (0..n).map(|i| format!("term{i:07}")).collect();
        keys.sort();
        let mut b = fst::MapBuilder::memory();
        for (i, k) in keys.iter().enumerate() {
            b.insert(k, i as u64).unwrap();
        }
        b.into_inner().unwrap()
    }

    /// Every result of fst's own `verify` (the one this replaces) on intact fsts of many
    /// sizes and on each of many one-byte corruptions: same Ok, same error message.
    #[test]
    fn verify_agrees_with_fst_verify_on_intact_and_corrupt_fsts() {
        for n in [0, 1, 2, 15, 16, 17, 100, 5_000] {
            let bytes = sample_fst(n);
            let intact = fst::raw::Fst::new(bytes.clone()).unwrap();
            assert!(verify(&intact).is_ok(), "n={n}");
            assert!(intact.verify().is_ok());
            for pos in (0..bytes.len()).step_by(bytes.len() / 40 + 1) {
                let mut bad = bytes.clone();
                bad[pos] ^= 0x5A;
                let Ok(f) = fst::raw::Fst::new(bad) else {
                    continue;
                };
                let ours = verify(&f).map_err(|e| e.to_string());
                let theirs = f.verify().map_err(|e| e.to_string());
                assert_eq!(ours, theirs, "n={n} byte {pos} flipped");
                assert!(ours.is_err(), "n={n} byte {pos} flipped went unnoticed");
            }
        }
    }
}

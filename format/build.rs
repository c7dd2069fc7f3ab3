//! Generates the analyzer's Unicode tables from the crates that define them, so the engine carries compact
//! tables instead of theirs (issue 12: engine wasm size; `docs/design/wasm-size.md`):
//!
//! - `nfkc.bin`: what [`crate::nfkc`] needs for NFKC (UAX #15), read from `unicode-normalization` (its
//!   Unicode version): canonical combining classes, the full compatibility decomposition of every character
//!   that has one (Hangul syllables excepted: they are algorithmic), and every primary composite (a, b) → c.
//! - `t2s.bin`: the Traditional → Simplified character table of `fast2s` as the analyzer applies it (one
//!   character, no context: `fast2s::convert` of that character alone).
//!
//! - `lower.bin`: `str::to_lowercase` of std (its Unicode version: the same toolchain builds the
//!   target), as runs of `c → c + delta` mappings, the multi-character ones, and the classes of the
//!   final-sigma rule (core's `LOWERCASE_TABLE` alone was 4.6 kB of the wasm's gzip).
//!
//! All are sequences of unsigned LEB128 numbers (layout in `format/src/nfkc.rs`, `format/src/t2s.rs`, `format/src/lower.rs`);
//! `format/src/nfkc.rs`'s tests check the result against both crates over every code point.
use std::collections::HashMap;
use std::env;
use std::fs;
use std::path::Path;

use unicode_normalization::char as un;

fn leb(out: &mut Vec<u8>, mut v: u32) {
    loop {
        let byte = (v & 0x7F) as u8;
        v >>= 7;
        if v == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// `v − prev` as a zigzag number: 0, −1, 1, −2, … → 0, 1, 2, 3, …
fn zigzag(v: u32, prev: u32) -> u32 {
    let d = i64::from(v) - i64::from(prev);
    (if d >= 0 { d << 1 } else { ((-d) << 1) - 1 }) as u32
}

fn is_hangul_syllable(c: u32) -> bool {
    (0xAC00..0xAC00 + 11172).contains(&c)
}

fn all_chars() -> impl Iterator<Item = char> {
    (0..=0x10FFFFu32).filter_map(char::from_u32)
}

/// Primary composites: every (a, b) with compose(a, b) = c, sorted.
fn composites() -> Vec<(char, char, char)> {
    // Primary composites: every (a, b) with compose(a, b) = c. Such a pair is c's one-level canonical
    // decomposition, so NFD(a) ++ NFD(b) = NFD(c): try every split of NFD(c) and every character whose NFD
    // is each side.
    let mut by_nfd: HashMap<Vec<char>, Vec<char>> = HashMap::new();
    let mut nfd_of: Vec<(char, Vec<char>)> = Vec::new();
    for c in all_chars() {
        if is_hangul_syllable(c as u32) {
            continue;
        }
        let mut d = Vec::new();
        un::decompose_canonical(c, |x| d.push(x));
        by_nfd.entry(d.clone()).or_default().push(c);
        if d.len() >= 2 {
            nfd_of.push((c, d));
        }
    }
    let mut comps: Vec<(char, char, char)> = Vec::new();
    for (c, d) in &nfd_of {
        for k in 1..d.len() {
            let (Some(aa), Some(bb)) = (by_nfd.get(&d[..k]), by_nfd.get(&d[k..])) else {
                continue;
            };
            for &a in aa {
                for &b in bb {
                    if un::compose(a, b) == Some(*c) && !comps.contains(&(a, b, *c)) {
                        comps.push((a, b, *c));
                    }
                }
            }
        }
    }
    comps.sort();
    comps
}

fn nfkc_table(comps: &[(char, char, char)]) -> Vec<u8> {
    let mut out = Vec::new();
    // Canonical combining classes: runs of equal non-zero class, as (gap since the previous run's end,
    // length, class).
    let mut runs: Vec<(u32, u32, u8)> = Vec::new();
    for c in all_chars() {
        let class = un::canonical_combining_class(c);
        if class == 0 {
            continue;
        }
        match runs.last_mut() {
            Some((start, len, k)) if *k == class && *start + *len == c as u32 => *len += 1,
            _ => runs.push((c as u32, 1, class)),
        }
    }
    leb(&mut out, runs.len() as u32);
    let mut end = 0;
    for &(start, len, class) in &runs {
        leb(&mut out, start - end);
        leb(&mut out, len);
        out.push(class);
        end = start + len;
    }
    // Full compatibility decompositions (what NFKD emits for the character alone, before reordering
    // across characters): (code point − previous code point, length, code points).
    let mut decomps: Vec<(u32, Vec<char>)> = Vec::new();
    for c in all_chars() {
        if is_hangul_syllable(c as u32) {
            continue;
        }
        let mut d = Vec::new();
        un::decompose_compatible(c, |x| d.push(x));
        if d != [c] {
            decomps.push((c as u32, d));
        }
    }
    // In three columns: code point − the previous one; length; the decompositions' code points, each as
    // the zigzag difference from the code point before it (across entries).
    leb(&mut out, decomps.len() as u32);
    let mut prev = 0;
    for (c, _) in &decomps {
        leb(&mut out, c - prev);
        prev = *c;
    }
    for (_, d) in &decomps {
        out.push(u8::try_from(d.len()).expect("a decomposition of at most 255 characters"));
    }
    let mut prev = 0;
    for (_, d) in &decomps {
        for &x in d {
            leb(&mut out, zigzag(x as u32, prev));
            prev = x as u32;
        }
    }
    leb(&mut out, comps.len() as u32);
    let mut prev = 0;
    for &(a, b, c) in comps {
        leb(&mut out, a as u32 - prev);
        leb(&mut out, b as u32);
        leb(&mut out, zigzag(c as u32, a as u32));
        prev = a as u32;
    }
    out
}

fn t2s_table() -> Vec<u8> {
    // fast2s converts only characters of 3 UTF-8 bytes (U+0800..=U+FFFF).
    let mut pairs = Vec::new();
    for c in (0x800..=0xFFFFu32).filter_map(char::from_u32) {
        let mut buf = [0u8; 4];
        let s = fast2s::convert(c.encode_utf8(&mut buf));
        let mut it = s.chars();
        let t = it.next().unwrap_or(c);
        assert!(
            it.next().is_none(),
            "fast2s maps {c:?} to more than one character"
        );
        if t != c {
            assert!((t as u32) <= 0xFFFF, "fast2s maps {c:?} outside the BMP");
            pairs.push((c as u32, t as u32));
        }
    }
    // Two columns: traditional code point − the previous one; zigzag difference of the simplified code
    // point from the previous simplified one.
    let mut out = Vec::new();
    leb(&mut out, pairs.len() as u32);
    let mut prev = 0;
    for &(c, _) in &pairs {
        leb(&mut out, c - prev);
        prev = c;
    }
    let mut prev = 0;
    for &(_, t) in &pairs {
        leb(&mut out, zigzag(t, prev));
        prev = t;
    }
    out
}

/// Final-sigma class of `c` for `str::to_lowercase`'s rule (Unicode §3.13, `Final_Sigma`): 2 if
/// `Case_Ignorable` (skipped when looking for the cased letter around Σ), 1 if `Cased` and not
/// case-ignorable, 0 otherwise. Read from std itself (the host's std is the target's: one
/// toolchain): `AcΣ` ends in ς iff c is cased or ignorable, `cΣ` iff c is cased and not
/// ignorable. (Whether an ignorable character is also cased never matters: std skips it.)
fn sigma_class(c: char) -> u8 {
    let last = |s: String| s.to_lowercase().chars().last();
    let after_a = last(format!("A{c}Σ")) == Some('ς');
    let alone = last(format!("{c}Σ")) == Some('ς');
    match (after_a, alone) {
        (true, true) => 1,
        (true, false) => 2,
        (false, false) => 0,
        (false, true) => unreachable!("{c:?}: cased and not ignorable, yet not after A"),
    }
}

fn lower_table() -> Vec<u8> {
    // Single-character mappings c → c + delta, in runs of equal delta and equal step between keys
    // (1, or 2 for the alternating upper/lower pairs of Latin Extended and Cyrillic).
    let mut single: Vec<(u32, i64)> = Vec::new();
    let mut multi: Vec<(u32, Vec<char>)> = Vec::new();
    for c in all_chars() {
        let m: Vec<char> = c.to_lowercase().collect();
        if m.len() > 1 {
            multi.push((c as u32, m));
        } else if m[0] != c {
            single.push((c as u32, i64::from(m[0] as u32) - i64::from(c as u32)));
        }
    }
    let mut runs: Vec<(u32, u32, u32, i64)> = Vec::new(); // (first, count, step, delta)
    for &(c, d) in &single {
        match runs.last_mut() {
            Some((first, n, step, delta))
                if *delta == d
                    && (*n == 1 && c - *first <= 2 || *n > 1 && c == *first + *n * *step) =>
            {
                if *n == 1 {
                    *step = c - *first;
                }
                *n += 1;
            }
            _ => runs.push((c, 1, 1, d)),
        }
    }
    let mut out = Vec::new();
    leb(&mut out, runs.len() as u32);
    let mut end = 0;
    for &(first, n, step, delta) in &runs {
        leb(&mut out, first - end);
        leb(&mut out, n);
        out.push(step as u8);
        let z = if delta >= 0 {
            delta << 1
        } else {
            ((-delta) << 1) - 1
        };
        leb(&mut out, z as u32);
        end = first + (n - 1) * step + 1;
    }
    leb(&mut out, multi.len() as u32);
    for (c, m) in &multi {
        leb(&mut out, *c);
        out.push(m.len() as u8);
        for &x in m {
            leb(&mut out, x as u32);
        }
    }
    // Final-sigma classes in runs: (gap since the previous run's end, length, class).
    let mut classes: Vec<(u32, u32, u8)> = Vec::new();
    for c in all_chars() {
        let k = sigma_class(c);
        if k == 0 {
            continue;
        }
        match classes.last_mut() {
            Some((start, len, kk)) if *kk == k && *start + *len == c as u32 => *len += 1,
            _ => classes.push((c as u32, 1, k)),
        }
    }
    leb(&mut out, classes.len() as u32);
    let mut end = 0;
    for &(start, len, k) in &classes {
        leb(&mut out, start - end);
        leb(&mut out, len);
        out.push(k);
        end = start + len;
    }
    out
}

/// `simple.rs`: what `format/src/unicode.rs` needs to normalise most CJK and Hangul text
/// without the NFKC and lowercase tables (which the browser's engine reads from bundle
/// pages): the runs of non-ASCII characters that NFKC and `to_lowercase` leave as they are
/// in any string of such characters (no decomposition but Hangul's, combining class 0,
/// never the second character of a composition, their own lowercase) as `simple.bin`: the
/// count of boundaries, then each boundary (first of a run, one past its last) as the gap
/// from the previous one; and, in `simple.rs`, the blocks of 256 code points of the BMP that
/// hold a Traditional → Simplified pair.
fn simple_table(comps: &[(char, char, char)], t2s: &[u8]) -> (Vec<u8>, String) {
    let mut seconds: std::collections::HashSet<char> = comps.iter().map(|&(_, b, _)| b).collect();
    for j in 0x1161..=0x1175u32 {
        seconds.insert(char::from_u32(j).unwrap());
    }
    for j in 0x11A8..=0x11C2u32 {
        seconds.insert(char::from_u32(j).unwrap());
    }
    let simple = |c: char| -> bool {
        if (c as u32) < 0x80 || seconds.contains(&c) || un::canonical_combining_class(c) != 0 {
            return false;
        }
        let mut lower = c.to_lowercase();
        if lower.next() != Some(c) || lower.next().is_some() {
            return false;
        }
        if is_hangul_syllable(c as u32) {
            return true;
        }
        let mut d = Vec::new();
        un::decompose_compatible(c, |x| d.push(x));
        d == [c]
    };
    let mut runs: Vec<(u32, u32)> = Vec::new();
    let mut start: Option<u32> = None;
    for u in 0x80..=0x110000u32 {
        let yes = char::from_u32(u).is_some_and(simple);
        match (yes, start) {
            (true, None) => start = Some(u),
            (false, Some(s)) => {
                runs.push((s, u - 1));
                start = None;
            }
            _ => {}
        }
    }
    // T2S blocks: decode the pair keys of t2s.bin (count, then key differences).
    let mut blocks = [0u64; 4];
    let mut i = 0;
    let mut next = || {
        let mut v = 0u32;
        let mut shift = 0;
        loop {
            let b = t2s[i];
            i += 1;
            v |= u32::from(b & 0x7F) << shift;
            shift += 7;
            if b & 0x80 == 0 {
                return v;
            }
        }
    };
    let n = next();
    let mut key = 0;
    for _ in 0..n {
        key += next();
        blocks[(key >> 14) as usize] |= 1 << ((key >> 8) & 63);
    }
    let mut bin = Vec::new();
    leb(&mut bin, 2 * runs.len() as u32);
    let mut prev = 0;
    for &(a, b) in &runs {
        leb(&mut bin, a - prev);
        leb(&mut bin, b + 1 - a);
        prev = b + 1;
    }
    let mut out = String::from("// Generated by format/build.rs (simple_table): do not edit.\n");
    out += "/// Bit `b % 64` of word `b / 64`: block `b` (code points 256·b … 256·b + 255) holds a T2S pair.\npub(crate) static T2S_BLOCKS: [u64; 4] = [";
    for w in blocks {
        out += &format!("0x{w:X}, ");
    }
    out += "];\n";
    (bin, out)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let dir = env::var_os("OUT_DIR").expect("cargo sets OUT_DIR for build scripts");
    let comps = composites();
    fs::write(Path::new(&dir).join("nfkc.bin"), nfkc_table(&comps))
        .expect("write OUT_DIR/nfkc.bin");
    let t2s = t2s_table();
    let (simple_bin, simple_rs) = simple_table(&comps, &t2s);
    fs::write(Path::new(&dir).join("simple.bin"), simple_bin).expect("write OUT_DIR/simple.bin");
    fs::write(Path::new(&dir).join("simple.rs"), simple_rs).expect("write OUT_DIR/simple.rs");
    fs::write(Path::new(&dir).join("t2s.bin"), t2s).expect("write OUT_DIR/t2s.bin");
    fs::write(Path::new(&dir).join("lower.bin"), lower_table()).expect("write OUT_DIR/lower.bin");
}

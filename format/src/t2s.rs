//! Traditional → Simplified Chinese, one character at a time: the table of the `fast2s` crate (0.3.1,
//! MIT) as the analyzer has always applied it — `fast2s::convert` of the character alone, so none of its
//! context rules apply — generated from that crate by `format/build.rs` (issue 12: `fast2s` built a
//! `HashMap` from a bincode copy of its table at first use, 23 kB of the engine wasm's gzip; this is the
//! table alone, see `docs/design/wasm-size.md`).
//!
//! Table layout (`OUT_DIR/t2s.bin`, unsigned LEB128 numbers): the count of pairs, then two columns in the
//! traditional characters' code point order: each traditional code point − the previous one; each
//! simplified code point as the zigzag difference from the previous simplified one. All are in
//! U+0800..=U+FFFF (fast2s converts only characters of three UTF-8 bytes).
use std::sync::OnceLock;

use crate::nfkc::Leb;

static T2S_BIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/t2s.bin"));

fn decode(r: &mut Leb) -> Vec<(u16, u16)> {
    let n = r.next() as usize;
    let mut pairs = Vec::with_capacity(n);
    let mut prev = 0u32;
    for _ in 0..n {
        prev = prev.saturating_add(r.next());
        pairs.push((prev as u16, 0));
    }
    let mut prev = 0u32;
    for p in &mut pairs {
        prev = r.zigzag(prev);
        p.1 = prev as u16;
    }
    pairs
}

fn table() -> &'static [(u16, u16)] {
    static T: OnceLock<Vec<(u16, u16)>> = OnceLock::new();
    T.get_or_init(|| decode(&mut Leb::new(T2S_BIN)))
}

/// The simplified form of `c` in fast2s's table, or `c` when it has none (every character outside
/// U+0800..=U+FFFF has none).
pub fn t2s(c: char) -> char {
    let Ok(u) = u16::try_from(c as u32) else {
        return c;
    };
    if u < 0x800 {
        return c;
    }
    let t = table();
    match t.binary_search_by_key(&u, |p| p.0) {
        Ok(i) => char::from_u32(u32::from(t[i].1)).unwrap_or(c),
        Err(_) => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_decodes_to_its_end() {
        let mut r = Leb::new(T2S_BIN);
        let t = decode(&mut r);
        assert!(r.at_end(), "t2s.bin has bytes after its table");
        assert!(t.len() > 2500, "{} pairs", t.len());
        assert!(t.windows(2).all(|w| w[0].0 < w[1].0), "keys not sorted");
    }

    #[test]
    fn t2s_equals_fast2s_on_every_code_point() {
        let mut changed = 0;
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let mut buf = [0u8; 4];
            let want: Vec<char> = fast2s::convert(c.encode_utf8(&mut buf)).chars().collect();
            assert_eq!(vec![t2s(c)], want, "{c:?} (U+{:04X})", c as u32);
            changed += usize::from(want[0] != c);
        }
        assert!(changed > 2500, "only {changed} characters converted");
    }
}

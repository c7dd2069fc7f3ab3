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
use crate::nfkc::Leb;

/// The table as generated (compiled in natively, a bundle page for the browser: `crate::unicode`).
pub(crate) static T2S_BIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/t2s.bin"));

/// Decodes a table laid out as the module doc says: (traditional, simplified) pairs sorted by
/// the first. Errors (with the byte offset) on counts that exceed the table's bytes, keys out
/// of order or outside the BMP.
pub(crate) fn decode(r: &mut Leb) -> Result<Vec<(u16, u16)>, String> {
    let n = r.count(2)?;
    let mut pairs = Vec::with_capacity(n);
    let mut prev = 0u32;
    for i in 0..n {
        let at = r.pos();
        let d = r.next();
        prev = prev.saturating_add(d);
        if prev > 0xFFFF || (i > 0 && d == 0) {
            return Err(format!(
                "at byte {at}: key {prev:#X} out of order or past U+FFFF"
            ));
        }
        pairs.push((prev as u16, 0));
    }
    let mut prev = 0u32;
    for p in &mut pairs {
        prev = r.zigzag(prev);
        p.1 = prev as u16;
    }
    Ok(pairs)
}

/// The compiled-in table, decoded at first use (once per process).
#[cfg(any(test, feature = "tables"))]
pub(crate) fn table() -> &'static [(u16, u16)] {
    static T: std::sync::OnceLock<Vec<(u16, u16)>> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        decode(&mut Leb::new(T2S_BIN)).expect("the compiled-in t2s.bin decodes (tested)")
    })
}

/// The simplified form of `c` in the compiled-in table (see [`t2s_with`]).
#[cfg(any(test, feature = "tables"))]
pub fn t2s(c: char) -> char {
    t2s_with(table(), c)
}

/// The simplified form of `c` in fast2s's table `t` (pairs sorted by key), or `c` when it
/// has none (every character outside U+0800..=U+FFFF has none).
pub(crate) fn t2s_with(t: &[(u16, u16)], c: char) -> char {
    let Ok(u) = u16::try_from(c as u32) else {
        return c;
    };
    if u < 0x800 {
        return c;
    }
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
        let t = decode(&mut r).unwrap();
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

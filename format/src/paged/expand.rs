//! Bigram expansion pages (`x-…`) of a paged bundle: for every two-character Hangul or
//! Han key, the dictionary terms its Hanja / Hangul readings produce. Writer and reader.
//!
//! The engine expands a query's two-character term `ab` (both Hangul) to every dictionary
//! term `xy` with `x` a Hanja of `a` and `y` a Hanja of `b`, and a Han term the same way to
//! its Hangul readings (`hanja.fst`'s two directions). Over pages, that search costs one
//! dictionary block per *candidate* — every combination of the two characters' readings,
//! most of which are not in the dictionary (a Korean query of six words read 81 blocks,
//! 102 kB, on the books) — and a round trip for the Hanja pages before those blocks are
//! known. These pages hold the answer itself, computed at build time: the key's
//! candidates that are dictionary terms. A query reads the page of each of its bigrams in
//! its first round, together with its own terms' blocks.
//!
//! Every list is exactly what the search over `hanja.fst` and the dictionary gives: for a
//! Hangul key `ab`, `{xy ∈ dictionary : x ∈ hanja_of(a), y ∈ hanja_of(b)}`; for a Han key
//! `xy`, `{ab ∈ dictionary : a ∈ readings_of(x), b ∈ readings_of(y)}`. Keys: every Hangul
//! bigram with a candidate (the key itself need not be a dictionary term: 갑목 finds 甲木 in
//! a bundle with no Korean text), and every Han bigram *that is a dictionary term* with a
//! candidate; a Han query bigram that is not a term is expanded through the Hanja pages
//! and the dictionary as before (the engine knows from its own block). Absent key = no
//! candidate.
//!
//! Page body (varints are unsigned LEB128), keys sorted by their UTF-8 bytes:
//! ```text
//! varint n_keys
//! n_keys × entry:
//!   varint keep, varint add, add bytes   front coding against the previous key
//!   varint n_terms
//!   n_terms × (varint len, len bytes)    the candidate terms, sorted, UTF-8
//! ```
//! Pages hold about [`EXPAND_PAGE_TARGET`] raw bytes; the entry lists each page's first key
//! (`pages.expand_keys`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::analyzer::{script_of, Script};
use crate::codec::{put_varint, Reader};
use crate::error::Result;
use crate::hanja::HanjaMap;

/// Target raw size of an expansion page (bytes).
pub const EXPAND_PAGE_TARGET: usize = 2048;

/// The two chars of `t` if it has exactly two, both Hangul or both Han.
fn bigram(t: &str) -> Option<(char, char, Script)> {
    let mut it = t.chars();
    let (a, b) = (it.next()?, it.next()?);
    if it.next().is_some() {
        return None;
    }
    let (sa, sb) = (script_of(a), script_of(b));
    (sa == sb && matches!(sa, Script::Hangul | Script::Han)).then_some((a, b, sa))
}

/// Every key and its candidate terms, from the dictionary's `terms` and the reading table:
/// every Hangul key that has a candidate, and every Han key that is itself a dictionary
/// term and has a candidate. (All Han keys would not fit: a Hangul term such as 이다 reads
/// as thousands of Han bigrams that no text holds.)
pub fn table<'a>(
    terms: impl Iterator<Item = &'a str>,
    hanja: &HanjaMap,
) -> BTreeMap<String, BTreeSet<String>> {
    // For a Han char x, the Hangul a with x ∈ hanja_of(a) — from the keys, so that the
    // table is exactly the forward lookups' answer even if the two directions of the
    // reading table are not symmetric.
    let mut inv_h: HashMap<char, Vec<char>> = HashMap::new();
    for k in hanja.keys() {
        let Some((&b'h', rest)) = k.split_first() else {
            continue;
        };
        let Ok(s) = std::str::from_utf8(rest) else {
            continue;
        };
        let mut cs = s.chars();
        if let (Some(hangul), Some(han), None) = (cs.next(), cs.next(), cs.next()) {
            inv_h.entry(han).or_default().push(hangul);
        }
    }
    let mut hangul_terms: BTreeSet<&str> = BTreeSet::new();
    let mut han_terms: Vec<(&str, char, char)> = Vec::new();
    for t in terms {
        match bigram(t) {
            Some((_, _, Script::Hangul)) => {
                hangul_terms.insert(t);
            }
            Some((x, y, _)) => han_terms.push((t, x, y)),
            None => {}
        }
    }
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for &(t, x, y) in &han_terms {
        // Hangul keys: the Han term is a candidate of every Hangul bigram reading as it.
        if let (Some(kx), Some(ky)) = (inv_h.get(&x), inv_h.get(&y)) {
            for &a in kx {
                for &b in ky {
                    let key: String = [a, b].iter().collect();
                    out.entry(key).or_default().insert(t.to_string());
                }
            }
        }
        // Han keys (dictionary terms only): the Hangul terms among its readings.
        let (rx, ry) = (hanja.readings_of(x), hanja.readings_of(y));
        for &a in &rx {
            for &b in &ry {
                let cand: String = [a, b].iter().collect();
                if hangul_terms.contains(cand.as_str()) {
                    out.entry(t.to_string()).or_default().insert(cand);
                }
            }
        }
    }
    out
}

/// Cuts `table` into page bodies of about [`EXPAND_PAGE_TARGET`] raw bytes. Returns the
/// first key of each page and the bodies.
pub fn write(table: &BTreeMap<String, BTreeSet<String>>) -> (Vec<String>, Vec<Vec<u8>>) {
    let mut keys = Vec::new();
    let mut bodies = Vec::new();
    let mut body = Vec::new();
    let mut n = 0u64;
    let mut prev: &[u8] = &[];
    let flush = |body: &mut Vec<u8>, n: &mut u64, bodies: &mut Vec<Vec<u8>>| {
        let mut page = Vec::with_capacity(body.len() + 5);
        put_varint(&mut page, *n);
        page.append(body);
        bodies.push(page);
        *n = 0;
    };
    for (key, terms) in table {
        if n > 0 && body.len() >= EXPAND_PAGE_TARGET {
            flush(&mut body, &mut n, &mut bodies);
            prev = &[];
        }
        if n == 0 {
            keys.push(key.clone());
        }
        let k = key.as_bytes();
        let keep = prev.iter().zip(k).take_while(|(a, b)| a == b).count();
        put_varint(&mut body, keep as u64);
        put_varint(&mut body, (k.len() - keep) as u64);
        body.extend_from_slice(&k[keep..]);
        put_varint(&mut body, terms.len() as u64);
        for t in terms {
            put_varint(&mut body, t.len() as u64);
            body.extend_from_slice(t.as_bytes());
        }
        prev = k;
        n += 1;
    }
    if n > 0 {
        flush(&mut body, &mut n, &mut bodies);
    }
    (keys, bodies)
}

/// The candidate terms of `key` in the page body `body` (named `name` in errors): empty
/// if the key is absent. Errors: [`FormatError::DataCorruption`] naming the page and byte
/// offset for a truncated or malformed body (never a panic, allocation bounded by the
/// body's length).
pub fn lookup(name: &str, body: &[u8], key: &str) -> Result<Vec<String>> {
    let mut r = Reader::new(name, body, 0);
    let n = r.varint()?;
    let mut prev: Vec<u8> = Vec::new();
    for _ in 0..n {
        let keep = r.varint()? as usize;
        let add = r.varint()? as usize;
        if keep > prev.len() {
            return Err(r.corrupt(format!("front coding keeps {keep} > {} bytes", prev.len())));
        }
        prev.truncate(keep);
        prev.extend_from_slice(r.take(add)?);
        let m = r.varint()?;
        let here = prev.as_slice() == key.as_bytes();
        let mut out = Vec::new();
        for _ in 0..m {
            let len = r.varint()? as usize;
            let t = r.take(len)?;
            if here {
                let t =
                    std::str::from_utf8(t).map_err(|_| r.corrupt("candidate term is not UTF-8"))?;
                out.push(t.to_string());
            }
        }
        if here {
            return Ok(out);
        }
        if prev.as_slice() > key.as_bytes() {
            break;
        }
    }
    Ok(Vec::new())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hanja::write_hanja_fst;

    fn map() -> HanjaMap {
        // 갑 → 甲, 목 → 木 / 目, 인 → 寅 / 人, 월 → 月, and the reverse readings.
        let pairs = [
            ('갑', '甲'),
            ('목', '木'),
            ('목', '目'),
            ('인', '寅'),
            ('인', '人'),
            ('월', '月'),
        ];
        HanjaMap::open(write_hanja_fst(&pairs, &pairs).unwrap()).unwrap()
    }

    /// The forward search the engine does without these pages.
    fn forward(h: &HanjaMap, dict: &BTreeSet<String>, key: &str) -> BTreeSet<String> {
        let cs: Vec<char> = key.chars().collect();
        let (f, s) = if script_of(cs[0]) == Script::Hangul {
            (h.hanja_of(cs[0]), h.hanja_of(cs[1]))
        } else {
            (h.readings_of(cs[0]), h.readings_of(cs[1]))
        };
        let mut out = BTreeSet::new();
        for &x in &f {
            for &y in &s {
                let c: String = [x, y].iter().collect();
                if dict.contains(&c) {
                    out.insert(c);
                }
            }
        }
        out
    }

    #[test]
    fn table_equals_the_forward_search() {
        let h = map();
        let dict: BTreeSet<String> = [
            "甲木",
            "寅月",
            "人月",
            "갑목",
            "목인",
            "인월",
            "木",
            "甲木乙",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let t = table(dict.iter().map(String::as_str), &h);
        // Hangul keys whether terms or not; Han keys that are terms.
        for key in ["갑목", "인월", "목인", "월갑", "甲木", "寅月", "人月"] {
            let want = forward(&h, &dict, key);
            let got = t.get(key).cloned().unwrap_or_default();
            assert_eq!(got, want, "{key}");
        }
        assert_eq!(
            t["인월"],
            ["人月", "寅月"].iter().map(|s| s.to_string()).collect()
        );
        assert_eq!(t["寅月"], ["인월"].iter().map(|s| s.to_string()).collect());
        // A Han bigram that is not a term is not a key (the engine expands it itself).
        assert!(!t.contains_key("木寅") && !t.contains_key("月月"));
    }

    #[test]
    fn pages_round_trip_every_key() {
        let mut table = BTreeMap::new();
        for i in 0..2000u32 {
            let a = char::from_u32(0xAC00 + i).unwrap();
            let b = char::from_u32(0xAC00 + (i * 7) % 11172).unwrap();
            let key: String = [a, b].iter().collect();
            let terms: BTreeSet<String> = (0..(i % 4) + 1)
                .map(|j| {
                    [char::from_u32(0x4E00 + i + j).unwrap(), '木']
                        .iter()
                        .collect()
                })
                .collect();
            table.insert(key, terms);
        }
        let (keys, bodies) = write(&table);
        assert!(bodies.len() > 5, "{} pages", bodies.len());
        assert!(keys.windows(2).all(|w| w[0] < w[1]));
        for (key, terms) in &table {
            let p = keys.partition_point(|k| k.as_str() <= key.as_str()) - 1;
            let got = lookup("p/x-test", &bodies[p], key).unwrap();
            assert_eq!(got, terms.iter().cloned().collect::<Vec<_>>(), "{key}");
        }
        assert!(lookup("p/x-test", &bodies[0], "가").unwrap().is_empty());
    }

    #[test]
    fn truncated_page_is_an_error_naming_it() {
        let mut table = BTreeMap::new();
        table.insert("갑목".to_string(), BTreeSet::from(["甲木".to_string()]));
        let (_, bodies) = write(&table);
        for cut in 1..bodies[0].len() {
            let e = lookup("p/x-abc-0", &bodies[0][..cut], "갑목").unwrap_err();
            assert!(e.to_string().contains("p/x-abc-0"), "{e}");
        }
    }
}

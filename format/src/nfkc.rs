//! Unicode Normalization Form KC ([UAX #15](https://www.unicode.org/reports/tr15/)), as the
//! `unicode-normalization` crate computes it (`str::nfkc`), from compact tables generated from that crate
//! by `format/build.rs` (issue 12: its perfect-hash tables were 112 kB of the engine wasm; these are a
//! fraction of that, see `docs/design/wasm-size.md`). The algorithm follows that crate's `Decompositions`
//! and `Recompositions` iterators step by step (MIT/Apache-2.0, The Rust Project Developers), so the output
//! is the same for every input, not only for normalised text; the tests compare the two on every code point,
//! on pairs of the characters that compose and on the eval corpora.
//!
//! Table layout (`OUT_DIR/nfkc.bin`, unsigned LEB128 numbers unless said): the count of combining-class
//! runs, then per run (gap since the previous run's end, length, class as one byte); the count of
//! decompositions, then three columns: each character's code point − the previous one; each length (one
//! byte); all their code points, each as the zigzag difference from the code point before it; the count of
//! composites, then per (a, b) → c sorted by (a, b): (a − the previous a, b, zigzag c − a). Hangul syllables are
//! decomposed and composed arithmetically (Unicode §3.12), as in the crate.
/// The table as generated (compiled in natively, a bundle page for the browser: `crate::unicode`).
pub(crate) static NFKC_BIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/nfkc.bin"));

/// Reads unsigned LEB128 numbers from tables this crate generated at build time.
pub(crate) struct Leb<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Leb<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Leb { bytes, pos: 0 }
    }

    /// The next number; 0 past the end (the tests check every table decodes to its end exactly).
    pub(crate) fn next(&mut self) -> u32 {
        let mut v = 0u32;
        let mut shift = 0;
        while let Some(&b) = self.bytes.get(self.pos) {
            self.pos += 1;
            v |= u32::from(b & 0x7F).checked_shl(shift).unwrap_or(0);
            shift += 7;
            if b & 0x80 == 0 {
                break;
            }
        }
        v
    }

    /// The next number read as a zigzag difference from `prev` (0, 1, 2, 3, … → +0, −1, +1, −2, …).
    pub(crate) fn zigzag(&mut self, prev: u32) -> u32 {
        let z = self.next();
        let d = i64::from(z >> 1) ^ -i64::from(z & 1);
        (i64::from(prev) + d).clamp(0, i64::from(u32::MAX)) as u32
    }

    pub(crate) fn byte(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// The next number as a count of items that take at least `min_bytes` bytes each: an
    /// error (naming the byte offset) if the rest of the table cannot hold them, so a
    /// hostile table (a bundle page) never makes the decoder allocate or loop past its size.
    pub(crate) fn count(&mut self, min_bytes: usize) -> Result<usize, String> {
        let at = self.pos;
        let n = self.next() as usize;
        let left = self.bytes.len().saturating_sub(self.pos);
        if n.saturating_mul(min_bytes) > left {
            return Err(format!(
                "at byte {at}: a count of {n} items, but only {left} bytes follow"
            ));
        }
        Ok(n)
    }

    /// An error unless every byte was read exactly (a table ends where its last item ends).
    pub(crate) fn finish(&self) -> Result<(), String> {
        if self.pos == self.bytes.len() {
            Ok(())
        } else {
            Err(format!(
                "the table ends at byte {} of {}",
                self.pos,
                self.bytes.len()
            ))
        }
    }

    /// Bytes not read yet.
    pub(crate) fn bytes_left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }

    /// The byte offset of the next number.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    #[cfg(test)]
    pub(crate) fn at_end(&self) -> bool {
        self.pos == self.bytes.len()
    }
}

fn to_char(v: u32) -> char {
    char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER)
}

/// The decoded NFKC tables.
pub(crate) struct Tables {
    /// (first, last, class) of each run of characters with the same non-zero canonical combining class.
    ccc: Vec<(u32, u32, u8)>,
    /// (code point, start in `chars`, length), sorted by code point.
    decomp: Vec<(u32, u32, u8)>,
    chars: Vec<char>,
    /// ((a << 21) | b, c), sorted.
    pub(crate) comp: Vec<(u64, char)>,
}

/// The compiled-in tables, decoded at first use (once per process).
#[cfg(any(test, feature = "tables"))]
pub(crate) fn tables() -> &'static Tables {
    static T: std::sync::OnceLock<Tables> = std::sync::OnceLock::new();
    T.get_or_init(|| {
        decode(&mut Leb::new(NFKC_BIN)).expect("the compiled-in nfkc.bin decodes (tested)")
    })
}

/// Decodes a table laid out as the module doc says. Errors (with the byte offset) on a table
/// whose counts exceed its bytes; never allocates more than a few times its length.
pub(crate) fn decode(r: &mut Leb) -> Result<Tables, String> {
    let n = r.count(3)?;
    let mut ccc = Vec::with_capacity(n);
    let mut end = 0u32;
    for _ in 0..n {
        let start = end.saturating_add(r.next());
        let len = r.next();
        let class = r.byte();
        end = start.saturating_add(len);
        ccc.push((start, end.saturating_sub(1), class));
    }
    let n = r.count(2)?;
    let mut decomp = Vec::with_capacity(n);
    let mut prev = 0u32;
    for _ in 0..n {
        prev = prev.saturating_add(r.next());
        decomp.push((prev, 0, 0));
    }
    let mut start = 0u32;
    for e in &mut decomp {
        let len = r.byte();
        *e = (e.0, start, len);
        start += u32::from(len);
    }
    let left = r.bytes.len().saturating_sub(r.pos);
    if start as usize > left {
        return Err(format!(
            "at byte {}: decompositions of {start} characters, but only {left} bytes follow",
            r.pos
        ));
    }
    let mut chars = Vec::with_capacity(start as usize);
    let mut prev = 0u32;
    for _ in 0..start {
        prev = r.zigzag(prev);
        chars.push(to_char(prev));
    }
    let n = r.count(3)?;
    let mut comp = Vec::with_capacity(n);
    let mut a = 0u32;
    for _ in 0..n {
        a = a.saturating_add(r.next());
        let b = r.next();
        let c = to_char(r.zigzag(a));
        comp.push(((u64::from(a) << 21) | u64::from(b), c));
    }
    Ok(Tables {
        ccc,
        decomp,
        chars,
        comp,
    })
}

const S_BASE: u32 = 0xAC00;
const L_BASE: u32 = 0x1100;
const V_BASE: u32 = 0x1161;
const T_BASE: u32 = 0x11A7;
const L_COUNT: u32 = 19;
const V_COUNT: u32 = 21;
const T_COUNT: u32 = 28;
const N_COUNT: u32 = V_COUNT * T_COUNT;
const S_COUNT: u32 = L_COUNT * N_COUNT;

impl Tables {
    fn ccc(&self, c: char) -> u8 {
        let c = c as u32;
        if c < 0x300 {
            return 0;
        }
        match self.ccc.binary_search_by(|&(first, last, _)| {
            if last < c {
                std::cmp::Ordering::Less
            } else if first > c {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        }) {
            Ok(i) => self.ccc[i].2,
            Err(_) => 0,
        }
    }

    /// Calls `emit` with the full compatibility decomposition of `c` (`c` itself when it has none).
    fn decompose(&self, c: char, mut emit: impl FnMut(char)) {
        let u = c as u32;
        if u <= 0x7F {
            return emit(c);
        }
        if (S_BASE..S_BASE + S_COUNT).contains(&u) {
            let s = u - S_BASE;
            emit(to_char(L_BASE + s / N_COUNT));
            emit(to_char(V_BASE + (s % N_COUNT) / T_COUNT));
            let t = s % T_COUNT;
            if t > 0 {
                emit(to_char(T_BASE + t));
            }
            return;
        }
        match self.decomp.binary_search_by_key(&u, |e| e.0) {
            Ok(i) => {
                let (_, start, len) = self.decomp[i];
                let start = start as usize;
                for &d in self.chars.get(start..start + len as usize).unwrap_or(&[]) {
                    emit(d);
                }
            }
            Err(_) => emit(c),
        }
    }

    fn compose(&self, a: char, b: char) -> Option<char> {
        let (a, b) = (a as u32, b as u32);
        // Hangul: L + V → LV, LV + T → LVT.
        if (L_BASE..L_BASE + L_COUNT).contains(&a) && (V_BASE..V_BASE + V_COUNT).contains(&b) {
            let lv = S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT;
            return char::from_u32(lv);
        }
        if (S_BASE..S_BASE + S_COUNT).contains(&a)
            && (a - S_BASE).is_multiple_of(T_COUNT)
            && (T_BASE + 1..T_BASE + T_COUNT).contains(&b)
        {
            return char::from_u32(a + (b - T_BASE));
        }
        let key = (u64::from(a) << 21) | u64::from(b);
        self.comp
            .binary_search_by_key(&key, |e| e.0)
            .ok()
            .map(|i| self.comp[i].1)
    }
}

/// `text` in NFKC from the compiled-in tables (see [`nfkc_with`]).
#[cfg(any(test, feature = "tables"))]
pub fn nfkc(text: &str) -> String {
    if text.is_ascii() {
        return text.to_string();
    }
    nfkc_with(tables(), text)
}

/// `text` in NFKC, equal to `text.nfkc().collect::<String>()` of `unicode-normalization` (the version in
/// Cargo.lock, whose Unicode version the tables carry), with tables `t`.
pub(crate) fn nfkc_with(t: &Tables, text: &str) -> String {
    // Decomposition, then canonical ordering: each run of non-starters is stably sorted by class.
    let mut dec: Vec<(u8, char)> = Vec::with_capacity(text.len());
    let mut run_start = 0;
    for ch in text.chars() {
        t.decompose(ch, |d| {
            let class = t.ccc(d);
            if class == 0 {
                crate::sort::sort_by_key(&mut dec[run_start..], |k| k.0);
                dec.push((0, d));
                run_start = dec.len();
            } else {
                dec.push((class, d));
            }
        });
    }
    crate::sort::sort_by_key(&mut dec[run_start..], |k| k.0);
    // Canonical composition, as `Recompositions` does it.
    let mut out = String::with_capacity(text.len());
    let mut composee: Option<char> = None;
    let mut last_ccc: Option<u8> = None;
    let mut buffer: Vec<char> = Vec::new();
    for &(ch_class, ch) in &dec {
        let Some(k) = composee else {
            if ch_class != 0 {
                out.push(ch);
            } else {
                composee = Some(ch);
            }
            continue;
        };
        match last_ccc {
            None => match t.compose(k, ch) {
                Some(r) => composee = Some(r),
                None => {
                    if ch_class == 0 {
                        composee = Some(ch);
                        out.push(k);
                    } else {
                        buffer.push(ch);
                        last_ccc = Some(ch_class);
                    }
                }
            },
            Some(l_class) => {
                if l_class >= ch_class {
                    // `ch` is blocked from `composee`.
                    if ch_class == 0 {
                        composee = Some(ch);
                        last_ccc = None;
                        out.push(k);
                        out.extend(buffer.drain(..));
                    } else {
                        buffer.push(ch);
                        last_ccc = Some(ch_class);
                    }
                    continue;
                }
                match t.compose(k, ch) {
                    Some(r) => composee = Some(r),
                    None => {
                        buffer.push(ch);
                        last_ccc = Some(ch_class);
                    }
                }
            }
        }
    }
    if let Some(k) = composee {
        out.push(k);
    }
    out.extend(buffer.drain(..));
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use unicode_normalization::UnicodeNormalization;

    fn reference(s: &str) -> String {
        s.nfkc().collect()
    }

    #[test]
    fn tables_decode_to_their_end() {
        let mut r = Leb::new(NFKC_BIN);
        let t = decode(&mut r).unwrap();
        assert!(r.at_end(), "nfkc.bin has bytes after its last table");
        assert!(t.ccc.len() > 100 && t.decomp.len() > 5000 && t.comp.len() > 900);
    }

    #[test]
    fn nfkc_equals_unicode_normalization_on_every_code_point() {
        let mut bad = Vec::new();
        for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
            let s = c.to_string();
            // Alone, after a starter and before a combining mark (compositions across the boundary).
            for s in [
                s.clone(),
                format!("a{s}"),
                format!("{s}\u{301}"),
                format!("{s}\u{1161}"),
            ] {
                if nfkc(&s) != reference(&s) {
                    bad.push(s);
                }
            }
        }
        assert!(
            bad.is_empty(),
            "{} differ, first: {:?}",
            bad.len(),
            &bad[..bad.len().min(10)]
        );
    }

    /// Every pair (x, y) of characters that take part in a composition or a reordering (first or second
    /// element of a composite, or a non-zero combining class), and triples with a combining mark between.
    #[test]
    fn nfkc_equals_unicode_normalization_on_composing_pairs() {
        let t = tables();
        let mut set: Vec<char> = Vec::new();
        for &(key, c) in &t.comp {
            set.push(to_char((key >> 21) as u32));
            set.push(to_char((key & 0x1F_FFFF) as u32));
            set.push(c);
        }
        for &(first, last, _) in &t.ccc {
            set.extend((first..=last.min(first + 3)).filter_map(char::from_u32));
        }
        set.extend([
            '\u{1100}', '\u{1161}', '\u{11A8}', '\u{AC00}', '\u{AC01}', 'a', '\u{FB01}', '\u{2460}',
        ]);
        set.sort();
        set.dedup();
        let marks = ['\u{301}', '\u{323}'];
        let mut n = 0;
        for &x in &set {
            for &y in &set {
                let s: String = [x, y].iter().collect();
                assert_eq!(nfkc(&s), reference(&s), "{s:?}");
                for m in marks {
                    let s: String = [x, m, y].iter().collect();
                    assert_eq!(nfkc(&s), reference(&s), "{s:?}");
                }
                n += 1;
            }
        }
        assert!(n > 1_000_000, "only {n} pairs");
    }

    /// Every file under `path` (recursively), read as UTF-8 (files that are not are skipped).
    pub(crate) fn texts(path: &std::path::Path, out: &mut Vec<String>) {
        if path.is_dir() {
            let mut entries: Vec<_> = std::fs::read_dir(path)
                .into_iter()
                .flatten()
                .flatten()
                .collect();
            entries.sort_by_key(|e| e.path());
            for e in entries {
                texts(&e.path(), out);
            }
        } else if let Ok(text) = std::fs::read_to_string(path) {
            out.push(text);
        }
    }

    /// The eval corpora and the books (not in the repository: run with `--ignored` where they are).
    #[test]
    #[ignore = "reads ../shared/eval and books/ (not in the repository); run with --ignored where they exist"]
    fn nfkc_equals_unicode_normalization_on_corpora() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let mut all = Vec::new();
        // The shared data: `JIKJI_SHARED` (README, "Two commands"), else `../shared` beside the clone.
        let shared = std::env::var_os("JIKJI_SHARED")
            .map_or_else(|| root.join("../shared"), std::path::PathBuf::from);
        for path in [shared.join("eval"), root.join("books")] {
            let before = all.len();
            texts(&path, &mut all);
            assert!(all.len() > before, "no files under {}", path.display());
        }
        let mut lines = 0;
        for text in &all {
            for line in text.lines() {
                assert_eq!(nfkc(line), reference(line), "{line:?}");
                lines += 1;
            }
        }
        eprintln!("{} files, {lines} lines: same NFKC", all.len());
    }
}

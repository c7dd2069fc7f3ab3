//! A Levenshtein automaton for fst searches of the paged typo dictionary, smaller in wasm than
//! `fst::automaton::Levenshtein` (issue 12): that one builds a DFA up front (its builder, the
//! `utf8-ranges` sequences and a SipHash map: ~4 kB of the browser's engine gzipped), this one
//! keeps the dynamic-programming row of the edit distance as its state and advances it one
//! code point at a time.
//!
//! It accepts exactly the keys `fst::automaton::Levenshtein::new(query, distance)` accepts:
//! valid UTF-8 whose Levenshtein distance (insertions, deletions, substitutions of Unicode
//! scalar values; no transpositions) to `query` is at most `distance`, except where fst's DFA
//! construction loses some (a code point sharing its first UTF-8 byte with an expected query
//! character: see [`Lev`]'s `step`), which this loses too, so that the engine's typo
//! expansions and results stay byte-identical. The fst one refuses to
//! build past 10,000 DFA states; this one always builds, and the engine only asks for words of
//! at most `FUZZY_MAX_CHARS` (40) characters at distance ≤ 2, where the fst one always builds
//! too (tested below on such words), so the two give the same matches there.

use fst::Automaton;

/// Keys within Levenshtein `distance` of a query, counted in Unicode scalar values.
#[derive(Debug, Clone)]
pub struct Lev {
    query: Vec<char>,
    distance: u32,
}

/// A state of [`Lev`]: the edit distances from each prefix of the query to the key read so far
/// (each capped at `distance + 1`), and a code point being read (its bits so far and how many
/// continuation bytes it still needs, and its length in bytes). `None` when the key read so
/// far is not UTF-8.
#[derive(Debug, Clone)]
pub struct LevState(Option<(Vec<u32>, u32, u8, u8)>);

impl Lev {
    /// The automaton for `query` and `distance` (edits, ≥ 0).
    pub fn new(query: &str, distance: u32) -> Lev {
        Lev {
            query: query.chars().collect(),
            distance,
        }
    }

    /// The row after one more code point `c` of the key (`None`: a code point matching no
    /// query position), each distance capped at `distance + 1`.
    fn dp(&self, row: &[u32], c: Option<char>) -> Vec<u32> {
        let cap = self.distance + 1;
        let mut next = Vec::with_capacity(row.len());
        next.push((row[0] + 1).min(cap));
        for (i, &q) in self.query.iter().enumerate() {
            let sub = row[i] + u32::from(Some(q) != c);
            let v = sub.min(row[i + 1] + 1).min(next[i] + 1).min(cap);
            next.push(v);
        }
        next
    }

    fn alive(&self, row: &[u32]) -> bool {
        row.iter().any(|&v| v <= self.distance)
    }

    /// The state after code point `c`, as fst's DFA moves: `None` where it has no transition.
    ///
    /// fst builds each DFA state's byte table from the "any other code point" transitions
    /// first, then overwrites it with the exact transition of each query character `q` still
    /// within the distance at its position (in query order), whose UTF-8 begins with a fresh
    /// chain of states holding `q`'s bytes only. So a code point sharing its first UTF-8 byte
    /// with such a `q` (the last one in query order) is accepted only if it is that `q`:
    /// `學` after `学` is expected, `é` where `è` is, are dead ends, not substitutions. This
    /// keeps that behaviour so that typo expansions stay those of fst (ASCII query
    /// characters are unaffected: their one byte is the character).
    fn step(&self, row: &[u32], c: char) -> Option<Vec<u32>> {
        let lead = first_byte(c);
        for (i, &q) in self.query.iter().enumerate().rev() {
            if row[i] <= self.distance && first_byte(q) == lead {
                let next = self.dp(row, Some(q));
                if self.alive(&next) {
                    return (q == c).then_some(next);
                }
            }
        }
        let next = self.dp(row, Some(c));
        self.alive(&next).then_some(next)
    }
}

fn first_byte(c: char) -> u8 {
    let mut b = [0u8; 4];
    c.encode_utf8(&mut b);
    b[0]
}

impl Automaton for Lev {
    type State = LevState;

    fn start(&self) -> LevState {
        let cap = self.distance + 1;
        let row = (0..=self.query.len() as u32).map(|i| i.min(cap)).collect();
        LevState(Some((row, 0, 0, 0)))
    }

    fn is_match(&self, s: &LevState) -> bool {
        matches!(&s.0, Some((row, _, 0, _)) if row[row.len() - 1] <= self.distance)
    }

    fn can_match(&self, s: &LevState) -> bool {
        matches!(&s.0, Some((row, _, _, _)) if row.iter().any(|&v| v <= self.distance))
    }

    fn accept(&self, s: &LevState, byte: u8) -> LevState {
        let Some((row, bits, need, len)) = &s.0 else {
            return LevState(None);
        };
        let (bits, need, len) = if *need == 0 {
            match byte {
                0x00..=0x7F => (u32::from(byte), 0, 1),
                0xC2..=0xDF => (u32::from(byte & 0x1F), 1, 2),
                0xE0..=0xEF => (u32::from(byte & 0x0F), 2, 3),
                0xF0..=0xF4 => (u32::from(byte & 0x07), 3, 4),
                _ => return LevState(None),
            }
        } else if byte & 0xC0 == 0x80 {
            ((bits << 6) | u32::from(byte & 0x3F), need - 1, *len)
        } else {
            return LevState(None);
        };
        if need > 0 {
            return LevState(Some((row.clone(), bits, need, len)));
        }
        // Surrogates and code points past U+10FFFF (`from_u32`) and overlong forms such as
        // `E0 80 80` (a code point shorter in UTF-8 than the bytes read) are not UTF-8.
        match char::from_u32(bits) {
            Some(c) if c.len_utf8() == usize::from(len) => {
                LevState(self.step(row, c).map(|next| (next, 0, 0, 0)))
            }
            _ => LevState(None),
        }
    }
}

/// The keys an fst search of the engine reads — within a Levenshtein distance ([`Lev`]: the
/// typo pages) or under a prefix (the Hanja pages' `tag + character` lookups) — as one
/// automaton type, so that the browser's wasm holds one copy of fst's stream code rather
/// than one per automaton (~1 kB gzip: issue 12, ninth round of docs/design/wasm-size.md).
#[derive(Debug, Clone)]
pub enum Keys {
    /// The keys [`Lev`] accepts.
    Lev(Lev),
    /// Every key that starts with these bytes (the keys of a range `≥ prefix`, `< prefix`
    /// followed by a byte above every byte of UTF-8).
    Prefix(Vec<u8>),
}

/// A state of [`Keys`]: [`Lev`]'s, or the number of prefix bytes matched (`None`: a key
/// that left the prefix).
#[derive(Debug, Clone)]
pub enum KeysState {
    /// [`Lev`]'s state.
    Lev(LevState),
    /// Prefix bytes matched so far.
    Prefix(Option<usize>),
}

impl Automaton for Keys {
    type State = KeysState;

    fn start(&self) -> KeysState {
        match self {
            Keys::Lev(l) => KeysState::Lev(l.start()),
            Keys::Prefix(_) => KeysState::Prefix(Some(0)),
        }
    }

    fn is_match(&self, s: &KeysState) -> bool {
        match (self, s) {
            (Keys::Lev(l), KeysState::Lev(s)) => l.is_match(s),
            (Keys::Prefix(p), KeysState::Prefix(Some(i))) => *i == p.len(),
            _ => false,
        }
    }

    fn can_match(&self, s: &KeysState) -> bool {
        match (self, s) {
            (Keys::Lev(l), KeysState::Lev(s)) => l.can_match(s),
            (Keys::Prefix(_), KeysState::Prefix(i)) => i.is_some(),
            _ => false,
        }
    }

    fn accept(&self, s: &KeysState, byte: u8) -> KeysState {
        match (self, s) {
            (Keys::Lev(l), KeysState::Lev(s)) => KeysState::Lev(l.accept(s, byte)),
            (Keys::Prefix(p), KeysState::Prefix(Some(i))) => KeysState::Prefix(match p.get(*i) {
                None => Some(*i),
                Some(&b) => (b == byte).then_some(i + 1),
            }),
            _ => KeysState::Prefix(None),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fst::{IntoStreamer, Streamer};
    use proptest::prelude::*;

    fn keys_of<A: Automaton>(set: &fst::Set<Vec<u8>>, a: A) -> Vec<Vec<u8>> {
        let mut s = set.search(a).into_stream();
        let mut out = Vec::new();
        while let Some(k) = s.next() {
            out.push(k.to_vec());
        }
        out
    }

    fn both(keys: &[String], query: &str, d: u32) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        let mut keys: Vec<&str> = keys.iter().map(String::as_str).collect();
        keys.sort_unstable();
        keys.dedup();
        let set = fst::Set::from_iter(keys).unwrap();
        let theirs = keys_of(&set, fst::automaton::Levenshtein::new(query, d).unwrap());
        (keys_of(&set, Lev::new(query, d)), theirs)
    }

    #[test]
    fn keys_equal_lev_and_prefix_keys_equal_a_range() {
        let mut keys: Vec<Vec<u8>> = [
            "h가佳", "h가假", "h가", "h각各", "c佳가", "c佳", "hamlet", "hamlat", "h",
        ]
        .iter()
        .map(|k| k.as_bytes().to_vec())
        .collect();
        // Not UTF-8 (never in hanja.fst): the prefix takes it, the range `< prefix 0xFF`
        // leaves it out; `HanjaMap::lookup` skips keys whose rest is not UTF-8 either way.
        keys.push(vec![b'h', 0xEA, 0xB0, 0x80, 0xFF]);
        keys.sort();
        let set = fst::Set::from_iter(keys.clone()).unwrap();
        for prefix in ["h가", "h", "c佳", "", "x", "hamlet", "h각各x"] {
            let p = prefix.as_bytes().to_vec();
            let ours = keys_of(&set, Keys::Prefix(p.clone()));
            let expected: Vec<Vec<u8>> =
                keys.iter().filter(|k| k.starts_with(&p)).cloned().collect();
            assert_eq!(ours, expected, "prefix {prefix:?}");
            let mut upper = p.clone();
            upper.push(0xFF);
            let mut range = Vec::new();
            let mut s = set.range().ge(&p).lt(&upper).into_stream();
            while let Some(k) = s.next() {
                range.push(k.to_vec());
            }
            let utf8: Vec<Vec<u8>> = ours
                .into_iter()
                .filter(|k| k.get(p.len()) != Some(&0xFF))
                .collect();
            assert_eq!(utf8, range, "prefix {prefix:?}");
        }
        for (q, d) in [("hamlet", 1), ("h가", 1), ("", 2)] {
            assert_eq!(
                keys_of(&set, Keys::Lev(Lev::new(q, d))),
                keys_of(&set, Lev::new(q, d))
            );
        }
    }

    #[test]
    fn matches_as_fst_levenshtein_on_words() {
        let mut words: Vec<String> = "hamlet hamlat hamlott hmlet hamle hamlets ahmlet shakespear \
             shakspeare élisabeth elisabeth elisabethen ophélia ophelia οφελια 学而 學而 a ham \
             hamletxx hamletxxx ħamlet hamlet\u{10FFFF}"
            .split_whitespace()
            .map(str::to_string)
            .collect();
        words.push(String::new());
        for q in [
            "hamlet",
            "ophélia",
            "elisabeth",
            "shakespeare",
            "学而",
            "",
            "a",
            "éè",
            "ophèlia",
        ] {
            for d in 0..=3 {
                let (ours, theirs) = both(&words, q, d);
                assert_eq!(ours, theirs, "{q} d={d}");
            }
        }
    }

    #[test]
    fn not_utf8_keys_never_match() {
        let a = Lev::new("ab", 2);
        for bad in [
            &b"a\xffb"[..],
            b"\xc0\x80",
            b"\xe0\x80\x80",
            b"\xed\xa0\x80",
            b"\xf4\x90\x80\x80",
            b"a\x80",
        ] {
            let mut s = a.start();
            for &b in bad {
                s = a.accept(&s, b);
            }
            assert!(!a.is_match(&s), "{bad:?}");
        }
    }

    /// The engine's domain: words of 5..=40 characters (stems up to 41) at distance 1 or 2.
    /// fst's Levenshtein builds for all of them (so it never answers "too large" there), on
    /// the worst shapes: all characters distinct, and non-ASCII.
    #[test]
    fn fst_levenshtein_builds_for_every_word_the_engine_asks() {
        let distinct: String = ('a'..='z').chain('α'..='ω').take(41).collect();
        for n in [5, 9, 20, 30, 40, 41] {
            let w: String = distinct.chars().take(n).collect();
            for d in [1, 2] {
                assert!(
                    fst::automaton::Levenshtein::new(&w, d).is_ok(),
                    "{n} chars d={d}"
                );
            }
        }
    }

    proptest! {
        #[test]
        fn matches_as_fst_levenshtein_on_random_sets(
            // é/è and 学/學 share their first UTF-8 byte (fst's quirk, see `Lev::step`).
            query in "[abcéè学學]{0,9}",
            keys in prop::collection::vec("[abcdéè学學\u{10000}]{0,11}", 0..60),
            d in 0u32..3,
        ) {
            // Keys near the query too: the query with one or two edits.
            let mut keys = keys;
            let cs: Vec<char> = query.chars().collect();
            for i in 0..cs.len() {
                let mut a = cs.clone();
                a.remove(i);
                keys.push(a.iter().collect());
                let mut b = cs.clone();
                b[i] = 'd';
                keys.push(b.iter().collect());
                let mut c = cs.clone();
                c.insert(i, 'é');
                keys.push(c.iter().collect());
            }
            let (ours, theirs) = both(&keys, &query, d);
            prop_assert_eq!(ours, theirs);
        }
    }
}

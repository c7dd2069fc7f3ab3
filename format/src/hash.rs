//! The hash maps of the engine's and the paged reader's query path ([`Map`], [`Set`]).
//!
//! Natively they are std's `HashMap` / `HashSet` with its `RandomState` (SipHash-1-3, keys
//! random per process), as before. In wasm32 (the browser's engine) they hash with
//! [`FxHasher`] instead: SipHash's code (`DefaultHasher::write`, one `hash_one` per key type)
//! was ~3 kB of the engine wasm (sixth round of `docs/design/wasm-size.md`), and wasm32's
//! `RandomState` has fixed keys anyway (no randomness source), so it protected nothing
//! there. Nothing the engine returns depends on a map's iteration order (results are sorted
//! by a total order), so the hasher changes no result.
//!
//! Hostile input (page names, terms of a bundle or a query) can at worst make a map slower
//! by colliding; it cannot make it panic or allocate more than its entries.

#[cfg(any(target_arch = "wasm32", test))]
use std::hash::BuildHasherDefault;
use std::hash::Hasher;

/// FxHash (the hash of rustc's `FxHashMap`, `rustc-hash` 1.x): per 8-byte word `h =
/// (h.rotl(5) ^ word) * K`. Fast and small; not resistant to chosen collisions.
#[derive(Debug, Clone, Copy, Default)]
pub struct FxHasher {
    hash: u64,
}

const K: u64 = 0x517c_c1b7_2722_0a95;

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(K);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// The maps' hasher builder: std's `RandomState` natively, [`FxHasher`] in wasm32.
#[cfg(not(target_arch = "wasm32"))]
pub type Build = std::collections::hash_map::RandomState;
/// The maps' hasher builder: std's `RandomState` natively, [`FxHasher`] in wasm32.
#[cfg(target_arch = "wasm32")]
pub type Build = BuildHasherDefault<FxHasher>;

/// A `HashMap` with [`Build`] (make one with `Map::default()`).
pub type Map<K, V> = std::collections::HashMap<K, V, Build>;
/// A `HashSet` with [`Build`] (make one with `Set::default()`).
pub type Set<T> = std::collections::HashSet<T, Build>;

/// A map with room for `n` entries.
pub fn map_with_capacity<K, V>(n: usize) -> Map<K, V> {
    Map::with_capacity_and_hasher(n, Build::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    #[test]
    fn fx_hashes_words_and_tails_and_maps_work() {
        let b = BuildHasherDefault::<FxHasher>::default();
        // Different lengths / tails hash differently; equal input equally.
        let h = |s: &str| b.hash_one(s);
        assert_eq!(h("d-0001"), h("d-0001"));
        assert_ne!(h("d-0001"), h("d-0002"));
        assert_ne!(h("abcdefgh"), h("abcdefghi"));
        assert_ne!(b.hash_one(1u32), b.hash_one(2u32));
        let mut m: std::collections::HashMap<String, u32, BuildHasherDefault<FxHasher>> =
            Default::default();
        for i in 0..10_000u32 {
            m.insert(format!("t{i}"), i);
        }
        assert!((0..10_000u32).all(|i| m[&format!("t{i}")] == i));
        let mut s: Set<u32> = Set::default();
        assert!(s.insert(7) && !s.insert(7));
        let mut c: Map<u32, f32> = map_with_capacity(4);
        *c.entry(3).or_default() += 1.5;
        assert_eq!(c[&3], 1.5);
    }
}

//! A small HNSW graph (Malkov & Yashunin, "Efficient and robust approximate nearest
//! neighbor search using Hierarchical Navigable Small World graphs", IEEE TPAMI 42(4),
//! 2020; arXiv:1603.09320, 2016/2018) over similarity `sim(a, b)` (higher = nearer: the
//! dot product of unit vectors), for the benches only (`bench_hnsw`, and the wasm timing
//! harness `tools/bench-centroids-wasm`, which includes this file by path). Not product
//! code: `docs/design/dense-index.md` "HNSW: measured" says why.
//!
//! The paper's algorithms: INSERT (Alg. 1) with a level drawn as `⌊−ln(U)·mL⌋`,
//! `mL = 1/ln(M)`; SEARCH-LAYER (Alg. 2) with a visited set stamped per search;
//! SELECT-NEIGHBORS-HEURISTIC (Alg. 4, without extendCandidates, with
//! keepPrunedConnections filling up to `M`); K-NN-SEARCH (Alg. 5). Layer 0 keeps up to
//! `2·M` neighbours, the layers above `M`. Insertion is sequential (one thread) and
//! deterministic for a seed.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A similarity with a total order for the heaps.
#[derive(Clone, Copy, PartialEq)]
struct Near(f32, u32);

impl Eq for Near {}

impl PartialOrd for Near {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Near {
    /// Higher similarity first; ties by the lower node.
    fn cmp(&self, o: &Self) -> Ordering {
        self.0.total_cmp(&o.0).then(o.1.cmp(&self.1))
    }
}

/// The graph.
pub struct Hnsw {
    /// Neighbours a node keeps on layer 0 (`2·M`; `M` on the layers above).
    pub m0: usize,
    /// Layer-0 neighbours, `m0` slots a node (`u32::MAX` = empty).
    zero: Vec<u32>,
    /// The layers above 0: `upper[node][l - 1]` its neighbours on layer `l`.
    upper: Vec<Vec<Vec<u32>>>,
    /// The node entering every search, on the top layer.
    entry: u32,
    /// Top layer.
    top: usize,
    /// Visited stamps.
    stamp: Vec<u32>,
    generation: u32,
}

/// What a search did.
#[derive(Default, Clone, Copy, Debug)]
pub struct Work {
    /// Similarities computed.
    pub evals: usize,
}

impl Hnsw {
    /// Builds the graph over nodes `0..n` by inserting them in order.
    pub fn build(
        n: usize,
        m: usize,
        ef_construction: usize,
        seed: u64,
        sim: impl Fn(u32, u32) -> f32,
    ) -> Hnsw {
        let m = m.max(2);
        let m0 = 2 * m;
        let ml = 1.0 / (m as f64).ln();
        let mut s = seed;
        let mut g = Hnsw {
            m0,
            zero: vec![u32::MAX; n * m0],
            upper: vec![Vec::new(); n],
            entry: 0,
            top: 0,
            stamp: vec![0; n],
            generation: 0,
        };
        for node in 0..n as u32 {
            let u = ((splitmix(&mut s) >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
            let level = ((-u.ln()) * ml).floor() as usize;
            g.upper[node as usize] = vec![Vec::new(); level];
            if node == 0 {
                g.top = level;
                continue;
            }
            let to = |x: u32| sim(node, x);
            let mut ep = vec![Near(to(g.entry), g.entry)];
            let mut work = Work::default();
            for l in (level + 1..=g.top).rev() {
                ep = g.layer(&ep, 1, l, &to, &mut work);
            }
            for l in (0..=level.min(g.top)).rev() {
                let found = g.layer(&ep, ef_construction, l, &to, &mut work);
                let cap = if l == 0 { m0 } else { m };
                let chosen = select(&found, m, &sim);
                g.set(node, l, &chosen);
                for &nb in &chosen {
                    let mut list: Vec<Near> = g
                        .links(nb, l)
                        .iter()
                        .map(|&x| Near(sim(nb, x), x))
                        .collect();
                    list.push(Near(sim(nb, node), node));
                    if list.len() > cap {
                        list.sort_by(|a, b| b.cmp(a));
                        let kept = select(&list, cap, &sim);
                        g.set(nb, l, &kept);
                    } else {
                        let ids: Vec<u32> = list.iter().map(|x| x.1).collect();
                        g.set(nb, l, &ids);
                    }
                }
                ep = found;
            }
            if level > g.top {
                g.top = level;
                g.entry = node;
            }
        }
        g
    }

    fn links(&self, node: u32, l: usize) -> Vec<u32> {
        if l == 0 {
            let s = &self.zero[node as usize * self.m0..][..self.m0];
            s.iter().copied().take_while(|&x| x != u32::MAX).collect()
        } else {
            self.upper[node as usize][l - 1].clone()
        }
    }

    fn set(&mut self, node: u32, l: usize, ids: &[u32]) {
        if l == 0 {
            let s = &mut self.zero[node as usize * self.m0..][..self.m0];
            s.fill(u32::MAX);
            s[..ids.len()].copy_from_slice(ids);
        } else {
            self.upper[node as usize][l - 1] = ids.to_vec();
        }
    }

    /// SEARCH-LAYER: the `ef` nearest nodes found from `entry` on layer `l`, nearest first.
    fn layer(
        &mut self,
        entry: &[Near],
        ef: usize,
        l: usize,
        to: &impl Fn(u32) -> f32,
        work: &mut Work,
    ) -> Vec<Near> {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.fill(0);
            self.generation = 1;
        }
        let gen = self.generation;
        let mut cand: BinaryHeap<Near> = BinaryHeap::new();
        let mut found: BinaryHeap<std::cmp::Reverse<Near>> = BinaryHeap::new();
        for &e in entry {
            self.stamp[e.1 as usize] = gen;
            cand.push(e);
            found.push(std::cmp::Reverse(e));
        }
        while found.len() > ef {
            found.pop();
        }
        let mut scratch = Vec::with_capacity(self.m0);
        while let Some(c) = cand.pop() {
            let worst = found.peek().map_or(f32::NEG_INFINITY, |r| r.0 .0);
            if c.0 < worst && found.len() >= ef {
                break;
            }
            scratch.clear();
            if l == 0 {
                let s = &self.zero[c.1 as usize * self.m0..][..self.m0];
                scratch.extend(s.iter().copied().take_while(|&x| x != u32::MAX));
            } else {
                scratch.extend_from_slice(&self.upper[c.1 as usize][l - 1]);
            }
            for &x in &scratch {
                if self.stamp[x as usize] == gen {
                    continue;
                }
                self.stamp[x as usize] = gen;
                let d = to(x);
                work.evals += 1;
                let worst = found.peek().map_or(f32::NEG_INFINITY, |r| r.0 .0);
                if found.len() < ef || d > worst {
                    cand.push(Near(d, x));
                    found.push(std::cmp::Reverse(Near(d, x)));
                    if found.len() > ef {
                        found.pop();
                    }
                }
            }
        }
        let mut out: Vec<Near> = found.into_iter().map(|r| r.0).collect();
        out.sort_by(|a, b| b.cmp(a));
        out
    }

    /// K-NN-SEARCH: the `k` nodes nearest the query (`to(x)`: its similarity with node
    /// `x`) found with a dynamic list of `ef` (≥ k), nearest first, and the work done.
    pub fn search(
        &mut self,
        k: usize,
        ef: usize,
        to: impl Fn(u32) -> f32,
    ) -> (Vec<(u32, f32)>, Work) {
        let mut work = Work { evals: 1 };
        if self.stamp.is_empty() {
            return (Vec::new(), work);
        }
        let mut ep = vec![Near(to(self.entry), self.entry)];
        for l in (1..=self.top).rev() {
            ep = self.layer(&ep, 1, l, &to, &mut work);
        }
        let found = self.layer(&ep, ef.max(k), 0, &to, &mut work);
        (
            found.into_iter().take(k).map(|x| (x.1, x.0)).collect(),
            work,
        )
    }

    /// Nodes.
    pub fn len(&self) -> usize {
        self.stamp.len()
    }

    /// The graph as a browser would fetch it, three ways: `(raw, varint, deflated)` bytes.
    /// raw: every node's layer-0 and upper lists as a count byte and fixed-width ids (2 B
    /// below 65,536 nodes, else 4 B); varint: each list sorted, a varint count and varint
    /// gaps; deflated: the varint form through deflate (level 9), as a page would be
    /// stored.
    pub fn bytes(&self) -> (usize, usize, usize) {
        let width = if self.len() <= 1 << 16 { 2 } else { 4 };
        let mut raw = 0usize;
        let mut v = Vec::new();
        let put = |v: &mut Vec<u8>, mut x: u32| {
            while x >= 0x80 {
                v.push((x as u8) | 0x80);
                x >>= 7;
            }
            v.push(x as u8);
        };
        for node in 0..self.len() as u32 {
            for l in 0..=self.upper[node as usize].len() {
                let mut ids = self.links(node, l);
                raw += 1 + width * ids.len();
                ids.sort_unstable();
                put(&mut v, ids.len() as u32);
                let mut prev = 0u32;
                for (i, &x) in ids.iter().enumerate() {
                    put(&mut v, if i == 0 { x } else { x - prev });
                    prev = x;
                }
            }
        }
        let deflated = deflate_len(&v);
        (raw, v.len(), deflated)
    }
}

/// SELECT-NEIGHBORS-HEURISTIC (Alg. 4): from `found` (nearest first), up to `m` nodes each
/// nearer the base than any node kept before it; then the pruned ones, nearest first, up
/// to `m` (keepPrunedConnections).
fn select(found: &[Near], m: usize, sim: &impl Fn(u32, u32) -> f32) -> Vec<u32> {
    let mut kept: Vec<u32> = Vec::with_capacity(m);
    let mut pruned = Vec::new();
    for c in found {
        if kept.len() >= m {
            break;
        }
        if kept.iter().all(|&r| sim(c.1, r) < c.0) {
            kept.push(c.1);
        } else {
            pruned.push(c.1);
        }
    }
    for p in pruned {
        if kept.len() >= m {
            break;
        }
        kept.push(p);
    }
    kept
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(not(target_arch = "wasm32"))]
fn deflate_len(v: &[u8]) -> usize {
    use std::io::Write;
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(v).expect("deflate");
    e.finish().expect("deflate").len()
}

#[cfg(target_arch = "wasm32")]
fn deflate_len(v: &[u8]) -> usize {
    v.len()
}

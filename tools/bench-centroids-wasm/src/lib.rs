//! `bench_hnsw`'s routing step in wasm: the engine's flat scan of the stored 4-bit centred
//! centroids (`StoredCentroids::open` + `dots` + sort, as `jikji_engine::ivf` ranks the
//! lists every query) against HNSW over the dequantized centroids (the bench's own graph,
//! `builder/examples/support/hnsw.rs`, included by path). Plain `extern "C"` exports, no
//! bindings: `run.mjs` copies the pages and queries of `bench_hnsw --wasm-dump` in and
//! times each call.

// The graph's byte count (and its deflate) is the native bench's business.
#[allow(dead_code)]
#[path = "../../../builder/examples/support/hnsw.rs"]
mod hnsw;

use jikji_format::paged::ivf::{IvfRoot, StoredCentroids};
use std::cell::RefCell;

const DIM: usize = 384;

#[derive(Default)]
struct State {
    root: Option<IvfRoot>,
    pages: Vec<Vec<u8>>,
    queries: Vec<Vec<f32>>,
    centroids: Option<StoredCentroids>,
    cf: Vec<Vec<f32>>,
    graph: Option<hnsw::Hnsw>,
    last: Vec<u32>,
}

thread_local! {
    static S: RefCell<State> = RefCell::new(State::default());
}

/// A buffer of `len` bytes for the caller to fill (leaked: the harness is short-lived).
#[no_mangle]
pub extern "C" fn alloc(len: usize) -> *mut u8 {
    let mut v = vec![0u8; len];
    let p = v.as_mut_ptr();
    std::mem::forget(v);
    p
}

fn bytes(ptr: *const u8, len: usize) -> Vec<u8> {
    unsafe { std::slice::from_raw_parts(ptr, len) }.to_vec()
}

/// The IVF root (JSON).
#[no_mangle]
pub extern "C" fn set_root(ptr: *const u8, len: usize) {
    let root: IvfRoot = serde_json::from_slice(&bytes(ptr, len)).expect("root");
    S.with(|s| s.borrow_mut().root = Some(root));
}

/// The next centroid page's raw body.
#[no_mangle]
pub extern "C" fn add_page(ptr: *const u8, len: usize) {
    let b = bytes(ptr, len);
    S.with(|s| s.borrow_mut().pages.push(b));
}

/// The queries: little-endian f32, `DIM` each.
#[no_mangle]
pub extern "C" fn set_queries(ptr: *const u8, len: usize) {
    let b = bytes(ptr, len);
    let qs = b
        .chunks_exact(4 * DIM)
        .map(|q| {
            q.chunks_exact(4)
                .map(|x| f32::from_le_bytes(x.try_into().unwrap()))
                .collect()
        })
        .collect();
    S.with(|s| s.borrow_mut().queries = qs);
}

/// Decodes the centroid pages (what the engine does every query); returns the list count.
#[no_mangle]
pub extern "C" fn decode() -> u32 {
    S.with(|s| {
        let mut s = s.borrow_mut();
        let c = StoredCentroids::open(s.root.as_ref().unwrap(), &s.pages, DIM).expect("centroids");
        let n = c.len() as u32;
        s.centroids = Some(c);
        n
    })
}

/// The flat scan of query `qi`: every stored centroid's `q·ĉ`, sorted, the first `np`
/// kept (for [`top`]).
#[no_mangle]
pub extern "C" fn flat4(qi: usize, np: usize) {
    S.with(|s| {
        let mut s = s.borrow_mut();
        let c = s.centroids.as_ref().unwrap();
        let q = &s.queries[qi];
        let mut o: Vec<(u32, f32)> = c
            .dots(q)
            .into_iter()
            .enumerate()
            .map(|(j, d)| (j as u32, d))
            .collect();
        o.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        s.last = o[..np.min(o.len())].iter().map(|x| x.0).collect();
    })
}

/// The `i`-th list of the last routing.
#[no_mangle]
pub extern "C" fn top(i: usize) -> u32 {
    S.with(|s| s.borrow().last.get(i).copied().unwrap_or(u32::MAX))
}

/// Dequantizes the centroids (HNSW's nodes).
#[no_mangle]
pub extern "C" fn dequantize() {
    S.with(|s| {
        let mut s = s.borrow_mut();
        let c = s.centroids.as_ref().unwrap();
        let cf = (0..c.len()).map(|j| c.get(j)).collect();
        s.cf = cf;
    })
}

fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// The flat scan over the dequantized f32 centroids (HNSW's kernel).
#[no_mangle]
pub extern "C" fn flat32(qi: usize, np: usize) {
    S.with(|s| {
        let mut s = s.borrow_mut();
        let q = &s.queries[qi];
        let mut o: Vec<(u32, f32)> =
            s.cf.iter()
                .enumerate()
                .map(|(j, c)| (j as u32, dot(c, q)))
                .collect();
        let k = np.min(o.len());
        o.select_nth_unstable_by(k - 1, |a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        o.truncate(k);
        o.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        s.last = o.iter().map(|x| x.0).collect();
    })
}

/// Builds the graph over the dequantized centroids.
#[no_mangle]
pub extern "C" fn build(m: usize, efc: usize) {
    S.with(|s| {
        let mut s = s.borrow_mut();
        let cf = std::mem::take(&mut s.cf);
        let g = hnsw::Hnsw::build(cf.len(), m, efc, 0x6873, |x, y| {
            dot(&cf[x as usize], &cf[y as usize])
        });
        s.cf = cf;
        s.graph = Some(g);
    })
}

/// HNSW routing of query `qi`: the `np` nearest centroids with ef `ef`; returns the
/// similarities computed.
#[no_mangle]
pub extern "C" fn route(qi: usize, np: usize, ef: usize) -> u32 {
    S.with(|s| {
        let mut s = s.borrow_mut();
        let st = &mut *s;
        let q = &st.queries[qi];
        let cf = &st.cf;
        let (r, w) = st
            .graph
            .as_mut()
            .unwrap()
            .search(np, ef, |x| dot(&cf[x as usize], q));
        st.last = r.iter().map(|x| x.0).collect();
        w.evals as u32
    })
}

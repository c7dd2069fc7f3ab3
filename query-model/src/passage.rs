//! The forward pass for **many passages at once**, natively (the builder's embedding of book
//! chunks): the same network as [`QueryModel::embed_ids`], laid out for throughput.
//!
//! - the linear layers' Q4_0 weights are dequantised **once** at load time into f32 panels of
//!   [`NR`] output columns (`[N / NR][K][NR]`, ~85 MB for e5-small; 64-byte aligned),
//!   multiplied by a register-blocked kernel chosen at run time: AVX-512F [`MR`] tokens ×
//!   [`NR`] outputs; AVX2 + FMA [`MR_AVX2`] × [`NR_AVX2`] over 16-wide panels (the tile
//!   that fits AVX2's 16 registers, as in BLIS/MLAS); plain Rust elsewhere;
//! - attention of a head of width 32 in tiles of query rows (AVX-512F 8, AVX2 6): each key
//!   and value row loaded once per tile;
//! - Q, K and V are one fused `[3H × H]` matmul;
//! - sequences are **never padded**: several are packed one after another into one token
//!   matrix for the linear layers (whose rows are independent), and attention runs per
//!   sequence over its own positions, so no position is masked and none is wasted;
//! - softmax's `exp` and GELU's `erf` are branch-free polynomials that the compiler vectorises
//!   ([`exp_approx`], [`erf_approx`]; errors bounded in the unit tests against f64).
//!
//! Vectors equal [`QueryModel::embed_ids`]'s (and the ONNX model's) up to f32 rounding: the
//! same weights, summed in another order (tests: `tests/agree.rs`).

// Kernels index several arrays by the same lane or row number; iterators would hide the tiling.
#![allow(clippy::needless_range_loop)]

use crate::kernels::{dequant_row, layer_norm, Q4Matrix};
use crate::{Config, ModelError, QueryModel, RowSource, RowTable, MAX_TOKENS};

/// Output columns per weight panel (two AVX-512 registers, four AVX2 registers).
pub const NR: usize = 32;
/// Tokens per register tile.
pub const MR: usize = 8;

/// Tokens packed into one forward pass by [`PassageModel::embed_many`] (several short
/// sequences share it; a longer sequence goes alone): large enough that each weight panel,
/// once in cache, serves many tokens; small enough that one thread's activations
/// (`tokens × 1536` floats for the FFN) stay a few MB.
pub const PACK_TOKENS: usize = 1024;

/// Output columns per weight panel of the AVX2 kernel (two AVX2 registers): its tile is
/// [`MR_AVX2`] tokens × 16 outputs, 12 accumulators + 2 weight registers + 1 broadcast of the
/// 16 `ymm` registers, so nothing spills and each step is 8 loads for 12 fused multiply-adds.
pub const NR_AVX2: usize = 16;
/// Tokens per register tile of the AVX2 kernel.
pub const MR_AVX2: usize = 6;

/// One cache line of 16 f32s: the panels' storage unit, so that every panel (and, with
/// 16-wide panels, every panel row) starts on a 64-byte boundary and no vector load splits
/// a cache line.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Line([f32; 16]);

/// A weight matrix `N × K` (out × in) in f32 panels of `nr` outputs ([`NR`], or
/// [`NR_AVX2`] for the AVX2 kernel): element `(n, k)` is at
/// `(n / nr) · K · nr + k · nr + n % nr`. `N` is a multiple of `nr`.
struct Panels {
    n: usize,
    k: usize,
    nr: usize,
    w: Vec<Line>,
    bias: Vec<f32>,
}

impl Panels {
    /// Dequantises the Q4_0 matrices `parts` (stacked along N, all with the same K) and their
    /// biases into panels of `nr` (16 or 32) outputs.
    fn from_q4(parts: &[&(Q4Matrix, Vec<f32>)], nr: usize) -> Self {
        assert!(nr == NR || nr == NR_AVX2);
        let k = parts[0].0.cols;
        let n: usize = parts.iter().map(|p| p.0.rows).sum();
        assert!(n.is_multiple_of(nr), "N = {n} is not a multiple of {nr}");
        let mut lines = vec![Line([0.0; 16]); n * k / 16];
        let mut bias = Vec::with_capacity(n);
        let mut row = vec![0f32; k];
        {
            let w = as_f32_mut(&mut lines);
            let mut o = 0;
            for (m, b) in parts.iter().map(|p| (&p.0, &p.1)) {
                assert_eq!(m.cols, k);
                let rb = Q4Matrix::row_bytes(k);
                for r in 0..m.rows {
                    dequant_row(&m.bytes[r * rb..(r + 1) * rb], &mut row);
                    let (p, c) = (o / nr, o % nr);
                    for (kk, v) in row.iter().enumerate() {
                        w[p * k * nr + kk * nr + c] = *v;
                    }
                    o += 1;
                }
                bias.extend_from_slice(b);
            }
        }
        Panels {
            n,
            k,
            nr,
            w: lines,
            bias,
        }
    }

    /// The panels as one f32 slice (`N · K` floats, layout above).
    fn w(&self) -> &[f32] {
        // SAFETY: `Line` is `repr(C)` around `[f32; 16]` (size 64, no padding), so `len`
        // lines are `16 · len` contiguous, initialised f32s.
        unsafe { std::slice::from_raw_parts(self.w.as_ptr().cast::<f32>(), self.w.len() * 16) }
    }
}

fn as_f32_mut(lines: &mut [Line]) -> &mut [f32] {
    // SAFETY: as in `Panels::w`; the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast::<f32>(), lines.len() * 16) }
}

struct PLayer {
    qkv: Panels,
    ao: Panels,
    aln: (Vec<f32>, Vec<f32>),
    fi: Panels,
    fo: Panels,
    oln: (Vec<f32>, Vec<f32>),
}

/// The passage encoder: [`QueryModel`]'s weights dequantised into matmul panels, plus the
/// token rows. Build once ([`PassageModel::new`], ~1 s) and share between threads.
pub struct PassageModel {
    cfg: Config,
    pos: Vec<f32>,
    emb_ln: (Vec<f32>, Vec<f32>),
    layers: Vec<PLayer>,
    rows: RowTable,
    isa: Isa,
}

impl std::fmt::Debug for PassageModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassageModel")
            .field("cfg", &self.cfg)
            .field("isa", &self.isa)
            .finish_non_exhaustive()
    }
}

/// Which kernel runs: chosen once from the CPU's features.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// AVX-512F (x86_64).
    Avx512,
    /// AVX2 + FMA (x86_64).
    Avx2,
    /// Plain Rust.
    Portable,
}

impl Isa {
    /// The best the CPU has.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                return Isa::Avx512;
            }
            if std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma")
            {
                return Isa::Avx2;
            }
        }
        Isa::Portable
    }
}

/// Scratch buffers of one forward pass, reused across calls on one thread.
#[derive(Default)]
struct Scratch {
    x: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    tmp: Vec<f32>,
    inner: Vec<f32>,
    kt: Vec<f32>,
    vh: Vec<f32>,
    scores: Vec<f32>,
}

impl PassageModel {
    /// Dequantises `model`'s linear layers into panels and takes `rows` (the whole token
    /// table). Uses the best kernel the CPU has ([`Isa::detect`]).
    pub fn new(model: &QueryModel, rows: RowTable) -> Self {
        Self::with_isa(model, rows, Isa::detect())
    }

    /// As [`PassageModel::new`] with a given kernel (tests compare them). An `isa` the CPU
    /// lacks falls back to [`Isa::Portable`].
    pub fn with_isa(model: &QueryModel, rows: RowTable, isa: Isa) -> Self {
        let isa = match isa {
            Isa::Portable => Isa::Portable,
            want => {
                let have = Isa::detect();
                if have == Isa::Avx512 || have == want {
                    want
                } else {
                    have
                }
            }
        };
        let nr = if isa == Isa::Avx2 { NR_AVX2 } else { NR };
        let layers = model
            .layers
            .iter()
            .map(|l| PLayer {
                qkv: Panels::from_q4(&[&l.q, &l.k, &l.v], nr),
                ao: Panels::from_q4(&[&l.ao], nr),
                aln: l.aln.clone(),
                fi: Panels::from_q4(&[&l.fi], nr),
                fo: Panels::from_q4(&[&l.fo], nr),
                oln: l.oln.clone(),
            })
            .collect();
        PassageModel {
            cfg: model.cfg,
            pos: model.pos.clone(),
            emb_ln: model.emb_ln.clone(),
            layers,
            rows,
            isa,
        }
    }

    /// The kernel in use.
    pub fn isa(&self) -> Isa {
        self.isa
    }

    /// The dimensions.
    pub fn config(&self) -> Config {
        self.cfg
    }

    /// Embeds the sequences `seqs` (each `<s>` … `</s>`, 1..=[`MAX_TOKENS`] ids, unpadded) in
    /// one forward pass on this thread: one L2-normalised vector of `hidden` (384) f32s per
    /// sequence, in order. Errors: [`ModelError::Length`], [`ModelError::TokenId`].
    pub fn embed_packed(&self, seqs: &[&[u32]]) -> Result<Vec<Vec<f32>>, ModelError> {
        let mut s = Scratch::default();
        self.forward(seqs, &mut s)
    }

    /// Embeds many sequences on `threads` threads (`0` is taken as 1): sorted by length
    /// (longest first), packed into passes of up to [`PACK_TOKENS`] tokens (a longer
    /// sequence alone), the passes shared out to the threads as they finish. Returns the
    /// vectors **in input order**. `on_progress(n)` is called after each pass with the number
    /// of sequences finished so far (monotonic, ending at `seqs.len()`), from any thread.
    /// Errors: the first met ([`ModelError::Length`], [`ModelError::TokenId`]); remaining
    /// passes are then skipped.
    pub fn embed_many(
        &self,
        seqs: &[&[u32]],
        threads: usize,
        on_progress: &(dyn Fn(usize) + Sync),
    ) -> Result<Vec<Vec<f32>>, ModelError> {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Mutex;
        let n = seqs.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&i| std::cmp::Reverse(seqs[i].len()));
        let mut passes: Vec<&[usize]> = Vec::new();
        let mut start = 0;
        while start < n {
            let mut end = start + 1;
            let mut tokens = seqs[order[start]].len();
            while end < n && tokens + seqs[order[end]].len() <= PACK_TOKENS {
                tokens += seqs[order[end]].len();
                end += 1;
            }
            passes.push(&order[start..end]);
            start = end;
        }
        let next = AtomicUsize::new(0);
        let done = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let first_error: Mutex<Option<ModelError>> = Mutex::new(None);
        let results: Mutex<Vec<Option<Vec<f32>>>> = Mutex::new(vec![None; n]);
        let progress_lock = Mutex::new(());
        let worker = || {
            let mut scratch = Scratch::default();
            loop {
                if failed.load(Ordering::Relaxed) {
                    return;
                }
                let p = next.fetch_add(1, Ordering::Relaxed);
                let Some(pass) = passes.get(p) else { return };
                let group: Vec<&[u32]> = pass.iter().map(|&i| seqs[i]).collect();
                match self.forward(&group, &mut scratch) {
                    Ok(vs) => {
                        {
                            let mut r = results.lock().unwrap();
                            for (k, v) in vs.into_iter().enumerate() {
                                r[pass[k]] = Some(v);
                            }
                        }
                        let _g = progress_lock.lock().unwrap();
                        let d = done.fetch_add(pass.len(), Ordering::SeqCst) + pass.len();
                        on_progress(d);
                    }
                    Err(e) => {
                        failed.store(true, Ordering::Relaxed);
                        first_error.lock().unwrap().get_or_insert(e);
                        return;
                    }
                }
            }
        };
        let workers = threads.max(1).min(passes.len());
        if workers <= 1 {
            worker();
        } else {
            std::thread::scope(|s| {
                for _ in 0..workers {
                    s.spawn(worker);
                }
            });
        }
        if let Some(e) = first_error.into_inner().unwrap() {
            return Err(e);
        }
        Ok(results
            .into_inner()
            .unwrap()
            .into_iter()
            .map(|v| v.expect("every pass ran"))
            .collect())
    }

    fn forward(&self, seqs: &[&[u32]], s: &mut Scratch) -> Result<Vec<Vec<f32>>, ModelError> {
        let c = self.cfg;
        let h = c.hidden;
        let total: usize = seqs.iter().map(|q| q.len()).sum();
        for q in seqs {
            if q.is_empty() || q.len() > c.max_pos.min(MAX_TOKENS) {
                return Err(ModelError::Length(q.len()));
            }
        }
        if seqs.is_empty() {
            return Ok(Vec::new());
        }
        // Embeddings: word row + (position + type 0), LayerNorm.
        s.x.clear();
        s.x.resize(total * h, 0.0);
        let mut t = 0;
        for q in seqs {
            for (p, &id) in q.iter().enumerate() {
                let row = self
                    .rows
                    .row(id)
                    .filter(|r| r.len() == Q4Matrix::row_bytes(h))
                    .ok_or(ModelError::TokenId {
                        id,
                        pos: p,
                        rows: self.rows.rows(),
                    })?;
                let xr = &mut s.x[t * h..(t + 1) * h];
                dequant_row(row, xr);
                for (v, pp) in xr.iter_mut().zip(&self.pos[p * h..(p + 1) * h]) {
                    *v += pp;
                }
                t += 1;
            }
        }
        layer_norm(&mut s.x, &self.emb_ln.0, &self.emb_ln.1, c.eps);
        for l in &self.layers {
            self.layer(l, seqs, total, s);
        }
        // Mean over each sequence's positions, then L2.
        let mut out = Vec::with_capacity(seqs.len());
        let mut t = 0;
        for q in seqs {
            let mut v = vec![0f32; h];
            for row in s.x[t * h..(t + q.len()) * h].chunks_exact(h) {
                for (o, x) in v.iter_mut().zip(row) {
                    *o += x;
                }
            }
            let inv = 1.0 / q.len() as f32;
            v.iter_mut().for_each(|o| *o *= inv);
            let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-12);
            v.iter_mut().for_each(|o| *o /= norm);
            out.push(v);
            t += q.len();
        }
        Ok(out)
    }

    fn layer(&self, l: &PLayer, seqs: &[&[u32]], total: usize, s: &mut Scratch) {
        let c = self.cfg;
        let h = c.hidden;
        resize(&mut s.qkv, total * 3 * h);
        resize(&mut s.ctx, total * h);
        resize(&mut s.tmp, total * h);
        resize(&mut s.inner, total * c.ffn);
        self.matmul(&s.x, &l.qkv, &mut s.qkv);
        let mut t = 0;
        for q in seqs {
            self.attention(t, q.len(), s);
            t += q.len();
        }
        self.matmul(&s.ctx, &l.ao, &mut s.tmp);
        add_assign(&mut s.x, &s.tmp);
        layer_norm(&mut s.x, &l.aln.0, &l.aln.1, c.eps);
        self.matmul(&s.x, &l.fi, &mut s.inner);
        self.gelu(&mut s.inner);
        self.matmul(&s.inner, &l.fo, &mut s.tmp);
        add_assign(&mut s.x, &s.tmp);
        layer_norm(&mut s.x, &l.oln.0, &l.oln.1, c.eps);
    }

    /// Self-attention of the sequence at tokens `t0..t0 + len` of `s.qkv` into `s.ctx`.
    fn attention(&self, t0: usize, len: usize, s: &mut Scratch) {
        let c = self.cfg;
        let h = c.hidden;
        let hd = h / c.heads;
        let scale = 1.0 / (hd as f32).sqrt();
        resize(&mut s.kt, hd * len);
        resize(&mut s.vh, len * hd);
        resize(&mut s.scores, len);
        let w = 3 * h;
        #[cfg(target_arch = "x86_64")]
        if self.isa == Isa::Avx2 && hd == 32 {
            // K transposed with rows padded to whole 16-key steps (padding zeroed), query
            // rows in tiles of ATT_ROWS_AVX2 ([`x86::attend_rows32_avx2`]).
            let ls = x86::att_stride_avx2(len);
            resize(&mut s.kt, hd * ls);
            resize(&mut s.scores, x86::ATT_ROWS_AVX2 * ls);
            for head in 0..c.heads {
                let (qo, ko, vo) = (head * hd, h + head * hd, 2 * h + head * hd);
                for j in 0..len {
                    let row = &s.qkv[(t0 + j) * w..(t0 + j + 1) * w];
                    for d in 0..hd {
                        s.kt[d * ls + j] = row[ko + d];
                    }
                    s.vh[j * hd..(j + 1) * hd].copy_from_slice(&row[vo..vo + hd]);
                }
                for d in 0..hd {
                    s.kt[d * ls + len..(d + 1) * ls].fill(0.0);
                }
                let mut i = 0;
                while i < len {
                    let m = (len - i).min(x86::ATT_ROWS_AVX2);
                    let q = &s.qkv[(t0 + i) * w + qo..];
                    let out = &mut s.ctx[(t0 + i) * h + qo..];
                    // SAFETY: the CPU has AVX2 + FMA (`with_isa` checked); the kernel asserts
                    // the shapes.
                    unsafe {
                        x86::attend_rows32_avx2(
                            m,
                            q,
                            w,
                            &s.kt,
                            &s.vh,
                            len,
                            scale,
                            &mut s.scores,
                            out,
                            h,
                        )
                    };
                    i += m;
                }
            }
            return;
        }
        for head in 0..c.heads {
            let (qo, ko, vo) = (head * hd, h + head * hd, 2 * h + head * hd);
            // K of this head transposed ([hd][len]) and V contiguous ([len][hd]).
            for j in 0..len {
                let row = &s.qkv[(t0 + j) * w..(t0 + j + 1) * w];
                for d in 0..hd {
                    s.kt[d * len + j] = row[ko + d];
                }
                s.vh[j * hd..(j + 1) * hd].copy_from_slice(&row[vo..vo + hd]);
            }
            #[cfg(target_arch = "x86_64")]
            if self.isa == Isa::Avx512 && hd == 32 {
                // Query rows in tiles of ATT_ROWS: each key and value row loaded once per
                // tile, not once per query row.
                resize(&mut s.scores, x86::ATT_ROWS * len);
                let mut i = 0;
                while i < len {
                    let m = (len - i).min(x86::ATT_ROWS);
                    let q = &s.qkv[(t0 + i) * w + qo..];
                    let out = &mut s.ctx[(t0 + i) * h + qo..];
                    // SAFETY: the CPU has AVX-512F (`with_isa` checked); the kernel asserts
                    // the shapes.
                    unsafe {
                        x86::attend_rows32_avx512(
                            m,
                            q,
                            w,
                            &s.kt,
                            &s.vh,
                            len,
                            scale,
                            &mut s.scores,
                            out,
                            h,
                        )
                    };
                    i += m;
                }
                continue;
            }
            for i in 0..len {
                let qi = &s.qkv[(t0 + i) * w + qo..(t0 + i) * w + qo + hd];
                match self.isa {
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: the CPU has these features (`with_isa` checked).
                    Isa::Avx512 => unsafe {
                        x86::attend_row_avx512(qi, &s.kt, &s.vh, scale, &mut s.scores)
                    },
                    #[cfg(target_arch = "x86_64")]
                    // SAFETY: as above.
                    Isa::Avx2 => unsafe {
                        x86::attend_row_avx2(qi, &s.kt, &s.vh, scale, &mut s.scores)
                    },
                    _ => attend_row(qi, &s.kt, &s.vh, scale, &mut s.scores),
                }
                // The context row is in scores[..hd] after attend_row.
                let out = &mut s.ctx[(t0 + i) * h + qo..(t0 + i) * h + qo + hd];
                out.copy_from_slice(&s.scores[len..len + hd]);
            }
        }
    }

    fn gelu(&self, x: &mut [f32]) {
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has these features (`with_isa` checked).
            Isa::Avx512 => unsafe { x86::gelu_avx512(x) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 => unsafe { x86::gelu_avx2(x) },
            _ => gelu_slice(x),
        }
    }

    /// `y[t][n] = bias[n] + Σ_k x[t][k] · W[n][k]`.
    fn matmul(&self, x: &[f32], w: &Panels, y: &mut [f32]) {
        assert_eq!(x.len() % w.k, 0);
        assert_eq!(y.len(), x.len() / w.k * w.n);
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX-512F (`with_isa` checked); shapes checked above.
            Isa::Avx512 => unsafe { x86::matmul_avx512(x, w, y) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX2 + FMA; shapes checked above.
            Isa::Avx2 => unsafe { x86::matmul_avx2(x, w, y) },
            _ => matmul_portable(x, w, y),
        }
    }
}

fn resize(v: &mut Vec<f32>, n: usize) {
    if v.len() != n {
        v.clear();
        v.resize(n, 0.0);
    }
}

fn add_assign(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Plain-Rust panel matmul (reference for the SIMD kernels), any panel width `w.nr` ≤ 32.
fn matmul_portable(x: &[f32], w: &Panels, y: &mut [f32]) {
    let (n, k, nr) = (w.n, w.k, w.nr);
    let t = x.len() / k;
    let ww = w.w();
    for p in 0..n / nr {
        let panel = &ww[p * k * nr..(p + 1) * k * nr];
        for r in 0..t {
            let xr = &x[r * k..(r + 1) * k];
            let mut acc = [0f32; NR];
            for (kk, &xv) in xr.iter().enumerate() {
                let wr = &panel[kk * nr..(kk + 1) * nr];
                for c in 0..nr {
                    acc[c] += xv * wr[c];
                }
            }
            for c in 0..nr {
                y[r * n + p * nr + c] = acc[c] + w.bias[p * nr + c];
            }
        }
    }
}

/// One query row of attention: `scores` (resized to `len + hd`) gets the softmax weights in
/// `[..len]` and the context row in `[len..len + hd]`.
#[inline(always)]
fn attend_row(qi: &[f32], kt: &[f32], vh: &[f32], scale: f32, scores: &mut Vec<f32>) {
    let hd = qi.len();
    let len = kt.len() / hd;
    scores.clear();
    scores.resize(len + hd, 0.0);
    let (sc, ctx) = scores.split_at_mut(len);
    // Scores 64 keys at a time (four independent 16-wide sums in registers, so the fused
    // multiply-adds do not wait on each other), then 16 at a time, then one by one.
    let qs: Vec<f32> = qi.iter().map(|q| q * scale).collect();
    let mut jc = 0;
    while jc + 64 <= len {
        let mut acc = [0f32; 64];
        for (d, &qd) in qs.iter().enumerate() {
            let kr = &kt[d * len + jc..d * len + jc + 64];
            for l in 0..64 {
                acc[l] = qd.mul_add(kr[l], acc[l]);
            }
        }
        sc[jc..jc + 64].copy_from_slice(&acc);
        jc += 64;
    }
    while jc + 16 <= len {
        let mut acc = [0f32; 16];
        for (d, &qd) in qs.iter().enumerate() {
            let kr = &kt[d * len + jc..d * len + jc + 16];
            for l in 0..16 {
                acc[l] = qd.mul_add(kr[l], acc[l]);
            }
        }
        sc[jc..jc + 16].copy_from_slice(&acc);
        jc += 16;
    }
    for (d, &qd) in qs.iter().enumerate() {
        for j in jc..len {
            sc[j] = qd.mul_add(kt[d * len + j], sc[j]);
        }
    }
    let inv = softmax_weights(sc);
    match hd {
        32 => weighted_sum::<32>(sc, vh, inv, ctx),
        64 => weighted_sum::<64>(sc, vh, inv, ctx),
        _ => {
            for (j, &p) in sc.iter().enumerate() {
                let p = p * inv;
                let vr = &vh[j * hd..(j + 1) * hd];
                for (c, v) in ctx.iter_mut().zip(vr) {
                    *c += p * v;
                }
            }
        }
    }
}

/// Softmax weights of scores `sc` in place, unnormalised: `sc[j] = e^(sc[j] − max)`
/// ([`exp_approx`]); returns `1 / Σ sc[j]`, the factor of the weighted sum.
#[inline(always)]
fn softmax_weights(sc: &mut [f32]) -> f32 {
    // Max, exp and sum as separate loops, the reductions over 16 lanes, so that each one
    // vectorises (a scalar `sum +=` next to the exp would serialise the loop).
    let mut lanes = [f32::NEG_INFINITY; 16];
    let mut chunks = sc.chunks_exact(16);
    for c in &mut chunks {
        for l in 0..16 {
            lanes[l] = if c[l] > lanes[l] { c[l] } else { lanes[l] };
        }
    }
    let mut max = chunks
        .remainder()
        .iter()
        .fold(f32::NEG_INFINITY, |m, &v| if v > m { v } else { m });
    for l in lanes {
        max = if l > max { l } else { max };
    }
    for v in sc.iter_mut() {
        *v = exp_approx(*v - max);
    }
    let mut lanes = [0f32; 16];
    let mut chunks = sc.chunks_exact(16);
    for c in &mut chunks {
        for l in 0..16 {
            lanes[l] += c[l];
        }
    }
    let sum = lanes.iter().sum::<f32>() + chunks.remainder().iter().sum::<f32>();
    1.0 / sum
}

/// `ctx = inv · Σ_j p[j] · v[j]` for rows of `HD` floats, summed in registers (a sum kept in
/// memory would make each step wait on the last one's store).
#[inline(always)]
fn weighted_sum<const HD: usize>(p: &[f32], vh: &[f32], inv: f32, ctx: &mut [f32]) {
    // Two sets of sums (even and odd keys) so consecutive steps do not wait on each other.
    let (mut a0, mut a1) = ([0f32; HD], [0f32; HD]);
    let mut pairs = p.chunks_exact(2).zip(vh.chunks_exact(2 * HD));
    for (pj, vr) in &mut pairs {
        for d in 0..HD {
            a0[d] = pj[0].mul_add(vr[d], a0[d]);
            a1[d] = pj[1].mul_add(vr[HD + d], a1[d]);
        }
    }
    if p.len() % 2 == 1 {
        let j = p.len() - 1;
        for d in 0..HD {
            a0[d] = p[j].mul_add(vh[j * HD + d], a0[d]);
        }
    }
    for d in 0..HD {
        ctx[d] = (a0[d] + a1[d]) * inv;
    }
}

#[inline(always)]
fn gelu_slice(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = 0.5 * *v * (1.0 + erf_approx(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// `e^x` for `x ≤ 0` (softmax after subtracting the max; larger `x` are clamped at 88),
/// branch-free so loops over it vectorise: `2^n · p(r)` with `n = round(x / ln 2)`,
/// `r = x − n ln 2` (Cody–Waite split) and a degree-6 Taylor polynomial on |r| ≤ ln2/2.
/// Relative error < 4e-7 on [-87, 0] (unit test); below −87 it returns 0.
#[inline(always)]
pub fn exp_approx(x: f32) -> f32 {
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E + 0.5).floor();
    let r = x - n * 0.693_145_75 - n * 1.428_606_8e-6;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0 + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0))))));
    let bits = ((n as i32 + 127) << 23) as u32;
    p * f32::from_bits(bits)
}

/// `erf(x)`, branch-free so loops over it vectorise: the rational approximation of Eigen's
/// `generic_fast_erf_float` (odd degree-13 numerator over even degree-8 denominator, input
/// clamped to [−4, 4]). Absolute error < 1e-6 against f64 `erf` (unit test).
// The coefficients as Eigen prints them (more digits than f32 keeps).
#[allow(clippy::excessive_precision)]
#[inline(always)]
pub fn erf_approx(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_600e-3;
    p = x2 * p + -1.609_603_3e-2;
    p *= x;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_474e-2;
    p / q
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    //! The AVX-512F and AVX2 + FMA versions. Each function requires a CPU with its features
    //! (callers check).
    use super::{attend_row, gelu_slice, softmax_weights, Panels, MR, MR_AVX2, NR, NR_AVX2};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) fn gelu_avx512(x: &mut [f32]) {
        gelu_slice(x)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn gelu_avx2(x: &mut [f32]) {
        gelu_slice(x)
    }

    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) fn attend_row_avx512(
        qi: &[f32],
        kt: &[f32],
        vh: &[f32],
        scale: f32,
        scores: &mut Vec<f32>,
    ) {
        attend_row(qi, kt, vh, scale, scores)
    }

    #[target_feature(enable = "avx2,fma")]
    pub(super) fn attend_row_avx2(
        qi: &[f32],
        kt: &[f32],
        vh: &[f32],
        scale: f32,
        scores: &mut Vec<f32>,
    ) {
        attend_row(qi, kt, vh, scale, scores)
    }

    /// Query rows per attention tile ([`attend_rows32_avx512`]).
    pub(super) const ATT_ROWS: usize = 8;

    /// Attention of `m` (1 ..= [`ATT_ROWS`]) query rows of one head of width 32 over `len`
    /// keys: row `r`'s query is `q[r·qs .. r·qs + 32]`, its context goes to
    /// `out[r·os .. r·os + 32]`; `kt` is K transposed (`[32][len]`), `vh` is V (`[len][32]`),
    /// `sc` scratch of at least `ATT_ROWS · len`. The scores of all `m` rows are made 32
    /// keys at a time (each key column loaded once for the tile, 2·m accumulators), then
    /// each row's softmax ([`softmax_weights`]), then the weighted sums of all `m` rows one
    /// value row at a time: the memory traffic of one row's attention for `m` rows. The same
    /// sums as [`attend_row`], in another order.
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend_rows32_avx512(
        m: usize,
        q: &[f32],
        qs: usize,
        kt: &[f32],
        vh: &[f32],
        len: usize,
        scale: f32,
        sc: &mut [f32],
        out: &mut [f32],
        os: usize,
    ) {
        match m {
            1 => rows32::<1>(q, qs, kt, vh, len, scale, sc, out, os),
            2 => rows32::<2>(q, qs, kt, vh, len, scale, sc, out, os),
            3 => rows32::<3>(q, qs, kt, vh, len, scale, sc, out, os),
            4 => rows32::<4>(q, qs, kt, vh, len, scale, sc, out, os),
            5 => rows32::<5>(q, qs, kt, vh, len, scale, sc, out, os),
            6 => rows32::<6>(q, qs, kt, vh, len, scale, sc, out, os),
            7 => rows32::<7>(q, qs, kt, vh, len, scale, sc, out, os),
            _ => rows32::<8>(q, qs, kt, vh, len, scale, sc, out, os),
        }
    }

    #[target_feature(enable = "avx512f,avx2,fma")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn rows32<const M: usize>(
        q: &[f32],
        qs: usize,
        kt: &[f32],
        vh: &[f32],
        len: usize,
        scale: f32,
        sc: &mut [f32],
        out: &mut [f32],
        os: usize,
    ) {
        const HD: usize = 32;
        assert!(len > 0 && kt.len() == HD * len && vh.len() == len * HD);
        assert!(q.len() >= (M - 1) * qs + HD && out.len() >= (M - 1) * os + HD);
        assert!(sc.len() >= M * len);
        let mut qv = [[0f32; HD]; M];
        for r in 0..M {
            for d in 0..HD {
                qv[r][d] = q[r * qs + d] * scale;
            }
        }
        // Scores, 32 keys at a time (masked at the end).
        let mut j = 0;
        while j < len {
            let rem = len - j;
            let lanes = |n: usize| -> __mmask16 {
                if n >= 16 {
                    0xFFFF
                } else {
                    ((1u32 << n) - 1) as __mmask16
                }
            };
            let m0 = lanes(rem);
            let m1 = lanes(rem.saturating_sub(16));
            let mut a0 = [_mm512_setzero_ps(); M];
            let mut a1 = [_mm512_setzero_ps(); M];
            let kp = kt.as_ptr();
            for d in 0..HD {
                // SAFETY: lanes past `len` are masked off (a masked-off lane reads nothing);
                // the others are kt[d·len + j ..][..rem.min(32)], in bounds.
                unsafe {
                    let at = kp.wrapping_add(d * len + j);
                    let k0 = _mm512_maskz_loadu_ps(m0, at);
                    let k1 = _mm512_maskz_loadu_ps(m1, at.wrapping_add(16));
                    for r in 0..M {
                        let x = _mm512_set1_ps(qv[r][d]);
                        a0[r] = _mm512_fmadd_ps(x, k0, a0[r]);
                        a1[r] = _mm512_fmadd_ps(x, k1, a1[r]);
                    }
                }
            }
            for r in 0..M {
                // SAFETY: as above, into sc[r·len + j ..][..rem.min(32)] (sc ≥ M·len).
                unsafe {
                    let at = sc.as_mut_ptr().wrapping_add(r * len + j);
                    _mm512_mask_storeu_ps(at, m0, a0[r]);
                    _mm512_mask_storeu_ps(at.wrapping_add(16), m1, a1[r]);
                }
            }
            j += 32;
        }
        let mut inv = [0f32; M];
        for r in 0..M {
            inv[r] = softmax_weights(&mut sc[r * len..(r + 1) * len]);
        }
        // Context rows: Σ_j p[r][j] · v[j], one value row (two registers) at a time.
        let mut c0 = [_mm512_setzero_ps(); M];
        let mut c1 = [_mm512_setzero_ps(); M];
        for j in 0..len {
            // SAFETY: j < len: vh[j·32 ..][..32] and sc[r·len + j] are in bounds (asserted).
            unsafe {
                let vp = vh.as_ptr().add(j * HD);
                let v0 = _mm512_loadu_ps(vp);
                let v1 = _mm512_loadu_ps(vp.add(16));
                for r in 0..M {
                    let p = _mm512_set1_ps(*sc.get_unchecked(r * len + j));
                    c0[r] = _mm512_fmadd_ps(p, v0, c0[r]);
                    c1[r] = _mm512_fmadd_ps(p, v1, c1[r]);
                }
            }
        }
        for r in 0..M {
            // SAFETY: out[r·os ..][..32] is in bounds (asserted).
            unsafe {
                let f = _mm512_set1_ps(inv[r]);
                let o = out.as_mut_ptr().add(r * os);
                _mm512_storeu_ps(o, _mm512_mul_ps(c0[r], f));
                _mm512_storeu_ps(o.add(16), _mm512_mul_ps(c1[r], f));
            }
        }
    }

    /// Panel-major loop: each panel (`K × 32` floats) stays in cache while every token tile
    /// passes over it.
    #[target_feature(enable = "avx512f,avx2,fma")]
    pub(super) fn matmul_avx512(x: &[f32], w: &Panels, y: &mut [f32]) {
        let (n, k) = (w.n, w.k);
        let t = x.len() / k;
        for p in 0..n / NR {
            let panel = &w.w()[p * k * NR..(p + 1) * k * NR];
            let bias = &w.bias[p * NR..(p + 1) * NR];
            let mut r = 0;
            while r + MR <= t {
                tile512::<MR>(
                    &x[r * k..(r + MR) * k],
                    k,
                    panel,
                    bias,
                    y,
                    r * n + p * NR,
                    n,
                );
                r += MR;
            }
            match t - r {
                0 => {}
                1 => tile512::<1>(&x[r * k..], k, panel, bias, y, r * n + p * NR, n),
                2 => tile512::<2>(&x[r * k..], k, panel, bias, y, r * n + p * NR, n),
                3 => tile512::<3>(&x[r * k..], k, panel, bias, y, r * n + p * NR, n),
                4 => tile512::<4>(&x[r * k..], k, panel, bias, y, r * n + p * NR, n),
                5 => tile512::<5>(&x[r * k..], k, panel, bias, y, r * n + p * NR, n),
                6 => tile512::<6>(&x[r * k..], k, panel, bias, y, r * n + p * NR, n),
                _ => tile512::<7>(&x[r * k..], k, panel, bias, y, r * n + p * NR, n),
            }
        }
    }

    /// `M` tokens (rows of `x`, `M × k`) × one panel: 2·M accumulators of 16 floats.
    #[target_feature(enable = "avx512f,avx2,fma")]
    #[inline]
    fn tile512<const M: usize>(
        x: &[f32],
        k: usize,
        panel: &[f32],
        bias: &[f32],
        y: &mut [f32],
        y0: usize,
        ystride: usize,
    ) {
        assert!(x.len() >= M * k && panel.len() == k * NR && bias.len() == NR);
        assert!(y.len() >= y0 + (M - 1) * ystride + NR);
        let mut acc = [[_mm512_setzero_ps(); 2]; M];
        let (xp, wp) = (x.as_ptr(), panel.as_ptr());
        for kk in 0..k {
            // SAFETY: kk < k, so the panel reads (kk·32 .. kk·32 + 32) and the x reads
            // (r·k + kk, r < M) are in bounds (asserted above).
            unsafe {
                let w0 = _mm512_loadu_ps(wp.add(kk * NR));
                let w1 = _mm512_loadu_ps(wp.add(kk * NR + 16));
                for (r, a) in acc.iter_mut().enumerate() {
                    let xv = _mm512_set1_ps(*xp.add(r * k + kk));
                    a[0] = _mm512_fmadd_ps(w0, xv, a[0]);
                    a[1] = _mm512_fmadd_ps(w1, xv, a[1]);
                }
            }
        }
        // SAFETY: bias has 32 floats; each output row has 32 floats from y0 + r·ystride
        // (asserted above).
        unsafe {
            let b0 = _mm512_loadu_ps(bias.as_ptr());
            let b1 = _mm512_loadu_ps(bias.as_ptr().add(16));
            for (r, a) in acc.iter().enumerate() {
                let o = y.as_mut_ptr().add(y0 + r * ystride);
                _mm512_storeu_ps(o, _mm512_add_ps(a[0], b0));
                _mm512_storeu_ps(o.add(16), _mm512_add_ps(a[1], b1));
            }
        }
    }

    /// The AVX2 + FMA matmul over 16-wide panels ([`NR_AVX2`]): panel-major (each panel,
    /// `K × 16` floats = 24 or 96 kB, stays in L1/L2 while every token tile passes over it),
    /// tiles of [`MR_AVX2`] tokens × 16 outputs ([`tile6x16`]).
    #[target_feature(enable = "avx2,fma")]
    pub(super) fn matmul_avx2(x: &[f32], w: &Panels, y: &mut [f32]) {
        const R: usize = MR_AVX2;
        let (n, k) = (w.n, w.k);
        assert_eq!(w.nr, NR_AVX2);
        let t = x.len() / k;
        let ww = w.w();
        for p in 0..n / NR_AVX2 {
            let panel = &ww[p * k * NR_AVX2..(p + 1) * k * NR_AVX2];
            let bias = &w.bias[p * NR_AVX2..(p + 1) * NR_AVX2];
            let y0 = |r: usize| r * n + p * NR_AVX2;
            let mut r = 0;
            while r + R <= t {
                tile6x16::<R>(&x[r * k..(r + R) * k], k, panel, bias, y, y0(r), n);
                r += R;
            }
            match t - r {
                0 => {}
                1 => tile6x16::<1>(&x[r * k..], k, panel, bias, y, y0(r), n),
                2 => tile6x16::<2>(&x[r * k..], k, panel, bias, y, y0(r), n),
                3 => tile6x16::<3>(&x[r * k..], k, panel, bias, y, y0(r), n),
                4 => tile6x16::<4>(&x[r * k..], k, panel, bias, y, y0(r), n),
                _ => tile6x16::<5>(&x[r * k..], k, panel, bias, y, y0(r), n),
            }
        }
    }

    /// `M` tokens (rows of `x`, `M × k`) × one 16-wide panel: 2·M accumulators of 8 floats;
    /// per `k` step two weight loads and `M` broadcasts feed 2·M fused multiply-adds.
    #[target_feature(enable = "avx2,fma")]
    #[inline]
    fn tile6x16<const M: usize>(
        x: &[f32],
        k: usize,
        panel: &[f32],
        bias: &[f32],
        y: &mut [f32],
        y0: usize,
        ystride: usize,
    ) {
        assert!(x.len() >= M * k && panel.len() == k * NR_AVX2 && bias.len() == NR_AVX2);
        assert!(y.len() >= y0 + (M - 1) * ystride + NR_AVX2);
        let mut acc = [[_mm256_setzero_ps(); 2]; M];
        let (xp, wp) = (x.as_ptr(), panel.as_ptr());
        for kk in 0..k {
            // SAFETY: kk < k, so the panel reads (kk·16 .. kk·16 + 16) and the x reads
            // (r·k + kk, r < M) are in bounds (asserted above).
            unsafe {
                let w0 = _mm256_loadu_ps(wp.add(kk * NR_AVX2));
                let w1 = _mm256_loadu_ps(wp.add(kk * NR_AVX2 + 8));
                for (r, a) in acc.iter_mut().enumerate() {
                    let xv = _mm256_broadcast_ss(&*xp.add(r * k + kk));
                    a[0] = _mm256_fmadd_ps(w0, xv, a[0]);
                    a[1] = _mm256_fmadd_ps(w1, xv, a[1]);
                }
            }
        }
        // SAFETY: bias has 16 floats; each output row has 16 floats from y0 + r·ystride
        // (asserted above).
        unsafe {
            let b0 = _mm256_loadu_ps(bias.as_ptr());
            let b1 = _mm256_loadu_ps(bias.as_ptr().add(8));
            for (r, a) in acc.iter().enumerate() {
                let o = y.as_mut_ptr().add(y0 + r * ystride);
                _mm256_storeu_ps(o, _mm256_add_ps(a[0], b0));
                _mm256_storeu_ps(o.add(8), _mm256_add_ps(a[1], b1));
            }
        }
    }

    /// Query rows per AVX2 attention tile ([`attend_rows32_avx2`]).
    pub(super) const ATT_ROWS_AVX2: usize = 6;

    /// Keys per step of the AVX2 attention tile; K is stored with its rows padded to a
    /// multiple of this ([`att_stride_avx2`]).
    pub(super) const ATT_KEYS_AVX2: usize = 16;

    /// The row stride of transposed K for [`attend_rows32_avx2`]: `len` rounded up to a
    /// multiple of [`ATT_KEYS_AVX2`].
    pub(super) fn att_stride_avx2(len: usize) -> usize {
        len.div_ceil(ATT_KEYS_AVX2) * ATT_KEYS_AVX2
    }

    /// The AVX2 + FMA version of [`attend_rows32_avx512`]: `m` (1 ..= [`ATT_ROWS_AVX2`])
    /// query rows of one head of width 32 over `len` keys. Row `r`'s query is
    /// `q[r·qs .. r·qs + 32]`, its context goes to `out[r·os .. r·os + 32]`; `kt` is K
    /// transposed with row stride `ls` = [`att_stride_avx2`]`(len)` (`[32][ls]`, the lanes
    /// past `len` are read but their scores never used), `vh` is V (`[len][32]`), `sc`
    /// scratch of at least `ATT_ROWS_AVX2 · ls`. Scores 16 keys at a time (each key column
    /// loaded once for the tile, 2·m accumulators), each row's softmax
    /// ([`softmax_weights`]), then the weighted sums in two halves of 16 dimensions (2·m
    /// accumulators each). The same sums as [`attend_row`], in another order.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend_rows32_avx2(
        m: usize,
        q: &[f32],
        qs: usize,
        kt: &[f32],
        vh: &[f32],
        len: usize,
        scale: f32,
        sc: &mut [f32],
        out: &mut [f32],
        os: usize,
    ) {
        match m {
            1 => rows32_avx2::<1>(q, qs, kt, vh, len, scale, sc, out, os),
            2 => rows32_avx2::<2>(q, qs, kt, vh, len, scale, sc, out, os),
            3 => rows32_avx2::<3>(q, qs, kt, vh, len, scale, sc, out, os),
            4 => rows32_avx2::<4>(q, qs, kt, vh, len, scale, sc, out, os),
            5 => rows32_avx2::<5>(q, qs, kt, vh, len, scale, sc, out, os),
            _ => rows32_avx2::<6>(q, qs, kt, vh, len, scale, sc, out, os),
        }
    }

    #[target_feature(enable = "avx2,fma")]
    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn rows32_avx2<const M: usize>(
        q: &[f32],
        qs: usize,
        kt: &[f32],
        vh: &[f32],
        len: usize,
        scale: f32,
        sc: &mut [f32],
        out: &mut [f32],
        os: usize,
    ) {
        const HD: usize = 32;
        const KS: usize = ATT_KEYS_AVX2;
        let ls = att_stride_avx2(len);
        assert!(len > 0 && kt.len() >= HD * ls && vh.len() >= len * HD);
        assert!(q.len() >= (M - 1) * qs + HD && out.len() >= (M - 1) * os + HD);
        assert!(sc.len() >= M * ls);
        let mut qv = [[0f32; HD]; M];
        for r in 0..M {
            for d in 0..HD {
                qv[r][d] = q[r * qs + d] * scale;
            }
        }
        // Scores, 16 keys at a time (the padded lanes past `len` are computed, never read).
        let mut j = 0;
        while j < ls {
            let mut a0 = [_mm256_setzero_ps(); M];
            let mut a1 = [_mm256_setzero_ps(); M];
            let kp = kt.as_ptr();
            for d in 0..HD {
                // SAFETY: j + 16 ≤ ls, so kt[d·ls + j ..][..16] is in bounds (kt ≥ 32·ls).
                unsafe {
                    let at = kp.add(d * ls + j);
                    let k0 = _mm256_loadu_ps(at);
                    let k1 = _mm256_loadu_ps(at.add(8));
                    for r in 0..M {
                        let x = _mm256_broadcast_ss(&qv[r][d]);
                        a0[r] = _mm256_fmadd_ps(x, k0, a0[r]);
                        a1[r] = _mm256_fmadd_ps(x, k1, a1[r]);
                    }
                }
            }
            for r in 0..M {
                // SAFETY: sc[r·ls + j ..][..16] is in bounds (sc ≥ M·ls, j + 16 ≤ ls).
                unsafe {
                    let at = sc.as_mut_ptr().add(r * ls + j);
                    _mm256_storeu_ps(at, a0[r]);
                    _mm256_storeu_ps(at.add(8), a1[r]);
                }
            }
            j += KS;
        }
        let mut inv = [0f32; M];
        for r in 0..M {
            inv[r] = softmax_weights(&mut sc[r * ls..r * ls + len]);
        }
        // Context rows: Σ_j p[r][j] · v[j], 16 dimensions (two registers) at a time.
        for half in 0..2 {
            let mut c0 = [_mm256_setzero_ps(); M];
            let mut c1 = [_mm256_setzero_ps(); M];
            for j in 0..len {
                // SAFETY: j < len: vh[j·32 + half·16 ..][..16] and sc[r·ls + j] are in
                // bounds (asserted).
                unsafe {
                    let vp = vh.as_ptr().add(j * HD + half * 16);
                    let v0 = _mm256_loadu_ps(vp);
                    let v1 = _mm256_loadu_ps(vp.add(8));
                    for r in 0..M {
                        let p = _mm256_broadcast_ss(sc.get_unchecked(r * ls + j));
                        c0[r] = _mm256_fmadd_ps(p, v0, c0[r]);
                        c1[r] = _mm256_fmadd_ps(p, v1, c1[r]);
                    }
                }
            }
            for r in 0..M {
                // SAFETY: out[r·os + half·16 ..][..16] is in bounds (asserted).
                unsafe {
                    let f = _mm256_set1_ps(inv[r]);
                    let o = out.as_mut_ptr().add(r * os + half * 16);
                    _mm256_storeu_ps(o, _mm256_mul_ps(c0[r], f));
                    _mm256_storeu_ps(o.add(8), _mm256_mul_ps(c1[r], f));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_approx_relative_error_below_4e_7() {
        let mut worst = 0f64;
        let mut x = -87.0f32;
        while x <= 0.0 {
            let want = (x as f64).exp();
            let got = exp_approx(x) as f64;
            worst = worst.max(((got - want) / want).abs());
            x += 0.001;
        }
        assert!(worst < 4e-7, "worst relative error {worst:e}");
        assert_eq!(exp_approx(0.0), 1.0);
        assert!(exp_approx(-200.0) < 1e-37);
    }

    /// The tiled AVX-512 attention gives attend_row's context rows (the same sums in
    /// another order) for every tile height and ragged key counts.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn tiled_attention_equals_the_row_kernel() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("no AVX-512F: the tiled kernel is not used here");
            return;
        }
        let mut state = 0x9e3779b97f4a7c15u64;
        let mut rnd = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        };
        for len in [1usize, 5, 16, 17, 31, 32, 33, 100, 257] {
            let hd = 32;
            let kt: Vec<f32> = (0..hd * len).map(|_| rnd()).collect();
            let vh: Vec<f32> = (0..len * hd).map(|_| rnd()).collect();
            let m = len.min(x86::ATT_ROWS);
            let qs = 3 * hd;
            let q: Vec<f32> = (0..m * qs).map(|_| rnd()).collect();
            let os = 2 * hd;
            let mut out = vec![0f32; m * os];
            let mut sc = vec![0f32; x86::ATT_ROWS * len];
            let scale = 1.0 / (hd as f32).sqrt();
            // SAFETY: AVX-512F checked above.
            unsafe {
                x86::attend_rows32_avx512(m, &q, qs, &kt, &vh, len, scale, &mut sc, &mut out, os)
            };
            for r in 0..m {
                let mut scores = Vec::new();
                attend_row(&q[r * qs..r * qs + hd], &kt, &vh, scale, &mut scores);
                for d in 0..hd {
                    let (a, b) = (out[r * os + d], scores[len + d]);
                    assert!(
                        (a - b).abs() <= 1e-5,
                        "len {len} row {r} dim {d}: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// The AVX2 tiled attention (K rows padded to 16 keys) gives attend_row's context rows
    /// for every tile height and ragged key counts.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn tiled_avx2_attention_equals_the_row_kernel() {
        if !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma"))
        {
            eprintln!("no AVX2 + FMA: the AVX2 tiled kernel is not used here");
            return;
        }
        let mut rnd = xorshift();
        for len in [1usize, 5, 6, 7, 15, 16, 17, 31, 33, 100, 257] {
            let hd = 32;
            let ls = x86::att_stride_avx2(len);
            let kt_plain: Vec<f32> = (0..hd * len).map(|_| rnd()).collect();
            let mut kt = vec![0f32; hd * ls];
            for d in 0..hd {
                kt[d * ls..d * ls + len].copy_from_slice(&kt_plain[d * len..(d + 1) * len]);
            }
            let vh: Vec<f32> = (0..len * hd).map(|_| rnd()).collect();
            for m in 1..=len.min(x86::ATT_ROWS_AVX2) {
                let qs = 3 * hd;
                let q: Vec<f32> = (0..m * qs).map(|_| rnd()).collect();
                let os = 2 * hd;
                let mut out = vec![0f32; m * os];
                let mut sc = vec![0f32; x86::ATT_ROWS_AVX2 * ls];
                let scale = 1.0 / (hd as f32).sqrt();
                // SAFETY: AVX2 + FMA checked above.
                unsafe {
                    x86::attend_rows32_avx2(m, &q, qs, &kt, &vh, len, scale, &mut sc, &mut out, os)
                };
                for r in 0..m {
                    let mut scores = Vec::new();
                    attend_row(&q[r * qs..r * qs + hd], &kt_plain, &vh, scale, &mut scores);
                    for d in 0..hd {
                        let (a, b) = (out[r * os + d], scores[len + d]);
                        assert!(
                            (a - b).abs() <= 1e-5,
                            "len {len} m {m} row {r} dim {d}: {a} vs {b}"
                        );
                    }
                }
            }
        }
    }

    /// The AVX2 6 × 16 matmul equals the plain-Rust one on 16-wide panels, for every
    /// remainder of the token count (1 ..= 13 tokens) and both K of e5-small.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx2_matmul_equals_the_portable_one() {
        if !(std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("fma"))
        {
            eprintln!("no AVX2 + FMA: the AVX2 matmul is not used here");
            return;
        }
        let mut rnd = xorshift();
        for (n, k) in [(48usize, 384usize), (32, 1536)] {
            let mut lines = vec![Line([0.0; 16]); n * k / 16];
            as_f32_mut(&mut lines).iter_mut().for_each(|v| *v = rnd());
            let w = Panels {
                n,
                k,
                nr: NR_AVX2,
                w: lines,
                bias: (0..n).map(|_| rnd()).collect(),
            };
            for t in 1..=13 {
                let x: Vec<f32> = (0..t * k).map(|_| rnd()).collect();
                let (mut a, mut b) = (vec![0f32; t * n], vec![0f32; t * n]);
                matmul_portable(&x, &w, &mut a);
                // SAFETY: AVX2 + FMA checked above.
                unsafe { x86::matmul_avx2(&x, &w, &mut b) };
                for (i, (p, q)) in a.iter().zip(&b).enumerate() {
                    assert!(
                        (p - q).abs() <= 1e-3 * (1.0 + p.abs()),
                        "n {n} k {k} t {t} element {i}: {p} vs {q}"
                    );
                }
            }
        }
    }

    fn xorshift() -> impl FnMut() -> f32 {
        let mut state = 0x9e3779b97f4a7c15u64;
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 4.0 - 2.0
        }
    }

    #[test]
    fn erf_approx_absolute_error_below_1e_6() {
        let mut worst = 0f64;
        let mut x = -6.0f32;
        while x <= 6.0 {
            let want = libm::erf(x as f64);
            let got = erf_approx(x) as f64;
            worst = worst.max((got - want).abs());
            x += 0.0005;
        }
        assert!(worst < 1e-6, "worst absolute error {worst:e}");
    }
}

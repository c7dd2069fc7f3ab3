//! The forward pass for **many passages at once**, natively (the builder's embedding of book
//! chunks): the same network as [`QueryModel::embed_ids`], laid out for throughput.
//!
//! - the linear layers' Q4_0 weights are dequantised **once** at load time into f32 panels of
//!   [`NR`] output columns (`[N / NR][K][NR]`, ~85 MB for e5-small; 64-byte aligned),
//!   multiplied by a register-blocked kernel chosen at run time: AVX-512F [`MR`] tokens ×
//!   [`NR`] outputs; AVX2 + FMA [`MR_AVX2`] × [`NR_AVX2`] over 16-wide panels (the tile
//!   that fits AVX2's 16 registers, as in BLIS/MLAS); plain Rust elsewhere; on CPUs with
//!   **AMX** (Intel Sapphire Rapids and later, when Linux grants the tile state) the panels
//!   are bf16 pairs instead (~43 MB) and the matmul runs on the tile unit (`tdpbf16ps`: bf16
//!   products, f32 sums; [`Isa::Amx`], `docs/design/passage-bf16.md`);
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
//! same weights, summed in another order (tests: `tests/agree.rs`); with [`Isa::Amx`] up to
//! bf16 rounding of the linear layers' operands (weights and activations to 8 significant
//! bits; measured cosine ≥ 0.9999 against tract, `docs/design/passage-bf16.md`).

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

/// One cache line of 32 bf16s (as `u16` bit patterns): the storage unit of bf16 panels.
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct BLine([u16; 32]);

/// A weight matrix `N × K` (out × in) in f32 panels of `nr` outputs ([`NR`], or
/// [`NR_AVX2`] for the AVX2 kernel): element `(n, k)` is at
/// `(n / nr) · K · nr + k · nr + n % nr`. `N` is a multiple of `nr`.
///
/// For [`Isa::Amx`] the panels are bf16 instead (`w` empty, `b` filled), in pairs of
/// consecutive `k`: element `(n, k)` is at `(n / 32) · K · 32 + (k / 2) · 64 + (n % 32) · 2
/// + k % 2`, i.e. `[N / 32][K / 2][32][2]`: the rows `k / 2 = 16 j .. 16 j + 16` of a panel,
/// 64 bytes each at a stride of 128, are the AMX B tile ("VNNI" pairs) of outputs 0..16, the
/// next 64 bytes of each row that of outputs 16..32. `K` is then a multiple of 32.
struct Panels {
    n: usize,
    k: usize,
    nr: usize,
    w: Vec<Line>,
    b: Vec<BLine>,
    bias: Vec<f32>,
}

/// Dequantises the rows of the Q4_0 matrices `parts` (stacked along N, all with the same K) in
/// order, handing each output `o` (0 … N − 1) and its K weights to `put`; returns the biases
/// stacked the same way (N values).
fn dequant_rows(parts: &[&(Q4Matrix, Vec<f32>)], mut put: impl FnMut(usize, &[f32])) -> Vec<f32> {
    let k = parts[0].0.cols;
    let mut bias = Vec::with_capacity(parts.iter().map(|p| p.0.rows).sum());
    let mut row = vec![0f32; k];
    let mut o = 0;
    for (m, b) in parts.iter().map(|p| (&p.0, &p.1)) {
        assert_eq!(m.cols, k);
        let rb = Q4Matrix::row_bytes(k);
        for r in 0..m.rows {
            dequant_row(&m.bytes[r * rb..(r + 1) * rb], &mut row);
            put(o, &row);
            o += 1;
        }
        bias.extend_from_slice(b);
    }
    bias
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
        let w = as_f32_mut(&mut lines);
        let bias = dequant_rows(parts, |o, row| {
            let (p, c) = (o / nr, o % nr);
            for (kk, v) in row.iter().enumerate() {
                w[p * k * nr + kk * nr + c] = *v;
            }
        });
        Panels {
            n,
            k,
            nr,
            w: lines,
            b: Vec::new(),
            bias,
        }
    }

    /// As [`Panels::from_q4`], into the bf16 pair layout of [`Isa::Amx`] (32-wide panels; each
    /// weight rounded to the nearest bf16, ties to even). `K` must be a multiple of 32.
    fn from_q4_bf16(parts: &[&(Q4Matrix, Vec<f32>)]) -> Self {
        let k = parts[0].0.cols;
        let n: usize = parts.iter().map(|p| p.0.rows).sum();
        assert!(
            n.is_multiple_of(NR) && k.is_multiple_of(32),
            "N = {n}, K = {k}"
        );
        let mut lines = vec![BLine([0; 32]); n * k / 32];
        let w = as_u16_mut(&mut lines);
        let bias = dequant_rows(parts, |o, row| {
            let (p, c) = (o / NR, o % NR);
            for (kk, v) in row.iter().enumerate() {
                w[p * k * NR + (kk / 2) * 2 * NR + c * 2 + kk % 2] = bf16_bits(*v);
            }
        });
        Panels {
            n,
            k,
            nr: NR,
            w: Vec::new(),
            b: lines,
            bias,
        }
    }

    /// The bf16 panels as one `u16` slice (`N · K` bit patterns, layout above; empty unless
    /// made by [`Panels::from_q4_bf16`]).
    fn b(&self) -> &[u16] {
        // SAFETY: `BLine` is `repr(C)` around `[u16; 32]` (size 64, no padding), so `len`
        // lines are `32 · len` contiguous, initialised u16s.
        unsafe { std::slice::from_raw_parts(self.b.as_ptr().cast::<u16>(), self.b.len() * 32) }
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

fn as_u16_mut(lines: &mut [BLine]) -> &mut [u16] {
    // SAFETY: as in `Panels::b`; the borrow is exclusive.
    unsafe { std::slice::from_raw_parts_mut(lines.as_mut_ptr().cast::<u16>(), lines.len() * 32) }
}

/// `v` rounded to the nearest bf16 (ties to even), as its bit pattern; what `vcvtne2ps2bf16`
/// does to the activations. NaN stays NaN (the weights and activations here are finite).
fn bf16_bits(v: f32) -> u16 {
    half::bf16::from_f32(v).to_bits()
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
    /// With [`Isa::Amx`] (or [`Isa::Avx512Bf16`]): attention's two products in bf16 too, on
    /// the tile unit (or by `vdpbf16ps`); else in f32 (AVX-512F).
    amx_attention: bool,
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
    /// AMX (`amx-tile` + `amx-bf16`, with AVX-512F and AVX-512 BF16; x86_64 Linux, once the
    /// kernel has granted this process the tile state): the linear layers' matmuls in bf16 on
    /// the tile unit with f32 sums, everything else as [`Isa::Avx512`]. Its vectors differ
    /// from the f32 kernels' by bf16 rounding ([`Isa::numerics`]).
    Amx,
    /// AVX-512 BF16 with AVX-512F (x86_64; AMD Zen 4 and later, Intel from Cooper Lake): the
    /// linear layers' matmuls in bf16 by `vdpbf16ps` (pairs of bf16 products summed into f32
    /// lanes), from the same bf16 panels and with the same input rounding as [`Isa::Amx`];
    /// everything else as [`Isa::Avx512`]. Its vectors differ from the f32 kernels' by bf16
    /// rounding ([`Isa::numerics`]).
    Avx512Bf16,
    /// AVX-512F (x86_64).
    Avx512,
    /// AVX2 + FMA (x86_64).
    Avx2,
    /// Plain Rust.
    Portable,
}

impl Isa {
    /// The best the CPU has. The first call with an AMX CPU asks Linux for the tile state
    /// (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, once per process); if that is
    /// refused, AVX-512 BF16 is the best.
    pub fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx512f") {
                if x86::amx_usable() {
                    return Isa::Amx;
                }
                if std::arch::is_x86_feature_detected!("avx512bf16") {
                    return Isa::Avx512Bf16;
                }
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

    /// The kernel that runs when `want` is asked for: `want` if the CPU has what it needs
    /// ([`Isa::Portable`] always; [`Isa::Avx2`] on AVX-512 and AMX CPUs too; [`Isa::Avx512`]
    /// on AVX-512 BF16 and AMX CPUs too; [`Isa::Avx512Bf16`] on AMX CPUs too), else the best
    /// the CPU has ([`Isa::detect`]).
    pub fn resolve(want: Isa) -> Isa {
        let have = Isa::detect();
        let rank = |i: Isa| match i {
            Isa::Portable => 0,
            Isa::Avx2 => 1,
            Isa::Avx512 => 2,
            Isa::Avx512Bf16 => 3,
            Isa::Amx => 4,
        };
        if rank(want) <= rank(have) {
            want
        } else {
            have
        }
    }

    /// The name [`Isa::parse`] reads: `amx`, `avx512bf16`, `avx512`, `avx2`, `portable`.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Amx => "amx",
            Isa::Avx512Bf16 => "avx512bf16",
            Isa::Avx512 => "avx512",
            Isa::Avx2 => "avx2",
            Isa::Portable => "portable",
        }
    }

    /// The kernel named `s` ([`Isa::name`]), if any.
    pub fn parse(s: &str) -> Option<Isa> {
        [
            Isa::Amx,
            Isa::Avx512Bf16,
            Isa::Avx512,
            Isa::Avx2,
            Isa::Portable,
        ]
        .into_iter()
        .find(|i| i.name() == s)
    }

    /// The arithmetic of the linear layers: `"f32"` (f32 products and sums: [`Isa::Avx512`],
    /// [`Isa::Avx2`], [`Isa::Portable`], whose vectors agree with tract's to ~4e-7) or
    /// `"bf16"` ([`Isa::Amx`], [`Isa::Avx512Bf16`]: bf16 operands, f32 sums; ~1e-3). Vectors
    /// made by different
    /// numerics must not be mixed in one cache or bundle (the builder's vector cache keys
    /// carry this).
    pub fn numerics(self) -> &'static str {
        match self {
            Isa::Amx | Isa::Avx512Bf16 => "bf16",
            _ => "f32",
        }
    }

    /// The CPU runs the AVX-512F kernels (attention, GELU) with this kernel.
    fn avx512(self) -> bool {
        matches!(self, Isa::Amx | Isa::Avx512Bf16 | Isa::Avx512)
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
    /// [`Isa::Amx`]: the matmul's input rounded to bf16, in A-tile order ([`Isa::Avx512Bf16`]:
    /// row by row).
    xb: Vec<BLine>,
    /// [`Isa::Amx`]: the attention's bf16 operands.
    amx: AmxAttention,
}

/// Scratch of [`Isa::Amx`]'s attention of one head (`x86::attend_head_amx`): Q, K and V
/// rounded to bf16 in tile order, the score rows of 16 queries (f32) and their softmax
/// weights (bf16).
#[derive(Default)]
struct AmxAttention {
    q: Vec<BLine>,
    k: Vec<BLine>,
    v: Vec<BLine>,
    p: Vec<BLine>,
    sc: Vec<f32>,
}

impl PassageModel {
    /// Dequantises `model`'s linear layers into panels and takes `rows` (the whole token
    /// table). Uses the best kernel the CPU has ([`Isa::detect`]).
    pub fn new(model: &QueryModel, rows: RowTable) -> Self {
        Self::with_isa(model, rows, Isa::detect())
    }

    /// As [`PassageModel::new`] with a given kernel (tests and `JIKJI_PASSAGE_ISA` in the
    /// builder compare them). An `isa` the CPU lacks falls back to the best it has
    /// ([`Isa::resolve`]).
    pub fn with_isa(model: &QueryModel, rows: RowTable, isa: Isa) -> Self {
        let isa = Isa::resolve(isa);
        let nr = if isa == Isa::Avx2 { NR_AVX2 } else { NR };
        let panels = |parts: &[&(Q4Matrix, Vec<f32>)]| {
            if isa.numerics() == "bf16" {
                Panels::from_q4_bf16(parts)
            } else {
                Panels::from_q4(parts, nr)
            }
        };
        let layers = model
            .layers
            .iter()
            .map(|l| PLayer {
                qkv: panels(&[&l.q, &l.k, &l.v]),
                ao: panels(&[&l.ao]),
                aln: l.aln.clone(),
                fi: panels(&[&l.fi]),
                fo: panels(&[&l.fo]),
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
            amx_attention: true,
        }
    }

    /// With [`Isa::Amx`] (or [`Isa::Avx512Bf16`]), whether attention's products (scores and
    /// weighted sums) run in bf16 too, on the tile unit (or by `vdpbf16ps`; the default), or in
    /// f32 with AVX-512F (for comparisons: the matmuls stay bf16 either way). No effect with
    /// other kernels.
    pub fn with_amx_attention(mut self, on: bool) -> Self {
        self.amx_attention = on;
        self
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
        self.matmul(&s.x, &l.qkv, &mut s.qkv, &mut s.xb);
        let mut t = 0;
        for q in seqs {
            self.attention(t, q.len(), s);
            t += q.len();
        }
        self.matmul(&s.ctx, &l.ao, &mut s.tmp, &mut s.xb);
        add_assign(&mut s.x, &s.tmp);
        layer_norm(&mut s.x, &l.aln.0, &l.aln.1, c.eps);
        self.matmul(&s.x, &l.fi, &mut s.inner, &mut s.xb);
        self.gelu(&mut s.inner);
        self.matmul(&s.inner, &l.fo, &mut s.tmp, &mut s.xb);
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
        if (self.isa == Isa::Amx || self.isa == Isa::Avx512Bf16) && hd == 32 && self.amx_attention {
            for head in 0..c.heads {
                let (qo, ko, vo) = (head * hd, h + head * hd, 2 * h + head * hd);
                let rows = &s.qkv[t0 * w..(t0 + len) * w];
                let kernel = if self.isa == Isa::Amx {
                    x86::attend_head_amx
                } else {
                    x86::attend_head_bf16
                };
                // SAFETY: `Isa::Amx`: AMX usable; `Isa::Avx512Bf16`: AVX-512F and AVX-512
                // BF16 present (both from `with_isa`); the kernels assert the shapes.
                unsafe {
                    kernel(
                        &rows[qo..],
                        &rows[ko..],
                        &rows[vo..],
                        w,
                        len,
                        scale,
                        &mut s.ctx[t0 * h + qo..],
                        h,
                        &mut s.amx,
                    )
                };
            }
            return;
        }
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
            if self.isa.avx512() && hd == 32 {
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
                    // SAFETY: the CPU has these features (`with_isa` checked; AMX implies
                    // AVX-512F).
                    Isa::Avx512 | Isa::Avx512Bf16 | Isa::Amx => unsafe {
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
            // SAFETY: the CPU has these features (`with_isa` checked; AMX implies AVX-512F).
            Isa::Avx512 | Isa::Avx512Bf16 | Isa::Amx => unsafe { x86::gelu_avx512(x) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: as above.
            Isa::Avx2 => unsafe { x86::gelu_avx2(x) },
            _ => gelu_slice(x),
        }
    }

    /// `y[t][n] = bias[n] + Σ_k x[t][k] · W[n][k]` (`xb`: scratch of the AMX kernel).
    fn matmul(&self, x: &[f32], w: &Panels, y: &mut [f32], xb: &mut Vec<BLine>) {
        assert_eq!(x.len() % w.k, 0);
        assert_eq!(y.len(), x.len() / w.k * w.n);
        match self.isa {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AMX-TILE, AMX-BF16, AVX-512F and AVX-512 BF16 and Linux has
            // granted the tile state (`Isa::detect` via `with_isa`); `w` has bf16 panels
            // (made for `Isa::Amx`); shapes checked above.
            Isa::Amx => unsafe { x86::matmul_amx(x, w, y, xb) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX-512F and AVX-512 BF16 (`Isa::detect` via `with_isa`);
            // `w` has bf16 panels (made for numerics "bf16"); shapes checked above.
            Isa::Avx512Bf16 => unsafe { x86::matmul_avx512bf16(x, w, y, xb) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX-512F (`with_isa` checked); shapes checked above.
            Isa::Avx512 => unsafe { x86::matmul_avx512(x, w, y) },
            #[cfg(target_arch = "x86_64")]
            // SAFETY: the CPU has AVX2 + FMA; shapes checked above.
            Isa::Avx2 => unsafe { x86::matmul_avx2(x, w, y) },
            _ => {
                let _ = xb;
                matmul_portable(x, w, y)
            }
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
    use super::{
        attend_row, gelu_slice, softmax_weights, AmxAttention, BLine, Panels, MR, MR_AVX2, NR,
        NR_AVX2,
    };
    use std::arch::asm;
    use std::arch::x86_64::*;

    /// AMX can run here: the CPU has AMX-TILE and AMX-BF16 (CPUID.(7,0):EDX bits 24 and 22)
    /// plus AVX-512F and AVX-512 BF16 (the activations' conversion), the OS enables the tile
    /// state in XCR0 (bits 17 and 18), and Linux granted this process the tile data
    /// (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, without which the first tile
    /// instruction faults). Asked once per process; the permission covers every thread.
    pub(super) fn amx_usable() -> bool {
        static USABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *USABLE.get_or_init(|| {
            if std::env::var_os("JIKJI_NO_AMX").is_some() {
                return false;
            }
            if !(is_x86_feature_detected!("avx512f")
                && is_x86_feature_detected!("avx512bf16")
                && is_x86_feature_detected!("xsave"))
            {
                return false;
            }
            let leaf7 = __cpuid_count(7, 0);
            let (amx_bf16, amx_tile) = (leaf7.edx >> 22 & 1 == 1, leaf7.edx >> 24 & 1 == 1);
            // OSXSAVE (CPUID.1:ECX bit 27): XGETBV may be executed.
            let osxsave = __cpuid(1).ecx >> 27 & 1 == 1;
            if !(amx_bf16 && amx_tile && osxsave) {
                return false;
            }
            // SAFETY: XGETBV is available (OSXSAVE above; `xsave` detected).
            let xcr0 = unsafe { xgetbv0() };
            if xcr0 >> 17 & 3 != 3 {
                return false;
            }
            request_tile_permission()
        })
    }

    #[target_feature(enable = "xsave")]
    fn xgetbv0() -> u64 {
        // SAFETY: XGETBV with ECX = 0 (XCR0) is defined whenever OSXSAVE is set (the caller
        // checked).
        unsafe { _xgetbv(0) }
    }

    #[cfg(target_os = "linux")]
    fn request_tile_permission() -> bool {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // SAFETY: arch_prctl with these arguments only changes the process's permitted
        // xsave features (or fails with an errno); no memory is passed.
        let r = unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            )
        };
        r == 0
    }

    /// Elsewhere the tile state's permission is not asked for, so AMX is not used.
    #[cfg(not(target_os = "linux"))]
    fn request_tile_permission() -> bool {
        false
    }

    /// The tile configuration of [`matmul_amx`] (`ldtilecfg`'s 64-byte operand): palette 1,
    /// tiles 0..8 all 16 rows × 64 bytes (C: 16 × 16 f32; A: 16 tokens × 32 bf16; B: 16
    /// pairs of `k` × 16 outputs × 2 bf16).
    #[repr(C, align(64))]
    struct TileConfig([u8; 64]);

    impl TileConfig {
        fn all_16x64() -> Self {
            let mut c = [0u8; 64];
            c[0] = 1;
            for t in 0..8 {
                c[16 + 2 * t] = 64; // colsb[t], u16 LE
                c[48 + t] = 16; // rows[t]
            }
            TileConfig(c)
        }
    }

    /// `x` (`t × k` f32, `k` a multiple of 32) rounded to bf16 (nearest, ties to even) into
    /// `xb` in A-tile order: `[rows / 16][k / 32][16][32]` (each 16 × 32 tile 1 KB contiguous),
    /// `rows` = `t` rounded up to 32, the rows past `t` zero.
    #[target_feature(enable = "avx512f,avx512bf16")]
    fn to_bf16_tiles(x: &[f32], k: usize, xb: &mut Vec<BLine>) {
        let t = x.len() / k;
        let rows = t.div_ceil(32) * 32;
        let kb = k / 32;
        if xb.len() < rows * kb {
            xb.resize(rows * kb, BLine([0; 32]));
        }
        for r in 0..rows {
            for b in 0..kb {
                let line = (r / 16) * kb * 16 + b * 16 + r % 16;
                let v = if r < t {
                    // SAFETY: r < t and b < k / 32, so x[r·k + 32·b ..][..32] is in bounds.
                    unsafe {
                        let p = x.as_ptr().add(r * k + b * 32);
                        let lo = _mm512_loadu_ps(p);
                        let hi = _mm512_loadu_ps(p.add(16));
                        // 32 bf16 in order: the low half from `lo`, the high half from `hi`.
                        std::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(hi, lo))
                    }
                } else {
                    _mm512_setzero_si512()
                };
                // SAFETY: line < rows · kb ≤ xb.len(); a BLine is 64 bytes, 64-aligned.
                unsafe { _mm512_store_si512(xb.as_mut_ptr().add(line).cast(), v) };
            }
        }
    }

    /// 32 f32s at `p` rounded to bf16 (nearest, ties to even), in order.
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[inline]
    unsafe fn bf16x32(p: *const f32) -> __m512i {
        // SAFETY: the caller passes 32 readable f32s.
        unsafe {
            let lo = _mm512_loadu_ps(p);
            let hi = _mm512_loadu_ps(p.add(16));
            std::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(hi, lo))
        }
    }

    /// [`softmax_weights`] with AVX-512F intrinsics, the scores first multiplied by `scale`:
    /// `sc[j] = e^(scale·sc[j] − max)` ([`super::exp_approx`]'s polynomial, clamp and
    /// rounding, `2^n` by `vscalefps`), returns `1 / Σ sc[j]` with the sum in the same order
    /// (16 lanes over the whole 16-key chunks, then the lanes, then the rest), so the results
    /// are those of scaling and calling [`softmax_weights`], bit for bit (unit test); the
    /// compiler's version of that converts `n` to an integer one lane at a time.
    #[target_feature(enable = "avx512f")]
    pub(super) fn softmax_weights_scaled_avx512(sc: &mut [f32], scale: f32) -> f32 {
        let len = sc.len();
        let full = len / 16 * 16;
        let p = sc.as_mut_ptr();
        let vs = _mm512_set1_ps(scale);
        // SAFETY (whole function): loads and stores at p + j for j + 16 ≤ full ≤ len, and
        // the remainder one element at a time below `len`.
        unsafe {
            let mut vmax = _mm512_set1_ps(f32::NEG_INFINITY);
            let mut j = 0;
            while j < full {
                let v = _mm512_mul_ps(_mm512_loadu_ps(p.add(j)), vs);
                _mm512_storeu_ps(p.add(j), v);
                vmax = _mm512_max_ps(vmax, v);
                j += 16;
            }
            let mut max = f32::NEG_INFINITY;
            for j in full..len {
                let v = *p.add(j) * scale;
                *p.add(j) = v;
                max = if v > max { v } else { max };
            }
            let mut lanes = [0f32; 16];
            _mm512_storeu_ps(lanes.as_mut_ptr(), vmax);
            for l in lanes {
                max = if l > max { l } else { max };
            }
            let vm = _mm512_set1_ps(max);
            let (lo, hi) = (_mm512_set1_ps(-87.0), _mm512_set1_ps(88.0));
            let log2e = _mm512_set1_ps(std::f32::consts::LOG2_E);
            let half = _mm512_set1_ps(0.5);
            let (c1, c2) = (_mm512_set1_ps(0.693_145_75), _mm512_set1_ps(1.428_606_8e-6));
            let k = [
                1.0 / 720.0,
                1.0 / 120.0,
                1.0 / 24.0,
                1.0 / 6.0,
                0.5,
                1.0,
                1.0f32,
            ];
            let mut vsum = _mm512_setzero_ps();
            let mut j = 0;
            while j < full {
                let x = _mm512_sub_ps(_mm512_loadu_ps(p.add(j)), vm);
                let x = _mm512_min_ps(_mm512_max_ps(x, lo), hi);
                let n = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC }>(
                    _mm512_add_ps(_mm512_mul_ps(x, log2e), half),
                );
                let r = _mm512_sub_ps(_mm512_sub_ps(x, _mm512_mul_ps(n, c1)), _mm512_mul_ps(n, c2));
                // 1 + r(1 + r(1/2 + r(1/6 + r(1/24 + r(1/120 + r/720))))), as exp_approx.
                let mut e = _mm512_set1_ps(k[0]);
                for &c in &k[1..] {
                    e = _mm512_add_ps(_mm512_set1_ps(c), _mm512_mul_ps(r, e));
                }
                let e = _mm512_scalef_ps(e, n);
                _mm512_storeu_ps(p.add(j), e);
                vsum = _mm512_add_ps(vsum, e);
                j += 16;
            }
            _mm512_storeu_ps(lanes.as_mut_ptr(), vsum);
            let mut rest = 0f32;
            for j in full..len {
                let e = super::exp_approx(*p.add(j) - max);
                *p.add(j) = e;
                rest += e;
            }
            1.0 / (lanes.iter().sum::<f32>() + rest)
        }
    }

    /// Self-attention of one head of width 32 over `len` positions on the AMX tile unit:
    /// query `i` is `q[i·stride ..][..32]`, key and value `j` likewise in `k` and `v`; the
    /// context row of query `i` goes to `out[i·os ..][..32]`.
    ///
    /// Q, K and V are rounded to bf16 once (K as B tiles of 16 keys × 16 dimension pairs, V
    /// as B tiles of 16 key pairs × 16 dimensions; queries padded with zeros to a multiple
    /// of 32, keys too). For each block of 32 queries (two A tiles): the scores 32 × 32 keys
    /// at a time (four `tdpbf16ps`, K = the head's 32 dimensions), stored as f32 rows; each
    /// row scaled and its softmax taken over its `len` keys in f32
    /// ([`softmax_weights_scaled_avx512`], unnormalised weights, padding set to 0); the
    /// weights rounded to bf16 and multiplied by V, 32 keys per step (four `tdpbf16ps`, f32
    /// sums); each context row times its 1 / Σ. The sums of [`attend_row`] with bf16
    /// operands.
    ///
    /// Requires [`amx_usable`] (the caller's `Isa::Amx`).
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend_head_amx(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        stride: usize,
        len: usize,
        scale: f32,
        out: &mut [f32],
        os: usize,
        s: &mut AmxAttention,
    ) {
        const HD: usize = 32;
        assert!(len > 0 && os >= HD);
        assert!(out.len() >= (len - 1) * os + HD);
        let lp = bf16_head(q, k, v, stride, len, s);
        let cfg = TileConfig::all_16x64();
        let mut ctx = [0f32; 32 * HD];
        // SAFETY (whole block): tile instructions only with AMX usable (caller) after a valid
        // `ldtilecfg`. Tile reads: Q tiles at s.q lines 32·b and 32·b + 16 (16 lines of 64
        // bytes, stride 64, b < lp / 32); K tiles at s.k lines 32·c and 32·c + 16 (c < lp /
        // 32, stride 64); weight tiles at s.p + 32·c u16s and 16 rows further, with a stride
        // of 2·lp bytes (32 rows of lp bf16 = lp lines); V tiles at s.v line 32·c (+ 64
        // bytes), stride 128 (16 rows inside the c-th 2 KB block). Stores: score tiles into
        // s.sc (32 rows of lp f32, stride 4·lp; columns 32·c .. 32·c + 32 ≤ lp), context tiles
        // into `ctx` (32 × 32 f32, stride 128). `tilerelease` before leaving.
        unsafe {
            asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly));
            for b in 0..lp / 32 {
                asm!(
                    "tileloadd tmm4, [{q0} + {s}*1]",
                    "tileloadd tmm5, [{q1} + {s}*1]",
                    q0 = in(reg) s.q.as_ptr().add(32 * b),
                    q1 = in(reg) s.q.as_ptr().add(32 * b + 16),
                    s = in(reg) 64usize,
                    options(nostack, readonly),
                );
                for c in 0..lp / 32 {
                    let sc = s.sc.as_mut_ptr().add(32 * c);
                    asm!(
                        "tilezero tmm0",
                        "tilezero tmm1",
                        "tilezero tmm2",
                        "tilezero tmm3",
                        "tileloadd tmm6, [{k0} + {s}*1]",
                        "tileloadd tmm7, [{k1} + {s}*1]",
                        "tdpbf16ps tmm0, tmm4, tmm6",
                        "tdpbf16ps tmm1, tmm4, tmm7",
                        "tdpbf16ps tmm2, tmm5, tmm6",
                        "tdpbf16ps tmm3, tmm5, tmm7",
                        "tilestored [{c0} + {cs}*1], tmm0",
                        "tilestored [{c1} + {cs}*1], tmm1",
                        "tilestored [{c2} + {cs}*1], tmm2",
                        "tilestored [{c3} + {cs}*1], tmm3",
                        k0 = in(reg) s.k.as_ptr().add(32 * c),
                        k1 = in(reg) s.k.as_ptr().add(32 * c + 16),
                        s = in(reg) 64usize,
                        c0 = in(reg) sc,
                        c1 = in(reg) sc.add(16),
                        c2 = in(reg) sc.add(16 * lp),
                        c3 = in(reg) sc.add(16 * lp + 16),
                        cs = in(reg) 4 * lp,
                        options(nostack),
                    );
                }
                let rows = (len - 32 * b).min(32);
                let mut inv = [0f32; 32];
                let p16 = s.p.as_mut_ptr().cast::<u16>();
                for r in 0..32 {
                    let row = &mut s.sc[r * lp..(r + 1) * lp];
                    // Rows past the sequence and keys past `len` weigh nothing.
                    let valid = if r < rows {
                        inv[r] = softmax_weights_scaled_avx512(&mut row[..len], scale);
                        len
                    } else {
                        0
                    };
                    row[valid..].fill(0.0);
                    for c in 0..lp / 32 {
                        _mm512_storeu_si512(
                            p16.add(r * lp + 32 * c).cast(),
                            bf16x32(row.as_ptr().add(32 * c)),
                        );
                    }
                }
                asm!(
                    "tilezero tmm0",
                    "tilezero tmm1",
                    "tilezero tmm2",
                    "tilezero tmm3",
                    options(nostack, nomem)
                );
                for c in 0..lp / 32 {
                    let pc = s.p.as_ptr().cast::<u16>().add(32 * c);
                    asm!(
                        "tileloadd tmm4, [{p0} + {ps}*1]",
                        "tileloadd tmm5, [{p1} + {ps}*1]",
                        "tileloadd tmm6, [{v0} + {s}*1]",
                        "tileloadd tmm7, [{v1} + {s}*1]",
                        "tdpbf16ps tmm0, tmm4, tmm6",
                        "tdpbf16ps tmm1, tmm4, tmm7",
                        "tdpbf16ps tmm2, tmm5, tmm6",
                        "tdpbf16ps tmm3, tmm5, tmm7",
                        p0 = in(reg) pc,
                        p1 = in(reg) pc.add(16 * lp),
                        ps = in(reg) 2 * lp,
                        v0 = in(reg) s.v.as_ptr().add(32 * c),
                        v1 = in(reg) s.v.as_ptr().add(32 * c).cast::<u16>().add(32),
                        s = in(reg) 128usize,
                        options(nostack, readonly),
                    );
                }
                asm!(
                    "tilestored [{c0} + {s}*1], tmm0",
                    "tilestored [{c1} + {s}*1], tmm1",
                    "tilestored [{c2} + {s}*1], tmm2",
                    "tilestored [{c3} + {s}*1], tmm3",
                    c0 = in(reg) ctx.as_mut_ptr(),
                    c1 = in(reg) ctx.as_mut_ptr().add(16),
                    c2 = in(reg) ctx.as_mut_ptr().add(16 * HD),
                    c3 = in(reg) ctx.as_mut_ptr().add(16 * HD + 16),
                    s = in(reg) 4 * HD,
                    options(nostack),
                );
                for r in 0..rows {
                    let f = _mm512_set1_ps(inv[r]);
                    let o = out.as_mut_ptr().add((32 * b + r) * os);
                    let c = ctx.as_ptr().add(r * HD);
                    _mm512_storeu_ps(o, _mm512_mul_ps(_mm512_loadu_ps(c), f));
                    _mm512_storeu_ps(o.add(16), _mm512_mul_ps(_mm512_loadu_ps(c.add(16)), f));
                }
            }
            asm!("tilerelease", options(nostack, nomem));
        }
    }

    /// One head's Q, K and V (rows of 32 f32s at `stride`, `len` of them) rounded to bf16
    /// (nearest, ties to even) into `s` in the layouts of [`attend_head_amx`] and
    /// [`attend_head_bf16`] (below); `s.p` and `s.sc` zeroed for `lp` keys. Returns `lp`, `len`
    /// rounded up to 32.
    #[target_feature(enable = "avx512f,avx512bf16")]
    fn bf16_head(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        stride: usize,
        len: usize,
        s: &mut AmxAttention,
    ) -> usize {
        const HD: usize = 32;
        assert!(len > 0 && stride >= HD);
        let need = (len - 1) * stride + HD;
        assert!(q.len() >= need && k.len() >= need && v.len() >= need);
        let lp = len.div_ceil(32) * 32;
        let zero = BLine([0; 32]);
        for (buf, lines) in [
            (&mut s.q, lp),
            (&mut s.k, lp),
            (&mut s.v, lp),
            (&mut s.p, lp),
        ] {
            buf.clear();
            buf.resize(lines, zero);
        }
        s.sc.clear();
        s.sc.resize(32 * lp, 0.0);
        // Q: one line (32 bf16) per query. K: u32 pairs, [lp / 16][16 dim pairs][16 keys].
        // V: u16, [lp / 32][16 key pairs][32 dims][2].
        {
            let kq = s.k.as_mut_ptr().cast::<u32>();
            let vq = s.v.as_mut_ptr().cast::<u16>();
            let mut row = BLine([0; 32]);
            for j in 0..len {
                // SAFETY: j < len: q, k and v hold 32 f32s at j·stride (asserted); s.q has lp
                // > j lines; the K writes (j / 16)·256 + r·16 + j % 16 < lp·16 u32s and the V
                // writes (j / 32)·1024 + ((j % 32) / 2)·64 + d·2 + j % 2 < lp·32 u16s stay
                // inside s.k and s.v (lp lines of 64 bytes each).
                unsafe {
                    let qj = bf16x32(q.as_ptr().add(j * stride));
                    _mm512_store_si512(s.q.as_mut_ptr().add(j).cast(), qj);
                    _mm512_store_si512((&raw mut row).cast(), bf16x32(k.as_ptr().add(j * stride)));
                    let pairs = (&raw const row).cast::<u32>();
                    for r in 0..16 {
                        *kq.add((j / 16) * 256 + r * 16 + j % 16) = *pairs.add(r);
                    }
                    _mm512_store_si512((&raw mut row).cast(), bf16x32(v.as_ptr().add(j * stride)));
                    let base = (j / 32) * 1024 + ((j % 32) / 2) * 64 + j % 2;
                    for d in 0..HD {
                        *vq.add(base + d * 2) = row.0[d];
                    }
                }
            }
        }
        lp
    }

    /// [`super::Isa::Avx512Bf16`]'s attention of one head (`HD` = 32): the bf16 operands of
    /// [`attend_head_amx`] ([`bf16_head`]), its products by `vdpbf16ps` instead of tiles —
    /// per block of up to 8 queries, the scores against 32 keys at a time (16 dimension pairs
    /// per key block of 16), the softmax in f32 ([`softmax_weights_scaled_avx512`]), its
    /// weights rounded to bf16, then the context as Σ over key pairs of the weight pair
    /// times the two keys' values — so its results are the AMX kernel's up to the order of
    /// f32 sums. `out` rows at stride `os`.
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn attend_head_bf16(
        q: &[f32],
        k: &[f32],
        v: &[f32],
        stride: usize,
        len: usize,
        scale: f32,
        out: &mut [f32],
        os: usize,
        s: &mut AmxAttention,
    ) {
        const HD: usize = 32;
        assert!(len > 0 && os >= HD);
        assert!(out.len() >= (len - 1) * os + HD);
        let lp = bf16_head(q, k, v, stride, len, s);
        let mut i = 0;
        while i < len {
            let m = (len - i).min(8);
            match m {
                1 => head_rows_bf16::<1>(i, len, lp, scale, out, os, s),
                2 => head_rows_bf16::<2>(i, len, lp, scale, out, os, s),
                3 => head_rows_bf16::<3>(i, len, lp, scale, out, os, s),
                4 => head_rows_bf16::<4>(i, len, lp, scale, out, os, s),
                5 => head_rows_bf16::<5>(i, len, lp, scale, out, os, s),
                6 => head_rows_bf16::<6>(i, len, lp, scale, out, os, s),
                7 => head_rows_bf16::<7>(i, len, lp, scale, out, os, s),
                _ => head_rows_bf16::<8>(i, len, lp, scale, out, os, s),
            }
            i += m;
        }
    }

    /// Queries `i0 .. i0 + M` of [`attend_head_bf16`] (`s` filled by [`bf16_head`]).
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[inline]
    fn head_rows_bf16<const M: usize>(
        i0: usize,
        len: usize,
        lp: usize,
        scale: f32,
        out: &mut [f32],
        os: usize,
        s: &mut AmxAttention,
    ) {
        const HD: usize = 32;
        assert!(i0 + M <= len && len <= lp && lp.is_multiple_of(32));
        assert!(s.q.len() >= lp && s.k.len() >= lp && s.v.len() >= lp && s.p.len() >= lp);
        assert!(s.sc.len() >= M * lp && out.len() >= (i0 + M - 1) * os + HD);
        let bh = |x: __m512i| unsafe { std::mem::transmute::<__m512i, __m512bh>(x) };
        // SAFETY (whole block): Q pairs are read at u32 (i0 + i)·16 + r < lp·16 (s.q holds lp
        // lines of 16 u32); K at u32 b·256 + r·16 (+16) for key blocks b < lp / 16 (s.k holds
        // lp lines = lp·16 u32); scores written to s.sc[i·lp + 32·c ..][..32] (i < M, c < lp /
        // 32) and weights to s.p's u16 i·lp + 32·c (s.p holds lp lines = 32·lp u16 ≥ M·lp);
        // weight pairs read at u32 i·lp / 2 + jp and V pairs at u16 jp·64 (+32) for jp <
        // ⌈len / 2⌉ ≤ lp / 2 (s.v holds lp lines = 32·lp u16); out rows (i0 + i)·os (asserted).
        unsafe {
            let qq = s.q.as_ptr().cast::<u32>();
            let kq = s.k.as_ptr().cast::<u32>();
            for c in 0..lp / 32 {
                let mut a0 = [_mm512_setzero_ps(); M];
                let mut a1 = [_mm512_setzero_ps(); M];
                for r in 0..16 {
                    let k0 = bh(_mm512_loadu_si512(kq.add(2 * c * 256 + r * 16).cast()));
                    let k1 = bh(_mm512_loadu_si512(
                        kq.add((2 * c + 1) * 256 + r * 16).cast(),
                    ));
                    for i in 0..M {
                        let qb = bh(_mm512_set1_epi32(*qq.add((i0 + i) * 16 + r) as i32));
                        a0[i] = _mm512_dpbf16_ps(a0[i], qb, k0);
                        a1[i] = _mm512_dpbf16_ps(a1[i], qb, k1);
                    }
                }
                for i in 0..M {
                    let at = s.sc.as_mut_ptr().add(i * lp + 32 * c);
                    _mm512_storeu_ps(at, a0[i]);
                    _mm512_storeu_ps(at.add(16), a1[i]);
                }
            }
            let mut inv = [0f32; M];
            let p16 = s.p.as_mut_ptr().cast::<u16>();
            for (i, f) in inv.iter_mut().enumerate() {
                let row = &mut s.sc[i * lp..(i + 1) * lp];
                *f = softmax_weights_scaled_avx512(&mut row[..len], scale);
                // Keys past `len` weigh nothing.
                row[len..].fill(0.0);
                for c in 0..lp / 32 {
                    _mm512_storeu_si512(
                        p16.add(i * lp + 32 * c).cast(),
                        bf16x32(row.as_ptr().add(32 * c)),
                    );
                }
            }
            let pq = s.p.as_ptr().cast::<u32>();
            let vq = s.v.as_ptr().cast::<u16>();
            let mut c0 = [_mm512_setzero_ps(); M];
            let mut c1 = [_mm512_setzero_ps(); M];
            for jp in 0..len.div_ceil(2) {
                let v0 = bh(_mm512_loadu_si512(vq.add(jp * 64).cast()));
                let v1 = bh(_mm512_loadu_si512(vq.add(jp * 64 + 32).cast()));
                for i in 0..M {
                    let pb = bh(_mm512_set1_epi32(*pq.add(i * lp / 2 + jp) as i32));
                    c0[i] = _mm512_dpbf16_ps(c0[i], pb, v0);
                    c1[i] = _mm512_dpbf16_ps(c1[i], pb, v1);
                }
            }
            for i in 0..M {
                let f = _mm512_set1_ps(inv[i]);
                let o = out.as_mut_ptr().add((i0 + i) * os);
                _mm512_storeu_ps(o, _mm512_mul_ps(c0[i], f));
                _mm512_storeu_ps(o.add(16), _mm512_mul_ps(c1[i], f));
            }
        }
    }

    /// `y = x · Wᵀ + bias` on the AMX tile unit, over the bf16 panels of `w`
    /// ([`super::Panels::from_q4_bf16`]): `x` rounded to bf16 in A-tile order
    /// ([`to_bf16_tiles`]); for each panel (32 outputs) and each block of 32 tokens, four C
    /// tiles (2 × 2 of 16 × 16 f32) start as the bias (a tile load with stride 0 repeats one
    /// row) and take `K / 32` steps of two A tiles × two B tiles (`tdpbf16ps`: each C element
    /// += 32 bf16 products, summed in f32), prefetching the next step's tiles into L1; then
    /// are stored straight into `y` (the last block, when it has fewer than 32 tokens, through
    /// a scratch block). Panel-major, as [`matmul_avx512`]: a panel (24 or 96 kB) stays in
    /// cache while every token block passes over it.
    ///
    /// Requires [`amx_usable`] (the caller's `Isa::Amx`).
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) fn matmul_amx(x: &[f32], w: &Panels, y: &mut [f32], xb: &mut Vec<BLine>) {
        let (n, k) = (w.n, w.k);
        let t = x.len() / k;
        assert!(w.nr == NR && k.is_multiple_of(32) && n.is_multiple_of(NR));
        assert!(x.len() == t * k && y.len() == t * n && w.b().len() == n * k);
        if t == 0 {
            return;
        }
        to_bf16_tiles(x, k, xb);
        let kbs = k / 32;
        let blocks = t.div_ceil(32);
        let cfg = TileConfig::all_16x64();
        let mut tail = [0f32; 32 * 32];
        let wb = w.b().as_ptr();
        let a0 = xb.as_ptr().cast::<u16>();
        // SAFETY (whole block): the tile instructions run only with AMX usable (caller) and
        // after `ldtilecfg` of a valid palette-1 configuration; every tile load reads 16 rows
        // of 64 bytes inside a slice: A tiles at a0 + (2·blk + h)·kbs·512 + kb·512 u16s (1 KB,
        // contiguous; `xb` holds blocks·2·kbs tiles), B tiles at panel + kb·1024 (+ 32) u16s
        // with a stride of 128 bytes (16 rows inside the panel's kb-th 2 KB), bias rows of 16
        // f32 at stride 0; stores write 16 rows of 64 bytes at stride 4·n into `y` rows
        // r0..r0 + 32 ≤ t (full blocks) or into `tail` (stride 128). Prefetches never fault.
        // `tilerelease` returns the tile state before leaving.
        unsafe {
            asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr(), options(nostack, readonly));
            for p in 0..n / NR {
                let panel = wb.add(p * k * NR);
                let bias = w.bias.as_ptr().add(p * NR);
                for blk in 0..blocks {
                    let a = a0.add(blk * 2 * kbs * 512);
                    asm!(
                        "tileloadd tmm0, [{b0} + {z}*1]",
                        "tileloadd tmm1, [{b1} + {z}*1]",
                        "tileloadd tmm2, [{b0} + {z}*1]",
                        "tileloadd tmm3, [{b1} + {z}*1]",
                        b0 = in(reg) bias,
                        b1 = in(reg) bias.add(16),
                        z = in(reg) 0usize,
                        options(nostack, readonly),
                    );
                    for kb in 0..kbs {
                        if kb + 1 < kbs {
                            let na = a.add((kb + 1) * 512);
                            let na2 = a.add((kbs + kb + 1) * 512);
                            let nb = panel.add((kb + 1) * 32 * NR);
                            for l in 0..16 {
                                _mm_prefetch::<_MM_HINT_T0>(na.add(l * 32).cast());
                                _mm_prefetch::<_MM_HINT_T0>(na2.add(l * 32).cast());
                                _mm_prefetch::<_MM_HINT_T0>(nb.add(l * 64).cast());
                                _mm_prefetch::<_MM_HINT_T0>(nb.add(l * 64 + 32).cast());
                            }
                        }
                        asm!(
                            "tileloadd tmm4, [{a} + {s}*1]",
                            "tileloadd tmm5, [{a2} + {s}*1]",
                            "tileloadd tmm6, [{b} + {bs}*1]",
                            "tileloadd tmm7, [{b2} + {bs}*1]",
                            "tdpbf16ps tmm0, tmm4, tmm6",
                            "tdpbf16ps tmm1, tmm4, tmm7",
                            "tdpbf16ps tmm2, tmm5, tmm6",
                            "tdpbf16ps tmm3, tmm5, tmm7",
                            a = in(reg) a.add(kb * 512),
                            a2 = in(reg) a.add((kbs + kb) * 512),
                            s = in(reg) 64usize,
                            b = in(reg) panel.add(kb * 32 * NR),
                            b2 = in(reg) panel.add(kb * 32 * NR + 32),
                            bs = in(reg) 128usize,
                            options(nostack, readonly),
                        );
                    }
                    let r0 = blk * 32;
                    let full = r0 + 32 <= t;
                    let (dst, ds) = if full {
                        (y.as_mut_ptr().add(r0 * n + p * NR), n)
                    } else {
                        (tail.as_mut_ptr(), 32)
                    };
                    asm!(
                        "tilestored [{c0} + {s}*1], tmm0",
                        "tilestored [{c1} + {s}*1], tmm1",
                        "tilestored [{c2} + {s}*1], tmm2",
                        "tilestored [{c3} + {s}*1], tmm3",
                        c0 = in(reg) dst,
                        c1 = in(reg) dst.add(16),
                        c2 = in(reg) dst.add(16 * ds),
                        c3 = in(reg) dst.add(16 * ds + 16),
                        s = in(reg) ds * 4,
                        options(nostack),
                    );
                    if !full {
                        for i in 0..t - r0 {
                            std::ptr::copy_nonoverlapping(
                                tail.as_ptr().add(i * 32),
                                y.as_mut_ptr().add((r0 + i) * n + p * NR),
                                NR,
                            );
                        }
                    }
                }
            }
            asm!("tilerelease", options(nostack, nomem));
        }
    }

    /// [`super::Isa::Avx512Bf16`]'s matmul: `x` (`t × k` f32, `k` a multiple of 32) rounded to
    /// bf16 (nearest, ties to even: as [`matmul_amx`] rounds it) row by row into `xb`, then,
    /// panel by panel (the bf16 pair panels of [`super::Panels::from_q4_bf16`], which stay in
    /// cache while every token tile passes over them), tiles of `M` tokens × 32 outputs
    /// ([`tile_bf16`]): per pair of `k`, one `vdpbf16ps` per accumulator (each f32 lane `+=`
    /// two bf16 products; products exact, sums in f32), the bias added at the end.
    #[target_feature(enable = "avx512f,avx512bf16")]
    pub(super) fn matmul_avx512bf16(x: &[f32], w: &Panels, y: &mut [f32], xb: &mut Vec<BLine>) {
        let (n, k) = (w.n, w.k);
        let t = x.len() / k;
        assert!(w.nr == NR && k.is_multiple_of(32) && n.is_multiple_of(NR));
        assert!(x.len() == t * k && y.len() == t * n && w.b().len() == n * k);
        let kb = k / 32;
        if xb.len() < t * kb {
            xb.resize(t * kb, BLine([0; 32]));
        }
        for r in 0..t {
            for b in 0..kb {
                // SAFETY: r < t and b < k / 32, so x[r·k + 32·b ..][..32] is in bounds and
                // line r·kb + b < t·kb ≤ xb.len() (a BLine is 64 bytes, 64-aligned).
                unsafe {
                    let v = bf16x32(x.as_ptr().add(r * k + b * 32));
                    _mm512_store_si512(xb.as_mut_ptr().add(r * kb + b).cast(), v);
                }
            }
        }
        // SAFETY: `BLine` is `repr(C)` around `[u16; 32]`: t·kb lines are t·k u16s.
        let xs = unsafe { std::slice::from_raw_parts(xb.as_ptr().cast::<u16>(), t * k) };
        const M: usize = MR_BF16;
        for p in 0..n / NR {
            let panel = &w.b()[p * k * NR..(p + 1) * k * NR];
            let bias = &w.bias[p * NR..(p + 1) * NR];
            let mut r = 0;
            while r + M <= t {
                tile_bf16::<M>(
                    &xs[r * k..(r + M) * k],
                    k,
                    panel,
                    bias,
                    y,
                    r * n + p * NR,
                    n,
                );
                r += M;
            }
            let (xr, y0) = (&xs[r * k..], r * n + p * NR);
            match t - r {
                0 => {}
                1 => tile_bf16::<1>(xr, k, panel, bias, y, y0, n),
                2 => tile_bf16::<2>(xr, k, panel, bias, y, y0, n),
                3 => tile_bf16::<3>(xr, k, panel, bias, y, y0, n),
                4 => tile_bf16::<4>(xr, k, panel, bias, y, y0, n),
                5 => tile_bf16::<5>(xr, k, panel, bias, y, y0, n),
                6 => tile_bf16::<6>(xr, k, panel, bias, y, y0, n),
                7 => tile_bf16::<7>(xr, k, panel, bias, y, y0, n),
                8 => tile_bf16::<8>(xr, k, panel, bias, y, y0, n),
                9 => tile_bf16::<9>(xr, k, panel, bias, y, y0, n),
                10 => tile_bf16::<10>(xr, k, panel, bias, y, y0, n),
                _ => tile_bf16::<11>(xr, k, panel, bias, y, y0, n),
            }
        }
    }

    /// Tokens per tile of [`matmul_avx512bf16`]: 2·12 accumulators + 2 weight vectors + the
    /// broadcast of 32 zmm registers.
    const MR_BF16: usize = 12;

    /// `M` tokens (bf16 rows of `x`, `M × k`) × one bf16 pair panel: 2·M accumulators of 16
    /// f32s, `k / 2` steps of two panel vectors (outputs 0..16 and 16..32, each lane a pair of
    /// consecutive `k`) against each token's pair broadcast.
    #[target_feature(enable = "avx512f,avx512bf16")]
    #[inline]
    fn tile_bf16<const M: usize>(
        x: &[u16],
        k: usize,
        panel: &[u16],
        bias: &[f32],
        y: &mut [f32],
        y0: usize,
        ystride: usize,
    ) {
        assert!(x.len() >= M * k && panel.len() == k * NR && bias.len() == NR);
        assert!(y.len() >= y0 + (M - 1) * ystride + NR);
        let mut acc = [[_mm512_setzero_ps(); 2]; M];
        let (xp, wp) = (x.as_ptr(), panel.as_ptr());
        for j in 0..k / 2 {
            // SAFETY: j < k / 2, so the panel reads (j·64 .. j·64 + 64 u16s) and the pair
            // reads (r·k + 2j, 2 u16s, r < M) are in bounds (asserted above).
            unsafe {
                let w0 = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                    wp.add(j * 64).cast(),
                ));
                let w1 = std::mem::transmute::<__m512i, __m512bh>(_mm512_loadu_si512(
                    wp.add(j * 64 + 32).cast(),
                ));
                for (r, a) in acc.iter_mut().enumerate() {
                    let pair = xp.add(r * k + 2 * j).cast::<i32>().read_unaligned();
                    let xv = std::mem::transmute::<__m512i, __m512bh>(_mm512_set1_epi32(pair));
                    a[0] = _mm512_dpbf16_ps(a[0], xv, w0);
                    a[1] = _mm512_dpbf16_ps(a[1], xv, w1);
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

    /// Whether this CPU runs the kernel a test checks (`present`: its features detected).
    /// On a CPU without them the test **fails** unless `JIKJI_SKIP_MISSING_ISA=1` says that
    /// skipping is intended: `scripts/test` sets it and first prints which kernels this CPU
    /// lacks, so a kernel left untested is named in every run's log, never skipped quietly.
    #[cfg(target_arch = "x86_64")]
    fn runs_here(present: bool, features: &str, kernel: &str) -> bool {
        if present {
            return true;
        }
        assert!(
            std::env::var_os("JIKJI_SKIP_MISSING_ISA").is_some_and(|v| v == "1"),
            "this CPU lacks {features}, so this test cannot check {kernel}; set \
             JIKJI_SKIP_MISSING_ISA=1 to skip the kernels a CPU lacks (scripts/test does, and names them)"
        );
        eprintln!("skipped: this CPU lacks {features}, so {kernel} is not checked here");
        false
    }

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
        if !runs_here(
            std::arch::is_x86_feature_detected!("avx512f"),
            "AVX-512F",
            "the tiled kernel",
        ) {
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
        if !runs_here(
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma"),
            "AVX2 + FMA",
            "the AVX2 tiled kernel",
        ) {
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
        if !runs_here(
            std::arch::is_x86_feature_detected!("avx2")
                && std::arch::is_x86_feature_detected!("fma"),
            "AVX2 + FMA",
            "the AVX2 matmul",
        ) {
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
                b: Vec::new(),
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

    /// The AMX matmul equals the plain-Rust one on the bf16-rounded operands (the same
    /// products, summed in f32 in another order), for every token count from 1 to 70 (whole
    /// and partial 32-token blocks), two panels and both K of e5-small: the activations'
    /// conversion (nearest, ties to even), the A/B tile layouts and the bias are the ones
    /// documented. And it is not the f32 matmul: on unrounded operands it differs by bf16
    /// rounding (so a test that passes with the f32 kernel cannot pass by accident).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn amx_matmul_equals_the_portable_one_on_bf16_operands() {
        if !runs_here(
            x86::amx_usable(),
            "AMX (or Linux refused the tile state)",
            "the AMX matmul",
        ) {
            return;
        }
        // SAFETY: AMX usable (checked above); the helper passes bf16 panels.
        bf16_matmul_equals_the_portable_one(|x, w, y, xb| unsafe { x86::matmul_amx(x, w, y, xb) });
    }

    /// The AVX-512 BF16 matmul, as the AMX one above (1 to 70 tokens: whole and partial
    /// 12-token tiles).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512bf16_matmul_equals_the_portable_one_on_bf16_operands() {
        if !runs_here(
            std::arch::is_x86_feature_detected!("avx512bf16"),
            "AVX-512 BF16",
            "the AVX-512 BF16 matmul",
        ) {
            return;
        }
        // SAFETY: AVX-512F and AVX-512 BF16 present (checked); the helper passes bf16 panels.
        bf16_matmul_equals_the_portable_one(|x, w, y, xb| unsafe {
            x86::matmul_avx512bf16(x, w, y, xb)
        });
    }

    #[cfg(target_arch = "x86_64")]
    fn bf16_matmul_equals_the_portable_one(
        kernel: impl Fn(&[f32], &Panels, &mut [f32], &mut Vec<BLine>),
    ) {
        let round = |v: f32| f32::from_bits((bf16_bits(v) as u32) << 16);
        let mut rnd = xorshift();
        for (n, k) in [(64usize, 384usize), (64, 1536)] {
            let wf: Vec<f32> = (0..n * k).map(|_| rnd()).collect();
            let bias: Vec<f32> = (0..n).map(|_| rnd()).collect();
            // The f32 panels of the rounded weights (reference) and the bf16 pair panels.
            let mut lines = vec![Line([0.0; 16]); n * k / 16];
            let mut blines = vec![BLine([0; 32]); n * k / 32];
            {
                let (f, b) = (as_f32_mut(&mut lines), as_u16_mut(&mut blines));
                for o in 0..n {
                    for kk in 0..k {
                        let v = wf[o * k + kk];
                        f[(o / NR) * k * NR + kk * NR + o % NR] = round(v);
                        b[(o / NR) * k * NR + (kk / 2) * 2 * NR + (o % NR) * 2 + kk % 2] =
                            bf16_bits(v);
                    }
                }
            }
            let wr = Panels {
                n,
                k,
                nr: NR,
                w: lines,
                b: Vec::new(),
                bias: bias.clone(),
            };
            let wb = Panels {
                n,
                k,
                nr: NR,
                w: Vec::new(),
                b: blines,
                bias,
            };
            let mut xb = Vec::new();
            let mut worst_vs_f32 = 0f32;
            for t in 1..=70 {
                let x: Vec<f32> = (0..t * k).map(|_| rnd()).collect();
                let xr: Vec<f32> = x.iter().map(|&v| round(v)).collect();
                let (mut a, mut b) = (vec![0f32; t * n], vec![f32::NAN; t * n]);
                matmul_portable(&xr, &wr, &mut a);
                kernel(&x, &wb, &mut b, &mut xb);
                for (i, (p, q)) in a.iter().zip(&b).enumerate() {
                    assert!(
                        (p - q).abs() <= 2e-5 * (k as f32).sqrt() * (1.0 + p.abs()),
                        "n {n} k {k} t {t} element {i}: {p} vs {q}"
                    );
                }
                let mut exact = vec![0f32; t * n];
                let wx = Panels {
                    n,
                    k,
                    nr: NR,
                    w: {
                        let mut l = vec![Line([0.0; 16]); n * k / 16];
                        let f = as_f32_mut(&mut l);
                        for o in 0..n {
                            for kk in 0..k {
                                f[(o / NR) * k * NR + kk * NR + o % NR] = wf[o * k + kk];
                            }
                        }
                        l
                    },
                    b: Vec::new(),
                    bias: wb.bias.clone(),
                };
                matmul_portable(&x, &wx, &mut exact);
                for (p, q) in exact.iter().zip(&b) {
                    worst_vs_f32 = worst_vs_f32.max((p - q).abs());
                }
            }
            // Sums of K products of ~U(-2, 2) values, each operand off by up to 2^-9
            // relatively: the f32 result differs by ~0.1 somewhere in 70 × 64 outputs.
            assert!(
                worst_vs_f32 > 1e-3,
                "k {k}: the bf16 kernel equals f32 ({worst_vs_f32})?"
            );
        }
    }

    /// The AMX attention of one head gives attend_row's context rows on the bf16-rounded
    /// Q, K and V (its softmax weights are bf16 too: ≤ 2^-8 relative each, so ≤ ~1e-2 on
    /// these values), for ragged lengths around the 16-query and 32-key blocks; and the f32
    /// result within bf16 rounding.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn amx_attention_equals_the_row_kernel_on_bf16_operands() {
        if !runs_here(
            x86::amx_usable(),
            "AMX (or Linux refused the tile state)",
            "the AMX attention",
        ) {
            return;
        }
        // SAFETY: AMX usable (checked above).
        bf16_attention_equals_the_row_kernel(|q, k, v, stride, len, scale, out, os, sc| unsafe {
            x86::attend_head_amx(q, k, v, stride, len, scale, out, os, sc)
        });
    }

    /// The AVX-512 BF16 attention of one head, as the AMX one above (ragged lengths around
    /// its 8-query and 32-key blocks).
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512bf16_attention_equals_the_row_kernel_on_bf16_operands() {
        if !runs_here(
            std::arch::is_x86_feature_detected!("avx512bf16"),
            "AVX-512 BF16",
            "the AVX-512 BF16 attention",
        ) {
            return;
        }
        // SAFETY: AVX-512F and AVX-512 BF16 present (checked above).
        bf16_attention_equals_the_row_kernel(|q, k, v, stride, len, scale, out, os, sc| unsafe {
            x86::attend_head_bf16(q, k, v, stride, len, scale, out, os, sc)
        });
    }

    #[cfg(target_arch = "x86_64")]
    #[allow(clippy::type_complexity)]
    fn bf16_attention_equals_the_row_kernel(
        kernel: impl Fn(&[f32], &[f32], &[f32], usize, usize, f32, &mut [f32], usize, &mut AmxAttention),
    ) {
        let round = |v: f32| f32::from_bits((bf16_bits(v) as u32) << 16);
        let mut rnd = xorshift();
        let hd = 32;
        let stride = 3 * hd + 5;
        let os = hd + 7;
        let mut sc = AmxAttention::default();
        let (mut worst_r, mut worst_f) = (0f32, 0f32);
        for len in [
            1usize, 2, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 48, 100, 257, 512,
        ] {
            let rows: Vec<f32> = (0..len * stride).map(|_| rnd()).collect();
            let (q, k, v) = (&rows[..], &rows[hd..], &rows[2 * hd..]);
            let mut out = vec![f32::NAN; (len - 1) * os + hd];
            let scale = 1.0 / (hd as f32).sqrt();
            kernel(q, k, v, stride, len, scale, &mut out, os, &mut sc);
            let part = |src: &[f32], j: usize, r: bool| -> Vec<f32> {
                src[j * stride..j * stride + hd]
                    .iter()
                    .map(|&x| if r { round(x) } else { x })
                    .collect()
            };
            for r in [false, true] {
                let mut kt = vec![0f32; hd * len];
                let mut vh = vec![0f32; len * hd];
                for j in 0..len {
                    let (kr, vr) = (part(k, j, r), part(v, j, r));
                    for d in 0..hd {
                        kt[d * len + j] = kr[d];
                    }
                    vh[j * hd..(j + 1) * hd].copy_from_slice(&vr);
                }
                for i in 0..len {
                    let mut scores = Vec::new();
                    attend_row(&part(q, i, r), &kt, &vh, scale, &mut scores);
                    for d in 0..hd {
                        let (a, b) = (out[i * os + d], scores[len + d]);
                        let e = (a - b).abs();
                        if r {
                            worst_r = worst_r.max(e);
                            assert!(e <= 1e-2, "len {len} row {i} dim {d}: {a} vs {b}");
                        } else {
                            worst_f = worst_f.max(e);
                            assert!(e <= 1e-1, "len {len} row {i} dim {d}: {a} vs f32 {b}");
                        }
                    }
                }
            }
        }
        eprintln!("max abs diff: {worst_r:e} (bf16 operands), {worst_f:e} (f32)");
        assert!(worst_f > worst_r, "bf16 rounding made no difference?");
    }

    /// The AVX-512F softmax gives scaling + softmax_weights's weights and factor bit for bit,
    /// for lengths around its 16-lane chunks and scores that hit the clamp.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn avx512_softmax_equals_the_scalar_one_bit_for_bit() {
        if !runs_here(
            std::arch::is_x86_feature_detected!("avx512f"),
            "AVX-512F",
            "the vector softmax",
        ) {
            return;
        }
        let mut rnd = xorshift();
        let scale = 1.0 / 32f32.sqrt();
        for len in [1usize, 2, 15, 16, 17, 31, 32, 33, 100, 512] {
            for spread in [1.0f32, 30.0, 3000.0] {
                let raw: Vec<f32> = (0..len).map(|_| rnd() * spread).collect();
                let mut want: Vec<f32> = raw.iter().map(|v| v * scale).collect();
                let inv_want = softmax_weights(&mut want);
                let mut got = raw.clone();
                // SAFETY: AVX-512F checked above.
                let inv_got = unsafe { x86::softmax_weights_scaled_avx512(&mut got, scale) };
                assert_eq!(
                    inv_got.to_bits(),
                    inv_want.to_bits(),
                    "len {len} spread {spread}"
                );
                for (j, (a, b)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(
                        a.to_bits(),
                        b.to_bits(),
                        "len {len} spread {spread} key {j}: {a} vs {b}"
                    );
                }
            }
        }
    }

    /// Asking for a kernel the CPU lacks gives the best it has; `Portable` is always
    /// granted; names round-trip.
    #[test]
    fn isa_resolve_and_names() {
        let have = Isa::detect();
        assert_eq!(Isa::resolve(Isa::Portable), Isa::Portable);
        assert_eq!(Isa::resolve(have), have);
        assert_eq!(Isa::resolve(Isa::Amx), have);
        if have == Isa::Amx || have == Isa::Avx512Bf16 {
            assert_eq!(Isa::resolve(Isa::Avx512), Isa::Avx512);
            assert_eq!(Isa::resolve(Isa::Avx2), Isa::Avx2);
        }
        for i in [
            Isa::Amx,
            Isa::Avx512Bf16,
            Isa::Avx512,
            Isa::Avx2,
            Isa::Portable,
        ] {
            assert_eq!(Isa::parse(i.name()), Some(i));
        }
        assert_eq!(Isa::parse("f32"), None);
        assert_eq!(Isa::Amx.numerics(), "bf16");
        assert_eq!(Isa::Avx512Bf16.numerics(), "bf16");
        assert_eq!(Isa::Avx512.numerics(), "f32");
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

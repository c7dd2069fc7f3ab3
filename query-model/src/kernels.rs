//! The numeric kernels of the forward pass, each with a naive reference in the unit tests.
//!
//! Shapes are row-major. Activations are `f32`; weights are Q4_0 ([`Q4Matrix`]), dequantised
//! a few rows at a time into a small `f32` scratch and multiplied with every token's activations
//! (so the nibble unpacking is paid once per weight per call, not once per token).
//!
//! The matmul has three versions with one tiling (4 weight rows × 2 tokens per step): AVX2 +
//! FMA intrinsics on x86_64 CPUs that have them (checked at run time), simd128 intrinsics on
//! wasm32 built with `+simd128` (`.cargo/config.toml` sets it), and plain Rust
//! ([`matmul_q4_portable`]) elsewhere and as the tests' second reference.

use crate::{Q4_BLOCK, Q4_BLOCK_BYTES};

/// A Q4_0 weight matrix of `rows × cols` (out × in), row-major, blocks of 32 along `cols`:
/// each row is `cols / 32` blocks of 18 bytes (f16 scale `d`, then 16 bytes; byte j holds
/// weight j in its low nibble and weight j + 16 in its high nibble; weight = (nibble − 8) · d).
/// This is the E5S1 / ggml `Q4_0` layout, kept byte for byte.
#[derive(Debug, Clone)]
pub struct Q4Matrix {
    /// Output size N.
    pub rows: usize,
    /// Input size K (a multiple of 32).
    pub cols: usize,
    /// `rows · cols / 32 · 18` bytes.
    pub bytes: Vec<u8>,
}

impl Q4Matrix {
    /// Bytes of one row.
    pub fn row_bytes(cols: usize) -> usize {
        cols / Q4_BLOCK * Q4_BLOCK_BYTES
    }
}

/// Dequantises one Q4_0 row (`out.len()` weights, a multiple of 32, from
/// `out.len() / 32 · 18` bytes of `q`) into `out`.
#[inline(always)]
pub fn dequant_row(q: &[u8], out: &mut [f32]) {
    debug_assert_eq!(q.len(), out.len() / Q4_BLOCK * Q4_BLOCK_BYTES);
    for (blk, o) in q
        .chunks_exact(Q4_BLOCK_BYTES)
        .zip(out.chunks_exact_mut(Q4_BLOCK))
    {
        let d = half::f16::from_bits(u16::from_le_bytes([blk[0], blk[1]])).to_f32();
        let (lo, hi) = o.split_at_mut(16);
        for j in 0..16 {
            let b = blk[2 + j];
            lo[j] = ((b & 0x0F) as i32 - 8) as f32 * d;
            hi[j] = ((b >> 4) as i32 - 8) as f32 * d;
        }
    }
}

/// Output rows dequantised at a time.
const ROWS: usize = 4;

/// `y[s][n] = bias[n] + Σ_k x[s][k] · W[n][k]` for `s < x.len() / W.cols`: `x` is `S × K`
/// f32, `W` a [`Q4Matrix`] `N × K`, `bias` N f32, `y` `S × N` (overwritten). Panics if the
/// lengths disagree (callers size them from the model's own dimensions).
///
/// Uses AVX2 + FMA when the x86_64 CPU has them (checked at run time), simd128 on wasm32
/// built with `+simd128`, else [`matmul_q4_portable`].
pub fn matmul_q4(x: &[f32], w: &Q4Matrix, bias: &[f32], y: &mut [f32]) {
    check_shapes(x, w, bias, y);
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
        {
            // SAFETY: the CPU has AVX2 and FMA (checked just above), all `avx2` needs; the
            // shapes were checked, which its pointer reads rely on.
            unsafe { avx2::matmul(x, w, bias, y) };
            return;
        }
    }
    #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
    {
        simd128::matmul(x, w, bias, y);
        #[allow(clippy::needless_return)]
        return;
    }
    #[allow(unreachable_code)]
    matmul_q4_portable(x, w, bias, y)
}

fn check_shapes(x: &[f32], w: &Q4Matrix, bias: &[f32], y: &mut [f32]) {
    let (n, k) = (w.rows, w.cols);
    assert!(
        k.is_multiple_of(Q4_BLOCK) && k > 0,
        "K = {k} is not a multiple of 32"
    );
    assert_eq!(x.len() % k, 0, "x is not S × {k}");
    let s = x.len() / k;
    assert_eq!(y.len(), s * n, "y is not {s} × {n}");
    assert_eq!(bias.len(), n, "bias is not {n}");
    assert_eq!(
        w.bytes.len(),
        n * Q4Matrix::row_bytes(k),
        "W is not {n} × {k} Q4_0"
    );
}

/// [`matmul_q4`] in plain Rust (no SIMD intrinsics): the reference for the SIMD versions and
/// the path for targets without them. Same results up to summation rounding.
pub fn matmul_q4_portable(x: &[f32], w: &Q4Matrix, bias: &[f32], y: &mut [f32]) {
    check_shapes(x, w, bias, y);
    let (n, k) = (w.rows, w.cols);
    let s = x.len() / k;
    let rb = Q4Matrix::row_bytes(k);
    let mut scratch = vec![0f32; k];
    for o in 0..n {
        dequant_row(&w.bytes[o * rb..(o + 1) * rb], &mut scratch);
        for t in 0..s {
            let xr = &x[t * k..(t + 1) * k];
            let mut acc = [0f32; 8];
            for (wc, xc) in scratch.chunks_exact(8).zip(xr.chunks_exact(8)) {
                for l in 0..8 {
                    acc[l] += wc[l] * xc[l];
                }
            }
            y[t * n + o] = bias[o] + acc.iter().sum::<f32>();
        }
    }
}

/// The tiling shared by the SIMD versions: [`ROWS`] weight rows are dequantised into a
/// scratch, then multiplied with two tokens at a time (`tile2`), the last odd token alone
/// (`tile1`); leftover rows (N not a multiple of 4) one by one with `tile1` on a 1-row tile.
macro_rules! tiled_matmul {
    ($x:expr, $w:expr, $bias:expr, $y:expr, $dequant:path, $tile2:path, $tile1:path) => {{
        let (x, w, bias, y) = ($x, $w, $bias, $y);
        let (n, k) = (w.rows, w.cols);
        let s = x.len() / k;
        let rb = Q4Matrix::row_bytes(k);
        let mut scratch = vec![0f32; ROWS * k];
        let mut n0 = 0;
        while n0 + ROWS <= n {
            for i in 0..ROWS {
                $dequant(
                    &w.bytes[(n0 + i) * rb..(n0 + i + 1) * rb],
                    &mut scratch[i * k..(i + 1) * k],
                );
            }
            let mut t = 0;
            while t + 2 <= s {
                let d = $tile2(&scratch, &x[t * k..(t + 2) * k], k);
                for j in 0..2 {
                    for i in 0..ROWS {
                        y[(t + j) * n + n0 + i] = bias[n0 + i] + d[j][i];
                    }
                }
                t += 2;
            }
            if t < s {
                let d = $tile1(&scratch, &x[t * k..(t + 1) * k], k);
                for i in 0..ROWS {
                    y[t * n + n0 + i] = bias[n0 + i] + d[i];
                }
            }
            n0 += ROWS;
        }
        if n0 < n {
            // Leftover rows: reuse the 4-row tile with the missing rows zero.
            scratch.fill(0.0);
            for i in 0..n - n0 {
                $dequant(
                    &w.bytes[(n0 + i) * rb..(n0 + i + 1) * rb],
                    &mut scratch[i * k..(i + 1) * k],
                );
            }
            for t in 0..s {
                let d = $tile1(&scratch, &x[t * k..(t + 1) * k], k);
                for i in 0..n - n0 {
                    y[t * n + n0 + i] = bias[n0 + i] + d[i];
                }
            }
        }
    }};
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    //! AVX2 + FMA kernels. Every function requires a CPU with both (callers check).
    use super::{Q4Matrix, ROWS};
    use std::arch::x86_64::*;

    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn matmul(x: &[f32], w: &Q4Matrix, bias: &[f32], y: &mut [f32]) {
        tiled_matmul!(x, w, bias, y, dequant_row, tile2, tile1)
    }

    #[target_feature(enable = "avx2,fma")]
    fn hsum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
        _mm_cvtss_f32(s)
    }

    /// Q4_0 row → f32 (as [`super::dequant_row`]).
    #[target_feature(enable = "avx2,fma")]
    fn dequant_row(q: &[u8], out: &mut [f32]) {
        assert_eq!(q.len() / 18 * 32, out.len());
        let mask = _mm_set1_epi8(0x0F);
        let eight = _mm256_set1_epi32(8);
        for (blk, o) in q.chunks_exact(18).zip(out.chunks_exact_mut(32)) {
            let d =
                _mm256_set1_ps(half::f16::from_bits(u16::from_le_bytes([blk[0], blk[1]])).to_f32());
            // SAFETY: blk has 18 bytes, 16 are read from offset 2; o has 32 floats, written
            // in four runs of 8.
            unsafe {
                let b = _mm_loadu_si128(blk.as_ptr().add(2) as *const __m128i);
                let lo = _mm_and_si128(b, mask);
                let hi = _mm_and_si128(_mm_srli_epi16::<4>(b), mask);
                let parts = [lo, _mm_srli_si128::<8>(lo), hi, _mm_srli_si128::<8>(hi)];
                for (i, v) in parts.into_iter().enumerate() {
                    let wi = _mm256_sub_epi32(_mm256_cvtepu8_epi32(v), eight);
                    _mm256_storeu_ps(
                        o.as_mut_ptr().add(8 * i),
                        _mm256_mul_ps(_mm256_cvtepi32_ps(wi), d),
                    );
                }
            }
        }
    }

    /// Dots of the 4 rows of `w` (`4 × k`) with the 2 rows of `x` (`2 × k`): `[token][row]`.
    #[target_feature(enable = "avx2,fma")]
    #[allow(clippy::needless_range_loop)]
    fn tile2(w: &[f32], x: &[f32], k: usize) -> [[f32; ROWS]; 2] {
        assert!(w.len() == ROWS * k && x.len() == 2 * k && k.is_multiple_of(8));
        let mut acc = [[_mm256_setzero_ps(); ROWS]; 2];
        let (wp, xp) = (w.as_ptr(), x.as_ptr());
        for c in (0..k).step_by(8) {
            // SAFETY: c + 8 <= k, so every read is inside w (4 × k) and x (2 × k).
            unsafe {
                let x0 = _mm256_loadu_ps(xp.add(c));
                let x1 = _mm256_loadu_ps(xp.add(k + c));
                for r in 0..ROWS {
                    let wr = _mm256_loadu_ps(wp.add(r * k + c));
                    acc[0][r] = _mm256_fmadd_ps(wr, x0, acc[0][r]);
                    acc[1][r] = _mm256_fmadd_ps(wr, x1, acc[1][r]);
                }
            }
        }
        let mut out = [[0f32; ROWS]; 2];
        for t in 0..2 {
            for r in 0..ROWS {
                out[t][r] = hsum(acc[t][r]);
            }
        }
        out
    }

    /// Dots of the 4 rows of `w` with the one row of `x`.
    #[target_feature(enable = "avx2,fma")]
    fn tile1(w: &[f32], x: &[f32], k: usize) -> [f32; ROWS] {
        assert!(w.len() == ROWS * k && x.len() == k && k.is_multiple_of(8));
        let mut acc = [_mm256_setzero_ps(); ROWS];
        let (wp, xp) = (w.as_ptr(), x.as_ptr());
        for c in (0..k).step_by(8) {
            // SAFETY: c + 8 <= k.
            unsafe {
                let x0 = _mm256_loadu_ps(xp.add(c));
                for (r, a) in acc.iter_mut().enumerate() {
                    *a = _mm256_fmadd_ps(_mm256_loadu_ps(wp.add(r * k + c)), x0, *a);
                }
            }
        }
        std::array::from_fn(|r| hsum(acc[r]))
    }
}

#[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
mod simd128 {
    //! wasm simd128 kernels (the crate is built with `+simd128` for the browser).
    use super::{Q4Matrix, ROWS};
    use std::arch::wasm32::*;

    pub(super) fn matmul(x: &[f32], w: &Q4Matrix, bias: &[f32], y: &mut [f32]) {
        tiled_matmul!(x, w, bias, y, dequant_row, tile2, tile1)
    }

    #[inline(always)]
    fn hsum(v: v128) -> f32 {
        (f32x4_extract_lane::<0>(v) + f32x4_extract_lane::<2>(v))
            + (f32x4_extract_lane::<1>(v) + f32x4_extract_lane::<3>(v))
    }

    #[inline(always)]
    fn dequant_row(q: &[u8], out: &mut [f32]) {
        assert_eq!(q.len() / 18 * 32, out.len());
        let mask = u8x16_splat(0x0F);
        let eight = i32x4_splat(8);
        for (blk, o) in q.chunks_exact(18).zip(out.chunks_exact_mut(32)) {
            let d =
                f32x4_splat(half::f16::from_bits(u16::from_le_bytes([blk[0], blk[1]])).to_f32());
            // SAFETY: 16 bytes read at offset 2 of an 18-byte block; 8 runs of 4 floats
            // written into a 32-float chunk.
            unsafe {
                let b = v128_load(blk.as_ptr().add(2) as *const v128);
                let lo = v128_and(b, mask);
                let hi = u8x16_shr(b, 4);
                let mut i = 0;
                for v in [lo, hi] {
                    let h16 = [u16x8_extend_low_u8x16(v), u16x8_extend_high_u8x16(v)];
                    for h in h16 {
                        for q32 in [u32x4_extend_low_u16x8(h), u32x4_extend_high_u16x8(h)] {
                            let f = f32x4_convert_i32x4(i32x4_sub(q32, eight));
                            v128_store(o.as_mut_ptr().add(4 * i) as *mut v128, f32x4_mul(f, d));
                            i += 1;
                        }
                    }
                }
            }
        }
    }

    #[inline(always)]
    #[allow(clippy::needless_range_loop)]
    fn tile2(w: &[f32], x: &[f32], k: usize) -> [[f32; ROWS]; 2] {
        assert!(w.len() == ROWS * k && x.len() == 2 * k && k.is_multiple_of(4));
        let mut acc = [[f32x4_splat(0.0); ROWS]; 2];
        let (wp, xp) = (w.as_ptr(), x.as_ptr());
        for c in (0..k).step_by(4) {
            // SAFETY: c + 4 <= k.
            unsafe {
                let x0 = v128_load(xp.add(c) as *const v128);
                let x1 = v128_load(xp.add(k + c) as *const v128);
                for r in 0..ROWS {
                    let wr = v128_load(wp.add(r * k + c) as *const v128);
                    acc[0][r] = f32x4_add(acc[0][r], f32x4_mul(wr, x0));
                    acc[1][r] = f32x4_add(acc[1][r], f32x4_mul(wr, x1));
                }
            }
        }
        let mut out = [[0f32; ROWS]; 2];
        for t in 0..2 {
            for r in 0..ROWS {
                out[t][r] = hsum(acc[t][r]);
            }
        }
        out
    }

    #[inline(always)]
    fn tile1(w: &[f32], x: &[f32], k: usize) -> [f32; ROWS] {
        assert!(w.len() == ROWS * k && x.len() == k && k.is_multiple_of(4));
        let mut acc = [f32x4_splat(0.0); ROWS];
        let (wp, xp) = (w.as_ptr(), x.as_ptr());
        for c in (0..k).step_by(4) {
            // SAFETY: c + 4 <= k.
            unsafe {
                let x0 = v128_load(xp.add(c) as *const v128);
                for (r, a) in acc.iter_mut().enumerate() {
                    *a = f32x4_add(
                        *a,
                        f32x4_mul(v128_load(wp.add(r * k + c) as *const v128), x0),
                    );
                }
            }
        }
        std::array::from_fn(|r| hsum(acc[r]))
    }
}

/// In-place LayerNorm of each `w.len()`-wide row of `x`: `(x − mean) / √(var + eps) · w + b`
/// with the biased variance (Ba et al. 2016, "Layer Normalization"; ONNX
/// `LayerNormalization`).
pub fn layer_norm(x: &mut [f32], w: &[f32], b: &[f32], eps: f32) {
    let h = w.len();
    assert_eq!(b.len(), h);
    assert_eq!(x.len() % h, 0);
    for row in x.chunks_exact_mut(h) {
        let mean = row.iter().sum::<f32>() / h as f32;
        let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((v, wi), bi) in row.iter_mut().zip(w).zip(b) {
            *v = (*v - mean) * inv * wi + bi;
        }
    }
}

/// In-place exact GELU, `x · ½ · (1 + erf(x / √2))` (Hendrycks & Gimpel 2016; BERT's
/// `gelu`, not the tanh approximation), with `libm::erff`.
pub fn gelu_erf(x: &mut [f32]) {
    for v in x.iter_mut() {
        *v = 0.5 * *v * (1.0 + libm::erff(*v * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// Multi-head self-attention over one unpadded sequence (Vaswani et al. 2017): `q`, `k`,
/// `v` are `S × H` (heads side by side, `H / heads` wide each), `ctx` (`S × H`, overwritten)
/// gets `softmax(q_h k_hᵀ / √(H/heads)) v_h` per head. Every position attends to every
/// position (a single query has no padding, so there is no mask). `scores` is scratch (resized
/// to `S`).
pub fn attention(
    q: &[f32],
    k: &[f32],
    v: &[f32],
    hidden: usize,
    heads: usize,
    ctx: &mut [f32],
    scores: &mut Vec<f32>,
) {
    assert!(hidden > 0 && heads > 0 && hidden.is_multiple_of(heads));
    assert!(q.len().is_multiple_of(hidden));
    assert!(k.len() == q.len() && v.len() == q.len() && ctx.len() == q.len());
    let s = q.len() / hidden;
    let hd = hidden / heads;
    let scale = 1.0 / (hd as f32).sqrt();
    scores.clear();
    scores.resize(s, 0.0);
    for head in 0..heads {
        let o = head * hd;
        for i in 0..s {
            let qi = &q[i * hidden + o..i * hidden + o + hd];
            let mut max = f32::NEG_INFINITY;
            for (j, sc) in scores.iter_mut().enumerate() {
                let kj = &k[j * hidden + o..j * hidden + o + hd];
                let d = qi.iter().zip(kj).map(|(a, b)| a * b).sum::<f32>() * scale;
                *sc = d;
                max = max.max(d);
            }
            let mut sum = 0.0;
            for sc in scores.iter_mut() {
                *sc = (*sc - max).exp();
                sum += *sc;
            }
            let out = &mut ctx[i * hidden + o..i * hidden + o + hd];
            out.fill(0.0);
            for (j, sc) in scores.iter().enumerate() {
                let p = sc / sum;
                let vj = &v[j * hidden + o..j * hidden + o + hd];
                for (c, vv) in out.iter_mut().zip(vj) {
                    *c += p * vv;
                }
            }
        }
    }
}

/// Mean of the `S` rows of `x` (`S × H`, every position counts: one query has no padding),
/// then L2-normalised: the E5 sentence embedding (Wang et al. 2022, arXiv:2212.03533).
/// Returns `H` floats of unit length (all zero only if the mean is exactly zero).
pub fn mean_pool_l2(x: &[f32], hidden: usize) -> Vec<f32> {
    assert!(hidden > 0 && x.len().is_multiple_of(hidden) && !x.is_empty());
    let s = x.len() / hidden;
    let mut out = vec![0f32; hidden];
    for row in x.chunks_exact(hidden) {
        for (o, v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
    for o in out.iter_mut() {
        *o /= s as f32;
    }
    let norm = out.iter().map(|v| v * v).sum::<f32>().sqrt().max(1e-12);
    for o in out.iter_mut() {
        *o /= norm;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random numbers in [-1, 1) (xorshift).
    fn rng(seed: u64) -> impl FnMut() -> f32 {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        }
    }

    /// A Q4_0 matrix of random nibbles and scales, and its weights as f64 by the format's
    /// definition (weight = (nibble − 8) · d, low nibbles first, then high).
    fn random_q4(rows: usize, cols: usize, seed: u64) -> (Q4Matrix, Vec<f64>) {
        let mut r = rng(seed);
        let mut bytes = Vec::new();
        let mut dense = vec![0f64; rows * cols];
        for n in 0..rows {
            for b in 0..cols / 32 {
                let d = half::f16::from_f32(0.01 + 0.05 * r().abs());
                bytes.extend_from_slice(&d.to_bits().to_le_bytes());
                for j in 0..16 {
                    let lo = ((r() + 1.0) * 8.0) as u8 & 15;
                    let hi = ((r() + 1.0) * 8.0) as u8 & 15;
                    bytes.push(lo | (hi << 4));
                    let df = d.to_f32() as f64;
                    dense[n * cols + b * 32 + j] = (lo as f64 - 8.0) * df;
                    dense[n * cols + b * 32 + j + 16] = (hi as f64 - 8.0) * df;
                }
            }
        }
        (Q4Matrix { rows, cols, bytes }, dense)
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn dequant_row_matches_the_q4_0_definition() {
        let (m, dense) = random_q4(3, 96, 1);
        let rb = Q4Matrix::row_bytes(96);
        for n in 0..3 {
            let mut out = vec![0f32; 96];
            dequant_row(&m.bytes[n * rb..(n + 1) * rb], &mut out);
            for k in 0..96 {
                assert_eq!(out[k] as f64, dense[n * 96 + k], "row {n} col {k}");
            }
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn matmul_q4_matches_naive() {
        // Shapes with tails: odd token counts, rows not a multiple of the 4-row tile.
        for &(s, n, k) in &[
            (1, 4, 32),
            (3, 7, 64),
            (5, 384, 384),
            (2, 13, 1536),
            (8, 6, 96),
        ] {
            let (w, dense) = random_q4(n, k, (s * 31 + n * 7 + k) as u64);
            let mut r = rng(k as u64);
            let x: Vec<f32> = (0..s * k).map(|_| r()).collect();
            let bias: Vec<f32> = (0..n).map(|_| r()).collect();
            let mut want = vec![0f64; s * n];
            for t in 0..s {
                for o in 0..n {
                    want[t * n + o] = bias[o] as f64
                        + (0..k)
                            .map(|i| x[t * k + i] as f64 * dense[o * k + i])
                            .sum::<f64>();
                }
            }
            for (name, f) in [
                (
                    "dispatched",
                    matmul_q4 as fn(&[f32], &Q4Matrix, &[f32], &mut [f32]),
                ),
                ("portable", matmul_q4_portable),
            ] {
                let mut y = vec![f32::NAN; s * n];
                f(&x, &w, &bias, &mut y);
                for i in 0..s * n {
                    let d = (y[i] as f64 - want[i]).abs();
                    assert!(
                        d < 1e-4 * (1.0 + want[i].abs()),
                        "{name} {s}x{n}x{k} [{i}]: {} vs {}",
                        y[i],
                        want[i]
                    );
                }
            }
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn layer_norm_matches_naive() {
        let mut r = rng(3);
        let h = 384;
        let mut x: Vec<f32> = (0..3 * h).map(|_| r() * 5.0 + 1.0).collect();
        let w: Vec<f32> = (0..h).map(|_| r()).collect();
        let b: Vec<f32> = (0..h).map(|_| r()).collect();
        let orig = x.clone();
        layer_norm(&mut x, &w, &b, 1e-12);
        for t in 0..3 {
            let row = &orig[t * h..(t + 1) * h];
            let mean = row.iter().map(|&v| v as f64).sum::<f64>() / h as f64;
            let var = row.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / h as f64;
            for i in 0..h {
                let want =
                    (row[i] as f64 - mean) / (var + 1e-12).sqrt() * w[i] as f64 + b[i] as f64;
                assert!((x[t * h + i] as f64 - want).abs() < 1e-5, "{t} {i}");
            }
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn gelu_is_the_erf_form() {
        let mut xs: Vec<f32> = (-80..=80).map(|i| i as f32 / 10.0).collect();
        let orig = xs.clone();
        gelu_erf(&mut xs);
        for (g, x) in xs.iter().zip(&orig) {
            let x = *x as f64;
            let want = 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2));
            assert!(
                (*g as f64 - want).abs() < 1e-6,
                "gelu({x}) = {g}, want {want}"
            );
        }
        // Not the tanh approximation: at x = 1 they differ by ~1.6e-4.
        let mut one = [1.0f32];
        gelu_erf(&mut one);
        assert!((one[0] - 0.841_344_7).abs() < 1e-6);
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn attention_matches_naive() {
        let (s, hid, heads) = (5, 64, 2);
        let hd = hid / heads;
        let mut r = rng(9);
        let q: Vec<f32> = (0..s * hid).map(|_| r() * 3.0).collect();
        let k: Vec<f32> = (0..s * hid).map(|_| r() * 3.0).collect();
        let v: Vec<f32> = (0..s * hid).map(|_| r()).collect();
        let mut ctx = vec![0f32; s * hid];
        attention(&q, &k, &v, hid, heads, &mut ctx, &mut Vec::new());
        for h in 0..heads {
            for i in 0..s {
                let sc: Vec<f64> = (0..s)
                    .map(|j| {
                        (0..hd)
                            .map(|d| {
                                q[i * hid + h * hd + d] as f64 * k[j * hid + h * hd + d] as f64
                            })
                            .sum::<f64>()
                            / (hd as f64).sqrt()
                    })
                    .collect();
                let z: f64 = sc.iter().map(|x| x.exp()).sum();
                for d in 0..hd {
                    let want: f64 = (0..s)
                        .map(|j| sc[j].exp() / z * v[j * hid + h * hd + d] as f64)
                        .sum();
                    let got = ctx[i * hid + h * hd + d] as f64;
                    assert!(
                        (got - want).abs() < 1e-5,
                        "head {h} pos {i} dim {d}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[cfg_attr(not(target_arch = "wasm32"), test)]
    #[cfg_attr(target_arch = "wasm32", wasm_bindgen_test::wasm_bindgen_test)]
    fn mean_pool_l2_matches_naive() {
        let x = [1.0f32, 2.0, 3.0, 3.0, 2.0, 1.0, 2.0, 2.0, 2.0];
        let v = mean_pool_l2(&x, 3);
        let want = [2.0f64, 2.0, 2.0];
        let n = (12.0f64).sqrt();
        for i in 0..3 {
            assert!((v[i] as f64 - want[i] / n).abs() < 1e-7);
        }
    }
}

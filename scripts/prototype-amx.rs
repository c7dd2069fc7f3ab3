//! Issue 17, session 21: the passage encoder's matmul on its real shapes, three ways, one core.
//! `rustc -O -C target-cpu=native scripts/prototype-amx.rs -o target/prototype-amx && target/prototype-amx`
//!
//! - f32: the encoder's AVX-512F kernel (8 tokens × 32 outputs, f32 panels), as in passage.rs;
//! - dpbf16: AVX-512 BF16 `vdpbf16ps` (8 tokens × 32 outputs, bf16-pair panels);
//! - amx: AMX `tdpbf16ps` (2 × 2 tiles: 32 tokens × 32 outputs, the same bf16-pair panels),
//!   activations converted to bf16 rows;
//! - amx tiles: the same, activations converted straight into A-tile order (1 KB per tile);
//! - + prefetch: and the next step's four tiles prefetched into L1;
//! - + bias init, direct store: and C starting as the bias (stride-0 tile load), stored
//!   straight into the output (what passage.rs's `matmul_amx` does);
//! - token-block-major: the same with the loops swapped (each 32-token block of A stays in
//!   cache while every panel passes over it).
//! Needs a CPU with AMX-BF16 and AVX-512 BF16 and Linux ≥ 5.16 (it asks for the tile state).
//!
//! Activations are converted to bf16 inside the timed call (as the encoder must). Prints ms per
//! call, GMAC/s and the largest relative error of each against an f64 reference of the bf16
//! operands (and of f32 against the f32 operands).
use std::arch::asm;
use std::arch::x86_64::*;
use std::time::Instant;

extern "C" {
    fn syscall(n: i64, ...) -> i64;
}

const NR: usize = 32;

#[repr(C, align(64))]
struct Cfg([u8; 64]);

fn rnd(state: &mut u64) -> f32 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    ((*state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

fn bf16(v: f32) -> u16 {
    let b = v.to_bits();
    ((b + 0x7fff + ((b >> 16) & 1)) >> 16) as u16
}
fn f32of(h: u16) -> f32 {
    f32::from_bits((h as u32) << 16)
}

/// f32 panels [N/32][K][32].
fn panels_f32(w: &[f32], n: usize, k: usize) -> Vec<f32> {
    let mut p = vec![0f32; n * k];
    for o in 0..n {
        for kk in 0..k {
            p[(o / NR) * k * NR + kk * NR + o % NR] = w[o * k + kk];
        }
    }
    p
}
/// bf16 pair panels [N/32][K/2][32][2].
fn panels_bf16(w: &[f32], n: usize, k: usize) -> Vec<u16> {
    let mut p = vec![0u16; n * k];
    for o in 0..n {
        for kk in 0..k {
            p[(o / NR) * k * NR + (kk / 2) * 2 * NR + (o % NR) * 2 + kk % 2] = bf16(w[o * k + kk]);
        }
    }
    p
}

#[target_feature(enable = "avx512f")]
fn matmul_f32(x: &[f32], t: usize, k: usize, n: usize, w: &[f32], y: &mut [f32]) {
    for p in 0..n / NR {
        let panel = &w[p * k * NR..];
        let mut r = 0;
        while r < t {
            let m = (t - r).min(8);
            let mut acc = [[_mm512_setzero_ps(); 2]; 8];
            for kk in 0..k {
                unsafe {
                    let w0 = _mm512_loadu_ps(panel.as_ptr().add(kk * NR));
                    let w1 = _mm512_loadu_ps(panel.as_ptr().add(kk * NR + 16));
                    for i in 0..8 {
                        let xv = _mm512_set1_ps(*x.get_unchecked((r + i.min(m - 1)) * k + kk));
                        acc[i][0] = _mm512_fmadd_ps(w0, xv, acc[i][0]);
                        acc[i][1] = _mm512_fmadd_ps(w1, xv, acc[i][1]);
                    }
                }
            }
            for i in 0..m {
                unsafe {
                    let o = y.as_mut_ptr().add((r + i) * n + p * NR);
                    _mm512_storeu_ps(o, acc[i][0]);
                    _mm512_storeu_ps(o.add(16), acc[i][1]);
                }
            }
            r += 8;
        }
    }
}

/// x (t × k f32) → bf16 rows of k, `rows` rows (zero past t).
#[target_feature(enable = "avx512f,avx512bf16")]
fn to_bf16(x: &[f32], t: usize, k: usize, rows: usize, xb: &mut Vec<u16>) {
    xb.clear();
    xb.resize(rows * k, 0);
    for i in 0..t * k / 32 {
        unsafe {
            let a = _mm512_loadu_ps(x.as_ptr().add(i * 32));
            let b = _mm512_loadu_ps(x.as_ptr().add(i * 32 + 16));
            let v = _mm512_cvtne2ps_pbh(b, a);
            _mm512_storeu_si512(xb.as_mut_ptr().add(i * 32).cast(), std::mem::transmute(v));
        }
    }
}

/// x (t × k f32) → bf16 in AMX A-tile order: `[rows / 16][k / 32][16][32]` (each tile 1 KB
/// contiguous), rows past t zero.
#[target_feature(enable = "avx512f,avx512bf16")]
fn to_bf16_tiles(x: &[f32], t: usize, k: usize, rows: usize, xb: &mut Vec<u16>) {
    if xb.len() < rows * k {
        xb.resize(rows * k, 0);
    }
    let kb = k / 32;
    for r in 0..rows {
        for b in 0..kb {
            let o = (r / 16) * kb * 512 + b * 512 + (r % 16) * 32;
            unsafe {
                let v = if r < t {
                    let a = _mm512_loadu_ps(x.as_ptr().add(r * k + b * 32));
                    let c = _mm512_loadu_ps(x.as_ptr().add(r * k + b * 32 + 16));
                    std::mem::transmute(_mm512_cvtne2ps_pbh(c, a))
                } else {
                    _mm512_setzero_si512()
                };
                _mm512_storeu_si512(xb.as_mut_ptr().add(o).cast(), v);
            }
        }
    }
}

#[target_feature(enable = "avx512f,avx512bf16")]
fn matmul_amx2(x: &[f32], t: usize, k: usize, n: usize, w: &[u16], y: &mut [f32], xb: &mut Vec<u16>) {
    let rows = t.div_ceil(32) * 32;
    to_bf16_tiles(x, t, k, rows, xb);
    let mut cfg = Cfg([0; 64]);
    cfg.0[0] = 1;
    for i in 0..8 {
        cfg.0[16 + 2 * i] = 64;
        cfg.0[48 + i] = 16;
    }
    let mut c = [0f32; 32 * 32];
    let kbs = k / 32;
    unsafe {
        asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr());
        for p in 0..n / NR {
            let panel = w.as_ptr().add(p * k * NR);
            for rb in 0..rows / 32 {
                let a = xb.as_ptr().add(rb * 2 * kbs * 512);
                asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3");
                for kb in 0..kbs {
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
                    );
                }
                asm!(
                    "tilestored [{c0} + {s}*1], tmm0",
                    "tilestored [{c1} + {s}*1], tmm1",
                    "tilestored [{c2} + {s}*1], tmm2",
                    "tilestored [{c3} + {s}*1], tmm3",
                    c0 = in(reg) c.as_mut_ptr(),
                    c1 = in(reg) c.as_mut_ptr().add(16),
                    c2 = in(reg) c.as_mut_ptr().add(16 * 32),
                    c3 = in(reg) c.as_mut_ptr().add(16 * 32 + 16),
                    s = in(reg) 128usize,
                );
                let r0 = rb * 32;
                for i in 0..32.min(t - r0) {
                    std::ptr::copy_nonoverlapping(c.as_ptr().add(i * 32), y.as_mut_ptr().add((r0 + i) * n + p * NR), 32);
                }
            }
        }
        asm!("tilerelease");
    }
}

#[target_feature(enable = "avx512f,avx512bf16")]
fn matmul_amx3(x: &[f32], t: usize, k: usize, n: usize, w: &[u16], y: &mut [f32], xb: &mut Vec<u16>) {
    let rows = t.div_ceil(32) * 32;
    to_bf16_tiles(x, t, k, rows, xb);
    let mut cfg = Cfg([0; 64]);
    cfg.0[0] = 1;
    for i in 0..8 {
        cfg.0[16 + 2 * i] = 64;
        cfg.0[48 + i] = 16;
    }
    let mut c = [0f32; 32 * 32];
    let kbs = k / 32;
    unsafe {
        asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr());
        for p in 0..n / NR {
            let panel = w.as_ptr().add(p * k * NR);
            for rb in 0..rows / 32 {
                let a = xb.as_ptr().add(rb * 2 * kbs * 512);
                asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3");
                for kb in 0..kbs {
                    // Prefetch the next step's tiles (A: 2 × 1 KB, B: 2 KB) into L1.
                    let na = a.add((kb + 1) * 512);
                    let na2 = a.add((kbs + kb + 1) * 512);
                    let nb = panel.add((kb + 1) * 32 * NR);
                    for l in 0..16 {
                        _mm_prefetch::<_MM_HINT_T0>(na.add(l * 32).cast());
                        _mm_prefetch::<_MM_HINT_T0>(na2.add(l * 32).cast());
                        _mm_prefetch::<_MM_HINT_T0>(nb.add(l * 64).cast());
                        _mm_prefetch::<_MM_HINT_T0>(nb.add(l * 64 + 32).cast());
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
                    );
                }
                asm!(
                    "tilestored [{c0} + {s}*1], tmm0",
                    "tilestored [{c1} + {s}*1], tmm1",
                    "tilestored [{c2} + {s}*1], tmm2",
                    "tilestored [{c3} + {s}*1], tmm3",
                    c0 = in(reg) c.as_mut_ptr(),
                    c1 = in(reg) c.as_mut_ptr().add(16),
                    c2 = in(reg) c.as_mut_ptr().add(16 * 32),
                    c3 = in(reg) c.as_mut_ptr().add(16 * 32 + 16),
                    s = in(reg) 128usize,
                );
                let r0 = rb * 32;
                for i in 0..32.min(t - r0) {
                    std::ptr::copy_nonoverlapping(c.as_ptr().add(i * 32), y.as_mut_ptr().add((r0 + i) * n + p * NR), 32);
                }
            }
        }
        asm!("tilerelease");
    }
}

#[target_feature(enable = "avx512f,avx512bf16")]
fn matmul_amx4(x: &[f32], t: usize, k: usize, n: usize, w: &[u16], bias: &[f32], y: &mut [f32], xb: &mut Vec<u16>) {
    let rows = t.div_ceil(32) * 32;
    to_bf16_tiles(x, t, k, rows, xb);
    let mut cfg = Cfg([0; 64]);
    cfg.0[0] = 1;
    for i in 0..8 {
        cfg.0[16 + 2 * i] = 64;
        cfg.0[48 + i] = 16;
    }
    let mut c = [0f32; 32 * 32];
    let kbs = k / 32;
    unsafe {
        asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr());
        for p in 0..n / NR {
            let panel = w.as_ptr().add(p * k * NR);
            for rb in 0..rows / 32 {
                let a = xb.as_ptr().add(rb * 2 * kbs * 512);
                // C starts as the bias: a tile load with stride 0 repeats one 64-byte row.
                asm!(
                    "tileloadd tmm0, [{b0} + {z}*1]",
                    "tileloadd tmm1, [{b1} + {z}*1]",
                    "tileloadd tmm2, [{b0} + {z}*1]",
                    "tileloadd tmm3, [{b1} + {z}*1]",
                    b0 = in(reg) bias.as_ptr().add(p * NR),
                    b1 = in(reg) bias.as_ptr().add(p * NR + 16),
                    z = in(reg) 0usize,
                );
                for kb in 0..kbs {
                    // Prefetch the next step's tiles (A: 2 × 1 KB, B: 2 KB) into L1.
                    let na = a.add((kb + 1) * 512);
                    let na2 = a.add((kbs + kb + 1) * 512);
                    let nb = panel.add((kb + 1) * 32 * NR);
                    for l in 0..16 {
                        _mm_prefetch::<_MM_HINT_T0>(na.add(l * 32).cast());
                        _mm_prefetch::<_MM_HINT_T0>(na2.add(l * 32).cast());
                        _mm_prefetch::<_MM_HINT_T0>(nb.add(l * 64).cast());
                        _mm_prefetch::<_MM_HINT_T0>(nb.add(l * 64 + 32).cast());
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
                    );
                }
                let r0 = rb * 32;
                let full = r0 + 32 <= t;
                let (dst, ds) = if full {
                    (y.as_mut_ptr().add(r0 * n + p * NR), n * 4)
                } else {
                    (c.as_mut_ptr(), 128)
                };
                asm!(
                    "tilestored [{c0} + {s}*1], tmm0",
                    "tilestored [{c1} + {s}*1], tmm1",
                    "tilestored [{c2} + {s}*1], tmm2",
                    "tilestored [{c3} + {s}*1], tmm3",
                    c0 = in(reg) dst,
                    c1 = in(reg) dst.add(16),
                    c2 = in(reg) dst.add(16 * ds / 4),
                    c3 = in(reg) dst.add(16 * ds / 4 + 16),
                    s = in(reg) ds,
                );
                if full {
                    continue;
                }
                asm!(
                    "tilestored [{c0} + {s}*1], tmm0",
                    "tilestored [{c1} + {s}*1], tmm1",
                    "tilestored [{c2} + {s}*1], tmm2",
                    "tilestored [{c3} + {s}*1], tmm3",
                    c0 = in(reg) c.as_mut_ptr(),
                    c1 = in(reg) c.as_mut_ptr().add(16),
                    c2 = in(reg) c.as_mut_ptr().add(16 * 32),
                    c3 = in(reg) c.as_mut_ptr().add(16 * 32 + 16),
                    s = in(reg) 128usize,
                );
                for i in 0..32.min(t - r0) {
                    std::ptr::copy_nonoverlapping(c.as_ptr().add(i * 32), y.as_mut_ptr().add((r0 + i) * n + p * NR), 32);
                }
            }
        }
        asm!("tilerelease");
    }
}

#[target_feature(enable = "avx512f,avx512bf16")]
fn matmul_amx5(x: &[f32], t: usize, k: usize, n: usize, w: &[u16], bias: &[f32], y: &mut [f32], xb: &mut Vec<u16>) {
    let rows = t.div_ceil(32) * 32;
    to_bf16_tiles(x, t, k, rows, xb);
    let mut cfg = Cfg([0; 64]);
    cfg.0[0] = 1;
    for i in 0..8 {
        cfg.0[16 + 2 * i] = 64;
        cfg.0[48 + i] = 16;
    }
    let mut c = [0f32; 32 * 32];
    let kbs = k / 32;
    unsafe {
        asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr());
        for rb in 0..rows / 32 {
            let a = xb.as_ptr().add(rb * 2 * kbs * 512);
            for p in 0..n / NR {
                let panel = w.as_ptr().add(p * k * NR);
                // C starts as the bias: a tile load with stride 0 repeats one 64-byte row.
                asm!(
                    "tileloadd tmm0, [{b0} + {z}*1]",
                    "tileloadd tmm1, [{b1} + {z}*1]",
                    "tileloadd tmm2, [{b0} + {z}*1]",
                    "tileloadd tmm3, [{b1} + {z}*1]",
                    b0 = in(reg) bias.as_ptr().add(p * NR),
                    b1 = in(reg) bias.as_ptr().add(p * NR + 16),
                    z = in(reg) 0usize,
                );
                for kb in 0..kbs {
                    // Prefetch the next step's tiles (A: 2 × 1 KB, B: 2 KB) into L1.
                    let na = a.add((kb + 1) * 512);
                    let na2 = a.add((kbs + kb + 1) * 512);
                    let nb = panel.add((kb + 1) * 32 * NR);
                    for l in 0..16 {
                        _mm_prefetch::<_MM_HINT_T0>(na.add(l * 32).cast());
                        _mm_prefetch::<_MM_HINT_T0>(na2.add(l * 32).cast());
                        _mm_prefetch::<_MM_HINT_T0>(nb.add(l * 64).cast());
                        _mm_prefetch::<_MM_HINT_T0>(nb.add(l * 64 + 32).cast());
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
                    );
                }
                let r0 = rb * 32;
                let full = r0 + 32 <= t;
                let (dst, ds) = if full {
                    (y.as_mut_ptr().add(r0 * n + p * NR), n * 4)
                } else {
                    (c.as_mut_ptr(), 128)
                };
                asm!(
                    "tilestored [{c0} + {s}*1], tmm0",
                    "tilestored [{c1} + {s}*1], tmm1",
                    "tilestored [{c2} + {s}*1], tmm2",
                    "tilestored [{c3} + {s}*1], tmm3",
                    c0 = in(reg) dst,
                    c1 = in(reg) dst.add(16),
                    c2 = in(reg) dst.add(16 * ds / 4),
                    c3 = in(reg) dst.add(16 * ds / 4 + 16),
                    s = in(reg) ds,
                );
                if full {
                    continue;
                }
                asm!(
                    "tilestored [{c0} + {s}*1], tmm0",
                    "tilestored [{c1} + {s}*1], tmm1",
                    "tilestored [{c2} + {s}*1], tmm2",
                    "tilestored [{c3} + {s}*1], tmm3",
                    c0 = in(reg) c.as_mut_ptr(),
                    c1 = in(reg) c.as_mut_ptr().add(16),
                    c2 = in(reg) c.as_mut_ptr().add(16 * 32),
                    c3 = in(reg) c.as_mut_ptr().add(16 * 32 + 16),
                    s = in(reg) 128usize,
                );
                for i in 0..32.min(t - r0) {
                    std::ptr::copy_nonoverlapping(c.as_ptr().add(i * 32), y.as_mut_ptr().add((r0 + i) * n + p * NR), 32);
                }
            }
        }
        asm!("tilerelease");
    }
}

#[target_feature(enable = "avx512f,avx512bf16")]
fn matmul_dpbf16(x: &[f32], t: usize, k: usize, n: usize, w: &[u16], y: &mut [f32], xb: &mut Vec<u16>) {
    to_bf16(x, t, k, t, xb);
    let xp = xb.as_ptr().cast::<i32>();
    let kp = k / 2;
    for p in 0..n / NR {
        let panel = w[p * k * NR..].as_ptr();
        let mut r = 0;
        while r < t {
            let m = (t - r).min(8);
            let mut acc = [[_mm512_setzero_ps(); 2]; 8];
            for kk in 0..kp {
                unsafe {
                    let w0: __m512bh = std::mem::transmute(_mm512_loadu_si512(panel.add(kk * 64).cast()));
                    let w1: __m512bh = std::mem::transmute(_mm512_loadu_si512(panel.add(kk * 64 + 32).cast()));
                    for i in 0..8 {
                        let xv: __m512bh = std::mem::transmute(_mm512_set1_epi32(*xp.add((r + i.min(m - 1)) * kp + kk)));
                        acc[i][0] = _mm512_dpbf16_ps(acc[i][0], xv, w0);
                        acc[i][1] = _mm512_dpbf16_ps(acc[i][1], xv, w1);
                    }
                }
            }
            for i in 0..m {
                unsafe {
                    let o = y.as_mut_ptr().add((r + i) * n + p * NR);
                    _mm512_storeu_ps(o, acc[i][0]);
                    _mm512_storeu_ps(o.add(16), acc[i][1]);
                }
            }
            r += 8;
        }
    }
}

#[target_feature(enable = "avx512f,avx512bf16")]
fn matmul_amx(x: &[f32], t: usize, k: usize, n: usize, w: &[u16], y: &mut [f32], xb: &mut Vec<u16>) {
    let rows = t.div_ceil(32) * 32;
    to_bf16(x, t, k, rows, xb);
    let mut cfg = Cfg([0; 64]);
    cfg.0[0] = 1;
    for i in 0..8 {
        cfg.0[16 + 2 * i] = 64;
        cfg.0[48 + i] = 16;
    }
    let mut c = [0f32; 32 * 32];
    let xs = k * 2; // A row stride, bytes
    unsafe {
        asm!("ldtilecfg [{}]", in(reg) cfg.0.as_ptr());
        for p in 0..n / NR {
            let panel = w.as_ptr().add(p * k * NR);
            for rb in 0..rows / 32 {
                let a = xb.as_ptr().add(rb * 32 * k);
                asm!("tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3");
                for kb in 0..k / 32 {
                    asm!(
                        "tileloadd tmm4, [{a} + {xs}*1]",
                        "tileloadd tmm5, [{a2} + {xs}*1]",
                        "tileloadd tmm6, [{b} + {bs}*1]",
                        "tileloadd tmm7, [{b2} + {bs}*1]",
                        "tdpbf16ps tmm0, tmm4, tmm6",
                        "tdpbf16ps tmm1, tmm4, tmm7",
                        "tdpbf16ps tmm2, tmm5, tmm6",
                        "tdpbf16ps tmm3, tmm5, tmm7",
                        a = in(reg) a.add(kb * 32),
                        a2 = in(reg) a.add(16 * k + kb * 32),
                        xs = in(reg) xs,
                        b = in(reg) panel.add(kb * 32 * NR),
                        b2 = in(reg) panel.add(kb * 32 * NR + 32),
                        bs = in(reg) 128usize,
                    );
                }
                asm!(
                    "tilestored [{c0} + {s}*1], tmm0",
                    "tilestored [{c1} + {s}*1], tmm1",
                    "tilestored [{c2} + {s}*1], tmm2",
                    "tilestored [{c3} + {s}*1], tmm3",
                    c0 = in(reg) c.as_mut_ptr(),
                    c1 = in(reg) c.as_mut_ptr().add(16),
                    c2 = in(reg) c.as_mut_ptr().add(16 * 32),
                    c3 = in(reg) c.as_mut_ptr().add(16 * 32 + 16),
                    s = in(reg) 128usize,
                );
                let r0 = rb * 32;
                for i in 0..32.min(t - r0) {
                    std::ptr::copy_nonoverlapping(c.as_ptr().add(i * 32), y.as_mut_ptr().add((r0 + i) * n + p * NR), 32);
                }
            }
        }
        asm!("tilerelease");
    }
}

fn main() {
    let perm = unsafe { syscall(158, 0x1023i64, 18i64) };
    assert_eq!(perm, 0, "AMX permission refused");
    let mut st = 0x9e3779b97f4a7c15u64;
    let reps_macs = 4.0e9;
    println!("| T | K × N | f32 ms | dpbf16 ms | amx ms | amx tiles ms | amx tiles + prefetch ms | + bias init, direct store ms | token-block-major ms | GMAC/s f32 / dpbf16 / amx / tiles / + prefetch / + direct / block-major | best amx ÷ f32 | rel err f32 / dpbf16 / amx / tiles / + prefetch / + direct / block-major |");
    for &t in &[1024usize, 300, 40] {
        for &(k, n) in &[(384usize, 1152usize), (384, 384), (384, 1536), (1536, 384)] {
            let x: Vec<f32> = (0..t * k).map(|_| rnd(&mut st)).collect();
            let w: Vec<f32> = (0..n * k).map(|_| rnd(&mut st) * 0.1).collect();
            let pf = panels_f32(&w, n, k);
            let pb = panels_bf16(&w, n, k);
            let mut xb = Vec::new();
            let zero = vec![0f32; n];
            let mut ys = [vec![0f32; t * n], vec![0f32; t * n], vec![0f32; t * n], vec![0f32; t * n], vec![0f32; t * n], vec![0f32; t * n], vec![0f32; t * n]];
            let macs = (t * k * n) as f64;
            let reps = ((reps_macs / macs) as usize).max(3);
            let mut ms = [0f64; 7];
            for round in 0..2 {
                for e in 0..7 {
                    let s = Instant::now();
                    for _ in 0..reps {
                        unsafe {
                            match e {
                                0 => matmul_f32(&x, t, k, n, &pf, &mut ys[0]),
                                1 => matmul_dpbf16(&x, t, k, n, &pb, &mut ys[1], &mut xb),
                                2 => matmul_amx(&x, t, k, n, &pb, &mut ys[2], &mut xb),
                                3 => matmul_amx2(&x, t, k, n, &pb, &mut ys[3], &mut xb),
                                4 => matmul_amx3(&x, t, k, n, &pb, &mut ys[4], &mut xb),
                                5 => matmul_amx4(&x, t, k, n, &pb, &zero, &mut ys[5], &mut xb),
                                _ => matmul_amx5(&x, t, k, n, &pb, &zero, &mut ys[6], &mut xb),
                            }
                        }
                    }
                    let v = s.elapsed().as_secs_f64() * 1e3 / reps as f64;
                    ms[e] = if round == 0 { v } else { ms[e].min(v) };
                }
            }
            // errors on a few rows
            let mut err = [0f64; 7];
            let _ = &zero;
            for r in (0..t).step_by(t / 7 + 1) {
                for o in 0..n {
                    let (mut e32, mut eb) = (0f64, 0f64);
                    for kk in 0..k {
                        e32 += x[r * k + kk] as f64 * w[o * k + kk] as f64;
                        eb += f32of(bf16(x[r * k + kk])) as f64 * f32of(bf16(w[o * k + kk])) as f64;
                    }
                    let scale = 0.1 * (k as f64 / 3.0).sqrt() / 3f64.sqrt();
                    err[0] = err[0].max((ys[0][r * n + o] as f64 - e32).abs() / scale);
                    err[1] = err[1].max((ys[1][r * n + o] as f64 - eb).abs() / scale);
                    err[2] = err[2].max((ys[2][r * n + o] as f64 - eb).abs() / scale);
                    err[3] = err[3].max((ys[3][r * n + o] as f64 - eb).abs() / scale);
                    err[4] = err[4].max((ys[4][r * n + o] as f64 - eb).abs() / scale);
                    err[5] = err[5].max((ys[5][r * n + o] as f64 - eb).abs() / scale);
                    err[6] = err[6].max((ys[6][r * n + o] as f64 - eb).abs() / scale);
                }
            }
            let g = |m: f64| macs / m / 1e6;
            println!(
                "| {t} | {k} × {n} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.3} | {:.0} / {:.0} / {:.0} / {:.0} / {:.0} / {:.0} / {:.0} | {:.2}× | {:.1e} / {:.1e} / {:.1e} / {:.1e} / {:.1e} / {:.1e} / {:.1e} |",
                ms[0], ms[1], ms[2], ms[3], ms[4], ms[5], ms[6], g(ms[0]), g(ms[1]), g(ms[2]), g(ms[3]), g(ms[4]), g(ms[5]), g(ms[6]), ms[0] / ms[2].min(ms[3]).min(ms[4]).min(ms[5]).min(ms[6]), err[0], err[1], err[2], err[3], err[4], err[5], err[6]
            );
        }
    }
}

//! Seeded random rows shared by the dense-index benches (`bench_ivf_1m`, `bench_hnsw`,
//! `bench_update_binary`): splitmix64 (Steele, Lea & Flood 2014), uniform and Box–Muller
//! Gaussian draws, and `bench_ivf_1m`'s synthetic base (see its header). One copy, so the
//! benches draw the same rows from the same seeds.
#![allow(dead_code)] // each bench uses a part

/// splitmix64: the next value of `state`.
pub fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Uniform in `[0, 1)`, 24 bits.
pub fn uniform(s: &mut u64) -> f32 {
    (splitmix(s) >> 40) as f32 / (1u64 << 24) as f32
}

/// Standard normal (Box–Muller).
pub fn gauss(s: &mut u64) -> f32 {
    let u = uniform(s).max(1e-7);
    let v = uniform(s);
    (-2.0 * u.ln()).sqrt() * (std::f32::consts::TAU * v).cos()
}

/// Dot product of two equally long rows.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Scales `v` to unit length (a zero row stays zero).
pub fn normalise(v: &mut [f32]) {
    let n = dot(v, v).sqrt();
    if n > 0.0 {
        v.iter_mut().for_each(|x| *x /= n);
    }
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// `x` rotated by an angle uniform in `[0, max]` radians towards
/// `0.7·(w − μ)/‖w − μ‖ + 0.3·g/‖g‖` (made orthogonal to `x`; `g` Gaussian): the
/// perturbation `bench_ivf_1m` extends real rows with (its header).
pub fn rotate(x: &[f32], w: &[f32], mu: &[f32], max: f32, s: &mut u64) -> Vec<f32> {
    let mut d: Vec<f32> = w.iter().zip(mu).map(|(a, m)| a - m).collect();
    normalise(&mut d);
    let mut g: Vec<f32> = (0..x.len()).map(|_| gauss(s)).collect();
    normalise(&mut g);
    let mut u: Vec<f32> = d.iter().zip(&g).map(|(a, b)| 0.7 * a + 0.3 * b).collect();
    let p = dot(&u, x);
    u.iter_mut().zip(x.iter()).for_each(|(a, b)| *a -= p * b);
    normalise(&mut u);
    let th = uniform(s) * max;
    let mut y: Vec<f32> = x
        .iter()
        .zip(&u)
        .map(|(a, b)| th.cos() * a + th.sin() * b)
        .collect();
    normalise(&mut y);
    y
}

/// A synthetic base of `n` unit passages of `dim` dimensions and `q` queries: a shared
/// mean direction, Zipf-weighted topics (`n / 40`) with 8 subtopics each and Gaussian
/// noise; a query is a passage plus noise. Seeded: the same rows every run.
pub fn synthetic(n: usize, q: usize, dim: usize) -> (Vec<Vec<f32>>, Vec<Vec<f32>>) {
    let mut s = 0x5e_u64;
    let unit = |s: &mut u64| {
        let mut g: Vec<f32> = (0..dim).map(|_| gauss(s)).collect();
        normalise(&mut g);
        g
    };
    let mu = unit(&mut s);
    let topics = (n / 40).max(1);
    let tau: Vec<Vec<f32>> = (0..topics).map(|_| unit(&mut s)).collect();
    let sigma: Vec<Vec<f32>> = (0..topics * 8).map(|_| unit(&mut s)).collect();
    let weights: Vec<f64> = (0..topics)
        .map(|t| 1.0 / ((t + 1) as f64).powf(0.8))
        .collect();
    let total: f64 = weights.iter().sum();
    let mut cdf = Vec::with_capacity(topics);
    let mut acc = 0.0;
    for w in &weights {
        acc += w / total;
        cdf.push(acc);
    }
    let passage = |s: &mut u64| {
        let r = f64::from(uniform(s));
        let t = cdf.partition_point(|&c| c < r).min(topics - 1);
        let sub = (splitmix(s) % 8) as usize;
        let g = unit(s);
        let mut v: Vec<f32> = (0..dim)
            .map(|k| 1.2 * mu[k] + 0.55 * tau[t][k] + 0.4 * sigma[t * 8 + sub][k] + 0.45 * g[k])
            .collect();
        normalise(&mut v);
        v
    };
    let base: Vec<Vec<f32>> = (0..n).map(|_| passage(&mut s)).collect();
    let queries: Vec<Vec<f32>> = (0..q)
        .map(|_| {
            let x = passage(&mut s);
            let g = unit(&mut s);
            let mut v: Vec<f32> = x.iter().zip(&g).map(|(a, b)| a + 0.6 * b).collect();
            normalise(&mut v);
            v
        })
        .collect();
    (base, queries)
}

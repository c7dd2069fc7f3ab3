//! Speed of the Q4_0 matmul kernel alone: `cargo run --release -p jikji-query-model --example
//! kernel_bench -- [S]` prints GFLOP/s (2 flops per multiply-add) of the dispatched and the
//! portable kernel for the model's two shapes (384→384, 384→1536, 1536→384).

use std::time::Instant;

use jikji_query_model::kernels::{matmul_q4, matmul_q4_portable, Q4Matrix};

fn main() {
    let s: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse().unwrap())
        .unwrap_or(20);
    for (n, k) in [(384, 384), (1536, 384), (384, 1536)] {
        let mut bytes = vec![0u8; n * Q4Matrix::row_bytes(k)];
        for (i, b) in bytes.iter_mut().enumerate() {
            *b = if i % 18 == 1 {
                0x20
            } else {
                (i * 37 % 251) as u8
            };
        }
        let w = Q4Matrix {
            rows: n,
            cols: k,
            bytes,
        };
        let x: Vec<f32> = (0..s * k).map(|i| (i % 17) as f32 * 0.1 - 0.8).collect();
        let bias = vec![0f32; n];
        let mut y = vec![0f32; s * n];
        for (name, f) in [
            (
                "dispatched",
                matmul_q4 as fn(&[f32], &Q4Matrix, &[f32], &mut [f32]),
            ),
            ("portable", matmul_q4_portable),
        ] {
            let reps = 30;
            f(&x, &w, &bias, &mut y);
            let t = Instant::now();
            for _ in 0..reps {
                f(&x, &w, &bias, &mut y);
            }
            let dt = t.elapsed().as_secs_f64() / reps as f64;
            println!(
                "S {s} N {n} K {k} {name}: {:.3} ms, {:.2} GFLOP/s",
                dt * 1e3,
                2.0 * (s * n * k) as f64 / dt / 1e9
            );
        }
    }
}

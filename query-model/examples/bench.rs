//! Agreement and native speed of the lean forward pass against tract, over every query of
//! every eval set (or the first N of each):
//!
//! `cargo run --release -p jikji-query-model --example bench -- [N] [IDS_OUT]`
//!
//! Environment as in `tests/common` (`JIKJI_MODEL_DIR`, `JIKJI_QUERY_MODEL_DIR` or
//! `JIKJI_E5S1`, `JIKJI_SHARED`). Per set and overall: min cosine and max abs diff against
//! tract (`jikji-embed`, model.onnx, float32 weights), and single-thread ms per query (p50 /
//! mean) of tract and of the pack, each query embedded by both in turn. `IDS_OUT` gets one
//! JSON array of token ids per line, for `scripts/bench-query-model`'s onnxruntime reference.

#[cfg(not(target_arch = "wasm32"))]
#[path = "../tests/common/mod.rs"]
mod common;

use std::io::Write;
use std::time::Instant;

use common::*;
use jikji_embed::Prefix;

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let limit: usize = args
        .next()
        .map(|s| s.parse().expect("N"))
        .unwrap_or(usize::MAX);
    let ids_out = args.next();
    let (m, rows) = load_pack().expect("pack");
    let tract = load_tract().expect("model");
    let sets = eval_sets().expect("eval sets");
    let tok = tract.tokenizer();
    let mut ids_file = ids_out.map(|p| std::io::BufWriter::new(std::fs::File::create(p).unwrap()));
    let (mut all_t, mut all_p, mut all_cos, mut all_diff, mut all_len) =
        (vec![], vec![], 1f32, 0f32, vec![]);
    println!("set | queries | tokens mean | min cosine | max abs diff | tract ms p50 / mean | pack ms p50 / mean | tract/pack (p50)");
    for (name, queries) in &sets {
        let (mut tt, mut tp, mut cmin, mut dmax, mut lens) = (vec![], vec![], 1f32, 0f32, vec![]);
        for q in queries.iter().take(limit) {
            let ids = tok.token_ids(q, Prefix::Query).unwrap();
            let t = Instant::now();
            let want = tract.embed_query(q).unwrap();
            tt.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let got = m.embed_ids(&ids, &rows).unwrap();
            tp.push(t.elapsed().as_secs_f64() * 1e3);
            cmin = cmin.min(dot(&want, &got));
            dmax = dmax.max(max_abs_diff(&want, &got));
            lens.push(ids.len() as f64);
            if let Some(f) = ids_file.as_mut() {
                writeln!(f, "{ids:?}").unwrap();
            }
        }
        let n = tt.len();
        let (mt, mp) = (
            tt.iter().sum::<f64>() / n as f64,
            tp.iter().sum::<f64>() / n as f64,
        );
        println!(
            "{name} | {n} | {:.1} | {cmin:.6} | {dmax:.2e} | {:.2} / {mt:.2} | {:.2} / {mp:.2} | {:.2}",
            lens.iter().sum::<f64>() / n as f64,
            pct(&mut tt.clone(), 0.5),
            pct(&mut tp.clone(), 0.5),
            pct(&mut tt.clone(), 0.5) / pct(&mut tp.clone(), 0.5)
        );
        all_t.extend(tt);
        all_p.extend(tp);
        all_len.extend(lens);
        all_cos = all_cos.min(cmin);
        all_diff = all_diff.max(dmax);
    }
    let n = all_t.len();
    println!(
        "all | {n} | {:.1} | {all_cos:.6} | {all_diff:.2e} | {:.2} / {:.2} | {:.2} / {:.2} | {:.2}",
        all_len.iter().sum::<f64>() / n as f64,
        pct(&mut all_t.clone(), 0.5),
        all_t.iter().sum::<f64>() / n as f64,
        pct(&mut all_p.clone(), 0.5),
        all_p.iter().sum::<f64>() / n as f64,
        pct(&mut all_t.clone(), 0.5) / pct(&mut all_p.clone(), 0.5)
    );
}

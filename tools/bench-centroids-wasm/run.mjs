#!/usr/bin/env node
// The routing step of a dense query through the IVF in wasm, in node (issue 14, bench_hnsw's
// "routing over the centroids" section as the browser would run it): per query, the engine's
// flat scan of the 4-bit centroids (decoding the g pages, as the engine does every query, and
// the scan + sort) against HNSW over the dequantized centroids (several M / ef), side by side in
// one process, alternating per query. Input: `bench_hnsw --wasm-dump DIR` (DIR/cap-<cap>/).
//
//   CARGO_TARGET_DIR=target/bench-centroids-wasm cargo build --release --target wasm32-unknown-unknown \
//       --manifest-path tools/bench-centroids-wasm/Cargo.toml
//   node tools/bench-centroids-wasm/run.mjs --wasm target/bench-centroids-wasm/wasm32-unknown-unknown/release/bench_centroids_wasm.wasm \
//       --dump target/h27h-wasm/cap-125 [--nprobe 16] [--m 8,16] [--ef 16,32,64]
import { readFileSync, readdirSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    wasm: { type: "string" },
    dump: { type: "string" },
    nprobe: { type: "string", default: "16" },
    m: { type: "string", default: "8,16" },
    ef: { type: "string", default: "16,32,64" },
    efc: { type: "string", default: "100" },
  },
});
const { instance } = await WebAssembly.instantiate(readFileSync(values.wasm), {});
const w = instance.exports;
const put = (bytes) => {
  const p = w.alloc(bytes.length);
  new Uint8Array(w.memory.buffer, p, bytes.length).set(bytes);
  return [p, bytes.length];
};
const dir = values.dump;
w.set_root(...put(readFileSync(path.join(dir, "root.json"))));
const g = readdirSync(dir).filter((f) => /^g-\d+\.bin$/.test(f)).sort((a, b) => parseInt(a.slice(2)) - parseInt(b.slice(2)));
let gbytes = 0;
for (const f of g) {
  const b = readFileSync(path.join(dir, f));
  gbytes += b.length;
  w.add_page(...put(b));
}
const qb = readFileSync(path.join(dir, "queries.f32"));
w.set_queries(...put(qb));
const nq = qb.length / (4 * 384);
const flatTop = JSON.parse(readFileSync(path.join(dir, "flat-top.json"), "utf8"));
const per = flatTop.length / nq;
const np = Number(values.nprobe);
const nlist = w.decode();
w.dequantize();
const load = () => os.loadavg().map((x) => x.toFixed(2)).join(" ");
console.log(`wasm routing over ${nlist} centroids (${g.length} g pages, ${(gbytes / 1e3).toFixed(1)} kB raw), ${nq} queries, nprobe ${np}; node ${process.version}; load ${load()}`);
const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.round((s.length - 1) * p)];
};
const topOf = () => Array.from({ length: np }, (_, i) => w.top(i));
const overlap = (qi) => {
  const want = new Set(flatTop.slice(qi * per, qi * per + np));
  return topOf().filter((x) => want.has(x)).length / np;
};
// Graphs first (build time), then every method per query in turn.
const graphs = [];
for (const m of values.m.split(",").map(Number)) {
  const t = performance.now();
  w.build(m, Number(values.efc));
  graphs.push({ m, secs: (performance.now() - t) / 1e3 });
  // One graph at a time in the module: time its searches now.
  const efs = values.ef.split(",").map(Number).filter((e) => e >= np);
  const rows = efs.map((ef) => ({ ef, ms: [], same: 0, sims: 0 }));
  for (let qi = 0; qi < nq; qi++) {
    for (const r of rows) {
      const t = performance.now();
      r.sims += w.route(qi, np, r.ef);
      r.ms.push(performance.now() - t);
      r.same += overlap(qi);
    }
  }
  graphs[graphs.length - 1].rows = rows;
}
const flat = { dec: [], scan: [], f32: [], same: 0 };
for (let rep = 0; rep < 2; rep++) {
  for (let qi = 0; qi < nq; qi++) {
    let t = performance.now();
    w.decode();
    const t1 = performance.now();
    w.flat4(qi, np);
    const t2 = performance.now();
    if (rep === 1) {
      flat.dec.push(t1 - t);
      flat.scan.push(t2 - t1);
      flat.same += overlap(qi);
    }
    t = performance.now();
    w.flat32(qi, np);
    if (rep === 1) flat.f32.push(performance.now() - t);
  }
}
console.log(`method                          p50 ms   p95 ms   top-${np} lists equal to native flat   sims/query`);
console.log(`flat 4-bit: page decode        ${pct(flat.dec, 0.5).toFixed(3).padStart(7)}  ${pct(flat.dec, 0.95).toFixed(3).padStart(7)}`);
console.log(`flat 4-bit: scan + sort        ${pct(flat.scan, 0.5).toFixed(3).padStart(7)}  ${pct(flat.scan, 0.95).toFixed(3).padStart(7)}   ${(flat.same / nq).toFixed(4)}   ${nlist}`);
console.log(`flat f32 (HNSW's kernel)       ${pct(flat.f32, 0.5).toFixed(3).padStart(7)}  ${pct(flat.f32, 0.95).toFixed(3).padStart(7)}`);
for (const gr of graphs) {
  for (const r of gr.rows) {
    console.log(`hnsw M ${gr.m} ef ${String(r.ef).padEnd(4)}              ${pct(r.ms, 0.5).toFixed(3).padStart(7)}  ${pct(r.ms, 0.95).toFixed(3).padStart(7)}   ${(r.same / nq).toFixed(4)}   ${Math.round(r.sims / nq)}`);
  }
  console.log(`  hnsw M ${gr.m}: built in wasm in ${gr.secs.toFixed(1)} s`);
}
console.log(`load at the end: ${load()}`);

#!/usr/bin/env node
// BM25 query time of engine wasm builds in node, side by side in one run (a script, not a test):
// each PKG folder (scripts/build-wasm's pkg/, or a copy of another build) is loaded into the same
// node process, the bundle is opened in each, and every query is run in every build in turn
// (round-robin, so load from other processes hits all builds alike). Also checks that every build
// returns byte-identical JSON for every query (exit 1 if not), so a size cut that changes results
// is caught here too.
//
//   node tests/e2e/engine-node-bench.mjs --bundle DIR --queries FILE [--reps 5] [--top-k 10] PKG...
//
// Output, per build: median and p95 of the per-query medians (ms), total of the medians, and the
// ratio of its total to the first build's. Bundle open time (ms, median of --reps opens) too.

import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    bundle: { type: "string" },
    queries: { type: "string" },
    reps: { type: "string", default: "5" },
    "top-k": { type: "string", default: "10" },
  },
});
if (!values.bundle || !values.queries || positionals.length === 0) {
  console.error("usage: engine-node-bench.mjs --bundle DIR --queries FILE [--reps N] [--top-k K] PKG...");
  process.exit(2);
}
const reps = Number(values.reps);
const topK = Number(values["top-k"]);
const queries = readFileSync(values.queries, "utf8")
  .split("\n")
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith("#"));
const files = Object.fromEntries(
  readdirSync(values.bundle).map((n) => [n, new Uint8Array(readFileSync(path.join(values.bundle, n)))]),
);
if (!files["manifest.json"]) {
  console.error(`${values.bundle}: no manifest.json`);
  process.exit(1);
}

function open(mod) {
  const e = new mod.Engine();
  for (const [n, b] of Object.entries(files)) e.add_file(n, b);
  e.open();
  return e;
}

const builds = [];
for (const dir of positionals) {
  const js = path.resolve(dir, "jikji_engine.js");
  const mod = await import(pathToFileURL(js).href);
  mod.initSync({ module: readFileSync(path.resolve(dir, "jikji_engine_bg.wasm")) });
  const opens = [];
  let engine;
  for (let r = 0; r < reps; r++) {
    const t = performance.now();
    engine = open(mod);
    opens.push(performance.now() - t);
    if (r < reps - 1) engine.free();
  }
  builds.push({ dir, engine, opens, times: queries.map(() => []), out: [] });
}

const median = (a) => {
  const s = [...a].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const p95 = (a) => [...a].sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(a.length * 0.95))];

let mismatches = 0;
queries.forEach((q, qi) => {
  for (const b of builds) b.out[qi] = b.engine.search_with_vector(q, null, "bm25", topK); // warm-up
  for (let r = 0; r < reps; r++) {
    for (const b of builds) {
      const t = performance.now();
      b.engine.search_with_vector(q, null, "bm25", topK);
      b.times[qi].push(performance.now() - t);
    }
  }
  for (const b of builds.slice(1)) {
    if (b.out[qi] !== builds[0].out[qi]) {
      mismatches++;
      console.error(`results differ: ${b.dir} vs ${builds[0].dir} for query ${JSON.stringify(q)}`);
    }
  }
});

let base;
console.log(`bundle ${values.bundle}, ${queries.length} queries x ${reps} reps, BM25 top ${topK}, node ${process.version}`);
console.log(`${"build".padEnd(36)}${"open ms".padStart(9)}${"p50 ms".padStart(9)}${"p95 ms".padStart(9)}${"sum ms".padStart(10)}${"ratio".padStart(7)}`);
for (const b of builds) {
  const med = b.times.map(median);
  const sum = med.reduce((x, y) => x + y, 0);
  base ??= sum;
  console.log(
    `${b.dir.slice(-36).padEnd(36)}${median(b.opens).toFixed(1).padStart(9)}${median(med).toFixed(3).padStart(9)}` +
      `${p95(med).toFixed(3).padStart(9)}${sum.toFixed(1).padStart(10)}${(sum / base).toFixed(2).padStart(7)}`,
  );
}
if (mismatches) {
  console.error(`${mismatches} query results differ between builds`);
  process.exit(1);
}
console.log("results: byte-identical across builds");

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
// A format 2 bundle (jikji.json) is read as the browser reads it, pages added on demand (see below);
// a format 1 bundle (manifest.json) whole, with open() (engine builds with feature v1 only).
//
// Output, per build: median and p95 of the per-query medians (ms), total of the medians, and the
// ratio of its total to the first build's. Bundle open time (ms, median of --reps opens) too.

import { existsSync, readFileSync, readdirSync } from "node:fs";
import { inflateRawSync } from "node:zlib";
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
// Format 2 (jikji.json + p/): the entry is opened with open_entry and every query's pages are added as
// the worker does (web/worker.js): while the engine answers {"need": [...]}, read p/<name>, inflate a
// codec-1 body (deflate-raw) and pass header + raw body to add_page. The warm-up run of each query loads
// its pages, so the timed runs read the page cache only. Format 1 (manifest.json): every file, open().
const paged = existsSync(path.join(values.bundle, "jikji.json"));
const files = paged
  ? { "jikji.json": new Uint8Array(readFileSync(path.join(values.bundle, "jikji.json"))) }
  : Object.fromEntries(
      readdirSync(values.bundle).map((n) => [n, new Uint8Array(readFileSync(path.join(values.bundle, n)))]),
    );
if (!paged && !files["manifest.json"]) {
  console.error(`${values.bundle}: neither jikji.json nor manifest.json`);
  process.exit(1);
}

const pageBytes = new Map();
function page(name) {
  if (!/^[a-z]-[0-9a-f-]{16,38}$/.test(name)) throw new Error(`not a page name: ${JSON.stringify(name)}`);
  let b = pageBytes.get(name);
  if (b) return b;
  const stored = readFileSync(path.join(values.bundle, "p", name));
  if (stored.length < 48) throw new Error(`p/${name}: ${stored.length} bytes, shorter than the 48-byte header`);
  const codec = stored[5];
  if (codec === 0) b = new Uint8Array(stored);
  else if (codec === 1) {
    const raw = inflateRawSync(stored.subarray(48));
    b = new Uint8Array(48 + raw.length);
    b.set(stored.subarray(0, 48));
    b.set(raw, 48);
  } else throw new Error(`p/${name}: unknown codec ${codec} at byte 5`);
  pageBytes.set(name, b);
  return b;
}

function open(mod) {
  const e = new mod.Engine();
  if (paged) {
    e.open_entry(files["jikji.json"]);
  } else {
    for (const [n, b] of Object.entries(files)) e.add_file(n, b);
    e.open();
  }
  return e;
}

/** One query, adding the pages it asks for (at most 8 rounds, as the engine's MAX_ROUNDS). */
function search(engine, q) {
  for (let round = 0; round <= 8; round++) {
    const out = engine.search_with_vector(q, null, "bm25", topK);
    if (!out.startsWith('{"need":')) return out;
    for (const name of JSON.parse(out).need) engine.add_page(name, page(name));
  }
  throw new Error(`query ${JSON.stringify(q)} still needs pages after 8 rounds`);
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
  for (const b of builds) b.out[qi] = search(b.engine, q); // warm-up (and, paged, loads the pages)
  for (let r = 0; r < reps; r++) {
    for (const b of builds) {
      const t = performance.now();
      search(b.engine, q);
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
console.log(`bundle ${values.bundle} (format ${paged ? 2 : 1}), ${queries.length} queries x ${reps} reps, BM25 top ${topK}, node ${process.version}`);
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

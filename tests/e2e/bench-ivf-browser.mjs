#!/usr/bin/env node
// Dense search at 1M chunks in headless Chromium through the production path (issue 14; a script,
// not a test; run by scripts/bench-ivf-browser, which makes the bundle and the native figures).
//
// Serves a bundle written by `bench_ivf_1m --write DIR` (jikji.json + p/<page>, the files as the
// builder stores them) and pkg/ (scripts/build-wasm: the served worker pkg/web/worker.js and the
// dense engine pkg/dense/) from one HTTPS server in this process: HTTP/2 over TLS with a
// throwaway self-signed certificate (Chromium runs with --ignore-certificate-errors), as a static
// host serves them — pages `Cache-Control: immutable`, jikji.json `no-cache`, bytes as stored.
// `--latency MS` holds every response MS ms before its headers (a round trip to a distant host;
// over one HTTP/2 connection the pages of a round go out in parallel, so a round costs about one
// MS). A tiny page starts the production worker and posts it messages:
//   cold:     open → loadDense {prefetch: false} → the first query (the centroid and sample pages
//             are fetched by the query itself: one round more);
//   prefetch: a fresh profile: open → loadDense (the once pages fetched as loadModel does) → every
//             query in order on the same worker (its page cache and the HTTP cache kept), each a
//             "search" {mode: "dense", queryVector, nprobe} with the real held-out query vector of
//             DIR.queries.json, so query embedding is excluded.
// Per query: the worker's stats (search ms from the call to the result, the engine's passes,
// page rounds, per-page network / inflate / SHA-256 / add_page sums, requests, bytes as stored)
// and the page's own round-trip time; the top 10 compared with the native engine's for the same
// query in the same order (DIR.queries.json "native", written by bench_ivf_1m).
//
// Usage: node tests/e2e/bench-ivf-browser.mjs --bundle DIR [--queries DIR.queries.json]
//        [--latency 0,50] [--max N] [--pkg DIR] [--out JSON] [--server h2|jikji] [--rescore X]
//        [--reference] [--server-url URL [--access-log FILE]]
// --reference: after the warm queries, what the same page requests cost without the engine (see
// `reference` below); --server-url: an external static server instead of this process's (see
// `externalServer`), e.g. nginx with HTTP/2, to tell the server's share of the time from Chromium's.
// --rescore: a binary index's oversampling for every query (0: the bundle's); compare with a native run of
// the same (bench_ivf_1m --search DIR --rescore X), else the top 10 and bytes differ from native's.
// Exit status 0, or 1 with a message on any failure.

import { execFileSync } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import http2 from "node:http2";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, startServer as startJikjiServe } from "./harness.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const log = (...a) => console.error(...a);
const { values: o } = parseArgs({
  options: {
    bundle: { type: "string" },
    queries: { type: "string" },
    latency: { type: "string", default: "0,50" },
    max: { type: "string", default: "0" },
    pkg: { type: "string", default: path.join(ROOT, "pkg") },
    out: { type: "string" },
    server: { type: "string", default: "h2" },
    rescore: { type: "string", default: "0" },
    reference: { type: "boolean", default: false },
    "server-url": { type: "string" },
    "access-log": { type: "string" },
    bin: { type: "string", default: path.join(ROOT, "target/release/jikji") },
  },
});
if (!o.bundle) throw new Error("--bundle DIR is required");
const bundle = path.resolve(o.bundle);
const qfile = o.queries || `${bundle}.queries.json`;
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
for (const f of [path.join(bundle, "jikji.json"), qfile, path.join(o.pkg, "web/worker.js"), path.join(o.pkg, "dense/jikji_engine_bg.wasm"), CHROMIUM]) {
  if (!existsSync(f)) throw new Error(`missing ${f}`);
}
const Q = JSON.parse(readFileSync(qfile, "utf8"));
const maxQ = Number(o.max) || Q.queries.length;
const queries = Q.queries.slice(0, maxQ);
const native = Q.native;
const latencies = o.latency.split(",").map(Number);

// ---------------------------------------------------------------- server

// Run in a same-origin document (the bundle's jikji.json as shown by the browser): the production
// worker and a promise per message.
const DRIVER = `(() => {
const w = new Worker("/pkg/web/worker.js", { type: "module" });
let next = 1;
const pending = new Map();
w.onmessage = (e) => {
  const m = e.data;
  if (m.type === "progress") return;
  const p = pending.get(m.id);
  if (!p) return;
  pending.delete(m.id);
  m.ok ? p.resolve(m.result) : p.reject(new Error(m.error));
};
window.call = (msg) => new Promise((resolve, reject) => {
  const id = next++;
  pending.set(id, { resolve, reject });
  w.postMessage({ ...msg, id });
});
window.ready = true;
})()`;

const TYPES = { ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm", ".json": "application/json", ".html": "text/html" };

function startServer(latencyMs) {
  const dir = path.join(tmpdir(), `jikji-ivf-cert-${process.pid}`);
  execFileSync("mkdir", ["-p", dir]);
  const key = path.join(dir, "key.pem");
  const cert = path.join(dir, "cert.pem");
  if (!existsSync(cert)) {
    execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=127.0.0.1"], { stdio: "ignore" });
  }
  const counts = { requests: 0, pages: 0, bytes: 0, log: [] };
  const server = http2.createSecureServer({ key: readFileSync(key), cert: readFileSync(cert), allowHTTP1: true }, async (req, res) => {
    counts.requests++;
    const url = new URL(req.url, "https://x");
    let file = null;
    let headers = { "cache-control": "no-cache" };
    let body = null;
    if (url.pathname === "/concat") {
      // The reference's "one request a round": the named pages' bytes, concatenated.
      try {
        const names = (url.searchParams.get("p") || "").split(",").filter((n) => /^[a-z]-[0-9a-z-]+$/.test(n));
        body = Buffer.concat(await Promise.all(names.map((n) => readFile(path.join(bundle, "p", n)))));
      } catch {
        res.writeHead(404);
        res.end();
        return;
      }
      headers["content-type"] = "application/octet-stream";
    } else if (url.pathname.startsWith("/pkg/")) {
      file = path.join(o.pkg, decodeURIComponent(url.pathname.slice(5)));
    } else if (url.pathname.startsWith("/bundle/")) {
      file = path.join(bundle, decodeURIComponent(url.pathname.slice(8)));
      if (url.pathname.startsWith("/bundle/p/")) headers = { "cache-control": "public, max-age=31536000, immutable" };
    }
    if (file && !path.resolve(file).startsWith(path.resolve(file.startsWith(bundle) ? bundle : o.pkg))) file = null;
    if (!body) {
      try {
        if (!file || !(await stat(file)).isFile()) throw new Error("no file");
        body = await readFile(file);
      } catch {
        res.writeHead(404);
        res.end();
        return;
      }
      headers["content-type"] = TYPES[path.extname(file)] || "application/octet-stream";
      if (url.pathname.startsWith("/bundle/p/")) {
        counts.pages++;
        counts.bytes += body.length;
        if (!url.search) counts.log.push(url.pathname.slice(10));
      }
    }
    headers["content-length"] = body.length;
    const send = () => {
      res.writeHead(200, headers);
      res.end(body);
    };
    if (latencyMs > 0) setTimeout(send, latencyMs);
    else send();
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({ server, counts, url: `https://127.0.0.1:${server.address().port}` })));
}

// ---------------------------------------------------------------- browser

async function withPage(srv, fn) {
  const profile = await mkdtemp(path.join(tmpdir(), "jikji-ivf-bench-"));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS, "--ignore-certificate-errors"],
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    refPage = page;
    page.on("pageerror", (e) => log(`[page error] ${e.message}`));
    page.on("console", (m) => m.type() === "error" && log(`[browser] ${m.text()}`));
    await page.goto(`${srv.url}/bundle/jikji.json`);
    await page.evaluate(DRIVER);
    await page.waitForFunction(() => window.ready === true);
    const call = (msg) => page.evaluate(async (msg) => {
      const t0 = performance.now();
      const result = await window.call(msg);
      return { result, wallMs: performance.now() - t0 };
    }, msg);
    const opened = await call({ type: "open", bundleUrl: `${srv.url}/bundle/`, engineUrl: `${srv.url}/pkg/`, integrity: null });
    return await fn(call, opened, context.browser()?.version() ?? "");
  } finally {
    await context.close();
    await rm(profile, { recursive: true, force: true });
  }
}

const search = (call, i) =>
  call({ type: "search", query: `q${i}`, mode: "dense", topK: 10, includeArchived: false, queryVector: queries[i], nprobe: Q.nprobe, rescore: Number(o.rescore) || 0 }).then(({ result, wallMs }) => ({
    wallMs,
    stats: result.stats,
    top: result.hits.map((h) => parseInt(h.id, 16)),
  }));

// --reference: after the warm queries, in the same page, each warm query's own page requests
// again without the engine or the worker (the server's log split by the worker's roundPages,
// rounds in sequence, the pages of a round in parallel, `cache: "no-store"` so every one reaches
// the server): "same requests" is what the server and the browser cost for that request pattern
// alone; "one request a round" asks the same bytes as one concatenated response per round (the
// /concat route): the floor of a layout that packs a round's pages into one.
async function reference(runs) {
  const plan = runs.slice(1).map((r) => {
    const counts = r.stats.roundPages || [];
    if (!r.served || counts.reduce((a, b) => a + b, 0) !== r.served.length) return null;
    const rounds = [];
    let at = 0;
    for (const c of counts) {
      rounds.push(r.served.slice(at, at + c));
      at += c;
    }
    return rounds.filter((x) => x.length);
  }).filter(Boolean);
  const packed = !o["server-url"]; // the /concat route is this process's server's
  return refPage.evaluate(async ({ plan, packed }) => {
      const out = { same: [], worker: [], packed: [], planned: plan.length, sweep: {} };
      // The same requests from a plain dedicated worker (no engine): the production worker's thread
      // against the page's.
      // steps: "inflate" (DecompressionStream for codec-1 pages, as pages.js), "sha" (crypto.subtle
      // SHA-256 of the body), "timing" (the Resource Timing lookup, as transferOf).
      const src = `
        async function one(n, steps) {
          const url = new URL("/bundle/p/" + n, location.origin).href;
          let b = new Uint8Array(await (await fetch(url, { cache: "no-store" })).arrayBuffer());
          if (steps.includes("timing")) performance.getEntriesByName(url, "resource");
          if (steps.includes("inflate") && b[5] === 1) {
            b = new Uint8Array(await new Response(new Blob([b.subarray(48)]).stream().pipeThrough(new DecompressionStream("deflate-raw"))).arrayBuffer());
          }
          if (steps.includes("sha")) await crypto.subtle.digest("SHA-256", b);
        }
        onmessage = async (e) => { const t0 = performance.now(); for (const names of e.data.rounds) await Promise.all(names.map((n) => one(n, e.data.steps))); if (performance.getEntriesByType("resource").length > 200) performance.clearResourceTimings(); postMessage(performance.now() - t0); };`;
      const w = new Worker(URL.createObjectURL(new Blob([src], { type: "text/javascript" })));
      const inWorker = (rounds, steps = []) => new Promise((resolve) => { w.onmessage = (e) => resolve(e.data); w.postMessage({ rounds, steps }); });
      out.steps = { inflate: [], "inflate+sha": [], "inflate+sha+timing": [] };
      // One round of k parallel page requests (the queries' own pages, no-store), 40 times each k.
      const pool = plan.flat(2);
      for (const k of [1, 2, 4, 8, 16, 32]) {
        out.sweep[k] = [];
        for (let rep = 0; rep < 40 && pool.length >= k; rep++) {
          const names = Array.from({ length: k }, (_, j) => pool[(rep * 37 + j * 101) % pool.length]);
          const t0 = performance.now();
          await Promise.all(names.map((n) => fetch(`/bundle/p/${n}`, { cache: "no-store" }).then((r) => r.arrayBuffer())));
          out.sweep[k].push(performance.now() - t0);
        }
      }
      for (const rounds of plan) {
        let t0 = performance.now();
        for (const names of rounds) await Promise.all(names.map((n) => fetch(`/bundle/p/${n}`, { cache: "no-store" }).then((r) => r.arrayBuffer())));
        out.same.push(performance.now() - t0);
        out.worker.push(await inWorker(rounds));
        for (const k of Object.keys(out.steps)) out.steps[k].push(await inWorker(rounds, k.split("+")));
        if (!packed) continue;
        t0 = performance.now();
        for (const names of rounds) await fetch(`/concat?p=${names.join(",")}`, { cache: "no-store" }).then((r) => r.arrayBuffer());
        out.packed.push(performance.now() - t0);
      }
      return out;
  }, { plan, packed });
}
let refPage = null;

function pct(xs, p) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.round((s.length - 1) * p)] : NaN;
}

const load = () => readFileSync("/proc/loadavg", "utf8").trim().split(" ").slice(0, 3).join(" ");
const results = { latencies: {}, chromium: "" };
log(`[ivf-bench] ${queries.length} queries, nprobe ${Q.nprobe}, latencies ${latencies.join(", ")} ms; load ${load()}`);
// --server-url URL: a static server already running elsewhere (e.g. nginx) that serves the bundle
// at URL/bundle/ (pages with Cache-Control immutable) and pkg/ at URL/pkg/; --access-log FILE: its
// access log (one line a request, the path in it), read for the --reference's request lists.
function externalServer() {
  const counts = { log: [] };
  let seen = 0;
  const sync = () => {
    if (!o["access-log"]) return;
    const text = readFileSync(o["access-log"], "utf8");
    const end = text.lastIndexOf("\n") + 1;
    if (end <= seen) return;
    const lines = text.slice(seen, end).split("\n");
    seen = end;
    for (const l of lines) {
      const m = / \/bundle\/p\/([^ ?]+) HTTP/.exec(l);
      if (m) counts.log.push(m[1]);
    }
  };
  if (o["access-log"]) seen = readFileSync(o["access-log"], "utf8").length;
  return { url: o["server-url"].replace(/\/$/, ""), counts: o["access-log"] ? new Proxy(counts, { get: (t, k) => (k === "log" && sync(), t[k]) }) : null, server: { close() {} } };
}
async function server(lat) {
  if (o["server-url"]) {
    if (lat !== 0) throw new Error("--server-url: no added latency (--latency 0)");
    return externalServer();
  }
  if (o.server === "h2") return startServer(lat);
  if (o.server !== "jikji" || lat !== 0) throw new Error("--server h2, or jikji (jikji serve: HTTP/1.1, no added latency)");
  const s = await startJikjiServe({ bin: o.bin, bundle, web: path.join(o.pkg, "web"), pkg: o.pkg, model: existsSync(path.join(ROOT, "models/e5-small")) ? path.join(ROOT, "models/e5-small") : path.join(ROOT, "../main/models/e5-small"), cwd: ROOT, log: () => {}, tag: "ivf-bench" });
  return { url: s.url, server: { close: () => s.proc.kill() } };
}
for (const lat of latencies) {
  const srv = await server(lat);
  try {
    const r = { loadStart: load() };
    // Cold: the centroids are fetched by the first query.
    r.cold = await withPage(srv, async (call, opened, version) => {
      results.chromium = version;
      const d = await call({ type: "loadDense", prefetch: false });
      const q = await search(call, 0);
      return { open: opened.result.stats, denseEngineMs: d.result.engineMs, ...q };
    });
    log(`[ivf-bench] latency ${lat} ms: cold first query ${r.cold.stats.ms.toFixed(1)} ms, ${r.cold.stats.rounds} rounds, ${r.cold.stats.requests} requests, ${(r.cold.stats.stored / 1e3).toFixed(1)} kB`);
    // Prefetched, then every query.
    r.warm = await withPage(srv, async (call) => {
      const d = await call({ type: "loadDense" });
      const runs = [];
      for (let i = 0; i < queries.length; i++) {
        const from = srv.counts ? srv.counts.log.length : 0;
        const run = await search(call, i);
        if (srv.counts) run.served = srv.counts.log.slice(from);
        runs.push(run);
      }
      const ref = o.reference ? await reference(runs) : null;
      return { once: { ...d.result, wallMs: d.wallMs }, runs, ref };
    });
    r.loadEnd = load();
    results.latencies[lat] = r;
    log(`[ivf-bench] latency ${lat} ms: once ${(r.warm.once.stats.stored / 1e3).toFixed(1)} kB in ${r.warm.once.ms.toFixed(0)} ms; ${r.warm.runs.length} queries; load ${r.loadEnd}`);
  } finally {
    srv.server.close();
  }
}

// ---------------------------------------------------------------- report

const nat = native.runs.slice(0, queries.length);
const nWarm = nat.slice(1);
const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : "-");
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : "-");
const cols = ["native", ...latencies.map((l) => `Chromium ${l} ms`)];
const rows = [];
const row = (label, nativeVal, fn) => rows.push([label, nativeVal, ...latencies.map((l) => fn(results.latencies[l]))]);
const pp = (xs) => `${f1(pct(xs, 0.5))} / ${f1(pct(xs, 0.9))}`;
const pp2 = (xs) => `${f2(pct(xs, 0.5))} / ${f2(pct(xs, 0.9))}`;
const warmB = (r) => r.warm.runs.slice(1);
const sum = (...xs) => xs.reduce((a, b) => a + (b || 0), 0);

row("first query cold: rounds / requests / kB", `${native.cold.rounds} / ${native.cold.pages} / ${f1(native.cold.bytes / 1e3)}`, (r) => `${r.cold.stats.rounds} / ${r.cold.stats.requests} / ${f1(r.cold.stats.stored / 1e3)}`);
row("first query cold: search ms (engine + fetch)", `${f1(native.cold.engine_ms + native.cold.fetch_ms)} (${f1(native.cold.engine_ms)} + ${f1(native.cold.fetch_ms)})`, (r) => `${f1(r.cold.stats.ms)} (${f1(r.cold.stats.engineMs)} + ${f1(r.cold.stats.fetchMs)})`);
row("once pages prefetched: requests / kB / ms", `${native.once_bytes ? "-" : "-"} / ${f1(native.once_bytes / 1e3)} / -`, (r) => `${r.warm.once.stats.requests} / ${f1(r.warm.once.stats.stored / 1e3)} / ${f1(r.warm.once.ms - r.warm.once.engineMs)}`);
row("first query after the prefetch: rounds / kB / search ms", `${nat[0].rounds} / ${f1(nat[0].bytes / 1e3)} / ${f1(nat[0].engine_ms + nat[0].fetch_ms)}`, (r) => `${r.warm.runs[0].stats.rounds} / ${f1(r.warm.runs[0].stats.stored / 1e3)} / ${f1(r.warm.runs[0].stats.ms)}`);
row(`warm (${nWarm.length} q) search ms p50 / p90`, pp(nWarm.map((x) => x.engine_ms + x.fetch_ms)), (r) => pp(warmB(r).map((x) => x.stats.ms)));
row("  engine ms, all passes", pp2(nWarm.map((x) => x.engine_ms)), (r) => pp2(warmB(r).map((x) => x.stats.engineMs)));
row("  engine ms, final pass", pp2(nWarm.map((x) => x.last_pass_ms)), (r) => pp2(warmB(r).map((x) => x.stats.lastPassMs)));
row("  fetch ms (rounds' wall time)", pp2(nWarm.map((x) => x.fetch_ms)), (r) => pp2(warmB(r).map((x) => x.stats.fetchMs)));
row("  other ms (snippets, stats, JS)", "-", (r) => pp2(warmB(r).map((x) => x.stats.ms - x.stats.engineMs - x.stats.fetchMs)));
row("  page → worker → page ms", "-", (r) => pp(warmB(r).map((x) => x.wallMs)));
row("  per-page sums: network / inflate / SHA-256 / add_page ms (p50)", "-", (r) => {
  const w = warmB(r);
  return ["pageNetMs", "pageDecodeMs", "pageVerifyMs", "pageAddMs"].map((k) => f1(pct(w.map((x) => x.stats[k] || 0), 0.5))).join(" / ");
});
row("  per round: last body / round done ms (p50)", "-", (r) => {
  const w = warmB(r).filter((x) => x.stats.roundMs);
  const n = Math.max(0, ...w.map((x) => x.stats.roundMs.length));
  return Array.from({ length: n }, (_, k) => {
    const xs = w.filter((x) => x.stats.roundMs[k]).map((x) => x.stats.roundMs[k]);
    return `${f1(pct(xs.map((v) => v[0]), 0.5))}/${f1(pct(xs.map((v) => v[1]), 0.5))}`;
  }).join(", ");
});
if (o.reference) {
  row("reference: same requests, no engine: ms p50 / p90", "-", (r) => (r.warm.ref ? `${pp(r.warm.ref.same)} (${r.warm.ref.planned} q)` : "-"));
  row("reference: same requests from a plain worker: ms p50 / p90", "-", (r) => (r.warm.ref && r.warm.ref.worker.length ? pp(r.warm.ref.worker) : "-"));
  for (const k of ["inflate", "inflate+sha", "inflate+sha+timing"]) {
    row(`reference: plain worker + ${k}: ms p50 / p90`, "-", (r) => (r.warm.ref && r.warm.ref.steps ? pp(r.warm.ref.steps[k]) : "-"));
  }
  row("reference: one request a round: ms p50 / p90", "-", (r) => (r.warm.ref && r.warm.ref.packed.length ? pp(r.warm.ref.packed) : "-"));
  row("reference: one round of k requests, k = 1/2/4/8/16/32: ms p50", "-", (r) =>
    r.warm.ref ? Object.values(r.warm.ref.sweep).map((xs) => f1(pct(xs, 0.5))).join(" / ") : "-");
}
row("  rounds p50 / p90", pp(nWarm.map((x) => x.rounds)), (r) => pp(warmB(r).map((x) => x.stats.rounds)));
row("  requests p50 / p90", pp(nWarm.map((x) => x.pages)), (r) => pp(warmB(r).map((x) => x.stats.requests)));
row("  new kB p50 / p90 (as stored)", pp(nWarm.map((x) => x.bytes / 1e3)), (r) => pp(warmB(r).map((x) => x.stats.stored / 1e3)));
row("  new kB on the wire p50 (headers incl.)", "-", (r) => f1(pct(warmB(r).map((x) => x.stats.transfer / 1e3), 0.5)));
row("  index kB p50 / p90 (native split)", pp(nWarm.map((x) => x.index_bytes / 1e3)), () => "-");
row("  chunk-page kB p50 / p90 (native split)", pp(nWarm.map((x) => x.chunk_bytes / 1e3)), () => "-");
const recall = (runs) => runs.reduce((s, r, i) => s + Q.exact[i].filter((d) => r.top.includes(d)).length / Q.exact[i].length, 0) / runs.length;
row("recall@10 vs exact int8 (all queries)", recall(nat).toFixed(4), (r) => recall(r.warm.runs).toFixed(4));
row("top 10 equal to native / bytes equal", "-", (r) => {
  const same = r.warm.runs.filter((x, i) => JSON.stringify(x.top) === JSON.stringify(nat[i].top)).length;
  const bytes = r.warm.runs.filter((x, i) => x.stats.stored === nat[i].bytes).length;
  return `${same}/${r.warm.runs.length} / ${bytes}/${r.warm.runs.length}`;
});
row("load (start → end)", "-", (r) => `${r.loadStart} → ${r.loadEnd}`);

const widths = [0, ...cols.map(() => 0)];
const table = [["", ...cols], ...rows];
for (const r of table) r.forEach((c, i) => (widths[i] = Math.max(widths[i], String(c).length)));
console.log(`Chromium ${results.chromium}; server ${o["server-url"] ? `${o["server-url"]} (external)` : o.server === "h2" ? "Node http2 over TLS (this process)" : "jikji serve (HTTP/1.1)"}; ${queries.length} queries; nprobe ${Q.nprobe} (the bundle's ${Q.bundle_nprobe}); rescore ${Number(o.rescore) || "the bundle's"} (native: ${Q.rescore ?? "the bundle's"}); nlist ${Q.nlist}`);
for (const r of table) console.log(r.map((c, i) => String(c).padEnd(widths[i])).join("  "));
if (o.out) writeFileSync(o.out, JSON.stringify({ results, native: { cold: native.cold, once_bytes: native.once_bytes } }));
process.exit(0);

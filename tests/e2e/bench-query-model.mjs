#!/usr/bin/env node
// The browser's query model measured in headless Chromium (issue 13; a script, not a test; run by
// scripts/bench-query-model-browser, which adds onnxruntime's reference in the same run).
//
// Starts `jikji serve BUNDLE`, opens the search page in a fresh profile (cold cache) and:
//   1. types the first query, mode hybrid, as a visitor does (BM25 answers first, the model is
//      fetched, the hybrid answer replaces it) and counts every response Chromium received
//      until that hybrid answer (transfer sizes: headers + body, Playwright's request.sizes());
//   2. runs every query (the first included) through window.jikjiPage.jikji.search(q,
//      {mode: "hybrid", vector: true}) twice, one after the other: the first call fetches the
//      row pages the query's tokens need and are not cached yet (counted per query from the
//      responses of `r-` pages; the worker's own Resource Timing figure is kept beside it), the
//      second is warm. Times are performance.now() in the page around the awaited call
//      (postMessage round trip, tokenizing, row pages, embedding, search, JSON); the embedding
//      alone is the worker's stats.embedMs (the forward pass in wasm);
//   3. reads the wasm memory (query model, engine) once the model is loaded and after the
//      queries.
//
// Usage: node tests/e2e/bench-query-model.mjs --bundle DIR --queries FILE --out JSON
//        [--bin PATH] [--web DIR] [--pkg DIR] [--model DIR] [--top-k K]
// FILE: one query per line; blank lines and lines starting with # are skipped. JSON gets every
// figure and, per query, its token ids and vector (for the onnxruntime comparison).
// Exit status: 0, or 1 with a message on any failure (nothing is skipped).

import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, pageName, recordTransfers, startServer } from "./harness.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const log = (...a) => console.error(...a);
const isModel = (url) => new URL(url).pathname.startsWith("/pkg/qmodel/") || /^[mkur]-/.test(pageName(url) ?? "");
const isRowPage = (url) => /^r-/.test(pageName(url) ?? "");

const { values: o } = parseArgs({
  options: {
    bundle: { type: "string" },
    queries: { type: "string" },
    out: { type: "string" },
    bin: { type: "string", default: path.join(ROOT, "target/release/jikji") },
    web: { type: "string", default: path.join(ROOT, "pkg/web") },
    pkg: { type: "string", default: path.join(ROOT, "pkg") },
    model: { type: "string", default: path.join(ROOT, "models/e5-small") },
    "top-k": { type: "string", default: "10" },
  },
});
for (const k of ["bundle", "queries", "out"]) if (!o[k]) throw new Error(`--${k} is required`);
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const TOP = Number(o["top-k"]);
const queries = readFileSync(o.queries, "utf8")
  .split(/\r?\n/)
  .map((l) => l.trim())
  .filter((l) => l && !l.startsWith("#"));
if (queries.length < 2) throw new Error(`${o.queries}: fewer than 2 queries`);
const missing = [];
if (!existsSync(o.bin)) missing.push(`jikji binary ${o.bin}`);
const entry = path.join(o.bundle, "jikji.json");
if (!existsSync(entry)) missing.push(`bundle ${entry}`);
else if (!JSON.parse(readFileSync(entry, "utf8")).pages?.query_model) missing.push(`query-model pages in ${entry} (jikji model-pack, then rebuild)`);
if (!existsSync(path.join(o.pkg, "qmodel/jikji_query_model_wasm.js"))) missing.push(`${o.pkg}/qmodel (scripts/build-wasm)`);
if (!existsSync(CHROMIUM)) missing.push(`Chromium at ${CHROMIUM}`);
if (missing.length) throw new Error(`prerequisites missing:\n  - ${missing.join("\n  - ")}`);

const server = await startServer({ bin: o.bin, bundle: o.bundle, web: o.web, pkg: o.pkg, model: o.model, cwd: ROOT, log: () => {}, tag: "qm-bench" });
const profile = await mkdtemp(path.join(tmpdir(), "jikji-qm-bench-"));
let context;
try {
  context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  const version = context.browser()?.version() ?? "";
  const t = recordTransfers(context, log);
  const page = context.pages()[0] ?? (await context.newPage());
  const errors = [];
  page.on("pageerror", (e) => errors.push(e.message));
  page.on("console", (m) => m.type() === "error" && log(`[browser] ${m.text()}`));
  await page.goto(`${server.url}/?k=${TOP}`);
  await page.waitForFunction(() => ["bm25-ready", "ready", "error"].includes(document.body.dataset.state), null, { timeout: 240_000 });
  const state = await page.evaluate(() => document.body.dataset.state);
  if (state !== "bm25-ready") throw new Error(`page state ${state}: ${await page.textContent("#error")}`);

  // 1. Cold: the first hybrid answer, typed as a visitor.
  const q0 = queries[0];
  const tCold = Date.now();
  await page.check('input[name="mode"][value="hybrid"]');
  await page.fill("#q", q0);
  await page.press("#q", "Enter");
  await page.waitForFunction(
    (q) => {
      const r = document.querySelector("#results");
      return r.dataset.query === q && r.dataset.mode === "hybrid" && r.dataset.status !== "";
    },
    q0,
    { timeout: 900_000, polling: 100 },
  );
  const coldMs = Date.now() - tCold;
  const status = await page.getAttribute("#results", "data-status");
  if (status !== "done") throw new Error(`first hybrid answer: status ${status}: ${await page.textContent("#error")}`);
  await t.settle();
  const coldRows = [...t.rows];
  const sum = (rows) => rows.reduce((s, r) => s + r.bytes, 0);
  const cold = {
    bytes: sum(coldRows),
    responses: coldRows.length,
    model_bytes: sum(coldRows.filter((r) => isModel(r.url))),
    model_responses: coldRows.filter((r) => isModel(r.url)).length,
    row_pages: coldRows.filter((r) => isRowPage(r.url)).length,
    row_bytes: sum(coldRows.filter((r) => isRowPage(r.url))),
    ms: coldMs,
  };
  log(`[qm-bench] cold first hybrid answer: ${cold.bytes} B in ${cold.responses} responses (model ${cold.model_bytes} B in ${cold.model_responses}), ${(coldMs / 1000).toFixed(1)} s`);
  const memLoaded = (await page.evaluate(() => window.jikjiPage.jikji.cacheStats())).memory;

  // 2. Every query twice through the API.
  const per = [];
  for (const [i, q] of queries.entries()) {
    const before = t.rows.length;
    const r = await page.evaluate(
      async ({ q, top }) => {
        const j = window.jikjiPage.jikji;
        const t0 = performance.now();
        const a = await j.search(q, { mode: "hybrid", topK: top, vector: true });
        const t1 = performance.now();
        const b = await j.search(q, { mode: "hybrid", topK: top, vector: true });
        const t2 = performance.now();
        return {
          firstMs: t1 - t0,
          warmMs: t2 - t1,
          embedMs: b.stats.embedMs,
          embedMsFirst: a.stats.embedMs,
          tokens: a.queryTokens,
          vector: b.queryVector,
          same: JSON.stringify(a.queryVector) === JSON.stringify(b.queryVector),
          hits: a.hits.length,
          workerRowTransfer: a.stats.model?.transfer ?? null,
          workerRowRequests: a.stats.model?.requests ?? null,
        };
      },
      { q, top: TOP },
    );
    await t.settle();
    const rows = t.rows.slice(before).filter((x) => isRowPage(x.url));
    if (!r.same) throw new Error(`query ${i} ${JSON.stringify(q)}: two calls gave different vectors`);
    if (!r.vector || r.vector.length !== 384) throw new Error(`query ${i}: no vector`);
    per.push({ query: q, ...r, rowBytes: sum(rows), rowRequests: rows.length });
    if (i % 20 === 0) log(`[qm-bench] ${i + 1}/${queries.length}: first ${r.firstMs.toFixed(1)} ms, warm ${r.warmMs.toFixed(1)} ms, embed ${r.embedMs.toFixed(1)} ms, rows ${sum(rows)} B`);
  }
  const stats = await page.evaluate(() => window.jikjiPage.jikji.cacheStats());
  if (errors.length) throw new Error(`page errors: ${errors.join("; ")}`);
  writeFileSync(
    o.out,
    JSON.stringify({ chromium: version, bundle: o.bundle, queries_file: o.queries, cold, memory_loaded: memLoaded, memory_after: stats.memory, model_session: stats.model, per }),
  );
  log(`[qm-bench] wrote ${o.out}`);
} finally {
  await context?.close().catch(() => {});
  await rm(profile, { recursive: true, force: true }).catch(() => {});
  if (server.proc.exitCode === null) server.proc.kill();
}

// The browser's query model end to end (issue 13), in headless Chromium against `jikji serve`:
//   - a cold profile's first semantic (hybrid) answer fetches at most 15 MB in total, every
//     response counted at its transfer size (headers + body as received: Playwright's
//     request.sizes(), from Chromium's network layer);
//   - BM25 results are shown before the model is loaded (the model pages are held back until
//     they are), and the hybrid results replace them without re-typing;
//   - the top-10 of a few hybrid queries equals `jikji search --query-model PACK` on the same
//     bundle (ids in order, scores to 1e-4);
//   - a second visit (same profile, new page) fetches no model bytes: the model pages come
//     from Cache Storage, the query-model wasm is revalidated (304) or cached.
// Fails (never skips) when something it needs is missing.
//
// Environment: as browser.test.mjs (JIKJI_BIN, JIKJI_E2E_BUNDLE, JIKJI_E2E_WEB, JIKJI_E2E_PKG,
// CHROMIUM_PATH), plus JIKJI_E2E_PACK (default models/e5-small-pack) and
// JIKJI_E2E_COLD_LIMIT (bytes, default 15000000).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, builtWeb, hookedWeb, pageName, recordTransfers, startServer } from "./harness.mjs";

const execFileP = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const fromRoot = (p) => path.resolve(ROOT, p);
const BIN = fromRoot(process.env.JIKJI_BIN || "target/release/jikji");
const BUNDLE = fromRoot(process.env.JIKJI_E2E_BUNDLE || "target/e2e-bundle");
const PACK = fromRoot(process.env.JIKJI_E2E_PACK || "models/e5-small-pack");
const MODEL = fromRoot(process.env.JIKJI_E2E_MODEL || "models/e5-small");
const WEB = builtWeb(ROOT); // pkg/web (scripts/build-js), or JIKJI_E2E_WEB
const PKG = fromRoot(process.env.JIKJI_E2E_PKG || "pkg");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const COLD_LIMIT = Number(process.env.JIKJI_E2E_COLD_LIMIT) || 15_000_000;
const QUERIES = ["to be or not to be", "學而時習之", "메밀꽃 필 무렵", "a king's ghost asks for revenge"];
const TOP = 10;
const log = (...a) => console.error(...a);

/** A query-model request: the wasm, or a model page (layers m-, tokenizer k-, row map u-, rows r-). */
const isModel = (url) => new URL(url).pathname.startsWith("/pkg/qmodel/") || /^[mkur]-/.test(pageName(url) ?? "");

function preflight() {
  const missing = [];
  if (!existsSync(BIN)) missing.push(`jikji binary ${BIN}`);
  const entry = path.join(BUNDLE, "jikji.json");
  if (!existsSync(entry)) missing.push(`bundle ${entry} (set JIKJI_E2E_BUNDLE)`);
  else if (!JSON.parse(readFileSync(entry, "utf8")).pages?.query_model)
    missing.push(`the query model's pages in ${BUNDLE} (jikji model-pack, then rebuild the bundle)`);
  if (!existsSync(path.join(PACK, "pack.json"))) missing.push(`query-model pack ${PACK} (jikji model-pack)`);
  if (!existsSync(path.join(PKG, "qmodel/jikji_query_model_wasm.js"))) missing.push(`${PKG}/qmodel (scripts/build-wasm)`);
  if (!existsSync(CHROMIUM)) missing.push(`Chromium at ${CHROMIUM}`);
  if (missing.length) throw new Error(`query-model e2e prerequisites missing:\n  - ${missing.join("\n  - ")}`);
}

async function nativeHybrid(query) {
  const args = ["search", BUNDLE, query, "--mode", "hybrid", "--top-k", String(TOP), "--json", "--query-model", PACK];
  const { stdout } = await execFileP(BIN, args, { cwd: ROOT, maxBuffer: 64 << 20 });
  const parsed = JSON.parse(stdout);
  const obj = Array.isArray(parsed) ? parsed[0] : parsed;
  assert.ok(obj && Array.isArray(obj.hits), `jikji search printed ${stdout.slice(0, 300)}`);
  return obj.hits;
}

async function hybridInPage(page, query) {
  await page.check('input[name="mode"][value="hybrid"]');
  await page.fill("#q", query);
  await page.press("#q", "Enter");
  await page.waitForFunction(
    (q) => {
      const r = document.querySelector("#results");
      return r.dataset.query === q && r.dataset.mode === "hybrid" && r.dataset.status !== "";
    },
    query,
    { timeout: 300_000, polling: 100 },
  );
  assert.equal(await page.getAttribute("#results", "data-status"), "done", await page.textContent("#error"));
  return page.$$eval("#results [data-chunk-id]", (els) => els.map((e) => ({ id: e.dataset.chunkId, score: Number(e.dataset.score) })));
}

describe("the browser's query model (issue 13)", { timeout: 30 * 60_000 }, () => {
  let server;
  let context;
  let profileDir;
  const errors = [];

  before(
    async () => {
      preflight();
      server = await startServer({ bin: BIN, bundle: BUNDLE, web: await hookedWeb(WEB, { offline: false }), pkg: PKG, model: MODEL, cwd: ROOT, log, tag: "qm-e2e" });
      profileDir = await mkdtemp(path.join(tmpdir(), "jikji-qm-e2e-"));
      context = await chromium.launchPersistentContext(profileDir, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    },
    { timeout: 300_000 },
  );

  after(async () => {
    await context?.close().catch(() => {});
    if (profileDir) await rm(profileDir, { recursive: true, force: true }).catch(() => {});
    if (server?.proc && server.proc.exitCode === null) server.proc.kill();
  });

  test("cold: BM25 first, the first hybrid answer within 15 MB, top-10 as the native CLI; second visit: no model bytes", { timeout: 25 * 60_000 }, async () => {
    const t = recordTransfers(context);
    const page = context.pages()[0] ?? (await context.newPage());
    page.on("pageerror", (e) => errors.push(e));
    page.on("console", (m) => m.type() === "error" && log(`[qm-e2e browser] ${m.text()}`));
    // Every render of the results, with the model's state at that moment (recorded in the
    // page; no request interception, which would turn Chromium's HTTP cache off).
    await context.addInitScript(() => {
      window.__renders = [];
      new MutationObserver(() => {
        const r = document.querySelector("#results");
        if (r && r.dataset.status === "done") {
          window.__renders.push({ query: r.dataset.query, mode: r.dataset.mode, model: document.body.dataset.model || "", t: performance.now() });
        }
      }).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-status", "data-mode", "data-query"] });
    });
    await page.goto(`${server.url}/?k=${TOP}`);
    await page.waitForFunction(() => ["bm25-ready", "ready"].includes(document.body.dataset.state) || document.body.dataset.state === "error", null, { timeout: 240_000 });
    assert.equal(await page.evaluate(() => document.body.dataset.state), "bm25-ready", await page.textContent("#error"));
    await t.settle();
    assert.deepEqual(t.rows.filter((r) => isModel(r.url)).map((r) => r.url), [], "model requested on page load");

    // First query, hybrid: BM25 answers at once, the model is asked for.
    const q0 = QUERIES[0];
    await page.fill("#q", q0);
    await page.press("#q", "Enter");
    await page.waitForFunction(
      (q) => {
        const r = document.querySelector("#results");
        return r.dataset.query === q && r.dataset.mode === "bm25" && r.dataset.status === "done";
      },
      q0,
      { timeout: 120_000 },
    );
    assert.ok(Number(await page.getAttribute("#results", "data-count")) > 0, "no BM25 results");
    // The hybrid answer replaces it without re-typing.
    const t0 = Date.now();
    await page.waitForFunction(
      (q) => {
        const r = document.querySelector("#results");
        return r.dataset.query === q && r.dataset.mode === "hybrid" && r.dataset.status === "done";
      },
      q0,
      { timeout: 600_000, polling: 200 },
    );
    log(`[qm-e2e] hybrid answer ${((Date.now() - t0) / 1000).toFixed(1)} s after the model was released`);
    const renders = (await page.evaluate(() => window.__renders)).filter((r) => r.query === q0);
    log(`[qm-e2e] renders of "${q0}": ${JSON.stringify(renders)}`);
    assert.equal(renders[0]?.mode, "bm25", "the first answer was not BM25");
    assert.notEqual(renders[0].model, "loaded", "the model was loaded before the BM25 answer was shown");
    assert.ok(renders.some((r) => r.mode === "hybrid" && r.model === "loaded"), "no hybrid answer after the model loaded");
    await t.settle();
    const total = t.rows.reduce((s, r) => s + r.bytes, 0);
    const model = t.rows.filter((r) => isModel(r.url)).reduce((s, r) => s + r.bytes, 0);
    const biggest = [...t.rows].sort((a, b) => b.bytes - a.bytes).slice(0, 5).map((r) => `${new URL(r.url).pathname} ${r.bytes}`);
    log(`[qm-e2e] cold first hybrid answer: ${total} B in ${t.rows.length} responses (model ${model} B); largest: ${biggest.join(", ")}`);
    assert.ok(total <= COLD_LIMIT, `the first semantic answer fetched ${total} bytes, more than ${COLD_LIMIT}`);
    assert.ok(model > 10_000_000, `only ${model} model bytes counted: the transfer sizes are not being seen`);

    // The same top-10 as the native CLI with the same pack.
    for (const q of QUERIES) {
      const [hits, native] = await Promise.all([hybridInPage(page, q), nativeHybrid(q)]);
      assert.deepEqual(hits.map((h) => h.id), native.map((h) => String(h.id)), `hybrid "${q}": top-${TOP} ids differ`);
      hits.forEach((h, i) => assert.ok(Math.abs(h.score - Number(native[i].score)) <= 1e-4, `hybrid "${q}" #${i + 1}: ${h.score} vs ${native[i].score}`));
    }
    // search(q, {vector: true}) adds the query's vector and token ids; without it, or in
    // bm25 mode, neither is sent.
    const [withV, plain, bm25V] = await page.evaluate(async (q) => {
      const j = window.jikjiPage.jikji;
      return [
        await j.search(q, { mode: "hybrid", topK: 10, vector: true }),
        await j.search(q, { mode: "hybrid", topK: 10 }),
        await j.search(q, { mode: "bm25", topK: 10, vector: true }),
      ];
    }, QUERIES[1]);
    assert.equal(withV.queryVector?.length, 384, "vector: true gave no 384-number queryVector");
    const norm = Math.hypot(...withV.queryVector);
    assert.ok(Math.abs(norm - 1) < 1e-4, `queryVector has length ${norm}`);
    const tok = withV.queryTokens;
    assert.ok(Array.isArray(tok) && tok.length > 3 && tok[0] === 0 && tok[tok.length - 1] === 2, `queryTokens ${JSON.stringify(tok)}`);
    assert.deepEqual(withV.hits.map((h) => h.id), plain.hits.map((h) => h.id), "vector: true changed the hits");
    assert.equal(plain.queryVector, undefined, "a vector was sent without vector: true");
    assert.equal(plain.queryTokens, undefined, "token ids were sent without vector: true");
    assert.equal(bm25V.queryVector, undefined, "a bm25 search sent a vector");
    const stats = await page.evaluate(() => window.jikjiPage.jikji.cacheStats());
    log(`[qm-e2e] first visit: ${JSON.stringify(stats.model)}; wasm memory ${JSON.stringify(stats.memory)}`);
    await page.close();

    // Second visit: same profile, a new page (a new worker with empty memory).
    const seen = t.rows.length;
    const p2 = await context.newPage();
    p2.on("pageerror", (e) => errors.push(e));
    await p2.goto(`${server.url}/?k=${TOP}`);
    await p2.waitForFunction(() => document.body.dataset.state === "bm25-ready", null, { timeout: 120_000 });
    for (const q of QUERIES.slice(0, 2)) {
      await p2.fill("#q", q);
      await p2.press("#q", "Enter");
      await p2.waitForFunction(
        (q) => {
          const r = document.querySelector("#results");
          return r.dataset.query === q && r.dataset.mode === "hybrid" && r.dataset.status === "done";
        },
        q,
        { timeout: 300_000, polling: 200 },
      );
    }
    await t.settle();
    const again = t.rows.slice(seen).filter((r) => isModel(r.url));
    const modelBody = again.reduce((s, r) => s + Math.max(0, r.body), 0);
    const s2 = await p2.evaluate(() => window.jikjiPage.jikji.cacheStats());
    log(`[qm-e2e] second visit: model responses ${JSON.stringify(again.map((r) => [new URL(r.url).pathname, r.status, r.body]))}; ${JSON.stringify(s2.model)}`);
    assert.deepEqual(again.filter((r) => pageName(r.url)).map((r) => r.url), [], "model pages fetched again on the second visit");
    assert.equal(modelBody, 0, "model bytes fetched on the second visit");
    assert.ok(s2.model.cached > 0 && s2.model.requests === 0, `model pages not from Cache Storage: ${JSON.stringify(s2.model)}`);
    await p2.close();
    assert.deepEqual(errors.map((e) => e.message), []);
  });
});

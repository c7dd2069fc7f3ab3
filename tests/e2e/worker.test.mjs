// The search worker's side of format 2 in headless Chromium against `jikji serve`: opening
// from jikji.json, the need → fetch → add_page loop, deflate-raw pages, one request per page
// across concurrent queries, per-query stats, the round cap, bad pages and v1 bundles.
// The engine is tests/e2e/fixtures/engine-double.js, which follows the engine ↔ JS contract on
// a scripted bundle of real pages (search itself is browser.test.mjs's, on the real engine).
//
// Run: tests/e2e/run.sh (or node --test tests/e2e/worker.test.mjs). Needs the jikji binary
// (JIKJI_BIN, default target/release/jikji) and Chromium (CHROMIUM_PATH, default /usr/bin/chromium).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { deflateRawSync } from "node:zlib";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, hookedWeb, pageName, startServer } from "./harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const BIN = path.resolve(ROOT, process.env.JIKJI_BIN || "target/release/jikji");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const log = (...a) => console.error(...a);

/** Page bytes as FORMAT.md lays them out; returns {name, stored, raw}. */
function makePage(kind, raw, { number = null, gen = null, codec = 1, rawLenOverride = null } = {}) {
  const rawBuf = Buffer.from(raw);
  const stored = codec === 1 ? deflateRawSync(rawBuf, { level: 9 }) : rawBuf;
  const digest = createHash("sha256").update(rawBuf).digest();
  const h = Buffer.alloc(48);
  h.write("JKP2", 0, "latin1");
  h[4] = kind.charCodeAt(0);
  h[5] = codec;
  h.writeUInt32LE(rawLenOverride ?? rawBuf.length, 8);
  h.writeUInt32LE(stored.length, 12);
  h.writeUInt32LE(number ?? 0, 16);
  digest.copy(h, 20, 0, 28);
  const name = number == null ? `${kind}-${digest.subarray(0, 8).toString("hex")}` : `${kind}-${gen}-${number}`;
  return { name, bytes: Buffer.concat([h, stored]), raw: rawBuf.toString() };
}

function makeBundle(dir) {
  const text = (label, n) => `${label}: ` + Array.from({ length: n }, (_, i) => `term${i % 97} chunk ${label}`).join(" ");
  const d1 = makePage("d", text("dict one", 300));
  const d2 = makePage("d", text("dict two", 300));
  const d3 = makePage("d", text("dict three", 300));
  const o1 = makePage("o", text("postings", 500));
  const c0 = makePage("c", text("chunks zero", 400), { number: 0, gen: "00112233445566aa" });
  const raw0 = makePage("l", "columns, stored raw", { codec: 0 });
  const endless = Array.from({ length: 10 }, (_, i) => makePage("d", text(`endless ${i}`, 20)));
  // Says 10 bytes, inflates to thousands: refused before the engine sees it.
  const bomb = makePage("d", text("bomb", 300), { rawLenOverride: 10 });
  const all = [d1, d2, d3, o1, c0, raw0, ...endless, bomb];
  mkdirSync(path.join(dir, "p"), { recursive: true });
  for (const p of all) writeFileSync(path.join(dir, "p", p.name), p.bytes);
  const plan = {
    alpha: [[d1.name, d2.name, raw0.name], [o1.name], [c0.name]],
    beta: [[d1.name, d3.name], [o1.name], [c0.name]],
    gamma: [[d2.name], [c0.name]],
    endless: endless.map((p) => [p.name]),
    bomb: [[d1.name, bomb.name]],
    badname: [["../jikji.json"]],
  };
  const entry = { format_version: 2, chunks: 3, raw: Object.fromEntries(all.map((p) => [p.name, p.raw])), plan };
  writeFileSync(path.join(dir, "jikji.json"), JSON.stringify(entry));
  return { pages: Object.fromEntries(all.map((p) => [p.name, p])), plan, d1, d2, d3, o1, c0, raw0, bomb };
}

describe("the search worker on a format 2 bundle", { timeout: 300_000 }, () => {
  let dir;
  let fixture;
  let server;
  let context;
  let profile;
  const requested = [];
  const pageRequests = () => requested.map(pageName).filter(Boolean);

  before(async () => {
    if (!existsSync(BIN)) throw new Error(`jikji binary ${BIN} not found (cargo build --release --workspace, or set JIKJI_BIN)`);
    if (!existsSync(CHROMIUM)) throw new Error(`Chromium not found at ${CHROMIUM} (set CHROMIUM_PATH)`);
    dir = await mkdtemp(path.join(tmpdir(), "jikji-worker-test-"));
    fixture = makeBundle(path.join(dir, "bundle"));
    mkdirSync(path.join(dir, "pkg"));
    copyFileSync(path.join(HERE, "fixtures/engine-double.js"), path.join(dir, "pkg/jikji_engine.js"));
    // The double has no wasm (its init ignores the bytes); the page checks every engine file
    // against pkg/integrity.json.
    mkdirSync(path.join(dir, "pkg/qmodel"));
    mkdirSync(path.join(dir, "pkg/dense"));
    for (const f of [
      "jikji_engine_bg.wasm",
      "dense/jikji_engine.js",
      "dense/jikji_engine_bg.wasm",
      "qmodel/jikji_query_model_wasm.js",
      "qmodel/jikji_query_model_wasm_bg.wasm",
    ]) {
      writeFileSync(path.join(dir, "pkg", f), `not used: ${f}\n`);
    }
    // The page built from web/ as it ships, but with the double as the engine glue in its worker
    // (scripts/build-js bundles pkg's jikji_engine.js into worker.js; also writes integrity.json).
    const build = spawnSync(path.join(ROOT, "scripts/build-js"), ["--pkg", path.join(dir, "pkg"), "--out", path.join(dir, "web")], { encoding: "utf8" });
    if (build.status !== 0) throw new Error(`scripts/build-js failed: ${build.stderr}`);
    server = await startServer({
      bin: BIN,
      bundle: path.join(dir, "bundle"),
      web: await hookedWeb(path.join(dir, "web"), { offline: false }),
      pkg: path.join(dir, "pkg"),
      model: path.join(dir, "no-model"),
      cwd: ROOT,
      log: () => {},
      tag: "worker-test",
    });
    profile = await mkdtemp(path.join(tmpdir(), "jikji-worker-test-chromium-"));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    context.on("request", (r) => requested.push(r.url()));
  });

  after(async () => {
    await context?.close().catch(() => {});
    if (server?.proc && server.proc.exitCode === null) server.proc.kill();
    for (const d of [profile, dir]) if (d) await rm(d, { recursive: true, force: true }).catch(() => {});
  });

  async function openPage() {
    const page = await context.newPage();
    page.on("pageerror", (e) => log(`[worker-test pageerror] ${e.message}`));
    await page.goto(`${server.url}/?model=none`);
    await page.waitForFunction(() => ["bm25-ready", "ready", "error"].includes(document.body.dataset.state), null, { timeout: 60_000 });
    const state = await page.evaluate(() => document.body.dataset.state);
    if (state === "error") throw new Error(`the page failed to open the bundle: ${await page.textContent("#error")}`);
    return page;
  }

  const search = (page, q) =>
    page.evaluate(async (q) => {
      try {
        const r = await window.jikjiPage.jikji.search(q, { mode: "bm25", topK: 10 });
        return { ok: true, ids: r.hits.map((h) => h.id), texts: r.hits.map((h) => h.text), stats: r.stats };
      } catch (e) {
        return { ok: false, error: e.message };
      }
    }, q);

  test("opening fetches only jikji.json; a query fetches its pages round by round", async () => {
    const start = requested.length;
    const page = await openPage();
    const bundleFiles = requested.slice(start).filter((u) => new URL(u).pathname.startsWith("/bundle/"));
    assert.deepEqual(bundleFiles.map((u) => new URL(u).pathname), ["/bundle/jikji.json"]);
    const openStats = await page.evaluate(() => window.jikjiPage.jikji.openStats);
    assert.equal(openStats.requests, 1);
    assert.ok(openStats.transfer > 0 && !openStats.transferEstimated, JSON.stringify(openStats));

    const before = requested.length;
    const r = await search(page, "alpha");
    assert.ok(r.ok, r.error);
    const names = fixture.plan.alpha.flat();
    assert.deepEqual(r.ids, names);
    assert.deepEqual(r.texts, names.map((n) => fixture.pages[n].raw), "raw bodies reach the engine inflated, byte for byte");
    const fetched = requested.slice(before).map(pageName).filter(Boolean);
    assert.deepEqual([...fetched].sort(), [...names].sort(), "each page once");
    const s = r.stats;
    assert.equal(s.rounds, 3);
    assert.equal(s.requests, 5);
    assert.equal(s.pages, 5);
    assert.equal(s.stored, names.reduce((t, n) => t + fixture.pages[n].bytes.length, 0), "stored = bytes received");
    assert.equal(s.raw, names.reduce((t, n) => t + Buffer.byteLength(fixture.pages[n].raw), 0), "raw = inflated bodies");
    assert.equal(s.transferEstimated, false, "Resource Timing gave every page's size");
    assert.ok(s.transfer > s.stored, `transfer ${s.transfer} counts headers too (stored ${s.stored})`);

    const again = await search(page, "alpha");
    assert.deepEqual(again.stats.rounds, 0);
    assert.deepEqual(again.stats.requests, 0);
    await page.close();
  });

  test("concurrent queries share one request per page", async () => {
    const page = await openPage(); // a new worker, an empty page cache
    const before = requested.length;
    const rs = await page.evaluate(async () => {
      const j = window.jikjiPage.jikji;
      const out = await Promise.all(["alpha", "beta", "gamma", "alpha"].map((q) => j.search(q, { mode: "bm25", topK: 10 })));
      return { stats: out.map((r) => r.stats), cache: await j.cacheStats() };
    });
    const fetched = requested.slice(before).map(pageName).filter(Boolean);
    const unique = new Set([...fixture.plan.alpha, ...fixture.plan.beta, ...fixture.plan.gamma].flat());
    assert.deepEqual([...fetched].sort(), [...unique].sort(), "every page requested exactly once");
    assert.equal(rs.stats.reduce((t, s) => t + s.requests, 0), unique.size, "each request counted once");
    assert.ok(rs.stats.reduce((t, s) => t + s.shared, 0) > 0, "some query joined another's fetch");
    for (const n of unique) assert.equal(rs.cache.engine.added[n], 1, `page ${n} added once`);
    assert.equal(rs.cache.session.pages, unique.size);
    await page.close();
  });

  test("the round cap, a deflate bomb and a bad page name stop with clear errors", async () => {
    const page = await openPage();
    const endless = await search(page, "endless");
    assert.equal(endless.ok, false);
    assert.match(endless.error, /query "endless": the engine still needs 1 page\(s\) \(d-[0-9a-f]{16}\) after 8 rounds of fetching/);
    const bomb = await search(page, "bomb");
    assert.equal(bomb.ok, false);
    assert.match(bomb.error, new RegExp(`page p/${fixture.bomb.name}: inflates to more than the 10 bytes its header \\(byte 8\\) says`));
    const bad = await search(page, "badname");
    assert.equal(bad.ok, false);
    assert.match(bad.error, /invalid name "\.\.\/jikji\.json"/);
    // The worker is still usable after the errors.
    const ok = await search(page, "gamma");
    assert.ok(ok.ok, ok.error);
    await page.close();
  });

  test("a format v1 bundle is refused with a rebuild message", async () => {
    const page = await context.newPage();
    await page.route((url) => url.pathname.startsWith("/v1bundle/"), (route) =>
      new URL(route.request().url()).pathname.endsWith("/manifest.json")
        ? route.fulfill({ status: 200, contentType: "application/json", body: '{"format_version":1,"files":{}}' })
        : route.fulfill({ status: 404, body: "not found" }),
    );
    await page.goto(`${server.url}/?bundle=/v1bundle/&model=none`);
    await page.waitForFunction(() => document.body.dataset.state === "error", null, { timeout: 60_000 });
    assert.match(await page.textContent("#error"), /is format v1 \(manifest\.json, no jikji\.json\).*rebuild it with the current jikji/);
    await page.close();
  });
});

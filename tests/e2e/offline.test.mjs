// Offline use (web/sw-src.js, stamped as sw.js by scripts/stamp-sw) in headless Chromium against
// `jikji serve --log-requests` on the real e2e bundle, with the page as it ships (service worker
// on). Every request that reaches the server is recorded by the server itself (so neither the
// service worker nor the browser's caches can hide one):
// - a first visit installs the worker, which keeps the build's files and the pages used;
// - a second visit with nothing changed asks the server for the bundle's entry file jikji.json
//   (a 304) and nothing else but, at most once, the browser's own update check of sw.js (a 304
//   when unchanged: how a new deploy of the page is found; the spec makes it on navigation), and
//   answers the same;
// - offline (playwright's context.setOffline), the page loads and answers the query it kept; a
//   query whose pages were never fetched (the engine run in node says which it needs) fails with
//   a message naming one of those pages, and the kept query still answers after it;
// - a deploy of the page whose files do not all match the new sw.js (a copy still under way) is
//   not taken: the old build stays in use whole; a complete deploy is taken on the next visit and
//   its old cache dropped;
// - a new build of the bundle deployed into the served folder (its new pages added, its
//   jikji.json replacing the old) is switched to whole: the next visit fetches the new entry and
//   only pages the old build did not have, answers as the new build does (`jikji search` on it),
//   and the pages only the old build named are dropped from Cache Storage.
//
// Run: tests/e2e/run.sh (or node --test tests/e2e/offline.test.mjs). Needs what browser.test.mjs
// needs (JIKJI_BIN, the e2e bundle, pkg/, Chromium).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { inflateRawSync } from "node:zlib";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, builtWeb, e2eBundle, hookedWeb, startServer } from "./harness.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const BIN = path.resolve(ROOT, process.env.JIKJI_BIN || "target/release/jikji");
const BUNDLE = e2eBundle(ROOT);
const PKG = path.resolve(ROOT, process.env.JIKJI_E2E_PKG || "pkg");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const log = (...a) => console.error(...a);

async function resultIds(page, query, mode = "bm25") {
  await page.waitForFunction(
    ([q, m]) => {
      const r = document.querySelector("#results");
      return (r && r.dataset.query === q && r.dataset.mode === m && r.dataset.status !== "") || document.body.dataset.state === "error";
    },
    [query, mode],
    { timeout: 120_000, polling: 100 },
  );
  const r = await page.evaluate(() => ({
    status: document.querySelector("#results").dataset.status,
    state: document.body.dataset.state,
    error: document.querySelector("#error").textContent,
    ids: [...document.querySelectorAll("#results > li.hit")].map((h) => h.dataset.chunkId),
  }));
  assert.equal(r.status, "done", `state ${r.state}: ${r.error}`);
  return r.ids;
}

/**
 * Every page the browser engine (PKG) asks for to answer `query` (BM25, top 10, as the page asks)
 * on bundle `dir` from a fresh start, fed from the folder as web/worker.js feeds it: a Set of names.
 */
async function pagesNeeded(dir, query) {
  const mod = await import(pathToFileURL(path.join(PKG, "jikji_engine.js")).href);
  mod.initSync({ module: readFileSync(path.join(PKG, "jikji_engine_bg.wasm")) });
  const e = new mod.Engine();
  try {
    e.open_entry(new Uint8Array(readFileSync(path.join(dir, "jikji.json"))));
    e.set_now(Date.now());
    const needed = new Set();
    for (let round = 0; ; round++) {
      const out = JSON.parse(e.search_with_vector(query, null, "bm25", 10));
      if (!out.need) return needed;
      assert.ok(round < 8, `${query}: more than 8 rounds of pages`);
      for (const name of out.need) {
        needed.add(name);
        const stored = readFileSync(path.join(dir, "p", name));
        const raw = stored[5] === 0 ? stored.subarray(48) : inflateRawSync(stored.subarray(48));
        const b = new Uint8Array(48 + raw.length);
        b.set(stored.subarray(0, 48));
        b.set(raw, 48);
        e.add_page(name, b);
      }
    }
  } finally {
    e.free();
  }
}

/** The BUILD of a stamped sw.js. */
function buildOf(file) {
  const m = /^const BUILD = "([0-9a-f]{16})";$/m.exec(readFileSync(file, "utf8"));
  if (!m) throw new Error(`${file} is not stamped`);
  return m[1];
}

/** The service worker's Cache Storage: cache names and the shell's kept paths. */
function cachesOf(page) {
  return page.evaluate(async () => {
    const names = (await caches.keys()).sort();
    const shell = names.find((n) => n.startsWith("jikji-shell-"));
    const kept = shell ? (await (await caches.open(shell)).keys()).map((r) => new URL(r.url).pathname).sort() : [];
    return { names, shell, kept };
  });
}

describe("offline: the service worker, as the page ships", { timeout: 900_000 }, () => {
  let server;
  let web;
  let served;
  let context;
  let profile;
  let page;
  let rebuilt;
  const errors = [];

  /** Requests the server answered from now until the returned function is called (after a settle). */
  const record = () => {
    const from = server.requests.length;
    return async () => {
      await page.waitForTimeout(1500); // the browser's update check of sw.js runs after the load
      return server.requests.slice(from);
    };
  };
  const show = (rs) => rs.map((r) => `${r.target} ${r.status}`).join(", ") || "none";
  /** The browser's update check of the worker: sw.js, revalidated (304) when unchanged. */
  const isUpdateCheck = (r) => r.path === "/sw.js";
  /**
   * What a visit with nothing changed may ask the server, exactly: the bundle's entry (one GET,
   * revalidated: 304), and at most the browser's own update check of sw.js (one GET, 304), which
   * the Service Workers spec makes on a navigation (a registration with updateViaCache "none";
   * web/sw-src.js, "Registration"). Nothing else: no page file, engine file or bundle page.
   */
  const assertEntryOnly = (got) => {
    const checks = got.filter(isUpdateCheck);
    assert.ok(checks.length <= 1, `more than one update check of sw.js: ${show(checks)}`);
    assert.ok(checks.every((r) => r.method === "GET" && r.status === 304), `sw.js changed? ${show(checks)}`);
    assert.deepEqual(got.filter((r) => !isUpdateCheck(r)).map((r) => `${r.method} ${r.target} ${r.status}`), ["GET /bundle/jikji.json 304"]);
  };

  before(async () => {
    for (const [what, p] of [
      ["the jikji binary (JIKJI_BIN)", BIN],
      ["Chromium (CHROMIUM_PATH)", CHROMIUM],
      ["pkg/ (scripts/build-wasm)", path.join(PKG, "jikji_engine_bg.wasm")],
      ["the e2e bundle (JIKJI_E2E_BUNDLE)", path.join(BUNDLE, "jikji.json")],
    ]) {
      if (!existsSync(p)) throw new Error(`${what} not found: ${p}`);
    }
    web = await hookedWeb(builtWeb(ROOT), { pkg: PKG });
    // A copy to deploy a new build into.
    served = path.join(web, "..", `${path.basename(web)}-bundle`);
    cpSync(BUNDLE, served, { recursive: true });
    server = await startServer({ bin: BIN, bundle: served, web, pkg: PKG, model: path.join(ROOT, "models/e5-small"), cwd: ROOT, log, tag: "offline", logRequests: true });
    profile = await mkdtemp(path.join(tmpdir(), "jikji-offline-chromium-"));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    page = context.pages()[0] ?? (await context.newPage());
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => (m.type() === "error" || m.type() === "warning") && log(`[offline browser ${m.type()}] ${m.text()}`));
  });

  after(async () => {
    await context?.close().catch(() => {});
    if (server?.proc && server.proc.exitCode === null) server.proc.kill();
    for (const d of [web, profile, served, rebuilt]) if (d) await rm(d, { recursive: true, force: true }).catch(() => {});
  });

  const Q = "學而時習之";
  let firstIds;
  let build;

  test("first visit: the service worker installs this build's files and keeps the pages the search used", async () => {
    build = buildOf(path.join(web, "sw.js"));
    const done = record();
    await page.goto(`${server.url}/?mode=bm25`);
    await page.waitForFunction(() => navigator.serviceWorker?.controller != null, null, { timeout: 60_000 });
    await page.fill("#q", Q);
    await page.press("#q", "Enter");
    firstIds = await resultIds(page, Q);
    assert.ok(firstIds.length > 0);
    // The entry is kept (the page asked the worker to keep it), and the pages the query read.
    await page.waitForFunction(async () => (await (await caches.open("jikji-entries-v1")).keys()).length > 0, null, { timeout: 30_000, polling: 250 });
    const c = await cachesOf(page);
    const pages = await page.evaluate(async () => (await (await caches.open("jikji-pages-v1")).keys()).length);
    log(`[offline] first visit, from the server: ${show(await done())}`);
    log(`[offline] kept: ${c.names.join(" ")}; shell ${c.kept.join(" ")}; ${pages} pages`);
    assert.equal(c.shell, `jikji-shell-${build}`);
    // The page as scripts/build-js builds it: app.js holds the component and jikji.js, worker.js
    // holds pages.js and the engine's glue.
    for (const f of ["/", "/app.js", "/style.css", "/jikji-search.css", "/worker.js", "/pkg/integrity.json", "/pkg/jikji_engine_bg.wasm"]) {
      assert.ok(c.kept.includes(f), `${f} not kept: ${c.kept.join(" ")}`);
    }
    assert.ok(!c.kept.some((f) => f.includes("qmodel")), "the query model's wasm kept before it was asked for");
    assert.ok(pages > 0, "no bundle page kept");
  });

  test("second visit, nothing changed: the server is asked for jikji.json only", async () => {
    const done = record();
    await page.goto(`${server.url}/?mode=bm25&q=${encodeURIComponent(Q)}`);
    assert.deepEqual(await resultIds(page, Q), firstIds);
    const got = await done();
    log(`[offline] second visit, from the server: ${show(got)}`);
    assertEntryOnly(got);
    assert.equal((await cachesOf(page)).shell, `jikji-shell-${build}`);
  });

  test("offline: the page loads and searches", async () => {
    // A query never asked before needs pages this browser never fetched (the engine in node says
    // which, from the same bundle): offline it must fail with a message naming one of them.
    const other = "Rosencrantz Guildenstern Ophelia Yorick";
    const fetched = new Set(server.requests.map((r) => /^\/bundle\/p\/([^/]+)$/.exec(r.path)?.[1]).filter(Boolean).map(decodeURIComponent));
    const needed = await pagesNeeded(served, other);
    const missing = [...needed].filter((n) => !fetched.has(n));
    log(`[offline] "${other}" needs ${needed.size} pages, ${missing.length} never fetched (${missing.slice(0, 6).join(", ")})`);
    assert.ok(missing.length > 0, `every page "${other}" needs was fetched already: pick a query with pages of its own`);
    await context.setOffline(true);
    try {
      await page.goto(`${server.url}/?mode=bm25&q=${encodeURIComponent(Q)}`);
      assert.deepEqual(await resultIds(page, Q), firstIds);
      await page.fill("#q", other);
      await page.press("#q", "Enter");
      await page.waitForFunction((q) => document.querySelector("#results").dataset.query === q, other, { timeout: 60_000 });
      const status = await page.getAttribute("#results", "data-status");
      const error = await page.textContent("#error");
      log(`[offline] offline, a query never asked before: ${status}: ${error}`);
      assert.equal(status, "error", "a query whose pages were never fetched answered offline");
      const m = /^Search failed: page p\/([a-z]-[0-9a-f]+(?:-[0-9]+)?): network error fetching /.exec(error);
      assert.ok(m, `the error names no page: ${error}`);
      assert.ok(missing.includes(m[1]), `the error names p/${m[1]}, not one of the pages never fetched (${missing.join(", ")})`);
      // The page stays usable: the kept query still answers.
      await page.fill("#q", Q);
      await page.press("#q", "Enter");
      assert.deepEqual(await resultIds(page, Q), firstIds);
    } finally {
      await context.setOffline(false);
    }
  });

  /** Asks the browser to check sw.js now and waits until no worker is installing; returns the caches. */
  async function updateWorker() {
    await page.evaluate(async () => {
      const reg = await navigator.serviceWorker.getRegistration();
      await reg.update().catch(() => {});
      for (let i = 0; i < 300 && (reg.installing || reg.waiting || reg.active?.state !== "activated"); i++) await new Promise((r) => setTimeout(r, 100));
    });
    return cachesOf(page);
  }

  test("a deploy of the page is taken whole or not at all", async () => {
    const css = path.join(web, "style.css");
    const old = readFileSync(css, "utf8");
    const MARK = "/* deploy 2 */";
    // Half a deploy: the new sw.js is there, style.css is still the old one.
    writeFileSync(css, `${old}${MARK}\n`);
    execFileSync(process.execPath, [path.join(ROOT, "scripts/stamp-sw"), "page", web, PKG], { stdio: ["ignore", "ignore", "inherit"] });
    const next = buildOf(path.join(web, "sw.js"));
    assert.notEqual(next, build, "a changed file changes the build");
    writeFileSync(css, old);
    let c = await updateWorker();
    log(`[offline] half deploy: caches ${c.names.join(" ")}`);
    assert.equal(c.shell, `jikji-shell-${build}`, "the old build stays");
    assert.deepEqual(c.names.filter((n) => n.startsWith("jikji-shell-")), [`jikji-shell-${build}`]);
    await page.goto(`${server.url}/?mode=bm25&q=${encodeURIComponent(Q)}`);
    assert.deepEqual(await resultIds(page, Q), firstIds);
    assert.ok(!(await page.evaluate(async () => (await (await fetch("style.css")).text()))).includes(MARK));
    // The rest of the deploy arrives: the next check takes it, whole.
    writeFileSync(css, `${old}${MARK}\n`);
    c = await updateWorker();
    log(`[offline] complete deploy: caches ${c.names.join(" ")}`);
    assert.deepEqual(c.names.filter((n) => n.startsWith("jikji-shell-")), [`jikji-shell-${next}`], "the new build replaces the old");
    const done = record();
    await page.goto(`${server.url}/?mode=bm25&q=${encodeURIComponent(Q)}`);
    assert.deepEqual(await resultIds(page, Q), firstIds);
    assert.ok((await page.evaluate(async () => (await (await fetch("style.css")).text()))).includes(MARK), "the new style.css is served");
    const got = await done();
    log(`[offline] visit after the deploy, from the server: ${show(got)}`);
    assertEntryOnly(got);
    build = next;
  });

  test("a new build of the bundle is switched to whole: new entry, only its new pages, old pages dropped", { timeout: 600_000 }, async () => {
    // The e2e corpus (tests/e2e/corpus.txt over books/) with one paragraph added to 大學.
    rebuilt = await mkdtemp(path.join(tmpdir(), "jikji-offline-rebuild-"));
    const books = path.join(rebuilt, "books");
    for (const f of readFileSync(path.join(ROOT, "tests/e2e/corpus.txt"), "utf8").split("\n").filter(Boolean)) {
      mkdirSync(path.dirname(path.join(books, f)), { recursive: true });
      cpSync(path.join(ROOT, "books", f), path.join(books, f));
    }
    appendFileSync(path.join(books, "1. 漢文 古典/daxue.md"), "\n\n## 補記\n\n學而時習之者，溫故而知新，可以為師矣。\n");
    const out = path.join(rebuilt, "bundle");
    const t0 = Date.now();
    execFileSync(BIN, ["build", books, "--out", out, "--cache", path.join(ROOT, "target/jikji-test-cache"), "--quiet"], { cwd: ROOT, stdio: ["ignore", "ignore", "inherit"] });
    log(`[offline] rebuilt the bundle in ${((Date.now() - t0) / 1000).toFixed(1)} s`);
    const oldPages = new Set(readdirSync(path.join(served, "p")));
    const newPages = readdirSync(path.join(out, "p"));
    const added = new Set(newPages.filter((n) => !oldPages.has(n)));
    log(`[offline] the new build: ${newPages.length} pages, ${added.size} not in the old one`);
    assert.ok(added.size > 0 && added.size < newPages.length, "the rebuild shares pages with the old build");
    // Deploy: pages first (immutable names), then the entry.
    for (const n of added) cpSync(path.join(out, "p", n), path.join(served, "p", n));
    cpSync(path.join(out, "jikji.json"), path.join(served, "jikji.json"));
    const native = JSON.parse(execFileSync(BIN, ["search", out, Q, "--mode", "bm25", "--top-k", "10", "--json"], { cwd: ROOT, maxBuffer: 64 << 20 }).toString());
    const want = (Array.isArray(native) ? native[0] : native).hits.map((h) => String(h.id));

    const done = record();
    await page.goto(`${server.url}/?mode=bm25&q=${encodeURIComponent(Q)}`);
    const ids = await resultIds(page, Q);
    assert.deepEqual(ids, want, "the page answers as the new build");
    const got = await done();
    const fetched = got.map((r) => /^\/bundle\/p\/([^/]+)$/.exec(r.path)?.[1]).filter(Boolean).map(decodeURIComponent);
    log(`[offline] after the bundle deploy, from the server: ${show(got.filter((r) => !r.path.startsWith("/bundle/p/")))} and ${fetched.length} pages (${fetched.slice(0, 8).join(", ")}…)`);
    assert.ok(got.some((r) => r.path === "/bundle/jikji.json" && r.status === 200), "the new entry was fetched");
    assert.deepEqual(fetched.filter((n) => !added.has(n)), [], "pages the old build had were fetched again");
    assert.deepEqual(got.filter((r) => !isUpdateCheck(r) && !r.path.startsWith("/bundle/")), [], "page files fetched again");
    // The kept entry is the new one, and no kept page is one only the old build named.
    const keptNow = () => page.evaluate(async () => {
      const entries = await caches.open("jikji-entries-v1");
      const keys = await entries.keys();
      const pages = await caches.open("jikji-pages-v1");
      return {
        entry: await (await entries.match(keys[0])).text(),
        pages: (await pages.keys()).map((r) => decodeURIComponent(new URL(r.url).pathname.split("/").pop())),
      };
    });
    const newEntry = readFileSync(path.join(out, "jikji.json"), "utf8");
    const newSet = new Set(newPages);
    // The service worker drops old pages after it has answered (waitUntil): give it a moment.
    let kept = await keptNow();
    for (let i = 0; i < 50 && (kept.entry !== newEntry || kept.pages.some((n) => !newSet.has(n))); i++) {
      await page.waitForTimeout(200);
      kept = await keptNow();
    }
    assert.equal(kept.entry, newEntry);
    assert.deepEqual(kept.pages.filter((n) => !newSet.has(n)), [], "pages of the old build left in Cache Storage");
  });

  test("no uncaught errors", () => {
    assert.deepEqual(errors, []);
  });
});

// Offline use (web/sw.js) in headless Chromium against `jikji serve` on the real e2e bundle: after
// a first visit, the page searches with the network off (playwright's context.setOffline); a
// second visit with the bundle unchanged takes nothing of the bundle from the network but its
// entry file jikji.json (the pages come from Cache Storage). The page is served as the tests serve
// it (hookedWeb: service worker off by its meta) and turned on with ?sw=on, as a site would leave
// the shipped default on. Then a new build of the bundle is deployed into the served folder (its
// new pages added, its jikji.json replacing the old): the next visit fetches the new entry and
// only pages the old build did not have, answers as the new build does (`jikji search` on it),
// and the pages only the old build named are dropped from Cache Storage.
//
// Run: tests/e2e/run.sh (or node --test tests/e2e/offline.test.mjs). Needs what browser.test.mjs
// needs (JIKJI_BIN, the e2e bundle, pkg/, Chromium).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { appendFileSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, e2eBundle, hookedWeb, pageName, startServer } from "./harness.mjs";

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

describe("offline: the service worker", { timeout: 600_000 }, () => {
  let server;
  let web;
  let served;
  let context;
  let profile;
  let page;
  const errors = [];
  /** Requests that left the browser for the network: made by the service worker, or not answered by it. */
  let network = [];
  const pending = new Set();

  before(async () => {
    for (const [what, p] of [
      ["the jikji binary (JIKJI_BIN)", BIN],
      ["Chromium (CHROMIUM_PATH)", CHROMIUM],
      ["pkg/ (scripts/build-wasm)", path.join(PKG, "jikji_engine_bg.wasm")],
      ["the e2e bundle (JIKJI_E2E_BUNDLE)", path.join(BUNDLE, "jikji.json")],
    ]) {
      if (!existsSync(p)) throw new Error(`${what} not found: ${p}`);
    }
    web = await hookedWeb(path.join(ROOT, "web"));
    // A copy to deploy a new build into.
    served = path.join(web, "..", `${path.basename(web)}-bundle`);
    cpSync(BUNDLE, served, { recursive: true });
    server = await startServer({ bin: BIN, bundle: served, web, pkg: PKG, model: path.join(ROOT, "models/e5-small"), cwd: ROOT, log, tag: "offline" });
    profile = await mkdtemp(path.join(tmpdir(), "jikji-offline-chromium-"));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    context.on("requestfinished", (req) => {
      const p = (async () => {
        const res = await req.response();
        const fromSw = res ? res.fromServiceWorker() : false;
        if (req.serviceWorker() || !fromSw) {
          const sizes = await req.sizes();
          network.push({ url: req.url(), status: res?.status() ?? 0, body: sizes.responseBodySize, by: req.serviceWorker() ? "sw" : "page" });
        }
      })().catch(() => {});
      pending.add(p);
      p.finally(() => pending.delete(p));
    });
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
  let rebuilt;

  test("first visit: the service worker takes control and keeps what the search used", async () => {
    await page.goto(`${server.url}/?sw=on&mode=bm25`);
    await page.waitForFunction(() => navigator.serviceWorker?.controller != null, null, { timeout: 60_000 });
    await page.waitForFunction(() => ["bm25-ready", "ready"].includes(document.body.dataset.state), null, { timeout: 60_000 });
    await page.fill("#q", Q);
    await page.press("#q", "Enter");
    firstIds = await resultIds(page, Q);
    assert.ok(firstIds.length > 0);
    // The entry is kept (the page asked the worker to keep it), and the pages the query read.
    await page.waitForFunction(async () => (await (await caches.open("jikji-entries-v1")).keys()).length > 0, null, { timeout: 30_000, polling: 250 });
    const kept = await page.evaluate(async () => ({
      shell: (await (await caches.open("jikji-shell-v1")).keys()).map((r) => new URL(r.url).pathname),
      pages: (await (await caches.open("jikji-pages-v1")).keys()).length,
    }));
    log(`[offline] kept: shell ${kept.shell.join(" ")}; ${kept.pages} pages`);
    assert.ok(kept.shell.includes("/pkg/jikji_engine_bg.wasm") && kept.shell.includes("/"), kept.shell.join(" "));
    assert.ok(kept.pages > 0, "no bundle page kept");
  });

  test("second visit, bundle unchanged: only the entry file comes from the network", async () => {
    while (pending.size) await Promise.all([...pending]);
    network = [];
    await page.goto(`${server.url}/?sw=on&mode=bm25&q=${encodeURIComponent(Q)}`);
    assert.deepEqual(await resultIds(page, Q), firstIds);
    await page.waitForTimeout(300);
    while (pending.size) await Promise.all([...pending]);
    const bundle = network.filter((r) => new URL(r.url).pathname.startsWith("/bundle/"));
    log(`[offline] second visit, from the network: ${network.map((r) => `${new URL(r.url).pathname} ${r.status} ${r.body} B (${r.by})`).join(", ")}`);
    assert.deepEqual(bundle.map((r) => new URL(r.url).pathname), ["/bundle/jikji.json"], "bundle files from the network");
    assert.deepEqual(bundle.map((r) => pageName(r.url)).filter(Boolean), []);
    // The page's own files are revalidated (the server says no-cache; a 304 carries no body).
    const bodies = network.filter((r) => !new URL(r.url).pathname.startsWith("/bundle/") && r.body > 0);
    log(`[offline] page files downloaded again: ${bodies.map((r) => `${new URL(r.url).pathname} ${r.body} B`).join(", ") || "none"}`);
  });

  test("offline: the page loads and searches", async () => {
    await context.setOffline(true);
    try {
      network = [];
      await page.goto(`${server.url}/?sw=on&mode=bm25&q=${encodeURIComponent(Q)}`);
      assert.deepEqual(await resultIds(page, Q), firstIds);
      // A query that needs a page never fetched fails with a message naming it, and the page
      // stays usable: the kept query still answers.
      const other = "the prince of Denmark";
      await page.fill("#q", other);
      await page.press("#q", "Enter");
      await page.waitForFunction((q) => document.querySelector("#results").dataset.query === q, other, { timeout: 60_000 });
      assert.equal(await page.getAttribute("#results", "data-status"), "error");
      assert.match(await page.textContent("#error"), /Search failed: page p\/[a-z]-[0-9a-f]+.*network error/);
      await page.fill("#q", Q);
      await page.press("#q", "Enter");
      assert.deepEqual(await resultIds(page, Q), firstIds);
    } finally {
      await context.setOffline(false);
    }
  });

  test("a new build is switched to atomically: new entry, only its new pages, old pages dropped", { timeout: 600_000 }, async () => {
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

    while (pending.size) await Promise.all([...pending]);
    network = [];
    await page.goto(`${server.url}/?sw=on&mode=bm25&q=${encodeURIComponent(Q)}`);
    const ids = await resultIds(page, Q);
    await page.waitForTimeout(300);
    while (pending.size) await Promise.all([...pending]);
    assert.deepEqual(ids, want, "the page answers as the new build");
    const fetched = network.map((r) => pageName(r.url)).filter(Boolean);
    log(`[offline] after the deploy, pages from the network: ${fetched.length} (${fetched.slice(0, 8).join(", ")}…)`);
    assert.ok(network.some((r) => new URL(r.url).pathname === "/bundle/jikji.json"), "the new entry was fetched");
    const stale = fetched.filter((n) => !added.has(n));
    assert.deepEqual(stale, [], "pages the old build had were fetched again");
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

// The page's security in headless Chromium against `jikji serve`: a crafted ?bundle= or ?model=
// on another origin is refused with a visible message (and nothing is fetched from it); every
// response carries the CSP and nosniff headers; the shipped page has no test hook; a tampered
// engine wasm or worker is refused before it runs (integrity.json, scripts/integrity); a tampered
// query-model wasm (pkg/qmodel/), a tampered tokenizer page (k-) and a tampered model layer page
// (m-) of the bundle are refused when the model loads, with a message naming the file or page,
// and keyword (BM25) search goes on working.
//
// Run: tests/e2e/run.sh (or node --test tests/e2e/security.test.mjs). Needs the jikji binary
// (JIKJI_BIN), pkg/ with pkg/integrity.json (scripts/build-wasm), a bundle (JIKJI_E2E_BUNDLE, as
// browser.test.mjs) and Chromium (CHROMIUM_PATH).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { deflateRawSync, inflateRawSync } from "node:zlib";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, builtWeb, e2eBundle, startServer } from "./harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const BIN = path.resolve(ROOT, process.env.JIKJI_BIN || "target/release/jikji");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const PKG = path.resolve(ROOT, process.env.JIKJI_E2E_PKG || "pkg");
const WEB = builtWeb(ROOT); // pkg/web (scripts/build-js), or JIKJI_E2E_WEB
const log = (...a) => console.error(...a);

const BUNDLE = e2eBundle(ROOT);

describe("the page's origin limits, headers, test hook and integrity checks", { timeout: 1_200_000 }, () => {
  let work;
  let context;
  let profile;
  const servers = [];
  const requested = [];

  const serve = async (web, pkg) => {
    const s = await startServer({ bin: BIN, bundle: BUNDLE, web, pkg, model: path.join(ROOT, "models/e5-small"), cwd: ROOT, log: () => {}, tag: "security" });
    servers.push(s);
    return s.url;
  };

  /** Serves the shipped page and pkg/ with bundle folder `bundle`; resolves to its URL. */
  const serveBundle = async (bundle) => {
    const s = await startServer({ bin: BIN, bundle, web: WEB, pkg: PKG, model: path.join(ROOT, "models/e5-small"), cwd: ROOT, log: () => {}, tag: "security" });
    servers.push(s);
    return s.url;
  };

  /** Opens `url` and waits for the page to settle; returns {state, error}. */
  async function open(url) {
    const page = await context.newPage();
    await page.goto(url);
    await page.waitForFunction(() => ["bm25-ready", "ready", "error"].includes(document.body.dataset.state), null, { timeout: 60_000 });
    const r = {
      state: await page.evaluate(() => document.body.dataset.state),
      error: (await page.isVisible("#error")) ? await page.textContent("#error") : null,
      hook: await page.evaluate(() => typeof window.jikjiPage),
    };
    await page.close();
    return r;
  }

  /**
   * Opens `url` (a shareable ?q=…&mode=hybrid URL), waits until the model has loaded or failed,
   * then searches `next` (BM25) from the box. Returns what the page showed: {state, model, error,
   * notice, first: the first answer's {query, mode, status, count}, semantic: modes still enabled,
   * next: the BM25 answer's {query, mode, status, count}}.
   */
  async function openHybrid(url, next) {
    const page = await context.newPage();
    const answer = () =>
      page.evaluate(() => {
        const r = document.querySelector("#results");
        return { query: r.dataset.query, mode: r.dataset.mode, status: r.dataset.status, count: Number(r.dataset.count) };
      });
    await page.goto(url);
    await page.waitForFunction(() => ["loaded", "error", "none"].includes(document.body.dataset.model) || document.body.dataset.state === "error", null, {
      timeout: 180_000,
    });
    await page.waitForFunction(() => ["done", "error"].includes(document.querySelector("#results")?.dataset.status), null, { timeout: 60_000 });
    const r = await page.evaluate(() => ({
      state: document.body.dataset.state,
      model: document.body.dataset.model,
      error: document.querySelector("#error").hidden ? null : document.querySelector("#error").textContent,
      notice: document.querySelector("#notice").hidden ? null : document.querySelector("#notice").textContent,
      semantic: [...document.querySelectorAll('input[name="mode"]')].filter((i) => i.value !== "bm25" && !i.disabled).map((i) => i.value),
    }));
    r.first = await answer();
    await page.fill("#q", next);
    await page.press("#q", "Enter");
    await page.waitForFunction((q) => document.querySelector("#results").dataset.query === q && document.querySelector("#results").dataset.status !== "", next, {
      timeout: 60_000,
    });
    r.next = await answer();
    await page.close();
    return r;
  }

  /** What a page whose model was refused must show: BM25 answers, semantic modes off, `file` named. */
  function assertRefusedModel(r, q, next, file) {
    assert.equal(r.state, "bm25-ready", `keyword search stopped: ${r.error}`);
    assert.equal(r.model, "error", `the model was not refused: ${r.error}`);
    assert.match(r.error ?? "", file, r.error);
    assert.match(r.notice ?? "", /could not be loaded: showing keyword \(BM25\) results/, r.notice);
    assert.deepEqual(r.first.query, q);
    assert.equal(r.first.mode, "bm25");
    assert.equal(r.first.status, "done");
    assert.ok(r.first.count > 0, "no BM25 results for the hybrid query");
    assert.deepEqual(r.semantic, [], "dense/hybrid still offered without a model");
    assert.deepEqual({ ...r.next, count: r.next.count > 0 }, { query: next, mode: "bm25", status: "done", count: true }, "a BM25 search after the refusal");
  }

  /**
   * Page file `file` (header + stored body) with one byte of its raw body changed and the body
   * stored again (deflate-raw for codec 1), the header's stored_len (byte 12) updated and its
   * digest kept: what a corrupted or tampered copy of the page looks like to the page.
   */
  function tamperPage(file) {
    const stored = readFileSync(file);
    const header = Buffer.from(stored.subarray(0, 48));
    const codec = header[5];
    const raw = Buffer.from(codec === 1 ? inflateRawSync(stored.subarray(48)) : stored.subarray(48));
    raw[raw.length >> 1] ^= 0x01;
    const body = codec === 1 ? deflateRawSync(raw) : raw;
    header.writeUInt32LE(body.length, 12);
    writeFileSync(file, Buffer.concat([header, body]));
  }

  before(async () => {
    for (const [what, p] of [
      ["the jikji binary (JIKJI_BIN)", BIN],
      ["Chromium (CHROMIUM_PATH)", CHROMIUM],
      ["pkg/integrity.json (scripts/build-wasm)", path.join(PKG, "integrity.json")],
      ["the bundle (JIKJI_E2E_BUNDLE)", path.join(BUNDLE, "jikji.json")],
    ]) {
      if (!existsSync(p)) throw new Error(`${what} not found: ${p}`);
    }
    work = await mkdtemp(path.join(tmpdir(), "jikji-security-test-"));
    profile = await mkdtemp(path.join(tmpdir(), "jikji-security-test-chromium-"));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
    context.on("request", (r) => requested.push(r.url()));
  });

  after(async () => {
    await context?.close().catch(() => {});
    for (const s of servers) if (s.proc.exitCode === null) s.proc.kill();
    for (const d of [profile, work]) if (d) await rm(d, { recursive: true, force: true }).catch(() => {});
  });

  test("the page opens its own bundle, and has no test hook", async () => {
    const url = await serve(WEB, PKG);
    const r = await open(`${url}/`);
    assert.equal(r.state, "bm25-ready", r.error ?? "");
    assert.equal(r.hook, "undefined", "window.jikjiPage is in the shipped page");
    assert.ok(!readFileSync(path.join(WEB, "app.js"), "utf8").includes("jikjiPage"), "web/app.js still defines the test hook");
  });

  test("a crafted ?bundle= or ?model= on another origin is refused with a visible message", async () => {
    const url = await serve(WEB, PKG);
    for (const param of ["bundle=https://other.example/", "bundle=http://127.0.0.2:9/b/", "bundle=data:,x", "model=https://other.example/model/"]) {
      const before = requested.length;
      const r = await open(`${url}/?${param}`);
      assert.equal(r.state, "error", param);
      assert.match(r.error ?? "", /refused (bundle|model) URL/, `${param}: ${r.error}`);
      // (This test's own servers excepted: an earlier page's service worker installs on its own origin meanwhile.)
      const other = requested.slice(before).filter((u) => !servers.some((s) => u.startsWith(`${s.url}/`)));
      assert.deepEqual(other, [], `${param}: fetched from another origin`);
    }
  });

  test("documents and scripts carry the CSP, every response nosniff (pages, wasm, JSON: nosniff only)", async () => {
    const url = await serve(WEB, PKG);
    const entry = JSON.parse(readFileSync(path.join(BUNDLE, "jikji.json"), "utf8"));
    // A page is binary data under nosniff, never a document or a script: no CSP (it would be
    // 273 header bytes on each of a query's pages), and the browser must not be able to sniff it.
    const page = await fetch(`${url}/bundle/p/${entry.pages.columns}`);
    assert.equal(page.status, 200);
    assert.equal(page.headers.get("content-type"), "application/octet-stream");
    assert.equal(page.headers.get("x-content-type-options"), "nosniff");
    assert.equal(page.headers.get("content-security-policy"), null);
    // The wasm and JSON files are never a document or a worker script either: no CSP.
    for (const p of ["/pkg/jikji_engine_bg.wasm", "/pkg/integrity.json", "/bundle/jikji.json"]) {
      const res = await fetch(`${url}${p}`);
      assert.equal(res.status, 200, p);
      assert.equal(res.headers.get("content-security-policy"), null, p);
      assert.equal(res.headers.get("x-content-type-options"), "nosniff", p);
    }
    for (const p of ["/", "/app.js", "/worker.js", "/sw.js", "/nothing"]) {
      const res = await fetch(`${url}${p}`);
      const csp = res.headers.get("content-security-policy") ?? "";
      assert.match(csp, /default-src 'self'/, p);
      assert.match(csp, /script-src 'self' 'wasm-unsafe-eval'/, p);
      assert.match(csp, /connect-src 'self'/, p);
      assert.match(csp, /frame-ancestors 'none'/, p);
      assert.doesNotMatch(csp, /https?:/, `${p}: the CSP allows other origins`);
      assert.equal(res.headers.get("x-content-type-options"), "nosniff", p);
    }
  });

  test("a tampered engine wasm or worker is refused", async () => {
    const pkg = path.join(work, "pkg");
    cpSync(PKG, pkg, { recursive: true });
    const wasm = path.join(pkg, "jikji_engine_bg.wasm");
    const bytes = readFileSync(wasm);
    bytes[bytes.length >> 1] ^= 0x01; // one bit, in the middle of the code
    writeFileSync(wasm, bytes);
    let r = await open(`${await serve(WEB, pkg)}/`);
    assert.equal(r.state, "error");
    assert.match(r.error ?? "", /integrity check failed .*jikji_engine_bg\.wasm/, r.error);

    const web = path.join(work, "web");
    cpSync(WEB, web, { recursive: true });
    writeFileSync(path.join(web, "worker.js"), readFileSync(path.join(WEB, "worker.js"), "utf8") + "\n// changed\n");
    r = await open(`${await serve(web, PKG)}/`);
    assert.equal(r.state, "error");
    assert.match(r.error ?? "", /integrity check failed .*worker\.js/, r.error);
    log("[security] tampered wasm and worker refused");
  });

  const Q = "學而時習之";
  const NEXT = "메밀꽃 필 무렵";

  test("a tampered query-model wasm is refused when the model loads; keyword search goes on", async () => {
    const pkg = path.join(work, "pkg-qmodel");
    cpSync(PKG, pkg, { recursive: true });
    const wasm = path.join(pkg, "qmodel/jikji_query_model_wasm_bg.wasm");
    const bytes = readFileSync(wasm);
    bytes[bytes.length >> 1] ^= 0x01;
    writeFileSync(wasm, bytes);
    const r = await openHybrid(`${await serve(WEB, pkg)}/?q=${encodeURIComponent(Q)}&mode=hybrid`, NEXT);
    log(`[security] tampered query-model wasm: ${r.error}`);
    assertRefusedModel(r, Q, NEXT, /^Model: .*integrity check failed for \S+\/pkg\/qmodel\/jikji_query_model_wasm_bg\.wasm/);
  });

  test("a tampered tokenizer page or model layer page is refused, naming the page; keyword search goes on", { timeout: 600_000 }, async () => {
    const bundle = path.join(work, "bundle-model");
    cpSync(BUNDLE, bundle, { recursive: true });
    const qm = JSON.parse(readFileSync(path.join(bundle, "jikji.json"), "utf8")).pages?.query_model;
    assert.ok(qm && qm.tokenizer?.length && qm.layers?.length, "the e2e bundle carries no query model (pages.query_model)");
    // The untampered copy loads (so what follows is the tampering, not the copy).
    const ok = await openHybrid(`${await serveBundle(bundle)}/?q=${encodeURIComponent(Q)}&mode=hybrid`, NEXT);
    assert.equal(ok.model, "loaded", ok.error ?? "");
    for (const [what, name] of [
      ["tokenizer", qm.tokenizer[0]],
      ["layers", qm.layers[Math.floor(qm.layers.length / 2)]],
    ]) {
      const file = path.join(bundle, "p", name);
      const original = readFileSync(file);
      tamperPage(file);
      try {
        // A new server is a new origin: nothing of the model in Cache Storage yet.
        const r = await openHybrid(`${await serveBundle(bundle)}/?q=${encodeURIComponent(Q)}&mode=hybrid`, NEXT);
        log(`[security] tampered ${what} page ${name}: ${r.error}`);
        assertRefusedModel(r, Q, NEXT, new RegExp(`^Model: page p/${name}: .*content hash does not match the page header: corrupt or tampered page`));
      } finally {
        writeFileSync(file, original);
      }
    }
  });
});

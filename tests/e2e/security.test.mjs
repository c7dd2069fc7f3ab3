// The page's security in headless Chromium against `jikji serve`: a crafted ?bundle= or ?model=
// on another origin is refused with a visible message (and nothing is fetched from it); every
// response carries the CSP and nosniff headers; the shipped page has no test hook; a tampered
// engine wasm or worker is refused before it runs (integrity.json, scripts/integrity).
//
// Run: tests/e2e/run.sh (or node --test tests/e2e/security.test.mjs). Needs the jikji binary
// (JIKJI_BIN), pkg/ with pkg/integrity.json (scripts/build-wasm), a bundle (JIKJI_E2E_BUNDLE, as
// browser.test.mjs) and Chromium (CHROMIUM_PATH).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { cpSync, existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, e2eBundle, startServer } from "./harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const BIN = path.resolve(ROOT, process.env.JIKJI_BIN || "target/release/jikji");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const PKG = path.resolve(ROOT, process.env.JIKJI_E2E_PKG || "pkg");
const WEB = path.resolve(ROOT, process.env.JIKJI_E2E_WEB || "web");
const log = (...a) => console.error(...a);

const BUNDLE = e2eBundle(ROOT);

describe("the page's origin limits, headers, test hook and integrity checks", { timeout: 300_000 }, () => {
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

  test("every response carries the CSP and nosniff", async () => {
    const url = await serve(WEB, PKG);
    const entry = JSON.parse(readFileSync(path.join(BUNDLE, "jikji.json"), "utf8"));
    for (const p of ["/", "/app.js", "/worker.js", "/pkg/jikji_engine_bg.wasm", "/pkg/integrity.json", "/bundle/jikji.json", `/bundle/p/${entry.pages.columns}`, "/nothing"]) {
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
});

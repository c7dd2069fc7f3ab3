// The npm package jikji-web as another site installs it: scripts/pack-web makes the tarball,
// a plain static site in a temp folder outside this repository installs it with npm (offline:
// a local tarball needs no registry), a copy of the e2e bundle is put beside it, and a small
// node static server serves the folder as it is (nothing is built). In Chromium the site's own
// page searches through the documented API only (import from the package; Jikji.load, search
// with filters, minScore, fusion, dense through the package's query model). The package's
// jikji.d.ts is type-checked with tsc --noEmit on a TypeScript file using the API, including
// misuses the types must refuse. The package's service worker, copied next to the site's page
// and registered with the documented registerOffline(), makes the site work offline after a
// first visit, and a second visit takes none of the package's files from the server (the
// server's own request log).
//
// Run: tests/e2e/run.sh (or node --test tests/e2e/package.test.mjs). Needs pkg/ (scripts/build-wasm;
// scripts/pack-web runs it when pkg/ is missing), a bundle with query-model pages
// (JIKJI_E2E_BUNDLE, as browser.test.mjs), Chromium (CHROMIUM_PATH) and npm.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { cpSync, existsSync, readFileSync, readdirSync, writeFileSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, e2eBundle } from "./harness.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const TSC = path.join(HERE, "node_modules/typescript/bin/tsc");
const log = (...a) => console.error(...a);

const BUNDLE = e2eBundle(ROOT);

/** The policy the package's README asks a site for, sent on every response. */
const SITE_CSP = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; connect-src 'self'; object-src 'none'";

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".json": "application/json",
  ".wasm": "application/wasm",
  ".css": "text/css",
};

/** Requests the site's server answered: {path, status}. */
const served = [];

/** A plain static file server of `root` on 127.0.0.1 (no index magic beyond "/" → index.html). */
function staticServer(root) {
  const server = createServer(async (req, res) => {
    res.on("finish", () => served.push({ path: new URL(req.url, "http://x").pathname, status: res.statusCode }));
    const rel = decodeURIComponent(new URL(req.url, "http://x").pathname);
    const file = path.join(root, rel === "/" ? "index.html" : rel);
    if (!file.startsWith(root + path.sep)) {
      res.writeHead(400).end();
      return;
    }
    try {
      const body = await readFile(file);
      res.writeHead(200, {
        "content-type": TYPES[path.extname(file)] || "application/octet-stream",
        "content-security-policy": SITE_CSP,
        "x-content-type-options": "nosniff",
      });
      res.end(body);
    } catch {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found\n");
    }
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

/** The site's page: imports the installed package, searches, writes what it found. */
const INDEX_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>A site with search</title>
<script type="module" src="./search.js"></script></head>
<body><ol id="hits"></ol><p id="state">loading</p></body></html>
`;
const SEARCH_JS = `import { Jikji } from "./node_modules/jikji-web/jikji.js";
const state = document.getElementById("state");
try {
  const jikji = await Jikji.load("./bundle/");
  const r = await jikji.search("學而時習之", { mode: "bm25", topK: 5 });
  for (const h of r.hits) {
    const li = document.createElement("li");
    li.textContent = h.source;
    document.getElementById("hits").append(li);
  }
  window.site = { jikji };
  state.textContent = "done";
} catch (e) {
  state.textContent = "error: " + e.message;
}
`;

/** A page of the site that works offline: the package's sw.js copied beside it, registerOffline(). */
const OFFLINE_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>A site that works offline</title>
<script type="module" src="./offline.js"></script></head>
<body><ol id="hits"></ol><p id="state">loading</p></body></html>
`;
const OFFLINE_JS = `import { Jikji, registerOffline } from "./node_modules/jikji-web/jikji.js";
const state = document.getElementById("state");
try {
  const jikji = await Jikji.load("./bundle/");
  const r = await jikji.search("學而時習之", { mode: "bm25", topK: 5 });
  for (const h of r.hits) {
    const li = document.createElement("li");
    li.textContent = h.id;
    document.getElementById("hits").append(li);
  }
  await registerOffline("./sw.js", { bundle: "./bundle/" });
  state.textContent = "done";
} catch (e) {
  state.textContent = "error: " + e.message;
}
`;

/** A page of the site using the component only: <jikji-search> from the package, its default styles. */
const COMPONENT_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>A site with the component</title>
<link rel="stylesheet" href="./site.css">
<script type="module" src="./component.js"></script></head>
<body><jikji-search bundle="bundle/" mode="bm25" model="none" top-k="5"></jikji-search></body></html>
`;
const COMPONENT_JS = `import "./node_modules/jikji-web/jikji-search.js";
`;
/** The site's theme: one custom property on an ancestor of the element. */
const SITE_CSS = `body { --jikji-accent: rgb(0, 90, 0); }
`;

/** Uses the API as a TypeScript site would; each misuse must be refused by the types. */
const CHECK_TS = `import { Jikji, JikjiError, checkOrigin, registerOffline } from "jikji-web";
import type { Hit, SearchResult, ProgressEvent, Filters, LoadOptions, Facets } from "jikji-web";
import type { JikjiSearchElement, JikjiStateDetail } from "jikji-web/search";

const onProgress = (e: ProgressEvent): void => {
  if (e.phase === "query") console.log(e.rounds, e.requests);
  if (e.phase === "ready") console.log(e.model);
};
const options: LoadOptions = { onProgress, engineUrl: "/engine/", allowedOrigins: ["https://cdn.example"], integrity: "integrity.json" };

async function main(): Promise<number> {
  const j: Jikji = await Jikji.load("/bundle/", options);
  const filters: Filters = { tier: [0, 2], lang: ["ko", "en"], folder: "1. 漢文 古典" };
  const r: SearchResult = await j.search("query", { mode: "hybrid", topK: 5, minScore: 0.3, fusion: "weighted:0.4", filters, includeArchived: true });
  const first: Hit | undefined = r.hits[0];
  const tier: number | null = first ? first.tier : null;
  const words: string = first ? first.heading_path.join(" / ") + first.text : "";
  await j.loadModel();
  const stats = await j.cacheStats();
  j.close();
  try {
    checkOrigin("https://other.example/");
  } catch (e) {
    if (e instanceof JikjiError && (e.code === "origin" || e.code === "integrity")) return 1;
  }
  return (tier ?? 0) + words.length + r.stats.rounds + (stats.engine?.pages ?? 0) + (j.hasModel ? 1 : 0);
}

async function misuses(j: Jikji): Promise<void> {
  // @ts-expect-error: not a mode
  await j.search("q", { mode: "fuzzy" });
  // @ts-expect-error: not a fusion
  await j.search("q", { fusion: "max" });
  // @ts-expect-error: topK is a number
  await j.search("q", { topK: "5" });
  // @ts-expect-error: no such filter
  await j.search("q", { filters: { author: "x" } });
  const r = await j.search("q");
  // @ts-expect-error: hits are typed, not any
  const n: string = r.hits[0].rank;
  // @ts-expect-error: no such option
  await Jikji.load("/b/", { engine: "/e/" });
  void n;
}
async function component(): Promise<string> {
  const box: JikjiSearchElement | null = document.querySelector("jikji-search");
  if (!box) return "";
  box.addEventListener("jikji-state", (e) => {
    const d: JikjiStateDetail = e.detail;
    console.log(d.state, d.model);
  });
  await box.search("學而", "bm25");
  // @ts-expect-error: not a mode of the element either
  await box.search("q", "fuzzy");
  const f: Facets | undefined = await box.jikji?.facets();
  const snippet = box.jikji ? (await box.jikji.search("q")).hits[0]?.snippet?.parts.join("") : "";
  return (f?.langs[0]?.[0] ?? "") + (snippet ?? "") + box.mode;
}
async function offline(): Promise<string> {
  const reg: ServiceWorkerRegistration = await registerOffline("/sw.js", { scope: "/", bundle: ["/bundle/"] });
  // @ts-expect-error: no such option
  await registerOffline("/sw.js", { cache: "x" });
  return reg.scope;
}
void main;
void offline;
void misuses;
void component;
`;

describe("the jikji-web package installed into another site", { timeout: 600_000 }, () => {
  let work;
  let site;
  let server;
  let url;
  let context;
  let profile;
  let tgz;

  before(async () => {
    for (const [what, p] of [
      ["Chromium (CHROMIUM_PATH)", CHROMIUM],
      ["the bundle (JIKJI_E2E_BUNDLE)", path.join(BUNDLE, "jikji.json")],
      ["typescript (cd tests/e2e && npm ci)", TSC],
    ]) {
      if (!existsSync(p)) throw new Error(`${what} not found: ${p}`);
    }
    work = await mkdtemp(path.join(tmpdir(), "jikji-package-test-"));
    assert.ok(!path.resolve(work).startsWith(ROOT + path.sep), "the site must be outside the repository");
    const pack = spawnSync(path.join(ROOT, "scripts/pack-web"), [path.join(work, "out")], { cwd: ROOT, encoding: "utf8" });
    if (pack.status !== 0) throw new Error(`scripts/pack-web failed:\n${pack.stderr}`);
    tgz = pack.stdout.trim().split("\n").pop();
    log(`[package] ${tgz}`);
    site = path.join(work, "site");
    cpSync(path.join(BUNDLE), path.join(site, "bundle"), { recursive: true });
    writeFileSync(path.join(site, "package.json"), JSON.stringify({ name: "a-site", private: true, version: "1.0.0", type: "module" }));
    const npm = spawnSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", tgz], {
      cwd: site,
      encoding: "utf8",
    });
    if (npm.status !== 0) throw new Error(`npm install of the tarball failed:\n${npm.stderr}`);
    writeFileSync(path.join(site, "index.html"), INDEX_HTML);
    writeFileSync(path.join(site, "search.js"), SEARCH_JS);
    writeFileSync(path.join(site, "component.html"), COMPONENT_HTML);
    writeFileSync(path.join(site, "component.js"), COMPONENT_JS);
    writeFileSync(path.join(site, "site.css"), SITE_CSS);
    writeFileSync(path.join(site, "offline.html"), OFFLINE_HTML);
    writeFileSync(path.join(site, "offline.js"), OFFLINE_JS);
    // The documented step: the package's service worker next to the page that registers it.
    cpSync(path.join(site, "node_modules/jikji-web/sw.js"), path.join(site, "sw.js"));
    server = await staticServer(site);
    url = `http://127.0.0.1:${server.address().port}`;
    profile = await mkdtemp(path.join(tmpdir(), "jikji-package-test-chromium-"));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  });

  after(async () => {
    await context?.close().catch(() => {});
    server?.close();
    for (const d of [profile, work]) if (d) await rm(d, { recursive: true, force: true }).catch(() => {});
  });

  test("the tarball holds the API, its types, the worker and both wasm modules with their hashes", () => {
    const pkg = path.join(site, "node_modules/jikji-web");
    const manifest = JSON.parse(readFileSync(path.join(pkg, "package.json"), "utf8"));
    assert.equal(manifest.type, "module");
    assert.equal(manifest.exports["."].types, "./jikji.d.ts");
    assert.equal(manifest.exports["."].default, "./jikji.js");
    for (const f of [
      "jikji.js",
      "jikji.d.ts",
      "worker.js",
      "engine/jikji_engine_bg.wasm",
      "engine/dense/jikji_engine.js",
      "engine/dense/jikji_engine_bg.wasm",
      "engine/qmodel/jikji_query_model_wasm.js",
      "engine/qmodel/jikji_query_model_wasm_bg.wasm",
      "engine/integrity.json",
      "jikji-search.js",
      "jikji-search.d.ts",
      "jikji-search.css",
      "sw.js",
    ]) {
      assert.ok(existsSync(path.join(pkg, f)), `${f} missing from the package`);
    }
    assert.equal(manifest.exports["./sw.js"], "./sw.js");
    // sw.js is web/sw-src.js stamped with the package's own files and their hashes.
    const sw = readFileSync(path.join(pkg, "sw.js"), "utf8");
    assert.match(sw, /^const BUILD = "[0-9a-f]{16}";$/m);
    for (const f of ["jikji.js", "worker.js", "engine/jikji_engine_bg.wasm", "engine/integrity.json"]) {
      assert.ok(sw.includes(`[${JSON.stringify(f)}, "sha256-`), `${f} not in sw.js's PRECACHE`);
    }
    // The same code as the page's, not a second copy that could drift.
    assert.equal(manifest.exports["./search"].default, "./jikji-search.js");
    assert.equal(manifest.exports["./search"].types, "./jikji-search.d.ts");
    // The page's files as scripts/build-js builds them from web/ (pack-web runs it first).
    for (const f of ["jikji.js", "jikji-search.js", "jikji-search.css", "worker.js"]) {
      assert.equal(readFileSync(path.join(pkg, f), "utf8"), readFileSync(path.join(ROOT, "pkg/web", f), "utf8"), f);
    }
    // Bundled: the worker carries pages.js and the BM25 engine's glue, so neither is a file of the package.
    for (const f of ["pages.js", "engine/jikji_engine.js"]) assert.ok(!existsSync(path.join(pkg, f)), `${f} shipped besides the bundled worker`);
    assert.doesNotMatch(readFileSync(path.join(pkg, "worker.js"), "utf8"), /\bimport\s*[{*\w][^;]*?from\s*"/, "worker.js still imports a module");
    assert.match(readFileSync(path.join(pkg, "jikji-search.js"), "utf8"), /from\s*"\.\/jikji\.js"/, "jikji-search.js imports the package's jikji.js");
  });

  test("the site searches the bundle with the documented API, filters included", async () => {
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    await page.goto(`${url}/`);
    await page.waitForFunction(() => document.getElementById("state").textContent !== "loading", null, { timeout: 120_000 });
    assert.equal(await page.textContent("#state"), "done", errors.join("\n"));
    const sources = await page.$$eval("#hits li", (lis) => lis.map((l) => l.textContent));
    assert.equal(sources.length, 5);
    assert.ok(sources[0].startsWith("1. 漢文 古典/"), sources.join(", "));

    const r = await page.evaluate(async () => {
      const j = window.site.jikji;
      const q = "子曰 장인님";
      const folder = async (folder) => (await j.search(q, { mode: "bm25", topK: 5, filters: { folder } })).hits;
      const plain = (await j.search(q, { mode: "bm25", topK: 5 })).hits;
      const han = await folder("1. 漢文 古典");
      const online = await folder("99. 온라인 자료 (정리 X)");
      const tier = (await j.search(q, { mode: "bm25", topK: 5, filters: { tier: [90, 99] } })).hits;
      const ko = (await j.search("메밀꽃", { mode: "bm25", topK: 3, filters: { lang: "ko" } })).hits;
      const none = (await j.search(q, { mode: "bm25", topK: 5, filters: { folder: "99. 온라인" } })).hits;
      const strict = (await j.search(q, { mode: "bm25", topK: 5, minScore: 0.999 })).hits;
      const modelBefore = j.modelLoaded;
      // An empty query is refused before any model byte (dense and hybrid answered it with
      // the empty string's embedding natively: empty_query_gave_hits).
      const empty = await Promise.all(["bm25", "dense", "hybrid"].map((mode) =>
        j.search("  ", { mode }).then((x) => `resolved with ${x.hits.length} hits`, (e) => `${e.name}: ${e.message}`)));
      const modelAfterEmpty = j.modelLoaded;
      const hybrid = await j.search("the prince of Denmark", { mode: "hybrid", topK: 3, fusion: "rrf" });
      const pick = (hs) => hs.map((h) => ({ source: h.source, tier: h.tier, lang: h.lang, score: h.score }));
      return {
        plain: pick(plain),
        han: pick(han),
        online: pick(online),
        tier: pick(tier),
        ko: pick(ko),
        none: none.length,
        strict: pick(strict),
        hybrid: { mode: hybrid.mode, fusion: hybrid.fusion, hits: pick(hybrid.hits), model: hybrid.stats.model },
        modelLoaded: j.modelLoaded,
        empty,
        modelBefore,
        modelAfterEmpty,
      };
    });
    assert.deepEqual(r.empty, Array(3).fill("TypeError: the query is empty: give words to search for"));
    assert.equal(r.modelAfterEmpty, r.modelBefore, "an empty query loaded the model");
    log(`[package] unfiltered: ${r.plain.map((h) => h.source).join(", ")}`);
    assert.equal(r.han.length, 5);
    assert.ok(r.han.every((h) => h.source.startsWith("1. 漢文 古典/")), JSON.stringify(r.han));
    assert.equal(r.online.length, 5);
    assert.ok(r.online.every((h) => h.source.startsWith("99. 온라인 자료 (정리 X)/")), JSON.stringify(r.online));
    assert.equal(r.tier.length, 5);
    assert.ok(r.tier.every((h) => h.tier === 99), JSON.stringify(r.tier));
    assert.equal(r.ko.length, 3);
    assert.ok(r.ko.every((h) => h.lang === "ko"), JSON.stringify(r.ko));
    assert.equal(r.none, 0, "folders match whole path components");
    assert.ok(r.strict.every((h) => h.score >= 0.999), JSON.stringify(r.strict));
    assert.ok(r.strict.length < r.plain.length, "minScore dropped nothing");
    assert.equal(r.hybrid.mode, "hybrid");
    assert.deepEqual(r.hybrid.fusion, { fusion: "rrf" });
    assert.equal(r.hybrid.hits.length, 3);
    assert.ok(r.modelLoaded, "the package's query model was loaded");
    assert.ok(r.hybrid.model, "the hybrid query embedded through the package's query model");
    await page.close();
  });

  test("the site's <jikji-search> searches with the package's styles, themed by a custom property", async () => {
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(`${url}/component.html`);
    await page.waitForFunction(() => document.querySelector("jikji-search")?.dataset.state === "bm25-ready", null, { timeout: 120_000 });
    await page.fill("jikji-search input[type=search]", "學而時習之");
    await page.press("jikji-search input[type=search]", "Enter");
    await page.waitForFunction(() => document.querySelector("jikji-search [role=listbox]")?.dataset.status === "done", null, { timeout: 60_000 });
    const r = await page.evaluate(() => {
      const list = document.querySelector("jikji-search [role=listbox]");
      const first = list.querySelector("li");
      const mode = document.querySelector("jikji-search .jk-modes input:checked + span");
      return {
        count: list.dataset.count,
        title: first.querySelector(".hit-title .source").textContent,
        marks: [...first.querySelectorAll(".hit-snippet mark")].map((m) => m.textContent),
        accent: getComputedStyle(mode).backgroundColor,
        ids: [...document.querySelectorAll("jikji-search [id]")].every((e) => e.id.startsWith("jikji-1-")),
        stylesheet: [...document.querySelectorAll('link[rel="stylesheet"]')].map((l) => new URL(l.href).pathname),
      };
    });
    log(`[package] component: ${JSON.stringify(r)}`);
    assert.equal(r.count, "5");
    assert.equal(r.title, "Lunyu");
    assert.ok(r.marks.includes("學而時習之"), JSON.stringify(r.marks));
    assert.deepEqual(r.stylesheet, ["/site.css", "/node_modules/jikji-web/jikji-search.css"]);
    assert.equal(r.accent, "rgb(0, 90, 0)", "the --jikji-accent of the site");
    assert.ok(r.ids, "inner ids are prefixed per instance");
    assert.deepEqual(errors, []);
    await page.close();
  });

  test("offline: registerOffline() with the package's sw.js; a second visit takes no package file from the server", async () => {
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(e.message));
    const visit = async () => {
      await page.goto(`${url}/offline.html`);
      await page.waitForFunction(() => document.getElementById("state").textContent !== "loading", null, { timeout: 120_000 });
      assert.equal(await page.textContent("#state"), "done", errors.join("\n"));
      return page.$$eval("#hits li", (lis) => lis.map((l) => l.textContent));
    };
    const first = await visit();
    assert.equal(first.length, 5);
    const kept = await page.evaluate(async () => {
      const names = await caches.keys();
      const shell = names.find((n) => n.startsWith("jikji-shell-"));
      return { names, shell: shell ? (await (await caches.open(shell)).keys()).map((r) => new URL(r.url).pathname) : [] };
    });
    log(`[package] offline caches: ${JSON.stringify(kept)}`);
    assert.ok(kept.shell.includes("/node_modules/jikji-web/engine/jikji_engine_bg.wasm"), JSON.stringify(kept));
    assert.ok(kept.shell.includes("/node_modules/jikji-web/worker.js"), JSON.stringify(kept));
    // Second visit: the package's files come from Cache Storage, not from the server.
    const from = served.length;
    assert.deepEqual(await visit(), first);
    await page.waitForTimeout(1500);
    const second = served.slice(from);
    log(`[package] second visit, from the server: ${second.map((r) => `${r.path} ${r.status}`).join(", ")}`);
    assert.deepEqual(second.filter((r) => r.path.startsWith("/node_modules/")), [], "package files fetched again");
    assert.ok(second.some((r) => r.path === "/bundle/jikji.json"), "the entry is network first");
    // Offline: the site's page (kept as it was used) and the package's files still answer.
    await context.setOffline(true);
    try {
      assert.deepEqual(await visit(), first);
    } finally {
      await context.setOffline(false);
    }
    assert.deepEqual(errors, []);
    await page.close();
  });

  test("jikji.d.ts type-checks a TypeScript site using the API and refuses misuses", () => {
    writeFileSync(path.join(site, "check.ts"), CHECK_TS);
    writeFileSync(
      path.join(site, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: { target: "es2022", module: "nodenext", moduleResolution: "nodenext", strict: true, noEmit: true, lib: ["es2022", "dom"], types: [] },
        files: ["check.ts"],
      }),
    );
    const tsc = spawnSync(process.execPath, [TSC, "--noEmit", "-p", site], { cwd: site, encoding: "utf8" });
    assert.equal(tsc.status, 0, `tsc --noEmit failed:\n${tsc.stdout}${tsc.stderr}`);
    // And a broken use is an error (the check is not vacuous).
    writeFileSync(path.join(site, "check.ts"), CHECK_TS.replace("// @ts-expect-error: not a mode\n", ""));
    const bad = spawnSync(process.execPath, [TSC, "--noEmit", "-p", site], { cwd: site, encoding: "utf8" });
    assert.notEqual(bad.status, 0, "tsc accepted mode: \"fuzzy\"");
    assert.match(bad.stdout, /fuzzy/);
  });
});

#!/usr/bin/env node
// Query-latency benchmark of the wasm engine in headless Chromium (a script, not a test).
//
// Starts `jikji serve BUNDLE`, opens the search page, asks for the model once keyword search is
// ready and waits until it is loaded (body[data-state=ready]) and times `window.jikjiPage.jikji.search(q, {mode, topK})` for every
// query in bm25, dense and hybrid mode: one warm-up call per query, then --reps timed calls.
// Times are taken with performance.now() in the page, around the awaited call, so they include
// the postMessage round trip to the search worker and the JSON parse of the result; dense and
// hybrid also include embedding the query with the model in wasm.
//
// Run (from the repository root; needs tests/e2e/node_modules: see run.sh):
//   node tests/e2e/bench.mjs --bundle DIR [--queries FILE] [--reps N] [--top-k K]
//        [--bin PATH] [--model DIR] [--web DIR] [--pkg DIR] [--json FILE] [--ready-timeout SEC]
//
// Options (environment variable in brackets; option wins):
//   --bundle DIR        bundle folder, required                    [JIKJI_BENCH_BUNDLE]
//   --queries FILE      one query per line; blank lines and lines starting with # are skipped
//                       (default tests/bench/queries.txt)           [JIKJI_BENCH_QUERIES]
//   --reps N            timed calls per query and mode (default 5)  [JIKJI_BENCH_REPS]
//   --top-k K           hits per search (default 10)               [JIKJI_BENCH_TOP_K]
//   --bin PATH          jikji binary (default target/release/jikji) [JIKJI_BIN]
//   --model DIR         model folder (default models/e5-small)      [JIKJI_BENCH_MODEL]
//   --web DIR           page folder (default pkg/web: scripts/build-js) [JIKJI_BENCH_WEB]
//   --pkg DIR           wasm-pack output (default pkg)              [JIKJI_BENCH_PKG]
//   --json FILE         also write the figures as JSON              [JIKJI_BENCH_JSON]
//   --ready-timeout SEC how long to wait for the model (default 600) [JIKJI_BENCH_READY_S]
//   CHROMIUM_PATH       browser (default /usr/bin/chromium)
// Paths given as options or variables are relative to the current directory; the defaults are
// relative to the repository root.
//
// Output: a table on stdout (progress and server/browser messages on stderr); with --json:
//   {"engine": "wasm (Chromium <version>)", "model_ready_ms": ..., "modes": {"bm25": {"median_ms": ..,
//    "p95_ms": .., "min_ms": .., "max_ms": .., "mean_ms": .., "count": ..}, "dense": {...}, "hybrid": {...}}, ...}
// Exit status: 0 on success, 1 on any failure (with a message on stderr; JIKJI_BENCH_DEBUG=1 adds the
// stack), 2 on bad arguments.

import { existsSync, readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, hookedWeb, startServer } from "./harness.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const MODES = ["bm25", "dense", "hybrid"];
const SEARCH_TIMEOUT_MS = 120_000; // one search call
const log = (...a) => console.error(...a);

class UsageError extends Error {}

// ---------------------------------------------------------------- options

function parseOptions(argv) {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        bundle: { type: "string" },
        queries: { type: "string" },
        reps: { type: "string" },
        "top-k": { type: "string" },
        bin: { type: "string" },
        model: { type: "string" },
        web: { type: "string" },
        pkg: { type: "string" },
        json: { type: "string" },
        "ready-timeout": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    throw new UsageError(e.message);
  }
  if (values.help) return null;
  const env = process.env;
  // Given paths: relative to the current directory; defaults: relative to the repository root.
  const given = (opt, envName) => {
    const v = values[opt] ?? env[envName];
    return v ? path.resolve(process.cwd(), v) : null;
  };
  const positiveInt = (opt, envName, dflt) => {
    const raw = values[opt] ?? env[envName];
    if (raw == null || raw === "") return dflt;
    const n = Number(raw);
    if (!Number.isInteger(n) || n < 1) throw new UsageError(`--${opt} must be a positive integer, got ${JSON.stringify(raw)}`);
    return n;
  };
  const bundle = given("bundle", "JIKJI_BENCH_BUNDLE");
  if (!bundle) throw new UsageError("--bundle DIR is required");
  return {
    bundle,
    queries: given("queries", "JIKJI_BENCH_QUERIES") ?? path.join(ROOT, "tests/bench/queries.txt"),
    reps: positiveInt("reps", "JIKJI_BENCH_REPS", 5),
    topK: positiveInt("top-k", "JIKJI_BENCH_TOP_K", 10),
    bin: given("bin", "JIKJI_BIN") ?? path.join(ROOT, "target/release/jikji"),
    model: given("model", "JIKJI_BENCH_MODEL") ?? path.join(ROOT, "models/e5-small"),
    web: given("web", "JIKJI_BENCH_WEB") ?? path.join(ROOT, "pkg/web"),
    pkg: given("pkg", "JIKJI_BENCH_PKG") ?? path.join(ROOT, "pkg"),
    json: given("json", "JIKJI_BENCH_JSON"),
    readyMs: 1000 * positiveInt("ready-timeout", "JIKJI_BENCH_READY_S", 600),
    chromium: env.CHROMIUM_PATH || "/usr/bin/chromium",
  };
}

function usage() {
  const text = readFileSync(fileURLToPath(import.meta.url), "utf8");
  const header = text.split("\n").slice(1).filter((l) => l.startsWith("//"));
  const end = header.findIndex((l) => l.startsWith("// stack)"));
  return header.slice(0, end + 1).map((l) => l.replace(/^\/\/ ?/, "")).join("\n");
}

function readQueries(file) {
  if (!existsSync(file)) throw new Error(`queries file ${file} not found (--queries FILE)`);
  const queries = readFileSync(file, "utf8")
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  if (!queries.length) throw new Error(`queries file ${file} holds no queries`);
  return queries;
}

function preflight(o) {
  const missing = [];
  if (!existsSync(o.bin)) missing.push(`jikji binary ${o.bin} (cargo build --release -p jikji-builder, or --bin)`);
  let manifestHasModel = false;
  let queryModelPages = false;
  if (!existsSync(path.join(o.bundle, "jikji.json"))) missing.push(`format v2 bundle ${o.bundle}/jikji.json`);
  else {
    let manifest;
    try {
      manifest = JSON.parse(readFileSync(path.join(o.bundle, "jikji.json"), "utf8"));
    } catch (e) {
      missing.push(`a readable ${o.bundle}/jikji.json (${e.message})`);
    }
    if (manifest && !manifest.model)
      missing.push(`a bundle with vectors: ${o.bundle} declares no model, so dense/hybrid cannot run`);
    manifestHasModel = Boolean(manifest?.model);
    queryModelPages = Boolean(manifest?.pages?.query_model);
  }
  if (!existsSync(path.join(o.pkg, "jikji_engine.js")) || !existsSync(path.join(o.pkg, "jikji_engine_bg.wasm")))
    missing.push(
      `${o.pkg}/jikji_engine.js and jikji_engine_bg.wasm (scripts/build-wasm)`,
    );
  if (
    !existsSync(path.join(o.pkg, "qmodel/jikji_query_model_wasm.js")) ||
    !existsSync(path.join(o.pkg, "qmodel/jikji_query_model_wasm_bg.wasm"))
  )
    missing.push(
      `${o.pkg}/qmodel/jikji_query_model_wasm.js and jikji_query_model_wasm_bg.wasm (scripts/build-wasm)`,
    );
  // The page embeds queries with the bundle's query-model pages (jikji build writes them when
  // the pack models/e5-small-pack is there: jikji model-pack).
  if (manifestHasModel && !queryModelPages)
    missing.push(`query-model pages in ${o.bundle}/jikji.json (pages.query_model: build with the pack, jikji model-pack)`);
  if (!existsSync(path.join(o.web, "index.html"))) missing.push(`${o.web}/index.html (--web DIR)`);
  if (!existsSync(o.chromium)) missing.push(`Chromium at ${o.chromium} (apt-get install -y chromium, or set CHROMIUM_PATH)`);
  if (missing.length) throw new Error(`prerequisites missing:\n  - ${missing.join("\n  - ")}`);
}

// ---------------------------------------------------------------- server and browser

/** Start `jikji serve` on a free port (as browser.test.mjs does); resolves {url, proc}. */

function forwardConsole(page, pageErrors) {
  page.on("console", (m) => {
    if (m.type() === "error" || m.type() === "warning") {
      const where = m.worker() ? " (worker)" : "";
      log(`[browser ${m.type()}${where}] ${m.text()}`);
    }
  });
  page.on("pageerror", (e) => {
    log(`[browser pageerror] ${e.stack || e.message}`);
    pageErrors.push(e);
  });
  page.on("requestfailed", (r) => log(`[browser request failed] ${r.url()}: ${r.failure()?.errorText}`));
  page.on("response", (r) => {
    if (r.status() >= 400) log(`[browser HTTP ${r.status()}] ${r.url()}`);
  });
}

/** Installed before the page's scripts run: records performance.now() at every data-state change. */
function recordStates() {
  window.__jikjiBenchStates = [];
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.target === document.body && r.attributeName === "data-state") {
        window.__jikjiBenchStates.push({ state: document.body.dataset.state, t: performance.now() });
      }
    }
  }).observe(document, { subtree: true, attributes: true, attributeFilter: ["data-state"] });
}

async function waitForReady(page, timeout) {
  try {
    await page.waitForFunction(
      () => document.body && ["ready", "error"].includes(document.body.dataset.state),
      null,
      { timeout, polling: 100 },
    );
  } catch {
    const st = await page
      .evaluate(() => ({
        state: document.body?.dataset.state,
        status: document.querySelector("#status")?.textContent,
        progress: document.querySelector("#progress-label")?.textContent,
      }))
      .catch(() => ({}));
    throw new Error(`page did not become ready within ${timeout / 1000} s: ${JSON.stringify(st)}`);
  }
  const state = await page.evaluate(() => document.body.dataset.state);
  if (state !== "ready") {
    const err = await page.textContent("#error").catch(() => "");
    throw new Error(`page went to state ${state} instead of ready: ${err}`);
  }
}

// ---------------------------------------------------------------- measuring

/** In the page: one warm-up call, then `reps` timed calls; returns {times, hits, mode}. */
async function timeQuery(page, query, mode, topK, reps) {
  return page.evaluate(
    async ({ query, mode, topK, reps, timeoutMs }) => {
      const jikji = window.jikjiPage?.jikji;
      if (!jikji) throw new Error("window.jikjiPage.jikji is not set");
      const call = () =>
        Promise.race([
          jikji.search(query, { mode, topK }),
          new Promise((_, reject) =>
            setTimeout(() => reject(new Error(`search took longer than ${timeoutMs} ms`)), timeoutMs),
          ),
        ]);
      const warm = await call();
      const times = [];
      for (let i = 0; i < reps; i++) {
        const t0 = performance.now();
        await call();
        times.push(performance.now() - t0);
      }
      return { times, hits: warm.hits.length, mode: warm.mode };
    },
    { query, mode, topK, reps, timeoutMs: SEARCH_TIMEOUT_MS },
  );
}

function summarize(times) {
  const s = [...times].sort((a, b) => a - b);
  const n = s.length;
  const median = n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
  const p95 = s[Math.min(n - 1, Math.ceil(0.95 * n) - 1)]; // nearest rank
  const mean = s.reduce((a, b) => a + b, 0) / n;
  const r = (x) => Math.round(x * 1000) / 1000;
  return { median_ms: r(median), p95_ms: r(p95), min_ms: r(s[0]), max_ms: r(s[n - 1]), mean_ms: r(mean), count: n };
}

function table(rows, headers) {
  const cells = [headers, ...rows.map((r) => r.map(String))];
  const widths = headers.map((_, i) => Math.max(...cells.map((c) => c[i].length)));
  const line = (c) => c.map((x, i) => (i === 0 ? x.padEnd(widths[i]) : x.padStart(widths[i]))).join("  ");
  return [line(headers), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map((r) => line(r.map(String)))].join("\n");
}

// ---------------------------------------------------------------- main

async function main() {
  let o;
  try {
    o = parseOptions(process.argv.slice(2));
  } catch (e) {
    if (e instanceof UsageError) {
      log(`bench: ${e.message} (see --help)`);
      return 2;
    }
    throw e;
  }
  if (!o) {
    console.log(usage());
    return 0;
  }
  preflight(o);
  const queries = readQueries(o.queries);

  let server = null;
  let context = null;
  let profileDir = null;
  // If the process is killed or exits early, still stop the server (synchronously, on exit).
  const killServer = () => {
    if (server && server.exitCode === null && server.signalCode === null) server.kill();
  };
  process.on("exit", killServer);
  const onSignal = async (sig) => {
    log(`[bench] ${sig}: cleaning up`);
    await cleanup();
    process.exit(sig === "SIGINT" ? 130 : 143);
  };
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  let cleaning = null;
  // Idempotent; every caller waits for the same cleanup to finish.
  const cleanup = () => (cleaning ??= doCleanup());
  async function doCleanup() {
    if (context) await context.close().catch((e) => log(`[bench] closing the browser: ${e.message}`));
    if (profileDir) await rm(profileDir, { recursive: true, force: true }).catch(() => {});
    if (server && server.exitCode === null && server.signalCode === null) {
      const gone = new Promise((r) => server.once("exit", r));
      server.kill();
      await Promise.race([gone, new Promise((r) => setTimeout(r, 5000))]);
      if (server.exitCode === null && server.signalCode === null) server.kill("SIGKILL");
    }
  }

  try {
    const started = await startServer({ bin: o.bin, bundle: o.bundle, web: await hookedWeb(o.web, { offline: false }), pkg: o.pkg, model: o.model, cwd: ROOT, log, tag: "bench", track: (p) => (server = p) });
    log(`[bench] server at ${started.url}`);
    profileDir = await mkdtemp(path.join(tmpdir(), "jikji-bench-chromium-"));
    context = await chromium.launchPersistentContext(profileDir, {
      executablePath: o.chromium,
      headless: true,
      // Signals are handled here (close the browser, then stop the server), not by playwright.
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
      args: CHROMIUM_ARGS,
    });
    const page = context.pages()[0] ?? (await context.newPage());
    const pageErrors = [];
    forwardConsole(page, pageErrors);
    await page.addInitScript(recordStates);

    // The user agent string is reduced (156.0.0.0); ask the browser for its full version.
    let product = "";
    try {
      const cdp = await context.newCDPSession(page);
      product = (await cdp.send("Browser.getVersion")).product;
      await cdp.detach().catch(() => {});
    } catch {
      product = await page.evaluate(() => navigator.userAgent);
    }
    const version = /(?:HeadlessChrome|Chrome)\/([\d.]+)/.exec(product)?.[1] ?? "unknown version";
    const engine = `wasm (Chromium ${version})`;
    log(`[bench] ${engine}; ${queries.length} queries × ${o.reps} reps, top-k ${o.topK}`);

    // Model-ready time: navigation start of the page → body[data-state=ready] (page clock). The
    // page loads the model only when semantic search is first asked for: ask as soon as keyword
    // search is ready (data-state=bm25-ready), as a visitor choosing hybrid would.
    const wall0 = performance.now();
    await page.goto(`${started.url}/`);
    await page.waitForFunction(
      () => ["bm25-ready", "ready", "error"].includes(document.body?.dataset.state),
      null,
      { timeout: o.readyMs, polling: 100 },
    );
    await page.evaluate(() => window.jikjiPage.loadModel());
    await waitForReady(page, o.readyMs);
    const wallReady = performance.now() - wall0;
    const states = await page.evaluate(() => window.__jikjiBenchStates || []);
    const at = (s) => states.find((x) => x.state === s)?.t;
    const modelReadyMs = Math.round(at("ready") ?? wallReady);
    const bm25ReadyMs = at("bm25-ready") != null ? Math.round(at("bm25-ready")) : null;
    log(`[bench] model ready after ${modelReadyMs} ms (bundle/BM25 ready after ${bm25ReadyMs ?? "?"} ms)`);

    // Chromium coarsens performance.now() to 100 µs unless the page is cross-origin isolated (5 µs).
    const isolated = await page.evaluate(() => self.crossOriginIsolated === true);
    const resolution = isolated ? "5 µs (cross-origin isolated page)" : "0.1 ms (page not cross-origin isolated)";
    const load1 = os.loadavg()[0];

    const modes = {};
    const perQuery = {};
    for (const mode of MODES) {
      const all = [];
      perQuery[mode] = [];
      for (const q of queries) {
        const r = await timeQuery(page, q, mode, o.topK, o.reps);
        if (r.mode !== mode) throw new Error(`search "${q}" asked for ${mode} but the engine ran ${r.mode}`);
        all.push(...r.times);
        const s = summarize(r.times);
        perQuery[mode].push({ query: q, hits: r.hits, median_ms: s.median_ms, min_ms: s.min_ms, max_ms: s.max_ms });
        log(`[bench] ${mode.padEnd(6)} ${s.median_ms.toFixed(2).padStart(9)} ms  (${r.hits} hits)  ${q}`);
      }
      modes[mode] = summarize(all);
    }
    if (pageErrors.length) throw new Error(`uncaught errors in the page: ${pageErrors.map((e) => e.message).join("; ")}`);

    const f = (x) => x.toFixed(2);
    console.log(
      `\nJikji query latency: ${engine}\n` +
        `bundle ${o.bundle}, ${queries.length} queries from ${path.relative(process.cwd(), o.queries) || o.queries}, ` +
        `${o.reps} timed reps per query after 1 warm-up, top-k ${o.topK}\n` +
        `model ready (page navigation → data-state=ready): ${modelReadyMs} ms` +
        (bm25ReadyMs != null ? ` (bundle open, BM25 ready: ${bm25ReadyMs} ms)` : "") +
        "\n\n" +
        table(
          MODES.map((m) => [m, f(modes[m].median_ms), f(modes[m].p95_ms), f(modes[m].min_ms), f(modes[m].max_ms), modes[m].count]),
          ["mode", "median ms", "p95 ms", "min ms", "max ms", "calls"],
        ) +
        "\n\nTimes: performance.now() in the page around `await jikji.search(q, {mode, topK})`, i.e. including the\n" +
        "round trip to the search Web Worker and the JSON result; dense and hybrid include embedding the\n" +
        `query with the model in wasm. Timer resolution ${resolution}.\n` +
        `Host: ${os.cpus().length} CPUs, load average ${load1.toFixed(2)} (1 min) before the timed calls.`,
    );

    if (o.json) {
      const out = {
        engine,
        model_ready_ms: modelReadyMs,
        bm25_ready_ms: bm25ReadyMs,
        measured:
          "performance.now() in the page around await window.jikjiPage.jikji.search(q, {mode, topK}); " +
          "includes the Web Worker round trip; dense/hybrid include the query embedding in wasm",
        timer_resolution: resolution,
        host: { cpus: os.cpus().length, loadavg_1m: Math.round(load1 * 100) / 100 },
        bundle: o.bundle,
        queries: queries.length,
        reps: o.reps,
        warmup_per_query: 1,
        top_k: o.topK,
        modes,
        per_query: perQuery,
      };
      await writeFile(o.json, JSON.stringify(out, null, 2) + "\n");
      log(`[bench] wrote ${o.json}`);
    }
    return 0;
  } finally {
    await cleanup();
  }
}

main().then(
  (code) => process.exit(code),
  (e) => {
    log(`bench failed: ${process.env.JIKJI_BENCH_DEBUG ? e?.stack || e : e?.message || e}`);
    process.exit(1);
  },
);

// Phone bench: the search page in Chromium's mobile emulation (Pixel 7: 412×915 CSS px, DPR 2.625,
// touch, mobile user agent), CPU throttled 4× (CDP Emulation.setCPUThrottlingRate) on Lighthouse's
// mobile network profile as DevTools applies it ("slow 4G": 562.5 ms latency, 1.47 Mbit/s down,
// 675 kbit/s up; CDP Network.emulateNetworkConditions). A cold visit of a shareable URL
// (?q=…&mode=hybrid, empty browser profile) is timed from navigation start to the first BM25
// results and to the first hybrid results (after the query model's ~13 MB); a warm visit (same
// profile: HTTP cache and the model pages in Cache Storage) likewise. Prints one row per visit and
// query, and the same figures unthrottled (desktop, no CPU or network limit) in the same run as
// the reference, with their ratio.
//
// --sw on (default: the page as it ships, its service worker on: a warm visit takes the page and
// the engine from Cache Storage) or --sw off (HTTP cache only, the figures before issue 16's
// service worker). The throttling is applied to the page's target (its network and its dedicated
// worker's); fetches the service worker itself makes (its install's revalidations, and on a
// controlled visit the entry and the pages it passes on) are not throttled by CDP.
//
// usage: node tests/e2e/bench-phone.mjs [--queries JSON] [--sw on|off]
// Needs what browser.test.mjs needs (JIKJI_BIN, the e2e bundle with its query-model pages, pkg/, Chromium).

import { mkdtemp, rm } from "node:fs/promises";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, devices } from "playwright-core";
import { CHROMIUM_ARGS, builtWeb, e2eBundle, hookedWeb, startServer } from "./harness.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const BIN = path.resolve(ROOT, process.env.JIKJI_BIN || "target/release/jikji");
const BUNDLE = e2eBundle(ROOT);
const PKG = path.resolve(ROOT, process.env.JIKJI_E2E_PKG || "pkg");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const args = process.argv.slice(2);
const opt = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};
const QUERIES = JSON.parse(opt("--queries", '["學而時習之", "메밀꽃 필 무렵"]'));
const SW = opt("--sw", "on");
if (!["on", "off"].includes(SW)) throw new Error(`--sw ${SW}: expected on or off`);
const log = (...a) => console.error(...a);

/** Lighthouse's mobile throttling as DevTools applies it (lighthouse-core/config/constants.js). */
const SLOW_4G = { offline: false, latency: 562.5, downloadThroughput: (1474.56 * 1024) / 8, uploadThroughput: (675 * 1024) / 8 };

async function visit(context, url, { throttle }) {
  const page = await context.newPage();
  const cdp = await context.newCDPSession(page);
  if (throttle) {
    await cdp.send("Emulation.setCPUThrottlingRate", { rate: 4 });
    await cdp.send("Network.enable");
    await cdp.send("Network.emulateNetworkConditions", SLOW_4G);
  }
  await page.goto(url, { waitUntil: "commit" });
  const times = await page.evaluate(
    () =>
      new Promise((resolve, reject) => {
        const out = {};
        const timer = setTimeout(() => reject(new Error(`no hybrid results in 600 s: ${document.querySelector("#error")?.textContent}`)), 600_000);
        const check = () => {
          const r = document.querySelector("#results");
          if (document.body.dataset.state === "error") {
            clearTimeout(timer);
            reject(new Error(document.querySelector("#error")?.textContent));
            return;
          }
          if (r && r.dataset.status === "error" && !out.errors?.includes(r.dataset.query + r.dataset.mode)) {
            // A failed answer (a page that timed out, …): recorded; the page's next answer still counts.
            (out.errors ??= []).push(r.dataset.query + r.dataset.mode);
            (out.messages ??= []).push(document.querySelector("#error")?.textContent);
          }
          if (!r || r.dataset.status !== "done") return;
          const mode = r.dataset.mode;
          if (!(mode in out)) out[mode] = performance.now();
          if (mode === "hybrid") {
            clearTimeout(timer);
            resolve(out);
          }
        };
        new MutationObserver(check).observe(document.documentElement, { subtree: true, attributes: true, attributeFilter: ["data-status", "data-mode", "data-state"] });
        check();
      }),
  );
  await page.close();
  return times;
}

async function main() {
  for (const p of [BIN, CHROMIUM, path.join(PKG, "jikji_engine_bg.wasm"), path.join(BUNDLE, "jikji.json")]) {
    if (!existsSync(p)) throw new Error(`${p} not found`);
  }
  const web = await hookedWeb(builtWeb(ROOT), SW === "on" ? { pkg: PKG } : { offline: false });
  const server = await startServer({ bin: BIN, bundle: BUNDLE, web, pkg: PKG, model: path.join(ROOT, "models/e5-small"), cwd: ROOT, log: () => {}, tag: "bench-phone" });
  const browserArgs = { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS };
  const rows = [];
  try {
    for (const q of QUERIES) {
      const url = `${server.url}/?q=${encodeURIComponent(q)}&mode=hybrid`;
      for (const [setup, throttle, device] of [
        ["phone", true, devices["Pixel 7"]],
        ["desktop", false, {}],
      ]) {
        const profile = await mkdtemp(path.join(tmpdir(), "jikji-bench-phone-"));
        const context = await chromium.launchPersistentContext(profile, { ...browserArgs, ...device });
        try {
          for (const visitKind of ["cold", "warm"]) {
            const t = await visit(context, url, { throttle });
            const row = { query: q, setup, visit: visitKind, bm25_ms: Math.round(t.bm25 ?? NaN), hybrid_ms: Math.round(t.hybrid), errors: t.messages ?? [] };
            log(`[bench-phone] ${JSON.stringify(row)}`);
            rows.push(row);
          }
        } finally {
          await context.close();
          await rm(profile, { recursive: true, force: true });
        }
      }
    }
  } finally {
    server.proc.kill();
    await rm(web, { recursive: true, force: true });
  }
  console.log(`# service worker ${SW}`);
  console.log("query\tvisit\tphone BM25 ms\tdesktop BM25 ms\tratio\tphone hybrid ms\tdesktop hybrid ms\tratio");
  for (const q of QUERIES) {
    for (const v of ["cold", "warm"]) {
      const p = rows.find((r) => r.query === q && r.visit === v && r.setup === "phone");
      const d = rows.find((r) => r.query === q && r.visit === v && r.setup === "desktop");
      const ratio = (a, b) => (Number.isFinite(a) && Number.isFinite(b) && b > 0 ? (a / b).toFixed(1) : "-");
      console.log([q, v, p.bm25_ms, d.bm25_ms, ratio(p.bm25_ms, d.bm25_ms), p.hybrid_ms, d.hybrid_ms, ratio(p.hybrid_ms, d.hybrid_ms)].join("\t"));
      for (const r of [p, d]) for (const m of r.errors) console.log(`  ${r.setup} ${v}: an answer failed: ${m}`);
    }
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

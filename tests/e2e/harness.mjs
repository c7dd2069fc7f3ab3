// Shared by the browser test and the wasm bench: start `jikji serve`, launch Debian's Chromium.
import { spawn } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import path from "node:path";
import { createInterface } from "node:readline";

/**
 * The bundle folder the browser tests search: `$JIKJI_E2E_BUNDLE` (relative to `root`, the
 * repository), else the first folder of `root/bundles` (by name) holding a `jikji.json`, else
 * `root/target/e2e-bundle` (what scripts/test builds).
 */
export function e2eBundle(root) {
  if (process.env.JIKJI_E2E_BUNDLE) return path.resolve(root, process.env.JIKJI_E2E_BUNDLE);
  const dir = path.join(root, "bundles");
  const fallback = path.join(root, "target/e2e-bundle");
  if (!existsSync(dir)) return fallback;
  const found = readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(path.join(dir, d.name, "jikji.json")))
    .map((d) => d.name)
    .sort();
  return found.length ? path.join(dir, found[0]) : fallback;
}

/**
 * The page name of a bundle page URL (`…/bundle/p/<name>`, format v2), or null for any other
 * URL (the entry file `jikji.json`, the page's own files, the model).
 */
export function pageName(url) {
  const m = /\/bundle\/p\/([^/?#]+)$/.exec(new URL(url).pathname);
  return m ? decodeURIComponent(m[1]) : null;
}

/** Flags Chromium needs as root on these machines (closed network, no sandbox, fresh profile). */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/**
 * Start `BIN serve BUNDLE --addr 127.0.0.1:0 --web WEB --pkg PKG --model MODEL` in `cwd`; resolves
 * {url, proc, requests} once it prints `listening on http://ADDR`, rejects if it exits first or
 * stays silent for 120 s. `track(proc)` is called at once so callers can kill it on any error;
 * `log` gets the server's other output, each line prefixed `[server]`. With `logRequests` the
 * server runs with --log-requests and `requests` fills with every request it answered, in order:
 * {method, path (without query), target (with it), status}: the server's view, which a service
 * worker or the browser's caches cannot hide.
 */
export function startServer({ bin, bundle, web, pkg, model, cwd, log, tag = "e2e", track = () => {}, logRequests = false }) {
  const args = ["serve", bundle, "--addr", "127.0.0.1:0", "--web", web, "--pkg", pkg, "--model", model];
  if (logRequests) args.push("--log-requests");
  log(`[${tag}] ${bin} ${args.join(" ")}`);
  const proc = spawn(bin, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
  track(proc);
  const requests = [];
  createInterface({ input: proc.stderr }).on("line", (l) => {
    const m = logRequests && /^request (\S+) (\S+) (\d{3})$/.exec(l);
    if (m) requests.push({ method: m[1], target: m[2], path: m[2].split("?")[0], status: Number(m[3]) });
    else log(`[server] ${l}`);
  });
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill();
      reject(new Error("jikji serve did not print 'listening on http://...' within 120 s"));
    }, 120_000);
    createInterface({ input: proc.stdout }).on("line", (line) => {
      const m = /listening on (https?:\/\/\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1].replace(/\/$/, ""), proc, requests });
      } else {
        log(`[server] ${line}`);
      }
    });
    proc.on("error", (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot start ${bin}: ${e.message}`));
    });
    proc.on("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`jikji serve exited early (code ${code}, signal ${signal})`));
    });
  });
}

/**
 * The page's test hook, which the shipped page does not have: appended to the built app.js
 * (scripts/build-js's bundle, minified: its own names are not ours to use) as the tests serve it
 * (`search`, in a block of its own, is the page's <jikji-search> element; these are its public
 * methods).
 */
const TEST_HOOK = `
{
  const search = document.querySelector("jikji-search");
  window.jikjiPage = {
    render: (result) => search.showResult(result),
    loadModel: () => search.loadModel({ consent: true }),
    get jikji() {
      return search.jikji;
    },
  };
}
`;

/**
 * The page's folder as served: scripts/build-js's output (bundled, minified) from the sources in
 * web/, or JIKJI_E2E_WEB. Never web/ itself: its worker imports the engine glue by a path only
 * the build resolves.
 */
export function builtWeb(root) {
  return path.resolve(root, process.env.JIKJI_E2E_WEB || "pkg/web");
}

/**
 * A copy of the page folder `web` (builtWeb) in a new temp folder whose app.js has TEST_HOOK appended, to
 * serve instead of `web`: tests reach the page's Jikji instance and renderer as
 * `window.jikjiPage` (the shipped page exposes nothing). With `offline` (the default, as the page
 * ships) its service worker sw.js is stamped anew for the copy's files and `pkg`
 * (scripts/stamp-sw page: the build's files and hashes change with the hook); `offline: false`
 * turns the service worker off (<meta name="jikji-offline" content="off">), for the tests that
 * count the page's requests and bytes on the network and in the HTTP cache rather than in Cache
 * Storage. A copy rather than a playwright route, because request interception turns Chromium's
 * HTTP cache off (the second-visit tests need it). Returns the folder's path (the caller
 * removes it).
 */
export async function hookedWeb(web, { pkg = null, offline = true } = {}) {
  const { cp, mkdtemp, readFile, writeFile } = await import("node:fs/promises");
  const { tmpdir } = await import("node:os");
  const path = await import("node:path");
  const { execFileSync } = await import("node:child_process");
  const dir = await mkdtemp(path.join(tmpdir(), "jikji-web-hooked-"));
  await cp(web, dir, { recursive: true });
  const app = path.join(dir, "app.js");
  await writeFile(app, (await readFile(app, "utf8")) + TEST_HOOK);
  const index = path.join(dir, "index.html");
  const html = await readFile(index, "utf8");
  const on = '<meta name="jikji-offline" content="on">';
  if (!html.includes(on)) throw new Error(`${index}: no ${on} (the shipped default)`);
  if (offline) {
    if (!pkg) throw new Error("hookedWeb: the service worker is stamped with pkg/'s files: pass {pkg}");
    const { fileURLToPath } = await import("node:url");
    const stamp = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../scripts/stamp-sw");
    execFileSync(process.execPath, [stamp, "page", dir, pkg], { stdio: ["ignore", "ignore", "inherit"] });
  } else {
    await writeFile(index, html.replace(on, '<meta name="jikji-offline" content="off">'));
  }
  return dir;
}

/**
 * Every response a browser context receives, with its transfer size (headers + body as
 * received), by URL. `settle()` waits until every size is known.
 */
export function recordTransfers(context, log = console.error) {
  const rows = [];
  const pending = new Set();
  context.on("requestfinished", (req) => {
    const p = (async () => {
      const s = await req.sizes();
      const res = await req.response();
      rows.push({
        url: req.url(),
        status: res ? res.status() : 0,
        body: s.responseBodySize,
        bytes: Math.max(0, s.responseHeadersSize) + Math.max(0, s.responseBodySize),
      });
    })().catch((e) => log(`[qm-e2e] sizes of ${req.url()}: ${e.message}`));
    pending.add(p);
    p.finally(() => pending.delete(p));
  });
  return {
    rows,
    async settle() {
      await new Promise((r) => setTimeout(r, 300));
      while (pending.size) await Promise.all([...pending]);
    },
  };
}

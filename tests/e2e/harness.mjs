// Shared by the browser test and the wasm bench: start `jikji serve`, launch Debian's Chromium.
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";

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
 * {url, proc} once it prints `listening on http://ADDR`, rejects if it exits first or stays silent
 * for 120 s. `track(proc)` is called at once so callers can kill it on any error; `log` gets the
 * server's other output, each line prefixed `[server]`.
 */
export function startServer({ bin, bundle, web, pkg, model, cwd, log, tag = "e2e", track = () => {} }) {
  const args = ["serve", bundle, "--addr", "127.0.0.1:0", "--web", web, "--pkg", pkg, "--model", model];
  log(`[${tag}] ${bin} ${args.join(" ")}`);
  const proc = spawn(bin, args, { cwd, stdio: ["ignore", "pipe", "pipe"] });
  track(proc);
  createInterface({ input: proc.stderr }).on("line", (l) => log(`[server] ${l}`));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      proc.kill();
      reject(new Error("jikji serve did not print 'listening on http://...' within 120 s"));
    }, 120_000);
    createInterface({ input: proc.stdout }).on("line", (line) => {
      const m = /listening on (https?:\/\/\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve({ url: m[1].replace(/\/$/, ""), proc });
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
 * The page's test hook, which the shipped page does not have: appended to web/app.js as the tests
 * serve it (the functions and bindings it names are app.js's module scope).
 */
const TEST_HOOK = `
window.jikjiPage = {
  render: (result) => renderResults(result),
  loadModel: () => {
    modelConsent = true;
    wantModel();
    return modelLoading || Promise.resolve();
  },
  get jikji() {
    return jikji;
  },
};
`;

/**
 * Routes `/app.js` of every page of `context` to `WEB/app.js` with TEST_HOOK appended, so tests
 * reach the page's Jikji instance and renderer as `window.jikjiPage` (the page itself exposes
 * nothing). `web` is the page folder served.
 */
export async function installTestHook(context, web) {
  const { readFile } = await import("node:fs/promises");
  const path = await import("node:path");
  const file = path.join(web, "app.js");
  await context.route(
    (url) => url.pathname === "/app.js",
    async (route) => {
      const body = (await readFile(file, "utf8")) + TEST_HOOK;
      await route.fulfill({ status: 200, contentType: "text/javascript; charset=utf-8", body });
    },
  );
}

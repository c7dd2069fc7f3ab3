// Takes the README's tour screenshot: serves BUNDLE with `jikji serve`, opens the page in headless
// Chromium at a phone-sized and a desktop viewport with `?q=QUERY&mode=bm25`, waits for the results
// list's data-status="done" and writes OUT-desktop.png and OUT-phone.png.
// Usage: node tests/e2e/screenshot.mjs BIN BUNDLE OUT QUERY (see scripts/screenshot).
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, startServer } from "./harness.mjs";

const [bin, bundle, out, query] = process.argv.slice(2);
if (!query) {
  console.error("usage: node tests/e2e/screenshot.mjs BIN BUNDLE OUT QUERY");
  process.exit(2);
}
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "../..");
let server;
const profile = mkdtempSync(path.join(tmpdir(), "jikji-shot-"));
try {
  server = await startServer({
    bin,
    bundle,
    web: path.join(root, "pkg/web"),
    pkg: path.join(root, "pkg"),
    model: path.join(root, "models/e5-small"),
    cwd: root,
    log: (l) => console.error(l),
    tag: "screenshot",
  });
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: [...CHROMIUM_ARGS, "--headless=new"],
  });
  for (const [name, viewport, mobile] of [
    ["desktop", { width: 1100, height: 820 }, false],
    ["phone", { width: 390, height: 844 }, true],
  ]) {
    const context = await browser.newContext({ viewport, isMobile: mobile, deviceScaleFactor: mobile ? 2 : 1 });
    const page = await context.newPage();
    const url = `${server.url}/?q=${encodeURIComponent(query)}&mode=bm25`;
    await page.goto(url);
    await page.waitForSelector('[data-status="done"]', { timeout: 60_000 });
    await page.screenshot({ path: `${out}-${name}.png` });
    console.error(`wrote ${out}-${name}.png (${url})`);
    await context.close();
  }
  await browser.close();
} finally {
  server?.proc.kill();
  rmSync(profile, { recursive: true, force: true });
}

// <jikji-search> (web/jikji-search.js) as the page uses it, in headless Chromium against `jikji
// serve` on the real e2e bundle: a shareable ?q=&mode= URL runs its search on load and keeps the
// results list's data attributes; hits show a readable title, the heading path as a breadcrumb,
// a snippet whose matched terms are <mark> elements built from text nodes (no Markdown heading
// markers), the score band in words and the tier; filters come from the bundle's facets and
// filter; keyboard navigation follows the ARIA combobox/listbox pattern; "More results" adds
// hits; the live region announces counts; BM25 on load downloads no model; and, in Chromium's
// mobile emulation at 360 px, nothing scrolls sideways and every control is at least 44 px.
//
// Run: tests/e2e/run.sh (or node --test tests/e2e/component.test.mjs). Needs what
// browser.test.mjs needs (JIKJI_BIN, the e2e bundle, pkg/, Chromium).

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { chromium, devices } from "playwright-core";
import { CHROMIUM_ARGS, builtWeb, e2eBundle, hookedWeb, pageName, startServer } from "./harness.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const BIN = path.resolve(ROOT, process.env.JIKJI_BIN || "target/release/jikji");
const BUNDLE = e2eBundle(ROOT);
const PKG = path.resolve(ROOT, process.env.JIKJI_E2E_PKG || "pkg");
const CHROMIUM = process.env.CHROMIUM_PATH || "/usr/bin/chromium";
const log = (...a) => console.error(...a);

/** Waits for the results list to hold the results of `query` in `mode`; returns its data attributes. */
async function resultsOf(page, query, mode) {
  await page.waitForFunction(
    ([q, m]) => {
      const r = document.querySelector("#results");
      return r && r.dataset.query === q && r.dataset.mode === m && r.dataset.status !== "";
    },
    [query, mode],
    { timeout: 120_000, polling: 100 },
  );
  return page.evaluate(() => ({ ...document.querySelector("#results").dataset, error: document.querySelector("#error").textContent }));
}

/** What each hit shows. */
function hitsShown(page) {
  return page.$$eval("#results > li.hit", (lis) =>
    lis.map((li) => {
      const snip = li.querySelector(".hit-snippet");
      return {
        id: li.dataset.chunkId,
        role: li.getAttribute("role"),
        title: li.querySelector(".hit-title .source")?.textContent,
        sourcePath: li.querySelector(".hit-title .source")?.title,
        crumbs: li.querySelector(".heading-path")?.textContent ?? null,
        snippet: snip.textContent,
        marks: [...snip.querySelectorAll("mark")].map((m) => m.textContent),
        markChildren: [...snip.querySelectorAll("mark")].map((m) => m.children.length),
        // The character after each mark ("" at the end).
        markNext: [...snip.querySelectorAll("mark")].map((m) => (m.nextSibling?.textContent ?? "").slice(0, 1)),
        otherElements: [...snip.querySelectorAll("*")].filter((e) => e.tagName !== "MARK").length,
        band: li.querySelector(".score")?.dataset.band ?? null,
        scoreText: li.querySelector(".score")?.textContent,
        tier: li.querySelector(".tier")?.textContent ?? null,
        lang: li.querySelector(".lang")?.textContent ?? null,
        passageHidden: li.querySelector(".hit-text").hidden,
      };
    }),
  );
}

describe("<jikji-search> on the page", { timeout: 600_000 }, () => {
  let server;
  let web;
  let browser;
  const errors = [];

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
    server = await startServer({ bin: BIN, bundle: BUNDLE, web, pkg: PKG, model: path.join(ROOT, "models/e5-small"), cwd: ROOT, log, tag: "component" });
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS });
  });

  after(async () => {
    await browser?.close().catch(() => {});
    if (server?.proc && server.proc.exitCode === null) server.proc.kill();
    if (web) await rm(web, { recursive: true, force: true }).catch(() => {});
  });

  async function newPage(contextOptions = {}) {
    const context = await browser.newContext(contextOptions);
    const page = await context.newPage();
    const requested = [];
    context.on("request", (r) => requested.push(r.url()));
    page.on("pageerror", (e) => errors.push(e.message));
    page.on("console", (m) => m.type() === "error" && log(`[component browser error] ${m.text()}`));
    return { context, page, requested };
  }

  test("a shareable ?q=&mode=bm25 URL searches on load: titles, breadcrumbs, marked snippets, bands; no model fetched", async () => {
    const { context, page, requested } = await newPage();
    try {
      const q = "學而時習之";
      await page.goto(`${server.url}/?q=${encodeURIComponent(q)}&mode=bm25`);
      const r = await resultsOf(page, q, "bm25");
      assert.equal(r.status, "done", r.error);
      assert.ok(Number(r.count) > 0, "no hits");
      assert.equal(await page.inputValue("#q"), q, "the query is in the box");
      assert.equal(await page.isChecked('input[name="mode"][value="bm25"]'), true);
      const hits = await hitsShown(page);
      assert.equal(hits.length, Number(r.count));
      const top = hits[0];
      log(`[component] top: ${JSON.stringify(top)}`);
      assert.equal(top.title, "Lunyu", "a readable title, not the path");
      assert.equal(top.sourcePath, "1. 漢文 古典/lunyu.md", "the path is the title's tooltip");
      assert.ok(top.crumbs && top.crumbs.includes("論語") && top.crumbs.includes(" › "), `breadcrumb ${top.crumbs}`);
      assert.ok(top.marks.includes("學而時習之"), `marks ${JSON.stringify(top.marks)}`);
      for (const h of hits) {
        assert.equal(h.role, "option");
        assert.ok(!/(^|\s)#{1,6}\s/.test(h.snippet), `heading marker in snippet: ${h.snippet}`);
        assert.deepEqual(h.markChildren.filter((n) => n > 0), [], "a mark holds only text");
        assert.equal(h.otherElements, 0, "the snippet holds no element but <mark>");
        assert.ok(["reliable", "use with care", "weak"].includes(h.band), `band ${h.band}`);
        assert.ok(h.scoreText.startsWith(h.band), `score shown in words: ${h.scoreText}`);
        assert.ok(h.passageHidden, "the whole passage is folded away");
        assert.ok(h.snippet.length <= 260, `snippet of ${h.snippet.length} chars`);
      }
      assert.match(top.tier, /^tier \d+$/);
      assert.ok(top.lang && top.lang !== "zh", `language in words: ${top.lang}`);
      // The live region says how many.
      assert.match(await page.textContent("#results-info"), new RegExp(`^${r.count} results? · BM25`));
      assert.equal(await page.getAttribute("#results-info", "aria-live"), "polite");
      // BM25 on load: no query-model byte.
      const model = requested.filter((u) => new URL(u).pathname.includes("/qmodel/") || /^[mkur]-/.test(pageName(u) ?? ""));
      assert.deepEqual(model, [], "the model was downloaded in BM25 mode");
      // The passage opens as text.
      await page.click("#results > li.hit >> nth=0 >> .more-text");
      assert.equal(await page.isVisible("#results > li.hit >> nth=0 >> .hit-text"), true);
    } finally {
      await context.close();
    }
  });

  test("a typed search writes ?q= and ?mode= back; a Korean query marks whole words, particles included", async () => {
    const { context, page } = await newPage();
    try {
      await page.goto(`${server.url}/?mode=bm25`);
      await page.waitForFunction(() => ["bm25-ready", "ready"].includes(document.body.dataset.state), null, { timeout: 60_000 });
      const q = "메밀꽃";
      await page.fill("#q", q);
      await page.press("#q", "Enter");
      await resultsOf(page, q, "bm25");
      const u = new URL(page.url());
      assert.equal(u.searchParams.get("q"), q);
      assert.equal(u.searchParams.get("mode"), "bm25");
      const hits = await hitsShown(page);
      assert.equal(hits[0].title, "When Buckwheat Flowers Blossom");
      assert.ok(hits[0].marks.some((m) => m.startsWith("메밀")), JSON.stringify(hits[0]));
      // 동이를 (stem 동이 + particle 를): the forms in the story — 동이의, 동이는, 동이가, … — are
      // marked whole, never 동이 with its particle left out of the mark.
      const k = "동이를";
      await page.fill("#q", k);
      await page.press("#q", "Enter");
      await resultsOf(page, k, "bm25");
      const top = (await hitsShown(page))[0];
      log(`[component] ${k}: marks ${JSON.stringify(top.marks)}, next ${JSON.stringify(top.markNext)}`);
      const words = top.marks.map((m, i) => [m, top.markNext[i]]).filter(([m]) => m.startsWith("동이"));
      assert.ok(words.some(([m]) => m.length > 2), `no particle marked: ${JSON.stringify(top.marks)}`);
      for (const [m, next] of words) assert.ok(!/^[은는이가을를의도와과로에]/.test(next), `${m} marked without its particle (${next}…)`);
      // The shared URL gives the same list in a fresh page.
      const again = await newPage();
      try {
        await again.page.goto(u.href);
        await resultsOf(again.page, q, "bm25");
        assert.deepEqual((await hitsShown(again.page)).map((h) => h.id), hits.map((h) => h.id));
      } finally {
        await again.context.close();
      }
    } finally {
      await context.close();
    }
  });

  test("filters offer the bundle's tiers, languages and folders, and filter", async () => {
    const { context, page } = await newPage();
    try {
      const q = "子曰 장인님";
      await page.goto(`${server.url}/?q=${encodeURIComponent(q)}&mode=bm25`);
      await resultsOf(page, q, "bm25");
      await page.waitForFunction(() => !document.querySelector("#filter-lang").disabled, null, { timeout: 30_000 });
      const options = await page.evaluate(() =>
        Object.fromEntries(["tier", "lang", "folder"].map((k) => [k, [...document.querySelector(`#filter-${k}`).options].map((o) => [o.value, o.textContent])])),
      );
      log(`[component] filter options: ${JSON.stringify(options)}`);
      assert.deepEqual(options.tier.map((o) => o[0]), ["", "1", "2", "99"]);
      assert.ok(options.lang.some(([v]) => v === "ko") && options.lang.some(([v]) => v === "zh"), JSON.stringify(options.lang));
      assert.ok(options.folder.some(([v]) => v === "99. 온라인 자료 (정리 X)"), JSON.stringify(options.folder));
      await page.selectOption("#filter-lang", "ko");
      await page.waitForFunction(() => {
        const hits = [...document.querySelectorAll("#results > li.hit")];
        return hits.length > 0 && hits.every((h) => h.querySelector(".hit-title .source").title.startsWith("99. "));
      }, null, { timeout: 60_000 });
      await page.selectOption("#filter-lang", "");
      await page.selectOption("#filter-tier", "1");
      await page.waitForFunction(() => {
        const hits = [...document.querySelectorAll("#results > li.hit")];
        return hits.length > 0 && hits.every((h) => h.querySelector(".tier").textContent === "tier 1");
      }, null, { timeout: 60_000 });
    } finally {
      await context.close();
    }
  });

  test("keyboard: arrows move through the listbox, Escape leaves it; More results adds hits", async () => {
    const { context, page } = await newPage();
    try {
      const q = "子曰";
      await page.goto(`${server.url}/?q=${encodeURIComponent(q)}&mode=bm25&k=5`);
      const r = await resultsOf(page, q, "bm25");
      assert.equal(r.count, "5");
      assert.equal(await page.getAttribute("#q", "role"), "combobox");
      assert.equal(await page.getAttribute("#q", "aria-controls"), "results");
      assert.equal(await page.getAttribute("#results", "role"), "listbox");
      assert.equal(await page.getAttribute("#q", "aria-expanded"), "true");
      await page.focus("#q");
      await page.keyboard.press("ArrowDown");
      assert.equal(await page.getAttribute("#q", "aria-activedescendant"), "hit-0");
      await page.keyboard.press("ArrowDown");
      assert.equal(await page.getAttribute("#q", "aria-activedescendant"), "hit-1");
      assert.equal(await page.getAttribute("#hit-1", "aria-selected"), "true");
      assert.equal(await page.getAttribute("#hit-0", "aria-selected"), "false");
      await page.keyboard.press("End");
      assert.equal(await page.getAttribute("#q", "aria-activedescendant"), "hit-4");
      await page.keyboard.press("Escape");
      assert.equal(await page.getAttribute("#q", "aria-activedescendant"), null);
      // More results: five more.
      assert.equal(await page.isVisible("#more"), true);
      await page.click("#more");
      await page.waitForFunction(() => document.querySelector("#results").dataset.count === "10", null, { timeout: 60_000 });
      assert.match(await page.textContent("#results-info"), /^10 results/);
    } finally {
      await context.close();
    }
  });

  test("phone (360 px, touch): no horizontal scroll, every control at least 44 px", async () => {
    const pixel = devices["Pixel 7"];
    const { context, page } = await newPage({ ...pixel, viewport: { width: 360, height: 780 } });
    try {
      const q = "學而時習之";
      await page.goto(`${server.url}/?q=${encodeURIComponent(q)}&mode=bm25`);
      await resultsOf(page, q, "bm25");
      await page.waitForFunction(() => !document.querySelector("#filter-lang").disabled, null, { timeout: 30_000 });
      await page.click("#results > li.hit >> nth=0 >> .more-text");
      const m = await page.evaluate(() => {
        const d = document.documentElement;
        const small = [];
        for (const e of document.querySelectorAll("jikji-search input[type=search], jikji-search .jk-modes span, jikji-search select, jikji-search button, jikji-search a")) {
          const r = e.getBoundingClientRect();
          if (r.width === 0 && r.height === 0) continue; // hidden
          if (r.height < 44 || r.width < 44) small.push(`${e.tagName.toLowerCase()}.${e.className} ${e.textContent.slice(0, 20)}: ${r.width.toFixed(0)}×${r.height.toFixed(0)}`);
        }
        return { scrollWidth: d.scrollWidth, clientWidth: d.clientWidth, small, coarse: matchMedia("(pointer: coarse)").matches };
      });
      log(`[component] phone: ${JSON.stringify(m)}`);
      assert.equal(m.coarse, true, "the emulated phone has a coarse pointer");
      assert.equal(m.clientWidth, 360);
      assert.ok(m.scrollWidth <= m.clientWidth, `page is ${m.scrollWidth} px wide at ${m.clientWidth} px`);
      assert.deepEqual(m.small, [], "touch targets under 44 px");
    } finally {
      await context.close();
    }
  });

  test("Save-Data: a hybrid query shows BM25 results and asks before downloading the model", async () => {
    const { context, page, requested } = await newPage();
    try {
      // navigator.connection.saveData as a browser with Save-Data on reports it.
      await page.addInitScript(() => {
        Object.defineProperty(Object.getPrototypeOf(navigator.connection), "saveData", { get: () => true, configurable: true });
      });
      const q = "學而時習之";
      await page.goto(`${server.url}/?q=${encodeURIComponent(q)}&mode=hybrid`);
      const r = await resultsOf(page, q, "bm25");
      assert.equal(r.status, "done", r.error);
      await page.waitForFunction(() => document.body.dataset.model === "consent", null, { timeout: 30_000 });
      assert.equal(await page.isVisible("#load-model"), true, "the consent button is shown");
      // It says what the click downloads: the bundle's query model size, from its entry.
      assert.match(await page.textContent("#load-model"), /^Load semantic search \(\d+(\.\d)? MB\)$/);
      assert.equal(await page.isVisible("#notice"), true, "the page says these are keyword results");
      await page.waitForTimeout(1000);
      const isModel = (u) => new URL(u).pathname.includes("/qmodel/") || /^[mkur]-/.test(pageName(u) ?? "");
      assert.deepEqual(requested.filter(isModel), [], "model bytes fetched without consent");
      // Consent starts the download.
      await page.click("#load-model");
      await page.waitForFunction(() => ["loading", "loaded"].includes(document.body.dataset.model), null, { timeout: 30_000 });
      await page.waitForFunction(() => performance.getEntriesByType("resource").length > 0, null, { timeout: 5_000 });
      const deadline = Date.now() + 30_000;
      while (!requested.some(isModel) && Date.now() < deadline) await page.waitForTimeout(200);
      assert.ok(requested.some(isModel), "no model request after consent");
    } finally {
      await context.close();
    }
  });

  test("no uncaught errors", () => {
    assert.deepEqual(errors, []);
  });
});

#!/usr/bin/env node
// Jikji (paged bundle, format v2) vs Pagefind 1.x on the same corpus, in headless Chromium, in
// one run: what a visitor downloads (a script, not a test; see scripts/bench-paged).
//
// For each corpus: builds the Jikji bundle (`jikji build CORPUS --out B --no-embed`), renders
// the same documents as HTML (one page per document) and indexes them with Pagefind (npm
// `pagefind`, version pinned in package.json; `--force-language en`, one index for the whole
// site, as Jikji has one), serves both with `jikji serve` on 127.0.0.1 (the same caching and
// compression rules for both: FORMAT's pages and Pagefind's own pre-compressed files go out as
// they are, text files gzipped), and replays the queries (BM25 for Jikji, Pagefind's default
// search; top 10, with each hit's text: Jikji returns it, Pagefind's is fetched with data()).
//
// Counted from Chromium's network events (playwright-core): every request of the page and its
// workers. transfer = response headers + body as sent; raw = body after HTTP decoding (a
// page compressed by its writer counts compressed in both). Rounds = the longest chain of
// requests each issued after the previous one's response ended (dependency depth).
//   first query   fresh profile, cold cache: everything from navigation to the first results
//                 (page, JS, wasm, entry/meta, index pages, result texts); "cold" = the same
//                 for --cold-sample queries, each in its own fresh profile (median / max)
//   later         new bytes per query while replaying the list in one profile (query 2..n)
//   latency       ms from calling search to having the top-10 texts (the first query includes
//                 opening: Jikji.load / Pagefind's init)
//   nDCG@10       documents of the top-10 hits (a document's rank = its best hit), trec_eval
//                 definition (gain = grade, ideal from the judged grades), for sets with qrels
//   static        the engine's wasm and JS as sent (transfer / raw)
//
// Run: scripts/bench-paged [--corpus scifact,books,gen:N] [--limit N] [--cold-sample N] [--json FILE]
//        [--work DIR] [--bin PATH] [--pkg DIR] [--web DIR] [--systems jikji,pagefind]
//        [--base-web DIR --base-pkg DIR]
//        [--scifact DIR] [--books DIR] [--books-queries FILE] [--reuse-bundle]
// Corpus gen:N (opt-in; gen1m = gen:1000000): a generated corpus of about N chunks
// (scripts/gen-corpus N, seed 12, kept in WORK/gen-N/corpus and reused), one Pagefind page
// per file, and GEN_QUERIES 3-term queries drawn from its text (seeded: three distinct
// words, or Han bigrams, of one paragraph of a random file; gen-queries.mjs, also written to
// WORK/gen-N/queries.jsonl for `jikji search --queries-file`); no qrels, so no nDCG.
// --web: the page's folder (default pkg/web, scripts/build-js's bundled page), --pkg: the engine's
// (default pkg). --base-web/--base-pkg add the system "jikji-base", run first on the same bundle:
// the same measurements with other page and engine files (another branch's web/ and pkg/, say
// main's before a change), for a before/after in one run at one load.
// --reuse-bundle keeps a Jikji bundle a previous run built in WORK (say so in reports: it
// may come from another commit; its generator and build time are printed).
// Exit status 0 on success, 1 on failure, 2 on bad arguments.

import { execFile } from "node:child_process";
import { cpSync, existsSync, mkdirSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import os, { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs, promisify } from "node:util";
import { chromium } from "playwright-core";
import { CHROMIUM_ARGS, startServer } from "../e2e/harness.mjs";
import { genFiles, genParagraphs, genQueries } from "./gen-queries.mjs";

const execFileP = promisify(execFile);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const log = (...a) => console.error(...a);
const TOP = 10;

class UsageError extends Error {}

function options() {
  let values;
  try {
    ({ values } = parseArgs({
      options: {
        corpus: { type: "string", default: "scifact,books" },
        systems: { type: "string", default: "jikji,pagefind" },
        limit: { type: "string" },
        "cold-sample": { type: "string", default: "5" },
        json: { type: "string" },
        work: { type: "string" },
        bin: { type: "string" },
        pkg: { type: "string" },
        web: { type: "string" },
        "base-pkg": { type: "string" },
        "base-web": { type: "string" },
        scifact: { type: "string" },
        books: { type: "string" },
        "books-queries": { type: "string" },
        "reuse-bundle": { type: "boolean" },
        help: { type: "boolean", short: "h" },
      },
    }));
  } catch (e) {
    throw new UsageError(e.message);
  }
  if (values.help) return null;
  const int = (name) => {
    const v = values[name];
    if (v == null) return null;
    const n = Number(v);
    if (!Number.isInteger(n) || n < 0) throw new UsageError(`--${name} must be a non-negative integer, got ${v}`);
    return n;
  };
  const list = (v, allowed, pattern = null) => {
    const l = v.split(",").map((s) => s.trim()).filter(Boolean).map((x) => (x === "gen1m" && pattern ? "gen:1000000" : x));
    for (const x of l)
      if (!allowed.includes(x) && !(pattern && pattern.test(x)))
        throw new UsageError(`unknown ${x}; one of ${allowed.join(", ")}${pattern ? ", gen:N, gen1m" : ""}`);
    return l;
  };
  const p = (v, dflt) => (v ? path.resolve(v) : path.join(ROOT, dflt));
  const shared = process.env.JIKJI_SHARED ? path.resolve(process.env.JIKJI_SHARED) : path.join(ROOT, "../shared");
  return {
    corpora: list(values.corpus, ["scifact", "books"], /^gen:[1-9]\d*$/),
    reuseBundle: values["reuse-bundle"] ?? false,
    systems: (() => {
      const l = list(values.systems, ["jikji", "pagefind"]);
      if (!values["base-web"] !== !values["base-pkg"]) throw new UsageError("--base-web and --base-pkg go together");
      return values["base-web"] ? ["jikji-base", ...l] : l;
    })(),
    baseWeb: values["base-web"] ? path.resolve(values["base-web"]) : null,
    basePkg: values["base-pkg"] ? path.resolve(values["base-pkg"]) : null,
    limit: int("limit"),
    coldSample: int("cold-sample"),
    json: values.json ? path.resolve(values.json) : null,
    work: p(values.work, "target/bench-paged"),
    bin: p(values.bin, "target/release/jikji"),
    pkg: p(values.pkg, "pkg"),
    web: p(values.web, "pkg/web"),
    scifact: values.scifact ? path.resolve(values.scifact) : path.join(shared, "eval/scifact"),
    books: values.books ? path.resolve(values.books) : path.join(ROOT, "books"),
    booksQueries: p(values["books-queries"], "tests/bench/paged-books.txt"),
    chromium: process.env.CHROMIUM_PATH || "/usr/bin/chromium",
  };
}

// ---------------------------------------------------------------- corpora

const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);

function readJsonl(file) {
  return readFileSync(file, "utf8")
    .split("\n")
    .map((l, i) => [l, i + 1])
    .filter(([l]) => l.trim())
    .map(([l, n]) => {
      try {
        return JSON.parse(l);
      } catch (e) {
        throw new Error(`${file}:${n}: ${e.message}`);
      }
    });
}

/**
 * SciFact as `jikji eval` builds it (builder/src/eval): one file per record, front matter
 * `title`, body `title + "\n\n" + text`; plus a leading `Source:` line (a source is required
 * for `jikji build`; leading source lines are metadata, not indexed text).
 */
function prepareScifact(o, dir) {
  const docs = readJsonl(path.join(o.scifact, "corpus.jsonl")).map((d) => ({
    id: String(d.id),
    title: String(d.title ?? "").replace(/\s+/g, " ").trim(),
    text: String(d.text ?? ""),
  }));
  const queries = readJsonl(path.join(o.scifact, "queries.jsonl")).map((q) => ({ id: String(q.id), text: String(q.text) }));
  const qrels = new Map();
  readFileSync(path.join(o.scifact, "qrels.tsv"), "utf8")
    .split("\n")
    .forEach((line, i) => {
      const f = line.trim().split(/\s+/);
      if (f.length < 3 || !/^-?\d+$/.test(f[2])) return; // blank or header line
      if (!qrels.has(f[0])) qrels.set(f[0], new Map());
      qrels.get(f[0]).set(f[1], Number(f[2]));
    });
  const corpus = path.join(dir, "corpus");
  rmSync(corpus, { recursive: true, force: true });
  mkdirSync(corpus, { recursive: true });
  for (const d of docs) {
    if (!/^[A-Za-z0-9_.-]+$/.test(d.id)) throw new Error(`SciFact doc id ${JSON.stringify(d.id)} is not a safe file name`);
    const body = d.title ? `${d.title}\n\n${d.text}` : d.text;
    const fm = d.title ? `---\ntitle: ${d.title}\n---\n` : "";
    writeFileSync(path.join(corpus, `${d.id}.md`), `${fm}Source: https://scifact.invalid/doc/${d.id}\n\n${body}\n`);
  }
  const judged = queries.filter((q) => [...(qrels.get(q.id)?.values() ?? [])].some((g) => g > 0));
  return {
    corpus,
    docs: docs.map((d) => ({ id: d.id, title: d.title, paragraphs: d.title ? [d.title, d.text] : [d.text] })),
    queries: judged,
    qrels,
    docOfSource: (s) => s.replace(/\.md$/, ""),
  };
}

/** The books folder as it is; each file one HTML page (text after front matter, by paragraph). */
function prepareBooks(o) {
  if (!existsSync(o.books)) throw new Error(`books folder ${o.books} not found (--books DIR)`);
  const files = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.(md|txt)$/.test(e.name) && path.relative(o.books, p) !== "README.md") files.push(p);
    }
  };
  walk(o.books);
  const docs = files.map((f) => {
    let text = readFileSync(f, "utf8");
    let title = path.basename(f).replace(/\.(md|txt)$/, "");
    const fm = /^---\r?\n([\s\S]*?)\r?\n---\r?\n/.exec(text);
    if (fm) {
      const t = /^title:\s*(.+)$/m.exec(fm[1]);
      if (t) title = t[1].trim().replace(/^["']|["']$/g, "");
      text = text.slice(fm[0].length);
    }
    return { id: path.relative(o.books, f).split(path.sep).join("/"), title, paragraphs: text.split(/\r?\n\s*\r?\n/).filter((p) => p.trim()) };
  });
  const queries = readFileSync(o.booksQueries, "utf8")
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"))
    .map((text, i) => ({ id: String(i + 1), text }));
  return { corpus: o.books, docs, queries, qrels: null, docOfSource: (s) => s };
}

/** A generated corpus of about `n` chunks (scripts/gen-corpus, made once per WORK), each
 * file one Pagefind page (read when rendered, not held), and GEN_QUERIES 3-term queries. */
async function prepareGen(o, dir, n) {
  const corpus = path.join(dir, "corpus");
  const done = path.join(dir, "corpus.done");
  if (!existsSync(done)) {
    rmSync(corpus, { recursive: true, force: true });
    log(`   scripts/gen-corpus ${n} ${corpus}`);
    await execFileP(path.join(ROOT, "scripts/gen-corpus"), [String(n), corpus], { cwd: ROOT, maxBuffer: 64 << 20 });
    writeFileSync(done, `scripts/gen-corpus ${n} (seed 12)\n`);
  }
  const files = genFiles(corpus);
  const read = genParagraphs;
  const docs = files.map((f) => ({
    id: path.relative(corpus, f).split(path.sep).join("/"),
    title: path.basename(f, ".md"),
    get paragraphs() {
      return read(f);
    },
  }));
  const queries = genQueries(files, read);
  writeFileSync(path.join(dir, "queries.jsonl"), queries.map((q) => JSON.stringify(q)).join("\n") + "\n");
  return { corpus, docs, queries, qrels: null, docOfSource: (s) => s };
}

/** The Pagefind site: /docs/<n>.html per document, and /bench.html that drives Pagefind. */
function renderSite(dir, docs) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(path.join(dir, "docs"), { recursive: true });
  const docOfUrl = new Map();
  docs.forEach((d, i) => {
    const url = `/docs/${i}.html`;
    docOfUrl.set(url, d.id);
    const body = d.paragraphs.map((p) => `<p>${esc(p)}</p>`).join("\n");
    writeFileSync(
      path.join(dir, "docs", `${i}.html`),
      `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>${esc(d.title)}</title></head>\n<body><main>\n<h1>${esc(d.title)}</h1>\n${body}\n</main></body></html>\n`,
    );
  });
  writeFileSync(
    path.join(dir, "bench.html"),
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>pagefind bench</title></head><body>
<script type="module" src="/bench.js"></script></body></html>
`,
  );
  // The driver is a file, not an inline script: \`jikji serve\`'s Content-Security-Policy
  // (script-src 'self') blocks inline scripts. NetLog leaves /bench.js out of the counts.
  writeFileSync(
    path.join(dir, "bench.js"),
    `let pf = null;
window.bench = {
  async open() { pf = await import("/pagefind/pagefind.js"); await pf.init(); return null; },
  async search(q, k) {
    const t0 = performance.now();
    const s = await pf.search(q);
    const data = await Promise.all(s.results.slice(0, k).map((r) => r.data()));
    return { ms: performance.now() - t0, hits: data.map((d) => ({ url: d.url })), matched: s.results.length };
  },
};
window.benchReady = true;
`,
  );
  return docOfUrl;
}

/** A copy of the page's folder with /bench.html driving the Jikji API (jikji.js). */
function jikjiWeb(o, dir) {
  rmSync(dir, { recursive: true, force: true });
  cpSync(o.web, dir, { recursive: true });
  writeFileSync(
    path.join(dir, "bench.html"),
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>jikji bench</title></head><body>
<script type="module" src="/bench.js"></script></body></html>
`,
  );
  writeFileSync(
    path.join(dir, "bench.js"),
    `import { Jikji } from "./jikji.js";
let j = null;
window.bench = {
  async open() { j = await Jikji.load("bundle/", { modelUrl: null, engineUrl: "/pkg/" }); return j.openStats; },
  async search(q, k) {
    const t0 = performance.now();
    const r = await j.search(q, { mode: "bm25", topK: k });
    return { ms: performance.now() - t0, hits: r.hits.map((h) => ({ id: h.id, source: h.source, text: h.text.length })), stats: r.stats };
  },
  cacheStats() { return j.cacheStats(); },
};
window.benchReady = true;
`,
  );
  return dir;
}

// ---------------------------------------------------------------- measuring

/** `promise`, or an Error naming `what` after `ms`. */
function withTimeout(promise, ms, what) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms / 1000} s`)), ms))),
  ]).finally(() => clearTimeout(timer));
}

/** Records every request of a browser context with its sizes and timing. */
class NetLog {
  constructor(context) {
    this.entries = [];
    this.pending = new Set();
    context.on("request", (r) => this.pending.add(r));
    const done = (r, failed) => {
      this.pending.delete(r);
      // The bench's own driver (bench.html's module, a file because of the CSP): not
      // something a visitor downloads, and before the CSP it was inline in bench.html.
      if (new URL(r.url()).pathname === "/bench.js") return;
      this.entries.push(withTimeout(this.measure(r, failed), 15_000, `measuring ${r.url()}`));
    };
    context.on("requestfinished", (r) => done(r, false));
    context.on("requestfailed", (r) => done(r, true));
  }

  async measure(r, failed) {
    const url = new URL(r.url());
    const t = r.timing();
    const e = { path: url.pathname, failed, start: t.startTime, end: t.startTime + Math.max(0, t.responseEnd), transfer: 0, raw: 0 };
    if (failed) return e;
    const resp = await r.response();
    const sizes = await r.sizes();
    e.status = resp?.status();
    if (e.status >= 400) log(`[bench] HTTP ${e.status} for ${url.pathname}`);
    e.transfer = sizes.responseHeadersSize + sizes.responseBodySize;
    const enc = resp ? (await resp.allHeaders())["content-encoding"] : undefined;
    e.encoding = enc ?? null;
    e.raw = enc ? (await resp.body()).length : sizes.responseBodySize;
    return e;
  }

  mark() {
    return this.entries.length;
  }

  /** Entries recorded since `mark`, once every request in flight has finished. */
  async since(mark) {
    const t0 = Date.now();
    while (this.pending.size && Date.now() - t0 < 30_000) await new Promise((r) => setTimeout(r, 20));
    if (this.pending.size) throw new Error(`${this.pending.size} requests still pending after 30 s`);
    return Promise.all(this.entries.slice(mark));
  }
}

/** Longest chain of requests each issued after the previous one's response ended. */
function rounds(entries) {
  const es = entries.filter((e) => !e.failed).sort((a, b) => a.start - b.start);
  const depth = [];
  es.forEach((e, i) => {
    let d = 1;
    for (let j = 0; j < i; j++) if (es[j].end <= e.start) d = Math.max(d, depth[j] + 1);
    depth.push(d);
  });
  return depth.length ? Math.max(...depth) : 0;
}

const sum = (xs) => xs.reduce((a, b) => a + b, 0);
const quantile = (xs, q) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil(q * s.length) - 1))];
};
const mean = (xs) => (xs.length ? sum(xs) / xs.length : NaN);

function ndcg10(docIds, judged) {
  const seen = new Set();
  const ranked = [];
  for (const d of docIds) if (!seen.has(d)) seen.add(d), ranked.push(d);
  const dcg = sum(ranked.slice(0, TOP).map((d, i) => (judged.get(d) ?? 0) / Math.log2(i + 2)));
  const ideal = [...judged.values()].filter((g) => g > 0).sort((a, b) => b - a);
  const idcg = sum(ideal.slice(0, TOP).map((g, i) => g / Math.log2(i + 2)));
  return idcg > 0 ? dcg / idcg : 0;
}

/** "jikji", or "jikji-base" (the same with --base-web/--base-pkg's files). */
const isJikji = (system) => system === "jikji" || system === "jikji-base";

function category(system, p) {
  if (isJikji(system)) {
    if (p.startsWith("/bundle/p/")) return "pages";
    if (p === "/bundle/jikji.json") return "entry";
    if (p.endsWith(".wasm")) return "wasm";
    if (p.endsWith(".js")) return "js";
    return "html";
  }
  if (p.includes("/pagefind/")) {
    if (p.endsWith(".pf_fragment")) return "pages";
    if (p.endsWith(".pf_index") || p.endsWith(".pf_filter")) return "pages";
    if (p.endsWith(".pf_meta") || p.endsWith("pagefind-entry.json")) return "entry";
    if (p.endsWith(".pagefind")) return "wasm";
    if (p.endsWith(".js")) return "js";
  }
  return "html";
}

function byCategory(system, entries) {
  const out = {};
  for (const e of entries) {
    const c = category(system, e.path);
    out[c] ??= { requests: 0, transfer: 0, raw: 0 };
    out[c].requests++;
    out[c].transfer += e.transfer;
    out[c].raw += e.raw;
  }
  return out;
}

async function withBrowser(o, fn) {
  const profile = await mkdtemp(path.join(tmpdir(), "jikji-bench-paged-"));
  const context = await chromium.launchPersistentContext(profile, { executablePath: o.chromium, headless: true, args: CHROMIUM_ARGS });
  try {
    return await fn(context);
  } finally {
    await context.close().catch(() => {});
    await rm(profile, { recursive: true, force: true }).catch(() => {});
  }
}

/** Opens bench.html in a fresh profile and runs `queries` in order; per query its entries and result. */
async function replay(o, system, url, queries) {
  return withBrowser(o, async (context) => {
    const net = new NetLog(context);
    const page = context.pages()[0] ?? (await context.newPage());
    page.on("pageerror", (e) => log(`[${system} pageerror] ${e.message}`));
    page.on("console", (m) => m.type() === "error" && log(`[${system} console] ${m.text()}`));
    const runs = [];
    let mark = net.mark();
    const t0 = Date.now();
    await page.goto(`${url}/bench.html`);
    await page.waitForFunction(() => window.benchReady === true, null, { timeout: 60_000 });
    const openT = await page.evaluate(async () => {
      const t = performance.now();
      await window.bench.open();
      return performance.now() - t;
    });
    for (const [i, q] of queries.entries()) {
      let r;
      try {
        r = await withTimeout(page.evaluate(([q, k]) => window.bench.search(q, k), [q.text, TOP]), 120_000, "the search");
      } catch (e) {
        throw new Error(`${system}: query ${JSON.stringify(q.text)}: ${e.message.split("\n")[0]}`);
      }
      const entries = await net.since(mark);
      mark = net.mark();
      runs.push({ q, ms: r.ms + (i === 0 ? openT : 0), hits: r.hits, stats: r.stats ?? null, entries });
      if ((i + 1) % 50 === 0) log(`   ${system}: ${i + 1} of ${queries.length} queries`);
    }
    const cache = isJikji(system) ? await page.evaluate(() => window.bench.cacheStats()) : null;
    return { runs, wallMs: Date.now() - t0, cache };
  });
}

function summarize(system, c, prepared, replayed, cold, native = null) {
  const runs = replayed.runs;
  const first = runs[0];
  const tr = (es) => sum(es.map((e) => e.transfer));
  const raw = (es) => sum(es.map((e) => e.raw));
  const later = runs.slice(1);
  const docIds = (r) =>
    isJikji(system)
      ? r.hits.map((h) => prepared.docOfSource(h.source))
      : r.hits.map((h) => prepared.docOfUrl.get(new URL(h.url, "http://x").pathname) ?? `?${h.url}`);
  let ndcg = null;
  let nativeNdcg = null;
  const ndcgOf = (rs) => mean(rs.map((r) => ndcg10(docIds(r), prepared.qrels.get(r.q.id) ?? new Map())));
  if (prepared.qrels) ndcg = ndcgOf(runs);
  if (prepared.qrels && native) nativeNdcg = ndcgOf(native);
  const sameAsNative = native
    ? runs.filter((r, i) => JSON.stringify(r.hits.map((h) => h.id)) === JSON.stringify(native[i].hits.map((h) => h.id))).length
    : null;
  const cats = byCategory(system, first.entries);
  const laterNew = later.map((r) => tr(r.entries));
  return {
    system,
    corpus: c,
    queries: runs.length,
    first: {
      query: first.q.text,
      transfer: tr(first.entries),
      raw: raw(first.entries),
      requests: first.entries.length,
      rounds: rounds(first.entries),
      engineRounds: first.stats?.rounds ?? null,
      byCategory: cats,
      files: first.entries.map((e) => [e.path, e.transfer, e.raw, Math.round(e.start), Math.round(e.end)]),
    },
    cold: cold.length
      ? {
          n: cold.length,
          medianTransfer: quantile(cold.map((x) => x.transfer), 0.5),
          maxTransfer: Math.max(...cold.map((x) => x.transfer)),
          medianRequests: quantile(cold.map((x) => x.requests), 0.5),
          medianRounds: quantile(cold.map((x) => x.rounds), 0.5),
        }
      : null,
    later: later.length
      ? {
          meanTransfer: mean(laterNew),
          medianTransfer: quantile(laterNew, 0.5),
          meanRequests: mean(later.map((r) => r.entries.length)),
          medianRounds: quantile(later.map((r) => rounds(r.entries)), 0.5),
          maxRounds: Math.max(...later.map((r) => rounds(r.entries))),
          medianEngineRounds: isJikji(system) ? quantile(later.map((r) => r.stats?.rounds ?? 0), 0.5) : null,
        }
      : null,
    latency: { p50: quantile(runs.map((r) => r.ms), 0.5), p90: quantile(runs.map((r) => r.ms), 0.9), firstMs: first.ms },
    ndcg10: ndcg,
    native: native ? { ndcg10: nativeNdcg, sameTop10: sameAsNative } : null,
    static: { wasm: cats.wasm ?? null, js: cats.js ?? null },
    pageCache: replayed.cache,
    hitsPerQuery: mean(runs.map((r) => r.hits.length)),
  };
}

/**
 * The same queries natively (`jikji search BUNDLE Q… --mode bm25 --top-k 10 --json`), in
 * batches: the reference the browser's results must equal.
 */
async function nativeRuns(o, bundle, queries) {
  const out = [];
  for (let i = 0; i < queries.length; i += 50) {
    const batch = queries.slice(i, i + 50);
    const { stdout } = await execFileP(
      o.bin,
      ["search", bundle, ...batch.map((q) => q.text), "--mode", "bm25", "--top-k", String(TOP), "--json"],
      { cwd: ROOT, maxBuffer: 256 << 20 },
    );
    const parsed = JSON.parse(stdout);
    const list = Array.isArray(parsed) ? parsed : [parsed];
    if (list.length !== batch.length) throw new Error(`jikji search answered ${list.length} results for ${batch.length} queries`);
    list.forEach((r, j) => out.push({ q: batch[j], hits: r.hits.map((h) => ({ id: h.id, source: h.source })) }));
  }
  return out;
}

// ---------------------------------------------------------------- main

async function main() {
  const o = options();
  if (!o) {
    process.stdout.write(readFileSync(fileURLToPath(import.meta.url), "utf8").split("\n").filter((l) => l.startsWith("//")).map((l) => l.slice(3)).join("\n") + "\n");
    return;
  }
  const needs = [["jikji binary (cargo build --release --workspace)", o.bin], ["Chromium", o.chromium]];
  if (o.systems.includes("jikji")) needs.push(["engine (scripts/build-wasm)", path.join(o.pkg, "jikji_engine_bg.wasm")], ["page (scripts/build-js)", path.join(o.web, "index.html")]);
  if (o.baseWeb) needs.push(["--base-pkg engine", path.join(o.basePkg, "jikji_engine_bg.wasm")], ["--base-web page", path.join(o.baseWeb, "index.html")]);
  for (const [what, p] of needs)
    if (!existsSync(p)) throw new Error(`${what} not found at ${p}`);
  mkdirSync(o.work, { recursive: true });
  const pagefindBin = path.join(HERE, "node_modules/.bin/pagefind");
  const { stdout: pfVersion } = await execFileP(pagefindBin, ["--version"]);
  const { stdout: gitRev } = await execFileP("git", ["-C", ROOT, "rev-parse", "--short", "HEAD"]);
  const header = {
    commit: gitRev.trim(),
    pagefind: pfVersion.trim(),
    chromium: null,
    load: os.loadavg().map((x) => x.toFixed(2)).join(" "),
    date: new Date().toISOString(),
  };
  const results = [];
  const servers = [];
  try {
    for (const c of o.corpora) {
      const dir = path.join(o.work, c.replace(":", "-"));
      mkdirSync(dir, { recursive: true });
      log(`== ${c}: preparing`);
      const prepared =
        c === "scifact" ? prepareScifact(o, dir) : c.startsWith("gen:") ? await prepareGen(o, dir, Number(c.slice(4))) : prepareBooks(o);
      if (o.limit != null) prepared.queries = prepared.queries.slice(0, o.limit);
      const bundle = path.join(dir, "jikji-bundle");
      const site = path.join(dir, "pagefind-site");
      prepared.docOfUrl = renderSite(site, prepared.docs);
      const jikji = o.systems.some(isJikji);
      if (jikji && o.reuseBundle && existsSync(path.join(bundle, "jikji.json"))) {
        const e = JSON.parse(readFileSync(path.join(bundle, "jikji.json"), "utf8"));
        log(`== ${c}: reusing ${bundle} (${e.generator}, built ${new Date(e.built_at * 1000).toISOString()}, ${e.counts.chunks} chunks)`);
      } else if (jikji) {
        log(`== ${c}: jikji build ${prepared.corpus} --out ${bundle} --no-embed`);
        const t = Date.now();
        await execFileP(o.bin, ["build", prepared.corpus, "--out", bundle, "--no-embed", "--quiet"], { cwd: ROOT, maxBuffer: 64 << 20 });
        log(`   built in ${((Date.now() - t) / 1000).toFixed(1)} s`);
        if (!existsSync(path.join(bundle, "jikji.json")))
          throw new Error(`${bundle} has no jikji.json: this jikji writes format v1 (manifest.json); the bench needs the paged format v2`);
      } else {
        mkdirSync(bundle, { recursive: true });
      }
      if (o.systems.includes("pagefind")) {
        log(`== ${c}: pagefind --site ${site}`);
        const t = Date.now();
        await execFileP(pagefindBin, ["--site", site, "--force-language", "en", "--quiet"], { maxBuffer: 64 << 20 });
        log(`   indexed in ${((Date.now() - t) / 1000).toFixed(1)} s`);
      }
      let native = null; // the same for jikji and jikji-base: one bundle
      for (const system of o.systems) {
        const base = system === "jikji-base";
        const web = isJikji(system) ? jikjiWeb(base ? { web: o.baseWeb } : o, path.join(dir, `${system}-web`)) : site;
        const pkg = base ? o.basePkg : o.pkg;
        const server = await startServer({ bin: o.bin, bundle, web, pkg, model: "/nonexistent", cwd: ROOT, log: () => {}, tag: "bench", track: (p) => servers.push(p) });
        log(`== ${c} × ${system}: replaying ${prepared.queries.length} queries at ${server.url}`);
        const replayed = await replay(o, system, server.url, prepared.queries);
        const cold = [];
        const step = Math.max(1, Math.floor(prepared.queries.length / Math.max(1, o.coldSample)));
        for (let i = 0; i < o.coldSample && i * step < prepared.queries.length; i++) {
          const q = prepared.queries[i * step];
          const r = await replay(o, system, server.url, [q]);
          const es = r.runs[0].entries;
          cold.push({ q: q.text, transfer: sum(es.map((e) => e.transfer)), requests: es.length, rounds: rounds(es) });
        }
        server.proc.kill();
        if (isJikji(system)) native ??= await nativeRuns(o, bundle, prepared.queries);
        results.push(summarize(system, c, prepared, replayed, cold, isJikji(system) ? native : null));
        const f = results[results.length - 1].first;
        log(`   first query: ${(f.transfer / 1e3).toFixed(1)} kB in ${f.requests} requests`);
      }
    }
  } finally {
    for (const p of servers) if (p.exitCode === null) p.kill();
  }
  print(header, results);
  if (o.json) writeFileSync(o.json, JSON.stringify({ ...header, results }, null, 2));
}

function print(h, results) {
  const kB = (b) => (b == null || Number.isNaN(b) ? "—" : (b / 1e3).toFixed(1));
  const ms = (x) => (x == null || Number.isNaN(x) ? "—" : x.toFixed(1));
  console.log(`\nscripts/bench-paged at ${h.commit}, ${h.pagefind}, load ${h.load}, ${h.date}`);
  console.log("bytes in kB (1000 B): transfer as sent (headers + body) / raw (body after HTTP decoding)");
  const rows = [
    ["system", "corpus", "q", "first kB (tr/raw)", "req", "rounds", "cold med/max kB", "later mean/med kB", "later req", "later rounds", "p50 ms", "p90 ms", "nDCG@10"],
  ];
  for (const r of results) {
    rows.push([
      r.system,
      r.corpus,
      String(r.queries),
      `${kB(r.first.transfer)} / ${kB(r.first.raw)}`,
      String(r.first.requests),
      r.first.engineRounds != null ? `${r.first.rounds} (${r.first.engineRounds} after entry)` : String(r.first.rounds),
      r.cold ? `${kB(r.cold.medianTransfer)} / ${kB(r.cold.maxTransfer)} (n=${r.cold.n})` : "—",
      r.later ? `${kB(r.later.meanTransfer)} / ${kB(r.later.medianTransfer)}` : "—",
      r.later ? r.later.meanRequests.toFixed(1) : "—",
      r.later ? `${r.later.medianRounds} (max ${r.later.maxRounds})` : "—",
      ms(r.latency.p50),
      ms(r.latency.p90),
      r.ndcg10 == null ? "—" : r.ndcg10.toFixed(3),
    ]);
  }
  const w = rows[0].map((_, i) => Math.max(...rows.map((row) => row[i].length)));
  for (const row of rows) console.log(row.map((c, i) => c.padEnd(w[i])).join("  "));
  console.log("\nfirst query by kind: requests, transfer / raw kB");
  for (const r of results) {
    const parts = Object.entries(r.first.byCategory).map(([k, v]) => `${k} ${v.requests}× ${kB(v.transfer)}/${kB(v.raw)}`);
    console.log(`  ${r.system} ${r.corpus}: ${parts.join(", ")}`);
  }
  console.log("\nengine (static): wasm, JS — transfer / raw kB");
  for (const r of results) {
    const s = (x) => (x ? `${kB(x.transfer)} / ${kB(x.raw)} (${x.requests} files)` : "—");
    console.log(`  ${r.system} ${r.corpus}: wasm ${s(r.static.wasm)}; JS ${s(r.static.js)}`);
  }
  for (const r of results)
    if (r.native)
      console.log(
        `\n${r.system} ${r.corpus}: the browser's top ${TOP} equals native jikji search for ${r.native.sameTop10} of ${r.queries} queries` +
          (r.native.ndcg10 == null ? "" : `; native nDCG@10 ${r.native.ndcg10.toFixed(3)}`),
      );
  for (const r of results) if (r.pageCache) console.log(`\npage cache after the replay (${r.corpus}): ${JSON.stringify(r.pageCache)}`);
}

main().catch((e) => {
  if (e instanceof UsageError) {
    console.error(`bench-paged: ${e.message}`);
    process.exit(2);
  }
  console.error(`bench-paged: ${process.env.JIKJI_BENCH_DEBUG ? e.stack : e.message}`);
  process.exit(1);
});

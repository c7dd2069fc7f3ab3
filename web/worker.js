// Jikji search worker (module worker). Holds the wasm Engine (BM25 only: ENGINE/jikji_engine_bg.wasm)
// and, once a dense or hybrid search is asked, the dense engine (ENGINE/dense/jikji_engine*: the
// same engine built with dense and hybrid search, opened on the same entry) and the query model
// (ENGINE/qmodel/, ~160 kB wasm, weights from the bundle's own query-model pages); fetches the
// bundle's pages as queries need them. A BM25-only visitor never downloads the dense engine.
//
// Protocol (main → worker):   {id, type: "open", bundleUrl, cacheBudget?, engineUrl, integrity}
//                             {id, type: "loadModel"}
//                             {id, type: "search", query, mode, topK, includeArchived, minScore?, fusion?,
//                              filters?: {tier?: "N"|"A-B", lang?: "ko,en", folder?: string}, vector?,
//                              queryVector?, nprobe?, rescore?}
//                             {id, type: "loadDense", prefetch?}
//                             {id, type: "cacheStats"}
//                             {id, type: "facets"}
// Replies (worker → main):    {id, ok: true, result}      open: {summary: JSON string, modelBytes: number | null, stats}
//                                                         search: the SearchResult object + stats (+ queryVector,
//                                                                 queryTokens when vector and dense/hybrid)
//                                                         (each hit with label and snippet: addDisplay)
//                                                         loadDense: {ms, pages, stats} (the once pages' fetch)
//                                                         facets: {tiers, untiered, langs, folders}
//                                                         cacheStats: {engine: {pages, bytes, hits, misses}, session,
//                                                                      model: {requests, transfer, stored, cached, cachedBytes, rowPages},
//                                                                      memory: {engine, dense, model} (wasm memory bytes)}
//                                                         (dense: the dense engine's counters, null before it is loaded)
//                             {id, ok: false, error}      error: message string
//                             {id, type: "progress", phase, loaded, total, stage?, ...}
// bundleUrl and engineUrl are absolute URLs ending in "/". engineUrl is the folder of the engine's
// wasm (jikji_engine_bg.wasm), of the dense engine (dense/…) and of the query model (qmodel/…);
// integrity is null (no check) or the `files` map of its integrity.json ({"jikji_engine_bg.wasm":
// "sha256-<base64>", …}): every wasm and lazily loaded glue file is fetched, its SHA-256 compared
// with the map, and only then used (the wasm bytes checked are the bytes instantiated; a JS glue
// file is checked, then imported from the same URL, so it comes from the HTTP cache just filled).
//
// This file is a source: what is served is scripts/build-js's bundle of it (pkg/web/worker.js,
// minified), which holds pages.js and the BM25 engine's wasm-bindgen glue (pkg/jikji_engine.js,
// imported below) in one file, so the first BM25 query loads one worker script and the wasm. The
// page checks that one file against integrity.json ("worker.js") before starting it. The dense
// engine's and the query model's glue stay separate files, imported only when first needed.
//
// A bundle is format v2 (FORMAT.md, "Format 2"; docs/design/paged-bundle-v2.md §12): the entry
// file `jikji.json` (fetched with cache: "no-cache", so a new build is seen at once) and
// immutable pages `p/<name>`. A search runs the engine; while it answers {"need": [names]},
// every named page is fetched in parallel (one fetch per page, shared by concurrent queries),
// decoded (48-byte header; codec 1 = deflate-raw, inflated by pages.js — inflate.js for small
// pages, DecompressionStream for large ones — and bounded by the header's raw_len), checked against its SHA-256 and name with crypto.subtle
// (verifyPage: the engine wasm has no SHA-256), given to the engine with add_page, and the query runs
// again, at most MAX_ROUNDS times. Per query the worker counts rounds, requests and bytes:
// `transfer` from Resource Timing's transferSize (headers + body as sent; 0 for an HTTP-cache
// hit), `stored` (page bytes received) and `raw` (page bodies after inflating). They come
// with the result as `stats` and as progress events of phase "query".
//
// Format v1 bundles (`manifest.json`) are refused with a message saying to rebuild.
//
// loadModel: fetches the bundle's query-model pages (layers, tokenizer, row map; see "the query
// model" below), Cache Storage first. Dense and hybrid searches then tokenize the query, fetch
// its row pages (stats.model counts them), embed it and pass the vector to
// Engine.search_with_vector; the vector pages (`v-…`) come through the same need → fetch loop,
// so BM25 never downloads them.
//
// Query vectors from elsewhere (the caller's own embedding, and scripts/bench-ivf-browser, which
// measures search time without the query embedding): a dense or hybrid "search" with `queryVector`
// (an array of numbers, the model's dimension, L2-normalised) passes it to the engine as it is and
// neither loads nor runs the query model; `nprobe` (> 0) sets the dense index's lists per query
// for that search (Engine.set_nprobe; absent or 0: the bundle's), `rescore` (> 0) a binary index's
// oversampling (Engine.set_rescore; absent or 0: the bundle's). "loadDense" loads the dense
// engine and, unless `prefetch` is false, fetches its once-per-bundle pages as loadModel does
// (centroids, background sample), without the query model. The search's stats also say where its
// time went: engineMs (the engine's passes, JSON parse included), lastPassMs (its final pass),
// fetchMs (waiting for page rounds), and per page fetched, summed over the round's parallel pages:
// pageNetMs (request to body read), pageDecodeMs (header check + inflate), pageVerifyMs
// (SHA-256), pageAddMs (add_page: the copy into wasm and the engine's checks); roundPages lists
// the pages asked per round, roundMs per round [ms until its last page body was read, ms until
// every page was added] (from the round's start).

import { MAX_PAGE, PAGE_HEADER_LEN, decodePage, verifyPage } from "./pages.js";
// The BM25 engine's glue, as wasm-bindgen writes it into pkg/ (scripts/build-wasm); bundled into the
// served worker by scripts/build-js (its --pkg names the folder).
import * as engineGlue from "../pkg/jikji_engine.js";

/** Set by "open": the engine folder (URL ending in "/") and the integrity map (or null). */
let engineBase = null;
let integrity = null;

/** The bundle's entry file (format v2). */
const ENTRY = "jikji.json";
/** Largest entry file accepted. */
const MAX_ENTRY = 16 << 20;
/** Fetch rounds per query before giving up (a query needs 3–4; more means the cache thrashes). */
const MAX_ROUNDS = 8;
/** Page names the engine may ask for: a kind letter, "-", hex digits, then "-" and a number for numbered pages. */
const PAGE_NAME = /^[a-z]-[0-9a-f]{1,32}(-[0-9]{1,10})?$/;

let enginePromise = null; // Promise<Engine>
let engineWasm = null; // the engine's wasm exports (its memory, for cacheStats)
let denseModPromise = null; // Promise<{mod, exports}> of the dense engine, once a dense search is asked
let denseEngine = null; // the dense Engine opened on the open bundle's entry, or null
let denseWasm = null; // the dense engine's wasm exports
let entryBytes = null; // the open bundle's jikji.json, for opening the dense engine on it
let cacheBudgetBytes = null; // the cache budget given to "open", for the dense engine too
let bundleOpen = false;
let bundleBase = null; // the open bundle's URL, ending in "/"
/** Page name → Promise of {transfer, stored, raw} while it is being fetched and added. */
const inflight = new Map();
/** Since the bundle was opened: requests made and bytes received. */
const session = { requests: 0, transfer: 0, stored: 0, raw: 0, pages: 0 };

function errorMessage(e) {
  if (e instanceof Error) return e.message || String(e);
  if (typeof e === "string") return e;
  try {
    return JSON.stringify(e);
  } catch {
    return String(e);
  }
}

function base64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/**
 * The bytes of engine file `name` (relative to engineBase) after checking them against the
 * integrity map: an Error naming the file if it is not listed or its SHA-256 differs.
 */
async function verifiedFile(name) {
  const url = new URL(name, engineBase).href;
  const res = await fetchOk(url, `engine file ${name}`);
  const bytes = new Uint8Array(await res.arrayBuffer());
  if (integrity) {
    const want = integrity[name];
    if (typeof want !== "string" || !want.startsWith("sha256-")) {
      throw new Error(`integrity check: integrity.json lists no sha256 for ${name}; refusing to run it`);
    }
    if (!globalThis.crypto?.subtle) {
      throw new Error(`integrity check of ${name} needs crypto.subtle (a secure context: https or localhost)`);
    }
    const got = `sha256-${base64(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)))}`;
    if (got !== want) {
      throw new Error(
        `integrity check failed for ${url}: its SHA-256 is ${got}, integrity.json says ${want}; ` +
          "refusing to run a modified or mismatched engine (rebuild with scripts/build-wasm, or reinstall the package)",
      );
    }
  }
  return { url, bytes };
}

/**
 * Instantiates a wasm-bindgen module with the checked bytes of `wasm`: `js` is the glue, either
 * a module already imported (the BM25 engine's, bundled into this worker) or the name of its
 * file in engineBase, checked and then imported.
 */
async function loadWasmModule(js, wasm, what) {
  let mod = typeof js === "string" ? null : js;
  if (!mod) {
    try {
      const glue = await verifiedFile(js);
      mod = await import(glue.url);
    } catch (e) {
      throw new Error(`cannot load ${what} (${new URL(js, engineBase).pathname}): ${errorMessage(e)}`);
    }
  }
  let bytes;
  try {
    bytes = (await verifiedFile(wasm)).bytes;
  } catch (e) {
    throw new Error(`cannot load ${what} (${new URL(wasm, engineBase).pathname}): ${errorMessage(e)}`);
  }
  let exports;
  try {
    exports = await mod.default({ module_or_path: bytes });
  } catch (e) {
    throw new Error(`cannot start ${what} (wasm): ${errorMessage(e)}`);
  }
  return { mod, exports };
}

function getEngine() {
  if (!enginePromise) {
    if (!engineBase) return Promise.reject(new Error("open a bundle first (the engine URL comes with it)"));
    enginePromise = (async () => {
      const { mod, exports } = await loadWasmModule(engineGlue, "jikji_engine_bg.wasm", "the search engine");
      engineWasm = exports;
      return new mod.Engine();
    })().catch((e) => {
      enginePromise = null;
      throw e;
    });
  }
  return enginePromise;
}

/**
 * The dense engine (ENGINE/dense/: the engine built with dense and hybrid search) opened on the
 * open bundle's entry, loaded on the first dense or hybrid search. It keeps its own page
 * cache (pages it asks for that the BM25 engine fetched before come from the HTTP cache).
 */
async function getDenseEngine() {
  if (!denseModPromise) {
    denseModPromise = loadWasmModule("dense/jikji_engine.js", "dense/jikji_engine_bg.wasm", "the dense search engine").catch(
      (e) => {
        denseModPromise = null;
        throw e;
      },
    );
  }
  const { mod, exports } = await denseModPromise;
  denseWasm = exports;
  if (!denseEngine) {
    if (!entryBytes) throw new Error("open the bundle before searching");
    const e = new mod.Engine();
    try {
      e.open_entry(entryBytes);
    } catch (err) {
      throw new Error(`bundle ${ENTRY} (dense engine): ${errorMessage(err)}`);
    }
    if (cacheBudgetBytes != null) e.set_cache_budget(cacheBudgetBytes);
    denseEngine = e;
  }
  return denseEngine;
}

/** Join a base URL (ending in "/") and a relative file name, escaping each path segment. */
function fileUrl(base, name) {
  const rel = name.split("/").map(encodeURIComponent).join("/");
  return new URL(rel, base).href;
}

async function fetchOk(url, what, signal = undefined, init = {}) {
  let res;
  try {
    res = await fetch(url, { ...init, signal });
  } catch (e) {
    throw new Error(`${what}: network error fetching ${url}: ${errorMessage(e)}`);
  }
  if (!res.ok) throw new Error(`${what}: HTTP ${res.status} for ${url}`);
  return res;
}

/**
 * Read a response body into one Uint8Array, calling onBytes(n) for every chunk.
 * expected: the size to preallocate (Content-Length or the manifest's), or 0 if unknown.
 * limit: the most bytes accepted; a longer body is an Error naming `what` (reading stops).
 */
async function readBody(res, expected, onBytes, limit = Infinity, what = "response") {
  const cap = Number.isFinite(limit) ? limit : Number.MAX_SAFE_INTEGER;
  if (!res.body) {
    const buf = new Uint8Array(await res.arrayBuffer());
    if (buf.length > cap) throw new Error(`${what}: ${buf.length} bytes, more than the ${limit} accepted`);
    onBytes(buf.length);
    return buf;
  }
  const reader = res.body.getReader();
  let buf = new Uint8Array(Math.max(1, Math.min(expected > 0 ? expected : 1 << 16, cap)));
  let len = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (len + value.length > cap) {
      reader.cancel().catch(() => {});
      throw new Error(`${what}: more than the ${limit} bytes accepted`);
    }
    if (len + value.length > buf.length) {
      const grown = new Uint8Array(Math.min(Math.max(buf.length * 2, len + value.length), cap));
      grown.set(buf.subarray(0, len));
      buf = grown;
    }
    buf.set(value, len);
    len += value.length;
    onBytes(value.length);
  }
  return len === buf.length ? buf : buf.slice(0, len);
}

/** Throttled progress reporter: at most ~20 messages a second, plus the final one. */
function progressReporter(id, phase) {
  let last = 0;
  return (loaded, total, force = false, stage = undefined) => {
    const now = Date.now();
    if (!force && now - last < 50) return;
    last = now;
    const msg = { id, type: "progress", phase, loaded, total: Math.max(total, loaded) };
    if (stage) msg.stage = stage;
    self.postMessage(msg);
  };
}

// ---------------------------------------------------------------- Resource Timing

// The worker's resource timing buffer holds 250 entries by default; it is emptied between
// queries when no page fetch is running, so every fetch still finds its own entry.
function tidyTimings() {
  if (inflight.size === 0 && typeof performance.clearResourceTimings === "function") {
    if (performance.getEntriesByType("resource").length > 200) performance.clearResourceTimings();
  }
}

/**
 * Bytes the response for `url` took on the wire (headers + body, RFC 9110 framing), from
 * Resource Timing's transferSize: 0 when it came from the HTTP cache. Falls back to `bodyLen`
 * when the browser keeps no entry for it (then `known` is false).
 */
async function transferOf(url, bodyLen) {
  for (let attempt = 0; attempt < 3; attempt++) {
    const entries = performance.getEntriesByName(url, "resource");
    const e = entries[entries.length - 1];
    // An entry with every size 0 while a body came is opaque (cross-origin without
    // Timing-Allow-Origin): its sizes say nothing.
    if (e && (e.transferSize > 0 || e.encodedBodySize > 0 || bodyLen === 0)) {
      return { bytes: e.transferSize, known: true };
    }
    if (e) break;
    await new Promise((r) => setTimeout(r, 0)); // the entry is queued at response end
  }
  return { bytes: bodyLen, known: false };
}

// ---------------------------------------------------------------- pages

/** A page request with no complete answer after this long is abandoned and made again. */
const PAGE_TIMEOUT_MS = 8000;
/** Attempts per page before the query fails. */
const PAGE_ATTEMPTS = 3;

/** Fetches page `name`, decodes it and adds it to the engine; resolves to its byte counts. */
async function loadPage(engine, name) {
  if (!PAGE_NAME.test(name)) throw new Error(`the engine asked for a page with an invalid name ${JSON.stringify(name)}`);
  const url = fileUrl(bundleBase, `p/${name}`);
  // Pages are immutable (named by content and build): the HTTP cache may answer, and a
  // request that stalls (a server that leaves one connection unanswered) is safe to repeat.
  let stored;
  const t0 = performance.now();
  for (let attempt = 1; ; attempt++) {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), PAGE_TIMEOUT_MS);
    try {
      const res = await fetchOk(url, `page p/${name}`, abort.signal);
      stored = await readBody(res, Number(res.headers.get("Content-Length")) || 0, () => {}, PAGE_HEADER_LEN + MAX_PAGE, `page p/${name}`);
      break;
    } catch (e) {
      if (!abort.signal.aborted || attempt >= PAGE_ATTEMPTS) {
        throw abort.signal.aborted
          ? new Error(`page p/${name}: no answer within ${PAGE_TIMEOUT_MS / 1000} s, ${attempt} times`)
          : e;
      }
    } finally {
      clearTimeout(timer);
    }
  }
  const t1 = performance.now();
  const transfer = await transferOf(url, stored.length);
  const t2 = performance.now();
  const bytes = await decodePage(name, stored);
  const t3 = performance.now();
  await verifyPage(name, bytes); // the digest and the name: the engine wasm has no SHA-256
  const t4 = performance.now();
  try {
    engine.add_page(name, bytes);
  } catch (e) {
    throw new Error(`page p/${name}: ${errorMessage(e)}`);
  }
  const ms = { net: t1 - t0, decode: t3 - t2, verify: t4 - t3, add: performance.now() - t4, bodyAt: t1 };
  return { transfer: transfer.bytes, transferKnown: transfer.known, stored: stored.length, raw: bytes.length - PAGE_HEADER_LEN, ms };
}

/**
 * Page `name` in the engine: joins a fetch already running for it (another query's), else
 * starts one. The bytes count for the query that made the request.
 */
function ensurePage(engine, name, stats) {
  // Each engine has its own page cache: a fetch for the other one does not fill this one.
  const key = engine === denseEngine ? `dense ${name}` : name;
  let p = inflight.get(key);
  if (p) {
    stats.shared++;
    return p.then(() => {});
  }
  p = loadPage(engine, name).finally(() => inflight.delete(key));
  inflight.set(key, p);
  return p.then((c) => {
    stats.requests++;
    stats.pages++;
    stats.transfer += c.transfer;
    stats.stored += c.stored;
    stats.raw += c.raw;
    stats.pageNetMs = (stats.pageNetMs || 0) + c.ms.net;
    stats.pageDecodeMs = (stats.pageDecodeMs || 0) + c.ms.decode;
    stats.pageVerifyMs = (stats.pageVerifyMs || 0) + c.ms.verify;
    stats.pageAddMs = (stats.pageAddMs || 0) + c.ms.add;
    stats.lastBodyAt = Math.max(stats.lastBodyAt || 0, c.ms.bodyAt);
    if (!c.transferKnown) stats.transferEstimated = true;
    session.requests++;
    session.pages++;
    session.transfer += c.transfer;
    session.stored += c.stored;
    session.raw += c.raw;
  });
}

// ---------------------------------------------------------------- open

async function openBundle(id, bundleUrl, cacheBudget, engineUrl, integrityMap) {
  if (!engineBase) {
    engineBase = String(engineUrl);
    integrity = integrityMap && typeof integrityMap === "object" ? integrityMap : null;
  }
  const url = fileUrl(bundleUrl, ENTRY);
  // The entry is fetched while the engine's wasm loads (one round trip less before the first query).
  const entryResponse = fetch(url, { cache: "no-cache" });
  entryResponse.catch(() => {}); // awaited below, unless the engine fails first
  const engine = await getEngine();
  if (typeof engine.open_entry !== "function" || typeof engine.add_page !== "function") {
    throw new Error("this build of the search engine cannot read format 2 bundles (no open_entry): rebuild pkg/ with scripts/build-wasm");
  }
  const report = progressReporter(id, "bundle");
  let res;
  try {
    res = await entryResponse;
  } catch (e) {
    throw new Error(`bundle ${ENTRY}: network error fetching ${url}: ${errorMessage(e)}`);
  }
  if (res.status === 404) {
    // A format 1 bundle has manifest.json instead.
    let v1 = null;
    try {
      v1 = await fetch(fileUrl(bundleUrl, "manifest.json"), { cache: "no-cache", method: "HEAD" });
    } catch {
      v1 = null;
    }
    if (v1?.ok) {
      throw new Error(
        `the bundle at ${bundleUrl} is format v1 (manifest.json, no ${ENTRY}): this page reads format v2 only; ` +
          "rebuild it with the current jikji (jikji build CORPUS --out BUNDLE writes format v2)",
      );
    }
  }
  if (!res.ok) throw new Error(`bundle ${ENTRY}: HTTP ${res.status} for ${url}`);
  let loaded = 0;
  const entry = await readBody(res, Number(res.headers.get("Content-Length")) || 0, (n) => {
    loaded += n;
    report(loaded, loaded);
  }, MAX_ENTRY, `bundle ${ENTRY}`);
  const transfer = await transferOf(url, entry.length);
  report(loaded, loaded, true);
  let summary;
  try {
    summary = engine.open_entry(entry);
  } catch (e) {
    throw new Error(`bundle ${ENTRY} (${url}): ${errorMessage(e)}`);
  }
  if (cacheBudget != null) engine.set_cache_budget(Number(cacheBudget));
  cacheBudgetBytes = cacheBudget != null ? Number(cacheBudget) : null;
  entryBytes = entry;
  // The dense engine, if loaded, is opened on this entry at the next dense search.
  denseEngine = null;
  try {
    entryRoot = JSON.parse(new TextDecoder().decode(entry));
  } catch (e) {
    throw new Error(`bundle ${ENTRY} (${url}): not JSON: ${errorMessage(e)}`);
  }
  bundleBase = bundleUrl;
  bundleOpen = true;
  if (qmodel) {
    qmodel.free();
    qmodel = null;
  }
  modelPromise = null;
  Object.assign(modelSession, { requests: 0, transfer: 0, stored: 0, cached: 0, cachedBytes: 0 });
  inflight.clear();
  Object.assign(session, { requests: 1, transfer: transfer.bytes, stored: entry.length, raw: entry.length, pages: 0 });
  // What loading the query model downloads, for "Load semantic search (13.4 MB)".
  const modelBytes = modelDownloadBytes(entryRoot?.pages?.query_model);
  return { summary, modelBytes, stats: { requests: 1, transfer: transfer.bytes, transferEstimated: !transfer.known, stored: entry.length } };
}

// ---------------------------------------------------------------- the query model

// The query model is the bundle's own pages (FORMAT.md, "Query model pages";
// docs/design/query-model-pack.md §6): the entry's pages.query_model names 12 layer pages
// (m-…), the tokenizer pages (k-…) and the row map (u-…), fetched in parallel on loadModel;
// each query then fetches the row pages (r-…) of its token ids that are not in yet. They go
// through the small query-model wasm (ENGINE/qmodel/, ~160 kB), which verifies every page
// (SHA-256, name, sizes) and embeds the query (Q4_0 forward pass, simd128, one thread: the
// page has no threaded build, so cross-origin isolation changes nothing).
//
// Every model page is kept in Cache Storage (cache MODEL_CACHE, keyed by the page's URL):
// pages are named by content (m/k/u) or by a hash of the bundle's rows (r), so a second
// visit, or another tab, reads them from there and fetches no model bytes; a cached page
// that fails verification is dropped and fetched again.

/** Cache Storage name of the model pages. */
const MODEL_CACHE = "jikji-model-pages-v1";

let modelPromise = null; // Promise<"true">; reset on failure so a retry can start over
let qmod = null; // the query-model module, once its wasm is instantiated
let qmodel = null; // PagedModel, once its base pages are in
let entryRoot = null; // the open bundle's entry (parsed JSON)
/** Model pages fetched since the bundle was opened (network and Cache Storage). */
const modelSession = { requests: 0, transfer: 0, stored: 0, cached: 0, cachedBytes: 0 };

function loadModel(id) {
  if (!modelPromise) {
    modelPromise = fetchAndLoadModel(id).catch((e) => {
      modelPromise = null;
      throw e;
    });
  }
  return modelPromise;
}

let modelCache; // Promise<Cache|null>
function openModelCache() {
  if (modelCache === undefined) {
    modelCache = (typeof caches === "undefined" ? Promise.resolve(null) : caches.open(MODEL_CACHE)).catch(() => null);
  }
  return modelCache;
}

/** Model page name → Promise while it is being fetched and added (shared by concurrent queries). */
const modelInflight = new Map();

/**
 * Fetches model page `name` (Cache Storage first, else the network, then stored in Cache
 * Storage), decodes it and adds it to the query model; counts bytes into `stats`.
 */
function ensureModelPage(name, stats, onBytes = () => {}) {
  let p = modelInflight.get(name);
  if (!p) {
    p = loadModelPage(name, onBytes).finally(() => modelInflight.delete(name));
    modelInflight.set(name, p);
  }
  return p.then((c) => {
    if (!stats) return;
    if (c.cached) {
      stats.cached++;
      stats.cachedBytes += c.stored;
    } else {
      stats.requests++;
      stats.transfer += c.transfer;
      stats.stored += c.stored;
    }
  });
}

async function loadModelPage(name, onBytes) {
  if (!PAGE_NAME.test(name)) throw new Error(`the query model asked for a page with an invalid name ${JSON.stringify(name)}`);
  const url = fileUrl(bundleBase, `p/${name}`);
  const cache = await openModelCache();
  const limit = PAGE_HEADER_LEN + MAX_PAGE;
  if (cache) {
    let hit = null;
    try {
      hit = await cache.match(url);
    } catch {
      hit = null;
    }
    if (hit) {
      try {
        const stored = await readBody(hit, 0, onBytes, limit, `page p/${name} (Cache Storage)`);
        qmodel.add_page(name, await decodePage(name, stored));
        modelSession.cached++;
        modelSession.cachedBytes += stored.length;
        return { cached: true, stored: stored.length, transfer: 0 };
      } catch (e) {
        // A damaged cache entry: forget it and fetch the page again.
        console.warn(`page p/${name} in Cache Storage: ${errorMessage(e)}; fetching it again`);
        await cache.delete(url).catch(() => {});
      }
    }
  }
  let stored;
  for (let attempt = 1; ; attempt++) {
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), MODEL_PAGE_TIMEOUT_MS);
    try {
      const res = await fetchOk(url, `query model page p/${name}`, abort.signal);
      stored = await readBody(res, Number(res.headers.get("Content-Length")) || 0, onBytes, limit, `page p/${name}`);
      break;
    } catch (e) {
      if (!abort.signal.aborted || attempt >= PAGE_ATTEMPTS) {
        throw abort.signal.aborted ? new Error(`page p/${name}: no answer within ${MODEL_PAGE_TIMEOUT_MS / 1000} s, ${attempt} times`) : e;
      }
    } finally {
      clearTimeout(timer);
    }
  }
  const transfer = await transferOf(url, stored.length);
  try {
    qmodel.add_page(name, await decodePage(name, stored));
  } catch (e) {
    throw new Error(`page p/${name}: ${errorMessage(e)}`);
  }
  if (cache) {
    // Only verified pages are kept.
    await cache
      .put(url, new Response(stored, { headers: { "Content-Type": "application/octet-stream" } }))
      .catch((e) => console.warn(`page p/${name}: not kept in Cache Storage: ${errorMessage(e)}`));
  }
  modelSession.requests++;
  modelSession.transfer += transfer.bytes;
  modelSession.stored += stored.length;
  return { cached: false, stored: stored.length, transfer: transfer.bytes };
}

/** A model page (a layer page is ~1 MB) with no complete answer after this long is asked again. */
const MODEL_PAGE_TIMEOUT_MS = 60000;

async function fetchAndLoadModel(id) {
  const engine = await getEngine();
  if (!bundleOpen) throw new Error("open the bundle before loading the model");
  const expected = engine.model_sha256();
  if (!expected) throw new Error("this bundle has no model: only bm25 search is available");
  const root = entryRoot?.pages?.query_model;
  if (!root) {
    throw new Error(
      "this bundle carries no query model (pages.query_model in jikji.json): rebuild it with the query-model pack present " +
        "(jikji model-pack --e5s1 models/e5-small/e5-small-q4.bin, then jikji build): only bm25 search is available",
    );
  }
  const report = progressReporter(id, "model");
  // Dense and hybrid searches run in the dense engine: fetch it alongside the model.
  const dense = getDenseEngine();
  dense.catch(() => {});
  // Then the pages every dense query reads whatever the query (the dense index's centroid and
  // background sample pages), in parallel with the model's pages, so the first dense query's
  // index rounds are those of a warm cache (docs/design/dense-pq.md §5.2). A failure here only
  // costs that query a round: it fetches them itself.
  const once = dense.then(prefetchDensePages).catch((e) => console.warn(`dense index pages not prefetched: ${errorMessage(e)}`));
  if (!qmod) {
    const { mod } = await loadWasmModule(
      "qmodel/jikji_query_model_wasm.js",
      "qmodel/jikji_query_model_wasm_bg.wasm",
      "the query model",
    );
    qmod = mod;
  }
  let m;
  try {
    m = new qmod.PagedModel(JSON.stringify(root), expected);
  } catch (e) {
    throw new Error(`bundle ${ENTRY}: ${errorMessage(e)}`);
  }
  if (qmodel) qmodel.free();
  qmodel = m;
  const base = qmodel.missing_base();
  // The pages' stored sizes (raw sizes, an upper bound, in bundles written before them).
  let total = modelDownloadBytes(root) ?? 0;
  let loaded = 0;
  report(0, total, true);
  const onBytes = (n) => {
    loaded += n;
    if (loaded > total) total = loaded;
    report(loaded, total);
  };
  await Promise.all(base.map((n) => ensureModelPage(n, null, onBytes)));
  report(loaded, loaded, true, "init");
  if (!qmodel.is_ready()) throw new Error("the query model's pages were added but it is not complete");
  await dense;
  await once;
  return "true";
}

/**
 * Bytes the query model's layer and tokenizer pages download: their stored sizes
 * (pages.query_model.layers_stored + tokenizer_stored), or, in bundles written before those
 * fields, the raw sizes (layers_bytes + tokenizer_bytes, an upper bound). null without a model.
 */
function modelDownloadBytes(root) {
  if (!root) return null;
  const stored = Number(root.layers_stored) + Number(root.tokenizer_stored);
  const n = Number.isFinite(stored) && stored > 0 ? stored : Number(root.layers_bytes) + Number(root.tokenizer_bytes);
  return Number.isFinite(n) && n > 0 ? n : null;
}

/**
 * Fetches into the dense engine the pages its dense index reads for every query
 * (`dense_once_pages`: centroid pages and background sample page; none without an index),
 * counted in the session's stats like any page.
 */
async function prefetchDensePages(engine) {
  if (typeof engine.dense_once_pages !== "function") return null;
  const names = engine.dense_once_pages();
  const stats = { rounds: 0, requests: 0, pages: 0, transfer: 0, stored: 0, raw: 0, shared: 0, transferEstimated: false };
  await Promise.all(names.map((n) => ensurePage(engine, n, stats)));
  return stats;
}

/**
 * "loadDense": the dense engine, and (unless prefetch is false) its once-per-bundle pages, without
 * the query model (for searches given a queryVector). Resolves to {ms, pages, stats}.
 */
async function loadDense(prefetch) {
  await getEngine();
  if (!bundleOpen) throw new Error("open the bundle before loading the dense engine");
  const t0 = performance.now();
  const engine = await getDenseEngine();
  const engineMs = performance.now() - t0;
  const stats = prefetch === false ? null : await prefetchDensePages(engine);
  return { engineMs, ms: performance.now() - t0, pages: stats ? stats.pages : 0, stats };
}

/** A "need" answer's page names, or null for a SearchResult. Throws on a malformed need list. */
function needOf(result) {
  if (!result || typeof result !== "object" || !("need" in result) || "hits" in result) return null;
  const need = result.need;
  if (!Array.isArray(need) || need.length === 0 || !need.every((n) => typeof n === "string")) {
    throw new Error(`the engine answered an invalid page list: ${JSON.stringify(need).slice(0, 200)}`);
  }
  return need;
}

async function search(id, query, mode, topK, includeArchived, minScore, fusion, filters, wantVector, queryVector, nprobe, rescore) {
  const bm25Engine = await getEngine();
  if (!bundleOpen) throw new Error("open the bundle before searching");
  const dense = ["dense", "hybrid"].includes(String(mode).toLowerCase());
  const engine = dense ? await getDenseEngine() : bm25Engine;
  // The clock for expiry filtering (front matter `expires`).
  engine.set_now(Date.now());
  engine.set_include_archived(Boolean(includeArchived));
  engine.set_min_score(Number(minScore) || 0);
  // "weighted" is the engine's default: the bundle's weight, RRF on a bundle without a dense calibration.
  engine.set_fusion(fusion == null ? "weighted" : String(fusion));
  const f = filters || {};
  const opt = (v) => (v == null || v === "" ? undefined : String(v));
  engine.set_filters(opt(f.tier), opt(f.lang), opt(f.folder));
  if (dense && typeof engine.set_nprobe === "function") engine.set_nprobe(Math.max(0, Math.floor(Number(nprobe) || 0)));
  if (dense && typeof engine.set_rescore === "function") engine.set_rescore(Math.max(0, Math.floor(Number(rescore) || 0)));
  const m = String(mode);
  const stats = { rounds: 0, requests: 0, pages: 0, transfer: 0, stored: 0, raw: 0, shared: 0, transferEstimated: false };
  const t0 = performance.now();
  // Without the query model the engine answers dense/hybrid with "needs the embedding model".
  let qvec = null;
  let ids = null;
  if (dense && queryVector != null) {
    // The caller's own query vector: no query model (see the header).
    if (!(Array.isArray(queryVector) || ArrayBuffer.isView(queryVector)) || !Array.from(queryVector).every(Number.isFinite)) {
      throw new Error("queryVector must be an array of finite numbers");
    }
    qvec = Float32Array.from(queryVector);
  } else if (dense && qmodel && qmodel.is_ready()) {
    ids = qmodel.token_ids(String(query));
    const need = qmodel.missing_rows(ids);
    stats.model = { requests: 0, transfer: 0, stored: 0, cached: 0, cachedBytes: 0, rowPages: need.length };
    await Promise.all(need.map((n) => ensureModelPage(n, stats.model)));
    const te = performance.now();
    qvec = qmodel.embed_ids(ids);
    stats.embedMs = performance.now() - te;
    stats.tokens = ids.length;
  }
  stats.engineMs = 0;
  stats.fetchMs = 0;
  stats.roundPages = [];
  stats.roundMs = [];
  for (;;) {
    const tp = performance.now();
    const json = engine.search_with_vector(String(query), qvec, m, Number(topK));
    let result;
    try {
      result = JSON.parse(json);
    } catch (e) {
      throw new Error(`the engine answered invalid JSON: ${errorMessage(e)}`);
    }
    stats.lastPassMs = performance.now() - tp;
    stats.engineMs += stats.lastPassMs;
    const need = needOf(result);
    if (!need) {
      addDisplay(engine, String(query), result);
      stats.ms = performance.now() - t0;
      tidyTimings();
      result.stats = stats;
      if (wantVector && qvec) {
        result.queryVector = Array.from(qvec);
        result.queryTokens = Array.from(ids);
      }
      return result;
    }
    if (stats.rounds >= MAX_ROUNDS) {
      throw new Error(
        `query ${JSON.stringify(String(query))}: the engine still needs ${need.length} page(s) (${need.slice(0, 4).join(", ")}` +
          `${need.length > 4 ? ", …" : ""}) after ${MAX_ROUNDS} rounds of fetching; the page cache budget may be too small for this query`,
      );
    }
    stats.rounds++;
    stats.roundPages.push(need.length);
    const tf = performance.now();
    stats.lastBodyAt = 0;
    await Promise.all(need.map((n) => ensurePage(engine, n, stats)));
    const tEnd = performance.now();
    stats.fetchMs += tEnd - tf;
    stats.roundMs.push([stats.lastBodyAt ? stats.lastBodyAt - tf : 0, tEnd - tf]);
    self.postMessage({
      id,
      type: "progress",
      phase: "query",
      loaded: stats.transfer,
      total: stats.transfer,
      rounds: stats.rounds,
      requests: stats.requests,
      pages: stats.pages,
    });
  }
}

/**
 * Adds to each hit its `label` (readable title) and `snippet` ({parts, cut_start, cut_end}:
 * the window of its text around the best match, parts alternating unmarked and marked) from
 * the engine's `display` (engine-wasm/src/snippet.rs). An engine without it adds nothing.
 */
function addDisplay(engine, query, result) {
  if (typeof engine.display !== "function" || !Array.isArray(result?.hits)) return;
  for (const h of result.hits) {
    try {
      const d = JSON.parse(engine.display(query, String(h.text ?? ""), String(h.source ?? ""), h.title == null ? undefined : String(h.title)));
      h.label = d.label;
      h.snippet = d.snippet;
    } catch (e) {
      console.warn(`snippet of chunk ${h.id}: ${errorMessage(e)}`);
    }
  }
}

/**
 * The bundle's filter values: {tiers: [[tier, chunks]], untiered, langs: [[lang, chunks]],
 * folders: [[folder, chunks]]}, fetching the columns page if the engine asks for it.
 */
async function facets() {
  const engine = await getEngine();
  if (!bundleOpen) throw new Error("open the bundle before asking for its filters");
  if (typeof engine.facets !== "function") throw new Error("this build of the search engine has no facets(): rebuild pkg/ with scripts/build-wasm");
  const stats = { rounds: 0, requests: 0, pages: 0, transfer: 0, stored: 0, raw: 0, shared: 0, transferEstimated: false };
  for (let round = 0; ; round++) {
    let result;
    try {
      result = JSON.parse(engine.facets());
    } catch (e) {
      throw new Error(`the bundle's filter values: ${errorMessage(e)}`);
    }
    const need = needOf(result);
    if (!need) return result;
    if (round >= MAX_ROUNDS) throw new Error(`the bundle's filter values still need ${need.join(", ")} after ${MAX_ROUNDS} rounds`);
    await Promise.all(need.map((n) => ensurePage(engine, n, stats)));
  }
}

async function cacheStats() {
  const engine = await getEngine();
  const e = bundleOpen ? JSON.parse(engine.cache_stats()) : null;
  const d = bundleOpen && denseEngine ? JSON.parse(denseEngine.cache_stats()) : null;
  const memory = {
    engine: engineWasm?.memory ? engineWasm.memory.buffer.byteLength : null,
    dense: denseWasm?.memory ? denseWasm.memory.buffer.byteLength : null,
    model: qmod ? Number(qmod.memory_bytes()) : null,
  };
  return { engine: e, dense: d, session: { ...session }, model: { ...modelSession, rowPages: qmodel ? qmodel.row_pages() : 0 }, memory };
}

self.onmessage = async (ev) => {
  const msg = ev.data || {};
  const { id, type } = msg;
  try {
    let result;
    switch (type) {
      case "open":
        result = await openBundle(id, msg.bundleUrl, msg.cacheBudget, msg.engineUrl, msg.integrity);
        break;
      case "loadModel":
        result = await loadModel(id);
        break;
      case "search":
        result = await search(id, msg.query, msg.mode, msg.topK, msg.includeArchived, msg.minScore, msg.fusion, msg.filters, Boolean(msg.vector), msg.queryVector, msg.nprobe, msg.rescore);
        break;
      case "loadDense":
        result = await loadDense(msg.prefetch);
        break;
      case "cacheStats":
        result = await cacheStats();
        break;
      case "facets":
        result = await facets();
        break;
      default:
        throw new Error(`unknown request type ${JSON.stringify(type)}`);
    }
    self.postMessage({ id, ok: true, result });
  } catch (e) {
    self.postMessage({ id, ok: false, error: errorMessage(e) });
  }
};

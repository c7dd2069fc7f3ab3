// Jikji search worker (module worker). Holds the wasm Engine (BM25 + dense scan) and, once the
// model is asked for, the separate wasm Embedder (tract + tokenizers, ~20 MB); fetches the
// bundle's pages as queries need them, and the model.
//
// Protocol (main → worker):   {id, type: "open", bundleUrl, cacheBudget?}
//                             {id, type: "loadModel", modelUrl}
//                             {id, type: "search", query, mode, topK, includeArchived}
//                             {id, type: "cacheStats"}
// Replies (worker → main):    {id, ok: true, result}      open: {summary: JSON string, stats}
//                                                         search: the SearchResult object + stats
//                                                         cacheStats: {engine: {pages, bytes, hits, misses}, session}
//                             {id, ok: false, error}      error: message string
//                             {id, type: "progress", phase, loaded, total, stage?, ...}
// bundleUrl and modelUrl are absolute URLs ending in "/".
//
// A bundle is format v2 (FORMAT.md, "Format 2"; docs/design/paged-bundle-v2.md §12): the entry
// file `jikji.json` (fetched with cache: "no-cache", so a new build is seen at once) and
// immutable pages `p/<name>`. A search runs the engine; while it answers {"need": [names]},
// every named page is fetched in parallel (one fetch per page, shared by concurrent queries),
// decoded (48-byte header; codec 1 = deflate-raw, inflated with DecompressionStream and
// bounded by the header's raw_len), given to the engine with add_page, and the query runs
// again, at most MAX_ROUNDS times. Per query the worker counts rounds, requests and bytes:
// `transfer` from Resource Timing's transferSize (headers + body as sent; 0 for an HTTP-cache
// hit), `stored` (page bytes received) and `raw` (page bodies after inflating). They come
// with the result as `stats` and as progress events of phase "query".
//
// Format v1 bundles (`manifest.json`) are refused with a message saying to rebuild.
//
// loadModel: fetches model.onnx and tokenizer.json, then (only then) the embedder module and its
// wasm; verifies model.onnx's SHA-256 against the bundle entry; builds the Embedder. Dense and
// hybrid searches embed the query with it and pass the vector to Engine.search_with_vector; the
// vector pages (`v-…`) come through the same need → fetch loop, so BM25 never downloads them.

import { MAX_PAGE, PAGE_HEADER_LEN, decodePage } from "./pages.js";

const ENGINE_URL = new URL("../pkg/jikji_engine.js", import.meta.url);
const EMBED_URL = new URL("../pkg/embed/jikji_embed_wasm.js", import.meta.url);
const EMBED_WASM_URL = new URL("../pkg/embed/jikji_embed_wasm_bg.wasm", import.meta.url);

/** The bundle's entry file (format v2). */
const ENTRY = "jikji.json";
/** Largest entry file accepted. */
const MAX_ENTRY = 16 << 20;
/** Fetch rounds per query before giving up (a query needs 3–4; more means the cache thrashes). */
const MAX_ROUNDS = 8;
/** Page names the engine may ask for: a kind letter, "-", hex digits, then "-" and a number for numbered pages. */
const PAGE_NAME = /^[a-z]-[0-9a-f]{1,32}(-[0-9]{1,10})?$/;

let enginePromise = null; // Promise<Engine>
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

function getEngine() {
  if (!enginePromise) {
    enginePromise = (async () => {
      let mod;
      try {
        mod = await import(ENGINE_URL.href);
      } catch (e) {
        throw new Error(`cannot load the search engine (${ENGINE_URL.pathname}): ${errorMessage(e)}`);
      }
      try {
        await mod.default(); // wasm-bindgen init; finds its .wasm next to the .js
      } catch (e) {
        throw new Error(`cannot start the search engine (wasm): ${errorMessage(e)}`);
      }
      return new mod.Engine();
    })();
  }
  return enginePromise;
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
  const transfer = await transferOf(url, stored.length);
  const bytes = await decodePage(name, stored);
  try {
    engine.add_page(name, bytes);
  } catch (e) {
    throw new Error(`page p/${name}: ${errorMessage(e)}`);
  }
  return { transfer: transfer.bytes, transferKnown: transfer.known, stored: stored.length, raw: bytes.length - PAGE_HEADER_LEN };
}

/**
 * Page `name` in the engine: joins a fetch already running for it (another query's), else
 * starts one. The bytes count for the query that made the request.
 */
function ensurePage(engine, name, stats) {
  let p = inflight.get(name);
  if (p) {
    stats.shared++;
    return p.then(() => {});
  }
  p = loadPage(engine, name).finally(() => inflight.delete(name));
  inflight.set(name, p);
  return p.then((c) => {
    stats.requests++;
    stats.pages++;
    stats.transfer += c.transfer;
    stats.stored += c.stored;
    stats.raw += c.raw;
    if (!c.transferKnown) stats.transferEstimated = true;
    session.requests++;
    session.pages++;
    session.transfer += c.transfer;
    session.stored += c.stored;
    session.raw += c.raw;
  });
}

// ---------------------------------------------------------------- open

async function openBundle(id, bundleUrl, cacheBudget) {
  const engine = await getEngine();
  if (typeof engine.open_entry !== "function" || typeof engine.add_page !== "function") {
    throw new Error("this build of the search engine cannot read format 2 bundles (no open_entry): rebuild pkg/ with scripts/build-wasm");
  }
  const report = progressReporter(id, "bundle");
  const url = fileUrl(bundleUrl, ENTRY);
  let res;
  try {
    res = await fetch(url, { cache: "no-cache" });
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
  bundleBase = bundleUrl;
  bundleOpen = true;
  inflight.clear();
  Object.assign(session, { requests: 1, transfer: transfer.bytes, stored: entry.length, raw: entry.length, pages: 0 });
  return { summary, stats: { requests: 1, transfer: transfer.bytes, transferEstimated: !transfer.known, stored: entry.length } };
}

let modelPromise = null; // Promise<"true">; reset on failure so a retry can start over
let embedMod = null; // the embedder module, once its wasm is instantiated (kept across retries)
let embedder = null; // Embedder from the embedder module, once loaded

function loadModel(id, modelUrl) {
  if (!modelPromise) {
    modelPromise = fetchAndLoadModel(id, modelUrl).catch((e) => {
      modelPromise = null;
      throw e;
    });
  }
  return modelPromise;
}

/** Lowercase hex SHA-256 of bytes. */
async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Import the embedder module and instantiate its wasm from an already fetched Response
 * (compiled while it streams in), counting its bytes with onBytes.
 */
async function startEmbedderModule(wasmRes, onBytes) {
  let mod;
  try {
    mod = await import(EMBED_URL.href);
  } catch (e) {
    throw new Error(`cannot load the embedding engine (${EMBED_URL.pathname}): ${errorMessage(e)}`);
  }
  const counted = wasmRes.body
    ? new Response(
        wasmRes.body.pipeThrough(
          new TransformStream({
            transform(chunk, ctl) {
              onBytes(chunk.length);
              ctl.enqueue(chunk);
            },
          }),
        ),
        { headers: { "Content-Type": "application/wasm" } },
      )
    : wasmRes;
  try {
    await mod.default({ module_or_path: counted });
  } catch (e) {
    throw new Error(`cannot start the embedding engine (wasm): ${errorMessage(e)}`);
  }
  embedMod = mod;
  return mod;
}

async function fetchAndLoadModel(id, modelUrl) {
  const abort = new AbortController(); // on failure, stop the downloads still running
  try {
    return await fetchAndLoadModelWith(id, modelUrl, abort.signal);
  } catch (e) {
    abort.abort();
    throw e;
  }
}

async function fetchAndLoadModelWith(id, modelUrl, signal) {
  const engine = await getEngine();
  if (!bundleOpen) throw new Error("open the bundle before loading the model");
  const expected = engine.model_sha256();
  if (!expected) throw new Error("this bundle has no model: only bm25 search is available");
  const report = progressReporter(id, "model");
  const onnxUrl = fileUrl(modelUrl, "model.onnx");
  // The model files first; the embedder wasm only once they are on their way.
  const [onnxRes, tokRes] = await Promise.all([
    fetchOk(onnxUrl, "model model.onnx", signal),
    fetchOk(fileUrl(modelUrl, "tokenizer.json"), "model tokenizer.json", signal),
  ]);
  const wasmRes = embedMod ? null : await fetchOk(EMBED_WASM_URL.href, "embedding engine", signal);
  const lenOf = (r) => (r && Number(r.headers.get("Content-Length"))) || 0;
  // Content-Length is the compressed size when the server compresses; the total then grows.
  let total = lenOf(onnxRes) + lenOf(tokRes) + lenOf(wasmRes);
  let loaded = 0;
  report(0, total, true);
  const onBytes = (n) => {
    loaded += n;
    if (loaded > total) total = loaded;
    report(loaded, total);
  };
  const [onnx, tok, mod] = await Promise.all([
    readBody(onnxRes, lenOf(onnxRes), onBytes),
    readBody(tokRes, lenOf(tokRes), onBytes),
    embedMod || startEmbedderModule(wasmRes, onBytes),
  ]);
  report(loaded, loaded, true, "init");
  const actual = await sha256Hex(onnx);
  try {
    engine.check_model(actual);
  } catch (e) {
    throw new Error(`${onnxUrl}: ${errorMessage(e)}`);
  }
  let e;
  try {
    e = new mod.Embedder(onnx, tok);
  } catch (err) {
    throw new Error(`cannot load the model from ${modelUrl}: ${errorMessage(err)}`);
  }
  if (embedder) embedder.free();
  embedder = e;
  return "true";
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

async function search(id, query, mode, topK, includeArchived) {
  const engine = await getEngine();
  if (!bundleOpen) throw new Error("open the bundle before searching");
  // The clock for expiry filtering (front matter `expires`).
  engine.set_now(Date.now());
  engine.set_include_archived(Boolean(includeArchived));
  const m = String(mode);
  const dense = ["dense", "hybrid"].includes(m.toLowerCase());
  // Without the embedder the engine answers dense/hybrid with "needs the embedding model".
  const qvec = dense && embedder ? embedder.embed_query(String(query)) : null;
  const stats = { rounds: 0, requests: 0, pages: 0, transfer: 0, stored: 0, raw: 0, shared: 0, transferEstimated: false };
  const t0 = performance.now();
  for (;;) {
    const json = engine.search_with_vector(String(query), qvec, m, Number(topK));
    let result;
    try {
      result = JSON.parse(json);
    } catch (e) {
      throw new Error(`the engine answered invalid JSON: ${errorMessage(e)}`);
    }
    const need = needOf(result);
    if (!need) {
      stats.ms = performance.now() - t0;
      tidyTimings();
      result.stats = stats;
      return result;
    }
    if (stats.rounds >= MAX_ROUNDS) {
      throw new Error(
        `query ${JSON.stringify(String(query))}: the engine still needs ${need.length} page(s) (${need.slice(0, 4).join(", ")}` +
          `${need.length > 4 ? ", …" : ""}) after ${MAX_ROUNDS} rounds of fetching; the page cache budget may be too small for this query`,
      );
    }
    stats.rounds++;
    await Promise.all(need.map((n) => ensurePage(engine, n, stats)));
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

async function cacheStats() {
  const engine = await getEngine();
  const e = bundleOpen ? JSON.parse(engine.cache_stats()) : null;
  return { engine: e, session: { ...session } };
}

self.onmessage = async (ev) => {
  const msg = ev.data || {};
  const { id, type } = msg;
  try {
    let result;
    switch (type) {
      case "open":
        result = await openBundle(id, msg.bundleUrl, msg.cacheBudget);
        break;
      case "loadModel":
        result = await loadModel(id, msg.modelUrl);
        break;
      case "search":
        result = await search(id, msg.query, msg.mode, msg.topK, msg.includeArchived);
        break;
      case "cacheStats":
        result = await cacheStats();
        break;
      default:
        throw new Error(`unknown request type ${JSON.stringify(type)}`);
    }
    self.postMessage({ id, ok: true, result });
  } catch (e) {
    self.postMessage({ id, ok: false, error: errorMessage(e) });
  }
};

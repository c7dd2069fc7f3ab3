// Jikji: in-browser book search. Small ES-module API over a Web Worker that runs the wasm engine.
// This file is the npm package `jikji-web` (packages/jikji-web: scripts/pack-web) and the page's
// own API (web/app.js imports it); its types are packages/jikji-web/jikji.d.ts.
//
//   import { Jikji } from "jikji-web";
//   const j = await Jikji.load("/bundle/", { onProgress });
//   j.loadModel();                                   // start the model download (optional)
//   const r = await j.search("to be or not to be", { mode: "hybrid", topK: 10,
//                            filters: { tier: "0-2", lang: ["ko", "en"], folder: "1. 漢文" } });
//   // r = {query, mode, fusion, calibrated, hits: [{rank, id, score (calibrated, 0..1), raw_score, source, source_url, heading_path, tier, lang, text,
//   //      label (readable title), snippet: {parts (alternately plain and matched text), cut_start, cut_end}}],
//   //      stats: {rounds, requests, pages, transfer, stored, raw, shared, transferEstimated, ms,
//   //              dense/hybrid: model: {requests, transfer, …, rowPages}, embedMs, tokens}}
//   const v = await j.search("學而時習之", { mode: "dense", vector: true });
//   // v.queryVector: the query's embedding (384 numbers, unit length, as the engine used it);
//   // v.queryTokens: its token ids (`query: ` + text, <s> … </s>). Opt-in, dense/hybrid only.
//
// Where things come from (all overridable in Jikji.load's options):
//   workerUrl  ./worker.js beside this file: the worker as scripts/build-js bundles it (web/worker.js
//              with pages.js and the BM25 engine's wasm-bindgen glue, one file)
//   engineUrl  ./engine/ beside this file: jikji_engine_bg.wasm (the search engine, BM25),
//              dense/ (the same engine with dense and hybrid search, wasm and glue) and qmodel/
//              (the query model), as scripts/build-wasm writes pkg/
//   integrity  "integrity.json" in engineUrl (written with them): the SHA-256 of the worker and
//              the five engine files; each is checked before it runs, and a file that differs
//              stops load() with an Error naming it. Pass the files map itself (hashes in your
//              own code) or false (no check: development only).
//   allowedOrigins  the origins bundle URLs may come from: only the page's own by default.
//
// The bundle is format v2: load() fetches only its entry file (jikji.json); each search fetches
// the pages it needs (see worker.js), so BM25 never downloads vectors or the model. r.stats
// counts that query's fetch rounds, requests, bytes (transfer: as sent over the network per
// Resource Timing, headers included, 0 for an HTTP-cache hit, the body length when the browser
// gives no figure (transferEstimated); stored: page bytes received; raw: after inflating),
// pages joined from another query's fetch (shared) and ms (wall time in the worker).
// The worker loads the small search engine (BM25 only) at once; the dense engine (ENGINE/dense/)
// and the query model (a ~160 kB wasm, ENGINE/qmodel/, and the bundle's query-model pages:
// ~13 MB, kept in Cache Storage) are fetched only when the model is asked for (loadModel, or a
// dense/hybrid search).
//
// onProgress({phase, loaded, total, ...}):
//   phase "bundle": entry file bytes downloaded so far
//   phase "query":  during a search, after each round of page fetches: loaded = total = bytes
//                   transferred so far for it, with rounds, requests and pages
//   phase "model":  model page bytes (layers, tokenizer, row map; from the network or Cache
//                   Storage); a last one has stage "init"
//   phase "ready":  {model: false} once the bundle is open (BM25 works),
//                   {model: true} once the model is loaded (dense and hybrid work)
// BM25 searches work as soon as load() resolves; dense/hybrid searches start the model download
// if needed and wait for it. Every failure rejects with an Error carrying the engine's message;
// a refused URL or a failed integrity check rejects with a JikjiError whose `code` says which.

const MODES = new Set(["bm25", "dense", "hybrid"]);
/**
 * The engine and query-model files an integrity map must list (besides worker.js). The BM25
 * engine's glue and pages.js are inside the served worker.js (scripts/build-js bundles them), so
 * worker.js's hash covers them.
 */
const ENGINE_FILES = [
  "jikji_engine_bg.wasm",
  "dense/jikji_engine.js",
  "dense/jikji_engine_bg.wasm",
  "qmodel/jikji_query_model_wasm.js",
  "qmodel/jikji_query_model_wasm_bg.wasm",
];

/** An Error with a `code`: "origin" (a URL from an origin not allowed), "integrity" (a file failed its check). */
export class JikjiError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "JikjiError";
    this.code = code;
  }
}

/** Absolute URL with a trailing slash, resolved against the page. */
function folderUrl(url) {
  const u = new URL(url, globalThis.location?.href);
  if (!u.pathname.endsWith("/")) u.pathname += "/";
  u.search = "";
  u.hash = "";
  return u.href;
}

/**
 * Throws a JikjiError (code "origin") unless `url`'s origin is the page's or one of `allowed`
 * ("*" allows any http(s) origin). Only http: and https: URLs are ever accepted.
 */
export function checkOrigin(url, allowed = [], what = "bundle") {
  const u = new URL(url, globalThis.location?.href);
  const here = globalThis.location?.origin;
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new JikjiError("origin", `refused ${what} URL ${u.href}: only http and https URLs are loaded`);
  }
  const list = Array.isArray(allowed) ? allowed : [allowed];
  const ok = u.origin === here || list.some((o) => o === "*" || safeOrigin(o) === u.origin);
  if (!ok) {
    throw new JikjiError(
      "origin",
      `refused ${what} URL ${u.href}: it is not on this site (${here}); a site loads other origins only when it ` +
        "lists them in allowedOrigins",
    );
  }
  return u.href;
}

function safeOrigin(o) {
  try {
    return new URL(String(o)).origin;
  } catch {
    return null;
  }
}

function base64(bytes) {
  let s = "";
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** The bytes at `url`, to check them; throws an Error naming the URL. */
async function fetchBytes(url) {
  try {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
    return new Uint8Array(await res.arrayBuffer());
  } catch (e) {
    throw new Error(`cannot fetch ${url} to check it: ${e.message || e}`);
  }
}

/**
 * Checks the bytes at `url` (or `fetched`, a promise of them) against `want` ("sha256-<base64>");
 * throws a JikjiError naming the file.
 */
async function checkFile(url, want, name, fetched = null) {
  if (typeof want !== "string" || !want.startsWith("sha256-")) {
    throw new JikjiError("integrity", `integrity check: the integrity map lists no sha256 for ${name}`);
  }
  const bytes = await (fetched ?? fetchBytes(url));
  if (!globalThis.crypto?.subtle) {
    throw new JikjiError("integrity", `integrity check of ${name} needs crypto.subtle (a secure context: https or localhost)`);
  }
  const got = `sha256-${base64(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)))}`;
  if (got !== want) {
    throw new JikjiError(
      "integrity",
      `integrity check failed for ${url}: its SHA-256 is ${got}, the integrity map says ${want}; refusing to run it`,
    );
  }
}

/** The integrity map of `engineUrl`'s integrity.json (or `option` itself), with every file it must list. */
async function integrityMap(option, engineUrl) {
  if (option === false) return null;
  let map = option;
  if (option == null || typeof option === "string") {
    const url = new URL(option || "integrity.json", engineUrl).href;
    let res;
    try {
      res = await fetch(url, { cache: "no-cache" });
    } catch (e) {
      throw new JikjiError("integrity", `cannot fetch the engine's integrity map ${url}: ${e.message || e}`);
    }
    if (!res.ok) throw new JikjiError("integrity", `the engine's integrity map ${url}: HTTP ${res.status}`);
    try {
      map = (await res.json()).files;
    } catch (e) {
      throw new JikjiError("integrity", `the engine's integrity map ${url} is not JSON: ${e.message || e}`);
    }
  }
  if (!map || typeof map !== "object") throw new JikjiError("integrity", "the integrity map has no files");
  for (const f of [...ENGINE_FILES, "worker.js"]) {
    if (typeof map[f] !== "string") throw new JikjiError("integrity", `the integrity map lists no sha256 for ${f}`);
  }
  return map;
}

/** Normalises search filters to the worker's strings: {tier: "N"|"A-B", lang: "a,b", folder}. */
function filterStrings(filters) {
  if (filters == null) return null;
  if (typeof filters !== "object") throw new TypeError("filters must be an object {tier?, lang?, folder?}");
  const out = {};
  const { tier, lang, folder } = filters;
  if (tier != null && tier !== "") {
    if (Array.isArray(tier)) {
      if (tier.length !== 2 || !tier.every((t) => Number.isInteger(t) && t >= 0)) {
        throw new TypeError(`filters.tier ${JSON.stringify(tier)}: expected [lowest, highest] tiers`);
      }
      out.tier = `${tier[0]}-${tier[1]}`;
    } else if (Number.isInteger(tier) && tier >= 0) {
      out.tier = String(tier);
    } else if (typeof tier === "string") {
      out.tier = tier;
    } else {
      throw new TypeError(`filters.tier ${JSON.stringify(tier)}: expected a tier, [lowest, highest] or "A-B"`);
    }
  }
  if (lang != null && lang !== "") out.lang = Array.isArray(lang) ? lang.map(String).join(",") : String(lang);
  if (folder != null && folder !== "") out.folder = String(folder);
  return out;
}

/**
 * Registers the package's service worker so that the site works offline after a first visit and
 * a second visit takes the package's files (this file, the component, the worker, the engine)
 * from Cache Storage: the site serves a copy of the package's `sw.js` (same origin; its folder is
 * the largest scope it may have) and calls this from its page. The worker is registered as
 * `swUrl?package=<this package's folder>` with `scope` (default: sw.js's folder), keeps the
 * package's files of this version (checked against their SHA-256 in sw.js), the bundles' entry
 * files (network first) and pages (cache first), and the site's own pages, scripts and styles
 * under its scope (network first, kept for offline use). `bundle` (a bundle folder URL, or a
 * list): entries to keep at once (the first visit fetched them before the worker was in control).
 * Resolves with the registration once its worker is active; rejects with an Error when the
 * browser has no service workers (or not here: http other than localhost) and with a JikjiError
 * (code "origin") for a URL on another origin. Registers once (updateViaCache "none"): when
 * this script already runs for the scope, that registration is returned as it is; the browser
 * checks sw.js for a new version on each navigation (a 304 when unchanged). Source:
 * web/sw-src.js, scripts/stamp-sw.
 * @param {string | URL} [swUrl]
 * @param {{scope?: string, packageUrl?: string | URL, bundle?: string | URL | Array<string | URL>}} [options]
 * @returns {Promise<ServiceWorkerRegistration>}
 */
export async function registerOffline(swUrl = "sw.js", { scope, packageUrl, bundle } = {}) {
  const sw = globalThis.navigator?.serviceWorker;
  if (!sw) throw new Error("service workers are not available here (they need https, or http on localhost)");
  const script = new URL(checkOrigin(swUrl, [], "service worker"));
  const pkg = new URL(checkOrigin(packageUrl ?? new URL("./", import.meta.url).href, [], "package"));
  script.searchParams.set("package", folderUrl(pkg.href).slice(pkg.origin.length));
  // (register() resolves a scope against the page's URL.)
  const scopeUrl = new URL(scope ?? new URL("./", script).pathname, globalThis.location?.href).href;
  // Once: a registration already running this script is kept as it is (its update check is the
  // browser's own, on navigation; sw-src.js, "Registration").
  const existing = await sw.getRegistration(scopeUrl);
  const reg =
    existing?.active?.scriptURL === script.href && existing.scope === scopeUrl
      ? existing
      : await sw.register(script.href, { scope: scopeUrl, updateViaCache: "none" });
  const ready = await sw.ready;
  const entries = (bundle == null ? [] : Array.isArray(bundle) ? bundle : [bundle]).map((b) => new URL("jikji.json", folderUrl(checkOrigin(b, [], "bundle"))).href);
  if (entries.length) ready.active?.postMessage({ type: "keep", urls: entries });
  return reg;
}

export class Jikji {
  /**
   * Load a bundle in a Worker and open it. Options (packages/jikji-web/jikji.d.ts, LoadOptions):
   * onProgress, cacheBudget (the engine's page cache in bytes, default 32 MiB), workerUrl,
   * engineUrl, integrity, allowedOrigins (see the header of this file); modelUrl is unused
   * (the query model comes from the bundle's own pages; kept so old callers work).
   * @returns {Promise<Jikji>}
   */
  static async load(bundleUrl, options = {}) {
    const allowed = options.allowedOrigins ?? [];
    const bundle = folderUrl(checkOrigin(bundleUrl, allowed, "bundle"));
    const engineUrl = folderUrl(options.engineUrl ?? new URL("./engine/", import.meta.url));
    checkOrigin(engineUrl, allowed, "engine");
    const workerUrl = new URL(options.workerUrl ?? new URL("./worker.js", import.meta.url), globalThis.location?.href);
    checkOrigin(workerUrl.href, allowed, "worker");
    if (options.modelUrl != null) checkOrigin(options.modelUrl, allowed, "model");
    // The worker's bytes are fetched alongside the integrity map (one round trip less); nothing
    // runs before they are checked against it.
    const workerBytes = options.integrity === false ? null : fetchBytes(workerUrl.href);
    workerBytes?.catch(() => {}); // awaited by checkFile, unless the map fails first
    const integrity = await integrityMap(options.integrity, engineUrl);
    if (integrity) {
      await checkFile(workerUrl.href, integrity["worker.js"], "worker.js", workerBytes);
    }
    const j = new Jikji({ ...options, workerUrl });
    try {
      const msg = { type: "open", bundleUrl: bundle, engineUrl, integrity };
      if (options.cacheBudget != null) msg.cacheBudget = Math.max(0, Math.floor(Number(options.cacheBudget)));
      const { summary, stats, modelBytes } = await j._call(msg, "bundle");
      j.manifest = JSON.parse(summary);
      /** Bytes of the bundle's query model (raw page sizes), or null without one. */
      j.modelBytes = modelBytes ?? null;
      /** What opening cost: {requests, transfer, transferEstimated, stored} (the entry file). */
      j.openStats = stats;
    } catch (e) {
      j.close();
      if (/integrity check/.test(e.message)) throw new JikjiError("integrity", e.message);
      throw e;
    }
    j._progress({ phase: "ready", loaded: 1, total: 1, model: false });
    return j;
  }

  /** Use Jikji.load(). */
  constructor({ modelUrl = null, onProgress = null, workerUrl = null } = {}) {
    if (!workerUrl) throw new TypeError("use Jikji.load(bundleUrl, options)");
    this.modelUrl = modelUrl == null ? null : folderUrl(modelUrl);
    this.onProgress = typeof onProgress === "function" ? onProgress : null;
    /** Entry summary from the engine: {format_version, chunks, files, model, ...}. */
    this.manifest = null;
    this.openStats = null;
    this.modelBytes = null;
    this.modelLoaded = false;
    this._modelPromise = null;
    this._nextId = 1;
    this._pending = new Map(); // id -> {resolve, reject, phase}
    this._worker = new Worker(workerUrl, {
      type: "module",
      name: "jikji",
    });
    this._worker.onmessage = (ev) => this._onMessage(ev.data);
    this._worker.onerror = (ev) => {
      ev.preventDefault?.();
      const where = ev.filename ? ` (${ev.filename}:${ev.lineno})` : "";
      this._failAll(new Error(`search worker failed: ${ev.message || "could not start"}${where}`));
    };
    this._worker.onmessageerror = () => this._failAll(new Error("search worker sent an unreadable message"));
  }

  /** True when the bundle declares a model (dense and hybrid need one). */
  get hasModel() {
    return !!(this.manifest && this.manifest.model);
  }

  /**
   * Start (or join) the model download and load it into the engine. Idempotent.
   * @returns {Promise<void>}
   */
  loadModel() {
    if (this.modelLoaded) return Promise.resolve();
    if (!this._modelPromise) {
      if (this.manifest && !this.manifest.model) {
        return Promise.reject(new Error("this bundle has no model: only bm25 search is available"));
      }
      this._modelPromise = this._call({ type: "loadModel" }, "model").then(
        () => {
          this.modelLoaded = true;
          this._progress({ phase: "ready", loaded: 1, total: 1, model: true });
        },
        (e) => {
          this._modelPromise = null; // allow a retry
          // The query model's wasm or glue failed its integrity.json check, or one of the bundle's
          // model pages (layers, tokenizer, row map) its content hash: code "integrity".
          if (!(e instanceof JikjiError) && /integrity check|corrupt or tampered page/.test(e?.message)) throw new JikjiError("integrity", e.message);
          throw e;
        },
      );
    }
    return this._modelPromise;
  }

  /**
   * Search. dense/hybrid wait for the model (starting its download if needed).
   * Expired chunks (front matter `expires` before now) are left out; archived chunks (older
   * versions of a document) only with `includeArchived: true`. `filters` ({tier: 2 | [0, 2] |
   * "0-2", lang: "ko" | ["ko", "en"], folder: "1. 漢文"}) keep only matching chunks, applied
   * before top-k is cut; `minScore` drops hits under that calibrated score; `fusion` is "rrf",
   * "weighted" or "weighted:W" (hybrid). `vector: true` (dense/hybrid) adds `queryVector` (the
   * query's embedding, 384 numbers of unit length) and `queryTokens` (its token ids) to the
   * result; without it neither is sent. Types: SearchOptions in jikji.d.ts. A query of only
   * white space is refused (TypeError), before any model download: it has nothing to match.
   * @param {string} query
   * @returns {Promise<SearchResult>}
   */
  async search(query, { mode = "hybrid", topK = 10, includeArchived = false, minScore = 0, fusion = null, filters = null, vector = false } = {}) {
    if (!MODES.has(mode)) throw new Error(`unknown search mode ${JSON.stringify(mode)}`);
    if (String(query).trim() === "") throw new TypeError("the query is empty: give words to search for");
    const k = Math.max(1, Math.floor(Number(topK) || 10));
    const min = Number(minScore);
    if (!Number.isFinite(min) || min < 0) throw new TypeError(`minScore must be a number ≥ 0, got ${minScore}`);
    if (fusion != null && !/^(rrf|weighted(:[0-9.]+)?)$/.test(String(fusion))) {
      throw new TypeError(`unknown fusion ${JSON.stringify(fusion)} (expected rrf, weighted or weighted:W)`);
    }
    const f = filterStrings(filters);
    if (mode !== "bm25") await this.loadModel();
    return this._call({
      type: "search",
      query: String(query),
      mode,
      topK: k,
      includeArchived: Boolean(includeArchived),
      minScore: min,
      fusion: fusion == null ? null : String(fusion),
      filters: f,
      vector: Boolean(vector),
    });
  }

  /**
   * The engine's page cache and what this session fetched.
   * @returns {Promise<{engine: {pages: number, bytes: number, hits: number, misses: number},
   *   session: {requests: number, transfer: number, stored: number, raw: number, pages: number}}>}
   */
  cacheStats() {
    return this._call({ type: "cacheStats" });
  }

  /**
   * The bundle's filter values and how many chunks have each (from its columns page, fetched
   * if no search has read it yet): {tiers: [[tier, chunks], …] (by tier), untiered (chunks
   * outside every tier folder), langs: [[lang, chunks], …] (most first), folders: [[folder,
   * chunks], …] (every source folder and those above it, by name)}. Values for `filters`.
   * @returns {Promise<Facets>}
   */
  facets() {
    return this._call({ type: "facets" });
  }

  /** Stop the worker; pending calls reject. */
  close() {
    this._failAll(new Error("Jikji was closed"));
    this._worker.terminate();
  }

  _call(msg, phase = null) {
    if (this._dead) return Promise.reject(this._dead);
    const id = this._nextId++;
    return new Promise((resolve, reject) => {
      this._pending.set(id, { resolve, reject, phase });
      this._worker.postMessage({ ...msg, id });
    });
  }

  _onMessage(msg) {
    if (!msg || typeof msg !== "object") return;
    const p = this._pending.get(msg.id);
    if (msg.type === "progress") {
      const { id: _id, type: _type, ...info } = msg;
      if (!info.stage) delete info.stage;
      this._progress(info);
      return;
    }
    if (!p) return;
    this._pending.delete(msg.id);
    if (msg.ok) p.resolve(msg.result);
    else p.reject(new Error(msg.error));
  }

  _failAll(err) {
    this._dead = this._dead || err;
    for (const p of this._pending.values()) p.reject(err);
    this._pending.clear();
  }

  _progress(info) {
    if (!this.onProgress) return;
    try {
      this.onProgress(info);
    } catch (e) {
      console.error("Jikji onProgress callback failed:", e);
    }
  }
}

export default Jikji;

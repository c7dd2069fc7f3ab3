// Jikji: in-browser book search. Small ES-module API over a Web Worker that runs the wasm engine.
//
//   import { Jikji } from "./jikji.js";
//   const j = await Jikji.load("/bundle/", { onProgress });
//   j.loadModel();                                   // start the model download (optional)
//   const r = await j.search("to be or not to be", { mode: "hybrid", topK: 10 });
//   // r = {query, mode, fusion, calibrated, hits: [{rank, id, score (calibrated, 0..1), raw_score, source, source_url, heading_path, tier, lang, text}],
//   //      stats: {rounds, requests, pages, transfer, stored, raw, shared, transferEstimated, ms,
//   //              dense/hybrid: model: {requests, transfer, …, rowPages}, embedMs, tokens}}
//   const v = await j.search("學而時習之", { mode: "dense", vector: true });
//   // v.queryVector: the query's embedding (384 numbers, unit length, as the engine used it);
//   // v.queryTokens: its token ids (`query: ` + text, <s> … </s>). Opt-in, dense/hybrid only.
//
// The bundle is format v2: load() fetches only its entry file (jikji.json); each search fetches
// the pages it needs (see worker.js), so BM25 never downloads vectors or the model. r.stats
// counts that query's fetch rounds, requests, bytes (transfer: as sent over the network per
// Resource Timing, headers included, 0 for an HTTP-cache hit, the body length when the browser
// gives no figure (transferEstimated); stored: page bytes received; raw: after inflating),
// pages joined from another query's fetch (shared) and ms (wall time in the worker).
// The worker loads the small search engine (BM25 and the dense scan) at once; the query model
// (a ~160 kB wasm, ../pkg/qmodel/, and the bundle's query-model pages: ~13 MB, kept in Cache
// Storage) is fetched only when the model is asked for (loadModel, or a dense/hybrid search).
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
// if needed and wait for it. Every failure rejects with an Error carrying the engine's message.

const MODES = new Set(["bm25", "dense", "hybrid"]);

/** Absolute URL with a trailing slash, resolved against the page. */
function folderUrl(url) {
  const u = new URL(url, globalThis.location?.href);
  if (!u.pathname.endsWith("/")) u.pathname += "/";
  u.search = "";
  u.hash = "";
  return u.href;
}

export class Jikji {
  /**
   * Load a bundle in a Worker and open it.
   * @param {string} bundleUrl folder holding jikji.json and p/ (relative to the page is fine)
   * @param {{onProgress?: Function, workerUrl?: string|URL, cacheBudget?: number, modelUrl?: string}} [options]
   *   modelUrl: unused since the query model comes from the bundle's own pages (kept so old callers work)
   *   cacheBudget: the engine's page cache budget in bytes (default: the engine's, 32 MiB)
   * @returns {Promise<Jikji>}
   */
  static async load(bundleUrl, options = {}) {
    const j = new Jikji(options);
    try {
      const msg = { type: "open", bundleUrl: folderUrl(bundleUrl) };
      if (options.cacheBudget != null) msg.cacheBudget = Math.max(0, Math.floor(Number(options.cacheBudget)));
      const { summary, stats } = await j._call(msg, "bundle");
      j.manifest = JSON.parse(summary);
      /** What opening cost: {requests, transfer, transferEstimated, stored} (the entry file). */
      j.openStats = stats;
    } catch (e) {
      j.close();
      throw e;
    }
    j._progress({ phase: "ready", loaded: 1, total: 1, model: false });
    return j;
  }

  /** Use Jikji.load(). */
  constructor({ modelUrl = null, onProgress = null, workerUrl = null } = {}) {
    this.modelUrl = modelUrl == null ? null : folderUrl(modelUrl);
    this.onProgress = typeof onProgress === "function" ? onProgress : null;
    /** Entry summary from the engine: {format_version, chunks, files, model, ...}. */
    this.manifest = null;
    this.openStats = null;
    this.modelLoaded = false;
    this._modelPromise = null;
    this._nextId = 1;
    this._pending = new Map(); // id -> {resolve, reject, phase}
    this._worker = new Worker(workerUrl || new URL("./worker.js", import.meta.url), {
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
          throw e;
        },
      );
    }
    return this._modelPromise;
  }

  /**
   * Search. dense/hybrid wait for the model (starting its download if needed).
   * @param {string} query
   * Expired chunks (front matter `expires` before now) are left out; archived chunks (older
   * versions of a document) only with `includeArchived: true`. `vector: true` (dense/hybrid)
   * adds `queryVector` (the query's embedding, 384 numbers of unit length) and `queryTokens`
   * (its token ids) to the result; without it neither is sent.
   * @param {{mode?: "bm25"|"dense"|"hybrid", topK?: number, includeArchived?: boolean, vector?: boolean}} [opts]
   * @returns {Promise<{query: string, mode: string, hits: object[], stats: object, queryVector?: number[], queryTokens?: number[]}>}
   */
  async search(query, { mode = "hybrid", topK = 10, includeArchived = false, vector = false } = {}) {
    if (!MODES.has(mode)) throw new Error(`unknown search mode ${JSON.stringify(mode)}`);
    const k = Math.max(1, Math.floor(Number(topK) || 10));
    if (mode !== "bm25") await this.loadModel();
    return this._call({
      type: "search",
      query: String(query),
      mode,
      topK: k,
      includeArchived: Boolean(includeArchived),
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

// Types of jikji-web (jikji.js): the whole public API. Hand-written; the engine's JSON is
// described in engine-wasm/src/lib.rs (Hit, SearchResult) and format/src/chunks.rs (ChunkRecord).

/** Search modes: keyword (BM25), semantic (dense: cosine with the query embedding) or both fused. */
export type Mode = "bm25" | "dense" | "hybrid";

/** Hybrid fusion: reciprocal rank fusion, or the calibrated weighted sum (`weighted:W`, W = weight of dense in [0, 1]). */
export type Fusion = "rrf" | "weighted" | `weighted:${number}`;

/**
 * Which chunks a search may return, applied before top-k is cut (a filtered search still
 * returns `topK` hits when the bundle has that many matching chunks). Every filter given must
 * hold.
 */
export interface Filters {
  /**
   * Tier (the tier folder's number: `1. 漢文 古典` → 1): one tier, `[lowest, highest]`, or
   * `"N"` / `"A-B"` (inclusive). Chunks outside every tier folder are left out.
   */
  tier?: number | [number, number] | string;
  /** Languages (`ko`, `zh`, `ja`, `en`, `other`): one, or a list / comma-separated string of them. */
  lang?: string | string[];
  /**
   * Source folder, relative to the corpus root, matched by whole path components: `"1. Gutenberg"`
   * keeps `1. Gutenberg/a.txt` and `1. Gutenberg/old/b.txt`, not `1. Gutenberg classics/c.txt`.
   */
  folder?: string;
}

/** Options of {@link Jikji.search}. */
export interface SearchOptions {
  /** Default `"hybrid"`; dense and hybrid wait for the model (starting its download). */
  mode?: Mode;
  /** Hits wanted, ≥ 1 (default 10). */
  topK?: number;
  /** Drop hits whose calibrated score (0..1) is below this (default 0: keep all). */
  minScore?: number;
  /** Hybrid fusion (default: `weighted` on a calibrated bundle, else `rrf`). */
  fusion?: Fusion;
  /** Tier, language and folder filters. */
  filters?: Filters;
  /** Also return archived chunks (older versions of a document); default false. */
  includeArchived?: boolean;
  /** Dense/hybrid: also return the query's embedding and token ids (default false). */
  vector?: boolean;
}

/** One side of a known contradiction, recorded on a chunk when the bundle was built. */
export interface ConflictNote {
  with: string;
  source: string;
  newer: "this" | "other" | "unknown";
  subject: string;
  this: string[];
  other: string[];
}

/** One ranked chunk: its rank and scores, and every field of its chunk record. */
export interface Hit {
  /** 1-based rank. */
  rank: number;
  /**
   * Calibrated score in [0, 1]: the estimated probability that this is a right answer (≥ 0.6
   * reliable, 0.3–0.6 use with care, < 0.3 weak); the raw score on an uncalibrated bundle.
   */
  score: number;
  /** The ranker's own score: BM25 (≥ 0), cosine (−1..1), RRF (≤ 2/61) or weighted fusion (0..1). */
  raw_score: number;
  /** Stable chunk id (16 hex digits). */
  id: string;
  /** Source file path relative to the corpus root, `/`-separated. */
  source: string;
  /** The file's source URL, if it has one. */
  source_url: string | null;
  /** Tier from the tier folder (`1. …` → 1), `null` outside one. */
  tier: number | null;
  /** Markdown headings above the chunk, outermost first. */
  heading_path: string[];
  /** Detected language: `ko`, `zh`, `ja`, `en` or `other`. */
  lang: string;
  /** Index of the `---`-delimited section in the file. */
  section: number;
  /** Start and end offsets in the file, in Unicode scalar values. */
  start: number;
  end: number;
  /** The chunk text. */
  text: string;
  title?: string;
  author?: string;
  version?: string;
  updated?: string;
  expires?: string;
  provenance?: string;
  doc_id?: string;
  archived?: boolean;
  parent_id?: string;
  parent_doc?: number;
  conflicts?: ConflictNote[];
  /**
   * Readable title (from the engine, engine-wasm/src/snippet.rs): the front matter `title`, else
   * the file name without folder, extension and leading number (`shakespeare-hamlet.txt` →
   * `Shakespeare hamlet`).
   */
  label?: string;
  /** The text window around the best match, its matched terms marked (from the engine). */
  snippet?: Snippet;
}

/**
 * A window of a hit's text (at most 240 columns, a CJK character counting 2), Markdown heading
 * markers removed and whitespace collapsed, around the span holding the most distinct query terms.
 */
export interface Snippet {
  /** Alternately unmarked and marked text, starting unmarked (possibly ""); joined, the window. */
  parts: string[];
  /** Text was cut before the window (show an ellipsis). */
  cut_start: boolean;
  /** Text was cut after the window. */
  cut_end: boolean;
}

/** The filter values of a bundle with their chunk counts ({@link Jikji.facets}). */
export interface Facets {
  /** `[tier, chunks]` by tier. */
  tiers: [number, number][];
  /** Chunks outside every tier folder. */
  untiered: number;
  /** `[lang, chunks]`, most chunks first. */
  langs: [string, number][];
  /** `[folder, chunks]` for every source folder and each folder above it, by name. */
  folders: [string, number][];
}

/** What one search fetched (worker-side counters). */
export interface QueryStats {
  /** Rounds of page fetches (0: every page was cached). */
  rounds: number;
  requests: number;
  pages: number;
  /** Bytes over the network per Resource Timing (headers included; 0 for an HTTP-cache hit). */
  transfer: number;
  /** True when a transfer figure was estimated from the body length. */
  transferEstimated: boolean;
  /** Page bytes received, and after inflating. */
  stored: number;
  raw: number;
  /** Pages joined from another query's fetch. */
  shared: number;
  /** Wall time in the worker, ms. */
  ms: number;
  /** Dense and hybrid only: query-model row pages fetched, embedding time and token count. */
  model?: { requests: number; transfer: number; stored: number; cached: number; cachedBytes: number; rowPages: number };
  embedMs?: number;
  tokens?: number;
}

/** The result of {@link Jikji.search}. */
export interface SearchResult {
  query: string;
  /** The mode run. */
  mode: Mode;
  /** Hybrid only: the fusion used (absent when no query word is in the bundle: dense ranking). */
  fusion?: { fusion: "rrf" } | { fusion: "weighted"; dense_weight: number };
  /** True if `score` is calibrated. */
  calibrated: boolean;
  /** At most `topK` hits, best first. */
  hits: Hit[];
  stats: QueryStats;
  /** With `vector: true` (dense/hybrid): the query's embedding, 384 numbers of unit length. */
  queryVector?: number[];
  /** With `vector: true` (dense/hybrid): the query's token ids. */
  queryTokens?: number[];
}

/** The opened bundle's summary. */
export interface BundleSummary {
  format_version: number;
  built_at: number;
  /** Indexed chunks. */
  chunks: number;
  files: Record<string, { bytes: number; sha256: string }>;
  /** The model the vectors were made with; `null` for a BM25-only bundle. */
  model: { id: string; sha256: string; dim: number; [key: string]: unknown } | null;
  calibration: Record<string, unknown> | null;
  vectors: boolean;
}

/** Progress events given to `onProgress`. */
export type ProgressEvent =
  /** Entry file (jikji.json) bytes downloaded so far. */
  | { phase: "bundle"; loaded: number; total: number; stage?: string }
  /** During a search, after each round of page fetches: bytes transferred so far for it. */
  | { phase: "query"; loaded: number; total: number; rounds: number; requests: number; pages: number }
  /** Query-model page bytes (network or Cache Storage); the last one has stage "init". */
  | { phase: "model"; loaded: number; total: number; stage?: "init" }
  /** `model: false` once the bundle is open (BM25 works), `model: true` once the model is in. */
  | { phase: "ready"; loaded: 1; total: 1; model: boolean };

/** SHA-256 of each checked file, SRI form (`"sha256-<base64>"`), as in engine/integrity.json's `files`. */
export interface IntegrityMap {
  "jikji_engine_bg.wasm": string;
  "dense/jikji_engine.js": string;
  "dense/jikji_engine_bg.wasm": string;
  "qmodel/jikji_query_model_wasm.js": string;
  "qmodel/jikji_query_model_wasm_bg.wasm": string;
  /** The worker, bundled with its page decoder and the BM25 engine's glue (one file). */
  "worker.js": string;
  [file: string]: string;
}

/** Options of {@link Jikji.load}. */
export interface LoadOptions {
  onProgress?: (event: ProgressEvent) => void;
  /** The engine's page cache budget, bytes (default 32 MiB). */
  cacheBudget?: number;
  /** The worker script (default: `worker.js` beside jikji.js). */
  workerUrl?: string | URL;
  /** Folder of jikji_engine_bg.wasm, dense/ and qmodel/ (default: `engine/` beside jikji.js). */
  engineUrl?: string | URL;
  /**
   * How the worker and engine files are checked before they run: the name of the integrity
   * file in `engineUrl` (default `"integrity.json"`), the map itself, or `false` (no check;
   * development only). A file that differs rejects load() with a JikjiError, code "integrity".
   */
  integrity?: string | IntegrityMap | false;
  /**
   * Origins besides the page's own that the bundle, engine and worker URLs may be on
   * (e.g. `["https://cdn.example"]`; `"*"`: any). Default: none. Another origin rejects
   * load() with a JikjiError, code "origin". The site's CSP `connect-src` must allow them too.
   */
  allowedOrigins?: string[] | "*";
  /** Unused (the query model comes from the bundle's pages); checked against allowedOrigins. */
  modelUrl?: string | null;
}

/** Cache and memory counters of {@link Jikji.cacheStats}. */
export interface CacheStats {
  engine: { pages: number; bytes: number; hits: number; misses: number; added: number; evicted: number } | null;
  session: { requests: number; transfer: number; stored: number; raw: number; pages: number };
  model: { requests: number; transfer: number; stored: number; cached: number; cachedBytes: number; rowPages: number };
  memory: { engine: number | null; model: number | null };
}

/** An Error saying why a URL or a file was refused. */
export class JikjiError extends Error {
  readonly name: "JikjiError";
  /** "origin": a URL on an origin not allowed; "integrity": a file failed its check. */
  readonly code: "origin" | "integrity";
  constructor(code: "origin" | "integrity", message: string);
}

/**
 * Returns `url` resolved against the page, or throws a JikjiError (code "origin") unless it is
 * http(s) on the page's origin or one of `allowed`.
 */
export function checkOrigin(url: string | URL, allowed?: string[] | string, what?: string): string;

/** Options of {@link registerOffline}. */
export interface OfflineOptions {
  /** The service worker's scope (a path); default: the folder of the sw.js URL. */
  scope?: string;
  /** Where this package is served, same origin; default: the folder of jikji.js. */
  packageUrl?: string | URL;
  /** Bundle folder URL(s) whose entry file (jikji.json) the worker keeps at once. */
  bundle?: string | URL | Array<string | URL>;
}

/**
 * Registers the package's service worker for offline use: the site serves a copy of the
 * package's `sw.js` (same origin, e.g. next to its page; a worker's scope is at most its own
 * folder) and calls this from its page. The worker, registered as `sw.js?package=<package
 * folder>`, keeps this package version's files (each checked against the SHA-256 that
 * scripts/pack-web wrote into sw.js; a second visit takes none of them from the network),
 * bundle entries (network first) and pages (cache first, named by content), and the site's own
 * pages, scripts and styles in its scope (network first, for offline use). Resolves with the
 * registration once its worker is active. Registers once (`updateViaCache: "none"`): when this
 * sw.js already runs for the scope, that registration is returned unchanged; the browser itself
 * checks sw.js for a new version on each navigation (one conditional GET, a 304 when unchanged).
 * Rejects with an Error when service workers are not
 * available (they need https, or http on localhost), with a JikjiError (code "origin") for a URL
 * on another origin, and with the browser's error when sw.js cannot be fetched or installed.
 * Source: web/sw-src.js and scripts/stamp-sw in the Jikji repository.
 */
export function registerOffline(swUrl?: string | URL, options?: OfflineOptions): Promise<ServiceWorkerRegistration>;

/** A bundle open in a Web Worker. */
export class Jikji {
  /** Fetches the bundle's entry file and opens it; rejects with the engine's message on failure. */
  static load(bundleUrl: string | URL, options?: LoadOptions): Promise<Jikji>;
  /** The opened bundle's summary. */
  manifest: BundleSummary;
  /** What opening cost: the entry file. */
  openStats: { requests: number; transfer: number; transferEstimated: boolean; stored: number };
  /**
   * Bytes the query model downloads for dense and hybrid search (its pages' raw sizes, from the
   * entry's pages.query_model; about 13 MB for multilingual-e5-small), or null when the bundle
   * carries no query model.
   */
  modelBytes: number | null;
  /** True once the query model is loaded. */
  modelLoaded: boolean;
  /** True when the bundle has a model (dense and hybrid need it). */
  readonly hasModel: boolean;
  /**
   * Starts (or joins) the model download; idempotent. Rejects with a JikjiError, code
   * "integrity", naming the file when the query model's wasm or glue differs from integrity.json
   * or a model page of the bundle (layers `m-`, tokenizer `k-`, row map `u-`) fails its content
   * hash; BM25 search keeps working.
   */
  loadModel(): Promise<void>;
  /** Runs one query. Rejects with a TypeError for a query of only white space (nothing to
   * match; no model is loaded for it). */
  search(query: string, options?: SearchOptions): Promise<SearchResult>;
  /** The engine's page cache and what this session fetched. */
  cacheStats(): Promise<CacheStats>;
  /** The bundle's filter values (tiers, languages, folders) with their chunk counts. */
  facets(): Promise<Facets>;
  /** Stops the worker; pending calls reject. */
  close(): void;
}

export default Jikji;

// Types of the <jikji-search> custom element (jikji-search.js; import "jikji-web/search").
import type { Facets, Jikji, SearchResult } from "./jikji.js";

export type SearchMode = "bm25" | "dense" | "hybrid";
/** Page state: loading, keyword search ready, semantic search ready too, or failed. */
export type SearchState = "loading" | "bm25-ready" | "ready" | "error";
/** Model state: none (no model or model="none"), idle, consent (Save-Data: waiting for the visitor), loading, loaded, error. */
export type ModelState = "none" | "idle" | "consent" | "loading" | "loaded" | "error";

/** The reading of a calibrated score: ≥ 0.6 "reliable", 0.3–0.6 "use with care", < 0.3 "weak". */
export function scoreBand(score: number): "reliable" | "use with care" | "weak";

/**
 * `<jikji-search bundle="/bundle/" mode="hybrid" top-k="10" url-state>`: a search box, mode
 * switch, tier / language / folder filters (values from the bundle) and a results list (title,
 * breadcrumb, snippet with <mark>ed terms, score band, source link, "More results"). Attributes:
 * bundle, engine, worker, model ("none"), model-url, mode, top-k, allowed-origins, url-state, id-prefix,
 * placeholder, no-styles. Themed by the --jikji-* custom properties of jikji-search.css.
 */
export class JikjiSearchElement extends HTMLElement {
  /** The open bundle, once loaded. */
  jikji: Jikji | null;
  /** The mode chosen in the form. */
  readonly mode: SearchMode;
  /** The filters chosen, as Jikji search filters, or null. */
  readonly filters: { tier?: string; lang?: string; folder?: string } | null;
  /** Runs `query` as if typed (in `mode`, default the chosen one). */
  search(query: string, mode?: SearchMode | null): Promise<void>;
  /** Starts loading the semantic model; `consent` also on a Save-Data connection. */
  loadModel(options?: { consent?: boolean }): Promise<void>;
  /** Shows a result as the list does for its own searches. */
  showResult(result: SearchResult, options?: { ms?: number | null; requestedMode?: SearchMode; query?: string }): void;
}

export interface JikjiStateDetail {
  state: SearchState;
  model: ModelState | "";
}

export interface JikjiResultsDetail {
  query: string;
  mode: SearchMode;
  count: number;
  result: SearchResult;
}

declare global {
  interface HTMLElementTagNameMap {
    "jikji-search": JikjiSearchElement;
  }
  interface HTMLElementEventMap {
    "jikji-state": CustomEvent<JikjiStateDetail>;
    "jikji-results": CustomEvent<JikjiResultsDetail>;
    "jikji-open": CustomEvent<{ manifest: unknown }>;
  }
}

export type { Facets };
export default JikjiSearchElement;

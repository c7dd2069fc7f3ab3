// <jikji-search>: a search box and results list over a Jikji bundle, as a custom element. The
// page itself (web/index.html) is one; the npm package ships it as "jikji-web/search"
// (packages/jikji-web, scripts/pack-web: this file, one copy). Types: JikjiSearchElement in
// jikji.d.ts.
//
//   <script type="module">import "jikji-web/search";</script>
//   <jikji-search bundle="/bundle/"></jikji-search>
//
// Attributes (read when the element is connected):
//   bundle           the bundle folder (jikji.json and p/), default "bundle/" (relative to the page)
//   engine, worker   engine folder and worker URL (Jikji.load's engineUrl, workerUrl; default: beside
//                    jikji.js, as the package lays them out)
//   model            "none": keyword search only (no model download ever)
//   model-url        checked against allowed-origins like the bundle (Jikji.load's modelUrl; the query
//                    model itself comes from the bundle's pages)
//   mode             the first mode: bm25 | dense | hybrid (default hybrid)
//   top-k            results per page (default 10, at most 100); "More results" adds as many again
//   allowed-origins  space-separated origins the bundle may come from besides the page's
//   url-state        present: ?q= and ?mode= run that search on load, and each search writes them
//                    back into the address (history.replaceState), so a results page can be shared
//   id-prefix        prefix of the ids of the inner elements (default "jikji-N-"; the page uses "")
//   placeholder      the search box's placeholder
//   no-styles        present: do not add the element's stylesheet (jikji-search.css beside this file)
//
// Theming: CSS custom properties on the element or above it (jikji-search.css): --jikji-bg,
// --jikji-fg, --jikji-muted, --jikji-line, --jikji-card, --jikji-accent, --jikji-accent-fg,
// --jikji-mark-bg, --jikji-mark-fg, --jikji-tag, --jikji-error-bg, --jikji-error-fg,
// --jikji-radius, --jikji-font.
//
// Accessibility: the search box is an ARIA combobox controlling the results listbox (ArrowDown /
// ArrowUp move through results, Home / End, Enter opens the active result's source or passage,
// Escape leaves the list); a polite live region announces each result count; filters are native
// <select>s; every control is at least 44 px high on touch screens.
//
// Semantic search: BM25 answers at once; dense and hybrid load the query model (~14 MB) the first
// time they are asked for, never on load, and on a Save-Data connection only after the visitor
// agrees (the "Load semantic search" button, or ?model=load with url-state). Until then a hybrid
// query shows BM25 results and is asked again when the model is in.
//
// Events (bubbling): "jikji-state" {detail: {state, model}} with state loading | bm25-ready | ready
// | error and model none | idle | consent | loading | loaded | error; "jikji-results" {detail:
// {query, mode, count, result}}.
//
// Data from the bundle is only ever inserted as text nodes and attributes, never as HTML.

import { Jikji } from "./jikji.js";

const MODES = ["bm25", "dense", "hybrid"];
const MODE_LABELS = { bm25: "BM25", dense: "Dense", hybrid: "Hybrid" };
const MODE_TITLES = {
  bm25: "Keyword search (works before the model is downloaded)",
  dense: "Semantic search with the embedding model",
  hybrid: "Keyword and semantic results combined",
};
const DEBOUNCE_MS = 250;
const LANG_RE = /^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$/;
let instances = 0;
let stylesAdded = false;

/** The reading of a calibrated score (README, "Scores"): ≥ 0.6, 0.3–0.6, < 0.3. */
export function scoreBand(s) {
  return s >= 0.6 ? "reliable" : s >= 0.3 ? "use with care" : "weak";
}

/** Only http(s) links (relative URLs resolve against the page); anything else is not a link. */
function safeHref(url) {
  if (typeof url !== "string" || url === "") return null;
  try {
    const u = new URL(url, location.href);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text != null) e.textContent = String(text);
  return e;
}

function formatScore(s) {
  const n = Number(s);
  if (!Number.isFinite(n)) return String(s);
  if (n !== 0 && Math.abs(n) < 1e-3) return n.toExponential(2);
  return n.toFixed(Math.abs(n) >= 100 ? 1 : Math.abs(n) >= 1 ? 2 : 2);
}

function fmtMB(bytes) {
  return (bytes / 1e6).toFixed(bytes >= 1e7 ? 0 : 1);
}

let langNames = null;
/** "Korean" for "ko" in the visitor's language (Intl.DisplayNames), else the code. */
function langName(code) {
  if (code === "other") return "Other";
  try {
    langNames ??= new Intl.DisplayNames([navigator.language || "en"], { type: "language" });
    return langNames.of(code) || code;
  } catch {
    return code;
  }
}

/** A readable title when the engine gave none: the file name without extension and number. */
function fallbackLabel(hit) {
  if (typeof hit.label === "string" && hit.label) return hit.label;
  if (typeof hit.title === "string" && hit.title.trim()) return hit.title.trim();
  return String(hit.source || hit.source_url || "(unknown source)");
}

export class JikjiSearchElement extends HTMLElement {
  constructor() {
    super();
    /** The open bundle (a Jikji), once loaded. */
    this.jikji = null;
    this._n = ++instances;
    this._built = false;
    this._modelReady = false;
    this._modelFailed = null;
    this._modelLoading = null;
    this._consent = false;
    this._seq = 0;
    this._timer = 0;
    this._topK = 10;
    this._shown = 10;
    this._facets = null;
    this._facetsLoading = null;
    this._active = -1;
    this._lastResult = null;
  }

  connectedCallback() {
    if (this._built) return;
    this._built = true;
    this._build();
    this._start();
  }

  disconnectedCallback() {
    clearTimeout(this._timer);
  }

  /** The id of inner element `name`: id-prefix + name. */
  _id(name) {
    const p = this.getAttribute("id-prefix");
    return `${p ?? `jikji-${this._n}-`}${name}`;
  }

  _build() {
    if (!this.hasAttribute("no-styles") && !stylesAdded) {
      stylesAdded = true;
      const link = document.createElement("link");
      link.rel = "stylesheet";
      link.href = new URL("./jikji-search.css", import.meta.url).href;
      document.head.append(link);
    }
    const params = new URLSearchParams(location.search);
    const urlState = this.hasAttribute("url-state");
    this._topK = Math.min(100, Math.max(1, parseInt(this.getAttribute("top-k") || "10", 10) || 10));
    this._shown = this._topK;
    this._consent = urlState && params.get("model") === "load";
    const startMode = (urlState && MODES.includes(params.get("mode")) && params.get("mode")) || (MODES.includes(this.getAttribute("mode")) ? this.getAttribute("mode") : "hybrid");

    const form = el("form", "jk-form");
    form.id = this._id("search-form");
    form.setAttribute("role", "search");
    form.autocomplete = "off";
    const label = el("label", "jk-visually-hidden", "Search the books");
    label.htmlFor = this._id("q");
    const input = el("input", "jk-q");
    input.id = this._id("q");
    input.name = "q";
    input.type = "search";
    input.placeholder = this.getAttribute("placeholder") || "Search in any language — 學而時習之, to be or not to be…";
    input.enterKeyHint = "search";
    input.spellcheck = false;
    input.setAttribute("role", "combobox");
    input.setAttribute("aria-autocomplete", "list");
    input.setAttribute("aria-expanded", "false");
    input.setAttribute("aria-controls", this._id("results"));
    if (urlState && params.get("q")) input.value = params.get("q");
    const modes = el("fieldset", "jk-modes");
    modes.id = this._id("modes");
    modes.append(el("legend", "jk-visually-hidden", "Search mode"));
    for (const m of MODES) {
      const l = el("label");
      l.title = MODE_TITLES[m];
      const r = el("input");
      r.type = "radio";
      r.name = "mode";
      r.value = m;
      r.checked = m === startMode;
      l.append(r, el("span", null, MODE_LABELS[m]));
      modes.append(l);
    }
    form.append(label, input, modes);

    const filters = el("div", "jk-filters");
    filters.id = this._id("filters");
    filters.setAttribute("role", "group");
    filters.setAttribute("aria-label", "Filters");
    this._selects = {};
    for (const [key, text] of [
      ["tier", "Tier"],
      ["lang", "Language"],
      ["folder", "Folder"],
    ]) {
      const l = el("label", "jk-filter");
      const cap = el("span", "jk-filter-name", text);
      const s = el("select", `jk-filter-${key}`);
      s.id = this._id(`filter-${key}`);
      s.name = key;
      s.append(new Option(key === "tier" ? "All tiers" : key === "lang" ? "All languages" : "All folders", ""));
      s.disabled = true; // until the bundle's values are in
      l.append(cap, s);
      filters.append(l);
      this._selects[key] = s;
    }

    const loading = el("section", "jk-loading");
    loading.id = this._id("loading");
    loading.setAttribute("aria-label", "Loading");
    const status = el("div", "jk-status", "Loading…");
    status.id = this._id("status");
    status.setAttribute("role", "status");
    status.setAttribute("aria-live", "polite");
    const progressRow = el("div", "jk-progress-row");
    progressRow.id = this._id("progress-row");
    const progress = el("progress", "jk-model-progress");
    progress.id = this._id("model-progress");
    progress.max = 1;
    progress.value = 0;
    const progressLabel = el("span", "jk-progress-label");
    progressLabel.id = this._id("progress-label");
    progress.setAttribute("aria-labelledby", progressLabel.id);
    progressRow.append(progress, progressLabel);
    // The label gets the bundle's model size once it is open.
    const loadModel = el("button", "jk-load-model", "Load semantic search");
    loadModel.type = "button";
    loadModel.id = this._id("load-model");
    loadModel.hidden = true;
    loading.append(status, progressRow, loadModel);

    const error = el("div", "jk-error");
    error.id = this._id("error");
    error.setAttribute("role", "alert");
    error.hidden = true;
    const notice = el("p", "jk-notice");
    notice.id = this._id("notice");
    notice.hidden = true;
    const info = el("p", "jk-results-info");
    info.id = this._id("results-info");
    info.setAttribute("aria-live", "polite");
    info.setAttribute("role", "status");
    const results = el("ol", "jk-results");
    results.id = this._id("results");
    results.setAttribute("role", "listbox");
    results.setAttribute("aria-label", "Results");
    Object.assign(results.dataset, { query: "", mode: "", status: "", count: "0" });
    const more = el("button", "jk-more", "More results");
    more.type = "button";
    more.id = this._id("more");
    more.hidden = true;

    this.replaceChildren(form, filters, loading, error, notice, info, results, more);
    Object.assign(this, {
      _form: form,
      _input: input,
      _status: status,
      _progressRow: progressRow,
      _progress: progress,
      _progressLabel: progressLabel,
      _loadButton: loadModel,
      _error: error,
      _notice: notice,
      _info: info,
      _results: results,
      _more: more,
      _filtersEl: filters,
    });

    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      this._shown = this._topK;
      this._run();
    });
    input.addEventListener("input", () => {
      this._shown = this._topK;
      clearTimeout(this._timer);
      this._timer = setTimeout(() => this._run(), DEBOUNCE_MS);
    });
    input.addEventListener("keydown", (ev) => this._onKey(ev));
    form.addEventListener("change", (ev) => {
      if (ev.target.name !== "mode") return;
      if (ev.target.value !== "bm25") this._wantModel();
      this._run();
    });
    filters.addEventListener("change", () => {
      this._shown = this._topK;
      this._run();
    });
    // The values come from the bundle's columns page: asked for when the filters are first used.
    filters.addEventListener("pointerdown", () => this._loadFacets(), { once: true });
    filters.addEventListener("focusin", () => this._loadFacets(), { once: true });
    loadModel.addEventListener("click", () => {
      this._consent = true;
      loadModel.hidden = true;
      this._wantModel();
    });
    more.addEventListener("click", () => {
      this._shown = Math.min(this._shown + this._topK, 1000);
      this._run({ keepActive: true });
    });
  }

  _setState(state) {
    this.dataset.state = state;
    this._emit("jikji-state", { state, model: this.dataset.model || "" });
  }

  _setModel(model) {
    this.dataset.model = model;
    this._emit("jikji-state", { state: this.dataset.state || "", model });
  }

  _emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail, bubbles: true }));
  }

  _setStatus(text) {
    this._status.textContent = text;
  }

  _showError(message) {
    this._error.hidden = false;
    this._error.textContent = message;
  }

  _clearError() {
    this._error.hidden = true;
    this._error.textContent = "";
  }

  _onProgress({ phase, loaded, total, stage }) {
    if (phase === "ready" || phase === "query") return;
    this._progressRow.hidden = false;
    this._progress.max = Math.max(total, 1);
    this._progress.value = Math.min(loaded, total);
    const what = phase === "bundle" ? "Index" : "Model";
    if (stage === "init") {
      this._progressLabel.textContent = `${what}: starting…`;
    } else {
      const pct = total > 0 ? Math.floor((100 * loaded) / total) : 0;
      this._progressLabel.textContent = `${what}: ${fmtMB(loaded)} / ${fmtMB(total)} MB (${pct}%)`;
    }
  }

  /** The mode chosen in the form. */
  get mode() {
    return this._form?.querySelector('input[name="mode"]:checked')?.value || "hybrid";
  }

  /** The filters chosen (Jikji search `filters`), or null. */
  get filters() {
    const f = {};
    for (const [k, s] of Object.entries(this._selects || {})) if (s.value !== "") f[k] = s.value;
    return Object.keys(f).length ? f : null;
  }

  /** Runs `query` (in `mode`, default the chosen one) as if typed. */
  search(query, mode = null) {
    this._input.value = String(query);
    if (mode && MODES.includes(mode)) {
      const r = this._form.querySelector(`input[name="mode"][value="${mode}"]`);
      if (r && !r.disabled) r.checked = true;
      if (mode !== "bm25") this._wantModel();
    }
    this._shown = this._topK;
    return this._run();
  }

  /**
   * Starts loading the semantic model (with `consent`: also on a Save-Data connection, as the
   * visitor's own choice). Resolves when it is in or has failed.
   */
  loadModel({ consent = false } = {}) {
    if (consent) this._consent = true;
    this._wantModel();
    return this._modelLoading || Promise.resolve();
  }

  async _start() {
    this._setState("loading");
    this._setStatus("Loading the search index…");
    const modelAttr = this.getAttribute("model");
    this._modelOff = modelAttr === "none";
    const allowed = (this.getAttribute("allowed-origins") || "").split(/\s+/).filter(Boolean);
    const opts = { onProgress: (p) => this._onProgress(p), allowedOrigins: allowed };
    if (this.getAttribute("engine")) opts.engineUrl = this.getAttribute("engine");
    if (this.getAttribute("worker")) opts.workerUrl = this.getAttribute("worker");
    if (this.getAttribute("model-url")) opts.modelUrl = this.getAttribute("model-url");
    try {
      this.jikji = await Jikji.load(this.getAttribute("bundle") || "bundle/", opts);
    } catch (e) {
      console.error("loading the bundle failed:", e);
      this._setState("error");
      this._setStatus("Could not load the search index.");
      this._progressRow.hidden = true;
      this._showError(e.message);
      return;
    }
    this._emit("jikji-open", { manifest: this.jikji.manifest });
    if (this.jikji.modelBytes) this._loadButton.textContent = `Load semantic search (${fmtMB(this.jikji.modelBytes)} MB)`;
    this._setState("bm25-ready");
    this._progressRow.hidden = true;
    if (this._input.value.trim()) this._run();
    if (!this.jikji.hasModel || this._modelOff) {
      this._setModel("none");
      this._setStatus(this.jikji.hasModel ? "Ready (keyword search only)." : "Ready (keyword search only: this bundle has no model).");
      this._disableSemantic();
      return;
    }
    this._setModel("idle");
    this._setStatus(
      this._saveData()
        ? "Keyword search is ready. Semantic search downloads its model when you ask for it (Save-Data is on)."
        : "Keyword search is ready. Semantic search loads its model with your first dense or hybrid query.",
    );
    // A query given on load (?q=) asks for the model itself once its BM25 answer is shown (_run):
    // not before, so that on a slow network the model's megabytes do not starve the pages of
    // that first answer.
  }

  _saveData() {
    return Boolean(globalThis.navigator?.connection?.saveData);
  }

  _disableSemantic() {
    for (const r of this._form.querySelectorAll('input[name="mode"]')) if (r.value !== "bm25") r.disabled = true;
    this._form.querySelector('input[name="mode"][value="bm25"]').checked = true;
  }

  /**
   * Semantic search was asked for: start loading the model once — never on load, and on a
   * Save-Data connection only after the visitor's consent. When it is in, the query runs again.
   */
  _wantModel() {
    const j = this.jikji;
    if (this._modelReady || this._modelLoading || this._modelFailed || !j || !j.hasModel || this._modelOff) return;
    if (this._saveData() && !this._consent) {
      this._loadButton.hidden = false;
      this._setModel("consent");
      this._setStatus("Keyword search is ready. Your browser asks to save data: semantic search needs a one-time download.");
      return;
    }
    this._loadButton.hidden = true;
    this._modelLoading = this._startModel().finally(() => {
      this._modelLoading = null;
    });
  }

  async _startModel() {
    this._setModel("loading");
    this._setStatus("Keyword results now; downloading the semantic model…");
    this._progressRow.hidden = false;
    this._progress.removeAttribute("value");
    this._progressLabel.textContent = "Model: connecting…";
    try {
      await this.jikji.loadModel();
    } catch (e) {
      console.error("loading the model failed:", e);
      this._modelFailed = e;
      this._setModel("error");
      this._setStatus("Keyword search is ready, but the semantic model could not be loaded.");
      this._progressRow.hidden = true;
      this._showError(`Model: ${e.message}`);
      this._disableSemantic();
      // A notice shown with the last keyword answer said semantic results would follow.
      if (!this._notice.hidden) this._notice.textContent = "The embedding model could not be loaded: showing keyword (BM25) results.";
      return;
    }
    this._modelReady = true;
    this._progressRow.hidden = true;
    this._setStatus("Ready.");
    this._setModel("loaded");
    this._setState("ready");
    if (this._input.value.trim() && this.mode !== "bm25") this._run();
  }

  async _loadFacets() {
    if (this._facets || this._facetsLoading || !this.jikji) return this._facetsLoading;
    this._facetsLoading = (async () => {
      try {
        this._facets = await this.jikji.facets();
      } catch (e) {
        console.warn("the bundle's filter values:", e.message);
        this._filtersEl.hidden = true;
        return;
      }
      const f = this._facets;
      const add = (s, value, text) => s.append(new Option(text, value));
      for (const [t, n] of f.tiers) add(this._selects.tier, String(t), `Tier ${t} (${n})`);
      for (const [l, n] of f.langs) add(this._selects.lang, l, `${langName(l)} (${n})`);
      for (const [d, n] of f.folders) {
        const depth = d.split("/").length - 1;
        add(this._selects.folder, d, `${"\u2003".repeat(depth)}${d.split("/").pop()} (${n})`);
      }
      for (const s of Object.values(this._selects)) s.disabled = s.options.length <= 1;
    })().finally(() => {
      this._facetsLoading = null;
    });
    return this._facetsLoading;
  }

  async _run({ keepActive = false } = {}) {
    clearTimeout(this._timer);
    const query = this._input.value.trim();
    const seq = ++this._seq;
    if (!this.jikji) return;
    if (!query) {
      this._clearResults();
      this._writeUrl("", this.mode);
      return;
    }
    const requestedMode = this.mode;
    const mode = requestedMode !== "bm25" && !this._modelReady ? "bm25" : requestedMode;
    const t0 = performance.now();
    try {
      const result = await this.jikji.search(query, { mode, topK: this._shown, filters: this.filters });
      if (seq !== this._seq) return;
      if (!this._modelFailed) this._clearError();
      this.showResult(result, { ms: performance.now() - t0, requestedMode, query, keepActive });
      this._writeUrl(query, requestedMode);
      if (requestedMode !== mode) this._wantModel();
      // The columns page is in the engine now: fill the filters without a fetch.
      if (!this._facets) this._loadFacets();
    } catch (e) {
      if (seq !== this._seq) return;
      console.error("search failed:", e);
      this._clearResults();
      Object.assign(this._results.dataset, { query, mode, status: "error" });
      this._showError(`Search failed: ${e.message}`);
    }
  }

  /** With url-state: the address says ?q=…&mode=… (other parameters kept), without a new history entry. */
  _writeUrl(query, mode) {
    if (!this.hasAttribute("url-state")) return;
    const u = new URL(location.href);
    if (query) u.searchParams.set("q", query);
    else u.searchParams.delete("q");
    u.searchParams.set("mode", mode);
    if (u.href !== location.href) history.replaceState(history.state, "", u.href);
  }

  _clearResults() {
    this._results.replaceChildren();
    Object.assign(this._results.dataset, { query: "", mode: "", count: "0", status: "" });
    this._info.textContent = "";
    this._notice.hidden = true;
    this._more.hidden = true;
    this._setActive(-1);
    this._input.setAttribute("aria-expanded", "false");
  }

  /**
   * Shows a search result ({query, mode, calibrated, hits}, as Jikji#search returns it). The
   * results list gets data-query (the query as typed, trimmed), data-mode (the mode run),
   * data-count and data-status="done".
   */
  showResult(result, { ms = null, requestedMode = result.mode, query = result.query, keepActive = false } = {}) {
    const hits = Array.isArray(result.hits) ? result.hits : [];
    const calibrated = result.calibrated === true;
    const items = hits.map((h, i) => this._renderHit(h, i, calibrated));
    this._results.replaceChildren(...items);
    Object.assign(this._results.dataset, {
      query: String(query ?? ""),
      mode: String(result.mode ?? ""),
      count: String(hits.length),
      status: "done",
    });
    this._lastResult = result;
    this._input.setAttribute("aria-expanded", hits.length ? "true" : "false");
    if (!keepActive || this._active >= hits.length) this._setActive(-1);
    else this._setActive(this._active);
    const time = ms == null ? "" : ` · ${Math.round(ms)} ms`;
    const modeName = MODE_LABELS[result.mode] || result.mode;
    this._info.textContent = hits.length
      ? `${hits.length} result${hits.length === 1 ? "" : "s"} · ${modeName}${time}`
      : `No results · ${modeName}${time}`;
    this._more.hidden = !(hits.length > 0 && hits.length >= this._shown);
    if (requestedMode !== result.mode) {
      this._notice.hidden = false;
      this._notice.textContent = this._modelFailed
        ? "The embedding model could not be loaded: showing keyword (BM25) results."
        : this.jikji && !this.jikji.hasModel
          ? "This bundle has no embedding model: showing keyword (BM25) results."
          : this._saveData() && !this._consent
            ? "Showing keyword (BM25) results; semantic results need the model download (see above)."
            : "Showing keyword (BM25) results; semantic results follow when the model has loaded.";
    } else {
      this._notice.hidden = true;
      this._notice.textContent = "";
    }
    this._emit("jikji-results", { query: String(query ?? ""), mode: result.mode, count: hits.length, result });
  }

  _renderHit(hit, index, calibrated) {
    const li = el("li", "hit");
    li.id = this._id(`hit-${index}`);
    li.setAttribute("role", "option");
    li.setAttribute("aria-selected", "false");
    li.dataset.chunkId = String(hit.id);
    li.dataset.rank = String(hit.rank);
    li.dataset.score = String(hit.score);
    const lang = typeof hit.lang === "string" && LANG_RE.test(hit.lang) ? hit.lang : null;

    const head = el("div", "hit-head");
    const title = el("h3", "hit-title");
    const href = safeHref(hit.source_url);
    const label = fallbackLabel(hit);
    const source = href ? el("a", "source", label) : el("span", "source", label);
    if (href) {
      source.href = href;
      source.target = "_blank";
      source.rel = "noopener noreferrer";
    }
    source.title = String(hit.source ?? "");
    title.append(source);
    head.append(title);

    const meta = el("div", "hit-meta");
    meta.append(el("span", "rank", `#${hit.rank}`));
    const score = el("span", "score");
    if (calibrated) {
      const band = scoreBand(hit.score);
      score.dataset.band = band;
      score.textContent = `${band} · ${formatScore(hit.score)}`;
      score.title = `calibrated score ${formatScore(hit.score)}: ${band} (≥ 0.6 reliable, 0.3–0.6 use with care, < 0.3 weak); raw ${hit.raw_score}`;
    } else {
      score.textContent = `score ${formatScore(hit.score)}`;
      score.title = "uncalibrated score (this bundle was built before calibration)";
    }
    meta.append(score);
    if (hit.tier != null && hit.tier !== "") meta.append(el("span", "tag tier", `tier ${hit.tier}`));
    if (hit.lang) meta.append(el("span", "tag lang", lang ? langName(lang) : hit.lang));
    head.append(meta);
    li.append(head);

    const path = Array.isArray(hit.heading_path) ? hit.heading_path.filter((h) => h !== "") : [];
    if (path.length) {
      const crumbs = el("nav", "heading-path");
      crumbs.setAttribute("aria-label", "Section");
      crumbs.textContent = path.join(" › ");
      if (lang) crumbs.lang = lang;
      li.append(crumbs);
    }

    const snip = el("p", "hit-snippet");
    if (lang) snip.lang = lang;
    const parts = Array.isArray(hit.snippet?.parts) ? hit.snippet.parts : null;
    if (parts) {
      if (hit.snippet.cut_start) snip.append("… ");
      parts.forEach((p, i) => {
        if (i % 2 === 1) snip.append(el("mark", null, p));
        else if (p) snip.append(document.createTextNode(String(p)));
      });
      if (hit.snippet.cut_end) snip.append(" …");
    } else {
      const t = String(hit.text ?? "");
      snip.textContent = t.length > 240 ? `${t.slice(0, 240)} …` : t;
    }
    li.append(snip);

    // The whole passage, as stored (hidden until asked for).
    const text = el("p", "hit-text", hit.text ?? "");
    if (lang) text.lang = lang;
    text.id = this._id(`text-${index}`);
    text.hidden = true;
    const toggle = el("button", "more-text", "Show passage");
    toggle.type = "button";
    toggle.setAttribute("aria-expanded", "false");
    toggle.setAttribute("aria-controls", text.id);
    toggle.addEventListener("click", (ev) => {
      ev.stopPropagation();
      this._togglePassage(li);
    });
    li.append(toggle, text);
    li.addEventListener("click", (ev) => {
      if (ev.target.closest("a, button")) return;
      this._setActive(index);
    });
    return li;
  }

  _togglePassage(li) {
    const text = li.querySelector(".hit-text");
    const toggle = li.querySelector(".more-text");
    text.hidden = !text.hidden;
    toggle.textContent = text.hidden ? "Show passage" : "Hide passage";
    toggle.setAttribute("aria-expanded", String(!text.hidden));
  }

  _hits() {
    return [...this._results.querySelectorAll(":scope > li.hit")];
  }

  _setActive(i) {
    const hits = this._results ? this._hits() : [];
    this._active = i >= 0 && i < hits.length ? i : -1;
    hits.forEach((h, k) => {
      const on = k === this._active;
      h.classList.toggle("active", on);
      h.setAttribute("aria-selected", String(on));
    });
    if (this._active >= 0) {
      this._input?.setAttribute("aria-activedescendant", hits[this._active].id);
      hits[this._active].scrollIntoView?.({ block: "nearest" });
    } else {
      this._input?.removeAttribute("aria-activedescendant");
    }
  }

  _onKey(ev) {
    const hits = this._hits();
    if (!hits.length) return;
    const last = hits.length - 1;
    let next = null;
    switch (ev.key) {
      case "ArrowDown":
        next = this._active < 0 ? 0 : Math.min(last, this._active + 1);
        break;
      case "ArrowUp":
        next = this._active <= 0 ? -1 : this._active - 1;
        break;
      case "Home":
        if (this._active < 0) return;
        next = 0;
        break;
      case "End":
        if (this._active < 0) return;
        next = last;
        break;
      case "Escape":
        if (this._active < 0) return;
        next = -1;
        break;
      case "Enter": {
        if (this._active < 0) return; // submits the form
        ev.preventDefault();
        const li = hits[this._active];
        const a = li.querySelector("a.source");
        if (a) a.click();
        else this._togglePassage(li);
        return;
      }
      default:
        return;
    }
    ev.preventDefault();
    this._setActive(next);
  }
}

if (!customElements.get("jikji-search")) customElements.define("jikji-search", JikjiSearchElement);

export default JikjiSearchElement;

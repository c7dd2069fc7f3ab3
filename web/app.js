// Jikji search page. Data from the bundle is only ever inserted with textContent / attributes.
import { Jikji } from "./jikji.js";

const params = new URLSearchParams(location.search);
// Relative to the page, so the site also works under a sub-path (at "/" these are /bundle/, /model/).
const BUNDLE_URL = params.get("bundle") || "bundle/";
const MODEL_PARAM = params.get("model");
const MODEL_URL = MODEL_PARAM === "none" ? null : MODEL_PARAM || "model/";
// Origins other than this page's that ?bundle= and ?model= may name: none unless the site lists
// them, space-separated, in <meta name="jikji-allowed-origins" content="https://a.example …">
// (and in the CSP's connect-src).
const ALLOWED_ORIGINS = (document.querySelector('meta[name="jikji-allowed-origins"]')?.content || "")
  .split(/\s+/)
  .filter(Boolean);
// The engine (wasm-bindgen output of scripts/build-wasm, with its integrity.json) beside the page.
const ENGINE_URL = "pkg/";
const TOP_K = Math.min(100, Math.max(1, parseInt(params.get("k") || "10", 10) || 10));
const DEBOUNCE_MS = 250;

const $ = (sel) => document.querySelector(sel);
const form = $("#search-form");
const input = $("#q");
const statusEl = $("#status");
const progressRow = $("#progress-row");
const progressEl = $("#model-progress");
const progressLabel = $("#progress-label");
const errorEl = $("#error");
const noticeEl = $("#notice");
const infoEl = $("#results-info");
const resultsEl = $("#results");
const bundleInfoEl = $("#bundle-info");
const loadModelButton = $("#load-model");

let jikji = null;
let modelReady = false;
let modelFailed = null; // Error when the model could not be loaded
let modelLoading = null; // Promise while the model loads
// The visitor's consent to download the model on a Save-Data connection (button, or ?model=load).
let modelConsent = params.get("model") === "load";
/** navigator.connection.saveData: the visitor asked for less data. */
const saveData = Boolean(globalThis.navigator?.connection?.saveData);
let searchSeq = 0;
let debounceTimer = 0;

function setState(state) {
  document.body.dataset.state = state;
}

function setStatus(text) {
  statusEl.textContent = text;
}

function showError(message) {
  errorEl.hidden = false;
  errorEl.textContent = message;
}

function clearError() {
  errorEl.hidden = true;
  errorEl.textContent = "";
}

function fmtMB(bytes) {
  return (bytes / 1e6).toFixed(bytes >= 1e7 ? 0 : 1);
}

function onProgress({ phase, loaded, total, stage }) {
  if (phase === "ready" || phase === "query") return;
  progressRow.hidden = false;
  progressEl.max = Math.max(total, 1);
  progressEl.value = Math.min(loaded, total);
  const what = phase === "bundle" ? "Index" : "Model";
  if (stage === "init") {
    progressLabel.textContent = `${what}: starting…`;
  } else {
    const pct = total > 0 ? Math.floor((100 * loaded) / total) : 0;
    progressLabel.textContent = `${what}: ${fmtMB(loaded)} / ${fmtMB(total)} MB (${pct}%)`;
  }
}

function selectedMode() {
  return form.querySelector('input[name="mode"]:checked')?.value || "hybrid";
}

function formatScore(s) {
  const n = Number(s);
  if (!Number.isFinite(n)) return String(s);
  if (n !== 0 && Math.abs(n) < 1e-3) return n.toExponential(2);
  return n.toFixed(Math.abs(n) >= 100 ? 1 : 4);
}

/** Only http(s) links (relative URLs resolve against the page); anything else is shown as text. */
function safeHref(url) {
  if (typeof url !== "string" || url === "") return null;
  try {
    const u = new URL(url, location.href);
    return u.protocol === "http:" || u.protocol === "https:" ? u.href : null;
  } catch {
    return null;
  }
}

const LANG_RE = /^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$/;

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text != null) e.textContent = String(text);
  return e;
}

/** The reading of a calibrated score (see README, "Scores"). */
function scoreBand(s) {
  return s >= 0.6 ? "reliable" : s >= 0.3 ? "use with care" : "weak";
}

function renderHit(hit, calibrated = false) {
  const li = el("li", "hit");
  li.dataset.chunkId = String(hit.id);
  li.dataset.rank = String(hit.rank);
  li.dataset.score = String(hit.score);

  const meta = el("div", "hit-meta");
  meta.append(el("span", "rank", `#${hit.rank}`));
  const score = el("span", "score", formatScore(hit.score));
  score.title = `score ${hit.score}`;
  if (calibrated) {
    score.dataset.band = scoreBand(hit.score);
    score.title = `calibrated score ${formatScore(hit.score)} (${scoreBand(hit.score)}); raw ${hit.raw_score}`;
  }
  meta.append(score);
  if (hit.tier != null && hit.tier !== "") meta.append(el("span", "tag tier", hit.tier));
  if (hit.lang) meta.append(el("span", "tag lang", hit.lang));
  li.append(meta);

  const title = el("div", "hit-source");
  const href = safeHref(hit.source_url);
  const sourceText = hit.source || hit.source_url || "(unknown source)";
  if (href) {
    const a = el("a", "source", sourceText);
    a.href = href;
    a.target = "_blank";
    a.rel = "noopener noreferrer";
    title.append(a);
  } else {
    title.append(el("span", "source", sourceText));
  }
  li.append(title);

  const path = Array.isArray(hit.heading_path) ? hit.heading_path.filter((h) => h !== "") : [];
  if (path.length) li.append(el("div", "heading-path", path.join(" › ")));

  const text = el("p", "hit-text", hit.text ?? "");
  if (typeof hit.lang === "string" && LANG_RE.test(hit.lang)) text.lang = hit.lang;
  li.append(text);

  if (String(hit.text ?? "").length > 400) {
    li.classList.add("clamped");
    const more = el("button", "more", "Show more");
    more.type = "button";
    more.addEventListener("click", () => {
      const clamped = li.classList.toggle("clamped");
      more.textContent = clamped ? "Show more" : "Show less";
    });
    li.append(more);
  }
  return li;
}

/**
 * Render a parsed engine result ({query, mode, hits}).
 * #results gets data-query (the query as typed, trimmed), data-mode (the mode actually run),
 * data-count and data-status="done" so tests can wait for exactly these results.
 */
function renderResults(result, { ms = null, requestedMode = result.mode, query = result.query } = {}) {
  const hits = Array.isArray(result.hits) ? result.hits : [];
  const items = hits.map((h) => renderHit(h, result.calibrated === true));
  resultsEl.replaceChildren(...items);
  resultsEl.dataset.query = String(query ?? "");
  resultsEl.dataset.mode = String(result.mode ?? "");
  resultsEl.dataset.count = String(hits.length);
  resultsEl.dataset.status = "done";
  const time = ms == null ? "" : ` · ${Math.round(ms)} ms`;
  infoEl.textContent = hits.length
    ? `${hits.length} result${hits.length === 1 ? "" : "s"} · ${result.mode}${time}`
    : `No results · ${result.mode}${time}`;
  if (requestedMode !== result.mode) {
    noticeEl.hidden = false;
    noticeEl.textContent = modelFailed
      ? "The embedding model could not be loaded: showing keyword (BM25) results."
      : jikji && !jikji.hasModel
        ? "This bundle has no embedding model: showing keyword (BM25) results."
        : "Showing keyword (BM25) results; semantic results follow when the model has loaded.";
  } else {
    noticeEl.hidden = true;
    noticeEl.textContent = "";
  }
}

function clearResults() {
  resultsEl.replaceChildren();
  resultsEl.dataset.query = "";
  resultsEl.dataset.mode = "";
  resultsEl.dataset.count = "0";
  resultsEl.dataset.status = "";
  infoEl.textContent = "";
  noticeEl.hidden = true;
}

async function runSearch() {
  clearTimeout(debounceTimer);
  const query = input.value.trim();
  const seq = ++searchSeq;
  if (!jikji) return; // runs again once the bundle is open
  if (!query) {
    clearResults();
    return;
  }
  const requestedMode = selectedMode();
  const mode = requestedMode !== "bm25" && !modelReady ? "bm25" : requestedMode;
  const t0 = performance.now();
  try {
    const result = await jikji.search(query, { mode, topK: TOP_K });
    if (seq !== searchSeq) return; // a newer search started meanwhile
    if (!modelFailed) clearError();
    renderResults(result, { ms: performance.now() - t0, requestedMode, query });
    // Progressive hybrid: BM25 answered; semantic search was asked for, so get the model and
    // answer again (without re-typing) once it is in.
    if (requestedMode !== mode) wantModel();
  } catch (e) {
    if (seq !== searchSeq) return;
    console.error("search failed:", e);
    clearResults();
    resultsEl.dataset.query = query;
    resultsEl.dataset.mode = mode;
    resultsEl.dataset.status = "error";
    showError(`Search failed: ${e.message}`);
  }
}

function scheduleSearch() {
  clearTimeout(debounceTimer);
  debounceTimer = setTimeout(runSearch, DEBOUNCE_MS);
}

form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  runSearch();
});
input.addEventListener("input", scheduleSearch);
form.addEventListener("change", (ev) => {
  if (ev.target.name !== "mode") return;
  if (ev.target.value !== "bm25") wantModel();
  runSearch();
});
loadModelButton.addEventListener("click", () => {
  modelConsent = true;
  loadModelButton.hidden = true;
  wantModel();
});

/**
 * Semantic search was asked for (a dense/hybrid query, that mode chosen, or the button):
 * start loading the model once — never on page load, and on a Save-Data connection only
 * after the visitor's consent (the button). When it is in, the current query runs again.
 */
function wantModel() {
  if (modelReady || modelLoading || modelFailed || !jikji || !jikji.hasModel || !MODEL_URL) return;
  if (saveData && !modelConsent) {
    loadModelButton.hidden = false;
    document.body.dataset.model = "consent";
    setStatus("Keyword search is ready. Your browser asks to save data: semantic search needs a one-time download.");
    return;
  }
  loadModelButton.hidden = true;
  modelLoading = startModel().finally(() => {
    modelLoading = null;
  });
}

async function startModel() {
  document.body.dataset.model = "loading";
  setStatus("Keyword results now; downloading the semantic model…");
  progressRow.hidden = false;
  progressEl.removeAttribute("value"); // indeterminate until the first bytes arrive
  progressLabel.textContent = "Model: connecting…";
  try {
    await jikji.loadModel();
  } catch (e) {
    console.error("loading the model failed:", e);
    modelFailed = e;
    document.body.dataset.model = "error";
    setStatus("Keyword search is ready, but the semantic model could not be loaded.");
    progressRow.hidden = true;
    showError(`Model: ${e.message}`);
    disableSemanticModes();
    return;
  }
  modelReady = true;
  document.body.dataset.model = "loaded";
  progressRow.hidden = true;
  setStatus("Ready.");
  setState("ready");
  if (input.value.trim() && selectedMode() !== "bm25") runSearch();
}

function describeBundle(m) {
  const parts = [];
  if (m.chunks != null) parts.push(`${Number(m.chunks).toLocaleString()} passages`);
  if (m.model?.id) parts.push(`model ${m.model.id}${m.model.dim ? ` (${m.model.dim}d)` : ""}`);
  if (m.format_version != null) parts.push(`format v${m.format_version}`);
  return parts.join(" · ");
}

function disableSemanticModes() {
  for (const r of form.querySelectorAll('input[name="mode"]')) {
    if (r.value !== "bm25") r.disabled = true;
  }
  form.querySelector('input[name="mode"][value="bm25"]').checked = true;
}

async function start() {
  setState("loading");
  setStatus("Loading the search index…");
  try {
    jikji = await Jikji.load(BUNDLE_URL, {
      modelUrl: MODEL_URL,
      onProgress,
      engineUrl: ENGINE_URL,
      allowedOrigins: ALLOWED_ORIGINS,
    });
  } catch (e) {
    console.error("loading the bundle failed:", e);
    setState("error");
    setStatus("Could not load the search index.");
    progressRow.hidden = true;
    showError(e.message);
    return;
  }
  bundleInfoEl.textContent = describeBundle(jikji.manifest);
  setState("bm25-ready");
  progressRow.hidden = true;
  if (input.value.trim()) runSearch();

  if (!jikji.hasModel || !MODEL_URL) {
    document.body.dataset.model = "none";
    setStatus(
      jikji.hasModel ? "Ready (keyword search only: no model URL)." : "Ready (keyword search only: this bundle has no model).",
    );
    disableSemanticModes();
    return;
  }

  document.body.dataset.model = "idle";
  setStatus(
    saveData
      ? "Keyword search is ready. Semantic search downloads its model when you ask for it (Save-Data is on)."
      : "Keyword search is ready. Semantic search loads its model with your first dense or hybrid query.",
  );
  if (input.value.trim() && selectedMode() !== "bm25") wantModel();
}

start();

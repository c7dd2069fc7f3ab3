// The Jikji search page: one <jikji-search> (jikji-search.js, the same element the npm package
// ships) configured from the address, with ?q= and ?mode= shareable (the element's url-state),
// and a service worker (sw.js) that keeps the page, the engine and the bundle pages used for
// offline visits. The element's state is mirrored on <body data-state data-model>.
const params = new URLSearchParams(location.search);
const search = document.querySelector("jikji-search");
// Relative to the page, so the site also works under a sub-path (at "/" these are bundle/, pkg/).
search.setAttribute("bundle", params.get("bundle") || "bundle/");
const model = params.get("model");
if (model === "none") search.setAttribute("model", "none");
// Any other ?model= is a URL, refused unless on this origin or an allowed one (like ?bundle=).
else if (model && model !== "load") search.setAttribute("model-url", model);
if (params.get("k")) search.setAttribute("top-k", params.get("k"));
// Origins other than this page's that ?bundle= may name: none unless the site lists them,
// space-separated, in <meta name="jikji-allowed-origins" content="https://a.example …"> (and in
// the CSP's connect-src).
search.setAttribute("allowed-origins", document.querySelector('meta[name="jikji-allowed-origins"]')?.content || "");
// The engine (scripts/build-wasm's pkg/ with its integrity.json) beside the page.
search.setAttribute("engine", "pkg/");
search.setAttribute("worker", "worker.js");

search.addEventListener("jikji-state", (ev) => {
  document.body.dataset.state = ev.detail.state;
  if (ev.detail.model) document.body.dataset.model = ev.detail.model;
});
search.addEventListener("jikji-open", (ev) => {
  const m = ev.detail.manifest;
  const parts = [];
  if (m.chunks != null) parts.push(`${Number(m.chunks).toLocaleString()} passages`);
  if (m.model?.id) parts.push(`model ${m.model.id}${m.model.dim ? ` (${m.model.dim}d)` : ""}`);
  if (m.format_version != null) parts.push(`format v${m.format_version}`);
  document.querySelector("#bundle-info").textContent = parts.join(" · ");
});

// Defined only now, with its attributes set: the element reads them when it starts.
await import("./jikji-search.js");

// Offline: a service worker (sw.js, made from sw-src.js by scripts/stamp-sw) keeps the page and
// the engine of this build (a second visit takes none of them from the network), the bundle's
// entry (network first) and the bundle pages used. <meta name="jikji-offline" content="off">
// leaves it out, and so does ?sw=off (?sw=on overrides the meta); when left out, a worker
// registered before is unregistered. Registered once keyword search is ready, so that on a first
// visit its install revalidates files the page has just fetched instead of racing the page for
// them.
const offline = params.get("sw") || document.querySelector('meta[name="jikji-offline"]')?.content || "on";
if ("serviceWorker" in navigator) {
  if (offline === "off") {
    navigator.serviceWorker.getRegistrations().then((rs) => rs.forEach((r) => r.unregister()));
  } else {
    // Once: a page this worker already controls does not register again (its update check is the
    // browser's own, on navigation: sw-src.js, "Registration").
    const script = new URL("sw.js", location.href).href;
    const register = () =>
      (navigator.serviceWorker.controller?.scriptURL === script
        ? Promise.resolve()
        : navigator.serviceWorker.register("sw.js", { scope: "./", updateViaCache: "none" })
      )
        .then(() => navigator.serviceWorker.ready)
        .then((reg) => {
          // Keep this bundle's entry too (the first visit fetched it before the worker was in control).
          const bundle = new URL(search.getAttribute("bundle"), location.href);
          reg.active?.postMessage({ type: "keep", urls: [new URL("jikji.json", bundle).href] });
        })
        .catch((e) => console.warn("service worker not registered:", e.message));
    const ready = () => ["bm25-ready", "ready", "error"].includes(search.dataset.state);
    if (ready()) register();
    else {
      const on = () => {
        if (!ready()) return;
        search.removeEventListener("jikji-state", on);
        register();
      };
      search.addEventListener("jikji-state", on);
    }
  }
}

// Jikji's service worker: the search page works offline after a first visit.
//
// What is kept (Cache Storage, this origin only):
//   SHELL    the page and the engine (index.html, app.js, the component, jikji.js, worker.js,
//            pages.js, pkg/: integrity.json and the engine wasm; the query model's wasm once
//            used). Network first — the server marks them no-cache, so the browser revalidates
//            (304) — and the kept copy when the network fails. Stored on install and on each use.
//   ENTRIES  each bundle's entry file (…/jikji.json): network first (the worker asks with
//            cache: "no-cache", so a new build is seen at once), the kept copy offline.
//   PAGES    bundle pages (…/p/<name>), immutable: their name changes with their content. Cache
//            first: a page is fetched from the network once, when a query first needs it.
//            The query model's pages (m-, k-, u-, r-) are left to the worker's own Cache
//            Storage (jikji-model-pages-v1) and not kept twice.
//
// A new build of a bundle is switched to atomically: the engine reads one entry file and asks
// for the pages it names; pages are named by their content, so unchanged pages are answered
// from PAGES and only changed ones are fetched, and no page of another build can be taken for
// one of this build (a different content is a different name). When a bundle's entry changes,
// pages that no kept entry names any more are deleted (their families — kind and hash, the
// name without its number — are looked up in the entry's text).
//
// The page posts {type: "keep", urls: [entry URL]} once this worker controls it, so that an
// entry fetched before (on the first visit the page is not controlled yet) is kept too; pages
// fetched before are in the HTTP cache (immutable, a year) and are kept on their next use.

const VERSION = "v1";
const SHELL = `jikji-shell-${VERSION}`;
const ENTRIES = `jikji-entries-${VERSION}`;
const PAGES = `jikji-pages-${VERSION}`;
/** What the page needs for keyword search, relative to this file. */
const SHELL_FILES = [
  "./",
  "app.js",
  "style.css",
  "jikji-search.js",
  "jikji-search.css",
  "jikji.js",
  "worker.js",
  "pages.js",
  "pkg/integrity.json",
  "pkg/jikji_engine.js",
  "pkg/jikji_engine_bg.wasm",
];
/** A bundle page: …/p/<kind>-<hex>[-<number>]. */
const PAGE_RE = /\/p\/([a-z])-([0-9a-f]{1,32})(-[0-9]{1,10})?$/;
/** Kinds of the query model's pages (kept by the search worker itself). */
const MODEL_KINDS = new Set(["m", "k", "u", "r"]);

self.addEventListener("install", (ev) => {
  ev.waitUntil(
    (async () => {
      const cache = await caches.open(SHELL);
      // A file that cannot be fetched (a site without one of them) does not stop the install.
      await Promise.allSettled(
        SHELL_FILES.map(async (f) => {
          const url = new URL(f, self.location.href).href;
          const res = await fetch(url, { cache: "no-cache" });
          if (res.ok) await cache.put(url, res);
        }),
      );
      await self.skipWaiting();
    })(),
  );
});

self.addEventListener("activate", (ev) => {
  ev.waitUntil(
    (async () => {
      for (const name of await caches.keys()) {
        if (name.startsWith("jikji-") && name.endsWith(`-${name.split("-").pop()}`) && ![SHELL, ENTRIES, PAGES].includes(name) && !name.startsWith("jikji-model-pages-")) {
          await caches.delete(name);
        }
      }
      await self.clients.claim();
    })(),
  );
});

self.addEventListener("message", (ev) => {
  const msg = ev.data || {};
  if (msg.type !== "keep" || !Array.isArray(msg.urls)) return;
  ev.waitUntil(
    Promise.allSettled(
      msg.urls.map(async (u) => {
        const url = new URL(String(u), self.location.href);
        if (url.origin !== self.location.origin || !url.pathname.endsWith("/jikji.json")) return;
        const cache = await caches.open(ENTRIES);
        if (await cache.match(url.href)) return;
        const res = await fetch(url.href, { cache: "no-cache" });
        if (res.ok) await keepEntry(url.href, res);
      }),
    ),
  );
});

self.addEventListener("fetch", (ev) => {
  const req = ev.request;
  if (req.method !== "GET") return;
  const url = new URL(req.url);
  if (url.origin !== self.location.origin) return;
  const page = PAGE_RE.exec(url.pathname);
  if (page) {
    if (MODEL_KINDS.has(page[1])) return; // the worker keeps these itself
    ev.respondWith(cachedPage(req));
  } else if (url.pathname.endsWith("/jikji.json")) {
    ev.respondWith(entry(req, ev));
  } else if (req.mode === "navigate" || isShell(url)) {
    ev.respondWith(shell(req, url));
  }
});

/** Files of the page and the engine (this worker's folder and pkg/ below it). */
function isShell(url) {
  const base = new URL("./", self.location.href).pathname;
  if (!url.pathname.startsWith(base)) return false;
  const rel = url.pathname.slice(base.length);
  return rel === "" || SHELL_FILES.includes(rel) || rel.startsWith("pkg/");
}

async function shell(req, url) {
  const cache = await caches.open(SHELL);
  // The page at any ?q=…: one copy, under its path.
  const key = req.mode === "navigate" ? url.origin + url.pathname : url.href;
  try {
    const res = await fetch(req);
    if (res.ok) await cache.put(key, res.clone()).catch(() => {});
    return res;
  } catch (e) {
    const kept = await cache.match(key, { ignoreSearch: req.mode === "navigate" });
    if (kept) return kept;
    throw e;
  }
}

async function entry(req, ev) {
  const cache = await caches.open(ENTRIES);
  try {
    const res = await fetch(req);
    if (res.ok) ev.waitUntil(keepEntry(req.url, res.clone()));
    return res;
  } catch (e) {
    const kept = await cache.match(req.url);
    if (kept) return kept;
    throw e;
  }
}

/** Keeps a bundle entry; when it differs from the one kept, drops pages no kept entry names. */
async function keepEntry(url, res) {
  const cache = await caches.open(ENTRIES);
  const text = await res.text();
  const old = await cache.match(url);
  if (old && (await old.text()) === text) return;
  await cache.put(url, new Response(text, { headers: { "Content-Type": "application/json" } }));
  if (!old) return;
  const families = new Set();
  for (const key of await cache.keys()) {
    const r = await cache.match(key);
    for (const m of (await r.text()).matchAll(/\b([a-z])-([0-9a-f]{8,32})\b/g)) families.add(`${m[1]}-${m[2]}`);
  }
  const pages = await caches.open(PAGES);
  for (const key of await pages.keys()) {
    const m = PAGE_RE.exec(new URL(key.url).pathname);
    if (m && !families.has(`${m[1]}-${m[2]}`)) await pages.delete(key);
  }
}

async function cachedPage(req) {
  const cache = await caches.open(PAGES);
  const kept = await cache.match(req.url);
  if (kept) return kept;
  const res = await fetch(req);
  if (res.ok) {
    // Kept whole (the body is read here) before it is handed on.
    const body = await res.arrayBuffer();
    const headers = new Headers(res.headers);
    const copy = new Response(body, { status: res.status, statusText: res.statusText, headers });
    await cache.put(req.url, copy.clone()).catch(() => {});
    return copy;
  }
  return res;
}

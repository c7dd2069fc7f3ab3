// Jikji's service worker, as written: scripts/stamp-sw makes the served `sw.js` from this file by
// writing the build's file list and hashes into the block between the `jikji-sw-build` markers
// (scripts/build-js does it for the page, pkg/web/sw.js; scripts/pack-web for the npm package). Unstamped
// (development only), the page's files are RUNTIME files: network first.
//
// What is kept (Cache Storage, this origin only):
//   SHELL    the build's files (PRECACHE: the page, app.js — scripts/build-js's bundle of the
//            page, the component and jikji.js —, the styles, worker.js — bundled with pages.js and
//            the engine's glue —, the engine's integrity.json and wasm; LAZY: the dense engine and
//            the query model's wasm, when first used), in `jikji-shell-<BUILD>`. Cache first: a second visit takes none
//            of them from the network. BUILD is a hash of every file's SHA-256 (and of this
//            file), so it changes whenever any of them changes — and so do the bytes of sw.js:
//            the browser's own update check of sw.js (on navigation; HTTP-revalidated, a 304
//            when nothing changed) is how a new deploy is found. The new worker fetches every
//            PRECACHE file, checks each against its SHA-256 (a file that differs — a deploy
//            still being copied, a tampered file — fails the install, and the old build stays
//            in use whole), keeps them in a new cache, takes over and deletes the old one. A
//            LAZY file is checked against its SHA-256 before it is kept (one that differs is not kept and is
//            handed on as it came: the search worker's own integrity check refuses it, naming it).
//   ENTRIES  each bundle's entry file (…/jikji.json): network first (the search worker asks
//            with cache: "no-cache", so a new bundle build is seen at once), the kept copy
//            offline.
//   PAGES    bundle pages (…/p/<name>), immutable: their name changes with their content. Cache
//            first: a page is fetched from the network once, when a query first needs it.
//            The query model's pages (m-, k-, u-, r-) are left to the search worker's own Cache
//            Storage (jikji-model-pages-v1) and not kept twice.
//   RUNTIME  any other page, script, style, font or image of this origin under the worker's
//            scope (a site's own page using the npm package): network first, the kept copy
//            offline.
//
// A new build of a bundle is switched to atomically: the engine reads one entry file and asks
// for the pages it names; pages are named by their content, so unchanged pages are answered
// from PAGES and only changed ones are fetched, and no page of another build can be taken for
// one of this build (a different content is a different name). When a bundle's entry changes,
// pages that no kept entry names any more are deleted (their families — kind and hash, the
// name without its number — are looked up in the entry's text).
//
// Registration (web/app.js; the npm package's README): `navigator.serviceWorker.register(
// "sw.js", { scope: "./", updateViaCache: "none" })` from the page's folder, once: a page this
// worker already controls does not register again. What a controlled visit then costs the
// server besides the bundle's entry is the browser's update check of sw.js, which the Service
// Workers spec makes on every navigation (Handle Fetch → Soft Update): with updateViaCache
// "none" it bypasses the HTTP cache, and `jikji serve` sends sw.js with `Cache-Control:
// no-cache` and an ETag, so the check is one conditional GET answered 304 (headers only) when
// nothing changed — and a new deploy is found on the next visit, not after a max-age (the
// only way to skip the request, updateViaCache "all" with a max-age, would delay that). A site using the npm package copies the
// package's sw.js next to its page and names the package's folder, relative to sw.js, with
// `?package=`: `register("sw.js?package=node_modules/jikji-web/", { scope: "./" })` (or
// `registerOffline()` of jikji.js, which does that). The files of the package are then its
// SHELL; the site's own files are RUNTIME.
//
// The page posts {type: "keep", urls: [entry URL]} once this worker controls it, so that an
// entry fetched before (on the first visit the page is not controlled yet) is kept too; pages
// fetched before are in the HTTP cache (immutable, a year) and are kept on their next use.

// jikji-sw-build: written by scripts/stamp-sw; do not edit between the markers.
/** A hash of the build's files (16 hex digits), or null when unstamped. */
const BUILD = null;
/** [URL relative to BASE, "sha256-<base64>"]: fetched, checked and kept on install. */
const PRECACHE = [];
/** [URL relative to BASE, "sha256-<base64>"]: checked and kept when first asked for. */
const LAZY = [];
// jikji-sw-build end

const SHELL = `jikji-shell-${BUILD}`;
const ENTRIES = "jikji-entries-v1";
const PAGES = "jikji-pages-v1";
const RUNTIME = "jikji-runtime-v1";
/** Where PRECACHE and LAZY are: ?package= (same origin only), else this file's folder. */
const BASE = (() => {
  const here = new URL(self.location.href);
  const p = here.searchParams.get("package");
  if (p) {
    try {
      const u = new URL(p.endsWith("/") ? p : `${p}/`, here);
      if (u.origin === here.origin) return new URL(u.origin + u.pathname);
    } catch {}
  }
  return new URL("./", here.origin + here.pathname);
})();
const SCOPE = () => new URL(self.registration?.scope || BASE.href).pathname;
/** URL (no query) → expected SHA-256, for the shell's files. */
const HASHES = new Map([...PRECACHE, ...LAZY].map(([rel, h]) => [new URL(rel, BASE).href, h]));
const PRECACHE_URLS = PRECACHE.map(([rel]) => new URL(rel, BASE).href);
/** The page itself ("./" in PRECACHE): navigations to the scope's folder or its index.html. */
const PAGE_URL = PRECACHE.some(([rel]) => rel === "./") ? new URL("./", BASE).href : null;
/** A bundle page: …/p/<kind>-<hex>[-<number>]. */
const PAGE_RE = /\/p\/([a-z])-([0-9a-f]{1,32})(-[0-9]{1,10})?$/;
/** Kinds of the query model's pages (kept by the search worker itself). */
const MODEL_KINDS = new Set(["m", "k", "u", "r"]);
/** Request destinations kept by RUNTIME. */
const RUNTIME_DESTINATIONS = new Set(["document", "script", "style", "worker", "font", "image", "manifest"]);

function b64(buf) {
  let s = "";
  const bytes = new Uint8Array(buf);
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

/** A copy of `res` holding `body`, after checking body against `want` ("sha256-…"); throws naming `url`. */
async function checked(url, res, want) {
  const body = await res.arrayBuffer();
  const got = `sha256-${b64(await crypto.subtle.digest("SHA-256", body))}`;
  if (got !== want) throw new Error(`service worker: ${url} has SHA-256 ${got}, this build (${BUILD}) says ${want}: not kept`);
  const headers = new Headers(res.headers);
  // The body is decoded: its transfer encoding and length no longer apply.
  headers.delete("content-encoding");
  headers.delete("content-length");
  return new Response(body, { status: res.status, statusText: res.statusText, headers });
}

self.addEventListener("install", (ev) => {
  ev.waitUntil(
    (async () => {
      if (BUILD) {
        // All or nothing: a file that cannot be fetched or differs fails the install.
        const kept = await Promise.all(
          PRECACHE_URLS.map(async (url) => {
            const res = await fetch(url, { cache: "no-cache" });
            if (!res.ok) throw new Error(`service worker: ${url}: HTTP ${res.status}; build ${BUILD} not installed`);
            return [url, await checked(url, res, HASHES.get(url))];
          }),
        );
        const cache = await caches.open(SHELL);
        for (const [url, res] of kept) await cache.put(url, res);
      }
      await self.skipWaiting();
    })(),
  );
});

self.addEventListener("activate", (ev) => {
  ev.waitUntil(
    (async () => {
      for (const name of await caches.keys()) {
        if (name.startsWith("jikji-shell-") && name !== SHELL) await caches.delete(name);
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
    if (MODEL_KINDS.has(page[1])) return; // the search worker keeps these itself
    ev.respondWith(cachedPage(req));
    return;
  }
  if (url.pathname.endsWith("/jikji.json")) {
    ev.respondWith(entry(req, ev));
    return;
  }
  const key = shellKey(req, url);
  if (key) {
    ev.respondWith(shell(req, key));
  } else if (url.pathname.startsWith(SCOPE()) && (req.mode === "navigate" || RUNTIME_DESTINATIONS.has(req.destination))) {
    ev.respondWith(runtime(req, url));
  }
});

/** The SHELL key of a request for one of the build's files (its URL without query), or null. */
function shellKey(req, url) {
  if (!BUILD) return null;
  const bare = url.origin + url.pathname;
  if (PAGE_URL && req.mode === "navigate" && (bare === PAGE_URL || bare === `${PAGE_URL}index.html`)) return PAGE_URL;
  return HASHES.has(bare) ? bare : null;
}

/** LAZY file URLs (no query): the query model's wasm and glue, which the search worker checks itself. */
const LAZY_URLS = new Set(LAZY.map(([rel]) => new URL(rel, BASE).href));

async function shell(req, key) {
  const cache = await caches.open(SHELL);
  const kept = await cache.match(key);
  if (kept) return kept;
  // Not kept yet (a LAZY file's first use, or the install was cleared): fetched, checked, kept.
  const res = await fetch(req.mode === "navigate" ? key : req);
  if (!res.ok) return res;
  if (LAZY_URLS.has(key)) {
    // A LAZY file that differs from this build is not kept, but handed on as it came: the search
    // worker checks it against the engine's integrity.json (kept by this build) and refuses it
    // with a message naming the file, and keyword search goes on (a network error here would
    // hide which file was wrong).
    try {
      const copy = await checked(key, res.clone(), HASHES.get(key));
      await cache.put(key, copy.clone()).catch(() => {});
      return copy;
    } catch (e) {
      console.warn(e.message);
      return res;
    }
  }
  const copy = await checked(key, res, HASHES.get(key));
  await cache.put(key, copy.clone()).catch(() => {});
  return copy;
}

async function runtime(req, url) {
  const cache = await caches.open(RUNTIME);
  // A page at any ?q=…: one copy, under its path.
  const key = req.mode === "navigate" ? url.origin + url.pathname : url.href;
  try {
    const res = await fetch(req);
    if (res.ok) await cache.put(key, res.clone()).catch(() => {});
    return res;
  } catch (e) {
    const kept = await cache.match(key);
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

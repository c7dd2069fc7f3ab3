// The browser build of the engine (pkg/jikji_engine_bg.wasm, scripts/build-wasm) run in node, on the
// frozen compatibility fixtures: it opens format 2 (jikji.json + pages, added as web/worker.js adds
// them) and refuses format 1 with an error saying to rebuild, since it is built without the format 1
// reader (jikji-format's feature `v1`).
//
// Run: tests/e2e/run.sh (or node --test tests/e2e/engine-wasm.test.mjs). JIKJI_PKG: another build's
// folder (default pkg/).

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { inflateRawSync } from "node:zlib";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const PKG = path.resolve(ROOT, process.env.JIKJI_PKG || "pkg");
const V1 = path.join(ROOT, "format/tests/compat/v1/bundle-bm25");
const V2 = path.join(ROOT, "format/tests/compat/v2/bundle-bm25");

const mod = await import(pathToFileURL(path.join(PKG, "jikji_engine.js")).href);
mod.initSync({ module: readFileSync(path.join(PKG, "jikji_engine_bg.wasm")) });

/** Header + raw body of page `name` of the bundle `dir` (codec 1 inflated), as the worker passes it. */
function page(dir, name) {
  const stored = readFileSync(path.join(dir, "p", name));
  if (stored[5] === 0) return new Uint8Array(stored);
  const raw = inflateRawSync(stored.subarray(48));
  const b = new Uint8Array(48 + raw.length);
  b.set(stored.subarray(0, 48));
  b.set(raw, 48);
  return b;
}

test("the browser engine refuses a format 1 bundle, saying to rebuild it", () => {
  const e = new mod.Engine();
  for (const n of readdirSync(V1)) e.add_file(n, new Uint8Array(readFileSync(path.join(V1, n))));
  assert.throws(
    () => e.open(),
    (err) => {
      assert.match(err.message, /manifest\.json: a format 1 bundle/);
      assert.match(err.message, /rebuild the bundle with `jikji build`/);
      return true;
    },
  );
  e.free();
});

test("the browser engine opens format 2 and answers a query from the pages it asks for", () => {
  const e = new mod.Engine();
  const summary = JSON.parse(e.open_entry(new Uint8Array(readFileSync(path.join(V2, "jikji.json")))));
  assert.equal(summary.format_version, 2);
  let out;
  let rounds = 0;
  for (;;) {
    out = JSON.parse(e.search_with_vector("君子", null, "bm25", 3));
    if (!out.need) break;
    rounds++;
    assert.ok(rounds <= 8, "at most 8 rounds");
    for (const name of out.need) e.add_page(name, page(V2, name));
  }
  assert.ok(rounds >= 1, "the first pass asks for pages");
  assert.equal(out.mode, "bm25");
  assert.equal(out.hits.length, 3);
  assert.ok(out.hits.every((h) => h.text.includes("君子")), "every hit holds the query term");
  e.free();
});

test("a filter on a bundle built before the filter columns is refused with 'rebuild', and no filter still searches", () => {
  const e = new mod.Engine();
  e.open_entry(new Uint8Array(readFileSync(path.join(V2, "jikji.json"))));
  const run = (q) => {
    for (let rounds = 0; rounds <= 8; rounds++) {
      const out = JSON.parse(e.search_with_vector(q, null, "bm25", 3));
      if (!out.need) return out;
      for (const name of out.need) e.add_page(name, page(V2, name));
    }
    throw new Error("more than 8 rounds");
  };
  assert.throws(() => e.set_filters("3-1", undefined, undefined), /tier range "3-1"/);
  e.set_filters("1", undefined, undefined);
  assert.throws(() => run("君子"), /built before search filters.*rebuild/);
  e.set_filters(undefined, undefined, undefined);
  assert.equal(run("君子").hits.length, 3);
  e.free();
});

// The browser build of the engine (pkg/jikji_engine_bg.wasm, scripts/build-wasm) run in node, on the
// frozen compatibility fixtures: it opens format 2 (jikji.json + pages, added as web/worker.js adds
// them) and refuses format 1 with an error saying to rebuild, since it is built without the format 1
// reader (jikji-format's feature `v1`). It has no Unicode tables of its own (jikji-format's feature
// `tables`): on a bundle of this build it reads them from the bundle's two `n-` pages, only for
// text that needs them; on the frozen format 2 fixture (built before those pages) such a query is
// refused saying to rebuild.
//
// Run: tests/e2e/run.sh (or node --test tests/e2e/engine-wasm.test.mjs). JIKJI_PKG: another build's
// folder (default pkg/); JIKJI_BIN: the jikji binary that builds the fresh bundle (default
// target/release/jikji).

import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { inflateRawSync } from "node:zlib";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(HERE, "../..");
const PKG = path.resolve(ROOT, process.env.JIKJI_PKG || "pkg");
const V1 = path.join(ROOT, "format/tests/compat/v1/bundle-bm25");
const V2 = path.join(ROOT, "format/tests/compat/v2/bundle-bm25");
const SOURCE = path.join(ROOT, "format/tests/compat/v1/source");
const BIN = path.resolve(ROOT, process.env.JIKJI_BIN || "target/release/jikji");

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

/** Runs `q` (BM25, top `k`) on engine `e` over bundle `dir` as the worker does; returns the result and
 * the page names asked for, one array per round. */
function search(e, dir, q, k = 3) {
  const rounds = [];
  for (;;) {
    const out = JSON.parse(e.search_with_vector(q, null, "bm25", k));
    if (!out.need) return { out, rounds };
    rounds.push(out.need);
    assert.ok(rounds.length <= 8, `${q}: at most 8 rounds`);
    for (const name of out.need) e.add_page(name, page(dir, name));
  }
}

test("the browser engine opens format 2 and answers a query from the pages it asks for", () => {
  const e = new mod.Engine();
  const summary = JSON.parse(e.open_entry(new Uint8Array(readFileSync(path.join(V2, "jikji.json")))));
  assert.equal(summary.format_version, 2);
  const { out, rounds } = search(e, V2, "hamlet ophelia");
  assert.ok(rounds.length >= 1, "the first pass asks for pages");
  assert.equal(out.mode, "bm25");
  assert.ok(out.hits.length >= 1, "some hit");
  assert.ok(out.hits.every((h) => /hamlet|ophelia/i.test(h.text)), "every hit holds a query term");
  e.free();
});

test("the browser engine keeps no file list: a format 2 entry listing files is refused, a format 1 manifest still says format 1", () => {
  // Without jikji-format's `v1` the manifest's `files` is checked and not kept (a format 2 entry
  // lists none: FORMAT.md), so an entry that lists some is refused naming the field and offset.
  const entry = JSON.parse(readFileSync(path.join(V2, "jikji.json"), "utf8"));
  entry.files = { "chunks.bin": { sha256: "0".repeat(64), bytes: 1 } };
  const bytes = new TextEncoder().encode(JSON.stringify(entry));
  const e = new mod.Engine();
  assert.throws(
    () => e.open_entry(bytes),
    (err) => {
      assert.match(err.message, /^jikji\.json: data corruption at byte \d+: field `files`: a format 2 entry lists no files/);
      assert.match(err.message, /rebuild the bundle with `jikji build`/);
      return true;
    },
  );
  // A bad file entry is refused as before (field, offset), and a format 1 manifest passed as the
  // entry is refused for its format version, not for its files.
  entry.files = { "chunks.bin": { sha256: "0".repeat(64) } };
  assert.throws(() => e.open_entry(new TextEncoder().encode(JSON.stringify(entry))), /field `files`\.?.*missing field `bytes`/);
  assert.throws(() => e.open_entry(new Uint8Array(readFileSync(path.join(V1, "manifest.json")))), /format version 1 is not supported/);
  e.free();
});

test("a bundle built before the Unicode table pages: a query that needs a table is refused, saying to rebuild", () => {
  const e = new mod.Engine();
  e.open_entry(new Uint8Array(readFileSync(path.join(V2, "jikji.json"))));
  for (const q of ["君子", "Ophélia"]) {
    assert.throws(
      () => search(e, V2, q),
      (err) => {
        assert.match(err.message, /jikji\.json: this bundle has no Unicode table pages/);
        assert.match(err.message, /rebuild the bundle with `jikji build`/);
        return true;
      },
      q,
    );
  }
  // Hangul needs no table.
  const { out } = search(e, V2, "메밀꽃");
  assert.ok(out.hits.length > 0 && out.hits.every((h) => h.text.includes("메밀")));
  e.free();
});

test("a bundle of this build: Han and accented queries fetch one table page each, Korean and fullwidth ones none", () => {
  const tmp = mkdtempSync(path.join(tmpdir(), "jikji-unicode-"));
  try {
    const dir = path.join(tmp, "bundle");
    execFileSync(BIN, ["build", SOURCE, "--out", dir, "--no-embed", "--no-hanja", "--quiet"], { stdio: "pipe" });
    const { nfkc, t2s } = JSON.parse(readFileSync(path.join(dir, "jikji.json"), "utf8")).pages.unicode;
    assert.match(nfkc, /^n-[0-9a-f]{16}$/);
    assert.match(t2s, /^n-[0-9a-f]{16}$/);
    const e = new mod.Engine();
    e.open_entry(new Uint8Array(readFileSync(path.join(dir, "jikji.json"))));
    const tablePages = (rounds) => rounds.flat().filter((n) => n.startsWith("n-"));

    const ko = search(e, dir, "메밀꽃");
    assert.deepEqual(tablePages(ko.rounds), [], "Hangul: no table page");
    assert.ok(ko.out.hits.length > 0);
    const wide = search(e, dir, "ＨＡＭＬＥＴ ｏｐｈｅｌｉａ");
    assert.deepEqual(tablePages(wide.rounds), [], "fullwidth ASCII: no table page");
    const plain = search(e, dir, "hamlet ophelia");
    assert.deepEqual(wide.out.hits, plain.out.hits, "fullwidth = ASCII");

    // Traditional Chinese: the T2S page in the first round, beside the pages of the query's
    // terms as they are without it (the pass runs on with the table empty: when the table
    // changes no term those are the right pages, and the table costs no round of its own).
    const trad = search(e, dir, "學而時習之");
    assert.ok(trad.rounds[0].includes(t2s), `the first round asks for the T2S page: ${trad.rounds[0]}`);
    assert.ok(trad.rounds[0].length > 1, "and for the query's own pages in the same round");
    assert.deepEqual(tablePages(trad.rounds), [t2s]);
    const simp = search(e, dir, "学而时习之");
    assert.deepEqual(tablePages(simp.rounds), [], "the T2S table stays installed");
    assert.ok(trad.out.hits.length > 0);
    assert.deepEqual(trad.out.hits, simp.out.hits, "Traditional folds to Simplified through the page");

    const acc = search(e, dir, "Ophélia ﬁsh");
    assert.ok(acc.rounds[0].includes(nfkc), `accents and ligatures: the NFKC page in the first round: ${acc.rounds[0]}`);
    assert.deepEqual(tablePages(acc.rounds), [nfkc]);
    e.free();
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
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
  // An ASCII query: Han ones need the Unicode table pages this fixture predates.
  e.set_filters("1", undefined, undefined);
  assert.throws(() => run("hamlet ophelia"), /built before search filters.*rebuild/);
  e.set_filters(undefined, undefined, undefined);
  assert.ok(run("hamlet ophelia").hits.length >= 1);
  e.free();
});

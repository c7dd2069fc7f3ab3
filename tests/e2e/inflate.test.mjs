// web/inflate.js (the worker's synchronous raw-deflate decoder) against node's zlib, in node: round
// trips over every deflate block type and strategy, real texts and binaries of the repository, and
// hostile streams (random bytes, truncations, bit flips, an output cap) that must fail with an Error
// or agree with zlib, never write past the output or hang. Run: node --test tests/e2e/inflate.test.mjs
// (run.sh runs it too).

import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { constants, deflateRawSync, inflateRawSync } from "node:zlib";
import { inflateRaw } from "../../web/inflate.js";
import { SYNC_INFLATE_MAX, decodePage, PAGE_HEADER_LEN } from "../../web/pages.js";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** A seeded xorshift32 generator: the same inputs on every run. */
function rng(seed) {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 4294967296;
  };
}

function inputs() {
  const r = rng(7);
  const random = (n) => Buffer.from(Array.from({ length: n }, () => Math.floor(r() * 256)));
  const skewed = (n) => Buffer.from(Array.from({ length: n }, () => Math.floor(r() ** 4 * 40)));
  return [
    ["empty", Buffer.alloc(0)],
    ["one byte", Buffer.from([65])],
    ["zeros 70k (long matches, distance 1)", Buffer.alloc(70000)],
    ["random 1k", random(1000)],
    ["random 40k (stored blocks)", random(40000)],
    ["skewed 30k (dynamic codes, few symbols)", skewed(30000)],
    ["FORMAT.md (English text)", readFileSync(path.join(ROOT, "FORMAT.md"))],
    ["README.md", readFileSync(path.join(ROOT, "README.md"))],
    ["web/worker.js", readFileSync(path.join(ROOT, "web/worker.js"))],
    ["Korean and Hanja text", Buffer.from("갑목(甲木)은 인월(寅月)에 태어나면 용신(用神)을 먼저 살핀다. 天地人 三才之道, 陰陽五行. ".repeat(200))],
  ];
}

const STRATEGIES = [
  ["default", {}],
  ["fixed Huffman", { strategy: constants.Z_FIXED }],
  ["Huffman only", { strategy: constants.Z_HUFFMAN_ONLY }],
  ["RLE", { strategy: constants.Z_RLE }],
  ["filtered", { strategy: constants.Z_FILTERED }],
];

test("every block type and strategy inflates to the input, byte for byte", () => {
  let streams = 0;
  for (const [name, raw] of inputs()) {
    for (const level of [0, 1, 6, 9]) {
      for (const [sname, opts] of STRATEGIES) {
        const z = deflateRawSync(raw, { level, ...opts });
        const out = new Uint8Array(raw.length);
        const n = inflateRaw(z, out);
        assert.equal(n, raw.length, `${name}, level ${level}, ${sname}: length`);
        assert.ok(Buffer.from(out).equals(raw), `${name}, level ${level}, ${sname}: bytes`);
        streams++;
      }
    }
  }
  assert.ok(streams >= 200);
});

test("a buffer larger than the output is filled only as far as the stream goes", () => {
  const raw = Buffer.from("heading path / chunk / overlap ".repeat(50));
  const out = new Uint8Array(raw.length + 100).fill(0xee);
  assert.equal(inflateRaw(deflateRawSync(raw), out), raw.length);
  assert.ok(Buffer.from(out.subarray(0, raw.length)).equals(raw));
  assert.ok(out.subarray(raw.length).every((b) => b === 0xee));
});

test("an output cap smaller than the stream is an Error, for every block type, with nothing written past it", () => {
  const raw = Buffer.from("postings ".repeat(2000));
  for (const [sname, opts] of [...STRATEGIES, ["stored", { level: 0 }]]) {
    const z = deflateRawSync(raw, opts);
    const backing = new Uint8Array(1000 + 16).fill(0xee);
    const out = backing.subarray(0, 1000);
    assert.throws(() => inflateRaw(z, out), /output past 1000 bytes/, sname);
    assert.ok(backing.subarray(1000).every((b) => b === 0xee), `${sname}: wrote past the cap`);
  }
});

test("hostile streams: random bytes, truncations and bit flips fail with an Error or agree with zlib", () => {
  const r = rng(99);
  const raw = Buffer.concat(inputs().slice(6, 10).map(([, b]) => b.subarray(0, 6000)));
  const good = deflateRawSync(raw, { level: 9 });
  const cases = [];
  for (let k = 0; k < 300; k++) cases.push(Buffer.from(Array.from({ length: 1 + Math.floor(r() * 200) }, () => Math.floor(r() * 256))));
  for (let cut = 0; cut < good.length; cut += Math.max(1, Math.floor(good.length / 150))) cases.push(good.subarray(0, cut));
  for (let k = 0; k < 400; k++) {
    const b = Buffer.from(good);
    b[Math.floor(r() * b.length)] ^= 1 << Math.floor(r() * 8);
    cases.push(b);
  }
  let agreed = 0;
  let refused = 0;
  for (const z of cases) {
    const cap = 64 << 10;
    const backing = new Uint8Array(cap + 16).fill(0xee);
    let ours = null;
    try {
      ours = Buffer.from(backing.subarray(0, inflateRaw(z, backing.subarray(0, cap))));
    } catch (e) {
      assert.ok(e instanceof Error && e.message.length > 0);
      refused++;
    }
    assert.ok(backing.subarray(cap).every((b) => b === 0xee), "wrote past the output");
    if (ours) {
      // zlib with the same cap must give the same bytes (it may also accept what ours refuses
      // only when the output would pass the cap: not these inputs).
      const theirs = inflateRawSync(z, { maxOutputLength: cap });
      assert.ok(ours.equals(theirs), "inflated to other bytes than zlib");
      agreed++;
    }
  }
  assert.ok(refused > 500 && agreed > 0, `refused ${refused}, agreed ${agreed}`);
});

test("decodePage inflates small pages here and large ones with DecompressionStream, to the same bytes", async () => {
  const r = rng(3);
  for (const size of [1000, SYNC_INFLATE_MAX * 2]) {
    // Half random (the page is stored larger than SYNC_INFLATE_MAX when size is), half text.
    const raw = Buffer.concat([
      Buffer.from(Array.from({ length: size / 2 }, () => Math.floor(r() * 256))),
      Buffer.from("x".repeat(size / 2)),
    ]);
    const stored = deflateRawSync(raw);
    assert.equal(stored.length > SYNC_INFLATE_MAX, size > SYNC_INFLATE_MAX);
    const h = Buffer.alloc(PAGE_HEADER_LEN);
    h.write("JKP2", 0, "latin1");
    h[4] = "d".charCodeAt(0);
    h[5] = 1;
    h.writeUInt32LE(raw.length, 8);
    h.writeUInt32LE(stored.length, 12);
    const bytes = new Uint8Array(Buffer.concat([h, stored]));
    const out = await decodePage("d-0011223344556677", bytes);
    assert.ok(Buffer.from(out.subarray(PAGE_HEADER_LEN)).equals(raw), `size ${size}`);
    // Which path decoded it: without DecompressionStream only the small page still decodes.
    const native = globalThis.DecompressionStream;
    globalThis.DecompressionStream = undefined;
    try {
      if (size > SYNC_INFLATE_MAX) await assert.rejects(decodePage("d-0011223344556677", bytes), `size ${size}: not the stream path`);
      else assert.ok(Buffer.from((await decodePage("d-0011223344556677", bytes)).subarray(PAGE_HEADER_LEN)).equals(raw), "small page: not the sync path");
    } finally {
      globalThis.DecompressionStream = native;
    }
  }
});

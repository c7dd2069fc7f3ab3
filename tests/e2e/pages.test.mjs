// web/pages.js (format 2 page decoding in the worker) on real deflate-raw streams, in node:
// no browser, no engine. Run: node --test tests/e2e/pages.test.mjs (run.sh runs it too).

import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { deflateRawSync } from "node:zlib";
import { MAX_PAGE, PAGE_HEADER_LEN, decodePage, sha256, verifyPage } from "../../web/pages.js";

/** A page as FORMAT.md lays it out: header + (deflated) body; `patch(header)` may alter it. */
function page(raw, { codec = 1, patch = () => {}, body = null } = {}) {
  const stored = body ?? (codec === 1 ? deflateRawSync(raw, { level: 9 }) : raw);
  const h = Buffer.alloc(PAGE_HEADER_LEN);
  h.write("JKP2", 0, "latin1");
  h[4] = "d".charCodeAt(0);
  h[5] = codec;
  h.writeUInt32LE(raw.length, 8);
  h.writeUInt32LE(stored.length, 12);
  h.writeUInt32LE(0, 16);
  createHash("sha256").update(raw).digest().copy(h, 20, 0, 28);
  patch(h);
  return new Uint8Array(Buffer.concat([h, stored]));
}

const RAW = Buffer.from("front-coded terms and postings ".repeat(300));

test("a deflated page comes back as its header + the raw body", async () => {
  const p = page(RAW);
  assert.ok(p.length < RAW.length / 4, "the test page is really compressed");
  const out = await decodePage("d-0011223344556677", p);
  assert.equal(out.length, PAGE_HEADER_LEN + RAW.length);
  assert.deepEqual(Buffer.from(out.subarray(0, PAGE_HEADER_LEN)), Buffer.from(p.subarray(0, PAGE_HEADER_LEN)));
  assert.deepEqual(Buffer.from(out.subarray(PAGE_HEADER_LEN)), RAW);
});

test("a raw (codec 0) page is passed as it is", async () => {
  const p = page(RAW, { codec: 0 });
  assert.deepEqual(Buffer.from(await decodePage("d-00", p)), Buffer.from(p));
});

test("bad pages are refused with an error naming the page", async () => {
  const cases = [
    ["short", page(RAW).subarray(0, 20), /p\/d-x: 20 bytes, shorter than a page header/],
    ["magic", page(RAW, { patch: (h) => h.write("JKP1", 0, "latin1") }), /p\/d-x: not a jikji page/],
    ["codec", page(RAW, { patch: (h) => (h[5] = 7) }), /p\/d-x: unknown codec 7/],
    ["raw over 16 MiB", page(RAW, { patch: (h) => h.writeUInt32LE(MAX_PAGE + 1, 8) }), /over the 16777216-byte limit/],
    ["stored over 16 MiB", page(RAW, { patch: (h) => h.writeUInt32LE(0xffffffff, 12) }), /over the 16777216-byte limit/],
    ["stored_len", page(RAW, { patch: (h) => h.writeUInt32LE(h.readUInt32LE(12) - 1, 12) }), /body has \d+ bytes, header \(byte 12\) says/],
    // A deflate bomb in miniature: the header promises 100 bytes, the stream gives 9,300.
    ["inflates past raw_len", page(RAW, { patch: (h) => h.writeUInt32LE(100, 8) }), /inflates to more than the 100 bytes/],
    ["inflates short", page(RAW, { patch: (h) => h.writeUInt32LE(RAW.length + 5, 8) }), /inflates to 9300 bytes, its header \(byte 8\) says 9305/],
    ["not deflate", page(RAW, { body: Buffer.from([0xff, 0xff, 0xff, 0xff, 0xff]) }), /bad deflate-raw body/],
    ["truncated stream", page(RAW, { body: deflateRawSync(RAW).subarray(0, 40) }), /p\/d-x: (bad deflate-raw body|inflates to)/],
    ["codec 0 lengths", page(RAW, { codec: 0, patch: (h) => h.writeUInt32LE(5, 8) }), /raw_len 5 != stored_len 9300/],
  ];
  for (const [what, bytes, re] of cases) {
    await assert.rejects(decodePage("d-x", bytes), re, what);
  }
});

test("verifyPage takes an intact page and refuses one whose bytes or name do not match, naming it", async () => {
  const out = await decodePage("d-x", page(RAW));
  const id = createHash("sha256").update(RAW).digest("hex").slice(0, 16);
  await verifyPage(`d-${id}`, out); // content-named: the name is the digest
  await verifyPage("d-0123456789abcdef-7", out); // numbered: the name is not a digest
  const flipped = out.slice();
  flipped[PAGE_HEADER_LEN + 100] ^= 1; // one bit of the body
  await assert.rejects(verifyPage(`d-${id}`, flipped), new RegExp(`^Error: p/d-${id}: data corruption at byte 0: content hash does not match the page header: corrupt or tampered page`));
  const header = out.slice();
  header[20] ^= 1; // the digest in the header
  await assert.rejects(verifyPage("d-0123456789abcdef-7", header), /^Error: p\/d-0123456789abcdef-7: .*content hash does not match/);
  await assert.rejects(verifyPage("d-0011223344556677", out), new RegExp(`^Error: p/d-0011223344556677: data corruption at byte 0: content hash ${id}, expected by its name`));
  await assert.rejects(verifyPage("d-x", out.subarray(0, 30)), /p\/d-x: 30 bytes, shorter than a page header/);
});

test("sha256 (no crypto.subtle: plain http) equals node's SHA-256 at every padding boundary", () => {
  for (const n of [0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 4096, 70001]) {
    const data = new Uint8Array(n).map((_, i) => (i * 131 + n) & 0xff);
    const want = createHash("sha256").update(data).digest("hex");
    assert.equal(Buffer.from(sha256(data)).toString("hex"), want, `${n} bytes`);
  }
});

test("regression: pages served over plain http (no crypto.subtle) are still verified, and tampering refused", async () => {
  const subtle = Object.getOwnPropertyDescriptor(globalThis, "crypto");
  Object.defineProperty(globalThis, "crypto", { value: {}, configurable: true });
  try {
    const p = page(RAW, { codec: 0 });
    await verifyPage("d-0011223344556677-0", p);
    const bad = p.slice();
    bad[PAGE_HEADER_LEN + 5] ^= 1;
    await assert.rejects(verifyPage("d-0011223344556677-0", bad), /content hash does not match/);
  } finally {
    Object.defineProperty(globalThis, "crypto", subtle);
  }
});

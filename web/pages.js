// Format 2 page decoding, shared by the search worker and its tests (no DOM, no engine).
// A page is a 48-byte header and a body (FORMAT.md, "Format 2"; docs/design/paged-bundle-v2.md
// §12). Header, little-endian:
//   0  "JKP2"   4  u8 kind   5  u8 codec (0 raw, 1 deflate-raw, RFC 1951)   6  u16 0
//   8  u32 raw_len   12  u32 stored_len   16  u32 number   20  28 bytes of SHA-256(raw body)
// decodePage checks what must hold before allocating or inflating anything; verifyPage then
// checks the digest and the name with crypto.subtle (the browser's engine wasm carries no
// SHA-256: its add_page checks the header, lengths and name's kind and number only).

/**
 * Pages stored in at most this many bytes are inflated synchronously by inflate.js (no stream
 * plumbing: what a query's small pages cost most); larger ones (the query model's layers, long
 * postings) by DecompressionStream, which is native code and does not hold the worker's thread.
 * inflate.js runs at ~45–75 MB/s on text in node here (zlib ~8× that), so a 64 KiB stored page
 * (~170 kB of text) holds the thread ≤ ~4 ms, about one DecompressionStream's overhead.
 */
export const SYNC_INFLATE_MAX = 64 << 10;

/** Page header length in bytes. */
export const PAGE_HEADER_LEN = 48;
/** Largest raw or stored page body accepted (16 MiB): bytes from the network are hostile. */
export const MAX_PAGE = 16 << 20;

import { inflateRaw } from "./inflate.js";

function message(e) {
  return e instanceof Error ? e.message || String(e) : String(e);
}

/**
 * Checks the 48-byte header of page `name` (as fetched: header + stored body) and returns the
 * bytes the engine takes: the same header followed by the raw body (inflated for codec 1,
 * stopping with an Error as soon as the output would exceed raw_len). Layout (little-endian):
 * "JKP2", u8 kind, u8 codec, u16 0, u32 raw_len, u32 stored_len, u32 number, 28-byte digest.
 * The digest and the name are verified by verifyPage.
 */
export async function decodePage(name, bytes) {
  const what = `page p/${name}`;
  if (bytes.length < PAGE_HEADER_LEN) throw new Error(`${what}: ${bytes.length} bytes, shorter than a page header`);
  if (bytes[0] !== 0x4a || bytes[1] !== 0x4b || bytes[2] !== 0x50 || bytes[3] !== 0x32) {
    throw new Error(`${what}: not a jikji page (no "JKP2" magic at byte 0)`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, PAGE_HEADER_LEN);
  const codec = bytes[5];
  const rawLen = view.getUint32(8, true);
  const storedLen = view.getUint32(12, true);
  if (rawLen > MAX_PAGE || storedLen > MAX_PAGE) {
    throw new Error(`${what}: header says ${rawLen} raw / ${storedLen} stored bytes, over the ${MAX_PAGE}-byte limit`);
  }
  if (bytes.length - PAGE_HEADER_LEN !== storedLen) {
    throw new Error(`${what}: body has ${bytes.length - PAGE_HEADER_LEN} bytes, header (byte 12) says ${storedLen}`);
  }
  const body = bytes.subarray(PAGE_HEADER_LEN);
  if (codec === 0) {
    if (rawLen !== storedLen) throw new Error(`${what}: raw page (codec 0) with raw_len ${rawLen} != stored_len ${storedLen}`);
    return bytes;
  }
  if (codec !== 1) throw new Error(`${what}: unknown codec ${codec} at byte 5`);
  const out = new Uint8Array(PAGE_HEADER_LEN + rawLen);
  out.set(bytes.subarray(0, PAGE_HEADER_LEN));
  if (storedLen <= SYNC_INFLATE_MAX) {
    // Small pages (every page of a query): inflated here, synchronously (inflate.js).
    let n;
    try {
      n = inflateRaw(body, out.subarray(PAGE_HEADER_LEN));
    } catch (e) {
      if (/^output past/.test(message(e))) throw new Error(`${what}: inflates to more than the ${rawLen} bytes its header (byte 8) says`);
      throw new Error(`${what}: bad deflate-raw body: ${message(e)}`);
    }
    if (n !== rawLen) throw new Error(`${what}: inflates to ${n} bytes, its header (byte 8) says ${rawLen}`);
    return out;
  }
  let len = 0;
  const reader = new Blob([body]).stream().pipeThrough(new DecompressionStream("deflate-raw")).getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (len + value.length > rawLen) {
        reader.cancel().catch(() => {});
        throw new Error(`${what}: inflates to more than the ${rawLen} bytes its header (byte 8) says`);
      }
      out.set(value, PAGE_HEADER_LEN + len);
      len += value.length;
    }
  } catch (e) {
    if (String(e?.message).startsWith(what)) throw e;
    throw new Error(`${what}: bad deflate-raw body: ${message(e)}`);
  }
  if (len !== rawLen) throw new Error(`${what}: inflates to ${len} bytes, its header (byte 8) says ${rawLen}`);
  return out;
}


/**
 * Checks page `name` as decodePage returns it (48-byte header + raw body) against its digest,
 * as the native reader does (format/src/paged/page.rs `verify_raw`, same messages): the first
 * 28 bytes of SHA-256(raw body) must equal header bytes 20..48, and a content-named page
 * (`<kind>-<16 hex>`, 18 characters; numbered pages are longer) must be named by the first 8
 * of them in hex. Throws an Error naming `p/<name>` otherwise, or when crypto.subtle is
 * missing (an insecure context: no page is taken unchecked). Resolves to nothing.
 */
export async function verifyPage(name, bytes) {
  const what = `p/${name}`;
  if (bytes.length < PAGE_HEADER_LEN) throw new Error(`${what}: ${bytes.length} bytes, shorter than a page header`);
  const body = bytes.subarray(PAGE_HEADER_LEN);
  // crypto.subtle exists only in secure contexts (https, localhost): a page served over plain
  // http (a LAN address, an http-only host) is checked by sha256 below instead.
  const d = globalThis.crypto?.subtle
    ? new Uint8Array(await crypto.subtle.digest("SHA-256", body))
    : sha256(body);
  for (let i = 0; i < 28; i++) {
    if (d[i] !== bytes[20 + i]) {
      throw new Error(`${what}: data corruption at byte 0: content hash does not match the page header: corrupt or tampered page`);
    }
  }
  if (name.length === 18) {
    const hex = Array.from(d.subarray(0, 8), (b) => b.toString(16).padStart(2, "0")).join("");
    if (name.slice(2) !== hex) {
      throw new Error(`${what}: data corruption at byte 0: content hash ${hex}, expected by its name`);
    }
  }
}

const K256 = new Uint32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
  0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
  0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
  0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
  0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
  0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
  0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
  0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
]);

/**
 * SHA-256 (FIPS 180-4) of `data` (Uint8Array) as 32 bytes: the integrity check where the
 * browser has no crypto.subtle (an insecure context). Pages are at most MAX_PAGE bytes.
 */
export function sha256(data) {
  const n = data.length;
  const blocks = Math.ceil((n + 9) / 64);
  const m = new Uint8Array(blocks * 64);
  m.set(data);
  m[n] = 0x80;
  const bits = n * 8;
  const tail = new DataView(m.buffer, m.length - 8, 8);
  tail.setUint32(0, Math.floor(bits / 0x100000000));
  tail.setUint32(4, bits >>> 0);
  const view = new DataView(m.buffer);
  const h = new Uint32Array([0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19]);
  const w = new Uint32Array(64);
  const rotr = (x, r) => (x >>> r) | (x << (32 - r));
  for (let b = 0; b < blocks; b++) {
    for (let i = 0; i < 16; i++) w[i] = view.getUint32(b * 64 + i * 4);
    for (let i = 16; i < 64; i++) {
      const x = w[i - 15], y = w[i - 2];
      const s0 = rotr(x, 7) ^ rotr(x, 18) ^ (x >>> 3);
      const s1 = rotr(y, 17) ^ rotr(y, 19) ^ (y >>> 10);
      w[i] = (w[i - 16] + s0 + w[i - 7] + s1) >>> 0;
    }
    let [a, bb, c, d, e, f, g, hh] = h;
    for (let i = 0; i < 64; i++) {
      const t1 = (hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i]) >>> 0;
      const t2 = ((rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & bb) ^ (a & c) ^ (bb & c))) >>> 0;
      hh = g; g = f; f = e; e = (d + t1) >>> 0; d = c; c = bb; bb = a; a = (t1 + t2) >>> 0;
    }
    h[0] += a; h[1] += bb; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += hh;
  }
  const out = new Uint8Array(32);
  const ov = new DataView(out.buffer);
  for (let i = 0; i < 8; i++) ov.setUint32(i * 4, h[i]);
  return out;
}

// Synchronous raw-deflate decoding (RFC 1951, https://www.rfc-editor.org/rfc/rfc1951) into a
// buffer of known size, for the worker's small pages. The decoder follows the structure of Mark
// Adler's puff.c (zlib's contrib/puff: canonical Huffman codes decoded from per-length counts, every
// code table checked for over-subscription and incompleteness before use).
//
// Why not DecompressionStream: a warm dense query at 1M fetches ~25 pages of 0.3–9 kB and each
// DecompressionStream costs thread hops and stream plumbing; in Chromium here inflating them that way
// added ~23 ms to a query whose pages arrive in ~114 ms (docs/design/dense-pq.md, "Where the
// browser's time goes"). Large pages (the query model's layers) keep DecompressionStream: pages.js
// chooses by size.
//
// Hostile input: the output never grows past `out.length` (an Error as soon as a block would write
// past it), every read past the input's end, reserved block type, bad code table, length or
// distance symbol, distance beyond the bytes written, or stored-block length mismatch is an
// Error with the byte offset in the input. Work is bounded by the output size plus the input
// size (each symbol read writes at least one byte or ends a block; a block reads at least 3 bits).

const LBASE = new Uint16Array([3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258]);
const LEXT = new Uint8Array([0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]);
const DBASE = new Uint16Array([1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577]);
const DEXT = new Uint8Array([0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13]);
/** Order of the code length code lengths (RFC 1951 §3.2.7). */
const ORDER = new Uint8Array([16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15]);
const MAXBITS = 15;

/** A canonical Huffman code: count[len] codes of each length, symbols in code order. */
class Huffman {
  constructor(n) {
    this.count = new Uint16Array(MAXBITS + 1);
    this.symbol = new Uint16Array(n);
  }

  /**
   * Builds the code from `lengths[off .. off + n)`. Returns 0 for a complete code, > 0 for an
   * incomplete one (codes left over), < 0 for an over-subscribed one (not a prefix code).
   */
  build(lengths, off, n) {
    const count = this.count;
    count.fill(0);
    for (let s = 0; s < n; s++) count[lengths[off + s]]++;
    if (count[0] === n) return 0; // no codes: complete, but decoding with it fails
    let left = 1;
    for (let len = 1; len <= MAXBITS; len++) {
      left <<= 1;
      left -= count[len];
      if (left < 0) return left;
    }
    const offs = new Uint16Array(MAXBITS + 1);
    for (let len = 1; len < MAXBITS; len++) offs[len + 1] = offs[len] + count[len];
    for (let s = 0; s < n; s++) if (lengths[off + s] !== 0) this.symbol[offs[lengths[off + s]]++] = s;
    return left;
  }
}

let fixed = null;
function fixedCodes() {
  if (fixed) return fixed;
  const lengths = new Uint8Array(288 + 30);
  let s = 0;
  for (; s < 144; s++) lengths[s] = 8;
  for (; s < 256; s++) lengths[s] = 9;
  for (; s < 280; s++) lengths[s] = 7;
  for (; s < 288; s++) lengths[s] = 8;
  for (; s < 288 + 30; s++) lengths[s] = 5;
  const lit = new Huffman(288);
  lit.build(lengths, 0, 288);
  const dist = new Huffman(30);
  dist.build(lengths, 288, 30);
  fixed = { lit, dist };
  return fixed;
}

/**
 * Inflates the raw deflate stream `src` (Uint8Array) into `out` (Uint8Array, the exact expected
 * size or larger) and returns the number of bytes written (≤ out.length). Bytes after the final
 * block are ignored. Throws an Error (message with the input byte offset) on a stream that is
 * invalid, ends early, or would write more than out.length bytes ("output past N bytes").
 */
export function inflateRaw(src, out) {
  const end = src.length;
  const cap = out.length;
  let pos = 0; // next input byte
  let bitbuf = 0; // bits not yet used, LSB first
  let bitcnt = 0;
  let o = 0; // bytes written

  const fail = (why) => {
    throw new Error(`${why} (input byte ${pos})`);
  };
  const bits = (need) => {
    while (bitcnt < need) {
      if (pos >= end) fail("the stream ends early");
      bitbuf |= src[pos++] << bitcnt;
      bitcnt += 8;
    }
    const v = bitbuf & ((1 << need) - 1);
    bitbuf >>>= need;
    bitcnt -= need;
    return v;
  };
  const decode = (h) => {
    const count = h.count;
    let code = 0; // bits read so far, MSB first (Huffman codes are packed from their MSB)
    let first = 0; // first code of the current length
    let index = 0; // index of that first code in symbol[]
    for (let len = 1; len <= MAXBITS; len++) {
      if (bitcnt === 0) {
        if (pos >= end) fail("the stream ends early");
        bitbuf = src[pos++];
        bitcnt = 8;
      }
      code |= bitbuf & 1;
      bitbuf >>>= 1;
      bitcnt--;
      const c = count[len];
      if (code - c < first) return h.symbol[index + (code - first)];
      index += c;
      first = (first + c) << 1;
      code <<= 1;
    }
    return fail("invalid Huffman code");
  };
  const codes = (lit, dist) => {
    for (;;) {
      let sym = decode(lit);
      if (sym < 256) {
        if (o >= cap) fail(`output past ${cap} bytes`);
        out[o++] = sym;
      } else if (sym === 256) {
        return;
      } else {
        sym -= 257;
        if (sym >= 29) fail(`invalid length symbol ${sym + 257}`);
        const len = LBASE[sym] + bits(LEXT[sym]);
        const ds = decode(dist);
        if (ds >= 30) fail(`invalid distance symbol ${ds}`);
        const d = DBASE[ds] + bits(DEXT[ds]);
        if (d > o) fail(`distance ${d} before the start of the output (${o} bytes written)`);
        if (o + len > cap) fail(`output past ${cap} bytes`);
        for (let k = 0; k < len; k++, o++) out[o] = out[o - d];
      }
    }
  };
  const lengths = new Uint8Array(286 + 30);
  let lit = null;
  let dist = null;

  for (let last = 0; !last; ) {
    last = bits(1);
    const type = bits(2);
    if (type === 0) {
      // Stored: to the byte boundary, LEN and its complement, LEN bytes.
      bitbuf = 0;
      bitcnt = 0;
      if (pos + 4 > end) fail("the stream ends early");
      const len = src[pos] | (src[pos + 1] << 8);
      const nlen = src[pos + 2] | (src[pos + 3] << 8);
      if (len !== (~nlen & 0xffff)) fail("stored block length does not match its complement");
      pos += 4;
      if (pos + len > end) fail("the stream ends early");
      if (o + len > cap) fail(`output past ${cap} bytes`);
      out.set(src.subarray(pos, pos + len), o);
      pos += len;
      o += len;
    } else if (type === 1) {
      const f = fixedCodes();
      codes(f.lit, f.dist);
    } else if (type === 2) {
      const nlen = bits(5) + 257;
      const ndist = bits(5) + 1;
      const ncode = bits(4) + 4;
      if (nlen > 286 || ndist > 30) fail("too many length or distance codes");
      lengths.fill(0, 0, 19);
      for (let k = 0; k < ncode; k++) lengths[ORDER[k]] = bits(3);
      lit ??= new Huffman(286);
      dist ??= new Huffman(30);
      const lencode = new Huffman(19);
      if (lencode.build(lengths, 0, 19) !== 0) fail("incomplete code length code");
      for (let k = 0; k < nlen + ndist; ) {
        const sym = decode(lencode);
        if (sym < 16) {
          lengths[k++] = sym;
          continue;
        }
        let rep;
        let value = 0;
        if (sym === 16) {
          if (k === 0) fail("repeat of no previous code length");
          value = lengths[k - 1];
          rep = 3 + bits(2);
        } else if (sym === 17) {
          rep = 3 + bits(3);
        } else {
          rep = 11 + bits(7);
        }
        if (k + rep > nlen + ndist) fail("too many code lengths");
        lengths.fill(value, k, k + rep);
        k += rep;
      }
      if (lengths[256] === 0) fail("no end-of-block code");
      let err = lit.build(lengths, 0, nlen);
      if (err < 0 || (err > 0 && nlen - lit.count[0] !== 1)) fail("invalid literal/length code");
      err = dist.build(lengths, nlen, ndist);
      if (err < 0 || (err > 0 && ndist - dist.count[0] !== 1)) fail("invalid distance code");
      codes(lit, dist);
    } else {
      fail("reserved block type 3");
    }
  }
  return o;
}

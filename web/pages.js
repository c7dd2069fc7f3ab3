// Format 2 page decoding, shared by the search worker and its tests (no DOM, no engine).
// A page is a 48-byte header and a body (FORMAT.md, "Format 2"; docs/design/paged-bundle-v2.md
// §12). Header, little-endian:
//   0  "JKP2"   4  u8 kind   5  u8 codec (0 raw, 1 deflate-raw, RFC 1951)   6  u16 0
//   8  u32 raw_len   12  u32 stored_len   16  u32 number   20  28 bytes of SHA-256(raw body)
// The digest and the name are checked by the engine's add_page; this checks what must hold
// before allocating or inflating anything.

/** Page header length in bytes. */
export const PAGE_HEADER_LEN = 48;
/** Largest raw or stored page body accepted (16 MiB): bytes from the network are hostile. */
export const MAX_PAGE = 16 << 20;

function message(e) {
  return e instanceof Error ? e.message || String(e) : String(e);
}

/**
 * Checks the 48-byte header of page `name` (as fetched: header + stored body) and returns the
 * bytes the engine takes: the same header followed by the raw body (inflated for codec 1,
 * stopping with an Error as soon as the output would exceed raw_len). Layout (little-endian):
 * "JKP2", u8 kind, u8 codec, u16 0, u32 raw_len, u32 stored_len, u32 number, 28-byte digest.
 * The digest and the name are verified by the engine's add_page.
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


#!/usr/bin/env python3
"""An independent reader of a Jikji bundle (format version 1), written from FORMAT.md alone.

Python standard library only. It verifies every file against the manifest (size and
SHA-256), decodes terms.fst (BurntSushi's fst 0.4 format, file version 3, including its
CRC-32C checksum), postings.bin, vectors.bin, chunks.bin and hanja.fst, cross-checks them
(counts, offsets, doc ids), and prints a summary and one chunk record.

    scripts/read-bundle.py BUNDLE              # summary + chunk 0
    scripts/read-bundle.py BUNDLE --chunk 5    # summary + chunk 5
    scripts/read-bundle.py BUNDLE --json       # everything decoded, as one JSON object
    scripts/read-bundle.py BUNDLE --ivf        # format 2: the dense index's centroid and
                                               # background sample pages, decoded, and with
                                               # binary lists each list's page, doc ids and
                                               # row (`i`) pages, as JSON

Exit status 0 on success; 1 with a message naming the file (and byte offset where one
applies) on any bad byte. It does not analyze queries or rank: see FORMAT.md, "Analyzer".
Used by format/tests/read_bundle_py.rs, which compares its --json output with the Rust reader.
"""

import hashlib
import json
import math
import struct
import sys
import zlib

FORMAT_VERSION = 1


class BundleError(Exception):
    """A bundle file does not decode; the message names the file."""


def fail(file, offset, message):
    if offset is None:
        raise BundleError(f"{file}: {message}")
    raise BundleError(f"{file}: data corruption at byte {offset}: {message}")


class Reader:
    """A bounds-checked little-endian cursor over one file's bytes."""

    def __init__(self, file, data, pos=0):
        self.file, self.data, self.pos = file, data, pos

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            fail(self.file, self.pos, f"truncated: need {n} bytes, file has {len(self.data)}")
        s = self.data[self.pos:self.pos + n]
        self.pos += n
        return s

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def varint(self):
        """Unsigned LEB128, at most 10 bytes."""
        v = 0
        for i in range(10):
            if self.pos >= len(self.data):
                fail(self.file, self.pos, "truncated varint")
            b = self.data[self.pos]
            self.pos += 1
            v |= (b & 0x7F) << (7 * i)
            if b & 0x80 == 0:
                return v
        fail(self.file, self.pos, "varint longer than 10 bytes")

    def header(self, magic, version):
        m = self.take(4)
        if m != magic:
            fail(self.file, 0, f"bad magic {m!r}, expected {magic!r}")
        found = self.u32()
        if found != version:
            fail(self.file, None, f"format version {found} is not supported (this reader reads {version})")


# ---------------------------------------------------------------- fst (version 3)

# fst 0.4's COMMON_INPUTS_INV, first 63 entries: a state byte's 6-bit input index i (1..63)
# stands for the byte COMMON[i - 1]; 0 means the input byte is stored separately.
COMMON = b"te/oasripcnw.hlm-du012g=:bf3y5&_4v9678k%?xCDASFIBEjPTzRNM+LOqHG"
assert len(COMMON) == 63


def _crc32c_table():
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


CRC32C = _crc32c_table()


def masked_crc32c(data):
    """CRC-32C (Castagnoli), masked as in the Snappy framing format (what fst 0.4 stores)."""
    crc = 0xFFFFFFFF
    for b in data:
        crc = CRC32C[(crc ^ b) & 0xFF] ^ (crc >> 8)
    crc ^= 0xFFFFFFFF
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def unpack_uint(file, data, at, n):
    if n == 0:
        return 0
    if at < 0 or at + n > len(data):
        fail(file, max(at, 0), f"fst field of {n} bytes out of range")
    return int.from_bytes(data[at:at + n], "little")


def fst_node(file, data, version, addr):
    """Decodes the node whose last byte is at `addr`. Returns (is_final, final_output,
    [(input byte, output, target address), ...]) in input-byte order."""
    if addr == 0:  # the empty final state: no bytes
        return True, 0, []

    def at(i):
        if i < 0 or i >= len(data):
            fail(file, max(i, 0), f"fst node at {addr} reads outside the file")
        return data[i]

    state = at(addr)
    kind = state >> 6
    if kind in (0b11, 0b10):  # one transition
        idx = state & 0x3F
        ilen = 0 if idx else 1
        inp = COMMON[idx - 1] if idx else at(addr - 1)
        if kind == 0b11:  # OneTransNext: output 0, target = the byte before this node
            return False, 0, [(inp, 0, addr - ilen - 1)]
        sizes = at(addr - ilen - 1)
        tsize, osize = sizes >> 4, sizes & 0x0F
        t_at = addr - ilen - 1 - tsize
        end = t_at - osize  # first byte of the node
        delta = unpack_uint(file, data, t_at, tsize)
        out = unpack_uint(file, data, end, osize)
        return False, 0, [(inp, out, 0 if delta == 0 else end - delta)]
    # AnyTrans
    is_final = bool(state & 0x40)
    n = state & 0x3F
    nlen = 0
    if n == 0:
        nlen = 1
        n = at(addr - 1)
        if n == 1:
            n = 256
    sizes = at(addr - nlen - 1)
    tsize, osize = sizes >> 4, sizes & 0x0F
    base = addr - nlen - 1  # the pack-sizes byte
    index = 256 if version >= 2 and n > 32 else 0
    total = n + n * tsize + index
    end = base - total - n * osize - (osize if is_final else 0)
    if end < 0:
        fail(file, 0, f"fst node at {addr} starts before the file")
    final_out = unpack_uint(file, data, base - total - n * osize - osize, osize) if is_final and osize else 0
    trans = []
    for i in range(n):
        inp = at(base - index - i - 1)
        delta = unpack_uint(file, data, base - index - n - i * tsize - tsize, tsize)
        out = unpack_uint(file, data, base - total - i * osize - osize, osize) if osize else 0
        trans.append((inp, out, 0 if delta == 0 else end - delta))
    return is_final, final_out, trans


def read_fst(file, data, max_key=4096):
    """All (key bytes, value) pairs of an fst 0.4 map or set, in key order, plus its type."""
    if len(data) < 36:
        fail(file, 0, f"fst of {len(data)} bytes is shorter than 36")
    version, ty = struct.unpack_from("<QQ", data, 0)
    if version != 3:
        fail(file, 0, f"fst version {version}, expected 3 (fst 0.4)")
    (checksum,) = struct.unpack_from("<I", data, len(data) - 4)
    actual = masked_crc32c(data[:-4])
    if actual != checksum:
        fail(file, len(data) - 4, f"fst checksum {checksum:#010x}, computed {actual:#010x}")
    nkeys, root = struct.unpack_from("<QQ", data, len(data) - 20)
    if not ((root == 0 and len(data) == 36) or root + 21 == len(data)):
        fail(file, len(data) - 12, f"fst root address {root} does not end the node area")
    out = []
    stack = [(root, b"", 0)]
    while stack:
        addr, key, acc = stack.pop()
        if len(key) > max_key:
            fail(file, addr, "fst key longer than 4096 bytes (a cycle?)")
        is_final, final_out, trans = fst_node(file, data, version, addr)
        if is_final:
            out.append((key, acc + final_out))
            if len(out) > nkeys:
                fail(file, addr, f"more keys than the {nkeys} the footer states")
        for inp, o, target in reversed(trans):
            if target >= addr and target != 0:
                fail(file, addr, f"fst transition to {target} does not point backwards")
            stack.append((target, key + bytes([inp]), acc + o))
    if len(out) != nkeys:
        fail(file, None, f"fst footer says {nkeys} keys, found {len(out)}")
    return ty, out


# ---------------------------------------------------------------- bundle files


def read_postings(data, terms):
    r = Reader("postings.bin", data)
    r.header(b"JKPO", 1)
    n = r.u32()
    doc_lens = list(struct.unpack(f"<{n}I", r.take(4 * n)))
    header_end = r.pos
    lists = []
    for term, off in terms:
        if off < header_end or off >= len(data):
            fail("terms.fst", 0, f"postings offset {off} out of range")
        r = Reader("postings.bin", data, off)
        df = r.varint()
        if df > n:
            fail("postings.bin", off, f"document frequency {df} > {n} documents")
        doc, post = 0, []
        for _ in range(df):
            doc += r.varint()
            tf = r.varint()
            if doc >= n:
                fail("postings.bin", r.pos, f"doc id {doc} out of range")
            post.append([doc, tf])
        lists.append(post)
    return doc_lens, header_end, lists


def read_vectors(data):
    r = Reader("vectors.bin", data)
    r.header(b"JKVE", 1)
    dim, count = r.u32(), r.u32()
    scales = list(struct.unpack(f"<{count}f", r.take(4 * count)))
    q = r.take(count * dim)
    if r.pos != len(data):
        fail("vectors.bin", r.pos, f"{len(data) - r.pos} trailing bytes")
    rows = [list(struct.unpack(f"<{dim}b", q[i * dim:(i + 1) * dim])) for i in range(count)]
    return dim, scales, rows


def read_chunks(data):
    r = Reader("chunks.bin", data)
    r.header(b"JKCH", 1)
    count = r.u32()
    offsets = [r.u64() for _ in range(count + 1)]
    body = r.pos
    if any(a > b for a, b in zip(offsets, offsets[1:])) or offsets[-1] != len(data) - body:
        fail("chunks.bin", 12, "offset table does not match the records")
    records = []
    for i in range(count):
        a, b = body + offsets[i], body + offsets[i + 1]
        try:
            records.append(json.loads(data[a:b].decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            fail("chunks.bin", a, f"record {i}: {e}")
    return body, offsets, records


def read_bundle(folder):
    def read(name):
        try:
            with open(f"{folder}/{name}", "rb") as f:
                return f.read()
        except FileNotFoundError:
            fail(f"{folder}/{name}", None, "missing from the bundle")

    mbytes = read("manifest.json")
    try:
        manifest = json.loads(mbytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        fail("manifest.json", None, f"invalid JSON: {e}")
    if manifest.get("format_version") != FORMAT_VERSION:
        fail("manifest.json", None, f"format version {manifest.get('format_version')} is not supported (this reader reads {FORMAT_VERSION})")
    if manifest.get("analyzer_version") not in (1, 2):
        fail("manifest.json", None, f"analyzer version {manifest.get('analyzer_version')} is not supported")
    files = {}
    for name, entry in sorted(manifest["files"].items()):
        data = read(name)
        if len(data) != entry["bytes"]:
            fail(name, None, f"size mismatch (manifest says {entry['bytes']} bytes, file has {len(data)})")
        sha = hashlib.sha256(data).hexdigest()
        if sha != entry["sha256"]:
            fail(name, None, f"checksum mismatch (manifest says sha256 {entry['sha256']}, file has {sha})")
        files[name] = data

    out = {"format_version": manifest["format_version"], "analyzer_version": manifest["analyzer_version"],
           "counts": manifest["counts"],
           "files": {n: {"bytes": len(d), "sha256": manifest["files"][n]["sha256"]} for n, d in files.items()}}

    ty, term_pairs = read_fst("terms.fst", files["terms.fst"])
    terms = []
    for k, v in term_pairs:
        try:
            terms.append((k.decode("utf-8"), v))
        except UnicodeDecodeError:
            fail("terms.fst", None, f"term {k!r} is not UTF-8")
    doc_lens, header_end, lists = read_postings(files["postings.bin"], terms)
    out["postings_header_bytes"] = header_end
    out["doc_lens"] = doc_lens
    out["terms"] = [[t, off, post] for (t, off), post in zip(terms, lists)]

    body, offsets, records = read_chunks(files["chunks.bin"])
    out["chunks_body_start"] = body
    out["chunk_offsets"] = offsets
    out["chunks"] = records

    parents = (manifest.get("chunking") or {}).get("parents", 0)
    n = len(records) - parents
    if n < 0 or n != len(doc_lens) or n != manifest["counts"]["chunks"] or len(terms) != manifest["counts"]["terms"]:
        fail("manifest.json", 0, f"files disagree: manifest {manifest['counts']}, chunks.bin {len(records)} "
             f"records ({parents} parents), postings.bin {len(doc_lens)} docs, terms.fst {len(terms)} terms")

    if "vectors.bin" in files:
        dim, scales, rows = read_vectors(files["vectors.bin"])
        if len(scales) != n or (manifest.get("model") and manifest["model"]["dim"] != dim):
            fail("vectors.bin", 8, f"{len(scales)} vectors of dimension {dim}, manifest says "
                 f"{n} chunks, model {manifest.get('model')}")
        out["vectors"] = {"dim": dim, "scales": scales, "rows": rows}

    if "hanja.fst" in files:
        _, keys = read_fst("hanja.fst", files["hanja.fst"])
        pairs = {"h": [], "c": []}
        for k, _ in keys:
            tag, rest = chr(k[0]), k[1:].decode("utf-8")
            if tag not in pairs or len(rest) != 2:
                fail("hanja.fst", None, f"unexpected key {k!r}")
            pairs[tag].append(rest)
        out["hanja"] = {"hangul_to_hanja": pairs["h"], "hanja_to_hangul": pairs["c"]}
    return out


# ---------------------------------------------------------------- format 2: dense index pages

PAGE_HEADER = 48
MAX_PAGE = 16 << 20


def f32(x):
    """x rounded to the nearest f32 (the Rust reader's arithmetic)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def read_page(folder, name):
    """The raw body of page p/<name>: header checked (magic, kind letter, codec, lengths,
    number, SHA-256 prefix), codec 1 inflated (raw deflate, RFC 1951)."""
    file = f"p/{name}"
    try:
        with open(f"{folder}/{file}", "rb") as f:
            data = f.read()
    except FileNotFoundError:
        fail(file, None, "missing from the bundle")
    r = Reader(file, data)
    if r.take(4) != b"JKP2":
        fail(file, 0, "bad magic, expected b'JKP2'")
    kind, codec = r.take(1)[0], r.take(1)[0]
    if chr(kind) != name[0]:
        fail(file, 4, f"kind {chr(kind)!r} for a page named {name}")
    if codec not in (0, 1):
        fail(file, 5, f"codec {codec}")
    r.take(2)
    raw_len, stored_len, number = r.u32(), r.u32(), r.u32()
    if raw_len > MAX_PAGE or stored_len > MAX_PAGE or stored_len != len(data) - PAGE_HEADER:
        fail(file, 8, f"lengths raw {raw_len}, stored {stored_len} for {len(data) - PAGE_HEADER} bytes")
    parts = name.split("-")
    if len(parts) == 3 and str(number) != parts[2]:
        fail(file, 16, f"number {number} for a page named {name}")
    digest = r.take(28)
    body = data[PAGE_HEADER:]
    if codec == 1:
        try:
            d = zlib.decompressobj(-15)
            body = d.decompress(body, raw_len + 1)
        except zlib.error as e:
            fail(file, PAGE_HEADER, f"bad deflate data: {e}")
    if len(body) != raw_len:
        fail(file, PAGE_HEADER, f"{len(body)} raw bytes, the header says {raw_len}")
    if hashlib.sha256(body).digest()[:28] != digest:
        fail(file, 20, "SHA-256 of the body differs from the header's")
    return body


def numbered(run, kind, n):
    """Page `n` of a numbered run `{gen, ...}`: with `gens` (the centroid run after an update split
    lists past the cap: `group` 1) the generation of page `n`'s group, else `gen`."""
    gens, group = run.get("gens") or [], run.get("group") or 0
    if gens:
        if group < 1 or len(gens) != -(-run["pages"] // group) or any(
                len(g) != 16 or any(c not in "0123456789abcdef" for c in g) for g in gens):
            fail("jikji.json", 0, f"{len(gens)} group generations of {group} pages for {run['pages']} pages")
        return f"{kind}-{gens[n // group]}-{n}"
    if group:
        fail("jikji.json", 0, "a run with group and without gens")
    return f"{kind}-{run['gen']}-{n}"


def read_vectors_body(file, data):
    """A format 1 vectors.bin body inside page `file`: (dim, scales, rows)."""
    r = Reader(file, data)
    r.header(b"JKVE", 1)
    dim, count = r.u32(), r.u32()
    scales = list(struct.unpack(f"<{count}f", r.take(4 * count)))
    q = r.take(count * dim)
    if r.pos != len(data):
        fail(file, r.pos, f"{len(data) - r.pos} trailing bytes")
    return dim, scales, [list(struct.unpack(f"<{dim}b", q[i * dim:(i + 1) * dim])) for i in range(count)]


def read_codes(file, r, count, dim):
    """Binary codes of `count` rows from `r` to the end: amax, pmin, pmax, lengths,
    projections, sign bits (FORMAT.md, binary `j` pages)."""
    nb = (dim + 7) // 8
    need = 12 + count * (nb + 2)
    if len(r.data) - r.pos != need:
        fail(file, r.pos, f"{len(r.data) - r.pos} bytes of lengths and codes, {need} expected")
    at = r.pos
    amax, pmin, pmax = struct.unpack("<3f", r.take(12))
    if not math.isfinite(amax) or amax < 0:
        fail(file, at, f"row length scale {amax}")
    if not (math.isfinite(pmin) and math.isfinite(pmax)) or pmin > pmax:
        fail(file, at + 4, f"projection range {pmin}..{pmax}")
    a, b = list(r.take(count)), list(r.take(count))
    signs = r.take(count * nb)
    return {"amax": amax, "pmin": pmin, "pmax": pmax,
            "alphas": [f32(f32(amax * x) / 255.0) for x in a],
            "projs": [f32(pmin + f32(f32(f32(pmax - pmin) * x) / 255.0)) for x in b],
            "signs": [signs[i * nb:(i + 1) * nb].hex() for i in range(count)]}


def read_ivf(folder):
    """The dense index's once-per-bundle pages of a format 2 bundle: every centroid as the
    reader ranks lists by (dequantized), and the background sample (int8 rows, or binary
    codes with their spread correction)."""
    try:
        with open(f"{folder}/jikji.json", "rb") as f:
            entry = json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        fail("jikji.json", None, "missing from the bundle")
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        fail("jikji.json", None, f"invalid JSON: {e}")
    pages = entry.get("pages") or {}
    ivf, dim, n = pages.get("ivf"), pages.get("dim"), entry["counts"]["chunks"]
    if not ivf:
        fail("jikji.json", None, "no dense index (pages.ivf)")
    nlist = ivf["nlist"]
    codes = ivf.get("centroid_codes") or "int8"
    if codes not in ("int8", "int4-centred"):
        fail("jikji.json", 0, f"pages.ivf.centroid_codes {codes!r} is not known")
    if ivf["centroids"]["pages"] != (nlist + 255) // 256:
        fail("jikji.json", 0, "centroid pages disagree with nlist")
    centroids = []
    mean = None
    hb = (dim + 1) // 2
    for p in range(ivf["centroids"]["pages"]):
        name = numbered(ivf["centroids"], "g", p)
        file = f"p/{name}"
        body = read_page(folder, name)
        rows = min(256, nlist - 256 * p)
        if codes == "int8":
            d, scales, q = read_vectors_body(file, body)
            if d != dim or len(scales) != rows:
                fail(file, 8, f"{len(scales)} rows of {d}, expected {rows} of {dim}")
            centroids += [[f32(s * x) for x in row] for s, row in zip(scales, q)]
            continue
        head = 4 + dim if p == 0 else 0
        if len(body) != head + rows * (4 + hb):
            fail(file, 0, f"{len(body)} bytes of 4-bit centroids, {head + rows * (4 + hb)} expected")
        r = Reader(file, body)

        def scale():
            at = r.pos
            s = struct.unpack("<f", r.take(4))[0]
            if not math.isfinite(s) or s < 0:
                fail(file, at, f"scale {s}")
            return s
        if p == 0:
            ms = scale()
            mean = [f32(ms * x) for x in struct.unpack(f"<{dim}b", r.take(dim))]
        for _ in range(rows):
            s = scale()
            nib = r.take(hb)
            u = [(nib[t // 2] >> (4 * (t % 2))) & 15 for t in range(dim)]
            centroids.append([f32(mean[t] + f32(s * (u[t] - 8))) for t in range(dim)])
    take = min(n, 256)
    scodes = ivf.get("sample_codes") or "int8"
    name = numbered(ivf["sample"], "w", 0)
    file = f"p/{name}"
    body = read_page(folder, name)
    if scodes == "int8":
        d, scales, q = read_vectors_body(file, body)
        if d != dim or len(scales) != take:
            fail(file, 8, f"{len(scales)} rows of {d}, expected {take} of {dim}")
        sample = {"codes": "int8", "scales": scales, "rows": q}
    elif scodes == "binary" and ivf["codes"] == "binary":
        r = Reader(file, body)
        rho = struct.unpack("<f", r.take(4))[0]
        if not math.isfinite(rho) or not (1 / 16 <= rho <= 16):
            fail(file, 0, f"spread correction {rho}")
        count = r.varint()
        if count != take:
            fail(file, 4, f"{count} sample rows, {take} expected")
        lists = []
        for _ in range(count):
            at = r.pos
            j = r.varint()
            if j >= nlist:
                fail(file, at, f"list {j} of an index of {nlist} lists")
            lists.append(j)
        sample = {"codes": "binary", "sigma_ratio": rho, "lists": lists, **read_codes(file, r, count, dim)}
    else:
        fail("jikji.json", 0, f"pages.ivf.sample_codes {scodes!r} with {ivf['codes']!r} lists")
    out = {"nlist": nlist, "dim": dim, "centroid_codes": codes, "mean": mean,
           "centroids": centroids, "sample": sample}
    if ivf["codes"] == "binary":
        out["lists"] = read_binary_lists(folder, ivf, n, dim)
    return out


def list_gen(ivf, j):
    """The generation in list j's page name: its `list_gens` entry's, else `lists.gen`."""
    for g in ivf.get("list_gens") or []:
        if j in g["lists"]:
            return g["gen"]
    return ivf["lists"]["gen"]


def read_binary_lists(folder, ivf, n, dim):
    """Each binary list's page, doc ids and the `i` pages of its rows (each checked to hold
    the rows it should): rows in list order (`i-<rows.gen>-<(first + k) // per_page>`), or
    with `list_rows` = S numbered per list (`i-<G_j>-<j*S + k // per_page>`, G_j list j's
    generation, `first` 0), or with `row_groups` also grouped (the list page's group byte
    of each row after the doc ids; group g of list j on `i-<G_j>-<j*S + g>`)."""
    rows = ivf["rows"]
    per = rows["per_page"]
    if not 1 <= per <= 256:
        fail("jikji.json", 0, f"pages.ivf.rows.per_page {per}")
    s = ivf.get("list_rows")
    if s is not None and (s < 1 or ivf["nlist"] * s > 2**32 - 1):
        fail("jikji.json", 0, f"pages.ivf.list_rows {s} for {ivf['nlist']} lists")
    nb = (dim + 7) // 8
    out = []
    for j in range(ivf["nlist"]):
        gen = list_gen(ivf, j)
        name = f"j-{gen}-{j}"
        file = f"p/{name}"
        body = read_page(folder, name)
        r = Reader(file, body)
        count = r.varint()
        if count > (len(body) - r.pos) // (nb + 3):
            fail(file, 0, f"list of {count} rows in a {len(body)}-byte page")
        at = r.pos
        first = r.varint()
        if first + count > n:
            fail(file, at, f"rows {first}.. + {count} of a bundle of {n} chunks")
        docs, prev = [], None
        for _ in range(count):
            at = r.pos
            d = r.varint()
            if prev is not None:
                if d == 0:
                    fail(file, at, "doc ids not ascending")
                d += prev
            if d >= n:
                fail(file, at, f"doc {d} of a bundle of {n} chunks")
            docs.append(d)
            prev = d
        grouped = ivf.get("row_groups") is not None
        if grouped and (ivf["row_groups"] is not True or s is None or per < 2):
            fail("jikji.json", 0, f"pages.ivf.row_groups {ivf['row_groups']!r} without list_rows and 2+ rows a page")
        groups = []
        if grouped:
            at = r.pos
            groups = list(r.take(count))
            sizes = []
            for k, g in enumerate(groups):
                if g > len(sizes):
                    fail(file, at, f"row {k} is in group {g} before group {len(sizes)} has a row")
                if g == len(sizes):
                    sizes.append(0)
                sizes[g] += 1
                if sizes[g] > per:
                    fail(file, at, f"group {g} holds more than {per} rows")
            if len(sizes) > min(s, 256):
                fail(file, at, f"{len(sizes)} row groups, at most {min(s, 256)} numbered per list")
        if grouped:
            if first != 0:
                fail(file, 0, f"list from {first} where the entry numbers rows per list")
            places = [(j * s + g, gen) for g in groups]
            held = lambda p, j=j: sum(1 for g in groups if j * s + g == p)
        elif s is None:
            places = [((first + k) // per, rows["gen"]) for k in range(count)]
            held = lambda p: min(per, n - p * per)
        else:
            if first != 0 or count > s * per:
                fail(file, 0, f"list of {count} rows from {first} where the entry numbers rows per list")
            places = [(j * s + k // per, gen) for k in range(count)]
            held = lambda p, j=j: min(per, count - (p - j * s) * per)
        pages = []
        for p, g in places:
            pname = f"i-{g}-{p}"
            if pname not in pages:
                pages.append(pname)
                d, scales, _ = read_vectors_body(f"p/{pname}", read_page(folder, pname))
                if d != dim or len(scales) != held(p):
                    fail(f"p/{pname}", 8, f"{len(scales)} rows of {d}, expected {held(p)} of {dim}")
        out.append({"page": name, "first": first, "docs": docs, "row_pages": pages, **({"groups": groups} if grouped else {})})
    return out


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    as_json = "--json" in argv
    chunk = 0
    if "--chunk" in argv:
        i = argv.index("--chunk")
        chunk = int(argv[i + 1])
        args.remove(argv[i + 1])
    if len(args) != 1:
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return 2
    if "--ivf" in argv:
        try:
            out = read_ivf(args[0])
        except BundleError as e:
            print(f"read-bundle: {e}", file=sys.stderr)
            return 1
        json.dump(out, sys.stdout)
        print()
        return 0
    try:
        b = read_bundle(args[0])
    except BundleError as e:
        print(f"read-bundle: {e}", file=sys.stderr)
        return 1
    if as_json:
        json.dump(b, sys.stdout, ensure_ascii=False)
        print()
        return 0
    c = b["counts"]
    print(f"format {b['format_version']}, analyzer {b['analyzer_version']}; "
          f"all {len(b['files'])} files match the manifest's sizes and SHA-256")
    print(f"counts: files {c['files']}, chunks {c['chunks']}, terms {c['terms']}, vectors {c['vectors']}")
    print(f"terms.fst: {len(b['terms'])} terms; postings.bin: {len(b['doc_lens'])} docs, "
          f"{sum(len(p) for _, _, p in b['terms'])} postings, {sum(b['doc_lens'])} term occurrences")
    if "vectors" in b:
        v = b["vectors"]
        print(f"vectors.bin: {len(v['scales'])} × {v['dim']} int8")
    if "hanja" in b:
        h = b["hanja"]
        print(f"hanja.fst: {len(h['hangul_to_hanja'])} Hangul→Hanja and {len(h['hanja_to_hangul'])} Hanja→Hangul keys")
    print(f"chunks.bin: {len(b['chunks'])} records; record {chunk}:")
    print(json.dumps(b["chunks"][chunk], ensure_ascii=False, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

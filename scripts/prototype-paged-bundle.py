#!/usr/bin/env python3
"""Prototype measurement for issue 12 (paged bundle, format v2): simulates the proposed
page layout on a real v1 bundle and prints what a browser query would fetch.

Nothing here is the format: it is the measurement behind docs/design/paged-bundle-v2.md.
It reads a v1 bundle with scripts/read-bundle.py (the independent reader), re-encodes the
term dictionary, postings and chunk store the way the design proposes, and replays a query
set against it:

- query terms come from an APPROXIMATE analyzer (NFKC, lowercase, alphanumeric runs,
  Snowball English stemming via `snowballstemmer`, possessive 's dropped; Han/kana runs as
  unigrams + bigrams without Traditional->Simplified folding; Hangul words as bigrams plus
  the whole word as a stand-in for the particle-stripped lemma). Prefix expansion of the
  last word (if the query does not end in a space/punctuation) is simulated; typo
  expansion is counted as a lower bound (blocks holding the matching terms); Hangul<->Hanja
  expansion is not simulated.
- BM25 scores use the real postings, document lengths and the manifest's k1/b, so the
  block-max pruning is simulated on real numbers; the top-10 chunks whose pages are
  fetched are the REAL engine's (`jikji search --json`), mapped to doc ids.
- positions (for phrase scoring) are ESTIMATED as 1 byte per occurrence (delta-coded), plus
  1 byte per posting whose chunk has >= 128 terms (its first position may need 2 bytes).

Usage:
  prototype-paged-bundle.py BUNDLE QUERIES [--name NAME] [--jikji BIN] [--json OUT]
  prototype-paged-bundle.py --wasm FILE.wasm          (code size by crate, from the name section)

QUERIES is a .jsonl file with a "text" field per line, or a text file with one query per line.
Requires: python3 >= 3.9, pip packages zstandard, brotli, snowballstemmer.
"""

import argparse
import bisect
import collections
import hashlib
import importlib.util
import json
import math
import os
import statistics
import struct
import subprocess
import sys
import time
import unicodedata
import zlib

import brotli
import snowballstemmer
import zstandard

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("read_bundle", os.path.join(HERE, "read-bundle.py"))
rb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rb)

# Assumptions of the simulated layout (the design's proposal; see the doc).
BLOCK_DOCS = 128          # postings per block (block-max unit), as Lucene/tantivy
HASH_NAME_BYTES = 8       # a page reference: 64-bit content hash
HTTP_OVERHEAD = 300       # response header bytes per request counted as transfer (estimate)
PHRASE_DEPTH = 200        # engine-wasm/src/search.rs
PREFIX_WEIGHT, MAX_EXPANSIONS, PREFIX_SCAN = 0.5, 30, 4096
FUZZY_WEIGHT = 0.3


# ------------------------------------------------------------------ small encoders

def varint_len(n):
    n = int(n)
    b = 1
    while n >= 0x80:
        n >>= 7
        b += 1
    return b


def varint(n):
    out = bytearray()
    n = int(n)
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def common_prefix(a, b):
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def separator(left, right):
    """Shortest key s with left <= s < right (tantivy's find_shorter_str_in_between idea)."""
    p = common_prefix(left, right)
    if p < len(left) and p < len(right) and left[p] + 1 < right[p]:
        return left[:p] + bytes([left[p] + 1])
    return left[: p + 1] if p < len(left) else left


def pct(xs, q):
    if not xs:
        return 0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def kb(n):
    return f"{n / 1000:.1f} kB"


# ------------------------------------------------------------------ approximate analyzer

_stem = snowballstemmer.stemmer("english")


def _script(c):
    o = ord(c)
    if 0xAC00 <= o <= 0xD7A3 or 0x1100 <= o <= 0x11FF or 0x3130 <= o <= 0x318F:
        return "hangul"
    if (0x4E00 <= o <= 0x9FFF or 0x3400 <= o <= 0x4DBF or 0xF900 <= o <= 0xFAFF
            or 0x3040 <= o <= 0x30FF or 0x20000 <= o <= 0x2FFFF):
        return "han"
    if c.isalnum():
        return "alnum"
    return None


def words(text):
    text = unicodedata.normalize("NFKC", text).lower()
    out, cur, cur_s = [], [], None
    for c in text:
        s = _script(c)
        if s != cur_s or s is None:
            if cur:
                out.append(("".join(cur), cur_s))
            cur, cur_s = ([c], s) if s else ([], None)
        else:
            cur.append(c)
    if cur:
        out.append(("".join(cur), cur_s))
    # possessive 's: "king's" -> "king" (the 's' run is dropped after an apostrophe)
    fixed = []
    for i, (w, s) in enumerate(out):
        if s == "alnum" and w == "s" and i > 0 and fixed and fixed[-1][1] == "alnum":
            j = text.find("'s")
            if j >= 0:
                continue
        fixed.append((w, s))
    return fixed


def analyze(text):
    terms = []
    for w, s in words(text):
        if s == "alnum":
            terms.append(_stem.stemWord(w))
        elif s == "han":
            if len(w) == 1:
                terms.append(w)
            else:
                for i in range(len(w)):
                    terms.append(w[i])
                    if i + 1 < len(w):
                        terms.append(w[i:i + 2])
        elif s == "hangul":
            if len(w) == 1:
                terms.append(w)
            else:
                for i in range(len(w) - 1):
                    terms.append(w[i:i + 2])
                if len(w) > 2:
                    terms.append(w)
    return terms


def levenshtein_le(a, b, d):
    if abs(len(a) - len(b)) > d:
        return False
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        lo = i
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
            lo = min(lo, cur[j])
        if lo > d:
            return False
        prev = cur
    return prev[-1] <= d


# ------------------------------------------------------------------ bundle model

class Model:
    def __init__(self, folder):
        t = time.time()
        self.folder = folder
        self.manifest = json.load(open(os.path.join(folder, "manifest.json"), encoding="utf-8"))
        _, terms = rb.read_fst("terms.fst", open(os.path.join(folder, "terms.fst"), "rb").read())
        pdata = open(os.path.join(folder, "postings.bin"), "rb").read()
        self.doc_lens, _, lists = rb.read_postings(pdata, terms)
        self.keys = [k for k, _ in terms]
        self.key_index = {k: i for i, k in enumerate(self.keys)}
        self.lists = lists
        self.n = len(self.doc_lens)
        self.avgdl = sum(self.doc_lens) / max(1, self.n)
        p = self.manifest["bm25"]
        self.k1, self.b = p["k1"], p["b"]
        cdata = open(os.path.join(folder, "chunks.bin"), "rb").read()
        body, offsets, records = rb.read_chunks(cdata)
        self.record_bytes = [cdata[body + offsets[i]: body + offsets[i + 1]] for i in range(len(records))]
        self.records = records
        self.id_to_doc = {r["id"]: i for i, r in enumerate(records)}
        self.files = {name: meta["bytes"] for name, meta in self.manifest["files"].items()}
        self.hanja_bytes = self.files.get("hanja.fst", 0)
        self.v1_postings_bytes = len(pdata)
        self.load_s = time.time() - t

    def idf(self, df):
        return math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))

    def sat(self, tf, doc):
        dl = self.doc_lens[doc]
        return tf * (self.k1 + 1.0) / (tf + self.k1 * (1.0 - self.b + self.b * dl / self.avgdl))


# ------------------------------------------------------------------ v2 postings encoding

class TermPostings:
    """One term's list in v2 form: blocks of BLOCK_DOCS postings (doc delta, tf, doc length
    varints), each with its last doc, max saturated tf and byte size; positions estimated."""

    __slots__ = ("blocks", "bytes", "pos_bytes", "df")

    def __init__(self, model, plist, bitpack=True):
        self.df = len(plist)
        self.blocks = []  # (first_doc, last_doc, max_sat, bytes, pos_bytes)
        total = pos_total = 0
        prev = 0
        for s in range(0, len(plist), BLOCK_DOCS):
            blk = plist[s: s + BLOCK_DOCS]
            pbytes = 0
            ms = 0.0
            deltas, tfs, dls = [], [], []
            for doc, tf in blk:
                deltas.append(doc - prev)
                prev = doc
                tfs.append(tf)
                dls.append(model.doc_lens[doc])
                pbytes += tf + (1 if model.doc_lens[doc] >= 128 else 0)
                ms = max(ms, model.sat(tf, doc))
            if bitpack and len(blk) == BLOCK_DOCS:
                # full block: bitpacked as tantivy/Lucene do (deltas-1, tf-1, doc length - block
                # minimum), widths in 3 bytes, the minimum doc length as a varint
                lo = min(dls)
                bits = sum(max(1, max(x)).bit_length() for x in
                           ([d - 1 if i else d for i, d in enumerate(deltas)], [t - 1 for t in tfs], [d - lo for d in dls]))
                nbytes = (BLOCK_DOCS * bits + 7) // 8 + 3 + varint_len(lo)
            else:
                nbytes = sum(varint_len(d) + varint_len(t) + varint_len(l) for d, t, l in zip(deltas, tfs, dls))
            # block header: last doc delta, byte length, u8 quantised block max (rounded up)
            nbytes += varint_len(blk[-1][0]) + varint_len(nbytes) + 1
            self.blocks.append((blk[0][0], blk[-1][0], ms, nbytes, pbytes))
            total += nbytes
            pos_total += pbytes
        self.bytes = total + varint_len(self.df)
        self.pos_bytes = pos_total


class Layout:
    """The simulated v2 layout for one parameter choice."""

    def __init__(self, model, tps, dict_block, inline, post_page, with_positions):
        self.model, self.tps = model, tps
        self.dict_block, self.inline, self.post_page = dict_block, inline, post_page
        self.with_positions = with_positions
        # postings pages: non-inline lists packed in term order, whole blocks per page
        self.block_page = {}   # (term idx, block idx) -> postings page id
        self.page_bytes = []
        self.pos_page = {}     # (term idx, block idx) -> positions page id
        self.pos_page_bytes = []
        self.is_inline = []
        cur = pcur = 0
        for ti, tp in enumerate(tps):
            inl = tp.bytes + (tp.pos_bytes if with_positions else 0) <= inline
            self.is_inline.append(inl)
            if inl:
                continue
            for bi, blk in enumerate(tp.blocks):
                if not self.page_bytes or cur + blk[3] > post_page:
                    self.page_bytes.append(0)
                    cur = 0
                self.page_bytes[-1] += blk[3]
                cur += blk[3]
                self.block_page[(ti, bi)] = len(self.page_bytes) - 1
                if with_positions:
                    if not self.pos_page_bytes or pcur + blk[4] > post_page:
                        self.pos_page_bytes.append(0)
                        pcur = 0
                    self.pos_page_bytes[-1] += blk[4]
                    pcur += blk[4]
                    self.pos_page[(ti, bi)] = len(self.pos_page_bytes) - 1
        # dictionary blocks: front-coded keys + df + inline postings or a reference. Bytes are
        # built for real (positions of inline lists are added as a count, not as bytes: their
        # values are not known here; counted uncompressed).
        self.term_block = []
        self.dblock_bytes = []     # raw size including estimated inline positions
        self.dblock_data = []      # real bytes without positions (for compression)
        self.dblock_pos = []       # estimated inline positions bytes per block
        self.dblock_first = []
        cur = dict_block + 1
        prev = b""
        for ti, key in enumerate(model.keys):
            tp = tps[ti]
            if cur >= dict_block:
                self.dblock_bytes.append(0)
                self.dblock_data.append(bytearray())
                self.dblock_pos.append(0)
                self.dblock_first.append(key)
                cur = 0
                prev = b""
            keep = common_prefix(prev, key)
            add = len(key) - keep
            e = bytearray()
            if keep < 16 and add < 16:
                e.append(add << 4 | keep)
            else:
                e += b"\x01" + varint(keep) + varint(add)
            e += key[keep:] + varint(tp.df)
            posb = 0
            if self.is_inline[ti]:
                pd = 0
                for doc, tf in model.lists[ti]:
                    e += varint(doc - pd) + varint(tf) + varint(model.doc_lens[doc])
                    pd = doc
                posb = tp.pos_bytes if with_positions else 0
            else:
                pages = sorted({self.block_page[(ti, bi)] for bi in range(len(tp.blocks))})
                e += varint(pages[0]) + varint(0) + varint(tp.bytes)
                # per later page of the list: its last doc (delta) and quantised max
                last = 0
                for bi, blk in enumerate(tp.blocks):
                    if bi + 1 < len(tp.blocks) and self.block_page[(ti, bi + 1)] != self.block_page[(ti, bi)]:
                        e += varint(blk[1] - last) + bytes([min(255, int(blk[2] * 40))])
                        last = blk[1]
                if with_positions:
                    e += varint(0) + varint(tp.pos_bytes)
            self.dblock_data[-1] += e
            self.dblock_pos[-1] += posb
            self.dblock_bytes[-1] += len(e) + posb
            cur += len(e) + posb
            prev = key
            self.term_block.append(len(self.dblock_bytes) - 1)
        seps = []
        for i in range(1, len(self.dblock_first)):
            seps.append(separator(model.keys[self.block_last(i - 1)], self.dblock_first[i]))
        # block index: front-coded separators + a 64-bit name each
        idx = 0
        prev = b""
        for s in seps:
            k = common_prefix(prev, s)
            idx += 2 + len(s) - k + HASH_NAME_BYTES
            prev = s
        self.block_index_bytes = idx + HASH_NAME_BYTES

    def block_last(self, bi):
        # last term index of dictionary block bi
        lo = bisect.bisect_right(self.term_block, bi)
        return lo - 1


# ------------------------------------------------------------------ chunk store pages

def chunk_pages(model, page_bytes, lean):
    """Records packed in doc order into pages of about page_bytes raw bytes.
    lean: per-file fields moved to a file table (source, source_url, tier, title, author,
    version, expires, provenance, doc_id, updated, archived, lang) -> the record keeps id,
    heading_path, section, start, end, text and a file number."""
    pages, page_of, cur = [], [], bytearray()
    files = {}
    for i, raw in enumerate(model.record_bytes):
        if lean:
            r = model.records[i]
            f = files.setdefault(r["source"], len(files))
            raw = json.dumps({"id": r["id"], "f": f, "h": r["heading_path"], "s": r["section"],
                              "a": r["start"], "e": r["end"], "t": r["text"]},
                             ensure_ascii=False, separators=(",", ":")).encode()
        if cur and len(cur) + len(raw) > page_bytes:
            pages.append(bytes(cur))
            cur = bytearray()
        cur += raw + b"\n"
        page_of.append(len(pages))
    if cur:
        pages.append(bytes(cur))
    return pages, page_of


def codecs(zdict=None):
    c = {
        "raw": lambda b: b,
        "deflate-9": lambda b: zlib.compress(b, 9)[2:-4],
        "zstd-3": zstandard.ZstdCompressor(level=3).compress,
        "zstd-19": zstandard.ZstdCompressor(level=19).compress,
        "brotli-11": lambda b: brotli.compress(b, quality=11),
    }
    if zdict is not None:
        c["zstd-19+dict"] = zstandard.ZstdCompressor(level=19, dict_data=zdict).compress
    return c


def decode_speed(pages, name, comp, zdict=None):
    blobs = [comp(p) for p in pages]
    raw = sum(len(p) for p in pages)
    if name == "raw":
        return None
    if name == "deflate-9":
        dec = lambda b: zlib.decompress(b, -15)
    elif name.startswith("zstd"):
        d = zstandard.ZstdDecompressor(dict_data=zdict) if zdict is not None else zstandard.ZstdDecompressor()
        dec = d.decompress
    else:
        dec = brotli.decompress
    t = time.perf_counter()
    reps = 0
    while time.perf_counter() - t < 0.3:
        for b in blobs:
            dec(b)
        reps += 1
    return raw * reps / (time.perf_counter() - t) / 1e6


# ------------------------------------------------------------------ query simulation

def load_queries(path):
    qs = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                continue
            if path.endswith(".jsonl"):
                qs.append(json.loads(line)["text"])
            else:
                qs.append(line)
    return qs


def real_top10(model, queries, jikji):
    """Doc ids of the engine's top-10 per query (bm25), via `jikji search --json`."""
    out = []
    for s in range(0, len(queries), 50):
        batch = queries[s: s + 50]
        res = subprocess.run([jikji, "search", model.folder, "--mode", "bm25", "--json", "--top-k", "10", "--", *batch],
                             capture_output=True, check=True)
        for q in json.loads(res.stdout):
            out.append([model.id_to_doc[h["id"]] for h in q["hits"]])
    return out


def query_terms(model, q):
    """(term idx or None, weight, idf cap, exact, term bytes) -- approximate, see module doc."""
    exact = sorted(set(analyze(q)))
    out = []
    for t in exact:
        k = t.encode()
        out.append((model.key_index.get(k), 1.0, None, True, k))
    extra = {}
    ws = words(q)
    typing = bool(q) and q[-1].isalnum()
    fuzzy_words = []
    if ws and typing:
        w, s = ws[-1]
        if s in ("alnum", "hangul") and len(w) >= (2 if s == "hangul" else 3):
            pre = w.encode()
            stem = _stem.stemWord(w) if s == "alnum" else w
            si = model.key_index.get(stem.encode())
            cap = model.idf(len(model.lists[si])) if si is not None else None
            lo = bisect.bisect_left(model.keys, pre)
            found = []
            i = lo
            while i < len(model.keys) and model.keys[i].startswith(pre) and len(found) < PREFIX_SCAN:
                found.append(i)
                i += 1
            found.sort(key=lambda j: (-len(model.lists[j]), model.keys[j]))
            for j in found[:MAX_EXPANSIONS]:
                if model.keys[j].decode() not in exact:
                    extra[j] = (PREFIX_WEIGHT, cap)
            out_prefix_range = (lo, i)
        else:
            out_prefix_range = None
    else:
        out_prefix_range = None
    for w, s in ws:
        if s == "alnum" and len(w) >= 5 and w.isalpha():
            stem = _stem.stemWord(w)
            if stem.encode() not in model.key_index:
                fuzzy_words.append((stem, 2 if len(w) >= 9 else 1))
    for ti, (wt, cap) in extra.items():
        out.append((ti, wt, cap, False, model.keys[ti]))
    return out, out_prefix_range, fuzzy_words, analyze(q)


def fuzzy_matches(model, stem, d, by_len):
    found = []
    L = len(stem)
    for l in range(L - d, L + d + 1):
        for ti in by_len.get(l, ()):
            if levenshtein_le(stem, model.keys[ti].decode(), d):
                found.append(ti)
    found.sort(key=lambda j: (-len(model.lists[j]), model.keys[j]))
    return found[:MAX_EXPANSIONS]


_PREP = {}


def prepare(model, q, latin_by_len):
    """Layout-independent part of a query: terms, weights, per-term contributions, theta."""
    if q in _PREP:
        return _PREP[q]
    terms, prange, fuzzy_words, sequence = query_terms(model, q)
    lookup_keys = [key for _, _, _, _, key in terms]
    range_terms = list(range(prange[0], prange[1])) if prange and prange[1] > prange[0] else []
    for stem, d in fuzzy_words:
        for ti in fuzzy_matches(model, stem, d, latin_by_len):
            range_terms.append(ti)
            if all(t[0] != ti for t in terms):
                terms.append((ti, FUZZY_WEIGHT, None, False, model.keys[ti]))
    scored = []
    for ti, w, cap, exact, key in terms:
        if ti is None:
            continue
        idf = model.idf(len(model.lists[ti]))
        if cap is not None:
            idf = min(idf, cap)
        scored.append((ti, w * idf, exact))
    contrib = {}
    full = collections.defaultdict(float)
    for ti, wi, _ in scored:
        docs = [d for d, _ in model.lists[ti]]
        sc = [wi * model.sat(tf, d) for d, tf in model.lists[ti]]
        contrib[ti] = (docs, sc)
        for d, x in zip(docs, sc):
            full[d] += x
    k = PHRASE_DEPTH if len(sequence) >= 2 else 10
    theta = sorted(full.values(), reverse=True)[k - 1] if len(full) >= k else 0.0
    theta10 = sorted(full.values(), reverse=True)[9] if len(full) >= 10 else 0.0
    r = {"theta10": theta10, "sequence": sequence, "scored": scored, "contrib": contrib, "theta": theta,
         "fuzzy_words": fuzzy_words, "lookup_keys": lookup_keys, "range_terms": range_terms}
    _PREP[q] = r
    return r


def simulate(model, layout, queries, tops, page_of, cpage_comp_bytes, dblock_comp, post_comp_ratio,
             entry_bytes, static_bytes, latin_by_len, depth_rule="exact200", two_phase=False):
    """depth_rule "exact200": today's rule (phrase over the plain-BM25 top 200) reproduced
    exactly, so blocks are pruned against the 200th score. "top10": the phrase bonus is an
    upper bound added to every block of a multi-term query and blocks are pruned against
    the 10th score (a behaviour change to be measured with jikji eval before adoption)."""
    """Replays the queries in order with an unbounded page cache; returns per-query rows."""
    tps = layout.tps
    cache = set()
    rows = []
    for qi, q in enumerate(queries):
        pq = prepare(model, q, latin_by_len)
        sequence, scored, contrib, theta = pq["sequence"], pq["scored"], pq["contrib"], pq["theta"]
        fuzzy_words = pq["fuzzy_words"]
        need_dict = set()
        for key in pq["lookup_keys"]:
            j = bisect.bisect_left(model.keys, key)
            need_dict.add(layout.term_block[min(j, len(model.keys) - 1)])
        for ti in pq["range_terms"]:
            need_dict.add(layout.term_block[ti])
        part = collections.defaultdict(float)
        for ti, wi, _ in scored:
            if layout.is_inline[ti]:
                for doc, sc in zip(*contrib[ti]):
                    part[doc] += sc
        k = PHRASE_DEPTH if (len(sequence) >= 2 and depth_rule == "exact200") else 10
        theta_lb = sorted(part.values(), reverse=True)[k - 1] if len(part) >= k else 0.0
        bonus = 0.0
        if depth_rule == "top10" and len(sequence) >= 2:
            bonus = sum(wi for _, wi, ex in scored if ex) * (model.k1 + 1.0)
            theta = pq["theta10"]
        n_long_blocks = 0
        # per non-inline term: blocks and their upper bounds
        long_terms = [(ti, wi) for ti, wi, _ in scored if not layout.is_inline[ti]]
        inline_terms = [(ti, wi) for ti, wi, _ in scored if layout.is_inline[ti]]
        fetch_pages, fetch_pages_oracle, pos_pages = set(), set(), set()
        exact_long = {ti for ti, wi, ex in scored if ex and not layout.is_inline[ti]}
        inline_docs = {}
        for ti, wi in inline_terms:
            inline_docs[ti] = contrib[ti]
        bounds = {}
        for ti, wi in long_terms:
            bl = tps[ti].blocks
            bounds[ti] = ([b[0] for b in bl], [b[1] for b in bl], [wi * b[2] for b in bl])
        for ti, wi in long_terms:
            firsts, lasts, maxs = bounds[ti]
            for bi in range(len(firsts)):
                lo, hi = firsts[bi], lasts[bi]
                ub = maxs[bi] + bonus
                n_long_blocks += 1
                for tj, (f2, l2, m2) in bounds.items():
                    if tj == ti:
                        continue
                    a = bisect.bisect_left(l2, lo)
                    bmax = 0.0
                    while a < len(f2) and f2[a] <= hi:
                        bmax = max(bmax, m2[a])
                        a += 1
                    ub += bmax
                for tj, (docs, sc) in inline_docs.items():
                    a = bisect.bisect_left(docs, lo)
                    b2 = bisect.bisect_right(docs, hi)
                    if b2 > a:
                        ub += max(sc[a:b2])
                pg = layout.block_page[(ti, bi)]
                if ub >= theta_lb:
                    fetch_pages.add(pg)
                    if layout.with_positions and ti in exact_long and len(sequence) >= 2:
                        pos_pages.add(layout.pos_page[(ti, bi)])
                if ub >= theta:
                    fetch_pages_oracle.add(pg)
        # Two-phase plan (MaxScore, Turtle & Flood 1995, over pages): round 2 fetches the
        # essential lists whole; non-essential lists are those of smallest max impact whose
        # maxima sum below theta_lb2 (the K-th best score from the known lists); round 3 fetches
        # only their blocks that hold a candidate (known score + non-essential maxima >= theta_lb2).
        ts = sorted(((max(b[2] for b in tps[ti].blocks) * wi, ti, wi) for ti, wi in long_terms)) if two_phase else []
        known_terms = set(t for t, _ in inline_terms)
        ne, acc_max = [], 0.0
        ess = [t for _, t, _ in ts]
        # theta from inline + essential lists must exceed the NE maxima; grow NE greedily
        for m, ti, wi in ts:
            trial = [x for x in ess if x != ti]
            p2 = collections.defaultdict(float)
            for tj in list(known_terms) + trial:
                for d, x in zip(*contrib[tj]):
                    p2[d] += x
            th2 = sorted(p2.values(), reverse=True)[k - 1] if len(p2) >= k else 0.0
            if acc_max + m < th2:
                ne.append(ti)
                ess = trial
                acc_max += m
                theta2 = th2
            else:
                break
        two_pages = {layout.block_page[(ti, bi)] for ti in ess for bi in range(len(tps[ti].blocks))}
        two_round3 = set()
        if ne:
            p2 = collections.defaultdict(float)
            for tj in list(known_terms) + ess:
                for d, x in zip(*contrib[tj]):
                    p2[d] += x
            cands = sorted(d for d, x in p2.items() if x + acc_max >= theta2)
            for ti in ne:
                lasts = [b[1] for b in tps[ti].blocks]
                for d in cands:
                    bi = bisect.bisect_left(lasts, d)
                    if bi < len(lasts) and tps[ti].blocks[bi][0] <= d:
                        two_round3.add(layout.block_page[(ti, bi)])
        two_bytes = sum(int(layout.page_bytes[p]) for p in two_pages | two_round3)
        full_bytes = sum(int(layout.page_bytes[p]) for p in
                         {layout.block_page[(ti, bi)] for ti, _ in long_terms for bi in range(len(tps[ti].blocks))})
        cpages = {page_of[d] for d in tops[qi]}
        # bytes: compressed sizes; new = not in cache
        items = [("d", b) for b in need_dict] + [("p", p) for p in fetch_pages] + \
                [("x", p) for p in pos_pages] + [("c", p) for p in cpages]

        def size(kind, i):
            if kind == "d":
                return dblock_comp[i]
            if kind == "p":
                return int(layout.page_bytes[i] * post_comp_ratio)
            if kind == "x":
                return int(layout.pos_page_bytes[i] * post_comp_ratio)
            return cpage_comp_bytes[i]

        new = [(k_, i) for k_, i in items if (k_, i) not in cache]
        new_bytes = sum(size(k_, i) for k_, i in new) + HTTP_OVERHEAD * len(new)
        cold_bytes = sum(size(k_, i) for k_, i in items) + HTTP_OVERHEAD * len(items)
        for it in new:
            cache.add(it)
        rounds = 1 + (1 if (fetch_pages or pos_pages) else 0) + (1 if cpages else 0)
        rows.append({
            "terms": len(scored), "dict_blocks": len(need_dict),
            "dict_bytes": sum(dblock_comp[b] for b in need_dict),
            "post_pages": len(fetch_pages), "post_pages_oracle": len(fetch_pages_oracle),
            "post_bytes": sum(size("p", p) for p in fetch_pages),
            "pos_bytes": sum(size("x", p) for p in pos_pages),
            "long_blocks": n_long_blocks, "post_bytes_whole_lists": full_bytes,
            "post_bytes_two_phase": two_bytes, "two_phase_ne_terms": len(ne), "two_phase_round3_pages": len(two_round3), "theta": theta, "theta_lb": theta_lb,
            "chunk_pages": len(cpages), "chunk_bytes": sum(cpage_comp_bytes[p] for p in cpages),
            "requests": len(items), "cold_pages_bytes": cold_bytes,
            "first_query_bytes": static_bytes + entry_bytes + HTTP_OVERHEAD * 1 + cold_bytes,
            "new_bytes": new_bytes, "rounds_after_entry": rounds,
            "long_terms": len(long_terms), "fuzzy_words": len(fuzzy_words),
        })
    return rows


# ------------------------------------------------------------------ entry file

def entry_estimate(model, layout, n_chunk_pages, comp):
    m = dict(model.manifest)
    m.pop("files", None)
    sources = m.pop("sources", [])
    m["format_version"] = 2
    js = json.dumps(m, ensure_ascii=False, separators=(",", ":")).encode()
    # roots: dictionary block index; chunk store as (generation, pages) runs; columns
    roots = layout.block_index_bytes + 16 + 8 * 6
    raw = len(js) + roots
    sources_json = len(json.dumps(sources, ensure_ascii=False, separators=(",", ":")).encode())
    fake = js + os.urandom(layout.block_index_bytes // 2) + b"\0" * (layout.block_index_bytes // 2)
    return raw, len(comp(fake)), len(js), sources_json


# ------------------------------------------------------------------ wasm

def wasm_report(path):
    data = open(path, "rb").read()

    def leb(i):
        r = s = 0
        while True:
            b = data[i]
            i += 1
            r |= (b & 0x7F) << s
            s += 7
            if b < 0x80:
                return r, i

    i = 8
    sections = {}
    n_imported = 0
    bodies = []
    names = {}
    while i < len(data):
        sid = data[i]
        sz, j = leb(i + 1)
        end = j + sz
        if sid == 2:
            cnt, k = leb(j)
            for _ in range(cnt):
                ml, k = leb(k)
                k += ml
                fl, k = leb(k)
                k += fl
                kind = data[k]
                k += 1
                if kind == 0:
                    _, k = leb(k)
                    n_imported += 1
                elif kind == 1:
                    k += 1
                    fl2 = data[k]
                    k += 1
                    _, k = leb(k)
                    if fl2 & 1:
                        _, k = leb(k)
                elif kind == 2:
                    fl2 = data[k]
                    k += 1
                    _, k = leb(k)
                    if fl2 & 1:
                        _, k = leb(k)
                else:
                    k += 2
        if sid == 10:
            cnt, k = leb(j)
            for _ in range(cnt):
                bs, k2 = leb(k)
                bodies.append(k2 - k + bs)
                k = k2 + bs
        if sid == 0:
            nl, k = leb(j)
            nm = data[k:k + nl].decode()
            k += nl
            if nm == "name":
                while k < end:
                    sub = data[k]
                    ssz, k2 = leb(k + 1)
                    if sub == 1:
                        cnt, q = leb(k2)
                        for _ in range(cnt):
                            idx, q = leb(q)
                            ln, q = leb(q)
                            names[idx] = data[q:q + ln].decode("utf-8", "replace")
                            q += ln
                    k = k2 + ssz
            sections[f"custom:{nm}"] = sz
        else:
            sections[sid] = sz
        i = end
    by_crate = collections.Counter()
    for fi, size in enumerate(bodies):
        name = names.get(fi + n_imported, "?")
        by_crate[crate_of(name)] += size
    total = len(data)
    print(f"\n== wasm {path}: {total} bytes, gzip -9 {len(zlib.compress(data, 9))} bytes")
    print("sections:", {str(k): v for k, v in sections.items()})
    print(f"code section by crate (function bodies, {len(bodies)} functions; names from the name section):")
    for c, s in by_crate.most_common(25):
        print(f"  {c:32s} {s:8d} B  {100 * s / max(1, sum(bodies)):5.1f}% of code")
    return by_crate, sections


def crate_of(name):
    n = name
    for pre in ("_ZN", "_R"):
        if n.startswith(pre):
            break
    if n.startswith("_ZN"):
        k = 3
        ln = ""
        while k < len(n) and n[k].isdigit():
            ln += n[k]
            k += 1
        return n[k:k + int(ln)] if ln else n
    if "::" in n:
        head = n.split("::")[0].lstrip("<&*( ")
        return head.split(" ")[0]
    return n.split("(")[0][:30] if n else "?"


def scale_report(model, target, terms_low, terms_high):
    """Projects a bundle to `target` chunks by linear scaling of postings (every df x f) and
    chunk store, with the vocabulary between terms_low and terms_high (recombined sentences
    keep the source vocabulary; new terms come from CJK bigrams across sentence joins)."""
    f = target / model.n
    tps = [TermPostings(model, pl) for pl in model.lists]
    l0 = Layout(model, tps, 4096, 0, 16384, False)
    dict_per_term = sum(l0.dblock_bytes) / len(model.keys)
    print(f"\n== projection to {target:,} chunks (x{f:.1f} of {model.n:,} chunks, {len(model.keys):,} terms)")
    print(f"  measured here: dictionary without inline postings {dict_per_term:.1f} B/term; "
          f"postings v2 {sum(tp.bytes for tp in tps) / model.n:.0f} B/chunk, positions ~{sum(tp.pos_bytes for tp in tps) / model.n:.0f} B/chunk")
    lean, _ = chunk_pages(model, 4096, True)
    raw = sum(len(p) for p in lean)
    sample = lean[:: max(1, len(lean) // 200)]
    zd = zstandard.train_dictionary(16384, model.record_bytes[::3][:20000])
    zc = zstandard.ZstdCompressor(level=19, dict_data=zd)
    ratio = sum(len(p) for p in sample) / sum(len(zc.compress(p)) for p in sample)
    for terms in (terms_low, terms_high):
        dict_total = dict_per_term * terms
        blocks = dict_total / 4096
        index = blocks * 14
        print(f"  vocabulary {terms:,}: dictionary {dict_total / 1e6:.1f} MB = {blocks:,.0f} blocks of 4 kB; "
              f"one-level block index {index / 1e3:.0f} kB (two levels: root {blocks / 1100 * 14 / 1e3:.1f} kB in the entry "
              f"+ 16 kB index pages of ~1,100 blocks)")
    sizes = sorted(tp.bytes * f for tp in tps)
    print(f"  postings total ~{sum(sizes) / 1e6:.0f} MB; lists > 4 kB: {sum(1 for x in sizes if x > 4096):,}; "
          f"> 64 kB: {sum(1 for x in sizes if x > 65536):,}; largest ~{sizes[-1] / 1e6:.1f} MB "
          f"= {sizes[-1] / 400:,.0f} blocks of {BLOCK_DOCS} postings")
    pages = raw * f / 4096
    print(f"  chunk store: {raw * f / 1e6:.0f} MB raw lean records = {pages:,.0f} pages of 4 kB, "
          f"zstd-19+dict {ratio:.2f}x -> ~{4096 / ratio / 1e3:.1f} kB per page; a directory of 8-byte "
          f"content-hash names would be {pages * 8 / 1e6:.1f} MB")
    return {"f": f, "dict_per_term": dict_per_term, "chunk_ratio": ratio, "pages": pages}


def update_share(model, docs_per_page=8, dict_block=4096, inline=1024, post_page=16384):
    """Share of page bytes that `jikji update` rewrites when one source file is edited, under
    the proposed update rule: the file's old chunks are tombstoned (live-docs column), its new
    chunks appended (new chunk pages at the end), every dictionary block holding one of its
    terms rewritten (df, inline lists), and for each long list the page holding its last
    block rewritten (appended postings). Assumes the edit keeps the file's terms (worst case
    for a small edit: every term of the file is touched because df/live counts change)."""
    tps = [TermPostings(model, pl) for pl in model.lists]
    lay = Layout(model, tps, dict_block, inline, post_page, True)
    by_file = collections.defaultdict(list)
    for i, r in enumerate(model.records):
        by_file[r["source"]].append(i)
    doc_terms = collections.defaultdict(set)
    for ti, pl in enumerate(model.lists):
        for d, _ in pl:
            doc_terms[d].add(ti)
    rec_total = sum(len(b) for b in model.record_bytes)
    total = sum(lay.dblock_bytes) + sum(lay.page_bytes) + sum(lay.pos_page_bytes) + rec_total
    rows = []
    for f, docs in by_file.items():
        terms = set()
        for d in docs:
            terms |= doc_terms[d]
        dblocks = {lay.term_block[t] for t in terms}
        ppages, xpages = set(), set()
        for t in terms:
            if not lay.is_inline[t]:
                last = len(tps[t].blocks) - 1
                ppages.add(lay.block_page[(t, last)])
                xpages.add(lay.pos_page[(t, last)])
        new_chunks = sum(len(model.record_bytes[d]) for d in docs)
        changed = (sum(lay.dblock_bytes[b] for b in dblocks) + sum(lay.page_bytes[p] for p in ppages)
                   + sum(lay.pos_page_bytes[p] for p in xpages) + new_chunks + docs_per_page * 600)
        # overlay segment instead (LSM-style, as Lucene segments): a small dictionary of the
        # file's terms with df corrections and the new chunks' postings, plus the new chunk pages
        # and the live-docs column; the main segment's pages stay untouched.
        ov = 0
        for t in terms:
            k = model.keys[t]
            n_here = sum(1 for d, _ in model.lists[t] if d in set(docs)) if len(model.lists[t]) < 64 else \
                sum(1 for d in docs if t in doc_terms[d])
            ov += 2 + len(k) // 2 + 2 + 3 * n_here + n_here * 2
        overlay = ov + new_chunks + 2 * 600
        rows.append((changed / total, f, len(docs), len(dblocks), len(lay.dblock_bytes), len(ppages), overlay / total))
    rows.sort()
    print(f"\n== update: bytes rewritten when one file is edited ({len(rows)} files; total {kb(total)} of pages)")
    for q in (0.5, 0.9, 1.0):
        r = rows[min(len(rows) - 1, int(q * (len(rows) - 1)))]
        print(f"  {'p' + str(int(q * 100)):5s} {100 * r[0]:5.1f}% ({r[1]}: {r[2]} chunks, {r[3]}/{r[4]} dictionary blocks, "
              f"{r[5]} postings pages)")
    ov = sorted(r[6] for r in rows)
    print(f"  with an overlay segment instead: median {100 * pct(ov, .5):.1f}%, p90 {100 * pct(ov, .9):.1f}%, "
          f"max {100 * ov[-1]:.1f}% of the bundle's page bytes")
    return rows


def _lev_step(row, c, w):
    out = [row[0] + 1]
    for j in range(1, len(w) + 1):
        out.append(min(row[j] + 1, out[j - 1] + 1, row[j - 1] + (w[j - 1] != c)))
    return out


def block_reachable(w, d, lo, hi):
    """True if some string s with lo <= s < hi (hi None = no upper bound) is within
    Levenshtein distance d of w: the block-range test tantivy's sstable does with
    can_block_match_automaton, here on code points (UTF-8 keeps code point order)."""
    def rec(prefix_len, row, tlo, thi):
        if min(row) > d:
            return False
        # the prefix itself as a complete string
        ok_lo = not tlo or prefix_len >= len(lo)
        ok_hi = not thi or (hi is not None and prefix_len < len(hi))
        if ok_lo and ok_hi and row[-1] <= d:
            return True
        if not tlo and not thi:
            return True  # free: append the rest of w
        c_lo = lo[prefix_len] if tlo and prefix_len < len(lo) else None
        if thi and (hi is None or prefix_len >= len(hi)):
            return False
        c_hi = hi[prefix_len] if thi else None
        lo_o = ord(c_lo) if c_lo is not None else 0
        hi_o = ord(c_hi) if c_hi is not None else 0x10FFFF + 1
        # interior characters: free afterwards
        if hi_o - lo_o > 1:
            cands = [c for c in set(w) if lo_o < ord(c) < hi_o]
            generic = (hi_o - lo_o - 1) > len(cands)
            for c in cands:
                if min(_lev_step(row, c, w)) <= d:
                    return True
            if generic and min(_lev_step(row, "\x00", w)) <= d:
                return True
        if c_lo is not None and c_lo == c_hi:
            return rec(prefix_len + 1, _lev_step(row, c_lo, w), True, True)
        if c_lo is not None and rec(prefix_len + 1, _lev_step(row, c_lo, w), True, False):
            return True
        if c_hi is not None and rec(prefix_len + 1, _lev_step(row, c_hi, w), False, True):
            return True
        return False
    return rec(0, list(range(len(w) + 1)), True, hi is not None)


def fuzzy_reach(model, queries, dict_block=2048, inline=1024):
    tps = [TermPostings(model, pl) for pl in model.lists]
    lay = Layout(model, tps, dict_block, inline, 4096, True)
    firsts = [k.decode("utf-8", "replace") for k in lay.dblock_first]
    rows = []
    for q in queries:
        for w, s in words(q):
            if s == "alnum" and len(w) >= 5 and w.isalpha():
                stem = _stem.stemWord(w)
                if stem.encode() in model.key_index:
                    continue
                dist = 2 if len(w) >= 9 else 1
                reach = sum(1 for i in range(len(firsts))
                            if block_reachable(stem, dist, firsts[i], firsts[i + 1] if i + 1 < len(firsts) else None))
                rows.append((reach, stem, dist))
    comp = [len(zlib.compress(bytes(b), 9)) - 6 + x for b, x in zip(lay.dblock_data, lay.dblock_pos)]
    per_block = statistics.mean(comp)
    print(f"\n== typo expansion: dictionary blocks a Levenshtein automaton can reach ({dict_block} B blocks, "
          f"{len(firsts)} blocks, mean {per_block / 1000:.1f} kB deflated)")
    if rows:
        r = sorted(x[0] for x in rows)
        print(f"  {len(rows)} absent words of 5+ letters in {len(queries)} queries: blocks reached median {pct(r, .5)}, "
              f"p90 {pct(r, .9)}, max {r[-1]} (~{pct(r, .5) * per_block / 1000:.0f} kB at the median); "
              f"examples {sorted(rows)[-3:]}")
    alpha = [k for k in model.keys if k.isascii() and k.isalpha() and len(k) >= 3]
    fc = bytearray()
    prev = b""
    for k in alpha:
        c = common_prefix(prev, k)
        fc += bytes([c, len(k) - c]) + k[c:]
        prev = k
    print(f"  instead, a keys-only typo dictionary of the {len(alpha):,} alphabetic terms of 3+ letters: front-coded "
          f"{kb(len(fc))}, deflated {kb(len(zlib.compress(bytes(fc), 9)))} (fetched once, then cached)")
    return rows


def phrase_report(model, queries, page_bytes=4096):
    """Phrase scoring without re-analysing texts: how many chunks need it per query (the
    plain-BM25 top 200 that hold every exact term) and what a forward index costs: per chunk
    its term sequence as varint term ranks (rank by df, so frequent terms take 1 byte),
    packed in doc order into pages of page_bytes."""
    order = sorted(range(len(model.keys)), key=lambda t: -len(model.lists[t]))
    rank = [0] * len(order)
    for r, t in enumerate(order):
        rank[t] = r
    fwd = [0] * model.n
    for t, pl in enumerate(model.lists):
        vl = varint_len(rank[t])
        for d, tf in pl:
            fwd[d] += tf * vl
    page_of, cur, pages = [], 0, [0]
    for d in range(model.n):
        if cur and cur + fwd[d] > page_bytes:
            pages.append(0)
            cur = 0
        cur += fwd[d]
        pages[-1] += fwd[d]
        page_of.append(len(pages) - 1)
    cands_n, fpages_n, fbytes = [], [], []
    for q in queries:
        pq = prepare(model, q, {})
        seq = pq["sequence"]
        if len(seq) < 2:
            cands_n.append(0)
            fpages_n.append(0)
            fbytes.append(0)
            continue
        exact = [ti for ti, _, ex in pq["scored"] if ex]
        n_exact = len(set(seq))
        full = collections.defaultdict(float)
        hits = collections.Counter()
        for ti, wi, ex in pq["scored"]:
            for d, x in zip(*pq["contrib"][ti]):
                full[d] += x
                if ex:
                    hits[d] += 1
        top = sorted(full.items(), key=lambda x: (-x[1], x[0]))[:PHRASE_DEPTH]
        c = [d for d, _ in top if hits[d] >= n_exact and len(exact) == n_exact]
        cands_n.append(len(c))
        ps = {page_of[d] for d in c}
        fpages_n.append(len(ps))
        fbytes.append(sum(pages[p] for p in ps))
    print(f"\n== phrase scoring: forward index {sum(fwd) / 1e3:.0f} kB ({statistics.mean(fwd):.0f} B/chunk), "
          f"{len(pages)} pages of {page_bytes} B")
    print(f"  chunks needing the phrase check per query: median {pct(cands_n, .5)}, p90 {pct(cands_n, .9)}, "
          f"max {max(cands_n)}; queries with none: {sum(1 for x in cands_n if x == 0)} of {len(queries)}")
    print(f"  forward-index pages they need: median {pct(fpages_n, .5)}, p90 {pct(fpages_n, .9)}, max {max(fpages_n)}; "
          f"bytes (raw) median {kb(pct(fbytes, .5))}, p90 {kb(pct(fbytes, .9))}, max {kb(max(fbytes))}")
    return cands_n, fpages_n, fbytes


def long_list_report(model, queries):
    """Per query, the bytes of its long lists (> 1 kB) alone (one page file per list) and with
    lists of df/N > 1/8 stored densely (2 bits per chunk + 2 B per tf >= 3) plus a shared
    doc-length column (N x bits of the largest doc length)."""
    tps, base, dense = {}, [], []
    dl_col = model.n * max(model.doc_lens).bit_length() / 8
    for q in queries:
        pq = prepare(model, q, {})
        b = d = 0
        for ti, _, _ in pq["scored"]:
            if ti not in tps:
                tps[ti] = TermPostings(model, model.lists[ti])
            tp = tps[ti]
            if tp.bytes <= 1024:
                continue
            b += tp.bytes
            if tp.df > model.n / 8:
                d += model.n * 2 / 8 + 2 * sum(1 for _, tf in model.lists[ti] if tf >= 3)
            else:
                d += tp.bytes
        base.append(b)
        dense.append(d)
    print(f"\n== long lists per query: alone median {kb(pct(base, .5))} (p90 {kb(pct(base, .9))}); "
          f"dense for df/N > 1/8: median {kb(pct(dense, .5))} (p90 {kb(pct(dense, .9))}) + doc-length column {kb(dl_col)} once")


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bundle", nargs="?")
    ap.add_argument("queries", nargs="?")
    ap.add_argument("--name", default="bundle")
    ap.add_argument("--jikji", default="/work/main/target/release/jikji")
    ap.add_argument("--static-bytes", type=int, default=90_000 + 10_000,
                    help="engine wasm + JS transfer bytes assumed for the first query (90 kB wasm gzip, 10 kB JS gzip)")
    ap.add_argument("--json", help="write all numbers as JSON here")
    ap.add_argument("--codec", default="deflate-9", choices=["deflate-9", "zstd-19", "zstd-19+dict", "brotli-11"],
                    help="page compression for the query simulation (dictionary blocks, postings, chunk pages)")
    ap.add_argument("--wasm", help="report the code size of this wasm by crate and exit")
    ap.add_argument("--long-lists", action="store_true", help="only measure long-list bytes per query (alone / dense) and exit")
    ap.add_argument("--phrase", action="store_true", help="only measure phrase candidates and forward-index pages and exit")
    ap.add_argument("--fuzzy-reach", action="store_true", help="only count dictionary blocks typo expansion reaches and exit")
    ap.add_argument("--update-share", action="store_true", help="only measure the update rewrite share and exit")
    ap.add_argument("--scale", type=int, help="only project BUNDLE to this many chunks and exit")
    ap.add_argument("--terms-high", type=int, default=600_000, help="vocabulary upper bound for --scale")
    a = ap.parse_args()
    if a.wasm:
        wasm_report(a.wasm)
        return
    if a.long_lists and a.bundle and a.queries:
        long_list_report(Model(a.bundle), load_queries(a.queries))
        return
    if a.phrase and a.bundle and a.queries:
        phrase_report(Model(a.bundle), load_queries(a.queries))
        return
    if a.fuzzy_reach and a.bundle and a.queries:
        fuzzy_reach(Model(a.bundle), load_queries(a.queries))
        return
    if a.update_share and a.bundle:
        update_share(Model(a.bundle))
        return
    if a.scale and a.bundle:
        m = Model(a.bundle)
        scale_report(m, a.scale, len(m.keys), a.terms_high)
        return
    if not a.bundle or not a.queries:
        ap.error("BUNDLE and QUERIES are required (or --wasm)")
    out = {"name": a.name}
    model = Model(a.bundle)
    print(f"== {a.name}: {model.n} chunks, {len(model.keys)} terms, v1 files {model.files} (loaded in {model.load_s:.1f}s)")
    tps = [TermPostings(model, pl) for pl in model.lists]

    # ---- postings distribution
    sizes = sorted(tp.bytes for tp in tps)
    total_post = sum(sizes)
    pos_total = sum(tp.pos_bytes for tp in tps)
    over4 = [s for s in sizes if s > 4096]
    big = max(range(len(tps)), key=lambda i: tps[i].bytes)
    print(f"\n-- postings v2 (doc delta, tf, doc length varints; {BLOCK_DOCS}-posting blocks with 4-6 B headers)")
    print(f"total {kb(total_post)} (v1 postings.bin {kb(model.v1_postings_bytes)} incl. {kb(4 * model.n)} doc_len array);"
          f" positions (estimated) {kb(pos_total)}")
    print(f"lists: median {pct(sizes, .5)} B, p90 {pct(sizes, .9)} B, p99 {pct(sizes, .99)} B; "
          f"{len(over4)} lists > 4 kB holding {kb(sum(over4))} ({100 * sum(over4) / total_post:.0f}% of bytes); "
          f"largest {model.keys[big].decode(errors='replace')!r} df {tps[big].df} = {kb(tps[big].bytes)} "
          f"in {len(tps[big].blocks)} blocks")
    for lim in (64, 128, 256, 512, 1024, 2048):
        n_le = bisect.bisect_right(sizes, lim)
        print(f"  lists <= {lim:5d} B: {n_le:7d} ({100 * n_le / len(sizes):5.1f}% of terms, "
              f"{100 * sum(sizes[:n_le]) / total_post:5.1f}% of bytes)")
    out["postings"] = {"total": total_post, "positions_est": pos_total, "over4k": len(over4),
                       "over4k_bytes": sum(over4), "largest": tps[big].bytes, "largest_df": tps[big].df,
                       "median": pct(sizes, .5)}

    # ---- chunk store compression
    print("\n-- chunk store pages (records packed in doc order), compressed size / raw")
    zc = codecs()
    chunk_results = {}
    zdict = zstandard.train_dictionary(16384, [r for r in model.record_bytes[::3]][:20000])
    zcd = codecs(zdict)
    for lean in (False, True):
        for ps in (4096, 8192, 16384, 32768, 65536):
            pages, page_of = chunk_pages(model, ps, lean)
            raw = sum(len(p) for p in pages)
            row = {}
            use = zcd if ps <= 16384 else zc
            for name, comp in use.items():
                sample = pages[:: max(1, len(pages) // 300)]
                c = sum(len(comp(p)) for p in sample)
                r = sum(len(p) for p in sample)
                row[name] = r / c
            chunk_results[(lean, ps)] = (len(pages), raw, row)
            print(f"  {'lean' if lean else 'v1-json'} {ps // 1024:2d} kB: {len(pages):6d} pages, raw {kb(raw)}; " +
                  ", ".join(f"{k} {v:.2f}x" for k, v in row.items() if k != "raw"))
    print(f"  (zstd-19+dict: a 16 kB dictionary trained on the records, {len(zdict.as_bytes())} B, fetched once)")
    # decode speed (native C libraries, as a relative guide)
    pages16, _ = chunk_pages(model, 16384, True)
    sample = pages16[:200]
    print("  decode speed of 16 kB lean pages, native C library via Python (MB/s of output): " +
          ", ".join(f"{n} {decode_speed(sample, n, c):.0f}" for n, c in zc.items() if n != "raw"))
    out["chunk_store"] = {f"{'lean' if k[0] else 'json'}-{k[1]}": {"pages": v[0], "raw": v[1], "ratios": v[2]}
                          for k, v in chunk_results.items()}

    # ---- postings page / dictionary compressibility
    print("\n-- compressibility of postings pages (real v1 list bytes re-packed, 16 kB) and dictionary blocks")
    pdata = open(os.path.join(a.bundle, "postings.bin"), "rb").read()
    body = pdata[12 + 4 * model.n:]
    ppages = [body[i:i + 16384] for i in range(0, len(body), 16384)]
    sample = ppages[:: max(1, len(ppages) // 100)]
    prat = {n: sum(len(p) for p in sample) / sum(len(c(p)) for p in sample) for n, c in zc.items() if n != "raw"}
    print("  postings pages: " + ", ".join(f"{k} {v:.2f}x" for k, v in prat.items()))
    out["postings_ratios"] = prat

    # ---- dictionary blocks and layouts
    print("\n-- term dictionary blocks (front-coded keys, df, inline postings <= INLINE or a page reference)")
    latin_by_len = collections.defaultdict(list)
    for ti, k in enumerate(model.keys):
        try:
            s = k.decode()
        except UnicodeDecodeError:
            continue
        if s.isascii() and s.isalpha():
            latin_by_len[len(s)].append(ti)
    queries = load_queries(a.queries)
    print(f"\nqueries: {len(queries)} from {a.queries}; real top-10 from {a.jikji} search --json")
    tops = real_top10(model, queries, a.jikji)
    # dictionary block compressibility: reconstruct plausible block bytes from keys
    layouts = {}
    results = {}
    configs = []
    for db in (1024, 2048, 4096):
        for inline in (0, 256, 1024):
            for pp in (4096, 16384):
                configs.append((db, inline, pp, True, "exact200"))
    configs.append((2048, 1024, 4096, True, "top10"))
    configs.append((2048, 1024, 4096, False, "exact200"))
    chunk_ps = 4096
    cpages, cpage_of = chunk_pages(model, chunk_ps, True)
    zbest = zcd[a.codec]
    cpage_comp = [len(zbest(p)) for p in cpages]
    static = a.static_bytes + (len(zstandard.ZstdCompressor(level=19).compress(zdict.as_bytes())) if a.codec == "zstd-19+dict" else 0)
    pcodec = "zstd-19" if a.codec.startswith("zstd") else a.codec
    dcodec = zc[pcodec]
    z19 = zstandard.ZstdCompressor(level=19).compress
    for db, inline, pp, withpos, rule in configs:
        lay = Layout(model, tps, db, inline, pp, withpos)
        dcomp = [min(len(d), len(dcodec(bytes(d)))) + x for d, x in zip(lay.dblock_data, lay.dblock_pos)]
        lay.dcomp = dcomp
        raw_e, comp_e, js, sources_json = entry_estimate(model, lay, len(cpages), zstandard.ZstdCompressor(level=19).compress)
        lay.entry_comp = comp_e
        rows = simulate(model, lay, queries, tops, cpage_of, cpage_comp, dcomp, 1.0,  # bitpacked postings pages: counted uncompressed
                        comp_e, static, latin_by_len, rule)
        key = f"dict{db // 1024}k-inline{inline}-post{pp // 1024}k{'-pos' if withpos else '-nopos'}-{rule}"
        results[key] = rows
        layouts[key] = lay
        nb = [r["new_bytes"] for r in rows]
        fq = [r["first_query_bytes"] for r in rows]
        print(f"  {key:34s} dict {len(lay.dblock_bytes):5d} blocks (median {kb(pct(lay.dblock_bytes, .5))}, "
              f"zstd {sum(lay.dblock_bytes) / sum(dcomp):.2f}x, "
              f"max {kb(max(lay.dblock_bytes))}), block index {kb(lay.block_index_bytes)}, "
              f"postings pages {len(lay.page_bytes)}, entry ~{kb(comp_e)} | first query med {kb(pct(fq, .5))} "
              f"p90 {kb(pct(fq, .9))} max {kb(max(fq))} | new bytes/query mean {kb(statistics.mean(nb))} "
              f"median {kb(pct(nb, .5))} | rounds max {max(r['rounds_after_entry'] for r in rows)}")
    score = lambda k: statistics.mean(r["new_bytes"] for r in results[k]) + pct([r["first_query_bytes"] for r in results[k]], .5) / 10
    best = min((k for k in results if k.endswith("-pos-exact200")), key=score)
    for alt in [min((k for k in results if k.endswith("top10")), key=score)]:
        if alt != best:
            rr = results[alt]
            print(f"\n-- best with the top10 rule: {alt}: post pages mean {statistics.mean(r['post_pages'] for r in rr):.1f}, "
                  f"post bytes median {kb(pct([r['post_bytes'] for r in rr], .5))}, first query median "
                  f"{kb(pct([r['first_query_bytes'] for r in rr], .5))}, new bytes mean {kb(statistics.mean(r['new_bytes'] for r in rr))}")
    lay = layouts[best]
    rows = simulate(model, lay, queries, tops, cpage_of, cpage_comp, lay.dcomp, 1.0, lay.entry_comp, static,
                    latin_by_len, "exact200", two_phase=True)
    results[best] = rows
    print(f"\n-- chosen exact layout {best} (lowest mean new bytes + first-query median/10); chunk pages "
          f"{chunk_ps // 1024} kB lean, codec {a.codec} (static bytes {kb(static)} = wasm+JS assumption"
          f"{' + compressed zstd dictionary' if a.codec == 'zstd-19+dict' else ''})")
    for f_ in ("dict_blocks", "dict_bytes", "long_terms", "long_blocks", "post_bytes_whole_lists",
               "post_bytes_two_phase", "two_phase_ne_terms", "two_phase_round3_pages", "post_pages", "post_pages_oracle", "post_bytes", "pos_bytes",
               "chunk_pages", "chunk_bytes", "requests", "new_bytes", "first_query_bytes", "rounds_after_entry"):
        xs = [r[f_] for r in rows]
        print(f"  {f_:22s} mean {statistics.mean(xs):10.1f}  median {pct(xs, .5):8}  p90 {pct(xs, .9):8}  max {max(xs):8}")
    rounds = collections.Counter(r["rounds_after_entry"] for r in rows)
    print(f"  sequential rounds after the entry file: {dict(sorted(rounds.items()))}")
    print(f"  queries with a typo-expanded word (lower bound of its dictionary blocks counted): "
          f"{sum(1 for r in rows if r['fuzzy_words'])}")
    raw_e, comp_e, js, sources_json = entry_estimate(model, lay, len(cpages), zstandard.ZstdCompressor(level=19).compress)
    print(f"  entry file: manifest fields without files/sources {js} B JSON + roots {lay.block_index_bytes + 64} B "
          f"= {raw_e} B raw, ~{comp_e} B zstd; the v1 sources table ({sources_json} B JSON) moves to pages")
    out["chosen"] = best
    out["layouts"] = {k: {"dict_blocks": len(layouts[k].dblock_bytes), "block_index": layouts[k].block_index_bytes,
                          "dict_bytes": sum(layouts[k].dblock_bytes),
                          "mean_new": statistics.mean(r["new_bytes"] for r in v),
                          "median_new": pct([r["new_bytes"] for r in v], .5),
                          "first_median": pct([r["first_query_bytes"] for r in v], .5),
                          "first_max": max(r["first_query_bytes"] for r in v)} for k, v in results.items()}
    out["rows"] = rows
    out["entry"] = {"raw": raw_e, "zstd": comp_e, "sources_json": sources_json}
    # the dictionary block sizes at 4/8/16 kB without inline postings
    print("\n-- dictionary at block sizes (no inline postings, positions referenced):")
    for db in (2048, 4096, 8192, 16384):
        l0 = Layout(model, tps, db, 0, 16384, True)
        print(f"  {db // 1024:2d} kB: {len(l0.dblock_bytes)} blocks, total {kb(sum(l0.dblock_bytes))}, "
              f"block index {kb(l0.block_index_bytes)} ({kb(l0.block_index_bytes / max(1, len(l0.dblock_bytes)) * 1000)}/1000 blocks)")
    if a.json:
        json.dump(out, open(a.json, "w"), indent=1, default=str)


if __name__ == "__main__":
    main()

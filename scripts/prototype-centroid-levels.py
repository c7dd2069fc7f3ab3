#!/usr/bin/env python3
"""Prototype (issue 14, session 29): the first dense query at 1M chunks without the 1.93 MB of
centroids. How should a query rank the 11,759 lists (or skip them) so that everything the first
query downloads stays <= 300 kB, warm queries <= 200 kB, <= 3 rounds, recall@10 >= 0.90?

Usage: nice -n 5 scripts/prototype-centroid-levels.py BUNDLE QUERIES.json [--cache DIR] [--max N]

BUNDLE: a grouped binary-list IVF bundle written by `bench_ivf_1m --write` (session 28's
`/work/w/s28/ivf1m-g27`: 11,759 lists, 4-bit centred centroids, rows in groups of <= 32 by
position, `list_rows` 8); it is only read. QUERIES.json: its `DIR.queries.json` (300 query vectors,
their exact int8 top 10, and the native engine's per-query top 10 and bytes, used as a check).
--cache DIR (default /tmp/s29-centroid-levels): the decoded lists and rows (numpy, ~450 MB),
written on the first run (every list page and row page of the bundle read once, SHA-256 checked).

What it simulates (numpy; the engine's rules from engine-wasm/src/ivf.rs): lists ranked by
`q·ĉ_j` over the stored (dequantized) 4-bit centroids, ties by list number; the probed lists'
binary estimates (FORMAT.md, `projs·q·ĉ + α·(±1)·q`), sorted best first (ties by doc id); the
groups of the best estimates read whole, best first, until they hold rescore·10 = 240 rows; every
read row scored exactly (`scale · int8 row · q`, f32); top 10 by score (ties by doc id); the chunk
text pages of the top 10 (`c` pages, 5 chunks a page) as the last round. Page bytes are the
bundle's file sizes (48-byte header included) for existing pages; for pages the options would add
(coarse centroid pages, cell pages, compact codes) the body as the writer would store it, deflated
with zlib level 9 raw when that saves >= 1/16, + 48 B. A page cache is kept across the queries
(in order, as the worker does): "new kB" counts each page the first time a query needs it.

Options (each printed as one line a parameter set):
  a      today: flat 4-bit centred centroids (46 `g` pages + the `w` sample page, once).
  b      two-level: C coarse centroids (spherical k-means over the 11,759 stored centroids,
         seeded, 20 rounds) stored 4-bit centred in once pages with the sample; each coarse
         cell's children (the 4-bit codes the `g` pages hold today, 196 B a list) on its own
         page; a query ranks the coarse cells, fetches the P best cells' pages (round 1), ranks
         their children exactly as today, probes the best nprobe lists (round 2), groups
         (3), chunk pages (4).
  b1     as b, cells assigned with overlap (a list also placed in its 2nd-nearest cell when
         within `ov` of its nearest's score): fewer missed lists at the same P.
  c      compact first-stage codes of every centroid in the once pages, the lists ranked
         approximately, the M best fetched (over-fetch); each list page then carries its own
         4-bit centroid (+196 B raw) so estimates are today's. Codes: `pca<D>-int4` (PCA to D
         dims + int4, one scale each; PCA matrix int8 once), `pca<D>-bin` (signs of the PCA
         projection), `pq<M>x<bits>` (PQ of the centred centroids, M sub-quantizers); lists ranked by
         the normalised reconstruction `q·x̂/|x̂|`.
  d      group routing, 3 rounds: the coarse cells of b; a cell's page holds the 4-bit centred
         centroid of every row group of its lists (the mean of the group's int8 rows, no
         binary lists at all); a query ranks the coarse cells, fetches P cell pages (round
         1), ranks the groups in them by `q·c_g` and reads the best groups until they hold R
         rows (round 2), chunk pages (round 3). A group page then also carries its rows' doc ids
         (counted as 3 B a row).

Printed per option (one line; with SPLIT=1 a second `#` line: a cold query's kB p50 by page kind, its request
count p50 / p90 and estimated ms): recall@10 against the exact int8 top 10 (mean of 300); cover (share of the
exact top 10 in the probed lists, for d in the fetched cells' groups); once kB (pages every first dense query
needs whatever the query); first (once + query 1's own pages); cold50 / cold90 (once + a query's own pages with
an empty cache, p50 / p90 over the queries: everything the first dense query downloads, whichever query comes
first); w p50 / p90 (new kB of queries 2..N with the page cache kept); rnd (rounds of query 1 / warm p50; b: 3
when every cell page the query needs was cached); 3rnd (share of warm queries with <= 3 rounds); rq50 / rq90
(warm requests: index + chunk pages); ms0 / ms50 (estimated Chromium search ms, warm p50: 4.6 ms a request +
1.5 ms a round locally or 47 ms a round at +50 ms a response, fitted on session 28's browser runs: 24 requests,
3 rounds -> 117.8 / 258.6 ms measured; the engine's compute not included). After option a, a check line
compares its top 10 and bytes with the native engine's per query (QUERIES.json `native.runs`).

Environment (parameter sets; defaults in parentheses):
  ONLY     options to run, letters of "abcd" (abcd)
  A_NPROBE extra nprobe values for a, comma separated ("")
  C, P, NPROBE  grid for b and d when B / D are not given (64,128,256,512 / 2,4,8,16 / 16)
  B        b points C:P:nprobe, comma separated (overrides the grid)
  BITS     b with children coded against their coarse centroid: C:P:bits:nprobe
  CAP      b with balanced cells (k-means cells bisected until <= cap children): C:P:cap
  PACK     b with lists packed by position inside a cell, a pack one request: C:P:max_lists
  OV       b1 (overlap): C:P:margin
  TAKE     b reading groups until they hold `rows` rows instead of 240: C:P:rows
  ADAPT    b with the cells ranked by `q·μ_c + λ·r_c` (r_c the cell's largest child distance) and/or an
           adaptive cell count (at least pmin, then those within delta of the best, at most P):
           C:P:lambda:pmin:delta (pmin 0: P fixed)
  CODES    c: kind:lists (pca<D>-int4, pca<D>-bin, pq<M>x<bits>), comma separated
  R        d rows read (240,320) for the grid; D: d points C:P:rows
  SPLIT    1: print the by-kind line for a, B, CAP and D points
Runs in ~1-10 min at load 5-8 on 2 cores after the first (the read of every page: ~1 min).
"""
import importlib.util
import json
import os
import statistics
import struct
import sys
import time
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("rb", os.path.join(HERE, "read-bundle.py"))
rb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rb)
spec = importlib.util.spec_from_file_location("prp", os.path.join(HERE, "prototype-row-pages.py"))
prp = importlib.util.module_from_spec(spec)
spec.loader.exec_module(prp)

T0 = time.time()


def load():
    return open("/proc/loadavg").read().split()[:3]


def log(*a):
    print(f"  [{time.time() - T0:6.0f} s, load {' '.join(load())}]", *a, file=sys.stderr, flush=True)


def stored(body):
    """Bytes of a page with this raw body as the writer stores it (48-byte header, deflated when
    that saves >= 1/16)."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    d = c.compress(body) + c.flush()
    return 48 + (len(d) if len(d) <= len(body) - len(body) // 16 else len(body))


def read_all(folder, ivf, dim, n, out):
    """Every list page and row group page of the bundle, decoded into flat arrays (rows in list
    order, list after list), saved in `out`."""
    nl, s, gen = ivf["nlist"], ivf["list_rows"], ivf["lists"]["gen"]
    assert ivf.get("row_groups") is True and not ivf.get("list_gens")
    nb = (dim + 7) // 8
    off = np.zeros(nl + 1, np.int64)
    lsize = np.zeros(nl, np.int64)
    lhead = np.zeros((nl, 3), np.float32)
    docs, groups, a8, b8, signs, rows, scales = [], [], [], [], [], [], []
    gsize_pages = {}
    for j in range(nl):
        name = f"j-{gen}-{j}"
        lsize[j] = os.path.getsize(f"{folder}/p/{name}")
        body = rb.read_page(folder, name)
        r = rb.Reader(name, body)
        count = r.varint()
        first = r.varint()
        assert first == 0
        d, prev = [], None
        for _ in range(count):
            x = r.varint()
            x = x if prev is None else x + prev
            d.append(x)
            prev = x
        g = np.frombuffer(r.take(count), np.uint8)
        lhead[j] = struct.unpack("<3f", r.take(12))
        a8.append(np.frombuffer(r.take(count), np.uint8))
        b8.append(np.frombuffer(r.take(count), np.uint8))
        signs.append(np.frombuffer(r.take(count * nb), np.uint8).reshape(count, nb))
        assert r.pos == len(body)
        d = np.asarray(d, np.int64)
        docs.append(d)
        groups.append(g)
        rr = np.zeros((count, dim), np.int8)
        sc = np.zeros(count, np.float32)
        for k in range(int(g.max()) + 1):
            pname = f"i-{gen}-{j * s + k}"
            gsize_pages[j * 256 + k] = os.path.getsize(f"{folder}/p/{pname}")
            pb = rb.read_page(folder, pname)
            assert pb[:4] == b"JKVE"
            pdim, cnt = struct.unpack_from("<II", pb, 8)
            m = np.nonzero(g == k)[0]
            assert pdim == dim and cnt == len(m)
            sc[m] = np.frombuffer(pb, np.float32, cnt, 16)
            rr[m] = np.frombuffer(pb, np.int8, cnt * dim, 16 + 4 * cnt).reshape(cnt, dim)
        rows.append(rr)
        scales.append(sc)
        off[j + 1] = off[j] + count
        if j % 1000 == 999:
            log(f"read {j + 1} lists")
    keys = np.asarray(sorted(gsize_pages), np.int64)
    np.savez(f"{out}/lists.npz", off=off, lsize=lsize, lhead=lhead, docs=np.concatenate(docs),
             groups=np.concatenate(groups), a8=np.concatenate(a8), b8=np.concatenate(b8),
             signs=np.concatenate(signs), scales=np.concatenate(scales),
             gkeys=keys, gsizes=np.asarray([gsize_pages[int(k)] for k in keys], np.int64))
    np.save(f"{out}/rows.npy", np.concatenate(rows))


class Index:
    def __init__(self, folder, qfile, cache, mx):
        self.entry = json.load(open(f"{folder}/jikji.json"))
        self.ivf, self.dim = self.entry["pages"]["ivf"], self.entry["pages"]["dim"]
        n = self.entry["counts"]["chunks"]
        os.makedirs(cache, exist_ok=True)
        if not os.path.exists(f"{cache}/rows.npy"):
            log("reading every list and row page once (cache: %s)" % cache)
            read_all(folder, self.ivf, self.dim, n, cache)
        z = np.load(f"{cache}/lists.npz")
        for k in z.files:
            setattr(self, k, z[k])
        self.rows = np.load(f"{cache}/rows.npy", mmap_mode="r")
        self.nl = self.ivf["nlist"]
        self.list_of = np.repeat(np.arange(self.nl), np.diff(self.off))
        self.gsize = dict(zip(self.gkeys.tolist(), self.gsizes.tolist()))
        # per-row binary decoding, as the engine (FORMAT.md)
        amax, pmin, pmax = self.lhead[:, 0], self.lhead[:, 1], self.lhead[:, 2]
        L = self.list_of
        self.alphas = (amax[L] * self.a8.astype(np.float32) / np.float32(255)).astype(np.float32)
        self.projs = (pmin[L] + (pmax[L] - pmin[L]) * self.b8.astype(np.float32) / np.float32(255)).astype(np.float32)
        bits = np.unpackbits(self.signs, axis=1, bitorder="little")[:, : self.dim]
        self.pm = (bits.astype(np.int8) * 2 - 1)
        self.cent = prp.load_centroids(folder, self.ivf, self.dim)
        # g pages as stored, and the w page
        cg = self.ivf["centroids"]
        self.g_bytes = sum(os.path.getsize(f"{folder}/p/g-{cg['gen']}-{p}") for p in range(cg["pages"]))
        self.w_bytes = os.path.getsize(f"{folder}/p/w-{self.ivf['sample']['gen']}-0")
        ch = self.entry["pages"]["chunks"]
        self.chunk_per, self.chunk_group, self.chunk_gens = ch["per_page"], ch["group"], ch["gens"]
        self.folder = folder
        self.csize = {}
        Q = json.load(open(qfile))
        self.queries = np.asarray(Q["queries"][:mx], np.float32)
        self.exact = [set(t) for t in Q["exact"][:mx]]
        self.native = Q["native"]["runs"][:mx]
        self.native_once = Q["native"]["once_bytes"]
        # group centroids (mean of each group's dequantized rows), for option d
        self.gkey_row = self.list_of * 256 + self.groups.astype(np.int64)

    def chunk_page(self, d):
        p = int(d) // self.chunk_per
        name = f"c-{self.chunk_gens[p // self.chunk_group]}-{p}"
        if name not in self.csize:
            self.csize[name] = os.path.getsize(f"{self.folder}/p/{name}")
        return name, self.csize[name]

    def list_est(self, j, q, qc):
        a, b = self.off[j], self.off[j + 1]
        pmq = self.pm[a:b] @ q
        return self.projs[a:b] * np.float32(qc) + self.alphas[a:b] * pmq

    def exact_scores(self, idx, q):
        return self.scales[idx] * (self.rows[idx].astype(np.float32) @ q)


def top10(docs, scores):
    o = np.lexsort((docs, -scores))[:10]
    return docs[o]


def engine(ix, q, probed, qcs, take=240):
    """The engine's grouped rescoring over the probed lists (ordered; qcs their q·ĉ).
    Returns (top 10 docs, group keys read, coverage docs)."""
    idx = np.concatenate([np.arange(ix.off[j], ix.off[j + 1]) for j in probed])
    est = np.concatenate([ix.list_est(j, q, qc) for j, qc in zip(probed, qcs)])
    docs = ix.docs[idx]
    o = np.lexsort((docs, -est))
    gk = ix.gkey_row[idx][o]
    # groups best first until they hold take rows
    _, first = np.unique(gk, return_index=True)
    order = gk[np.sort(first)]
    chosen, rows = [], 0
    gcount = {}
    for k in order.tolist():
        chosen.append(k)
        rows += ix.gcount[k]
        if rows >= take:
            break
    sel = idx[np.isin(ix.gkey_row[idx], chosen)]
    sc = ix.exact_scores(sel, q)
    return top10(ix.docs[sel], sc), chosen, ix.docs[idx]


def spherical_kmeans(x, c, rounds=20, seed=29):
    rng = np.random.default_rng(seed)
    cen = x[rng.choice(len(x), c, replace=False)].copy()
    for _ in range(rounds):
        a = np.argmax(x @ cen.T, axis=1)
        for k in range(c):
            m = a == k
            if m.any():
                v = x[m].sum(0)
                cen[k] = v / (np.linalg.norm(v) + 1e-30)
            else:
                cen[k] = x[rng.integers(len(x))]
    a = np.argmax(x @ cen.T, axis=1)
    return cen, a


def int4_centred(x):
    """4-bit centred codes as the `g` pages store them: (dequantized rows, raw body bytes)."""
    mu = x.mean(0)
    ms = np.abs(mu).max() / 127 if np.abs(mu).max() > 0 else 1.0
    mq = np.clip(np.round(mu / ms), -127, 127).astype(np.int8)
    mh = (ms * mq.astype(np.float32)).astype(np.float32)
    r = x - mh
    s = np.abs(r).max(1) / 7
    s[s == 0] = 1
    u = np.clip(np.round(r / s[:, None]), -7, 7).astype(np.int16) + 8
    deq = (mh + s[:, None].astype(np.float32) * (u - 8).astype(np.float32)).astype(np.float32)
    return deq, mh, s.astype(np.float32), u.astype(np.uint8), struct.pack("<f", ms) + mq.tobytes()


def nib_body(s, u):
    """Per row: f32 scale + nibbles (low nibble first), as the `g` pages."""
    d = u.shape[1]
    if d % 2:
        u = np.concatenate([u, np.full((len(u), 1), 8, np.uint8)], 1)
    packed = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8)
    out = bytearray()
    for k in range(len(s)):
        out += struct.pack("<f", s[k]) + packed[k].tobytes()
    return bytes(out)


def pctl(xs, f):
    xs = sorted(xs)
    return xs[round((len(xs) - 1) * f)]


def est_ms(req, rounds, lat):
    return 4.6 * req + (47.0 if lat else 1.5) * rounds


class Run:
    """One option over the queries in order, with a page cache."""

    def __init__(self, ix, label, once_bytes):
        self.ix, self.label, self.once = ix, label, once_bytes
        self.cache = set()
        self.rec, self.cov, self.kb, self.req, self.rounds, self.cold = [], [], [], [], [], []
        self.tops = []
        self.parts = []
        self.cold_req = []

    def split(self):
        """Cold kB p50 by page kind (what a first query fetches besides the once pages)."""
        kinds = sorted({k for p in self.parts for k in p})
        names = {"j": "lists", "i": "row groups", "c": "chunk text", "cell": "cells", "dcell": "cells", "pack": "list packs"}
        return "#   cold p50 by kind: " + ", ".join(f"{names.get(k, k)} {pctl([p.get(k, 0) for p in self.parts], .5):.1f}" for k in kinds) + (
            f"; cold requests p50 / p90 {pctl(self.cold_req, .5)} / {pctl(self.cold_req, .9)} (+ the once pages), est. cold ms "
            f"{est_ms(pctl(self.cold_req, .5), self.rounds[0], 0):.0f} / {est_ms(pctl(self.cold_req, .5), self.rounds[0], 1):.0f}")

    def query(self, qi, pages, top, covered, rounds):
        """pages: [(name, bytes)] this query needs (all rounds)."""
        pages = list(dict(pages).items())
        self.cold.append(self.once / 1000 + sum(b for _, b in pages) / 1000)
        parts = {}
        for n, b in pages:
            k = n.split("-")[0]
            parts[k] = parts.get(k, 0) + b / 1000
        self.parts.append(parts)
        self.cold_req.append(len(pages))
        if callable(rounds):
            rounds = rounds(self.cache)
        new = [(n, b) for n, b in pages if n not in self.cache]
        for n, _ in new:
            self.cache.add(n)
        T = self.ix.exact[qi]
        self.rec.append(sum(1 for d in top.tolist() if d in T) / 10)
        self.cov.append(sum(1 for d in set(covered.tolist()) if d in T) / 10)
        self.kb.append(sum(b for _, b in new) / 1000)
        self.req.append(len(new))
        self.rounds.append(rounds)
        self.tops.append(top.tolist())

    def row(self):
        first = self.once / 1000 + self.kb[0]
        w = self.kb[1:]
        rq = self.req[1:]
        r = pctl(self.rounds[1:], .5)
        r3 = sum(1 for x in self.rounds[1:] if x <= 3) / len(w)
        return (f"{self.label:<44} {statistics.mean(self.rec):>7.4f} {statistics.mean(self.cov):>6.3f} "
                f"{self.once / 1000:>7.1f} {first:>7.1f} {pctl(self.cold, .5):>7.1f} {pctl(self.cold, .9):>7.1f} "
                f"{pctl(w, .5):>6.1f} {pctl(w, .9):>6.1f} {self.rounds[0]:>2}/{r:<2} {r3:>4.2f} "
                f"{pctl(rq, .5):>4} {pctl(rq, .9):>4} {est_ms(pctl(rq, .5), r, 0):>6.0f} {est_ms(pctl(rq, .5), r, 1):>6.0f}")


HEAD = (f"{'option':<44} {'recall':>7} {'cover':>6} {'once':>7} {'first':>7} {'cold50':>7} {'cold90':>7} {'w p50':>6} {'w p90':>6} {'rnd':>5} {'3rnd':>4} "
        f"{'rq50':>4} {'rq90':>4} {'ms0':>6} {'ms50':>6}")


def chunk_pages(ix, top):
    return [ix.chunk_page(d) for d in top.tolist()]


def list_pages(ix, probed, extra=0):
    gen = ix.ivf["lists"]["gen"]
    return [(f"j-{gen}-{j}", int(ix.lsize[j]) + extra) for j in probed]


def group_pages(ix, chosen):
    gen, s = ix.ivf["lists"]["gen"], ix.ivf["list_rows"]
    return [(f"i-{gen}-{(k // 256) * s + k % 256}", ix.gsize[k]) for k in chosen]


def option_a(ix, nprobe=16):
    run = Run(ix, f"a flat int4 nprobe {nprobe}", ix.g_bytes + ix.w_bytes)
    for qi, q in enumerate(ix.queries):
        sc = ix.cent @ q
        order = np.lexsort((np.arange(ix.nl), -sc))[:nprobe]
        top, chosen, cov = engine(ix, q, order, sc[order])
        run.query(qi, list_pages(ix, order) + group_pages(ix, chosen) + chunk_pages(ix, top), top, cov, 3)
    return run


class Cells:
    """C coarse cells over the stored centroids (b, d)."""

    def __init__(self, ix, C, overlap=None, bits=None, cap=None):
        x = ix.cent / np.linalg.norm(ix.cent, axis=1, keepdims=True)
        cen, a = spherical_kmeans(x, C)
        if cap:
            # balanced: a cell of more than `cap` children bisected (PDDP, as cap_lists) until
            # every part holds <= cap; each part's coarse centroid its children's normalised mean
            cents, na = [], np.zeros_like(a)
            for k in range(C):
                m = np.nonzero(a == k)[0]
                for part in (prp.pddp(x[m], cap) if len(m) else []):
                    na[m[part]] = len(cents)
                    v = x[m[part]].sum(0)
                    cents.append(v / np.linalg.norm(v))
            cen, a, C = np.asarray(cents, np.float32), na, len(cents)
        self.C, self.bits, self.cap = C, bits, cap
        deq, mh, s, u, head = int4_centred(cen)
        self.coarse = deq
        self.once = stored(head + nib_body(s, u)) + ix.w_bytes
        members = [list(np.nonzero(a == k)[0]) for k in range(C)]
        # the spread of each cell: the largest distance of a child to the coarse centroid (for
        # the LAMBDA cell ranking `q·μ_c + λ·r_c`); one f32 a cell more in the once page
        self.radius = np.asarray([np.linalg.norm(ix.cent[m] - deq[k], axis=1).max() if len(m) else 0
                                  for k, m in enumerate(members)], np.float32)
        self.lam, self.adapt = 0.0, None
        if overlap is not None:
            sims = x @ cen.T
            o = np.argsort(-sims, axis=1)
            for j in range(ix.nl):
                b1, b2 = o[j, 0], o[j, 1]
                if sims[j, b1] - sims[j, b2] <= overlap:
                    members[b2].append(j)
        self.members = [np.asarray(sorted(m), np.int64) for m in members]
        self.dup = sum(len(m) for m in self.members) / ix.nl
        # cell page = the children's 4-bit codes as in the g pages today (their ids implied by
        # numbering lists cell after cell; overlap copies carry a 2-byte list id)
        cg = ix.ivf["centroids"]
        self.page_bytes = []
        codes = self._codes(ix)
        self.fine = ix.cent
        if bits is not None:
            # children coded as residuals to their (stored) coarse centroid: B-bit symmetric levels,
            # one f32 scale a child; ranking uses these, the lists' estimates keep the bundle's ĉ_j
            hi = (1 << (bits - 1)) - 1
            self.fine = np.zeros_like(ix.cent)
            codes = {}
            for k, m in enumerate(self.members):
                r = ix.cent[m] - self.coarse[k]
                sc = np.abs(r).max(1) / hi
                u = np.clip(np.round(r / sc[:, None]), -hi, hi)
                self.fine[m] = self.coarse[k] + u * sc[:, None]
                packed = np.packbits(np.unpackbits((u + hi + 1).astype(np.uint8)[:, :, None], axis=2)[:, :, 8 - bits:].reshape(len(m), -1), axis=1)
                for i, j in enumerate(m):
                    codes[j] = struct.pack("<f", sc[i]) + packed[i].tobytes()
        for k, m in enumerate(self.members):
            body = b"".join(codes[j] for j in m) + (b"\0\0" * (len(m)) if overlap is not None else b"")
            self.page_bytes.append(stored(body))

    @staticmethod
    def _codes(ix):
        # the g pages' own per-centroid records (scale + nibbles), read back from the bundle
        if getattr(ix, "_gcodes", None) is None:
            cg = ix.ivf["centroids"]
            hb = (ix.dim + 1) // 2
            out = []
            for p in range(cg["pages"]):
                body = rb.read_page(ix.folder, f"g-{cg['gen']}-{p}")
                at = 4 + ix.dim if p == 0 else 0
                for _ in range(min(256, ix.nl - 256 * p)):
                    out.append(body[at: at + 4 + hb])
                    at += 4 + hb
            ix._gcodes = out
        return ix._gcodes

    def top_cells(self, q, P):
        sc = self.coarse @ q + np.float32(self.lam) * self.radius
        o = np.lexsort((np.arange(self.C), -sc))
        if self.adapt:
            # adaptive: at least pmin cells, then cells within delta of the best, at most P
            pmin, delta = self.adapt
            k = pmin
            while k < P and sc[o[k]] >= sc[o[0]] - delta:
                k += 1
            return o[:k]
        return o[:P]


def pack_lists(ix, cells, k):
    """Lists packed by position inside their cell: PDDP bisection of the cell's centroids until
    a part holds <= k lists (list pages of one pack = one request)."""
    pack = np.full(ix.nl, -1, np.int64)
    packs = []
    for m in cells.members:
        for part in prp.pddp(ix.cent[m], k):
            for j in m[part]:
                pack[j] = len(packs)
            packs.append([int(j) for j in m[part]])
    return pack, packs


def option_b(ix, cells, P, nprobe=16, label="b", packk=None, take=240):
    pack = packs = None
    if take != 240:
        label += f" rows {take}"
    if packk:
        pack, packs = pack_lists(ix, cells, packk)
        label += f" packs<={packk}"
    if cells.bits:
        label += f" res{cells.bits}b"
    if cells.cap:
        label += f" cap {cells.cap}"
    if cells.lam:
        label += f" lam {cells.lam}"
    if cells.adapt:
        label += f" adapt {cells.adapt[0]}..{P} d {cells.adapt[1]}"
    run = Run(ix, f"{label} two-level C {cells.C} P {P} nprobe {nprobe}" + (f" dup {cells.dup:.2f}" if cells.dup > 1 else ""), cells.once)
    for qi, q in enumerate(ix.queries):
        cs = cells.top_cells(q, P)
        cand = np.unique(np.concatenate([cells.members[c] for c in cs]))
        sc = cells.fine[cand] @ q
        o = np.lexsort((cand, -sc))[:nprobe]
        probed = cand[o]
        top, chosen, cov = engine(ix, q, probed, ix.cent[probed] @ q, take=take)
        pages = [(f"cell-{c}", cells.page_bytes[c]) for c in cs]
        rounds = (lambda cache, cs=cs: 3 if all(f"cell-{c}" in cache for c in cs) else 4)
        if pack is not None:
            # the packs holding the probed lists, fetched whole, every list in them scanned
            pk = sorted({int(pack[j]) for j in probed.tolist()})
            extra = np.asarray([j for k in pk for j in packs[k] if j not in set(probed.tolist())], np.int64)
            if len(extra):
                probed = np.concatenate([probed, extra])
            qcs = ix.cent[probed] @ q
            top, chosen, cov = engine(ix, q, probed, qcs)
            lp = [(f"pack-{k}", sum(int(ix.lsize[j]) for j in packs[k])) for k in pk]
        else:
            lp = list_pages(ix, probed)
        run.query(qi, pages + lp + group_pages(ix, chosen) + chunk_pages(ix, top), top, cov, rounds)
    return run


def pca(x, D):
    mu = x.mean(0)
    u, s, vt = np.linalg.svd(x - mu, full_matrices=False)
    return mu, vt[:D]


def compact_codes(ix, kind):
    """(approximate centroid scorer q -> scores, once bytes of the codes)."""
    x = ix.cent
    dim = ix.dim
    if kind.startswith("pca"):
        D = int(kind[3:].split("-")[0])
        mu, V = pca(x, D)
        vs = np.abs(V).max(1) / 127
        Vq = (np.clip(np.round(V / vs[:, None]), -127, 127) * vs[:, None]).astype(np.float32)
        mat = D * (dim + 4) + 4 + dim  # int8 matrix rows with scales + int8 mean
        y = (x - mu) @ Vq.T
        if kind.endswith("int4"):
            s = np.abs(y).max(1) / 7
            uq = np.clip(np.round(y / s[:, None]), -7, 7)
            yq = (uq * s[:, None]).astype(np.float32)
            body = nib_body(s.astype(np.float32), (uq + 8).astype(np.uint8))
        else:  # signs, scaled by the mean |y| of each centroid (1 byte)
            m = np.abs(y).mean(1)
            yq = (np.sign(y) * m[:, None]).astype(np.float32)
            body = np.packbits(y > 0, axis=1).tobytes() + np.round(m / m.max() * 255).astype(np.uint8).tobytes()
        once = stored(body) + mat
        rec = mu + yq @ Vq
        nr = np.linalg.norm(rec, axis=1)
        return (lambda q: (yq @ (Vq @ q) + float(mu @ q)) / nr), once
    if kind.startswith("pq"):
        M = int(kind[2:].split("x")[0])
        bits = int(kind.split("x")[1])
        ks = 1 << bits
        mu = x.mean(0)
        r = x - mu
        ds = dim // M
        rng = np.random.default_rng(29)
        codes = np.zeros((len(x), M), np.int64)
        books = np.zeros((M, ks, ds), np.float32)
        for m in range(M):
            sub = r[:, m * ds:(m + 1) * ds]
            cb = sub[rng.choice(len(sub), ks, replace=False)].copy()
            for _ in range(20):
                d = ((sub[:, None, :] - cb[None]) ** 2).sum(2) if ks <= 16 else (-2 * sub @ cb.T + (cb ** 2).sum(1))
                a = np.argmin(d, 1)
                for k in range(ks):
                    if (a == k).any():
                        cb[k] = sub[a == k].mean(0)
            d = -2 * sub @ cb.T + (cb ** 2).sum(1)
            codes[:, m] = np.argmin(d, 1)
            books[m] = cb
        once = stored(np.packbits(np.unpackbits(codes.astype(np.uint8)[:, :, None], axis=2)[:, :, 8 - bits:], axis=None).tobytes()) \
            + M * ks * ds + 4 * M + 4 + dim
        rec = np.concatenate([books[m][codes[:, m]] for m in range(M)], 1) + mu
        rec /= np.linalg.norm(rec, axis=1, keepdims=True)
        return (lambda q: rec @ q), once
    raise ValueError(kind)


def option_c(ix, kind, M):
    score, once = compact_codes(ix, kind)
    run = Run(ix, f"c {kind} fetch {M} lists", once + ix.w_bytes)
    for qi, q in enumerate(ix.queries):
        sc = score(q)
        probed = np.lexsort((np.arange(ix.nl), -sc))[:M]
        qc = ix.cent[probed] @ q  # exact 4-bit centroids carried by the list pages
        o = np.lexsort((probed, -qc))
        probed, qc = probed[o], qc[o]
        top, chosen, cov = engine(ix, q, probed, qc)
        run.query(qi, list_pages(ix, probed, extra=196) + group_pages(ix, chosen) + chunk_pages(ix, top), top, cov, 3)
    return run


def group_centroids(ix):
    if getattr(ix, "_gc", None) is None:
        keys, inv = np.unique(ix.gkey_row, return_inverse=True)
        order = np.argsort(inv, kind="stable")
        cnt = np.bincount(inv)
        starts = np.concatenate([[0], np.cumsum(cnt)])
        gc = np.zeros((len(keys), ix.dim), np.float32)
        B = 4096
        for a in range(0, len(keys), B):
            b = min(len(keys), a + B)
            idx = order[starts[a]:starts[b]]
            x = ix.rows[np.sort(idx)].astype(np.float32)
            # rows back in group order
            x = x[np.argsort(np.argsort(idx))] * ix.scales[idx, None]
            gc[a:b] = np.add.reduceat(x, starts[a:b] - starts[a], axis=0) / cnt[a:b, None]
        deq, mh, s, u, head = int4_centred(gc)
        ix._gc = (keys, deq, s, u, cnt, inv)
    return ix._gc


def option_d(ix, cells, P, R, label="d"):
    keys, deq, s, u, cnt, inv = group_centroids(ix)
    glist = keys // 256
    # group -> cells of its list
    cell_groups = []
    gi_of_list = [[] for _ in range(ix.nl)]
    for g, j in enumerate(glist.tolist()):
        gi_of_list[j].append(g)
    page_bytes = []
    for m in cells.members:
        gs = np.asarray([g for j in m for g in gi_of_list[j]], np.int64)
        cell_groups.append(gs)
        # per group: scale + nibbles + its size (1 B) + list's doc ids are on the group page
        page_bytes.append(stored(nib_body(s[gs], u[gs]) + cnt[gs].astype(np.uint8).tobytes()))
    run = Run(ix, f"{label} groups in cells C {cells.C} P {P} rows {R}" + (f" dup {cells.dup:.2f}" if cells.dup > 1 else ""), cells.once)
    # rows of each group (row indices), for exact scores
    order = np.argsort(inv, kind="stable")
    starts = np.concatenate([[0], np.cumsum(cnt)])
    for qi, q in enumerate(ix.queries):
        cs = cells.top_cells(q, P)
        gs = np.unique(np.concatenate([cell_groups[c] for c in cs]))
        sc = deq[gs] @ q
        o = np.lexsort((gs, -sc))
        chosen, rows = [], 0
        for g in gs[o].tolist():
            chosen.append(g)
            rows += cnt[g]
            if rows >= R:
                break
        idx = np.concatenate([order[starts[g]:starts[g + 1]] for g in chosen])
        top = top10(ix.docs[idx], ix.exact_scores(idx, q))
        cov_idx = np.concatenate([order[starts[g]:starts[g + 1]] for g in gs])
        pages = [(f"dcell-{c}", page_bytes[c]) for c in cs]
        # the group page also carries its rows' doc ids (varint deltas ~3 B a row) as no list does
        gp = [(f"i-{int(keys[g])}", ix.gsize[int(keys[g])] + 3 * int(cnt[g])) for g in chosen]
        run.query(qi, pages + gp + chunk_pages(ix, top), top, ix.docs[cov_idx], 3)
    return run


def main():
    args = sys.argv[1:]
    mx, cache = 300, "/tmp/s29-centroid-levels"
    if "--max" in args:
        i = args.index("--max")
        mx = int(args[i + 1])
        del args[i:i + 2]
    if "--cache" in args:
        i = args.index("--cache")
        cache = args[i + 1]
        del args[i:i + 2]
    folder, qfile = args
    only = os.environ.get("ONLY", "abcd")
    ix = Index(folder, qfile, cache, mx)
    ix.gcount = dict(zip(*np.unique(ix.gkey_row, return_counts=True)))
    ix.gcount = {int(k): int(v) for k, v in ix.gcount.items()}
    print(f"# prototype-centroid-levels: {folder}, {len(ix.queries)} queries, {ix.nl} lists, "
          f"{len(ix.gcount)} row groups; g pages {ix.g_bytes / 1000:.1f} kB, w page {ix.w_bytes / 1000:.1f} kB; load {' '.join(load())}")
    print("# columns: recall@10 vs exact int8; cover = exact top 10 in the probed lists (d: in the fetched cells' groups); once kB;")
    print("#   first = once + the first query's pages (kB); w p50/p90 = warm new kB (queries 2..N, cache kept); rnd = rounds;")
    print("#   rq50/rq90 = warm requests (index + chunk pages); ms0 / ms50 = estimated Chromium search ms at 0 / +50 ms a response")
    print(HEAD)
    if "a" in only:
        r = option_a(ix)
        same = sum(1 for t, n in zip(r.tops, ix.native) if t == n["top"])
        nb = [n["bytes"] / 1000 for n in ix.native]
        print(r.row())
        print(r.split())
        print(f"#   check against the native engine: top 10 equal on {same}/{len(r.tops)}; new kB p50 native "
              f"{pctl(nb[1:], .5):.2f} / here {pctl(r.kb[1:], .5):.2f}; first query native {ix.native_once / 1000 + nb[0]:.1f} kB "
              f"(once {ix.native_once / 1000:.1f}) / here {r.once / 1000 + r.kb[0]:.1f}; requests p50 native "
              f"{pctl([n['pages'] for n in ix.native[1:]], .5)} / here {pctl(r.req[1:], .5)}", flush=True)
        for npb in [int(x) for x in os.environ.get("A_NPROBE", "").split(",") if x]:
            print(option_a(ix, npb).row(), flush=True)
    Bs = [tuple(int(y) for y in x.split(":")) for x in os.environ.get("B", "").split(",") if x]
    Ds = [tuple(int(y) for y in x.split(":")) for x in os.environ.get("D", "").split(",") if x]
    Cs = sorted({int(x) for x in os.environ.get("C", "64,128,256,512").split(",")} | {b[0] for b in Bs} | {d[0] for d in Ds})
    Ps = [int(x) for x in os.environ.get("P", "2,4,8,16").split(",")]
    cellsets = {}
    if "b" in only or "d" in only:
        for C in Cs:
            cellsets[C] = Cells(ix, C)
            log(f"cells C {C}: once {cellsets[C].once / 1000:.1f} kB, cell page p50 {statistics.median(cellsets[C].page_bytes) / 1000:.1f} kB")
    if "b" in only:
        grid = [(C, P, npb) for C in Cs for P in Ps for npb in [int(x) for x in os.environ.get("NPROBE", "16").split(",")]]
        for C, P, npb in (Bs or grid):
            r = option_b(ix, cellsets[C], P, npb)
            print(r.row(), flush=True)
            if os.environ.get("SPLIT"):
                print(r.split(), flush=True)
        for C, P, B, npb in [tuple(int(y) for y in x.split(":")) for x in os.environ.get("BITS", "").split(",") if x]:
            key = (C, B)
            if key not in cellsets:
                cellsets[key] = Cells(ix, C, bits=B)
                log(f"cells C {C} res {B} bits: cell page p50 {statistics.median(cellsets[key].page_bytes) / 1000:.1f} kB")
            print(option_b(ix, cellsets[key], P, npb).row(), flush=True)
        for C, P, cap in [tuple(int(y) for y in x.split(":")) for x in os.environ.get("CAP", "").split(",") if x]:
            key = (C, "cap", cap)
            if key not in cellsets:
                cellsets[key] = Cells(ix, C, cap=cap)
                log(f"cells C {C} cap {cap}: {cellsets[key].C} cells, once {cellsets[key].once / 1000:.1f} kB")
            r = option_b(ix, cellsets[key], P)
            print(r.row(), flush=True)
            if os.environ.get("SPLIT"):
                print(r.split(), flush=True)
        for C, P, take in [tuple(int(y) for y in x.split(":")) for x in os.environ.get("TAKE", "").split(",") if x]:
            r = option_b(ix, cellsets[C], P, take=take)
            print(r.row(), flush=True)
            if os.environ.get("SPLIT"):
                print(r.split(), flush=True)
        for spec_ in [x for x in os.environ.get("ADAPT", "").split(",") if x]:
            # C:P:lambda:pmin:delta (pmin 0 = fixed P)
            C, P, lam, pmin, delta = spec_.split(":")
            cs = cellsets[int(C)]
            cs.lam, cs.adapt = float(lam), ((int(pmin), float(delta)) if int(pmin) else None)
            r = option_b(ix, cs, int(P))
            print(r.row(), flush=True)
            if os.environ.get("SPLIT"):
                print(r.split(), flush=True)
            cs.lam, cs.adapt = 0.0, None
        for C, P, k in [tuple(int(y) for y in x.split(":")) for x in os.environ.get("PACK", "").split(",") if x]:
            print(option_b(ix, cellsets[C], P, packk=k).row(), flush=True)
        for C, P, ov in [tuple(float(y) if "." in y else int(y) for y in x.split(":")) for x in os.environ.get("OV", "").split(",") if x]:
            cs = Cells(ix, C, overlap=ov)
            print(option_b(ix, cs, P, label=f"b1 ov {ov}").row(), flush=True)
    if "c" in only:
        for spec_ in os.environ.get("CODES", "pca32-int4:16,pca32-int4:24,pca64-bin:24,pca128-bin:24,pq16x4:24,pq32x4:24").split(","):
            kind, M = spec_.split(":")
            print(option_c(ix, kind, int(M)).row(), flush=True)
    if "d" in only:
        Rs = [int(x) for x in os.environ.get("R", "240,320").split(",")]
        for C, P, R in (Ds or [(C, P, R) for C in Cs for P in Ps for R in Rs]):
            r = option_d(ix, cellsets[C], P, R)
            print(r.row(), flush=True)
            if os.environ.get("SPLIT"):
                print(r.split(), flush=True)
    print(f"# {time.time() - T0:.0f} s; load {' '.join(load())}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Prototype (issue 14, design step): how many requests does a dense query at 1M chunks need
if the int8 rows that rescoring reads are grouped so that a query's candidates share pages?

Usage: scripts/prototype-row-pages.py BUNDLE QUERIES.json [--max N]

BUNDLE: a binary-list IVF bundle written by `bench_ivf_1m --write` (rows in list order, 1 row an
`i` page); QUERIES.json: its `DIR.queries.json` (300 real query vectors, their exact int8 top 10).

Per query (same routing as the engine: the stored 4-bit centroids, dequantized; the binary
estimates of FORMAT.md; exact scores from the int8 rows) it simulates layouts of the rows of
each list in pages of G rows:
  - `doc`: list order (doc ids ascending: today's layout when G > 1),
  - `pddp`: the list's rows bisected at the median of their projections on the principal
    direction (Boley's PDDP, as `cap_lists` splits lists) until a part holds <= G rows;
and selections of the pages to fetch:
  - `cand C`: the C best estimates' pages (today's rule, C = rescore * 10),
  - `page P`: the P pages whose best row estimate is highest,
  - `rows R`: those pages, best first, until they hold >= R rows.
Every row on a fetched page gets its exact score, so recall@10 against the exact scan is the
share of the exact top 10 that sits on a fetched page of a probed list (given >= 10 fetched).
Bytes are as stored: list pages (their file sizes) + row pages (48 B page header + 12 B body
header + 388 B a row: int8 rows do not deflate), no cache between queries (the
"from the once pages alone" figure). Requests: list pages + row pages (chunk pages not counted).
"""
import importlib.util
import json
import os
import statistics
import struct
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("rb", os.path.join(HERE, "read-bundle.py"))
rb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rb)


def load_centroids(folder, ivf, dim):
    nlist = ivf["nlist"]
    hb = (dim + 1) // 2
    out = np.zeros((nlist, dim), np.float32)
    mean = None
    k = 0
    for p in range(ivf["centroids"]["pages"]):
        body = rb.read_page(folder, f"g-{ivf['centroids']['gen']}-{p}")
        rows = min(256, nlist - 256 * p)
        at = 0
        if p == 0:
            ms = struct.unpack_from("<f", body, 0)[0]
            mean = ms * np.frombuffer(body, np.int8, dim, 4).astype(np.float32)
            at = 4 + dim
        for _ in range(rows):
            s = struct.unpack_from("<f", body, at)[0]
            nib = np.frombuffer(body, np.uint8, hb, at + 4)
            u = np.empty(hb * 2, np.int16)
            u[0::2] = nib & 15
            u[1::2] = nib >> 4
            out[k] = mean + s * (u[:dim] - 8)
            k += 1
            at += 4 + hb
    return out


class Lists:
    def __init__(self, folder, ivf, dim):
        self.folder, self.ivf, self.dim = folder, ivf, dim
        self.nb = (dim + 7) // 8
        self.cache = {}

    def get(self, j):
        if j in self.cache:
            return self.cache[j]
        name = f"j-{self.ivf['lists']['gen']}-{j}"
        size = os.path.getsize(f"{self.folder}/p/{name}")
        body = rb.read_page(self.folder, name)
        r = rb.Reader(name, body)
        count = r.varint()
        first = r.varint()
        docs, prev = [], None
        for _ in range(count):
            d = r.varint()
            d = d if prev is None else d + prev
            docs.append(d)
            prev = d
        amax, pmin, pmax = struct.unpack("<3f", r.take(12))
        a = np.frombuffer(r.take(count), np.uint8).astype(np.float32)
        b = np.frombuffer(r.take(count), np.uint8).astype(np.float32)
        signs = np.frombuffer(r.take(count * self.nb), np.uint8).reshape(count, self.nb)
        bits = np.unpackbits(signs, axis=1, bitorder="little")[:, : self.dim]
        pm = bits.astype(np.float32) * 2 - 1
        alphas = amax * a / 255.0
        projs = pmin + (pmax - pmin) * b / 255.0
        per = self.ivf["rows"]["per_page"]
        assert per == 1, "the prototype reads 1-row i pages"
        rows = np.zeros((count, self.dim), np.float32)
        for k in range(count):
            _, scales, q = rb.read_vectors_body("i", rb.read_page(self.folder, f"i-{self.ivf['rows']['gen']}-{first + k}"))
            rows[k] = scales[0] * np.asarray(q[0], np.float32)
        v = dict(docs=np.asarray(docs), size=size, pm=pm, alphas=alphas, projs=projs, rows=rows, groups={})
        self.cache[j] = v
        return v


def pddp(rows, g):
    """Groups (lists of row indices) of at most g rows: median cuts on the principal direction."""
    out = []
    stack = [np.arange(len(rows))]
    while stack:
        idx = stack.pop()
        if len(idx) <= g:
            out.append(idx)
            continue
        x = rows[idx] - rows[idx].mean(0)
        v = np.random.default_rng(7).standard_normal(x.shape[1]).astype(np.float32)
        for _ in range(20):
            v = x.T @ (x @ v)
            v /= np.linalg.norm(v) + 1e-30
        p = x @ v
        o = np.argsort(p, kind="mergesort")
        h = (len(idx) + 1) // 2
        stack.append(idx[o[h:]])
        stack.append(idx[o[:h]])
    return out


def groups_of(lst, layout, g):
    key = (layout, g)
    if key not in lst["groups"]:
        n = len(lst["docs"])
        if layout == "doc":
            gs = [np.arange(s, min(n, s + g)) for s in range(0, n, g)]
        else:
            gs = pddp(lst["rows"], g)
        gid = np.empty(n, np.int64)
        for k, ix in enumerate(gs):
            gid[ix] = k
        lst["groups"][key] = (gs, gid)
    return lst["groups"][key]


def main():
    args = sys.argv[1:]
    mx = 300
    if "--max" in args:
        i = args.index("--max")
        mx = int(args[i + 1])
        del args[i : i + 2]
    folder, qfile = args
    entry = json.load(open(f"{folder}/jikji.json"))
    ivf, dim = entry["pages"]["ivf"], entry["pages"]["dim"]
    Q = json.load(open(qfile))
    queries = np.asarray(Q["queries"][:mx], np.float32)
    exact = [set(t) for t in Q["exact"][:mx]]
    t0 = time.time()
    cent = load_centroids(folder, ivf, dim)
    lists = Lists(folder, ivf, dim)
    print(f"# prototype-row-pages: {folder}, {len(queries)} queries, {ivf['nlist']} lists; load {open('/proc/loadavg').read().split()[:3]}")
    nprobes = [int(x) for x in os.environ.get("NPROBE", "16,24").split(",")]
    gsizes = [int(x) for x in os.environ.get("G", "1,4,8,16").split(",")]
    cands = [int(x) for x in os.environ.get("CAND", "80,160").split(",")]
    pagesel = [int(x) for x in os.environ.get("PAGES", "10,20,30,40").split(",")]
    rowsel = [int(x) for x in os.environ.get("ROWS", "160,240").split(",") if x]
    res = {}
    for qi, q in enumerate(queries):
        order = np.argsort(-(cent @ q), kind="mergesort")
        for npb in nprobes:
            probed = order[:npb]
            est, docs, lid, rid = [], [], [], []
            list_bytes = 0
            for j in probed:
                L = lists.get(int(j))
                qc = float(cent[j] @ q)
                e = L["projs"] * qc + L["alphas"] * (L["pm"] @ q)
                est.append(e)
                docs.append(L["docs"])
                lid.append(np.full(len(e), j))
                rid.append(np.arange(len(e)))
                list_bytes += L["size"]
            est = np.concatenate(est)
            docs = np.concatenate(docs)
            lid = np.concatenate(lid)
            rid = np.concatenate(rid)
            T = exact[qi]
            covered = sum(1 for d in docs if int(d) in T)
            for layout in ("doc", "pddp"):
                for g in gsizes:
                    if layout == "pddp" and g == 1:
                        continue
                    gid = np.empty(len(docs), np.int64)
                    gsize = {}
                    for j in probed:
                        L = lists.get(int(j))
                        gs, gi = groups_of(L, layout, g)
                        m = lid == j
                        gid[m] = gi[rid[m]] + int(j) * 100000
                        for k, ix in enumerate(gs):
                            gsize[int(j) * 100000 + k] = len(ix)
                    page_bytes = lambda ps: sum(48 + 12 + 388 * gsize[p] for p in ps)

                    def record(key, ps):
                        fetched = np.isin(gid, list(ps))
                        rec = sum(1 for d in docs[fetched] if int(d) in T) / 10
                        r = res.setdefault(key, [])
                        r.append((rec, npb + len(ps), (list_bytes + page_bytes(ps)) / 1000, covered / 10, int(fetched.sum())))

                    o = np.argsort(-est, kind="mergesort")
                    for c in cands:
                        ps = set(gid[o[:c]].tolist())
                        record((npb, layout, g, f"cand {c}"), ps)
                    # pages by best estimate
                    best = {}
                    for k in o:
                        p = int(gid[k])
                        if p not in best:
                            best[p] = est[k]
                    ranked = sorted(best, key=lambda p: -best[p])
                    for R in rowsel:
                        ps, got = [], 0
                        for pg in ranked:
                            if got >= R:
                                break
                            ps.append(pg)
                            got += gsize[pg]
                        record((npb, layout, g, f"rows {R}"), set(ps))
                    for P in pagesel:
                        if P * g > 400 or P * g < 20:
                            continue
                        record((npb, layout, g, f"page {P}"), set(ranked[:P]))
        if qi % 50 == 49:
            print(f"  {qi + 1} queries, {time.time() - t0:.0f} s, {len(lists.cache)} lists read", file=sys.stderr)
    print(f"{'nprobe':>6} {'layout':>5} {'G':>3} {'select':>9} {'recall@10':>9} {'cover':>6} {'req p50':>7} {'req p90':>7} {'kB p50':>7} {'kB p90':>7} {'rows exact':>10}")
    for key in sorted(res, key=lambda k: (k[0], k[1], k[2], k[3].split()[0], int(k[3].split()[1]))):
        v = res[key]
        rec = statistics.mean(x[0] for x in v)
        cov = statistics.mean(x[3] for x in v)
        req = sorted(x[1] for x in v)
        kb = sorted(x[2] for x in v)
        rows = statistics.median(x[4] for x in v)
        p = lambda xs, f: xs[round((len(xs) - 1) * f)]
        print(f"{key[0]:>6} {key[1]:>5} {key[2]:>3} {key[3]:>9} {rec:>9.4f} {cov:>6.3f} {p(req, .5):>7} {p(req, .9):>7} {p(kb, .5):>7.1f} {p(kb, .9):>7.1f} {rows:>10.0f}")
    print(f"# {time.time() - t0:.0f} s; load {open('/proc/loadavg').read().split()[:3]}")


if __name__ == "__main__":
    main()

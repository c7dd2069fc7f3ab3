#!/usr/bin/env python3
"""Prototype measurement for issue 14 at 1M chunks: IVF with residual product quantization
(PQ) against today's binary codes + int8 rescoring. Nothing here is the format: it is the
measurement behind docs/design/dense-pq.md.

Stages (each caches its output under --work, default /work/pq):

  data   real e5-small vectors of the embedding cache (--cache, record layout of
         builder/src/vector_cache.rs), split by key into eval queries (SHA-256 of
         model_sha ‖ 0x00 ‖ "query: " ‖ text for the texts of --eval/*/queries.jsonl, the
         f32 keys `jikji eval` writes) and passages (every other record); 300 queries evenly
         spaced over the sets (sorted by name, file order); the passages, sorted by key, are
         extended to --n rows by the rotation of builder/examples/bench_ivf_1m.rs (copy c ≥ 1
         of base x: cos θ·x + sin θ·u, u ⟂ x along 0.7·(w−μ)/‖w−μ‖ + 0.3·g/‖g‖, w a random
         base vector, μ the base mean, g Gaussian, θ uniform in [0°, 25°]; copy 0 is x) with
         numpy's PCG64 (seed 0x314d) instead of the bench's splitmix (same law, not the same
         numbers); rows quantized to int8 as format/src/vectors.rs does (scale = max|x|/127);
         the exact top 10 of each query over the int8 rows (the engine's exact scan: scale·Σ
         q_i y_i, ties by doc id) and, to compare, over the f32 rows.
  index  per --nlist K: spherical k-means (faiss, trained on --train-per-list points a list,
         evenly spaced, --iterations rounds), every row assigned to its nearest centroid by
         inner product, centroids = normalised means of their lists (as builder/src/ivf.rs),
         then capped as `cap_lists` does (bisection at the median of the principal direction
         until a list has ≤ cap rows; default cap ⌈2n/K⌉).
  eval   for each index and layout: recall@10 against the exact int8 top 10, bytes per query
         as pages would store them (48-byte page header, body deflated with zlib level 9 when
         that saves ≥ 1/16, as format/src/paged/page.rs does), rounds, table lookups.

  table  markdown from eval JSON files (--out a.json,b.json): per index, centroids and codes, the cheapest
         point reaching --target recall and the best point within --warm-budget kB.

Eval options: --indexes k4000c125,... --centroids int8,4bit,4bitm,bin,pq48x8c,2l128x4,rc256pq96x4,...
--layouts int8,binary,pq24x8,pq48x4,...,none (none: routing only) --nprobe 8,16 --rescore 0,8,16
--row-codes int8,int4. The runs behind docs/design/dense-pq.md and their output: docs/bench/h25pq-ivf-pq-1m.txt.

Requires numpy, faiss-cpu (k-means and PQ training/encoding), python ≥ 3.9.
"""

import argparse
import hashlib
import json
import math
import os
import sys
import time
import zlib

import numpy as np

DIM = 384
RECORD = 32 + 4 + 1 + 4 * DIM
HEADER = 48  # page header (format/src/paged/page.rs)
ROW_PAGE = 48 + 12 + DIM + 4  # one int8 row in an `i` page (1 row a page)


def log(*a):
    print(time.strftime("%H:%M:%S"), *a, flush=True)


def load():
    return open("/proc/loadavg").read().split()[0]


# ---------------------------------------------------------------- data

def stage_data(a):
    sha = hashlib.sha256(open(os.path.join(a.model, "model.onnx"), "rb").read()).hexdigest()
    raw = open(a.cache, "rb").read()
    nrec = len(raw) // RECORD
    log(f"cache {a.cache}: {nrec} records ({len(raw) % RECORD} bytes of a torn tail ignored)")
    recs = np.frombuffer(raw[: nrec * RECORD], dtype=np.uint8).reshape(nrec, RECORD)
    keys = [bytes(recs[i, :32]) for i in range(nrec)]
    tokens = recs[:, 32:36].copy().view("<u4").ravel()
    vec = recs[:, 37:].copy().view("<f4").reshape(nrec, DIM)
    by_key = {}
    for i, k in enumerate(keys):
        by_key[k] = i  # a later record with the same key wins
    qkeys, qidx, per_set = set(), [], []
    for s in sorted(os.listdir(a.eval)):
        path = os.path.join(a.eval, s, "queries.jsonl")
        if not os.path.exists(path):
            continue
        found = lines = 0
        for line in open(path, encoding="utf-8"):
            line = line.strip()
            if not line:
                continue
            text = json.loads(line).get("text")
            if text is None:
                continue
            lines += 1
            k = hashlib.sha256(sha.encode() + b"\0" + b"query: " + text.encode("utf-8")).digest()
            if k in by_key and k not in qkeys:
                qkeys.add(k)
                qidx.append(by_key[k])
                found += 1
        per_set.append((s, found, lines))
        log(f"{s}: {found} of {lines} queries in the cache")
    base_keys = sorted(k for k in by_key if k not in qkeys)
    bidx = np.array([by_key[k] for k in base_keys])
    zero_tok = int((tokens[bidx] == 0).sum())
    log(f"queries {len(qidx)} (token field 0: {int((tokens[qidx] == 0).sum())}); "
        f"passages {len(bidx)} (token field 0 among them: {zero_tok})")
    take = min(a.queries, len(qidx))
    qsel = [qidx[i * len(qidx) // take] for i in range(take)]
    Q = vec[qsel].astype(np.float32)
    base = vec[bidx].astype(np.float32)
    b = len(base)
    mu = base.mean(0)
    rng = np.random.Generator(np.random.PCG64(0x314D))
    n = a.n or b  # 0: the real passages only, no perturbation
    q8 = np.empty((n, DIM), dtype=np.int8)
    scale = np.empty(n, dtype=np.float32)
    cos_sum = 0.0
    top32 = TopK(len(Q), 10)
    maxang = math.radians(a.max_angle)
    step = 65536
    for s in range(0, n, step):
        e = min(n, s + step)
        ids = np.arange(s, e)
        x = base[ids % b]
        y = x.copy()
        cp = ids >= b
        m = int(cp.sum())
        if m:
            xs = x[cp]
            w = base[rng.integers(0, b, m)]
            d = w - mu
            d /= np.linalg.norm(d, axis=1, keepdims=True)
            g = rng.standard_normal((m, DIM)).astype(np.float32)
            g /= np.linalg.norm(g, axis=1, keepdims=True)
            u = 0.7 * d + 0.3 * g
            u -= (u * xs).sum(1, keepdims=True) * xs
            u /= np.linalg.norm(u, axis=1, keepdims=True)
            th = (rng.random(m) * maxang).astype(np.float32)[:, None]
            ys = np.cos(th) * xs + np.sin(th) * u
            ys /= np.linalg.norm(ys, axis=1, keepdims=True)
            cos_sum += float((ys * xs).sum())
            y[cp] = ys
        top32.update((y @ Q.T).T, s)
        mx = np.abs(y).max(1)
        sc = (mx / 127.0).astype(np.float32)
        q8[s:e] = np.clip(np.round(y / sc[:, None]), -127, 127).astype(np.int8)
        scale[s:e] = sc
    log(f"rows: {b} passages extended to {n} (copies: mean cos to their original "
        f"{cos_sum / max(1, n - b):.3f}, angle ≤ {a.max_angle}°)")
    t = time.time()
    ex8 = exact_top(q8, scale, Q, 10)
    ex32 = top32.result()
    agree = np.mean([len(set(ex8[r]) & set(ex32[r])) / 10 for r in range(len(Q))])
    log(f"exact int8 top 10: {time.time() - t:.1f} s; the f32 rows' top 10 holds {agree:.4f} of it")
    np.save(os.path.join(a.work, "q8.npy"), q8)
    np.save(os.path.join(a.work, "scale.npy"), scale)
    np.save(os.path.join(a.work, "queries.npy"), Q)
    np.save(os.path.join(a.work, "exact.npy"), ex8)
    json.dump({"sets": per_set, "base": b, "n": n, "queries": take,
               "cos": cos_sum / max(1, n - b), "cache_records": nrec,
               "model_sha": sha},
              open(os.path.join(a.work, "data.json"), "w"), indent=1)


class TopK:
    """The k best (score, id) of each of nq rows, fed in batches; ties by id."""

    def __init__(self, nq, k):
        self.k = k
        self.s = np.full((nq, 0), -np.inf, dtype=np.float32)
        self.i = np.zeros((nq, 0), dtype=np.int64)

    def update(self, sc, start):
        cs = np.concatenate([self.s, sc.astype(np.float32)], 1)
        ci = np.concatenate([self.i, np.broadcast_to(np.arange(start, start + sc.shape[1]), sc.shape)], 1)
        keep = min(cs.shape[1], self.k + 8)
        part = np.argpartition(-cs, keep - 1, axis=1)[:, :keep]
        self.s = np.take_along_axis(cs, part, 1)
        self.i = np.take_along_axis(ci, part, 1)

    def result(self):
        out = np.empty((len(self.s), self.k), dtype=np.int64)
        for r in range(len(self.s)):
            o = np.lexsort((self.i[r], -self.s[r]))[: self.k]
            out[r] = self.i[r][o]
        return out


def exact_top(q8, scale, Q, k):
    """Top k of each query by scale·(q8·Q) (the engine's exact int8 score), ties by doc id."""
    t = TopK(len(Q), k)
    step = 131072
    for s in range(0, len(q8), step):
        e = min(len(q8), s + step)
        t.update((q8[s:e].astype(np.float32) @ Q.T).T * scale[s:e][None, :], s)
    return t.result()


# ---------------------------------------------------------------- index

def rows_f32(a):
    q8 = np.load(os.path.join(a.work, "q8.npy"), mmap_mode="r")
    sc = np.load(os.path.join(a.work, "scale.npy"))
    X = np.empty(q8.shape, dtype=np.float32)
    for s in range(0, len(q8), 131072):
        e = min(len(q8), s + 131072)
        X[s:e] = q8[s:e].astype(np.float32) * sc[s:e, None]
    return X


def normalised(v):
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(n > 0, n, 1)


def lists_of(assign, nl):
    order = np.argsort(assign, kind="stable")  # ascending doc ids within a list
    cuts = np.searchsorted(assign[order], np.arange(nl + 1))
    return [order[cuts[j]:cuts[j + 1]] for j in range(nl)]


def bisect(X, docs):
    """builder/src/ivf.rs `bisect`: median cut on the principal direction (8 power rounds)."""
    P = X[docs]
    mu = P.mean(0)
    far = int(np.argmax((P * P).sum(1) - 2 * P @ mu))
    u = normalised(P[far] - mu)
    C = P - mu
    for _ in range(8):
        w = C.T @ (C @ u)
        ln = np.linalg.norm(w)
        if not (np.isfinite(ln) and ln > 0):
            break
        u = w / ln
    t = P @ u
    o = np.lexsort((docs, t))
    half = len(docs) // 2
    return np.sort(docs[o[:half]]), np.sort(docs[o[half:]])


def cap_lists(X, lists, cents, cap):
    lists = list(lists)
    cents = list(cents)
    todo = list(range(len(lists)))[::-1]
    while todo:
        j = todo.pop()
        if len(lists[j]) <= cap:
            continue
        a_, b_ = bisect(X, lists[j])
        cents[j] = normalised(X[a_].sum(0))
        cents.append(normalised(X[b_].sum(0)))
        lists[j] = a_
        lists.append(b_)
        todo.append(len(lists) - 1)
        todo.append(j)
    return lists, np.array(cents, dtype=np.float32)


def stage_index(a):
    import faiss
    faiss.omp_set_num_threads(a.threads)
    X = rows_f32(a)
    n = len(X)
    for K in [int(k) for k in a.nlist.split(",")]:
        t = time.time()
        tn = min(n, a.train_per_list * K)
        tr = X[(np.arange(tn) * n) // tn]
        km = faiss.Kmeans(DIM, K, niter=a.iterations, spherical=True, seed=0x6A696B,
                          max_points_per_centroid=a.train_per_list + 1, verbose=False)
        km.train(np.ascontiguousarray(tr))
        idx = faiss.IndexFlatIP(DIM)
        idx.add(km.centroids)
        _, I = idx.search(X, 1)
        assign = I[:, 0].astype(np.int64)
        lists = lists_of(assign, K)
        cents = np.array([normalised(X[l].sum(0)) if len(l) else km.centroids[j]
                          for j, l in enumerate(lists)], dtype=np.float32)
        sz = np.sort([len(l) for l in lists])
        log(f"k-means K={K}: {tn} training points, {a.iterations} rounds, {time.time() - t:.0f} s; "
            f"sizes min {sz[0]} median {sz[K // 2]} max {sz[-1]}; load {load()}")
        save_index(a, f"k{K}", lists, cents)
        cap = math.ceil(a.cap_factor * n / K)
        t = time.time()
        cl, cc = cap_lists(X, lists, cents, cap)
        sz = np.sort([len(l) for l in cl])
        log(f"  capped at {cap}: {len(cl)} lists, {time.time() - t:.0f} s; sizes min {sz[0]} "
            f"median {sz[len(sz) // 2]} p90 {sz[len(sz) * 9 // 10]} max {sz[-1]}")
        save_index(a, f"k{K}c{cap}", cl, cc)


def save_index(a, name, lists, cents):
    assign = np.empty(sum(len(l) for l in lists), dtype=np.int32)
    for j, l in enumerate(lists):
        assign[l] = j
    np.savez(os.path.join(a.work, f"index-{name}.npz"), assign=assign, cents=cents)


# ---------------------------------------------------------------- pages

def varints(v):
    """LEB128 varints of the non-negative integers `v`, concatenated (codec::put_varint)."""
    v = np.asarray(v, dtype=np.uint64)
    nb = np.ones(len(v), dtype=np.int64)
    for k in range(1, 5):
        nb += v >= (1 << (7 * k))
    out = np.zeros(int(nb.sum()), dtype=np.uint8)
    pos = np.concatenate([[0], np.cumsum(nb)[:-1]]).astype(np.int64)
    for k in range(5):
        m = nb > k
        byte = ((v[m] >> np.uint64(7 * k)) & np.uint64(0x7F)).astype(np.uint8)
        out[pos[m] + k] = byte | ((nb[m] > k + 1).astype(np.uint8) << 7)
    return out.tobytes()


def stored(body):
    """Bytes of a page as stored: header + body, deflated (level 9) when that saves ≥ 1/16."""
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    d = c.compress(body) + c.flush()
    return HEADER + (len(d) if len(d) <= len(body) - len(body) // 16 else len(body))


def id_head(docs, first):
    """varint count, varint first (list-order position of row 0), varint doc-id deltas."""
    deltas = np.diff(np.concatenate([[0], docs])) if len(docs) else docs
    return varints([len(docs), first]) + varints(deltas)


def quant_int8(C):
    """format/src/vectors.rs `quantize`, row by row: dequantized rows."""
    mx = np.abs(C).max(1, keepdims=True)
    sc = np.where(mx > 0, mx / 127.0, 1.0)
    return (np.clip(np.round(C / sc), -127, 127) * sc).astype(np.float32)


def quant_4bit(C):
    mx = np.abs(C).max(1, keepdims=True)
    sc = np.where(mx > 0, mx / 7.0, 1.0)
    return (np.clip(np.round(C / sc), -7, 7) * sc).astype(np.float32)


def centroid_pages(Cq, row_bytes, per_page=256):
    """Stored bytes of the centroid pages: `row_bytes(block)` gives a page body."""
    return sum(stored(row_bytes(Cq[i:i + per_page])) for i in range(0, len(Cq), per_page))


# ---------------------------------------------------------------- PQ

class PQ:
    """Product quantizer with m sub-quantizers of 2^bits centroids over contiguous dims,
    trained by faiss k-means (L2) per subspace; codebooks stored int8 (one scale per
    sub-quantizer) and used dequantized, as the engine would hold them."""

    def __init__(self, m, bits, train, seed=1):
        import faiss
        self.m, self.bits, self.ksub = m, bits, 1 << bits
        self.dsub = DIM // m
        cb = np.empty((m, self.ksub, self.dsub), dtype=np.float32)
        for j in range(m):
            x = np.ascontiguousarray(train[:, j * self.dsub:(j + 1) * self.dsub])
            km = faiss.Kmeans(self.dsub, self.ksub, niter=20, seed=seed + j,
                              max_points_per_centroid=100000, verbose=False)
            km.train(x)
            cb[j] = km.centroids
        self.cb_f32 = cb
        sc = np.abs(cb).reshape(m, -1).max(1) / 127.0
        self.cb = (np.round(cb / sc[:, None, None]) * sc[:, None, None]).astype(np.float32)

    def encode(self, R):
        import faiss
        codes = np.empty((len(R), self.m), dtype=np.uint8)
        for j in range(self.m):
            idx = faiss.IndexFlatL2(self.dsub)
            idx.add(self.cb[j])
            for s in range(0, len(R), 262144):
                e = min(len(R), s + 262144)
                _, I = idx.search(np.ascontiguousarray(R[s:e, j * self.dsub:(j + 1) * self.dsub]), 1)
                codes[s:e, j] = I[:, 0]
        return codes

    def tables(self, q):
        return np.einsum("mkd,md->mk", self.cb, q.reshape(self.m, self.dsub))

    def decode(self, codes):
        return self.cb[np.arange(self.m), codes].reshape(len(codes), DIM)

    def codebook_bytes(self):
        # int8 values + an f32 scale per sub-quantizer (a page header for the page)
        return HEADER + self.m * self.ksub * self.dsub + 4 * self.m

    def code_bytes(self):
        return self.m * self.bits // 8

    def packed(self, codes):
        if self.bits == 8:
            return codes.tobytes()
        c = codes.astype(np.uint8)
        return (c[:, 0::2] | (c[:, 1::2] << 4)).tobytes()


# ---------------------------------------------------------------- eval

def centroid_variant(kind, cents, seed=7):
    """Stored (dequantized) centroids the engine would rank lists by, and their once bytes.
    A kind ending in "m" codes the centroids minus their mean (the mean stored int8, 388 B
    more): e5's common direction otherwise spends the code (4-bit scales, signs, PQ cells)."""
    L = len(cents)
    if kind.endswith("m") and kind != "int8":
        mu = cents.mean(0, keepdims=True)
        Ch, once = centroid_variant(kind[:-1], cents - mu, seed)
        muh = quant_int8(mu)
        return Ch + muh, once + DIM + 4
    if kind == "int8":
        return quant_int8(cents), centroid_pages(cents, lambda b: bytes(16 + len(b) * (DIM + 4)) if False else
                                                  (np.clip(np.round(b / (np.abs(b).max(1, keepdims=True) / 127)), -127, 127)
                                                   .astype(np.int8).tobytes() + np.zeros(16 + 4 * len(b), np.uint8).tobytes()))
    if kind == "4bit":
        def body(b):
            mx = np.abs(b).max(1, keepdims=True)
            q = (np.clip(np.round(b / (mx / 7)), -7, 7) + 8).astype(np.uint8)
            return (mx.astype(np.float32).tobytes() + (q[:, 0::2] | (q[:, 1::2] << 4)).tobytes())
        return quant_4bit(cents), centroid_pages(cents, body)
    if kind == "bin":
        al = np.abs(cents).mean(1, keepdims=True)
        Ch = (np.where(cents > 0, 1.0, -1.0) * al).astype(np.float32)
        return Ch, centroid_pages(cents, lambda b: np.packbits(b > 0, axis=1).tobytes() +
                                  np.abs(b).mean(1).astype(np.float32).tobytes())
    if kind.startswith("rc"):  # rcK1pqMxB: every centroid = its coarse centroid (K1 of them,
        # k-means over the centroids, int8) + a PQ code of the difference; all cached
        import faiss
        k1, rest = kind[2:].split("pq")
        k1 = int(k1)
        km = faiss.Kmeans(DIM, k1, niter=20, spherical=True, seed=3, verbose=False)
        km.train(np.ascontiguousarray(cents))
        cell = np.argmax(cents @ km.centroids.T, axis=1)
        coarse, once_c = centroid_variant("int8", km.centroids)
        D = cents - coarse[cell]
        m, bits = (int(x) for x in rest.split("x"))
        pq = PQ(m, bits, D, seed=seed)
        codes = pq.encode(D)
        Ch = coarse[cell] + pq.decode(codes)
        return Ch, once_c + pq.codebook_bytes() + centroid_pages(codes, lambda b: pq.packed(b), per_page=4096) + 2 * L
    if kind.startswith("pq"):  # e.g. pq48x8c: the centroids PQ-coded with a codebook of their own
        m, bits = (int(x) for x in kind[2:].rstrip("c").split("x"))
        pq = PQ(m, bits, cents, seed=seed)
        codes = pq.encode(cents)
        Ch = pq.decode(codes)
        return Ch, pq.codebook_bytes() + centroid_pages(codes, lambda b: pq.packed(b), per_page=4096)
    raise ValueError(kind)


def pct(v, p):
    v = np.sort(np.asarray(v, dtype=np.float64))
    return float(v[int(round((len(v) - 1) * p))]) if len(v) else 0.0


def stage_eval(a):
    import faiss
    faiss.omp_set_num_threads(a.threads)
    X = rows_f32(a)
    n = len(X)
    Q = np.load(os.path.join(a.work, "queries.npy"))
    ex = np.load(os.path.join(a.work, "exact.npy"))
    nq = len(Q)
    t = time.time()
    S = np.empty((n, nq), dtype=np.float32)  # every row's exact (int8) score per query
    for s_ in range(0, n, 131072):
        e = min(n, s_ + 131072)
        S[s_:e] = X[s_:e] @ Q.T
    log(f"exact scores of every row: {time.time() - t:.0f} s")
    nprobes = [int(x) for x in a.nprobe.split(",")]
    rescs = [int(x) for x in a.rescore.split(",")]
    pmax = max(nprobes)
    out = []
    for name in a.indexes.split(","):
        z = np.load(os.path.join(a.work, f"index-{name}.npz"))
        assign, cents = z["assign"].astype(np.int64), z["cents"]
        L = len(cents)
        lists = lists_of(assign, L)
        sizes = np.array([len(l) for l in lists])
        firsts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        for cv in a.centroids.split(","):
            t = time.time()
            two = None
            if cv.startswith("2l"):  # 2lK1xC: K1 coarse centroids cached (int8), the fine
                # centroids (int8) of the C best coarse cells fetched per query (one more round)
                K1, C1 = (int(x) for x in cv[2:].split("x"))
                Ch, _ = centroid_variant("int8", cents)
                km = faiss.Kmeans(DIM, K1, niter=20, spherical=True, seed=3, verbose=False)
                km.train(np.ascontiguousarray(cents))
                cell = np.argmax(cents @ km.centroids.T, axis=1)
                coarse, once_c = centroid_variant("int8", km.centroids)
                cell_page = np.array([HEADER + 16 + int((cell == c).sum()) * (DIM + 4) + 2 * int((cell == c).sum())
                                      for c in range(K1)])
                qc = Q @ Ch.T
                qrank = np.argsort(-(Q @ coarse.T), axis=1, kind="stable")[:, :C1]
                allowed = np.isin(cell[None, :], qrank[:, :, None]).reshape(nq, -1) if False else \
                    np.array([np.isin(cell, qrank[r]) for r in range(nq)])
                two = np.array([cell_page[qrank[r]].sum() for r in range(nq)])
                ranked = np.argsort(-np.where(allowed, qc, -np.inf), axis=1, kind="stable")[:, :pmax]
            else:
                Ch, once_c = centroid_variant(cv, cents)
                qc = Q @ Ch.T  # nq × L
                ranked = np.argsort(-qc, axis=1, kind="stable")[:, :pmax]
            # rows of the first pmax lists of each query, in probe order
            probe_rows, cum = [], []
            for r in range(nq):
                ls = ranked[r]
                probe_rows.append(np.concatenate([lists[j] for j in ls]))
                cum.append(np.cumsum(sizes[ls]))
            exs = [set(e.tolist()) for e in ex]
            # the passages (originals) behind the exact top 10: copy i of base row i % b
            nbase = json.load(open(os.path.join(a.work, "data.json")))["base"]
            exo = [set((e % nbase).tolist()) for e in ex]
            cover = {P: np.mean([len(exs[r] & set(probe_rows[r][:cum[r][P - 1]].tolist())) / 10
                                 for r in range(nq)]) for P in nprobes}
            log(f"{name} ({L} lists) centroids {cv}: once {once_c / 1e3:.1f} kB; coverage "
                + " ".join(f"{P}:{cover[P]:.3f}" for P in nprobes) + f"; load {load()}")
            out.append(dict(index=name, lists=L, centroids=cv, layout="routing", once_kB=once_c / 1e3,
                            coverage={str(P): float(cover[P]) for P in nprobes},
                            rows_p50={str(P): pct([c_[P - 1] for c_ in cum], .5) for P in nprobes},
                            extra_kB_p50=(pct(two, .5) / 1e3 if two is not None else 0.0)))
            json.dump(out, open(os.path.join(a.work, a.out), "w"), indent=0)
            r4 = None
            for lay in a.layouts.split(","):
                if lay == "none":
                    continue
                t1 = time.time()
                if lay == "int8":
                    page = np.array([HEADER + len(id_head(l, 0)) + 16 + len(l) * (DIM + 4) for l in lists])
                    est_of = lambda r, rows: S[rows, r]
                    m_lookups, bpr = 0, DIM + 4
                elif lay == "binary":
                    Cj = Ch[assign]
                    cc = (Ch * Ch).sum(1)[assign]
                    p_ = (X * Cj).sum(1) / cc
                    Rr = X - p_[:, None] * Cj
                    al = np.abs(Rr).mean(1)
                    sg = np.where(Rr > 0, 1, -1).astype(np.int8)
                    del Rr, Cj
                    ph, ah = np.empty(n, np.float32), np.empty(n, np.float32)
                    page = np.empty(L, dtype=np.int64)
                    for j, l in enumerate(lists):
                        if not len(l):
                            page[j] = HEADER + 2 + 12
                            continue
                        amax = al[l].max()
                        pmn, pmx = p_[l].min(), p_[l].max()
                        ab = np.round(al[l] / amax * 255) if amax > 0 else np.zeros(len(l))
                        pb = np.round((p_[l] - pmn) / (pmx - pmn) * 255) if pmx > pmn else np.zeros(len(l))
                        ah[l] = amax * ab / 255
                        ph[l] = pmn + (pmx - pmn) * pb / 255
                        body = (id_head(l, firsts[j]) + bytes(12) + ab.astype(np.uint8).tobytes()
                                + pb.astype(np.uint8).tobytes() + np.packbits(sg[l] > 0, axis=1, bitorder="little").tobytes())
                        page[j] = stored(body)
                    est_of = lambda r, rows: ph[rows] * qc[r, assign[rows]] + ah[rows] * (sg[rows].astype(np.float32) @ Q[r])
                    m_lookups, bpr = DIM // 8, 51
                else:  # pqMxB, pqMxBr: residuals (and queries) rotated by a seeded random
                    # orthogonal matrix before the split into sub-vectors (no bytes: the engine
                    # regenerates it from the seed)
                    rot = lay.endswith("r")
                    m, bits = (int(x) for x in lay[2:].rstrip("r").split("x"))
                    R = X - Ch[assign]
                    Rot = np.linalg.qr(np.random.default_rng(11).standard_normal((DIM, DIM)))[0].astype(np.float32) if rot else None
                    if rot:
                        R = R @ Rot
                    tr = R[(np.arange(65536) * n) // 65536]
                    pq = PQ(m, bits, tr)
                    codes = pq.encode(R)
                    # q·(ĉ_j + decode(code)) = q·ĉ_j + Σ_m T_m[code_m]: the tables are list-independent
                    chk = np.arange(0, n, n // 50)
                    QR = Q @ Rot if rot else Q
                    direct = Ch[assign[chk]] @ Q[0] + pq.decode(codes[chk]) @ QR[0]
                    T0 = pq.tables(QR[0])
                    via = qc[0, assign[chk]] + T0[np.arange(m), codes[chk]].sum(1)
                    err = float(np.abs(direct - via).max())
                    rmse = float(np.sqrt(((R[chk] - pq.decode(codes[chk])) ** 2).sum(1).mean()))
                    rn = float(np.linalg.norm(R[chk], axis=1).mean())
                    del R
                    page = np.array([stored(id_head(l, firsts[j]) + pq.packed(codes[l])) for j, l in enumerate(lists)])
                    tabs = [pq.tables(q) for q in QR]
                    ar = np.arange(m)
                    est_of = lambda r, rows: qc[r, assign[rows]] + tabs[r][ar, codes[rows]].sum(1)
                    m_lookups, bpr = m, pq.code_bytes()
                    log(f"  {lay}: trained + encoded {time.time() - t1:.0f} s; codebook {pq.codebook_bytes() / 1e3:.1f} kB; "
                        f"residual norm {rn:.3f}, PQ error {rmse:.3f}; table identity max err {err:.2e}")
                once = once_c + (pq.codebook_bytes() if lay.startswith("pq") else 0)
                if "int4" in a.row_codes and lay != "int8" and r4 is None:
                    r4 = {}
                    for s_ in range(0, n, 131072):
                        e = min(n, s_ + 131072)
                        Rb = X[s_:e] - Ch[assign[s_:e]]
                        mx = np.abs(Rb).max(1, keepdims=True)
                        scl = np.where(mx > 0, mx / 7.0, 1.0).astype(np.float32)
                        r4.setdefault("q", []).append(np.clip(np.round(Rb / scl), -7, 7).astype(np.int8))
                        r4.setdefault("s", []).append(scl[:, 0])
                    r4 = (np.concatenate(r4["q"]), np.concatenate(r4["s"]))
                if lay != "int8":
                    smp = (np.arange(256) * n) // 256
                    dm, ds = [], []
                    for r in range(nq):
                        xs_, es_ = S[smp, r], est_of(r, smp)
                        dm.append(abs(xs_.mean() - es_.mean()) / xs_.std())
                        ds.append(abs(xs_.std() - es_.std()) / xs_.std())
                    sb = stored(varints(assign[smp]) + (pq.packed(codes[smp]) if lay.startswith("pq") else
                                 np.packbits(sg[smp] > 0, axis=1).tobytes() + bytes(2 * 256)))
                    log(f"  {lay}: background sample (256 rows) coded as the lists are: {sb / 1e3:.1f} kB; "
                        f"|Δ mean| / std p50 {pct(dm, .5):.3f} p90 {pct(dm, .9):.3f}, |Δ std| / std p50 {pct(ds, .5):.3f} p90 {pct(ds, .9):.3f}")
                res = {}
                for r in range(nq):
                    rows = probe_rows[r]
                    est = est_of(r, rows)
                    for P in nprobes:
                        k = int(cum[r][P - 1])
                        lb = int(page[ranked[r][:P]].sum())
                        for rs, rc in ([(x, y) for x in rescs for y in a.row_codes.split(",") if x or y == "int8"]
                                       if lay != "int8" else [(0, "int8")]):
                            e_ = est[:k]
                            if rs == 0:
                                top = rows[:k][np.argsort(-e_, kind="stable")[:10]]
                                nb = lb
                                ncand = 0
                            else:
                                c = min(k, rs * 10)
                                cand = np.argpartition(-e_, c - 1)[:c] if c < k else np.arange(k)
                                if rc == "int8":
                                    ex_s = S[rows[cand], r]
                                    nb = lb + c * ROW_PAGE
                                else:  # int4 residual rows: q·ĉ_j + scale·(q4·q)
                                    cr = rows[cand]
                                    ex_s = qc[r, assign[cr]] + (r4[0][cr].astype(np.float32) @ Q[r]) * r4[1][cr]
                                    nb = lb + c * (HEADER + 12 + 4 + DIM // 2)
                                top = rows[cand[np.argsort(-ex_s, kind="stable")[:10]]]
                                ncand = c
                            if two is not None:
                                nb += int(two[r])
                            hit = len(exs[r] & set(top.tolist())) / 10
                            ohit = len(exo[r] & set((top % nbase).tolist())) / len(exo[r])
                            d = res.setdefault((P, rs, rc), [[], [], [], [], []])
                            d[4].append(ohit)
                            d[0].append(hit)
                            d[1].append(nb)
                            d[2].append(k)
                            d[3].append(ncand)
                for (P, rs, rc), d in sorted(res.items()):
                    rec = dict(index=name, lists=L, centroids=cv, layout=lay, nprobe=P, rescore=rs, row_codes=rc,
                               recall=float(np.mean(d[0])), coverage=float(cover[P]),
                               passage_recall=float(np.mean(d[4])),
                               once_kB=once / 1e3, warm_kB_p50=pct(d[1], 0.5) / 1e3,
                               warm_kB_p90=pct(d[1], 0.9) / 1e3, warm_kB_mean=float(np.mean(d[1])) / 1e3,
                               rows_p50=pct(d[2], 0.5), rows_p90=pct(d[2], 0.9), bytes_per_row=bpr,
                               lookups_p50=pct(d[2], 0.5) * m_lookups,
                               rounds_warm=(3 if rs else 2) + (two is not None), load=load())
                    out.append(rec)
                    print(f"  {name:>10} {cv:>7} {lay:>8} P={P:<3} resc={rs:<2}{rc if rs else '':>5} recall {rec['recall']:.4f} "
                          f"(passages {rec['passage_recall']:.3f}, cover {rec['coverage']:.3f}) once {rec['once_kB']:7.1f} kB warm p50 {rec['warm_kB_p50']:7.1f} "
                          f"p90 {rec['warm_kB_p90']:7.1f} rows p50 {rec['rows_p50']:.0f}", flush=True)
                log(f"  {lay}: {time.time() - t1:.0f} s")
                json.dump(out, open(os.path.join(a.work, a.out), "w"), indent=0)


# ---------------------------------------------------------------- table

NS_PER_LOOKUP = 3.0  # native, page decoding included: the h14 binary scan's 4.12 ms p50 for
# ~27k rows × 48 byte-table lookups at 1M (docs/performance.md, "1M vectors")


def stage_table(a):
    """Markdown rows from eval JSON files (--out, comma-separated): for each layout and
    oversampling, the fewest lists reaching recall@10 ≥ --target, and the best recall within
    --warm-budget kB (warm p50)."""
    recs = []
    for f in a.out.split(","):
        recs += json.load(open(os.path.join(a.work, f)))
    groups = {}
    for r in recs:
        if r["layout"] == "routing":
            continue
        groups.setdefault((r["index"], r["lists"], r["centroids"], r["layout"]), []).append(r)
    print("| index | lists | centroids | codes | resc | nprobe | recall@10 | once kB | warm kB p50 / p90 | first kB p50 | rounds warm | rows p50 | lookups p50 | scan ms est. | why |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, rs in groups.items():
        rs.sort(key=lambda r: r["warm_kB_p50"])
        picks = []
        ok = [r for r in rs if r["recall"] >= a.target]
        if ok:
            picks.append((ok[0], f"fewest kB ≥ {a.target}"))
        fit = [r for r in rs if r["warm_kB_p50"] <= a.warm_budget]
        if fit:
            best = max(fit, key=lambda r: r["recall"])
            if not ok or best is not ok[0]:
                picks.append((best, f"best ≤ {a.warm_budget:.0f} kB"))
        for r, why in picks:
            ms = r["lookups_p50"] * NS_PER_LOOKUP / 1e6 + r["lists"] * DIM / 2e6
            print(f"| {r['index']} | {r['lists']} | {r['centroids']} | {r['layout']} | {(str(r['rescore']) + ('' if r.get('row_codes', 'int8') == 'int8' else ' int4')) if r['rescore'] else '–'} | {r['nprobe']} | "
                  f"{r['recall']:.4f} | {r['once_kB']:.0f} | {r['warm_kB_p50']:.0f} / {r['warm_kB_p90']:.0f} | "
                  f"{r['once_kB'] + r['warm_kB_p50']:.0f} | {r['rounds_warm']} | {r['rows_p50']:.0f} | "
                  f"{r['lookups_p50'] / 1e3:.0f}k | {ms:.1f} | {why} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stage", choices=["data", "index", "eval", "table"])
    p.add_argument("--work", default="/work/pq")
    p.add_argument("--cache", default="/work/evalcache/vectors-92ddd8e92dce2dc0.bin")
    p.add_argument("--model", default="/work/main/models/e5-small")
    p.add_argument("--eval", default="/work/shared/eval")
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--max-angle", type=float, default=25.0)
    p.add_argument("--nlist", default="1000,2000")
    p.add_argument("--cap-factor", type=float, default=2.0)
    p.add_argument("--train-per-list", type=int, default=64)
    p.add_argument("--iterations", type=int, default=12)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--indexes", default="k1000c2000")
    p.add_argument("--centroids", default="int8")
    p.add_argument("--layouts", default="binary,pq16x8,pq24x8,pq48x8")
    p.add_argument("--nprobe", default="2,4,8,16,32")
    p.add_argument("--rescore", default="0,2,4,8")
    p.add_argument("--out", default="eval.json")
    p.add_argument("--row-codes", default="int8")
    p.add_argument("--target", type=float, default=0.90)
    p.add_argument("--warm-budget", type=float, default=200.0)
    a, rest = p.parse_known_args()
    a.rest = rest
    os.makedirs(a.work, exist_ok=True)
    log(f"stage {a.stage}; load {load()}")
    {"data": stage_data, "index": stage_index, "eval": stage_eval, "table": stage_table}[a.stage](a)
    log(f"done; load {load()}")


if __name__ == "__main__":
    main()

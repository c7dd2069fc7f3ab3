#!/usr/bin/env python3
"""Prototype for docs/design/impact-postings.md: replays BM25 over candidate layouts of the
long postings lists and counts what each layout fetches for an exact answer.

Input: the JSON lines of `engine-wasm/examples/dump_postings.rs` (each query's terms in the
engine's order, their postings with the engine's f32 impacts, the phrase counts of the plain
top 200, the engine's top 10). Usage:

    scripts/prototype-impact-postings.py DUMP.jsonl [--today STATS] [--json OUT]

STATS: the stderr of `jikji search B --queries-file Q --mode bm25 --fetch-stats --cold`
(today's measured `o` bytes per query, same order).

What it checks first, per query: BM25 recomputed here (f32, the engine's order of additions,
numpy float32) gives the engine's plain top 200 (doc and score bit for bit) and, with the
phrase component, the engine's top 10 (`search::bm25`). Then per layout it simulates the
pruned evaluation and asserts that the pruned top 200 (so the top 10 after the phrase
component) equals the exhaustive one.

Layouts (a list is *long* when its bytes exceed 1,024, FORMAT.md; short lists stay inline):
  whole      today: every long list read whole (re-encoded bytes, deflated, in 4 kB pages)
  bm:B:C     block-max: each long list cut into doc-ordered blocks of ~B raw bytes, each
             block its own page; the term's dictionary/bucket entry holds per block its first
             doc, length and an 8-bit upper bound of saturate(tf, dl), plus the list's C best
             postings by impact (champions). Round 1 (the entry): exact contributions of short
             lists and champions give per-doc lower bounds, theta = K-th best; round 2 fetches
             every block of every long term that covers a doc-id interval whose upper bound
             (sum of the block bounds + the best short-list sum inside it) reaches theta.
K = 200 (PHRASE_DEPTH: the exact plain top 200 the phrase component re-ranks, so everything
the engine computes stays identical) and, for reference, K = 10.
"""

import argparse
import json
import statistics
import sys
import zlib
from math import ceil

import numpy as np

F = np.float32
HEADER = 48  # page header bytes
INLINE_MAX = 1024
PHRASE_DEPTH = 200


def varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def deflated(raw):
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    d = c.compress(raw) + c.flush()
    # the writer keeps deflate only when it saves more than 1/16 (format/src/paged/page.rs)
    return len(d) if len(d) + len(raw) // 16 < len(raw) else len(raw)


def top_k(scored, k):
    return sorted(scored, key=lambda x: (-x[1], x[0]))[:k]


def f32add(a, b):
    return float(F(F(a) + F(b)))


def saturate(tf, dl, k1, b, avgdl):
    tf, dl, k1, b, avgdl = F(tf), F(dl), F(k1), F(b), F(avgdl)
    return F(tf * (k1 + F(1.0)) / (tf + k1 * (F(1.0) - b + b * dl / avgdl)))


def exhaustive(r):
    """Plain sums in the engine's order, the plain top 200 and the final top 10."""
    score, order = {}, []
    for t in r["terms"]:
        for d, x in zip(t["docs"], t["imp"]):
            if d not in score:
                score[d] = 0.0
                order.append(d)
            score[d] = f32add(score[d], x)
    plain = top_k([(d, score[d]) for d in order], max(PHRASE_DEPTH, 10))
    return score, plain


def final_top(r, plain):
    if r["seq_len"] < 2:
        return plain[:10]
    dl = {}
    for t in r["terms"]:
        if t["exact"]:
            for d, l in zip(t["docs"], t["dl"]):
                dl[d] = l
    out = []
    for d, s in plain:
        pf = r["pf"].get(str(d), 0)
        if pf > 0:
            bonus = F(r["phrase_idf"]) * saturate(pf, dl[d], r["k1"], r["b"], r["avgdl"])
            s = f32add(s, float(bonus))
        out.append((d, s))
    return top_k(out, 10)


def encode(docs, tf, dl, prev):
    out = bytearray()
    for d, t, l in zip(docs, tf, dl):
        out += varint(d - prev) + varint(t) + varint(l)
        prev = d
    return bytes(out)


def whole_bytes(t):
    """Today: the list's bytes in 4 kB pages (deflated; the list's share of its pages)."""
    raw = encode(t["docs"], t["tf"], t["dl"], 0)
    pages = ceil(len(raw) / 4096)
    return deflated(raw) + HEADER * pages, pages


def cut_blocks(t, target):
    """Doc-ordered blocks of ~target raw bytes: (start index, end index, raw bytes)."""
    blocks, i, n = [], 0, len(t["docs"])
    docs, tf, dl = t["docs"], t["tf"], t["dl"]
    while i < n:
        j, size = i, 0
        while j < n and size < target:
            size += len(varint(docs[j] - (docs[j - 1] if j > i else docs[i]))) + len(varint(tf[j])) + len(varint(dl[j]))
            j += 1
        blocks.append((i, j, encode(docs[i:j], tf[i:j], dl[i:j], docs[i])))
        i = j
    return blocks


def meta_bytes(t, blocks, sub, champs):
    """The term entry's added bytes: per block first-doc delta, length, 8-bit bound; champions."""
    raw, prev = bytearray(), 0
    for i, j, body in blocks:
        raw += varint(sub["docs"][i] - prev) + varint(len(body)) + b"\x00"
        prev = sub["docs"][i]
    cs = sorted(champs)
    raw += encode([t["docs"][c] for c in cs], [t["tf"][c] for c in cs], [t["dl"][c] for c in cs], 0)
    return len(raw), deflated(bytes(raw))


def simulate(r, score, plain, target, C, K, cache):
    k1, b, avgdl = r["k1"], r["b"], r["avgdl"]
    terms = r["terms"]
    long_ix = [i for i, t in enumerate(terms) if t["bytes"] > INLINE_MAX]
    # Round 1: exact contributions of short lists and of the long lists' champions.
    lb, short_sum = {}, {}
    champs = {}
    for i, t in enumerate(terms):
        if i in long_ix:
            ck = ("champs", t["term"])
            if ck not in cache:
                cache[ck] = sorted(range(len(t["docs"])), key=lambda p: (-t["imp"][p], t["docs"][p]))
            champs[i] = cache[ck][:C]
            for p in champs[i]:
                d = t["docs"][p]
                lb[d] = f32add(lb.get(d, 0.0), t["imp"][p])
        else:
            for d, x in zip(t["docs"], t["imp"]):
                lb[d] = f32add(lb.get(d, 0.0), x)
                short_sum[d] = f32add(short_sum.get(d, 0.0), x)
    lbs = sorted(lb.values(), reverse=True)
    theta = lbs[K - 1] if len(lbs) >= K else 0.0
    # Blocks of the non-champion postings and their 8-bit bounds of saturate (times the
    # query-time weight w): champions are known exactly from the entry.
    known = {}  # doc -> exact part known in round 1 (short lists + champions)
    for d, x in lb.items():
        known[d] = x
    sat_max = F(k1) + F(1.0)
    per_term, meta_raw, meta_st = {}, 0, 0
    for i in long_ix:
        t = terms[i]
        key = (t["term"], target, C)
        if key not in cache:
            cs = set(champs[i])
            rest = [p for p in range(len(t["docs"])) if p not in cs]
            sub = {"docs": [t["docs"][p] for p in rest], "tf": [t["tf"][p] for p in rest],
                   "dl": [t["dl"][p] for p in rest], "imp": [t["imp"][p] for p in rest]}
            blocks = cut_blocks(sub, target) if rest else []
            if rest:
                tfa = np.asarray(sub["tf"], dtype=F)
                sats = (tfa * (F(k1) + F(1.0))) / (tfa + F(k1) * (F(1.0) - F(b) + F(b) * np.asarray(sub["dl"], dtype=F) / F(avgdl)))
            qs = [min(255, ceil(float(sats[s:e].max()) / float(sat_max) * 255 * (1 + 1e-6))) for s, e, _ in blocks]
            cache[key] = (sub, blocks, qs)
        sub, blocks, qs = cache[key]
        bounds = [t["w"] * q / 255 * float(sat_max) * (1 + 1e-6) for q in qs]
        starts = [sub["docs"][s] for s, e, body in blocks]
        per_term[i] = (blocks, bounds, starts, sub)
        mr, ms = meta_bytes(t, blocks, sub, champs[i])
        meta_raw += mr
        meta_st += ms
    # Elementary doc-id intervals: the union of every long list's block starts.
    cuts = sorted({0} | {s for i in long_ix for s in per_term[i][2]})
    known_docs = sorted(known)
    fetch = {i: set() for i in long_ix}
    ptr = {i: 0 for i in long_ix}
    sp = 0
    for ci, lo in enumerate(cuts):
        hi = cuts[ci + 1] if ci + 1 < len(cuts) else r["n"]
        ub, cover = 0.0, []
        for i in long_ix:
            blocks, bounds, starts, _ = per_term[i]
            if not starts:
                continue
            while ptr[i] + 1 < len(starts) and starts[ptr[i] + 1] <= lo:
                ptr[i] += 1
            if starts[ptr[i]] <= lo:
                ub += bounds[ptr[i]]
                cover.append((i, ptr[i]))
        best_known = 0.0
        while sp < len(known_docs) and known_docs[sp] < lo:
            sp += 1
        q = sp
        while q < len(known_docs) and known_docs[q] < hi:
            best_known = max(best_known, known[known_docs[q]])
            q += 1
        if cover and ub + best_known >= theta:
            for i, bi in cover:
                fetch[i].add(bi)
    # Exactness: every doc of the exhaustive top K lies in fetched blocks of every long list
    # holding it (so its score is complete); every doc left out has an upper bound < theta.
    # direct check: recompute scores from fetched data only and compare the top K
    part, order = {}, []
    for i, t in enumerate(terms):
        if i in long_ix:
            blocks, _, _, sub = per_term[i]
            got = {t["docs"][p]: t["imp"][p] for p in champs[i]}
            for bi in fetch[i]:
                for p in range(blocks[bi][0], blocks[bi][1]):
                    got[sub["docs"][p]] = sub["imp"][p]
            pairs = sorted(got.items())
        else:
            pairs = zip(t["docs"], t["imp"])
        for d, x in pairs:
            if d not in part:
                part[d] = 0.0
                order.append(d)
            part[d] = f32add(part[d], x)
    pruned = top_k([(d, part[d]) for d in order], K)
    exact = pruned == plain[:K]
    byts = pages = 0
    for i in long_ix:
        blocks = per_term[i][0]
        for bi in fetch[i]:
            byts += HEADER + deflated(blocks[bi][2])
            pages += 1
    return {
        "bytes": byts, "pages": pages, "meta_raw": meta_raw, "meta": meta_st,
        "theta": theta, "exact": exact,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump")
    ap.add_argument("--today")
    ap.add_argument("--json")
    ap.add_argument("--layouts", default="bm:256:64,bm:512:64,bm:1024:64,bm:4096:64,bm:512:0,bm:512:16,bm:512:256")
    ap.add_argument("--limit", type=int, default=0)
    args = ap.parse_args()
    today = []
    if args.today:
        for line in open(args.today):
            if line.startswith("fetch: rounds"):
                o = 0
                for part in line.split("[")[1].split("]")[0].split():
                    k, v = part.split(":")
                    if k == "o":
                        o = int(v.split("/")[1])
                total = int(line.split(" bytes ")[1].split()[0])
                rounds = int(line.split()[2])
                today.append((o, total, rounds))
    layouts = [tuple(x.split(":")) for x in args.layouts.split(",")]
    rows = []
    bad_plain = bad_top = 0
    for qi, line in enumerate(open(args.dump)):
        if args.limit and qi >= args.limit:
            break
        r = json.loads(line)
        score, plain = exhaustive(r)
        if [(d, s) for d, s in plain] != [tuple(x) for x in r["plain"]]:
            bad_plain += 1
        top = final_top(r, plain)
        if [(d, s) for d, s in top] != [tuple(x) for x in r["top"]]:
            bad_top += 1
        cache = {}
        row = {"q": r["q"], "terms": len(r["terms"]),
               "long": sum(t["bytes"] > INLINE_MAX for t in r["terms"]),
               "postings": sum(len(t["docs"]) for t in r["terms"])}
        wb = [whole_bytes(t) for t in r["terms"] if t["bytes"] > INLINE_MAX]
        row["whole"] = {"bytes": sum(x[0] for x in wb), "pages": sum(x[1] for x in wb)}
        if today:
            row["today_o"], row["today_total"], row["today_rounds"] = today[qi]
        for lay in layouts:
            _, target, C = lay
            for K in (PHRASE_DEPTH, 10):
                res = simulate(r, score, plain, int(target), int(C), K, cache)
                row[f"bm:{target}:{C}:K{K}"] = res
        rows.append(row)
        print(qi, row["q"][:50], row["whole"]["bytes"],
              {k: v["bytes"] + v["meta"] for k, v in row.items() if k.startswith("bm:")}, file=sys.stderr)
    n = len(rows)
    print(f"queries {n}; recomputed plain top 200 differs from the engine's on {bad_plain}, "
          f"final top 10 differs from search::bm25 on {bad_top}")

    def stat(xs):
        xs = list(xs)
        return f"median {statistics.median(xs)/1000:.1f} kB, mean {statistics.mean(xs)/1000:.1f} kB, p90 {sorted(xs)[int(0.9*len(xs))-1]/1000:.1f} kB"

    if today:
        print("today measured o pages:", stat(r["today_o"] for r in rows))
        print("today measured all pages:", stat(r["today_total"] for r in rows))
    print("whole lists (simulated):", stat(r["whole"]["bytes"] for r in rows))
    for key in [k for k in rows[0] if k.startswith("bm:")]:
        ex = sum(r[key]["exact"] for r in rows)
        print(f"{key}: blocks {stat(r[key]['bytes'] for r in rows)}; + entry metadata {stat(r[key]['meta'] for r in rows)};"
              f" total {stat(r[key]['bytes'] + r[key]['meta'] for r in rows)}; pages median {statistics.median(r[key]['pages'] for r in rows)}; exact {ex}/{n}")
    if args.json:
        json.dump(rows, open(args.json, "w"))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Prototype measurements for docs/design/query-model-pack.md (issue 13): sizes only, nothing here
is used by the product. Needs a venv with `tokenizers` (Python), the model (models/e5-small) and
the eval sets (JIKJI_SHARED, default ../shared).

Usage: scripts/prototype-query-model-pack.py rows|tok|hot [SETS (comma-separated)] [ROWS_PER_PAGE,...]
  rows  distinct token rows per query; pages per query (cold) and new pages per later query when
        the word table's rows are grouped by frequency in the set's corpus vs by token id
  tok   piece-table sizes (raw/gzip), and the bytes of piece groups (by first code point) a query needs
  hot   the per-bundle hot-row list's size (u32 in frequency order; sorted delta-varint set)
"""
import collections, json, lzma, os, statistics as st, struct, sys, zlib

from tokenizers import Tokenizer

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL = os.environ.get("JIKJI_MODEL_DIR", os.path.join(ROOT, "models/e5-small"))
SHARED = os.environ.get("JIKJI_SHARED", os.path.join(ROOT, "../shared"))
ALL = "scifact,xquad-en,xquad-zh,korquad-dev,classical-zh-dev,cmrc2018-dev,xquad-zh2en-mixed"
ROW = 12 * 18  # one Q4_0 row of 384 weights
tok = Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
tok.no_padding()
tok.no_truncation()


def ids(texts, prefix):
    out = []
    for i in range(0, len(texts), 256):
        out += [e.ids[:512] for e in tok.encode_batch([prefix + t for t in texts[i : i + 256]])]
    return out


def load(s):
    qs = [json.loads(l)["text"] for l in open(f"{SHARED}/eval/{s}/queries.jsonl")]
    cs = [json.loads(l) for l in open(f"{SHARED}/eval/{s}/corpus.jsonl")]
    return qs, [(c.get("title") or "") + " " + c.get("text", "") for c in cs]


def rows(sets, rpp):
    allq = []
    for s in sets:
        qs, ctext = load(s)
        qids, cids = ids(qs, "query: "), ids(ctext, "passage: ")
        freq = collections.Counter(i for x in cids for i in x)
        distinct = [len(set(x)) for x in qids]
        allq += distinct
        print(f"{s}: {len(qs)} queries, {len(ctext)} passages, corpus distinct tokens {len(freq)}; "
              f"distinct rows/query mean {st.mean(distinct):.1f} p50 {st.median(distinct)} max {max(distinct)}")
        order = [i for i, _ in freq.most_common()]
        seen = set(order)
        order += [i for i in range(250002) if i not in seen]
        pos = {t: k for k, t in enumerate(order)}
        for r in rpp:
            for name, key in (("freq", lambda t: pos[t] // r), ("id", lambda t: t // r)):
                pages = [len({key(t) for t in x}) for x in qids]
                cache, new = set(), []
                for x in qids:
                    p = {key(t) for t in x}
                    new.append(len(p - cache))
                    cache |= p
                print(f"  rows/page {r:4d} ({r*ROW/1024:.1f} kB) order={name}: cold pages/query mean "
                      f"{st.mean(pages):.2f} -> {st.mean(pages)*r*ROW/1024:.1f} kB; later queries new "
                      f"{st.mean(new[1:])*r*ROW/1024:.2f} kB/query; all cached {len(cache)*r*ROW/1e6:.2f} MB")
    print(f"all: distinct rows/query mean {st.mean(allq):.1f} p50 {st.median(allq)} "
          f"p90 {sorted(allq)[int(.9*len(allq))]} max {max(allq)}")


def tokenizer(sets):
    t = json.load(open(os.path.join(MODEL, "tokenizer.json")))
    pieces = [p for p, _ in t["model"]["vocab"]]
    scores = [s for _, s in t["model"]["vocab"]]
    blob = "\n".join(pieces).encode()
    print(f"pieces {len(pieces)}: UTF-8 {len(blob)} B, gzip {len(zlib.compress(blob, 9))}, xz {len(lzma.compress(blob))}")
    sc = struct.pack(f"<{len(scores)}f", *scores)
    print(f"scores f32 {len(sc)} B, gzip {len(zlib.compress(sc, 9))}")
    sb = "\n".join(sorted(pieces, key=lambda p: p.encode())).encode()
    print(f"sorted pieces gzip {len(zlib.compress(sb, 9))}")
    key = lambda p: p[:2] if p.startswith("\u2581") and len(p) > 1 else p[:1]
    gbytes = collections.Counter()
    for p in pieces:
        gbytes[key(p)] += len(p.encode()) + 1 + 4 + 3
    for s in sets:
        qs, _ = load(s)
        need = []
        for q in qs:
            n = "\u2581" + tok.normalizer.normalize_str("query: " + q).replace(" ", "\u2581")
            keys = {n[i : i + 2] for i, ch in enumerate(n) if ch == "\u2581"} | set(n)
            need.append(sum(gbytes.get(k, 0) for k in keys))
        print(f"{s}: piece groups a query needs mean {st.mean(need)/1024:.1f} kB, max {max(need)/1024:.1f}")


def hot(sets):
    for s in sets:
        _, ctext = load(s)
        freq = collections.Counter(i for x in ids(ctext, "passage: ") for i in x)
        h = [i for i, _ in freq.most_common()]
        raw = struct.pack(f"<{len(h)}I", *h)
        delta, prev = bytearray(), 0
        for b in sorted(h):
            d, prev = b - prev, b
            while d >= 128:
                delta.append(d & 127 | 128)
                d >>= 7
            delta.append(d)
        print(f"{s}: {len(h)} hot ids; u32 {len(raw)} B, deflate {len(zlib.compress(raw, 9))}; "
              f"sorted delta-varint {len(delta)} B, deflate {len(zlib.compress(bytes(delta), 9))}")


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "rows"
    sets = (sys.argv[2] if len(sys.argv) > 2 else ALL).split(",")
    if what == "rows":
        rows(sets, [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "1,16,64").split(",")])
    elif what == "tok":
        tokenizer(sets)
    elif what == "hot":
        hot(sets)
    else:
        sys.exit(__doc__)

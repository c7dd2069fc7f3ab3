"""A second, "common-word" null per bundle for the score bands (issue 19, session 30).

The engine's null cap (builder/src/calibrate.rs `off_topic_queries`, study-bands.py's `off_topic`)
searches off-topic pseudo-queries built from CONTENT words of the bundle: for BM25 that null sits
high, so it cannot tell a right answer with low word overlap from a real unanswerable question.
This script builds a second null sample that looks like real questions about other things:
the same question templates per language (study-bands.py TEMPLATES) around 3-6 COMMON words of
the bundle's own corpus (the top ~5 % of its words by document frequency; Chinese: Han bigrams)
plus 1-2 words the bundle does not hold (a common word reversed, re-drawn until the reversal is
not a word of the bundle). Label-free: only the bundle's corpus.jsonl is read.

    python3 scripts/study-common-null.py gen SET OUT [N=450] [SEED=30]
        writes OUT/queries.jsonl (ids cn0..), OUT/qrels.tsv (every qrel a non-existent doc),
        OUT/corpus.jsonl -> SET's; run it with
        jikji eval SET --queries OUT/queries.jsonl --unanswerable --modes bm25,dense,hybrid
            --fusion weighted --cache C --hits-out NULLDIR/<set>.jsonl
    python3 scripts/study-common-null.py eval DIR NULLDIR
        DIR: the sweep's 13 hits files (/work/w/sweep-main); NULLDIR/<bundle>.jsonl: the common
        null's hits per bundle. Prints per bundle and mode the common null's top-1 quantiles
        against the real unanswerable runs' (the content null's threshold beside them), then the
        87 checks (study-bands.py `checks`) for every (Qc, lift) variant of the 3-band map:
          s > T (the engine's content-null threshold at Q = 0.95, as the builder stored it):
              unchanged (the engine did not cap it);
          s <= T and s <= Qc-quantile of the common null: min(s, 0.29)  (-> "< 0.3");
          s <= T and s >  Qc-quantile of the common null: max(s, L)     (-> the middle band;
              capped top-1s are already <= 0.59).
        MODES=bm25 restricts the map to those modes (the others keep the files' scores);
        QCS=0.90,0.95,0.99 and LIFTS=0.30,0.35,0.45 (defaults) set the grid; BEST=label picks the
        variant whose per-run table is printed (default: the fewest misses).
"""
import glob, importlib.util, json, math, os, sys
from collections import Counter
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("study_bands", os.path.join(HERE, "study-bands.py"))
sb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sb)

# Content-null thresholds at Q = 0.95 as the builder stored them (docs/quality.md, null cap):
# BM25, dense, weighted hybrid.
CONTENT_NULL = {
    "xquad-en": (0.822, 0.561, 0.804), "xquad-zh": (0.961, 0.359, 0.977),
    "xquad-zh2en-mixed": (0.792, 0.331, 0.497), "cmrc2018-dev": (0.920, 0.337, 0.923),
    "classical-zh-dev": (0.886, 0.496, 0.906), "korquad-dev": (0.682, 0.376, 0.709),
    "scifact": (0.431, 0.323, 0.469),
}
MODE_IX = {"bm25": 0, "dense": 1, "hybrid": 2}
TOP_SHARE = 0.05  # the pool: the top 5 % of the bundle's words by document frequency


def units(text, lang):
    """The 'words' of a text: Han bigrams for Chinese, whitespace words (>= 3 chars, >= 2 for
    Korean) for the others."""
    if lang == "zh":
        h = [c for c in text if sb.is_han(c)]
        return ["".join(h[i:i + 2]) for i in range(len(h) - 1)]
    return [w.lower() if lang == "en" else w for w in sb.words_of(text)
            if len(w) >= (2 if lang == "ko" else 3) and not any(ch.isdigit() for ch in w)]


def make_common(setdir, out, n=450, seed=30):
    docs = [json.loads(l) for l in open(f"{setdir}/corpus.jsonl", encoding="utf-8") if l.strip()]
    texts = [(d.get("title") or "") + "\n" + (d.get("text") or "") for d in docs]
    langs = [sb.lang_of((d.get("text") or "")[:400]) for d in docs]
    pools, vocab = {}, {}
    for lang in sorted(set(langs)):
        df = Counter()
        for t, l in zip(texts, langs):
            if l == lang:
                df.update(set(units(t, lang)))
        vocab[lang] = set(df)
        ranked = [w for w, c in df.most_common() if c >= 2]
        k = max(50, int(len(ranked) * TOP_SHARE))
        pools[lang] = ranked[:k]
    # every vocabulary of the bundle, any language: a garbled word must be unknown to all of them
    allv = set().union(*vocab.values())
    os.makedirs(out, exist_ok=True)
    link = f"{out}/corpus.jsonl"
    if not os.path.exists(link):
        os.symlink(os.path.abspath(f"{setdir}/corpus.jsonl"), link)
    r = sb.Rng(seed)
    qs = []
    for j in range(n):
        lang = langs[r(len(langs))]  # languages in the bundle's proportions
        while len(pools[lang]) < 20:  # a language with a handful of passages: another draw
            lang = langs[r(len(langs))]
        pool = pools[lang]
        words = [pool[r(len(pool))] for _ in range(3 + r(4))]
        for _ in range(1 + r(2)):
            for _try in range(50):
                g = pool[r(len(pool))][::-1]
                if g not in allv and (lang != "zh" or all(g[i:i + 2] not in allv for i in range(len(g) - 1))):
                    break
            else:
                g = "".join(pool[r(len(pool))][::-1] for _ in range(2))
            words.insert(r(len(words) + 1), g)
        t0, t1 = sb.TEMPLATES[lang][r(len(sb.TEMPLATES[lang]))]
        qs.append((f"cn{j}", t0 + ("" if lang == "zh" else " ").join(words) + t1))
    with open(f"{out}/queries.jsonl", "w", encoding="utf-8") as f:
        for q, t in qs:
            f.write(json.dumps({"id": q, "text": t}, ensure_ascii=False) + "\n")
    with open(f"{out}/qrels.tsv", "w", encoding="utf-8") as f:
        for q, _ in qs:
            f.write(f"{q}\t(none)\t1\n")
    print(f"{out}: {len(qs)} common-word queries; pools " +
          ", ".join(f"{l} {len(p)} of {len(vocab[l])}" for l, p in pools.items()))
    for q, t in qs[:6]:
        print("  ", q, t)


def null_top1(nd):
    out = {}
    for p in sorted(glob.glob(f"{nd}/*.jsonl")):
        bundle = os.path.basename(p)[:-6]
        for line in open(p, encoding="utf-8"):
            r = json.loads(line)
            if r["hits"]:
                out.setdefault((bundle, r["mode"].split("-")[0]), []).append(r["hits"][0][1])
    return {k: np.sort(np.array(v)) for k, v in out.items()}


def band_share(s):
    s = np.asarray(s)
    return (float((s < 0.3).mean()), float(((s >= 0.3) & (s < 0.6)).mean()), float((s >= 0.6).mean()))


def three_band(s, T, thr_c, lift):
    s = np.asarray(s, float).copy()
    capped = s <= T
    lo = capped & (s <= thr_c)
    mid = capped & (s > thr_c)
    s[lo] = np.minimum(s[lo], 0.29)
    s[mid] = np.maximum(s[mid], lift)
    return s


def evaluate(d, nd):
    sb.D = d
    runs = sb.load()
    nulls = null_top1(nd)
    only = os.environ.get("MODES")
    data = []  # (name, mode key, run, s0, y)
    for (name, mode), v in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows = [r for r in v["rows"] if r["hits"]]
        s0 = np.array([r["hits"][0][1] for r in rows])
        y = np.array([(not v["unans"]) and r["hits"][0][4] > 0 for r in rows])
        data.append((name, mode.split("-")[0], v, s0, y))

    print("== common-word null vs the content null's threshold T (Q = 0.95) and the real unanswerable runs' top-1")
    for (b, m), v in sorted(nulls.items()):
        T = CONTENT_NULL[b][MODE_IX[m]]
        q = np.quantile(v, [0.5, 0.9, 0.95, 0.99])
        un = [s0 for name, mk, run, s0, y in data if run["unans"] and run["bundle"] == b and mk == m]
        uns = "  ".join(f"unans({len(u)}) q50 {np.quantile(u, .5):.3f} q95 {np.quantile(u, .95):.3f}" for u in un) or "no unanswerable run"
        own = [(s0, y) for name, mk, run, s0, y in data if name == b and mk == m]
        extra = ""
        if own:
            s0, y = own[0]
            r = s0[y]
            extra = (f"  own right top-1s: q50 {np.quantile(r, .5):.3f}, {int((r <= T).sum())}/{len(r)} <= T, "
                     f"{int(((r <= T) & (r > q[2])).sum())} of them > common q95; AUC right vs common {sb.auc(r, v):.3f}"
                     + "".join(f", vs unans {sb.auc(r, u):.3f}" for u in un))
        print(f"{b:18} {m:6} T {T:.3f}  common n={len(v)} q50 {q[0]:.3f} q90 {q[1]:.3f} q95 {q[2]:.3f} q99 {q[3]:.3f} max {v[-1]:.3f}  "
              f"(> T: {int((v > T).sum())})  |  {uns}{extra}")

    print("\n== right top-1s in the '< 0.3' band (files' scores) against their bundle's common-word null (BM25, hybrid)")
    for name, mk, run, s0, y in data:
        if run["unans"] or mk == "dense" or (run["bundle"], mk) not in nulls:
            continue
        lo = s0 < 0.3; r = s0[lo & y]; w = s0[lo & ~y]
        q50, q95 = np.quantile(nulls[(run["bundle"], mk)], [.5, .95])
        if len(r):
            print(f"{mk:6} {name:22} right {len(r):5} wrong {len(w):4}: right <= common q50 {np.mean(r <= q50):.2f}, <= q95 "
                  f"{np.mean(r <= q95):.2f}; median right {np.median(r):.3f} wrong {np.median(w) if len(w) else float('nan'):.3f}; "
                  f"common q50 {q50:.3f} q95 {q95:.3f}")

    qcs = [float(x) for x in os.environ.get("QCS", "0.90,0.95,0.99").split(",")]
    lifts = [float(x) for x in os.environ.get("LIFTS", "0.30,0.35,0.45").split(",")]
    variants = [("base", None, None)] + [(f"Qc={qc} L={L}", qc, L) for qc in qcs for L in lifts]
    results = {}
    for label, qc, L in variants:
        miss = {"bm25": 0, "dense": 0, "hybrid": 0}
        rows = {}
        un_sh = {}
        moves = {}
        for name, mk, run, s0, y in data:
            null = nulls.get((run["bundle"], mk))
            if qc is None or null is None or (only and mk not in only.split(",")):
                s1 = s0
            else:
                T = CONTENT_NULL[run["bundle"]][MODE_IX[mk]]
                s1 = three_band(s0, T, float(np.quantile(null, qc)), L)
            c = sb.checks(s1, y, run["unans"])
            ok = [bool(c["ok"])] if run["unans"] else None
            if not run["unans"]:
                hi = s1 >= 0.6; lo = s1 < 0.3
                bins = np.minimum((np.clip(s1, 0, 1) * 10).astype(int), 9)
                ok = [not hi.any() or y[hi].mean() >= 0.9, not lo.any() or y[lo].mean() <= 0.3, c["ece"] <= 0.10]
            miss[mk] += sum(1 for o in ok if not o)
            rows[(name, mk)] = (c, ok)
            if run["unans"]:
                un_sh.setdefault(mk, []).append(s1)
            # band moves: who crosses 0.3 (right answers, wrong answerable top-1s, unanswerable)
            kind = np.where(run["unans"], 2, np.where(y, 0, 1)) if len(y) else np.array([], int)
            up = (s0 < 0.3) & (s1 >= 0.3); down = (s0 >= 0.3) & (s1 < 0.3)
            mv = moves.setdefault(mk, np.zeros((3, 2), int))
            for k in range(3):
                mv[k, 0] += int((up & (kind == k)).sum()); mv[k, 1] += int((down & (kind == k)).sum())
        results[label] = (miss, rows, {m: band_share(np.concatenate(v)) for m, v in un_sh.items()}, moves)

    print("\n== missed checks of the 87 (BM25, dense, hybrid); unanswerable runs' top-1 shares < 0.3 / 0.3-0.6 / >= 0.6 per mode")
    base_rows = results["base"][1]
    for label, (miss, rows, sh, mv) in results.items():
        shs = "  ".join(f"{m} {a:.3f}/{b:.3f}/{c:.3f}" for m, (a, b, c) in sorted(sh.items()))
        print(f"{label:16} misses {sum(miss.values()):3} {miss}   unans {shs}")
    print("\n== top-1s crossing 0.3, all runs, per mode: up (< 0.3 -> >= 0.3) / down; right answers, wrong answerable, unanswerable")
    for label, (miss, rows, sh, mv) in results.items():
        if label == "base":
            continue
        print(f"{label:16} " + "  ".join(f"{m}: right +{v[0,0]}/-{v[0,1]} wrong +{v[1,0]}/-{v[1,1]} unans +{v[2,0]}/-{v[2,1]}" for m, v in sorted(mv.items())))
    names = ["hi", "lo", "ece"]
    for label, (miss, rows, sh, mv) in results.items():
        if label == "base":
            continue
        ch = []
        for k, (c, ok) in rows.items():
            c0, ok0 = base_rows[k]
            for i, (a, b) in enumerate(zip(ok0, ok)):
                if a != b:
                    what = "unans>=0.6" if len(ok) == 1 else names[i]
                    ch.append(f"{k[1]} {k[0]} {what} {'fixed' if b else 'LOST'}")
        print(f"\n-- {label}: {len(ch)} checks changed")
        for x in ch:
            print("   ", x)
    best = os.environ.get("BEST") or min((l for l in results if l != "base"), key=lambda l: sum(results[l][0].values()))
    for lab in ("base", best):
        print(f"\n== {lab} per run")
        for (name, mk), (c, ok) in results[lab][1].items():
            if only and mk not in only.split(","):
                continue
            print(f"{mk:7} {name:36} {c}")
    print("\n== unanswerable runs per variant, per run: share of top-1s in 0.3-0.6 (base -> variant)")
    for label in results:
        if label == "base":
            continue
        out = []
        for name, mk, run, s0, y in data:
            if not run["unans"]:
                continue
            null = nulls.get((run["bundle"], mk))
            if null is None or (only and mk not in only.split(",")):
                continue
            qc, L = [v for v in variants if v[0] == label][0][1:]
            s1 = three_band(s0, CONTENT_NULL[run["bundle"]][MODE_IX[mk]], float(np.quantile(null, qc)), L)
            out.append(f"{mk}:{name[3:]} {band_share(s0)[1]:.3f}->{band_share(s1)[1]:.3f}")
        print(f"{label:16}", "  ".join(out))


if __name__ == "__main__":
    if sys.argv[1] == "gen":
        make_common(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 450,
                    int(sys.argv[5]) if len(sys.argv) > 5 else 30)
    elif sys.argv[1] == "eval":
        evaluate(sys.argv[2], sys.argv[3])

"""Score bands against the readers' protocol (issue 19), and one candidate fix measured honestly.

Reads a folder of `jikji eval --modes bm25,dense,hybrid --hits-out DIR/<run>.jsonl` files (one
line per query and mode: {"mode","qid","q","nrel","hits":[[docid, score, raw_score, source,
grade], ...]}); a run is named BUNDLE (the set's own queries), BUNDLE@QUERIES (another set's
queries with qrels, e.g. xquad-en@xquad-zh) or un@QUERIES@BUNDLE (`--unanswerable`).

For every run and mode it prints the checks of issue 19 for the bundle's own calibrated scores
("base": >= 0.6 band >= 90 % right, < 0.3 band <= 30 % right, top-1 ECE <= 0.10 over 10 bins;
unanswerable: <= 1 % of top-1s >= 0.6) and for a second-stage score: a logistic regression on
features of the ranked list that do not depend on the bundle's size or the query's length in
raw units (the bundle's calibrated logit of the top hit, its margin over the first hit of
another file, its z-score within the top 30, log query length), fitted leave-one-bundle-out:
on every run whose bundle and queries are both other than the held-out run's (each run weighs
the same; unanswerable runs UW times; korquad-dev, internal, never in a fit). NF=2 keeps only
the first two features. Prints the total of missed checks for both.

    UW=3 NF=4 python3 scripts/study-bands.py DIR     (numpy)
"""
import glob, json, math, os, sys
import numpy as np

D = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "pseudo" else "target/bands"
INTERNAL = {"korquad-dev"}  # never in shipped coefficients; evaluated only


def load():
    runs = {}
    for p in sorted(glob.glob(f"{D}/*.jsonl")):
        name = os.path.basename(p)[:-6]
        if name.startswith("un@"):
            _, qs, bundle = name.split("@")
            unans = True
        elif "@" in name:
            bundle, qs = name.split("@")
            unans = False
        else:
            bundle, qs, unans = name, name, False
        for line in open(p, encoding="utf-8"):
            r = json.loads(line)
            runs.setdefault((name, r["mode"]), dict(bundle=bundle, queries=qs, unans=unans, rows=[]))["rows"].append(r)
    return runs


def feats(r, mode):
    h = r["hits"]
    if not h:
        return None
    s1 = min(max(h[0][1], 1e-4), 1 - 1e-4)
    raw = np.array([x[2] for x in h], dtype=float)
    src0 = h[0][3]
    other = [x[2] for x in h[1:] if x[3] != src0]
    r2 = other[0] if other else (raw[-1] if len(raw) > 1 else 0.0)
    rest = raw[1:] if len(raw) > 2 else np.array([0.0, 0.0])
    z = (raw[0] - rest.mean()) / (rest.std() + 1e-6)
    if mode.startswith("dense"):
        m = (raw[0] - r2) * 10.0
    elif mode.startswith("hybrid"):
        m = (raw[0] - r2) * 5.0
    else:
        m = math.log((raw[0] + 1e-6) / (r2 + 1e-6))
    qlen = len(r["q"])
    f = [math.log(s1 / (1 - s1)), m, min(z, 20.0) / 5.0, math.log(1 + qlen) / 3.0]
    k = int(os.environ.get("NF", "4"))
    return f[:k]


def fit_logistic(X, y, w, l2=1e-2, iters=50):
    X1 = np.hstack([X, np.ones((len(X), 1))])
    b = np.zeros(X1.shape[1])
    for _ in range(iters):
        p = 1 / (1 + np.exp(-X1 @ b))
        g = X1.T @ (w * (p - y)) + l2 * b
        H = (X1 * (w * p * (1 - p))[:, None]).T @ X1 + l2 * np.eye(len(b))
        step = np.linalg.solve(H, g)
        b -= step
        if np.abs(step).max() < 1e-8:
            break
    return b


def apply(b, X):
    return 1 / (1 + np.exp(-(np.hstack([X, np.ones((len(X), 1))]) @ b)))


def checks(s, y, unans):
    s = np.asarray(s); y = np.asarray(y, dtype=bool)
    if unans:
        share = float((s >= 0.6).mean())
        return dict(n=len(s), hi=round(share, 4), ok=bool(share <= 0.01))
    hi = s >= 0.6; lo = s < 0.3
    p_hi = y[hi].mean() if hi.any() else float("nan")
    p_lo = y[lo].mean() if lo.any() else float("nan")
    bins = np.minimum((np.clip(s, 0, 1) * 10).astype(int), 9)
    ece = sum(abs(s[bins == i].mean() - y[bins == i].mean()) * (bins == i).sum() for i in range(10) if (bins == i).any()) / len(s)
    ok = [not hi.any() or p_hi >= 0.9, not lo.any() or p_lo <= 0.3, ece <= 0.10]
    return dict(n=len(s), hi=f"{int(y[hi].sum())}/{int(hi.sum())}", lo=f"{int(y[lo].sum())}/{int(lo.sum())}",
                mid=f"{int(y[~hi & ~lo].sum())}/{int((~hi & ~lo).sum())}", ece=round(float(ece), 3), ok=int(sum(ok)), of=3)


# ---------------------------------------------------------------------------------------------
# Question-like pseudo-queries (issue 19, session 16): `study-bands.py pseudo SET OUT [N]` writes an
# eval-set folder OUT (corpus.jsonl linked to SET's, queries.jsonl, qrels.tsv) whose queries are
# drawn from the corpus alone, no labels: N answerable ones (a span of a passage with words
# dropped and replaced by words of another passage of the bundle, framed by a question template of
# the passage's language; qrels: the passage) and N/2 off-topic ones (the same templates around
# 3-6 words drawn from unrelated passages, one of them made unknown to the dictionary by reversing
# it; qrels: a document that does not exist, so every top-1 is wrong). `jikji eval OUT
# --hits-out DIR/pq@BUNDLE.jsonl` then gives their ranked lists as the engine scores them.

TEMPLATES = {
    "en": [("What ", "?"), ("Which ", "?"), ("Who ", "?"), ("When did ", "?"), ("How many ", "?"),
           ("Where ", "?"), ("Why ", "?"), ("What is the ", "?"), ("", "."), ("", "?")],
    "zh": [("", "是什么？"), ("", "是哪个？"), ("", "是谁？"), ("", "有多少？"), ("", "在哪里？"),
           ("为什么", "？"), ("", "的是什么？"), ("", "。")],
    "ko": [("", "은 무엇인가?"), ("", "은 누구인가?"), ("", "은 언제인가?"), ("", "은?"),
           ("", "는 어디인가?"), ("", " 몇 개인가?")],
}
QWORDS_ZH = ["什么", "哪个", "谁", "多少", "哪里", "何时", "哪些"]


def mix(x):
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


class Rng:
    def __init__(self, seed):
        self.s = mix(seed)

    def __call__(self, n):
        self.s = mix(self.s)
        return self.s % max(n, 1)


def is_han(c):
    o = ord(c)
    return 0x3400 <= o <= 0x9FFF or 0xF900 <= o <= 0xFAFF or 0x20000 <= o <= 0x2FA1F


def is_hangul(c):
    return 0xAC00 <= ord(c) <= 0xD7A3


def lang_of(t):
    han = sum(map(is_han, t)); hg = sum(map(is_hangul, t)); al = sum(c.isalnum() for c in t) or 1
    return "zh" if han * 2 > al else "ko" if hg * 2 > al else "en"


def sentences(t, lang):
    import re
    parts = re.split(r"(?<=[.!?。！？；;])\s*|\n+", t)
    return [p.strip() for p in parts if len(p.strip()) >= (12 if lang != "en" else 30)]


def words_of(t):
    return [w.strip(".,;:!?()[]\"'“”‘’") for w in t.split() if w.strip(".,;:!?()[]\"'“”‘’")]


def question(text, other, lang, r):
    """An answerable question-like query from `text`, words replaced from `other`."""
    sents = sentences(text, lang)
    if not sents:
        return None
    s = sents[r(len(sents))]
    t0, t1 = TEMPLATES[lang][r(len(TEMPLATES[lang]))]
    if lang == "zh":
        han = [c for c in s if is_han(c) or c.isalnum()]
        if len(han) < 10:
            return None
        n = min(len(han), 10 + r(11))
        a = r(len(han) - n + 1)
        span = han[a:a + n]
        # The "answer": a 2-4 character piece replaced by a question word, then a few
        # characters dropped and a bigram of another passage put in.
        k = 2 + r(3); at = r(max(len(span) - k, 1))
        span = span[:at] + list(QWORDS_ZH[r(len(QWORDS_ZH))]) + span[at + k:]
        span = [c for c in span if r(10) >= 1]
        oh = [c for c in other if is_han(c)]
        if len(oh) > 2 and r(2) == 0:
            at = r(len(span) + 1); b = r(len(oh) - 1)
            span = span[:at] + oh[b:b + 2] + span[at:]
        return t0 + "".join(span) + (t1 if r(2) == 0 else "？")
    w = words_of(s)
    if len(w) < 5:
        return None
    lo, spread = (5, 5) if lang == "ko" else (6, 9)
    n = min(len(w), lo + r(spread))
    a = r(len(w) - n + 1)
    span = w[a:a + n]
    kept = [x for x in span if r(10) < 6]
    if len(kept) < 3:
        kept = span[:3]
    ow = [x for x in words_of(other) if len(x) >= 3]
    for _ in range(1 + r(2)):
        if ow:
            if r(2) == 0 and len(kept) > 3:
                kept[r(len(kept))] = ow[r(len(ow))]
            else:
                kept.insert(r(len(kept) + 1), ow[r(len(ow))])
    return t0 + " ".join(kept) + t1


def off_topic(texts, lang, r):
    """A question about nothing the bundle holds: template around 3-6 words of random
    passages, one reversed (unknown to the dictionary)."""
    pieces = []
    for _ in range(3 + r(4)):
        t = texts[r(len(texts))]
        if lang == "zh":
            h = [c for c in t if is_han(c)]
            if len(h) >= 3:
                b = r(len(h) - 2); pieces.append("".join(h[b:b + 2 + r(2)]))
        else:
            w = [x for x in words_of(t) if len(x) >= 3]
            if w:
                pieces.append(w[r(len(w))])
    if len(pieces) < 2:
        return None
    i = r(len(pieces)); pieces[i] = pieces[i][::-1]
    t0, t1 = TEMPLATES[lang][r(len(TEMPLATES[lang]))]
    return t0 + ("" if lang == "zh" else " ").join(pieces) + t1


def make_pseudo(setdir, out, n=300):
    docs = [json.loads(l) for l in open(f"{setdir}/corpus.jsonl", encoding="utf-8") if l.strip()]
    docs = [(str(d.get("id", d.get("_id"))), (d.get("text") or "")) for d in docs]
    langs = [lang_of(t[:400]) for _, t in docs]
    os.makedirs(out, exist_ok=True)
    link = f"{out}/corpus.jsonl"
    if not os.path.exists(link):
        os.symlink(os.path.abspath(f"{setdir}/corpus.jsonl"), link)
    qs, qrels = [], []
    by_lang = {}
    for i, l in enumerate(langs):
        by_lang.setdefault(l, []).append(i)
    for j in range(n):
        i = j * len(docs) // n if n <= len(docs) else j % len(docs)
        r = Rng(i ^ (j << 20))
        same = by_lang[langs[i]]
        o = same[r(len(same))]
        q = question(docs[i][1], docs[o][1], langs[i], r)
        if q:
            qs.append((f"pq{j}", q)); qrels.append((f"pq{j}", docs[i][0]))
        if j % 2 == 0:
            q = off_topic([docs[k][1] for k in (same[r(len(same))] for _ in range(3))], langs[i], r)
            if q:
                qs.append((f"pn{j}", q)); qrels.append((f"pn{j}", "(none)"))
    with open(f"{out}/queries.jsonl", "w", encoding="utf-8") as f:
        for q, t in qs:
            f.write(json.dumps({"id": q, "text": t}, ensure_ascii=False) + "\n")
    with open(f"{out}/qrels.tsv", "w", encoding="utf-8") as f:
        for q, d in qrels:
            f.write(f"{q}\t{d}\t1\n")
    print(f"{out}: {sum(1 for q, _ in qs if q.startswith('pq'))} questions, "
          f"{sum(1 for q, _ in qs if q.startswith('pn'))} off-topic")


# ---------------------------------------------------------------------------------------------
# Coverage study (session 16): PQ=DIR names a folder of pq@BUNDLE.jsonl hits files (`jikji eval` on
# the folder `pseudo` writes, same modes). Per run and mode it prints the AUC of each top-1 feature
# (right answers of the bundle's own answerable runs against the unanswerable runs' top-1s on that
# bundle), and the checks of a per-bundle second stage fitted on that bundle's pseudo-queries only:
# a logistic regression on FEATS (default "logit,terms,idf,unknown") of the top hit, samples: each
# question's top-1 (right iff it is its passage), the first hit of another document (as if the
# passage were gone: wrong; weight WR) and each off-topic query's top-1 (wrong; weight WO); with
# ISO=1 an isotonic (pool-adjacent-violators) map of the fitted logit instead of its sigmoid; with
# MONO=1 a feature whose slope points the wrong way (coverage down, unknown up) is dropped.

def top_feats(h, names):
    s1 = min(max(h[1], 1e-4), 1 - 1e-4)
    cov = h[5] if len(h) > 5 and h[5] is not None else [float("nan")] * 3
    allf = dict(logit=math.log(s1 / (1 - s1)), terms=cov[0], idf=cov[1], unknown=cov[2])
    return [allf[n] for n in names]


def auc(pos, neg):
    pos = np.asarray(pos, float); neg = np.asarray(neg, float)
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    allv = np.concatenate([pos, neg])
    order = allv.argsort(kind="mergesort")
    ranks = np.empty(len(allv)); ranks[order] = np.arange(1, len(allv) + 1)
    # average ranks of ties
    _, inv, cnt = np.unique(allv, return_inverse=True, return_counts=True)
    sums = np.zeros(len(cnt)); np.add.at(sums, inv, ranks)
    ranks = (sums / cnt)[inv]
    return float((ranks[:len(pos)].sum() - len(pos) * (len(pos) + 1) / 2) / (len(pos) * len(neg)))


def pav(x, y, w):
    """Isotonic (non-decreasing) fit of y on x: returns (breakpoints, values)."""
    o = np.argsort(x, kind="mergesort"); x = x[o]; y = y[o]; w = w[o]
    vals, wts, xs = [], [], []
    for xi, yi, wi in zip(x, y, w):
        vals.append(yi); wts.append(wi); xs.append(xi)
        while len(vals) > 1 and vals[-2] >= vals[-1]:
            v = (vals[-2] * wts[-2] + vals[-1] * wts[-1]) / (wts[-2] + wts[-1])
            wts[-2] += wts[-1]; vals[-2] = v; vals.pop(); wts.pop(); xs.pop()
    return np.array(xs), np.array(vals)


def iso_apply(model, z):
    xs, vals = model
    i = np.searchsorted(xs, z, side="right") - 1
    return vals[np.clip(i, 0, len(vals) - 1)]


def pseudo_samples(path, names, wr, wo):
    by_mode = {}
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        h = r["hits"]
        if not h:
            continue
        X, y, w = by_mode.setdefault(r["mode"], ([], [], []))
        if r["qid"].startswith("pn"):
            X.append(top_feats(h[0], names)); y.append(0.0); w.append(wo)
            continue
        right = h[0][4] > 0
        X.append(top_feats(h[0], names)); y.append(1.0 if right else 0.0); w.append(1.0)
        other = next((x for x in h if x[4] <= 0), None) if right else None
        if other is not None:
            X.append(top_feats(other, names)); y.append(0.0); w.append(wr)
    return {m: (np.array(X), np.array(y), np.array(w)) for m, (X, y, w) in by_mode.items()}


def study_pseudo():
    runs = load()
    names = os.environ.get("FEATS", "logit,terms,idf,unknown").split(",")
    wr = float(os.environ.get("WR", "1")); wo = float(os.environ.get("WO", "1"))
    iso = os.environ.get("ISO") == "1"
    pq = os.environ["PQ"]
    fits = {}
    for p in sorted(glob.glob(f"{pq}/pq@*.jsonl")):
        bundle = os.path.basename(p)[3:-6]
        for mode, (X, y, w) in pseudo_samples(p, names, wr, wo).items():
            ok = ~np.isnan(X).any(axis=1)
            X, y, w = X[ok], y[ok], w[ok]
            if len(X) < 20 or y.min() == y.max():
                continue
            b = fit_logistic(X, y, w / w.sum() * len(w))
            if os.environ.get("MONO") == "1":
                # Monotone: a higher score or coverage never means a worse answer, more
                # unknown terms never a better one; a feature whose slope points the wrong
                # way is dropped (coefficient 0) and the rest refitted.
                sign = {"logit": 1, "terms": 1, "idf": 1, "unknown": -1}
                keep = list(range(len(names)))
                while True:
                    bad = [i for i in keep if b[keep.index(i)] * sign[names[i]] < 0]
                    if not bad:
                        break
                    keep.remove(bad[0])
                    b = fit_logistic(X[:, keep], y, w / w.sum() * len(w))
                full = np.zeros(len(names) + 1); full[keep] = b[:-1]; full[-1] = b[-1]
                b = full
            model = pav(np.hstack([X, np.ones((len(X), 1))]) @ b, y, w) if iso else None
            fits[(bundle, mode)] = (b, model)
            auc_pq = auc((np.hstack([X, np.ones((len(X), 1))]) @ b)[y > 0], (np.hstack([X, np.ones((len(X), 1))]) @ b)[y == 0])
            print(f"fit {bundle:20} {mode:12} n={len(y)} right={int(y.sum())} coef={np.round(b, 3).tolist()} auc(pq)={auc_pq:.3f}")
    # AUCs of single features: right top-1s of answerable runs vs unanswerable top-1s per bundle.
    for mode in sorted({m for (_, m) in runs}):
        for bundle in sorted({v["bundle"] for v in runs.values()}):
            pos, neg = [], []
            for (name, m), v in runs.items():
                if m != mode or v["bundle"] != bundle:
                    continue
                for r in v["rows"]:
                    if not r["hits"]:
                        continue
                    f = top_feats(r["hits"][0], ["logit", "terms", "idf", "unknown"])
                    if v["unans"]:
                        neg.append(f)
                    elif r["hits"][0][4] > 0:
                        pos.append(f)
            if pos and neg:
                P, N = np.array(pos), np.array(neg)
                a = [auc(P[:, i], N[:, i]) for i in range(4)]
                print(f"auc {mode:12} {bundle:20} right={len(P)} unans={len(N)} logit {a[0]:.3f} terms {a[1]:.3f} idf {a[2]:.3f} unknown(1-) {1 - a[3]:.3f}")
    miss = {"base": 0, "fit": 0}
    per_mode = {}
    for (name, mode), v in sorted(runs.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        rows = [r for r in v["rows"] if r["hits"]]
        y = np.array([1.0 if (not v["unans"] and r["hits"][0][4] > 0) else 0.0 for r in rows])
        s0 = np.array([r["hits"][0][1] for r in rows])
        key = (v["bundle"], mode)
        c0 = checks(s0, y, v["unans"])
        m0 = (0 if c0["ok"] else 1) if v["unans"] else 3 - c0["ok"]
        if key in fits:
            b, model = fits[key]
            X = np.array([top_feats(r["hits"][0], names) for r in rows])
            X = np.nan_to_num(X, nan=0.0)
            z = np.hstack([X, np.ones((len(X), 1))]) @ b
            s1 = iso_apply(model, z) if model is not None else 1 / (1 + np.exp(-z))
            c1 = checks(s1, y, v["unans"])
        else:
            c1 = c0
        m1 = (0 if c1["ok"] else 1) if v["unans"] else 3 - c1["ok"]
        miss["base"] += m0; miss["fit"] += m1
        pm = per_mode.setdefault(mode, [0, 0]); pm[0] += m0; pm[1] += m1
        print(f"{mode:12} {name:40} base {c0}  |  fit {c1}")
    print("missed checks:", miss, "per mode (base, fit):", per_mode)


def main():
    runs = load()
    modes = sorted({m for (_, m) in runs})
    bundles = sorted({v["bundle"] for v in runs.values()})
    total_miss = {"base": 0, "loso": 0}
    for mode in modes:
        data = {}
        for (name, m), v in runs.items():
            if m != mode:
                continue
            X, y, s0 = [], [], []
            for r in v["rows"]:
                f = feats(r, mode)
                if f is None:
                    continue
                X.append(f); y.append(1.0 if (not v["unans"] and r["hits"][0][4] > 0) else 0.0); s0.append(r["hits"][0][1])
            data[name] = (v, np.array(X), np.array(y), np.array(s0))
        for name, (v, X, y, s0) in sorted(data.items()):
            # Train on every run whose bundle is another and whose queries are not this run's;
            # each run weighs the same in total (big sets do not dominate); internal sets out.
            TX, Ty, Tw = [], [], []
            for n2, (v2, X2, y2, _) in data.items():
                if v2["bundle"] == v["bundle"] or v2["queries"] == v["queries"] or len(X2) == 0:
                    continue
                if v2["bundle"] in INTERNAL or v2["queries"] in INTERNAL:
                    continue
                TX.append(X2); Ty.append(y2); Tw.append(np.full(len(y2), (float(os.environ.get("UW","3")) if v2["unans"] else 1.0) / len(y2)))
            b = fit_logistic(np.vstack(TX), np.concatenate(Ty), np.concatenate(Tw) * 1000)
            s1 = apply(b, X)
            c0 = checks(s0, y, v["unans"]); c1 = checks(s1, y, v["unans"])
            miss0 = (0 if c0["ok"] else 1) if v["unans"] else 3 - c0["ok"]
            miss1 = (0 if c1["ok"] else 1) if v["unans"] else 3 - c1["ok"]
            total_miss["base"] += miss0; total_miss["loso"] += miss1
            print(f"{mode:12} {name:40} base {c0}  |  loso {c1}")
    print("missed checks:", {k: int(v) for k, v in total_miss.items()})


# ---------------------------------------------------------------------------------------------
# Null-distribution study (session 17): DIR/null/null@BUNDLE.jsonl are `jikji eval OUT
# --unanswerable --hits-out` runs of off-topic queries the bundle's corpus gives by itself
# (`study-bands.py pseudo SET OUT 900`, only its `pn*` queries: question templates around 3-6 words
# of unrelated passages of the bundle, one reversed so the dictionary does not know it). Per bundle
# and mode, their top-1 calibrated scores are the bundle's null distribution: what a query that is
# about nothing in the bundle gets. Variants, each applied to the bundle's own calibrated top-1
# score s and scored on the same checks as the baseline (answerable, cross-lingual, mixed and
# unanswerable runs of every mode):
#   lift Q L:  s' = max(s, L) when s is above the null's Q-quantile (distinguishable from off-topic);
#   cap Q C:   s' = min(s, C) when s is at or under the null's Q-quantile (indistinguishable);
#   both:      lift and cap with the same Q;
#   pnull L0 L1: s' = max(s, L0 + (L1 - L0) * g) above the quantile, g = 0 at it and 1 at the null's
#              maximum (clipped: a graded lift);
#   capz C Z:  the cap only where the top hit's z-score within its own top 30 (raw scores) is < Z;
#   grad A B:  the same without the clip, s' = max(s, min(A + B * u, 0.98)), u = 0 at the quantile and
#              1 at the null's maximum, growing past it (spreads scores beyond anything off-topic).
# MODES=bm25,dense restricts a variant to those modes (others keep the baseline); NULLPART=i/k keeps
# every k-th off-topic query from the i-th on (how much the thresholds move with the sample).
# `NULL=1 study-bands.py DIR` prints every variant's missed checks (BM25, dense, hybrid) and the
# per-run table of BEST (a variant label, default the fewest misses).

def null_top1(D):
    out = {}
    for p in glob.glob(f"{D}/null/null@*.jsonl"):
        bundle = os.path.basename(p)[5:-6]
        for line in open(p, encoding="utf-8"):
            r = json.loads(line)
            if r["hits"]:
                out.setdefault((bundle, r["mode"]), []).append(r["hits"][0][1])
    part = os.environ.get("NULLPART")  # "i/k": only every k-th off-topic query from the i-th on
    if part:
        i, k = map(int, part.split("/"))
        out = {key: v[i::k] for key, v in out.items()}
    return {k: np.sort(np.array(v)) for k, v in out.items()}


def variant(kind, q, val, null):
    thr = float(np.quantile(null, q))
    def f(s):
        s = np.asarray(s, float).copy()
        above = s > thr
        if kind in ("lift", "both"):
            s[above] = np.maximum(s[above], val[0])
        if kind in ("cap", "both"):
            c = val[1] if kind == "both" else val[0]
            s[~above] = np.minimum(s[~above], c)
        if kind == "grad":
            # u = 0 at the null's Q-quantile, 1 at its maximum, on past it: s' = max(s, A + B*u), <= 0.98
            top = null[-1]
            u = (s - thr) / max(top - thr, 1e-6)
            s[above] = np.maximum(s[above], np.minimum(val[0] + val[1] * u[above], 0.98))
        if kind == "pnull":
            # graded: how far above the threshold among the null's top, 0 at thr, 1 at the null max
            top = null[-1]
            g = np.clip((s - thr) / max(top - thr, 1e-6), 0, 1)
            s[above] = np.maximum(s[above], val[0] + (val[1] - val[0]) * g[above])
        return s
    return f


def zscore(h):
    raw = np.array([x[2] for x in h], dtype=float)
    rest = raw[1:] if len(raw) > 2 else np.array([0.0, 0.0])
    return float((raw[0] - rest.mean()) / (rest.std() + 1e-6))


def study_null():
    runs = load()
    nulls = null_top1(D)
    variants = [("base", None, None)]
    for q in (0.95, 0.99, 1.0):
        for L in (0.3, 0.35, 0.45, 0.55):
            variants.append(("lift", q, (L,)))
        for C in (0.29, 0.45, 0.59):
            variants.append(("cap", q, (C,)))
        for L in (0.35, 0.45):
            for C in (0.29, 0.59):
                variants.append(("both", q, (L, C)))
        for L0, L1 in ((0.3, 0.6), (0.35, 0.75), (0.45, 0.9)):
            variants.append(("pnull", q, (L0, L1)))
        for A in (0.45, 0.55):
            for B in (0.1, 0.2, 0.3, 0.45):
                variants.append(("grad", q, (A, B)))
        for Z in (3.0, 4.0, 5.0, 6.0, 8.0):
            variants.append(("capz", q, (0.59, Z)))
    table = {}
    for vi, (kind, q, val) in enumerate(variants):
        miss = {}
        rows = []
        for (name, mode), v in sorted(runs.items()):
            if name.startswith("null/") or name.startswith("pq/"):
                continue
            s0 = np.array([r["hits"][0][1] for r in v["rows"] if r["hits"]])
            y = np.array([(not v["unans"]) and r["hits"][0][4] > 0 for r in v["rows"] if r["hits"]])
            null = nulls.get((v["bundle"], mode))
            only = os.environ.get("MODES")
            if kind == "base" or null is None or (only and mode.split("-")[0] not in only.split(",")):
                s1 = s0
            elif kind == "capz":
                # the cap only where the top hit does not stand out of its own list (z < Z)
                z = np.array([zscore(r["hits"]) for r in v["rows"] if r["hits"]])
                capped = variant("cap", q, (val[0],), null)(s0)
                s1 = np.where(z < val[1], capped, s0)
            else:
                s1 = variant(kind, q, val, null)(s0)
            c = checks(s1, y, v["unans"])
            m = (0 if c["ok"] else 1) if v["unans"] else 3 - c["ok"]
            key = mode.split("-")[0]
            miss[key] = miss.get(key, 0) + m
            rows.append((mode, name, c, null is not None))
        label = f"{kind} q={q} {val}" if q is not None else "base"
        table[label] = (miss, rows)
        print(f"{label:34} misses {sum(miss.values()):3} {miss}")
    best = os.environ.get("BEST") or min(table, key=lambda k: sum(table[k][0].values()))
    for lab in ("base", best):
        print(f"\n== {lab}")
        for mode, name, c, has in table[lab][1]:
            print(f"{mode:12} {name:36} {c}{'' if has else '  (no null run)'}")
    for (b, m), v in sorted(nulls.items()):
        print(f"null {b:20} {m:12} n={len(v)} q50={np.quantile(v,.5):.3f} q95={np.quantile(v,.95):.3f} q99={np.quantile(v,.99):.3f} max={v[-1]:.3f}")


# ---------------------------------------------------------------------------------------------
# Disagreement study (session 17, issue 19's knowledge-base case: "iOS minimum supported version"
# -> the Android document at 0.958, BM25 saturated, dense ranked the right chunk first). From the
# same hits files (each query has a bm25, a dense and a hybrid list): the hybrid top-1 "follows a
# saturated BM25 against a confident dense disagreement" when BM25's calibrated top-1 score is
# >= SAT, the hybrid top-1 is BM25's top-1, dense's top-1 is another file's chunk, and dense's raw
# score of its own top-1 beats its raw score of the hybrid top-1 by >= GAP (the hybrid top-1 not
# in dense's top 30: by the dense list's last raw score, a lower bound of the gap), or (GAP "rR")
# the hybrid top-1 is not in dense's first R. Variants:
#   cap C:   the hybrid top-1's score is capped at C (ranking and nDCG unchanged);
#   swap:    dense's top-1 goes first (its grade from the dense list), the rest shift down; the
#            score is capped at C too.
# `FUSE=1 study-bands.py DIR` prints, per variant, the hybrid checks and nDCG@10 per run (binary
# gain, ideal from nrel; checked against `jikji eval`'s figure at base).

def ndcg10(grades, nrel):
    dcg = sum((1.0 if g > 0 else 0.0) / math.log2(i + 2) for i, g in enumerate(grades[:10]))
    idcg = sum(1.0 / math.log2(i + 2) for i in range(min(max(nrel, 1), 10)))
    return dcg / idcg


def study_fuse():
    runs = load()
    by = {}
    for (name, mode), v in runs.items():
        for r in v["rows"]:
            by.setdefault((name, r["qid"]), {})[mode.split("-")[0]] = r
    names = sorted({n for (n, m) in runs if m.startswith("hybrid")})
    variants = [("base", None, None, None)]
    for sat in (0.9, 0.99):
        for gap in (0.01, 0.02, 0.04, "r10", "r30"):
            for c in (0.59, 0.45):
                variants.append(("cap", sat, gap, c))
            variants.append(("swap", sat, gap, 0.59))
    total = {}
    for kind, sat, gap, c in variants:
        label = "base" if kind == "base" else f"{kind} sat={sat} gap={gap} C={c}"
        miss = 0; out = []; fired = 0
        for name in names:
            v = next(vv for (n, m), vv in runs.items() if n == name and m.startswith("hybrid"))
            s1, y1, nd0, nd1 = [], [], [], []
            for r in v["rows"]:
                h = r["hits"]
                if not h:
                    continue
                q = by[(name, r["qid"])]
                grades = [x[4] for x in h]
                score = h[0][1]
                right = (not v["unans"]) and h[0][4] > 0
                nd0.append(ndcg10(grades, r["nrel"]))
                b = q.get("bm25", {}).get("hits") or []
                d = q.get("dense", {}).get("hits") or []
                if kind != "base" and b and d and b[0][1] >= sat and h[0][0] == b[0][0] and d[0][3] != h[0][3]:
                    draw = {x[0]: x[2] for x in d}
                    rank = next((i for i, x in enumerate(d) if x[0] == h[0][0]), len(d))
                    if isinstance(gap, str):
                        hit = rank >= int(gap[1:])
                    else:
                        hit = d[0][2] - draw.get(h[0][0], d[-1][2]) >= gap
                    if hit:
                        fired += 1
                        score = min(score, c)
                        if kind == "swap":
                            top = d[0]
                            rest = [x for x in h if x[0] != top[0]]
                            grades = [top[4]] + [x[4] for x in rest]
                            right = (not v["unans"]) and top[4] > 0
                s1.append(score); y1.append(right); nd1.append(ndcg10(grades, r["nrel"]))
            ch = checks(s1, y1, v["unans"])
            miss += (0 if ch["ok"] else 1) if v["unans"] else 3 - ch["ok"]
            out.append((name, ch, np.mean(nd0), np.mean(nd1)))
        total[label] = miss
        worst = min((o[3] - o[2]) for o in out if not runs_unans(runs, o[0]))
        print(f"{label:34} hybrid misses {miss:3}  fired {fired:5}  worst nDCG@10 change {worst:+.4f}")
        if kind == "base" or os.environ.get("VERBOSE"):
            for name, ch, a, b_ in out:
                print(f"    {name:36} {ch}  nDCG@10 {a:.4f} -> {b_:.4f}")


def runs_unans(runs, name):
    return any(v["unans"] for (n, m), v in runs.items() if n == name)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "pseudo":
        make_pseudo(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 300)
    elif os.environ.get("PQ"):
        study_pseudo()
    elif os.environ.get("NULL"):
        study_null()
    elif os.environ.get("FUSE"):
        study_fuse()
    else:
        main()

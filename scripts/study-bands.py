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

D = sys.argv[1] if len(sys.argv) > 1 else "target/bands"
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


if __name__ == "__main__":
    main()

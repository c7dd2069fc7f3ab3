"""A global second-stage map of the dense top-1 score, null cap re-applied (issue 19, session 30).

Reads: a folder of `jikji eval --modes bm25,dense,hybrid --hits-out DIR/<run>.jsonl` files, the
13 runs of the sweep (BUNDLE, BUNDLE@QUERIES, un@QUERIES@BUNDLE; one line per query and mode:
{"mode","qid","q","nrel","hits":[[docid, calibrated score, raw score, source, grade, coverage],
...]}), e.g. /work/w/sweep-main. Only the top-1 of each list matters to the checks.

What changes: only the dense mode's top-1 score. BM25 and hybrid keep the files' scores. The new
dense top-1 score is g(features of the dense list), g one GLOBAL map (the same for every bundle),
then the engine's null cap again: where the file's dense score is at or under the bundle's dense
threshold (DENSE_NULL below: the builder's 0.95-quantile of the bundle's off-topic pseudo-queries'
top-1 scores, from docs/quality.md; the threshold of the BUNDLE a run searches) the reported score
is min(g, 0.59). All those thresholds are < 0.59, so the files' dense scores are the uncapped ones.

Features of the dense list (study-bands.py's `feats`): raw = the top hit's raw (centred cosine)
score; logit = logit of its calibrated score; margin = 10 * (raw - raw of the first hit of another
source); z = min(z-score of raw within the list's top 30, 20) / 5.

Maps g (each fitted on top-1s: right iff grade > 0; every training run weighs the same in total):
  platt:raw, platt:logit     a sigmoid of one feature (Newton logistic regression);
  logreg:raw+margin+z        a logistic regression on three features (and logreg:logit+margin+z);
  iso:raw, iso:logit         isotonic (pool-adjacent-violators) on one feature, a step function,
                             clipped to [0.01, 0.99];
  ref:above-threshold        reference: a sigmoid of the 0/1 "file score > the bundle's threshold"
                             alone (two values: the training runs' share right above and under it).
Floors: "none"; "floor-uncapped": max(g, 0.30) where the top-1 is not capped (capped: min(g,0.59));
"floor-all": capped ones also floored, max(min(g, 0.59), 0.30). Extra, not the engine's cap:
"+gate99" also holds g at 0.59 where the file's score is at or under the bundle's dense threshold at
Q = 0.99 (DENSE_NULL99), so only top-1s above the 0.99-quantile of the null can reach ">= 0.6".

Fits: LOBO (leave one set out): for each held-out run, fitted only on ANSWERABLE runs whose bundle
differs from the held-out run's bundle and whose queries differ from its queries (STRICT=1: no set
name in common at all, bundle or queries); korquad-dev (internal) is never in a fit, only evaluated.
"in-sample": one fit on all non-internal answerable runs, applied to every run (reference only).

Checks: study-bands.py's `checks` (87: answerable run x mode: ">= 0.6" >= 90 % right, "< 0.3" <=
30 % right, top-1 ECE <= 0.10 over 10 bins; unanswerable: <= 1 % of top-1s >= 0.6).

Prints: the baseline (must be 35 misses, BM25 14, dense 8, hybrid 13, on sweep-main), per variant
the total and dense misses and the checks that changed, the unanswerable runs' dense top-1 band
shares before/after, the per-run table of the best LOBO variant (BEST=label to choose another) and
the in-sample coefficients of every map (fit on all non-internal answerable runs).

    nice python3 scripts/study-dense-global.py /work/w/sweep-main        (numpy)
"""
import glob, importlib.util, json, math, os, sys
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("study_bands", os.path.join(HERE, "study-bands.py"))
sb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sb)

D = sys.argv[1] if len(sys.argv) > 1 else "/work/w/sweep-main"
INTERNAL = {"korquad-dev"}
CAP = 0.59
FLOOR = 0.30
# Dense null-cap thresholds at Q = 0.95, as the builder stored them (docs/quality.md, null cap).
DENSE_NULL = {
    "xquad-en": 0.561, "xquad-zh": 0.359, "xquad-zh2en-mixed": 0.331, "cmrc2018-dev": 0.337,
    "classical-zh-dev": 0.496, "korquad-dev": 0.376, "scifact": 0.323,
}
# The same at Q = 0.99 (JIKJI_NULL_Q=0.99, docs/quality.md); used only by the "+gate99" variants.
DENSE_NULL99 = {
    "xquad-en": 0.716, "xquad-zh": 0.408, "xquad-zh2en-mixed": 0.356, "cmrc2018-dev": 0.366,
    "classical-zh-dev": 0.681, "korquad-dev": 0.422, "scifact": 0.332,
}
FEATS = ["raw", "logit", "margin", "z", "above", "terms", "idf", "unknown"]


def load():
    runs = {}
    for p in sorted(glob.glob(f"{D}/*.jsonl")):
        name = os.path.basename(p)[:-6]
        if name.startswith("un@"):
            _, qs, bundle = name.split("@"); unans = True
        elif "@" in name:
            bundle, qs = name.split("@"); unans = False
        else:
            bundle, qs, unans = name, name, False
        for line in open(p, encoding="utf-8"):
            r = json.loads(line)
            h = r["hits"]
            if not h:
                continue
            v = runs.setdefault((name, r["mode"]), dict(bundle=bundle, queries=qs, unans=unans, s=[], y=[], X=[]))
            v["s"].append(h[0][1])
            v["y"].append(1.0 if (not unans and h[0][4] > 0) else 0.0)
            if r["mode"].startswith("dense"):
                f = sb.feats(r, "dense")  # [logit, margin, z/5, log qlen/3]
                cov = h[0][5] if len(h[0]) > 5 and h[0][5] is not None else [0.0, 0.0, 1.0]
                v["X"].append([h[0][2], f[0], f[1], f[2], 1.0 if h[0][1] > DENSE_NULL[bundle] else 0.0] + list(cov))
    for v in runs.values():
        v["s"] = np.array(v["s"]); v["y"] = np.array(v["y"]); v["X"] = np.array(v["X"])
    return runs


def flags(s, y, unans):
    """The individual checks, as study-bands.checks decides them (asserted equal)."""
    c = sb.checks(s, y, unans)
    if unans:
        return {"un>=0.6": bool(c["ok"])}, c
    s = np.asarray(s); y = np.asarray(y, dtype=bool)
    hi = s >= 0.6; lo = s < 0.3
    bins = np.minimum((np.clip(s, 0, 1) * 10).astype(int), 9)
    ece = sum(abs(s[bins == i].mean() - y[bins == i].mean()) * (bins == i).sum() for i in range(10) if (bins == i).any()) / len(s)
    f = {">=0.6": bool(not hi.any() or y[hi].mean() >= 0.9), "<0.3": bool(not lo.any() or y[lo].mean() <= 0.3),
         "ece": bool(ece <= 0.10)}
    assert sum(f.values()) == c["ok"], (f, c)
    return f, c


def fit_platt(X, y, w):
    return sb.fit_logistic(X, y, w * 1000)


class Model:
    def __init__(self, kind, cols, X, y, w):
        self.kind, self.cols = kind, cols
        Xc = X[:, cols]
        if kind == "iso":
            xs, vals = sb.pav(Xc[:, 0].copy(), y.copy(), w.copy())
            self.m = (xs, np.clip(vals, 0.01, 0.99))
        else:
            self.m = fit_platt(Xc, y, w)

    def __call__(self, X):
        Xc = X[:, self.cols]
        if self.kind == "iso":
            return sb.iso_apply(self.m, Xc[:, 0])
        return sb.apply(self.m, Xc)

    def describe(self):
        if self.kind == "iso":
            xs, vals = self.m
            # the steps: value from each breakpoint on
            return "steps " + ", ".join(f"{FEATS[self.cols[0]]}>={x:.4f}:{v:.3f}" for x, v in zip(xs, vals))
        b = self.m
        return "sigmoid(" + " + ".join(f"{b[i]:.4f}*{FEATS[c]}" for i, c in enumerate(self.cols)) + f" + {b[-1]:.4f})"


MAPS = {
    "platt:raw": ("platt", [0]),
    "platt:logit": ("platt", [1]),
    "logreg:raw+margin+z": ("platt", [0, 2, 3]),
    "logreg:logit+margin+z": ("platt", [1, 2, 3]),
    # Session 31: with the top hit's query coverage (terms held, idf matched, unknown terms), which
    # session 30's maps did not use: shares, so they may carry across bundles better than raw cosines.
    "logreg:logit+cov": ("platt", [1, 5, 6, 7]),
    "logreg:raw+cov": ("platt", [0, 5, 6, 7]),
    "logreg:logit+margin+z+cov": ("platt", [1, 2, 3, 5, 6, 7]),
    "iso:raw": ("iso", [0]),
    "iso:logit": ("iso", [1]),
    # Reference without any score feature: one value for the top-1s above the bundle's threshold and
    # one (then capped at 0.59) for those at or under it, fitted the same way: what the null cap's
    # decision alone is worth as a score.
    "ref:above-threshold": ("platt", [4]),
}


def train_set(runs, mode, held):
    strict = os.environ.get("STRICT") == "1"
    X, y, w = [], [], []
    for (name, m), v in runs.items():
        if m != mode or v["unans"] or v["bundle"] in INTERNAL or v["queries"] in INTERNAL:
            continue
        if held is not None:
            if strict:
                if {v["bundle"], v["queries"]} & {held["bundle"], held["queries"]}:
                    continue
            elif v["bundle"] == held["bundle"] or v["queries"] == held["queries"]:
                continue
        X.append(v["X"]); y.append(v["y"]); w.append(np.full(len(v["y"]), 1.0 / len(v["y"])))
    return np.vstack(X), np.concatenate(y), np.concatenate(w)


def new_scores(v, g, floor):
    s0 = v["s"]
    capped = s0 <= DENSE_NULL[v["bundle"]]
    s = g.copy()
    s[capped] = np.minimum(s[capped], CAP)
    if floor.endswith("+gate99"):
        # extra (not the engine's cap): >= 0.6 only above the bundle's 0.99-quantile threshold
        s[s0 <= DENSE_NULL99[v["bundle"]]] = np.minimum(s[s0 <= DENSE_NULL99[v["bundle"]]], CAP)
        floor = floor[:-len("+gate99")]
    if floor in ("floor-uncapped", "floor-all"):
        s[~capped] = np.maximum(s[~capped], FLOOR)
    if floor == "floor-all":
        s[capped] = np.maximum(s[capped], FLOOR)
    return s


def bands(s):
    s = np.asarray(s)
    return (s >= 0.6).mean(), ((s >= 0.3) & (s < 0.6)).mean(), (s < 0.3).mean()


def main():
    runs = load()
    dense = sorted({m for (_, m) in runs if m.startswith("dense")})
    assert len(dense) == 1
    dmode = dense[0]
    keys = sorted(runs, key=lambda k: (k[1], k[0]))
    for (name, m) in keys:
        if m == dmode:
            v = runs[(name, m)]
            assert v["bundle"] in DENSE_NULL, v["bundle"]
            assert not np.any(np.isclose(v["s"], CAP, atol=1e-7)), f"{name}: dense scores at 0.59 (already capped?)"

    base = {}
    for k in keys:
        v = runs[k]
        base[k] = flags(v["s"], v["y"], v["unans"])
    def count(res):
        tot, per = 0, {}
        for k, (f, _) in res.items():
            miss = sum(1 for ok in f.values() if not ok)
            tot += miss; md = k[1].split("-")[0]; per[md] = per.get(md, 0) + miss
        return tot, per
    bt, bp = count(base)
    import subprocess, time
    head = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(f"# study-dense-global.py {D}  STRICT={os.environ.get('STRICT', '0')}  commit {head}  "
          f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}  load {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"baseline: {bt} missed checks of {sum(len(f) for f, _ in base.values())}  per mode {bp}")
    for k in keys:
        if k[1] == dmode:
            print(f"  base {k[1]:8} {k[0]:36} {base[k][1]}  capped {int((runs[k]['s'] <= DENSE_NULL[runs[k]['bundle']]).sum())}")

    # fits: LOBO per held-out dense run, and in-sample once
    dkeys = [k for k in keys if k[1] == dmode]
    lobo_fits, insample = {}, {}
    Xa, ya, wa = train_set(runs, dmode, None)
    for label, (kind, cols) in MAPS.items():
        insample[label] = Model(kind, cols, Xa, ya, wa)
        for k in dkeys:
            X, y, w = train_set(runs, dmode, runs[k])
            lobo_fits[(label, k)] = Model(kind, cols, X, y, w)

    results = {}
    for fitk in ("LOBO", "in-sample"):
        for label in MAPS:
            for floor in ("none", "floor-uncapped", "floor-all", "none+gate99", "floor-all+gate99"):
                res = dict(base)
                scores = {}
                for k in dkeys:
                    v = runs[k]
                    model = lobo_fits[(label, k)] if fitk == "LOBO" else insample[label]
                    s = new_scores(v, model(v["X"]), floor)
                    scores[k] = s
                    res[k] = flags(s, v["y"], v["unans"])
                results[(fitk, label, floor)] = (res, scores)

    print("\n## variants (dense only; BM25 and hybrid as in the files)")
    print(f"{'fit':10} {'map':24} {'floor':15} total dense  unans-misses  unans dense 0.3-0.6 share (min-max)  <0.3 (min-max)")
    for (fitk, label, floor), (res, scores) in results.items():
        t, p = count(res)
        un = [k for k in dkeys if runs[k]["unans"]]
        um = sum(1 for k in un if not res[k][0]["un>=0.6"])
        mids = [bands(scores[k])[1] for k in un]; los = [bands(scores[k])[2] for k in un]
        print(f"{fitk:10} {label:24} {floor:15} {t:5} {p.get('dense', 0):5}  {um:5}         "
              f"{min(mids):6.1%}-{max(mids):6.1%}                    {min(los):6.1%}-{max(los):6.1%}")
    un = [k for k in dkeys if runs[k]["unans"]]
    mids = [bands(runs[k]["s"])[1] for k in un]; los = [bands(runs[k]["s"])[2] for k in un]
    print(f"{'baseline':10} {'-':24} {'-':15} {bt:5} {bp.get('dense', 0):5}  "
          f"{sum(1 for k in un if not base[k][0]['un>=0.6']):5}         {min(mids):6.1%}-{max(mids):6.1%}"
          f"                    {min(los):6.1%}-{max(los):6.1%}")

    print("\n## checks that changed (base -> variant), per variant")
    for (fitk, label, floor), (res, _) in results.items():
        ch = []
        for k in dkeys:
            for c, ok in res[k][0].items():
                if ok != base[k][0][c]:
                    ch.append(f"{k[0]} {c} {'miss->ok' if ok else 'ok->MISS'}")
        print(f"{fitk:10} {label:24} {floor:15} " + ("; ".join(ch) if ch else "(none)"))

    print("\n## unanswerable runs, dense top-1 band shares: >=0.6 / 0.3-0.6 / <0.3 (base -> variant)")
    for (fitk, label, floor), (res, scores) in results.items():
        if fitk != "LOBO":
            continue
        parts = []
        for k in un:
            a = bands(runs[k]["s"]); b = bands(scores[k])
            parts.append(f"{k[0][3:]}: {a[0]:.1%}/{a[1]:.1%}/{a[2]:.1%} -> {b[0]:.1%}/{b[1]:.1%}/{b[2]:.1%}")
        print(f"{label:24} {floor:15} " + " | ".join(parts))

    print("\n## dense per run: ECE (answerable; * = a check missed) or share of top-1s >= 0.6 (unanswerable)")
    short = {k: k[0].replace("xquad-zh2en-mixed", "mixed").replace("classical-zh-dev", "classical")
             .replace("cmrc2018-dev", "cmrc").replace("korquad-dev", "korquad") for k in dkeys}
    print(f"{'':10} {'':24} {'':15} " + " ".join(f"{short[k][:14]:>14}" for k in dkeys))
    def cell(res, scores, k):
        f, c = res[k]
        bad = "*" if not all(f.values()) else " "
        if runs[k]["unans"]:
            return f"{bands(scores[k])[0]:.2%}{bad}"
        return f"{c['ece']:.3f}{bad}"
    print(f"{'baseline':10} {'':24} {'':15} " + " ".join(f"{cell(base, {k: runs[k]['s'] for k in dkeys}, k):>14}" for k in dkeys))
    for (fitk, label, floor), (res, scores) in results.items():
        print(f"{fitk:10} {label:24} {floor:15} " + " ".join(f"{cell(res, scores, k):>14}" for k in dkeys))

    # The best LOBO variant by misses, and the best that adds no unanswerable miss (BEST=map/floor,...).
    def unmiss(r):
        return sum(1 for k in un if not r[k][0]["un>=0.6"])
    lobo = [(count(r)[0], lab, fl) for (fk, lab, fl), (r, _) in results.items() if fk == "LOBO"]
    clean = [(count(r)[0], lab, fl) for (fk, lab, fl), (r, _) in results.items() if fk == "LOBO" and unmiss(r) <= unmiss(base)]
    picks = [tuple(b.split("/")) for b in os.environ["BEST"].split(",")] if os.environ.get("BEST") else \
        [min(lobo)[1:]] + ([min(clean)[1:]] if clean and min(clean)[1:] != min(lobo)[1:] else [])
    for lab, fl in picks:
        print(f"\n## per-run dense checks of LOBO {lab} / {fl}")
        res, scores = results[("LOBO", lab, fl)]
        for k in dkeys:
            b3 = bands(runs[k]["s"]); n3 = bands(scores[k])
            above = runs[k]["X"][:, 4] > 0
            print(f"  {k[0]:36} base {base[k][1]}  bands >=0.6/0.3-0.6/<0.3 {b3[0]:.1%}/{b3[1]:.1%}/{b3[2]:.1%}\n"
                  f"  {'':36} new  {res[k][1]}  bands {n3[0]:.1%}/{n3[1]:.1%}/{n3[2]:.1%}"
                  f"  above threshold {int(above.sum())}, of them >= 0.6: {int((scores[k][above] >= 0.6).sum())}")

    print("\n## in-sample fits (all non-internal answerable runs; features: raw = centred cosine, logit of the"
          " calibrated score, margin = 10*(raw - raw of first other-source hit), z = min(z-score in top 30, 20)/5)")
    for label, model in insample.items():
        print(f"  {label:24} {model.describe()}")
    print("\n## LOBO fits per held-out run (coefficients)")
    for label in MAPS:
        if MAPS[label][0] == "iso":
            continue
        for k in dkeys:
            print(f"  {label:24} {k[0]:36} {lobo_fits[(label, k)].describe()}")


if __name__ == "__main__":
    main()

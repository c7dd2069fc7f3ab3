"""Issue 19, session 28: refit each bundle's calibration map on question-like pseudo-queries' top-1s.

    python3 scripts/study-refit.py UNC CAPPED          (numpy)

UNC is a folder of `jikji eval --modes bm25,dense,hybrid --fusion weighted --hits-out` files run with
JIKJI_NULL_Q=0.000001 (the null cap's threshold is then the lowest off-topic top-1, under 0.59 on every
bundle, so no reported score is capped: these are the calibrated scores before the cap), named as
`study-bands.py` reads them (BUNDLE, BUNDLE@QUERIES, un@QUERIES@BUNDLE), plus UNC/pq/pq@BUNDLE.jsonl:
the same eval on `study-bands.py pseudo SET OUT 900` (the set's corpus, question-like pseudo-queries
pq* whose passage is their qrel, off-topic pn* whose qrel exists nowhere). CAPPED is the same 13 runs
with the default cap (Q = 0.95, e.g. /work/w/sweep-main); TH=DIR names `jikji eval SET --json --limit 1`
outputs (DIR/BUNDLE.json, same binary and cache), whose calibration block holds the stored thresholds
(`null_cap`), used when given. Without TH, per bundle and mode the script recovers the
threshold t the builder stored (a hit was capped iff its uncapped score is > 0.59 and <= t: t lies
between the largest capped and the smallest uncapped score over 0.59 of all hits of the bundle's runs)
and checks that capping UNC's top-1s at t gives CAPPED's scores.

Per bundle and mode a one-feature map g is fitted on that bundle's pseudo-queries' top-1s only (right
iff the top-1 is the query's passage): the feature is the uncapped calibrated score's logit (FEAT=logit)
or the raw score (FEAT=raw, log(1 + raw) for BM25); Platt sigmoid or isotonic (pool adjacent violators).
Off-topic top-1s join as wrong with weight WO (0 by default). MODES=bm25,hybrid refits only those
modes (the others keep the base). A real run's top-1 then reports
g(f), and min(g(f), 0.59) where the uncapped score is <= t (the cap at the same threshold: the old
score's order is kept by a monotone g). Prints the 87 checks of issue 19 (`study-bands.py`'s `checks`)
for the base (cap of UNC, should equal CAPPED's 35) and every variant of the grid (feature, sigmoid or
isotonic, WO = 0 / 0.25 / 1, all modes or BM25 and hybrid only, the cap at the stored threshold on the old
score or at the 0.95-quantile of the new scores of the bundle's off-topic pseudo-queries); SPLITS=1 also fits
each on halves and thirds of the pseudo-queries; ONLY=LABEL runs one, SHOW=LABEL prints its per-run checks.
Session 28's runs and figures: docs/quality.md.
"""
import glob, importlib.util, json, math, os, sys
import numpy as np

spec = importlib.util.spec_from_file_location("sb", os.path.join(os.path.dirname(__file__), "study-bands.py"))
sb = importlib.util.module_from_spec(spec)
sys.argv, argv = sys.argv[:1], sys.argv
spec.loader.exec_module(sb)
UNC, CAP = argv[1], argv[2]
CAPV = 0.59


def runs_of(d):
    sb.D = d
    return sb.load()


def top1_rows(v):
    return [r for r in v["rows"] if r["hits"]]


def thresholds(unc, cap):
    """Per (bundle, mode): (lo, hi) bracket of the builder's threshold, and a check count."""
    out = {}
    for key, v in unc.items():
        c = cap.get(key)
        if c is None:
            continue
        cq = {r["qid"]: r for r in c["rows"]}
        lo, hi = -1.0, 2.0
        b = out.setdefault((v["bundle"], key[1]), [-1.0, 2.0, 0, 0])
        for r in v["rows"]:
            r2 = cq.get(r["qid"])
            if r2 is None or len(r2["hits"]) != len(r["hits"]):
                b[3] += 1
                continue
            for h, h2 in zip(r["hits"], r2["hits"]):
                if h[0] != h2[0]:
                    b[3] += 1
                    continue
                s, s2 = h[1], h2[1]
                if s > CAPV:
                    if abs(s2 - CAPV) < 1e-6 and abs(s - s2) > 1e-6:
                        b[0] = max(b[0], s)  # capped
                    elif abs(s - s2) < 1e-6:
                        b[1] = min(b[1], s)  # kept
                    else:
                        b[3] += 1
                elif abs(s - s2) > 1e-6:
                    b[3] += 1
                b[2] += 1
    return out


def logit(p):
    p = np.clip(np.asarray(p, float), 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def feature(h, mode, kind):
    if kind == "logit":
        return float(logit(h[1]))
    raw = h[2]
    return math.log1p(max(raw, 0.0)) if mode == "bm25" else raw


def pq_samples(path, kind, split=None):
    """Per mode: (feature, right, off-topic) of each pseudo-query's top-1; split "i/k" keeps the
    queries numbered i mod k (pq<j>; pn<j>, j even, by j / 2)."""
    by = {}
    for line in open(path, encoding="utf-8"):
        r = json.loads(line)
        if not r["hits"]:
            continue
        if split:
            i, k = map(int, split.split("/"))
            j = int(r["qid"][2:])
            if (j // 2 if r["qid"].startswith("pn") else j) % k != i:
                continue
        h = r["hits"][0]
        off = r["qid"].startswith("pn")
        by.setdefault(r["mode"], []).append((feature(h, r["mode"], kind), 0.0 if off else float(h[4] > 0), off))
    return by


def fit(samples, method, wo):
    X = np.array([s[0] for s in samples]); y = np.array([s[1] for s in samples])
    w = np.array([wo if s[2] else 1.0 for s in samples])
    keep = w > 0
    X, y, w = X[keep], y[keep], w[keep]
    if method == "platt":
        b = sb.fit_logistic(X[:, None], y, w / w.sum() * len(w), l2=1e-3)
        return lambda f: 1 / (1 + np.exp(-(np.asarray(f) * b[0] + b[1]))), b
    xs, vals = sb.pav(X, y, w)
    # Isotonic with a floor and ceiling off 0 and 1 (a top-1 is never certain from 900 samples).
    vals = np.clip(vals, 0.01, 0.99)
    return lambda f: sb.iso_apply((xs, vals), np.asarray(f)), (len(xs), float(vals[0]), float(vals[-1]))


def prepare(runs):
    """Per run and mode: top-1 uncapped scores, rightness, and both features."""
    out = {}
    for (name, mode), v in runs.items():
        rs = top1_rows(v)
        out[(name, mode)] = dict(
            v=v, s=np.array([r["hits"][0][1] for r in rs]),
            y=np.array([(not v["unans"]) and r["hits"][0][4] > 0 for r in rs]),
            f={k: np.array([feature(r["hits"][0], mode, k) for r in rs]) for k in ("logit", "raw")})
    return out


def score(prep, thr, maps, kind, modes=None, newthr=None):
    """Misses per mode and rows. maps: (bundle, mode) -> g; a mode outside `modes` keeps the base.
    The cap: where the old score is <= the stored threshold, or (newthr) where the new score is <=
    the q95 of the new scores of the bundle's own off-topic pseudo-queries."""
    miss = {}
    rows = []
    for (name, mode), d in sorted(prep.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        v, s, y = d["v"], d["s"], d["y"]
        key = (v["bundle"], mode)
        t = thr.get(key, -1.0)
        g = maps.get(key) if maps is not None else None
        if modes and mode.split("-")[0] not in modes:
            g = None
        if g is None:
            s1, capped = s.copy(), s <= t
        else:
            s1 = g(d["f"][kind])
            capped = s1 <= newthr[key] if newthr is not None else s <= t
        s1 = np.where(capped, np.minimum(s1, CAPV), s1)
        c = sb.checks(s1, y, v["unans"])
        m = (0 if c["ok"] else 1) if v["unans"] else 3 - c["ok"]
        k = mode.split("-")[0]
        miss[k] = miss.get(k, 0) + m
        rows.append((mode, name, c, m))
    return miss, rows


def fits(kind, method, wo, split=None, verbose=False):
    maps, newthr = {}, {}
    for p in sorted(glob.glob(f"{UNC}/pq/pq@*.jsonl")):
        bundle = os.path.basename(p)[3:-6]
        for mode, smp in pq_samples(p, kind, split).items():
            g, info = fit(smp, method, wo)
            maps[(bundle, mode)] = g
            off = np.array([x[0] for x in smp if x[2]])
            newthr[(bundle, mode)] = float(np.quantile(g(off), 0.95))
            if verbose:
                ys = [x[1] for x in smp if not x[2]]
                print(f"  fit {kind} {method} WO={wo} {bundle:20} {mode:12} n={len(ys)} right={int(sum(ys))} "
                      f"{np.round(info, 3).tolist()} new-q95-of-off-topic={newthr[(bundle, mode)]:.3f}")
    return maps, newthr


def main():
    unc = runs_of(UNC)
    cap = runs_of(CAP)
    br = thresholds(unc, cap)
    thr = {}
    stored = {}
    for p in glob.glob(f"{os.environ.get('TH', '')}/*.json") if os.environ.get("TH") else []:
        nc = json.load(open(p))["calibration"]["null_cap"]
        b = os.path.basename(p)[:-5]
        stored.update({(b, "bm25"): nc["bm25"], (b, "dense"): nc["dense"], (b, "hybrid-w0.6"): nc["weighted"]})
    for (b, m), (lo, hi, n, bad) in sorted(br.items()):
        t = lo if lo >= 0 else CAPV  # no capped hit seen: any t <= 0.59 acts the same on these runs
        t = stored.get((b, m), t)
        thr[(b, m)] = t
        print(f"threshold {b:20} {m:12} capped<= {lo:.4f}  kept>= {hi:.4f}  hits {n}  mismatches {bad}  used {t:.4f}")
    prep = prepare(unc)
    base_miss, base_rows = score(prep, thr, None, "logit")
    cap_miss, _ = score(prepare(cap), {}, None, "logit")
    print(f"CAPPED files as they are: {sum(cap_miss.values())} {cap_miss}")
    print(f"base (UNC capped at t):   {sum(base_miss.values())} {base_miss}")
    results = {"base": (base_miss, base_rows)}
    variants = []
    for kind in ("logit", "raw"):
        for method in ("platt", "iso"):
            for wo in (0.0, 0.25, 1.0):
                for modes in (None, ("bm25", "hybrid")):
                    for capnew in (False, True):
                        variants.append((kind, method, wo, modes, capnew))
    only = os.environ.get("ONLY")
    for kind, method, wo, modes, capnew in variants:
        label = f"{kind} {method} WO={wo}" + (" modes=bm25,hybrid" if modes else "") + (" cap=new-q95" if capnew else "")
        if only and only != label:
            continue
        maps, newthr = fits(kind, method, wo, verbose=bool(os.environ.get("VERBOSE")) and not modes and not capnew)
        miss, rows = score(prep, thr, maps, kind, modes, newthr if capnew else None)
        results[label] = (miss, rows)
        parts = []
        for split in ("0/2", "1/2", "0/3", "1/3", "2/3") if os.environ.get("SPLITS") else ():
            m2, _ = score(prep, thr, *((lambda mt: (mt[0], kind, modes, mt[1] if capnew else None))(fits(kind, method, wo, split))))
            parts.append(sum(m2.values()))
        unans = sum(m for (mode, name, c, m) in rows if name.startswith("un@"))
        print(f"{label:50} misses {sum(miss.values()):3} {miss} unanswerable misses {unans}" + (f"  on parts of the sample {parts}" if parts else ""))
    show = os.environ.get("SHOW")
    if show:
        for lab in ("base", show):
            print(f"\n== {lab}")
            for mode, name, c, m in results[lab][1]:
                print(f"{mode:12} {name:36} miss {m} {c}")


if __name__ == "__main__":
    main()

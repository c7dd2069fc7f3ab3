#!/usr/bin/env python3
"""Issue 19, session 31: how many of the 87 score-band checks can ANY score map reach, even one fitted
with the eval labels themselves?  An upper bound for every label-free calibration of today's scores.

`python3 scripts/study-oracle.py DIR` reads the hits files of a sweep (`jikji eval ... --hits-out`, the
13 runs of `/work/w/sweep.sh`; same layout as `scripts/study-bands.py DIR`) and, per bundle and mode,
replaces each top-1's reported score by an *oracle* map fitted on the runs' own labels (in sample; no
held-out split, on purpose: this is the best case), then scores the same checks as study-bands.py:

  today      the reported (calibrated, null-capped) score: the baseline;
  iso-ans    isotonic (PAV) regression of "top-1 right" on today's score, fitted on the bundle's
             answerable runs pooled (xquad-en's bundle: xquad-en and the zh->en run), applied to every
             run on the bundle, its unanswerable run too;
  iso-all    the same fitted on the answerable AND unanswerable runs of the bundle pooled (an
             unanswerable top-1 counts as wrong): the calibration a user with labels for exactly this
             query mix would fit;
  iso-all+   iso-all, then every value in [0.6, 0.9) lowered to 0.59 (the best a monotone map can do
             for the ">= 0.6 is >= 90 % right" check at the price of ECE);
  iso-feat   iso-all on a richer input than today's score: the rank of a logistic fit (with labels) on
             [logit of today's score, top-1 z-score in its top 30, margin over the best hit of another
             file, query coverage (terms held, idf matched, unknown) when the hits carry it], per bundle
             and mode, in sample.

What a map of one score cannot do: make one score mean the same on two runs with different question
kinds on the same bundle (answerable vs unanswerable, monolingual vs cross-lingual).  A check missed
by iso-all is out of reach of every calibration of today's score; one missed by iso-feat is out of
reach of every calibration of those features, labels or not.
"""
import os, sys
import numpy as np

sys.argv = [sys.argv[0]] + sys.argv[1:]
here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import importlib.util
spec = importlib.util.spec_from_file_location("sb", os.path.join(here, "study-bands.py"))
sb = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sb)


def top1(rows, unans, mode):
    s, y, X = [], [], []
    for r in rows:
        h = r["hits"]
        if not h:
            continue
        s.append(h[0][1])
        y.append(0.0 if unans else (1.0 if h[0][4] > 0 else 0.0))
        f = sb.feats(r, mode)[:3]
        cov = h[0][5] if len(h[0]) > 5 and h[0][5] is not None else [0.0, 0.0, 0.0]
        X.append(f + list(cov))
    return np.array(s), np.array(y), np.array(X, dtype=float)


def miss(c, unans):
    return (0 if c["ok"] else 1) if unans else 3 - c["ok"]


def main():
    os.environ.setdefault("NF", "3")
    runs = sb.load()
    modes = sorted({m for (_, m) in runs})
    variants = ["today", "iso-ans", "iso-all", "iso-all+", "iso-feat"]
    total = {v: [0, 0, 0] for v in variants}
    rows_out = []
    for mi, mode in enumerate(modes):
        bundles = sorted({v["bundle"] for (n, m), v in runs.items() if m == mode})
        for b in bundles:
            rs = {n: v for (n, m), v in runs.items() if m == mode and v["bundle"] == b}
            data = {n: (v,) + top1(v["rows"], v["unans"], mode) for n, v in rs.items()}
            ans = [d for d in data.values() if not d[0]["unans"]]
            alls = list(data.values())
            if not ans:
                continue
            # Each run weighs the same in a pooled fit (a 3,219-query unanswerable run does not drown
            # a 387-query cross-lingual one).
            def pooled(ds, col):
                xs = np.concatenate([d[col] for d in ds]); ys = np.concatenate([d[2] for d in ds])
                ws = np.concatenate([np.full(len(d[2]), 1.0 / max(len(d[2]), 1)) for d in ds])
                return xs, ys, ws
            x, y, w = pooled(ans, 1)
            m_ans = sb.pav(x, y, w)
            x, y, w = pooled(alls, 1)
            m_all = sb.pav(x, y, w)
            # richer input: a logistic fit with labels on the features, then isotonic on its output
            X = np.vstack([np.column_stack([np.log(np.clip(d[1], 1e-4, 1 - 1e-4) / (1 - np.clip(d[1], 1e-4, 1 - 1e-4))), d[3]]) for d in alls])
            Y = np.concatenate([d[2] for d in alls]); W = np.concatenate([np.full(len(d[2]), 1.0 / len(d[2])) for d in alls])
            mu, sd = X.mean(0), X.std(0) + 1e-9
            coef = sb.fit_logistic((X - mu) / sd, Y, W * len(Y))
            def lin(d):
                Z = np.column_stack([np.log(np.clip(d[1], 1e-4, 1 - 1e-4) / (1 - np.clip(d[1], 1e-4, 1 - 1e-4))), d[3]])
                return sb.apply(coef, (Z - mu) / sd)
            m_feat = sb.pav(np.concatenate([lin(d) for d in alls]), Y, W)
            for n, d in sorted(data.items()):
                v, s, yy, _ = d
                outs = {
                    "today": s,
                    "iso-ans": sb.iso_apply(m_ans, s),
                    "iso-all": sb.iso_apply(m_all, s),
                }
                p = outs["iso-all"].copy(); p[(p >= 0.6) & (p < 0.9)] = 0.59
                outs["iso-all+"] = p
                outs["iso-feat"] = sb.iso_apply(m_feat, lin(d))
                line = [mode, n]
                for k in variants:
                    c = sb.checks(outs[k], yy, v["unans"])
                    total[k][mi] += miss(c, v["unans"])
                    line.append((k, c))
                rows_out.append(line)
    for line in rows_out:
        print(f"{line[0]:12} {line[1]:34}", "  ".join(
            f"{k}: {c['hi']}" + (f" lo {c['lo']} ece {c['ece']}" if "lo" in c else "") for k, c in line[2:]))
    print()
    for k in variants:
        print(f"{k:9} missed {sum(total[k]):2} of 87  (by mode {dict(zip(modes, total[k]))})")




# ---------------------------------------------------------------------------------------------
# `BOUND=1 study-oracle.py DIR`: a lower bound on the misses of EVERY score map that is a
# non-decreasing function of today's top-1 score, per bundle and mode (labels or not, any values).
# Such a map is, for the checks, two thresholds on today's score: t_hi (g >= 0.6 iff s >= t_hi) and
# t_lo (g < 0.3 iff s < t_lo), t_lo <= t_hi.  Given them, every band check of every run on the bundle
# is fixed, and ECE has a lower bound: the 10 bins nest in the three bands, so by the triangle
# inequality ECE >= (sum over bands of |sum of (g - y)|) / N >= (max(0, 0.6 n_hi - k_hi) +
# max(0, k_lo - 0.3 n_lo) + max(0, 0.3 n_mid - k_mid, k_mid - 0.6 n_mid)) / N.  The minimum over all
# threshold pairs of the checks missed (ECE counted missed only when that bound exceeds 0.10) is
# therefore at most what any such map achieves.  The same on FEAT=1: the order of the label-fitted
# feature combination of iso-feat instead of today's score (a bound for maps of that one input); RAW=1:
# the ranker's raw top-1 score (not tied at the null cap's 0.59).

def bound_for(runs_b):
    """runs_b: list of (unans, s, y). Returns (min misses, t_lo, t_hi as value pairs)."""
    allv = np.unique(np.concatenate([s for _, s, _ in runs_b]))
    U = len(allv)
    best = (10 ** 9, None)
    per = []
    for unans, s, y in runs_b:
        idx = np.searchsorted(allv, s)
        n = np.bincount(idx, minlength=U).astype(float)
        k = np.bincount(idx, weights=y, minlength=U)
        # below[i] = count with index < i  (i = 0..U)
        nb = np.concatenate([[0.0], np.cumsum(n)]); kb = np.concatenate([[0.0], np.cumsum(k)])
        per.append((unans, nb, kb, float(len(s))))
    # thresholds as indices: lo = i (values with index < i are "< 0.3"), hi = j (index >= j are
    # ">= 0.6"), 0 <= i <= j <= U.
    best_mid = (2.0, None)
    for j in range(U + 1):
        i = np.arange(j + 1)
        m = np.zeros(j + 1)
        um = np.zeros(j + 1); nu = 0
        for unans, nb, kb, N in per:
            if unans:
                um += (N - nb[i]) / N; nu += 1
            n_hi = N - nb[j]; k_hi = kb[-1] - kb[j]
            if unans:
                m += (n_hi / N > 0.01)
                continue
            n_lo = nb[i]; k_lo = kb[i]
            n_mid = nb[j] - nb[i]; k_mid = kb[j] - kb[i]
            hi_ok = (n_hi == 0) or (k_hi >= 0.9 * n_hi - 1e-9)
            lo_ok = (n_lo == 0) | (k_lo <= 0.3 * n_lo + 1e-9)
            ece_lb = (max(0.0, 0.6 * n_hi - k_hi) + np.maximum(0, k_lo - 0.3 * n_lo)
                      + np.maximum.reduce([np.zeros_like(n_mid), 0.3 * n_mid - k_mid, k_mid - 0.6 * n_mid])) / N
            m += (0 if hi_ok else 1) + (~lo_ok) + (ece_lb > 0.10 + 1e-9)
        a = int(np.argmin(m))
        if m[a] < best[0]:
            best = (int(m[a]), (a, j)); opt = []
        if m[a] == best[0]:
            opt += [(int(i2), j) for i2 in np.flatnonzero(m == best[0])]
            if nu:
                ok = np.flatnonzero(m == best[0]); q = ok[np.argmin(um[ok])]
                if um[q] / nu < best_mid[0] or m[a] < best[0]:
                    best_mid = (um[q] / nu, (int(q), j))
    val = lambda q: float(allv[q]) if q < U else float("inf")
    los = [val(i) for i, _ in opt]; his = [val(j) for _, j in opt]
    # the least share of unanswerable top-1s at >= 0.3 among the optimal maps (NaN: no such run)
    mid = best_mid[0] if best_mid[1] is not None else float("nan")
    return best[0], (min(los), max(los)), (min(his), max(his)), mid


def bound():
    os.environ.setdefault("NF", "3")
    runs = sb.load()
    modes = sorted({m for (_, m) in runs})
    tot = 0
    for mode in modes:
        bundles = sorted({v["bundle"] for (n, m), v in runs.items() if m == mode})
        for b in bundles:
            rs = {n: v for (n, m), v in runs.items() if m == mode and v["bundle"] == b}
            data = {n: (v,) + top1(v["rows"], v["unans"], mode) for n, v in rs.items()}
            if os.environ.get("FEAT"):
                alls = list(data.values())
                lg = lambda s: np.log(np.clip(s, 1e-4, 1 - 1e-4) / (1 - np.clip(s, 1e-4, 1 - 1e-4)))
                X = np.vstack([np.column_stack([lg(d[1]), d[3]]) for d in alls])
                Y = np.concatenate([d[2] for d in alls]); W = np.concatenate([np.full(len(d[2]), 1.0 / len(d[2])) for d in alls])
                mu, sd = X.mean(0), X.std(0) + 1e-9
                coef = sb.fit_logistic((X - mu) / sd, Y, W * len(Y))
                inp = {n: np.round(sb.apply(coef, (np.column_stack([lg(d[1]), d[3]]) - mu) / sd), 6) for n, d in data.items()}
            elif os.environ.get("RAW"):
                # the ranker's raw top-1 score (BM25 sum, centred cosine, fused score) instead of the
                # calibrated, null-capped one: maps of the raw score are not tied by the cap at 0.59
                inp = {n: np.array([r["hits"][0][2] for r in rs[n]["rows"] if r["hits"]]) for n in data}
            else:
                inp = {n: d[1] for n, d in data.items()}
            rb = [(d[0]["unans"], inp[n], d[2]) for n, d in sorted(data.items())]
            m, tlo, thi, mid = bound_for(rb)
            today_mid = [float((d[1] >= 0.3).mean()) for n, d in sorted(data.items()) if d[0]["unans"]]
            tot += m
            print(f"{mode:12} {b:20} runs {len(rb)}  at least {m} missed  (optimal t_lo {tlo[0]:.4g}..{tlo[1]:.4g}, t_hi {thi[0]:.4g}..{thi[1]:.4g})"
                  + (f"  unanswerable top-1s >= 0.3: at least {mid:.1%} (today {np.mean(today_mid):.1%})" if today_mid else ""), flush=True)
    print(f"\nAt least {tot} of the 87 checks are missed by every non-decreasing map of "
          f"{'the label-fitted feature combination' if os.environ.get('FEAT') else ('the raw top-1 score' if os.environ.get('RAW') else 'today' + chr(39) + 's top-1 score')}, per bundle and mode.")


if __name__ == "__main__":
    bound() if os.environ.get("BOUND") else main()

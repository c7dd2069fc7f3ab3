#!/usr/bin/env python3
# Issue 19, session 27: right answers among hybrid top-1s by score band, split by whether BM25's, dense's and
# the weighted hybrid's top-1 are the same chunk (agreement), from `jikji eval --hits-out` files (the sweep of
# scripts/study-bands.py). Usage: study-agreement.py DIR
import glob, json, os, collections, sys
D=sys.argv[1] if len(sys.argv) > 1 else 'target/bands'
for p in sorted(glob.glob(f'{D}/*.jsonl')):
    name=os.path.basename(p)[:-6]
    by=collections.defaultdict(dict)
    for line in open(p):
        r=json.loads(line); by[r['qid']][r['mode']]=r
    stats=collections.Counter()
    for q,m in by.items():
        if not all(k in m for k in ('bm25','dense','hybrid-w0.6')): continue
        hb,hd,hh=m['bm25']['hits'],m['dense']['hits'],m['hybrid-w0.6']['hits']
        if not hh: continue
        s=hh[0][1]; right=hh[0][4]>0
        band='hi' if s>=0.6 else ('lo' if s<0.3 else 'mid')
        agree = bool(hb) and bool(hd) and hb[0][0]==hd[0][0]==hh[0][0]
        # dense top1 in bm25 top3 etc
        stats[(band,agree,'n')]+=1; stats[(band,agree,'right')]+=right
    out=[]
    for band in ('hi','mid','lo'):
        for a in (True,False):
            n=stats[(band,a,'n')]; r=stats[(band,a,'right')]
            if n: out.append(f"{band}{'A' if a else 'd'} {r}/{n}")
    print(f"{name:34s}", '  '.join(out))

//! Prototype for `docs/design/bounded-postings.md` (issue 12, 1M chunks): simulates
//! impact-ordered postings segments read under a per-query byte budget, then exact
//! rescoring of the best candidates from their chunk text, against the engine's exact
//! BM25 (`search::bm25`), on a real paged bundle.
//!
//! Usage: `cargo run --release -p jikji-engine --no-default-features --features v1,tables
//! --example sim_segments -- BUNDLE QUERIES.jsonl [LIMIT] [LAYOUTS] [BUDGETS] [RESCORE]`
//!
//! LAYOUTS: comma-separated `s0:ratio:min_kb`: a long list whose raw bytes exceed `min_kb`
//! kB is stored as segments in impact order (`saturate(tf, dl)` descending, doc ascending):
//! the first `s0` postings, then `s0·ratio`, `s0·ratio²`, … each doc-sorted and its own
//! page run (4,096 raw bytes a page, deflated as the writer does); shorter long lists stay
//! whole (read whole, as today). BUDGETS: comma-separated kB of postings pages a query
//! may read (segments are taken by descending `w · bound` — the largest contribution a
//! posting of the segment can make — while they fit; a term's segments in order; a
//! query whose lists all fit reads them all and is exact). RESCORE: comma-separated
//! numbers X of candidates (by the lower-bound sum of what was read) whose chunk text is
//! fetched (chunk pages, their stored bytes counted) and scored exactly (every query
//! term's tf and the length from the analysed text, plus the phrase component); the final
//! top 10 comes from those X.
//!
//! Prints per layout × budget × X: recall@10 against the exact top 10 (set overlap),
//! identical top 10 (order and scores), exact queries (everything read), postings kB and
//! chunk-page kB per query (median / mean / p90), against today's whole lists.

use std::collections::HashMap;
use std::io::BufRead;

use jikji_engine::search::{self, Lexical, PHRASE_DEPTH};
use jikji_format::paged::page::{encode, Kind};
use jikji_format::Bundle;

fn varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Stored bytes of a doc-sorted list written as its own page run (4,096 raw bytes a page).
fn stored(list: &[(u32, u32, u32)]) -> usize {
    let mut raw = Vec::new();
    let mut prev = 0;
    for (i, &(d, tf, dl)) in list.iter().enumerate() {
        varint(&mut raw, if i == 0 { d } else { d - prev });
        varint(&mut raw, tf);
        varint(&mut raw, dl);
        prev = d;
    }
    if raw.len() <= 1024 {
        return 0; // inline in its dictionary entry: comes with the bucket page
    }
    raw.chunks(4096)
        .map(|c| encode(Kind::Postings, c).bytes.len())
        .sum()
}

struct Seg {
    bytes: usize,
    raw: usize,
    bound: f32, // max saturate in the segment
    postings: Vec<(u32, u32, u32)>,
}

struct TermData {
    list: Vec<(u32, u32, u32)>,
    whole: usize,
    segs: HashMap<String, Vec<Seg>>, // layout -> segments (empty vec: whole)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() as f64 - 1.0) * p).round() as usize]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 2 {
        return Err(
            "usage: sim_segments BUNDLE QUERIES.jsonl [LIMIT] [LAYOUTS] [BUDGETS] [RESCORE]".into(),
        );
    }
    let dir = std::path::Path::new(&args[0]);
    let limit: usize = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(50);
    let layouts: Vec<(usize, usize, usize)> = args
        .get(3)
        .map(String::as_str)
        .unwrap_or("256:4:16,1024:4:16,512:2:16")
        .split(',')
        .map(|l| {
            let p: Vec<usize> = l.split(':').map(|x| x.parse().unwrap()).collect();
            (p[0], p[1], p[2])
        })
        .collect();
    let budgets: Vec<usize> = args
        .get(4)
        .map(String::as_str)
        .unwrap_or("16,32,48")
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    let rescores: Vec<usize> = args
        .get(5)
        .map(String::as_str)
        .unwrap_or("10,20,40")
        .split(',')
        .map(|x| x.parse().unwrap())
        .collect();
    // Chunk page sizes by number (pages named c-<gen>-<n>).
    let entry: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join(jikji_format::paged::ENTRY_FILE))?)?;
    let per_page = entry["pages"]["chunks"]["per_page"].as_u64().unwrap_or(1) as u32;
    let mut cbytes: HashMap<u32, usize> = HashMap::new();
    for e in std::fs::read_dir(dir.join("p"))? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        if let Some(rest) = name.strip_prefix("c-") {
            if let Some(n) = rest.rsplit('-').next().and_then(|n| n.parse().ok()) {
                cbytes.insert(n, e.metadata()?.len() as usize);
            }
        }
    }
    let bundle = Bundle::open_dir(dir)?;
    let lex = Lexical::of(&bundle);
    let index = lex.index;
    let params = lex.params;
    let n = index.num_docs() as f32;
    let avgdl = index.avg_doc_len().max(1e-6);
    let saturate = |tf: f32, dl: u32| {
        let dl = dl as f32;
        tf * (params.k1 + 1.0) / (tf + params.k1 * (1.0 - params.b + params.b * dl / avgdl))
    };
    let use_ub = std::env::var("SIM_UB").is_ok();
    let mut terms_cache: HashMap<String, TermData> = HashMap::new();
    // (layout, budget, x) -> (recall sum, identical, exact, postings kB vec, chunk kB vec)
    type Acc = (f64, usize, usize, Vec<f64>, Vec<f64>, f64, f64, usize);
    let mut acc: HashMap<(usize, usize, usize), Acc> = HashMap::new();
    let mut today_post = Vec::new();
    let mut today_chunks = Vec::new();
    let mut queries = 0usize;
    let mut check_fail = 0usize;
    for line in std::io::BufReader::new(std::fs::File::open(&args[1])?).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        if queries >= limit {
            break;
        }
        queries += 1;
        let v: serde_json::Value = serde_json::from_str(&line)?;
        let text = v["text"].as_str().ok_or("query without text")?.to_string();
        let query = search::without_question_words(lex.analyzer, &text).into_owned();
        let sequence = lex.analyzer.analyze(&query);
        let exact_top = search::bm25(&lex, &query, 10)?;
        // The query's terms, weights and lists.
        let mut qts = Vec::new(); // (term, w, exact)
        let mut n_exact = 0usize;
        let mut phrase_idf = 0.0f32;
        for q in search::query_terms(&lex, &query)? {
            if q.exact {
                n_exact += 1;
            }
            if !terms_cache.contains_key(&q.term) {
                let Some(list) = index.postings_with_len(&q.term)? else {
                    continue;
                };
                let whole = stored(&list);
                terms_cache.insert(
                    q.term.clone(),
                    TermData {
                        list,
                        whole,
                        segs: HashMap::new(),
                    },
                );
            }
            let td = terms_cache.get_mut(&q.term).unwrap();
            let df = td.list.len() as f32;
            let mut idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            if q.exact {
                phrase_idf += idf;
            }
            if let Some(c) = q.idf_cap {
                idf = idf.min(c);
            }
            let w = q.weight * idf;
            for &(s0, ratio, min_kb) in &layouts {
                let key = format!("{s0}:{ratio}:{min_kb}");
                if td.segs.contains_key(&key) {
                    continue;
                }
                let mut raw_len = 0usize;
                {
                    let mut tmp = Vec::new();
                    let mut prev = 0;
                    for (i, &(d, tf, dl)) in td.list.iter().enumerate() {
                        varint(&mut tmp, if i == 0 { d } else { d - prev });
                        varint(&mut tmp, tf);
                        varint(&mut tmp, dl);
                        prev = d;
                    }
                    raw_len += tmp.len();
                }
                let mut segs = Vec::new();
                if raw_len > min_kb * 1000 {
                    let mut order: Vec<(f32, u32, u32, u32)> = td
                        .list
                        .iter()
                        .map(|&(d, tf, dl)| (saturate(tf as f32, dl), d, tf, dl))
                        .collect();
                    order.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap().then(a.1.cmp(&b.1)));
                    let mut i = 0;
                    let mut size = s0;
                    while i < order.len() {
                        let j = (i + size).min(order.len());
                        let bound = order[i].0;
                        let mut p: Vec<(u32, u32, u32)> = order[i..j]
                            .iter()
                            .map(|&(_, d, tf, dl)| (d, tf, dl))
                            .collect();
                        p.sort_unstable();
                        let mut raw = Vec::new();
                        let mut prev = 0;
                        for (k, &(d, tf, dl)) in p.iter().enumerate() {
                            varint(&mut raw, if k == 0 { d } else { d - prev });
                            varint(&mut raw, tf);
                            varint(&mut raw, dl);
                            prev = d;
                        }
                        let bytes = raw
                            .chunks(4096)
                            .map(|c| encode(Kind::Postings, c).bytes.len())
                            .sum();
                        segs.push(Seg {
                            bytes,
                            raw: raw.len(),
                            bound,
                            postings: p,
                        });
                        i = j;
                        size *= ratio;
                    }
                }
                td.segs.insert(key, segs);
            }
            qts.push((q.term.clone(), w, q.exact));
        }
        // Exact plain sums (term order, f32) and exact-term counts, for the check and rescoring.
        let nd = index.num_docs();
        let mut full = vec![0.0f32; nd];
        let mut hits = vec![0u8; nd];
        let mut dlen = vec![0u32; nd];
        let mut touched = Vec::new();
        let mut seen = vec![false; nd];
        for (t, w, ex) in &qts {
            for &(d, tf, dl) in &terms_cache[t].list {
                let di = d as usize;
                if !seen[di] {
                    seen[di] = true;
                    touched.push(d);
                }
                full[di] += w * saturate(tf as f32, dl);
                dlen[di] = dl;
                if *ex {
                    hits[di] += 1;
                }
            }
        }
        let phrase = |d: u32| -> Result<f32, Box<dyn std::error::Error>> {
            if sequence.len() < 2 || (hits[d as usize] as usize) < n_exact {
                return Ok(0.0);
            }
            let t = lex.chunks.get(d)?.text;
            let dt = lex.analyzer.analyze(&t);
            let pf = dt
                .windows(sequence.len())
                .filter(|w| *w == sequence.as_slice())
                .count();
            Ok(if pf > 0 {
                phrase_idf * saturate(pf as f32, dlen[d as usize])
            } else {
                0.0
            })
        };
        // Check: our exhaustive replay equals the engine's top 10.
        let plain = search::top_k(
            touched.iter().map(|&d| (d, full[d as usize])).collect(),
            PHRASE_DEPTH.max(10),
        );
        let mut fin = Vec::new();
        for &(d, s) in &plain {
            fin.push((d, s + phrase(d)?));
        }
        let fin = if sequence.len() < 2 {
            plain.iter().take(10).copied().collect()
        } else {
            search::top_k(fin, 10)
        };
        if fin != exact_top {
            check_fail += 1;
        }
        let exact_set: std::collections::HashSet<u32> = exact_top.iter().map(|x| x.0).collect();
        // Today: whole long lists; chunk pages of S200 docs holding every exact term + top 10.
        let tp: usize = qts.iter().map(|(t, _, _)| terms_cache[t].whole).sum();
        today_post.push(tp as f64 / 1000.0);
        let mut pages = std::collections::BTreeSet::new();
        if sequence.len() >= 2 {
            for &(d, _) in &plain {
                if (hits[d as usize] as usize) >= n_exact {
                    pages.insert(d / per_page);
                }
            }
        }
        for &(d, _) in exact_top.iter() {
            pages.insert(d / per_page);
        }
        today_chunks.push(
            pages
                .iter()
                .map(|p| cbytes.get(p).copied().unwrap_or(0))
                .sum::<usize>() as f64
                / 1000.0,
        );
        for &(s0, ratio, min_kb) in &layouts {
            let key = format!("{s0}:{ratio}:{min_kb}");
            for &budget in &budgets {
                // Plan: whole lists always; segments by priority while they fit.
                let mut spent = 0usize;
                let mut spent_raw = 0usize;
                let mut items = Vec::new(); // (priority, term index, seg index)
                for (i, (t, w, _)) in qts.iter().enumerate() {
                    let segs = &terms_cache[t].segs[&key];
                    if segs.is_empty() {
                        spent += terms_cache[t].whole;
                    } else {
                        for (j, s) in segs.iter().enumerate() {
                            items.push((w * s.bound, i, j));
                        }
                    }
                }
                if std::env::var("SIM_RARE").is_ok() {
                    // Whole lists first, ascending size (the rarest terms complete), then by w·bound.
                    let size = |i: usize| {
                        terms_cache[&qts[i].0].segs[&key]
                            .iter()
                            .map(|s| s.raw)
                            .sum::<usize>()
                    };
                    let mut order: Vec<usize> = (0..qts.len())
                        .filter(|&i| !terms_cache[&qts[i].0].segs[&key].is_empty())
                        .collect();
                    order.sort_by_key(|&i| (size(i), i));
                    let mut boost = vec![0.0f32; qts.len()];
                    let mut acc_raw = 0usize;
                    for &i in &order {
                        if acc_raw + size(i) <= budget * 1000 {
                            acc_raw += size(i);
                            boost[i] = f32::INFINITY;
                        } else {
                            break;
                        }
                    }
                    for it in items.iter_mut() {
                        if boost[it.1].is_infinite() {
                            it.0 = f32::MAX;
                        }
                    }
                }
                items.sort_by(|a, b| {
                    b.0.partial_cmp(&a.0)
                        .unwrap()
                        .then(a.1.cmp(&b.1))
                        .then(a.2.cmp(&b.2))
                });
                let mut next = vec![0usize; qts.len()];
                let mut stop = vec![false; qts.len()];
                let mut read = vec![0usize; qts.len()]; // segments read per term
                let mut all = true;
                for &(_, i, j) in &items {
                    if stop[i] || next[i] != j {
                        all = false;
                        continue;
                    }
                    let sg = &terms_cache[&qts[i].0].segs[&key][j];
                    if spent_raw + sg.raw <= budget * 1000 {
                        spent_raw += sg.raw;
                        spent += sg.bytes;
                        next[i] += 1;
                        read[i] += 1;
                    } else {
                        stop[i] = true;
                        all = false;
                    }
                }
                // Lower-bound sums over what was read (term order).
                let mut lb: HashMap<u32, f32> = HashMap::new();
                for (i, (t, w, _)) in qts.iter().enumerate() {
                    let td = &terms_cache[t];
                    let segs = &td.segs[&key];
                    if segs.is_empty() {
                        for &(d, tf, dl) in &td.list {
                            *lb.entry(d).or_default() += w * saturate(tf as f32, dl);
                        }
                    } else {
                        // within a term, a doc is in one segment only: order does not matter
                        for s in &segs[..read[i]] {
                            for &(d, tf, dl) in &s.postings {
                                *lb.entry(d).or_default() += w * saturate(tf as f32, dl);
                            }
                        }
                    }
                }
                // Optimistic bound: what a doc could still get from the segments not read.
                let residual: Vec<f32> = qts
                    .iter()
                    .enumerate()
                    .map(|(i, (t, w, _))| {
                        let segs = &terms_cache[t].segs[&key];
                        segs.get(read[i]).map_or(0.0, |s| w * s.bound)
                    })
                    .collect();
                let total_residual: f32 = residual.iter().sum();
                let ranked = if use_ub {
                    let mut seen_in: HashMap<u32, f32> = HashMap::new();
                    for (i, (t, _, _)) in qts.iter().enumerate() {
                        if residual[i] == 0.0 {
                            continue;
                        }
                        for s in &terms_cache[t].segs[&key][..read[i]] {
                            for &(d, _, _) in &s.postings {
                                *seen_in.entry(d).or_default() += residual[i];
                            }
                        }
                    }
                    search::top_k(
                        lb.into_iter()
                            .map(|(d, x)| {
                                (
                                    d,
                                    x + total_residual - seen_in.get(&d).copied().unwrap_or(0.0),
                                )
                            })
                            .collect(),
                        PHRASE_DEPTH.max(10),
                    )
                } else {
                    search::top_k(lb.into_iter().collect(), PHRASE_DEPTH.max(10))
                };
                for &x in &rescores {
                    let e = acc
                        .entry((
                            layouts
                                .iter()
                                .position(|l| *l == (s0, ratio, min_kb))
                                .unwrap(),
                            budget,
                            x,
                        ))
                        .or_default();
                    let (top, chunk_kb) = if all {
                        // everything read: today's algorithm, today's chunk pages
                        (fin.clone(), *today_chunks.last().unwrap())
                    } else {
                        let cands: Vec<u32> = ranked.iter().take(x).map(|c| c.0).collect();
                        let mut scored = Vec::new();
                        let mut pg = std::collections::BTreeSet::new();
                        for &d in &cands {
                            pg.insert(d / per_page);
                            scored.push((d, full[d as usize] + phrase(d)?));
                        }
                        (
                            search::top_k(scored, 10),
                            pg.iter()
                                .map(|p| cbytes.get(p).copied().unwrap_or(0))
                                .sum::<usize>() as f64
                                / 1000.0,
                        )
                    };
                    let inter = top.iter().filter(|h| exact_set.contains(&h.0)).count();
                    // Tie-aware: hits whose exact score reaches the exact 10th (ties count).
                    let exact_score = |d: u32| -> Result<f32, Box<dyn std::error::Error>> {
                        Ok(full[d as usize] + phrase(d)?)
                    };
                    let tenth = exact_top.last().map_or(0.0, |x| x.1);
                    let mut reach = 0usize;
                    let mut sum = 0.0f64;
                    for h in &top {
                        let sc = exact_score(h.0)?;
                        sum += sc as f64;
                        if sc >= tenth * (1.0 - 1e-4) {
                            reach += 1;
                        }
                    }
                    let esum: f64 = exact_top.iter().map(|x| x.1 as f64).sum();
                    e.5 += if esum > 0.0 { sum / esum } else { 1.0 };
                    e.6 += if exact_top.is_empty() {
                        1.0
                    } else {
                        reach as f64 / exact_top.len() as f64
                    };
                    if top.first().map(|x| x.0) == exact_top.first().map(|x| x.0) {
                        e.7 += 1;
                    }
                    if std::env::var("SIM_DIAG").is_ok() && x == rescores[0] && budget == budgets[0]
                    {
                        let pos: Vec<String> = exact_top
                            .iter()
                            .map(|(d, _)| {
                                ranked
                                    .iter()
                                    .position(|r| r.0 == *d)
                                    .map_or("-".into(), |p| p.to_string())
                            })
                            .collect();
                        let tinfo: Vec<String> = qts
                            .iter()
                            .enumerate()
                            .map(|(i, (t, w, ex))| {
                                format!(
                                    "{t}{}:df{}:w{:.2}:r{}/{}",
                                    if *ex { "" } else { "*" },
                                    terms_cache[t].list.len(),
                                    w,
                                    read[i],
                                    terms_cache[t].segs[&key].len()
                                )
                            })
                            .collect();
                        eprintln!(
                            "\nQ {text} | exact top10 lb ranks {pos:?} | scores {:?} | {}",
                            exact_top.iter().map(|x| x.1).collect::<Vec<_>>(),
                            tinfo.join(" ")
                        );
                    }
                    e.0 += if exact_top.is_empty() {
                        1.0
                    } else {
                        inter as f64 / exact_top.len() as f64
                    };
                    if top == exact_top {
                        e.1 += 1;
                    }
                    if all {
                        e.2 += 1;
                    }
                    e.3.push(spent as f64 / 1000.0);
                    e.4.push(chunk_kb);
                }
            }
        }
        eprint!("\r{queries} queries");
    }
    eprintln!();
    println!("queries {queries}; replay differs from the engine's top 10 on {check_fail}");
    println!(
        "today: postings kB median {:.1} mean {:.1} p90 {:.1}; chunk pages kB median {:.1} mean {:.1}",
        pct(&mut today_post.clone(), 0.5),
        today_post.iter().sum::<f64>() / queries as f64,
        pct(&mut today_post.clone(), 0.9),
        pct(&mut today_chunks.clone(), 0.5),
        today_chunks.iter().sum::<f64>() / queries as f64
    );
    println!("| layout s0:ratio:min_kB | budget kB (raw) | rescored X | recall@10 | tie-aware recall@10 | score@10 ratio | top-1 equal | identical top 10 | exact queries | postings kB median / mean / p90 | chunk kB median / mean | total median |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut keys: Vec<_> = acc.keys().copied().collect();
    keys.sort();
    for k in keys {
        let e = acc.get_mut(&k).unwrap();
        let (s0, r, m) = layouts[k.0];
        let mut tot: Vec<f64> = e.3.iter().zip(&e.4).map(|(a, b)| a + b).collect();
        println!(
            "| {s0}:{r}:{m} | {} | {} | {:.3} | {:.3} | {:.4} | {}/{queries} | {}/{queries} | {}/{queries} | {:.1} / {:.1} / {:.1} | {:.1} / {:.1} | {:.1} |",
            k.1,
            k.2,
            e.0 / queries as f64,
            e.6 / queries as f64,
            e.5 / queries as f64,
            e.7,
            e.1,
            e.2,
            pct(&mut e.3.clone(), 0.5),
            e.3.iter().sum::<f64>() / queries as f64,
            pct(&mut e.3.clone(), 0.9),
            pct(&mut e.4.clone(), 0.5),
            e.4.iter().sum::<f64>() / queries as f64,
            pct(&mut tot, 0.5),
        );
    }
    Ok(())
}

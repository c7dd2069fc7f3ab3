//! Prototype for `docs/design/impact-postings.md`: dumps, per query, what BM25 reads and
//! computes, so a simulation (`scripts/prototype-impact-postings.py`) can replay the
//! candidate layouts of long postings lists and check its top-k against the engine's.
//!
//! Usage: `cargo run --release -p jikji-engine --no-default-features --features v1,tables
//! --example dump_postings -- BUNDLE QUERIES.jsonl OUT.jsonl`
//!
//! One JSON line per query: the bundle's `n`, `avgdl`, `k1`, `b`; the query's `terms`
//! (`search::query_terms`, in the engine's order) each with its exact flag, weight, idf as the
//! engine uses it (after the expansion cap), its postings `docs`, `tf`, `dl` and the `imp`act
//! `weight·idf·saturate(tf, dl)` computed with the engine's f32 expressions, and `bytes`: the
//! list's length as stored (`(doc_delta, tf, doc_len)` varints, FORMAT.md; > 1,024 = long);
//! `n_exact`, `seq_len`, `phrase_idf`; `pf`: the phrase count of every chunk in the plain top
//! `PHRASE_DEPTH` that holds every exact term; `top`: `search::bm25(…, 10)` (doc, score) and
//! `ids`: those chunks' record ids (to compare with `jikji search --json`).

use std::io::{BufRead, Write};

use jikji_engine::search::{self, Lexical, PHRASE_DEPTH};
use jikji_format::Bundle;

fn varint_len(mut v: u32) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 3 {
        return Err("usage: dump_postings BUNDLE QUERIES.jsonl OUT.jsonl".into());
    }
    let bundle = Bundle::open_dir(std::path::Path::new(&args[0]))?;
    let lex = Lexical::of(&bundle);
    let index = lex.index;
    let params = lex.params;
    let n = index.num_docs() as f32;
    let avgdl = index.avg_doc_len().max(1e-6);
    let saturate = |tf: f32, dl: u32| {
        let dl = dl as f32;
        tf * (params.k1 + 1.0) / (tf + params.k1 * (1.0 - params.b + params.b * dl / avgdl))
    };
    let mut out = std::io::BufWriter::new(std::fs::File::create(&args[2])?);
    for line in std::io::BufReader::new(std::fs::File::open(&args[1])?).lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line)?;
        let text = v["text"].as_str().ok_or("query without text")?.to_string();
        let query = search::without_question_words(lex.analyzer, &text).into_owned();
        let sequence = lex.analyzer.analyze(&query);
        let mut terms = Vec::new();
        let mut n_exact = 0usize;
        let mut phrase_idf = 0.0f32;
        // The plain BM25 sums, as the engine accumulates them (term order, f32).
        let mut score = vec![0.0f32; index.num_docs()];
        let mut exact_hits = vec![0u8; index.num_docs()];
        let mut doc_len = vec![0u32; index.num_docs()];
        let mut touched = Vec::new();
        let mut seen = vec![false; index.num_docs()];
        for q in search::query_terms(&lex, &query)? {
            if q.exact {
                n_exact += 1;
            }
            let Some(list) = index.postings_with_len(&q.term)? else {
                continue;
            };
            let df = list.len() as f32;
            let mut idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            if q.exact {
                phrase_idf += idf;
            }
            if let Some(c) = q.idf_cap {
                idf = idf.min(c);
            }
            let w = q.weight * idf;
            let (mut docs, mut tfs, mut dls, mut imps) = (vec![], vec![], vec![], vec![]);
            let (mut bytes, mut prev) = (0usize, 0u32);
            for (i, &(doc, tf, dl)) in list.iter().enumerate() {
                let imp = w * saturate(tf as f32, dl);
                let d = doc as usize;
                if !seen[d] {
                    seen[d] = true;
                    touched.push(doc);
                }
                score[d] += imp;
                if q.exact {
                    doc_len[d] = dl;
                    exact_hits[d] += 1;
                }
                bytes += varint_len(if i == 0 { doc } else { doc - prev })
                    + varint_len(tf)
                    + varint_len(dl);
                prev = doc;
                docs.push(doc);
                tfs.push(tf);
                dls.push(dl);
                imps.push(imp);
            }
            terms.push(serde_json::json!({
                "term": q.term, "exact": q.exact, "weight": q.weight, "idf": idf, "w": w,
                "df": list.len(), "bytes": bytes,
                "docs": docs, "tf": tfs, "dl": dls, "imp": imps,
            }));
        }
        let scored: Vec<(u32, f32)> = touched.iter().map(|&d| (d, score[d as usize])).collect();
        let plain = search::top_k(scored, PHRASE_DEPTH.max(10));
        let mut pf = serde_json::Map::new();
        if sequence.len() >= 2 {
            for &(doc, _) in &plain {
                if (exact_hits[doc as usize] as usize) < n_exact {
                    continue;
                }
                let t = lex.chunks.get(doc)?.text;
                let dt = lex.analyzer.analyze(&t);
                let c = dt
                    .windows(sequence.len())
                    .filter(|w| *w == sequence.as_slice())
                    .count();
                pf.insert(doc.to_string(), c.into());
            }
        }
        let top = search::bm25(&lex, &query, 10)?;
        let ids: Vec<String> = top
            .iter()
            .map(|&(d, _)| lex.chunks.get(d).map(|r| r.id))
            .collect::<Result<_, _>>()?;
        let rec = serde_json::json!({
            "q": text, "n": index.num_docs(), "avgdl": avgdl, "k1": params.k1, "b": params.b,
            "n_exact": n_exact, "seq_len": sequence.len(), "phrase_idf": phrase_idf,
            "terms": terms, "pf": pf,
            "plain": plain.iter().map(|&(d, s)| serde_json::json!([d, s])).collect::<Vec<_>>(),
            "top": top.iter().map(|&(d, s)| serde_json::json!([d, s])).collect::<Vec<_>>(),
            "ids": ids,
        });
        writeln!(out, "{rec}")?;
    }
    Ok(())
}

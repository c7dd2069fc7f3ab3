//! Ranking: BM25 over the postings, exact dense scan over int8 vectors, and reciprocal
//! rank fusion. Pure Rust with no I/O, so native and wasm builds rank identically.

use jikji_format::hash::Map as HashMap;
use std::borrow::Cow;
use std::cmp::Ordering;

use crate::centring::DenseScorer;
use jikji_format::analyzer::{script_of, Analyzer, Script};
use jikji_format::paged::{Chunks, Hanja, Lexicon};
use jikji_format::{Bm25Params, Bundle, Result};

/// RRF constant k (Cormack, Clarke & Büttcher 2009, "Reciprocal Rank Fusion outperforms
/// Condorcet and individual Rank Learning Methods").
pub const RRF_K: f32 = 60.0;

/// How many candidates each ranker contributes to hybrid fusion, at least.
pub const FUSION_DEPTH: usize = 100;

/// A `(doc id, score)` pair; doc ids index the chunk store.
pub type Scored = (u32, f32);

/// Sorts by score descending, ties by doc id ascending, and keeps the first `k`.
///
/// More than `k` candidates: one pass keeping the `k` best so far in order (a candidate not
/// better than the worst kept costs one comparison; the others are inserted by binary
/// search), instead of core's `select_nth_unstable_by` (its introselect and quicksort
/// partitions were ~5 kB of the browser's engine wasm: sixth round of
/// `docs/design/wasm-size.md`). Doc ids are distinct, so the order is total for scores that
/// are not NaN and both ways keep the same `k` in the same order.
#[cfg_attr(jikji_nightly, optimize(speed))]
pub fn top_k(mut scored: Vec<Scored>, k: usize) -> Vec<Scored> {
    let cmp = |a: &Scored, b: &Scored| {
        b.1.partial_cmp(&a.1)
            .unwrap_or(Ordering::Equal)
            .then(a.0.cmp(&b.0))
    };
    if scored.len() > k && k > 0 {
        let mut best: Vec<Scored> = Vec::with_capacity(k + 1);
        for s in scored {
            if best.len() == k {
                if cmp(&s, &best[k - 1]) != Ordering::Less {
                    continue;
                }
                best.pop();
            }
            let at = best.partition_point(|b| cmp(b, &s) != Ordering::Greater);
            best.insert(at, s);
        }
        return best;
    }
    jikji_format::sort::sort_by(&mut scored, cmp);
    scored.truncate(k);
    scored
}

/// How many of the best BM25 candidates are re-scored with the phrase component.
pub const PHRASE_DEPTH: usize = 200;

/// How query terms are expanded beyond the exact analyzed terms, and how much an
/// expanded term weighs against an exact one (a weight of 0 turns an expansion off).
///
/// An expanded term's BM25 contribution is `weight × min(idf(expanded), idf(original))`
/// × its saturated tf (the cap applies when the original term is in the dictionary), so
/// with a weight below 1 a chunk matching only an expansion ranks below an otherwise equal
/// chunk matching the exact term. Defaults were measured on the eval sets (README).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Expansion {
    /// Weight of dictionary terms that start with the last query word (a Latin word of
    /// 3+ characters or a Hangul word of 2+), when the query does not end in a space or
    /// punctuation (the user is still typing it).
    pub prefix: f32,
    /// Weight of dictionary terms within Levenshtein distance 1 of a Latin query word of
    /// 5+ characters, 2 for 9+ characters (distance on the stemmed form; the length is the
    /// typed word's), for words in at most [`FUZZY_MAX_DF`] chunks.
    pub fuzzy: f32,
    /// Weight of a Hangul bigram's Hanja forms and a Han bigram's Hangul readings, from
    /// the bundle's `hanja.fst` (when it has one).
    pub hanja: f32,
    /// Exponent α of the weight `n^−α` given to each of the `n` distinct terms (bigrams and
    /// lemma) of one Korean query word, so that a long word (a name, a compound) does not
    /// outweigh the rest of the query by its many bigrams: 마리 앙투아네트가 남편에게
    /// 선물받은 궁전은? ranked a chunk repeating the name above the one about the gift.
    /// 0 = every term weight 1. Default 0.5 (1/√n; korquad-dev BM25 nDCG@10 rose with it,
    /// 1 is worse than 0.5).
    pub hangul_norm: f32,
}

impl Default for Expansion {
    fn default() -> Self {
        Expansion {
            prefix: 0.5,
            fuzzy: 0.3,
            hanja: 0.3,
            hangul_norm: 0.5,
        }
    }
}

impl Expansion {
    /// No expansion: exact terms only.
    pub const NONE: Expansion = Expansion {
        prefix: 0.0,
        fuzzy: 0.0,
        hanja: 0.0,
        hangul_norm: 0.0,
    };
}

/// Typo expansion is tried only for query words whose term is in at most this many
/// chunks. Measured (BM25 nDCG@10, SciFact): expanding every word of 5+ letters with weight
/// 0.3 gave 0.6562 but median latency 52 ms against 3 ms; words in ≤ 2 chunks only gave
/// 0.6518 (rare real words drift to common neighbours); absent words only (0) gave
/// 0.6534, the same as no typo expansion, at no latency cost. So a typo is a word the
/// dictionary does not have, and an exact match always outranks a typo match.
pub const FUZZY_MAX_DF: u32 = 0;

/// At most this many dictionary terms are added per expanded query word.
pub const MAX_EXPANSIONS: usize = 30;

/// Longest query word (in chars) that gets typo expansion. The Levenshtein automaton of a
/// word costs memory and time that grow with its length (a 33,000-letter word took 2.6 GB
/// and 7 s; a newcomer found it), and no word that long is a typo of a dictionary word.
pub const FUZZY_MAX_CHARS: usize = 40;

/// Everything lexical search reads: the index, the chunk store (for the phrase
/// component), BM25 parameters, the bundle's analyzer and optional Hanja table.
pub struct Lexical<'a> {
    /// Term dictionary and postings.
    pub index: &'a Lexicon,
    /// Chunk records.
    pub chunks: &'a Chunks,
    /// BM25 k1 and b.
    pub params: Bm25Params,
    /// The analyzer the bundle was built with.
    pub analyzer: &'a Analyzer,
    /// Hangul ↔ Hanja readings, if the bundle has them.
    pub hanja: Option<&'a Hanja>,
    /// Query expansion weights.
    pub expansion: Expansion,
    /// Per doc id, whether the chunk may be ranked ([`crate::Filters::allowed`]); a chunk
    /// left out (or beyond the slice) is never scored. `None`: every chunk.
    pub allow: Option<&'a [bool]>,
}

/// True if `allow` lets doc `d` be ranked.
pub fn allows(allow: Option<&[bool]>, d: u32) -> bool {
    allow.is_none_or(|a| a.get(d as usize) == Some(&true))
}

impl<'a> Lexical<'a> {
    /// The lexical parts of `bundle`, with the default [`Expansion`].
    pub fn of(bundle: &'a Bundle) -> Self {
        Lexical {
            index: bundle.lexical(),
            chunks: bundle.chunks(),
            params: bundle.manifest().bm25,
            analyzer: bundle.analyzer(),
            hanja: bundle.hanja(),
            expansion: Expansion::default(),
            allow: None,
        }
    }
}

/// Modern Chinese question words (Simplified; a query is folded before matching), removed
/// from a lexical query by [`without_question_words`], longest first. Passages are
/// statements, so these words are rare in them and get a high idf: "NASUWT是什么？" ranked a
/// chunk about Turing machines that says "意味着什么" above the one about the NASUWT union.
/// Compounds of 哪 are listed whole so that no stray 里/儿/个 is left to search. Characters
/// that also start ordinary words (几 in 几乎, 吗 in 吗啡) are not listed; see
/// [`NOT_QUESTION_WORDS_ZH`] for the words of 哪 that are not questions.
pub const QUESTION_WORDS_ZH: &[&str] = &[
    "为什么",
    "什么",
    "怎么样",
    "怎么",
    "怎样",
    "哪里",
    "哪儿",
    "哪个",
    "哪些",
    "哪一",
    "哪",
    "谁",
    "多少",
    "如何",
    "是否",
];

/// Words that start like a [`QUESTION_WORDS_ZH`] entry but are not questions (哪吒, the
/// name, which folding turns into 哪咤; 哪怕, "even if"): kept in the query.
pub const NOT_QUESTION_WORDS_ZH: &[&str] = &["哪吒", "哪咤", "哪怕"];

/// `query` with the [`QUESTION_WORDS_ZH`] in it replaced by spaces (after the analyzer's
/// normalisation, so Traditional 什麼 counts as 什么; [`NOT_QUESTION_WORDS_ZH`] are kept),
/// unless nothing but question words and punctuation would be left; the query unchanged
/// when it has none. BM25 and its calibration bound ([`crate::fusion::bm25_upper_bound`])
/// search this text; the index is untouched, so a query of only question words (哪里)
/// still finds them.
pub fn without_question_words<'q>(analyzer: &Analyzer, query: &'q str) -> Cow<'q, str> {
    let norm = analyzer.normalize(query);
    if !QUESTION_WORDS_ZH
        .iter()
        .any(|w| jikji_format::strs::contains(&norm, w))
    {
        return Cow::Borrowed(query);
    }
    let mut out = String::with_capacity(norm.len());
    let mut rest = norm.as_str();
    'scan: while let Some(c) = rest.chars().next() {
        if let Some(keep) = NOT_QUESTION_WORDS_ZH.iter().find(|w| rest.starts_with(*w)) {
            out.push_str(keep);
            rest = &rest[keep.len()..];
            continue;
        }
        for w in QUESTION_WORDS_ZH {
            if rest.starts_with(w) {
                out.push(' ');
                rest = &rest[w.len()..];
                continue 'scan;
            }
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    if out.chars().any(char::is_alphanumeric) {
        Cow::Owned(out)
    } else {
        Cow::Borrowed(query)
    }
}

/// One weighted query term.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryTerm {
    /// The index term.
    pub term: String,
    /// Weight: 1 for an exact term, the [`Expansion`] weight for an expansion.
    pub weight: f32,
    /// For an expansion, the idf of the query term it expands (if in the dictionary).
    pub idf_cap: Option<f32>,
    /// True for the query's own analyzed terms.
    pub exact: bool,
}

/// The weighted query terms of `query`: its distinct analyzed terms (exact), then its
/// expansions in term order (see [`Expansion`]). Errors on corrupt postings bytes.
pub fn query_terms(lex: &Lexical, query: &str) -> Result<Vec<QueryTerm>> {
    let a = lex.analyzer;
    let index = lex.index;
    let n = index.num_docs() as f32;
    let idf_of = |t: &str| -> Result<Option<f32>> {
        let df = index.df(t)? as f32;
        Ok((df > 0.0).then(|| (1.0 + (n - df + 0.5) / (df + 0.5)).ln()))
    };
    let mut exact: Vec<String> = a.analyze(query);
    jikji_format::sort::sort(&mut exact);
    exact.dedup();
    // The weight of each term of a Hangul word (the largest over the words that give it),
    // and below the expansions: small lists searched linearly rather than hash maps (a query
    // has tens of terms, at most `MAX_EXPANSIONS` expansions per word; each map type was
    // ~2.5 kB of the browser's wasm: issue 12, ninth round of docs/design/wasm-size.md).
    let mut word_weight: Vec<(String, f32)> = Vec::new();
    if lex.expansion.hangul_norm > 0.0 {
        for (w, script) in a.words(query) {
            if script != Script::Hangul {
                continue;
            }
            let mut terms = a.analyze(&w.iter().collect::<String>());
            jikji_format::sort::sort(&mut terms);
            terms.dedup();
            // n^(-h) as exp(-h·ln n): the browser's wasm already carries expf and logf, and
            // powf was 1.6 kB more of it (issue 12, ninth round of docs/design/wasm-size.md);
            // within an ulp or two of powf, the same natively and in wasm.
            let wt = (-lex.expansion.hangul_norm * (terms.len().max(1) as f32).ln()).exp();
            for t in terms {
                match word_weight.iter_mut().find(|(k, _)| *k == t) {
                    Some((_, e)) => *e = e.max(wt),
                    None => word_weight.push((t, wt)),
                }
            }
        }
    }
    let mut out: Vec<QueryTerm> = exact
        .iter()
        .map(|t| QueryTerm {
            term: t.clone(),
            weight: word_weight
                .iter()
                .find(|(k, _)| k == t)
                .map_or(1.0, |&(_, w)| w),
            idf_cap: None,
            exact: true,
        })
        .collect();
    // Each expansion term once: its first weight and cap, replaced by a later one of a
    // strictly larger weight.
    let mut extra: Vec<QueryTerm> = Vec::new();
    let mut add = |t: String, w: f32, cap: Option<f32>| {
        if exact.binary_search(&t).is_ok() {
            return;
        }
        match extra.iter_mut().find(|e| e.term == t) {
            Some(e) if w > e.weight => {
                e.weight = w;
                e.idf_cap = cap;
            }
            Some(_) => {}
            None => extra.push(QueryTerm {
                term: t,
                weight: w,
                idf_cap: cap,
                exact: false,
            }),
        }
    };
    let ex = lex.expansion;
    let words = a.words(query);
    if ex.prefix > 0.0 {
        let typing = query.chars().last().is_some_and(|c| c.is_alphanumeric());
        if let Some((w, script)) = words.last().filter(|_| typing) {
            let min = if *script == Script::Hangul { 2 } else { 3 };
            if matches!(script, Script::Alnum | Script::Hangul) && w.len() >= min {
                let word: String = w.iter().collect();
                let cap = idf_of(&a.stem_word(&word))?;
                for t in index.prefix_terms(&word, MAX_EXPANSIONS)? {
                    add(t, ex.prefix, cap);
                }
            }
        }
    }
    if ex.fuzzy > 0.0 {
        for (w, script) in &words {
            let len = w.len();
            if *script != Script::Alnum
                || !(5..=FUZZY_MAX_CHARS).contains(&len)
                || !w.iter().all(|c| c.is_alphabetic())
            {
                continue;
            }
            let word: String = w.iter().collect();
            let stem = a.stem_word(&word);
            if exact.binary_search_by(|t| t.as_str().cmp(&stem)).is_err() {
                continue; // a stopword
            }
            if index.df(&stem)? > FUZZY_MAX_DF {
                continue; // a well-attested word: most likely not a typo
            }
            if !index.knows(&stem) {
                // A paged bundle whose block for the word is not loaded yet: its df of 0
                // means "unknown", not "absent"; decide in the next pass (else every
                // word would fetch the typo dictionary).
                continue;
            }
            let distance = if len >= 9 { 2 } else { 1 };
            let cap = idf_of(&stem)?;
            for t in index.fuzzy_terms(&stem, distance, MAX_EXPANSIONS)? {
                add(t, ex.fuzzy, cap);
            }
        }
    }
    if let (Some(h), true) = (lex.hanja, ex.hanja > 0.0) {
        for t in &exact {
            let cs: Vec<char> = t.chars().collect();
            if cs.len() != 2 {
                continue;
            }
            let (s0, s1) = (script_of(cs[0]), script_of(cs[1]));
            if !(s0 == s1 && matches!(s0, Script::Hangul | Script::Han)) {
                continue;
            }
            // A paged bundle's bigram expansion pages hold the answer of the search
            // below (the candidates that are dictionary terms), so the candidates' df
            // lookups fetch no dictionary block for the many that do not exist. They
            // cover every Hangul key, and the Han keys that are dictionary terms.
            // Expansion buckets (large paged bundles) hold the same lists with each
            // candidate's df and postings place, so a candidate needs no lookup round.
            let buckets = index.has_expansion_buckets();
            let candidates = |t: &str| {
                if buckets {
                    index.expansions(t)
                } else {
                    h.bigram_candidates(t)
                }
            };
            if buckets || h.has_expansions() {
                let covered = if s0 == Script::Hangul {
                    true
                } else if !index.knows(t) {
                    // Decided in the next pass, once the term's block is in: record it as
                    // missing, and its expansion page, so both come in this round.
                    index.df(t)?;
                    candidates(t)?;
                    continue;
                } else {
                    index.df(t)? > 0
                };
                if let Some(cands) = covered.then(|| candidates(t)).transpose()? {
                    let cap = idf_of(t)?;
                    for cand in cands.into_iter().flatten() {
                        add(cand, ex.hanja, cap);
                    }
                    continue;
                }
            }
            let (first, second) = if s0 == Script::Hangul && s1 == Script::Hangul {
                (h.hanja_of(cs[0]), h.hanja_of(cs[1]))
            } else if s0 == Script::Han && s1 == Script::Han {
                (h.readings_of(cs[0]), h.readings_of(cs[1]))
            } else {
                continue;
            };
            let cap = idf_of(t)?;
            for &x in &first {
                for &y in &second {
                    let cand: String = [x, y].iter().collect();
                    if index.df(&cand)? > 0 {
                        add(cand, ex.hanja, cap);
                    }
                }
            }
        }
    }
    jikji_format::sort::sort_by(&mut extra, |x, y| x.term.cmp(&y.term));
    out.extend(extra);
    Ok(out)
}

/// BM25's per-chunk accumulators, dense by doc id: one query's sums, chunk lengths and
/// exact-term counts, plus the chunks touched (in first-touch order) so that reading them
/// out costs the number of hits, not the number of chunks. Memory: 10 bytes per chunk of
/// the bundle (`f32` + `u32` + two `u8`), allocated zeroed per query.
struct Accumulators {
    score: Vec<f32>,
    doc_len: Vec<u32>,
    exact: Vec<u8>,
    seen: Vec<bool>,
    touched: Vec<u32>,
}

impl Accumulators {
    fn new(num_docs: usize) -> Self {
        Accumulators {
            score: vec![0.0; num_docs],
            doc_len: vec![0; num_docs],
            exact: vec![0; num_docs],
            seen: vec![false; num_docs],
            touched: Vec::new(),
        }
    }

    /// Adds `score` to chunk `doc` (length `dl` terms); `exact` counts one more distinct
    /// exact query term in it. A doc id beyond the chunk count is ignored (the postings
    /// reader already refuses those).
    fn add(&mut self, doc: u32, score: f32, dl: u32, exact: bool) {
        let d = doc as usize;
        if d >= self.score.len() {
            return;
        }
        if !self.seen[d] {
            self.seen[d] = true;
            self.touched.push(doc);
        }
        self.score[d] += score;
        if exact {
            self.doc_len[d] = dl;
            self.exact[d] = self.exact[d].saturating_add(1);
        }
    }

    fn exact_hits(&self, doc: u32) -> usize {
        self.exact.get(doc as usize).map_or(0, |&e| e as usize)
    }

    fn doc_len(&self, doc: u32) -> u32 {
        self.doc_len.get(doc as usize).copied().unwrap_or(0)
    }

    /// The touched chunks that `allow` lets through, and their sums.
    fn scored(&self, allow: Option<&[bool]>) -> Vec<Scored> {
        self.touched
            .iter()
            .filter(|&&d| allows(allow, d))
            .map(|&d| (d, self.score[d as usize]))
            .collect()
    }
}

/// BM25 (Robertson & Zaragoza 2009) with Lucene's non-negative idf
/// `ln(1 + (N − df + 0.5) / (df + 0.5))`, over the query's exact terms plus its weighted
/// expansions ([`query_terms`], [`Expansion`]), plus a phrase component for queries of
/// two or more terms, as Lucene's `PhraseQuery` scores it: the query's exact term sequence
/// counted as one pseudo-term whose frequency is its number of contiguous occurrences in
/// the chunk and whose idf is the sum of its terms' idfs. The phrase component is computed
/// for the best [`PHRASE_DEPTH`] candidates by plain BM25 (their text is re-analyzed from
/// the chunk store with the bundle's analyzer). Repeated query terms count once in the
/// term component. Chinese question words are left out first ([`without_question_words`]).
/// Returns the top `k` chunks with score > 0 among those `lex.allow` lets through (the
/// filter is applied before the cut, so the list is `k` deep in allowed chunks).
///
/// Errors only if the postings or chunk store bytes are corrupt.
#[cfg_attr(jikji_nightly, optimize(speed))]
pub fn bm25(lex: &Lexical, query: &str, k: usize) -> Result<Vec<Scored>> {
    let query = &*without_question_words(lex.analyzer, query);
    let index = lex.index;
    let params = lex.params;
    let sequence = lex.analyzer.analyze(query);
    let n = index.num_docs() as f32;
    let avgdl = index.avg_doc_len().max(1e-6);
    let saturate = |tf: f32, dl: u32| {
        let dl = dl as f32;
        tf * (params.k1 + 1.0) / (tf + params.k1 * (1.0 - params.b + params.b * dl / avgdl))
    };
    // Per-chunk accumulators, dense by doc id (SipHash maps were half of a query's CPU
    // time): the BM25 sum, the chunk's length in terms (from the postings; the phrase
    // component needs it again) and how many distinct exact query terms it holds (only a
    // chunk holding all of them can contain the phrase, so only those are re-analyzed).
    let mut acc = Accumulators::new(index.num_docs());
    let mut n_exact = 0;
    let mut phrase_idf = 0.0;
    for q in query_terms(lex, query)? {
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
        for (doc, tf, dl) in list {
            acc.add(doc, w * saturate(tf as f32, dl), dl, q.exact);
        }
    }
    if index.pending() {
        // A paged bundle's dictionary block or postings page is not loaded yet: this
        // ranking is incomplete, so fetch no chunk page for its phrase candidates (the
        // caller fetches the missing pages and runs the query again).
        return Err(jikji_format::FormatError::PageMissing {
            name: "(postings)".into(),
        });
    }
    if sequence.len() < 2 {
        return Ok(top_k(acc.scored(lex.allow), k));
    }
    let mut ranked = top_k(acc.scored(lex.allow), k.max(PHRASE_DEPTH));
    let mut missing = None;
    for (doc, score) in ranked.iter_mut() {
        if acc.exact_hits(*doc) < n_exact {
            continue;
        }
        // A paged bundle's chunk page not loaded yet: go on, so that every missing page
        // of this query is reported at once (the caller runs the query again).
        let text = match lex.chunks.get(*doc) {
            Ok(r) => r.text,
            Err(e) if e.is_page_missing() => {
                missing = Some(e);
                continue;
            }
            Err(e) => return Err(e),
        };
        let doc_terms = lex.analyzer.analyze(&text);
        let pf = doc_terms
            .windows(sequence.len())
            .filter(|w| *w == sequence.as_slice())
            .count();
        if pf > 0 {
            *score += phrase_idf * saturate(pf as f32, acc.doc_len(*doc));
        }
    }
    if let Some(e) = missing {
        // The hits come from the phrase candidates and, for chunks without every exact
        // term (their score does not change), from the plain top k: ask for those pages in
        // this round too, so the records of the hits need no round of their own.
        for (doc, _) in ranked.iter().take(k) {
            lex.chunks.touch(*doc);
        }
        // The candidates' texts are analysed in the next pass: the Unicode tables the
        // bundle's chunk texts need come with their pages, not in a round of their own.
        lex.analyzer.tables().need_chunk_tables();
        return Err(e);
    }
    Ok(top_k(ranked, k))
}

/// Exact dense search: the score ([`DenseScorer::score`]: cosine similarity of the
/// L2-normalised query with the stored int8 vector, with the bundle's centring if any) of
/// every chunk that `allow` lets through ([`allows`]); returns the top `k` of them.
pub fn dense(scorer: &DenseScorer, k: usize, allow: Option<&[bool]>) -> Vec<Scored> {
    let scored = (0..scorer.len())
        .filter(|&i| allows(allow, i as u32))
        .map(|i| (i as u32, scorer.score(i)))
        .collect();
    top_k(scored, k)
}

/// Reciprocal rank fusion: `score(d) = Σ_lists 1 / (RRF_K + rank_d)` with ranks from 1;
/// returns the top `k`.
pub fn rrf(lists: &[Vec<Scored>], k: usize) -> Vec<Scored> {
    let mut acc: HashMap<u32, f32> = HashMap::default();
    for list in lists {
        for (rank, (doc, _)) in list.iter().enumerate() {
            *acc.entry(*doc).or_default() += 1.0 / (RRF_K + rank as f32 + 1.0);
        }
    }
    top_k(acc.into_iter().collect(), k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use jikji_format::analyzer::{analyze, AnalyzerOptions, ANALYZER_VERSION};
    use jikji_format::chunks::{write_chunks, ChunkStore};
    use jikji_format::hanja::{write_hanja_fst, HanjaMap};
    use jikji_format::postings::LexicalIndex;
    use jikji_format::postings::LexicalIndexWriter;
    use jikji_format::ChunkRecord;

    /// A test index with the default analyzer; `.lex()` gives the search inputs.
    struct Fixture {
        index: Lexicon,
        chunks: Chunks,
        analyzer: Analyzer,
        hanja: Option<Hanja>,
    }

    impl Fixture {
        fn lex(&self) -> Lexical<'_> {
            Lexical {
                index: &self.index,
                chunks: &self.chunks,
                params: Bm25Params::default(),
                analyzer: &self.analyzer,
                hanja: self.hanja.as_ref(),
                expansion: Expansion::default(),
                allow: None,
            }
        }
        fn search(&self, q: &str) -> Vec<Scored> {
            bm25(&self.lex(), q, 10).unwrap()
        }
    }

    fn fixture(docs: &[&str]) -> Fixture {
        let (index, chunks) = index(docs);
        Fixture {
            index,
            chunks,
            analyzer: Analyzer::default(),
            hanja: None,
        }
    }

    fn index(docs: &[&str]) -> (Lexicon, Chunks) {
        let mut w = LexicalIndexWriter::new();
        let mut recs = Vec::new();
        for (i, d) in docs.iter().enumerate() {
            w.add_doc(&analyze(d));
            recs.push(ChunkRecord {
                id: i.to_string(),
                source: "t".into(),
                lang: "en".into(),
                text: d.to_string(),
                ..ChunkRecord::default()
            });
        }
        let (f, p) = w.finish().unwrap();
        (
            Lexicon::Whole(LexicalIndex::open(f, p).unwrap()),
            Chunks::Whole(ChunkStore::open(write_chunks(&recs).unwrap()).unwrap()),
        )
    }

    #[test]
    fn bm25_matches_hand_computed_score() {
        let f = fixture(&["apple banana", "apple apple cherry", "durian"]);
        let hits = bm25(
            &Lexical {
                expansion: Expansion::NONE,
                params: Bm25Params { k1: 1.2, b: 0.75 },
                ..f.lex()
            },
            "cherry",
            10,
        )
        .unwrap();
        // N=3, df=1: idf = ln(1 + 2.5/1.5); tf=1, dl=3, avgdl=2.
        let idf = (1.0f32 + 2.5 / 1.5).ln();
        let norm = 1.2 * (1.0 - 0.75 + 0.75 * 3.0 / 2.0);
        let expect = idf * 2.2 / (1.0 + norm);
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].0, 1);
        assert!((hits[0].1 - expect).abs() < 1e-6);
    }

    #[test]
    fn bm25_prefers_rarer_terms_and_ignores_unknown() {
        let f = fixture(&["the cat", "the dog", "the bird"]);
        let hits = f.search("the dog zebra");
        assert_eq!(hits[0].0, 1);
        assert_eq!(hits.len(), 3);
    }

    #[test]
    fn phrase_occurrence_outranks_scattered_terms() {
        // Doc 0 has every term more often but never in order; doc 1 has the phrase once.
        let f = fixture(&[
            "be not to or be to be not or to",
            "whether to be or not to be, that is",
        ]);
        let hits = f.search("to be or not to be");
        assert_eq!(hits[0].0, 1, "{hits:?}");
        let plain = f.search("be");
        assert_eq!(
            plain[0].0, 0,
            "single-term queries have no phrase component: {plain:?}"
        );
    }

    #[test]
    fn prefix_of_last_word_finds_longer_terms() {
        let f = fixture(&["the tragedy of hamlet", "a small hamster", "macbeth"]);
        let hits = f.search("hamle");
        assert_eq!(
            hits.iter().map(|h| h.0).collect::<Vec<_>>(),
            [0],
            "{hits:?}"
        );
        // A finished word (trailing space) is not a prefix.
        assert!(f.search("hamle ").is_empty());
    }

    #[test]
    fn exact_match_ranks_above_prefix_match() {
        let f = fixture(&["ham and eggs", "hamlet, prince"]);
        let hits = f.search("ham");
        assert_eq!(
            hits.iter().map(|h| h.0).collect::<Vec<_>>(),
            [0, 1],
            "{hits:?}"
        );
    }

    #[test]
    fn typo_within_distance_finds_the_word() {
        let f = fixture(&[
            "plays of shakespeare",
            "poems of marlowe",
            "hamlet",
            "elizabethan",
        ]);
        let docs = |q: &str| f.search(q).iter().map(|h| h.0).collect::<Vec<_>>();
        // "shakspeare": 10 characters, one edit from "shakespeare".
        assert_eq!(docs("shakspeare plays")[0], 0);
        assert_eq!(docs("shakspeare "), [0]);
        // 6 characters: distance 1 allowed, 2 not.
        assert_eq!(docs("hamlat "), [2]);
        assert!(docs("hamlott ").is_empty());
        // 11 characters: distance 2 allowed.
        assert_eq!(docs("elisabethen "), [3]);
        // 4 characters: no typo tolerance.
        assert!(docs("poen ").is_empty());
    }

    /// Newcomer report: one 33,000-letter query word took 2.6 GB building its typo
    /// automaton. Words over FUZZY_MAX_CHARS get no typo expansion (found exactly or not).
    #[test]
    fn long_query_word_built_a_huge_typo_automaton() {
        let long = "a".repeat(FUZZY_MAX_CHARS);
        let f = fixture(&[&format!("{long}b"), "short text"]);
        // FUZZY_MAX_CHARS letters: one typo away from the indexed word, expanded.
        assert_eq!(f.search(&format!("{long} "))[0].0, 0);
        // One more letter (a different typo of the same word): not expanded.
        let longer = format!("{long}bc");
        assert!(f.search(&format!("{longer} ")).is_empty());
        // A huge word returns (no expansion) instead of exhausting memory.
        assert!(f.search(&format!("{} ", "q".repeat(20_000))).is_empty());
    }

    #[test]
    fn exact_match_ranks_above_fuzzy_match() {
        // Doc 1 has the exact "hamlet" and the typo-matched "shakespeare": first.
        let f = fixture(&[
            "plays of shakespeare",
            "hamlet by shakespeare",
            "the prince",
        ]);
        assert_eq!(f.search("shakspeare hamlet ")[0].0, 1);
        // Same length, tf and df: an exact match outscores a typo match.
        let g = fixture(&["plays of shakespeare", "plays of marlowe"]);
        let hits = g.search("shakspeare marlowe ");
        assert_eq!(
            hits.iter().map(|h| h.0).collect::<Vec<_>>(),
            [1, 0],
            "{hits:?}"
        );
        // A word the dictionary has is not expanded (FUZZY_MAX_DF = 0).
        let h = fixture(&["shakespeare wrote", "shakspeare wrote"]);
        let hits = h.search("shakspeare ");
        assert_eq!(
            hits.iter().map(|h| h.0).collect::<Vec<_>>(),
            [1],
            "{hits:?}"
        );
    }

    #[test]
    fn hangul_query_finds_hanja_and_the_reverse() {
        let (index, chunks) = index(&["甲木은 큰 나무이다", "을목은 작은 풀이다", "갑목 이야기"]);
        let a = Analyzer::new(ANALYZER_VERSION, AnalyzerOptions::default()).unwrap();
        let bytes = write_hanja_fst(
            &[('갑', '甲'), ('갑', '岬'), ('목', '木'), ('목', '目')],
            &[('갑', '甲'), ('목', '木')],
        )
        .unwrap();
        let f = Fixture {
            index,
            chunks,
            analyzer: a,
            hanja: Some(Hanja::Whole(HanjaMap::open(bytes).unwrap())),
        };
        let docs = |q: &str| {
            let mut d: Vec<u32> = f.search(q).iter().map(|h| h.0).collect();
            d.sort();
            d
        };
        assert_eq!(docs("갑목 "), [0, 2]);
        assert_eq!(docs("甲木"), [0, 2]);
        // Without the table, no expansion.
        let none = Fixture { hanja: None, ..f };
        assert_eq!(
            none.search("갑목 ").iter().map(|h| h.0).collect::<Vec<_>>(),
            [2]
        );
    }

    #[test]
    fn korean_particle_forms_match_bare_word() {
        let f = fixture(&[
            "대한민국에서 가장 높은 산",
            "민국 시대의 대한 제국",
            "화산이 폭발했다",
        ]);
        let hits = f.search("대한민국?");
        assert_eq!(hits[0].0, 0, "{hits:?}");
        assert_eq!(f.search("화산?")[0].0, 2);
    }

    /// xquad-zh: the question word's three terms (什, 什么, 么: rare in statements, so
    /// high idf) outweighed the one rare entity the question was about.
    #[test]
    fn question_words_outranked_the_entity() {
        let f = fixture(&[
            "为了精确定义通过给定的时间和空间来解决问题意味着什么，可使用确定型图灵机的计算模型。",
            "威尔士的教师可以是ATL、NUT或NASUWT等工会的注册会员，威尔士教师的平均年龄正在下降。",
            "工会是工人的组织。",
            "图灵机是一种计算模型。",
        ]);
        assert_eq!(f.search("NASUWT是什么？")[0].0, 1);
        assert_eq!(f.search("NASUWT是什麼？")[0].0, 1, "Traditional form");
        // A query of nothing but a question word still searches it.
        assert_eq!(f.search("什么")[0].0, 0);
        assert_eq!(
            without_question_words(&f.analyzer, "誰是NASUWT的會員?"),
            " 是nasuwt的会员?"
        );
        assert_eq!(without_question_words(&f.analyzer, "几乎"), "几乎");
        // Newcomer run: a query of only 哪里 searched the stray 里 (and 哪吒 lost its 哪).
        assert_eq!(without_question_words(&f.analyzer, "哪里"), "哪里");
        assert_eq!(
            without_question_words(&f.analyzer, "熊猫生活在哪裡？"),
            "熊猫生活在 ?"
        );
        assert_eq!(without_question_words(&f.analyzer, "哪吒是谁"), "哪咤是 ");
        assert_eq!(without_question_words(&f.analyzer, "怎么样"), "怎么样");
        let g = fixture(&["家里有三个房间，里里外外都很干净。", "你的家在哪里？"]);
        assert_eq!(g.search("哪里")[0].0, 1);
    }

    /// korquad-dev: the name's four bigrams (앙투, 투아, 아네, 네트) each weighed as much as
    /// a whole other word, so the chunk repeating the name outranked the one that answers.
    #[test]
    fn long_korean_word_outweighed_the_rest_of_the_query() {
        let f = fixture(&[
            "목걸이 사건 역시, 마리 앙투아네트가 결백하다고 알려진지 오래다. 마리 앙투아네트는 그 목걸이 구입을 거부했다.",
            "마리는 남편 루이 16세로부터 프티 트리아농 궁전을 선물 받았다.",
            "베르사유에는 정원이 많다.",
            "루이 15세는 천연두로 서거했다.",
            "마리 앙투아네트는 오스트리아에서 태어났다.",
        ]);
        let q = "마리 앙투아네트가 남편에게 선물받은 궁전은?";
        let flat = Lexical {
            expansion: Expansion {
                hangul_norm: 0.0,
                ..Expansion::default()
            },
            ..f.lex()
        };
        assert_eq!(f.search(q)[0].0, 1);
        assert_eq!(
            bm25(&flat, q, 10).unwrap()[0].0,
            0,
            "without the normalisation"
        );
    }

    #[test]
    fn rrf_fuses_by_rank() {
        let a = vec![(1, 9.0), (2, 8.0), (3, 7.0)];
        let b = vec![(2, 0.9), (3, 0.8)];
        let fused = rrf(&[a, b], 3);
        // doc 2: 1/62 + 1/61; doc 3: 1/63 + 1/62; doc 1: 1/61.
        assert_eq!(fused.iter().map(|s| s.0).collect::<Vec<_>>(), [2, 3, 1]);
        assert!((fused[0].1 - (1.0 / 62.0 + 1.0 / 61.0)).abs() < 1e-6);
    }

    #[test]
    fn top_k_breaks_ties_by_doc_id() {
        assert_eq!(
            top_k(vec![(5, 1.0), (2, 1.0), (9, 2.0)], 2),
            vec![(9, 2.0), (2, 1.0)]
        );
    }
}

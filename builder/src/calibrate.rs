//! Per-bundle score calibration, fitted at build time (the engine applies it at query
//! time, see `jikji_engine::scores`).
//!
//! Raw scores mean different things per ranker and per bundle: BM25 is unbounded and grows
//! with query length, and E5's cosines are bunched (unrelated pairs score ~0.75). The
//! builder therefore draws **pseudo-queries** from the bundle's own chunks — a short span of
//! each sampled chunk (6–12 words of Latin-script text, 3–6 Korean words, 10–16 Han or kana
//! characters, partly kept and mixed with words of another chunk, see [`pseudo_query`]) —
//! and scores known-related and unrelated pairs with every ranker (see [`fit`]). One
//! Platt sigmoid per ranker is fitted to those labeled `(score, right?)` pairs (Platt 1999,
//! with the target smoothing and Newton iteration of Lin, Lin & Weng 2007, "A note on Platt's
//! probabilistic outputs for support vector machines"). A calibrated score is thus the
//! estimated probability that a result with that raw score is a right answer, the same
//! reading in every mode and bundle; how well that holds on labeled sets is measured by
//! `jikji eval` (score bands).
//!
//! [`calibrate`] is the entry `jikji build` and `jikji update` call on the files of the
//! bundle they are about to write. The rankers, calibration inputs and margins are the
//! engine's own public functions (listed in `jikji_engine::scores`), so the fit sees what
//! a search computes.

use jikji_embed::Prefix;

use crate::encoder::Encoder;
use jikji_engine::centring::{detect_lang, ChunkCentring, DenseScorer};
use jikji_engine::fusion::{
    bm25_normalised, bm25_upper_bound, cross_lingual_docs, dense_background, dense_z, fused_logit,
    substantial_languages, weighted,
};
use jikji_engine::scores::{file_numbers, margin};
use jikji_engine::search::{bm25, dense, rrf, Lexical};
use jikji_format::analyzer::{self, AnalyzerOptions};
use jikji_format::chunks::ChunkStore;
use jikji_format::postings::LexicalIndex;
use jikji_format::vectors::Vectors;
use jikji_format::{
    Bm25Params, Bundle, Calibration, Centring, Counts, Manifest, MarginPlatt, ModelInfo, Platt,
    ScoreFits,
};

use crate::error::{BuildError, Result};

pub use jikji_engine::scores::DEFAULT_DENSE_WEIGHT;

/// Pseudo-queries drawn per bundle (fewer if the bundle has fewer usable chunks).
pub const PSEUDO_QUERIES: usize = 300;
/// Calibration method tag written to the manifest.
/// v2: Korean pseudo-queries keep 3+ words of a 5–9 word span (v1: 2+ of 3–6, which e5
/// could not place, so the dense fit came out with a negative slope), and fits are
/// monotone (see [`fit_platt`]).
/// v3: adds the margin-aware fits for reported scores ([`ScoreFits`]).
/// v4: the weighted fusion's cross-lingual rule ([`jikji_engine::fusion::fused_logit`]),
/// which the engine applies to v4 bundles only, so older bundles rank as they were built.
/// v5: adds the null cap ([`jikji_format::NullCap`], [`null_cap`]); v4's fusion.
pub const METHOD: &str = "platt-pseudo-queries-v5";
/// A query made from a span of chunk `doc`'s text (see [`pseudo_query`]).
#[derive(Debug, Clone, PartialEq)]
pub struct PseudoQuery {
    /// The query text.
    pub text: String,
    /// The verbatim span it was made from: a result is a right answer iff its text
    /// contains this span.
    pub anchor: String,
    /// The chunk it was taken from.
    pub doc: u32,
}

/// splitmix64 (Steele, Lea & Flood 2014): a fixed, seedable mixer so sampling is
/// reproducible across builds and platforms.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F)
}

fn is_hangul(c: char) -> bool {
    matches!(c as u32, 0xAC00..=0xD7A3 | 0x1100..=0x11FF | 0x3130..=0x318F)
}

/// The text's non-empty lines that are not headings (`#`).
fn body_lines(text: &str) -> Vec<&str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Words of `line` as byte ranges (split on whitespace).
fn word_ranges(line: &str) -> Vec<(usize, usize)> {
    line.split_whitespace()
        .map(|w| {
            let s = w.as_ptr() as usize - line.as_ptr() as usize;
            (s, s + w.len())
        })
        .collect()
}

fn clean(w: &str) -> &str {
    w.trim_matches(|c: char| !c.is_alphanumeric())
}

/// A pseudo-query from chunk text `text`, seeded by `seed`, with `filler` (another chunk's
/// text) supplying words the source does not have, or `None` if the text has no usable
/// span. Real queries share only part of their words with the passage that answers them
/// and add words of their own, so the query keeps part of a verbatim span and mixes in
/// filler:
/// - Latin-script and other spaced text: a span of 6–12 words; the query keeps about 60%
///   of its words (at least 3, in order) and adds 1–2 words of the filler;
/// - Korean (Hangul-dominant lines): a span of 5–9 words, keeping about 60% (at least 3),
///   plus one filler word (shorter lines give shorter spans, down to 4 words); Korean
///   words carry particles and endings, so fewer than three leave a dense model guessing
///   (with 2 of 3–6 words, the korquad-dev bundle's right chunks ranked below the best wrong
///   one for most pseudo-queries and the dense fit's slope came out negative);
/// - Han / kana: a span of 10–16 characters; the query is two 3–5 character pieces of it
///   with 2–3 filler characters between them.
pub fn pseudo_query(text: &str, filler: &str, seed: u64) -> Option<(String, String)> {
    let body = body_lines(text);
    if body.is_empty() {
        return None;
    }
    let line = body[(mix(seed) % body.len() as u64) as usize];
    let chars: Vec<char> = line.chars().collect();
    let cjk = chars.iter().filter(|c| is_cjk(**c)).count();
    let hangul = chars.iter().filter(|c| is_hangul(**c)).count();
    let letters = chars.iter().filter(|c| c.is_alphanumeric()).count();
    let mut r = mix(seed ^ 0xA5A5);
    let mut next = move || {
        r = mix(r);
        r
    };
    let filler_lines = body_lines(filler);
    if cjk * 2 > letters {
        let want = 10 + (next() % 7) as usize;
        let starts: Vec<usize> = (0..chars.len()).filter(|&i| is_cjk(chars[i])).collect();
        if starts.len() < want {
            return None;
        }
        let s = starts[(next() % (starts.len() - want + 1) as u64) as usize];
        let e = (s + want).min(chars.len());
        let anchor: String = chars[s..e].iter().collect();
        let a: Vec<char> = anchor.chars().filter(|c| is_cjk(*c)).collect();
        if a.len() < 8 {
            return None;
        }
        let l1 = 3 + (next() % 3) as usize;
        let l2 = 3 + (next() % 3) as usize;
        let first: String = a[..l1.min(a.len())].iter().collect();
        let second: String = a[a.len().saturating_sub(l2)..].iter().collect();
        let fill: Vec<char> = filler_lines
            .iter()
            .flat_map(|l| l.chars())
            .filter(|c| is_cjk(*c))
            .collect();
        let n = 2 + (next() % 2) as usize;
        let mid: String = if fill.len() > n {
            let at = (next() % (fill.len() - n) as u64) as usize;
            fill[at..at + n].iter().collect()
        } else {
            String::new()
        };
        Some((format!("{first}{mid}{second}"), anchor))
    } else {
        let words = word_ranges(line);
        let korean = hangul * 2 > letters;
        let (lo, spread, keep_min, fillers) = if korean {
            (5, 5, 3, 1)
        } else {
            (6, 7, 3, 1 + (next() % 2) as usize)
        };
        let want = lo + (next() % spread) as usize;
        if words.len() <= keep_min {
            return None;
        }
        let want = want.min(words.len());
        let s = (next() % (words.len() - want + 1) as u64) as usize;
        let span = &words[s..s + want];
        let anchor = clean(&line[span[0].0..span[want - 1].1]).to_string();
        let mut kept: Vec<&str> = span
            .iter()
            .map(|&(a, b)| clean(&line[a..b]))
            .filter(|w| !w.is_empty() && next() % 10 < 6)
            .collect();
        if kept.len() < keep_min {
            kept = span
                .iter()
                .map(|&(a, b)| clean(&line[a..b]))
                .filter(|w| !w.is_empty())
                .take(keep_min)
                .collect();
        }
        let pool: Vec<&str> = filler_lines
            .iter()
            .flat_map(|l| l.split_whitespace())
            .map(clean)
            .filter(|w| w.chars().count() >= 3)
            .collect();
        for _ in 0..fillers {
            if !pool.is_empty() {
                let w = pool[(next() % pool.len() as u64) as usize];
                let at = (next() % (kept.len() as u64 + 1)) as usize;
                kept.insert(at, w);
            }
        }
        (kept.len() >= keep_min).then(|| (kept.join(" "), anchor))
    }
}

/// Up to `n` pseudo-queries from the bundle's indexed chunks (parent records of a
/// parent-child bundle are not indexed and never used), spread evenly (deterministic;
/// several per chunk when the bundle has fewer than `n` chunks); the
/// filler of each comes from a random chunk of the same detected language (another file's
/// when one is found among 64 draws), so the query stays in one language.
///
/// Errors only if the chunk store bytes are corrupt.
pub fn pseudo_queries(bundle: &Bundle, n: usize) -> jikji_format::Result<Vec<PseudoQuery>> {
    let chunks = bundle.chunks();
    let total = bundle.lexical().num_docs().min(chunks.len());
    let mut out = Vec::new();
    if total == 0 || n == 0 {
        return Ok(out);
    }
    // A bundle with fewer chunks than `n` gets several spans per chunk (seeded apart), so
    // small bundles are not calibrated on a handful of pairs.
    for j in 0..n {
        let (doc, round) = if n <= total {
            ((j * total / n) as u32, 0u64)
        } else {
            ((j % total) as u32, (j / total) as u64)
        };
        let seed = doc as u64 ^ (round << 48);
        let rec = chunks.get(doc)?;
        // Filler from a random chunk of the same language, another file if possible.
        let mut filler = String::new();
        for i in 0..64u64 {
            let o = chunks.get((mix(seed ^ (i << 32)) % total as u64) as u32)?;
            if o.lang == rec.lang && (o.source != rec.source || filler.is_empty()) {
                let other_file = o.source != rec.source;
                filler = o.text;
                if other_file {
                    break;
                }
            }
        }
        if let Some((text, anchor)) = pseudo_query(&rec.text, &filler, seed) {
            out.push(PseudoQuery { text, anchor, doc });
        }
    }
    Ok(out)
}

/// Fits `p(x) = 1 / (1 + exp(−(a·x + b)))` to labeled scores by regularised maximum
/// likelihood: Platt's smoothed targets `(N₊ + 1)/(N₊ + 2)` and `1/(N₋ + 2)`, Newton steps
/// with backtracking line search (Lin, Lin & Weng 2007). With only one class present, or
/// when the best fit has a negative slope (higher scores less often right: the ranker does
/// not separate right from wrong on these samples), it returns a flat sigmoid at the
/// smoothed target rate, so a calibrated score never decreases as the raw score grows and
/// weighted fusion gives such a ranker no say.
pub fn fit_platt(samples: &[(f32, bool)]) -> Platt {
    let pos = samples.iter().filter(|s| s.1).count() as f64;
    let neg = samples.len() as f64 - pos;
    let hi = (pos + 1.0) / (pos + 2.0);
    let lo = 1.0 / (neg + 2.0);
    let t: Vec<f64> = samples.iter().map(|s| if s.1 { hi } else { lo }).collect();
    let x: Vec<f64> = samples.iter().map(|s| s.0 as f64).collect();
    // Lin et al. parameterise p = 1 / (1 + exp(A·x + B)); we return a = −A, b = −B.
    let (mut a, mut b) = (0.0f64, ((neg + 1.0) / (pos + 1.0)).ln());
    let loss = |a: f64, b: f64| -> f64 {
        x.iter()
            .zip(&t)
            .map(|(&xi, &ti)| {
                let f = a * xi + b;
                if f >= 0.0 {
                    ti * f + (1.0 + (-f).exp()).ln()
                } else {
                    (ti - 1.0) * f + (1.0 + f.exp()).ln()
                }
            })
            .sum()
    };
    let sigma = 1e-12;
    let mut fval = loss(a, b);
    for _ in 0..100 {
        let (mut h11, mut h22, mut h21, mut g1, mut g2) = (sigma, sigma, 0.0, 0.0, 0.0);
        for (&xi, &ti) in x.iter().zip(&t) {
            let f = a * xi + b;
            let (p, q) = if f >= 0.0 {
                let e = (-f).exp();
                (e / (1.0 + e), 1.0 / (1.0 + e))
            } else {
                let e = f.exp();
                (1.0 / (1.0 + e), e / (1.0 + e))
            };
            let d2 = p * q;
            h11 += xi * xi * d2;
            h22 += d2;
            h21 += xi * d2;
            let d1 = ti - p;
            g1 += xi * d1;
            g2 += d1;
        }
        if g1.abs() < 1e-5 && g2.abs() < 1e-5 {
            break;
        }
        let det = h11 * h22 - h21 * h21;
        let da = -(h22 * g1 - h21 * g2) / det;
        let db = -(-h21 * g1 + h11 * g2) / det;
        let gd = g1 * da + g2 * db;
        let mut step = 1.0;
        let mut moved = false;
        while step >= 1e-10 {
            let (na, nb) = (a + step * da, b + step * db);
            let nf = loss(na, nb);
            if nf < fval + 1e-4 * step * gd {
                (a, b, fval) = (na, nb, nf);
                moved = true;
                break;
            }
            step /= 2.0;
        }
        if !moved {
            break;
        }
    }
    if -a < 0.0 {
        let rate = t.iter().sum::<f64>() / t.len().max(1) as f64;
        return Platt {
            a: 0.0,
            b: (rate / (1.0 - rate)).ln() as f32,
        };
    }
    Platt {
        a: -a as f32,
        b: -b as f32,
    }
}

/// Fits `p = 1 / (1 + exp(−(a·x + m·g + b)))` to labeled `([x, g], right?)` samples (a
/// hit's raw score and its margin, see [`jikji_engine::scores::margin`]) by the same regularised maximum
/// likelihood as [`fit_platt`] (smoothed targets, Newton steps with backtracking), in three
/// parameters. Both slopes must be non-negative (a higher score or a wider margin never
/// means a worse answer): if the best fit has a negative slope, that feature is dropped
/// and the other fitted alone ([`fit_platt`]; flat if that fails too).
pub fn fit_margin_platt(samples: &[([f32; 2], bool)]) -> MarginPlatt {
    let pos = samples.iter().filter(|s| s.1).count() as f64;
    let neg = samples.len() as f64 - pos;
    let (hi, lo) = ((pos + 1.0) / (pos + 2.0), 1.0 / (neg + 2.0));
    let rows: Vec<([f64; 3], f64)> = samples
        .iter()
        .map(|(f, y)| ([f[0] as f64, f[1] as f64, 1.0], if *y { hi } else { lo }))
        .collect();
    // Parameters θ of the log-odds θ·[x, g, 1].
    let loss = |th: &[f64; 3]| -> f64 {
        rows.iter()
            .map(|(f, t)| {
                let z = th[0] * f[0] + th[1] * f[1] + th[2] * f[2];
                // −[t·ln σ(z) + (1 − t)·ln(1 − σ(z))], computed stably.
                if z >= 0.0 {
                    (1.0 - t) * z + (1.0 + (-z).exp()).ln()
                } else {
                    -t * z + (1.0 + z.exp()).ln()
                }
            })
            .sum()
    };
    let mut th = [0.0, 0.0, ((pos + 1.0) / (neg + 1.0)).ln()];
    let mut fval = loss(&th);
    for _ in 0..100 {
        let mut g = [0.0f64; 3];
        let mut h = [[0.0f64; 3]; 3];
        for (f, t) in &rows {
            let z = th[0] * f[0] + th[1] * f[1] + th[2] * f[2];
            let p = 1.0 / (1.0 + (-z).exp());
            for i in 0..3 {
                g[i] += (p - t) * f[i];
                for j in 0..3 {
                    h[i][j] += p * (1.0 - p) * f[i] * f[j];
                }
            }
        }
        if g.iter().all(|v| v.abs() < 1e-5) {
            break;
        }
        for (i, row) in h.iter_mut().enumerate() {
            row[i] += 1e-9;
        }
        let Some(d) = solve3(h, g) else { break };
        let gd: f64 = -(0..3).map(|i| g[i] * d[i]).sum::<f64>();
        let mut step = 1.0;
        let mut moved = false;
        while step >= 1e-10 {
            let n = [
                th[0] - step * d[0],
                th[1] - step * d[1],
                th[2] - step * d[2],
            ];
            let nf = loss(&n);
            if nf < fval + 1e-4 * step * gd {
                (th, fval, moved) = (n, nf, true);
                break;
            }
            step /= 2.0;
        }
        if !moved {
            break;
        }
    }
    if th[0] >= 0.0 && th[1] >= 0.0 {
        return MarginPlatt {
            a: th[0] as f32,
            m: th[1] as f32,
            b: th[2] as f32,
        };
    }
    // One slope came out negative: fit the other feature alone.
    let keep = usize::from(th[0] < 0.0);
    let one: Vec<(f32, bool)> = samples.iter().map(|(f, y)| (f[keep], *y)).collect();
    let p = fit_platt(&one);
    let (a, m) = if keep == 0 { (p.a, 0.0) } else { (0.0, p.a) };
    MarginPlatt { a, m, b: p.b }
}

/// Solves the 3×3 system `h·x = g` by Gaussian elimination with partial pivoting; `None`
/// if `h` is singular.
fn solve3(mut h: [[f64; 3]; 3], mut g: [f64; 3]) -> Option<[f64; 3]> {
    for c in 0..3 {
        let p = (c..3).max_by(|&i, &j| h[i][c].abs().total_cmp(&h[j][c].abs()))?;
        if h[p][c].abs() < 1e-15 {
            return None;
        }
        h.swap(c, p);
        g.swap(c, p);
        for r in c + 1..3 {
            let f = h[r][c] / h[c][c];
            let pivot = h[c];
            for (x, p) in h[r][c..].iter_mut().zip(&pivot[c..]) {
                *x -= f * p;
            }
            g[r] -= f * g[c];
        }
    }
    let mut x = [0.0; 3];
    for r in (0..3).rev() {
        let s: f64 = (r + 1..3).map(|k| h[r][k] * x[k]).sum();
        x[r] = (g[r] - s) / h[r][r];
    }
    Some(x)
}

/// Depth of the ranked lists searched for the best wrong answer of each pseudo-query.
pub const NEGATIVE_DEPTH: usize = 50;

/// The three labeled pairs one pseudo-query contributes to a ranker's fit: the score of the
/// right chunk (`source`), the best score of a wrong chunk in `list` (if any), and the
/// score of a random wrong chunk.
fn pairs(
    list: &[(u32, f32)],
    wrong: &dyn Fn(u32) -> bool,
    source: f32,
    random: Option<f32>,
) -> Vec<(f32, bool)> {
    let mut out = vec![(source, true)];
    if let Some(&(_, s)) = list.iter().find(|(d, _)| wrong(*d)) {
        out.push((s, false));
    }
    if let Some(s) = random {
        out.push((s, false));
    }
    out
}

/// One ranker's labeled samples over all pseudo-queries: one-feature (for [`fit_platt`])
/// and with margins (for [`fit_margin_platt`]).
#[derive(Default)]
struct Samples {
    plain: Vec<(f32, bool)>,
    margin: Vec<([f32; 2], bool)>,
}

impl Samples {
    /// Adds one pseudo-query's samples from its ranked `list`: the three of [`pairs`] to
    /// `plain`, and to `margin` the same three each with its margin in `list` (see
    /// [`margin`]), plus with `no_answer` the top hit of `list` without the right chunks
    /// (its margin taken within that rest), labeled wrong. `source` and `random` are
    /// `(chunk, input)`. [`fit`] sets `no_answer` for every other pseudo-query, so the
    /// margin fit assumes about one top hit in three comes from a query the bundle cannot
    /// answer.
    fn add(
        &mut self,
        list: &[(u32, f32)],
        wrong: &dyn Fn(u32) -> bool,
        source: (u32, f32),
        random: Option<(u32, f32)>,
        file: &[u32],
        no_answer: bool,
    ) {
        self.plain
            .extend(pairs(list, wrong, source.1, random.map(|r| r.1)));
        let with_margin = |(d, v): (u32, f32)| [v, margin(d, v, list, file)];
        self.margin.push((with_margin(source), true));
        if let Some(&hit) = list.iter().find(|(d, _)| wrong(*d)) {
            self.margin.push((with_margin(hit), false));
        }
        if let Some(r) = random {
            self.margin.push((with_margin(r), false));
        }
        // The same query on the bundle without its answer (the list's wrong chunks only):
        // its top hit stands out from the rest as a top hit does, but is wrong, as for a
        // query the bundle cannot answer. Without these, any top hit that stands out reads
        // as right: on unanswerable queries (another set's questions), 3–37% of BM25 top-1s
        // scored ≥ 0.6.
        if no_answer {
            let rest: Vec<(u32, f32)> = list.iter().copied().filter(|(d, _)| wrong(*d)).collect();
            if let Some(&(d, v)) = rest.first() {
                self.margin.push(([v, margin(d, v, &rest, file)], false));
            }
        }
    }
}

/// Fits the bundle's [`Calibration`]: BM25 always; dense, weighted and RRF hybrid when
/// `query_vectors` (one L2-normalised query embedding per pseudo-query, same order) is given
/// and the bundle has vectors. `dense_weight` is stored for weighted fusion.
///
/// Labels come from the score distributions of known-related and of unrelated pairs: per
/// pseudo-query and ranker, one right pair (the query and the chunk it was made from) and
/// two wrong ones (the best-ranked chunk that neither contains the anchor span nor lies
/// within two chunks of the source in the same file, and a random such chunk). The best
/// wrong chunk is what a query with no answer in the bundle gets as its top result, so the
/// fit separates "the answer" from "the best of the rest".
///
/// Errors only if bundle bytes are corrupt.
pub fn fit(
    bundle: &Bundle,
    queries: &[PseudoQuery],
    query_vectors: Option<&[Vec<f32>]>,
    dense_weight: f32,
) -> jikji_format::Result<Calibration> {
    let b = bundle;
    // Indexed chunks only: parent records (parent-child bundles) follow them.
    let n = b.lexical().num_docs().min(b.chunks().len());
    let file = file_numbers(b)?;
    // Chunk texts are decoded when a candidate is judged, not copied up front (they are
    // the bundle's largest part: ~1 GB at 1M chunks); a record that does not decode is
    // remembered and returned after the pass.
    #[derive(serde::Deserialize)]
    struct Text {
        text: String,
    }
    let failed: std::cell::RefCell<Option<jikji_format::FormatError>> = Default::default();
    let wrong_for = |q: &PseudoQuery| {
        let (file, failed, anchor, at) = (&file, &failed, q.anchor.clone(), q.doc);
        move |d: u32| {
            if file[d as usize] == file[at as usize] && d.abs_diff(at) <= 2 {
                return false;
            }
            match b.chunks().get_as::<Text>(d) {
                Ok(t) => !t.text.contains(&anchor),
                Err(e) => {
                    failed.borrow_mut().get_or_insert(e);
                    false
                }
            }
        }
    };
    let random_doc = |q: &PseudoQuery, wrong: &dyn Fn(u32) -> bool| {
        (0..8u64)
            .map(|i| (mix(q.doc as u64 ^ (i << 40)) % n as u64) as u32)
            .find(|&d| wrong(d))
    };
    let score_in =
        |list: &[(u32, f32)], d: u32| list.iter().find(|s| s.0 == d).map_or(0.0, |s| s.1);
    let mut bm25_samples = Samples::default();
    let mut lists = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let wrong = wrong_for(q);
        let lex = bm25(&Lexical::of(b), &q.text, NEGATIVE_DEPTH.max(200))?;
        let ub = bm25_upper_bound(b.lexical(), b.analyzer(), b.manifest().bm25, &q.text)?;
        let norm: Vec<(u32, f32)> = lex
            .iter()
            .map(|&(d, s)| (d, bm25_normalised(s, ub)))
            .collect();
        let rnd = random_doc(q, &wrong).map(|d| (d, score_in(&norm, d)));
        let src = (q.doc, score_in(&norm, q.doc));
        bm25_samples.add(&norm, &wrong, src, rnd, &file, i % 2 == 0);
        lists.push((lex, ub));
    }
    let bm25_scores = fit_margin_platt(&bm25_samples.margin);
    let mut cal = Calibration {
        method: METHOD.to_string(),
        queries: queries.len(),
        pairs: bm25_samples.plain.len(),
        bm25: fit_platt(&bm25_samples.plain),
        dense: None,
        weighted: None,
        rrf: None,
        dense_weight,
        scores: Some(ScoreFits {
            bm25: bm25_scores,
            dense: None,
            weighted: None,
            rrf: None,
        }),
        null_cap: None,
    };
    if let Some(e) = failed.borrow_mut().take() {
        return Err(e);
    }
    let (Some(vecs), Some(v)) = (query_vectors, b.vectors()) else {
        return Ok(cal);
    };
    // Scored as the engine scores them: with the bundle's per-chunk centring, if any.
    let centring = match b
        .manifest()
        .model
        .as_ref()
        .and_then(|m| m.centring.as_ref())
    {
        Some(c) => ChunkCentring::of(c, v).map_err(|e| match e {
            jikji_engine::EngineError::Format(f) => f,
            e => jikji_format::FormatError::corrupt(
                jikji_format::manifest::MANIFEST_FILE,
                0,
                e.to_string(),
            ),
        })?,
        None => None,
    };
    let scorers: Vec<DenseScorer> = vecs
        .iter()
        .map(|qv| DenseScorer::new(v, centring.as_ref(), qv))
        .collect();
    let mut dense_samples = Samples::default();
    let mut dense_lists = Vec::new();
    for (i, (q, sc)) in queries.iter().zip(&scorers).enumerate() {
        let wrong = wrong_for(q);
        let den = dense(sc, NEGATIVE_DEPTH.max(100), None);
        let bg = dense_background(sc);
        let z: Vec<(u32, f32)> = den.iter().map(|&(d, c)| (d, dense_z(c, bg))).collect();
        let rnd = random_doc(q, &wrong).map(|d| (d, dense_z(sc.score(d as usize), bg)));
        let src = (q.doc, dense_z(sc.score(q.doc as usize), bg));
        dense_samples.add(&z, &wrong, src, rnd, &file, i % 2 == 0);
        dense_lists.push(den);
    }
    cal.dense = Some(fit_platt(&dense_samples.plain));
    let (mut w_samples, mut r_samples) = (Samples::default(), Samples::default());
    // Each chunk's text language, as the engine reads it from the columns page.
    let mut langs: Vec<String> = Vec::new();
    let mut chunk_lang: Vec<u32> = Vec::with_capacity(b.chunks().len());
    for d in 0..b.chunks().len() as u32 {
        let l = b.chunks().get(d)?.lang;
        let i = match langs.iter().position(|x| *x == l) {
            Some(i) => i,
            None => {
                langs.push(l);
                langs.len() - 1
            }
        };
        chunk_lang.push(i as u32);
    }
    let l_none = cal.bm25.logit(0.0);
    let shares = substantial_languages(&langs, &chunk_lang);
    for (i, q) in queries.iter().enumerate() {
        let q_lang = detect_lang(&q.text);
        let cross = cross_lingual_docs(q_lang, &langs, &chunk_lang, &shares);
        let wrong = wrong_for(q);
        let (lex, ub) = &lists[i];
        let den = &dense_lists[i];
        let rnd = random_doc(q, &wrong);
        let sc = &scorers[i];
        let bg = dense_background(sc);
        let w = weighted(lex, *ub, den, sc, &cal, &cross, NEGATIVE_DEPTH);
        let fused_of = |d: u32| {
            let l_b = cal.bm25.logit(bm25_normalised(score_in(lex, d), *ub));
            let l_d = cal
                .dense
                .map_or(0.0, |p| p.logit(dense_z(sc.score(d as usize), bg)));
            (d, fused_logit(l_b, l_d, l_none, dense_weight, cross(d)))
        };
        let (src, w_rnd) = (fused_of(q.doc), rnd.map(fused_of));
        w_samples.add(&w, &wrong, src, w_rnd, &file, i % 2 == 0);
        let r = rrf(&[lex.clone(), den.clone()], NEGATIVE_DEPTH.max(100));
        let r_rnd = rnd.map(|d| (d, score_in(&r, d)));
        let src = (q.doc, score_in(&r, q.doc));
        r_samples.add(&r, &wrong, src, r_rnd, &file, i % 2 == 0);
    }
    cal.weighted = Some(fit_platt(&w_samples.plain));
    cal.rrf = Some(fit_platt(&r_samples.plain));
    cal.scores = Some(ScoreFits {
        bm25: bm25_scores,
        dense: Some(fit_margin_platt(&dense_samples.margin)),
        weighted: Some(fit_margin_platt(&w_samples.margin)),
        rrf: Some(fit_margin_platt(&r_samples.margin)),
    });
    if let Some(e) = failed.borrow_mut().take() {
        return Err(e);
    }
    Ok(cal)
}

/// Fits the bundle's score calibration on the bundle's files (`terms.fst` copied,
/// `postings.bin` shared when it is a mapped file and copied otherwise, `chunks.bin` taken
/// over (its indexed chunks: parent sections after them are left out), `vectors.bin` if any,
/// and the analyzer options and BM25 parameters of its manifest): [`PSEUDO_QUERIES`]
/// pseudo-queries from its chunks ([`pseudo_queries`]), embedded with the `query: ` prefix
/// on `threads` threads when an embedder is given and the bundle has vectors, then
/// [`fit`] with [`DEFAULT_DENSE_WEIGHT`]. With the bundle's `centring` record the
/// pseudo-queries are centred ([`jikji_engine::centring::centre_query`]) and every dense
/// score is the engine's centred one ([`jikji_engine::centring::DenseScorer`]), so the
/// fits describe the scores the engine reports. `jikji build` and `jikji update` both call it on
/// the bundle they are about to write, so an update's calibration equals a full build's.
/// `None` when fewer than [`MIN_CALIBRATION_CHUNKS`] chunks yield a pseudo-query (a few
/// short files): a fit on so little would be noise, so such a bundle reports raw scores
/// (`calibrated: false`) rather than made-up probabilities.
///
/// Errors: [`BuildError::Format`] if the files are corrupt or disagree on the number of
/// chunks (checked by [`Bundle::from_parts`]), [`BuildError::Embedding`] if embedding the
/// pseudo-queries fails.
#[allow(clippy::too_many_arguments)]
pub fn calibrate(
    terms_fst: &[u8],
    postings: &jikji_format::bytes::Bytes,
    chunks_bin: jikji_format::bytes::Bytes,
    vectors_bin: Option<Vec<u8>>,
    embedder: Option<&Encoder>,
    centring: Option<&Centring>,
    threads: usize,
    analyzer: AnalyzerOptions,
    bm25: Bm25Params,
) -> Result<Option<Calibration>> {
    Ok(calibrate_with_queries(
        terms_fst,
        postings,
        chunks_bin,
        vectors_bin,
        embedder,
        centring,
        threads,
        analyzer,
        bm25,
    )?
    .calibration)
}

/// What [`calibrate_with_queries`] gives: the calibration and the pseudo-query vectors it
/// was fitted with.
#[derive(Debug, Clone, Default)]
pub struct Calibrated {
    /// As [`calibrate`].
    pub calibration: Option<Calibration>,
    /// The pseudo-queries' embeddings, centred as the engine centres a query (`dim` each,
    /// [`PSEUDO_QUERIES`] at most); empty without an embedder, vectors or enough chunks.
    /// The dense index's build measures its default `nprobe` on them
    /// ([`crate::ivf::choose_nprobe`]).
    pub query_vectors: Vec<Vec<f32>>,
}

/// [`calibrate`], also returning the embedded pseudo-queries ([`Calibrated`]).
#[allow(clippy::too_many_arguments)]
pub fn calibrate_with_queries(
    terms_fst: &[u8],
    postings: &jikji_format::bytes::Bytes,
    chunks_bin: jikji_format::bytes::Bytes,
    vectors_bin: Option<Vec<u8>>,
    embedder: Option<&Encoder>,
    centring: Option<&Centring>,
    threads: usize,
    analyzer: AnalyzerOptions,
    bm25: Bm25Params,
) -> Result<Calibrated> {
    // A mapped file's bytes are shared, not copied.
    let lexical = LexicalIndex::open(terms_fst.to_vec(), postings.clone())?;
    let vectors = vectors_bin.map(|b| Vectors::open(&b)).transpose()?;
    // The indexed chunks only: parent sections (after them) are not searched.
    let chunks = ChunkStore::open(chunks_bin)?.first(lexical.num_docs());
    let manifest = Manifest {
        format_version: jikji_format::FORMAT_VERSION,
        analyzer_version: analyzer::ANALYZER_VERSION,
        analyzer,
        generator: String::new(),
        built_at: 0,
        chunk_size: 0,
        overlap: 0,
        bm25,
        // Only the centring is read (by `fit`'s dense scores).
        model: match (centring, &vectors) {
            (Some(c), Some(v)) => Some(ModelInfo {
                id: String::new(),
                sha256: String::new(),
                dim: v.dim(),
                max_tokens: 0,
                centring: Some(c.clone()),
            }),
            _ => None,
        },
        counts: Counts {
            chunks: lexical.num_docs(),
            vectors: vectors.as_ref().map_or(0, Vectors::len),
            ..Counts::default()
        },
        files: Default::default(),
        calibration: None,
        sources: Vec::new(),
        chunking: None,
        hanja: false,
        allow_ai_draft: false,
        dense_index: None,
        dense_index_chosen_by: None,
        pages: None,
    };
    let bundle = Bundle::from_parts(manifest, lexical, vectors, chunks, None)?;
    let queries = pseudo_queries(&bundle, PSEUDO_QUERIES)?;
    let mut docs: Vec<u32> = queries.iter().map(|q| q.doc).collect();
    docs.sort_unstable();
    docs.dedup();
    if docs.len() < MIN_CALIBRATION_CHUNKS {
        return Ok(Calibrated::default());
    }
    let qvecs = match (embedder, bundle.vectors()) {
        (Some(e), Some(_)) => {
            let texts: Vec<&str> = queries.iter().map(|q| q.text.as_str()).collect();
            let raw = e
                .embed_many(
                    &texts,
                    Prefix::Query,
                    threads,
                    "calibration queries",
                    &|_| {},
                )?
                .vectors;
            // Centred as the engine will centre a query (no change with `shift`).
            let centred = texts
                .iter()
                .zip(&raw)
                .map(|(t, v)| jikji_engine::centring::centre_query(centring, t, v))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| BuildError::Bundle {
                    path: jikji_format::manifest::MANIFEST_FILE.into(),
                    message: e.to_string(),
                })?;
            Some(centred)
        }
        _ => None,
    };
    let mut calibration = fit(&bundle, &queries, qvecs.as_deref(), DEFAULT_DENSE_WEIGHT)?;
    // The null cap: off-topic queries searched with the fits just made.
    let null = off_topic_queries(&bundle, NULL_QUERIES)?;
    let null_vecs = match (embedder, bundle.vectors()) {
        (Some(e), Some(_)) if !null.is_empty() => {
            let texts: Vec<&str> = null.iter().map(String::as_str).collect();
            Some(
                e.embed_many(&texts, Prefix::Query, threads, "null-cap queries", &|_| {})?
                    .vectors,
            )
        }
        _ => None,
    };
    calibration.null_cap = null_cap(bundle, &calibration, &null, null_vecs.as_deref(), threads)?;
    Ok(Calibrated {
        calibration: Some(calibration),
        query_vectors: qvecs.unwrap_or_default(),
    })
}

/// Fewest distinct chunks that must yield pseudo-queries for a bundle to be calibrated
/// (see [`calibrate`]).
pub const MIN_CALIBRATION_CHUNKS: usize = 10;

// ---------------------------------------------------------------------------------------
// The null cap (issue 19, docs/quality.md sessions 17 and 25): off-topic queries drawn from
// the bundle's own chunks, searched like any query; the Q-quantile of their top hits'
// calibrated scores per fit is the threshold under which the engine caps a reported score
// at 0.59 ([`jikji_format::NullCap`]).

/// Off-topic queries drawn per bundle for the null cap (`study-bands.py pseudo SET OUT 900`
/// drew 450: one per other of its 900 slots).
pub const NULL_QUERIES: usize = 450;
/// The quantile of the off-topic queries' top-1 scores a [`jikji_format::NullCap`]'s
/// thresholds are (unless [`NULL_Q_ENV`] says otherwise).
pub const NULL_Q: f32 = 0.95;
/// Environment variable that sets the null cap's quantile for a build, a number in (0, 1]
/// (unset or empty: [`NULL_Q`]); for measuring another quantile (docs/quality.md, session
/// 25). The bundle records the one used (`null_cap.q`).
pub const NULL_Q_ENV: &str = "JIKJI_NULL_Q";

/// The null cap's quantile in this process ([`NULL_Q_ENV`], else [`NULL_Q`]).
/// Errors: a value that is not a number in (0, 1] ([`BuildError::BadEnv`]).
pub fn null_q() -> Result<f32> {
    match std::env::var(NULL_Q_ENV) {
        Err(_) => Ok(NULL_Q),
        Ok(v) if v.is_empty() => Ok(NULL_Q),
        Ok(v) => match v.parse::<f32>() {
            Ok(q) if q > 0.0 && q <= 1.0 => Ok(q),
            _ => Err(BuildError::BadEnv {
                name: NULL_Q_ENV,
                value: v,
                expected: "a number in (0, 1]",
            }),
        },
    }
}
/// The most a capped hit reports: under the 0.6 "reliable" band.
pub const NULL_CAP: f32 = 0.59;
/// Fewest off-topic top-1 scores a threshold is taken from; a mode with fewer gets none
/// (and no threshold for BM25 means no null cap).
pub const MIN_NULL_SCORES: usize = 20;

/// The question templates of `study-bands.py` (prefix, suffix) per language family.
const TEMPLATES_EN: &[(&str, &str)] = &[
    ("What ", "?"),
    ("Which ", "?"),
    ("Who ", "?"),
    ("When did ", "?"),
    ("How many ", "?"),
    ("Where ", "?"),
    ("Why ", "?"),
    ("What is the ", "?"),
    ("", "."),
    ("", "?"),
];
const TEMPLATES_ZH: &[(&str, &str)] = &[
    ("", "是什么？"),
    ("", "是哪个？"),
    ("", "是谁？"),
    ("", "有多少？"),
    ("", "在哪里？"),
    ("为什么", "？"),
    ("", "的是什么？"),
    ("", "。"),
];
const TEMPLATES_KO: &[(&str, &str)] = &[
    ("", "은 무엇인가?"),
    ("", "은 누구인가?"),
    ("", "은 언제인가?"),
    ("", "은?"),
    ("", "는 어디인가?"),
    ("", " 몇 개인가?"),
];

/// The language family of a text as `study-bands.py`'s `lang_of` reads its first 400
/// characters: 0 English (and every other script), 1 Chinese (Han characters more than
/// half of the letters and digits), 2 Korean (Hangul syllables more than half).
pub fn null_lang(text: &str) -> u8 {
    let (mut han, mut hangul, mut alnum) = (0usize, 0usize, 0usize);
    for c in text.chars().take(400) {
        han += usize::from(matches!(c as u32,
            0x3400..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F));
        hangul += usize::from(matches!(c as u32, 0xAC00..=0xD7A3));
        alnum += usize::from(c.is_alphanumeric());
    }
    let alnum = alnum.max(1);
    if han * 2 > alnum {
        1
    } else if hangul * 2 > alnum {
        2
    } else {
        0
    }
}

/// `study-bands.py`'s `Rng`, the off-topic queries' generator: splitmix64 of the seed, then
/// each draw the next splitmix64 step.
pub struct NullRng(u64);

impl NullRng {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> Self {
        NullRng(mix(seed))
    }
    /// The next draw in `0..max(n, 1)` (the state's splitmix64 step modulo `max(n, 1)`).
    pub fn r(&mut self, n: usize) -> usize {
        self.0 = mix(self.0);
        (self.0 % n.max(1) as u64) as usize
    }
}

/// `study-bands.py`'s `words_of`: whitespace-separated words with `.,;:!?()[]"'“”‘’`
/// trimmed from both ends, empty ones left out.
fn null_words(t: &str) -> impl Iterator<Item = &str> {
    t.split_whitespace()
        .map(|w| w.trim_matches(|c: char| ".,;:!?()[]\"'“”‘’".contains(c)))
        .filter(|w| !w.is_empty())
}

/// An off-topic query (a port of `study-bands.py`'s `off_topic`): a question template of
/// language family `lang` ([`null_lang`]) around 3–6 pieces, each from one of `texts` drawn
/// at random (Chinese: 2–3 consecutive Han characters; else a word of 3+ characters), one
/// piece reversed so the dictionary does not know it. `None` when fewer than two pieces
/// were found.
pub fn off_topic_query(texts: &[&str], lang: u8, r: &mut NullRng) -> Option<String> {
    let mut pieces: Vec<String> = Vec::new();
    for _ in 0..3 + r.r(4) {
        let t = texts[r.r(texts.len())];
        if lang == 1 {
            let h: Vec<char> = t
                .chars()
                .filter(|&c| {
                    matches!(c as u32,
                    0x3400..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F)
                })
                .collect();
            if h.len() >= 3 {
                let b = r.r(h.len() - 2);
                let e = (b + 2 + r.r(2)).min(h.len());
                pieces.push(h[b..e].iter().collect());
            }
        } else {
            let w: Vec<&str> = null_words(t).filter(|x| x.chars().count() >= 3).collect();
            if !w.is_empty() {
                pieces.push(w[r.r(w.len())].to_string());
            }
        }
    }
    if pieces.len() < 2 {
        return None;
    }
    let i = r.r(pieces.len());
    pieces[i] = pieces[i].chars().rev().collect();
    let templates = match lang {
        1 => TEMPLATES_ZH,
        2 => TEMPLATES_KO,
        _ => TEMPLATES_EN,
    };
    let (t0, t1) = templates[r.r(templates.len())];
    Some(format!(
        "{t0}{}{t1}",
        pieces.join(if lang == 1 { "" } else { " " })
    ))
}

/// Up to `n` off-topic queries from the bundle's indexed chunks (deterministic): query `k`
/// takes slot `j = 2k` of `2n` slots spread evenly over the chunks (as `study-bands.py
/// pseudo SET OUT 2n` spreads its documents), seeds `study-bands.py`'s generator with
/// `i ^ (j << 20)` (`i` the slot's chunk), and draws three chunks of that chunk's language
/// family ([`null_lang`]) for [`off_topic_query`]. Chunk texts are read without their
/// heading lines. (The script's generator also drew an answerable question from the same
/// seed first; here the off-topic draws start from the seed, so the queries are others of
/// the same kind.)
///
/// Errors only if the chunk store bytes are corrupt.
pub fn off_topic_queries(bundle: &Bundle, n: usize) -> jikji_format::Result<Vec<String>> {
    #[derive(serde::Deserialize)]
    struct Text {
        text: String,
    }
    let chunks = bundle.chunks();
    let total = bundle.lexical().num_docs().min(chunks.len());
    if total == 0 || n == 0 {
        return Ok(Vec::new());
    }
    let body = |d: usize| -> jikji_format::Result<String> {
        Ok(body_lines(&chunks.get_as::<Text>(d as u32)?.text).join("\n"))
    };
    let mut langs = Vec::with_capacity(total);
    let mut by_lang: [Vec<u32>; 3] = Default::default();
    for d in 0..total {
        let l = null_lang(&body(d)?);
        langs.push(l);
        by_lang[l as usize].push(d as u32);
    }
    let slots = 2 * n;
    let mut out = Vec::new();
    for k in 0..n {
        let j = 2 * k;
        let i = if slots <= total {
            j * total / slots
        } else {
            j % total
        };
        let mut r = NullRng::new(i as u64 ^ ((j as u64) << 20));
        let same = &by_lang[langs[i] as usize];
        let texts = (0..3)
            .map(|_| body(same[r.r(same.len())] as usize))
            .collect::<jikji_format::Result<Vec<_>>>()?;
        let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
        if let Some(q) = off_topic_query(&texts, langs[i], &mut r) {
            out.push(q);
        }
    }
    Ok(out)
}

/// The `q`-quantile of `v` as numpy's default (linear interpolation between the two
/// nearest ranks); `v` is sorted in place. `None` for an empty `v`.
pub fn quantile(v: &mut [f32], q: f32) -> Option<f32> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable_by(f32::total_cmp);
    let pos = q.clamp(0.0, 1.0) as f64 * (v.len() - 1) as f64;
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(v.len() - 1);
    let f = pos - lo as f64;
    Some((v[lo] as f64 + (v[hi] as f64 - v[lo] as f64) * f) as f32)
}

/// The bundle's [`jikji_format::NullCap`]: `queries` (off-topic, [`off_topic_queries`])
/// searched through the engine on `bundle` with its calibration `cal` (top 10, default
/// filters), BM25 always; dense, weighted and RRF hybrid when `query_vectors` (one
/// L2-normalised, uncentred embedding per query, same order: the engine centres them) is
/// given and the bundle has vectors and a dense fit. Each threshold is the [`null_q`]-quantile
/// (default [`NULL_Q`]) of its mode's top-1 calibrated scores (a hybrid search that fell back to the dense list,
/// no term matched, counts for neither fusion). Searches run on `threads` threads. `None`
/// when fewer than [`MIN_NULL_SCORES`] BM25 searches return a hit.
///
/// Errors: an engine error of a search (a corrupt part), a bad [`NULL_Q_ENV`].
pub fn null_cap(
    bundle: Bundle,
    cal: &Calibration,
    queries: &[String],
    query_vectors: Option<&[Vec<f32>]>,
    threads: usize,
) -> Result<Option<jikji_format::NullCap>> {
    use jikji_engine::{Engine, Fusion, Mode};
    let dense = query_vectors
        .filter(|v| v.len() == queries.len() && bundle.vectors().is_some() && cal.dense.is_some());
    let mut weighted = Engine::new(bundle.with_calibration(Some(cal.clone())));
    weighted.set_fusion(Fusion::Weighted {
        dense_weight: cal.dense_weight,
    });
    // Per query: top-1 scores of bm25, dense, weighted, rrf (NaN: no hit / not run).
    let top1 = |e: &Engine, i: usize, mode: Mode, want: Option<Fusion>| -> Result<f32> {
        let v = dense.map(|v| v[i].as_slice());
        if mode != Mode::Bm25 && v.is_none() {
            return Ok(f32::NAN);
        }
        let r = e.search_with_vector(&queries[i], v, mode, 10)?;
        let ok = mode != Mode::Hybrid || r.fusion.is_some_and(|f| Some(f) == want);
        Ok(match r.hits.first() {
            Some(h) if ok => h.score,
            _ => f32::NAN,
        })
    };
    let weighted_fusion = weighted.fusion();
    let run = |e: &Engine, ids: &[usize], modes: &[(Mode, Option<Fusion>)]| {
        ids.iter()
            .map(|&i| {
                modes
                    .iter()
                    .map(|&(m, f)| top1(e, i, m, f))
                    .collect::<Result<Vec<f32>>>()
            })
            .collect::<Result<Vec<Vec<f32>>>>()
    };
    let on_threads = |e: &Engine, modes: &[(Mode, Option<Fusion>)]| -> Result<Vec<Vec<f32>>> {
        let ids: Vec<usize> = (0..queries.len()).collect();
        let per = ids.len().div_ceil(threads.max(1)).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = ids
                .chunks(per)
                .map(|part| s.spawn(move || run(e, part, modes)))
                .collect();
            let mut out = Vec::with_capacity(ids.len());
            for h in handles {
                out.extend(h.join().expect("a null-cap search thread panicked")?);
            }
            Ok(out)
        })
    };
    let first = on_threads(
        &weighted,
        &[
            (Mode::Bm25, None),
            (Mode::Dense, None),
            (Mode::Hybrid, Some(weighted_fusion)),
        ],
    )?;
    let mut rrf_engine = weighted;
    rrf_engine.set_fusion(Fusion::Rrf);
    let rrf = on_threads(&rrf_engine, &[(Mode::Hybrid, Some(Fusion::Rrf))])?;
    let q = null_q()?;
    let threshold = |scores: Vec<f32>| {
        let mut s: Vec<f32> = scores.into_iter().filter(|x| !x.is_nan()).collect();
        if s.len() < MIN_NULL_SCORES {
            None
        } else {
            quantile(&mut s, q)
        }
    };
    let col = |k: usize| first.iter().map(|r| r[k]).collect::<Vec<f32>>();
    let Some(bm25) = threshold(col(0)) else {
        return Ok(None);
    };
    Ok(Some(jikji_format::NullCap {
        q,
        cap: NULL_CAP,
        queries: queries.len(),
        bm25,
        dense: threshold(col(1)),
        weighted: threshold(col(2)),
        rrf: threshold(rrf.iter().map(|r| r[0]).collect()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn platt_recovers_a_known_sigmoid() {
        // Deterministic samples from p(x) = σ(8x − 4) on a grid of x.
        let truth = Platt { a: 8.0, b: -4.0 };
        let mut samples = Vec::new();
        for i in 0..2000u64 {
            let x = (i % 101) as f32 / 100.0;
            let u = (mix(i) % 1_000_000) as f32 / 1e6;
            samples.push((x, u < truth.apply(x)));
        }
        let fit = fit_platt(&samples);
        assert!((fit.a - 8.0).abs() < 1.2, "{fit:?}");
        assert!((fit.b + 4.0).abs() < 0.7, "{fit:?}");
        assert!(fit.apply(0.9) > 0.9 && fit.apply(0.1) < 0.1);
    }

    #[test]
    fn platt_with_one_class_is_flat_and_bounded() {
        let fit = fit_platt(&[(0.2, false), (0.9, false), (0.5, false)]);
        for x in [0.0, 0.5, 1.0] {
            let p = fit.apply(x);
            assert!((0.0..0.5).contains(&p), "{p}");
        }
    }

    #[test]
    fn dense_fit_on_korean_had_a_negative_slope() {
        // Right answers scoring lower than wrong ones: the fit must not invert the ranker.
        let mut samples = Vec::new();
        for i in 0..300u64 {
            let u = (mix(i) % 1000) as f32 / 1000.0;
            samples.push((1.0 + u, true));
            samples.push((2.0 + u, false));
            samples.push((2.5 + u, false));
        }
        let fit = fit_platt(&samples);
        assert_eq!(fit.a, 0.0, "{fit:?}");
        let p = fit.apply(1.0);
        assert!(
            (p - fit.apply(5.0)).abs() < 1e-6 && (0.3..0.36).contains(&p),
            "{p}"
        );
    }

    #[test]
    fn margin_platt_recovers_a_known_sigmoid() {
        // Deterministic samples from p = σ(4x + 6g − 3) on a grid of (x, g).
        let truth = MarginPlatt {
            a: 4.0,
            m: 6.0,
            b: -3.0,
        };
        let mut samples = Vec::new();
        for i in 0..6000u64 {
            let (x, g) = ((i % 21) as f32 / 20.0, ((i / 21) % 17) as f32 / 16.0 - 0.5);
            let u = (mix(i) % 1_000_000) as f32 / 1e6;
            samples.push(([x, g], u < truth.apply(x, g)));
        }
        let fit = fit_margin_platt(&samples);
        assert!((fit.a - 4.0).abs() < 0.8, "{fit:?}");
        assert!((fit.m - 6.0).abs() < 1.0, "{fit:?}");
        assert!((fit.b + 3.0).abs() < 0.6, "{fit:?}");
    }

    #[test]
    fn margin_platt_drops_a_feature_that_points_the_wrong_way() {
        // Right answers have higher x but narrower margins: the margin slope would be < 0.
        let mut samples = Vec::new();
        for i in 0..300u64 {
            let u = (mix(i) % 1000) as f32 / 1000.0;
            samples.push(([0.6 + 0.4 * u, 0.1 * u], true));
            samples.push(([0.5 * u, 0.3 + 0.5 * u], false));
        }
        let fit = fit_margin_platt(&samples);
        assert_eq!(fit.m, 0.0, "{fit:?}");
        assert!(fit.a > 0.0, "{fit:?}");
        assert!(
            fit.apply(0.9, 0.0) > 0.8 && fit.apply(0.1, 0.5) < 0.2,
            "{fit:?}"
        );
    }

    #[test]
    fn pseudo_queries_follow_the_script() {
        let zh_text =
            "子曰：學而時習之，不亦說乎？有朋自遠方來，不亦樂乎？人不知而不慍，不亦君子乎？";
        let (q, anchor) = pseudo_query(zh_text, "曾子曰：吾日三省吾身", 3).unwrap();
        assert!(zh_text.contains(&anchor), "{anchor}");
        let n = q.chars().count();
        assert!((8..=13).contains(&n), "{q}");
        let en_text =
            "# Hamlet\nTo be, or not to be, that is the question: whether 'tis nobler in the mind";
        let (q, anchor) =
            pseudo_query(en_text, "Something is rotten in the state of Denmark", 7).unwrap();
        assert!(en_text.contains(&anchor), "{anchor}");
        assert!(
            !q.contains("Hamlet") && !anchor.contains("Hamlet"),
            "headings are skipped"
        );
        assert!((4..=10).contains(&q.split(' ').count()), "{q}");
        let ko_text = "봉평장에서 한 번도 빼논 적은 없었다. 충주 제천 등의 이웃 군을 돌았다.";
        let (q, anchor) = pseudo_query(ko_text, "메밀꽃 필 무렵 달밤", 1).unwrap();
        assert!(ko_text.contains(&anchor), "{anchor}");
        assert!((4..=10).contains(&q.split(' ').count()), "{q}");
        assert_eq!(pseudo_query("# only a heading", "x", 1), None);
    }
}

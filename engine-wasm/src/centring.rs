//! Per-language mean centring of dense vectors (issue 15), the query side of it, and the
//! language detector both sides use.
//!
//! multilingual-e5-small (Wang et al. 2024, arXiv:2402.05672) adds a language-specific
//! offset to every vector: a query scores any passage in its own language above the right
//! passage in another (on `xquad-zh2en-mixed`, Chinese questions with English answers among
//! Chinese distractors, dense nDCG@10 was 0.025). Subtracting each language's mean vector
//! removes most of it (the "language-agnostic" re-centring of Libovický et al., *On the
//! Language Neutrality of Pre-trained Multilingual Representations*, Findings of EMNLP 2020).
//! The means come from a reference sample of each language shipped with the model
//! (`lang-means.json` in the model folder, see `jikji_builder::lang_means`), not from the
//! bundle's own passages, so a query in a language the bundle has no passage in is
//! corrected too.
//!
//! The builder stores each chunk vector as the model gave it and records a [`Centring`]
//! (method [`METHOD`]) in the manifest's `model`: each chunk's centring language (runs in
//! `chunks`) and each language's passage offset `o[l]`. The engine applies
//! [`centre_query`] to every query vector and then scores chunks through a [`DenseScorer`]:
//! `(q·x_i − q·o[l]) / n_i`, the cosine of the query with the centred chunk vector
//! `normalise(x_i − o[l])` (`n_i = |x_i − o[l]|`, [`ChunkCentring`]), or with query side
//! `shift` `q·x_i − q·o[l]` (no query offset, `n_i = 1`). `q·o[l]` is computed once per
//! language and query, so a query costs one dot product per chunk as without centring. The
//! same code runs natively and in wasm. Because the rows stay raw, every comparison of the
//! bundle's rows with a new file's vectors (dedup, conflicts, `jikji update`) keeps the raw
//! model cosines its thresholds were measured on. A bundle whose manifest has no
//! `centring` is searched with the query vector and the rows as given; a [`METHOD_V1`]
//! record (rows stored centred, no `chunks`) only centres the query.

use jikji_format::analyzer::{script_of, Script};
use jikji_format::manifest::MANIFEST_FILE;
use jikji_format::vectors::Vectors;
use jikji_format::{Centring, FormatError};

use crate::EngineError;

/// The method name of the centring records builders write ([`Centring::method`]): rows
/// raw, per-chunk languages in `chunks`. (The statistics file `lang-means.json` has its own
/// method name, [`STATS_METHOD`].)
pub const METHOD: &str = "lang-mean-v2";

/// The first centring record: rows stored centred (`x − o[l]` or `normalise(x − o[l])`), no
/// `chunks`; the engine only centres the query. Read, no longer written.
pub const METHOD_V1: &str = "lang-mean-v1";

/// The method name of the statistics file (`lang-means.json`) the offsets come from.
pub const STATS_METHOD: &str = "lang-mean-v1";

/// The code of [`Centring::chunks`] for a chunk that is not centred.
pub const NO_LANG: &str = "-";

/// The languages [`script_shares`] reports, in its order.
pub const SCRIPT_LANGS: [&str; 4] = ["ko", "ja", "zh", "en"];

/// The share (0–1) of Hangul (`ko`), kana (`ja`), Han (`zh`) and ASCII (`en`) letters among
/// the letters of `text`, in [`SCRIPT_LANGS`] order, by [`script_of`]; other letters
/// (Cyrillic, accented Latin…) count in the total only; digits and punctuation are not
/// counted. `None` when `text` has no letter.
pub fn script_shares(text: &str) -> Option<[f64; 4]> {
    let (mut n, mut total) = ([0usize; 4], 0usize);
    for c in text.chars() {
        match script_of(c) {
            Script::Hangul => n[0] += 1,
            Script::Kana => n[1] += 1,
            Script::Han => n[2] += 1,
            Script::Alnum if c.is_ascii_alphabetic() => n[3] += 1,
            Script::Alnum if c.is_alphabetic() => {}
            _ => continue,
        }
        total += 1;
    }
    (total > 0).then(|| n.map(|k| k as f64 / total as f64))
}

/// Detects `ko`, `ja`, `zh`, `en` or `other` for `text` (a chunk or a query).
///
/// By [`script_shares`]: Hangul share ≥ 30 % → `ko`; else kana ≥ 10 % → `ja` (Japanese
/// mixes kana with kanji); else Han ≥ 30 % → `zh`; else ASCII letters ≥ 50 % → `en`;
/// otherwise (or with no letters) `other`. Classical and modern Chinese are both `zh`.
pub fn detect_lang(text: &str) -> &'static str {
    let Some([hangul, kana, han, ascii]) = script_shares(text) else {
        return "other";
    };
    if hangul >= 0.3 {
        "ko"
    } else if kana >= 0.1 {
        "ja"
    } else if han >= 0.3 {
        "zh"
    } else if ascii >= 0.5 {
        "en"
    } else {
        "other"
    }
}

/// `normalise(x − offset)`: `x` and `offset` of the same length; the result is L2-normalised.
/// When the difference has no length (or is not finite), `x` is returned unchanged.
pub fn centre(x: &[f32], offset: &[f32]) -> Vec<f32> {
    let d: Vec<f32> = x.iter().zip(offset).map(|(a, b)| a - b).collect();
    let norm = d.iter().map(|v| v * v).sum::<f32>().sqrt();
    if !(norm.is_finite() && norm > 0.0) {
        return x.to_vec();
    }
    d.into_iter().map(|v| v / norm).collect()
}

/// The query vector the bundle's vectors are to be compared with: `qvec` centred by the
/// manifest's offset for the query's language ([`detect_lang`] of `query`), or `qvec`
/// itself when the bundle has no centring or no offset for that language.
///
/// Errors: [`EngineError::Format`] (naming `manifest.json`) when the offset does not have
/// `qvec.len()` finite components — a manifest that is not what a builder writes.
pub fn centre_query(
    centring: Option<&Centring>,
    query: &str,
    qvec: &[f32],
) -> Result<Vec<f32>, EngineError> {
    let Some(c) = centring else {
        return Ok(qvec.to_vec());
    };
    let lang = detect_lang(query);
    let Some(offset) = c.query.get(lang) else {
        return Ok(qvec.to_vec());
    };
    if offset.len() != qvec.len() || offset.iter().any(|v| !v.is_finite()) {
        return Err(EngineError::Format(FormatError::corrupt(
            MANIFEST_FILE,
            0,
            format!(
                "model.centring.query.{lang} has {} components (finite: {}), the query vector {}",
                offset.len(),
                offset.iter().all(|v| v.is_finite()),
                qvec.len()
            ),
        )));
    }
    Ok(centre(qvec, offset))
}

/// Checks that `v` is `dim` finite numbers, naming the manifest field `what` otherwise.
fn check_vector(what: &str, v: &[f32], dim: usize) -> Result<(), EngineError> {
    if v.len() != dim || v.iter().any(|x| !x.is_finite()) {
        return Err(manifest_error(format!(
            "{what} has {} components (finite: {}), the vectors {dim}",
            v.len(),
            v.iter().all(|x| x.is_finite())
        )));
    }
    Ok(())
}

fn manifest_error(message: String) -> EngineError {
    EngineError::Format(FormatError::corrupt(MANIFEST_FILE, 0, message))
}

/// Parses [`Centring::chunks`] for a bundle of `n` chunks: the code of each run and its
/// length, in doc-id order. Errors (naming `manifest.json`): a run that is not
/// `<code>*<count>` with a count ≥ 1, or counts that do not add up to `n`.
pub fn parse_runs(runs: &str, n: usize) -> Result<Vec<(&str, usize)>, EngineError> {
    let mut out = Vec::new();
    let mut total = 0usize;
    for run in runs.split(' ').filter(|r| !r.is_empty()) {
        let bad = || manifest_error(format!("model.centring.chunks: bad run {run:?}"));
        let (code, count) = run.rsplit_once('*').ok_or_else(bad)?;
        let count: usize = count.parse().map_err(|_| bad())?;
        if code.is_empty() || count == 0 {
            return Err(bad());
        }
        total = total
            .checked_add(count)
            .filter(|t| *t <= n)
            .ok_or_else(|| {
                manifest_error(format!(
                    "model.centring.chunks counts more than the {n} chunks"
                ))
            })?;
        out.push((code, count));
    }
    if total != n {
        return Err(manifest_error(format!(
            "model.centring.chunks counts {total} chunks, the bundle has {n}"
        )));
    }
    Ok(out)
}

/// Writes per-chunk language codes as [`Centring::chunks`] runs (`None`: [`NO_LANG`]).
pub fn write_runs<'a>(langs: impl IntoIterator<Item = Option<&'a str>>) -> String {
    let mut runs: Vec<(&str, usize)> = Vec::new();
    for l in langs {
        let l = l.unwrap_or(NO_LANG);
        match runs.last_mut() {
            Some((c, n)) if *c == l => *n += 1,
            _ => runs.push((l, 1)),
        }
    }
    runs.iter()
        .map(|(c, n)| format!("{c}*{n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// A bundle's per-chunk centring ([`METHOD`] records), decoded once per bundle: each
/// chunk's language (an index into the offsets, or none), each language's passage offset
/// `o[l]`, and, unless the query side is `shift`, each chunk's centred norm `n_i = |x̂_i −
/// o[l]|` of its dequantized row `x̂_i` (4 bytes per chunk, one pass over the rows). Without
/// the rows ([`ChunkCentring::langs_of`], the paged dense index) the norms are computed
/// from each row as it is scanned ([`RowScorer`]), by the same code, so the scores are
/// bit for bit the same.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkCentring {
    langs: Vec<u8>,
    offsets: Vec<Vec<f32>>,
    /// Query side `shift`: no normalisation (`n_i = 1`).
    shift: bool,
    /// `n_i` per chunk (NaN: no length), empty when not computed.
    norms: Vec<f32>,
}

/// `|x̂ − o|` of the dequantized row `(scale, row)` and offset `o`, NaN when it is 0 or not
/// finite (such a chunk then scores as if not centred).
pub fn centred_norm(scale: f32, row: &[i8], o: &[f32]) -> f32 {
    let n2: f32 = row
        .iter()
        .zip(o)
        .map(|(q, o)| {
            let d = f32::from(*q) * scale - o;
            d * d
        })
        .sum();
    if n2.is_finite() && n2 > 0.0 {
        n2.sqrt()
    } else {
        f32::NAN
    }
}

impl ChunkCentring {
    /// The per-chunk centring of a manifest's record `c` for `vectors`: `Ok(None)` for a
    /// [`METHOD_V1`] record (rows already centred). Errors (naming `manifest.json`): an
    /// unknown method, a [`METHOD`] record without `chunks` or with bad runs
    /// ([`parse_runs`]), a language of `chunks` without a `passage` offset of `dim` finite
    /// numbers, more than 254 languages.
    pub fn of(c: &Centring, vectors: &Vectors) -> Result<Option<Self>, EngineError> {
        let Some(mut out) = Self::langs_of(c, vectors.len(), vectors.dim())? else {
            return Ok(None);
        };
        if !out.shift {
            out.norms = (0..vectors.len())
                .map(|i| match out.langs[i] {
                    u8::MAX => 1.0,
                    l => {
                        let (scale, row) = vectors.row(i);
                        centred_norm(scale, row, &out.offsets[usize::from(l)])
                    }
                })
                .collect();
        }
        Ok(Some(out))
    }

    /// The languages and offsets of record `c` for a bundle of `n` chunks of dimension
    /// `dim`, without the norms (no rows needed): what [`RowScorer`] scores with. Errors:
    /// as [`ChunkCentring::of`].
    pub fn langs_of(c: &Centring, n: usize, dim: usize) -> Result<Option<Self>, EngineError> {
        match c.method.as_str() {
            METHOD_V1 => return Ok(None),
            METHOD => {}
            m => {
                return Err(manifest_error(format!(
                    "unknown model.centring.method {m:?}"
                )))
            }
        }
        let runs = c
            .chunks
            .as_deref()
            .ok_or_else(|| manifest_error(format!("model.centring ({METHOD}) has no chunks")))?;
        let mut codes: Vec<&str> = Vec::new();
        let mut offsets: Vec<Vec<f32>> = Vec::new();
        let mut langs = Vec::with_capacity(n);
        for (code, count) in parse_runs(runs, n)? {
            let idx = if code == NO_LANG {
                u8::MAX
            } else if let Some(i) = codes.iter().position(|c| *c == code) {
                i as u8
            } else {
                let o = c.passage.get(code).ok_or_else(|| {
                    manifest_error(format!(
                        "model.centring.chunks names {code:?}, model.centring.passage has no offset for it"
                    ))
                })?;
                check_vector(&format!("model.centring.passage.{code}"), o, dim)?;
                if codes.len() >= usize::from(u8::MAX) {
                    return Err(manifest_error(
                        "model.centring.chunks names more than 254 languages".into(),
                    ));
                }
                codes.push(code);
                offsets.push(o.clone());
                (codes.len() - 1) as u8
            };
            langs.extend(std::iter::repeat_n(idx, count));
        }
        Ok(Some(ChunkCentring {
            langs,
            offsets,
            shift: c.query_side == "shift",
            norms: Vec::new(),
        }))
    }

    /// The vector chunk `i`'s dense score is the dot product with (the query · it is the
    /// score, up to float rounding): its dequantized row `(scale, row)` centred by its
    /// language's offset and, unless `shift`, normalised; the row itself for a chunk that
    /// is not centred or whose centred row has no length. The builder clusters these
    /// (`jikji_builder::ivf`). Panics if `i` is out of range.
    pub fn scoring_vector(&self, i: usize, scale: f32, row: &[i8]) -> Vec<f32> {
        let x: Vec<f32> = row.iter().map(|&q| f32::from(q) * scale).collect();
        let l = self.langs[i];
        if l == u8::MAX {
            return x;
        }
        let o = &self.offsets[usize::from(l)];
        let d: Vec<f32> = x.iter().zip(o).map(|(a, b)| a - b).collect();
        if self.shift {
            return d;
        }
        let n = centred_norm(scale, row, o);
        if n.is_nan() {
            return x;
        }
        d.into_iter().map(|v| v / n).collect()
    }

    /// Number of chunks.
    pub fn len(&self) -> usize {
        self.langs.len()
    }

    /// True without chunks.
    pub fn is_empty(&self) -> bool {
        self.langs.is_empty()
    }
}

/// The query side of the centred score: the query and `q·o[l]` per language.
#[derive(Clone)]
struct QueryCentring<'a> {
    centring: &'a ChunkCentring,
    qo: Vec<f32>,
}

impl<'a> QueryCentring<'a> {
    fn new(centring: &'a ChunkCentring, query: &[f32]) -> Self {
        let qo = centring
            .offsets
            .iter()
            .map(|o| o.iter().zip(query).map(|(a, b)| a * b).sum())
            .collect();
        QueryCentring { centring, qo }
    }

    /// Chunk `i`'s score from its raw dot product `d`; `norm(o)` gives `n_i` for offset `o`.
    fn score(&self, i: usize, d: f32, norm: impl FnOnce(&[f32]) -> f32) -> f32 {
        let c = self.centring;
        let l = c.langs[i];
        if l == u8::MAX {
            return d;
        }
        let s = d - self.qo[usize::from(l)];
        if c.shift {
            return s;
        }
        let n = norm(&c.offsets[usize::from(l)]);
        if n.is_nan() {
            d
        } else {
            s / n
        }
    }
}

/// The dense scores of one query vector against a bundle's rows, with the bundle's
/// per-chunk centring applied when it has one ([`ChunkCentring`]): every dense score the
/// engine computes (the ranked list, the background of the z-scores, the fused cosines)
/// and the build's calibration goes through [`DenseScorer::score`].
#[derive(Clone)]
pub struct DenseScorer<'a> {
    vectors: &'a Vectors,
    query: &'a [f32],
    centring: Option<QueryCentring<'a>>,
}

impl<'a> DenseScorer<'a> {
    /// A scorer of `query` (length `vectors.dim()`, already through [`centre_query`])
    /// against `vectors`; `centring` the bundle's, if any ([`ChunkCentring::of`], with its
    /// norms). Computes `query·o[l]` for each language once.
    pub fn new(
        vectors: &'a Vectors,
        centring: Option<&'a ChunkCentring>,
        query: &'a [f32],
    ) -> Self {
        DenseScorer {
            vectors,
            query,
            centring: centring.map(|c| QueryCentring::new(c, query)),
        }
    }

    /// Number of chunks.
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    /// True if there are no chunks.
    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// The dense score of chunk `i` (< [`Self::len`]): `q·x_i` ([`Vectors::dot`]) without
    /// centring, else `(q·x_i − q·o[l]) / n_i` (see the module doc). Panics if `i` is out
    /// of range.
    pub fn score(&self, i: usize) -> f32 {
        let d = self.vectors.dot(i, self.query);
        match &self.centring {
            None => d,
            Some(c) => c.score(i, d, |_| c.centring.norms[i]),
        }
    }
}

/// The dense score of chunks whose rows come one at a time (the paged dense index's lists,
/// [`crate::ivf`]): the same score as [`DenseScorer::score`] for the same row bytes, the
/// norm `n_i` computed from the row ([`centred_norm`]).
#[derive(Clone)]
pub struct RowScorer<'a> {
    query: &'a [f32],
    centring: Option<QueryCentring<'a>>,
}

impl<'a> RowScorer<'a> {
    /// A scorer of `query` (already through [`centre_query`]); `centring` the bundle's
    /// ([`ChunkCentring::langs_of`] is enough), if any.
    pub fn new(centring: Option<&'a ChunkCentring>, query: &'a [f32]) -> Self {
        RowScorer {
            query,
            centring: centring.map(|c| QueryCentring::new(c, query)),
        }
    }

    /// The score of chunk `doc` whose row is row `j` of `rows`. Panics if `j` is out of
    /// range or `doc` is not a chunk of the centring's bundle.
    pub fn score(&self, doc: usize, rows: &Vectors, j: usize) -> f32 {
        let d = rows.dot(j, self.query);
        match &self.centring {
            None => d,
            Some(c) => c.score(doc, d, |o| {
                let (scale, row) = rows.row(j);
                centred_norm(scale, row, o)
            }),
        }
    }

    /// The query vector.
    pub fn query(&self) -> &[f32] {
        self.query
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn detects_each_language() {
        assert_eq!(detect_lang("메밀꽃 필 무렵, 허 생원은 장을 떠났다."), "ko");
        assert_eq!(detect_lang("子曰：學而時習之，不亦說乎？"), "zh");
        assert_eq!(detect_lang("学校に行きました。"), "ja");
        assert_eq!(
            detect_lang("To be, or not to be, that is the question."),
            "en"
        );
        assert_eq!(detect_lang("Съешь же ещё этих мягких булок"), "other");
        assert_eq!(detect_lang("…… 123"), "other");
        let s = script_shares("ab 가나 學").unwrap();
        assert!((s[0] - 0.4).abs() < 1e-9 && s[1] == 0.0 && (s[2] - 0.2).abs() < 1e-9);
        assert!((s[3] - 0.4).abs() < 1e-9);
        assert_eq!(script_shares("12 …"), None);
    }

    fn centring(lang: &str, v: Vec<f32>) -> Centring {
        Centring {
            method: METHOD.into(),
            stats_sha256: "00".into(),
            alpha: 1.0,
            query_side: "query-mean".into(),
            query: BTreeMap::from([(lang.to_string(), v)]),
            bundle_prior: None,
            passage: BTreeMap::new(),
            chunks: None,
        }
    }

    #[test]
    fn query_of_the_language_is_centred_and_normalised() {
        let c = centring("en", vec![0.5, 0.0, 0.0]);
        let q = [0.6f32, 0.8, 0.0];
        let out = centre_query(Some(&c), "hello world", &q).unwrap();
        let n = (0.1f32 * 0.1 + 0.8 * 0.8).sqrt();
        assert!((out[0] - 0.1 / n).abs() < 1e-6 && (out[1] - 0.8 / n).abs() < 1e-6);
        // Another language, or no centring: unchanged.
        assert_eq!(centre_query(Some(&c), "學而時習之", &q).unwrap(), q);
        assert_eq!(centre_query(None, "hello", &q).unwrap(), q);
    }

    #[test]
    fn offset_of_the_wrong_length_is_a_format_error() {
        let c = centring("en", vec![0.5, 0.0]);
        let e = centre_query(Some(&c), "hello", &[1.0, 0.0, 0.0]).unwrap_err();
        assert!(e.to_string().contains("manifest.json"), "{e}");
        let c = centring("en", vec![f32::NAN, 0.0, 0.0]);
        assert!(centre_query(Some(&c), "hello", &[1.0, 0.0, 0.0]).is_err());
    }

    #[test]
    fn centring_to_nothing_keeps_the_vector() {
        assert_eq!(centre(&[1.0, 0.0], &[1.0, 0.0]), vec![1.0, 0.0]);
    }

    fn vectors(rows: &[Vec<f32>]) -> Vectors {
        Vectors::open(&jikji_format::vectors::write_vectors(3, rows).unwrap()).unwrap()
    }

    fn record(query_side: &str, chunks: &str) -> Centring {
        Centring {
            method: METHOD.into(),
            stats_sha256: "00".into(),
            alpha: 1.0,
            query_side: query_side.into(),
            query: BTreeMap::new(),
            bundle_prior: None,
            passage: BTreeMap::from([
                ("en".to_string(), vec![0.3, 0.0, 0.1]),
                ("zh".to_string(), vec![0.0, 0.4, 0.1]),
            ]),
            chunks: Some(chunks.into()),
        }
    }

    /// The engine's score of a raw row equals the score of the row stored centred (what
    /// the first version wrote): `q·(x − o)` with `shift`, `q·normalise(x − o)` otherwise.
    #[test]
    fn scores_of_raw_rows_equal_scores_of_centred_rows() {
        let rows = vec![
            vec![0.6, 0.8, 0.0],
            vec![0.0, 0.6, 0.8],
            vec![0.8, 0.0, 0.6],
            vec![0.0, 0.0, 1.0],
        ];
        let v = vectors(&rows);
        let q = [0.48f32, 0.6, 0.64];
        let langs = [Some("en"), Some("zh"), Some("zh"), None];
        for side in ["shift", "passage-mean"] {
            let c = ChunkCentring::of(&record(side, "en*1 zh*2 -*1"), &v)
                .unwrap()
                .unwrap();
            let scorer = DenseScorer::new(&v, Some(&c), &q);
            let plain = DenseScorer::new(&v, None, &q);
            for (i, l) in langs.iter().enumerate() {
                let x = v.get(i);
                let want: Vec<f32> = match l {
                    None => x.clone(),
                    Some(l) => {
                        let o = &record(side, "").passage[*l];
                        let d: Vec<f32> = x.iter().zip(o).map(|(a, b)| a - b).collect();
                        let n = d.iter().map(|a| a * a).sum::<f32>().sqrt();
                        let n = if side == "shift" { 1.0 } else { n };
                        d.iter().map(|a| a / n).collect()
                    }
                };
                let want: f32 = want.iter().zip(&q).map(|(a, b)| a * b).sum();
                assert!((scorer.score(i) - want).abs() < 1e-5, "{side} row {i}");
                assert_eq!(plain.score(i), v.dot(i, &q));
            }
        }
        // A first-version record: rows already centred, nothing per chunk.
        let mut v1 = record("shift", "");
        v1.method = METHOD_V1.into();
        v1.chunks = None;
        assert_eq!(ChunkCentring::of(&v1, &v).unwrap(), None);
    }

    #[test]
    fn bad_chunk_runs_are_format_errors() {
        let v = vectors(&[vec![1.0, 0.0, 0.0], vec![0.0, 1.0, 0.0]]);
        for (runs, why) in [
            ("en*1", "counts 1 chunks"),
            ("en*3", "more than the 2"),
            ("en*1 zh*x", "bad run"),
            ("en*0 zh*2", "bad run"),
            ("*2", "bad run"),
            ("ko*2", "no offset"),
            (&format!("en*1 zh*{}", usize::MAX), "more than the 2"),
        ] {
            let e = ChunkCentring::of(&record("shift", runs), &v).unwrap_err();
            let e = e.to_string();
            assert!(
                e.contains("manifest.json") && e.contains(why),
                "{runs}: {e}"
            );
        }
        let mut r = record("shift", "en*2");
        r.passage.insert("en".into(), vec![f32::NAN, 0.0, 0.0]);
        assert!(ChunkCentring::of(&r, &v).is_err());
        r.passage.insert("en".into(), vec![0.1, 0.0]);
        assert!(ChunkCentring::of(&r, &v).is_err());
        let mut r = record("shift", "en*2");
        r.chunks = None;
        assert!(ChunkCentring::of(&r, &v).is_err());
        r.method = "lang-mean-v9".into();
        assert!(ChunkCentring::of(&r, &v)
            .unwrap_err()
            .to_string()
            .contains("unknown"));
    }

    #[test]
    fn runs_round_trip() {
        let langs = [Some("en"), Some("en"), None, Some("zh"), Some("en")];
        let runs = write_runs(langs);
        assert_eq!(runs, "en*2 -*1 zh*1 en*1");
        assert_eq!(
            parse_runs(&runs, 5).unwrap(),
            [("en", 2), ("-", 1), ("zh", 1), ("en", 1)]
        );
        assert_eq!(write_runs([]), "");
        assert_eq!(parse_runs("", 0).unwrap(), []);
    }
}

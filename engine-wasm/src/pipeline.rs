//! The stages of one search ([`Engine::search_with_options`]), in this order:
//!
//! 1. [`Depth::of`]: how many hits each stage keeps, from `top_k`, the margins' need for
//!    [`MARGIN_DEPTH`] hits, the chunks the lifecycle filters leave out and parent-child
//!    collapsing.
//! 2. [`Engine::rankers`]: the BM25 and/or dense ranked lists of the mode, over the chunks
//!    the [`crate::Filters`] allow (tier, language, folder: applied inside the rankers,
//!    before any list is cut).
//! 3. [`Engine::fuse`]: one ranked list — a ranker's own, or the two fused (weighted or
//!    RRF) in hybrid mode — and the [`Scale`] that turns its raw scores into calibrated
//!    ones (none for an uncalibrated bundle).
//! 4. [`filter`]: children collapsed to their parents (parent-child bundles), then the
//!    lifecycle filters (archived, expired).
//! 5. [`calibrate`]: the reported score of each of the first `top_k` hits that are left
//!    (its margin counts the other hits left, not the ones filtered out).
//! 6. [`Engine::hits`]: hits under the minimum score dropped, the rest ranked and given
//!    their records.
//! 7. [`prefer_tier`] (only with [`Engine::set_prefer_tier`]): within each group of tied
//!    scores the preferred tier's hits first; the ranking cut to `top_k` ([`tie_cut`] kept
//!    the hits that tie with the `top_k`-th for it).
//! 8. [`null_cap`] (bundles whose calibration has a [`jikji_format::NullCap`]): each
//!    reported score at or under its fit's threshold capped, after the ranking is final
//!    (so it never changes), hits now under the minimum score dropped.
//!
//! Lists are `(doc id, raw score)` ([`Scored`]), best first; doc ids index the chunk store.

#[cfg(feature = "dense")]
use jikji_format::Calibration;

use crate::lifecycle::Lifecycle;
use crate::scores::{Input, Scale, MARGIN_DEPTH};
#[cfg(feature = "dense")]
use crate::search::FUSION_DEPTH;
use crate::search::{self, Scored};
use crate::{fusion, parents, Engine, EngineError, Fusion, Hit, Mode, SearchOptions};

/// How many hits each stage keeps.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Depth {
    /// Hits asked for (`top_k`): at most this many are scored and returned.
    pub asked: usize,
    /// Hits kept after collapsing to parents: `max(top_k, MARGIN_DEPTH)` (margins need
    /// that many hits of the full ranking) plus the number of chunks the lifecycle filters
    /// leave out (so `top_k` allowed hits remain when the bundle has them).
    pub results: usize,
    /// Chunks each ranker returns: `results`, times [`parents::PARENT_FETCH`] for a
    /// parent-child bundle ([`parents::rank_depth`]).
    pub rank: usize,
}

impl Depth {
    /// The depths for `top_k` hits when the filters leave out `excluded` chunks.
    pub fn of(engine: &Engine, top_k: usize, excluded: usize) -> Self {
        let results = top_k.max(MARGIN_DEPTH) + excluded;
        Depth {
            asked: top_k,
            results,
            rank: parents::rank_depth(&engine.bundle, results),
        }
    }
}

/// Stage 2's output: the ranked lists of one query.
pub(crate) enum Lists {
    /// BM25 mode: the BM25 list, `rank` deep.
    Bm25(Vec<Scored>),
    /// Dense mode: the dense list (cosines), `rank` deep, and how it was found.
    #[cfg(feature = "dense")]
    Dense(Vec<Scored>, DenseSide),
    /// Hybrid mode: both lists, `max(rank, FUSION_DEPTH)` deep.
    #[cfg(feature = "dense")]
    Hybrid {
        /// BM25 list (raw BM25 scores).
        bm25: Vec<Scored>,
        /// Dense list (cosines).
        dense: Vec<Scored>,
        /// How the dense list was found.
        side: DenseSide,
    },
}

/// How a dense list was found: the exact scan (every row is at hand for the background and
/// for fused chunks that are not in the list) or the paged dense index (scores of the
/// scanned chunks and the background sample only, [`crate::ivf`]).
#[cfg(feature = "dense")]
pub(crate) enum DenseSide {
    /// Every row scanned.
    Exact,
    /// Through the dense index.
    Ivf(crate::ivf::IvfScan),
}

/// Stage 3's output: one ranked list and how its raw scores become calibrated scores.
pub(crate) struct Fused {
    /// `(doc, raw score)`, best first, at most `rank` long.
    pub ranked: Vec<Scored>,
    /// `None` when the bundle has no calibration for this ranker.
    pub scale: Option<Scale>,
    /// The fusion used (hybrid mode with a lexical match only).
    pub fusion: Option<Fusion>,
}

impl Engine {
    /// The query's dense list, `k` deep: cosines of the query vector with every chunk
    /// (exact scan), or with the chunks of the lists the dense index probes (a paged bundle
    /// with `pages.ivf`, unless [`Engine::set_exact_dense`]), of the chunks `allow` lets
    /// through (`None`: all); the dense index reads lists until `fill` allowed chunks were
    /// scanned. Errors: [`EngineError::NoVectors`], [`EngineError::NoModel`] (no query
    /// vector), [`EngineError::Dimension`], PageMissing, a corrupt page.
    #[cfg(feature = "dense")]
    fn dense_list(
        &self,
        qvec: Option<&[f32]>,
        mode: Mode,
        k: usize,
        fill: usize,
        allow: Option<&[bool]>,
    ) -> Result<(Vec<Scored>, DenseSide), EngineError> {
        let q = qvec.ok_or(EngineError::NoModel(mode))?;
        if let Some(root) = self.dense_index() {
            let dim = self.bundle.pages().map_or(0, |p| p.dim);
            if q.len() != dim {
                return Err(EngineError::Dimension {
                    expected: dim,
                    actual: q.len(),
                });
            }
            let scorer = crate::centring::RowScorer::new(self.chunk_langs()?, q);
            let nprobe = self.nprobe.unwrap_or(root.nprobe);
            let scan = crate::ivf::scan(
                &self.bundle,
                root,
                &scorer,
                k,
                nprobe,
                self.rescore,
                fill,
                allow,
                &self.ivf_routing,
            )?;
            return Ok((scan.ranked.clone(), DenseSide::Ivf(scan)));
        }
        let v = self
            .bundle
            .vectors_checked()?
            .ok_or(EngineError::NoVectors(mode))?;
        if q.len() != v.dim() {
            return Err(EngineError::Dimension {
                expected: v.dim(),
                actual: q.len(),
            });
        }
        Ok((
            search::dense(&self.scorer(v, q)?, k, allow),
            DenseSide::Exact,
        ))
    }

    /// Stage 2: the mode's ranked lists, `k` (= [`Depth::rank`]) deep, hybrid's at least
    /// [`FUSION_DEPTH`], of the chunks `allow` lets through (`None`: all). BM25 runs with
    /// this engine's expansion weights. A dense scan through the dense index skips the
    /// chunks `allow` leaves out while scanning and reads more lists while fewer than
    /// `fill` allowed chunks were scanned (see [`crate::ivf::scan`]), so the filters never
    /// empty its ranking.
    pub(crate) fn rankers(
        &self,
        query: &str,
        qvec: Option<&[f32]>,
        mode: Mode,
        k: usize,
        fill: usize,
        allow: Option<&[bool]>,
    ) -> Result<Lists, EngineError> {
        let lex = search::Lexical {
            allow,
            ..self.lexical()
        };
        Ok(match mode {
            Mode::Bm25 => Lists::Bm25(search::bm25(&lex, query, k)?),
            #[cfg(not(feature = "dense"))]
            Mode::Dense | Mode::Hybrid => {
                let _ = (qvec, fill);
                return Err(EngineError::NoDense(mode));
            }
            #[cfg(feature = "dense")]
            Mode::Dense => {
                let (list, side) = self.dense_list(qvec, mode, k, fill, allow)?;
                Lists::Dense(list, side)
            }
            #[cfg(feature = "dense")]
            Mode::Hybrid => {
                let depth = k.max(FUSION_DEPTH);
                // Both rankers run before either error is returned, so that a paged
                // bundle reports the pages of both in one round.
                let bm25 = search::bm25(&lex, query, depth);
                let dense = self.dense_list(qvec, mode, depth, fill, allow);
                let bm25 = bm25?;
                let (dense, side) = dense?;
                Lists::Hybrid { bm25, dense, side }
            }
        })
    }

    /// Stage 3: one list of at most `k` (= [`Depth::rank`]) hits from the mode's lists,
    /// with its [`Scale`] from the bundle's calibration.
    ///
    /// - BM25: the list as is; inputs are scores over the query's exact-match maximum.
    /// - Dense: the list as is; inputs are cosine z-scores against the query's background.
    /// - Hybrid: the engine's fusion, [`fusion::weighted`] (when the bundle has a dense
    ///   calibration) or [`search::rrf`]; inputs are the fused scores. A query that
    ///   matched no term gets the dense list and its scale (see below).
    #[cfg_attr(not(feature = "dense"), allow(unused_variables))]
    pub(crate) fn fuse(
        &self,
        query: &str,
        qvec: Option<&[f32]>,
        mode: Mode,
        lists: Lists,
        k: usize,
    ) -> Result<Fused, EngineError> {
        let b = &self.bundle;
        let cal = b.manifest().calibration.as_ref();
        let fits = cal.and_then(|c| c.scores);
        let upper_bound =
            || fusion::bm25_upper_bound(b.lexical(), b.analyzer(), b.manifest().bm25, query);
        let fused = |ranked, scale| Fused {
            ranked,
            scale,
            fusion: None,
        };
        Ok(match lists {
            Lists::Bm25(lex) => {
                let scale = match cal {
                    Some(c) => Some(Scale {
                        input: Input::Bm25 {
                            upper_bound: upper_bound()?,
                        },
                        plain: c.bm25,
                        margin: fits.map(|f| f.bm25),
                        null: c.null_cap.map(|n| (n, n.bm25)),
                    }),
                    None => None,
                };
                fused(lex, scale)
            }
            #[cfg(feature = "dense")]
            Lists::Dense(den, side) => fused(den, self.dense_scale(cal, qvec, &side)?),
            // No chunk shares a term with the query (e.g. a Chinese question on an
            // English bundle): BM25 gives no evidence either way, so its low log-odds
            // would only drag every fused score under 0.3 (measured on xquad-zh →
            // xquad-en). The ranking is dense's in every fusion anyway.
            #[cfg(feature = "dense")]
            Lists::Hybrid { bm25, dense, side } if bm25.is_empty() => fused(
                dense.into_iter().take(k).collect(),
                self.dense_scale(cal, qvec, &side)?,
            ),
            #[cfg(feature = "dense")]
            Lists::Hybrid { bm25, dense, side } => match (self.fusion, cal) {
                (Fusion::Weighted { dense_weight }, Some(c)) if c.dense.is_some() => {
                    let c = Calibration {
                        dense_weight,
                        ..c.clone()
                    };
                    // Each candidate's text language against the query's (the columns
                    // page, read for the lifecycle filters anyway); a bundle calibrated
                    // before the rule (method before v4) fuses every candidate as before.
                    let q_lang = crate::centring::detect_lang(query);
                    let facets = self.facets()?;
                    let shares = self.language_shares(&facets);
                    let by_lang = facets
                        .get()
                        .zip(shares.as_deref())
                        .filter(|_| fusion::cross_lingual_fusion(&c.method))
                        .map(|(f, s)| fusion::cross_lingual_docs(q_lang, &f.langs, &f.lang, s));
                    let cross = |d: u32| by_lang.as_ref().is_some_and(|f| f(d));
                    let ranked = match &side {
                        DenseSide::Exact => {
                            let v = b.vectors_checked()?.ok_or(EngineError::NoVectors(mode))?;
                            let q = qvec.ok_or(EngineError::NoModel(mode))?;
                            fusion::weighted(
                                &bm25,
                                upper_bound()?,
                                &dense,
                                &self.scorer(v, q)?,
                                &c,
                                &cross,
                                k,
                            )
                        }
                        DenseSide::Ivf(scan) => fusion::weighted_with(
                            &bm25,
                            upper_bound()?,
                            &dense,
                            &fusion::DenseEvidence {
                                background: scan.background,
                                cos_of: &|d| scan.score_of(d),
                            },
                            &c,
                            &cross,
                            k,
                        ),
                    };
                    Fused {
                        ranked,
                        scale: c.weighted.map(|p| Scale {
                            input: Input::Raw,
                            plain: p,
                            margin: fits.and_then(|f| f.weighted),
                            null: c.null_cap.and_then(|n| Some((n, n.weighted?))),
                        }),
                        fusion: Some(self.fusion),
                    }
                }
                _ => Fused {
                    ranked: search::rrf(&[bm25, dense], k),
                    scale: cal.and_then(|c| c.rrf).map(|p| Scale {
                        input: Input::Raw,
                        plain: p,
                        margin: fits.and_then(|f| f.rrf),
                        null: cal.and_then(|c| c.null_cap).and_then(|n| Some((n, n.rrf?))),
                    }),
                    fusion: Some(Fusion::Rrf),
                },
            },
        })
    }

    /// The scale of a dense list: its fits if the bundle has a dense calibration, with the
    /// query vector's background. Errors: a broken centring record.
    #[cfg(feature = "dense")]
    fn dense_scale(
        &self,
        cal: Option<&Calibration>,
        qvec: Option<&[f32]>,
        side: &DenseSide,
    ) -> Result<Option<Scale>, EngineError> {
        let Some(p) = cal.and_then(|c| c.dense) else {
            return Ok(None);
        };
        let background = match side {
            DenseSide::Ivf(scan) => scan.background,
            DenseSide::Exact => match (self.bundle.vectors(), qvec) {
                (Some(v), Some(q)) => fusion::dense_background(&self.scorer(v, q)?),
                _ => (0.0, 1.0),
            },
        };
        Ok(Some(Scale {
            input: Input::Dense { background },
            plain: p,
            margin: cal.and_then(|c| c.scores).and_then(|f| f.dense),
            null: cal
                .and_then(|c| c.null_cap)
                .and_then(|n| Some((n, n.dense?))),
        }))
    }

    /// Stage 6: hits of `ranked` (`(doc, raw score, reported score)`, best first) whose
    /// score is at least the minimum score (a minimum of 0 keeps every hit, also the
    /// negative raw dense scores of an uncalibrated bundle), ranked from 1, with their records (a parent
    /// record says which parent section it is, see [`parents::record`]), each with its
    /// [`Hit::coverage`] when `coverage` is given.
    pub(crate) fn hits(
        &self,
        ranked: Vec<(u32, f32, f32)>,
        coverage: Option<&crate::scores::QueryCoverage>,
    ) -> Result<Vec<Hit>, EngineError> {
        let mut hits = Vec::with_capacity(ranked.len());
        let mut missing = None;
        for (doc, raw, score) in ranked {
            if self.min_score > 0.0 && score < self.min_score {
                continue;
            }
            // A paged bundle's chunk page not loaded yet: go on, so every page the hits
            // need is reported at once.
            let chunk = match parents::record(&self.bundle, doc) {
                Ok(c) => c,
                Err(e) if e.is_page_missing() => {
                    missing = Some(e);
                    continue;
                }
                Err(e) => return Err(e.into()),
            };
            hits.push(Hit {
                rank: hits.len() + 1,
                score,
                raw_score: raw,
                coverage: coverage.map(|c| c.of(doc)),
                chunk,
            });
        }
        match missing {
            Some(e) => Err(e.into()),
            None => Ok(hits),
        }
    }
}

/// Stage 4: `ranked` with each child replaced by its parent (parent-child bundles; at most
/// `depth.results` hits, see [`parents::collapse`]), then without the chunks `opts` leaves
/// out (only looked up when `excluded` > 0, the number [`Lifecycle::excluded`] counts).
pub(crate) fn filter(
    engine: &Engine,
    ranked: Vec<Scored>,
    depth: Depth,
    life: &Lifecycle,
    opts: &SearchOptions,
    excluded: usize,
) -> Result<Vec<Scored>, EngineError> {
    let mut ranked = parents::collapse(&engine.bundle, ranked, depth.results, |r| &mut r.0)?;
    if excluded > 0 {
        ranked.retain(|(doc, _)| life.allows(*doc, opts));
    }
    Ok(ranked)
}

/// Stage 5: the first `depth.asked` hits of `ranked` as `(doc, raw score, reported
/// score)`: calibrated by `scale` (margins over all of `ranked`, see [`Scale::scores`]), or
/// the raw score when the bundle has no calibration for this ranker.
pub(crate) fn calibrate(
    ranked: &[Scored],
    scale: Option<Scale>,
    depth: Depth,
    life: &Lifecycle,
) -> Vec<(u32, f32, f32)> {
    let scores: Vec<f32> = match scale {
        Some(s) => s.scores(ranked, depth.asked, &life.file),
        None => ranked.iter().take(depth.asked).map(|r| r.1).collect(),
    };
    ranked
        .iter()
        .zip(scores)
        .map(|(&(doc, raw), score)| (doc, raw, score))
        .collect()
}

/// Reported scores within this of the best hit of their group tie (see
/// [`Engine::set_prefer_tier`]): a hundredth of the calibrated [0, 1] scale, below what a
/// calibrated probability can tell apart on the bundles measured (README, "Retrieval
/// quality": the fits are checked in bands of 0.1 and 0.3).
pub const TIE: f32 = 0.01;

/// With a preferred tier, how many hits past the `top_k`-th are ranked and scored, so that
/// the group of hits tied with the `top_k`-th can be completed ([`tie_cut`]).
pub const TIE_DEPTH: usize = 10;

/// The start of each tie group of `scores` (best first): greedily from the top, a group
/// starts at the first score not yet in one and holds the scores after it that are at
/// least that score minus [`TIE`].
fn tie_groups(scores: impl Iterator<Item = f32>) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut lead = f32::INFINITY;
    for (i, s) in scores.enumerate() {
        if starts.is_empty() || s < lead - TIE {
            starts.push(i);
            lead = s;
        }
    }
    starts
}

/// How many of `scored` (`(doc, raw, reported score)`, best first) to give records: the
/// first `top_k`, plus the rest of the tie group the `top_k`-th is in.
pub(crate) fn tie_cut(scored: &[(u32, f32, f32)], top_k: usize) -> usize {
    if scored.len() <= top_k || top_k == 0 {
        return scored.len().min(top_k);
    }
    let starts = tie_groups(scored.iter().map(|s| s.2));
    // The first group that starts after the top_k-th hit ends the cut.
    starts
        .into_iter()
        .find(|&g| g >= top_k)
        .unwrap_or(scored.len())
}

/// Stage 7: `hits` (best first) with, inside each tie group (see
/// [`Engine::set_prefer_tier`]), the hits of `tier` moved ahead of the others (both keep
/// their order), cut to `top_k` and ranked again from 1. Scores are unchanged.
pub(crate) fn prefer_tier(hits: Vec<Hit>, tier: u32, top_k: usize) -> Vec<Hit> {
    let mut starts = tie_groups(hits.iter().map(|h| h.score));
    starts.push(hits.len());
    let mut out = Vec::with_capacity(hits.len());
    let mut rest = hits.into_iter();
    for w in starts.windows(2) {
        let group: Vec<Hit> = rest.by_ref().take(w[1] - w[0]).collect();
        let (mut first, others): (Vec<Hit>, Vec<Hit>) =
            group.into_iter().partition(|h| h.tier == Some(tier));
        first.extend(others);
        out.extend(first);
    }
    out.truncate(top_k);
    for (i, h) in out.iter_mut().enumerate() {
        h.rank = i + 1;
    }
    out
}

/// Stage 8: `hits` (final ranking) with each score mapped by the null cap `null` (the
/// bundle's [`jikji_format::NullCap`] and the fit's threshold, from [`Scale::null`]), those
/// now under `min_score` left out and the rest ranked again from 1. Without `null` the
/// hits are returned as they are.
pub(crate) fn null_cap(
    mut hits: Vec<Hit>,
    null: Option<(jikji_format::NullCap, f32)>,
    min_score: f32,
) -> Vec<Hit> {
    if let Some((n, t)) = null {
        hits.retain_mut(|h| {
            h.score = n.apply(h.score, t);
            h.score >= min_score
        });
        for (i, h) in hits.iter_mut().enumerate() {
            h.rank = i + 1;
        }
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(score: f32, tier: u32) -> Hit {
        Hit {
            rank: 0,
            score,
            raw_score: score,
            coverage: None,
            chunk: jikji_format::ChunkRecord {
                tier: Some(tier),
                id: format!("{score}-{tier}"),
                ..Default::default()
            },
        }
    }

    #[test]
    fn the_null_cap_lowers_scores_at_or_under_the_threshold_only() {
        let n = jikji_format::NullCap {
            q: 0.95,
            cap: 0.59,
            queries: 450,
            bm25: 0.92,
            dense: None,
            weighted: None,
            rrf: None,
        };
        let hits = || [0.95, 0.92, 0.7, 0.5, 0.2].map(|s| hit(s, 1)).to_vec();
        let scores = |h: &[Hit]| h.iter().map(|h| (h.rank, h.score)).collect::<Vec<_>>();
        let mut want = hits();
        for (i, h) in want.iter_mut().enumerate() {
            h.rank = i + 1;
        }
        // No cap: the hits as they are.
        assert_eq!(null_cap(want.clone(), None, 0.0), want);
        assert_eq!(
            scores(&null_cap(want.clone(), Some((n, 0.92)), 0.0)),
            [(1, 0.95), (2, 0.59), (3, 0.59), (4, 0.5), (5, 0.2)]
        );
        // A threshold under the cap changes nothing.
        assert_eq!(null_cap(want.clone(), Some((n, 0.5)), 0.0), want);
        // Capped hits under the minimum score are dropped; the rest ranked from 1.
        assert_eq!(scores(&null_cap(hits(), Some((n, 0.92)), 0.6)), [(1, 0.95)]);
    }

    #[test]
    fn ties_are_grouped_from_the_top_within_a_hundredth() {
        // 0.90 leads {0.90, 0.895, 0.891}; 0.889 is more than 0.01 below 0.90: a new group.
        let g = tie_groups([0.90, 0.895, 0.891, 0.889, 0.5].into_iter());
        assert_eq!(g, [0, 3, 4]);
        let scored: Vec<(u32, f32, f32)> = [0.9, 0.85, 0.849, 0.845, 0.7]
            .iter()
            .enumerate()
            .map(|(i, &s)| (i as u32, s, s))
            .collect();
        // top 2: the 2nd (0.85) ties with the next two.
        assert_eq!(tie_cut(&scored, 2), 4);
        assert_eq!(tie_cut(&scored, 1), 1);
        assert_eq!(tie_cut(&scored, 9), 5);
    }

    #[test]
    fn a_preferred_tier_wins_ties_only() {
        let hits = vec![
            hit(0.95, 99),
            hit(0.90, 99),
            hit(0.895, 1),
            hit(0.70, 99),
            hit(0.60, 1),
        ];
        let ids = |v: &[Hit]| v.iter().map(|h| h.id.clone()).collect::<Vec<_>>();
        let out = prefer_tier(hits.clone(), 1, 5);
        assert_eq!(
            ids(&out),
            ["0.95-99", "0.895-1", "0.9-99", "0.7-99", "0.6-1"],
            "0.895 ties with 0.90; 0.60 ties with nothing"
        );
        assert_eq!(
            out.iter().map(|h| h.rank).collect::<Vec<_>>(),
            [1, 2, 3, 4, 5]
        );
        // Cut after the reordering: the tier-1 hit tied with the 2nd takes its place.
        assert_eq!(
            ids(&prefer_tier(hits.clone(), 1, 2)),
            ["0.95-99", "0.895-1"]
        );
        // Another tier preferred, or none in the group: the order is the scores'.
        assert_eq!(
            ids(&prefer_tier(hits, 7, 5)),
            ["0.95-99", "0.9-99", "0.895-1", "0.7-99", "0.6-1"]
        );
    }
}

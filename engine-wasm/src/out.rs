//! The JSON the engine hands to JavaScript (`wasm` module), written by hand instead of by
//! serde_json so that the browser's engine wasm carries no serde_json (sizes:
//! `docs/design/wasm-size.md`). The bytes are exactly what `serde_json::to_string` writes
//! for the same values (the tests compare them): keys in the order serde's derives give
//! them (the `open()` summary, a `serde_json::Value`, in sorted order), strings escaped as
//! serde_json escapes them (`"`, `\`, and control characters: `\b \t \n \f \r`, else
//! `\u00xx` in lowercase hex; nothing else), floats as serde_json writes them (the `zmij`
//! crate's shortest round-trip digits, which serde_json uses; NaN and infinities as
//! `null`); the summary's calibration floats are `f32` digits too, where `serde_json::json!`
//! widened them to `f64` first (the same numbers once read back as `f32`).

use jikji_format::paged::CacheStats;
use jikji_format::{Calibration, ChunkRecord, Manifest, MarginPlatt, ModelInfo, Platt};

use crate::snippet::Snippet;
use crate::{FacetValues, Fusion, Hit, SearchResult};

/// Appends `s` as a JSON string.
pub fn string(out: &mut String, s: &str) {
    out.push('"');
    let mut run = 0;
    for (i, b) in s.bytes().enumerate() {
        let esc = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            0x08 => "\\b",
            b'\t' => "\\t",
            b'\n' => "\\n",
            0x0C => "\\f",
            b'\r' => "\\r",
            0..=0x1F => "",
            _ => continue,
        };
        out.push_str(&s[run..i]);
        if esc.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        } else {
            out.push_str(esc);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
    out.push('"');
}

/// Appends an `f32` as serde_json writes one (`null` if not finite).
pub fn f32(out: &mut String, v: f32) {
    if v.is_finite() {
        out.push_str(zmij::Buffer::new().format_finite(v));
    } else {
        out.push_str("null");
    }
}

/// Appends an unsigned integer.
pub fn uint(out: &mut String, v: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut n = v;
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    // ASCII digits.
    out.push_str(std::str::from_utf8(&digits[i..]).unwrap_or("0"));
}

/// Appends `,"key":` (or `"key":` as the object's first member: when `out` ends in `{`).
fn key(out: &mut String, k: &str) {
    if !out.ends_with('{') {
        out.push(',');
    }
    string(out, k);
    out.push(':');
}

fn opt_str(out: &mut String, v: &Option<String>) {
    match v {
        Some(s) => string(out, s),
        None => out.push_str("null"),
    }
}

/// The fields of a chunk record, as its `Serialize` derive writes them (flattened into a
/// hit: no braces).
fn record_fields(out: &mut String, c: &ChunkRecord) {
    key(out, "id");
    string(out, &c.id);
    key(out, "source");
    string(out, &c.source);
    key(out, "source_url");
    opt_str(out, &c.source_url);
    key(out, "tier");
    match c.tier {
        Some(t) => uint(out, t.into()),
        None => out.push_str("null"),
    }
    key(out, "heading_path");
    out.push('[');
    for (i, h) in c.heading_path.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        string(out, h);
    }
    out.push(']');
    key(out, "lang");
    string(out, &c.lang);
    key(out, "section");
    uint(out, c.section.into());
    key(out, "start");
    uint(out, c.start as u64);
    key(out, "end");
    uint(out, c.end as u64);
    key(out, "text");
    string(out, &c.text);
    for (k, v) in [
        ("title", &c.title),
        ("author", &c.author),
        ("version", &c.version),
        ("updated", &c.updated),
        ("expires", &c.expires),
        ("provenance", &c.provenance),
        ("doc_id", &c.doc_id),
    ] {
        if let Some(v) = v {
            key(out, k);
            string(out, v);
        }
    }
    if c.archived {
        key(out, "archived");
        out.push_str("true");
    }
    if let Some(p) = &c.parent_id {
        key(out, "parent_id");
        string(out, p);
    }
    if let Some(p) = c.parent_doc {
        key(out, "parent_doc");
        uint(out, p.into());
    }
    if !c.conflicts.is_empty() {
        key(out, "conflicts");
        out.push('[');
        for (i, n) in c.conflicts.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('{');
            for (j, (k, v)) in [
                ("with", &n.with),
                ("source", &n.source),
                ("newer", &n.newer),
                ("subject", &n.subject),
            ]
            .into_iter()
            .enumerate()
            {
                if j > 0 {
                    out.push(',');
                }
                string(out, k);
                out.push(':');
                string(out, v);
            }
            for (k, vs) in [("this", &n.this), ("other", &n.other)] {
                key(out, k);
                out.push('[');
                for (x, v) in vs.iter().enumerate() {
                    if x > 0 {
                        out.push(',');
                    }
                    string(out, v);
                }
                out.push(']');
            }
            out.push('}');
        }
        out.push(']');
    }
}

fn hit(out: &mut String, h: &Hit) {
    out.push('{');
    key(out, "rank");
    uint(out, h.rank as u64);
    key(out, "score");
    f32(out, h.score);
    key(out, "raw_score");
    f32(out, h.raw_score);
    record_fields(out, &h.chunk);
    out.push('}');
}

/// `serde_json::to_string(r)` of a search result.
pub fn result(r: &SearchResult) -> String {
    let mut out =
        String::with_capacity(256 + r.hits.iter().map(|h| h.text.len() + 256).sum::<usize>());
    out.push('{');
    key(&mut out, "query");
    string(&mut out, &r.query);
    key(&mut out, "mode");
    string(&mut out, &r.mode.to_string());
    if let Some(f) = r.fusion {
        key(&mut out, "fusion");
        out.push('{');
        match f {
            Fusion::Rrf => {
                key(&mut out, "fusion");
                string(&mut out, "rrf");
            }
            Fusion::Weighted { dense_weight } => {
                key(&mut out, "fusion");
                string(&mut out, "weighted");
                key(&mut out, "dense_weight");
                f32(&mut out, dense_weight);
            }
        }
        out.push('}');
    }
    key(&mut out, "calibrated");
    out.push_str(if r.calibrated { "true" } else { "false" });
    key(&mut out, "hits");
    out.push('[');
    for (i, h) in r.hits.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        hit(&mut out, h);
    }
    out.push_str("]}");
    out
}

/// `{"need":[…]}`: the pages a query asks for.
pub fn need(pages: &[String]) -> String {
    let mut out = String::from("{\"need\":[");
    for (i, p) in pages.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        string(&mut out, p);
    }
    out.push_str("]}");
    out
}

/// The JSON of a hit's display fields: `{"label": string, "snippet": {"parts": [string, …],
/// "cut_start": bool, "cut_end": bool}}` ([`crate::snippet::label`], [`Snippet`]: `parts`
/// alternate unmarked and marked text, the first unmarked).
pub fn display(label: &str, s: &Snippet) -> String {
    let mut out = String::with_capacity(64 + s.parts.iter().map(|p| p.len() + 4).sum::<usize>());
    out.push('{');
    key(&mut out, "label");
    string(&mut out, label);
    key(&mut out, "snippet");
    out.push('{');
    key(&mut out, "parts");
    out.push('[');
    for (i, p) in s.parts.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        string(&mut out, p);
    }
    out.push(']');
    key(&mut out, "cut_start");
    out.push_str(if s.cut_start { "true" } else { "false" });
    key(&mut out, "cut_end");
    out.push_str(if s.cut_end { "true" } else { "false" });
    out.push_str("}}");
    out
}

/// The JSON of a bundle's filter values: `{"tiers": [[tier, chunks], …], "untiered": chunks,
/// "langs": [[lang, chunks], …], "folders": [[folder, chunks], …]}` ([`FacetValues`]).
pub fn facets(v: &FacetValues) -> String {
    let mut out = String::from("{");
    key(&mut out, "tiers");
    out.push('[');
    for (i, (t, n)) in v.tiers.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        uint(&mut out, u64::from(*t));
        out.push(',');
        uint(&mut out, *n as u64);
        out.push(']');
    }
    out.push(']');
    key(&mut out, "untiered");
    uint(&mut out, v.untiered as u64);
    for (k, list) in [("langs", &v.langs), ("folders", &v.folders)] {
        key(&mut out, k);
        out.push('[');
        for (i, (s, n)) in list.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push('[');
            string(&mut out, s);
            out.push(',');
            uint(&mut out, *n as u64);
            out.push(']');
        }
        out.push(']');
    }
    out.push('}');
    out
}

/// `serde_json::to_string(stats)` of the page cache's counters.
pub fn cache_stats(s: &CacheStats) -> String {
    let mut out = String::from("{");
    for (k, v) in [
        ("pages", s.pages as u64),
        ("bytes", s.bytes as u64),
        ("hits", s.hits),
        ("misses", s.misses),
        ("added", s.added),
        ("evicted", s.evicted),
    ] {
        key(&mut out, k);
        uint(&mut out, v);
    }
    out.push('}');
    out
}

// The summary was a `serde_json::Value`: objects with sorted keys. Its calibration floats are
// written as the `f32`s they are (shortest digits that read back as that `f32`, as in the
// entry), not widened to `f64` as `serde_json::json!` wrote them: the same numbers once read
// back as `f32`, and no `f64` formatter in the browser's wasm (~0.8 kB gzip: issue 12, ninth
// round of docs/design/wasm-size.md).

fn platt(out: &mut String, p: &Platt) {
    out.push('{');
    key(out, "a");
    f32(out, p.a);
    key(out, "b");
    f32(out, p.b);
    out.push('}');
}

fn margin_platt(out: &mut String, p: &MarginPlatt) {
    out.push('{');
    key(out, "a");
    f32(out, p.a);
    key(out, "b");
    f32(out, p.b);
    key(out, "m");
    f32(out, p.m);
    out.push('}');
}

fn calibration(out: &mut String, c: &Calibration) {
    out.push('{');
    key(out, "bm25");
    platt(out, &c.bm25);
    if let Some(p) = &c.dense {
        key(out, "dense");
        platt(out, p);
    }
    key(out, "dense_weight");
    f32(out, c.dense_weight);
    key(out, "method");
    string(out, &c.method);
    // The browser's summary leaves the null cap out (the engine applies it; the page and the
    // JS API never read it, and writing it cost ~280 B gzip of a BM25 engine at its 100 kB
    // budget); native summaries carry it, as serde writes it.
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(n) = &c.null_cap {
        key(out, "null_cap");
        out.push('{');
        key(out, "bm25");
        f32(out, n.bm25);
        key(out, "cap");
        f32(out, n.cap);
        for (k, v) in [("dense", n.dense), ("q", Some(n.q))] {
            if let Some(x) = v {
                key(out, k);
                f32(out, x);
            }
        }
        key(out, "queries");
        uint(out, n.queries as u64);
        for (k, v) in [("rrf", n.rrf), ("weighted", n.weighted)] {
            if let Some(x) = v {
                key(out, k);
                f32(out, x);
            }
        }
        out.push('}');
    }
    key(out, "pairs");
    uint(out, c.pairs as u64);
    key(out, "queries");
    uint(out, c.queries as u64);
    if let Some(p) = &c.rrf {
        key(out, "rrf");
        platt(out, p);
    }
    if let Some(s) = &c.scores {
        key(out, "scores");
        out.push('{');
        key(out, "bm25");
        margin_platt(out, &s.bm25);
        for (k, v) in [
            ("dense", &s.dense),
            ("rrf", &s.rrf),
            ("weighted", &s.weighted),
        ] {
            if let Some(p) = v {
                key(out, k);
                margin_platt(out, p);
            }
        }
        out.push('}');
    }
    if let Some(p) = &c.weighted {
        key(out, "weighted");
        platt(out, p);
    }
    out.push('}');
}

/// The model entry without its `centring` record (the engine applies it to query vectors;
/// the page does not need its offsets, ~10 kB of numbers).
fn model(out: &mut String, m: &ModelInfo) {
    out.push('{');
    key(out, "dim");
    uint(out, m.dim as u64);
    key(out, "id");
    string(out, &m.id);
    key(out, "max_tokens");
    uint(out, m.max_tokens as u64);
    key(out, "sha256");
    string(out, &m.sha256);
    out.push('}');
}

/// The `open()` / `open_entry()` summary: `serde_json::json!({format_version, chunks,
/// files, model, built_at, calibration, vectors}).to_string()` (keys sorted, as a
/// `serde_json::Value` writes them); in wasm32 without the calibration's `null_cap`.
pub fn summary(m: &Manifest, vectors: bool) -> String {
    let mut out = String::from("{");
    key(&mut out, "built_at");
    uint(&mut out, m.built_at);
    key(&mut out, "calibration");
    match &m.calibration {
        Some(c) => calibration(&mut out, c),
        None => out.push_str("null"),
    }
    key(&mut out, "chunks");
    uint(&mut out, m.counts.chunks as u64);
    key(&mut out, "files");
    out.push('{');
    // Without feature `v1` the manifest's `files` is always empty (a format 2 entry lists
    // none; jikji-format keeps none): no map iteration in the browser's wasm.
    #[cfg(feature = "v1")]
    for (name, f) in &m.files {
        key(&mut out, name);
        out.push('{');
        key(&mut out, "bytes");
        uint(&mut out, f.bytes);
        key(&mut out, "sha256");
        string(&mut out, &f.sha256);
        out.push('}');
    }
    out.push('}');
    key(&mut out, "format_version");
    uint(&mut out, m.format_version.into());
    key(&mut out, "model");
    match &m.model {
        Some(mi) => model(&mut out, mi),
        None => out.push_str("null"),
    }
    key(&mut out, "vectors");
    out.push_str(if vectors { "true" } else { "false" });
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn display_and_facets_json_are_serde_json() {
        let s = Snippet {
            parts: vec!["a \"b\"\n".into(), "學而".into(), "".into()],
            cut_start: true,
            cut_end: false,
        };
        let v: serde_json::Value = serde_json::from_str(&display("Lunyu", &s)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"label": "Lunyu", "snippet": {"parts": ["a \"b\"\n", "學而", ""],
                "cut_start": true, "cut_end": false}})
        );
        let f = FacetValues {
            tiers: vec![(1, 3), (99, 2)],
            untiered: 1,
            langs: vec![("zh".into(), 4)],
            folders: vec![("1. 漢文".into(), 3)],
        };
        let v: serde_json::Value = serde_json::from_str(&facets(&f)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"tiers": [[1, 3], [99, 2]], "untiered": 1, "langs": [["zh", 4]],
                "folders": [["1. 漢文", 3]]})
        );
    }

    use super::*;
    use crate::Mode;
    use jikji_format::ConflictNote;
    use proptest::prelude::*;

    fn text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[\\x00-\\x7f]{0,12}",
            ".{0,12}",
            Just("\"\\/\u{7f}\u{1f}\u{2028}".to_string())
        ]
    }

    fn float() -> impl Strategy<Value = f32> {
        prop_oneof![
            any::<f32>(),
            (0u32..1000).prop_map(|n| n as f32 / 1000.0),
            Just(f32::NAN),
            Just(f32::INFINITY),
            Just(-0.0f32),
        ]
    }

    prop_compose! {
        fn record()(
            id in text(), source in text(), source_url in prop::option::of(text()),
            tier in prop::option::of(any::<u32>()), heading_path in prop::collection::vec(text(), 0..3),
            lang in text(), section in any::<u32>(), start in any::<u32>(), end in any::<u32>(),
            body in text(), opts in prop::collection::vec(prop::option::of(text()), 8),
            archived in any::<bool>(), parent_doc in prop::option::of(any::<u32>()),
            conflicts in prop::collection::vec(
                (prop::collection::vec(text(), 4), prop::collection::vec(text(), 0..3),
                 prop::collection::vec(text(), 0..3)), 0..3),
        ) -> ChunkRecord {
            ChunkRecord {
                id, source, source_url, tier, heading_path, lang, section,
                start: start as usize, end: end as usize, text: body,
                title: opts[0].clone(), author: opts[1].clone(), version: opts[2].clone(),
                updated: opts[3].clone(), expires: opts[4].clone(), provenance: opts[5].clone(),
                doc_id: opts[6].clone(), archived, parent_id: opts[7].clone(), parent_doc,
                conflicts: conflicts.into_iter().map(|(w, this, other)| ConflictNote {
                    with: w[0].clone(), source: w[1].clone(), newer: w[2].clone(),
                    subject: w[3].clone(), this, other,
                }).collect(),
            }
        }
    }

    prop_compose! {
        fn search_result()(
            query in text(),
            mode in prop_oneof![Just(Mode::Bm25), Just(Mode::Dense), Just(Mode::Hybrid)],
            fusion in prop::option::of(prop_oneof![
                Just(Fusion::Rrf),
                float().prop_map(|dense_weight| Fusion::Weighted { dense_weight }),
            ]),
            calibrated in any::<bool>(),
            hits in prop::collection::vec((any::<u16>(), float(), float(), record()), 0..4),
        ) -> SearchResult {
            SearchResult {
                query, mode, fusion, calibrated,
                hits: hits.into_iter().map(|(rank, score, raw_score, chunk)| Hit {
                    rank: rank as usize, score, raw_score, coverage: None, chunk,
                }).collect(),
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

        #[test]
        fn results_are_written_as_serde_json_writes_them(r in search_result()) {
            prop_assert_eq!(result(&r), serde_json::to_string(&r).unwrap());
        }

        #[test]
        fn page_lists_and_cache_counters_are_written_as_serde_json_writes_them(
            pages in prop::collection::vec(text(), 0..4),
            n in prop::collection::vec(any::<u32>(), 6),
        ) {
            prop_assert_eq!(need(&pages), serde_json::json!({ "need": pages }).to_string());
            let s = CacheStats {
                pages: n[0] as usize, bytes: n[1] as usize, hits: n[2].into(),
                misses: u64::MAX - n[3] as u64, added: n[4].into(), evicted: n[5].into(),
            };
            prop_assert_eq!(cache_stats(&s), serde_json::to_string(&s).unwrap());
        }
    }

    /// What `open()`'s summary was before it was written by hand.
    fn summary_by_serde(m: &Manifest, vectors: bool) -> String {
        serde_json::json!({
            "format_version": m.format_version,
            "chunks": m.counts.chunks,
            "files": m.files,
            "model": m.model,
            "built_at": m.built_at,
            "calibration": m.calibration,
            "vectors": vectors,
        })
        .to_string()
    }

    /// The calibration's floats of a summary, each as the bits of the `f32` it reads back
    /// as (so `serde_json::json!`'s widened `f64`s and our `f32` digits compare equal).
    fn narrow_calibration(v: &mut serde_json::Value) {
        fn narrow(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::Number(n) if n.is_f64() => {
                    *v = ((n.as_f64().unwrap() as f32).to_bits()).into();
                }
                serde_json::Value::Object(o) => o.values_mut().for_each(narrow),
                serde_json::Value::Array(a) => a.iter_mut().for_each(narrow),
                _ => {}
            }
        }
        if let Some(c) = v.get_mut("calibration") {
            narrow(c);
        }
    }

    /// `ours` is `by_serde` but for the calibration's floats, written as the shortest
    /// digits of their `f32` (what `jikji.json` holds) where serde widened them to `f64`.
    fn assert_same_summary(ours: &str, by_serde: &str, path: &str) {
        let mut a: serde_json::Value = serde_json::from_str(ours).unwrap();
        let mut b: serde_json::Value = serde_json::from_str(by_serde).unwrap();
        // Every float of ours is an f32's shortest text: serde's f32 writer gives it back.
        fn floats(v: &serde_json::Value, out: &mut Vec<f64>) {
            match v {
                serde_json::Value::Number(n) if n.is_f64() => out.push(n.as_f64().unwrap()),
                serde_json::Value::Object(o) => o.values().for_each(|v| floats(v, out)),
                serde_json::Value::Array(a) => a.iter().for_each(|v| floats(v, out)),
                _ => {}
            }
        }
        let mut fs = Vec::new();
        floats(&a["calibration"], &mut fs);
        for f in fs {
            let text = serde_json::to_string(&(f as f32)).unwrap();
            assert!(
                ours.contains(&format!(":{text},")) || ours.contains(&format!(":{text}}}")),
                "{path}: {text} (f32 digits) not in {ours}"
            );
        }
        narrow_calibration(&mut a);
        narrow_calibration(&mut b);
        assert_eq!(a, b, "{path}");
    }

    #[test]
    fn summaries_are_written_as_serde_json_wrote_them() {
        let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/../format/tests/compat");
        let mut seen_files = false;
        for path in [
            "v2/bundle/jikji.json",
            "v2/bundle-bm25/jikji.json",
            "v1/bundle/manifest.json",
        ] {
            let bytes = std::fs::read(format!("{fixtures}/{path}")).unwrap();
            let mut m = Manifest::parse_named(&bytes, path).unwrap();
            seen_files |= !m.files.is_empty();
            for vectors in [false, true] {
                assert_same_summary(&summary(&m, vectors), &summary_by_serde(&m, vectors), path);
                // Without a calibration, byte for byte serde_json's.
                let cal = m.calibration.take();
                assert_eq!(
                    summary(&m, vectors),
                    summary_by_serde(&m, vectors),
                    "{path}"
                );
                m.calibration = cal;
            }
            // Every optional fit present, odd floats, a file name to escape.
            let c = m.calibration.get_or_insert_with(|| Calibration {
                method: "m".into(),
                queries: 1,
                pairs: 2,
                bm25: Platt { a: 1.0, b: 0.0 },
                dense: None,
                weighted: None,
                rrf: None,
                dense_weight: 0.5,
                scores: None,
                null_cap: None,
            });
            let p = Platt { a: 0.1, b: -1e-30 };
            (c.dense, c.weighted, c.rrf) = (Some(p), Some(p), Some(p));
            let mp = MarginPlatt {
                a: 3.4028235e38,
                m: 1e-45,
                b: -0.7,
            };
            c.scores = Some(jikji_format::ScoreFits {
                bm25: mp,
                dense: Some(mp),
                weighted: Some(mp),
                rrf: Some(mp),
            });
            c.null_cap = Some(jikji_format::NullCap {
                q: 0.95,
                cap: 0.59,
                queries: 450,
                bm25: 0.8671234,
                dense: Some(1e-45),
                weighted: Some(1.0),
                rrf: None,
            });
            m.files.insert(
                "a\"b\n.bin".into(),
                jikji_format::FileEntry {
                    sha256: "00".into(),
                    bytes: u64::MAX,
                },
            );
            assert_same_summary(&summary(&m, true), &summary_by_serde(&m, true), path);
        }
        assert!(seen_files, "the v1 fixture lists its files");
    }
}

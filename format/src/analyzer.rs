//! The text analyzer: one [`Analyzer`], used unchanged at build time (builder) and at
//! query time (engine, natively and in wasm), so that both sides produce the same terms.
//! The bundle's manifest records the analyzer version and [`AnalyzerOptions`]; the engine
//! rebuilds the same analyzer from them ([`Analyzer::new`]).
//!
//! Rules of analyzer version 2 ([`ANALYZER_VERSION`]):
//! 1. Unicode NFKC normalisation (folds full-width forms: `ＡＢＣ` = `ABC`), then lowercase.
//! 2. Traditional Chinese characters folded to Simplified ([`AnalyzerOptions::fold_chinese`]),
//!    one character at a time, with the character table of the `fast2s` crate
//!    (2,734 pairs from OpenCC's `TSCharacters`): `學` = `学`, `說` = `说`.
//! 3. Latin/other alphabetic words and numbers: maximal runs of alphanumeric characters
//!    outside the CJK and Hangul blocks form one term each. An English possessive `'s` is
//!    dropped. Optionally English stopwords are dropped ([`AnalyzerOptions::stopwords`],
//!    Lucene's `EnglishAnalyzer` list) and words are stemmed with the Snowball English
//!    (Porter 2) stemmer ([`AnalyzerOptions::stem`]): `running` → `run`.
//! 4. Han and kana runs (Chinese, Japanese): overlapping character bigrams; a run of one
//!    character is a unigram. This is the standard CJK bigram indexing of Lucene's
//!    `CJKBigramFilter`; with [`AnalyzerOptions::han_unigrams`] every character is a
//!    unigram term as well (its `outputUnigrams` option), in text order.
//! 5. Hangul runs (a space-separated Korean word, eojeol): character bigrams as for Han.
//!    With [`AnalyzerOptions::korean_particles`], the word's lemma — the word with its
//!    trailing particle (josa) or common ending stripped (`대한민국에서` → `대한민국`,
//!    `산이` → `산`, see [`korean_stem`]), or the word itself when none matches — is one
//!    more term unless it is two characters long (then it is already one of the bigrams), so
//!    a bare word in a query matches the word with a particle in the text and the reverse,
//!    without a dictionary. Optionally the whole
//!    word is a term too ([`AnalyzerOptions::korean_whole_words`], as in version 1), and the
//!    bigram joining stem and particle can be left out
//!    ([`AnalyzerOptions::korean_particle_bigrams`]).
//!
//! Version 1 (bundles built before) is rule 1 and rules 3–5 without the options
//! (no folding, stemming, stopwords, possessives or particles; Hangul words longer than
//! two characters also kept whole); [`Analyzer::new`] with
//! version 1 reproduces it, so old bundles are searched exactly as they were built.
//!
//! Everything else (punctuation, spaces, symbols) separates terms.

use rust_stemmers::{Algorithm, Stemmer};
use serde::{Deserialize, Serialize};

use crate::unicode::UnicodeTables;

/// Version of the analyzer rules written by this builder; stored in the manifest.
pub const ANALYZER_VERSION: u32 = 2;

/// Analyzer versions this engine can reproduce (see the module doc).
pub const SUPPORTED_ANALYZER_VERSIONS: [u32; 2] = [1, 2];

/// Switches of analyzer version 2, recorded in the manifest (`analyzer` object) so the
/// engine analyzes queries exactly as the bundle was built. Every field defaults to the
/// builder's default when missing from a manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AnalyzerOptions {
    /// Stem Latin words with the Snowball English stemmer (default true).
    pub stem: bool,
    /// Drop English stopwords (Lucene's 33-word `EnglishAnalyzer` list; default false).
    pub stopwords: bool,
    /// Add the particle-stripped stem of Korean words as a term (default true).
    pub korean_particles: bool,
    /// Fold Traditional Chinese characters to Simplified (default true).
    pub fold_chinese: bool,
    /// Index every Han/kana character of a run as a unigram as well as the run's
    /// bigrams (default true).
    pub han_unigrams: bool,
    /// Keep a Korean word longer than two characters whole as one more term (version 1
    /// always did; default false: measured to hurt, see README).
    pub korean_whole_words: bool,
    /// Keep the bigram that joins a Korean stem to its stripped particle (`산이` of `화산이`,
    /// `트가` of `앙투아네트가`). Only with `korean_particles`. Default false: measured with
    /// the Korean query-word weighting of the engine, those bigrams are noise (see README);
    /// a manifest without the field was built when the default was true, and reads as true.
    #[serde(default = "particle_bigrams_before_field")]
    pub korean_particle_bigrams: bool,
}

impl Default for AnalyzerOptions {
    fn default() -> Self {
        AnalyzerOptions {
            stem: true,
            stopwords: false,
            korean_particles: true,
            fold_chinese: true,
            korean_whole_words: false,
            korean_particle_bigrams: false,
            han_unigrams: true,
        }
    }
}

/// The manifest's `analyzer` object (`crate::json`): a missing field takes the default,
/// except `korean_particle_bigrams` (see [`AnalyzerOptions::korean_particle_bigrams`]).
impl crate::json::Record for AnalyzerOptions {
    const FIELDS: crate::json::Fields<AnalyzerOptions> = crate::json::json_fields!(AnalyzerOptions {
        "stem" Keep stem,
        "stopwords" Keep stopwords,
        "korean_particles" Keep korean_particles,
        "fold_chinese" Keep fold_chinese,
        "han_unigrams" Keep han_unigrams,
        "korean_whole_words" Keep korean_whole_words,
        "korean_particle_bigrams" Keep korean_particle_bigrams,
    });
    fn init() -> Self {
        AnalyzerOptions {
            korean_particle_bigrams: particle_bigrams_before_field(),
            ..AnalyzerOptions::default()
        }
    }
}
crate::json::record_json!(AnalyzerOptions);

/// `korean_particle_bigrams` of a manifest that does not record it (built before the
/// default changed to false).
fn particle_bigrams_before_field() -> bool {
    true
}

/// Lucene's `EnglishAnalyzer.ENGLISH_STOP_WORDS_SET` (sorted for binary search).
const ENGLISH_STOPWORDS: [&str; 33] = [
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// Korean particles (josa), copula and common verb endings stripped by [`korean_stem`],
/// longest first within the table order of search (the longest matching suffix wins).
/// Compiled from the particle tables of standard Korean grammars (국립국어원 표준국어대사전
/// 조사 목록); no dictionary of stems is needed.
const KOREAN_SUFFIXES: &[&str] = &[
    // compound particles
    "에서부터",
    "으로부터",
    "으로서는",
    "으로써는",
    "이라는",
    "이라고",
    "이라도",
    "이라면",
    "에게서",
    "한테서",
    "로부터",
    "에서는",
    "에서도",
    "에서의",
    "에서만",
    "에게는",
    "에게도",
    "으로는",
    "으로도",
    "으로서",
    "으로써",
    "으로의",
    "까지는",
    "까지도",
    "부터는",
    "보다는",
    "처럼",
    "만큼",
    "마저",
    "조차",
    "부터",
    "까지",
    "에서",
    "에게",
    "한테",
    "께서",
    "보다",
    "으로",
    "로서",
    "로써",
    "로는",
    "로도",
    "로의",
    "에는",
    "에도",
    "에의",
    "와의",
    "과의",
    "와는",
    "과는",
    "이나",
    "이란",
    "라는",
    "라고",
    "이며",
    "이고",
    "이었다",
    "였다",
    "이다",
    "인가",
    "인지",
    "이자",
    "들이",
    "들은",
    "들을",
    "들의",
    "들에",
    "들과",
    "들도",
    // verb / adjective endings after a Sino-Korean noun (공부하는 → 공부)
    "하였다",
    "하였던",
    "되었다",
    "되었던",
    "했다",
    "했던",
    "하는",
    "하던",
    "하여",
    "하고",
    "하며",
    "하게",
    "하기",
    "한다",
    "하다",
    "된다",
    "되는",
    "되던",
    "되어",
    "되고",
    "되며",
    "됐다",
    "적인",
    "적으로",
    "시킨",
    "시켜",
    "당한",
    "받은",
    // single-syllable particles
    "은",
    "는",
    "이",
    "가",
    "을",
    "를",
    "에",
    "의",
    "도",
    "만",
    "와",
    "과",
    "로",
    "들",
    "한",
    "된",
    "할",
    "인",
];

/// Shortest stem [`korean_stem`] leaves, in syllables.
const MIN_KOREAN_STEM: usize = 1;

/// The Korean word `word` without its trailing particle or ending (longest match in
/// [`KOREAN_SUFFIXES`]), or `None` if none matches or nothing would be left. Applied
/// twice, so `학생들은` → `학생들` → `학생`. Without a dictionary some stems are wrong
/// (`나이` → `나`); they are extra terms made the same way in texts and queries, so they
/// cost a little precision, never a match.
pub fn korean_stem(word: &str) -> Option<&str> {
    fn once(w: &str) -> Option<&str> {
        let n = w.chars().count();
        KOREAN_SUFFIXES
            .iter()
            .filter(|s| w.ends_with(*s) && n >= s.chars().count() + MIN_KOREAN_STEM)
            .max_by_key(|s| s.len())
            .map(|s| &w[..w.len() - s.len()])
    }
    let first = once(word)?;
    Some(once(first).unwrap_or(first))
}

/// Writing system of one character, as used by the analyzer and by language detection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Script {
    /// Hangul syllables and jamo (Korean).
    Hangul,
    /// Han ideographs (CJK Unified Ideographs incl. extensions and compatibility forms).
    Han,
    /// Hiragana and katakana (Japanese).
    Kana,
    /// Any other letter or digit (Latin, Cyrillic, Greek, digits...).
    Alnum,
    /// Not part of any term: spaces, punctuation, symbols.
    Other,
}

/// Classifies one character. Ranges from the Unicode block chart (Unicode 15).
pub fn script_of(c: char) -> Script {
    let u = c as u32;
    match u {
        0xAC00..=0xD7AF | 0x1100..=0x11FF | 0x3130..=0x318F | 0xA960..=0xA97F | 0xD7B0..=0xD7FF => {
            Script::Hangul
        }
        0x4E00..=0x9FFF
        | 0x3400..=0x4DBF
        | 0x20000..=0x2FFFF
        | 0xF900..=0xFAFF
        | 0x3005
        | 0x3007 => Script::Han,
        0x3040..=0x309F | 0x30A0..=0x30FF | 0x31F0..=0x31FF | 0xFF66..=0xFF9F => Script::Kana,
        _ if c.is_alphanumeric() => Script::Alnum,
        _ => Script::Other,
    }
}

/// Normalises text the way the analyzer (all versions) sees it before folding: NFKC,
/// then lowercase (compiled-in tables; feature `tables`).
#[cfg(feature = "tables")]
pub fn normalize(text: &str) -> String {
    crate::lower::to_lowercase(&crate::nfkc::nfkc(text))
}

/// Folds one normalised character: Traditional → Simplified Chinese (the `fast2s` table,
/// character by character, without its context rules so that a query and a text fold a
/// character the same way wherever it stands; compact copy in `t2s.rs`). Other characters are
/// returned unchanged (compiled-in table; feature `tables`).
#[cfg(feature = "tables")]
pub fn fold_han(c: char) -> char {
    if script_of(c) != Script::Han {
        return c;
    }
    crate::t2s::t2s(c)
}

/// A configured analyzer: a version (1 or 2) and its options. Cheap to create.
///
/// Its Unicode tables ([`UnicodeTables`]) are compiled in with feature `tables` (native
/// builds); otherwise, and for a paged bundle that carries them as pages, they are
/// installed from those pages when a text first needs them: until then a text that needs
/// one is analysed as if it were empty and [`UnicodeTables::take_missing`] says so (the
/// engine's page loop fetches the page and runs the query again).
pub struct Analyzer {
    version: u32,
    options: AnalyzerOptions,
    stemmer: Option<Stemmer>,
    tables: UnicodeTables,
}

impl std::fmt::Debug for Analyzer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Analyzer")
            .field("version", &self.version)
            .field("options", &self.options)
            .finish()
    }
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer::new(ANALYZER_VERSION, AnalyzerOptions::default())
            .expect("the current version is supported")
    }
}

impl Analyzer {
    /// The analyzer of `version` with `options` (ignored for version 1), with the
    /// compiled-in Unicode tables (feature `tables`; without it, tables from pages: see
    /// [`Analyzer::with_tables`]). Errors with [`crate::FormatError::AnalyzerVersion`] for a
    /// version this build does not know.
    pub fn new(version: u32, options: AnalyzerOptions) -> crate::Result<Self> {
        #[cfg(feature = "tables")]
        let tables = UnicodeTables::builtin();
        #[cfg(not(feature = "tables"))]
        let tables = UnicodeTables::from_pages();
        Self::with_tables(version, options, tables)
    }

    /// [`Analyzer::new`] with the Unicode tables `tables`.
    pub fn with_tables(
        version: u32,
        options: AnalyzerOptions,
        tables: UnicodeTables,
    ) -> crate::Result<Self> {
        if !SUPPORTED_ANALYZER_VERSIONS.contains(&version) {
            return Err(crate::FormatError::AnalyzerVersion {
                found: version,
                supported: SUPPORTED_ANALYZER_VERSIONS.to_vec(),
            });
        }
        let stemmer = (version >= 2 && options.stem).then(|| Stemmer::create(Algorithm::English));
        Ok(Analyzer {
            version,
            options,
            stemmer,
            tables,
        })
    }

    /// Its Unicode tables (to install pages into, or ask what a text missed).
    pub fn tables(&self) -> &UnicodeTables {
        &self.tables
    }

    /// The analyzer version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The options (as given; version 1 ignores them).
    pub fn options(&self) -> AnalyzerOptions {
        self.options
    }

    fn v2(&self) -> bool {
        self.version >= 2
    }

    /// Normalises text as this analyzer does before splitting it: NFKC, lowercase and
    /// (version 2 with `fold_chinese`) Traditional → Simplified folding.
    #[cfg_attr(jikji_nightly, optimize(speed))]
    pub fn normalize(&self, text: &str) -> String {
        let norm = self.tables.normalize(text);
        if self.v2() && self.options.fold_chinese {
            norm.chars()
                .map(|c| {
                    if script_of(c) == Script::Han {
                        self.tables.t2s(c)
                    } else {
                        c
                    }
                })
                .collect()
        } else {
            norm
        }
    }

    /// Stems one normalised Latin word as the index does (identity without stemming).
    #[cfg_attr(jikji_nightly, optimize(speed))]
    pub fn stem_word<'a>(&self, word: &'a str) -> std::borrow::Cow<'a, str> {
        match &self.stemmer {
            Some(s) if word.chars().all(char::is_alphabetic) => s.stem(word),
            _ => std::borrow::Cow::Borrowed(word),
        }
    }

    /// Splits `text` into index terms (see the module doc for the rules).
    ///
    /// Returns terms in text order, with repetitions (term frequency is their count).
    /// Never fails; empty or punctuation-only text gives an empty vector.
    #[cfg_attr(jikji_nightly, optimize(speed))]
    pub fn analyze(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for (word, script) in self.words(text) {
            self.flush(&word, script, &mut out);
        }
        out
    }

    /// The normalised words of `text` (maximal runs of one script; kana counts as Han)
    /// with their script, before they are split into terms. Version 2 drops the `s` of an
    /// English possessive (`shakespeare's`).
    pub fn words(&self, text: &str) -> Vec<(Vec<char>, Script)> {
        let chars: Vec<char> = self.normalize(text).chars().collect();
        let class = |c: char| match script_of(c) {
            Script::Kana => Script::Han, // Japanese: kana and kanji runs are bigrammed together.
            s => s,
        };
        let mut out = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            let s = class(chars[i]);
            let start = i;
            while i < chars.len() && class(chars[i]) == s {
                i += 1;
            }
            if s == Script::Other {
                continue;
            }
            let run = &chars[start..i];
            let possessive = self.v2()
                && s == Script::Alnum
                && run == ['s']
                && start >= 2
                && matches!(chars[start - 1], '\'' | '\u{2019}')
                && script_of(chars[start - 2]) == Script::Alnum;
            if !possessive {
                out.push((run.to_vec(), s));
            }
        }
        out
    }

    fn flush(&self, run: &[char], script: Script, out: &mut Vec<String>) {
        match script {
            Script::Other => {}
            Script::Alnum => {
                let word: String = run.iter().collect();
                if self.v2() {
                    if self.options.stopwords && ENGLISH_STOPWORDS.binary_search(&&*word).is_ok() {
                        return;
                    }
                    out.push(self.stem_word(&word).into_owned());
                } else {
                    out.push(word);
                }
            }
            Script::Han | Script::Kana | Script::Hangul => {
                if run.len() == 1 {
                    out.push(run[0].to_string());
                    return;
                }
                if script != Script::Hangul || !self.v2() {
                    let unigrams = self.v2() && self.options.han_unigrams;
                    for (i, w) in run.windows(2).enumerate() {
                        if unigrams {
                            out.push(w[0].to_string());
                        }
                        out.push(w.iter().collect());
                        if unigrams && i + 2 == run.len() {
                            out.push(w[1].to_string());
                        }
                    }
                    if script == Script::Hangul && run.len() > 2 {
                        out.push(run.iter().collect());
                    }
                    return;
                }
                let o = self.options;
                let word: String = run.iter().collect();
                let stem = if o.korean_particles {
                    korean_stem(&word)
                } else {
                    None
                };
                // Bigrams over the stem only (and the stem itself when it is one syllable
                // longer than a bigram would cover), or over the whole word.
                let bigram_end = match stem {
                    Some(st) if !o.korean_particle_bigrams => st.chars().count(),
                    _ => run.len(),
                };
                for w in run[..bigram_end].windows(2) {
                    out.push(w.iter().collect());
                }
                // The word's lemma: its stem, or the word itself when nothing was stripped.
                let lemma = stem.unwrap_or(&word);
                if o.korean_particles && lemma.chars().count() != 2 {
                    out.push(lemma.to_string());
                }
                if o.korean_whole_words && run.len() > 2 && !(o.korean_particles && stem.is_none())
                {
                    out.push(word);
                }
            }
        }
    }
}

/// Analyzes `text` with the current analyzer and default options
/// (`Analyzer::default().analyze(text)`).
pub fn analyze(text: &str) -> Vec<String> {
    Analyzer::default().analyze(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v1() -> Analyzer {
        Analyzer::new(1, AnalyzerOptions::default()).unwrap()
    }

    fn with(f: impl FnOnce(&mut AnalyzerOptions)) -> Analyzer {
        let mut o = AnalyzerOptions::default();
        f(&mut o);
        Analyzer::new(ANALYZER_VERSION, o).unwrap()
    }

    #[test]
    fn stopword_list_is_sorted_for_binary_search() {
        assert!(ENGLISH_STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn latin_words_lowercased_and_width_folded() {
        assert_eq!(
            analyze("To be, or NOT ＡＢＣ 42!"),
            ["to", "be", "or", "not", "abc", "42"]
        );
        assert_eq!(analyze("ＡＢＣ"), analyze("abc"));
    }

    #[test]
    fn english_stemming_runs_running_to_run() {
        assert_eq!(analyze("runs running run"), ["run", "run", "run"]);
        assert_eq!(
            with(|o| o.stem = false).analyze("runs running"),
            ["runs", "running"]
        );
    }

    #[test]
    fn stopwords_only_when_enabled() {
        let a = with(|o| o.stopwords = true);
        assert_eq!(a.analyze("The cat is on the mat"), ["cat", "mat"]);
        assert_eq!(analyze("the cat"), ["the", "cat"]);
    }

    #[test]
    fn possessive_s_is_not_a_term() {
        assert_eq!(analyze("Shakespeare's plays"), ["shakespear", "play"]);
        assert_eq!(analyze("Shakespeare’s"), ["shakespear"]);
        // A word after an apostrophe that merely starts with s stays.
        assert_eq!(
            with(|o| o.stem = false).analyze("o'sullivan"),
            ["o", "sullivan"]
        );
        // Version 1 kept the `s`.
        assert_eq!(v1().analyze("it's"), ["it", "s"]);
    }

    #[test]
    fn han_runs_become_bigrams_and_lone_unigrams() {
        assert_eq!(
            with(|o| {
                o.fold_chinese = false;
                o.han_unigrams = false
            })
            .analyze("學而時習之，乎"),
            ["學而", "而時", "時習", "習之", "乎"]
        );
        assert_eq!(
            with(|o| o.fold_chinese = false).analyze("學而時，乎"),
            ["學", "學而", "而", "而時", "時", "乎"]
        );
    }

    #[test]
    fn traditional_and_simplified_match() {
        assert_eq!(analyze("學"), analyze("学"));
        assert_eq!(analyze("說話"), analyze("说话"));
        assert_eq!(
            with(|o| o.han_unigrams = false).analyze("學而時習之"),
            ["学而", "而时", "时习", "习之"]
        );
        // Version 1 did not fold.
        assert_ne!(v1().analyze("學"), v1().analyze("学"));
    }

    #[test]
    fn hangul_bigrams_plus_whole_word() {
        assert_eq!(
            with(|o| {
                o.korean_whole_words = true;
                o.korean_particles = false
            })
            .analyze("메밀꽃 필 무렵"),
            ["메밀", "밀꽃", "메밀꽃", "필", "무렵"]
        );
        assert_eq!(
            with(|o| o.korean_particles = false).analyze("메밀꽃 필 무렵"),
            ["메밀", "밀꽃", "필", "무렵"]
        );
        // Default: the lemma of a 3+ syllable word is a term; the stem–particle bigram is not.
        assert_eq!(analyze("메밀꽃을"), ["메밀", "밀꽃", "메밀꽃"]);
        assert_eq!(
            with(|o| o.korean_particle_bigrams = true).analyze("메밀꽃을"),
            ["메밀", "밀꽃", "꽃을", "메밀꽃"]
        );
    }

    #[test]
    fn manifest_without_particle_bigram_field_keeps_the_old_default() {
        let old: AnalyzerOptions = serde_json::from_str("{}").unwrap();
        assert!(old.korean_particle_bigrams);
        assert_eq!(
            AnalyzerOptions {
                korean_particle_bigrams: false,
                ..old
            },
            AnalyzerOptions::default()
        );
        let json = serde_json::to_string(&AnalyzerOptions::default()).unwrap();
        assert!(json.contains("\"korean_particle_bigrams\":false"), "{json}");
    }

    #[test]
    fn korean_particles_match_the_bare_word() {
        // Two-syllable noun: its bigram is in every inflected form.
        for w in ["화산이", "화산은", "화산에서", "화산의"] {
            assert!(analyze(w).contains(&"화산".to_string()), "{w}");
        }
        // Longer noun: the stem is a term of its own, equal to the bare word's whole-word term.
        let bare = analyze("대한민국");
        assert!(bare.contains(&"대한민국".to_string()));
        for w in [
            "대한민국에서",
            "대한민국의",
            "대한민국은",
            "대한민국으로부터",
        ] {
            assert!(
                analyze(w).contains(&"대한민국".to_string()),
                "{w}: {:?}",
                analyze(w)
            );
        }
        assert_eq!(korean_stem("학생들은"), Some("학생"));
        // One-syllable nouns: the stem is a unigram, as the bare word is.
        assert_eq!(korean_stem("산이"), Some("산"));
        assert_eq!(analyze("산이"), ["산"]);
        assert_eq!(analyze("산"), ["산"]);
        assert_eq!(korean_stem("화"), None);
        assert_eq!(korean_stem("공부하는"), Some("공부"));
        let off = with(|o| o.korean_particles = false);
        assert!(!off
            .analyze("대한민국에서")
            .contains(&"대한민국".to_string()));
    }

    #[test]
    fn mixed_scripts_split_at_script_changes() {
        assert_eq!(analyze("BTS의 노래"), ["bts", "의", "노래"]);
        assert_eq!(
            with(|o| o.han_unigrams = false).analyze("学校に行く"),
            ["学校", "校に", "に行", "行く"]
        );
    }

    #[test]
    fn punctuation_only_gives_nothing() {
        assert!(analyze("  ... —— 「」 ").is_empty());
    }

    #[test]
    fn version_1_is_reproduced() {
        let a = v1();
        assert_eq!(
            a.analyze("Runs 學而 메밀꽃에서"),
            ["runs", "學而", "메밀", "밀꽃", "꽃에", "에서", "메밀꽃에서"]
        );
    }

    #[test]
    fn unknown_version_is_refused_naming_it() {
        let e = Analyzer::new(7, AnalyzerOptions::default()).unwrap_err();
        assert!(e.to_string().contains("analyzer version 7"), "{e}");
    }
}

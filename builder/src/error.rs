//! The error type of the `jikji-builder` library: [`BuildError`] and [`Result`].
//!
//! Every variant names what the user has to look at: the file or folder (and the 1-based
//! line where one applies), the bundle, the model folder, or the option. Errors of the
//! other jikji crates ([`FormatError`], [`EngineError`], [`EmbedError`]) are wrapped
//! unchanged; they already name the bundle file and byte offset. Where a variant wraps a
//! lower-level error as its [`std::error::Error::source`], its own message is the context
//! only (as with `anyhow`'s `context`), so `{:#}`/`{:?}` of an `anyhow::Error` made from it
//! prints the whole chain once.

use std::path::PathBuf;

use jikji_embed::EmbedError;
use jikji_engine::EngineError;
use jikji_format::FormatError;

use crate::corpus::Finding;

/// `std::result::Result` with [`BuildError`].
pub type Result<T> = std::result::Result<T, BuildError>;

/// Everything that can go wrong in the builder library: building, updating, checking a
/// corpus, dedup, gap and eval runs, serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// An I/O operation on a file or folder failed. Message: `{action} {path}`, e.g.
    /// `reading corpus/a.md`.
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done: `reading`, `opening`, `creating`, `writing`, `appending to`,
        /// `truncating`, `creating cache folder`.
        action: &'static str,
        /// The file or folder.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },

    /// Copying a rejected corpus file into the quarantine folder failed.
    #[error("copying {} to {}", from.display(), to.display())]
    Copy {
        /// The corpus file.
        from: PathBuf,
        /// The copy that could not be written.
        to: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },

    /// Walking the corpus folder failed (an unreadable folder, a symlink loop).
    #[error("walking {}", root.display())]
    Walk {
        /// The corpus root being walked.
        root: PathBuf,
        /// The underlying error (it names the entry that failed).
        #[source]
        source: walkdir::Error,
    },

    /// Line `line` (1-based) of a text file could not be read (I/O error or invalid UTF-8).
    #[error("{}:{line}: reading", path.display())]
    ReadLine {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },

    /// Line `line` (1-based) of a user's JSON Lines file (queries, eval corpus) is not the
    /// JSON expected. Message: `{path}:{line}: {problem}`.
    #[error("{}:{line}: {problem}", path.display())]
    Json {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong: `invalid JSON`, or the record shape that was expected.
        problem: &'static str,
        /// The JSON error (it gives the column).
        #[source]
        source: serde_json::Error,
    },

    /// A user's input file parses but its content is not usable, e.g. a `qrels.tsv` line
    /// without three columns or a queries file without queries. Message:
    /// `{path}:{line}: {message}`, or `{path}: {message}` without a line.
    #[error("{}: {message}", located(path, *line))]
    InvalidInput {
        /// The file.
        path: PathBuf,
        /// 1-based line number, when the problem is on one line.
        line: Option<usize>,
        /// What is wrong.
        message: String,
    },

    /// An environment variable that jikji reads has a value it does not know. Message:
    /// `environment variable {name}={value}: expected {expected}`.
    #[error("environment variable {name}={value:?}: expected {expected}")]
    BadEnv {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
        /// The values it may take.
        expected: &'static str,
    },

    /// A file jikji itself wrote (e.g. a gaps history file) is corrupt. Message:
    /// `{path}:{line}: {message}`.
    #[error("{}:{line}: {message}", path.display())]
    DataCorruption {
        /// The corrupt file.
        path: PathBuf,
        /// 1-based line of the bad record.
        line: usize,
        /// What is wrong with it.
        message: String,
        /// The parse error of the record, if any.
        #[source]
        source: Option<serde_json::Error>,
    },

    /// The corpus folder cannot be built from: not a folder, no usable `.md`/`.txt` files.
    /// Message: `{path}: {message}`.
    #[error("{}: {message}", path.display())]
    Corpus {
        /// The corpus folder.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },

    /// An eval run's inputs do not fit together: a queries file with no judged query
    /// without `--unanswerable`, or judged queries with it. Message: `{set}: {message}`.
    #[error("{}: {message}", path.display())]
    Eval {
        /// The eval set folder.
        path: PathBuf,
        /// What is wrong and what to do.
        message: String,
    },

    /// `--strict` and the corpus check found errors; `findings` are those errors (each
    /// names its file and line), in corpus order.
    #[error("{} corpus error(s) with --strict:\n{}", findings.len(), join_lines(findings))]
    CorpusErrors {
        /// The findings of severity error.
        findings: Vec<Finding>,
    },

    /// A bundle folder could not be opened (the wrapped error names the bundle file and,
    /// for corrupt data, the byte offset).
    #[error("opening bundle {}", path.display())]
    OpenBundle {
        /// The bundle folder.
        path: PathBuf,
        /// Why it could not be opened.
        #[source]
        source: FormatError,
    },

    /// A bundle cannot be used for the operation asked (no vectors for dedup, no sources
    /// table or parent sections for update, inconsistent tables, an interrupted write).
    /// Message: `{path}: {message}`.
    #[error("{}: {message}", path.display())]
    Bundle {
        /// The bundle folder.
        path: PathBuf,
        /// What is wrong, and what to do.
        message: String,
    },

    /// `jikji update` would delete more of the bundle's files than allowed
    /// (`--max-deletions`, default 20% of the files in its sources table) and
    /// `--allow-deletions` was not given; nothing was written.
    #[error("{}: this update would delete {deleted} of the bundle's {total} files, more than the {limit} allowed ({rule}); nothing was written. Check that the corpus folder is the right one (and mounted); to delete them, re-run with --allow-deletions (or raise --max-deletions N|P%). Files it would delete: {}", bundle.display(), sample(files))]
    TooManyDeletions {
        /// The bundle folder (left untouched).
        bundle: PathBuf,
        /// Files the update would delete.
        deleted: usize,
        /// Files in the bundle's sources table.
        total: usize,
        /// The most files allowed.
        limit: usize,
        /// The rule as given (`20%`, `3`).
        rule: String,
        /// The paths that would be deleted.
        files: Vec<String>,
    },

    /// `model.onnx` of a model folder cannot be read.
    #[error("{}: cannot read the model (run scripts/setup-model)", path.display())]
    ModelMissing {
        /// The `model.onnx` path.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The ONNX model could not be loaded by the embedder.
    #[error("loading the model {}", path.display())]
    LoadModel {
        /// The `.onnx` file.
        path: PathBuf,
        /// The embedder's error.
        #[source]
        source: EmbedError,
    },

    /// `tokenizer.json` of a model folder could not be parsed.
    #[error("{}: not a tokenizer.json", path.display())]
    Tokenizer {
        /// The `tokenizer.json` path.
        path: PathBuf,
        /// The embedder's error.
        #[source]
        source: EmbedError,
    },

    /// The model folder cannot be used with this bundle (e.g. its SHA-256 differs from the
    /// bundle's model). Message: `{path}: {message}`.
    #[error("{}: {message}", path.display())]
    Model {
        /// The model folder.
        path: PathBuf,
        /// What is wrong, and what to do.
        message: String,
    },

    /// Embedding texts with the model failed.
    #[error("embedding {what}")]
    Embedding {
        /// What was embedded: `chunks` or `calibration queries`.
        what: &'static str,
        /// The embedder's error.
        #[source]
        source: EmbedError,
    },

    /// A search on a bundle failed (gap runs).
    #[error("query {query:?}")]
    Query {
        /// The query text.
        query: String,
        /// The engine's error.
        #[source]
        source: EngineError,
    },

    /// The chunking options, or the chunking a bundle records, cannot be used (an unknown
    /// strategy name, token-sized chunks without a model folder).
    #[error("{0}")]
    Chunking(String),

    /// `jikji serve` could not start: a required folder is missing or not a folder, the
    /// address cannot be bound, the server thread cannot be spawned.
    #[error("{message}")]
    Serve {
        /// What failed (names the folder or address).
        message: String,
        /// The underlying I/O error, if any.
        #[source]
        source: Option<std::io::Error>,
    },

    /// An error of the bundle format crate (`jikji-format`): writing or reading bundle
    /// files, analyzer options. Its message names the bundle file and byte offset.
    #[error(transparent)]
    Format(#[from] FormatError),

    /// An error of the search engine (`jikji-engine`), e.g. an unknown search mode.
    #[error(transparent)]
    Engine(#[from] EngineError),

    /// An error of the embedder (`jikji-embed`).
    #[error(transparent)]
    Embed(#[from] EmbedError),

    /// An error of the query-model pack (`jikji-query-model`): opening the pack folder or
    /// embedding a query with it. Its message names the pack file.
    #[error(transparent)]
    QueryModel(#[from] jikji_query_model::ModelError),

    /// The dense index could not be built ([`crate::ivf`]).
    #[error("dense index: {0}")]
    Ivf(String),
    /// The query-model pack stands for another model than the one the bundle's vectors were
    /// made with.
    #[error("query-model pack {dir}: made for model sha256 {pack}, but the bundle's vectors were made with {bundle_id} (sha256 {bundle})")]
    QueryModelMismatch {
        /// The pack folder.
        dir: PathBuf,
        /// The pack's model hash (its `pack.json`).
        pack: String,
        /// The bundle's model id.
        bundle_id: String,
        /// The bundle's model hash.
        bundle: String,
    },
    /// The query-model pack is not the one the bundle carries as pages
    /// (`pages.query_model.pack_sha256`): the browser would embed with other weights.
    #[error("query-model pack {dir}: pack hash {pack}, but the bundle was built with pack {bundle} (rebuild the bundle, or pass the pack it was built with)")]
    QueryModelPackMismatch {
        /// The pack folder.
        dir: PathBuf,
        /// The folder's pack hash (`jikji_query_model::pack::pack_hash`).
        pack: String,
        /// The bundle's.
        bundle: String,
    },
}

impl BuildError {
    /// [`BuildError::Io`] for `action` on `path`.
    pub fn io(action: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BuildError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}

/// `path:line` or `path`.
fn located(path: &std::path::Path, line: Option<usize>) -> String {
    match line {
        Some(l) => format!("{}:{l}", path.display()),
        None => path.display().to_string(),
    }
}

fn join_lines(findings: &[Finding]) -> String {
    findings
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The first few of `files`, comma-separated, with how many more.
fn sample(files: &[String]) -> String {
    let shown: Vec<&str> = files.iter().take(5).map(String::as_str).collect();
    match files.len().saturating_sub(shown.len()) {
        0 => shown.join(", "),
        more => format!("{} and {more} more", shown.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_file_and_line() {
        let e = BuildError::InvalidInput {
            path: "set/qrels.tsv".into(),
            line: Some(3),
            message: "expected query-id, corpus-id, score".into(),
        };
        assert_eq!(
            e.to_string(),
            "set/qrels.tsv:3: expected query-id, corpus-id, score"
        );
        let e = BuildError::InvalidInput {
            path: "q.jsonl".into(),
            line: None,
            message: "no queries".into(),
        };
        assert_eq!(e.to_string(), "q.jsonl: no queries");
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "gone");
        let e = BuildError::io("reading", "corpus/a.md", io);
        assert_eq!(e.to_string(), "reading corpus/a.md");
        assert_eq!(
            std::error::Error::source(&e).map(|s| s.to_string()),
            Some("gone".to_string())
        );
    }

    #[test]
    fn qrels_line_errors_name_the_file_and_line() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(
            d.path().join("corpus.jsonl"),
            "{\"id\": \"d1\", \"text\": \"x\"}\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("queries.jsonl"),
            "{\"id\": \"q1\", \"text\": \"x\"}\n",
        )
        .unwrap();
        std::fs::write(
            d.path().join("qrels.tsv"),
            "query-id\tcorpus-id\tscore\nq1\td1\n",
        )
        .unwrap();
        match crate::eval::EvalSet::load(d.path()) {
            Err(e @ BuildError::InvalidInput { line: Some(2), .. }) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("qrels.tsv:2: expected query-id, corpus-id, score"),
                    "{msg}"
                );
            }
            Err(e) => panic!("wrong error: {e:?}"),
            Ok(_) => panic!("a two-column qrels line was accepted"),
        }
    }

    #[test]
    fn corrupt_history_record_is_data_corruption_naming_the_line() {
        let d = tempfile::tempdir().unwrap();
        let h = d.path().join("core.history.jsonl");
        std::fs::write(&h, "\n{\"not\": \"a run\"}\n").unwrap();
        match crate::gaps::last_run(&h) {
            Err(e @ BuildError::DataCorruption { line: 2, .. }) => {
                assert!(
                    e.to_string()
                        .ends_with("core.history.jsonl:2: not a run record"),
                    "{e}"
                );
                assert!(std::error::Error::source(&e).is_some());
            }
            other => panic!("expected DataCorruption at line 2, got {other:?}"),
        }
    }

    #[test]
    fn build_error_is_send_sync_static() {
        fn check<T: Send + Sync + 'static + std::error::Error>() {}
        check::<BuildError>();
    }
}

//! `jikji`: build a search bundle from a corpus folder, search it, serve the web page.
//!
//! This binary only parses arguments and dispatches: each command is a module of `cmd/`
//! that turns its arguments into `jikji_builder` options, calls the library and prints.

mod args;
mod cmd;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "jikji",
    version,
    about = "Offline search for books: build static bundles, search them natively or in the browser"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
#[allow(clippy::large_enum_variant)] // parsed once per process; boxing the arguments buys nothing
enum Cmd {
    /// Chunk a corpus folder without building: print the chunks (JSON lines) or, with
    /// --report, compare strategies (chunk count, lengths in chars and model tokens, code
    /// blocks and tables intact, heading context, duplicated text from overlap).
    Chunk(cmd::chunk::Args),
    /// Build a bundle from a corpus folder (.md / .txt files, tier folders like `1. name`).
    Build(cmd::build::Args),
    /// Check a corpus folder: sources, provenance, encoding, structure, expiry. Exit code 1 on errors.
    Check(cmd::check::Args),
    /// Update a bundle from its corpus folder: re-chunk and re-embed only new and changed
    /// files, drop deleted ones, retire older versions; written atomically. Chunking,
    /// analyzer, BM25 and Hanja settings are the bundle's own (its manifest's).
    Update(cmd::update::Args),
    /// Search a bundle with one or more queries.
    Search(cmd::search::Args),
    /// Read and check every page of a bundle (before publishing it): damaged or missing
    /// pages named, exit 1; files the entry does not name listed.
    Verify(cmd::verify::Args),
    /// Find duplicates: of new files against the bundle (--new DIR), or between chunks of
    /// different files within the bundle. Thresholds are E5 cosines (see README).
    Dedup(cmd::dedup::Args),
    /// Run core queries; report gaps (best score below the expected minimum) and sharp drops
    /// since the last run; append the run to a history file. Exit code 1 on gaps or drops.
    Gaps(cmd::gaps::Args),
    /// List contradiction candidates: highly similar chunks of different sources that state
    /// different numbers, dates or versions of the same thing; newest source first.
    Conflicts(cmd::conflicts::Args),
    /// Retrieval quality on a labeled set: nDCG@10, Recall@10/100, MRR@10 and latency per mode.
    Eval(cmd::eval::Args),
    /// Serve the web page, the wasm engine and a bundle on 127.0.0.1.
    Serve(cmd::serve::Args),
    /// Write the query-model pack (the browser's lean query encoder: Q4_0 layers and the
    /// token-row table) from the E5S1 model source.
    ModelPack(cmd::model_pack::Args),
}

fn main() -> anyhow::Result<ExitCode> {
    // A closed pipe (`jikji check --json | head`) ends the process quietly, as for other
    // Unix tools, instead of a panic in `println!`.
    #[cfg(unix)]
    // SAFETY: restores the default SIGPIPE disposition before any thread or I/O starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    match Cli::parse().cmd {
        Cmd::Chunk(a) => cmd::chunk::run(a),
        Cmd::Build(a) => cmd::build::run(a),
        Cmd::Check(a) => cmd::check::run(a),
        Cmd::Update(a) => cmd::update::run(a),
        Cmd::Search(a) => cmd::search::run(a),
        Cmd::Verify(a) => cmd::verify::run(a),
        Cmd::Dedup(a) => cmd::dedup::run(a),
        Cmd::Gaps(a) => cmd::gaps::run(a),
        Cmd::Conflicts(a) => cmd::conflicts::run(a),
        Cmd::Eval(a) => cmd::eval::run(a),
        Cmd::Serve(a) => cmd::serve::run(a),
        Cmd::ModelPack(a) => cmd::model_pack::run(a),
    }
}

//! Times opening a bundle and its first and second BM25 search, in milliseconds: the first
//! search also reads the per-chunk lifecycle facts (archived, expires, file numbers), so
//! `first − second` is their cost.
//!
//! Usage: `cargo run --release -p jikji-engine --no-default-features --example first_search
//! -- BUNDLE [QUERY]`. Prints one JSON line `{open_ms, first_ms, second_ms}`.

use std::time::Instant;

use jikji_engine::{Engine, Mode, SearchOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = args.next().ok_or("usage: first_search BUNDLE [QUERY]")?;
    let query = args.next().unwrap_or_else(|| "the king".to_string());
    let ms = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
    let t = Instant::now();
    let mut engine = Engine::open_dir(std::path::Path::new(&dir))?;
    let open_ms = ms(t);
    // As `jikji search` does: a clock, so expiry is checked.
    engine.set_search_options(SearchOptions {
        now_ms: Some(1_767_225_600_000),
        include_archived: false,
    });
    let t = Instant::now();
    let first = engine.search(&query, Mode::Bm25, 10)?;
    let first_ms = ms(t);
    let t = Instant::now();
    let second = engine.search(&query, Mode::Bm25, 10)?;
    let second_ms = ms(t);
    assert_eq!(first, second);
    println!(
        "{{\"open_ms\": {open_ms:.2}, \"first_ms\": {first_ms:.2}, \"second_ms\": {second_ms:.2}, \"hits\": {}}}",
        first.hits.len()
    );
    Ok(())
}

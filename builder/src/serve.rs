//! A small static file server for trying Jikji locally and for the browser tests.
//!
//! URL layout:
//! - `/`        → the page's folder (`index.html` for `/`): `jikji serve`'s `--web`, by default
//!   `pkg/web`, the page as `scripts/build-js` bundles and minifies it from the sources in `web/`
//! - `/pkg/`    → the wasm-bindgen output folder (`scripts/build-wasm`)
//! - `/bundle/` → the bundle folder (v2: `jikji.json` and `p/…` pages; v1: `manifest.json` and the files it lists)
//! - `/model/`  → the model folder (`model.onnx`, `tokenizer.json`), when one is given
//!
//! Only `GET` and `HEAD` are answered (anything else: `405` with `Allow: GET, HEAD`). Paths
//! containing `..` (or `.`, backslashes, NUL, or empty segments) are rejected with `400`; every
//! file is canonicalized and must stay under the canonicalized root of its mount, so symlinks
//! cannot lead outside it either. There are no `Range` requests: every `200` carries the whole
//! file with its `Content-Length` (never chunked; the page shows download progress from it).
//!
//! Connections (HTTP/1.1, RFC 9112) are served by hyper 1.x on a single-threaded tokio runtime:
//! every accepted connection is its own task, so no number of open keep-alive connections can
//! leave another one unanswered (the tiny_http server this replaces gave each connection one
//! of 4 pooled threads for its whole keep-alive life, and a burst of new connections — Chromium
//! opens up to 6 at once — could sit unread until an older one closed; see
//! `scripts/serve-stall.py` and the test `keep_alive_connections_left_unanswered`). Reading
//! files, hashing and compressing run on tokio's blocking pool (at most [`BLOCKING_THREADS`]
//! threads). A connection that sends no complete request header within [`HEADER_READ_TIMEOUT`]
//! — when it opens, or idle after a response — is closed; at most [`MAX_CONNECTIONS`] are open
//! at once (more wait in the listen queue).
//!
//! Caching and compression (RFC 9111 `Cache-Control`, RFC 9110 §8.8.3 `ETag` and §13.1.2
//! `If-None-Match`, §12.5.3 `Accept-Encoding`), for a paged (format v2) bundle as FORMAT.md
//! describes it:
//! - `/bundle/p/…` (pages, named by their content): `Cache-Control: public, max-age=31536000,
//!   immutable`, `application/octet-stream`, served byte for byte: pages are compressed by the
//!   bundle writer already, so they never get a `Content-Encoding`; `nosniff` but no CSP (a
//!   policy applies to documents and worker scripts, and a page is neither).
//! - every other file: `Cache-Control: no-cache` (the browser revalidates each use). Text
//!   files (see [`compressible`]: html, js, css, json, wasm, svg, txt/md, map, webmanifest; at
//!   most [`MAX_IN_MEMORY`] bytes) also get a strong `ETag` (`"` + 32 hex digits of the
//!   SHA-256 of the file + `"`, with `.br` or `.gz` before the closing quote for the brotli or
//!   gzip form), answer `If-None-Match` with `304 Not Modified`, always carry
//!   `Vary: Accept-Encoding`, and are sent brotli-compressed (RFC 7932) or gzip-compressed
//!   (RFC 1952) as [`choose_encoding`] picks from the request's `Accept-Encoding` (highest
//!   q-value; ties `br` > `gzip` > identity). The entry file `jikji.json` is one of them.
//!   Compressed bodies are cached in memory by path, size and modification time; the text
//!   files of the web and pkg folders and the bundle's entry file are compressed in the
//!   background when the server starts (smallest first), so the page's first requests rarely
//!   wait for it. Brotli quality (see [`brotli_quality`]): 11 up to [`BROTLI_BEST_UP_TO`] bytes,
//!   then 9, and 5 above [`BROTLI_FAST_ABOVE`] (the embedder's ~20 MB wasm).
//! - v1 bundles (`manifest.json` and the files it lists) are served as before, plus the text
//!   file rules above for `manifest.json`.
//!
//! With [`ServeOptions::log_requests`] (`jikji serve --log-requests`) every answered request is
//! one line on stderr ([`request_line`]): what reached the server, whatever the browser's caches
//! or a service worker answered themselves.

use std::collections::HashMap;
use std::convert::Infallible;
use std::fs::File;
use std::future::Future;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use flate2::write::GzEncoder;
use flate2::Compression;
use hyper::body::{Body as HttpBody, Frame, SizeHint};
use hyper::header::{HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use sha2::{Digest, Sha256};

use crate::error::{BuildError, Result};

/// Most threads of tokio's blocking pool (file reads, hashing, compression; requests are
/// parsed and answered on the one runtime thread).
pub const BLOCKING_THREADS: usize = 8;

/// A connection is closed when it has not sent a whole request header this long after it
/// opened or after its last response (hyper's `header_read_timeout`, which also runs while a
/// keep-alive connection is idle).
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Most connections open at once; further ones wait in the listen queue until one closes.
pub const MAX_CONNECTIONS: usize = 512;

/// `Cache-Control` of bundle pages (`/bundle/p/…`): their names change with their content.
pub const PAGE_CACHE_CONTROL: &str = "public, max-age=31536000, immutable";

/// Largest text file (bytes) that is read into memory to get an `ETag` and compressed forms;
/// larger ones are streamed from disk as they are, without either.
pub const MAX_IN_MEMORY: u64 = 64 << 20;

/// Text files up to this size (bytes) are gzipped at level 9, larger ones at level 6 (the
/// embedder's ~20 MB wasm would otherwise take seconds on its first request).
const BEST_COMPRESSION_UP_TO: usize = 4 << 20;

/// Text files up to this size (bytes) get brotli quality 11.
pub const BROTLI_BEST_UP_TO: usize = 1 << 20;

/// Text files above this size (bytes) get brotli quality 5 (between the two: 9).
pub const BROTLI_FAST_ABOVE: usize = 4 << 20;

/// Read size (bytes) when streaming a file that is not held in memory.
const STREAM_CHUNK: usize = 256 << 10;

/// What `jikji serve` serves: `/` → `web`, `/pkg/` → `pkg`, `/bundle/` → `bundle`, `/model/` → `model`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to bind, e.g. `"127.0.0.1:8080"`; port 0 picks a free port.
    pub addr: String,
    /// The page's folder: `index.html`, `app.js`, `worker.js`, ... as `scripts/build-js` writes
    /// them (`pkg/web`).
    pub web: PathBuf,
    /// wasm-bindgen output folder (`jikji_engine_bg.wasm`, `integrity.json`, `dense/`, `qmodel/`).
    pub pkg: PathBuf,
    /// Bundle folder (contains `jikji.json`, or `manifest.json` for v1).
    pub bundle: PathBuf,
    /// Model folder (contains `model.onnx` and `tokenizer.json`).
    pub model: Option<PathBuf>,
    /// Print one line per answered request to stderr: `request GET /bundle/jikji.json 200`
    /// (method, path with query, status; see [`request_line`]). For seeing what a browser
    /// really asks for (the offline tests count them).
    pub log_requests: bool,
}

/// Serve forever on `opts.addr`, printing `listening on http://ADDR` once bound.
///
/// Errors: [`BuildError::Serve`] when a required folder is missing, the address cannot be
/// bound or the runtime cannot start.
pub fn serve(opts: &ServeOptions) -> Result<()> {
    let (listener, mounts) = bind(opts)?;
    let addr = local_addr(&listener)?;
    announce(addr, opts);
    run(listener, mounts, HEADER_READ_TIMEOUT, opts.log_requests)
}

/// Bind (port 0 allowed), print the `listening on` line and serve from a background thread.
/// Returns the bound address and the thread's handle (the thread runs until the process ends).
///
/// Errors: as [`serve`], and when the thread cannot be spawned.
pub fn serve_in_background(opts: &ServeOptions) -> Result<(SocketAddr, JoinHandle<()>)> {
    let (listener, mounts) = bind(opts)?;
    let addr = local_addr(&listener)?;
    announce(addr, opts);
    let handle = spawn_server(listener, mounts, HEADER_READ_TIMEOUT, opts.log_requests)?;
    Ok((addr, handle))
}

fn spawn_server(
    listener: TcpListener,
    mounts: Mounts,
    header_timeout: Duration,
    log_requests: bool,
) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("jikji-serve".into())
        .spawn(move || {
            if let Err(e) = run(listener, mounts, header_timeout, log_requests) {
                eprintln!("serve: {e}");
            }
        })
        .map_err(|e| BuildError::Serve {
            message: "spawning the server thread".into(),
            source: Some(e),
        })
}

fn announce(addr: SocketAddr, opts: &ServeOptions) {
    // Tests parse this exact line from stdout.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "listening on http://{addr}");
    let _ = out.flush();
    eprintln!(
        "serving web={} pkg={} bundle={} model={}",
        opts.web.display(),
        opts.pkg.display(),
        opts.bundle.display(),
        opts.model
            .as_ref()
            .map(|m| m.display().to_string())
            .unwrap_or_else(|| "(none)".into())
    );
}

fn local_addr(listener: &TcpListener) -> Result<SocketAddr> {
    listener.local_addr().map_err(|e| BuildError::Serve {
        message: "reading the bound address".into(),
        source: Some(e),
    })
}

/// A URL prefix mapped to a folder.
#[derive(Debug, Clone)]
struct Mount {
    /// `"/pkg/"`, `"/bundle/"`, `"/model/"` or `"/"`.
    prefix: &'static str,
    /// Canonicalized folder, or `None` when it is missing (every request then gets 404).
    root: Option<PathBuf>,
}

#[derive(Debug, Clone)]
struct Mounts(Vec<Mount>);

impl Mounts {
    fn new(opts: &ServeOptions) -> Result<Self> {
        let required = |p: &Path, what: &str| -> Result<PathBuf> {
            let c = p.canonicalize().map_err(|e| BuildError::Serve {
                message: format!("{what} folder {} not found", p.display()),
                source: Some(e),
            })?;
            if !c.is_dir() {
                return Err(BuildError::Serve {
                    message: format!("{what} path {} is not a folder", p.display()),
                    source: None,
                });
            }
            Ok(c)
        };
        let optional = |p: &Path, what: &str| -> Option<PathBuf> {
            match p.canonicalize() {
                Ok(c) if c.is_dir() => Some(c),
                _ => {
                    eprintln!(
                        "warning: {what} folder {} not found; its URLs will answer 404",
                        p.display()
                    );
                    None
                }
            }
        };
        let web = required(&opts.web, "web").map_err(|e| match e {
            BuildError::Serve { message, source } => BuildError::Serve {
                message: format!(
                    "{message} (the page is built from web/ by scripts/build-wasm, or \
                     scripts/build-js once pkg/ is there)"
                ),
                source,
            },
            e => e,
        })?;
        let bundle = required(&opts.bundle, "bundle")?;
        if !bundle.join("jikji.json").is_file() && !bundle.join("manifest.json").is_file() {
            eprintln!(
                "warning: {} has neither jikji.json (format v2) nor manifest.json (v1)",
                opts.bundle.display()
            );
        }
        let pkg = optional(&opts.pkg, "pkg");
        let model = opts.model.as_deref().and_then(|m| optional(m, "model"));
        // Longest prefixes first; "/" last.
        Ok(Mounts(vec![
            Mount {
                prefix: "/bundle/",
                root: Some(bundle),
            },
            Mount {
                prefix: "/model/",
                root: model,
            },
            Mount {
                prefix: "/pkg/",
                root: pkg,
            },
            Mount {
                prefix: "/",
                root: Some(web),
            },
        ]))
    }

    fn root(&self, prefix: &str) -> Option<&Path> {
        self.0
            .iter()
            .find(|m| m.prefix == prefix)
            .and_then(|m| m.root.as_deref())
    }
}

fn bind(opts: &ServeOptions) -> Result<(TcpListener, Mounts)> {
    let mounts = Mounts::new(opts)?;
    let cannot = |e: std::io::Error| BuildError::Serve {
        message: format!("cannot listen on {}: {e}", opts.addr),
        source: Some(e),
    };
    let listener = TcpListener::bind(opts.addr.as_str()).map_err(cannot)?;
    listener.set_nonblocking(true).map_err(cannot)?;
    Ok((listener, mounts))
}

/// What every request handler shares.
struct State {
    mounts: Mounts,
    cache: TextCache,
    /// [`ServeOptions::log_requests`].
    log_requests: bool,
}

/// Run the accept loop on a new current-thread runtime until the process ends.
fn run(
    listener: TcpListener,
    mounts: Mounts,
    header_timeout: Duration,
    log_requests: bool,
) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .thread_name("jikji-serve-io")
        .build()
        .map_err(|e| BuildError::Serve {
            message: "starting the server runtime".into(),
            source: Some(e),
        })?;
    let state = Arc::new(State {
        mounts,
        cache: TextCache::default(),
        log_requests,
    });
    let warm = Arc::clone(&state);
    runtime.spawn_blocking(move || prewarm(&warm));
    runtime.block_on(accept_loop(listener, state, header_timeout))
}

async fn accept_loop(
    listener: TcpListener,
    state: Arc<State>,
    header_timeout: Duration,
) -> Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener).map_err(|e| BuildError::Serve {
        message: "registering the listening socket".into(),
        source: Some(e),
    })?;
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return Ok(()); // the semaphore is never closed
        };
        let (stream, peer) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                // Out of file descriptors and the like: wait a little instead of spinning.
                eprintln!("serve: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = Arc::clone(&state);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| {
                let state = Arc::clone(&state);
                async move {
                    let log = state.log_requests.then(|| {
                        let target = req.uri().path_and_query().map(|p| p.as_str().to_owned());
                        (req.method().clone(), target.unwrap_or_else(|| "/".into()))
                    });
                    let resp = answer(req, state).await;
                    if let Some((method, target)) = log {
                        eprintln!("{}", request_line(&method, &target, resp.status()));
                    }
                    Ok::<_, Infallible>(resp)
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            if let Err(e) = conn.await {
                if !quiet_connection_error(&e) {
                    eprintln!("serve: connection from {peer}: {e}");
                }
            }
            drop(slot);
        });
    }
}

/// The line [`ServeOptions::log_requests`] prints for one request: `request METHOD TARGET
/// STATUS`, e.g. `request GET /bundle/jikji.json 304` (TARGET as sent: path and query,
/// percent-encoded; it holds no space).
pub fn request_line(method: &Method, target: &str, status: StatusCode) -> String {
    format!("request {method} {target} {}", status.as_u16())
}

/// Connection ends not worth a line: idle timeouts, clients going away mid-response.
fn quiet_connection_error(e: &hyper::Error) -> bool {
    if e.is_timeout() || e.is_incomplete_message() || e.is_canceled() || e.is_closed() {
        return true;
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind::*;
            return matches!(
                io.kind(),
                ConnectionReset | BrokenPipe | ConnectionAborted | UnexpectedEof
            );
        }
        source = s.source();
    }
    false
}

/// The response to one request. File work runs on the blocking pool.
async fn answer(req: Request<hyper::body::Incoming>, state: Arc<State>) -> Response<Body> {
    let method = req.method().clone();
    if method != Method::GET && method != Method::HEAD {
        let mut resp = text_response(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        resp.headers_mut()
            .insert("allow", HeaderValue::from_static("GET, HEAD"));
        return resp;
    }
    let target = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    let headers = req.headers().clone();
    let head = method == Method::HEAD;
    let work = tokio::task::spawn_blocking(move || match resolve(&state.mounts, &target) {
        Resolved::File(path, kind) => file_response(&headers, head, &path, kind, &state.cache)
            .unwrap_or_else(|e| {
                if e.kind() != std::io::ErrorKind::NotFound {
                    eprintln!("serve: {target}: {e}");
                }
                text_response(StatusCode::NOT_FOUND, "not found\n")
            }),
        Resolved::Redirect(location) => {
            let mut resp = text_response(StatusCode::MOVED_PERMANENTLY, "moved\n");
            if let Ok(v) = HeaderValue::from_str(&location) {
                resp.headers_mut().insert("location", v);
            }
            resp
        }
        Resolved::Bad(why) => {
            text_response(StatusCode::BAD_REQUEST, &format!("bad request: {why}\n"))
        }
        Resolved::NotFound => text_response(StatusCode::NOT_FOUND, "not found\n"),
    });
    work.await.unwrap_or_else(|e| {
        eprintln!("serve: request handler failed: {e}");
        text_response(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
    })
}

/// What to answer for one request path.
#[derive(Debug, PartialEq, Eq)]
enum Resolved {
    /// A file, and whether it is a bundle page (`/bundle/p/…`).
    File(PathBuf, Kind),
    /// Redirect to this location (a folder asked for without its trailing slash).
    Redirect(String),
    /// 400: malformed or traversal attempt.
    Bad(&'static str),
    NotFound,
}

/// How a served file is cached and encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A bundle page (`/bundle/p/…`): immutable, never re-compressed.
    Page,
    /// Anything else: `no-cache`; text files get an ETag and brotli or gzip.
    Other,
}

/// A content coding this server can send (RFC 9110 §8.4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// No `Content-Encoding`: the file's bytes.
    Identity,
    /// `gzip` (RFC 1952).
    Gzip,
    /// `br` (RFC 7932).
    Brotli,
}

impl Encoding {
    /// The `Content-Encoding` value, `None` for identity.
    pub fn header(self) -> Option<&'static str> {
        match self {
            Encoding::Identity => None,
            Encoding::Gzip => Some("gzip"),
            Encoding::Brotli => Some("br"),
        }
    }

    /// What goes before the ETag's closing quote: `""`, `".gz"` or `".br"`.
    fn etag_suffix(self) -> &'static str {
        match self {
            Encoding::Identity => "",
            Encoding::Gzip => ".gz",
            Encoding::Brotli => ".br",
        }
    }
}

/// A text file's bytes, hash and compressed forms, valid while its size and mtime are unchanged.
struct Cached {
    len: u64,
    modified: Option<SystemTime>,
    /// 32 lowercase hex digits: the first 16 bytes of the SHA-256 of `raw`.
    hash: String,
    raw: Bytes,
    /// Made on first use (a request that accepts gzip, or the start-up warm-up); `None` if
    /// compressing failed (the raw bytes are sent then).
    gzip: OnceLock<Option<Bytes>>,
    /// As `gzip`, for brotli.
    br: OnceLock<Option<Bytes>>,
}

impl Cached {
    /// The body in `enc` (compressing it now, once, if needed), or `None` if that failed.
    fn form(&self, enc: Encoding) -> Option<Bytes> {
        match enc {
            Encoding::Identity => Some(self.raw.clone()),
            Encoding::Gzip => self
                .gzip
                .get_or_init(|| gzip(&self.raw).ok().map(Bytes::from))
                .clone(),
            Encoding::Brotli => self
                .br
                .get_or_init(|| brotli(&self.raw).ok().map(Bytes::from))
                .clone(),
        }
    }
}

/// Text files read so far, by canonical path.
#[derive(Default)]
struct TextCache(Mutex<HashMap<PathBuf, Arc<Cached>>>);

impl TextCache {
    /// The file's cache entry, reading it when it is new or changed on disk (at most
    /// [`MAX_IN_MEMORY`] + 1 bytes are read).
    fn get(&self, path: &Path, meta: &std::fs::Metadata) -> std::io::Result<Arc<Cached>> {
        let modified = meta.modified().ok();
        let fresh = |c: &Cached| c.len == meta.len() && c.modified == modified;
        {
            let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = map.get(path).filter(|c| fresh(c)) {
                return Ok(Arc::clone(c));
            }
        }
        // Read outside the lock; a concurrent request may read it too, but the first entry
        // stored is the one both use (so compression is done once).
        let mut raw = Vec::with_capacity(meta.len().min(MAX_IN_MEMORY) as usize);
        File::open(path)?
            .take(MAX_IN_MEMORY + 1)
            .read_to_end(&mut raw)?;
        let hash = hex::encode(&Sha256::digest(&raw)[..16]);
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = map.get(path).filter(|c| fresh(c) && c.hash == hash) {
            return Ok(Arc::clone(c));
        }
        let entry = Arc::new(Cached {
            len: meta.len(),
            modified,
            hash,
            raw: Bytes::from(raw),
            gzip: OnceLock::new(),
            br: OnceLock::new(),
        });
        map.insert(path.to_path_buf(), Arc::clone(&entry));
        Ok(entry)
    }
}

/// gzip (RFC 1952) of `data`: level 9 up to [`BEST_COMPRESSION_UP_TO`] bytes, else 6.
fn gzip(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let level = if data.len() <= BEST_COMPRESSION_UP_TO {
        Compression::best()
    } else {
        Compression::default()
    };
    let mut enc = GzEncoder::new(Vec::with_capacity(data.len() / 3 + 64), level);
    enc.write_all(data)?;
    enc.finish()
}

/// Brotli quality (0–11) for a body of `len` bytes: 11 up to [`BROTLI_BEST_UP_TO`], 5 above
/// [`BROTLI_FAST_ABOVE`], else 9. CPU time of the `brotli` crate (a Rust port of Google's
/// encoder) measured on the engine wasm (705,121 B) and the embedder wasm (19,774,047 B): 11
/// about 1.9 s per MB (the engine: 1.3 s, 228,475 B; gzip -9 284,166 B), 9 about 0.16 s per MB,
/// 5 about 0.05 s per MB (the embedder: 1.0 s, 3,426,653 B; gzip -6 4,690,172 B in 0.8 s).
pub fn brotli_quality(len: usize) -> i32 {
    if len <= BROTLI_BEST_UP_TO {
        11
    } else if len <= BROTLI_FAST_ABOVE {
        9
    } else {
        5
    }
}

/// Brotli (RFC 7932) of `data` at [`brotli_quality`], window 2^22 bytes (the encoder's
/// default).
fn brotli(data: &[u8]) -> std::io::Result<Vec<u8>> {
    let params = brotli::enc::BrotliEncoderParams {
        quality: brotli_quality(data.len()),
        size_hint: data.len(),
        ..Default::default()
    };
    let mut out = Vec::with_capacity(data.len() / 3 + 64);
    brotli::BrotliCompress(&mut &data[..], &mut out, &params)?;
    Ok(out)
}

/// The q-value (RFC 9110 §12.4.2) of each coding in an `Accept-Encoding` value that this
/// server knows: `(identity, gzip, br, *)`, `None` when not listed. A malformed q counts as 0.
fn accept_qualities(accept_encoding: &str) -> [Option<f32>; 4] {
    let mut q = [None; 4];
    for item in accept_encoding.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut weight = 1.0f32;
        for p in parts {
            let p = p.trim();
            if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                weight = v.trim().parse().unwrap_or(0.0);
                if !(0.0..=1.0).contains(&weight) {
                    weight = 0.0;
                }
            }
        }
        let slot = match coding.as_str() {
            "identity" => 0,
            "gzip" | "x-gzip" => 1,
            "br" => 2,
            "*" => 3,
            _ => continue,
        };
        q[slot] = Some(weight);
    }
    q
}

/// The coding to send for an `Accept-Encoding` value (RFC 9110 §12.5.3): the one with the
/// highest q-value above 0, ties going `br` > `gzip` > identity. A coding not listed takes the
/// q of `*` if that is listed; identity not listed (and no `*`) is chosen only when neither
/// compression is acceptable. `br;q=0, gzip;q=0, identity;q=0` still gets identity.
pub fn choose_encoding(accept_encoding: &str) -> Encoding {
    let [identity, gzip, br, star] = accept_qualities(accept_encoding);
    let br = br.or(star).unwrap_or(0.0);
    let gzip = gzip.or(star).unwrap_or(0.0);
    let identity = identity.or(star).unwrap_or(0.0);
    let best = br.max(gzip);
    if best <= 0.0 || identity > best {
        Encoding::Identity
    } else if br >= gzip {
        Encoding::Brotli
    } else {
        Encoding::Gzip
    }
}

/// True if an `Accept-Encoding` value (RFC 9110 §12.5.3) allows gzip: `gzip`, `x-gzip` or
/// `*` listed with a q-value above 0 (a `gzip;q=0` refuses it even if `*` is listed).
pub fn accepts_gzip(accept_encoding: &str) -> bool {
    let [_, gzip, _, star] = accept_qualities(accept_encoding);
    gzip.or(star).is_some_and(|q| q > 0.0)
}

/// True if an `If-None-Match` value (RFC 9110 §13.1.2: `*` or a list of entity tags,
/// compared weakly) matches the entity tag `etag` (with its quotes).
pub fn none_match_hits(if_none_match: &str, etag: &str) -> bool {
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_string();
    let want = bare(etag);
    if_none_match.trim() == "*" || if_none_match.split(',').any(|t| bare(t) == want)
}

/// True for the content types that are sent with an ETag and compression (text, JSON, wasm, svg).
pub fn compressible(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || matches!(
            content_type,
            "application/json" | "application/wasm" | "image/svg+xml" | "application/manifest+json"
        )
}

/// Every value of a request header, joined with `", "` (RFC 9110 §5.3), if there is one.
fn request_header(headers: &HeaderMap, name: &str) -> Option<String> {
    let values: Vec<&str> = headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    (!values.is_empty()).then(|| values.join(", "))
}

/// The response for a file that exists: page, text (ETag, brotli/gzip, 304) or other.
/// Runs on the blocking pool (reads and compresses).
fn file_response(
    headers: &HeaderMap,
    head: bool,
    path: &Path,
    kind: Kind,
    cache: &TextCache,
) -> std::io::Result<Response<Body>> {
    let file = File::open(path)?;
    let meta = file.metadata()?;
    let ct = content_type(path);
    let stream = |file: File| {
        if head {
            Body::Empty
        } else {
            Body::File(FileBody::new(file, meta.len()))
        }
    };
    if kind == Kind::Page {
        let mut resp = Response::new(stream(file));
        let h = resp.headers_mut();
        h.insert(
            "content-type",
            HeaderValue::from_static("application/octet-stream"),
        );
        h.insert("content-length", HeaderValue::from(meta.len()));
        h.insert(
            "cache-control",
            HeaderValue::from_static(PAGE_CACHE_CONTROL),
        );
        // No CSP on pages: a policy governs documents and worker scripts only, and an
        // `application/octet-stream` body under `nosniff` is neither (a browser downloads it).
        // Its 273 header bytes were ~14 % of a SciFact query's page bytes (25 pages, ~40 kB).
        h.insert(
            "x-content-type-options",
            HeaderValue::from_static("nosniff"),
        );
        return Ok(resp);
    }
    if !compressible(ct) || meta.len() > MAX_IN_MEMORY {
        let mut resp = Response::new(stream(file));
        let h = resp.headers_mut();
        h.insert("content-type", HeaderValue::from_static(ct));
        h.insert("content-length", HeaderValue::from(meta.len()));
        common_headers(h, ct);
        return Ok(resp);
    }
    drop(file);
    let entry = cache.get(path, &meta)?;
    let wanted = request_header(headers, "accept-encoding")
        .map(|a| choose_encoding(&a))
        .unwrap_or(Encoding::Identity);
    // A failed compression falls back to the raw bytes.
    let (enc, body) = match entry.form(wanted) {
        Some(b) => (wanted, b),
        None => (Encoding::Identity, entry.raw.clone()),
    };
    let etag = format!("\"{}{}\"", entry.hash, enc.etag_suffix());
    let not_modified =
        request_header(headers, "if-none-match").is_some_and(|v| none_match_hits(&v, &etag));
    let mut resp = if not_modified {
        let mut r = Response::new(Body::Empty);
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        let len = body.len() as u64;
        let mut r = Response::new(if head {
            Body::Empty
        } else {
            Body::Full(Some(body))
        });
        let h = r.headers_mut();
        h.insert("content-type", HeaderValue::from_static(ct));
        h.insert("content-length", HeaderValue::from(len));
        if let Some(ce) = enc.header() {
            h.insert("content-encoding", HeaderValue::from_static(ce));
        }
        r
    };
    let h = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&etag) {
        h.insert("etag", v);
    }
    h.insert("vary", HeaderValue::from_static("Accept-Encoding"));
    common_headers(h, ct);
    Ok(resp)
}

/// At start-up, on the blocking pool: read and brotli-compress the text files of
/// the web and pkg folders (at most 4 levels deep, 256 files) and the bundle's entry file,
/// smallest first, so the page's first requests find them ready.
fn prewarm(state: &State) {
    let mut files = Vec::new();
    for prefix in ["/", "/pkg/"] {
        let Some(root) = state.mounts.root(prefix) else {
            continue;
        };
        let mut stack = vec![(root.to_path_buf(), 0)];
        while let Some((dir, depth)) = stack.pop() {
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                match e.file_type() {
                    Ok(t) if t.is_dir() && depth < 3 => stack.push((p, depth + 1)),
                    Ok(t) if t.is_file() => files.push(p),
                    _ => {}
                }
                if files.len() >= 256 {
                    break;
                }
            }
        }
    }
    if let Some(bundle) = state.mounts.root("/bundle/") {
        for entry in ["jikji.json", "manifest.json"] {
            match bundle.join(entry).canonicalize() {
                Ok(p) if p.starts_with(bundle) => files.push(p),
                _ => {}
            }
        }
    }
    let mut sized: Vec<(u64, PathBuf, std::fs::Metadata)> = files
        .into_iter()
        .filter(|p| compressible(content_type(p)))
        .filter_map(|p| {
            let meta = std::fs::metadata(&p).ok()?;
            (meta.is_file() && meta.len() <= MAX_IN_MEMORY).then_some((meta.len(), p, meta))
        })
        .collect();
    sized.sort_by_key(|s| s.0);
    for (_, path, meta) in sized {
        if let Ok(entry) = state.cache.get(&path, &meta) {
            // Brotli only: browsers all accept it; gzip is made when a client asks for it.
            entry.form(Encoding::Brotli);
        }
    }
}

/// The `Content-Security-Policy` of every response: what the page (pkg/web/) needs and nothing
/// more. Scripts, the worker, styles and fetches from this origin only (`connect-src 'self'`:
/// a bundle or model on another origin is refused by the browser too, besides the page's own
/// allow-list); `'wasm-unsafe-eval'` to compile the engine's and the query model's wasm; no
/// plugins, no `<base>`, no form posts, and no framing (`frame-ancestors 'none'`, against
/// clickjacking). Sent on workers' scripts too, which makes it the worker's policy.
pub const CSP: &str = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; \
    style-src 'self'; connect-src 'self'; worker-src 'self'; object-src 'none'; \
    base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Whether a response of content type `ct` gets the [`CSP`]: a policy governs documents
/// (HTML, SVG, and the plain-text error answers) and worker scripts (any JavaScript file may be
/// started as one), nothing else. The engine's wasm, JSON (the bundle's entry, integrity.json),
/// CSS and images are never a document or a script under `nosniff`: without the policy their
/// responses are 273 bytes smaller (three of them on a visitor's first query).
fn takes_csp(ct: &str) -> bool {
    [
        "text/html",
        "text/javascript",
        "text/plain",
        "image/svg+xml",
    ]
    .iter()
    .any(|t| ct.starts_with(t))
}

/// `X-Content-Type-Options: nosniff` on every response, and `Content-Security-Policy`
/// ([`CSP`]) where [`takes_csp`] says (bundle pages get `nosniff` only: see `serve_file`).
fn security_headers(h: &mut HeaderMap, ct: &str) {
    if takes_csp(ct) {
        h.insert("content-security-policy", HeaderValue::from_static(CSP));
    }
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
}

fn common_headers(h: &mut HeaderMap, ct: &str) {
    h.insert("cache-control", HeaderValue::from_static("no-cache"));
    security_headers(h, ct);
}

fn text_response(status: StatusCode, body: &str) -> Response<Body> {
    let body = Bytes::from(body.to_string());
    let len = body.len() as u64;
    let mut resp = Response::new(Body::Full(Some(body)));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        "content-type",
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert("content-length", HeaderValue::from(len));
    common_headers(h, "text/plain");
    resp
}

/// A response body: nothing, bytes in memory, or a file streamed from disk.
enum Body {
    Empty,
    Full(Option<Bytes>),
    File(FileBody),
}

impl HttpBody for Body {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, std::io::Error>>> {
        match self.get_mut() {
            Body::Empty => Poll::Ready(None),
            Body::Full(b) => Poll::Ready(b.take().map(|b| Ok(Frame::data(b)))),
            Body::File(f) => f.poll_chunk(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Empty => true,
            Body::Full(b) => b.is_none(),
            Body::File(f) => f.remaining == 0,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Empty => SizeHint::with_exact(0),
            Body::Full(b) => SizeHint::with_exact(b.as_ref().map_or(0, |b| b.len() as u64)),
            Body::File(f) => SizeHint::with_exact(f.remaining),
        }
    }
}

/// One read of [`FileBody`]: the file handed back, and the bytes read.
type ChunkRead = (File, Vec<u8>);

/// A file sent as exactly `remaining` bytes (its length when opened), read on the blocking
/// pool [`STREAM_CHUNK`] bytes at a time. A file that shrinks meanwhile ends the body with
/// an error (hyper then closes the connection: the promised length cannot be kept); one that
/// grows is cut at the promised length.
struct FileBody {
    file: Option<File>,
    remaining: u64,
    reading: Option<tokio::task::JoinHandle<std::io::Result<ChunkRead>>>,
}

impl FileBody {
    fn new(file: File, len: u64) -> Self {
        FileBody {
            file: Some(file),
            remaining: len,
            reading: None,
        }
    }

    fn poll_chunk(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<std::result::Result<Frame<Bytes>, std::io::Error>>> {
        if self.remaining == 0 {
            return Poll::Ready(None);
        }
        if self.reading.is_none() {
            let Some(mut file) = self.file.take() else {
                return Poll::Ready(None);
            };
            let want = self.remaining.min(STREAM_CHUNK as u64) as usize;
            self.reading = Some(tokio::task::spawn_blocking(move || {
                let mut buf = vec![0u8; want];
                let mut got = 0;
                while got < want {
                    match file.read(&mut buf[got..]) {
                        Ok(0) => break,
                        Ok(n) => got += n,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                buf.truncate(got);
                Ok((file, buf))
            }));
        }
        let Some(task) = self.reading.as_mut() else {
            return Poll::Ready(None);
        };
        let done = match Pin::new(task).poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(r) => r,
        };
        self.reading = None;
        let (file, buf) = match done {
            Ok(Ok(x)) => x,
            Ok(Err(e)) => return Poll::Ready(Some(Err(e))),
            Err(e) => return Poll::Ready(Some(Err(std::io::Error::other(e)))),
        };
        if buf.is_empty() {
            return Poll::Ready(Some(Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "file shrank while being sent",
            ))));
        }
        self.remaining -= buf.len() as u64;
        self.file = Some(file);
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(buf)))))
    }
}

/// Map a request target (path + optional query) to a file under one of the mounts.
fn resolve(mounts: &Mounts, url: &str) -> Resolved {
    let path = url.split(['?', '#']).next().unwrap_or("");
    if !path.starts_with('/') {
        return Resolved::Bad("path must start with /");
    }
    let decoded = match percent_decode(path) {
        Some(d) => d,
        None => return Resolved::Bad("invalid percent-encoding"),
    };
    if decoded.contains('\\') || decoded.contains('\0') {
        return Resolved::Bad("invalid character in path");
    }
    // Find the mount; "/pkg" (no slash) redirects to "/pkg/".
    for m in &mounts.0 {
        if m.prefix != "/" && decoded == m.prefix.trim_end_matches('/') {
            return Resolved::Redirect(m.prefix.to_string());
        }
    }
    let Some(mount) = mounts.0.iter().find(|m| decoded.starts_with(m.prefix)) else {
        return Resolved::NotFound;
    };
    let rest = &decoded[mount.prefix.len()..];
    let mut segments = Vec::new();
    let parts: Vec<&str> = rest.split('/').collect();
    for (i, seg) in parts.iter().enumerate() {
        match *seg {
            ".." | "." => return Resolved::Bad("path traversal"),
            // A trailing empty segment means "folder"; others are "//".
            "" if i + 1 == parts.len() => {}
            "" => return Resolved::Bad("empty path segment"),
            s => segments.push(s),
        }
    }
    let Some(root) = &mount.root else {
        return Resolved::NotFound;
    };
    let mut candidate = root.clone();
    for s in &segments {
        candidate.push(s);
    }
    let Ok(mut canon) = candidate.canonicalize() else {
        return Resolved::NotFound;
    };
    if !canon.starts_with(root) {
        return Resolved::Bad("path escapes its folder");
    }
    if canon.is_dir() {
        if !decoded.ends_with('/') {
            // Keep relative links inside the folder working.
            return Resolved::Redirect(format!("{path}/"));
        }
        canon.push("index.html");
        match canon.canonicalize() {
            Ok(c) if c.starts_with(root) && c.is_file() => canon = c,
            _ => return Resolved::NotFound,
        }
    }
    if canon.is_file() {
        // Pages: `/bundle/p/NAME` whose file really is under the bundle's `p/` folder.
        let page = mount.prefix == "/bundle/"
            && segments.len() == 2
            && segments[0] == "p"
            && canon.parent() == Some(root.join("p").as_path());
        Resolved::File(canon, if page { Kind::Page } else { Kind::Other })
    } else {
        Resolved::NotFound
    }
}

/// Decode `%XX` escapes; `None` for malformed escapes or non-UTF-8 results.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Content-Type by file extension.
fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "wasm" => "application/wasm",
        "json" | "map" => "application/json",
        "css" => "text/css; charset=utf-8",
        "txt" | "md" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "webmanifest" => "application/manifest+json",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    struct Fixture {
        _dir: TempDir,
        opts: ServeOptions,
        mounts: Mounts,
        outside: PathBuf,
    }

    /// Minimal self-deleting temp folder (no extra dev-dependency).
    struct TempDir(PathBuf);
    impl TempDir {
        fn new() -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "jikji-serve-test-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            TempDir(p)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn write(p: &Path, data: &[u8]) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, data).unwrap();
    }

    fn fixture() -> Fixture {
        let dir = TempDir::new();
        let root = dir.0.clone();
        write(
            &root.join("web/index.html"),
            b"<!doctype html><title>x</title>",
        );
        write(&root.join("web/app.js"), b"export {}");
        write(&root.join("web/style.css"), b"body{}");
        write(&root.join("web/sub/index.html"), b"sub");
        write(&root.join("pkg/jikji_engine.js"), b"export default 1");
        write(&root.join("pkg/jikji_engine_bg.wasm"), b"\0asm\x01\0\0\0");
        write(&root.join("bundle/manifest.json"), b"{\"files\":{}}");
        write(&root.join("bundle/chunks.bin"), b"\x01\x02\x03");
        write(&root.join("bundle/a b.json"), b"{}");
        write(&root.join("model/model.onnx"), &vec![7u8; 200_000]);
        write(&root.join("model/tokenizer.json"), b"{}");
        write(&root.join("secret.txt"), b"secret");
        #[cfg(unix)]
        std::os::unix::fs::symlink(root.join("secret.txt"), root.join("web/link.txt")).unwrap();
        let opts = ServeOptions {
            addr: "127.0.0.1:0".into(),
            web: root.join("web"),
            pkg: root.join("pkg"),
            bundle: root.join("bundle"),
            model: Some(root.join("model")),
            log_requests: false,
        };
        let mounts = Mounts::new(&opts).unwrap();
        let outside = root.join("secret.txt");
        Fixture {
            _dir: dir,
            opts,
            mounts,
            outside,
        }
    }

    fn file_name(r: &Resolved) -> Option<String> {
        match r {
            Resolved::File(p, _) => {
                let s = p.to_string_lossy().replace('\\', "/");
                let parts: Vec<&str> = s.rsplitn(3, '/').collect();
                Some(format!("{}/{}", parts[1], parts[0]))
            }
            _ => None,
        }
    }

    #[test]
    fn resolves_mounts() {
        let f = fixture();
        let m = &f.mounts;
        assert_eq!(
            file_name(&resolve(m, "/")).as_deref(),
            Some("web/index.html")
        );
        assert_eq!(
            file_name(&resolve(m, "/?bundle=/x/")).as_deref(),
            Some("web/index.html")
        );
        assert_eq!(
            file_name(&resolve(m, "/app.js")).as_deref(),
            Some("web/app.js")
        );
        assert_eq!(
            file_name(&resolve(m, "/pkg/jikji_engine_bg.wasm")).as_deref(),
            Some("pkg/jikji_engine_bg.wasm")
        );
        assert_eq!(
            file_name(&resolve(m, "/bundle/manifest.json")).as_deref(),
            Some("bundle/manifest.json")
        );
        assert_eq!(
            file_name(&resolve(m, "/bundle/a%20b.json")).as_deref(),
            Some("bundle/a b.json")
        );
        assert_eq!(
            file_name(&resolve(m, "/model/model.onnx")).as_deref(),
            Some("model/model.onnx")
        );
        assert_eq!(
            file_name(&resolve(m, "/sub/")).as_deref(),
            Some("sub/index.html")
        );
        assert_eq!(resolve(m, "/sub"), Resolved::Redirect("/sub/".into()));
        assert_eq!(resolve(m, "/pkg"), Resolved::Redirect("/pkg/".into()));
        assert_eq!(resolve(m, "/missing.js"), Resolved::NotFound);
        assert_eq!(resolve(m, "/bundle/"), Resolved::NotFound); // no index.html there
    }

    #[test]
    fn rejects_traversal() {
        let f = fixture();
        let m = &f.mounts;
        for url in [
            "/../secret.txt",
            "/bundle/../../secret.txt",
            "/bundle/../manifest.json",
            "/pkg/..",
            "/%2e%2e/secret.txt",
            "/bundle/%2E%2E/%2e%2e/secret.txt",
            "/bundle/%2e%2e%2fsecret.txt",
            "/./index.html",
            "/bundle//etc/passwd",
            "/..%5csecret.txt",
            "/a%00b",
            "/%zz",
            "secret.txt",
            "http://example.com/../secret.txt",
        ] {
            let r = resolve(m, url);
            assert!(
                matches!(r, Resolved::Bad(_)),
                "{url} should be rejected, got {r:?}"
            );
        }
        #[cfg(unix)]
        {
            // A symlink inside web/ pointing outside is refused too.
            assert!(f.outside.is_file());
            assert!(matches!(resolve(m, "/link.txt"), Resolved::Bad(_)));
        }
    }

    #[test]
    fn model_mount_absent() {
        let f = fixture();
        let mut opts = f.opts.clone();
        opts.model = None;
        let m = Mounts::new(&opts).unwrap();
        assert_eq!(resolve(&m, "/model/model.onnx"), Resolved::NotFound);
        let mut opts = f.opts.clone();
        opts.pkg = opts.pkg.join("does-not-exist");
        let m = Mounts::new(&opts).unwrap();
        assert_eq!(resolve(&m, "/pkg/jikji_engine.js"), Resolved::NotFound);
    }

    #[test]
    fn missing_required_folders_fail() {
        let f = fixture();
        let mut opts = f.opts.clone();
        opts.bundle = opts.bundle.join("nope");
        assert!(Mounts::new(&opts).is_err());
        let mut opts = f.opts.clone();
        opts.web = opts.web.join("nope");
        assert!(Mounts::new(&opts).is_err());
    }

    #[test]
    fn request_lines() {
        assert_eq!(
            request_line(&Method::GET, "/bundle/jikji.json", StatusCode::NOT_MODIFIED),
            "request GET /bundle/jikji.json 304"
        );
        assert_eq!(
            request_line(&Method::HEAD, "/?q=%E5%AD%B8", StatusCode::OK),
            "request HEAD /?q=%E5%AD%B8 200"
        );
    }

    #[test]
    fn content_types() {
        let ct = |p: &str| content_type(Path::new(p));
        assert_eq!(ct("a/index.html"), "text/html; charset=utf-8");
        assert_eq!(ct("jikji_engine.js"), "text/javascript; charset=utf-8");
        assert_eq!(ct("x.MJS"), "text/javascript; charset=utf-8");
        assert_eq!(ct("jikji_engine_bg.wasm"), "application/wasm");
        assert_eq!(ct("manifest.json"), "application/json");
        assert_eq!(ct("style.css"), "text/css; charset=utf-8");
        assert_eq!(ct("model.onnx"), "application/octet-stream");
        assert_eq!(ct("chunks.bin"), "application/octet-stream");
        assert_eq!(ct("noext"), "application/octet-stream");
    }

    /// One raw HTTP request; returns (status line, headers lowercased, body).
    fn get(
        addr: SocketAddr,
        method: &str,
        target: &str,
    ) -> (String, Vec<(String, String)>, Vec<u8>) {
        get_v(addr, method, target, "1.0")
    }

    fn get_v(
        addr: SocketAddr,
        method: &str,
        target: &str,
        version: &str,
    ) -> (String, Vec<(String, String)>, Vec<u8>) {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        write!(
            s,
            "{method} {target} HTTP/{version}\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).unwrap();
        let split = buf
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("header end");
        let head = String::from_utf8_lossy(&buf[..split]).to_string();
        let body = buf[split + 4..].to_vec();
        let mut lines = head.split("\r\n");
        let status = lines.next().unwrap().to_string();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
            .collect();
        (status, headers, body)
    }

    fn hdr<'a>(h: &'a [(String, String)], name: &str) -> Option<&'a str> {
        h.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn encoding_follows_q_values() {
        use Encoding::*;
        for (accept, want) in [
            ("gzip, deflate, br, zstd", Brotli),
            ("br", Brotli),
            ("BR;Q=1", Brotli),
            ("*", Brotli),
            ("gzip", Gzip),
            ("x-gzip", Gzip),
            ("gzip, br;q=0.999", Gzip),
            ("br;q=0, *", Gzip),
            ("br;q=0, gzip;q=0, *", Identity),
            ("br;q=0.5, identity", Identity),
            ("br;q=0.5, identity;q=0.4", Brotli),
            ("identity", Identity),
            ("deflate, zstd", Identity),
            ("", Identity),
            ("br;q=2", Identity),
            ("br;q=abc, gzip;q=0.1", Gzip),
            ("*;q=0", Identity),
        ] {
            assert_eq!(choose_encoding(accept), want, "{accept:?}");
        }
        assert!(accepts_gzip("gzip, deflate, br"));
        assert!(accepts_gzip("*"));
        assert!(!accepts_gzip("gzip;q=0, *"));
        assert!(!accepts_gzip("br"));
        assert_eq!(brotli_quality(705_121), 11);
        assert_eq!(brotli_quality(BROTLI_BEST_UP_TO + 1), 9);
        assert_eq!(brotli_quality(20 << 20), 5);
    }

    /// Reads until the peer closes; true if it did within `within`.
    fn closed_within(s: &mut TcpStream, within: std::time::Duration) -> bool {
        s.set_read_timeout(Some(within)).unwrap();
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => return false,
            }
        }
    }

    #[test]
    fn idle_and_slow_header_connections_are_closed() {
        let f = fixture();
        let (listener, mounts) = bind(&f.opts).unwrap();
        let addr = listener.local_addr().unwrap();
        let timeout = std::time::Duration::from_millis(300);
        let _h = spawn_server(listener, mounts, timeout, false).unwrap();
        // Never sends anything.
        let mut silent = TcpStream::connect(addr).unwrap();
        // Sends half a header and stops (slowloris).
        let mut slow = TcpStream::connect(addr).unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n").unwrap();
        // Others are answered meanwhile.
        let (st, _, _) = get(addr, "GET", "/app.js");
        assert!(st.contains(" 200"), "{st}");
        assert!(closed_within(
            &mut silent,
            std::time::Duration::from_secs(20)
        ));
        assert!(closed_within(&mut slow, std::time::Duration::from_secs(20)));
        // A keep-alive connection is closed once idle after its answer.
        let mut idle = TcpStream::connect(addr).unwrap();
        idle.write_all(b"GET /app.js HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        assert!(closed_within(&mut idle, std::time::Duration::from_secs(20)));
    }

    #[test]
    fn serves_over_http() {
        let f = fixture();
        let (addr, _handle) = serve_in_background(&f.opts).unwrap();
        assert_ne!(addr.port(), 0);

        let (st, h, body) = get(addr, "GET", "/");
        assert!(st.contains(" 200"), "{st}");
        assert_eq!(hdr(&h, "content-type"), Some("text/html; charset=utf-8"));
        assert!(body.starts_with(b"<!doctype html>"));

        for (path, ct) in [
            ("/pkg/jikji_engine_bg.wasm", "application/wasm"),
            ("/pkg/jikji_engine.js", "text/javascript; charset=utf-8"),
            ("/bundle/manifest.json", "application/json"),
            ("/bundle/chunks.bin", "application/octet-stream"),
            ("/model/model.onnx", "application/octet-stream"),
            ("/style.css", "text/css; charset=utf-8"),
        ] {
            let (st, h, body) = get(addr, "GET", path);
            assert!(st.contains(" 200"), "{path}: {st}");
            assert_eq!(hdr(&h, "content-type"), Some(ct), "{path}");
            assert_eq!(
                hdr(&h, "content-length"),
                Some(body.len().to_string().as_str()),
                "{path}"
            );
        }

        // HTTP/1.1 and a large file: Content-Length, not chunked (progress bars need it).
        let (st, h, body) = get_v(addr, "GET", "/model/model.onnx", "1.1");
        assert!(st.contains(" 200"), "{st}");
        assert_eq!(hdr(&h, "content-length"), Some("200000"));
        assert_eq!(hdr(&h, "transfer-encoding"), None);
        assert_eq!(body.len(), 200_000);

        let (st, h, body) = get(addr, "HEAD", "/bundle/chunks.bin");
        assert!(st.contains(" 200"), "{st}");
        assert_eq!(hdr(&h, "content-length"), Some("3"));
        assert!(body.is_empty());

        let (st, _, _) = get(addr, "GET", "/nope.js");
        assert!(st.contains(" 404"), "{st}");
        let (st, _, body) = get(addr, "GET", "/bundle/../../secret.txt");
        assert!(st.contains(" 400"), "{st}");
        assert!(!String::from_utf8_lossy(&body).contains("secret"));
        let (st, _, _) = get(addr, "GET", "/%2e%2e/secret.txt");
        assert!(st.contains(" 400"), "{st}");
        let (st, h, _) = get(addr, "GET", "/pkg");
        assert!(st.contains(" 301"), "{st}");
        assert_eq!(hdr(&h, "location"), Some("/pkg/"));
        let (st, _, _) = get(addr, "POST", "/");
        assert!(st.contains(" 405"), "{st}");
    }
}

//! A small static file server for trying Jikji locally and for the browser tests.
//!
//! URL layout:
//! - `/`        → the web folder (`index.html` for `/`)
//! - `/pkg/`    → the wasm-pack output folder
//! - `/bundle/` → the bundle folder (v2: `jikji.json` and `p/…` pages; v1: `manifest.json` and the files it lists)
//! - `/model/`  → the model folder (`model.onnx`, `tokenizer.json`), when one is given
//!
//! Only `GET` and `HEAD` are answered. Paths containing `..` (or `.`, backslashes, NUL, or
//! empty segments) are rejected; every file is canonicalized and must stay under the
//! canonicalized root of its mount, so symlinks cannot lead outside it either.
//!
//! Caching and compression (RFC 9111 `Cache-Control`, RFC 9110 §8.8.3 `ETag` and §13.1.2
//! `If-None-Match`), for a paged (format v2) bundle as FORMAT.md describes it:
//! - `/bundle/p/…` (pages, named by their content): `Cache-Control: public, max-age=31536000,
//!   immutable`, `application/octet-stream`, served byte for byte: pages are compressed by the
//!   bundle writer already, so they never get a `Content-Encoding`.
//! - every other file: `Cache-Control: no-cache` (the browser revalidates each use). Text
//!   files (see [`compressible`]: html, js, css, json, wasm, svg, txt/md, map, webmanifest; at
//!   most [`MAX_IN_MEMORY`] bytes) also get a strong `ETag` (`"` + 32 hex digits of the
//!   SHA-256 of the file + `"`, with `.gz` before the closing quote for the gzip form), answer
//!   `If-None-Match` with `304 Not Modified`, and are sent gzip-compressed (RFC 1952) when the
//!   request's `Accept-Encoding` allows gzip, always with `Vary: Accept-Encoding`. The entry
//!   file `jikji.json` is one of them. Compressed bodies are cached in memory by path, size
//!   and modification time.
//! - v1 bundles (`manifest.json` and the files it lists) are served as before, plus the text
//!   file rules above for `manifest.json`.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::SystemTime;

use flate2::write::GzEncoder;
use flate2::Compression;
use sha2::{Digest, Sha256};
use tiny_http::{Header, Method, Request, Response, Server, StatusCode};

use crate::error::{BuildError, Result};

/// Number of threads answering requests (so a large model download does not stall the page).
const WORKER_THREADS: usize = 4;

/// `Cache-Control` of bundle pages (`/bundle/p/…`): their names change with their content.
pub const PAGE_CACHE_CONTROL: &str = "public, max-age=31536000, immutable";

/// Largest text file (bytes) that is read into memory to get an `ETag` and a gzip form;
/// larger ones are streamed from disk as they are, without either.
pub const MAX_IN_MEMORY: u64 = 64 << 20;

/// Text files up to this size (bytes) are gzipped at level 9, larger ones at level 6 (the
/// embedder's ~20 MB wasm would otherwise take seconds on its first request).
const BEST_COMPRESSION_UP_TO: usize = 4 << 20;

/// What `jikji serve` serves: `/` → `web`, `/pkg/` → `pkg`, `/bundle/` → `bundle`, `/model/` → `model`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// Address to bind, e.g. `"127.0.0.1:8080"`; port 0 picks a free port.
    pub addr: String,
    /// Folder with `index.html`, `jikji.js`, `worker.js`, ...
    pub web: PathBuf,
    /// wasm-pack output folder (`jikji_engine.js`, `jikji_engine_bg.wasm`).
    pub pkg: PathBuf,
    /// Bundle folder (contains `manifest.json`).
    pub bundle: PathBuf,
    /// Model folder (contains `model.onnx` and `tokenizer.json`).
    pub model: Option<PathBuf>,
}

/// Serve forever on `opts.addr`, printing `listening on http://ADDR` once bound.
pub fn serve(opts: &ServeOptions) -> Result<()> {
    let (server, mounts) = bind(opts)?;
    let addr = server_addr(&server)?;
    announce(addr, opts);
    run(server, mounts);
    Ok(())
}

/// Bind (port 0 allowed), print the `listening on` line and serve from a background thread.
/// Returns the bound address and the thread's handle (the thread runs until the process ends).
pub fn serve_in_background(opts: &ServeOptions) -> Result<(SocketAddr, JoinHandle<()>)> {
    let (server, mounts) = bind(opts)?;
    let addr = server_addr(&server)?;
    announce(addr, opts);
    let handle = std::thread::Builder::new()
        .name("jikji-serve".into())
        .spawn(move || run(server, mounts))
        .map_err(|e| BuildError::Serve {
            message: "spawning the server thread".into(),
            source: Some(e),
        })?;
    Ok((addr, handle))
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

fn server_addr(server: &Server) -> Result<SocketAddr> {
    server
        .server_addr()
        .to_ip()
        .ok_or_else(|| BuildError::Serve {
            message: "server is not bound to an IP address".into(),
            source: None,
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
        let web = required(&opts.web, "web")?;
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
}

fn bind(opts: &ServeOptions) -> Result<(Server, Mounts)> {
    let mounts = Mounts::new(opts)?;
    let server = Server::http(opts.addr.as_str()).map_err(|e| BuildError::Serve {
        message: format!("cannot listen on {}: {e}", opts.addr),
        source: None,
    })?;
    Ok((server, mounts))
}

fn run(server: Server, mounts: Mounts) {
    let server = Arc::new(server);
    let mounts = Arc::new(mounts);
    let cache = Arc::new(TextCache::default());
    let mut threads = Vec::new();
    for i in 0..WORKER_THREADS {
        let server = Arc::clone(&server);
        let mounts = Arc::clone(&mounts);
        let cache = Arc::clone(&cache);
        let t = std::thread::Builder::new()
            .name(format!("jikji-http-{i}"))
            .spawn(move || {
                for request in server.incoming_requests() {
                    handle(request, &mounts, &cache);
                }
            });
        match t {
            Ok(t) => threads.push(t),
            Err(e) => eprintln!("warning: could not start a server thread: {e}"),
        }
    }
    if threads.is_empty() {
        // Fall back to answering on this thread.
        for request in server.incoming_requests() {
            handle(request, &mounts, &cache);
        }
    }
    for t in threads {
        let _ = t.join();
    }
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
    /// Anything else: `no-cache`; text files get an ETag and gzip.
    Other,
}

/// A text file's bytes, ETag and gzip form, valid while its size and mtime are unchanged.
struct Cached {
    len: u64,
    modified: Option<SystemTime>,
    /// 32 lowercase hex digits: the first 16 bytes of the SHA-256 of `raw`.
    hash: String,
    raw: Arc<Vec<u8>>,
    /// Made on the first request that accepts gzip.
    gzip: Option<Arc<Vec<u8>>>,
}

/// What [`TextCache::get`] gives: the hash (32 hex digits), the raw bytes and, when asked
/// for, the gzip bytes.
type TextForm = (String, Arc<Vec<u8>>, Option<Arc<Vec<u8>>>);

/// Text files read so far, by canonical path.
#[derive(Default)]
struct TextCache(Mutex<HashMap<PathBuf, Cached>>);

impl TextCache {
    /// The file's (hash, raw bytes, gzip bytes if `want_gzip`), reading and compressing it
    /// when it is new or changed on disk.
    fn get(
        &self,
        path: &Path,
        meta: &std::fs::Metadata,
        want_gzip: bool,
    ) -> std::io::Result<TextForm> {
        let modified = meta.modified().ok();
        let fresh = |c: &Cached| c.len == meta.len() && c.modified == modified;
        {
            let map = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(c) = map.get(path).filter(|c| fresh(c)) {
                if !want_gzip || c.gzip.is_some() {
                    return Ok((c.hash.clone(), c.raw.clone(), c.gzip.clone()));
                }
            }
        }
        // Read (and compress) outside the lock; a concurrent request may do the same work.
        let mut raw = Vec::with_capacity(meta.len() as usize);
        File::open(path)?
            .take(MAX_IN_MEMORY + 1)
            .read_to_end(&mut raw)?;
        let hash = hex::encode(&Sha256::digest(&raw)[..16]);
        let gzip = if want_gzip {
            Some(Arc::new(gzip(&raw)?))
        } else {
            None
        };
        let raw = Arc::new(raw);
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let entry = map.entry(path.to_path_buf()).or_insert_with(|| Cached {
            len: meta.len(),
            modified,
            hash: hash.clone(),
            raw: raw.clone(),
            gzip: None,
        });
        if !fresh(entry) || entry.hash != hash {
            *entry = Cached {
                len: meta.len(),
                modified,
                hash: hash.clone(),
                raw: raw.clone(),
                gzip: None,
            };
        }
        if entry.gzip.is_none() {
            entry.gzip = gzip.clone();
        }
        Ok((hash, raw, gzip.or_else(|| entry.gzip.clone())))
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

/// A shared byte buffer as a response body.
struct SharedBody {
    data: Arc<Vec<u8>>,
    pos: usize,
}

impl Read for SharedBody {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let rest = &self.data[self.pos.min(self.data.len())..];
        let n = rest.len().min(buf.len());
        buf[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

/// True if an `Accept-Encoding` value (RFC 9110 §12.5.3) allows gzip: `gzip`, `x-gzip` or
/// `*` listed with a q-value above 0 (a `gzip;q=0` refuses it even if `*` is listed).
pub fn accepts_gzip(accept_encoding: &str) -> bool {
    let mut star = false;
    for item in accept_encoding.split(',') {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let mut q = 1.0f32;
        for p in parts {
            let p = p.trim();
            if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                q = v.trim().parse().unwrap_or(0.0);
            }
        }
        match coding.as_str() {
            "gzip" | "x-gzip" => return q > 0.0,
            "*" => star = q > 0.0,
            _ => {}
        }
    }
    star
}

/// True if an `If-None-Match` value (RFC 9110 §13.1.2: `*` or a list of entity tags,
/// compared weakly) matches the entity tag `etag` (with its quotes).
pub fn none_match_hits(if_none_match: &str, etag: &str) -> bool {
    let bare = |t: &str| t.trim().trim_start_matches("W/").to_string();
    let want = bare(etag);
    if_none_match.trim() == "*" || if_none_match.split(',').any(|t| bare(t) == want)
}

/// True for the content types that are sent with an ETag and gzip (text, JSON, wasm, svg).
pub fn compressible(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || matches!(
            content_type,
            "application/json" | "application/wasm" | "image/svg+xml" | "application/manifest+json"
        )
}

fn request_header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request
        .headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

/// The response for a file that exists: page, text (ETag, gzip, 304) or other.
fn file_response(
    request: &Request,
    path: &Path,
    kind: Kind,
    cache: &TextCache,
) -> std::io::Result<Response<Box<dyn Read + Send>>> {
    let file = File::open(path)?;
    let meta = file.metadata()?;
    let ct = content_type(path);
    let boxed = |r: Box<dyn Read + Send>, len: usize, status: u16| {
        Response::new(StatusCode(status), Vec::new(), r, Some(len), None)
    };
    if kind == Kind::Page {
        let len = meta.len() as usize;
        let mut resp = boxed(Box::new(file), len, 200)
            .with_header(header("Content-Type", "application/octet-stream"))
            .with_chunked_threshold(usize::MAX);
        resp.add_header(header("Cache-Control", PAGE_CACHE_CONTROL));
        resp.add_header(header("X-Content-Type-Options", "nosniff"));
        return Ok(resp);
    }
    if !compressible(ct) || meta.len() > MAX_IN_MEMORY {
        // A huge chunked threshold keeps Content-Length on large files (the page shows
        // download progress from it).
        let len = meta.len() as usize;
        let mut resp = boxed(Box::new(file), len, 200)
            .with_header(header("Content-Type", ct))
            .with_chunked_threshold(usize::MAX);
        common_headers(&mut resp);
        return Ok(resp);
    }
    drop(file);
    let want_gzip = request_header(request, "Accept-Encoding").is_some_and(accepts_gzip);
    let (hash, raw, gz) = cache.get(path, &meta, want_gzip)?;
    let (etag, body) = match gz {
        Some(gz) if want_gzip => (format!("\"{hash}.gz\""), Some(gz)),
        _ => (format!("\"{hash}\""), None),
    };
    let not_modified =
        request_header(request, "If-None-Match").is_some_and(|v| none_match_hits(v, &etag));
    let mut resp = if not_modified {
        boxed(Box::new(std::io::empty()), 0, 304)
    } else {
        let data = body.clone().unwrap_or(raw);
        let len = data.len();
        boxed(Box::new(SharedBody { data, pos: 0 }), len, 200)
            .with_header(header("Content-Type", ct))
            .with_chunked_threshold(usize::MAX)
    };
    if body.is_some() && !not_modified {
        resp.add_header(header("Content-Encoding", "gzip"));
    }
    resp.add_header(header("ETag", &etag));
    resp.add_header(header("Vary", "Accept-Encoding"));
    common_headers(&mut resp);
    Ok(resp)
}

fn handle(request: Request, mounts: &Mounts, cache: &TextCache) {
    let method = request.method().clone();
    if method != Method::Get && method != Method::Head {
        let resp =
            text_response(405, "method not allowed\n").with_header(header("Allow", "GET, HEAD"));
        let _ = request.respond(resp);
        return;
    }
    let url = request.url().to_string();
    let resolved = resolve(mounts, &url);
    let result = match resolved {
        // tiny_http skips the body for HEAD itself.
        Resolved::File(path, kind) => match file_response(&request, &path, kind, cache) {
            Ok(resp) => request.respond(resp),
            Err(_) => request.respond(text_response(404, "not found\n")),
        },
        Resolved::Redirect(location) => request
            .respond(text_response(301, "moved\n").with_header(header("Location", &location))),
        Resolved::Bad(why) => request.respond(text_response(400, &format!("bad request: {why}\n"))),
        Resolved::NotFound => request.respond(text_response(404, "not found\n")),
    };
    if let Err(e) = result {
        // Client went away mid-download and the like: not worth more than a line.
        eprintln!("serve: {method} {url}: {e}");
    }
}

fn common_headers<R: std::io::Read>(resp: &mut Response<R>) {
    resp.add_header(header("Cache-Control", "no-cache"));
    resp.add_header(header("X-Content-Type-Options", "nosniff"));
}

fn text_response(status: u16, body: &str) -> Response<std::io::Cursor<Vec<u8>>> {
    let mut resp = Response::from_string(body)
        .with_status_code(StatusCode(status))
        .with_header(header("Content-Type", "text/plain; charset=utf-8"));
    common_headers(&mut resp);
    resp
}

fn header(name: &str, value: &str) -> Header {
    Header::from_bytes(name.as_bytes(), value.as_bytes()).expect("valid header")
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

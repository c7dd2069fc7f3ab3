// Jikji search worker (module worker). Holds the wasm Engine (BM25 + dense scan, a few hundred kB)
// and, once the model is asked for, the separate wasm Embedder (tract + tokenizers, ~20 MB);
// fetches the bundle and the model.
//
// Protocol (main → worker):   {id, type: "open", bundleUrl}
//                             {id, type: "loadModel", modelUrl}
//                             {id, type: "search", query, mode, topK}
// Replies (worker → main):    {id, ok: true, result}      result: JSON string from the engine
//                             {id, ok: false, error}      error: message string
//                             {id, type: "progress", phase, loaded, total, stage?}
// bundleUrl and modelUrl are absolute URLs ending in "/".
//
// loadModel: fetches model.onnx and tokenizer.json, then (only then) the embedder module and its
// wasm; verifies model.onnx's SHA-256 against the bundle manifest; builds the Embedder. Dense and
// hybrid searches embed the query with it and pass the vector to Engine.search_with_vector.

const ENGINE_URL = new URL("../pkg/jikji_engine.js", import.meta.url);
const EMBED_URL = new URL("../pkg/embed/jikji_embed_wasm.js", import.meta.url);
const EMBED_WASM_URL = new URL("../pkg/embed/jikji_embed_wasm_bg.wasm", import.meta.url);

let enginePromise = null; // Promise<Engine>
let bundleOpen = false;

function errorMessage(e) {
  if (e instanceof Error) return e.message || String(e);
  if (typeof e === "string") return e;
  try {
    return JSON.stringify(e);
  } catch {
    return String(e);
  }
}

function getEngine() {
  if (!enginePromise) {
    enginePromise = (async () => {
      let mod;
      try {
        mod = await import(ENGINE_URL.href);
      } catch (e) {
        throw new Error(`cannot load the search engine (${ENGINE_URL.pathname}): ${errorMessage(e)}`);
      }
      try {
        await mod.default(); // wasm-bindgen init; finds its .wasm next to the .js
      } catch (e) {
        throw new Error(`cannot start the search engine (wasm): ${errorMessage(e)}`);
      }
      return new mod.Engine();
    })();
  }
  return enginePromise;
}

/** Join a base URL (ending in "/") and a relative file name, escaping each path segment. */
function fileUrl(base, name) {
  const rel = name.split("/").map(encodeURIComponent).join("/");
  return new URL(rel, base).href;
}

async function fetchOk(url, what, signal = undefined) {
  let res;
  try {
    res = await fetch(url, { signal });
  } catch (e) {
    throw new Error(`${what}: network error fetching ${url}: ${errorMessage(e)}`);
  }
  if (!res.ok) throw new Error(`${what}: HTTP ${res.status} for ${url}`);
  return res;
}

/**
 * Read a response body into one Uint8Array, calling onBytes(n) for every chunk.
 * expected: the size to preallocate (Content-Length or the manifest's), or 0 if unknown.
 */
async function readBody(res, expected, onBytes) {
  if (!res.body) {
    const buf = new Uint8Array(await res.arrayBuffer());
    onBytes(buf.length);
    return buf;
  }
  const reader = res.body.getReader();
  let buf = new Uint8Array(expected > 0 ? expected : 1 << 16);
  let len = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    if (len + value.length > buf.length) {
      const grown = new Uint8Array(Math.max(buf.length * 2, len + value.length));
      grown.set(buf.subarray(0, len));
      buf = grown;
    }
    buf.set(value, len);
    len += value.length;
    onBytes(value.length);
  }
  return len === buf.length ? buf : buf.slice(0, len);
}

/** Throttled progress reporter: at most ~20 messages a second, plus the final one. */
function progressReporter(id, phase) {
  let last = 0;
  return (loaded, total, force = false, stage = undefined) => {
    const now = Date.now();
    if (!force && now - last < 50) return;
    last = now;
    const msg = { id, type: "progress", phase, loaded, total: Math.max(total, loaded) };
    if (stage) msg.stage = stage;
    self.postMessage(msg);
  };
}

async function openBundle(id, bundleUrl) {
  const engine = await getEngine();
  const report = progressReporter(id, "bundle");
  const manifestRes = await fetchOk(fileUrl(bundleUrl, "manifest.json"), "bundle manifest.json");
  const manifestBytes = await readBody(manifestRes, 0, () => {});
  let manifest;
  try {
    manifest = JSON.parse(new TextDecoder().decode(manifestBytes));
  } catch (e) {
    throw new Error(`bundle manifest.json is not valid JSON: ${errorMessage(e)}`);
  }
  if (!manifest || typeof manifest.files !== "object" || manifest.files === null) {
    throw new Error('bundle manifest.json has no "files" object');
  }
  const names = Object.keys(manifest.files).filter((n) => n !== "manifest.json");
  const total = names.reduce((s, n) => s + (Number(manifest.files[n]?.bytes) || 0), 0);
  let loaded = 0;
  report(0, total, true);
  engine.add_file("manifest.json", manifestBytes);
  // Fetch a few files at a time; add each as it arrives.
  const queue = names.slice();
  const fetchOne = async (name) => {
    const res = await fetchOk(fileUrl(bundleUrl, name), `bundle file ${name}`);
    const bytes = await readBody(res, Number(manifest.files[name]?.bytes) || 0, (n) => {
      loaded += n;
      report(loaded, total);
    });
    engine.add_file(name, bytes);
  };
  const lanes = Array.from({ length: Math.min(4, queue.length) }, async () => {
    while (queue.length) await fetchOne(queue.shift());
  });
  await Promise.all(lanes);
  report(loaded, total, true);
  const summary = engine.open();
  bundleOpen = true;
  return summary;
}

let modelPromise = null; // Promise<"true">; reset on failure so a retry can start over
let embedMod = null; // the embedder module, once its wasm is instantiated (kept across retries)
let embedder = null; // Embedder from the embedder module, once loaded

function loadModel(id, modelUrl) {
  if (!modelPromise) {
    modelPromise = fetchAndLoadModel(id, modelUrl).catch((e) => {
      modelPromise = null;
      throw e;
    });
  }
  return modelPromise;
}

/** Lowercase hex SHA-256 of bytes. */
async function sha256Hex(bytes) {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
  return Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Import the embedder module and instantiate its wasm from an already fetched Response
 * (compiled while it streams in), counting its bytes with onBytes.
 */
async function startEmbedderModule(wasmRes, onBytes) {
  let mod;
  try {
    mod = await import(EMBED_URL.href);
  } catch (e) {
    throw new Error(`cannot load the embedding engine (${EMBED_URL.pathname}): ${errorMessage(e)}`);
  }
  const counted = wasmRes.body
    ? new Response(
        wasmRes.body.pipeThrough(
          new TransformStream({
            transform(chunk, ctl) {
              onBytes(chunk.length);
              ctl.enqueue(chunk);
            },
          }),
        ),
        { headers: { "Content-Type": "application/wasm" } },
      )
    : wasmRes;
  try {
    await mod.default({ module_or_path: counted });
  } catch (e) {
    throw new Error(`cannot start the embedding engine (wasm): ${errorMessage(e)}`);
  }
  embedMod = mod;
  return mod;
}

async function fetchAndLoadModel(id, modelUrl) {
  const abort = new AbortController(); // on failure, stop the downloads still running
  try {
    return await fetchAndLoadModelWith(id, modelUrl, abort.signal);
  } catch (e) {
    abort.abort();
    throw e;
  }
}

async function fetchAndLoadModelWith(id, modelUrl, signal) {
  const engine = await getEngine();
  if (!bundleOpen) throw new Error("open the bundle before loading the model");
  const expected = engine.model_sha256();
  if (!expected) throw new Error("this bundle has no model: only bm25 search is available");
  const report = progressReporter(id, "model");
  const onnxUrl = fileUrl(modelUrl, "model.onnx");
  // The model files first; the embedder wasm only once they are on their way.
  const [onnxRes, tokRes] = await Promise.all([
    fetchOk(onnxUrl, "model model.onnx", signal),
    fetchOk(fileUrl(modelUrl, "tokenizer.json"), "model tokenizer.json", signal),
  ]);
  const wasmRes = embedMod ? null : await fetchOk(EMBED_WASM_URL.href, "embedding engine", signal);
  const lenOf = (r) => (r && Number(r.headers.get("Content-Length"))) || 0;
  // Content-Length is the compressed size when the server compresses; the total then grows.
  let total = lenOf(onnxRes) + lenOf(tokRes) + lenOf(wasmRes);
  let loaded = 0;
  report(0, total, true);
  const onBytes = (n) => {
    loaded += n;
    if (loaded > total) total = loaded;
    report(loaded, total);
  };
  const [onnx, tok, mod] = await Promise.all([
    readBody(onnxRes, lenOf(onnxRes), onBytes),
    readBody(tokRes, lenOf(tokRes), onBytes),
    embedMod || startEmbedderModule(wasmRes, onBytes),
  ]);
  report(loaded, loaded, true, "init");
  const actual = await sha256Hex(onnx);
  try {
    engine.check_model(actual);
  } catch (e) {
    throw new Error(`${onnxUrl}: ${errorMessage(e)}`);
  }
  let e;
  try {
    e = new mod.Embedder(onnx, tok);
  } catch (err) {
    throw new Error(`cannot load the model from ${modelUrl}: ${errorMessage(err)}`);
  }
  if (embedder) embedder.free();
  embedder = e;
  return "true";
}

async function search(query, mode, topK, includeArchived) {
  const engine = await getEngine();
  // The clock for expiry filtering (front matter `expires`); engines built before it
  // existed have no set_now.
  if (typeof engine.set_now === "function") engine.set_now(Date.now());
  if (typeof engine.set_include_archived === "function") {
    engine.set_include_archived(Boolean(includeArchived));
  }
  const m = String(mode);
  const dense = ["dense", "hybrid"].includes(m.toLowerCase());
  // Without the embedder the engine answers dense/hybrid with "needs the embedding model".
  const qvec = dense && embedder ? embedder.embed_query(String(query)) : null;
  return engine.search_with_vector(String(query), qvec, m, Number(topK));
}

self.onmessage = async (ev) => {
  const msg = ev.data || {};
  const { id, type } = msg;
  try {
    let result;
    switch (type) {
      case "open":
        result = await openBundle(id, msg.bundleUrl);
        break;
      case "loadModel":
        result = await loadModel(id, msg.modelUrl);
        break;
      case "search":
        result = await search(msg.query, msg.mode, msg.topK, msg.includeArchived);
        break;
      default:
        throw new Error(`unknown request type ${JSON.stringify(type)}`);
    }
    self.postMessage({ id, ok: true, result });
  } catch (e) {
    self.postMessage({ id, ok: false, error: errorMessage(e) });
  }
};

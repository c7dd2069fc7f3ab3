// Jikji search worker (module worker). Holds the wasm Engine; fetches the bundle and the model.
//
// Protocol (main → worker):   {id, type: "open", bundleUrl}
//                             {id, type: "loadModel", modelUrl}
//                             {id, type: "search", query, mode, topK}
// Replies (worker → main):    {id, ok: true, result}      result: JSON string from the engine
//                             {id, ok: false, error}      error: message string
//                             {id, type: "progress", phase, loaded, total, stage?}
// bundleUrl and modelUrl are absolute URLs ending in "/".

const ENGINE_URL = new URL("../pkg/jikji_engine.js", import.meta.url);

let enginePromise = null; // Promise<Engine>

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

async function fetchOk(url, what) {
  let res;
  try {
    res = await fetch(url);
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
  return engine.open();
}

let modelPromise = null; // Promise<"true">; reset on failure so a retry can start over

function loadModel(id, modelUrl) {
  if (!modelPromise) {
    modelPromise = fetchAndLoadModel(id, modelUrl).catch((e) => {
      modelPromise = null;
      throw e;
    });
  }
  return modelPromise;
}

async function fetchAndLoadModel(id, modelUrl) {
  const engine = await getEngine();
  const report = progressReporter(id, "model");
  const [onnxRes, tokRes] = await Promise.all([
    fetchOk(fileUrl(modelUrl, "model.onnx"), "model model.onnx"),
    fetchOk(fileUrl(modelUrl, "tokenizer.json"), "model tokenizer.json"),
  ]);
  const lenOf = (r) => Number(r.headers.get("Content-Length")) || 0;
  // Content-Length is the compressed size when the server compresses; the total then grows.
  let total = lenOf(onnxRes) + lenOf(tokRes);
  let loaded = 0;
  report(0, total, true);
  const onBytes = (n) => {
    loaded += n;
    if (loaded > total) total = loaded;
    report(loaded, total);
  };
  const [onnx, tok] = await Promise.all([
    readBody(onnxRes, lenOf(onnxRes), onBytes),
    readBody(tokRes, lenOf(tokRes), onBytes),
  ]);
  report(loaded, loaded, true, "init");
  engine.load_model(onnx, tok);
  return "true";
}

async function search(query, mode, topK) {
  const engine = await getEngine();
  return engine.search(String(query), String(mode), Number(topK));
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
        result = await search(msg.query, msg.mode, msg.topK);
        break;
      default:
        throw new Error(`unknown request type ${JSON.stringify(type)}`);
    }
    self.postMessage({ id, ok: true, result });
  } catch (e) {
    self.postMessage({ id, ok: false, error: errorMessage(e) });
  }
};

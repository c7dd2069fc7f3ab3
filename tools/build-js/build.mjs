// scripts/build-js: the served page from the sources in web/, bundled and minified by esbuild.
//
//   OUT/app.js          web/app.js with everything it imports (jikji-search.js → jikji.js): the page's
//                       one script (the dynamic import of jikji-search.js stays lazy in order,
//                       not in a file: app.js sets the element's attributes before defining it)
//   OUT/worker.js       web/worker.js with web/pages.js and PKG/jikji_engine.js (the BM25 engine's
//                       wasm-bindgen glue; the dense engine's and the query model's glue stay in
//                       PKG/dense/, PKG/qmodel/, imported only for dense/hybrid)
//   OUT/jikji.js        the JS API alone (the npm package's entry; sites that import it)
//   OUT/jikji-search.js the <jikji-search> element, importing ./jikji.js (the npm package's
//                       "jikji-web/search": one copy of the API beside it)
//   OUT/style.css, OUT/jikji-search.css   minified
//   OUT/index.html      web/index.html as it is (every file it names must be in OUT)
//   OUT/favicon.svg     web/favicon.svg as it is (the page's icon: the CSP allows no data: URL)
// Source maps (external, no sourceMappingURL comment) go to ROOT/target/build-js-maps/ (OUT-maps/
// for another OUT), out of the served folders. OUT must be new or a folder this script made (it
// holds .jikji-build-js); each file is written whole and renamed into place (a server serving OUT
// never sends half a file or misses one), then files of an older build are removed (sw.js,
// stamped afterwards, is kept). Fails when a bundle still imports another file (a request more on the first
// query) or when index.html names a file that is not there.
//
// usage: node build.mjs --root ROOT --pkg PKG --out OUT
import { existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import * as esbuild from "esbuild";

const { values } = parseArgs({ options: { root: { type: "string" }, pkg: { type: "string" }, out: { type: "string" } } });
const { root, pkg, out } = values;
if (!root || !pkg || !out) {
  console.error("usage: node build.mjs --root ROOT --pkg PKG --out OUT");
  process.exit(2);
}
const fail = (msg) => {
  console.error(`build-js: ${msg}`);
  process.exit(1);
};
const web = path.join(root, "web");
const glue = path.join(pkg, "jikji_engine.js");
if (!existsSync(glue)) fail(`${glue} missing: run scripts/build-wasm (it runs this script after wasm-bindgen)`);
const MARKER = ".jikji-build-js";
if (existsSync(out) && readdirSync(out).length && !existsSync(path.join(out, MARKER))) {
  fail(`${out} is not empty and has no ${MARKER}: not a folder scripts/build-js made; refusing to write into it`);
}
mkdirSync(out, { recursive: true });
/** Names written into OUT by this build. */
const written = new Set();
/** Writes OUT/name whole, then renames it into place. */
const put = (name, bytes) => {
  const file = path.join(out, name);
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, bytes);
  renameSync(tmp, file);
  written.add(name);
};
put(MARKER, "made by scripts/build-js from web/: edit the sources there, not these files\n");
// Out of the served folders: target/build-js-maps for the page (pkg/web), else beside OUT.
const maps = path.resolve(out) === path.join(root, "pkg/web") ? path.join(root, "target/build-js-maps") : `${out}-maps`;
mkdirSync(maps, { recursive: true });

/** The worker's import of the engine glue ("../pkg/jikji_engine.js" in web/worker.js) → PKG's. */
const engineGlue = {
  name: "jikji-engine-glue",
  setup(b) {
    b.onResolve({ filter: /^\.\.\/pkg\/jikji_engine\.js$/ }, (a) =>
      path.resolve(a.resolveDir) === web ? { path: glue } : undefined,
    );
  },
};
/** jikji-search.js's import of ./jikji.js stays an import (the package ships jikji.js beside it). */
const apiExternal = {
  name: "jikji-api-external",
  setup(b) {
    b.onResolve({ filter: /^\.\/jikji\.js$/ }, () => ({ path: "./jikji.js", external: true }));
  },
};

const common = {
  bundle: true,
  minify: true,
  format: "esm",
  target: "es2022",
  sourcemap: "external",
  sourcesContent: true,
  write: false,
  metafile: true,
  logLevel: "warning",
  absWorkingDir: root,
};
const builds = [
  { entry: "app.js", plugins: [], external: [] },
  { entry: "worker.js", plugins: [engineGlue], external: [] },
  { entry: "jikji.js", plugins: [], external: [] },
  { entry: "jikji-search.js", plugins: [apiExternal], external: ["./jikji.js"] },
];
const sizes = [];
for (const { entry, plugins, external } of builds) {
  const r = await esbuild.build({ ...common, entryPoints: [path.join(web, entry)], outfile: path.join(out, entry), plugins });
  for (const [file, o] of Object.entries(r.metafile.outputs)) {
    if (file.endsWith(".map")) continue;
    const imports = o.imports.map((i) => i.path);
    const unexpected = imports.filter((p) => !external.includes(p));
    if (unexpected.length) fail(`${entry}: the bundle still imports ${unexpected.join(", ")}`);
  }
  if (entry === "worker.js") {
    const inputs = Object.keys(r.metafile.inputs).map((i) => path.resolve(root, i));
    for (const want of [path.join(web, "pages.js"), path.join(web, "inflate.js"), glue]) {
      if (!inputs.includes(want)) fail(`worker.js: ${want} is not in the bundle (inputs: ${inputs.join(", ")})`);
    }
  }
  for (const f of r.outputFiles) {
    if (f.path.endsWith(".map")) writeFileSync(path.join(maps, path.basename(f.path)), f.contents);
    else {
      put(path.basename(f.path), f.contents);
      sizes.push(`${entry} ${f.contents.length} B`);
    }
  }
}
for (const css of ["style.css", "jikji-search.css"]) {
  const r = await esbuild.build({ ...common, bundle: false, sourcemap: false, metafile: false, entryPoints: [path.join(web, css)], outfile: path.join(out, css) });
  for (const f of r.outputFiles) put(path.basename(f.path), f.contents);
}
put("index.html", readFileSync(path.join(web, "index.html")));
put("favicon.svg", readFileSync(path.join(web, "favicon.svg")));
// Every script, style and preload the page names must be a file of OUT.
const html = readFileSync(path.join(out, "index.html"), "utf8");
for (const m of html.matchAll(/\b(?:src|href)="([^"]+)"/g)) {
  const ref = m[1];
  if (/^[a-z]+:/i.test(ref) || ref.startsWith("#")) continue;
  if (!existsSync(path.join(out, ref))) fail(`index.html names ${ref}, which is not in ${out}`);
}
// Files of an older build (pages.js, say) go; sw.js is stamped after this script.
for (const name of readdirSync(out)) {
  if (written.has(name) || name === "sw.js") continue;
  const file = path.join(out, name);
  if (statSync(file).isFile()) rmSync(file);
}
console.error(`build-js: wrote ${out} (${sizes.join(", ")}); source maps in ${maps}`);

// The 3-term queries of a generated corpus (scripts/gen-corpus) for scripts/bench-paged, and as a
// command: node tests/bench-paged/gen-queries.mjs CORPUS_DIR > queries.jsonl (`{"id", "text"}` a line,
// the same list the bench replays on that corpus).

import { readFileSync, readdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** 3-term queries per generated corpus. */
const GEN_QUERIES = 200;
const GEN_STOP = new Set("that this with from have were which their there been also into than then they them these those what when where while would could should about after before other such only more most some very will shall upon your".split(" "));

/** mulberry32: a small seeded PRNG, so the generated queries are the same every run. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** The query terms a paragraph offers: Latin words of 4+ letters (not stopwords), Hangul
 * words of 2+ syllables, Han bigrams. */
export function paragraphTerms(p) {
  const out = [];
  for (const m of p.matchAll(/[A-Za-z]{4,}/g)) if (!GEN_STOP.has(m[0].toLowerCase())) out.push(m[0].toLowerCase());
  for (const m of p.matchAll(/[\uac00-\ud7a3]{2,}/g)) out.push(m[0]);
  for (const m of p.matchAll(/[\u4e00-\u9fff]{2,}/g)) for (let i = 0; i + 2 <= m[0].length; i += 2) out.push(m[0].slice(i, i + 2));
  return [...new Set(out)];
}

/** The `.md` files under `corpus`, in sorted path order. */
export function genFiles(corpus) {
  const files = [];
  const walk = (d) => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (/\.md$/.test(e.name)) files.push(p);
    }
  };
  walk(corpus);
  return files;
}

/** A file's paragraphs after its front matter. */
export function genParagraphs(f) {
  let text = readFileSync(f, "utf8");
  const fm = /^---\r?\n([\s\S]*?)\r?\n---\r?\n/.exec(text);
  if (fm) text = text.slice(fm[0].length);
  return text.split(/\r?\n\s*\r?\n/).filter((p) => p.trim());
}

/** GEN_QUERIES queries `{id, text}` (seed 12): three distinct terms of one paragraph (not a
 * heading or Source line) of a random file; `read(file)` gives a file's paragraphs. */
export function genQueries(files, read = genParagraphs) {
  const rnd = prng(12);
  const queries = [];
  for (let tries = 0; queries.length < GEN_QUERIES && tries < GEN_QUERIES * 20; tries++) {
    const paras = read(files[Math.floor(rnd() * files.length)]).filter((p) => !/^(#|Source:|출처:)/.test(p));
    if (!paras.length) continue;
    const terms = paragraphTerms(paras[Math.floor(rnd() * paras.length)]);
    if (terms.length < 3) continue;
    const pick = [];
    while (pick.length < 3) {
      const t = terms[Math.floor(rnd() * terms.length)];
      if (!pick.includes(t)) pick.push(t);
    }
    queries.push({ id: String(queries.length + 1), text: pick.join(" ") });
  }
  return queries;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  if (process.argv.length !== 3) {
    console.error("usage: node tests/bench-paged/gen-queries.mjs CORPUS_DIR");
    process.exit(2);
  }
  for (const q of genQueries(genFiles(process.argv[2]))) console.log(JSON.stringify(q));
}

#!/usr/bin/env python3
"""Check models/e5-small/model.onnx (and model-int8.onnx) against the reference values in
notes/model.md.

Runs each graph with onnxruntime and the tokenizer with Python `tokenizers`, asserts
  * token ids exactly,
  * the first 8 dims of sentence_embedding to 1e-3,
  * the listed cosines to 1e-3,
  * unit norm, and that a right-padded batch gives the same vectors as one-by-one runs,
and, when more than one model is checked, that every model's embeddings of the reference texts
agree with the first one's to 1e-5 (max abs difference per component).
Exits non-zero on any mismatch.

  check_model.py [--model-dir models/e5-small] [--onnx FILE ...]
                 [--write-reference embed/tests/reference.json]

--onnx names the graphs to check (relative names are taken inside --model-dir); the default is
model.onnx plus model-int8.onnx when that file exists.

With --write-reference, the measured values of the first model (full precision, onnxruntime) are
written as JSON for the Rust embed crate's tests:
  {"model": ..., "tolerance": 1e-3,
   "texts": [{"text": ..., "ids": [...], "first8": [...]}, ...],
   "cosines": [[i, j, value], ...]}          (i, j are 0-based indices into "texts")
"""
import argparse
import json
import os
import sys

import numpy as np

TOL = 1e-3
AGREE_TOL = 1e-5  # between two graphs of the same weights (q4 vs int8 linear layers)

# From notes/model.md (4-bit model, onnxruntime).
REFERENCE = [
    (
        "query: 學而時習之，不亦說乎",
        [0, 41, 1294, 12, 6, 5020, 1107, 1545, 44293, 1420, 4, 562, 13915, 2640, 37882, 2],
        [0.0631, -0.02508, -0.06882, -0.04706, 0.07586, -0.03437, -0.01244, 0.0552],
    ),
    (
        "query: 배우고 때때로 익히면 또한 기쁘지 아니한가",
        [0, 41, 1294, 12, 53050, 1077, 8978, 45182, 1083, 6, 23966, 7194, 4253, 21702, 7463, 137750, 1190,
         32028, 993, 713, 2],
        [0.02504, -0.02292, -0.05801, -0.04223, 0.09861, -0.05446, 0.01911, 0.01826],
    ),
    (
        "query: Is it not pleasant to learn with a constant perseverance and application?",
        [0, 41, 1294, 12, 2071, 442, 959, 208331, 47, 30698, 678, 10, 53697, 217734, 3956, 136, 38415, 32, 2],
        [0.02165, -0.02303, -0.01997, -0.03789, 0.05268, -0.07355, 0.0274, 0.00784],
    ),
    (
        "passage: 메밀꽃 필 무렵",
        [0, 46692, 12, 33004, 56730, 102924, 57999, 8143, 236343, 2],
        [0.06762, -0.01138, 0.00194, -0.07715, 0.12185, -0.0307, -0.01378, -0.01004],
    ),
    (
        "query: how to bake sourdough bread",
        [0, 41, 1294, 12, 3642, 47, 122597, 221, 84093, 72089, 179967, 2],
        [0.0323, -0.04118, -0.03541, -0.07028, 0.10658, -0.06891, 0.05969, 0.03182],
    ),
]
# 0-based (i, j, cosine)
COSINES = [(0, 1, 0.8937), (0, 2, 0.8387), (1, 2, 0.8547), (0, 4, 0.7456), (2, 4, 0.7719)]


def check_graph(ort, path, tok_ids, failures):
    """Run one ONNX graph on the reference texts; append problems to failures.

    Returns (vecs [n, 384], cosines [[i, j, value], ...])."""
    name = os.path.basename(path)
    print(f"-- {path}")
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    vecs = []
    for (text, _, want8), ids in zip(REFERENCE, tok_ids):
        a = np.array([ids], np.int64)
        (v,) = sess.run(["sentence_embedding"], {"input_ids": a, "attention_mask": np.ones_like(a)})
        v = v[0]
        if v.shape != (384,):
            failures.append(f"{name}: output shape {v.shape} for {text!r}, expected (384,)")
            v = np.resize(v, 384)
        if abs(float(np.linalg.norm(v)) - 1.0) > 1e-4:
            failures.append(f"{name}: norm {np.linalg.norm(v)} for {text!r}, expected 1")
        d = np.abs(v[:8] - np.array(want8, np.float32)).max()
        if d > TOL:
            failures.append(f"{name}: first8 differ by {d:.2e} for {text!r}:\n  got  {v[:8].tolist()}\n  want {want8}")
        print(f"{'ok ' if d <= TOL else 'BAD'} max|d|={d:.1e}  {text}")
        vecs.append(v)
    vecs = np.stack(vecs)

    cos = []
    for i, j, want in COSINES:
        got = float(np.dot(vecs[i], vecs[j]))
        ok = abs(got - want) <= TOL
        print(f"{'ok ' if ok else 'BAD'} cos({i},{j}) = {got:.5f} (want {want})")
        if not ok:
            failures.append(f"{name}: cos({i},{j}) = {got:.5f}, want {want}")
        cos.append([i, j, round(got, 6)])

    # Right-padded batch (mask 0 on pads, pad id 1) must reproduce the single runs.
    S = max(map(len, tok_ids))
    ids = np.full((len(tok_ids), S), 1, np.int64)
    mask = np.zeros((len(tok_ids), S), np.int64)
    for r, s in enumerate(tok_ids):
        ids[r, : len(s)] = s
        mask[r, : len(s)] = 1
    (batch,) = sess.run(["sentence_embedding"], {"input_ids": ids, "attention_mask": mask})
    d = float(np.abs(batch - vecs).max())
    print(f"{'ok ' if d < 1e-4 else 'BAD'} padded batch vs single runs: max|d|={d:.1e}")
    if d >= 1e-4:
        failures.append(f"{name}: padded batch differs from single runs by {d:.2e}")
    return vecs, cos


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-dir", default=os.path.join(root, "models", "e5-small"))
    ap.add_argument("--onnx", nargs="+", metavar="FILE",
                    help="graphs to check, relative to --model-dir unless absolute "
                         "(default: model.onnx, plus model-int8.onnx if present)")
    ap.add_argument("--write-reference", metavar="PATH", help="write measured reference JSON (first model) here")
    args = ap.parse_args()

    try:
        import onnxruntime as ort
        import tokenizers
    except ImportError as e:
        sys.exit(f"check_model: needs onnxruntime and tokenizers ({e}); "
                 "python3 -m pip install onnxruntime tokenizers")

    if args.onnx:
        paths = [os.path.join(args.model_dir, p) for p in args.onnx]
    else:
        paths = [os.path.join(args.model_dir, "model.onnx")]
        if os.path.exists(os.path.join(args.model_dir, "model-int8.onnx")):
            paths.append(os.path.join(args.model_dir, "model-int8.onnx"))
    for p in paths:
        if not os.path.isfile(p):
            sys.exit(f"check_model: {p} not found")

    tok = tokenizers.Tokenizer.from_file(os.path.join(args.model_dir, "tokenizer.json"))
    tok.no_padding()
    tok.no_truncation()

    failures = []
    tok_ids = []
    for text, want_ids, _ in REFERENCE:
        ids = tok.encode(text).ids
        if ids != want_ids:
            failures.append(f"token ids differ for {text!r}:\n  got  {ids}\n  want {want_ids}")
        tok_ids.append(ids)
    print(f"{'ok ' if not failures else 'BAD'} token ids of {len(REFERENCE)} reference texts")

    results = [check_graph(ort, p, tok_ids, failures) for p in paths]

    # Different graphs of the same weights must give the same embeddings.
    vecs0 = results[0][0]
    for p, (vecs, _) in zip(paths[1:], results[1:]):
        d = float(np.abs(vecs - vecs0).max())
        ok = d <= AGREE_TOL
        print(f"{'ok ' if ok else 'BAD'} {os.path.basename(p)} vs {os.path.basename(paths[0])}: "
              f"max|d|={d:.1e} over {len(vecs)} texts (tolerance {AGREE_TOL:.0e})")
        if not ok:
            failures.append(f"{os.path.basename(p)} and {os.path.basename(paths[0])} disagree by {d:.2e} "
                            f"(> {AGREE_TOL:.0e})")

    if args.write_reference:
        if failures:
            print("not writing reference: checks failed", file=sys.stderr)
        else:
            vecs, cos = results[0]
            rows = [{"text": text, "ids": ids, "first8": [round(float(x), 7) for x in v[:8]]}
                    for (text, _, _), ids, v in zip(REFERENCE, tok_ids, vecs)]
            out = {
                "model": "multilingual-e5-small-q4",
                "source": "scripts/check_model.py (onnxruntime %s, tokenizers %s)"
                % (ort.__version__, tokenizers.__version__),
                "tolerance": TOL,
                "texts": rows,
                "cosines": cos,
            }
            os.makedirs(os.path.dirname(os.path.abspath(args.write_reference)), exist_ok=True)
            dump = lambda o: json.dumps(o, ensure_ascii=False)
            lines = ["{"]
            for key in ("model", "source", "tolerance"):
                lines.append(f" {dump(key)}: {dump(out[key])},")
            lines.append(' "texts": [')
            lines.append(",\n".join("  " + dump(r) for r in rows))
            lines.append(" ],")
            lines.append(' "cosines": [' + ", ".join(dump(c) for c in cos) + "]")
            lines.append("}")
            text = "\n".join(lines) + "\n"
            assert json.loads(text) == out
            with open(args.write_reference, "w", encoding="utf-8") as f:
                f.write(text)
            print(f"wrote {args.write_reference}")

    if failures:
        print("\nFAILED:\n" + "\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print("all checks passed")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Embed `jikji chunk` output on a Ray cluster (Ray Data + onnxruntime) for `jikji build --vectors`.

    jikji chunk books > chunks.jsonl
    scripts/ray-embed.py chunks.jsonl --out vectors.npy [--model models/e5-small] [--address auto]
    jikji build books --out bundle --vectors vectors.npy

Runs the builder's own model file (`MODEL/model-int8.onnx`, else `model.onnx`) under onnxruntime in
Ray Data actors (`map_batches` over the chunks, one onnxruntime session per actor, each with
--threads-per-actor intra-op threads), with the same tokenizer (`tokenizer.json`, Python
`tokenizers`), the `passage: ` prefix, truncation to 512 tokens keeping `</s>` last, right padding
with id 1 and length-sorted sub-batches, exactly as `jikji-embed` feeds the graph. Writes
`OUT` (float32 [n, 384], row i = line i of the chunks file) and `OUT` with the extension `.json`
(the sidecar: model file and SHA-256, prefix, dim, count, and per row the chunk `id`,
`text_sha256`, `tokens`, `truncated`); the format is documented in builder/src/ingest/import.rs
and README ("Embedding elsewhere").

--address: a running cluster (`ray start --head` on one machine, `ray start --address HEAD:6379`
on the others, then `--address auto` or `--address HEAD:6379`); without it a local Ray instance is
started with --num-cpus CPUs. The model folder must be at the same path on every node (or give
--model a shared path).

The Python packages (ray[data], onnxruntime, numpy, tokenizers) are installed into a virtual
environment by `scripts/ray-embed` (the wrapper), which then runs this file with it.
"""
import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

MAX_TOKENS = 512
DIM = 384
PREFIX = "passage: "


class Embed:
    """A Ray Data actor: one onnxruntime session and tokenizer, reused for every batch."""

    def __init__(self, model_file, tokenizer_file, threads, sub_batch):
        import onnxruntime as ort
        from tokenizers import Tokenizer

        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        self.sess = ort.InferenceSession(model_file, so, providers=["CPUExecutionProvider"])
        self.tok = Tokenizer.from_file(tokenizer_file)
        self.tok.no_padding()
        self.tok.no_truncation()
        self.eos = self.tok.token_to_id("</s>")
        self.pad = self.tok.token_to_id("<pad>")
        self.sub_batch = sub_batch

    def __call__(self, batch):
        texts = list(batch["text"])
        ids = [e.ids for e in self.tok.encode_batch([PREFIX + t for t in texts])]
        truncated = [len(i) > MAX_TOKENS for i in ids]
        ids = [i[: MAX_TOKENS - 1] + [self.eos] if len(i) > MAX_TOKENS else i for i in ids]
        vecs = np.zeros((len(ids), DIM), np.float32)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        for s in range(0, len(order), self.sub_batch):
            b = order[s : s + self.sub_batch]
            width = max(len(ids[i]) for i in b)
            x = np.full((len(b), width), self.pad, np.int64)
            m = np.zeros((len(b), width), np.int64)
            for r, i in enumerate(b):
                x[r, : len(ids[i])] = ids[i]
                m[r, : len(ids[i])] = 1
            vecs[b] = self.sess.run(["sentence_embedding"], {"input_ids": x, "attention_mask": m})[0]
        return {
            "row": batch["row"],
            "vector": vecs,
            "tokens": np.array([len(i) for i in ids], np.int64),
            "truncated": np.array(truncated, np.bool_),
        }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("chunks", help="`jikji chunk` output (JSON lines with id and text)")
    ap.add_argument("--out", required=True, help="vectors file to write (.npy); the sidecar is OUT with .json")
    ap.add_argument("--model", default="models/e5-small", help="model folder (default models/e5-small)")
    ap.add_argument("--address", default=None, help="Ray cluster address (default: start a local instance)")
    ap.add_argument("--num-cpus", type=int, default=os.cpu_count(), help="CPUs of the local instance")
    ap.add_argument("--actors", type=int, default=None, help="embedding actors (default: CPUs / threads per actor)")
    ap.add_argument("--threads-per-actor", type=int, default=1, help="onnxruntime intra-op threads per actor")
    ap.add_argument("--batch", type=int, default=64, help="chunks per Ray Data batch")
    ap.add_argument("--sub-batch", type=int, default=16, help="chunks per onnxruntime run (length-sorted)")
    a = ap.parse_args()
    if not a.out.endswith(".npy"):
        sys.exit(f"ray-embed: --out {a.out}: must end in .npy")

    model_file = os.path.abspath(os.path.join(a.model, "model-int8.onnx"))
    if not os.path.exists(model_file):
        model_file = os.path.abspath(os.path.join(a.model, "model.onnx"))
    tokenizer_file = os.path.abspath(os.path.join(a.model, "tokenizer.json"))
    for f in (model_file, tokenizer_file):
        if not os.path.exists(f):
            sys.exit(f"ray-embed: {f} not found (run scripts/setup-model, or pass --model)")
    with open(model_file, "rb") as f:
        model_sha = hashlib.sha256(f.read()).hexdigest()

    # The chunks: ids and text hashes stay on the driver (the sidecar); texts go to Ray.
    rows = []
    with open(a.chunks, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                c = json.loads(line)
                rows.append((c["id"], c["text"]))
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"ray-embed: {a.chunks}:{n}: not a `jikji chunk` line with id and text ({e})")
    if not rows:
        sys.exit(f"ray-embed: {a.chunks}: no chunks")

    import ray

    t0 = time.perf_counter()
    if a.address:
        ray.init(address=a.address)
    else:
        ray.init(num_cpus=a.num_cpus, include_dashboard=False)
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False
    cpus = int(ray.cluster_resources().get("CPU", 1))
    actors = a.actors or max(1, cpus // a.threads_per_actor)
    ds = ray.data.from_items([{"row": i, "text": t} for i, (_, t) in enumerate(rows)])
    ds = ds.map_batches(
        Embed,
        fn_constructor_args=(model_file, tokenizer_file, a.threads_per_actor, a.sub_batch),
        batch_size=a.batch,
        compute=ray.data.ActorPoolStrategy(size=actors),
        num_cpus=a.threads_per_actor,
        batch_format="numpy",
    )
    out = np.lib.format.open_memmap(a.out, mode="w+", dtype="<f4", shape=(len(rows), DIM))
    tokens = [0] * len(rows)
    truncated = [False] * len(rows)
    seen = 0
    for b in ds.iter_batches(batch_format="numpy", batch_size=None):
        out[b["row"]] = b["vector"]
        for r, t, tr in zip(b["row"], b["tokens"], b["truncated"]):
            tokens[r] = int(t)
            truncated[r] = bool(tr)
        seen += len(b["row"])
    out.flush()
    del out
    if seen != len(rows):
        sys.exit(f"ray-embed: got {seen} vectors for {len(rows)} chunks")
    secs = time.perf_counter() - t0
    sidecar = {
        "format": "jikji-vectors",
        "version": 1,
        "model": {"file": os.path.basename(model_file), "sha256": model_sha},
        "prefix": PREFIX,
        "dim": DIM,
        "count": len(rows),
        "chunks": [
            {"id": cid, "text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
             "tokens": tokens[i], "truncated": truncated[i]}
            for i, (cid, text) in enumerate(rows)
        ],
    }
    side = a.out[: -len(".npy")] + ".json"
    with open(side, "w", encoding="utf-8") as f:
        json.dump(sidecar, f)
    print(f"ray-embed: {len(rows)} chunks, {sum(tokens)} tokens on {actors} actor(s) x "
          f"{a.threads_per_actor} thread(s) ({cpus} CPUs) in {secs:.1f} s (Ray start included); "
          f"wrote {a.out} and {side}", file=sys.stderr)
    ray.shutdown()


if __name__ == "__main__":
    main()

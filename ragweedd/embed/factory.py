"""``make_embedder(spec, cfg)``: from a configuration string to an Embedder.

Forms: ``local:all-minilm-l6-v2`` (the embedded default: linear layers in int8, weights from the
int8 ONNX export; ``local:all-minilm-l6-v2-f32`` runs the upstream float32 weights for exact upstream
vectors, ``local:all-minilm-l6-v2-int8`` runs the int8-stored ONNX export as it is),
``ollama:NAME`` (NAME may carry a tag, ``ollama:nomic-embed-text:v1.5``) and ``hash:DIM``
(deterministic, for tests). Importing this module is cheap: the embedder modules, and
numpy/onnxruntime with them, load when an embedder is made.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ragweedd.errors import ConfigError

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.embed.base import Embedder

ALLOWED_FORMS = ("'local:all-minilm-l6-v2', 'ollama:NAME' (e.g. 'ollama:nomic-embed-text') "
                 "or 'hash:DIM' (e.g. 'hash:64')")
# name after "local:" -> variant of MiniLMEmbedder
LOCAL_MODELS = {"all-minilm-l6-v2": "q8", "all-minilm-l6-v2-f32": "f32", "all-minilm-l6-v2-int8": "int8"}
_HASH_RE = re.compile(r"^\d{1,6}$")


def make_embedder(spec: str, cfg: Config | None = None, *, key: str = "embed.model") -> "Embedder":
    """Build the embedder ``spec`` names; ``key`` is the config key named in errors."""
    if cfg is None:
        from ragweedd.config import default_config

        cfg = default_config()
    if not isinstance(spec, str) or ":" not in spec:
        raise ConfigError(f"key '{key}' has value {spec!r}, which names no embedder", hint="allowed: " + ALLOWED_FORMS)
    kind, _, rest = spec.strip().partition(":")
    kind = kind.lower()
    if kind == "local":
        if rest.lower() not in LOCAL_MODELS:
            raise ConfigError(f"key '{key}' has value {spec!r}: the local embedder {rest!r} is not bundled",
                              hint="bundled: " + ", ".join("local:" + m for m in LOCAL_MODELS)
                              + "; or use 'ollama:NAME'")
        from ragweedd.embed.local import MiniLMEmbedder

        return MiniLMEmbedder(threads=cfg.embed_threads, batch_size=cfg.embed_batch_size,
                              variant=LOCAL_MODELS[rest.lower()])
    if kind == "ollama":
        if not rest or any(c.isspace() for c in rest):
            raise ConfigError(f"key '{key}' has value {spec!r}: the Ollama model name is missing or has spaces",
                              hint="e.g. 'ollama:nomic-embed-text'")
        from ragweedd.embed.ollama import OllamaEmbedder

        return OllamaEmbedder(rest, cfg.embed_ollama_url)
    if kind == "hash":
        from ragweedd.embed.hashing import MAX_DIM, MIN_DIM, HashEmbedder

        if not _HASH_RE.match(rest) or not MIN_DIM <= int(rest) <= MAX_DIM:
            raise ConfigError(f"key '{key}' has value {spec!r}: the hash dimension must be a whole number "
                              f"from {MIN_DIM} to {MAX_DIM}", hint="e.g. 'hash:64'")
        return HashEmbedder(int(rest))
    raise ConfigError(f"key '{key}' has value {spec!r}, which names no embedder", hint="allowed: " + ALLOWED_FORMS)

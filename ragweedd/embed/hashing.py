"""A deterministic feature-hashing embedder (``hash:DIM``) for fast tests.

Features are lower-cased word unigrams and character trigrams of each word (with boundary markers),
hashed with BLAKE2b so the vectors are identical across processes and machines (Python's ``hash()``
is salted per process). Texts sharing words or word pieces get similar vectors, which is enough for
tests of ranking, merging and storage that must not pay for the real model.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Sequence

from ragweedd.errors import ConfigError, EmbedderError

if TYPE_CHECKING:
    import numpy as np

# Bump when the feature set or weights change: the id changes with it, so stored vectors made by an
# older version are never mixed with new ones.
_ALGO_VERSION = "fh1"
_WORD_RE = re.compile(r"\w+", re.UNICODE)
_WORD_WEIGHT = 1.0
_TRIGRAM_WEIGHT = 0.5
MIN_DIM, MAX_DIM = 2, 65536


class HashEmbedder:
    """Feature hashing into ``dim`` buckets with a hashed sign (so collisions cancel on average)."""

    max_input_tokens = 8192
    preferred_chunk_tokens = 256
    preferred_overlap_pct = 15
    preferred_overlap_pct_pdf = 50

    def __init__(self, dim: int) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or not MIN_DIM <= dim <= MAX_DIM:
            raise ConfigError(
                f"key 'embed.model': hash embedder dimension {dim!r} is not allowed",
                hint=f"use 'hash:DIM' with DIM a whole number from {MIN_DIM} to {MAX_DIM}, e.g. 'hash:64'",
            )
        self.dim = dim
        self.id = f"hash:{dim}@{_ALGO_VERSION}"
        self._memo: dict[str, tuple[int, float]] = {}

    def _bucket(self, feature: str) -> tuple[int, float]:
        hit = self._memo.get(feature)
        if hit is None:
            h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
            hit = (h % self.dim, 1.0 if (h >> 63) & 1 else -1.0)
            if len(self._memo) < 200_000:  # bounded: a test corpus repeats most features
                self._memo[feature] = hit
        return hit

    def features(self, text: str) -> dict[int, float]:
        acc: dict[int, float] = {}
        for word in _WORD_RE.findall(text.lower()):
            idx, sign = self._bucket("w:" + word)
            acc[idx] = acc.get(idx, 0.0) + sign * _WORD_WEIGHT
            padded = f"<{word}>"
            for i in range(len(padded) - 2):
                idx, sign = self._bucket("c:" + padded[i:i + 3])
                acc[idx] = acc.get(idx, 0.0) + sign * _TRIGRAM_WEIGHT
        return acc

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            if not isinstance(text, str):
                raise EmbedderError(f"{self.id}: text #{row} is {type(text).__name__}, not str")
            for idx, val in self.features(text).items():
                out[row, idx] += val
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:
                # No features (empty or punctuation-only text), or features that cancelled: a fixed
                # unit vector keeps the "every row is unit length" promise and stays deterministic.
                out[row] = 0.0
                out[row, self._bucket("empty")[0]] = 1.0
            else:
                out[row] /= norm
        return out

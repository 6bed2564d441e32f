"""The embedder seam (DESIGN §6).

An embedder declares an id, a dimension and its maximum input in tokens, and turns a batch of
texts into an (n, dim) float32 array of L2-normalised rows. Texts longer than the embedder reads are
handled by ``embed_texts`` in ragweedd.embed.long (split with 200 chars overlap, parts averaged).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, Sequence, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


@runtime_checkable
class Embedder(Protocol):
    # read-only: an embedder may learn its id and dimension from its server on first use
    @property
    def id(self) -> str:
        """Stable identity stored with every vector, e.g. "local:all-minilm-l6-v2@int8-8199be6f"."""
        ...

    @property
    def dim(self) -> int: ...

    max_input_tokens: int

    def embed_batch(self, texts: Sequence[str]) -> "np.ndarray":
        """(len(texts), dim) float32, rows L2-normalised. Must not be called with more than the
        embedder reads per text; callers go through ragweedd.embed.long.embed_texts."""
        ...

"""The embedder seam (DESIGN §6).

An embedder declares an id, a dimension and its maximum input in tokens, and turns a batch of
texts into an (n, dim) float32 array of L2-normalised rows. Texts longer than the embedder reads are
handled by ``embed_texts`` in ragweedd.embed.long (split with 200 chars overlap, parts averaged).

An embedder may also declare ``languages``: the ISO 639-1 codes of the languages its vectors
are good for (the embedded MiniLM: English only), or None (not declared: taken as every
language). The configuration overrides it (``embed.languages``, ``multi_embed_languages``);
``dense_languages`` is what a search asks: whether the dense leg can read a query at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Protocol, Sequence, runtime_checkable

from ragweedd.config import Config
from ragweedd.keyterms import parse_languages

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


def _declared(value: str, embedder: Any) -> frozenset[str] | None:
    if (value or "auto").strip().lower() == "auto":
        langs = getattr(embedder, "languages", None)
        return frozenset(langs) if langs is not None else None
    return parse_languages(value)


def dense_languages(cfg: Config, primary: Any, passes: Iterable[Any] = ()) -> frozenset[str] | None:
    """The languages the dense leg reads well: those of the primary embedder and of every working
    extra pass (``Pass`` objects, their ``embedder``), or None for every language."""
    out: set[str] = set()
    for value, emb in [(cfg.embed_languages, primary), *((cfg.multi_embed_languages, p.embedder) for p in passes)]:
        langs = _declared(value, emb)
        if langs is None:
            return None
        out |= langs
    return frozenset(out)

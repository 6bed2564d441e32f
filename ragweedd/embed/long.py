"""Embedding texts of any length (DESIGN §6).

An embedder reads at most ``max_input_tokens`` per text. A longer text is split into parts that each
fit, consecutive parts sharing ``OVERLAP_CHARS`` characters so that no sentence is only ever seen cut
in half; the part vectors are averaged and the mean is L2-normalised again, so every returned row is
a unit vector and similarity stays a dot product.

Length is measured with the embedder's own ``count_tokens(text)`` when it has one (the local MiniLM
does: its WordPiece count is exact) and otherwise estimated at ``CHARS_PER_TOKEN`` characters per
token, the rule used across ragweedd.
"""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Callable, Sequence

from ragweedd.errors import EmbedderError, EmbedStopped

if TYPE_CHECKING:
    import numpy as np

    from ragweedd.embed.base import Embedder

OVERLAP_CHARS = 200
CHARS_PER_TOKEN = 4
_WS = re.compile(r"\s")


def token_counter(embedder: Embedder) -> Callable[[str], int]:
    count = getattr(embedder, "count_tokens", None)
    if callable(count):
        return count
    return lambda s: math.ceil(len(s) / CHARS_PER_TOKEN)


def split_for_embedder(text: str, limit: int, count: Callable[[str], int],
                       overlap: int = OVERLAP_CHARS) -> list[str]:
    """Parts of ``text`` of at most ``limit`` tokens each, cut at whitespace where there is some."""
    n = len(text)
    total = count(text)
    if total <= limit:
        return [text]
    chars_per_tok = n / max(1, total)
    parts: list[str] = []
    start = 0
    while start < n:
        # Aim a little under the limit: the density of tokens varies along the text.
        width = max(1, int(limit * chars_per_tok * 0.95))
        while True:
            end = min(n, start + width)
            if end < n:
                end = _cut_back(text, start, end)
            part = text[start:end]
            if end - start <= 1 or count(part) <= limit:
                break
            width = max(1, int((end - start) * 0.85))
        parts.append(part)
        if end >= n:
            break
        # The overlap may never eat the whole part, or the loop would crawl one char at a time.
        ov = min(overlap, (end - start) // 2)
        nxt = _word_start(text, end - ov, end)
        start = max(start + 1, nxt)
    return parts


def _cut_back(text: str, start: int, end: int) -> int:
    """Move ``end`` back to just after the last whitespace in the window's second half, if any."""
    lo = start + (end - start) // 2
    for i in range(end - 1, lo - 1, -1):
        if text[i].isspace():
            return i + 1
    return end


def _word_start(text: str, pos: int, limit: int) -> int:
    """First position at or after ``pos`` (before ``limit``) that starts a word; ``pos`` if none."""
    m = _WS.search(text, pos, limit)
    return m.end() if m else pos


def embed_texts(embedder: "Embedder", texts: Sequence[str], batch_size: int = 32,
                should_stop: Callable[[], bool] | None = None) -> "np.ndarray":
    """(len(texts), embedder.dim) float32 unit rows, whatever the length of each text.

    ``should_stop()`` is asked before every batch after the first; when it says True,
    :class:`EmbedStopped` is raised (a caller that caches per call loses at most this call)."""
    import numpy as np

    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise EmbedderError(f"embed_texts: batch_size must be a whole number >= 1, not {batch_size!r}",
                            hint="check embed.batch_size in the configuration")
    limit = int(embedder.max_input_tokens)
    count = token_counter(embedder)
    flat: list[str] = []
    owner: list[int] = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise EmbedderError(f"{embedder.id}: text #{i} is {type(text).__name__}, not str")
        parts = split_for_embedder(text, limit, count)
        flat.extend(parts)
        owner.extend([i] * len(parts))
    if not texts:
        return np.zeros((0, embedder.dim), dtype=np.float32)

    # Similar lengths in one batch pad less: sort all parts, not just those of one batch.
    order = sorted(range(len(flat)), key=lambda j: len(flat[j]))
    vecs: np.ndarray | None = None
    for b in range(0, len(order), batch_size):
        if b and should_stop is not None and should_stop():
            raise EmbedStopped(f"{embedder.id}: stopped after {b} of {len(order)} parts")
        idx = order[b:b + batch_size]
        out = np.asarray(embedder.embed_batch([flat[j] for j in idx]), dtype=np.float32)
        if vecs is None:
            dim = out.shape[1] if out.ndim == 2 else -1
            vecs = np.empty((len(flat), max(dim, 0)), dtype=np.float32)
        if out.shape != (len(idx), vecs.shape[1]) or out.shape[1] != embedder.dim:
            raise EmbedderError(
                f"{embedder.id} returned an array of shape {out.shape} for {len(idx)} texts; "
                f"expected ({len(idx)}, {embedder.dim})",
                hint="the model's dimension changed or the server answered wrongly; re-check embed.model",
            )
        if not np.isfinite(out).all():
            raise EmbedderError(f"{embedder.id} returned NaN or infinite values",
                                hint="the model or server is broken; try another embed.model")
        vecs[idx] = out

    assert vecs is not None  # every text gave at least one part, so the loop ran
    result = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    owner_arr = np.asarray(owner)
    np.add.at(result, owner_arr, vecs)
    first = np.full(len(texts), -1)
    for j in range(len(owner) - 1, -1, -1):
        first[owner[j]] = j
    norms = np.linalg.norm(result, axis=1)
    for row in np.nonzero(norms < 1e-6)[0]:
        # Parts pointing in opposite directions average to ~0: keep the first part's direction.
        result[row] = vecs[first[row]]
        norms[row] = float(np.linalg.norm(result[row])) or 1.0
    result /= norms[:, None]
    return result

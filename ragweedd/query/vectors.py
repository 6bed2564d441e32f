"""The one door to vector search: ``vector_search`` and ``vectors_of``.

Today it is exact search (query/exact.py) over the collection's stored vectors, with the matrix
cached per collection file and keyed by ``rag.max_seq()``: any add or delete moves the sequence and
the next query reloads. The HNSW index replaces the inside of ``vector_search`` without changing
its callers.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Iterable

from ragweedd.store.rag_db import PRIMARY, RagDB

if TYPE_CHECKING:
    import numpy as np

_CACHE: dict[tuple[str, str], tuple[int, "np.ndarray", "np.ndarray"]] = {}
_LOCK = threading.Lock()


def _matrix(rag: RagDB, space: str) -> tuple["np.ndarray", "np.ndarray"]:
    from ragweedd.query.exact import load_matrix

    key = (str(rag.path), space)
    seq = rag.max_seq()
    with _LOCK:
        hit = _CACHE.get(key)
    if hit is not None and hit[0] == seq:
        return hit[1], hit[2]
    ids, mat = load_matrix(rag, space)
    with _LOCK:
        _CACHE[key] = (seq, ids, mat)
    return ids, mat


def drop_cache(rag: RagDB | None = None) -> None:
    with _LOCK:
        if rag is None:
            _CACHE.clear()
        else:
            for k in [k for k in _CACHE if k[0] == str(rag.path)]:
                del _CACHE[k]


def vector_search(rag: RagDB, paths, cfg, qvec: "np.ndarray", k: int, *,
                  allowed: Iterable[int] | None = None, space: str = PRIMARY) -> list[tuple[int, float]]:
    """The k chunks of ``rag`` most similar to the unit vector ``qvec``: [(chunk id, dot product)],
    best first. ``allowed`` restricts the candidates (filters by path, type or document)."""
    import numpy as np

    from ragweedd.errors import InvalidVectorError
    from ragweedd.query.exact import top_k

    ids, mat = _matrix(rag, space)
    if len(ids) == 0 or k <= 0:
        return []
    q = np.asarray(qvec, dtype=np.float32).reshape(-1)
    if q.shape[0] != mat.shape[1]:
        raise InvalidVectorError(
            f"query vector has {q.shape[0]} dimensions but collection '{rag.collection}' stores {mat.shape[1]}",
            hint="the collection was embedded with another model: search with that model or re-embed it")
    if allowed is not None:
        allow = np.fromiter(allowed, dtype=np.int64)
        mask = np.isin(ids, allow)
        return top_k(ids[mask], mat[mask], q, k)
    return top_k(ids, mat, q, k)


def vectors_of(rag: RagDB, ids: list[int], space: str = PRIMARY) -> dict[int, "np.ndarray"]:
    """Stored unit vectors of the given chunks (chunks without a vector are absent)."""
    import numpy as np

    return {i: np.frombuffer(b, dtype=np.float32) for i, b in rag.vectors_for(ids, space).items()}

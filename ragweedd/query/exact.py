"""Exact (brute-force) vector search over a collection's stored vectors.

The reference the HNSW index is checked against, and the faster choice for small collections: a
matrix product over 20k x 384 float32 rows takes about a millisecond.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ragweedd.index.vector_rows import as_rows
from ragweedd.store.protocols import RagStore
from ragweedd.store.types import PRIMARY

if TYPE_CHECKING:
    import numpy as np


def load_matrix(rag: RagStore, space: str = PRIMARY) -> tuple["np.ndarray", "np.ndarray"]:
    """(ids int64 (n,), vectors float32 (n, dim)) of every stored chunk."""
    ids: list[int] = []
    blobs: list[bytes] = []
    for part_ids, part_vecs in rag.iter_vectors(space):
        ids.extend(part_ids)
        blobs.extend(part_vecs)
    return as_rows(ids, blobs)


def top_k(ids: "np.ndarray", mat: "np.ndarray", query: "np.ndarray", k: int) -> list[tuple[int, float]]:
    import numpy as np

    if len(ids) == 0:
        return []
    scores = mat @ query.astype(np.float32)
    k = min(k, len(ids))
    idx = np.argpartition(-scores, k - 1)[:k]
    idx = idx[np.argsort(-scores[idx], kind="stable")]
    return [(int(ids[i]), float(scores[i])) for i in idx]

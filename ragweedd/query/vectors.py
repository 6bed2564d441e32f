"""The one door to vector search: ``VectorSearch``.

Where the vectors come from, in order:

1. the collection's index from the ``IndexLookup`` passed in (the daemon's live indexes, kept in
   step with the change log by ragweedd/ingest/index_sync.py, or the index files a one-shot
   command loads), when it holds (nearly) every stored chunk;
2. otherwise exact search over the stored vectors, the matrix cached per collection and keyed by
   the log's last sequence number.

Filtered searches (path, type, document) rank exactly over the allowed chunks' stored vectors, so a
filter never returns fewer hits than exist.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Iterable

from ragweedd.store.protocols import RagStore
from ragweedd.store.rag_db import PRIMARY

if TYPE_CHECKING:
    import numpy as np

    from ragweedd.index.protocol import IndexLookup


class VectorSearch:
    """Shared by every searcher of a process (thread-safe): the exact-search matrices are large."""

    def __init__(self, cfg: Any, indexes: IndexLookup | None) -> None:
        self.cfg = cfg
        self.indexes = indexes
        self._matrices: dict[tuple[str, str], tuple[int, np.ndarray, np.ndarray]] = {}
        self._lock = threading.Lock()

    def search(self, rag: RagStore, qvec: np.ndarray, k: int, *, allowed: Iterable[int] | None = None,
               space: str = PRIMARY) -> list[tuple[int, float]]:
        """The k chunks of ``rag`` most similar to the unit vector ``qvec``: [(chunk id, dot product)],
        best first. ``allowed`` restricts the candidates (filters by path, type or document)."""
        import numpy as np

        from ragweedd.query.exact import top_k

        if k <= 0:
            return []
        q = np.asarray(qvec, dtype=np.float32).reshape(-1)
        if allowed is not None:
            ids, mat = _stacked(rag.vectors_for(sorted(set(allowed)), space))
            if len(ids) == 0:
                return []
            _check_dim(rag, q, mat.shape[1])
            return top_k(ids, mat, q, k)
        if space == PRIMARY and self.indexes is not None:
            index = self.indexes.index_for(rag)
            # An index still being built (first start, a rebuild after corruption) lags far behind
            # the change log and would miss chunks: then the stored vectors are searched exactly.
            if index is not None and index.complete(rag.max_seq()):
                _check_dim(rag, q, index.dim)
                applied = index.applied_seq()  # read before searching: see _with_tail
                hits = index.search(q, k, max(self.cfg.hnsw_ef, k))
                return _with_tail(rag, q, k, applied, hits)
        ids, mat = self._matrix(rag, space)
        if len(ids) == 0:
            return []
        _check_dim(rag, q, mat.shape[1])
        return top_k(ids, mat, q, k)

    def _matrix(self, rag: RagStore, space: str) -> tuple[np.ndarray, np.ndarray]:
        from ragweedd.query.exact import load_matrix

        key = (rag.collection, space)
        seq = rag.max_seq()
        with self._lock:
            hit = self._matrices.get(key)
        if hit is not None and hit[0] == seq:
            return hit[1], hit[2]
        ids, mat = load_matrix(rag, space)
        with self._lock:
            self._matrices[key] = (seq, ids, mat)
        return ids, mat

    def forget(self, collection: str) -> None:
        """Drop the cached matrices of a removed collection."""
        with self._lock:
            for key in [k for k in self._matrices if k[0] == collection]:
                del self._matrices[key]


def _with_tail(rag: RagStore, q: np.ndarray, k: int, applied: int,
               hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Bring index hits up to the change log: the index thread applies committed changes a moment
    after the ingest transaction, and a search in between must neither miss the new chunks nor
    return deleted ones. Changes after the index's ``applied_seq`` (read before the index search,
    so anything applied meanwhile is at worst counted twice, and the best score per id is kept)
    are scored exactly from the stored vectors; ids whose last change is a delete are dropped."""
    import numpy as np

    from ragweedd.query.exact import top_k

    tail = rag.changes_after(applied)
    if not tail:
        return hits
    last = {cid: op for _, op, cid in tail}
    gone = {cid for cid, op in last.items() if op != "add"}
    best = {cid: sc for cid, sc in hits if cid not in gone}
    ids, mat = _stacked(rag.vectors_for([cid for cid, op in last.items() if op == "add"]))
    for cid, sc in top_k(ids, mat, q, k):  # no ids: no hits
        if sc > best.get(cid, -np.inf):
            best[cid] = sc
    return sorted(best.items(), key=lambda x: (-x[1], x[0]))[:k]


def _stacked(vecs: dict[int, bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Stored vectors ({id: float32 bytes}) as an id array and a row matrix."""
    import numpy as np

    ids = np.fromiter(vecs, dtype=np.int64, count=len(vecs))
    if not len(ids):
        return ids, np.empty((0, 0), dtype=np.float32)
    return ids, np.frombuffer(b"".join(vecs.values()), dtype=np.float32).reshape(len(ids), -1)


def _check_dim(rag: RagStore, q: np.ndarray, dim: int) -> None:
    from ragweedd.errors import InvalidVectorError

    if q.shape[0] != dim:
        raise InvalidVectorError(
            f"query vector has {q.shape[0]} dimensions but collection '{rag.collection}' stores {dim}",
            hint="the collection was embedded with another model: search with that model or re-embed it")


def vectors_of(rag: RagStore, ids: list[int], space: str = PRIMARY) -> dict[int, np.ndarray]:
    """Stored unit vectors of the given chunks (chunks without a vector are absent)."""
    import numpy as np

    return {i: np.frombuffer(b, dtype=np.float32) for i, b in rag.vectors_for(ids, space).items()}

"""The one door to vector search: ``VectorSearch``.

Where the vectors come from, in order:

1. the collection's index from the ``IndexLookup`` passed in (the daemon's live indexes, kept in
   step with the change log by ragweedd/index/sync.py, or the index files a one-shot
   command loads), when it holds (nearly) every stored chunk;
2. otherwise exact search over the stored vectors, the matrix cached per collection and keyed by
   the log's last sequence number.

Filtered searches (path, type, document) rank exactly over the allowed chunks' stored vectors, so a
filter never returns fewer hits than exist.

The dense leg of a search (``dense_leg``) embeds the query with the primary embedder and with every
working extra pass (``multi_embed_384`` / ``multi_embed_1024``, ragweedd/embed/passes.py) at the same
time, searches each space of each collection, and keeps every chunk's best similarity over the
spaces (DESIGN §8). A pass whose query embedding fails is left out of that search and named in the
timings; a collection without vectors of a pass (made by another model, or none yet) is searched
by the spaces it has.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ragweedd.config import Config
from ragweedd.index.vector_rows import as_rows
from ragweedd.store.protocols import RagStore
from ragweedd.store.types import PRIMARY

if TYPE_CHECKING:
    import numpy as np

    from ragweedd.index.protocol import IndexLookup


class VectorSearch:
    """Shared by every searcher of a process (thread-safe): the exact-search matrices are large."""

    def __init__(self, cfg: Config, indexes: IndexLookup | None, passes: Any = None) -> None:
        """``passes``: the extra embedding passes (ragweedd.embed.passes.Passes), or a function
        that makes them at the first dense search (a one-shot command probes no model it does not
        use)."""
        self.cfg = cfg
        self.indexes = indexes
        self._passes = passes
        self._pool: ThreadPoolExecutor | None = None
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
        # a store that searches its vectors itself (pgvector): no index files, no matrices
        ranked = rag.nearest(q, k, space=space, allowed=allowed, ef=max(self.cfg.hnsw_ef, k))
        if ranked is not None:
            return ranked
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
        pass_index = getattr(self.indexes, "pass_index_for", None) if space != PRIMARY else None
        if pass_index is not None:
            index = pass_index(rag, space)
            if index is not None and index.complete(rag.pass_max_seq(space)):
                _check_dim(rag, q, index.dim)
                applied = index.applied_seq()
                hits = index.search(q, k, max(self.cfg.hnsw_ef, k))
                return _with_tail(rag, q, k, applied, hits, space)
        ids, mat = self._matrix(rag, space)
        if len(ids) == 0:
            return []
        _check_dim(rag, q, mat.shape[1])
        return top_k(ids, mat, q, k)

    def dense_leg(self, rags: list[RagStore], query: str, embedder: Any, k: int,
                  allowed: Mapping[str, Iterable[int] | None], timings: dict[str, float],
                  qcache: dict[str, Any] | None = None) -> tuple[np.ndarray, dict[tuple[str, int], float]]:
        """The dense leg of a search: the query embedded (lowercased) by the primary embedder and
        every working extra pass in parallel, each space of each collection searched, and each
        chunk's best similarity kept. Returns (the primary query vector, {(collection, chunk id):
        similarity}). ``timings`` gains "embed" and "vector" (wall time of all spaces) and, per
        pass that ran, "embed_pass_<space>" and "vector_pass_<space>"; a pass whose query could not
        be embedded gets "failed_pass_<space>" (0) instead. ``qcache`` keeps primary query vectors."""
        from ragweedd.embed.long import embed_texts

        key = query.lower()
        passes = self.passes.working()
        t = time.perf_counter()

        def embed(emb: Any) -> tuple[Any, float]:
            t1 = time.perf_counter()
            return embed_texts(emb, [key])[0], _ms(t1)

        qvec = qcache.get(key) if qcache is not None else None
        futures = {p.space: self._executor().submit(embed, p.embedder) for p in passes}
        if qvec is None:
            qvec = embed_texts(embedder, [key])[0]
            if qcache is not None:
                if len(qcache) > 256:
                    qcache.clear()
                qcache[key] = qvec
        queries: dict[str, Any] = {PRIMARY: qvec}
        for p in passes:
            try:
                queries[p.space], timings[f"embed_pass_{p.space}"] = futures[p.space].result()
            except Exception as e:  # noqa: BLE001 - a pass never fails the search; the primary answers
                self.passes.fail(p, f"embedding a query failed: {e}")
                timings[f"failed_pass_{p.space}"] = 0.0
        timings["embed"] = _ms(t)
        t = time.perf_counter()
        best: dict[tuple[str, int], float] = {}
        for rag in rags:
            for space, q in queries.items():
                t1 = time.perf_counter()
                if space != PRIMARY and not self._has_pass(rag, space):
                    continue
                for cid, sim in self.search(rag, q, k, allowed=allowed.get(rag.collection), space=space):
                    if sim > best.get((rag.collection, cid), float("-inf")):
                        best[(rag.collection, cid)] = sim
                if space != PRIMARY:
                    name = f"vector_pass_{space}"
                    timings[name] = round(timings.get(name, 0.0) + _ms(t1), 3)
        timings["vector"] = _ms(t)
        return qvec, best

    @property
    def passes(self) -> Any:
        from ragweedd.embed.passes import Passes

        with self._lock:
            if self._passes is None:
                self._passes = Passes.none()
            elif callable(self._passes):
                self._passes = self._passes()
            return self._passes

    def _has_pass(self, rag: RagStore, space: str) -> bool:
        """Whether the collection's vectors of ``space`` were made by the pass now configured."""
        have = rag.embedder(space)
        return any(p.space == space and have is not None and have[0] == p.index_id for p in self.passes.working())

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="query-embed")
            return self._pool

    def close(self) -> None:
        """Stop the query-embedding threads and release the passes' models (when made)."""
        with self._lock:
            pool, self._pool = self._pool, None
            passes = None if callable(self._passes) else self._passes
        if pool is not None:
            pool.shutdown(wait=True)
        if passes is not None:
            passes.close()

    def _matrix(self, rag: RagStore, space: str) -> tuple[np.ndarray, np.ndarray]:
        from ragweedd.query.exact import load_matrix

        key = (rag.collection, space)
        seq = rag.max_seq() if space == PRIMARY else rag.pass_max_seq(space)
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
               hits: list[tuple[int, float]], space: str = PRIMARY) -> list[tuple[int, float]]:
    """Bring index hits up to the change log: the index thread applies committed changes a moment
    after the ingest transaction, and a search in between must neither miss the new chunks nor
    return deleted ones. Changes after the index's ``applied_seq`` (read before the index search,
    so anything applied meanwhile is at worst counted twice, and the best score per id is kept)
    are scored exactly from the stored vectors; ids whose last change is a delete are dropped."""
    import numpy as np

    from ragweedd.query.exact import top_k

    tail = rag.changes_after(applied) if space == PRIMARY else rag.pass_changes_after(space, applied)
    if not tail:
        return hits
    last = {cid: op for _, op, cid in tail}
    gone = {cid for cid, op in last.items() if op != "add"}
    best = {cid: sc for cid, sc in hits if cid not in gone}
    ids, mat = _stacked(rag.vectors_for([cid for cid, op in last.items() if op == "add"], space))
    for cid, sc in top_k(ids, mat, q, k):  # no ids: no hits
        if sc > best.get(cid, -np.inf):
            best[cid] = sc
    return sorted(best.items(), key=lambda x: (-x[1], x[0]))[:k]


def _stacked(vecs: dict[int, bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Stored vectors ({id: float32 bytes}) as an id array and a row matrix."""
    return as_rows(list(vecs), list(vecs.values()))


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


def _ms(t: float) -> float:
    return round((time.perf_counter() - t) * 1000, 3)

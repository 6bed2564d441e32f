"""The one door to vector search: ``vector_search`` and ``vectors_of``.

Where the vectors come from, in order:

1. the HNSW index manager the daemon keeps for the collection (``register_index``; kept in step with
   the change log by ragweedd/ingest/index_sync.py);
2. otherwise (the one-shot CLI) the index files on disk, loaded once per process and caught up in
   memory with the changes logged after their ``applied_seq`` — never written from here;
3. otherwise exact search over the stored vectors (query/exact.py), the matrix cached per collection
   and keyed by ``rag.max_seq()``.

Below ``hnsw_exact_below`` vectors the index manager answers exactly as well. Filtered searches
(path, type, document) rank exactly over the allowed chunks' stored vectors, so a filter never
returns fewer hits than exist.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Iterable

from ragweedd.store.rag_db import PRIMARY, RagDB

if TYPE_CHECKING:
    import numpy as np

_CACHE: dict[tuple[str, str], tuple[int, "np.ndarray", "np.ndarray"]] = {}
_LOCK = threading.Lock()
_MANAGERS: dict[str, object] = {}  # rag.sqlite3 path -> IndexManager kept by the daemon
_DISK: dict[str, object | None] = {}  # rag.sqlite3 path -> read-only IndexManager (None: no usable files)
PRIMARY_SUFFIX = ""
MAX_INDEX_LAG = 256  # changes an index may trail the log by and still answer


def register_index(rag_path, manager) -> None:
    with _LOCK:
        _MANAGERS[str(rag_path)] = manager


def unregister_index(rag_path) -> None:
    with _LOCK:
        _MANAGERS.pop(str(rag_path), None)
        _DISK.pop(str(rag_path), None)


def _disk_manager(rag: RagDB, cfg):
    """The collection's index files, loaded once and caught up in memory (one-shot CLI)."""
    key = str(rag.path)
    with _LOCK:
        if key in _DISK:
            m = _DISK[key]
        else:
            m = _DISK[key] = _load_disk_manager(rag, cfg)
    if m is None:
        return None
    import numpy as np

    changes = rag.changes_after(m.applied_seq[PRIMARY_SUFFIX])
    if changes:
        vecs = rag.vectors_for([c[2] for c in changes if c[1] == "add"])
        items = [(seq, "add", cid, np.frombuffer(vecs[cid], dtype=np.float32)) if op == "add" and cid in vecs
                 else (seq, "delete", cid) for seq, op, cid in changes]
        m.apply(PRIMARY_SUFFIX, items)
    return m


def _load_disk_manager(rag: RagDB, cfg):
    from ragweedd.logging import get_logger

    emb = rag.embedder(PRIMARY)
    if emb is None or not (rag.path.parent / "header.bin").exists():
        return None
    if rag.chunk_count() < cfg.hnsw_exact_below:
        return None  # exact search is as fast here, and spares a one-shot process loading numba
    try:
        from ragweedd.index.manager import IndexManager

        m = IndexManager(rag.path.parent, {PRIMARY_SUFFIX: emb[1]}, config=cfg, start_flusher=False)
        min_seq = rag.conn.execute("SELECT min(seq) FROM changes").fetchone()[0]
        if m.status[PRIMARY_SUFFIX] != "ok" or m.plan(PRIMARY_SUFFIX, rag.max_seq(), min_seq) == "rebuild":
            return None
        return m
    except Exception as e:  # noqa: BLE001 - a damaged index only costs speed here: search exactly
        get_logger("ragweedd.query").info("index_files_unused", collection=rag.collection, error=str(e))
        return None


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


def vector_search(rag: RagDB, paths, cfg, qvec: "np.ndarray", k: int, *,
                  allowed: Iterable[int] | None = None, space: str = PRIMARY) -> list[tuple[int, float]]:
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
    if space == PRIMARY:
        with _LOCK:
            m = _MANAGERS.get(str(rag.path))
        if m is None:
            m = _disk_manager(rag, cfg)
        # An index still being built (first start, a rebuild after corruption) lags far behind
        # the change log and would miss chunks: then the stored vectors are searched exactly. A
        # lag of a few changes is the ingest that is being applied right now.
        if m is not None and PRIMARY_SUFFIX in m.indexes and _complete(m, rag):
            _check_dim(rag, q, m.dims[PRIMARY_SUFFIX])
            applied = m.applied_seq.get(PRIMARY_SUFFIX, 0)  # read before searching: see _with_tail
            labels, scores = m.search({PRIMARY_SUFFIX: q}, k=k, ef=max(cfg.hnsw_ef, k))
            return _with_tail(rag, q, k, applied, list(zip(labels.tolist(), scores.tolist())))
    ids, mat = _matrix(rag, space)
    if len(ids) == 0:
        return []
    _check_dim(rag, q, mat.shape[1])
    return top_k(ids, mat, q, k)


def _with_tail(rag: RagDB, q, k: int, applied: int, hits: list[tuple[int, float]]) -> list[tuple[int, float]]:
    """Bring graph hits up to the change log: the index thread applies committed changes a moment
    after the ingest transaction, and a search in between must neither miss the new chunks nor
    return deleted ones. Changes after the graph's ``applied_seq`` (read before the graph search,
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


def _stacked(vecs: dict[int, bytes]) -> tuple["np.ndarray", "np.ndarray"]:
    """Stored vectors ({id: float32 bytes}) as an id array and a row matrix."""
    import numpy as np

    ids = np.fromiter(vecs, dtype=np.int64, count=len(vecs))
    if not len(ids):
        return ids, np.empty((0, 0), dtype=np.float32)
    return ids, np.frombuffer(b"".join(vecs.values()), dtype=np.float32).reshape(len(ids), -1)


def _complete(m, rag: RagDB) -> bool:
    """Whether the live graph holds (nearly) every stored chunk. Not while a first build or a
    rebuild after corruption runs (the live graph is empty then; a compaction keeps a complete
    one live), nor when the graph trails the change log by more than an ingest in flight."""
    if m.rebuilding(PRIMARY_SUFFIX) and m.status.get(PRIMARY_SUFFIX) != "ok":
        return False
    return rag.max_seq() - m.applied_seq.get(PRIMARY_SUFFIX, 0) <= MAX_INDEX_LAG


def _check_dim(rag: RagDB, q, dim: int) -> None:
    from ragweedd.errors import InvalidVectorError

    if q.shape[0] != dim:
        raise InvalidVectorError(
            f"query vector has {q.shape[0]} dimensions but collection '{rag.collection}' stores {dim}",
            hint="the collection was embedded with another model: search with that model or re-embed it")


def vectors_of(rag: RagDB, ids: list[int], space: str = PRIMARY) -> dict[int, "np.ndarray"]:
    """Stored unit vectors of the given chunks (chunks without a vector are absent)."""
    import numpy as np

    return {i: np.frombuffer(b, dtype=np.float32) for i, b in rag.vectors_for(ids, space).items()}

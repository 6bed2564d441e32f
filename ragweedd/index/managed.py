"""IndexManager-backed implementations of the index seam (ragweedd/index/protocol.py).

``ManagedIndex`` answers for one collection's primary space. ``DiskIndexes`` is the lookup of a
one-shot command: each collection's index files are loaded once per process and caught up in
memory with the changes logged after their ``applied_seq`` -- never written, so a one-shot search
beside a running daemon cannot disturb the daemon's files. (The daemon's live lookup is
``ragweedd.index.sync.IndexSync``.)
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ragweedd.logging import get_logger
from ragweedd.store.protocols import RagStore
from ragweedd.store.types import PRIMARY

if TYPE_CHECKING:
    import numpy as np

    from ragweedd.config import Config
    from ragweedd.index.manager import IndexManager
    from ragweedd.paths import Paths

log = get_logger("ragweedd.index")
MAX_INDEX_LAG = 256  # changes an index may trail the log by and still answer


class ManagedIndex:
    """One vector space of a collection's IndexManager: the primary, or an extra pass ("384",
    "1024"), whose ``applied_seq`` counts in that pass's own change log."""

    def __init__(self, manager: IndexManager, space: str = PRIMARY) -> None:
        self.manager = manager
        self.space = space

    @property
    def dim(self) -> int:
        return int(self.manager.dims[self.space])

    def search(self, q: np.ndarray, k: int, ef: int) -> list[tuple[int, float]]:
        labels, scores = self.manager.search({self.space: q}, k=k, ef=ef)
        return list(zip(labels.tolist(), scores.tolist()))

    def applied_seq(self) -> int:
        return int(self.manager.applied_seq.get(self.space, 0))

    def complete(self, log_seq: int) -> bool:
        m = self.manager
        # A rebuild after corruption or a first build leaves the live graph empty until it is
        # swapped in; a compaction keeps a complete one live.
        if m.rebuilding(self.space) and m.status.get(self.space) != "ok":
            return False
        return log_seq - self.applied_seq() <= MAX_INDEX_LAG


class DiskIndexes:
    """The lookup of a one-shot command; ``close()`` releases every loaded index."""

    def __init__(self, cfg: Config, paths: Paths) -> None:
        self.cfg, self.paths = cfg, paths
        self._loaded: dict[str, ManagedIndex | None] = {}
        self._lock = threading.Lock()

    def index_for(self, rag: RagStore) -> ManagedIndex | None:
        key = rag.collection
        with self._lock:
            if key not in self._loaded:
                self._loaded[key] = self._load(rag)
            idx = self._loaded[key]
            if idx is not None:
                self._catch_up(idx, rag)
            return idx

    def _load(self, rag: RagStore) -> ManagedIndex | None:
        emb = rag.embedder(PRIMARY)
        directory = self.paths.collection_dir(rag.collection)
        if emb is None or not (directory / "header.bin").exists():
            return None
        if rag.chunk_count() < self.cfg.hnsw_exact_below:
            return None  # exact search is as fast here, and spares a one-shot process loading numba
        try:
            from ragweedd.index.manager import IndexManager

            m = IndexManager(directory, {PRIMARY: emb[1]}, config=self.cfg, start_flusher=False)
            if m.status[PRIMARY] != "ok" or m.plan(PRIMARY, rag.max_seq(), rag.min_seq()) == "rebuild":
                m.close(flush=False)
                return None
            return ManagedIndex(m)
        except Exception as e:  # noqa: BLE001 - a damaged index only costs speed here: search exactly
            log.info("index_files_unused", collection=rag.collection, error=str(e))
            return None

    @staticmethod
    def _catch_up(idx: ManagedIndex, rag: RagStore) -> None:
        import numpy as np

        changes = rag.changes_after(idx.applied_seq())
        if changes:
            vecs = rag.vectors_for([c[2] for c in changes if c[1] == "add"])
            items = [(seq, "add", cid, np.frombuffer(vecs[cid], dtype=np.float32)) if op == "add" and cid in vecs
                     else (seq, "delete", cid) for seq, op, cid in changes]
            idx.manager.apply(PRIMARY, items)

    def close(self) -> None:
        with self._lock:
            for idx in self._loaded.values():
                if idx is not None:
                    idx.manager.close(flush=False)
            self._loaded.clear()

"""The daemon's index side when the database server indexes the vectors itself (PostgreSQL +
pgvector, ragweedd/store/postgres/pg_rag.py): there are no index files to load, replay or flush, because
the HNSW index is part of the database and is updated in the transaction that writes the vector.

It answers the calls the daemon makes of ``IndexSync`` (ragweedd/index/sync.py) so the
rest of the daemon does not ask which store it runs on: ``notify`` has nothing to do, ``index_for``
returns None (searches ask the store, which searches its own index), and ``status`` reports each
collection's stored vectors from the database.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from ragweedd.contract import IndexInfo


class ServerIndexes:
    def __init__(self, stores: Any) -> None:
        self.stores = stores
        self.managers: dict[str, Any] = {}  # no index files: nothing for the cluster analysis to set
        self.errors: dict[str, str] = {}
        self.supervisor = None
        self._names: list[str] = []
        self._lock = threading.Lock()

    def start(self, collections: list[str]) -> None:
        with self._lock:
            self._names = sorted(set(self._names) | set(collections))

    def notify(self, collection: str) -> None:
        with self._lock:
            if collection not in self._names:
                self._names = sorted({*self._names, collection})

    def alive(self) -> bool:
        return True

    def wait_idle(self, timeout_s: float | None = None) -> bool:
        return True

    def index_for(self, rag: Any) -> None:
        return None

    def pass_index_for(self, rag: Any, space: str) -> None:
        return None

    def count(self, collection: str) -> int | None:
        return None  # the database's index holds exactly the stored vectors: nothing to compare

    def status(self) -> dict[str, IndexInfo]:
        with self._lock:
            names = list(self._names)
        try:
            figures = self.stores.index_figures()
        except Exception as e:  # noqa: BLE001 - a status must answer while the server is away
            return {n: {"vectors": None, "applied_seq": None, "state": "failed", "dirty": False,
                        "last_flush": None, "error": str(e)} for n in names}
        return {n: {"vectors": figures[n][0], "applied_seq": figures[n][1], "state": "ok", "dirty": False,
                    "last_flush": None, "error": None} for n in names if n in figures}

    def drop(self, collection: str, then: Callable[[], None] | None = None) -> None:
        with self._lock:
            self._names = [n for n in self._names if n != collection]
        if then is not None:
            then()

    def close(self) -> None:
        pass

"""The SQLite implementation of the storage seam (ragweedd/store/protocols.py): one data directory,
``ingest_db.sqlite3`` and ``history.sqlite3`` shared, one ``rag.sqlite3`` per collection."""

from __future__ import annotations

import os
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.store.sqlite.fts_reader import FtsReader
from ragweedd.store.sqlite.history_db import HistoryDB
from ragweedd.store.sqlite.idf_cache_db import IdfCacheDB
from ragweedd.store.sqlite.ingest_db import IngestDB
from ragweedd.store.sqlite.integrity_check import integrity_check
from ragweedd.store.sqlite.job_queue import JobQueue
from ragweedd.store.sqlite.rag_db import RagDB
from ragweedd.store.sqlite.repair import check_and_repair

if TYPE_CHECKING:
    from ragweedd.paths import Paths


class SqliteBackend:
    def __init__(self, paths: Paths) -> None:
        self.paths = paths
        # told of chunk texts a read found changed since they were indexed (store/sqlite/rag_served.py)
        self.on_rot: Callable[[Any, dict[int, str]], None] | None = None

    def open_rag(self, collection: str, *, readonly: bool = False) -> RagDB:
        rag = RagDB(self.paths.rag_db(collection), collection, readonly=readonly)
        rag.on_rot = self.on_rot
        return rag

    def has_rag(self, collection: str) -> bool:
        return Path(self.paths.rag_db(collection)).exists()

    @property
    def where(self) -> str:
        return str(self.paths.collections)

    @property
    def shared(self) -> None:
        return None  # one machine's own files

    def close(self) -> None:
        pass  # every store opened here holds its own connection

    def rag_identity(self, collection: str) -> Hashable:
        # the database file itself: a collection removed and added again has a new one, and a
        # handle opened on the old file would write into a deleted inode
        try:
            st = os.stat(self.paths.rag_db(collection))
        except OSError:
            return None
        return st.st_dev, st.st_ino

    def repair_at_start(self, collections: Sequence[str]) -> dict[str, Any]:
        return check_and_repair(self.paths, sorted(collections))

    def integrity_check(self, collections: list[str],
                        index_count: Callable[[str], int | None]) -> dict[str, Any]:
        return integrity_check(self.paths, collections, index_count)

    def indexed_collections(self) -> list[str]:
        return sorted(p.name for p in self.paths.collections.glob("*") if (p / "rag.sqlite3").exists())

    def open_ingest(self, *, readonly: bool = False) -> IngestDB:
        return IngestDB(self.paths.ingest_db, readonly=readonly)

    def open_jobs(self, *, max_tries: int) -> JobQueue:
        return JobQueue(self.paths.ingest_db, max_tries=max_tries)

    def open_keyword_reader(self, collection: str) -> FtsReader:
        return FtsReader(self.paths.rag_db(collection))

    def open_idf_cache(self, *, timeout_s: float) -> IdfCacheDB:
        p = Path(self.paths.ingest_db)
        if not p.exists():
            IngestDB(p).close()  # the cache's table comes with ingest_db's schema
        return IdfCacheDB(p, timeout_s=timeout_s)

    def open_history(self) -> HistoryDB:
        return HistoryDB(self.paths.history_db)


if TYPE_CHECKING:
    from ragweedd.store.protocols import StoreBackend

    def _conforms(b: SqliteBackend) -> None:
        _b: StoreBackend = b  # mypy checks here that the SQLite backend keeps the seam's shape

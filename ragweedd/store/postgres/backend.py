"""The PostgreSQL implementation of the storage seam (ragweedd/store/protocols.py): one database
with pgvector shared by every ragweedd process that names it in ``store``.

Each store opened here has a connection of its own (a search's keyword and vector legs run side by
side); the schema is brought forward once, when the backend opens. Paths are this machine's:
``source`` (config ``source_name``, default the host name) goes with every path written.
"""

from __future__ import annotations

import socket
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.config import redact_dsn
from ragweedd.logging import get_logger
from ragweedd.store.postgres import pg_terms
from ragweedd.store.postgres.connection import PgConn, migrate
from ragweedd.store.postgres.integrity_check import server_integrity
from ragweedd.store.postgres.pg_claims import hold, new_claimer
from ragweedd.store.postgres.pg_history import PgHistory
from ragweedd.store.postgres.pg_idf import PgIdfCache
from ragweedd.store.postgres.pg_ingest import PgIngest
from ragweedd.store.postgres.pg_jobs import PgJobQueue
from ragweedd.store.postgres.pg_rag import PgRag
from ragweedd.store.postgres.pg_schema import MIGRATIONS

log = get_logger("ragweedd.store")


def default_source() -> str:
    return socket.gethostname() or "localhost"


class PgBackend:
    def __init__(self, dsn: str, *, source: str = "") -> None:
        self.dsn = dsn
        self.source = source or default_source()
        # the server's rows carry no hash a read checks against: nothing ever calls it here
        self.on_rot: Callable[[Any, dict[int, str]], None] | None = None
        # One connection of the backend's own for the small reads every search makes (which
        # collections exist); each store gets its own.
        self._db = PgConn(dsn)
        migrate(self._db, MIGRATIONS)
        # chunks from before migration 8 get their keyword index form (at once when there are none:
        # a partial index lists the rows without)
        pg_terms.backfill(self._db, log)
        # this process's claims of jobs and chunks are alive while this connection's session is
        # (store/postgres/pg_claims.py); its stores mark their claims with this number
        self.claimer = new_claimer()
        hold(self._db, self.claimer)
        self._db.on_reconnect.append(lambda: hold(self._db, self.claimer))

    def __repr__(self) -> str:
        return f"PgBackend({redact_dsn(self.dsn)!r}, source={self.source!r})"

    def open_rag(self, collection: str, *, readonly: bool = False) -> PgRag:
        db = PgConn(self.dsn)
        try:
            return PgRag(db, collection, source=self.source, readonly=readonly, claimer=self.claimer)
        except BaseException:
            db.close()
            raise

    def has_rag(self, collection: str) -> bool:
        return collection in self.indexed_collections()

    @property
    def where(self) -> str:
        return f"the PostgreSQL database {redact_dsn(self.dsn)}"

    @property
    def shared(self) -> PgBackend:
        return self

    def rag_identity(self, collection: str) -> Hashable:
        # a collection's rows are never a file removed under an open handle: one handle serves on
        return collection

    def repair_at_start(self, collections: Sequence[str]) -> dict[str, Any]:
        return {}  # the server keeps its own files sound; the periodic check mends the rest live

    def integrity_check(self, collections: list[str],
                        index_count: Callable[[str], int | None]) -> dict[str, Any]:
        return server_integrity(self, collections)

    def indexed_collections(self) -> list[str]:
        return [r["name"] for r in self._db.all("SELECT name FROM collections ORDER BY name")]

    def keep_claim(self) -> None:
        """One cheap statement on the connection that holds the claimer's lock: a connection the
        server dropped is opened again, and the lock taken again, now rather than at the next use."""
        self._db.value("SELECT 1")

    def index_figures(self) -> dict[str, tuple[int, int]]:
        """Each collection's primary vectors (what its HNSW index holds: the index is updated in the
        transaction that writes a vector) and the last sequence number of its change log."""
        rows = self._db.all(
            "SELECT c.name, (SELECT count(*) FROM vectors v WHERE v.collection_id=c.id AND v.space='primary') AS n,"
            " (SELECT coalesce(max(seq), 0) FROM changes g WHERE g.collection_id=c.id) AS seq FROM collections c")
        return {r["name"]: (int(r["n"]), int(r["seq"])) for r in rows}

    def database_size(self) -> int:
        """Bytes the database takes on the server (tables, indexes, TOAST)."""
        return int(self._db.value("SELECT pg_database_size(current_database())"))

    def close(self) -> None:
        self._db.close()

    def open_ingest(self, *, readonly: bool = False) -> PgIngest:
        return PgIngest(self.dsn, source=self.source)

    def open_jobs(self, *, max_tries: int) -> PgJobQueue:
        return PgJobQueue(self.dsn, source=self.source, max_tries=max_tries, claimer=self.claimer)

    def open_keyword_reader(self, collection: str) -> PgRag:
        return self.open_rag(collection, readonly=True)

    def open_idf_cache(self, *, timeout_s: float) -> PgIdfCache:
        return PgIdfCache(self.dsn, timeout_s=timeout_s)

    def open_history(self) -> PgHistory:
        return PgHistory(self.dsn, source=self.source)


if TYPE_CHECKING:
    from ragweedd.store.protocols import (
        HistoryRows,
        IdfCacheStore,
        IngestStore,
        JobStore,
        KeywordReader,
        RagStore,
        SharedServer,
        StoreBackend,
    )

    def _conforms(b: PgBackend) -> None:
        # mypy checks here that the PostgreSQL stores keep the seam's shapes
        _r: RagStore = b.open_rag("c")
        _k: KeywordReader = b.open_keyword_reader("c")
        _j: JobStore = b.open_jobs(max_tries=1)
        _h: HistoryRows = b.open_history()
        _i: IdfCacheStore = b.open_idf_cache(timeout_s=1)
        _g: IngestStore = b.open_ingest()
        _b: StoreBackend = b
        _s: SharedServer = b.shared

"""The persistent IDF cache: ``fts_idf_cache`` rows of ingest_db.sqlite3 (DESIGN §8).

The cache is an optimisation a search must never wait for: its connection has a short busy
timeout (which also bounds the wait for the writer lock), and every failure comes out as
StorageError for the caller to shrug off.

Per collection, two reserved rows record the chunk count and change sequence the cache was
(re)started at; every other row is a term and its document frequency.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from ragweedd.errors import StorageError
from ragweedd.store.sqlite.connection import connect, transaction

if TYPE_CHECKING:
    from types import TracebackType

# Reserved rows: never a query term (terms are alphanumeric). They name the index form of the
# terms (ragweedd/keyterms.py): a cache of English-only Porter terms, from before the keyword index
# read every language, has other names, so it is found missing and started again.
META_N = "\x00n:form2"
META_SEQ = "\x00seq:form2"


class IdfCacheDB:
    def __init__(self, source: Path | str | sqlite3.Connection, *, timeout_s: float = 0.05) -> None:
        """On a path: creates ingest_db when missing, then opens it with ``timeout_s``. Given a
        connection, borrows it."""
        if isinstance(source, sqlite3.Connection):
            self.conn, self._owned = source, False
            return
        p = Path(source)
        if not p.exists():
            from ragweedd.store.sqlite.ingest_db import IngestDB

            IngestDB(p).close()
        self.conn, self._owned = connect(p, timeout_s=timeout_s), True

    def close(self) -> None:
        if self._owned:
            self.conn.close()

    def built_at(self, collection: str) -> tuple[int | None, int | None]:
        """(chunk count, change sequence) the collection's cache was started at, or Nones."""
        with _errors():
            rows = dict(self.conn.execute(
                "SELECT term, doc FROM fts_idf_cache WHERE collection=? AND term IN (?, ?)",
                (collection, META_N, META_SEQ)).fetchall())
        return rows.get(META_N), rows.get(META_SEQ)

    def restart(self, collection: str, n: int, seq: int) -> None:
        """Drop the collection's rows and start again at (n, seq)."""
        now = time.time()
        with _errors(), transaction(self.conn):
            self.conn.execute("DELETE FROM fts_idf_cache WHERE collection=?", (collection,))
            self.conn.executemany("INSERT INTO fts_idf_cache(collection, term, doc, built_at) VALUES (?,?,?,?)",
                                  [(collection, META_N, n, now), (collection, META_SEQ, seq, now)])

    def lookup(self, collection: str, terms: list[str]) -> dict[str, int]:
        if not terms:
            return {}
        q = ",".join("?" * len(terms))
        with _errors():
            return {t: int(d) for t, d in self.conn.execute(
                f"SELECT term, doc FROM fts_idf_cache WHERE collection=? AND term IN ({q})", (collection, *terms))}

    def remember(self, collection: str, dfs: Iterable[tuple[str, int]]) -> None:
        now = time.time()
        with _errors(), transaction(self.conn, immediate=False):
            self.conn.executemany(
                "INSERT OR REPLACE INTO fts_idf_cache(collection, term, doc, built_at) VALUES (?,?,?,?)",
                [(collection, t, d, now) for t, d in dfs])


class _errors:
    def __enter__(self) -> _errors:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:
        if et is not None and issubclass(et, sqlite3.Error):
            raise StorageError(f"IDF cache: {e}") from e

"""The persistent IDF cache on PostgreSQL (the twin of store/sqlite/idf_cache_db.py).

A search never waits long for it: each statement runs under ``statement_timeout`` = the timeout
given, and every failure comes out as StorageError for the caller to shrug off. The (chunk count,
change sequence) a collection's cache was started at is a row of ``idf_cache_meta`` (the SQLite
cache keeps it in reserved term rows whose NUL PostgreSQL text cannot hold).
"""

from __future__ import annotations

import time
from typing import Iterable

from ragweedd.store.postgres.connection import PgConn


class PgIdfCache:
    def __init__(self, dsn: str, *, timeout_s: float = 0.05) -> None:
        self.db = PgConn(dsn)
        self.db.run(f"SET statement_timeout = {max(1, int(timeout_s * 1000))}")

    def close(self) -> None:
        self.db.close()

    def built_at(self, collection: str) -> tuple[int | None, int | None]:
        r = self.db.one("SELECT n, seq FROM idf_cache_meta WHERE collection=%s", (collection,))
        return (int(r["n"]), int(r["seq"])) if r else (None, None)

    def restart(self, collection: str, n: int, seq: int) -> None:
        with self.db.tx() as c:
            c.execute("DELETE FROM idf_cache WHERE collection=%s", (collection,))
            c.execute("INSERT INTO idf_cache_meta(collection, n, seq, built_at) VALUES (%s,%s,%s,%s)"
                      " ON CONFLICT (collection) DO UPDATE SET n=excluded.n, seq=excluded.seq,"
                      " built_at=excluded.built_at", (collection, n, seq, time.time()))

    def lookup(self, collection: str, terms: list[str]) -> dict[str, int]:
        if not terms:
            return {}
        return {r["term"]: int(r["doc"]) for r in self.db.all(
            "SELECT term, doc FROM idf_cache WHERE collection=%s AND term = ANY(%s)", (collection, list(terms)))}

    def remember(self, collection: str, dfs: Iterable[tuple[str, int]]) -> None:
        rows = [(collection, t, int(d), time.time()) for t, d in dfs]
        if not rows:
            return
        with self.db.tx() as c:
            c.cursor().executemany(
                "INSERT INTO idf_cache(collection, term, doc, built_at) VALUES (%s,%s,%s,%s)"
                " ON CONFLICT (collection, term) DO UPDATE SET doc=excluded.doc, built_at=excluded.built_at", rows)

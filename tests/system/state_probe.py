"""What a test daemon has stored, read straight from its store (read-only), the same questions
for both backends: the data directory's SQLite files, or a PostgreSQL database shared by several
daemons (rows of one daemon's ``source_name``)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any


class SqliteProbe:
    def __init__(self, data: Path) -> None:
        self.data = data

    def _conn(self, name: str) -> sqlite3.Connection:
        p = self.data / ("ingest_db.sqlite3" if name == "ingest" else f"collections/{name}/rag.sqlite3")
        conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=30)
        conn.row_factory = sqlite3.Row
        return conn

    def _gone(self, name: str) -> bool:
        # a collection without its database (never indexed, or removed) holds nothing
        return name != "ingest" and not (self.data / f"collections/{name}/rag.sqlite3").exists()

    def _value(self, name: str, sql: str, args: tuple = ()) -> Any:
        if self._gone(name):
            return 0
        conn = self._conn(name)
        try:
            return conn.execute(sql, args).fetchone()[0]
        finally:
            conn.close()

    def live_rows(self, collection: str) -> dict[str, Any]:
        conn = self._conn("ingest")
        try:
            return {r["source_file"]: dict(r) for r in conn.execute(
                "SELECT * FROM ingest_files WHERE collection=? AND superseded=0", (collection,))}
        finally:
            conn.close()

    def chunks(self, collection: str) -> int:
        return self._value(collection, "SELECT count(*) FROM embeddings")

    def vectors(self, collection: str) -> int:
        return self._value(collection, "SELECT count(*) FROM vectors")

    def keyword_rows(self, collection: str, word: str) -> int:
        return self._value(collection, "SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH ?", (word,))

    def changes(self, collection: str, op: str) -> int:
        return self._value(collection, "SELECT count(*) FROM changes WHERE op=?", (op,))

    def _column(self, name: str, sql: str, args: tuple = ()) -> list[Any]:
        if self._gone(name):
            return []
        conn = self._conn(name)
        try:
            return [r[0] for r in conn.execute(sql, args)]
        finally:
            conn.close()

    def keyword_texts(self, collection: str) -> list[str]:
        """The text column of each chunk's keyword row (FTS5's ``content``)."""
        return self._column(collection, "SELECT content FROM fts_chunks")

    def contexts(self, collection: str) -> list[str]:
        """The context line stored with each chunk that has one."""
        return self._column(collection, "SELECT string_value FROM embedding_metadata WHERE key='context'")

    def pending(self, collection: str) -> int:
        """Chunks still waiting for their primary vector."""
        return self._value(collection, "SELECT count(*) FROM pending_vectors")

    def change_ids(self, collection: str, op: str) -> list[int]:
        """The chunk id of every change-log row of ``op``, in log order."""
        return self._column(collection, "SELECT id FROM changes WHERE op=? ORDER BY seq", (op,))

    def paths(self, collection: str) -> dict[str, str]:
        """Every path the collection holds content for -> its md5."""
        if self._gone(collection):
            return {}
        conn = self._conn(collection)
        try:
            return {r[0]: r[1] for r in conn.execute("SELECT source_file, md5 FROM document_paths")}
        finally:
            conn.close()


class PgProbe:
    def __init__(self, dsn: str, source: str) -> None:
        self.dsn, self.source = dsn, source

    def _all(self, sql: str, args: tuple = ()) -> list[dict]:
        import psycopg
        from psycopg.rows import dict_row

        with psycopg.connect(self.dsn, autocommit=True, row_factory=dict_row) as conn:
            return conn.execute(sql, args).fetchall()  # type: ignore[arg-type]

    def _value(self, sql: str, args: tuple = ()) -> Any:
        rows = self._all(sql, args)
        return next(iter(rows[0].values())) if rows else None

    _CID = "(SELECT id FROM collections WHERE name=%s)"

    def live_rows(self, collection: str) -> dict[str, Any]:
        from ragweedd.store.postgres.connection import from_pg

        return {from_pg(r["source_file"]): r for r in self._all(
            "SELECT * FROM ingest_files WHERE source=%s AND collection=%s AND superseded=0",
            (self.source, collection))}

    def chunks(self, collection: str) -> int:
        return self._value(f"SELECT count(*) FROM chunks WHERE collection_id={self._CID}", (collection,))

    def vectors(self, collection: str) -> int:
        return self._value(f"SELECT count(*) FROM vectors WHERE collection_id={self._CID} AND space='primary'",
                           (collection,))

    def keyword_rows(self, collection: str, word: str) -> int:
        return self._value(f"SELECT count(*) FROM chunks WHERE collection_id={self._CID}"
                           " AND tsv @@ plainto_tsquery('english', %s)", (collection, word))

    def changes(self, collection: str, op: str) -> int:
        return self._value(f"SELECT count(*) FROM changes WHERE collection_id={self._CID} AND op=%s",
                           (collection, op))

    def paths(self, collection: str) -> dict[str, str]:
        from ragweedd.store.postgres.connection import from_pg

        return {from_pg(r["source_file"]): r["md5"] for r in self._all(
            f"SELECT source_file, md5 FROM document_paths WHERE collection_id={self._CID} AND source=%s",
            (collection, self.source))}

    def keyword_texts(self, collection: str) -> list[str]:
        """The text column each chunk's keyword index (``tsv``) is made from, beside its context."""
        return [r["content"] for r in self._all(
            f"SELECT content FROM chunks WHERE collection_id={self._CID} AND tsv IS NOT NULL", (collection,))]

    def contexts(self, collection: str) -> list[str]:
        return [r["context"] for r in self._all(
            f"SELECT context FROM chunks WHERE collection_id={self._CID} AND context <> ''", (collection,))]

    def pending(self, collection: str) -> int:
        return self._value(f"SELECT count(*) FROM pending_vectors WHERE collection_id={self._CID}", (collection,))

    def change_ids(self, collection: str, op: str) -> list[int]:
        return [r["id"] for r in self._all(
            f"SELECT id FROM changes WHERE collection_id={self._CID} AND op=%s ORDER BY seq", (collection, op))]

"""The search and answer history on PostgreSQL: the ``history`` table, as HistoryDB keeps it in
history.sqlite3 (store/history_db.py). ``n`` (a sequence) breaks ``created_at`` ties, as the
rowid does there, so the row just written is never the one ``keep`` drops.

The history is private to a source (config ``source_name``): several machines share the database,
but a machine's searches and answers are its user's, so every read, write and ``keep`` here is
scoped to this store's source, and another source's entry is as absent as one never written.
Rows written before the history had a source (migration 6) have the source '' (docs/postgres.md)."""

from __future__ import annotations

from typing import Any

from ragweedd.store.pg import PgConn


class PgHistory:
    def __init__(self, dsn: str, *, source: str) -> None:
        self.db = PgConn(dsn)
        self.source = source

    def __str__(self) -> str:
        from ragweedd.config import redact_dsn

        return f"history of source {self.source!r} in {redact_dsn(self.db.dsn)}"

    def close(self) -> None:
        self.db.close()

    def insert(self, hid: str, kind: str, query: str, created_at: float, body_json: str, *, keep: int = 0) -> None:
        with self.db.tx() as c:
            c.execute("INSERT INTO history(id, source, kind, query, created_at, body_json) VALUES (%s,%s,%s,%s,%s,%s)",
                      (hid, self.source, kind, query, created_at, body_json))
            if keep > 0:
                c.execute("DELETE FROM history WHERE n IN (SELECT n FROM history WHERE source=%s"
                          " ORDER BY created_at DESC, n DESC OFFSET %s)", (self.source, keep))

    def set_body(self, hid: str, body_json: str) -> bool:
        return self.db.run("UPDATE history SET body_json=%s WHERE id=%s AND source=%s",
                           (body_json, hid, self.source)) > 0

    def delete(self, hid: str) -> bool:
        return self.db.run("DELETE FROM history WHERE id=%s AND source=%s", (hid, self.source)) > 0

    def page(self, offset: int, limit: int, kind: str | None = None) -> tuple[int, list[tuple[str, str, str, float]]]:
        where, args = "WHERE source=%s", [self.source]
        if kind:
            where, args = where + " AND kind=%s", [*args, kind]
        with self.db.tx() as c:  # one snapshot for the count and the page
            total = c.execute(f"SELECT count(*) AS n FROM history {where}", args).fetchone()["n"]
            rows = c.execute(f"SELECT id, kind, query, created_at FROM history {where}"
                             " ORDER BY created_at DESC, n DESC LIMIT %s OFFSET %s", [*args, limit, offset]).fetchall()
        return int(total), [(r["id"], r["kind"], r["query"], float(r["created_at"])) for r in rows]

    def get(self, hid: str) -> dict[str, Any] | None:
        return self.db.one("SELECT id, kind, query, created_at, body_json FROM history WHERE id=%s AND source=%s",
                           (hid, self.source))

    def count(self) -> int:
        return int(self.db.value("SELECT count(*) FROM history WHERE source=%s", (self.source,)))

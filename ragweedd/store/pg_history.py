"""The search and answer history on PostgreSQL: the ``history`` table, as HistoryDB keeps it in
history.sqlite3 (store/history_db.py). ``n`` (a sequence) breaks ``created_at`` ties, as the
rowid does there, so the row just written is never the one ``keep`` drops. The history is shared
by every process on the database, as a team's index is."""

from __future__ import annotations

from typing import Any

from ragweedd.store.pg import PgConn


class PgHistory:
    def __init__(self, dsn: str) -> None:
        self.db = PgConn(dsn)

    def __str__(self) -> str:
        from ragweedd.config import redact_dsn

        return f"history in {redact_dsn(self.db.dsn)}"

    def close(self) -> None:
        self.db.close()

    def insert(self, hid: str, kind: str, query: str, created_at: float, body_json: str, *, keep: int = 0) -> None:
        with self.db.tx() as c:
            c.execute("INSERT INTO history(id, kind, query, created_at, body_json) VALUES (%s,%s,%s,%s,%s)",
                      (hid, kind, query, created_at, body_json))
            if keep > 0:
                c.execute("DELETE FROM history WHERE n IN (SELECT n FROM history"
                          " ORDER BY created_at DESC, n DESC OFFSET %s)", (keep,))

    def set_body(self, hid: str, body_json: str) -> bool:
        return self.db.run("UPDATE history SET body_json=%s WHERE id=%s", (body_json, hid)) > 0

    def delete(self, hid: str) -> bool:
        return self.db.run("DELETE FROM history WHERE id=%s", (hid,)) > 0

    def page(self, offset: int, limit: int, kind: str | None = None) -> tuple[int, list[tuple[str, str, str, float]]]:
        where, args = ("WHERE kind=%s", [kind]) if kind else ("", [])
        with self.db.tx() as c:  # one snapshot for the count and the page
            total = c.execute(f"SELECT count(*) AS n FROM history {where}", args).fetchone()["n"]
            rows = c.execute(f"SELECT id, kind, query, created_at FROM history {where}"
                             " ORDER BY created_at DESC, n DESC LIMIT %s OFFSET %s", [*args, limit, offset]).fetchall()
        return int(total), [(r["id"], r["kind"], r["query"], float(r["created_at"])) for r in rows]

    def get(self, hid: str) -> dict[str, Any] | None:
        return self.db.one("SELECT id, kind, query, created_at, body_json FROM history WHERE id=%s", (hid,))

    def count(self) -> int:
        return int(self.db.value("SELECT count(*) FROM history"))

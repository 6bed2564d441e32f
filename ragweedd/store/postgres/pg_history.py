"""The search and answer history on PostgreSQL: the ``history`` table, as HistoryDB keeps it in
history.sqlite3 (store/sqlite/history_db.py). ``n`` (a sequence) breaks ``created_at`` ties, as the
rowid does there, so the row just written is never the one ``keep`` drops.

The history is private to a source (config ``source_name``): several machines share the database,
but a machine's searches and answers are its user's, so every read, write and ``keep`` here is
scoped to this store's source, and another source's entry is as absent as one never written.
Rows written before the history had a source (migration 6) have the source '' (docs/postgres.md).

Conversations (migration 7) follow history.sqlite3's (store/sqlite/history_db.py): a row per thread and its
turns as history rows naming it; a turn's number is taken under the conversation row's lock, so two
answers of one thread at once get two numbers."""

from __future__ import annotations

import json
from typing import Any, Callable

from ragweedd.config import redact_dsn
from ragweedd.store.postgres.connection import PgConn

_ENTRY = "SELECT id, kind, query, created_at, body_json, conversation_id, turn FROM history"


class PgHistory:
    def __init__(self, dsn: str, *, source: str) -> None:
        self.db = PgConn(dsn)
        self.source = source

    def __str__(self) -> str:
        return f"history of source {self.source!r} in {redact_dsn(self.db.dsn)}"

    def close(self) -> None:
        self.db.close()

    def insert(self, hid: str, kind: str, query: str, created_at: float, body_json: str, *, keep: int = 0) -> None:
        with self.db.tx() as c:
            c.execute("INSERT INTO history(id, source, kind, query, created_at, body_json) VALUES (%s,%s,%s,%s,%s,%s)",
                      (hid, self.source, kind, query, created_at, body_json))
            self._keep(c, keep)

    def insert_turn(self, hid: str, query: str, created_at: float, body_json: Callable[[int], str], *,
                    conversation: str, title: str | None, keep: int = 0) -> int:
        with self.db.tx() as c:
            if title is not None:
                c.execute("INSERT INTO conversations(source, id, title, created_at, updated_at)"
                          " VALUES (%s,%s,%s,%s,%s)", (self.source, conversation, title, created_at, created_at))
            elif c.execute("SELECT 1 FROM conversations WHERE source=%s AND id=%s FOR UPDATE",
                           (self.source, conversation)).fetchone() is None:
                return 0
            else:
                c.execute("UPDATE conversations SET updated_at = greatest(updated_at, %s) WHERE source=%s AND id=%s",
                          (created_at, self.source, conversation))
            turn = int(c.execute("SELECT coalesce(max(turn), 0) + 1 AS t FROM history WHERE source=%s"
                                 " AND conversation_id=%s", (self.source, conversation)).fetchone()["t"])
            c.execute("INSERT INTO history(id, source, kind, query, created_at, body_json, conversation_id, turn)"
                      " VALUES (%s,%s,'ask',%s,%s,%s,%s,%s)",
                      (hid, self.source, query, created_at, body_json(turn), conversation, turn))
            self._keep(c, keep)
            return turn

    def _keep(self, c: Any, keep: int) -> None:
        if keep > 0:
            dropped = c.execute("DELETE FROM history WHERE source=%s AND n IN (SELECT n FROM history WHERE source=%s"
                                " ORDER BY created_at DESC, n DESC OFFSET %s)",
                                (self.source, self.source, keep)).rowcount
            if dropped:
                self._orphans(c)

    def _orphans(self, c: Any) -> None:
        # a conversation whose last turn went (a keep bound, a deleted entry) goes with it
        c.execute("DELETE FROM conversations c WHERE source=%s AND NOT EXISTS (SELECT 1 FROM history h"
                  " WHERE h.source = c.source AND h.conversation_id = c.id)", (self.source,))

    def set_body(self, hid: str, body_json: str) -> bool:
        return self.db.run("UPDATE history SET body_json=%s WHERE id=%s AND source=%s",
                           (body_json, hid, self.source)) > 0

    def delete(self, hid: str) -> bool:
        with self.db.tx() as c:
            gone = c.execute("DELETE FROM history WHERE id=%s AND source=%s", (hid, self.source)).rowcount > 0
            if gone:
                self._orphans(c)
            return gone

    def delete_conversation(self, cid: str) -> int | None:
        with self.db.tx() as c:
            turns = c.execute("DELETE FROM history WHERE source=%s AND conversation_id=%s", (self.source, cid)).rowcount
            if not c.execute("DELETE FROM conversations WHERE source=%s AND id=%s", (self.source, cid)).rowcount:
                return None
            return int(turns)

    def adopt_conversations(self) -> int:
        with self.db.tx() as c:
            rows = c.execute("SELECT id, body_json FROM history WHERE source=%s AND kind='ask'"
                             " AND conversation_id IS NULL AND body_json LIKE %s",
                             (self.source, '%"conversation_id"%')).fetchall()
            n = 0
            for r in rows:
                try:
                    body = json.loads(r["body_json"])
                except ValueError:
                    continue
                if not isinstance(body, dict):
                    continue
                cid, turn = body.get("conversation_id"), body.get("turn")
                if not isinstance(cid, str) or not isinstance(turn, int) or isinstance(turn, bool):
                    continue
                taken = c.execute("SELECT 1 FROM history WHERE source=%s AND conversation_id=%s AND turn=%s",
                                  (self.source, cid, turn)).fetchone()
                if taken is None:
                    c.execute("UPDATE history SET conversation_id=%s, turn=%s WHERE source=%s AND id=%s",
                              (cid, turn, self.source, r["id"]))
                    n += 1
            if n:
                c.execute("INSERT INTO conversations(source, id, title, created_at, updated_at)"
                          " SELECT h.source, h.conversation_id, (SELECT f.query FROM history f"
                          " WHERE f.source = h.source AND f.conversation_id = h.conversation_id"
                          " ORDER BY f.turn LIMIT 1),"
                          " min(h.created_at), max(h.created_at) FROM history h"
                          " WHERE h.source=%s AND h.conversation_id IS NOT NULL GROUP BY h.source, h.conversation_id"
                          " ON CONFLICT (source, id) DO NOTHING", (self.source,))
            return n

    def page(self, offset: int, limit: int, kind: str | None = None) -> tuple[int, list[tuple[Any, ...]]]:
        where, args = "WHERE source=%s", [self.source]
        if kind:
            where, args = where + " AND kind=%s", [*args, kind]
        with self.db.tx() as c:  # one snapshot for the count and the page
            total = c.execute(f"SELECT count(*) AS n FROM history {where}", args).fetchone()["n"]
            rows = c.execute(f"SELECT id, kind, query, created_at, conversation_id, turn FROM history {where}"
                             " ORDER BY created_at DESC, n DESC LIMIT %s OFFSET %s", [*args, limit, offset]).fetchall()
        return int(total), [(r["id"], r["kind"], r["query"], float(r["created_at"]), r["conversation_id"], r["turn"])
                            for r in rows]

    def get(self, hid: str) -> dict[str, Any] | None:
        return self.db.one(_ENTRY + " WHERE id=%s AND source=%s", (hid, self.source))

    def conversation_page(self, offset: int, limit: int) -> tuple[int, list[tuple[str, str, float, float, int]]]:
        with self.db.tx() as c:  # one snapshot for the count and the page
            total = c.execute("SELECT count(*) AS n FROM conversations WHERE source=%s", (self.source,)).fetchone()["n"]
            rows = c.execute("SELECT id, title, created_at, updated_at, (SELECT count(*) FROM history h"
                             " WHERE h.source = c.source AND h.conversation_id = c.id) AS turns FROM conversations c"
                             " WHERE source=%s ORDER BY updated_at DESC, n DESC LIMIT %s OFFSET %s",
                             (self.source, limit, offset)).fetchall()
        return int(total), [(r["id"], r["title"], float(r["created_at"]), float(r["updated_at"]), int(r["turns"]))
                            for r in rows]

    def conversation(self, cid: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        with self.db.tx() as c:
            row = c.execute("SELECT id, title, created_at, updated_at FROM conversations WHERE source=%s AND id=%s",
                            (self.source, cid)).fetchone()
            if row is None:
                return None
            turns = c.execute(_ENTRY + " WHERE source=%s AND conversation_id=%s ORDER BY turn",
                              (self.source, cid)).fetchall()
        return dict(row), [dict(t) for t in turns]

    def count(self) -> int:
        return int(self.db.value("SELECT count(*) FROM history WHERE source=%s", (self.source,)))

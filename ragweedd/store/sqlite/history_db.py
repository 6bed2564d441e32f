"""history.sqlite3: one row per search or answer (the records themselves are shaped in answer/history.py).

``kind`` ("search" | "ask"), the query and ``created_at`` are real columns with indexes, because
listings sort and filter on them; the record is one JSON document in ``body_json``, so the answer
layer can add fields without migrations.

A conversation is a row of ``conversations`` (its id, title and times) and the answers that are its
turns: history rows whose ``conversation_id`` names it, numbered by ``turn`` from 1. Each turn's
record repeats its ``conversation_id`` and ``turn``, so a copy that carries only the five history
columns (a salvage, ``ragweedd migrate``) gets its threads back from the records
(``adopt_conversations``).

The daemon and the one-shot ``ragweedd ask`` may write the same file at once: SQLite's WAL and busy
timeout serialise the two processes, a lock serialises threads inside one process (they share a
connection, and two BEGINs on one connection would collide). Every sqlite3 error comes out as
StorageError naming the file.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.errors import StorageError
from ragweedd.store.sqlite.connection import Migration, connect, migrate, transaction

if TYPE_CHECKING:
    from types import TracebackType

MIGRATIONS: list[Migration] = [
    # Same table the first engine created without migrations, so an existing history file keeps its
    # rows: IF NOT EXISTS makes this a no-op there and the indexes below are what it gains.
    (1, "history table", """
        CREATE TABLE IF NOT EXISTS history(
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            query TEXT NOT NULL,
            created_at REAL NOT NULL,
            body_json TEXT NOT NULL);
    """),
    (2, "indexes on created_at and kind", """
        CREATE INDEX IF NOT EXISTS history_created ON history(created_at);
        CREATE INDEX IF NOT EXISTS history_kind_created ON history(kind, created_at);
    """),
    (3, "conversations", """
        ALTER TABLE history ADD COLUMN conversation_id TEXT;
        ALTER TABLE history ADD COLUMN turn INTEGER;
        CREATE UNIQUE INDEX history_conversation_turn ON history(conversation_id, turn)
            WHERE conversation_id IS NOT NULL;
        CREATE TABLE conversations(
            id TEXT PRIMARY KEY,
            title TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL);
        CREATE INDEX conversations_updated ON conversations(updated_at);
    """),
]
# The history rows of a conversation that outlive it (a keep bound, a deleted entry) name nothing:
# conversations left without a turn go with them, in the same transaction.
_ORPHANS = ("DELETE FROM conversations WHERE id NOT IN"
            " (SELECT conversation_id FROM history WHERE conversation_id IS NOT NULL)")
_ENTRY = "SELECT id, kind, query, created_at, body_json, conversation_id, turn FROM history"


_SALVAGE = "SELECT id, kind, query, created_at, body_json FROM history WHERE rowid"


class HistoryDB:
    def __str__(self) -> str:  # error messages name the file
        return str(self.path)

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.conn = connect(self.path)
        except sqlite3.DatabaseError as e:
            # connect() switches to WAL, which is where a file that is not SQLite shows itself
            raise StorageError(f"history database {self.path} cannot be opened: {e}",
                               hint="restart ragweedd: at start it moves a damaged history aside, keeps "
                                    "the entries it can still read and starts a new file") from e
        try:
            migrate(self.conn, MIGRATIONS, db_name=f"history database {self.path}")
        except BaseException:
            self.conn.close()
            raise

    def close(self) -> None:
        with self._lock:
            self.conn.close()

    def copy_salvageable_from(self, damaged: Path | str) -> int:
        """Copy the entries that can still be read from a damaged history file into this (new)
        one. Rows are read in small rowid ranges, so a bad page costs only the rows on it, not the
        scan of everything after it. Returns how many were kept."""
        src = connect(damaged, readonly=True)
        copied = 0
        try:
            top = self._highest_rowid(src)
            for lo in range(0, top + 1, 32):
                try:
                    rows = src.execute(_SALVAGE + " BETWEEN ? AND ?", (lo, lo + 31)).fetchall()
                except (sqlite3.DatabaseError, UnicodeDecodeError):
                    rows = []  # one bad page in the range: take the rows one by one
                    for rowid in range(lo, lo + 32):
                        try:
                            rows.extend(src.execute(_SALVAGE + " = ?", (rowid,)).fetchall())
                        except (sqlite3.DatabaseError, UnicodeDecodeError):
                            continue
                with self._lock, transaction(self.conn):
                    for row in rows:
                        self.conn.execute("INSERT OR IGNORE INTO history(id, kind, query, created_at, body_json)"
                                          " VALUES (?,?,?,?,?)", tuple(row))
                copied += len(rows)
        finally:
            src.close()
        self.adopt_conversations()
        return copied

    @staticmethod
    def _highest_rowid(src: sqlite3.Connection) -> int:
        # max(rowid) walks the right edge of the table; when that is damaged, the indexes on
        # created_at still hold every rowid
        for sql in ("SELECT max(rowid) FROM history", "SELECT max(rowid) FROM history INDEXED BY history_created",
                    "SELECT max(rowid) FROM history INDEXED BY history_kind_created"):
            try:
                top = src.execute(sql).fetchone()[0]
                if top is not None:
                    return int(top)
            except sqlite3.DatabaseError:
                continue
        return 0

    # --- writing ----------------------------------------------------------------------------------
    def insert(self, hid: str, kind: str, query: str, created_at: float, body_json: str, *,
               keep: int = 0) -> None:
        """Add a row; ``keep`` > 0 then drops the oldest rows beyond that many."""
        with self._lock, self._errors(), transaction(self.conn):
            self.conn.execute("INSERT INTO history(id, kind, query, created_at, body_json) VALUES (?,?,?,?,?)",
                              (hid, kind, query, created_at, body_json))
            self._keep(keep)

    def insert_turn(self, hid: str, query: str, created_at: float, body_json: Callable[[int], str], *,
                    conversation: str, title: str | None, keep: int = 0) -> int:
        """Add an answer as the next turn of ``conversation`` and return its number (from 1); the
        record is ``body_json(turn)``. ``title`` creates the conversation (its first turn); without
        it the conversation must exist, else nothing is written and 0 is returned."""
        with self._lock, self._errors(), transaction(self.conn):
            if title is not None:
                self.conn.execute("INSERT INTO conversations(id, title, created_at, updated_at) VALUES (?,?,?,?)",
                                  (conversation, title, created_at, created_at))
            elif not self.conn.execute("UPDATE conversations SET updated_at = max(updated_at, ?) WHERE id=?",
                                       (created_at, conversation)).rowcount:
                return 0
            turn = self.conn.execute("SELECT coalesce(max(turn), 0) + 1 FROM history WHERE conversation_id=?",
                                     (conversation,)).fetchone()[0]
            self.conn.execute("INSERT INTO history(id, kind, query, created_at, body_json, conversation_id, turn)"
                              " VALUES (?,'ask',?,?,?,?,?)",
                              (hid, query, created_at, body_json(turn), conversation, turn))
            self._keep(keep)
            return int(turn)

    def _keep(self, keep: int) -> None:
        if keep > 0:
            # rowid order breaks created_at ties, so the row just written is never the one dropped
            dropped = self.conn.execute(
                "DELETE FROM history WHERE rowid IN (SELECT rowid FROM history"
                " ORDER BY created_at DESC, rowid DESC LIMIT -1 OFFSET ?)", (keep,)).rowcount
            if dropped:
                self.conn.execute(_ORPHANS)

    def set_body(self, hid: str, body_json: str) -> bool:
        """Replace a row's record; False when there is no such row."""
        with self._lock, self._errors(), transaction(self.conn):
            return self.conn.execute("UPDATE history SET body_json=? WHERE id=?", (body_json, hid)).rowcount > 0

    def delete(self, hid: str) -> bool:
        with self._lock, self._errors(), transaction(self.conn):
            gone = self.conn.execute("DELETE FROM history WHERE id=?", (hid,)).rowcount > 0
            if gone:
                self.conn.execute(_ORPHANS)
            return gone

    def delete_conversation(self, cid: str) -> int | None:
        """Delete a conversation and every turn of it; the number of turns deleted, or None when
        there is no such conversation."""
        with self._lock, self._errors(), transaction(self.conn):
            turns = self.conn.execute("DELETE FROM history WHERE conversation_id=?", (cid,)).rowcount
            if not self.conn.execute("DELETE FROM conversations WHERE id=?", (cid,)).rowcount:
                return None
            return int(turns)

    def adopt_conversations(self) -> int:
        """Give rows whose record names a conversation (``conversation_id`` and ``turn``) but whose
        columns do not (copied from elsewhere) their columns and conversation; returns how many."""
        with self._lock, self._errors(), transaction(self.conn):
            n = self.conn.execute(
                "UPDATE OR IGNORE history SET conversation_id = json_extract(body_json, '$.conversation_id'),"
                " turn = json_extract(body_json, '$.turn') WHERE conversation_id IS NULL AND kind = 'ask'"
                " AND json_valid(body_json) AND json_type(body_json, '$.conversation_id') = 'text'"
                " AND json_type(body_json, '$.turn') = 'integer'").rowcount
            if n:
                self.conn.execute(
                    "INSERT OR IGNORE INTO conversations(id, title, created_at, updated_at)"
                    " SELECT conversation_id, (SELECT query FROM history f WHERE f.conversation_id = h.conversation_id"
                    " ORDER BY turn LIMIT 1), min(created_at), max(created_at)"
                    " FROM history h WHERE conversation_id IS NOT NULL GROUP BY conversation_id")
            return int(n)

    # --- reading ----------------------------------------------------------------------------------
    def page(self, offset: int, limit: int, kind: str | None = None) -> tuple[int, list[tuple[Any, ...]]]:
        """(total, [(id, kind, query, created_at, conversation_id, turn)]) newest first, of one kind or all."""
        where, args = ("WHERE kind=?", [kind]) if kind else ("", [])
        with self._lock, self._errors():
            total = self.conn.execute(f"SELECT count(*) FROM history {where}", args).fetchone()[0]
            rows = self.conn.execute(f"SELECT id, kind, query, created_at, conversation_id, turn FROM history {where}"
                                     " ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
                                     [*args, limit, offset]).fetchall()
        return total, [tuple(r) for r in rows]

    def get(self, hid: str) -> dict[str, Any] | None:
        """{id, kind, query, created_at, body_json, conversation_id, turn} of one row."""
        with self._lock, self._errors():
            r = self.conn.execute(_ENTRY + " WHERE id=?", (hid,)).fetchone()
        return dict(r) if r is not None else None

    def conversation_page(self, offset: int, limit: int) -> tuple[int, list[tuple[str, str, float, float, int]]]:
        """(total, [(id, title, created_at, updated_at, turns)]), the most recently continued first."""
        with self._lock, self._errors():
            total = self.conn.execute("SELECT count(*) FROM conversations").fetchone()[0]
            rows = self.conn.execute(
                "SELECT id, title, created_at, updated_at,"
                " (SELECT count(*) FROM history h WHERE h.conversation_id = c.id) FROM conversations c"
                " ORDER BY updated_at DESC, rowid DESC LIMIT ? OFFSET ?", (limit, offset)).fetchall()
        return total, [tuple(r) for r in rows]

    def conversation(self, cid: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The conversation's row {id, title, created_at, updated_at} and its turns' rows (as ``get``
        gives them) in turn order; None when there is no such conversation."""
        with self._lock, self._errors():
            c = self.conn.execute("SELECT id, title, created_at, updated_at FROM conversations WHERE id=?",
                                  (cid,)).fetchone()
            if c is None:
                return None
            turns = self.conn.execute(_ENTRY + " WHERE conversation_id=? ORDER BY turn", (cid,)).fetchall()
        return dict(c), [dict(t) for t in turns]

    def count(self) -> int:
        with self._lock, self._errors():
            return self.conn.execute("SELECT count(*) FROM history").fetchone()[0]

    def _errors(self) -> "_StorageErrors":
        return _StorageErrors(self.path)


class _StorageErrors:
    """sqlite3 errors become StorageError naming the file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> _StorageErrors:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if et is not None and issubclass(et, sqlite3.Error):
            raise StorageError(f"history database {self.path}: {e}",
                               hint="check free disk space and permissions of the state directory") from e

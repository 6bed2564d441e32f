"""SQLite connections and numbered migrations.

Every database runs in WAL mode with a busy timeout; schema changes are numbered migrations recorded
in ``schema_migrations`` so an old database is brought forward exactly once. One process writes a
database at a time (the daemon); readers (search, the one-shot CLI) use their own connections.
"""

from __future__ import annotations

import sqlite3
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from ragweedd.errors import StorageError

Migration = tuple[int, str, str]  # (number, name, SQL script)


def connect(path: Path | str, *, readonly: bool = False, timeout_s: float = 30.0) -> sqlite3.Connection:
    path = Path(path)
    try:
        if readonly:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout_s, check_same_thread=False)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(path), timeout=timeout_s, check_same_thread=False, isolation_level=None)
    except sqlite3.Error as e:
        raise StorageError(f"cannot open database {path}: {e}", hint="check the path and its permissions") from e
    conn.row_factory = sqlite3.Row
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
        if not readonly:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StorageError(f"database {path} could not switch to WAL mode (got {mode})")
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        conn.close()
        raise StorageError(f"{path} is not a usable SQLite database: {e}",
                           hint="move the file aside; ragweedd recreates it (indexes are rebuilt from your files)") from e
    return conn


@contextmanager
def transaction(conn: sqlite3.Connection, *, immediate: bool = True) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE .. COMMIT, rolled back on any exception. Connections are in autocommit mode
    (isolation_level=None) so transactions are always explicit."""
    conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    else:
        conn.execute("COMMIT")


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration], *, db_name: str) -> list[int]:
    """Apply the migrations whose number is not yet recorded; returns the numbers applied."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations("
        "number INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)"
    )
    done = {r[0] for r in conn.execute("SELECT number FROM schema_migrations")}
    known = [m[0] for m in migrations]
    if done - set(known):
        raise StorageError(
            f"{db_name} was written by a newer ragweedd (migrations {sorted(done - set(known))} unknown)",
            hint="upgrade ragweedd, or move the data directory aside to start fresh",
        )
    applied = []
    for number, name, script in sorted(migrations):
        if number in done:
            continue
        try:
            conn.execute("BEGIN IMMEDIATE")
            for stmt in _statements(script):
                conn.execute(stmt)
            conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (number, name, time.time()))
            conn.execute("COMMIT")
        except sqlite3.Error as e:
            conn.execute("ROLLBACK")
            raise StorageError(f"migration {number} ({name}) of {db_name} failed: {e}") from e
        applied.append(number)
    return applied


def _statements(script: str) -> list[str]:
    # sqlite3.complete_statement lets us split scripts without executescript(), which would
    # commit implicitly and break the one-transaction-per-migration rule.
    out, buf = [], ""
    for line in script.splitlines(keepends=True):
        buf += line
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out

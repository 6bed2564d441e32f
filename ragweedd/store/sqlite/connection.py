"""SQLite connections, the writer lock and numbered migrations.

Every database runs in WAL mode with a busy timeout; schema changes are numbered migrations recorded
in ``schema_migrations`` so an old database is brought forward exactly once.

One writer per database, as datasette does it. Readers open ``connect(path, readonly=True)``: the
file is opened ``mode=ro`` and ``PRAGMA query_only`` is on, so a reading connection cannot write
even by mistake. Every write goes through ``transaction()`` (or ``write()`` for one statement),
which holds the database's writer lock for the whole write transaction: one process-wide lock per
database file, keyed by the file's real path, so exactly one thread of this process writes each
database at a time, whichever connection it uses. Threads no longer meet inside SQLite's busy
handler, where waiters poll with sleeps and the last to arrive can starve. Other processes (the
one-shot CLI beside the daemon) are still kept apart by SQLite's own locking and busy timeout.

The lock is waited for no longer than the connection's busy timeout, as SQLite itself would wait,
so a connection opened with a short timeout (the IDF cache) never stalls behind an ingest. It is
re-entrant: a ``transaction()`` opened while the same thread already writes through the same
connection joins the outer transaction, so a named store method can be called alone or inside a
larger write. Lock order: no code path holds one database's write transaction while opening
another's (ingest writes rag.sqlite3 and ingest_db.sqlite3 one after the other, never nested);
should that ever be needed, take ingest_db.sqlite3 first, then rag.sqlite3, then history.sqlite3.
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

from ragweedd.errors import StorageError

Migration = tuple[int, str, str]  # (number, name, SQL script)

_WRITER_LOCKS: dict[str, threading.RLock] = {}
_WRITER_LOCKS_GUARD = threading.Lock()


def writer_lock(path: Path | str) -> threading.RLock:
    """The one writer lock of a database file (same file, same lock, however it was named)."""
    key = os.path.realpath(path)
    with _WRITER_LOCKS_GUARD:
        lock = _WRITER_LOCKS.get(key)
        if lock is None:
            lock = _WRITER_LOCKS[key] = threading.RLock()
        return lock


class Connection(sqlite3.Connection):
    """A connection that knows its database's writer lock and how long it may wait for it."""

    writer: threading.RLock | None = None
    timeout_s: float = 30.0


def connect(path: Path | str, *, readonly: bool = False, timeout_s: float = 30.0) -> sqlite3.Connection:
    path = Path(path)
    try:
        if readonly:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=timeout_s, check_same_thread=False,
                                   factory=Connection)
        else:
            path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            _create_private(path)
            conn = sqlite3.connect(str(path), timeout=timeout_s, check_same_thread=False, isolation_level=None,
                                   factory=Connection)
            conn.writer = writer_lock(path)
        conn.timeout_s = timeout_s
    except sqlite3.Error as e:
        raise StorageError(f"cannot open database {path}: {e}", hint="check the path and its permissions") from e
    conn.row_factory = sqlite3.Row
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _set_up(conn, path, readonly, timeout_s)
            return conn
        except sqlite3.DatabaseError as e:
            # Two connections switching a new database to WAL at once both hold its shared lock and
            # want the exclusive one: SQLite answers one of them "locked" at once, without waiting.
            # That is a moment's contention, not damage: the set-up is tried again.
            if _locked(e) and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            conn.close()
            if _locked(e):
                raise StorageError(f"database {path} stayed locked for {timeout_s:.0f} s: {e}",
                                   hint="another process holds it; stop it or wait, then try again") from e
            raise StorageError(f"{path} is not a usable SQLite database: {e}",
                               hint="restart ragweedd: at start it checks its databases, moves a damaged one "
                                    "aside and rebuilds it from your files") from e


def _locked(e: sqlite3.DatabaseError) -> bool:
    return isinstance(e, sqlite3.OperationalError) and ("locked" in str(e) or "busy" in str(e))


def _set_up(conn: sqlite3.Connection, path: Path, readonly: bool, timeout_s: float) -> None:
    conn.execute(f"PRAGMA busy_timeout = {int(timeout_s * 1000)}")
    if not readonly:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if mode.lower() != "wal":
            raise StorageError(f"database {path} could not switch to WAL mode (got {mode})")
        conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    if readonly:
        conn.execute("PRAGMA query_only = ON")


def _create_private(path: Path) -> None:
    """Create a new database file 0600 before SQLite opens it: SQLite gives its -wal and -shm the
    main file's mode, so the chunk text in them is never readable by others, whatever the umask."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
    except FileExistsError:
        pass
    except OSError:
        pass  # SQLite's own open reports what is wrong with the path, with its hint


def _lock_of(conn: sqlite3.Connection) -> tuple[threading.RLock | None, float]:
    if isinstance(conn, Connection):
        return conn.writer, conn.timeout_s
    # A plain sqlite3 connection (tests, tools): find its file the slow way.
    row = conn.execute("PRAGMA database_list").fetchone()
    timeout_ms = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    return (writer_lock(row[2]) if row and row[2] else None), timeout_ms / 1000


@contextmanager
def transaction(conn: sqlite3.Connection, *, immediate: bool = True) -> Iterator[sqlite3.Connection]:
    """BEGIN IMMEDIATE .. COMMIT under the database's writer lock, rolled back on any exception.
    Connections are in autocommit mode (isolation_level=None) so transactions are always explicit.
    Inside a transaction this thread already holds on ``conn``, it joins that transaction."""
    lock, timeout_s = _lock_of(conn)
    if lock is not None and not lock.acquire(timeout=max(timeout_s, 0.001)):
        # What SQLite raises when its own busy timeout runs out, so callers handle both alike.
        raise sqlite3.OperationalError("database is locked (another thread of this process is writing it)")
    try:
        if conn.in_transaction:
            yield conn
            return
        conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
        try:
            yield conn
        except BaseException:
            _rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except BaseException:
            # A COMMIT that fails (SQLITE_FULL on a full disk) leaves the transaction open: every
            # later transaction() on this connection would join it and nothing would ever be
            # committed again. Roll it back so the caller's retry starts clean.
            _rollback(conn)
            raise
    finally:
        if lock is not None:
            lock.release()


def _rollback(conn: sqlite3.Connection) -> None:
    # SQLite may already have rolled back on its own (SQLITE_FULL, SQLITE_IOERR): a ROLLBACK then
    # fails with "no transaction is active" and would hide the error that matters.
    if conn.in_transaction:
        try:
            conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass


SQLITE_FULL = 13


def is_disk_full(e: BaseException | None) -> bool:
    """True when ``e`` (or what caused it) is a full disk or quota: SQLite's SQLITE_FULL or an
    OSError ENOSPC/EDQUOT. Such a write is worth retrying once space comes back; it says nothing
    about the file being ingested."""

    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, sqlite3.Error) and (getattr(e, "sqlite_errorcode", 0) & 0xFF == SQLITE_FULL
                                             or "database or disk is full" in str(e)):
            return True
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


_DAMAGE = ("malformed", "not a database", "disk i/o error", "database corrupt")


def damage_in(e: BaseException | None) -> str | None:
    """The SQLite error that says a database file is damaged, if ``e`` is (or was caused by) one."""
    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, sqlite3.DatabaseError) and any(m in str(e).lower() for m in _DAMAGE):
            return str(e)
        e = e.__cause__ or e.__context__
        seen += 1
    return None


def write(conn: sqlite3.Connection, sql: str, args: Sequence = ()) -> sqlite3.Cursor:
    """One write statement under the writer lock, in the caller's transaction or its own. Its own is
    deferred, which is what an autocommit statement always was."""
    with transaction(conn, immediate=False):
        return conn.execute(sql, args)


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration], *, db_name: str) -> list[int]:
    """Apply the migrations whose number is not yet recorded; returns the numbers applied.

    Whether any is due is read first, without the writer lock: opening a database that is up to
    date (every search opens its collections) must never wait for a long write under way."""
    done = _recorded(conn)
    known = [m[0] for m in migrations]
    if done - set(known):
        raise StorageError(
            f"{db_name} was written by a newer ragweedd (migrations {sorted(done - set(known))} unknown)",
            hint="upgrade ragweedd, or move the data directory aside to start fresh",
        )
    if set(known) <= done:
        return []
    write(conn, "CREATE TABLE IF NOT EXISTS schema_migrations("
                "number INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at REAL NOT NULL)")
    applied = []
    for number, name, script in sorted(migrations):
        if number in done:
            continue
        try:
            with transaction(conn):
                # Another connection (a second thread opening the same new collection, or another
                # process) may have applied it since ``done`` was read; the IMMEDIATE transaction
                # holds the write lock, so this re-check is the one that counts.
                if conn.execute("SELECT 1 FROM schema_migrations WHERE number = ?", (number,)).fetchone():
                    continue
                for stmt in _statements(script):
                    conn.execute(stmt)
                conn.execute("INSERT INTO schema_migrations VALUES (?, ?, ?)", (number, name, time.time()))
        except sqlite3.Error as e:
            raise StorageError(f"migration {number} ({name}) of {db_name} failed: {e}") from e
        applied.append(number)
    return applied


def recorded_migrations(conn: sqlite3.Connection) -> set[int]:
    """The migration numbers a database has recorded (none before its first)."""
    return _recorded(conn)


def _recorded(conn: sqlite3.Connection) -> set[int]:
    try:
        return {r[0] for r in conn.execute("SELECT number FROM schema_migrations")}
    except sqlite3.OperationalError as e:
        if "no such table" not in str(e):
            raise
        return set()


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

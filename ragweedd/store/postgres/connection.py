"""PostgreSQL connections, transactions, numbered migrations and stored path names.

The server backend keeps every collection, the ingest state, the job queue and the history in one
PostgreSQL database (with the ``vector`` extension of pgvector), so several ragweedd processes on
several machines share one index. Its schema is a list of numbered migrations recorded in
``ragweedd_migrations``; they run under a transaction-wide advisory lock, so two daemons starting
at once against a new database apply each migration exactly once.

Connections are psycopg 3 in autocommit mode with rows as dicts (read by column name, as the
storage seam says). Each store object owns one connection and a lock: a transaction runs on one
thread at a time, and ``tx()`` opened inside another joins it as a savepoint, so a store method
can run alone or inside a larger write.

Path names: a PostgreSQL text value cannot hold NUL, which the SQLite form of an undecodable byte
uses (store/pathnames.py). Here the SQLite form is taken and each NUL written as U+E000 followed by
'x', and a U+E000 in a name written twice: injective, reversible, and character by character, so a
folder's stored form stays a prefix of its children's.
"""

from __future__ import annotations

import re
import select
import sys
import threading
import time
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from ragweedd.config import redact_dsn
from ragweedd.errors import StorageError, StoreUnreachableError
from ragweedd.store.pathnames import from_db, to_db

if TYPE_CHECKING:
    import psycopg

Migration = tuple[int, str, str]

_MARK = "\ue000"
PROBE_IDLE_S = 30.0  # a connection idle longer is checked before a transaction starts on it
_LOCK_MIGRATE = 0x72616777  # advisory lock key of schema changes ("ragw")


def to_pg(path: str) -> str:
    s = to_db(path)
    if _MARK in s:
        s = s.replace(_MARK, _MARK + _MARK)
    if "\x00" in s:
        s = s.replace("\x00", _MARK + "x")
    return s


def from_pg(text: str) -> str:
    if _MARK not in text:
        return from_db(text)
    out, i = [], 0
    while i < len(text):
        ch = text[i]
        if ch == _MARK and i + 1 < len(text):
            out.append("\x00" if text[i + 1] == "x" else _MARK)
            i += 2
            continue
        out.append(ch)
        i += 1
    return from_db("".join(out))


def maybe_from_pg(text: str | None) -> str | None:
    return None if text is None else from_pg(text)


def connect(dsn: str) -> psycopg.Connection:
    """An autocommit connection with dict rows; a failure names the server without its password."""
    try:
        import psycopg
        from psycopg.rows import dict_row
    except ImportError as e:
        raise StorageError("store is a PostgreSQL URI but the PostgreSQL driver is not installed",
                           hint="pip install 'ragweedd[postgres]' (psycopg 3), or set store = \"sqlite\"") from e
    try:
        return psycopg.connect(dsn, autocommit=True, row_factory=dict_row)  # type: ignore[arg-type]
    except psycopg.Error as e:
        kind = StoreUnreachableError if isinstance(e, psycopg.OperationalError) else StorageError
        raise kind(f"cannot connect to PostgreSQL at {redact_dsn(dsn)}: {_first_line(e)}",
                           hint="check the store URI in the config, that the server runs and accepts this "
                                "user (password from ~/.pgpass or PGPASSWORD); see docs/postgres.md") from e


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0]


class PgConn:
    """One connection, its lock and its transactions."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self.conn = connect(dsn)
        self.lock = threading.RLock()
        self.used = time.monotonic()  # when a statement last came back from the server
        # run on every new connection after a lost one (session state: the claimer's lock)
        self.on_reconnect: list[Callable[[], object]] = []

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    def _fresh(self) -> None:
        """Open the connection again when the server dropped it (a restart, a failover, an idle
        timeout): a store outlives its connection. Never inside a transaction, whose work is lost
        with the connection and must fail."""
        if (self.conn.closed or self.conn.broken) and self.conn.info.transaction_status.name != "INTRANS":
            self._reconnect()

    def _maybe_lost(self) -> bool:
        """Whether an idle connection may have been lost, without a round trip: the server says
        so before it closes one (a restart, pg_terminate_backend: a notice or end of stream is
        waiting on the socket), else only a long silence leaves doubt (a firewall that drops idle
        connections). A round trip per transaction would double a small write's cost."""

        if time.monotonic() - self.used > PROBE_IDLE_S:
            return True
        try:
            return bool(select.select([self.conn.fileno()], [], [], 0)[0])
        except (OSError, ValueError):
            return True

    @contextmanager
    def tx(self) -> Iterator[Any]:
        """A transaction (a savepoint inside one this thread already holds), under the lock."""
        import psycopg

        with self.lock:
            self._fresh()
            if self.conn.info.transaction_status.name == "IDLE" and self._maybe_lost():
                # a lost connection shows itself only when used: find out before the work starts,
                # while it can still be done on a new one
                self.all("SELECT 1")
            try:
                with self.conn.transaction():
                    yield self.conn
                self.used = time.monotonic()
            except psycopg.Error as e:
                raise _storage_error(self.dsn, e) from e

    def all(self, sql: str, args: Sequence[Any] | dict[str, Any] = (), *, retry: bool = True) -> list[dict[str, Any]]:
        """Rows of one statement. ``retry=False`` for a statement that must not run twice (it may
        have taken effect on a connection lost before its answer came)."""
        import psycopg

        with self.lock:
            self._fresh()
            try:
                rows = self.conn.execute(sql, args).fetchall()
                self.used = time.monotonic()
                return rows  # type: ignore[return-value]
            except psycopg.OperationalError as e:
                if not retry or not self._retry_after(e):
                    raise _storage_error(self.dsn, e) from e
                return self.conn.execute(sql, args).fetchall()  # type: ignore[arg-type,return-value]
            except psycopg.Error as e:
                raise _storage_error(self.dsn, e) from e

    def _retry_after(self, e: BaseException) -> bool:
        """A read or single statement outside a transaction that failed because the connection
        was lost is tried once more on a new connection."""
        if not (self.conn.closed or self.conn.broken) or self.conn.info.transaction_status.name == "INTRANS":
            return False
        self._reconnect()
        return True

    def _reconnect(self) -> None:
        self.conn = connect(self.dsn)
        for again in self.on_reconnect:
            again()

    def one(self, sql: str, args: Sequence[Any] | dict[str, Any] = (), *, retry: bool = True) -> dict[str, Any] | None:
        rows = self.all(sql, args, retry=retry)
        return rows[0] if rows else None

    def value(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> Any:
        row = self.one(sql, args)
        return None if row is None else next(iter(row.values()))

    def run(self, sql: str, args: Sequence[Any] | dict[str, Any] = ()) -> int:
        """One statement in the caller's transaction or its own; returns the rows it touched."""
        import psycopg

        with self.lock:
            self._fresh()
            try:
                n = self.conn.execute(sql, args).rowcount  # type: ignore[arg-type]
                self.used = time.monotonic()
                return n
            except psycopg.OperationalError as e:
                if not self._retry_after(e):
                    raise _storage_error(self.dsn, e) from e
                return self.conn.execute(sql, args).rowcount  # type: ignore[arg-type]
            except psycopg.Error as e:
                raise _storage_error(self.dsn, e) from e


# SQLSTATEs of a server going away: admin_shutdown, crash_shutdown, cannot_connect_now (starting up)
_GOING_AWAY = ("57P01", "57P02", "57P03")


def _lost(e: BaseException) -> bool:
    """Whether the psycopg error ``e`` says the server cannot be reached, rather than anything about
    the statement: no SQLSTATE on an operational error is libpq's own (connection refused, closed,
    lost), class 08 is a connection exception."""
    import psycopg

    if isinstance(e, psycopg.InterfaceError):
        return "connection" in str(e)  # "the connection is closed/lost"
    if not isinstance(e, psycopg.OperationalError):
        return False
    state = getattr(e, "sqlstate", None)
    return state is None or state.startswith("08") or state in _GOING_AWAY


def server_unreachable(e: BaseException | None) -> bool:
    """True when ``e`` (or what caused it) is the database server out of reach: the work that
    raised it is worth doing again once the server answers, and it says nothing about a file."""

    seen = 0
    while e is not None and seen < 10:
        if isinstance(e, StoreUnreachableError):
            return True
        if "psycopg" in sys.modules and _lost(e):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


def _storage_error(dsn: str, e: BaseException, *, database: str = "") -> StorageError:
    """A server error as the user sees it. A migration's CREATE EXTENSION that fails (this user may
    not create it, or the server does not have it installed) says so with what to do: the generic
    hint (is the server up, is its disk full) sent people looking in the wrong place."""

    sqlstate = getattr(e, "sqlstate", None)
    ext = re.search(r'extension "([^"]+)"', _first_line(e))
    if database and ext and sqlstate in ("42501", "0A000", "58P01"):
        name = ext.group(1)
        run = f"a superuser must run `CREATE EXTENSION {name};` in database {database!r}"
        if sqlstate == "42501":  # insufficient_privilege
            return StorageError(
                f"PostgreSQL at {redact_dsn(dsn)}: this user may not create the extension {name!r} in database "
                f"{database!r} ({_first_line(e)})",
                hint=f"{run} (or give this user the right to create it); see docs/postgres.md")
        return StorageError(  # feature_not_supported (PostgreSQL 15+), undefined_file (before)
            f"PostgreSQL at {redact_dsn(dsn)}: the extension {name!r} is not installed on the server, so database "
            f"{database!r} cannot have it ({_first_line(e)})",
            hint=f"install {'pgvector (e.g. the package postgresql-16-pgvector)' if name == 'vector' else name} "
                 f"on the server, then {run}; see docs/postgres.md")
    if _lost(e):
        return StoreUnreachableError(f"PostgreSQL at {redact_dsn(dsn)} cannot be reached: {_first_line(e)}",
                                     hint="check that the server runs and this machine reaches it; ragweedd "
                                          "retries by itself; see docs/postgres.md")
    return StorageError(f"PostgreSQL at {redact_dsn(dsn)}: {_first_line(e)}",
                        hint="check that the server runs and has free disk space; see docs/postgres.md")


def migrate(db: PgConn, migrations: Sequence[Migration]) -> list[int]:
    """Apply the migrations whose number is not yet recorded; returns the numbers applied. A
    database written by a newer ragweedd (numbers this one does not know) is refused."""
    import psycopg

    applied: list[int] = []
    with db.tx() as c:
        c.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_MIGRATE,))
        c.execute("CREATE TABLE IF NOT EXISTS ragweedd_migrations("
                  "number integer PRIMARY KEY, name text NOT NULL, applied_at double precision NOT NULL)")
        done = {r["number"] for r in c.execute("SELECT number FROM ragweedd_migrations").fetchall()}
        unknown = done - {m[0] for m in migrations}
        if unknown:
            raise StorageError(
                f"the PostgreSQL database {redact_dsn(db.dsn)} was written by a newer ragweedd "
                f"(migrations {sorted(unknown)} unknown)",
                hint="upgrade ragweedd on this machine to the version the other machines run")
        for number, name, script in sorted(migrations):
            if number in done:
                continue
            try:
                c.execute(script)
            except psycopg.Error as e:
                raise _storage_error(db.dsn, e, database=c.info.dbname) from e
            c.execute("INSERT INTO ragweedd_migrations VALUES (%s, %s, %s)", (number, name, time.time()))
            applied.append(number)
    return applied

"""A real PostgreSQL 16 with pgvector for the tests, from the PyPI package ``pgserver``.

One server per test session, in a temporary directory, reached over a unix socket there (no TCP
port to collide with another engineer's run); each test that asks for ``pg_dsn`` gets a database of
its own with the ``vector`` extension, dropped afterwards. Run as root, pgserver runs the server as
a dedicated system user ``pgserver`` (PostgreSQL refuses to run as root). When the server cannot be
started the PostgreSQL tests are skipped with the reason, or fail under RAGWEED_REQUIRE_TOOLS=1 (CI).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest


def _unavailable(msg: str) -> None:
    if os.environ.get("RAGWEED_REQUIRE_TOOLS") == "1":
        pytest.fail(msg + " (RAGWEED_REQUIRE_TOOLS=1)")
    pytest.skip(msg)


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The admin connection string of a running PostgreSQL with pgvector available."""
    try:
        import pgserver
        import psycopg
    except ImportError as e:
        _unavailable(f"PostgreSQL tests need the [test] extra (pgserver, psycopg): {e}")
    # short path: a unix socket path must stay under ~100 bytes
    root = tempfile.mkdtemp(prefix="rwpg")
    os.chmod(root, 0o755)  # the server runs as the 'pgserver' user when the tests run as root
    try:
        srv = pgserver.get_server(root, cleanup_mode="stop")
        uri = srv.get_uri()
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except Exception as e:  # noqa: BLE001 - any failure to start is reported the same way
        shutil.rmtree(root, ignore_errors=True)
        _unavailable(f"could not start PostgreSQL with pgvector (pgserver): {type(e).__name__}: {e}")
    try:
        yield uri
    finally:
        srv.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def fresh_database(server: str) -> Iterator[str]:
    """A new, empty database (with the vector extension) on ``server``, dropped on exit."""
    import psycopg

    name = "t_" + uuid.uuid4().hex[:12]
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    dsn = _with_dbname(server, name)
    try:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        yield dsn
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def pg_dsn(pg_server: str) -> Iterator[str]:
    """A fresh, empty database of its own (with the vector extension) for one test."""
    with fresh_database(pg_server) as dsn:
        yield dsn


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request) -> str | None:
    """Each backend in turn, for the suites that must behave the same on both: None (the data
    directory's SQLite files) or the URI of a fresh PostgreSQL database."""
    if request.param == "sqlite":
        return None
    return request.getfixturevalue("pg_dsn")


def _with_dbname(uri: str, name: str) -> str:
    # pgserver's URI is postgresql://postgres:@/postgres?host=/tmp/...
    head, _, query = uri.partition("?")
    base = head.rsplit("/", 1)[0]
    return f"{base}/{name}" + (f"?{query}" if query else "")

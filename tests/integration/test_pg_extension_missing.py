"""A database without pgvector's ``vector`` extension: a user who may not create it, or a server
that does not have it, gets a message saying exactly that, naming the database, and what a
superuser must run there; not the generic hint about a stopped server or a full disk."""

import uuid

import pytest

from ragweedd.errors import StorageError


def _dsn_as(admin_uri: str, user: str, dbname: str) -> str:
    # pgserver's URI is postgresql://postgres:@/postgres?host=/tmp/... (a unix socket, trust auth)
    return f"postgresql://{user}@/{dbname}?{admin_uri.partition('?')[2]}"


@pytest.fixture
def bare_db(pg_server):
    """A non-superuser role owning a database without the vector extension."""
    import psycopg

    tag = uuid.uuid4().hex[:8]
    user, db = f"rwnx_{tag}", f"rwnx_{tag}"
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f'CREATE ROLE "{user}" LOGIN')
        c.execute(f'CREATE DATABASE "{db}" OWNER "{user}"')
    yield _dsn_as(pg_server, user, db), db
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        c.execute(f'DROP ROLE IF EXISTS "{user}"')


def test_a_user_who_may_not_create_the_extension_is_told_what_a_superuser_must_run(bare_db):
    import psycopg

    from ragweedd.store.postgres.backend import PgBackend

    dsn, db = bare_db
    with pytest.raises(StorageError) as e:
        PgBackend(dsn, source="laptop")
    msg = str(e.value)
    assert "may not create the extension 'vector'" in msg and repr(db) in msg
    assert f"a superuser must run `CREATE EXTENSION vector;` in database {db!r}" in e.value.hint
    assert "disk space" not in msg
    with psycopg.connect(dsn) as c:  # nothing half made: the migration's transaction rolled back
        assert c.execute("SELECT to_regclass('ragweedd_migrations')").fetchone() == (None,)


def test_an_extension_the_server_lacks_is_named_as_not_installed(bare_db):
    # pgserver has pgvector, so a missing extension is shown with one it has not got
    from ragweedd.store.postgres.connection import PgConn, migrate

    dsn, db = bare_db
    conn = PgConn(dsn)
    try:
        with pytest.raises(StorageError) as e:
            migrate(conn, [(1, "x", "CREATE EXTENSION IF NOT EXISTS ragweedd_no_such_extension")])
    finally:
        conn.close()
    assert "extension 'ragweedd_no_such_extension' is not installed on the server" in str(e.value)
    assert repr(db) in str(e.value) and "disk space" not in str(e.value)
    assert "install ragweedd_no_such_extension on the server" in e.value.hint
    assert f"CREATE EXTENSION ragweedd_no_such_extension;` in database {db!r}" in e.value.hint

"""The PostgreSQL procedures of docs/team.md, run as the page shows them, on a real PostgreSQL 16
with pgvector (pgserver): backup with its pg_dump line and restore with its pg_restore line, by a
user that is not a superuser, into a database a superuser prepared as the page says; and a
laptop's SQLite collection moved in with its ``ragweedd migrate --to`` line. Each ends with
``ragweedd search`` finding the same documents as before. The monitoring and upgrade queries it
shows run, and the refusal of a newer database says what the page quotes.

(tests/integration/test_pg_copy.py checks in detail what the copy carries and ``ragweedd migrate``'s
output and errors; here the whole path an operator takes: ingest, migrate, switch ``store``, search.)
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "team.md"
# the URIs the page's commands use
DB_URI = "postgresql://ragweed@db.example.lan:5432/ragweed"
RESTORED_URI = "postgresql://ragweed@db.example.lan:5432/ragweed_restored"

TOPICS = ["sourdough starter feeding schedule", "lighthouse keeper night watch log", "green tea shop inventory",
          "bicycle chain lubrication steps"]


def page_command(program: str) -> list[str]:
    """The one command line of docs/team.md's sh blocks that runs ``program``."""
    text = PAGE.read_text()
    blocks = text.split("```sh\n")[1:]
    lines = [ln for b in blocks for ln in b.split("```")[0].splitlines() if ln.startswith(program + " ")]
    assert len(lines) == 1, f"docs/team.md shows {len(lines)} '{program}' commands"
    return shlex.split(lines[0])


def _replace(words: list[str], old: str, new: str) -> list[str]:
    out = [w.replace(old, new) for w in words]
    assert out != words, f"the page's command no longer holds {old!r}"
    return out


def _pg_bin(name: str) -> str:
    import pgserver

    path = Path(pgserver.__file__).parent / "pginstall" / "bin" / name
    assert path.exists(), path
    return str(path)


def _ragweedd(cfg: Path, *args: str, ok: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("RAGWEED_STORE", None)
    p = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), *args], capture_output=True,
                       text=True, env=env, timeout=300)
    if ok:
        assert p.returncode == 0, (args, p.stdout, p.stderr)
    return p


def _config(tmp_path: Path, name: str, store: str) -> Path:
    cfg = tmp_path / f"{name}.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\nstore = "{store}"\nsource_name = "alice-laptop"\n'
                   'log_level = "warning"\n[embed]\nmodel = "hash:64"\n')
    return cfg


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "notes"
    docs.mkdir()
    for i, topic in enumerate(TOPICS):
        (docs / f"n{i}.md").write_text(f"# Note {i}\n\nA note about the {topic}, kept for the team.\n")
    return docs


def _search(cfg: Path, query: str, mode: str) -> list[tuple[str, str, float]]:
    out = _ragweedd(cfg, "search", query, "-c", "notes", "--mode", mode, "--json").stdout
    res = json.loads(out.strip().splitlines()[-1])["results"]
    return [(r["filename"], r["text"], round(r["score"], 4)) for r in res]


def _dsn_as(admin_uri: str, user: str, dbname: str) -> str:
    # pgserver's URI is postgresql://postgres:@/postgres?host=/tmp/... (a unix socket, trust auth)
    return f"postgresql://{user}@/{dbname}?{admin_uri.partition('?')[2]}"


@pytest.fixture
def team_db(pg_server):
    """A non-superuser 'ragweed' role owning an empty database with the vector extension, and a
    second one to restore into, both prepared by the superuser as docs/team.md section 1 says."""
    import psycopg

    tag = uuid.uuid4().hex[:8]
    user, db, restored = f"rw_{tag}", f"rw_{tag}", f"rw_{tag}_restored"
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f'CREATE USER "{user}"')
        for name in (db, restored):
            c.execute(f'CREATE DATABASE "{name}" OWNER "{user}"')
    for name in (db, restored):
        with psycopg.connect(_dsn_as(pg_server, "postgres", name), autocommit=True) as c:
            c.execute("CREATE EXTENSION vector")
    yield _dsn_as(pg_server, user, db), _dsn_as(pg_server, user, restored)
    with psycopg.connect(pg_server, autocommit=True) as c:
        for name in (db, restored):
            c.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        c.execute(f'DROP USER IF EXISTS "{user}"')


def _hnsw_indexes(dsn: str) -> list[str]:
    import psycopg

    with psycopg.connect(dsn) as c:
        return [r[0] for r in c.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE 'vectors_hnsw_%'"
                                        " ORDER BY indexname").fetchall()]


def _migrations(dsn: str) -> list[int]:
    import psycopg

    with psycopg.connect(dsn) as c:
        return [r[0] for r in c.execute("SELECT number FROM ragweedd_migrations ORDER BY number").fetchall()]


def test_backup_and_restore_as_the_page_shows(tmp_path, team_db):
    live, restored = team_db
    cfg = _config(tmp_path, "live", live)
    _ragweedd(cfg, "ingest", str(_docs(tmp_path)), "-c", "notes")
    before = {mode: _search(cfg, "lighthouse keeper watch", mode) for mode in ("dense", "keyword", "hybrid")}
    assert before["hybrid"][0][0] == "n1.md" and len(before["dense"]) == len(TOPICS)

    dump = tmp_path / "ragweed.dump"
    words = _replace(page_command("pg_dump"), DB_URI, live)
    words = _replace(words, "--file=ragweed.dump", f"--file={dump}")
    p = subprocess.run([_pg_bin("pg_dump"), *words[1:]], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and dump.stat().st_size > 0, p.stderr

    words = _replace(page_command("pg_restore"), RESTORED_URI, restored)
    assert words[-1] == "ragweed.dump"
    p = subprocess.run([_pg_bin("pg_restore"), *words[1:-1], str(dump)], capture_output=True, text=True,
                       timeout=300)
    # a restore that reports errors exits 1 even when the data arrived: the page's flags avoid them
    assert p.returncode == 0 and p.stderr == "", p.stderr

    cfg_restored = _config(tmp_path, "restored", restored)
    for mode, hits in before.items():
        assert _search(cfg_restored, "lighthouse keeper watch", mode) == hits, mode
    assert _hnsw_indexes(restored) == _hnsw_indexes(live) != []  # built again by the restore
    assert _migrations(restored) == _migrations(live) != []
    _the_page_sql_runs(live)


def _the_page_sql_runs(dsn: str) -> None:
    """The monitoring and upgrade queries of the page, as the ragweed user on a database in use."""
    import re

    import psycopg

    text = PAGE.read_text()
    sql = [b.split("```")[0] for b in text.split("```sql\n")[1:]]
    assert "CREATE EXTENSION vector" in sql[0]  # the superuser's set-up, run by the team_db fixture
    statements = [st.strip() for b in sql[1:] for st in re.sub(r"--[^\n]*", "", b).split(";") if st.strip()]
    statements += re.findall(r"`(SELECT [^`]*);`", text)
    assert len(statements) >= 5, statements
    dbname = dsn.partition("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(dsn) as c:
        for st in statements:
            rows = c.execute(st.replace("'ragweed'", f"'{dbname}'")).fetchall()
            if "FROM ragweedd_migrations" in st or "pg_database_size" in st:
                assert rows, st


def test_a_database_of_a_newer_ragweedd_is_refused_as_the_page_says(tmp_path, pg_dsn):
    import psycopg

    cfg = _config(tmp_path, "server", pg_dsn)
    _ragweedd(cfg, "search", "anything", ok=False)  # creates the schema (and finds nothing indexed)
    assert _migrations(pg_dsn) != []
    with psycopg.connect(pg_dsn, autocommit=True) as c:
        c.execute("INSERT INTO ragweedd_migrations VALUES (999, 'from the future', 0)")
    p = _ragweedd(cfg, "search", "anything", ok=False)
    assert p.returncode != 0
    assert "was written by a newer ragweedd (migrations [999] unknown)" in p.stderr, p.stderr
    assert "upgrade ragweedd on this machine" in p.stderr
    assert "was written by a newer ragweedd (migrations [" in " ".join(PAGE.read_text().split())


def _sqlite_files(data: Path) -> dict[str, str]:
    return {str(f.relative_to(data)): hashlib.md5(f.read_bytes()).hexdigest() for f in sorted(data.rglob("*.sqlite3"))}


def test_moving_a_laptop_index_in_as_the_page_shows(tmp_path, pg_dsn):
    laptop = _config(tmp_path, "laptop", "sqlite")
    _ragweedd(laptop, "ingest", str(_docs(tmp_path)), "-c", "notes")
    before = {mode: _search(laptop, "lighthouse keeper watch", mode) for mode in ("dense", "hybrid")}
    assert before["hybrid"][0][0] == "n1.md"
    files = _sqlite_files(tmp_path / "data")
    assert any(name.endswith("rag.sqlite3") for name in files)

    words = page_command("ragweedd")
    assert words[:3] == ["ragweedd", "migrate", "--to"], words
    words = _replace(words, DB_URI + "?sslmode=verify-full", pg_dsn)  # a unix socket here: no TLS
    p = _ragweedd(laptop, *words[1:])
    assert "now set store" in p.stdout and "notes: 4 of 4 documents copied" in p.stdout, p.stdout
    assert _sqlite_files(tmp_path / "data") == files  # "The SQLite files are left as they were"

    server = _config(tmp_path, "server", pg_dsn)  # step 2: set store
    after = _search(server, "lighthouse keeper watch", "dense")
    # the same vectors, so the same cosine ranking; the keyword leg is PostgreSQL's own there
    assert after == before["dense"]
    hybrid = _search(server, "lighthouse keeper watch", "hybrid")
    assert hybrid[0][0] == "n1.md" and {h[0] for h in hybrid} == {h[0] for h in before["hybrid"]}
    again = _ragweedd(laptop, *words[1:])  # run again: nothing copied twice
    assert "notes: 0 of 4 documents copied" in again.stdout, again.stdout
    assert _search(server, "lighthouse keeper watch", "dense") == after

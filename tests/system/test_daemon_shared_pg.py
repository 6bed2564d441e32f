"""Daemons of several machines on one PostgreSQL database, as a user of each sees them: every
collection in the database is searchable from every machine (with its filters), the integrity
check's findings show in ``ragweedctl status``, and a database that goes away and comes back
leaves status answering and the changes made meanwhile indexed soon after it returns.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from tests.pg_fixture import fresh_database
from tests.system.conftest import ROOT, Daemon, wait_indexed, wait_until
from tests.system.state_probe import PgProbe

CTL = [sys.executable, "-m", "ragweedd.cli.ctl"]


def ctl(d: Daemon, *argv: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAGWEED_STATE_DIR": str(d.base / "state")}
    return subprocess.run(CTL + list(argv), capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)


def _sql(dsn: str, sql: str, args: tuple = ()) -> int:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, args).rowcount  # type: ignore[arg-type]


def _two_machines(pg_dsn, daemon, tmp_path):
    share, own = tmp_path / "share", tmp_path / "own"
    share.mkdir()
    own.mkdir()
    (share / "rain.md").write_text("# Rainfall\n\nThe rainfall in March was heavy on the northern hills.\n")
    (share / "rain.txt").write_text("Notes on rainfall: the drizzle of April filled the ponds.\n")
    (own / "harbour.txt").write_text("The harbour cranes unload the ships at dawn.\n")
    a = daemon({"share": [share]}, store=pg_dsn, source_name="alpha")
    b = daemon({"own": [own]}, store=pg_dsn, source_name="beta")
    wait_indexed(a, "share", 2)
    wait_indexed(b, "own", 1)
    a.wait_idle()
    b.wait_idle()
    return a, b


def test_every_collection_in_the_database_is_searchable_from_every_machine(pg_dsn, daemon, tmp_path):
    a, b = _two_machines(pg_dsn, daemon, tmp_path)
    # B does not declare 'share': named, it is searched; unnamed, it is covered too
    hits = b.search("rainfall", collections=["share"])
    assert hits and {h["collection"] for h in hits} == {"share"}, hits
    assert "share" in {h["collection"] for h in b.search("rainfall")}
    p = ctl(b, "search", "-c", "share", "rainfall")
    assert p.returncode == 0 and "rain" in p.stdout, p.stdout + p.stderr
    # the filters match the other machine's paths as the search finds them
    md = b.search("rainfall", file_type="md")
    assert md and all(h["source_file"].endswith(".md") for h in md), md
    glob = b.search("rainfall", path_glob="*/rain.txt")
    assert glob and all(h["source_file"].endswith("rain.txt") for h in glob), glob
    # a collection no machine holds is still an error naming it
    r = b.api("POST", "/v1/search", json={"query": "rainfall", "collections": ["nope"]})
    assert r.status_code == 404 and "'nope'" in r.json()["error"]["message"], r.text
    # listed: this machine's own first (with its folders), then the database's other ones
    items = b.api("GET", "/v1/collections").json()["items"]
    assert [c["name"] for c in items] == ["own", "share"], items
    assert items[0]["paths"] and items[1]["paths"] == [] and items[1]["documents"] == 2, items
    assert items[1]["from_config"] is False and items[1]["roots"] == [], items
    # the OpenAI face picks collections from that listing
    models = {m["id"] for m in b.api("GET", "/v1/models").json()["data"]}
    assert "ragweedd/share" in models, models
    # status stays this machine's: no root of 'share' is checked here
    assert [c["name"] for c in b.status()["collections"]] == ["own"]
    # A sees B's collection the same way
    assert {h["collection"] for h in a.search("harbour cranes", collections=["own"])} == {"own"}


def test_postgres_integrity_findings_show_in_the_text_status(pg_dsn, daemon, tmp_path):
    a, _b = _two_machines(pg_dsn, daemon, tmp_path)
    # a path this machine's ingest state calls indexed, gone from the collection
    gone = _sql(pg_dsn, "DELETE FROM document_paths WHERE source=%s AND source_file LIKE %s",
                ("alpha", "%rain.txt"))
    assert gone == 1
    a.proc.send_signal(signal.SIGUSR2)  # run the integrity check now
    wait_until(lambda: a.status()["integrity"] is not None, 60, 0.2, "the integrity check")
    integrity = a.status()["integrity"]
    assert not integrity["ok"] and any("rain.txt" in p for p in integrity["problems"]), integrity
    p = ctl(a, "status")
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stdout.splitlines() if "DEGRADED: integrity check" in ln]
    assert lines and "rain.txt" in lines[0] and "ingests these files again" in lines[0], p.stdout
    # and it was mended: the file is held again
    wait_until(lambda: a.search("drizzle April ponds", collections=["share"], path_glob="*/rain.txt"), 60, 0.5,
               "rain.txt held again")


@pytest.fixture
def private_pg():
    """A PostgreSQL server of this test's own, to stop and start (the session's is shared)."""
    pgserver = pytest.importorskip("pgserver")
    pytest.importorskip("psycopg")
    from pgserver._commands import pg_ctl

    root = tempfile.mkdtemp(prefix="rwpo")
    os.chmod(root, 0o755)
    srv = pgserver.get_server(root, cleanup_mode="stop")
    try:
        uri = srv.get_uri()
        import psycopg

        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")

        def stop(mode: str = "fast") -> None:
            pg_ctl(["-w", "-m", mode, "stop"], pgdata=srv.pgdata, user=srv.system_user)

        def start() -> None:
            srv.ensure_postgres_running()

        yield uri, stop, start
    finally:
        try:
            srv.ensure_postgres_running()  # cleanup stops what runs
        finally:
            srv.cleanup()
            shutil.rmtree(root, ignore_errors=True)


def test_status_answers_while_the_database_is_away_and_changes_meanwhile_are_indexed(private_pg, daemon,
                                                                                        tmp_path):
    server, stop_pg, start_pg = private_pg
    with fresh_database(server) as dsn:
        folder = tmp_path / "notes"
        folder.mkdir()
        (folder / "a.txt").write_text("The lighthouse keeper logs the fog every night.\n")
        d = daemon({"notes": [folder]}, store=dsn, source_name="alpha")
        try:
            wait_indexed(d, "notes", 1)
            d.wait_idle()
            stop_pg()
            (folder / "b.txt").write_text("The glacier calves blue ice into the fjord.\n")
            time.sleep(3)  # the debounced event meets the stopped server
            r = d.api("GET", "/v1/status")
            assert r.status_code == 200, r.text
            why = " | ".join(r.json()["degraded"])
            assert "cannot be reached" in why and "postgresql://" in why, why
            assert "file change events could not be queued meanwhile" in why, why  # b.txt's event
            assert d.api("GET", "/v1/health").status_code == 200
            p = ctl(d, "status")
            assert p.returncode == 0 and "DEGRADED: the PostgreSQL database" in p.stdout, p.stdout + p.stderr
            time.sleep(17)  # away for 20 s in all
            start_pg()
            # well before the hourly scan: the change made meanwhile is found and indexed
            wait_until(lambda: d.api("POST", "/v1/search", json={"query": "glacier calves fjord"}).status_code
                       == 200 and any(h["source_file"].endswith("b.txt") for h in
                                      d.search("glacier calves fjord")), 60, 0.5, "b.txt indexed")
            assert d.events("store_reachable_again")
            # and the note about the events that could not be queued is gone
            wait_until(lambda: not any("could not be queued" in w or "cannot be reached" in w
                                       for w in d.status()["degraded"]), 30, 0.5, "status without the outage")
        finally:
            d.stop()


def _met_the_outage(d) -> int:
    """How often an ingest worker met the server away: with a job (kept or failed) or claiming."""
    return sum(len(d.events(e)) for e in ("ingest_worker_error", "ingest_job_error", "ingest_job_waits_for_server"))


def _away(d, stop_pg, start_pg, mode: str, meanwhile=None) -> bool:
    """The server stopped (``mode``: fast, or immediate as a crash does) until the daemon has met
    its absence (``meanwhile()`` runs then), then started again. Returns whether status said then
    that files being ingested wait for the server."""
    before = _met_the_outage(d)
    stop_pg(mode)
    try:
        wait_until(lambda: any("cannot be reached" in w for w in d.status()["degraded"]), 60, 0.3,
                   "status to say the database is away")
        wait_until(lambda: _met_the_outage(d) > before, 60, 0.3, "an ingest worker to meet the stopped server")
        if meanwhile is not None:
            meanwhile()
        return any("ingest waits for the database server" in w for w in d.status()["degraded"])
    finally:
        start_pg()


def test_every_file_is_indexed_once_after_outages_in_the_middle_of_an_ingest(private_pg, daemon, tmp_path):
    """The server goes away twice while hundreds of files are ingested (a fast stop, then a crash),
    and files change meanwhile: the jobs whose outcome could not be written are not left 'running'
    under the daemon's own claim; every file ends indexed exactly once, with its last content, soon
    after the server is back, with no job left, and status no longer degraded."""
    server, stop_pg, start_pg = private_pg
    n = 300
    with fresh_database(server) as dsn:
        folder = tmp_path / "notes"
        folder.mkdir()
        for i in range(n):
            (folder / f"n{i:03d}.txt").write_text(f"Note {i}: the keeper of lamp {i} writes word w{i}x daily.\n")
        d = daemon({"notes": [folder]}, store=dsn, source_name="alpha", extra="ingest_workers = 2")
        try:
            def done() -> int:
                return sum(1 for r in d.live_rows("notes").values() if r["extract_status"] == "done")

            def edit() -> None:  # changes made while the server is away, early and late files alike
                for i in range(0, n, 15):
                    (folder / f"n{i:03d}.txt").write_text(f"Note {i} edited: the lamp {i} now reads e{i}z.\n")

            wait_until(lambda: done() >= 20, 120, 0.1, "the ingest under way")
            said = _away(d, stop_pg, start_pg, "fast", edit)
            mid = done()
            assert mid < n, "the ingest ended before the second outage: too few files"
            wait_until(lambda: done() >= mid + 10, 120, 0.2, "the ingest going on after the first outage")
            said = _away(d, stop_pg, start_pg, "immediate") or said
            # a job met the outage (the case this test is about), or the test proves nothing
            met = d.events("ingest_job_not_recorded") or d.events("ingest_job_waits_for_server")
            assert met, d.out.read_text()[-3000:]
            probe = d.probe
            assert isinstance(probe, PgProbe)
            jobs = "SELECT path, state, claimed_by FROM jobs WHERE source='alpha'"
            try:
                wait_until(lambda: done() == n and not probe._all(jobs), 120, 0.5, f"all {n} files indexed")
            except AssertionError as e:
                raise AssertionError(f"{e}: {done()} indexed, jobs left {probe._all(jobs)}") from None
            assert said, "status never said that files wait for the database server"
            paths = probe.paths("notes")
            assert len(paths) == n and len(set(paths.values())) == n, len(paths)
            # each file held with its last content, the edited ones too
            now = {f.name: hashlib.md5(f.read_bytes()).hexdigest() for f in folder.iterdir()}
            assert {os.path.basename(k): v for k, v in paths.items()} == now
            assert probe.chunks("notes") == n  # one chunk per note: none held twice, no old version kept
            for i in (0, 150, 285):
                hits = d.search(f"lamp e{i}z edited", path_glob=f"*/n{i:03d}.txt")
                assert hits and f"e{i}z" in hits[0]["text"], hits
            degraded: list[str] = []

            def clean() -> bool:
                degraded[:] = d.status()["degraded"]
                return not degraded

            try:
                wait_until(clean, 60, 0.5, "status without a degraded note")
            except AssertionError as e:
                raise AssertionError(f"{e}: {degraded}") from None
            d.wait_idle(120)
            hits = d.search("keeper lamp w123x")
            assert any(h["source_file"].endswith("n123.txt") for h in hits), hits
        finally:
            d.stop()

"""A real daemon subprocess (`python -m ragweedd --config X run`) on real temp folders.

``daemon`` gives a factory: ``d = daemon(collections={"notes": [folder]})`` writes a config with a
small debounce, the hash embedder (RAGWEED_EMBED_MODEL=hash:64) and a free loopback port, starts
the daemon and waits until its API answers. The daemon runs through tests/system/daemon_main.py,
which hands it an embedder that logs every call (one line per call with the number of texts) and,
with ``fail_watch=ROOT``, a watcher whose native watch of ROOT fails.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
import requests

from tests.tools import wait_until  # noqa: F401 - the system tests import it from here

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, base: Path, collections: dict[str, list[str]], *, debounce_s: float = 0.3,
                 delete_hold_s: float = 0.3, extra: str = "", env: dict | None = None,
                 fail_watch: Path | None = None, launcher_args: list[str] | None = None,
                 store: str | None = None, source_name: str | None = None) -> None:
        """``store``: a PostgreSQL URI (else the data directory's SQLite files); ``source_name``
        the machine name this daemon writes its paths under there."""
        from tests.system.state_probe import PgProbe, SqliteProbe

        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.cfg = base / "ragweedd.toml"
        self.embed_log = base / "embed.log"
        self.out = base / "daemon.log"
        lines = [f'listen = "127.0.0.1:{self.port}"', f'data_dir = "{base / "data"}"',
                 f'state_dir = "{base / "state"}"', f'cache_dir = "{base / "cache"}"',
                 f"debounce_s = {debounce_s}", f"delete_hold_s = {delete_hold_s}", "ingest_nice = 5", extra]
        self.store = store
        self.probe: SqliteProbe | PgProbe = SqliteProbe(base / "data")
        if store is not None:
            source_name = source_name or base.name
            lines[:0] = [f"store = {json.dumps(store)}", f"source_name = {json.dumps(source_name)}"]
            self.probe = PgProbe(store, source_name)
        for name, paths in collections.items():
            lines.append(f"[collections.{name}]\npaths = {json.dumps([str(p) for p in paths])}")
        self.cfg.write_text("\n".join(lines) + "\n")
        self.fail_watch = fail_watch
        self.launcher_args = list(launcher_args or [])  # more options of daemon_main.py
        self.env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64",
                    "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc: subprocess.Popen | None = None
        self.searches = 0

    # --- process ---------------------------------------------------------------------------------
    def start(self, wait: bool = True) -> "Daemon":
        out = open(self.out, "ab")
        argv = [sys.executable, str(ROOT / "tests" / "system" / "daemon_main.py"), "--config", str(self.cfg),
                "--embed-log", str(self.embed_log)]
        if self.fail_watch is not None:
            argv += ["--fail-watch", str(self.fail_watch)]
        argv += self.launcher_args
        self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=self.env, cwd=str(ROOT))
        out.close()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 60) -> None:
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"daemon exited with {self.proc.returncode}:\n{self.out.read_text()[-3000:]}")
            try:
                return requests.get(f"http://127.0.0.1:{self.port}/v1/health", timeout=2,
                                    headers=self.headers).status_code == 200
            except (requests.RequestException, FileNotFoundError):
                return False
        wait_until(ready, timeout, 0.1, "the daemon's API")

    @property
    def headers(self) -> dict:
        tok = (self.base / "state" / "token").read_text().strip()
        return {"Authorization": f"Bearer {tok}"}

    def stop(self, timeout: float = 60) -> int:
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    # --- API -------------------------------------------------------------------------------------
    def api(self, method: str, path: str, **kw):
        r = requests.request(method, f"http://127.0.0.1:{self.port}{path}", headers=self.headers, timeout=60, **kw)
        return r

    def status(self) -> dict:
        r = self.api("GET", "/v1/status")
        assert r.status_code == 200, r.text
        return r.json()

    def search(self, query: str, **kw) -> list[dict]:
        self.searches += 1  # each search embeds its query once (counted in the embed log)
        r = self.api("POST", "/v1/search", json={"query": query, **kw})
        assert r.status_code == 200, r.text
        return r.json()["results"]

    def idle(self) -> bool:
        return self.idle_in(self.status())

    @staticmethod
    def idle_in(s: dict) -> bool:
        """The daemon's own word (``status.idle``): every file it knows of recorded, extracted and
        embedded, and no scan, settling event, repair or index update left (docs/daemon.md)."""
        return bool(s["idle"])

    def wait_idle(self, timeout: float = 60) -> None:
        wait_until(self.idle, timeout, 0.2, "the daemon to say it is idle")

    # --- state -----------------------------------------------------------------------------------
    @contextmanager
    def db(self, name: str = "ingest") -> Iterator[sqlite3.Connection]:
        """A read-only connection to one of the daemon's SQLite files, closed at the end of the
        ``with``: one left open in the test process keeps that process's view of the file's WAL
        index, which the daemon's start-up repair may replace, so later reads would see old rows."""
        p = self.base / "data" / ("ingest_db.sqlite3" if name == "ingest" else f"collections/{name}/rag.sqlite3")
        conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=30)
        conn.row_factory = sqlite3.Row
        try:
            yield conn
        finally:
            conn.close()

    def live_rows(self, collection: str) -> dict[str, Any]:
        return self.probe.live_rows(collection)

    def embed_calls(self) -> int:
        """Texts sent to the embedder by anything (ingest and search queries), from the hook log."""
        try:
            return sum(int(x) for x in self.embed_log.read_text().split())
        except FileNotFoundError:
            return 0

    def ingest_embedded(self) -> int:
        """Texts sent to the embedder by ingest, as its log lines (``embedded=``) report: the
        embedding stage's (``vectors_written``) and any a job embedded itself."""
        return sum(e.get("embedded") or 0 for e in self.events("ingest_file") + self.events("vectors_written"))

    def events(self, event: str | None = None) -> list[dict]:
        out = []
        for line in self.out.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue
                if event is None or ev.get("event") == event:
                    out.append(ev)
        return out

    def ingests_any(self) -> int:
        """How many files this daemon ingested (its ``ingest_file`` log lines, over all its runs)."""
        return len(self.events("ingest_file"))

    def ingests(self, path: str | Path, status: str | None = "indexed") -> list[dict]:
        return [e for e in self.events("ingest_file") if e.get("path") == str(path)
                and (status is None or e.get("status") == status)]


def wait_indexed(d: Daemon, collection: str, n: int, timeout: float = 60) -> None:
    """Until ``n`` documents of ``collection`` are extracted and published."""
    wait_until(lambda: sum(1 for r in d.live_rows(collection).values() if r["extract_status"] == "done") == n,
               timeout, 0.2, f"{n} indexed documents in {collection}")


def stop(d: Daemon) -> None:
    """A clean stop, or kill -9 when that fails: a test's daemon never outlives it."""
    try:
        d.stop(30)
    except Exception:  # noqa: BLE001 - whatever the stop raised, the daemon is killed
        d.kill9()


@contextmanager
def serving(d: Daemon) -> Iterator[Daemon]:
    """A started daemon for a ``with`` block (module fixtures), stopped after it."""
    try:
        yield d.start()
    finally:
        stop(d)


@pytest.fixture
def daemon(tmp_path):
    made: list[Daemon] = []

    def make(collections: dict[str, list], start: bool = True, **kw) -> Daemon:
        d = Daemon(tmp_path / f"d{len(made)}", collections, **kw)
        d.base.mkdir(parents=True, exist_ok=True)
        made.append(d)
        return d.start() if start else d

    yield make
    for d in made:
        stop(d)


@pytest.fixture
def any_daemon(store, daemon):  # the daemons stop before their database is dropped
    """``daemon``, on each backend in turn (the suites that must behave the same on both)."""
    def make(collections: dict[str, list], start: bool = True, **kw) -> Daemon:
        return daemon(collections, start=start, store=store, **kw)

    return make

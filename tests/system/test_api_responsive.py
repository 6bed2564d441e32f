"""The event loop only awaits: while the daemon walks a 200,000-file tree and while it ingests
10,000 files, /v1/health answers with p99 under 100 ms and /v1/status under 250 ms (on a busy
machine: under 10x the idle daemon's p99 measured just before, if that is more).

A probe thread alternates the two requests on one keep-alive connection for the whole phase and
records each latency; the phase ends when the daemon reports it over (the scan's summary, or a
fixed window of the ingest)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.system.conftest import wait_until

pytestmark = pytest.mark.slow

HEALTH_P99_MS = 100.0
STATUS_P99_MS = 250.0
# The targets hold on a quiet machine. On a busy one every request is slower, the idle daemon's too:
# a phase may then be this many times the idle daemon's p99, measured just before on the same
# machine. A loop held up by a scan or an ingest stalls requests for whole seconds, which this
# still fails. The machine's load moves between the idle measurement and a phase: at load 13 on two
# cores a scan phase saw 7x the idle p99 (260 ms against 36.7 ms) with the loop free.
SLACK = 10.0


def _p99(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(0.99 * (len(xs) - 1))))]


class Probe:
    def __init__(self, d) -> None:
        self.d = d
        self.lat: dict[str, list[float]] = {"health": [], "status": []}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        s = requests.Session()
        base = f"http://127.0.0.1:{self.d.port}"
        while not self._stop.is_set():
            for name in ("health", "status"):
                t0 = time.perf_counter()
                try:
                    r = s.get(f"{base}/v1/{name}", headers=self.d.headers, timeout=30)
                    if r.status_code != 200:
                        self.errors.append(f"{name}: {r.status_code}")
                except requests.RequestException as e:
                    self.errors.append(f"{name}: {e}")
                self.lat[name].append((time.perf_counter() - t0) * 1000)
            time.sleep(0.01)

    def __enter__(self) -> "Probe":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join(60)

    def check(self, phase: str, idle: tuple[float, float]) -> None:
        assert not self.errors, self.errors[:5]
        h, s = _p99(self.lat["health"]), _p99(self.lat["status"])
        print(f"{phase}: health p99 {h:.1f} ms (max {max(self.lat['health']):.1f}) over {len(self.lat['health'])}, "
              f"status p99 {s:.1f} ms (max {max(self.lat['status']):.1f}) over {len(self.lat['status'])}; "
              f"idle daemon: {idle[0]:.1f} ms, {idle[1]:.1f} ms")
        for name in self.lat:
            assert len(self.lat[name]) >= 10, f"{phase}: too few {name} samples ({len(self.lat[name])})"
        health_limit, status_limit = max(HEALTH_P99_MS, SLACK * idle[0]), max(STATUS_P99_MS, SLACK * idle[1])
        assert h < health_limit, f"{phase}: /v1/health p99 {h:.1f} ms (limit {health_limit:.1f} ms)"
        assert s < status_limit, f"{phase}: /v1/status p99 {s:.1f} ms (limit {status_limit:.1f} ms)"


def idle_p99(d) -> tuple[float, float]:
    """The p99 of /v1/health and /v1/status on the idle daemon, on this machine as busy as it is now."""
    with Probe(d) as p:
        wait_until(lambda: min(len(v) for v in p.lat.values()) >= 100, 300, 0.1, "latency samples of the idle daemon")
    assert not p.errors, p.errors[:5]
    return _p99(p.lat["health"]), _p99(p.lat["status"])


def _tree(root: Path, n: int, per_dir: int = 1000) -> None:
    for d in range(n // per_dir):
        sub = root / f"d{d:04d}"
        sub.mkdir(parents=True)
        for i in range(per_dir):
            fd = os.open(sub / f"f{i:04d}.dat", os.O_WRONLY | os.O_CREAT, 0o644)
            os.close(fd)


def test_api_stays_responsive_while_scanning_200k_files_and_ingesting_10k(daemon, tmp_path):
    big = tmp_path / "big"
    _tree(big, 200_000)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    d = daemon({"inbox": [inbox]})
    idle = idle_p99(d)

    # 1. a folder of 200,000 files is added at run time; its scan walks every one of them
    with Probe(d) as p:
        r = d.api("POST", "/v1/collections", json={"name": "big", "paths": [str(big)]})
        assert r.status_code == 200, r.text
        wait_until(lambda: any(e.get("collection") == "big" for e in d.events("scan_done")), 300, 0.2,
                   "the 200,000-file scan to finish")
    scan = [e for e in d.events("scan_done") if e.get("collection") == "big"][0]
    assert scan["files_seen"] == 200_000
    p.check(f"scan of 200,000 files ({scan['seconds']:.1f} s)", idle)

    # 2. 10,000 text files dropped into a watched folder are ingested
    r = d.api("DELETE", "/v1/collections/big")
    assert r.status_code == 200, r.text
    for i in range(10_000):
        (inbox / f"note{i:05d}.txt").write_text(f"Note {i}: the quick brown fox {i % 97} jumps over {i % 89}.\n")
    with Probe(d) as p:
        wait_until(lambda: d.status()["ingest"]["done_since_start"] >= 500, 120, 0.5, "ingest to be under way")
        time.sleep(10)
    assert d.status()["ingest"]["running"] or d.status()["queue"]["queued"] > 0
    p.check("ingest of 10,000 files", idle)

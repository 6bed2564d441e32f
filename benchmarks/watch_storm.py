"""A big watched tree under event storms: real inotify overflows, what they cost, and whether the
API stays responsive.

Builds a tree of ``--files`` files (default 97,000, in folders of 1,000; an extension no extractor
reads, so each costs a stat and a row), starts a real daemon on it (hash embedder) and waits until
every file is settled. Then, ``--bursts`` times, creates ``--burst-files`` new files as fast as
Python can in a new folder (far more events than the kernel's inotify queue holds,
/proc/sys/fs/inotify/max_queued_events, so the queue overflows for real) and waits until they are
settled too. Meanwhile a thread reads ``GET /v1/status`` every 0.25 s. Prints one table and writes
JSON (benchmarks/results/watch_storm.json): settle times, overflows logged, reconciliation scans
and their seconds, status latency p50/p99/max, and the root's watch mode at the end.

    .venv/bin/python benchmarks/watch_storm.py [--files 97000] [--bursts 5] [--burst-files 40000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import table, write_json  # noqa: E402
from benchmarks.freshness import D  # noqa: E402

PER_DIR = 1000


def make(root: Path, prefix: str, n: int) -> None:
    for i in range(n):
        d = root / f"{prefix}{i // PER_DIR:04d}"
        if i % PER_DIR == 0:
            d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:06d}.bin").write_bytes(b"\x00\x01 not a format ragweedd reads")


def settled(d: D, n: int) -> bool:
    s = d.status()
    counted = sum(s["files_by_state"].values())
    return counted >= n and s["idle"] is True


def wait_settled(d: D, n: int, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if settled(d, n):
            return round(time.monotonic() - t0, 1)
        time.sleep(0.5)
    raise SystemExit(f"not settled after {timeout} s: {d.status()['files_by_state']}")


def events(base: Path, name: str) -> list[dict]:
    out = []
    for line in (base / "daemon.log").read_text(errors="replace").splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return [e for e in out if e.get("event") == name]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=97000)
    ap.add_argument("--bursts", type=int, default=5)
    ap.add_argument("--burst-files", type=int, default=40000)
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args()
    queue_max = Path("/proc/sys/fs/inotify/max_queued_events").read_text().strip()
    with tempfile.TemporaryDirectory(prefix="ragweed-watch-storm-") as tmp:
        base, root = Path(tmp), Path(tmp) / "tree"
        t0 = time.monotonic()
        make(root, "d", a.files)
        built = round(time.monotonic() - t0, 1)
        d = D(base, root, 1.0, "hash:64")
        latencies: list[float] = []
        stop = threading.Event()

        def sample() -> None:
            s = requests.Session()
            while not stop.is_set():
                t = time.perf_counter()
                try:
                    s.get(d.url("/v1/status"), headers=d.h, timeout=120)
                    latencies.append((time.perf_counter() - t) * 1000)
                except requests.RequestException:
                    latencies.append(120000.0)
                stop.wait(0.25)

        try:
            first = wait_settled(d, a.files, a.timeout)
            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            total = a.files
            bursts = []
            for b in range(a.bursts):
                t = time.monotonic()
                make(root, f"burst{b}-", a.burst_files)
                made = round(time.monotonic() - t, 1)
                total += a.burst_files
                bursts.append({"burst": b, "create_s": made, "settle_s": wait_settled(d, total, a.timeout)})
            stop.set()
            sampler.join(10)
            st = d.status()
            mode = sorted({r["watch"] for c in st["collections"] for r in c["roots"]})
            degraded = st["degraded"]
        finally:
            d.stop()
        overflows = events(base, "watch_overflow")
        scans = [e.get("seconds") or e.get("ms", 0) / 1000 for e in events(base, "scan_done")]
    lat = sorted(latencies)
    row = {"files": a.files, "tree_build_s": built, "first_settle_s": first,
           "bursts": f"{a.bursts} x {a.burst_files}", "burst_settle_s_max": max(b["settle_s"] for b in bursts),
           "overflows": len(overflows), "scans": len(scans),
           "scan_s_p50": round(statistics.median(scans), 2) if scans else 0,
           "scan_s_max": round(max(scans), 2) if scans else 0,
           "status_ms_p50": round(lat[len(lat) // 2], 1) if lat else None,
           "status_ms_p99": round(lat[int(len(lat) * 0.99) - 1], 1) if lat else None,
           "status_ms_max": round(lat[-1], 1) if lat else None, "watch_mode": ",".join(mode)}
    print(f"inotify max_queued_events = {queue_max}")
    print(table([row], list(row)))
    for b in bursts:
        print(f"burst {b['burst']}: created in {b['create_s']} s, settled {b['settle_s']} s after")
    print("degraded at the end:", degraded)
    out = write_json("watch_storm", {"summary": row, "bursts": bursts, "degraded": degraded,
                                     "max_queued_events": queue_max})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

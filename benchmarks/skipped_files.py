"""Cost of files that are skipped (issue 12 item 6): N empty or unsupported files must settle fast.

Creates N files in one folder (half empty ``.txt``, half a few bytes of an extension no extractor
handles), starts a real daemon on it with the hash embedder, and prints the seconds until status
shows every file settled (all N in ``files_by_state`` and the queue empty), then the p50 / p95 of
``GET /v1/documents?limit=50`` (first page and a deep page). While the N files settle (as soon as
status shows the first of them), one real note is dropped into the folder: ``new_file_s`` is the
time from writing it to the documents listing showing it indexed (it must not wait behind the
skipped files; it includes the debounce, 1 s here). Writes JSON (default
benchmarks/results/skipped_files.json). Target: under 60 s for 50,000 files, listings under 200 ms.

With ``--live`` the daemon starts on an empty folder and the N files are created while it watches
(the reported case: inotify's queue overflows, default fs.inotify.max_queued_events = 16384, and
each overflow asks for a rescan of the root); times then count from the first file created, and
``overflows`` / ``scans`` count the daemon's ``watch_overflow`` and ``scan_done`` log lines (over
the whole run, the deletes at the end included), and ``polled`` says whether the folder ended up
polled instead of watched (status ``degraded``, read when the files had settled).
``documents_p95_during_ms`` / ``documents_max_during_ms`` are first-page listings sampled while the
files settle. Last, every skipped file is deleted while the daemon watches: ``delete_all_s`` is the
time until no skipped row is left and the queue is empty.

    .venv/bin/python benchmarks/skipped_files.py [--files 50000] [--live] [--timeout 900]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import table, write_json  # noqa: E402
from benchmarks.freshness import D, note  # noqa: E402

NEW_FILE = "zz-new-real-note.txt"


def make_files(root: Path, n: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        if i % 2:
            (root / f"f{i:06d}.bin").write_bytes(b"\x00\x01 not a format ragweedd reads")
        else:
            (root / f"e{i:06d}.txt").touch()


def settled(d: D, n: int) -> tuple[bool, int, dict]:
    s = requests.get(d.url("/v1/status"), headers=d.h, timeout=60).json()
    q = s["queue"]
    files = sum(v for k, v in s["files_by_state"].items() if k != "superseded")
    ok = files >= n and s["idle"] is True
    return ok, files + q.get("queued", 0), s


def new_file_state(d: D) -> str | None:
    r = requests.get(d.url(f"/v1/documents?path_glob={NEW_FILE}"), headers=d.h, timeout=60)
    items = r.json().get("items") or []
    return items[0]["state"] if items else None


def timed_get(d: D, path: str, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        t = time.perf_counter()
        r = requests.get(d.url(path), headers=d.h, timeout=120)
        out.append((time.perf_counter() - t) * 1000)
        r.raise_for_status()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--files", type=int, default=50_000)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--model", default="hash:64")
    ap.add_argument("--out", default="skipped_files")
    ap.add_argument("--live", action="store_true", help="create the files while the daemon watches the folder")
    ap.add_argument("--keep-log", help="copy the daemon's log here before its temporary folder goes")
    a = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="rw-skip-") as tmp:
        base = Path(tmp)
        root = base / "files"
        made_s = 0.0
        maker: threading.Thread | None = None
        if a.live:
            root.mkdir()
            d = D(base, root, 1.0, a.model)
            t0 = time.monotonic()

            def create() -> None:
                nonlocal made_s
                make_files(root, a.files)
                made_s = time.monotonic() - t0

            maker = threading.Thread(target=create)
            maker.start()
        else:
            t = time.monotonic()
            make_files(root, a.files)
            made_s = time.monotonic() - t
            t0 = time.monotonic()
            d = D(base, root, 1.0, a.model)
        try:
            last: dict = {}
            dropped_at: float | None = None
            seen_at_drop = 0
            new_file_s: float | None = None
            during: list[float] = []
            while True:
                ok, seen, last = settled(d, a.files + 1)
                if dropped_at is None and seen > 0:
                    dropped_at, seen_at_drop = time.monotonic(), seen
                    (root / NEW_FILE).write_text(note("ragweedneedle", 2_000))
                if dropped_at is not None and new_file_s is None and new_file_state(d) == "indexed":
                    new_file_s = time.monotonic() - dropped_at
                if (ok and new_file_s is not None) or time.monotonic() - t0 > a.timeout:
                    break
                during += timed_get(d, "/v1/documents?limit=50", 1)
                time.sleep(0.25)
            settle_s = time.monotonic() - t0
            first = timed_get(d, "/v1/documents?limit=50", 20)
            deep = timed_get(d, f"/v1/documents?limit=50&offset={max(0, a.files - 100)}", 20)
            # Then every skipped file is deleted while the daemon watches: their rows must go as fast.
            t = time.monotonic()
            for f in root.iterdir():
                if f.name != NEW_FILE:
                    f.unlink()
            gone_ok = False
            while time.monotonic() - t < a.timeout:
                s = requests.get(d.url("/v1/status"), headers=d.h, timeout=60).json()
                q = s["queue"]
                if (not s["files_by_state"].get("skipped") and not q.get("queued") and not q.get("running")
                        and not q.get("debouncing")):
                    gone_ok = True
                    break
                time.sleep(0.25)
            delete_s = time.monotonic() - t
        finally:
            if maker is not None:
                maker.join()
            d.stop()
            events = (base / "daemon.log").read_text(errors="replace")
            if a.keep_log:
                Path(a.keep_log).write_text(events)
    row = {"files": a.files, "live": a.live, "settled": ok, "settle_s": round(settle_s, 1),
           "create_files_s": round(made_s, 1),
           "overflows": events.count('"watch_overflow"'), "scans": events.count('"scan_done"'),
           "documents_max_during_ms": round(max(during), 1) if during else None,
           "documents_p95_during_ms": round(sorted(during)[int(0.95 * (len(during) - 1))], 1) if during else None,
           "delete_all_s": round(delete_s, 1) if gone_ok else None,
           "new_file_s": None if new_file_s is None else round(new_file_s, 1),
           "files_seen_at_drop": seen_at_drop, "load_avg_1m": round(os.getloadavg()[0], 2),
           "files_by_state": last.get("files_by_state"),
           "polled": any("polling" in m for m in last.get("degraded") or []), "degraded": last.get("degraded"),
           "documents_p50_ms": round(statistics.median(first), 1),
           "documents_p95_ms": round(sorted(first)[int(0.95 * (len(first) - 1))], 1),
           "documents_deep_p50_ms": round(statistics.median(deep), 1)}
    print(table([row], ["files", "live", "settled", "settle_s", "create_files_s", "new_file_s", "overflows",
                        "scans", "polled", "delete_all_s", "documents_p95_during_ms", "documents_max_during_ms",
                        "documents_p50_ms", "documents_p95_ms",
                        "documents_deep_p50_ms", "load_avg_1m"]))
    print(f"files_by_state: {row['files_by_state']}")
    print(f"wrote {write_json(a.out, row)}")
    return 0 if ok and new_file_s is not None and gone_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

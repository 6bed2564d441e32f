"""Cost of files that are skipped (issue 12 item 6): N empty or unsupported files must settle fast.

Creates N files in one folder (half empty ``.txt``, half a few bytes of an extension no extractor
handles), starts a real daemon on it with the hash embedder, and prints the seconds until status
shows every file settled (all N in ``files_by_state`` and the queue empty), then the p50 / p95 of
``GET /v1/documents?limit=50`` (first page and a deep page). Writes JSON (default
benchmarks/results/skipped_files.json). Target: under 60 s for 50,000 files, listings under 200 ms.

    .venv/bin/python benchmarks/skipped_files.py [--files 50000] [--timeout 900]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import table, write_json  # noqa: E402
from benchmarks.freshness import D  # noqa: E402


def make_files(root: Path, n: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        if i % 2:
            (root / f"f{i:06d}.bin").write_bytes(b"\x00\x01 not a format ragweedd reads")
        else:
            (root / f"e{i:06d}.txt").touch()


def settled(d: D, n: int) -> tuple[bool, dict]:
    s = requests.get(d.url("/v1/status"), headers=d.h, timeout=60).json()
    q = s["queue"]
    files = sum(v for k, v in s["files_by_state"].items() if k != "superseded")
    ok = (files >= n and not q.get("queued") and not q.get("running") and not q.get("debouncing")
          and not s["ingest"]["running"])
    return ok, s


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
    a = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="rw-skip-") as tmp:
        base = Path(tmp)
        root = base / "files"
        t = time.monotonic()
        make_files(root, a.files)
        made_s = time.monotonic() - t
        t0 = time.monotonic()
        d = D(base, root, 1.0, a.model)
        try:
            last: dict = {}
            while True:
                ok, last = settled(d, a.files)
                if ok or time.monotonic() - t0 > a.timeout:
                    break
                time.sleep(0.5)
            settle_s = time.monotonic() - t0
            first = timed_get(d, "/v1/documents?limit=50", 20)
            deep = timed_get(d, f"/v1/documents?limit=50&offset={max(0, a.files - 100)}", 20)
        finally:
            d.stop()
    row = {"files": a.files, "settled": ok, "settle_s": round(settle_s, 1), "create_files_s": round(made_s, 1),
           "files_by_state": last.get("files_by_state"),
           "documents_p50_ms": round(statistics.median(first), 1),
           "documents_p95_ms": round(sorted(first)[int(0.95 * (len(first) - 1))], 1),
           "documents_deep_p50_ms": round(statistics.median(deep), 1)}
    print(table([row], ["files", "settled", "settle_s", "documents_p50_ms", "documents_p95_ms",
                        "documents_deep_p50_ms"]))
    print(f"files_by_state: {row['files_by_state']}")
    print(f"wrote {write_json(a.out, row)}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

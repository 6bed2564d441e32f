"""Helpers shared by the benchmark scripts: tables on stdout, JSON in benchmarks/results/."""

from __future__ import annotations

import json
import os
import platform
import resource
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
SCIFACT = Path(os.environ.get("RAGWEED_SCIFACT", Path(__file__).resolve().parents[2] / "shared" / "eval" / "scifact"))


def peak_rss_mb() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS
    r = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return r / (1024 * 1024) if platform.system() == "Darwin" else r / 1024


def table(rows: list[dict], columns: list[str]) -> str:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    out = [" | ".join(c.ljust(widths[c]) for c in columns), "-|-".join("-" * widths[c] for c in columns)]
    out += [" | ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(out)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    return "" if v is None else str(v)


def write_json(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    payload = {"when": time.strftime("%Y-%m-%dT%H:%M:%S"), "machine": platform.machine(),
               "cpus": os.cpu_count(), **payload}
    p = RESULTS / f"{name}.json"
    p.write_text(json.dumps(payload, indent=2))
    return p

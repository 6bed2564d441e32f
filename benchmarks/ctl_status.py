"""Wall time of `ragweedctl status` against the real daemon engine (open_daemon + DaemonEngine behind
ApiServer on a free port, hash embedder, a few indexed text files).

    .venv/bin/python benchmarks/ctl_status.py [--runs 30] [--out benchmarks/results/ctl_status.json]

Prints a table (bare interpreter start-up for comparison) and writes JSON. The budget is "well
under 100 ms".
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.api_support import running_api  # noqa: E402


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], runs: int, env=None) -> tuple[list[float], list[float]]:
    """Wall and CPU milliseconds per run. CPU time (user+sys of the child) is reported too because
    wall time on a shared, loaded machine mostly measures the other processes."""
    wall, cpu = [], []
    for _ in range(runs):
        c0, t0 = _cpu(), time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, env=env)
        wall.append((time.perf_counter() - t0) * 1000)
        cpu.append((_cpu() - c0) * 1000)
        if p.returncode != 0:
            raise SystemExit(f"{cmd} failed: {p.stderr.decode()}")
    return wall, cpu


def row(name: str, timing: tuple[list[float], list[float]]) -> dict:
    ms, cpu = sorted(timing[0]), sorted(timing[1])
    return {"name": name, "runs": len(ms), "min_ms": round(ms[0], 1), "median_ms": round(statistics.median(ms), 1),
            "p90_ms": round(ms[int(0.9 * (len(ms) - 1))], 1), "max_ms": round(ms[-1], 1),
            "cpu_median_ms": round(statistics.median(cpu), 1)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=30)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "ctl_status.json"))
    a = ap.parse_args()
    from ragweedd import logging as rlog

    rlog.configure(level="warning", json=True)  # the in-process daemon's log would bury the table
    script = Path(sys.executable).parent / "ragweedctl"
    ctl = [str(script)] if script.exists() else [sys.executable, "-m", "ragweedd.cli.ctl"]
    with tempfile.TemporaryDirectory() as d:
        with running_api(Path(d)) as api:
            state = api.state_dir
            timed(ctl + ["--state-dir", str(state), "status"], 3)  # warm the page cache
            rows = [
                row("python -c pass", timed([sys.executable, "-c", "pass"], a.runs)),
                row("ragweedctl --help", timed(ctl + ["--help"], a.runs)),
                row("ragweedctl status", timed(ctl + ["--state-dir", str(state), "status"], a.runs)),
                row("ragweedctl status --json", timed(ctl + ["--state-dir", str(state), "status", "--json"], a.runs)),
            ]
    print(f"{'command':<28}{'runs':>5}{'min':>9}{'median':>9}{'p90':>9}{'max':>9}{'cpu med':>9}   (ms; wall, then CPU)")
    for r in rows:
        print(f"{r['name']:<28}{r['runs']:>5}{r['min_ms']:>9}{r['median_ms']:>9}{r['p90_ms']:>9}{r['max_ms']:>9}"
              f"{r['cpu_median_ms']:>9}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"benchmark": "ctl_status", "command": " ".join(ctl), "rows": rows,
                                       "python": sys.version.split()[0],
                                       "loadavg_1m": round(os.getloadavg()[0], 2)}, indent=2) + "\n")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; wrote {a.out}")


if __name__ == "__main__":
    main()

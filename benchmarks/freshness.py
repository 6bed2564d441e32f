"""Freshness and idle cost of the daemon (issue 6).

1. Time from saving a 10 kB note to it being searchable through the API, p50 / p95
   (target: under debounce_s + 2 s).
2. Steady RSS and CPU of an idle daemon watching N files (default 10,000), over 10 s.

Runs a real daemon subprocess on temp folders with the hash embedder (set --model to measure the
real one). Prints a table and writes JSON (default benchmarks/results/freshness.json).

    .venv/bin/python benchmarks/freshness.py [--saves 20] [--files 10000] [--debounce 2.0]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import string
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
SAVE_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class D:
    def __init__(self, base: Path, root: Path, debounce: float, model: str) -> None:
        self.base, self.port = base, free_port()
        cfg = base / "cfg.toml"
        cfg.write_text(f'listen = "127.0.0.1:{self.port}"\ndata_dir = "{base}/data"\nstate_dir = "{base}/state"\n'
                       f'cache_dir = "{base}/cache"\ndebounce_s = {debounce}\n'
                       f'[collections.bench]\npaths = ["{root}"]\n')
        env = {**os.environ, "RAGWEED_EMBED_MODEL": model}
        self.log = open(base / "daemon.log", "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", "ragweedd", "--config", str(cfg), "run"],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        end = time.time() + 120
        while time.time() < end:
            try:
                if requests.get(self.url("/v1/health"), headers=self.h, timeout=2).ok:
                    return
            except (requests.RequestException, FileNotFoundError):
                pass
            time.sleep(0.2)
        raise SystemExit("daemon did not start; see " + str(base / "daemon.log"))

    def url(self, p: str) -> str:
        return f"http://127.0.0.1:{self.port}{p}"

    @property
    def h(self) -> dict:
        return {"Authorization": "Bearer " + (self.base / "state" / "token").read_text().strip()}

    def status(self) -> dict:
        return requests.get(self.url("/v1/status"), headers=self.h, timeout=30).json()

    def found(self, word: str, path: Path) -> bool:
        # A new file per save: it is searchable once a query for its marker, restricted to its path
        # (so ranking against the other notes does not matter), returns it.
        r = requests.post(self.url("/v1/search"), headers=self.h,
                          json={"query": word, "top_k": 10, "path_glob": str(path)}, timeout=30)
        return any(h["source_file"] == str(path) for h in r.json()["results"])

    def idle(self) -> bool:
        s = self.status()
        return s["idle"] is True  # the daemon's own word: scans, settling events and vectors included

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(120)


def note(word: str, size: int = 10_000) -> str:
    rnd = random.Random(word)
    words = []
    while sum(len(w) + 1 for w in words) < size - len(word) - 10:
        words.append("".join(rnd.choice(string.ascii_lowercase) for _ in range(rnd.randint(3, 9))))
    words.insert(len(words) // 2, word)
    return " ".join(words) + ".\n"


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--saves", type=int, default=20)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--debounce", type=float, default=2.0)
    ap.add_argument("--model", default="hash:64")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "freshness.json"))
    a = ap.parse_args()
    res: dict = {"debounce_s": a.debounce, "model": a.model}
    with tempfile.TemporaryDirectory(prefix="ragweed-fresh-") as tmp:
        base = Path(tmp)
        root = base / "notes"
        root.mkdir()
        d = D(base, root, a.debounce, a.model)
        try:
            lat: list[float] = []
            missed = 0
            for i in range(a.saves):
                word = f"fresh{i:03d}marker"
                t0 = time.monotonic()
                path = root / f"note{i:03d}.md"
                path.write_text(note(word))
                while not d.found(word, path):
                    if time.monotonic() - t0 > SAVE_TIMEOUT_S:
                        break
                    time.sleep(0.05)
                else:
                    lat.append(time.monotonic() - t0)
                    print(f"save {i}: searchable after {lat[-1]:.2f} s", file=sys.stderr, flush=True)
                    continue
                missed += 1
                print(f"save {i}: NOT searchable after {SAVE_TIMEOUT_S} s", file=sys.stderr, flush=True)
            res["save_to_searchable_s"] = {"p50": round(pct(lat, 50), 3), "p95": round(pct(lat, 95), 3),
                                           "max": round(max(lat), 3), "n": len(lat), "not_found": missed,
                                           "target": a.debounce + 2.0}
            # Idle cost with many files watched.
            big = root / "many"
            for i in range(a.files):
                sub = big / f"d{i // 500:03d}"
                sub.mkdir(parents=True, exist_ok=True)
                (sub / f"f{i:05d}.txt").write_text(f"file {i} of the idle test, token t{i}x")
            t0 = time.monotonic()
            time.sleep(a.debounce + 1)
            while not d.idle():
                s = d.status()
                print(f"ingesting: {s['files_by_state']} queue {s['queue']}", file=sys.stderr, flush=True)
                time.sleep(5)
            res["ingest_files_s"] = round(time.monotonic() - t0, 1)
            time.sleep(max(10.0, a.debounce + 6))  # index flush and scheduler settle
            c0, t1 = cpu_s(d.proc.pid), time.monotonic()
            time.sleep(10)
            used = cpu_s(d.proc.pid) - c0
            res["idle"] = {"files_watched": a.files + 5, "cpu_s_per_10s": round(used, 3),
                           "cpu_pct": round(100 * used / (time.monotonic() - t1), 3),
                           "rss_mb": round(rss_mb(d.proc.pid), 1)}
        finally:
            d.stop()
    f = res["save_to_searchable_s"]
    print(f"{'metric':36s} value")
    print(f"{'save->searchable p50 (s)':36s} {f['p50']}")
    print(f"{'save->searchable p95 (s)':36s} {f['p95']}   (target < {f['target']})")
    print(f"{'ingest of ' + str(a.files) + ' files (s)':36s} {res['ingest_files_s']}")
    print(f"{'idle CPU over 10 s (s / %)':36s} {res['idle']['cpu_s_per_10s']} / {res['idle']['cpu_pct']}")
    print(f"{'idle RSS (MiB)':36s} {res['idle']['rss_mb']}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How long a stop takes: SIGTERM to the real daemon (``ragweedd run``) until its process is gone,
on a fresh numba cache (right after the first vectors, and once the index kernels are ready) and on
a warm one (docs/index.md, "numba cache").

    .venv/bin/python benchmarks/stop_time.py [--docs 20] [--runs 2] [--embed local]

Each run uses a new data, state and cache folder; NUMBA_CACHE_DIR is removed from the environment so
the daemon's own cache folder is the one that is fresh. Prints a table, writes
benchmarks/results/stop_time.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PRIME = """
import numpy as np
from ragweedd.index.hnsw import HnswIndex
v = np.random.default_rng(0).standard_normal((300, 16)).astype(np.float32)
idx = HnswIndex(16)
idx.add(np.arange(300), v)
idx.search(v[0], k=5, ef=32)
idx.delete([1])
"""


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _status(state: Path, port: int) -> dict | None:
    try:
        token = (state / "token").read_text().strip()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/status", headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return json.loads(r.read())
    except (OSError, ValueError):
        return None


def _wait(cond, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


def one_stop(base: Path, n_docs: int, embed: str, case: str, cache: Path) -> dict:
    docs = base / "docs"
    docs.mkdir(parents=True)
    for i in range(n_docs):
        (docs / f"n{i}.md").write_text(f"# Note {i}\n\nThe quick brown fox number {i} jumps over the lazy dog; "
                                       f"section {i} covers topic {i * 7}.\n")
    port = _port()
    cfg = base / "cfg.toml"
    lines = [f'listen = "127.0.0.1:{port}"', f'data_dir = "{base / "data"}"', f'state_dir = "{base / "state"}"',
             f'cache_dir = "{cache}"', "debounce_s = 0.3", f"[collections.notes]\npaths = [\"{docs}\"]"]
    if embed != "local":
        lines.insert(0, f'embed_model = "{embed}"')
    cfg.write_text("\n".join(lines) + "\n")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    log = open(base / "daemon.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "ragweedd", "--config", str(cfg), "run"], cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)
    state = base / "state"
    t_start = time.monotonic()
    _wait(lambda: (_status(state, port) or {}).get("vectors", {}).get("files_with_vectors") == n_docs, 600,
          "the first vectors")
    first_vectors_s = time.monotonic() - t_start
    if case == "fresh, kernels ready":
        _wait(lambda: b"index_kernels_ready" in (base / "daemon.log").read_bytes(), 600, "the kernels")
    elif case == "warm cache":
        time.sleep(2)
    t0 = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(120)
    stop_s = time.monotonic() - t0
    log.close()
    flush_skipped = b"index_flush_skipped" in (base / "daemon.log").read_bytes()
    return {"case": case, "stop_s": round(stop_s, 3), "first_vectors_s": round(first_vectors_s, 2),
            "exit": code, "index_flush_skipped": flush_skipped}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=20)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--embed", default="local", help="embed_model ('local' = the configuration's default)")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="rw-stop-") as tmp:
        warm_cache = Path(tmp) / "warm-cache"
        # the warm case's cache filled first (what make run does), by adding to and searching an index
        subprocess.run([sys.executable, "-c", PRIME], cwd=ROOT, check=True,
                       env={**os.environ, "NUMBA_CACHE_DIR": str(warm_cache / "numba")})
        # a checkout without index/warm.py (to measure the code before it) has no "kernels ready" to wait for
        cases = ["fresh, right after the first vectors", "fresh, kernels ready"]
        if not (ROOT / "ragweedd" / "index" / "warm.py").exists():
            cases.remove("fresh, kernels ready")
        for r in range(a.runs):
            for case in cases:
                rows.append(one_stop(Path(tmp) / f"{r}-{len(rows)}", a.docs, a.embed, case,
                                     Path(tmp) / f"c{len(rows)}"))
            rows.append(one_stop(Path(tmp) / f"{r}-{len(rows)}", a.docs, a.embed, "warm cache", warm_cache))
    print(table(rows, ["case", "stop_s", "first_vectors_s", "index_flush_skipped", "exit"]))
    print(f"results: {write_json('stop_time', {'docs': a.docs, 'embed': a.embed, 'rows': rows})}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

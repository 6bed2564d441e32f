"""Throughput and latency of the API with N concurrent clients, against the real daemon.

    .venv/bin/python benchmarks/api_load.py [--clients 10] [--seconds 10] [--path /v1/search]
                                            [--files 200] [--model hash:64] [--state-dir DIR]

By default a real ``ragweedd run`` process is started on a temporary config (free loopback port)
over a folder of generated text files, with the hash embedder unless --model names another, and
the load starts once every file is indexed. ``--state-dir DIR`` loads an already running daemon
instead (reads DIR/port and DIR/token). Routes documented as GET are requested with GET, the
others with POST and a search/ask body. The clients (aiohttp, keep-alive, one connection each) run
in this process, the daemon in its own, so they do not share a GIL. Prints requests/s and latency
percentiles and writes benchmarks/results/api_load.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERIES = ["hnsw graph index", "sqlite full text search", "attention token model", "nearest neighbour",
           "bm25 ranking porter", "what is a layer", "vector search", "keyword search with fts5"]


WORDS = ("graph index vector search keyword ranking token layer model neighbour sqlite attention "
         "porter stemming recall precision cluster entry point document chunk embedding daemon").split()


def method_of(path: str) -> str:
    """GET for routes the OpenAPI document lists with a GET operation, else POST."""
    from ragweedd.api.openapi import DOCUMENT

    ops = DOCUMENT["paths"].get(path.split("?", 1)[0], {})
    return "GET" if "get" in ops else "POST"


def write_corpus(folder: Path, n: int) -> None:
    import random

    rnd = random.Random(7)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        paras = [" ".join(rnd.choice(WORDS) for _ in range(60)) + "." for _ in range(3)]
        (folder / f"doc{i:05d}.txt").write_text(f"Document {i}\n\n" + "\n\n".join(paras) + "\n")


def start_daemon(base: Path, files: int, model: str) -> tuple[subprocess.Popen, Path]:
    """A real ``ragweedd run`` over ``files`` generated text files; returns once all are indexed."""
    import urllib.request

    docs = base / "docs"
    write_corpus(docs, files)
    cfg = base / "ragweedd.toml"
    cfg.write_text("\n".join([
        'listen = "127.0.0.1:0"', f'data_dir = "{base / "data"}"', f'state_dir = "{base / "state"}"',
        f'cache_dir = "{base / "cache"}"', "max_concurrent_answers = 64", "[embed]", f'model = "{model}"',
        "[collections.bench]", f'paths = ["{docs}"]']) + "\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    log = open(base / "daemon.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "ragweedd", "--config", str(cfg), "run"], stdout=log,
                            stderr=subprocess.STDOUT, env=env, cwd=str(ROOT))
    state = base / "state"
    deadline = time.time() + 600
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the daemon exited with {proc.returncode}; see {base / 'daemon.log'}")
        if time.time() > deadline:
            proc.terminate()
            raise SystemExit(f"the daemon did not index {files} files in 600 s")
        try:
            port = json.loads((state / "port").read_text())["port"]
            req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/status", headers={
                "Authorization": f"Bearer {(state / 'token').read_text().strip()}"})
            s = json.loads(urllib.request.urlopen(req, timeout=5).read())
            q = s["queue"]
            if (s["files_by_state"].get("indexed", 0) >= files and not (q["queued"] or q["running"])
                    and not s["ingest"]["running"]):
                return proc, state
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.2)


async def client_loop(session, url, method, headers, deadline, lat, errors, i):
    n = i
    while time.perf_counter() < deadline:
        body = {"query": QUERIES[n % len(QUERIES)]} if method == "POST" else None
        n += 1
        t0 = time.perf_counter()
        async with session.request(method, url, json=body, headers=headers) as r:
            await r.read()
            if r.status != 200:
                errors.append(r.status)
        lat.append(time.perf_counter() - t0)


async def load(port: int, token: str, clients: int, seconds: float, path: str) -> dict:
    import aiohttp

    url = f"http://127.0.0.1:{port}{path}"
    method = method_of(path)
    headers = {"Authorization": f"Bearer {token}"}
    conn = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=conn) as s:
        warm: list = []
        await client_loop(s, url, method, headers, time.perf_counter() + 1.0, warm, [], 0)
        lat: list[float] = []
        errors: list[int] = []
        t0 = time.perf_counter()
        await asyncio.gather(*(client_loop(s, url, method, headers, t0 + seconds, lat, errors, i)
                               for i in range(clients)))
        wall = time.perf_counter() - t0
    lat.sort()

    def pct(p):
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 2)

    return {"method": method, "clients": clients, "seconds": round(wall, 2), "requests": len(lat),
            "errors": len(errors),
            "rps": round(len(lat) / wall, 1), "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
            "max_ms": round(lat[-1] * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--path", default="/v1/search")
    ap.add_argument("--files", type=int, default=200, help="generated text files the started daemon indexes")
    ap.add_argument("--model", default="hash:64", help="embed.model of the started daemon (default hash:64)")
    ap.add_argument("--state-dir", metavar="DIR",
                    help="load an already running ragweedd (reads DIR/port and DIR/token) instead of starting one")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "api_load.json"))
    a = ap.parse_args()
    if a.state_dir:
        st = Path(a.state_dir).expanduser()
        port = json.loads((st / "port").read_text())["port"]
        res = asyncio.run(load(port, (st / "token").read_text().strip(), a.clients, a.seconds, a.path))
        a.engine = f"running daemon ({st})"
        report(res, a)
        return
    with tempfile.TemporaryDirectory() as d:
        proc, state = start_daemon(Path(d), a.files, a.model)
        try:
            port = json.loads((state / "port").read_text())["port"]
            token = (state / "token").read_text().strip()
            res = asyncio.run(load(port, token, a.clients, a.seconds, a.path))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    a.engine = f"ragweedd run, {a.files} generated files, {a.model}"
    report(res, a)


def report(res: dict, a) -> None:
    res.update({"benchmark": "api_load", "path": a.path, "engine": a.engine, "cpus": os.cpu_count(),
                "loadavg_1m": round(os.getloadavg()[0], 2)})
    cols = ["method", "clients", "requests", "errors", "rps", "p50_ms", "p90_ms", "p99_ms", "max_ms"]
    print("  ".join(f"{c:>9}" for c in cols))
    print("  ".join(f"{res[c]:>9}" for c in cols))
    print(f"engine {a.engine}, path {a.path}, load average during run {res['loadavg_1m']}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

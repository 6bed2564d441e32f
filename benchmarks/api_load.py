"""Search throughput and latency of the API with N concurrent clients.

    .venv/bin/python benchmarks/api_load.py [--clients 10] [--seconds 10] [--path /v1/search]

The server (FakeEngine-backed for now; pass --engine MODULE:FACTORY for the real one) runs in its
own process, the clients (aiohttp, keep-alive, one connection each) in this one, so they do not
share a GIL. Prints requests/s and latency percentiles and writes benchmarks/results/api_load.json.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
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


def serve(state: str, engine_spec: str) -> None:
    from ragweedd import logging as rlog
    from ragweedd.api.server import ApiServer, ensure_token

    rlog.configure(level="warning", json=True)
    mod, _, factory = engine_spec.partition(":")
    engine = getattr(importlib.import_module(mod), factory)()
    token = ensure_token(Path(state) / "token")

    async def main():
        srv = ApiServer(engine, token=token, listen="127.0.0.1:0", port_file=Path(state) / "port",
                        max_concurrent_answers=64)
        await srv.start()
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()
        await srv.stop()

    asyncio.run(main())


async def client_loop(session, url, headers, deadline, lat, errors, i):
    n = i
    while time.perf_counter() < deadline:
        body = {"query": QUERIES[n % len(QUERIES)]}
        n += 1
        t0 = time.perf_counter()
        async with session.post(url, json=body, headers=headers) as r:
            await r.read()
            if r.status != 200:
                errors.append(r.status)
        lat.append(time.perf_counter() - t0)


async def load(port: int, token: str, clients: int, seconds: float, path: str) -> dict:
    import aiohttp

    url = f"http://127.0.0.1:{port}{path}"
    headers = {"Authorization": f"Bearer {token}"}
    conn = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=conn) as s:
        warm: list = []
        await client_loop(s, url, headers, time.perf_counter() + 1.0, warm, [], 0)
        lat: list[float] = []
        errors: list[int] = []
        t0 = time.perf_counter()
        await asyncio.gather(*(client_loop(s, url, headers, t0 + seconds, lat, errors, i) for i in range(clients)))
        wall = time.perf_counter() - t0
    lat.sort()

    def pct(p):
        return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 2)

    return {"clients": clients, "seconds": round(wall, 2), "requests": len(lat), "errors": len(errors),
            "rps": round(len(lat) / wall, 1), "p50_ms": pct(0.50), "p90_ms": pct(0.90), "p99_ms": pct(0.99),
            "max_ms": round(lat[-1] * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=10)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--path", default="/v1/search")
    ap.add_argument("--engine", default="fake_engine:FakeEngine")
    ap.add_argument("--state-dir", metavar="DIR",
                    help="load an already running ragweedd (reads DIR/port and DIR/token) "
                         "instead of a FakeEngine server")
    ap.add_argument("--serve", metavar="STATE_DIR", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "api_load.json"))
    a = ap.parse_args()
    if a.serve:
        serve(a.serve, a.engine)
        return
    if a.state_dir:
        st = Path(a.state_dir).expanduser()
        port = json.loads((st / "port").read_text())["port"]
        res = asyncio.run(load(port, (st / "token").read_text().strip(), a.clients, a.seconds, a.path))
        a.engine = f"running daemon ({st})"
        report(res, a)
        return
    with tempfile.TemporaryDirectory() as d:
        proc = subprocess.Popen([sys.executable, __file__, "--serve", d, "--engine", a.engine])
        try:
            port_file = Path(d) / "port"
            deadline = time.time() + 60
            while not port_file.exists():
                if time.time() > deadline or proc.poll() is not None:
                    raise SystemExit("the server did not start")
                time.sleep(0.05)
            port = json.loads(port_file.read_text())["port"]
            token = (Path(d) / "token").read_text().strip()
            res = asyncio.run(load(port, token, a.clients, a.seconds, a.path))
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    report(res, a)


def report(res: dict, a) -> None:
    res.update({"benchmark": "api_load", "path": a.path, "engine": a.engine, "cpus": os.cpu_count(),
                "loadavg_1m": round(os.getloadavg()[0], 2)})
    cols = ["clients", "requests", "errors", "rps", "p50_ms", "p90_ms", "p99_ms", "max_ms"]
    print("  ".join(f"{c:>9}" for c in cols))
    print("  ".join(f"{res[c]:>9}" for c in cols))
    print(f"engine {a.engine}, path {a.path}, load average during run {res['loadavg_1m']}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()

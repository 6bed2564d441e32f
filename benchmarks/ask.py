"""End-to-end `ragweedctl ask` latency split by stage, and LLM calls per question, annotation on and off.

    .venv/bin/python benchmarks/ask.py [--runs 3] [--llm-delay 0.0] [--out benchmarks/results/ask.json]

Starts the local LLM test server (tests/fakes/llm_server.py, OpenAI wire protocol, spoken to through
the real openai SDK inside the daemon) and a real daemon (`python -m ragweedd run`) on the examples/
folder with the real local embedder (all-MiniLM-L6-v2, ONNX). Each question is asked with
`ragweedctl ask` (streaming, as a user would); the wall time and time to the first byte of the answer
are measured around the subprocess, the stage split (embed, retrieve, annotate, synthesize) comes
from the answer's history entry (GET /v1/history/{id}), and the LLM calls are counted twice: by the
entry's llm_calls and by the requests the server received. The daemon is restarted between the
annotation-off and annotation-on passes (same index, different [llm] config).

The fake server answers instantly unless --llm-delay is given (seconds per call), so annotate and
synthesize here measure ragweedd's own overhead: prompt building, the SDK, HTTP, streaming, checks.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import table, write_json  # noqa: E402
from tests.fakes.llm_server import API_KEY, FakeLLMServer  # noqa: E402

QUESTIONS = [
    "How often should a sourdough starter be fed?",
    "What does the beam width ef trade in HNSW search?",
    "Which planet has the fastest winds?",
    "How is a bad release rolled back?",
    "When is the lighthouse fog horn tested?",
    "How much green tea is in stock?",
]


def reply(provider, messages):
    prompt = messages[-1]["content"]
    if "[IRRELEVANT!!!]" in prompt:  # annotation: keep roughly half the extracts
        return '"' + prompt.split('"""')[1].strip()[:80] + '" bears on the question.' if len(prompt) % 2 else \
            "[IRRELEVANT!!!]"
    return "The sources say so [1], and another source agrees [2]."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Daemon:
    def __init__(self, base: Path, llm_url: str, annotation: bool) -> None:
        self.base, self.port = base, free_port()
        self.cfg = base / f"ragweedd-{'ann' if annotation else 'noann'}.toml"
        self.cfg.write_text("\n".join([
            f'listen = "127.0.0.1:{self.port}"', f'data_dir = "{base / "data"}"', f'state_dir = "{base / "state"}"',
            f'cache_dir = "{base / "cache"}"', 'log_level = "warning"', "debounce_s = 0.2",
            "[embed]", 'model = "local:all-minilm-l6-v2"',
            "[llm]", 'synthesis = "openai:test-model"', 'annotation = "openai:test-model"' if annotation else "",
            f'openai_base_url = "{llm_url}/v1"', f'openai_api_key = "{API_KEY}"', "max_retries = 0",
            "[collections.examples]", f'paths = ["{ROOT / "examples"}"]']) + "\n")
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAGWEED_")}
        self.log = open(base / "daemon.log", "ab")
        self.proc = subprocess.Popen([sys.executable, "-m", "ragweedd", "--config", str(self.cfg), "run"],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        self._wait(lambda: self.get("/v1/health") is not None, 120, "the API")

    def _wait(self, pred, timeout, what):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise SystemExit(f"daemon exited: {(self.base / 'daemon.log').read_text()[-2000:]}")
            if pred():
                return
            time.sleep(0.2)
        raise SystemExit(f"timed out waiting for {what}")

    def get(self, path):
        try:
            tok = (self.base / "state" / "token").read_text().strip()
            req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}",
                                         headers={"Authorization": f"Bearer {tok}"})
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return None

    def wait_indexed(self, n: int) -> None:
        def done():
            s = self.get("/v1/status") or {}
            return (s.get("files_by_state") or {}).get("done", 0) >= n and s.get("idle") is True
        self._wait(done, 300, "the examples to be indexed")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.log.close()


def ctl_ask(d: Daemon, question: str) -> tuple[float, float, str]:
    """Wall ms and ms to the first byte of the answer of one streaming `ragweedctl ask`."""
    env = {**os.environ, "RAGWEED_STATE_DIR": str(d.base / "state")}
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-m", "ragweedd.cli.ctl", "ask", question], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, cwd=ROOT)
    first = p.stdout.read(1)
    t_first = (time.perf_counter() - t0) * 1000
    rest = p.stdout.read()
    err = p.stderr.read()
    if p.wait() != 0:
        raise SystemExit(f"ragweedctl ask failed: {err.decode()}")
    return (time.perf_counter() - t0) * 1000, t_first, (first + rest).decode()


def run_pass(d: Daemon, srv: FakeLLMServer, runs: int, label: str) -> dict:
    rows = []
    for q in QUESTIONS:
        ctl_ask(d, q)  # warm-up: query embedding cache, SDK import, connection pool
    for _ in range(runs):
        for q in QUESTIONS:
            n0 = len(srv.requests)
            wall, first, out = ctl_ask(d, q)
            hid = d.get("/v1/history?limit=1")["items"][0]["id"]
            e = d.get(f"/v1/history/{hid}")
            assert e["query"] == q and e["status"] == "done", e.get("status")
            t = e["timings"]
            rows.append({"wall_ms": wall, "first_byte_ms": first, "embed_ms": t.get("embed_ms", 0.0),
                         "retrieve_ms": t.get("retrieve_ms", 0.0), "annotate_ms": t["annotate_ms"],
                         "synthesize_ms": t["synthesize_ms"], "answer_ms": t["total_ms"],
                         "llm_calls": e["llm_calls"], "server_requests": len(srv.requests) - n0,
                         "sources": len(e.get("retrieved") or []), "filtered": len(e.get("filtered") or [])})
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    p95 = {k: sorted(r[k] for r in rows)[max(0, int(len(rows) * 0.95) - 1)] for k in ("wall_ms", "first_byte_ms")}
    # inside the answer but outside both LLM stages: building the provider clients, loading prompts, packing
    med["llm_setup_ms"] = med["answer_ms"] - med["annotate_ms"] - med["synthesize_ms"]
    # outside the daemon's measured stages: ragweedctl's interpreter start, HTTP, the search thread hop
    med["other_ms"] = med["wall_ms"] - med["embed_ms"] - med["retrieve_ms"] - med["answer_ms"]
    return {"annotation": label, "questions": len(rows), "median": med, "p95": p95,
            "llm_calls_per_question": {"mean": statistics.mean(r["llm_calls"] for r in rows),
                                       "min": min(r["llm_calls"] for r in rows),
                                       "max": max(r["llm_calls"] for r in rows)},
            "calls_match_server": all(r["llm_calls"] == r["server_requests"] for r in rows), "rows": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="passes over the questions per configuration")
    ap.add_argument("--llm-delay", type=float, default=0.0, help="seconds the fake LLM waits per call")
    ap.add_argument("--out", default=None, help="JSON output (default benchmarks/results/ask.json)")
    a = ap.parse_args()
    n_files = sum(1 for p in (ROOT / "examples").iterdir() if p.is_file())
    results = []
    with tempfile.TemporaryDirectory(prefix="ragweed-ask-bench-") as tmp, \
            FakeLLMServer(models=("test-model",), reply=reply, delay_s=a.llm_delay) as srv:
        base = Path(tmp)
        for annotation in (False, True):
            d = Daemon(base, srv.url, annotation)
            try:
                d.wait_indexed(n_files)
                results.append(run_pass(d, srv, a.runs, "on" if annotation else "off"))
            finally:
                d.stop()
    cols = ["annotation", "wall_ms", "first_byte_ms", "embed_ms", "retrieve_ms", "annotate_ms", "synthesize_ms",
            "llm_setup_ms", "answer_ms", "other_ms", "llm_calls"]
    print(f"ragweedctl ask, {len(QUESTIONS)} questions x {a.runs} runs, examples/ ({n_files} files), "
          f"local MiniLM embedder, fake OpenAI-protocol LLM (delay {a.llm_delay} s/call); medians in ms\n")
    print(table([{**r["median"], "annotation": r["annotation"],
                  "llm_calls": r["llm_calls_per_question"]["mean"]} for r in results], cols))
    for r in results:
        print(f"\nannotation {r['annotation']}: p95 wall {r['p95']['wall_ms']:.1f} ms, p95 first byte "
              f"{r['p95']['first_byte_ms']:.1f} ms; LLM calls per question mean "
              f"{r['llm_calls_per_question']['mean']:.2f} (min {r['llm_calls_per_question']['min']}, max "
              f"{r['llm_calls_per_question']['max']}); entry counts match the server: {r['calls_match_server']}")
    payload = {"command": "benchmarks/ask.py " + " ".join(sys.argv[1:]), "runs": a.runs, "llm_delay_s": a.llm_delay,
               "questions": QUESTIONS, "corpus_files": n_files, "results": results}
    if a.out:
        Path(a.out).write_text(json.dumps(payload, indent=2))
        print(f"\nwrote {a.out}")
    else:
        print(f"\nwrote {write_json('ask', payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""ragweedctl against a real FakeEngine-backed server: every command, --json, streaming output,
clear exit codes when the daemon is down or a request is bad, imports, and the help text in docs."""

from __future__ import annotations

import io
import json
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from fake_engine import FakeEngine  # noqa: E402
from ragweedd.cli import ctl  # noqa: E402
from tests.api_support import running_api  # noqa: E402

CTL = [sys.executable, "-m", "ragweedd.cli.ctl"]


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    with running_api(tmp_path_factory.mktemp("ctl")) as a:
        yield a


def run(api_or_dir, *argv) -> tuple[int, str, str]:
    state = api_or_dir.state_dir if hasattr(api_or_dir, "state_dir") else api_or_dir
    out, err = io.StringIO(), io.StringIO()
    code = ctl.main(["--state-dir", str(state), *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_status_human_and_json(api):
    code, out, _ = run(api, "status")
    assert code == 0
    assert "collection notes: 4 documents" in out and "embedder: hash:384" in out
    assert "failed 1" in out and "indexed 3" in out
    for argv in (["--json", "status"], ["status", "--json"]):
        code, out, _ = run(api, *argv)
        assert code == 0 and json.loads(out)["files_by_state"] == {"indexed": 3, "failed": 1}


def test_search(api):
    code, out, _ = run(api, "search", "hnsw", "graph")
    assert code == 0
    assert re.search(r"^\[1\] \d\.\d{3}  notes/hnsw\.md", out, re.M), out
    code, out, _ = run(api, "search", "attention", "--type", "pdf", "--json")
    res = json.loads(out)
    assert [h["filename"] for h in res["results"]] == ["attention.pdf"]
    code, out, _ = run(api, "search", "zzzz-nothing")
    assert code == 0 and "no results" in out


def test_ask_prints_answer_then_numbered_sources(api):
    code, out, _ = run(api, "ask", "hnsw", "and", "sqlite")
    assert code == 0
    answer, _, sources = out.partition("\nSources:\n")
    assert "[1]" in answer and "[2]" in answer
    lines = sources.strip().splitlines()
    assert re.match(r"\[1\] notes/(hnsw|sqlite)\.md § ?\w.* chars 0-\d+  score \d\.\d{3}$", lines[0]), lines[0]
    assert lines[1].strip().startswith("/home/user/Notes/")
    code, out, _ = run(api, "ask", "--json", "attention")
    js = json.loads(out)
    assert js["answer"] and js["sources"][0]["page_label"] == "3"
    code, out, _ = run(api, "ask", "attention")
    assert "notes/attention.pdf p.3" in out


def test_ask_continue(api):
    _, out, _ = run(api, "ask", "--json", "attention")
    hid = json.loads(out)["history_id"]
    code, out, _ = run(api, "ask", "--continue", hid)
    assert code == 0 and "Sources:" in out
    code, out, _ = run(api, "ask", "--continue", hid, "--json")
    assert code == 0 and json.loads(out)["answer"]
    code, _, err = run(api, "ask")
    assert code == 2 and "needs a question" in err


def test_ask_streams_as_tokens_arrive(tmp_path):
    with running_api(tmp_path, FakeEngine(token_delay=0.15)) as a:
        p = subprocess.Popen(CTL + ["--state-dir", str(a.state_dir), "ask", "hnsw", "sqlite", "attention"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        first = p.stdout.read1(4096)
        still_running = p.poll() is None
        rest, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
        assert first and still_running, "the first words must be printed before the answer is complete"
        assert b"Sources:" not in first and b"Sources:" in rest


def test_collection_commands(api, tmp_path):
    code, out, _ = run(api, "add", "papers", str(tmp_path), "--ignore", "*.tmp", "--topic", "ml")
    assert code == 0 and "added collection papers" in out
    _, out, _ = run(api, "collections", "--json")
    assert {c["name"] for c in json.loads(out)["items"]} == {"notes", "papers"}
    assert api.engine.collections["papers"]["paths"] == [str(tmp_path)]
    for cmd, word in (("scan", "scan"), ("reanalyze", "re-analysis"), ("rebuild-fts", "keyword index")):
        code, out, _ = run(api, cmd, "papers")
        assert code == 0 and word in out
    code, out, _ = run(api, "remove", "papers", "--json")
    assert code == 0 and json.loads(out) == {"removed": "papers"}
    code, _, err = run(api, "scan", "papers")
    assert code == 2 and "does not exist" in err and "hint:" in err


def test_docs_and_history(api, tmp_path):
    code, out, _ = run(api, "docs", "--state", "failed")
    assert code == 0 and "broken.pdf" in out and "EOF marker" in out and "1 of 1 documents" in out
    _, out, _ = run(api, "docs", "--json", "--limit", "2")
    listing = json.loads(out)
    assert len(listing["items"]) == 2
    code, out, _ = run(api, "docs", listing["items"][0]["doc_key"])
    assert code == 0 and "#0" in out
    code, _, err = run(api, "docs", "no-such-doc")
    assert code == 2 and "does not exist" in err
    run(api, "search", "sqlite")
    code, out, _ = run(api, "history", "--limit", "3")
    assert code == 0 and "search" in out and "sqlite" in out
    hid = out.split()[0]
    code, out, _ = run(api, "history", hid)
    assert code == 0 and "query: sqlite" in out
    f = tmp_path / "up.txt"
    f.write_text("uploaded words")
    code, out, _ = run(api, "upload", "notes", str(f))
    assert code == 0 and "uploaded up.txt" in out
    code, _, err = run(api, "upload", "notes", str(tmp_path / "missing.txt"))
    assert code == 2 and "cannot read" in err


def test_bad_arguments_are_rejected_by_the_api(api):
    code, _, err = run(api, "docs", "--limit", "0")
    assert code == 2 and "limit" in err
    code, _, err = run(api, "add", "bad/name", "/tmp")
    assert code == 2 and "name" in err


def test_server_error_exit_1(api):
    api.engine.fail_with = RuntimeError("boom")
    code, out, err = run(api, "status", "--json")
    assert code == 1 and "internal error" in err
    assert json.loads(out)["error"]["code"] == "internal"


def test_not_running_no_port_file(tmp_path):
    code, out, err = run(tmp_path, "status")
    assert code == 3
    assert "not running" in err and "ragweedd run" in err and "ragweedctl service install" in err
    code, out, err = run(tmp_path, "--json", "search", "x")
    assert code == 3 and json.loads(out)["error"]["code"] == "daemon_not_running"


def test_not_running_stale_port_file(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "port").write_text(json.dumps({"host": "127.0.0.1", "port": port, "pid": 1}))
    (tmp_path / "token").write_text("x" * 43)
    code, _, err = run(tmp_path, "status")
    assert code == 3 and "stale" in err and "ragweedd run" in err


def test_damaged_port_file_and_wrong_token(api, tmp_path):
    (tmp_path / "port").write_text("not json {")
    (tmp_path / "token").write_text(api.token)
    code, _, err = run(tmp_path, "status")
    assert code == 1 and "damaged" in err
    (tmp_path / "port").write_text(str(api.port))  # a bare port number is accepted too
    assert run(tmp_path, "status")[0] == 0
    (tmp_path / "token").write_text("wrong-token-" * 4)
    code, _, err = run(tmp_path, "status")
    assert code == 2 and "bearer token" in err


def test_state_dir_from_environment(api):
    env = {**os.environ, "RAGWEED_STATE_DIR": str(api.state_dir)}
    p = subprocess.run(CTL + ["status", "--json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=30)
    assert p.returncode == 0, p.stderr
    assert "collections" in json.loads(p.stdout)
    env["RAGWEED_STATE_DIR"] = "/nonexistent/ragweed-state"
    p = subprocess.run(CTL + ["status"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=30)
    assert p.returncode == 3 and "/nonexistent/ragweed-state/port" in p.stderr


def test_ctl_imports_nothing_heavy(tmp_path):
    """Start-up budget: ragweedctl must not import numpy, aiohttp, structlog, http.client (email
    parser, ssl) or the config module, even while running a command."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ragweedd.cli.ctl", "--state-dir",
                        str(tmp_path), "status"], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert p.returncode == 3
    imported = {line.split("|")[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert "ragweedd.paths" not in imported  # --state-dir given: not even that
    forbidden = {"numpy", "aiohttp", "structlog", "ssl", "email.parser", "http.client", "ragweedd.config",
                 "ragweedd.api", "asyncio", "numba", "onnxruntime"}
    assert not (imported & forbidden), imported & forbidden
    assert "argparse" in imported  # the check sees real imports


class _BrokenAnswers(FakeEngine):
    """Answers that fail half-way, or stop without a 'done' event."""

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    async def ask(self, query, **kw):
        mode = self.mode

        async def gen():
            yield {"type": "sources", "sources": []}
            yield {"type": "token", "text": "Half an "}
            if mode == "error":
                from ragweedd.errors import ProviderTimeout

                raise ProviderTimeout("the LLM did not answer in 120 s", hint="raise llm.timeout_s")
        return gen()


def test_ask_failure_mid_stream(tmp_path):
    with running_api(tmp_path / "a", _BrokenAnswers("error")) as a:
        code, out, err = run(a, "ask", "x")
        assert code == 1 and out.startswith("Half an ")
        assert "the answer failed: the LLM did not answer" in err and "hint: raise llm.timeout_s" in err
    with running_api(tmp_path / "b", _BrokenAnswers("truncated")) as a:
        code, out, err = run(a, "ask", "x")
        assert code == 1 and "ended before it was complete" in err

"""ragweedctl, run as a subprocess, against the REAL daemon engine (open_daemon + DaemonEngine behind
ApiServer, hash embedder, an LLM that is tests/fakes/llm_server.py spoken to by the OpenAI SDK):
every command, --json validated against the contract's schemas, ingest progress in `status`,
streaming output, clear exit codes when the daemon is down or a request is bad, start-up imports."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

from ragweedd.api import openapi  # noqa: E402
from tests.api_support import API_KEY_LLM_TOML, DOCS, running_api, wait_until  # noqa: E402
from tests.fakes.llm_server import FakeLLMServer  # noqa: E402

CTL = [sys.executable, "-m", "ragweedd.cli.ctl"]
ANSWER = "Cats purr when they are content [1]."
LIST = "list them with `ragweedctl collections`"  # what an unknown collection's error says to do
FILES = {**DOCS, "broken.pdf": b"%PDF-1.4 this is not really a pdf\n"}


def reply(provider, messages):
    return ANSWER


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(models=("test-model",), reply=reply, piece_chars=4) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clear_script(llm):
    llm.script.clear()
    yield


@pytest.fixture(scope="module")
def api(tmp_path_factory, llm):
    with running_api(tmp_path_factory.mktemp("ctl"), files=FILES, expect=set(DOCS), extra_toml=API_KEY_LLM_TOML(llm),
                     top_toml="max_tokens = 16") as a:
        wait_until(lambda: a.ok("GET", "/v1/documents?state=failed")["total"] == 1, 30, what="broken.pdf failed")
        # recorded is not idle: the new vectors still go into the search index after, which under
        # load outlasts the first status a test reads
        from ragweedd.cli.handover import is_idle

        wait_until(lambda: is_idle(a.ok("GET", "/v1/status")), 240, what="the daemon to be idle")
        yield a


def run(api_or_dir, *argv, env=None, timeout=60) -> tuple[int, str, str]:
    """ragweedctl as users run it: a separate process reading --state-dir's port and token files."""
    state = api_or_dir.state_dir if hasattr(api_or_dir, "state_dir") else api_or_dir
    p = subprocess.run(CTL + ["--state-dir", str(state), *argv], capture_output=True, text=True, cwd=ROOT,
                       timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


def schema_ok(path: str, method: str, body) -> None:
    sch = openapi.DOCUMENT["paths"][path][method]["responses"]["200"]["content"]["application/json"]["schema"]
    openapi.validate(body, sch, f"ragweedctl --json output of {method.upper()} {path}")


# --------------------------------------------------------------------------- status
def test_status_human_and_json(api):
    code, out, err = run(api, "status")
    assert code == 0, err
    assert f"on 127.0.0.1:{api.port} (pid {os.getpid()}" in out
    assert f"collection notes: {len(DOCS)} documents" in out
    assert re.search(r"embedder: hash:64\S* \(64-d\)", out), out
    assert f"files: failed 1, indexed {len(DOCS)}" in out
    assert "queue: 0 queued, 0 running, 0 settling" in out
    m = re.search(r"ingest: idle \((\d+) files since start, (\d+) failed\)", out)
    assert m and int(m.group(1)) >= len(FILES) and int(m.group(2)) == 1, out
    assert re.search(rf"vectors: all {len(DOCS)} files \(\d+ vectors since start\)", out), out
    for argv in (["--json", "status"], ["status", "--json"]):
        code, out, _ = run(api, *argv)
        s = json.loads(out)
        assert code == 0 and s["files_by_state"] == {"indexed": len(DOCS), "failed": 1}
        schema_ok("/v1/status", "get", s)


def test_status_shows_ingest_progress_while_files_are_indexed(tmp_path):
    """A real ingest held half-way (the extract function waits on a gate for one file): `status`
    shows done/total of the batch and its rate, then idle once the gate opens."""
    from ragweedd.extract.registry import extract_file

    gate = threading.Event()

    def extract(path, settings):
        if Path(path).name == "slow.txt":
            assert gate.wait(30), "the test never opened the gate"
        return extract_file(Path(path), settings)

    files = {**DOCS, "slow.txt": "A file that takes its time to extract.\n"}
    with running_api(tmp_path, files=files, extract=extract, wait=False) as a:
        try:
            def progress():
                code, out, _ = run(a, "status")
                return code == 0 and re.search(r"ingest: (\d+)/(\d+) files, [\d.]+ files/s, [\d.]+ chunks/s", out)
            m = wait_until(progress, 30, what="ingest progress in ragweedctl status", interval=0.1)
            assert int(m.group(2)) == len(files) and int(m.group(1)) < len(files), m.group(0)
            code, out, _ = run(a, "status", "--json")
            ing = json.loads(out)["ingest"]
            assert ing["running"] and ing["total"] == len(files) and ing["done"] < ing["total"]
        finally:
            gate.set()
        a.wait_indexed(files)
        # indexed is not idle: the new vectors still go into the search index after
        idle = f"ingest: idle ({len(files)} files since start, 0 failed)"
        wait_until(lambda: idle in run(a, "status")[1], 60, what="ragweedctl status saying idle", interval=0.1)


# --------------------------------------------------------------------------- search and ask
def test_search(api):
    code, out, err = run(api, "search", "hnsw", "graph", "neighbours")
    assert code == 0, err
    m = re.search(r"^\[1\] strong  notes/hnsw\.md  .*lines (\d+)-(\d+)\n    (\S+)\n    (.+)\n", out, re.M)
    assert m, out
    # people read a label and a place, not scores and offsets; the snippet is plain through a pipe
    assert "chars" not in out and not re.search(r"-?\d\.\d{3}", out) and "\x1b" not in out
    # the uri under each hit opens its lines, which are the file's own
    first, last = int(m.group(1)), int(m.group(2))
    assert m.group(3) == f"{(api.docs_dir / 'hnsw.md').as_uri()}#L{first}-L{last}"
    on_disk = (api.docs_dir / "hnsw.md").read_text().splitlines()
    code, out, _ = run(api, "search", "hnsw", "graph", "neighbours", "--json")
    hit = json.loads(out)["results"][0]
    assert hit["lines"] == [first, last] and hit["uri"] == m.group(3)
    # the snippet the daemon worked out is the one printed, its marks on the query's words
    assert m.group(4) == hit["snippet"] and hit["snippet_marks"]
    assert all(hit["snippet"][a:b].lower().startswith(("hnsw", "graph", "neighbour")) for a, b in hit["snippet_marks"])
    assert on_disk[first - 1] and on_disk[first - 1].split()[0] == hit["text"].split()[0]
    assert on_disk[last - 1].split()[-1] == hit["text"].split()[-1]
    code, out, _ = run(api, "search", "attention", "--type", "html", "--json")
    res = json.loads(out)
    assert code == 0 and {h["filename"] for h in res["results"]} == {"attention.html"}
    # html is transformed text: no line numbers, the uri is the file's
    assert all(h["lines"] is None and h["uri"] == (api.docs_dir / "attention.html").as_uri() for h in res["results"])
    schema_ok("/v1/search", "post", res)
    code, out, _ = run(api, "search", "attention", "--path-glob", "*.nomatch")
    assert code == 0 and "no results" in out
    code, _, err = run(api, "search", "x", "-c", "ghost")
    assert code == 2 and err == f"ragweedctl: collection 'ghost' does not exist — {LIST}\n"


def test_ask_prints_answer_then_numbered_sources(api, llm):
    code, out, err = run(api, "ask", "do", "cats", "purr?")
    assert code == 0, err
    answer, _, sources = out.partition("\nSources:\n")
    assert answer.strip() == ANSWER
    lines = sources.strip().splitlines()
    assert lines[0] == "[1] strong  notes/cats.md  § Cats, lines 1-3", lines[0]
    assert lines[1].strip() == (api.docs_dir / "cats.md").as_uri() + "#L1-L3"
    code, out, _ = run(api, "ask", "--json", "do", "cats", "purr?")
    js = json.loads(out)
    assert code == 0 and js["answer"] == ANSWER and js["sources"][0]["filename"] == "cats.md"
    assert js["sources"][0]["lines"] == [1, 3] and js["sources"][0]["uri"].endswith("/cats.md#L1-L3")
    assert js["provider"] == "openai:test-model" and js["cited_numbers"] == [1]


def test_ask_marks_an_unsupported_claim(api, llm):
    llm.push({"text": "Cats purr at 25 Hz [1]."})  # short: this daemon's max_tokens is small
    code, out, err = run(api, "ask", "do", "cats", "purr?")
    assert code == 0, err
    assert "Citation check (terms): 0 of 1 citations supported, 1 UNSUPPORTED:" in out, out
    assert "UNSUPPORTED [1] Cats purr at 25 Hz." in out
    assert "not in source 1: 25" in out and "closest in [1]: Cats purr when they are content." in out
    code, out, _ = run(api, "ask", "do", "cats", "purr?")
    assert code == 0 and "Citation check (terms): 1 of 1 citations supported." in out and "UNSUPPORTED" not in out
    llm.push({"text": "Cats purr at 25 Hz [1]."})
    code, out, _ = run(api, "ask", "--json", "do", "cats", "purr?")
    js = json.loads(out)
    assert [c["supported"] for c in js["citation_checks"]] == [False]
    assert js["citations_verified"]["unsupported"] == 1


def test_ask_continue(api, llm):
    llm.push({"text": "Cats purr when they are content and relaxed [1], which owners notice at home."})
    code, out, err = run(api, "ask", "do", "cats", "purr?")
    assert code == 0, err
    m = re.search(r"cut at max_tokens; continue with: ragweedctl ask --continue (\S+)\)", out)
    assert m, out
    llm.push({"text": "tice it [1]."})
    code, out, err = run(api, "ask", "--continue", m.group(1))
    assert code == 0 and "tice it [1]." in out and "Sources:" in out, out + err
    code, _, err = run(api, "ask", "--continue", m.group(1), "--json")
    assert code == 2 and "cannot be continued" in err
    code, _, err = run(api, "ask")
    assert code == 2 and "needs a question" in err


def test_ask_streams_as_tokens_arrive(tmp_path):
    """The first words are printed while the LLM is still writing (its stream is held open)."""
    release = threading.Event()

    class SlowLLM(FakeLLMServer):
        async def _sse(self, request, events):
            from aiohttp import web

            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for i, (name, data) in enumerate(events):
                if i == len(events) // 2:
                    while not release.is_set():
                        import asyncio

                        await asyncio.sleep(0.02)
                prefix = f"event: {name}\n" if name else ""
                await resp.write(f"{prefix}data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode())
            await resp.write_eof()
            return resp

    with SlowLLM(models=("test-model",), reply=reply, piece_chars=4) as llm, \
            running_api(tmp_path, extra_toml=API_KEY_LLM_TOML(llm)) as a:
        p = subprocess.Popen(CTL + ["--state-dir", str(a.state_dir), "ask", "do", "cats", "purr?"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        try:
            first = p.stdout.read1(4096)
            still_running = p.poll() is None
        finally:
            release.set()
        rest, err = p.communicate(timeout=30)
        assert p.returncode == 0, err
        assert first and still_running, "the first words must be printed before the answer is complete"
        assert ANSWER.startswith(first.decode()) and b"Sources:" in rest


def test_ask_failure_mid_stream(api, llm):
    llm.push({"status": 500})
    code, out, err = run(api, "ask", "do", "cats", "purr?")
    assert code == 1 and "the answer failed: openai model 'test-model' failed" in err and " — see the daemon log" in err
    llm.push({"status": 500})
    code, out, err = run(api, "--json", "ask", "do", "cats", "purr?")
    assert code == 1 and json.loads(out)["error"]["code"] == "provider"


# --------------------------------------------------------------------------- collections
def test_collection_commands(api, tmp_path):
    (tmp_path / "adam.txt").write_text("The Adam optimiser keeps running averages of gradients.\n")
    code, out, err = run(api, "add", "papers", str(tmp_path), "--ignore", "*.tmp", "--topic", "ml")
    assert code == 0 and f"added collection papers: {tmp_path}" in out, err
    api.wait_indexed({"adam.txt"}, collection="papers")
    code, out, _ = run(api, "collections", "--json")
    listing = json.loads(out)
    schema_ok("/v1/collections", "get", listing)
    papers = next(c for c in listing["items"] if c["name"] == "papers")
    assert {c["name"] for c in listing["items"]} == {"notes", "papers"}
    assert papers["paths"] == [str(tmp_path)] and papers["ignore"] == ["*.tmp"] and papers["documents"] == 1
    code, out, _ = run(api, "collections")
    assert f"papers: {tmp_path}  (1 documents)" in out
    for cmd, word in (("scan", "scan"), ("reanalyze", "re-analysis"), ("rebuild-fts", "keyword index")):
        code, out, err = run(api, cmd, "papers")
        assert code == 0 and word in out, err
    code, out, _ = run(api, "search", "Adam", "optimiser", "-c", "papers", "--json")
    assert [h["filename"] for h in json.loads(out)["results"]] == ["adam.txt"]
    code, out, _ = run(api, "remove", "papers", "--json")
    assert code == 0 and json.loads(out) == {"name": "papers", "removed": True}
    assert (tmp_path / "adam.txt").exists()
    code, _, err = run(api, "scan", "papers")
    assert code == 2 and err == f"ragweedctl: collection 'papers' does not exist — {LIST}\n"
    code, _, err = run(api, "remove", "notes")
    assert code == 2 and "config file" in err


# --------------------------------------------------------------------------- documents, history, upload
def test_docs_and_history(api, tmp_path):
    code, out, _ = run(api, "docs", "--state", "failed")
    assert code == 0 and "broken.pdf" in out and "not a readable PDF" in out and "1 of 1 documents" in out
    code, out, _ = run(api, "docs", "--json", "--limit", "2")
    listing = json.loads(out)
    assert len(listing["items"]) == 2 and listing["total"] == len(FILES)
    schema_ok("/v1/documents", "get", listing)
    key = next(d["doc_key"] for d in listing["items"] if d["state"] == "indexed")
    code, out, _ = run(api, "docs", key)
    assert code == 0 and re.search(r"^  #0 notes/", out, re.M), out
    code, out, _ = run(api, "docs", key, "--json")
    schema_ok("/v1/documents/{doc_key}", "get", json.loads(out))
    code, _, err = run(api, "docs", "no-such-doc")
    assert code == 2 and "does not exist" in err
    code, out, err = run(api, "--json", "docs", "9999")
    assert code == 2 and json.loads(out)["error"]["code"] == "not_found"  # as ragweedd search -c nope
    code, out, _ = run(api, "search", "sqlite", "--json")
    hid = json.loads(out)["history_id"]
    code, out, _ = run(api, "history", "--limit", "3")
    assert code == 0 and out.splitlines()[0].startswith(hid) and "search" in out and "sqlite" in out
    code, out, _ = run(api, "history", hid)
    assert code == 0 and "query: sqlite" in out and "Sources:" in out
    code, out, _ = run(api, "history", "--json")
    schema_ok("/v1/history", "get", json.loads(out))


def test_upload(api, tmp_path):
    f = tmp_path / "up.txt"
    f.write_text("uploaded words about platypus eggs")
    code, out, err = run(api, "upload", "notes", str(f))
    assert code == 0 and "uploaded up.txt to notes (34 bytes)" in out, err
    g = tmp_path / "other.txt"
    g.write_text("platypus eggs hatch after ten days")
    code, out, _ = run(api, "upload", "notes", str(g), "--name", "renamed.txt", "--json")
    up = json.loads(out)
    schema_ok("/v1/collections/{name}/documents", "post", up)
    assert up["state"] == "queued" and up["source_file"].endswith("/renamed.txt")
    api.wait_indexed({"up.txt", "renamed.txt"})
    code, out, _ = run(api, "search", "platypus", "eggs", "--json")
    assert {h["filename"] for h in json.loads(out)["results"][:2]} == {"up.txt", "renamed.txt"}
    code, _, err = run(api, "upload", "notes", str(tmp_path / "missing.txt"))
    assert code == 2 and "cannot read" in err
    code, _, err = run(api, "upload", "ghost", str(f))
    assert code == 2 and "ghost" in err


def test_bad_arguments_are_rejected_by_the_api(api):
    code, _, err = run(api, "docs", "--limit", "0")
    assert code == 2 and "limit" in err
    code, _, err = run(api, "add", "bad/name", "/tmp")
    assert code == 2 and "name" in err


# --------------------------------------------------------------------------- daemon not there
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
    # the daemon cannot prove it knows a token it does not have, so the wrong one is never sent
    assert code == 1 and "did not prove it knows the API token" in err and "not sent" in err


def test_state_dir_from_environment(api):
    env = {**os.environ, "RAGWEED_STATE_DIR": str(api.state_dir)}
    p = subprocess.run(CTL + ["status", "--json"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=30)
    assert p.returncode == 0, p.stderr
    assert [c["name"] for c in json.loads(p.stdout)["collections"]] == ["notes"]
    env["RAGWEED_STATE_DIR"] = "/nonexistent/ragweed-state"
    p = subprocess.run(CTL + ["status"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=30)
    assert p.returncode == 3 and "/nonexistent/ragweed-state/port" in p.stderr


def test_ctl_imports_nothing_heavy(api):
    """Start-up budget: ragweedctl must not import numpy, aiohttp, structlog, http.client (email
    parser, ssl) or the config module, even while running a command against the real daemon."""
    p = subprocess.run([sys.executable, "-X", "importtime", "-m", "ragweedd.cli.ctl", "--state-dir",
                        str(api.state_dir), "status"], capture_output=True, text=True, cwd=ROOT, timeout=30)
    assert p.returncode == 0, p.stderr[-2000:]
    imported = {line.split("|")[-1].strip() for line in p.stderr.splitlines() if line.startswith("import time:")}
    assert "ragweedd.paths" not in imported  # --state-dir given: not even that
    forbidden = {"numpy", "aiohttp", "structlog", "ssl", "email.parser", "http.client", "ragweedd.config",
                 "ragweedd.api", "asyncio", "numba", "onnxruntime", "ragweedd.contract", "typing",
                 "mcp", "ragweedd.api.mcp_tools", "pydantic", "anyio", "starlette"}
    assert not (imported & forbidden), imported & forbidden
    assert "argparse" in imported  # the check sees real imports

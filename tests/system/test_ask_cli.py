"""Answers and their history end to end: a real daemon subprocess (hash embedder) whose LLM is the local
wire-protocol server of tests/fakes/llm_server.py, spoken to through the real OpenAI SDK; the HTTP
API (/v1/ask, /v1/search, /v1/history), ragweedctl, a continuation across a daemon restart, and the
one-shot ``ragweedd ask`` with and without an LLM."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragweedd.answer import NO_LLM_LABEL
from tests.fakes.llm_server import API_KEY, FakeLLMServer
from tests.history_support import open_history
from tests.system.conftest import ROOT, Daemon, serving, wait_indexed

DOCS = {
    "cats.md": "# Cats\n\nCats purr when they are content. A purring cat is usually relaxed and safe.\n",
    "tea.txt": "Green tea should steep for two minutes at eighty degrees Celsius, never boiling water.\n",
    "bikes.txt": "Bicycle chains need a drop of oil every three hundred kilometres, more after rain.\n",
}
ANSWER = "Cats purr when they are content [1]."


def reply(provider, messages):
    prompt = messages[-1]["content"]
    if "[IRRELEVANT!!!]" in prompt:  # the annotation prompt names the marker it wants back
        return '"Cats purr when they are content."' if "Cats purr" in prompt else "[IRRELEVANT!!!]"
    return ANSWER


def llm_toml(llm: FakeLLMServer, annotation: bool = True) -> str:
    return "\n".join(["[llm]", 'synthesis = "openai:test-model"',
                      'annotation = "openai:test-model"' if annotation else "",
                      f'openai_base_url = "{llm.url}/v1"', f'openai_api_key = "{API_KEY}"',
                      "max_retries = 0", "timeout_s = 20"])


def write_docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    return folder


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(models=("test-model",), reply=reply) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _fresh_script(llm):
    llm.script.clear()
    llm.requests.clear()


@pytest.fixture(scope="module")
def d(tmp_path_factory, llm):
    base = tmp_path_factory.mktemp("askd")
    with serving(Daemon(base / "d", {"notes": [write_docs(base / "docs")]}, extra=llm_toml(llm))) as dm:
        wait_indexed(dm, "notes", 3)
        dm.wait_idle()
        yield dm


def entry_id(stderr: str) -> str:
    m = re.search(r"history entry ([0-9a-f]{16})", stderr)
    assert m, stderr
    return m.group(1)


def sse(resp) -> list[tuple[str, dict]]:
    out, event = [], None
    for line in resp.iter_lines(decode_unicode=True):
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: "):
            out.append((event, json.loads(line[6:])))
    return out


# --- daemon: POST /v1/ask, GET /v1/history --------------------------------------------------------
def test_ask_is_stored_and_shown_in_history(d, llm):
    r = d.api("POST", "/v1/ask", json={"query": "do cats purr?", "stream": False})
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["answer"] == ANSWER and a["finish_reason"] == "stop" and a["history_id"]
    assert [s["filename"] for s in a["sources"]] == ["cats.md"], "tea and bikes were annotated irrelevant"
    q = a["sources"][0]["quote"]  # the sentence a citation pill highlights: the document's own text
    assert DOCS["cats.md"][q["span"][0]:q["span"][1]] == q["text"] and "purr" in q["text"]
    assert q["uri"].endswith(f"/cats.md#L{q['lines'][0]}")

    items = d.api("GET", "/v1/history").json()["items"]
    assert items[0]["id"] == a["history_id"] and items[0]["kind"] == "ask" and items[0]["query"] == "do cats purr?"
    e = d.api("GET", f"/v1/history/{a['history_id']}").json()
    assert e["status"] == "done" and e["query"] == "do cats purr?" and e["answer"] == ANSWER
    assert e["provider"] == "openai:test-model" and e["model"] == "test-model"
    assert [s["filename"] for s in e["sources"]] == ["cats.md"] and e["cited_numbers"] == [1]
    assert {f["filename"] for f in e["filtered"]} == {"tea.txt", "bikes.txt"}
    assert {x["relevant"] for x in e["annotations"]} == {True, False}
    assert {"embed_ms", "retrieve_ms", "annotate_ms", "synthesize_ms", "total_ms"} <= set(e["timings"])
    assert e["timings"]["embed_ms"] >= 0 and e["timings"]["synthesize_ms"] > 0
    assert e["usage"]["input_tokens"] > 0 and e["usage"]["output_tokens"] > 0
    assert e["llm_calls"] == 4 == len(llm.requests), "three annotations and one synthesis"
    assert e["retrieval_meta"]["collections"] == ["notes"] and e["state"] is None


def test_ask_streams_sse_and_the_done_event_points_at_the_entry(d):
    with d.api("POST", "/v1/ask", json={"query": "do cats purr?"}, stream=True) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        evs = sse(r)
    kinds = [k for k, _ in evs]
    assert kinds[0] == "sources" and kinds[-1] == "done" and kinds.count("token") > 1
    assert "".join(e["text"] for k, e in evs if k == "token") == ANSWER
    done = evs[-1][1]
    assert done["finish_reason"] == "stop" and "retrieve_ms" in done["timings"]
    assert d.api("GET", f"/v1/history/{done['history_id']}").json()["answer"] == ANSWER


def test_search_is_stored_with_results_and_retrieval_meta(d):
    r = d.api("POST", "/v1/search", json={"query": "green tea"})
    assert r.status_code == 200, r.text
    res = r.json()
    e = d.api("GET", f"/v1/history/{res['history_id']}").json()
    assert e["kind"] == "search" and e["query"] == "green tea"
    assert [h["embedding_id"] for h in e["results"]] == [h["embedding_id"] for h in res["results"]]
    assert e["retrieval_meta"] == res["retrieval_meta"]


def test_history_paging_and_bad_requests(d):
    for q in ("page one", "page two"):
        d.search(q)
    page = d.api("GET", "/v1/history?offset=0&limit=1").json()
    assert len(page["items"]) == 1 and page["total"] >= 2 and page["items"][0]["query"] == "page two"
    assert d.api("GET", "/v1/history?offset=1&limit=1").json()["items"][0]["query"] == "page one"
    r = d.api("GET", "/v1/history/0000000000000000")
    assert r.status_code == 404 and "does not exist" in r.json()["error"]["message"]
    assert d.api("GET", "/v1/history?limit=0").status_code == 400
    search_id = d.api("POST", "/v1/search", json={"query": "tea"}).json()["history_id"]
    r = d.api("POST", f"/v1/ask/{search_id}/continue?stream=false")
    assert r.status_code == 400 and "cannot be continued" in r.json()["error"]["message"]
    assert d.api("POST", "/v1/ask/0000000000000000/continue?stream=false").status_code == 404


def test_provider_failure_is_recorded(d, llm):
    llm.push(*[{"status": 401}] * 4)  # every call of this answer (annotations and synthesis) is refused
    r = d.api("POST", "/v1/ask", json={"query": "do cats purr?", "stream": False})
    body = r.json()
    assert "error" in body, body
    hid = d.api("GET", "/v1/history?limit=1").json()["items"][0]["id"]
    e = d.api("GET", f"/v1/history/{hid}").json()
    assert e["status"] == "error" and e["error"]["code"].startswith("provider")
    assert e["query"] == "do cats purr?" and e["retrieval_meta"]


def test_ragweedctl_ask_and_history_against_the_daemon(d):
    env = {**os.environ, "RAGWEED_STATE_DIR": str(d.base / "state")}
    ctl = [sys.executable, "-m", "ragweedd.cli.ctl"]
    p = subprocess.run(ctl + ["ask", "do", "cats", "purr?"], capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(ANSWER)
    sources = p.stdout.split("Sources:")[1]
    assert "[1]" in sources and "cats.md" in sources and "tea.txt" not in sources, p.stdout
    p = subprocess.run(ctl + ["history", "--limit", "1"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and "do cats purr?" in p.stdout and " ask " in p.stdout, p.stdout + p.stderr
    hid = p.stdout.split()[0]
    p = subprocess.run(ctl + ["history", hid], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and ANSWER in p.stdout and "cats.md" in p.stdout, p.stdout + p.stderr
    p = subprocess.run(ctl + ["history", "nope"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and "does not exist" in p.stderr


# --- one-shot ragweedd ask on the daemon's own data (a second process writing the same history) ----
def oneshot(d: Daemon, *args, timeout=120):
    """``ragweedd ask`` on the daemon's data and history. It speaks Ollama's wire protocol to the same
    fake server: the daemon already covers the OpenAI SDK, whose import alone costs seconds per process."""
    cfg = d.base / "oneshot.toml"
    if not cfg.exists():
        text = d.cfg.read_text()
        start = text.index("[llm]")
        end = text.index("[collections.")
        url = text[start:end].split('openai_base_url = "')[1].split("/v1")[0]
        cfg.write_text(text[:start] + '[llm]\nsynthesis = "ollama:test-model"\nannotation = "ollama:test-model"\n'
                       f'max_retries = 0\ntimeout_s = 20\n[embed]\nollama_url = "{url}"\n' + text[end:])
    env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64"}
    return subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), "ask", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout)


def test_oneshot_with_llm_prints_answer_and_cited_sources(d, llm):
    p = oneshot(d, "do cats purr?")
    assert p.returncode == 0, p.stderr
    answer, _, sources = p.stdout.partition("\nSources:\n")
    assert answer.strip() == ANSWER
    lines = sources.splitlines()
    assert lines[0] == "[1] strong  notes/cats.md  § Cats, lines 1-3", p.stdout  # a label, no raw score
    assert lines[1].strip().endswith("/cats.md#L1-L3")  # the uri that opens the cited lines
    assert "tea.txt" not in p.stdout and "2 passages judged irrelevant" in p.stdout
    hid = entry_id(p.stderr)
    e = d.api("GET", f"/v1/history/{hid}").json()  # the daemon reads what the CLI wrote
    assert e["answer"] == ANSWER and e["status"] == "done" and e["llm_calls"] == 4
    assert e["provider"] == "ollama:test-model" and {r["provider"] for r in llm.requests} == {"ollama"}


def test_oneshot_json_is_the_history_record(d):
    p = oneshot(d, "--json", "-c", "notes", "do cats purr?")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["answer"] == ANSWER and rec["mode"] == "llm" and rec["query"] == "do cats purr?"
    assert rec["history_id"] and "state" not in rec and rec["timings"]["synthesize_ms"] > 0


def test_continue_across_a_daemon_restart_and_from_the_cli(d, llm):
    # annotations run in parallel, so their scripted turns ({}) fall back to reply(); the fourth call writes
    llm.push({}, {}, {}, {"text": "Cats purr when", "stop": "max_tokens"})
    a = d.api("POST", "/v1/ask", json={"query": "do cats purr?", "stream": False}).json()
    assert a["finish_reason"] == "max_tokens" and a["continuable"], a
    hid = a["history_id"]
    d.stop(30)
    d.start()  # the continuation state must come from history.sqlite3, not memory
    llm.push({"text": " they are content [1]."})
    with d.api("POST", f"/v1/ask/{hid}/continue", stream=True) as r:
        evs = sse(r)
    assert [k for k, _ in evs][0] == "sources" and evs[-1][0] == "done", evs
    assert evs[-1][1]["answer"] == "Cats purr when they are content [1]."
    assert llm.requests[-1]["messages"][-2]["content"] == "Cats purr when"
    e = d.api("GET", f"/v1/history/{hid}").json()
    assert e["continuations"] == 1 and e["state"] is None and e["finish_reason"] == "stop"
    # the finished answer cannot be continued again, from the API or the CLI
    assert d.api("POST", f"/v1/ask/{hid}/continue?stream=false").status_code == 400
    p = oneshot(d, "--continue", hid)
    assert p.returncode == 2 and "cannot be continued" in p.stderr

    # the CLI continues an answer it started itself
    llm.push({}, {}, {}, {"text": "Cats purr", "stop": "max_tokens"}, {"text": " when content [1]."})
    p = oneshot(d, "do cats purr?")
    assert p.returncode == 0 and "ragweedd ask --continue" in p.stdout, p.stdout + p.stderr
    cid = p.stdout.split("ragweedd ask --continue ")[1].split(")")[0]
    p = oneshot(d, "--continue", cid)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("Cats purr when content [1].\n"), p.stdout


# --- one-shot ragweedd ask without a daemon and without an LLM ------------------------------------
@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("plain")
    cfg = base / "ragweedd.toml"
    cfg.write_text(f'data_dir = "{base / "data"}"\nstate_dir = "{base / "state"}"\ncache_dir = "{base / "cache"}"\n'
                   f'log_level = "warning"\n[collections.notes]\npaths = ["{write_docs(base / "docs")}"]\n')
    return cfg


def run_plain(cfg: Path, *args):
    env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64"}
    env.pop("RAGWEED_LLM_SYNTHESIS", None)
    return subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg), *args],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_oneshot_without_llm_prints_labelled_passages_with_citations(plain):
    p = run_plain(plain, "ask", "cats")
    assert p.returncode == 2 and "nothing is indexed yet" in p.stderr and "ragweedd ingest" in p.stderr
    assert run_plain(plain, "ingest", "-c", "notes").returncode == 0
    p = run_plain(plain, "ask", "do cats purr?")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(NO_LLM_LABEL + ":")
    passages, _, sources = p.stdout.partition("\nSources:\n")
    assert "[1] notes/" in passages and "Cats purr when they are content" in passages
    numbered = [ln for ln in sources.splitlines() if ln.startswith("[")]
    # tea and bikes share no word or meaning with the question: they are not sources
    assert len(numbered) == 1 and numbered[0].split()[1:3] == ["strong", "notes/cats.md"], p.stdout
    assert "tea.txt" not in p.stdout and "bikes.txt" not in p.stdout
    assert numbered[0].endswith("  § Cats, lines 1-3"), "place (section / lines) is shown"
    # the quoted sentence, then the uri that opens its line
    assert "> Cats purr when they are content." in passages
    assert "    > Cats purr when they are content.\n      file://" in sources and "/cats.md#L3\n" in sources
    hid = entry_id(p.stderr)
    with open_history(plain.parent / "state" / "history.sqlite3") as s:
        e = s.show(hid)
    assert e["kind"] == "ask" and e["mode"] == "passages" and e["label"] == NO_LLM_LABEL
    assert e["provider"] is None and e["llm_calls"] == 0 and e["answer"] == passages.rstrip("\n")


@pytest.mark.parametrize("args,code,words", [
    (["ask"], 2, "ask needs a question"),
    (["ask", "   "], 2, "ask needs a question"),
    (["ask", "-c", "nope", "cats"], 2, "collection 'nope' has no index"),  # not found: the request's fault
    (["ask", "-n", "0", "cats"], 2, "argument -n/--limit: '0' is not a whole number >= 1"),
    (["ask", "--continue", "0000000000000000"], 2, "'0000000000000000' does not exist"),
    (["ask", "--continue", "abc", "cats"], 2, "not both"),
])
def test_oneshot_bad_input(plain, args, code, words):
    p = run_plain(plain, *args)
    assert p.returncode == code and words in p.stderr, (p.returncode, p.stderr)


def test_daemon_without_llm_answers_with_labelled_passages(daemon, tmp_path):
    dm = daemon({"notes": [write_docs(tmp_path / "docs")]})
    wait_indexed(dm, "notes", 3)
    a = dm.api("POST", "/v1/ask", json={"query": "do cats purr?", "stream": False}).json()
    assert a["mode"] == "passages" and a["label"] == NO_LLM_LABEL and a["answer"].startswith(NO_LLM_LABEL)
    assert a["provider"] is None and a["llm_calls"] == 0 and [s["filename"] for s in a["sources"]] == ["cats.md"]
    doc = (tmp_path / "docs" / "cats.md").read_text()
    quotes = a["sources"][0]["quotes"]
    assert quotes and a["sources"][0]["quote"] in quotes
    for q in quotes:  # exactly the document's text at the span, on the lines its uri opens
        assert doc[q["span"][0]:q["span"][1]] == q["text"]
        assert q["text"] in "\n".join(doc.splitlines()[q["lines"][0] - 1:q["lines"][1]])
        assert q["uri"].endswith(f"/cats.md#L{q['lines'][0]}") and q["lines"][0] == q["lines"][1] == 3
    assert quotes[0]["text"].startswith("Cats purr when they are content.")
    e = dm.api("GET", f"/v1/history/{a['history_id']}").json()
    assert e["mode"] == "passages" and e["answer"] == a["answer"] and e["status"] == "done"
    env = {**os.environ, "RAGWEED_STATE_DIR": str(dm.base / "state")}
    p = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "ask", "do cats purr?"], capture_output=True,
                       text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and p.stdout.startswith(NO_LLM_LABEL), p.stdout + p.stderr
    assert "[1] notes/cats.md" in p.stdout and "[2]" not in p.stdout, "one source: the others answer nothing"
    assert "\n    > Cats purr when they are content." in p.stdout and "/cats.md#L3\n" in p.stdout, p.stdout

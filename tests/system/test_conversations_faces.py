"""Conversations in every face of a REAL daemon subprocess (hash embedder): ``ragweedctl ask -f`` /
``--conversation`` and ``history`` (threads listed, shown, deleted) on both storage backends, the
official OpenAI SDK sending the thread as messages (with and without an LLM, the LLM being the
local wire-protocol server of tests/fakes/llm_server.py), and the official MCP SDK's clients over
stdio (``ragweedctl mcp``) and ``/mcp``. Every bad id gets a clear error and the daemon stays up."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import anyio
import openai
import pytest

from tests.fakes.llm_server import API_KEY, FakeLLMServer
from tests.integration.test_conversations_flow import FILES, TEA
from tests.system.conftest import ROOT, Daemon, serving, wait_indexed
from tests.system.test_mcp import data, error_text, sessions

FOLLOW = "and black tea?"


def write_docs(base):
    docs = base / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for name, text in FILES.items():
        (docs / name).write_text(text)
    return docs


def started(d: Daemon) -> Daemon:
    wait_indexed(d, "notes", len(FILES))
    d.wait_idle()
    return d


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    base = tmp_path_factory.mktemp("conv-faces")
    with serving(Daemon(base / "d", {"notes": [write_docs(base)]})) as dm:
        yield started(dm)


def rewrite_reply(provider, messages):
    if "standalone search query" in messages[0]["content"]:
        return "How long should black tea steep?"
    return "Black tea steeps for four minutes [1]."


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(models=("test-model",), reply=rewrite_reply) as srv:
        yield srv


@pytest.fixture(scope="module")
def d_llm(tmp_path_factory, llm):
    base = tmp_path_factory.mktemp("conv-faces-llm")
    extra = "\n".join(["[llm]", 'synthesis = "openai:test-model"', f'openai_base_url = "{llm.url}/v1"',
                       f'openai_api_key = "{API_KEY}"', "max_retries = 0", "timeout_s = 20"])
    with serving(Daemon(base / "d", {"notes": [write_docs(base)]}, extra=extra)) as dm:
        yield started(dm)


def ctl(d: Daemon, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "--state-dir", str(d.base / "state"), *args],
                          capture_output=True, text=True, timeout=120, cwd=str(ROOT))


def up(d: Daemon) -> None:
    assert d.api("GET", "/v1/health").json()["ok"]


# --------------------------------------------------------------------------- ragweedctl
def test_ragweedctl_follows_up_lists_shows_and_deletes_threads(any_daemon, tmp_path):
    d = started(any_daemon({"notes": [write_docs(tmp_path)]}))
    p = ctl(d, "ask", "-f", FOLLOW)
    assert p.returncode == 2 and "no conversation to follow up yet" in p.stderr, p.stderr
    p = ctl(d, "ask", TEA)
    assert p.returncode == 0, p.stderr
    cid = re.search(r"conversation (c[0-9a-f]{16}), turn 1 \(follow up with: ragweedctl ask -f QUESTION\)",
                    p.stderr).group(1)
    assert "searched for" not in p.stderr, "a first question is searched as asked"
    p = ctl(d, "ask", "-f", FOLLOW)
    assert p.returncode == 0, p.stderr
    assert "searched for: and black tea? steep  (carried from the earlier turns: steep)" in p.stderr, p.stderr
    assert f"conversation {cid}, turn 2" in p.stderr
    assert "Black tea should steep for four minutes" in p.stdout and "notes/black.md" in p.stdout, p.stdout
    p = ctl(d, "--json", "ask", "--conversation", cid, "and green?")
    out = json.loads(p.stdout)
    assert p.returncode == 0 and out["conversation_id"] == cid and out["turn"] == 3 and out["rewrite"]["rewritten"]

    p = ctl(d, "history")
    assert p.returncode == 0 and f"{cid} #2" in p.stdout and f"{cid} #3" in p.stdout, p.stdout
    p = ctl(d, "history", "--threads")
    assert re.search(rf"^{cid}  \S+    3 turns  {re.escape(TEA)}$", p.stdout, re.M), p.stdout
    p = ctl(d, "history", cid)
    assert p.returncode == 0 and p.stdout.startswith(f"conversation {cid}: 3 turns"), p.stdout
    assert p.stdout.count("── turn ") == 3 and "searched for: and black tea? steep" in p.stdout
    assert "query: and black tea?" in p.stdout

    p = ctl(d, "history", "--delete", cid)
    assert p.returncode == 0 and p.stdout.strip() == f"deleted conversation {cid} and its 3 turns", p.stdout
    p = ctl(d, "ask", "--conversation", cid, FOLLOW)
    assert p.returncode == 2 and f"conversation '{cid}' does not exist" in p.stderr, p.stderr
    assert "list them with `ragweedctl history --threads`" in p.stderr
    for args, words in ((("ask", "--conversation", "nope", FOLLOW), "is not one: a conversation id is 'c'"),
                        (("history", "--delete", "nope"), "is not one"),
                        (("history", "--delete", cid), "does not exist"),
                        (("history", "c0000000000000000"), "does not exist"),
                        (("ask", "-f", "--conversation", cid, FOLLOW), "not both"),
                        (("ask", "--continue", "0123456789abcdef", "-f"), "--continue finishes a cut answer")):
        p = ctl(d, *args)
        assert p.returncode == 2 and words in p.stderr, (args, p.stderr)
    p = ctl(d, "--json", "ask", "--conversation", "c0000000000000000", FOLLOW)
    assert p.returncode == 2 and json.loads(p.stdout)["error"]["action"] == {"id": "list_conversations"}
    up(d)


# --------------------------------------------------------------------------- the OpenAI SDK
def client(d: Daemon) -> openai.OpenAI:
    token = (d.base / "state" / "token").read_text().strip()
    return openai.OpenAI(base_url=f"http://127.0.0.1:{d.port}/v1", api_key=token, max_retries=0, timeout=60)


THREAD = [{"role": "user", "content": TEA},
          {"role": "assistant", "content": "Green tea steeps for two minutes [1]."},
          {"role": "user", "content": FOLLOW}]


def test_chat_reads_the_thread_it_is_sent(d):
    c = client(d)
    alone = c.chat.completions.create(model="ragweedd/all", messages=[{"role": "user", "content": FOLLOW}])
    assert alone.model_extra["citations"][0]["filename"] == "towels.md"
    res = c.chat.completions.create(model="ragweedd/all", messages=THREAD)
    cites = res.model_extra["citations"]
    assert cites[0]["filename"] == "black.md" and "four minutes" in res.choices[0].message.content
    entry = d.api("GET", f"/v1/history/{res.model_extra['history_id']}").json()
    assert entry["rewrite"]["query"] == "and black tea? steep" and entry["conversation_id"] is None
    chunks = list(c.chat.completions.create(model="ragweedd/notes", messages=THREAD, stream=True))
    assert chunks[-1].model_extra["citations"][0]["filename"] == "black.md"
    assert d.api("GET", "/v1/conversations").json()["total"] == 0, "the client holds the thread: none is stored"


def test_chat_with_an_llm_rewrites_from_the_messages_and_prompts_with_them(d_llm, llm):
    llm.requests.clear()
    res = client(d_llm).chat.completions.create(model="ragweedd/all", messages=THREAD)
    assert res.choices[0].message.content == "Black tea steeps for four minutes [1]."
    assert res.model_extra["citations"][0]["filename"] == "black.md"
    rewrite, answer = llm.requests
    assert "Q1: How long should green tea steep?\nA1: Green tea steeps for two minutes." in \
        rewrite["messages"][-1]["content"]
    assert [m["role"] for m in answer["messages"]] == ["system", "user", "assistant", "user"]
    assert answer["messages"][2]["content"] == "Green tea steeps for two minutes."
    entry = d_llm.api("GET", f"/v1/history/{res.model_extra['history_id']}").json()
    assert entry["rewrite"]["method"] == "llm" and entry["rewrite"]["llm"]["messages"] == rewrite["messages"]


def test_chat_with_odd_earlier_messages_still_answers(d):
    odd = [{"role": "assistant", "content": "Hello!"}, {"role": "user", "content": [{"type": "text", "text": TEA}]},
           {"role": "tool", "content": None}, {"role": "user", "content": "   "}, {"role": "user", "content": FOLLOW}]
    res = client(d).chat.completions.create(model="ragweedd/all", messages=odd)
    assert res.model_extra["citations"][0]["filename"] == "black.md"
    up(d)


# --------------------------------------------------------------------------- the MCP SDK
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_mcp_ask_takes_and_returns_a_conversation(d, transport):
    async def go():
        async with sessions(d)[transport]() as s:
            first = data(await s.call_tool("ask", {"query": TEA}))
            cid = first["conversation_id"]
            assert re.fullmatch(r"c[0-9a-f]{16}", cid) and first["turn"] == 1 and "searched" in first
            res = await s.call_tool("ask", {"query": FOLLOW, "conversation_id": cid})
            follow = data(res)
            assert follow["conversation_id"] == cid and follow["turn"] == 2
            assert follow["searched"] == "and black tea? steep" and follow["sources"][0]["filename"] == "black.md"
            text = res.content[0].text
            assert text.startswith("(searched for: and black tea? steep)")
            assert f"(conversation_id {cid}, turn 2: pass it back to ask a follow-up)" in text
            for bad, words in (("c0000000000000000", "does not exist"), ("nope", "is not one"),
                               ("0123456789abcdef", "is a history id, not a conversation id")):
                msg = error_text(await s.call_tool("ask", {"query": FOLLOW, "conversation_id": bad}))
                assert words in msg, msg
            msg = error_text(await s.call_tool("ask", {"query": FOLLOW, "conversation_id": "c0000000000000000"}))
            assert "conversation ids come from `ask` answers (conversation_id)" in msg, msg
            assert data(await s.call_tool("status", {}))["version"]
    anyio.run(go)
    up(d)

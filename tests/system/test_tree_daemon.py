"""Tree mode through a real daemon: ``"mode": "tree"`` in the /v1/ask body reaches the engine as the
contract declares it, ragweedctl ask --mode tree prints the sections opened, a mode that does not exist
is a 400, and a daemon without an LLM refuses tree mode with a hint and records nothing."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.fakes.llm_server import API_KEY, FakeLLMServer
from tests.system.conftest import ROOT, Daemon, serving, wait_indexed

DOCS = {
    "garden.md": "# Garden\n\n## Watering\n\n" + "Tomatoes need deep watering twice a week in July. " * 80
                 + "\n\n## Compost\n\n" + "The compost heap is turned every fortnight. " * 80 + "\n",
    "tea.md": "# Tea\n\n## Steeping\n\n" + "Green tea steeps for two minutes at eighty degrees. " * 5 + "\n",
}
ANSWER = "The heap is turned every fortnight [1]."


def _id(prompt: str, pattern: str) -> str:
    return re.search(r"\[(D\d+(?:\.\d+)?)\][^\n]*" + pattern, prompt).group(1)


def reply(provider, messages):
    p = messages[-1]["content"]
    if p.startswith("You choose which documents"):
        return '{"documents": ["%s"]}' % _id(p, "garden.md")
    if p.startswith("You choose which sections"):
        return '{"sections": ["%s"]}' % (_id(p, "Compost") if "Compost" in p
                                         else re.search(r"\[(D\d+\.\d+)\]", p).group(1))
    return ANSWER


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(models=("test-model",), reply=reply) as srv:
        yield srv


def _toml(llm: FakeLLMServer) -> str:
    return "\n".join(["[llm]", 'synthesis = "openai:test-model"', f'openai_base_url = "{llm.url}/v1"',
                      f'openai_api_key = "{API_KEY}"', "max_retries = 0", "timeout_s = 20"])


def _docs(folder):
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text)
    return folder


def test_tree_mode_through_the_daemon(tmp_path, llm):
    with serving(Daemon(tmp_path / "d", {"notes": [_docs(tmp_path / "docs")]}, extra=_toml(llm))) as d:
        wait_indexed(d, "notes", 2)
        d.wait_idle()
        r = d.api("POST", "/v1/ask", json={"query": "how often is the compost turned?", "mode": "tree",
                                            "stream": False})
        assert r.status_code == 200, r.text
        a = r.json()
        assert a["answer"] == ANSWER and a["tree"]["fallback"] is None
        assert [x["source_file"].endswith("garden.md") for x in a["tree"]["documents"]] == [True]
        assert [s["title"] for s in a["tree"]["sections"]] == ["Compost"]
        assert all("compost" in s["text"] for s in a["sources"]) and a["sources"][0]["uri"].endswith(
            "garden.md#L" + str(a["sources"][0]["lines"][0]))
        e = d.api("GET", f"/v1/history/{a['history_id']}").json()
        assert e["tree"]["sections"][0]["title"] == "Compost" and e["status"] == "done"

        # the ask's filters bound the documents offered: one passes, so it is chosen without routing
        llm.requests.clear()
        r = d.api("POST", "/v1/ask", json={"query": "how often is the compost turned?", "mode": "tree",
                                            "stream": False, "path_glob": "*tea.md"})
        assert r.status_code == 200, r.text
        t = r.json()["tree"]
        assert t["candidates"] == 1 and [x["source_file"].endswith("tea.md") for x in t["documents"]] == [True]
        assert t["sections"] and t["calls"] == 1, t
        assert all(x["source_file"].endswith("tea.md") for x in r.json()["sources"])
        assert not any("You choose which documents" in str(q) for q in llm.requests)
        r = d.api("POST", "/v1/ask", json={"query": "compost?", "mode": "tree", "stream": False,
                                            "file_type": "pdf"})
        assert r.status_code == 200, r.text
        t = r.json()["tree"]
        assert t["candidates"] == 0 and "filters" in t["fallback"]["reason"]

        bad = d.api("POST", "/v1/ask", json={"query": "x", "mode": "trees"})
        assert bad.status_code == 400 and "mode" in bad.text

        env = {**os.environ, "RAGWEED_STATE_DIR": str(d.base / "state")}
        p = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "ask", "--tree",
                            "how often is the compost turned?"], capture_output=True, text=True, env=env, cwd=ROOT,
                           timeout=60)
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith(ANSWER) and "Tree mode: 1 of 2 documents chosen (Garden)" in p.stdout, p.stdout
        assert re.search(r"sections opened:\n  D\d\.\d Compost\n", p.stdout), p.stdout
        # the history shows what ask showed: the citation check and the tree's steps
        h = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "history", a["history_id"]],
                           capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
        assert h.returncode == 0, h.stderr
        assert "Citation check (terms): 1 of 1 citations supported." in h.stdout, h.stdout
        assert re.search(r"Tree mode: 1 of 2 documents chosen \(Garden\); sections opened:\n  D\d\.\d Compost\n",
                         h.stdout), h.stdout


def test_tree_mode_without_an_llm_is_refused(tmp_path):
    with serving(Daemon(tmp_path / "d", {"notes": [_docs(tmp_path / "docs")]})) as d:
        wait_indexed(d, "notes", 2)
        before = d.api("GET", "/v1/history").json()["total"]
        r = d.api("POST", "/v1/ask", json={"query": "compost?", "mode": "tree", "stream": False})
        assert r.status_code == 400, r.text
        err = r.json()["error"]
        assert "needs an LLM" in err["message"] and "synthesis" in err["hint"]
        assert d.api("GET", "/v1/history").json()["total"] == before

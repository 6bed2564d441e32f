"""The rerank stage in a real daemon subprocess: ``[llm] rerank`` through the OpenAI SDK against the
local wire-protocol server; retrieval_meta.rerank on the HTTP search response, the reranked order in
/v1/search and /v1/ask, and a provider failure that leaves the fused order."""

from __future__ import annotations

import pytest

from tests.fakes.llm_server import API_KEY, FakeLLMServer, relevance_reply
from tests.system.conftest import Daemon, serving, wait_indexed

DOCS = {
    "cats.md": "Cats purr when they are content; the pump in the cattery hums all day.",
    "tea.txt": "Green tea steeps two minutes; the kettle pump pushes water at eighty degrees.",
    "bikes.txt": "Bicycle chains need oil; a floor pump fills the tyres after rain.",
}
SCORES: dict[str, float] = {}


def score_of(text: str) -> float:
    return next(s for word, s in SCORES.items() if word in text)


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(models=("test-model",), reply=relevance_reply(score_of)) as srv:
        yield srv


@pytest.fixture(scope="module")
def d(tmp_path_factory, llm):
    base = tmp_path_factory.mktemp("rerankd")
    docs = base / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    extra = "\n".join(["[llm]", 'rerank = "openai:test-model"', f'openai_base_url = "{llm.url}/v1"',
                       f'openai_api_key = "{API_KEY}"', "max_retries = 0", "timeout_s = 20"])
    with serving(Daemon(base / "d", {"notes": [docs]}, extra=extra)) as dm:
        wait_indexed(dm, "notes", 3)
        dm.wait_idle()
        yield dm


def names(hits):
    return [h["filename"] for h in hits]


def test_search_and_ask_are_reranked_and_the_cost_is_on_the_http_response(d, llm):
    # first the provider fails: the search still answers, in fused order, and says what failed
    llm.push({"status": 500, "message": "the model server is overloaded"})
    r = d.api("POST", "/v1/search", json={"query": "pump"})
    assert r.status_code == 200, r.text
    fused = r.json()
    rr = fused["retrieval_meta"]["rerank"]
    assert rr["error_code"] == "provider" and "overloaded" in rr["error"] and rr["calls"] == 1
    order = names(fused["results"])
    assert sorted(order) == sorted(DOCS)

    # now the model finds the fused order upside down
    SCORES.update({DOCS[n].split()[0]: 3 * i for i, n in enumerate(order)})
    llm.requests.clear()
    r = d.api("POST", "/v1/search", json={"query": "pump"})
    assert r.status_code == 200, r.text
    res = r.json()
    assert names(res["results"]) == order[::-1]
    assert [h["rank"] for h in res["results"]] == [1, 2, 3]
    rr = res["retrieval_meta"]["rerank"]
    assert {k: rr[k] for k in ("provider", "model", "strategy", "candidates", "calls")} == {
        "provider": "openai", "model": "test-model", "strategy": "batch", "candidates": 3, "calls": 1}
    assert rr["input_tokens"] > 0 and rr["output_tokens"] > 0 and rr["ms"] > 0 and "error" not in rr
    assert [s["fused_rank"] for s in sorted(rr["scores"], key=lambda s: s["rank"])] == [3, 2, 1]
    assert len(llm.requests) == 1 and "pump" in llm.requests[0]["messages"][-1]["content"]
    # the history keeps the reranked search as it was answered
    e = d.api("GET", f"/v1/history/{res['history_id']}").json()
    assert e["retrieval_meta"]["rerank"] == rr and names(e["results"]) == order[::-1]

    # ask retrieves through the same stage: the cited passages come in the reranked order
    r = d.api("POST", "/v1/ask", json={"query": "pump", "stream": False})
    assert r.status_code == 200, r.text
    a = r.json()
    e = d.api("GET", f"/v1/history/{a['history_id']}").json()
    # (which passages the no-LLM answer then quotes is its own choice: docs/answers.md)
    assert names(e["retrieved"]) == order[::-1]
    assert e["retrieval_meta"]["rerank"]["calls"] == 1 and "error" not in e["retrieval_meta"]["rerank"]

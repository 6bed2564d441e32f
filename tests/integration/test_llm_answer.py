"""Whole answers through the real SDKs against the local wire-protocol server: annotation concurrency
measured on the server side, mixed providers, streaming tokens, continuation and a refusal."""

from __future__ import annotations

import asyncio
import dataclasses
import re

import pytest

from ragweedd.answer import REFUSAL, answer_question, ask, ask_continue  # noqa: E402
from ragweedd.config import default_config  # noqa: E402
from ragweedd.llm import make_provider  # noqa: E402
from tests.fakes.llm_server import API_KEY, FakeLLMServer  # noqa: E402

ENV = {"ANTHROPIC_API_KEY": API_KEY, "OPENAI_API_KEY": API_KEY, "GEMINI_API_KEY": API_KEY}


def hits(n):
    return [{"embedding_id": i, "collection": "lab", "doc_id": f"{i:032x}", "source_file": f"/lab/r{i}.pdf",
             "filename": f"r{i}.pdf", "source_rel_path": f"r{i}.pdf",
             "text": f"Report {i}: the pump failed at {i} bar. " * 20,
             "score": 1 - i / 50, "rel_score": 1 - i / max(1, n), "page_label": str(i + 1), "section": None,
             "span": [0, 100], "t_start": None, "t_end": None, "member": None} for i in range(n)]


def reply(provider, messages):
    last = messages[-1]["content"]
    if "EXTRACT" in last:  # annotation: odd reports are irrelevant
        n = int(re.search(r"Report (\d+)", last).group(1))
        return "[IRRELEVANT!!!]" if n % 2 else f'"the pump failed at {n} bar" answers it.'
    if "Continue" in last:
        return " It was replaced [2]."
    if "unanswerable" in last:
        return REFUSAL
    return "The pump failed at 0 bar [1] and at 2 bar [2]."


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(models=("test-model", "gemma3:1b"), reply=reply, delay_s=0.1) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean(server):
    server.requests.clear()
    server.max_in_flight = 0
    yield


def provider(server, spec):
    url = server.url + "/v1" if spec.startswith("openai") else server.url
    return make_provider(spec, default_config(), env=ENV, base_url=url, timeout_s=10, retry_backoff_s=0.01)


@pytest.mark.parametrize("concurrency", [1, 3])
def test_annotation_concurrency_bound_seen_by_server(server, concurrency):
    cfg = dataclasses.replace(default_config(), annotation_concurrency=concurrency)

    async def go():
        ann = provider(server, "ollama:gemma3:1b")
        try:
            return await ask("when did the pump fail?", hits(9), cfg, annotator=ann)
        finally:
            await ann.aclose()

    done = asyncio.run(go())
    assert len(server.requests) == 9
    assert server.max_in_flight == concurrency
    assert sorted(f["embedding_id"] for f in done["filtered"]) == [1, 3, 5, 7]
    # no synthesis provider: the kept passages are the answer, with their annotations in the record
    assert done["mode"] == "passages" and done["annotation_provider"] == "ollama:gemma3:1b"


@pytest.mark.parametrize("ann_spec,syn_spec", [("ollama:gemma3:1b", "anthropic:test-model"),
                                               ("gemini:test-model", "openai:test-model")])
def test_full_answer_with_different_providers(server, ann_spec, syn_spec):
    cfg = default_config()

    async def go():
        ann, syn = provider(server, ann_spec), provider(server, syn_spec)
        try:
            return [e async for e in answer_question("when did the pump fail?", hits(4), cfg,
                                                     annotator=ann, synthesizer=syn)]
        finally:
            await ann.aclose()
            await syn.aclose()

    evs = asyncio.run(go())
    done = evs[-1]
    tokens = [e["text"] for e in evs if e["type"] == "token"]
    assert len(tokens) > 3 and "".join(tokens) == done["answer"] == "The pump failed at 0 bar [1] and at 2 bar [2]."
    assert [s["embedding_id"] for s in done["sources"]] == [0, 2]
    assert done["cited_numbers"] == [1, 2] and done["invalid_citations"] == []
    assert done["provider"] == syn_spec and done["model"] == "test-model"
    assert done["llm_calls"] == 5 and done["usage"]["by_stage"]["synthesis"]["output_tokens"] > 0
    syn_req = [r for r in server.requests if r["provider"] == syn_spec.split(":")[0]][-1]
    assert ("[1] SOURCE: lab/r0.pdf [p.1]\nANNOTATION: \"the pump failed at 0 bar\" answers it."
            in syn_req["messages"][-1]["content"])
    assert syn_req["messages"][0]["role"] == "system" and REFUSAL in syn_req["messages"][0]["content"]


def test_continuation_through_openai_sdk(server):
    cfg = dataclasses.replace(default_config(), max_tokens=16, llm_synthesis="openai:test-model",
                              llm_openai_base_url=server.url + "/v1", llm_openai_api_key=API_KEY)
    # max_tokens 16 ~ 64 chars: the server cuts this reply there, as a model would
    server.push({"text": "The pump failed at 0 bar [1] and the valve at 1 bar, which was noted in the log [3].",
                 "stop": "end"})
    done = asyncio.run(ask("when did the pump fail?", hits(3), cfg))
    assert done["stop_reason"] == "max_tokens" and done["continuable"]
    assert len(done["answer"]) == 64
    done2 = asyncio.run(ask_continue(done["state"], cfg))
    assert done2["answer"] == done["answer"] + " It was replaced [2]."
    assert done2["stop_reason"] == "end" and done2["continuations"] == 1
    req = server.requests[-1]
    assert req["messages"][-2] == {"role": "assistant", "content": done["answer"]}
    assert req["messages"][-1]["role"] == "user" and "Continue" in req["messages"][-1]["content"]


def test_refusal_through_anthropic_sdk(server):
    cfg = default_config()

    async def go():
        syn = provider(server, "anthropic:test-model")
        try:
            return await ask("an unanswerable question", hits(2), cfg, synthesizer=syn)
        finally:
            await syn.aclose()

    done = asyncio.run(go())
    assert done["answer"] == REFUSAL and done["refused"] and done["refused_only"] and done["cited"] == []

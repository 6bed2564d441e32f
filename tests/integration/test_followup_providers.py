"""The follow-up rewrite and the thread in the synthesis prompt through every provider's official SDK
(aiohttp for Ollama) against the local server speaking its wire protocol: the rewrite call's prompt
and reply, its failures recorded and never raised, and the earlier turns arriving as the chat's
own user and assistant turns in each protocol."""

from __future__ import annotations

import asyncio

import pytest

from ragweedd.answer import answer_question
from ragweedd.config import default_config
from ragweedd.query import followup_llm
from tests.fakes.llm_server import FakeLLMServer
from tests.integration.test_llm_providers import PROVIDERS, _provider

TEA = "How long should green tea steep?"
THREAD = [{"question": TEA, "query": TEA, "answer": "Two minutes at eighty degrees.", "filters": {},
           "documents": []}]


def reply(provider, messages):
    if "standalone search query" in messages[0]["content"]:
        return "How long should black tea steep?"
    return "Black tea steeps for four minutes [1]."


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(models=("test-model",), reply=reply) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean(server):
    server.script.clear()
    server.requests.clear()
    yield


def rewrite(p, question="and black tea?"):
    async def go():
        try:
            return await followup_llm.rewrite(question, THREAD, p)
        finally:
            await p.aclose()
    return asyncio.run(go())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_call_rewrites_the_follow_up(server, provider):
    query, call = rewrite(_provider(server, provider))
    assert query == "How long should black tea steep?"
    assert call["provider"] == f"{provider}:test-model" and call["calls"] == 1 and "error" not in call
    assert call["output_tokens"] > 0 and call["input_tokens"] > 0 and call["ms"] > 0
    (req,) = server.requests
    assert req["messages"][0]["role"] == "system" and "standalone search query" in req["messages"][0]["content"]
    assert "Q1: How long should green tea steep?\nA1: Two minutes at eighty degrees." in req["messages"][1]["content"]
    assert req["max_tokens"] == followup_llm.MAX_TOKENS


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("action,words", [({"status": 500, "message": "overloaded"}, "overloaded"),
                                          ({"status": 429}, "rate"), ({"text": ""}, "no usable query")])
def test_a_failed_rewrite_is_recorded_and_never_raised(server, provider, action, words):
    server.push(action)
    query, call = rewrite(_provider(server, provider, max_retries=0))
    assert query is None and words in call["error"].lower(), call


def test_a_rewrite_that_times_out_is_recorded(server):
    server.push({"stall": True})
    query, call = rewrite(_provider(server, "openai", timeout_s=0.5, max_retries=0))
    assert query is None and call["error"], call


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_earlier_turns_reach_each_provider_as_chat_turns(server, provider):
    hit = {"embedding_id": 1, "collection": "notes", "doc_id": "a" * 32, "source_file": "/n/black.md",
           "filename": "black.md", "source_rel_path": "black.md", "text": "Black tea steeps for four minutes.",
           "score": 1.0, "rel_score": 1.0, "page_label": None, "section": None, "span": [0, 34], "t_start": None,
           "t_end": None, "member": None}

    async def go():
        p = _provider(server, provider)
        try:
            return [e async for e in answer_question("and black tea?", [hit], default_config(), synthesizer=p,
                                                     thread=THREAD, searched="How long should black tea steep?")]
        finally:
            await p.aclose()

    done = asyncio.run(go())[-1]
    assert done["answer"] == "Black tea steeps for four minutes [1]." and done["budget"]["thread_turns"] == 1
    msgs = server.requests[-1]["messages"]
    assert [(m["role"], m["content"]) for m in msgs[1:3]] == [("user", TEA),
                                                              ("assistant", "Two minutes at eighty degrees.")]
    assert msgs[-1]["role"] == "user" and "QUESTION: and black tea?" in msgs[-1]["content"]

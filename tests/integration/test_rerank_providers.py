"""The rerank stage through each provider's official SDK (aiohttp for Ollama) against the local
wire-protocol server, on a real collection searched by the real services: a rerank that reorders,
what it cost, and every way the provider can fail while the search still answers in fused order."""

from __future__ import annotations

import asyncio
import dataclasses
import socket
import sys
from pathlib import Path

import pytest

from ragweedd.index.managed import DiskIndexes  # noqa: E402
from ragweedd.llm import make_provider  # noqa: E402
from ragweedd.query.rerank import LLMReranker  # noqa: E402
from ragweedd.services import Services  # noqa: E402
from tests.fakes.llm_server import API_KEY, FakeLLMServer, relevance_reply  # noqa: E402
from tests.hashed_world import hashed_collection  # noqa: E402

PROVIDERS = ["anthropic", "openai", "gemini", "ollama"]
ENV = {"ANTHROPIC_API_KEY": API_KEY, "OPENAI_API_KEY": API_KEY, "GEMINI_API_KEY": API_KEY}
NAMES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]
QUERY = "why did the pump fail"
# every document mentions the pump, so the search returns all six; the marker tells them apart
DOCS = {f"{n}.txt": f"Report {n}: the pump in hall {n} failed after the {n} valve stuck and pressure rose."
        for n in NAMES}


def marker(text: str) -> str:
    return next(n for n in NAMES if f"Report {n}:" in text)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    cfg, paths, emb = hashed_collection(tmp_path_factory.mktemp("rerank"), DOCS, top="chunk_size = 64")
    services = Services(cfg, paths, embedder=emb, disk_indexes=DiskIndexes(cfg, paths), reranker=None)
    fused = asyncio.run(services.search_async(QUERY, None, 10))
    assert "rerank" not in fused["retrieval_meta"], "no reranker: no rerank stage"
    order = [marker(h["text"]) for h in fused["results"]]
    assert sorted(order) == sorted(NAMES)
    yield cfg, services, order
    services.close()


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(models=("test-model",)) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean(server):
    server.script.clear()
    server.requests.clear()
    server.max_in_flight = 0
    server.delay_s = 0.0
    yield


def reranker(cfg, server, provider, *, strategy="batch", url=None, env=ENV, **kw):
    base = url or server.url
    if provider == "openai":
        base += "/v1"
    spec = f"{provider}:test-model"
    timeout_s = kw.pop("timeout_s", 30.0)

    def make():
        return make_provider(spec, cfg, env=env, base_url=base, timeout_s=10, max_retries=0, retry_backoff_s=0.01)

    return LLMReranker(spec, cfg, strategy=strategy, timeout_s=timeout_s, make=make, **kw)


def search(world, rr, limit=10):
    _, services, _ = world
    services.reranker = rr
    try:
        return asyncio.run(services.search_async(QUERY, None, limit))
    finally:
        services.reranker = None


def reversed_scores(order):
    """The fused order turned upside down: the last fused result is the most relevant."""
    score = {n: 2 * i for i, n in enumerate(order)}  # 0, 2, ... 10
    return lambda text: score[marker(text)]


def assert_fused(res, order):
    assert [marker(h["text"]) for h in res["results"]] == order
    assert [h["rank"] for h in res["results"]] == list(range(1, len(order) + 1))


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("strategy", ["batch", "each"])
def test_rerank_reorders_and_records_its_cost(world, server, provider, strategy):
    cfg, _, order = world
    server.reply = relevance_reply(reversed_scores(order))
    res = search(world, reranker(cfg, server, provider, strategy=strategy))
    hits = res["results"]
    meta = res["retrieval_meta"]
    rr = meta["rerank"]
    assert "error" not in rr, rr
    if strategy == "batch":
        assert [marker(h["text"]) for h in hits] == order[::-1]
    else:  # yes for the three the reply scores 5 or more (the last three fused), each block in fused order
        assert [marker(h["text"]) for h in hits] == order[3:] + order[:3]
    assert [h["rank"] for h in hits] == [1, 2, 3, 4, 5, 6]
    # the reranked results take over the fused score slots: scores still fall with rank
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)
    assert hits[0]["rel_score"] == 1.0
    calls = 1 if strategy == "batch" else 6
    assert len(server.requests) == calls and {r["provider"] for r in server.requests} == {provider}
    assert rr["provider"] == provider and rr["model"] == "test-model" and rr["strategy"] == strategy
    assert rr["candidates"] == 6 and rr["calls"] == calls
    assert rr["input_tokens"] > 0 and rr["output_tokens"] > 0 and rr["ms"] > 0
    assert meta["timings_ms"]["rerank"] == rr["ms"]
    by_fused = {s["fused_rank"]: s for s in rr["scores"]}
    first = 6 if strategy == "batch" else 4
    assert by_fused[first]["rank"] == 1 and by_fused[first]["relevance"] == 1.0 and by_fused[1]["relevance"] == 0.0
    # what the model saw: the query and the passages
    sent = server.requests[0]["messages"][-1]["content"]
    assert QUERY in sent and "Report" in sent


def test_batch_sends_the_top_candidates_only_and_keeps_the_tail(world, server):
    cfg, _, order = world
    server.reply = relevance_reply(reversed_scores(order))
    res = search(world, reranker(cfg, server, "openai", candidates=3), limit=10)
    assert [marker(h["text"]) for h in res["results"]] == order[:3][::-1] + order[3:]
    prompt = server.requests[0]["messages"][-1]["content"]
    assert sum(f"Report {n}:" in prompt for n in NAMES) == 3
    assert res["retrieval_meta"]["rerank"]["candidates"] == 3


def test_rerank_sees_more_candidates_than_the_results_asked_for(world, server):
    cfg, _, order = world
    server.reply = relevance_reply(reversed_scores(order))
    res = search(world, reranker(cfg, server, "openai", candidates=6), limit=2)
    # the search fetched six for the reranker, which promoted the last two fused results
    assert [marker(h["text"]) for h in res["results"]] == [order[5], order[4]]
    assert res["retrieval_meta"]["counts"]["returned"] == 2
    assert [h["annotate"] for h in res["results"]] == [True, True]


def test_each_calls_run_in_parallel_within_the_bound(world, server):
    cfg, _, order = world
    server.reply = relevance_reply(reversed_scores(order))
    server.delay_s = 0.2
    res = search(world, reranker(cfg, server, "ollama", strategy="each", concurrency=2))
    assert "error" not in res["retrieval_meta"]["rerank"]
    assert len(server.requests) == 6 and server.max_in_flight == 2


def dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: nothing listens there


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("strategy", ["batch", "each"])
def test_provider_down_search_still_answers_in_fused_order(world, server, provider, strategy):
    cfg, _, order = world
    res = search(world, reranker(cfg, server, provider, strategy=strategy, url=dead_url()))
    assert_fused(res, order)
    rr = res["retrieval_meta"]["rerank"]
    assert rr["error_code"] == "provider" and provider in rr["error"] and "test-model" in rr["error"]
    assert "connect" in rr["error"].lower() or "reach" in rr["error"].lower(), rr["error"]
    assert rr["calls"] >= 1 and "scores" not in rr


@pytest.mark.parametrize("provider", PROVIDERS)
def test_garbage_output_keeps_the_fused_order(world, server, provider):
    cfg, _, order = world
    server.reply = lambda p, m: "I would rather not rank these passages."
    res = search(world, reranker(cfg, server, provider))
    assert_fused(res, order)
    rr = res["retrieval_meta"]["rerank"]
    assert rr["error_code"] == "rerank_bad_output" and "scored 0 of 6 passages" in rr["error"]
    assert rr["calls"] == 1 and rr["output_tokens"] > 0, "what the useless call cost is still reported"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_garbage_yes_no_answer_keeps_the_fused_order(world, server, provider):
    cfg, _, order = world
    server.reply = lambda p, m: "Perhaps."
    res = search(world, reranker(cfg, server, provider, strategy="each", concurrency=1))
    assert_fused(res, order)
    rr = res["retrieval_meta"]["rerank"]
    assert rr["error_code"] == "rerank_bad_output" and "'Perhaps.'" in rr["error"]
    # the first unreadable answer ends the stage: the call waiting for its slot is never made
    assert [r["provider"] for r in server.requests] == [provider]


@pytest.mark.parametrize("provider", ["anthropic", "openai", "gemini"])
def test_bad_key_search_still_answers(world, server, provider):
    cfg, _, order = world
    res = search(world, reranker(cfg, server, provider, env={k: "wrong" for k in ENV}))
    assert_fused(res, order)
    rr = res["retrieval_meta"]["rerank"]
    assert rr["error_code"] == "provider_auth" and "wrong" not in rr["error"]


def test_missing_key_is_reported_without_a_request(world, server):
    cfg, _, order = world
    res = search(world, reranker(cfg, server, "anthropic", env={}))
    assert_fused(res, order)
    rr = res["retrieval_meta"]["rerank"]
    assert rr["error_code"] == "provider_auth" and "ANTHROPIC_API_KEY" in rr["error"] and rr["calls"] == 0
    assert server.requests == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_model_that_never_answers_is_cut_at_the_rerank_timeout(world, server, provider):
    cfg, _, order = world
    server.push({"stall": True})
    res = search(world, reranker(cfg, server, provider, timeout_s=1.0))
    assert_fused(res, order)
    rr = res["retrieval_meta"]["rerank"]
    assert rr["error_code"] == "provider_timeout" and "llm.rerank_timeout_s" in rr["error"]
    assert 1000 <= rr["ms"] < 5000


def test_configured_reranker_is_built_from_the_llm_keys(world, server):
    cfg, services, order = world
    cfg2 = dataclasses.replace(cfg, llm_rerank="openai:test-model", llm_rerank_strategy="each",
                               llm_rerank_candidates=4, llm_openai_base_url=server.url + "/v1",
                               llm_openai_api_key=API_KEY)
    server.reply = relevance_reply(reversed_scores(order))
    s2 = Services(cfg2, services.paths, embedder=services.embedder, disk_indexes=DiskIndexes(cfg2, services.paths))
    try:
        assert s2.reranker is not None and s2.reranker.candidates == 4
        res = asyncio.run(s2.search_async(QUERY, None, 10))
    finally:
        s2.close()
    rr = res["retrieval_meta"]["rerank"]
    assert rr["strategy"] == "each" and rr["candidates"] == 4 and rr["calls"] == 4 and "error" not in rr
    # of the fused top four (scores 0, 2, 4, 6) only the fourth is a "yes"; the last two are not reranked
    assert [marker(h["text"]) for h in res["results"]] == [order[3], *order[:3], *order[4:]]


def test_one_shot_search_ask_and_eval_questions_rerank(world, server, tmp_path):
    import json
    import subprocess

    cfg, services, order = world
    server.reply = relevance_reply(reversed_scores(order))
    conf = tmp_path / "ragweedd.toml"
    conf.write_text(f'data_dir = "{services.paths.data}"\nstate_dir = "{services.paths.state}"\n'
                    f'cache_dir = "{services.paths.cache}"\nchunk_size = 64\n[embed]\nmodel = "hash:64"\n'
                    f'[llm]\nrerank = "openai:test-model"\nopenai_base_url = "{server.url}/v1"\n'
                    f'openai_api_key = "{API_KEY}"\n')
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(conf), "search", QUERY, "--json"],
                         capture_output=True, text=True, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [marker(h["text"]) for h in data["results"]] == order[::-1]
    assert data["retrieval_meta"]["rerank"]["calls"] == 1
    out = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(conf), "ask", QUERY, "--json"],
                         capture_output=True, text=True, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr
    rec = json.loads(out.stdout)
    assert rec["retrieval_meta"]["rerank"]["strategy"] == "batch" and "error" not in rec["retrieval_meta"]["rerank"]
    # the answer read the passages in the reranked order (which of them it quotes is its own choice)
    assert [marker(s["excerpt"]) for s in rec["retrieved"]][:5] == order[::-1][:5]
    assert len(server.requests) == 2
    # eval questions measures the same stage: the last fused document is first once reranked
    qs = tmp_path / "q.jsonl"
    qs.write_text(json.dumps({"id": "q", "query": QUERY, "relevant": [{"file": f"{order[-1]}.txt"}]}) + "\n")
    out = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(conf), "eval", "questions", str(qs),
                          "--collection", "lab", "--json"], capture_output=True, text=True, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["per_question"][0]["doc_rank"] == 1
    assert len(server.requests) == 3

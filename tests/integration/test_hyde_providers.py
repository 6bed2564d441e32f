"""Adaptive HyDE through each provider's official SDK (aiohttp for Ollama) against the local
wire-protocol server, on a real collection searched by the real services: no call when the query's
own vector search finds something close, the dense leg moved by the hypothetical passages when it
does not, and every failure falling back to the plain query vector."""

from __future__ import annotations

import pytest

from ragweedd.config import load_config  # noqa: E402
from ragweedd.errors import ConfigError  # noqa: E402
from ragweedd.index.managed import DiskIndexes  # noqa: E402
from ragweedd.llm import make_provider  # noqa: E402
from ragweedd.query.hyde import HyDE, make_hyde, split_passages  # noqa: E402
from ragweedd.services import Services  # noqa: E402
from tests.fakes.llm_server import API_KEY, FakeLLMServer  # noqa: E402
from tests.hashed_world import hashed_collection  # noqa: E402

PROVIDERS = ["anthropic", "openai", "gemini", "ollama"]
ENV = {"ANTHROPIC_API_KEY": API_KEY, "OPENAI_API_KEY": API_KEY, "GEMINI_API_KEY": API_KEY}
DOCS = {
    "mito.txt": "Mitochondria produce ATP through oxidative phosphorylation in the inner membrane.",
    "heart.txt": "A heart attack damages the cardiac muscle when blood flow stops.",
    "ribo.txt": "Ribosomes translate messenger RNA into protein chains.",
    "zurich.txt": "The cafe in Zurich serves espresso to researchers every morning.",
}
VAGUE = "what powers the little engines inside cells"  # no close chunk under hash:64
CLOSE = "Mitochondria produce ATP through oxidative phosphorylation"
PASSAGE = "Ribosomes translate messenger RNA into protein chains; they are the protein factories of cells."


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return hashed_collection(tmp_path_factory.mktemp("hyde"), DOCS, top="chunk_size = 64\nsearch_cache_size = 0")


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(models=("test-model",)) as srv:
        yield srv


@pytest.fixture(autouse=True)
def _clean(server):
    server.script.clear()
    server.requests.clear()
    server.reply = lambda provider, messages: PASSAGE
    yield


def hyde(cfg, server, provider, *, gate=0.5, passages=1, timeout_s=10.0, model="test-model"):
    base = server.url + ("/v1" if provider == "openai" else "")

    def make():
        return make_provider(f"{provider}:{model}", cfg, env=ENV, base_url=base, timeout_s=10, max_retries=0,
                             retry_backoff_s=0.01)

    return HyDE(f"{provider}:{model}", cfg, gate=gate, passages=passages, timeout_s=timeout_s, make=make)


def search(world, hy, query, mode="hybrid"):
    cfg, paths, emb = world
    svc = Services(cfg, paths, embedder=emb, disk_indexes=DiskIndexes(cfg, paths), reranker=None, hyde=hy)
    try:
        return svc.search(query, None, 4, mode=mode)
    finally:
        svc.close()


def top_file(res):
    return res["results"][0]["source_file"].rsplit("/", 1)[-1]


def test_the_vague_query_really_finds_nothing_close(world):
    plain = search(world, None, VAGUE, mode="dense")
    assert max(h["sim"] for h in plain["results"]) < 0.5 and top_file(plain) != "ribo.txt"
    assert "hyde" not in plain["retrieval_meta"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_close_match_makes_no_call(world, server, provider):
    res = search(world, hyde(world[0], server, provider, gate=0.5), CLOSE, mode="dense")
    h = res["retrieval_meta"]["hyde"]
    assert h["used"] is False and h["best_score"] >= 0.5 and h["gate"] == 0.5
    assert server.requests == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_under_the_gate_the_passages_move_the_dense_leg(world, server, provider):
    plain = search(world, None, VAGUE, mode="dense")
    res = search(world, hyde(world[0], server, provider, gate=0.5), VAGUE, mode="dense")
    h = res["retrieval_meta"]["hyde"]
    assert h["used"] is True and h["passages"] == 1 and h["calls"] == 1, h
    assert h["best_score"] < 0.5 and h["best_score_after"] > h["best_score"]
    assert h["input_tokens"] > 0 and h["output_tokens"] > 0 and h["ms"] > 0
    assert h["provider"] == provider and h["model"] == "test-model" and "error" not in h
    assert len(server.requests) == 1 and VAGUE in str(server.requests[0])
    assert top_file(res) == "ribo.txt" != top_file(plain)
    assert [x["sim"] for x in res["results"]] != [x["sim"] for x in plain["results"]]
    assert "hyde" in res["retrieval_meta"]["timings_ms"]


def test_several_passages_come_from_one_call(world, server):
    server.reply = lambda provider, messages: f"{PASSAGE}\n---\nHearts pump blood.\n---\nRibosomes make protein."
    res = search(world, hyde(world[0], server, "openai", gate=1.0, passages=3), VAGUE, mode="dense")
    h = res["retrieval_meta"]["hyde"]
    assert h["used"] is True and h["passages"] == 3 and h["calls"] == 1
    assert len(server.requests) == 1 and "3 different short passages" in str(server.requests[0])


def test_hybrid_mode_uses_it_too_and_keyword_mode_never_calls(world, server):
    plain = search(world, None, VAGUE)
    res = search(world, hyde(world[0], server, "anthropic"), VAGUE)
    assert res["retrieval_meta"]["hyde"]["used"] is True

    def ribo_sim(r):
        return next(h["sim"] for h in r["results"] if h["source_file"].endswith("ribo.txt"))

    assert ribo_sim(res) > ribo_sim(plain) + 0.2
    server.requests.clear()
    kw = search(world, hyde(world[0], server, "anthropic"), VAGUE, mode="keyword")
    assert "hyde" not in kw["retrieval_meta"] and server.requests == []


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("failure", [{"status": 500}, {"status": 401}, "missing_model", "stall"])
def test_a_failing_provider_falls_back_to_the_plain_vector(world, server, provider, failure):
    plain = search(world, None, VAGUE, mode="dense")
    model = "test-model"
    if failure == "missing_model":
        model = "no-such-model"
    elif failure == "stall":
        server.push({"stall": True})
    else:
        server.push(failure)
    hy = hyde(world[0], server, provider, model=model, timeout_s=1.0 if failure == "stall" else 10.0)
    res = search(world, hy, VAGUE, mode="dense")
    h = res["retrieval_meta"]["hyde"]
    assert h["used"] is False and h["error"] and h["error_code"], h
    assert [x["embedding_id"] for x in res["results"]] == [x["embedding_id"] for x in plain["results"]]
    assert [x["sim"] for x in res["results"]] == [x["sim"] for x in plain["results"]]


def test_a_reply_without_a_passage_falls_back(world, server):
    server.reply = lambda provider, messages: "---\n\n---"
    h = search(world, hyde(world[0], server, "ollama"), VAGUE, mode="dense")["retrieval_meta"]["hyde"]
    assert h["used"] is False and h["error_code"] == "hyde_bad_output"


def test_split_passages():
    assert split_passages("Passage 1: one two.\nPassage 2: three four.", 5) == ["one two.", "three four."]
    assert split_passages("a b c\n---\nd e f\n---\ng h i", 2) == ["a b c", "d e f"]
    assert split_passages("just one passage\nover two lines", 3) == ["just one passage over two lines"]


def test_config_off_by_default_and_a_bad_spec_is_a_config_error(world):
    cfg = world[0]
    assert make_hyde(cfg) is None
    good = load_config(text="[llm]\nhyde = 'ollama:llama3.2'\nhyde_passages = 2\n", env={})
    hy = make_hyde(good)
    assert hy is not None and (hy.provider, hy.model, hy.passages, hy.gate) == ("ollama", "llama3.2", 2, 0.5)
    with pytest.raises(ConfigError, match="llm.hyde"):
        make_hyde(load_config(text="[llm]\nhyde = 'nonsense'\n", env={}))
    with pytest.raises(ConfigError, match="hyde_passages"):
        load_config(text="[llm]\nhyde_passages = 0\n", env={})


def test_a_fallen_back_search_is_not_cached_so_the_next_one_tries_again(world, server):
    cfg, paths, emb = world
    import dataclasses

    cached = dataclasses.replace(cfg, search_cache_size=16)
    svc = Services(cached, paths, embedder=emb, disk_indexes=DiskIndexes(cached, paths), reranker=None,
                   hyde=hyde(cfg, server, "openai"))
    try:
        server.push({"status": 500})
        first = svc.search(VAGUE, None, 4, mode="dense")
        assert first["retrieval_meta"]["hyde"]["error"] and first["retrieval_meta"]["cache"]["hit"] is False
        second = svc.search(VAGUE, None, 4, mode="dense")
        assert second["retrieval_meta"]["cache"]["hit"] is False and second["retrieval_meta"]["hyde"]["used"]
        third = svc.search(VAGUE, None, 4, mode="dense")
        assert third["retrieval_meta"]["cache"]["hit"] is True and len(server.requests) == 2
        # the hit called nothing: zero cost, the stored search's own kept apart
        stored, served = second["retrieval_meta"]["hyde"], third["retrieval_meta"]["hyde"]
        assert stored["calls"] == 1 and stored["input_tokens"] > 0
        assert served == {"used": True, "gate": stored["gate"], "best_score": stored["best_score"],
                          "best_score_after": stored["best_score_after"], "provider": stored["provider"],
                          "model": stored["model"], "calls": 0, "input_tokens": 0, "output_tokens": 0, "ms": 0,
                          "cached_from": stored}
    finally:
        svc.close()


def test_from_an_event_loop_the_call_runs_on_that_loop_while_the_search_thread_waits(world, server):
    import asyncio
    import threading

    cfg, paths, emb = world
    hy = hyde(cfg, server, "openai", gate=0.5)
    made_on = []
    inner = hy._make

    def make():
        made_on.append(threading.current_thread())
        return inner()

    hy._make = make

    async def run():
        svc = Services(cfg, paths, embedder=emb, disk_indexes=DiskIndexes(cfg, paths), reranker=None, hyde=hy)
        try:
            return await svc.search_async(VAGUE, None, 4, mode="dense")
        finally:
            svc.close()

    res = asyncio.run(run())
    h = res["retrieval_meta"]["hyde"]
    assert h["used"] is True and h["calls"] == 1 and len(server.requests) == 1
    assert made_on == [threading.main_thread()]  # the loop's thread, not the search's worker thread
    assert top_file(res) == "ribo.txt"


def test_asked_on_its_own_event_loop_the_blocking_call_refuses_instead_of_hanging(world, server):
    import asyncio

    from ragweedd.errors import InternalError

    hy = hyde(world[0], server, "openai")

    async def on_the_loop():
        with pytest.raises(InternalError, match="worker thread"):
            hy.write(VAGUE, asyncio.get_running_loop())

    asyncio.run(on_the_loop())
    assert server.requests == []

"""Tree mode of ask through each provider's official SDK (aiohttp for Ollama) against the local
wire-protocol server, on a real collection: a PDF with an outline and a markdown file ingested by
the real pipeline. The router picks the right document, the opened section's pages are what the
answer cites, the history keeps the steps, and output the tree cannot use (garbage, ids that do not
exist) falls back to ordinary retrieval and says so."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import re
from pathlib import Path

import pytest

from ragweedd.answer.tree_ask import PickError, parse_pick, tree_answer  # noqa: E402
from ragweedd.cli.ask import print_sources  # noqa: E402
from ragweedd.errors import RequestError  # noqa: E402
from ragweedd.services import Services  # noqa: E402
from tests.hashed_world import (  # noqa: E402
    hashed_collection,  # noqa: E402
    llm_server_fixtures,
    provider_for,
)
from tests.unit.test_pdf_structure import _outline_pdf  # noqa: E402

PROVIDERS = ["anthropic", "openai", "gemini", "ollama"]
MARKDOWN = """# Garden Handbook

Notes on keeping the community garden.

## Watering

""" + "Tomatoes need deep watering twice a week in July, early in the morning before the heat. " * 4 + """

## Compost

""" + "The compost heap is turned every fortnight and kept as damp as a wrung sponge all year. " * 4 + "\n"
QUESTION = "How did the segment revenue of the delta division develop?"
ANSWER = "The delta division reported steady results and is expected to keep growing [1]."


def _id_of(prompt: str, pattern: str) -> str | None:
    m = re.search(r"\[(D\d+(?:\.\d+)?)\][^\n]*" + pattern, prompt)
    return m.group(1) if m else None


def reply(provider, messages):
    prompt = messages[-1]["content"]
    if prompt.startswith("You choose which documents"):
        want = "garden" if "compost" in prompt.split("Question:")[1].lower() else "outline.pdf"
        return f'Sure. {{"documents": ["{_id_of(prompt, want)}"]}}'
    if prompt.startswith("You choose which sections"):
        want = "Compost" if "compost" in prompt.split("Question:")[1].lower() else "Segment Revenue"
        return f'```json\n{{"sections": ["{_id_of(prompt, want)}"]}}\n```'
    if prompt.startswith("Summarise the following section"):
        title = re.search(r"^Section: (.*)$", prompt, re.M).group(1)
        return f"LLM summary of {title}."
    if "compost" in prompt.lower() and "Question" not in prompt:
        return "The heap is turned every fortnight [1]."
    return ANSWER


server, _clean = llm_server_fixtures(reply)


@pytest.fixture(scope="module")
def world(tmp_path_factory, server):
    cfg, paths, emb = hashed_collection(tmp_path_factory.mktemp("tree"),
                                        {"outline.pdf": _outline_pdf, "garden.md": MARKDOWN},
                                        top="chunk_size = 64\nsearch_cache_size = 0", llm=server)
    services = Services(cfg, paths, embedder=emb, reranker=None, hyde=None)
    yield cfg, services
    services.close()


def provider(server, name):
    return provider_for(server, name)


def run(world, server, name, question=QUESTION, summarizer=None):
    cfg, services = world

    async def go():
        syn = provider(server, name)
        summ = provider(server, summarizer) if summarizer else None
        try:
            res = await services.search_async(question, None, 5)
            scope = services.tree_scope(None, "tree")
            return [e async for e in tree_answer(question, dict(res), cfg, scope, synthesizer=syn,
                                                 summarizer=summ)]
        finally:
            await syn.aclose()
            if summ is not None:
                await summ.aclose()

    return asyncio.run(go())[-1]


@pytest.mark.parametrize("name", PROVIDERS)
def test_routes_to_the_pdf_and_cites_the_opened_sections_pages(world, server, name):
    done = run(world, server, name)
    tree = done["tree"]
    assert tree["fallback"] is None
    assert [Path(d["source_file"]).name for d in tree["documents"]] == ["outline.pdf"]
    assert tree["documents"][0]["structured"] is True and tree["candidates"] == 2
    [sec] = tree["sections"]
    assert sec["title"] == "Segment Revenue" and sec["path"] == ["Results of Operations", "Segment Revenue"]
    # the section starts on page 2; its last chunk runs on to where the next heading's text starts
    assert sec["pages"] == [2, 3]
    # the answer's sources are the opened section's chunks, which open at page 2
    labels = [s["page_label"] for s in done["sources"]]
    assert len(labels) == sec["chunks"] >= 3 and set(labels) == {"2", "2-3"}
    assert all(s["uri"].endswith("#page=2") and "delta" in s["text"] for s in done["sources"][:-1])
    assert not any("gamma" in s["text"] or "alpha" in s["text"] for s in done["sources"])
    assert done["cited_numbers"] == [1] and done["cited"][0]["uri"].endswith("outline.pdf#page=2")
    # route, select, answer: three requests, all counted
    prompts = [r for r in server.requests]
    assert len(prompts) == 3 and done["llm_calls"] == 3 and tree["calls"] == 2
    out = io.StringIO()
    print_sources(done, out)
    assert "Tree mode: 1 of 2 documents chosen" in out.getvalue()
    assert "D" in out.getvalue() and "Results of Operations > Segment Revenue  (pp. 2-3)" in out.getvalue()


def test_the_router_reads_both_documents_and_the_markdown_outline(world, server):
    done = run(world, server, "openai", question="How often is the compost heap turned?")
    tree = done["tree"]
    assert [Path(d["source_file"]).name for d in tree["documents"]] == ["garden.md"]
    [sec] = tree["sections"]
    assert sec["title"] == "Compost" and sec["path"][-1] == "Compost" and sec["pages"] is None
    assert all("compost" in s["text"].lower() for s in done["sources"])
    route = next(r for r in server.requests if "You choose which documents" in str(r))
    assert "outline.pdf" in str(route) and "garden.md" in str(route)


def test_llm_summaries_are_written_once_and_cached(world, server):
    done = run(world, server, "openai", summarizer="anthropic")
    first = done["tree"]["summaries"]
    assert first["calls"] > 0 and first["errors"] == 0 and first["provider"] == "anthropic:test-model"
    select = next(r for r in server.requests if "You choose which sections" in str(r))
    assert "LLM summary of Segment Revenue." in str(select)
    server.requests.clear()
    done = run(world, server, "openai", summarizer="anthropic")
    again = done["tree"]["summaries"]
    assert again["calls"] == 0 and again["cached"] == first["calls"] + first["cached"]
    assert len(server.requests) == 3


@pytest.mark.parametrize("bad, stage", [
    ("I think the first one.", "route"),          # no JSON at all
    ('{"documents": "D1"', "route"),              # JSON that does not parse
    ('{"documents": ["D9"]}', "route"),           # a document that does not exist
])
def test_unusable_routing_falls_back_to_ordinary_retrieval(world, server, bad, stage):
    server.push({"text": bad})
    done = run(world, server, "gemini")
    tree = done["tree"]
    assert tree["fallback"]["stage"] == stage and tree["documents"] == [] and tree["sections"] == []
    # answered from the search's hits, which come from both documents
    assert done["mode"] == "llm" and done["answer"]
    assert {Path(x["source_file"]).name for x in done["sources"]} == {"outline.pdf", "garden.md"}


def test_a_section_that_does_not_exist_falls_back(world, server):
    server.push({"text": '{"documents": ["D1", "D2"]}'}, {"text": '{"sections": ["D1.99", "D7.1"]}'})
    done = run(world, server, "ollama")
    fb = done["tree"]["fallback"]
    assert fb["stage"] == "select" and "D1.99" in fb["reason"]
    assert len(done["tree"]["documents"]) == 2 and done["sources"]


def test_parse_pick():
    known = {"D1", "D1.2", "D2.1"}
    assert parse_pick('x {"sections": ["d1.2", "[D2.1]", "D1.2", "D3"]} y', "sections", known, 5) == ["D1.2", "D2.1"]
    assert parse_pick('{"sections": ["D1", "D1.2"]}', "sections", known, 1) == ["D1"]
    for bad in ("", "no json", '{"sections": []}', '{"other": ["D1"]}', "[1, 2]"):
        with pytest.raises(PickError):
            parse_pick(bad, "sections", known, 3)
    # an empty pick says so, rather than listing the ids that do not exist as "[]"
    with pytest.raises(PickError, match=r"^the model picked no section \(its reply") as e:
        parse_pick('{"sections": []}', "sections", known, 3)
    assert "[]" not in str(e.value).split("(")[0]
    with pytest.raises(PickError, match="the model picked no document"):
        parse_pick('{"documents": []}', "documents", known, 3)
    with pytest.raises(PickError, match=r"none of the ids picked exists: \['D9'\]"):
        parse_pick('{"documents": ["D9"]}', "documents", known, 3)


def test_history_keeps_the_steps(world, server):
    cfg, services = world

    async def go():
        res = await services.search_async(QUESTION, None, 5)
        events = await services.ask_flow.ask(QUESTION, res, tree=services.tree_scope(None, "tree"))
        return [e async for e in events][-1]

    done = asyncio.run(go())
    entry = services.history.show(done["history_id"])
    assert entry["status"] == "done" and entry["tree"]["sections"][0]["pages"] == [2, 3]
    assert entry["tree"]["documents"][0]["title"] and entry["continuable"] is False


def test_without_an_llm_tree_mode_is_a_clear_error_and_records_nothing(world):
    cfg, services = world
    flow_cfg = dataclasses.replace(cfg, llm_synthesis="")
    before = services.history.list(0, 1000)["total"]
    from ragweedd.answer.ask_flow import AskFlow

    flow = AskFlow(flow_cfg, services.history)

    async def go():
        res = await services.search_async(QUESTION, None, 5)
        return await flow.ask(QUESTION, res, tree=services.tree_scope(None, "tree"))

    with pytest.raises(RequestError, match="needs an LLM") as e:
        asyncio.run(go())
    assert "synthesis" in e.value.hint
    assert services.history.list(0, 1000)["total"] == before
    with pytest.raises(RequestError, match="ask mode 'trees' does not exist"):
        services.tree_scope(None, "trees")


def test_ragweedd_ask_mode_tree_prints_the_steps(world):
    import argparse

    from ragweedd.cli.ask import run as ask_run

    cfg, _ = world
    args = argparse.Namespace(query=QUESTION.split(), collection=None, limit=5, continue_id=None, json=False,
                              tree="tree")
    out, err = io.StringIO(), io.StringIO()
    assert ask_run(cfg, args, out, err) == 0
    text = out.getvalue()
    assert text.startswith(ANSWER) and "#page=2" in text
    assert "Tree mode: 1 of 2 documents chosen (Company Overview); sections opened:" in text
    assert "D1.4 Results of Operations > Segment Revenue  (pp. 2-3)" in text or "Segment Revenue  (pp. 2-3)" in text
    with pytest.raises(RequestError, match="needs an LLM"):
        ask_run(dataclasses.replace(cfg, llm_synthesis=""), args, out, err)


def test_many_documents_offer_only_those_the_search_found(world, server):
    cfg, services = world
    few = dataclasses.replace(cfg, tree_documents_shown=1)

    async def go():
        syn = provider(server, "openai")
        try:
            res = await services.search_async(QUESTION, None, 5)
            evs = [e async for e in tree_answer(QUESTION, dict(res), few, services.tree_scope(None, "tree"),
                                                synthesizer=syn)]
            return res, evs[-1]
        finally:
            await syn.aclose()

    res, done = asyncio.run(go())
    tree = done["tree"]
    assert tree["documents_total"] == 2 and tree["candidates"] == 1
    # the search's best document is the one candidate: chosen without a routing call
    assert tree["documents"][0]["doc_id"] == res["results"][0]["doc_id"]
    assert not any("You choose which documents" in str(r) for r in server.requests)
    assert tree["calls"] == 1

"""Tree mode reads every section it opens: the context's token budget is shared across the opened
sections (a long first section must not crowd out the second), a long section gives its chunks
most relevant to the question, and what did not fit is recorded and printed. Also the filters of
ask (type, path, document) bound the documents tree mode offers. Real pipeline, real SQLite, the
local wire-protocol LLM server through the official OpenAI SDK."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest

from ragweedd.answer.tree_ask import tree_answer  # noqa: E402
from ragweedd.cli.ask import print_sources  # noqa: E402
from ragweedd.services import Services  # noqa: E402
from tests.fakes.llm_server import FakeLLMServer  # noqa: E402
from tests.hashed_world import hashed_collection  # noqa: E402

QUESTION = "What valuation allowance was recorded against deferred tax assets?"
FILLER = ("Management reviewed the {w} figures of the quarter with the audit committee and found them "
          "consistent with the plan for the year. ")


def _long_pdf(path: Path) -> Path:
    """Two long top-level sections of four pages each; page 7 (in the second) holds the answer."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title("Annual Report")
    page = 0
    for title, word in (("Revenue Recognition", "revenue"), ("Income Taxes", "tax")):
        for i in range(4):
            pdf.add_page()
            page += 1
            if i == 0:
                pdf.start_section(title, level=0)
                pdf.set_font("Helvetica", "B", 12)
                pdf.cell(0, 8, title, new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("Helvetica", size=11)
            body = FILLER.format(w=word) * 6
            if page == 7:
                body += ("The valuation allowance against deferred tax assets was 42 million dollars at year "
                         "end. ")
            pdf.multi_cell(0, 6, body)
    pdf.output(str(path))
    return path


def reply(provider, messages):
    prompt = messages[-1]["content"]
    if prompt.startswith("You choose which documents"):
        want = "report.pdf" if "valuation" in prompt.split("Question:")[1] else "notes.md"
        return '{"documents": ["%s"]}' % re.search(r"\[(D\d+)\][^\n]*" + want, prompt).group(1)
    if prompt.startswith("You choose which sections"):
        ids = re.findall(r"\[(D\d+\.\d+)\] (?:Revenue Recognition|Income Taxes|Notes)", prompt)
        return '{"sections": %s}' % str(ids).replace("'", '"')
    # the answer cites the source that holds the figure, if the context has it
    for n, block in re.findall(r"^\[(\d+)\] SOURCE:(.*?)(?=^\[\d+\] SOURCE:|\Z)", prompt, re.M | re.S):
        if "valuation allowance against" in block:
            return f"The allowance was 42 million dollars [{n}]."
    return "Not in the sources."


@pytest.fixture(scope="module")
def server():
    with FakeLLMServer(models=("test-model",), reply=reply) as srv:
        yield srv


@pytest.fixture(scope="module")
def world(tmp_path_factory, server):
    notes = "# Notes\n\n" + "The valuation of the garden shed is modest. " * 5
    cfg, paths, emb = hashed_collection(tmp_path_factory.mktemp("treebudget"),
                                        {"report.pdf": _long_pdf, "sub/notes.md": notes},
                                        top="chunk_size = 48\nsearch_cache_size = 0", llm=server)
    services = Services(cfg, paths, embedder=emb, reranker=None, hyde=None)
    yield cfg, services
    services.close()


def run(world, server, cfg=None, question=QUESTION, **filters):
    base, services = world

    async def go():
        res = await services.search_async(question, None, 5)
        scope = services.tree_scope(None, "tree", **filters)
        return [e async for e in tree_answer(question, dict(res), cfg or base, scope, synthesizer=None)]

    return asyncio.run(go())[-1]


def test_every_opened_section_is_read_and_the_second_sections_page_is_cited(world, server):
    import dataclasses

    cfg, _ = world
    # a budget of about 16 chunks: less than the two sections hold together
    small = dataclasses.replace(cfg, llm_context_tokens=cfg.max_tokens + 1300)
    done = run(world, server, small)
    tree = done["tree"]
    assert tree["fallback"] is None
    first, second = tree["sections"]
    assert first["title"] == "Revenue Recognition" and second["title"] == "Income Taxes"
    assert first["chunks"] > 12 and second["chunks"] > 12
    pages = {int(s["page_label"].split("-")[0]) for s in done["sources"]}
    assert pages & {1, 2, 3, 4} and pages & {5, 6, 7, 8}, pages
    # the chunk that answers is chosen among the second section's by relevance, and cited
    assert any("valuation allowance against" in s["text"] for s in done["sources"])
    assert done["cited_numbers"] and done["cited"][0]["uri"].endswith("#page=7")
    # what did not fit is recorded and printed
    assert first["chunks_left_out"] > 0 and second["chunks_left_out"] > 0
    assert first["chunks_read"] + second["chunks_read"] == len(done["sources"])
    out = io.StringIO()
    print_sources(done, out)
    assert f"read {second['chunks_read']} of {second['chunks']} chunks, the rest did not fit" in out.getvalue()


def test_a_roomy_budget_reads_both_sections_whole(world, server):
    done = run(world, server)
    tree = done["tree"]
    assert sum(s["chunks"] for s in tree["sections"]) == len(done["sources"]) > 24
    assert all(s["chunks_left_out"] == 0 for s in tree["sections"])
    assert done["cited"][0]["uri"].endswith("#page=7")


@pytest.mark.parametrize("filters", [{"path_glob": "*/sub/*"}, {"file_type": "md"}, {"doc_id": "NOTES"}])
def test_the_asks_filters_bound_the_documents_offered(world, server, filters):
    _, services = world
    if filters.get("doc_id") == "NOTES":
        rag = services.stores.open_rag("lab", readonly=True)
        try:
            from ragweedd.store.sqlite import tree_db

            filters = {"doc_id": next(d["md5"] for d in tree_db.documents(rag) if d["source_file"].endswith(".md"))}
        finally:
            rag.close()
    server.requests.clear()
    done = run(world, server, **filters)
    tree = done["tree"]
    assert tree["documents_total"] == tree["candidates"] == 1
    assert [Path(d["source_file"]).name for d in tree["documents"]] == ["notes.md"]
    assert all(s["source_file"].endswith("notes.md") for s in done["sources"])
    assert not any("You choose which documents" in str(r) for r in server.requests)


def test_without_filters_both_documents_are_offered(world, server):
    server.requests.clear()
    done = run(world, server)
    assert done["tree"]["candidates"] == 2
    assert any("You choose which documents" in str(r) for r in server.requests)

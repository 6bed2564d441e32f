"""A question that names a financial statement finds that statement in the document it is about
(query/statements.py), on a real collection: HTML filings extracted with their tables, the real
pipeline, SQLite and FTS5."""

from __future__ import annotations

import pytest

from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.paths import Paths
from ragweedd.query.hybrid import one_shot_search
from ragweedd.query.statements import headed_statements, named_statements

PROSE = ("<p>{co} discusses capital expenditures at length: capital expenditures in 2023 went to new plants, "
         "and management expects capital expenditures to stay at this level.</p>")


def _filing(co: str, capex: str) -> str:
    notes = "".join(f"<h2>Note {i}</h2>" + PROSE.format(co=co) * 3 for i in range(1, 7))
    return (f"<html><body><h1>{co} annual report 2023</h1><h2>Liquidity</h2>{PROSE.format(co=co) * 4}"
            f"<h2>Consolidated Statements of Cash Flows</h2><table>"
            f"<tr><th></th><th>2023</th><th>2022</th></tr>"
            f"<tr><td>Net cash provided by operating activities</td><td>5,100</td><td>4,800</td></tr>"
            f"<tr><td>Purchases of property and equipment</td><td>({capex})</td><td>(1,100)</td></tr>"
            f"</table>{notes}</body></html>")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("statements")
    text = (f'data_dir = "{tmp}/data"\nstate_dir = "{tmp}/state"\ncache_dir = "{tmp}/cache"\n'
            "chunk_size = 64\n[embed]\nmodel = 'hash:64'\n")
    cfg = load_config(text=text, env={})
    paths = Paths.from_config(cfg).ensure()
    emb = HashEmbedder(64)
    pipe = Pipeline(cfg, paths, emb)
    root = tmp / "src"
    root.mkdir()
    for name, co, capex in (("acme_10k.html", "Acme", "1,234"), ("beta_10k.html", "Beta", "9,876")):
        (root / name).write_text(_filing(co, capex), encoding="utf-8")
        assert pipe.ingest_file("filings", root / name, root).status == "indexed"
    pipe.close()
    return cfg, paths, emb


def test_statement_names_as_questions_and_headings_say_them():
    assert named_statements("What is the FY2018 capex? Use the cash flow statement.") == {"cash"}
    assert named_statements("Based on the balance sheet and the income statement") == {"balance", "income"}
    assert named_statements("statement of financial position") == {"balance"}
    assert named_statements("How did cash flow from operations change?") == set()
    assert headed_statements("CONSOLIDATED STATEMENTS OF OPERATIONS (In millions)") == {"income"}
    assert headed_statements("Consolidated Balance Sheets") == {"balance"}
    assert headed_statements("Consolidated Statements of Cash Flows") == {"cash"}
    assert headed_statements("Liquidity and Capital Resources") == set()


def test_a_question_naming_the_statement_is_answered_from_it(world):
    cfg, paths, emb = world
    q = "How much did Acme spend on capital expenditures in 2023?"
    plain = one_shot_search(cfg, paths, emb, q, top_k=10)
    assert plain["retrieval_meta"]["statements"] is None
    # the prose that repeats the question's words comes first: the statement says "Purchases of
    # property and equipment"
    assert "(1,234)" not in plain["results"][0]["text"]
    named = one_shot_search(cfg, paths, emb, q + " Use the cash flow statement.", top_k=10)
    meta = named["retrieval_meta"]["statements"]
    assert meta["statements"] == ["cash"]
    top = named["results"][0]
    assert top["filename"] == "acme_10k.html" and "(1,234)" in top["text"], top
    assert "Statements of Cash Flows" in (top["table_title"] or "")
    # only the document the question is about gives chunks the search had not found
    pulled_from = {h["filename"] for h in named["results"] if h["sim"] is None and h["bm25"] is None}
    assert pulled_from <= {"acme_10k.html"}


def test_filters_hold_for_the_statement_chunks(world):
    cfg, paths, emb = world
    from ragweedd.query.filters import Filters

    res = one_shot_search(cfg, paths, emb, "Acme capital expenditures, using the cash flow statement",
                          top_k=10, filters=Filters.make(path_glob="*beta*"))
    assert res["results"] and {h["filename"] for h in res["results"]} == {"beta_10k.html"}
    assert "(9,876)" in res["results"][0]["text"]

"""A question that names a financial statement finds that statement in the document it is about
(query/named.py), on a real collection: HTML filings extracted with their tables, the real
pipeline, SQLite and FTS5."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.paths import Paths
from ragweedd.query.named import named_years, years_of_name
from ragweedd.statements import headed_statements, named_statements
from ragweedd.store.backends import open_data_dir
from tests.query_support import one_shot_search

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


def _index(tmp: Path, files: dict[str, str]):
    """A collection "filings" of ``files`` (name -> text), ingested through the real pipeline;
    returns (cfg, paths, embedder)."""
    text = (f'data_dir = "{tmp}/data"\nstate_dir = "{tmp}/state"\ncache_dir = "{tmp}/cache"\n'
            "chunk_size = 64\n[embed]\nmodel = 'hash:64'\n")
    cfg = load_config(text=text, env={})
    paths = Paths.from_config(cfg).ensure()
    emb = HashEmbedder(64)
    pipe = Pipeline(cfg, paths, emb, stores=open_data_dir(paths))
    root = tmp / "src"
    root.mkdir()
    for name, body in files.items():
        (root / name).write_text(body, encoding="utf-8")
        assert pipe.ingest_file("filings", root / name, root).status == "indexed"
    pipe.close()
    return cfg, paths, emb


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    return _index(tmp_path_factory.mktemp("statements"),
                  {"acme_10k.html": _filing("Acme", "1,234"), "beta_10k.html": _filing("Beta", "9,876")})


def test_statement_names_as_questions_and_headings_say_them():
    assert named_statements("What is the FY2018 capex? Use the cash flow statement.") == {"cash"}
    assert named_statements("Based on the balance sheet and the income statement") == {"balance", "income"}
    assert named_statements("statement of financial position") == {"balance"}
    assert named_statements("How did cash flow from operations change?") == set()
    assert headed_statements("CONSOLIDATED STATEMENTS OF OPERATIONS (In millions)") == {"income"}
    assert headed_statements("Consolidated Balance Sheets") == {"balance"}
    assert headed_statements("Consolidated Statements of Cash Flows") == {"cash"}
    assert headed_statements("Liquidity and Capital Resources") == set()
    assert headed_statements("The Boeing Company and Subsidiaries Consolidated Statements of Financial Position") == \
        {"balance"}
    # a note or a sentence that mentions a statement is not it
    assert headed_statements("Supplemental balance sheet information related to leases") == set()
    assert headed_statements("Costs are classified in our Consolidated Statements of Earnings as follows") == set()
    assert named_years("FY2018 vs Q2'23, and 2020?") == {"2018", "2023", "2020"}
    assert named_years("3M reported 12,645 million") == set()
    assert years_of_name("/filings/BOEING_2018_10K.pdf") == {"2018"}
    assert years_of_name("/notes/2021/minutes-03.md") == {"2021"}
    assert years_of_name("/scans/IMG_20180312.jpg") == set()  # a date stamp's digits run on


def test_a_question_naming_the_statement_is_answered_from_it(world):
    cfg, paths, emb = world
    q = "How much did Acme spend on capital expenditures in 2023?"
    plain = one_shot_search(cfg, paths, emb, q, top_k=10)
    assert plain["retrieval_meta"]["named"]["statements"] == []  # it names a year, not a statement
    # the prose that repeats the question's words comes first: the statement says "Purchases of
    # property and equipment"
    assert "(1,234)" not in plain["results"][0]["text"]
    named = one_shot_search(cfg, paths, emb, q + " Use the cash flow statement.", top_k=10)
    meta = named["retrieval_meta"]["named"]
    assert meta["statements"] == ["cash"] and meta["years"] == ["2023"]
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


def test_the_filing_of_the_year_asked_comes_first(tmp_path):
    """Two years' filings of one company say the same things; the question's year picks the file
    named for it, and a question without a year is ranked by the fusion alone."""
    body = "Gamma's revenue grew in 2019 and 2018 as the new plant opened; revenue rose again."
    # the two files differ in one word: their chunks are not one document
    cfg, paths, emb = _index(tmp_path, {f"GAMMA_{year}_10K.txt": body + f" Filed for {year}."
                                        for year in ("2018", "2019")})
    for year in ("2018", "2019"):
        res = one_shot_search(cfg, paths, emb, f"How did Gamma's revenue change in FY{year}?", top_k=2)
        assert res["results"][0]["filename"] == f"GAMMA_{year}_10K.txt", res["results"]
        assert res["retrieval_meta"]["named"]["in_year"] >= 1
    res = one_shot_search(cfg, paths, emb, "How did Gamma's revenue change?", top_k=2)
    assert res["retrieval_meta"]["named"] is None

"""Tables end to end: a .docx written by python-docx, an .odt written by odfpy and an HTML page,
indexed by a real daemon (hash embedder). A question "what is <row> in <column>" finds the chunk
that holds the row label, the column header and the cell together; /v1/search hits and /v1/ask
sources say which table and which rows, and ``ragweedctl search`` prints "table 1, rows 3-6"."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.system.conftest import ROOT, Daemon, serving, wait_indexed
from tests.unit.test_extract_tables import CASH, HTML, make_docx, make_odt


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    base = tmp_path_factory.mktemp("tables")
    docs = base / "docs"
    docs.mkdir()
    make_docx(docs / "cash.docx")
    make_odt(docs / "harvest.odt")
    (docs / "fleet.html").write_text(HTML)
    with serving(Daemon(base / "d", {"tables": [docs]})) as dm:
        wait_indexed(dm, "tables", 3)
        dm.wait_idle()
        yield dm


def _top(d: Daemon, query: str, filename: str) -> dict:
    hits = [h for h in d.search(query, collections=["tables"]) if h["filename"] == filename]
    assert hits, query
    return hits[0]


@pytest.mark.parametrize("query, filename, label, cell, table, rows", [
    (f"what is {CASH} in 2014", "cash.docx", f"{CASH} | Year ended December 31 2015: 1,469.5",
     "Year ended December 31 2014: 1,287.5", 1, [3, 6]),
    ("what is the Cox yield in Autumn", "harvest.odt", "Cox", "Season Autumn: 19.4", 1, [3, 4]),
    ("what is York in H2 2023", "fleet.html", "York", "Half year H2 2023: $75", 1, [3, 6]),
])
def test_a_row_and_column_question_finds_the_cell_with_its_headers(d, query, filename, label, cell, table, rows):
    hit = _top(d, query, filename)
    line = next(ln for ln in hit["text"].split("\n") if ln.startswith(label))
    assert cell in line, hit["text"]
    assert hit["table"] == table and hit["rows"] == rows and hit["sheet"] is None, hit
    assert hit["table_title"]


def test_ask_quotes_the_row_and_its_source_says_table_and_rows(d):
    r = d.api("POST", "/v1/ask", json={"query": f"what is {CASH} in 2014", "stream": False,
                                       "collections": ["tables"]})
    assert r.status_code == 200, r.text
    # without an LLM the answer quotes the row, which says its label, its column and the cell
    assert f"{CASH} | Year ended December 31 2015: 1,469.5 | Year ended December 31 2014: 1,287.5" \
        in r.json()["answer"], r.json()["answer"]
    src = next(s for s in r.json()["sources"] if s["filename"] == "cash.docx")
    assert src["table"] == 1 and src["rows"] == [3, 6], src
    assert src["table_title"] == "Consolidated Statements of Cash Flows (in millions)"


def test_ragweedctl_search_prints_table_and_rows(d):
    env = {**os.environ, "RAGWEED_STATE_DIR": str(d.base / "state"), "RAGWEED_EMBED_MODEL": "hash:64"}
    p = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "search", "-c", "tables",
                        "Bramley yield in Spring"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if "harvest.odt" in ln)
    assert "table 1, rows 3-4" in line, p.stdout

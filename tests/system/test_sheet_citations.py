"""Spreadsheet citations end to end: an .xlsx written by openpyxl and a .csv, indexed by a real
daemon (hash embedder), found by /v1/search and cited by /v1/ask, carry their sheet and the exact
1-based rows the passage holds; ``ragweedctl search``, ``ragweedctl ask`` and the one-shot
``ragweedd search`` print them ("sheet Costs, rows 1-3")."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.system.conftest import ROOT, Daemon, serving, wait_indexed

# Rows 2-61 of sheet "Q3" name themselves ("row17 | Region: Region 17 | ..." under the header row),
# so a passage's rows can be read off its text;
# one row holds a word found nowhere else. Sheet "Costs" has an empty row 2.
RARE_ROW = 47


def _workbook(path: Path) -> None:
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Q3"
    ws.append(["Label", "Region", "Revenue", "Comment"])
    for n in range(2, 62):
        note = "quetzal feathers imported" if n == RARE_ROW else "steady quarter in the region"
        ws.append([f"row{n}", f"Region {n}", n * 100, note])
    costs = wb.create_sheet("Costs")
    costs.append(["Item", "Cost"])
    costs.append([None, None])  # an empty row: left out, and the numbering goes on past it
    costs.append(["zeppelin hangar rent", 999])
    wb.save(path)


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    base = tmp_path_factory.mktemp("sheets")
    docs = base / "docs"
    docs.mkdir()
    _workbook(docs / "book.xlsx")
    (docs / "animals.csv").write_text("name,count\nalpaca,3\nbadger,5\nquokka habitat,7\nwombat,2\n")
    with serving(Daemon(base / "d", {"sheets": [docs]})) as dm:
        wait_indexed(dm, "sheets", 2)
        dm.wait_idle()
        yield dm


def _rows_in_text(text: str) -> list[int]:
    """The rows of sheet Q3 a passage holds: the first line may be the tail of a row (a chunk may
    start inside a line), whose number is the next full row's less one."""
    lines = text.split("\n")
    full = [int(m.group(1)) for ln in lines if (m := re.match(r"row(\d+) \|", ln))]
    first = full[0] if re.match(r"row\d+ \|", lines[0]) else full[0] - 1
    return [first, full[-1]]


def _top(d: Daemon, query: str, filename: str) -> dict:
    hits = [h for h in d.search(query, collections=["sheets"]) if h["filename"] == filename]
    assert hits, query
    return hits[0]


def test_search_hits_carry_sheet_and_exact_rows(d):
    hit = _top(d, "zeppelin hangar rent", "book.xlsx")
    assert hit["sheet"] == "Costs" and hit["rows"] == [1, 3], hit
    assert "Region" not in hit["text"]  # a passage never runs from one sheet into the next
    hit = _top(d, "quetzal feathers imported", "book.xlsx")
    assert hit["sheet"] == "Q3" and "quetzal" in hit["text"]
    assert hit["rows"] == _rows_in_text(hit["text"]), (hit["rows"], hit["text"][:200])
    assert hit["rows"][0] <= RARE_ROW <= hit["rows"][1] and hit["rows"][0] > 1
    hit = _top(d, "quokka habitat", "animals.csv")
    # records: 1 is the header, which heads each value of rows 2-5 and is no line of its own
    assert hit["sheet"] is None and hit["rows"] == [2, 5], hit
    assert "quokka habitat | count: 7" in hit["text"], hit["text"]


def test_ask_sources_carry_sheet_and_rows(d):
    r = d.api("POST", "/v1/ask", json={"query": "zeppelin hangar rent", "stream": False,
                                       "collections": ["sheets"]})
    assert r.status_code == 200, r.text
    src = next(s for s in r.json()["sources"] if s["filename"] == "book.xlsx")
    assert src["sheet"] == "Costs" and src["rows"] == [1, 3], src


def test_the_command_lines_print_sheet_and_rows(d):
    env = {**os.environ, "RAGWEED_STATE_DIR": str(d.base / "state"), "RAGWEED_EMBED_MODEL": "hash:64"}
    ctl = [sys.executable, "-m", "ragweedd.cli.ctl"]
    p = subprocess.run(ctl + ["search", "-c", "sheets", "zeppelin hangar rent"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if "book.xlsx" in ln)
    assert "sheet Costs" in line and "rows 1-3" in line, p.stdout
    p = subprocess.run(ctl + ["ask", "-c", "sheets", "zeppelin hangar rent"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.split("Sources:")[1].splitlines() if "book.xlsx" in ln)
    assert "sheet Costs" in line and "rows 1-3" in line, p.stdout
    p = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(d.cfg), "search", "-c", "sheets",
                        "quokka habitat"], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if "animals.csv" in ln)
    assert "rows 2-5" in line and "chars" not in line, p.stdout

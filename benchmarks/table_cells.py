"""Table cells asked for by row and column: does the answer without an LLM hold the right cell?

    .venv/bin/python benchmarks/table_cells.py [--docs 10] [--model local:all-minilm-l6-v2]
        [--workdir DIR] [--out table_cells]

Writes ``--docs`` documents of each of docx (python-docx), odt (odfpy), HTML (by hand), PDF (fpdf2)
and xlsx (openpyxl), each a company's results: a heading, a paragraph, and a table titled
"<Company> statement of operations (in millions)" with a two-row header ("Fiscal year" merged, or
centred, over the years), eight row labels and figures that occur nowhere else. The PDFs set the
table as filings do, text placed on a page with no table markup (half of them with dot leaders);
the workbook stores the figures as numbers. Every document gets four questions "What is the <row>
of <company> in fiscal <year>?" (200 with the default), asked through the one-shot search and ask
flow (``ragweedd ask``, no LLM). A question counts when the answer text holds the cell's figure
("12,345.6", or "12345.6" as a spreadsheet stores it); also counted: the figure in any source's
text, and in the first source of the right file.
``ragweedd ingest`` runs in a subprocess, as a user would. Prints a table per format and writes
benchmarks/results/<out>.json.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks._common import table, write_json  # noqa: E402

COMPANIES = ["Zephyr Tools", "Quillon Foods", "Brackwater Mining", "Halvard Shipping", "Orrin Textiles",
             "Pellucid Optics", "Tamsin Pharma", "Corvane Steel", "Lumen Ferries", "Yarrow Insurance",
             "Ostrava Glassworks", "Kestrel Avionics", "Marlow Breweries", "Nimbus Telecom", "Saffron Hotels",
             "Ferrule Robotics", "Gannet Paper", "Harrow Cement", "Ibex Outdoor", "Juniper Dairy",
             "Alder Railways", "Bittern Cosmetics", "Cinder Foundry", "Dunlin Software", "Elkhorn Timber",
             "Fulmar Airlines", "Gorse Fertilisers", "Heron Logistics", "Isobar Weather", "Jackdaw Toys",
             "Kittiwake Ceramics", "Larkspur Media", "Merlin Batteries", "Nettle Apparel", "Osprey Marine",
             "Plover Semiconductors", "Quarry Aggregates", "Redstart Pharmacy", "Sandpiper Resorts",
             "Teal Water Utilities", "Umber Paints", "Vireo Security", "Wren Furniture", "Xenon Lighting",
             "Yellowhammer Seeds", "Zircon Jewellers", "Auk Refrigeration", "Brambling Packaging",
             "Chiffchaff Studios", "Dotterel Energy"]
ROWS = ["Net revenue", "Cost of goods sold", "Gross profit", "Research and development",
        "Selling, general and administrative", "Operating income", "Interest expense", "Net income",
        "Capital expenditures", "Depreciation and amortization", "Income tax expense", "Free cash flow"]
YEARS = ["2021", "2022", "2023"]


def _figures(rng: random.Random, used: set[str], n: int) -> list[str]:
    out = []
    while len(out) < n:
        v = f"{rng.randint(100, 99999):,}.{rng.randint(0, 9)}"
        if v not in used:
            used.add(v)
            out.append(v)
    return out


def _spec(k: int, rng: random.Random, used: set[str]) -> dict:
    rows = rng.sample(ROWS, 8)
    cells = {r: dict(zip(YEARS, _figures(rng, used, len(YEARS)))) for r in rows}
    return {"company": COMPANIES[k],
            "rows": rows, "cells": cells}


def _prose(s: dict) -> str:
    return (f"{s['company']} reported its results for the last three fiscal years. Management discussed "
            "demand, pricing and costs with the board before the figures below were approved.")


def _title(s: dict) -> str:
    return f"{s['company']} statement of operations (in millions)"


def write_docx(path: Path, s: dict) -> None:
    import docx
    from docx.oxml import OxmlElement

    d = docx.Document()
    d.add_heading(f"{s['company']} annual report", level=1)
    d.add_paragraph(_prose(s))
    d.add_paragraph(_title(s))
    t = d.add_table(rows=2 + len(s["rows"]), cols=1 + len(YEARS))
    t.cell(0, 1).merge(t.cell(0, len(YEARS))).text = "Fiscal year"
    t.rows[0]._tr.get_or_add_trPr().append(OxmlElement("w:tblHeader"))
    for c, y in enumerate(YEARS, 1):
        t.cell(1, c).text = y
    for r, label in enumerate(s["rows"], 2):
        t.cell(r, 0).text = label
        for c, y in enumerate(YEARS, 1):
            t.cell(r, c).text = s["cells"][label][y]
    d.add_paragraph("Figures are unaudited.")
    d.save(str(path))


def write_odt(path: Path, s: dict) -> None:
    from odf.opendocument import OpenDocumentText
    from odf.table import CoveredTableCell, Table, TableCell, TableColumn, TableHeaderRows, TableRow
    from odf.text import H, P

    def cell(text: str = "", **kw) -> TableCell:
        c = TableCell(**kw)
        if text:
            c.addElement(P(text=text))
        return c

    doc = OpenDocumentText()
    doc.text.addElement(H(outlinelevel=1, text=f"{s['company']} annual report"))
    doc.text.addElement(P(text=_prose(s)))
    doc.text.addElement(P(text=_title(s)))
    t = Table(name="Results")
    t.addElement(TableColumn(numbercolumnsrepeated=1 + len(YEARS)))
    head = TableHeaderRows()
    r = TableRow()
    r.addElement(cell())
    r.addElement(cell("Fiscal year", numbercolumnsspanned=len(YEARS)))
    for _ in YEARS[1:]:
        r.addElement(CoveredTableCell())
    head.addElement(r)
    r = TableRow()
    r.addElement(cell())
    for y in YEARS:
        r.addElement(cell(y))
    head.addElement(r)
    t.addElement(head)
    for label in s["rows"]:
        r = TableRow()
        r.addElement(cell(label))
        for y in YEARS:
            r.addElement(cell(s["cells"][label][y]))
        t.addElement(r)
    doc.text.addElement(t)
    doc.text.addElement(P(text="Figures are unaudited."))
    doc.save(str(path))


def write_html(path: Path, s: dict) -> None:
    years = "".join(f"<th>{y}</th>" for y in YEARS)
    body = "".join(f"<tr><td>{label}</td>" + "".join(f"<td>{s['cells'][label][y]}</td>" for y in YEARS) + "</tr>"
                   for label in s["rows"])
    path.write_text(f"<html><head><title>{s['company']} annual report</title></head><body>"
                    f"<h1>{s['company']} annual report</h1><p>{_prose(s)}</p>"
                    f"<table><caption>{_title(s)}</caption><thead><tr><th></th><th colspan='{len(YEARS)}'>"
                    f"Fiscal year</th></tr><tr><th></th>{years}</tr></thead><tbody>{body}</tbody></table>"
                    f"<p>Figures are unaudited.</p></body></html>")


def write_pdf(path: Path, s: dict, leaders: bool) -> None:
    """A statement as filings set it: its title and units centred, a period spanning the year
    columns over a row of years, figures right-aligned; labels run on dot leaders (``leaders``)
    or stand apart by white space only."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 14)
    pdf.cell(0, 8, f"{s['company']} annual report", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=10)
    pdf.multi_cell(0, 5, _prose(s))
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 11)
    pdf.cell(0, 6, f"{s['company']} statement of operations", new_x="LMARGIN", new_y="NEXT", align="C")
    pdf.set_font("Helvetica", size=9)
    pdf.cell(0, 5, "(in millions)", new_x="LMARGIN", new_y="NEXT", align="C")
    label_w, col_w = 100, 30
    pdf.cell(label_w, 5, "")
    pdf.cell(col_w * len(YEARS), 5, "Fiscal year", align="C", new_x="LMARGIN", new_y="NEXT")
    pdf.cell(label_w, 5, "")
    for k, y in enumerate(YEARS):
        last = k == len(YEARS) - 1
        pdf.cell(col_w, 5, y, align="R", new_x="LMARGIN" if last else "RIGHT", new_y="NEXT" if last else "TOP")
    for label in s["rows"]:
        text = label
        while leaders and pdf.get_string_width(text + " .") < label_w - 2:
            text += " ."
        pdf.cell(label_w, 5, text)
        for k, y in enumerate(YEARS):
            last = k == len(YEARS) - 1
            pdf.cell(col_w, 5, s["cells"][label][y], align="R", new_x="LMARGIN" if last else "RIGHT",
                     new_y="NEXT" if last else "TOP")
    pdf.ln(3)
    pdf.set_font("Helvetica", size=10)
    pdf.multi_cell(0, 5, "Figures are unaudited.")
    pdf.output(str(path))


def write_xlsx(path: Path, s: dict) -> None:
    """A workbook as a finance team keeps one: a title row, "Fiscal year" merged over the years,
    figures stored as numbers with a thousands format."""
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Statement of operations"
    ws.append([_title(s)])
    ws.append(["", "Fiscal year"])
    ws.merge_cells(start_row=2, start_column=2, end_row=2, end_column=1 + len(YEARS))
    ws.append(["", *(int(y) for y in YEARS)])
    for label in s["rows"]:
        ws.append([label, *(float(s["cells"][label][y].replace(",", "")) for y in YEARS)])
        for c in ws[ws.max_row][1:]:
            c.number_format = "#,##0.0"
    wb.save(str(path))


WRITERS = {"docx": write_docx, "odt": write_odt, "html": write_html,
           # half the PDFs with dot leaders, half without: filings set them both ways
           "pdf": lambda path, s: write_pdf(path, s, leaders=path.stem[0] < "n"), "xlsx": write_xlsx}


def _forms(cell: str) -> set[str]:
    """The cell as a document may show it: "12,345.6" and, as a spreadsheet stores it, "12345.6"
    ("12345" for a whole number)."""
    bare = cell.replace(",", "")
    return {cell, bare, bare[:-2] if bare.endswith(".0") else bare}


async def _answer(services, q: str) -> dict:
    res = await services.search_async(q, ["tc"], 10)
    events = await services.ask_flow.ask(q, res, tree=None)
    done = None
    async for ev in events:
        if ev.get("type") == "done":
            done = ev
    assert done is not None
    entry = await asyncio.to_thread(services.history.show, done["history_id"])
    return entry


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--docs", type=int, default=10, help="documents of each format")
    ap.add_argument("--model", default="local:all-minilm-l6-v2")
    ap.add_argument("--workdir", help="scratch dir (default: a new temp dir)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default="table_cells")
    a = ap.parse_args()

    from ragweedd.config import load_config
    from ragweedd.embed.factory import make_embedder
    from ragweedd.services import open_oneshot

    if not 1 <= a.docs <= len(COMPANIES) // len(WRITERS):
        raise SystemExit(f"--docs must be 1-{len(COMPANIES) // len(WRITERS)}: each document names its own company")
    rng = random.Random(a.seed)
    work = Path(a.workdir) if a.workdir else Path(tempfile.mkdtemp(prefix="ragweed-table-cells-"))
    docs = work / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    used: set[str] = set()
    questions = []
    k = 0
    for fmt, write in WRITERS.items():
        for _ in range(a.docs):
            s = _spec(k, rng, used)
            k += 1
            name = f"{s['company'].lower().replace(' ', '_')}.{fmt}"
            write(docs / name, s)
            for label in rng.sample(s["rows"], 4):
                y = rng.choice(YEARS)
                q = f"What is the {label} of {s['company']} in fiscal {y}?"
                questions.append({"fmt": fmt, "file": name, "q": q, "cell": s["cells"][label][y]})
    cfg_file = work / "ragweedd.toml"
    cfg_file.write_text(f'data_dir = "{work / "data"}"\nstate_dir = "{work / "state"}"\n'
                        f'cache_dir = "{work / "cache"}"\n[embed]\nmodel = "{a.model}"\n'
                        f'[collections.tc]\npaths = ["{docs.resolve()}"]\n')
    env = {**os.environ, "RAGWEED_LOG_LEVEL": "warning"}
    r = subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(cfg_file), "ingest", "-c", "tc"],
                       env=env, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"ingest failed ({r.returncode}):\n{r.stderr[-3000:]}")
    cfg = load_config(cfg_file, env={})
    services = open_oneshot(cfg, embedder=make_embedder(cfg.embed_model, cfg))
    per: dict[str, dict] = {}
    misses = []
    try:
        for q in questions:
            rec = asyncio.run(_answer(services, q["q"]))
            sources = rec.get("sources") or []
            in_answer = any(f in (rec.get("answer") or "") for f in _forms(q["cell"]))
            in_sources = any(f in (s.get("text") or "") for s in sources for f in _forms(q["cell"]))
            first = next((s for s in sources if s.get("filename") == q["file"]), None)
            row = per.setdefault(q["fmt"], {"format": q["fmt"], "questions": 0, "answer_has_cell": 0,
                                            "sources_have_cell": 0, "right_file_first": 0})
            row["questions"] += 1
            row["answer_has_cell"] += in_answer
            row["sources_have_cell"] += in_sources
            row["right_file_first"] += bool(sources) and sources[0].get("filename") == q["file"]
            if not in_answer:
                misses.append({**q, "answer": (rec.get("answer") or "")[:400],
                               "table": first and first.get("table"), "rows": first and first.get("rows")})
    finally:
        services.close()
    rows = list(per.values())
    total = {"format": "all", **{k: sum(r[k] for r in rows) for k in ("questions", "answer_has_cell",
                                                                        "sources_have_cell", "right_file_first")}}
    rows.append(total)
    for r_ in rows:
        n = r_["questions"]
        for key in ("answer_has_cell", "sources_have_cell", "right_file_first"):
            r_[key] = round(r_[key] / n, 3)
    print(table(rows, ["format", "questions", "answer_has_cell", "sources_have_cell", "right_file_first"]))
    for m in misses[:10]:
        print(f"miss: {m['q']} -> {m['cell']}: {m['answer'][:200]!r}")
    path = write_json(a.out, {"model": a.model, "docs_per_format": a.docs, "results": rows, "misses": misses})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

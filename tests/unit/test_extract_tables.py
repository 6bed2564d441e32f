"""Tables in docx, odt and HTML come out as rows that carry their headers, chunked by rows with the
table's number, title and exact rows in each chunk's provenance. The documents are written by
independent tools (python-docx, odfpy) or by hand (HTML), with cells known in advance."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragweedd.chunk.chunker import ChunkParams, chunk_document
from ragweedd.chunk.context import context_line
from ragweedd.errors import ExtractionSkipped
from ragweedd.extract.registry import extract_file

PARAMS = ChunkParams(256, 256, 256, 15)
CASH = "Net cash provided by operating activities"


def _docx_header(row) -> None:
    from docx.oxml import OxmlElement

    row._tr.get_or_add_trPr().append(OxmlElement("w:tblHeader"))


def make_docx(path: Path) -> None:
    """A cash-flow statement: a header row marked as such with "Year ended December 31" merged
    over both year columns (gridSpan), a row of years, a row label merged down two rows (vMerge),
    an empty cell, and text before and after."""
    import docx

    d = docx.Document()
    d.add_heading("Annual report", level=1)
    d.add_paragraph("Cash remained strong through the year.")
    d.add_paragraph("Consolidated Statements of Cash Flows (in millions)")
    t = d.add_table(rows=6, cols=3)
    t.cell(0, 1).merge(t.cell(0, 2)).text = "Year ended December 31"
    _docx_header(t.rows[0])
    for c, v in ((1, "2015"), (2, "2014")):
        t.cell(1, c).text = v
    body = [(CASH, "1,469.5", "1,287.5"), ("Capital expenditures", "(310.2)", ""),
            ("Proceeds from sales", "12.0", "9.9"), ("", "3.1", "2.2")]
    for r, row in enumerate(body, 2):
        for c, v in enumerate(row):
            if v:
                t.cell(r, c).text = v
    t.cell(4, 0).merge(t.cell(5, 0))  # "Proceeds from sales" spans two rows
    d.add_paragraph("The board reviewed these figures in March.")
    d.save(str(path))


def make_odt(path: Path) -> None:
    from odf.opendocument import OpenDocumentText
    from odf.table import CoveredTableCell, Table, TableCell, TableColumn, TableHeaderRows, TableRow
    from odf.text import H, P

    def cell(text: str = "", **kw) -> TableCell:
        c = TableCell(**kw)
        if text:
            c.addElement(P(text=text))
        return c

    doc = OpenDocumentText()
    doc.text.addElement(H(outlinelevel=1, text="Harvest report"))
    doc.text.addElement(P(text="Orchard yield by variety (in tonnes)"))
    t = Table(name="Yield")
    t.addElement(TableColumn(numbercolumnsrepeated=3))
    head = TableHeaderRows()
    r = TableRow()
    r.addElement(cell())
    r.addElement(cell("Season", numbercolumnsspanned=2))
    r.addElement(CoveredTableCell())
    head.addElement(r)
    r = TableRow()
    for x in ("Variety", "Spring", "Autumn"):
        r.addElement(cell(x))
    head.addElement(r)
    t.addElement(head)
    for row in (("Bramley", "12.5", "30.1"), ("Cox", "8.2", "19.4")):
        r = TableRow()
        for x in row:
            r.addElement(cell(x))
        t.addElement(r)
    doc.text.addElement(t)
    doc.text.addElement(P(text="Pickers were paid weekly."))
    doc.save(str(path))


HTML = """<html><head><title>Fleet</title></head><body>
<h1>Fleet costs</h1><p>Costs rose in the second half.</p>
<table>
<caption>Fuel costs by depot ($ in thousands)</caption>
<thead>
<tr><th rowspan="2">Depot</th><th colspan="4">Half year</th></tr>
<tr><th colspan="2">H1 2023</th><th colspan="2">H2 2023</th></tr>
</thead>
<tbody>
<tr><td>Leeds</td><td>$</td><td>1,200</td><td>$</td><td>1,350</td></tr>
<tr><td>York</td><td>$</td><td>(40</td><td>$</td><td>75</td></tr>
<tr><td colspan="5"></td></tr>
<tr><td>Hull</td><td colspan="4">closed</td></tr>
</tbody></table>
<p>Hull reopens next year.</p>
</body></html>"""


def _table_lines(doc, n: int) -> list[str]:
    whole = next(r for r in doc.regions if r.meta.get("table") == n and "row_start" not in r.meta)
    return doc.text[whole.start:whole.end].split("\n")


def test_docx_rows_carry_their_headers_merges_and_title(tmp_path):
    make_docx(tmp_path / "cash.docx")
    doc = extract_file(tmp_path / "cash.docx")
    assert _table_lines(doc, 1) == [
        "Consolidated Statements of Cash Flows (in millions)",  # the paragraph naming it goes with it
        f"{CASH} | Year ended December 31 2015: 1,469.5 | Year ended December 31 2014: 1,287.5",
        "Capital expenditures | Year ended December 31 2015: (310.2)",
        "Proceeds from sales | Year ended December 31 2015: 12.0 | Year ended December 31 2014: 9.9",
        "Proceeds from sales | Year ended December 31 2015: 3.1 | Year ended December 31 2014: 2.2",
    ]
    # the text around keeps its place and order
    t = doc.text
    assert t.index("Cash remained strong") < t.index("Consolidated Statements") < t.index(CASH) \
        < t.index("The board reviewed")
    rows = [r.meta for r in doc.regions if "row_start" in r.meta]
    assert rows == [{"table": 1, "table_title": "Consolidated Statements of Cash Flows (in millions)",
                     "row_start": 3, "row_end": 6}]


def test_odt_header_rows_and_spanned_header(tmp_path):
    make_odt(tmp_path / "harvest.odt")
    doc = extract_file(tmp_path / "harvest.odt")
    assert _table_lines(doc, 1) == ["Orchard yield by variety (in tonnes)",
                                    "Bramley | Season Spring: 12.5 | Season Autumn: 30.1",
                                    "Cox | Season Spring: 8.2 | Season Autumn: 19.4"]
    assert doc.text.index("Orchard yield") < doc.text.index("Bramley") < doc.text.index("Pickers")
    chunks = chunk_document(doc, PARAMS).chunks
    table = [c for c in chunks if c["meta"].get("table") == 1]
    assert len(table) == 1 and table[0]["meta"]["row_start"] == 3 and table[0]["meta"]["row_end"] == 4
    assert table[0]["meta"]["section"] == "Harvest report"
    assert table[0]["meta"]["table_title"] == "Orchard yield by variety (in tonnes)"


def test_html_multirow_header_colspan_signs_caption_units(tmp_path):
    (tmp_path / "fleet.html").write_text(HTML)
    doc = extract_file(tmp_path / "fleet.html")
    assert _table_lines(doc, 1) == [
        "Fuel costs by depot ($ in thousands)",
        "Leeds | Half year H1 2023: $1,200 | Half year H2 2023: $1,350",
        "York | Half year H1 2023: $(40 | Half year H2 2023: $75",
        "Hull | Half year H1 2023 / Half year H2 2023: closed",
    ]
    rows = [(r.meta["row_start"], r.meta["row_end"]) for r in doc.regions if "row_start" in r.meta]
    assert rows == [(3, 4), (6, 6)]  # row 5 is empty: left out, the numbering goes on past it
    chunks = chunk_document(doc, PARAMS).chunks
    (table,) = [c for c in chunks if c["meta"].get("table") == 1]
    assert table["meta"]["row_start"] == 3 and table["meta"]["row_end"] == 6
    assert table["meta"]["table_title"] == "Fuel costs by depot ($ in thousands)"
    assert not any("Costs rose" in c["text"] or "reopens" in c["text"] for c in [table])


def test_a_big_table_is_chunked_by_whole_rows_each_citing_its_rows_and_title(tmp_path):
    body = "".join(f"<tr><td>Line item {i}</td><td>{i * 11}.5</td><td>{i * 7}.25</td></tr>" for i in range(1, 151))
    html = (f"<html><body><p>Intro paragraph.</p><p>Segment results (in millions)</p><table>"
            f"<tr><th></th><th>2015</th><th>2014</th></tr>{body}</table><p>Closing words.</p></body></html>")
    (tmp_path / "big.html").write_text(html)
    doc = extract_file(tmp_path / "big.html")
    chunks = [c for c in chunk_document(doc, PARAMS).chunks if c["meta"].get("table") == 1]
    assert len(chunks) > 3
    seen = []
    for c in chunks:
        lines = c["text"].split("\n")
        row = re.compile(r"Line item (\d+) \| 2015: [\d.]+ \| 2014: [\d.]+")
        lines = [ln for ln in lines if ln != "Segment results (in millions)"]
        items = [int(m.group(1)) for ln in lines if (m := row.fullmatch(ln))]
        assert len(items) == len(lines), c["text"][:200]  # whole rows only, each with its headers
        # the table's row numbers: row 1 is the header, "Line item N" is row N + 1
        assert (c["meta"]["row_start"], c["meta"]["row_end"]) == (items[0] + 1, items[-1] + 1)
        assert c["meta"]["table_title"] == "Segment results (in millions)"
        assert len(c["text"]) <= 256 * 4
        seen += items
    assert seen == list(range(1, 151))  # every row once, in order
    assert chunks[0]["text"].startswith("Segment results (in millions)\nLine item 1 |")
    ctx = context_line("big", None, None, chunks[-1]["meta"]["table_title"])
    assert ctx == "big › Segment results (in millions)"


def test_thousands_of_columns_empty_and_nested_tables_lose_nothing(tmp_path):
    wide = "".join(f"<th>C{i}</th>" for i in range(3000))
    vals = "".join(f"<td>{i * 3}</td>" for i in range(3000))
    nested = ("<table><tr><th>Team</th><th>Members</th><th>Lead</th></tr>"
              "<tr><td>Core</td><td><table><tr><td>Ann</td><td>Bo</td></tr><tr><td>Cy</td><td>Di</td></tr>"
              "</table></td><td>Ann</td></tr></table>")
    html = (f"<html><body><p>Before wide.</p><table><tr><th>Name</th>{wide}</tr><tr><td>row one</td>{vals}</tr>"
            f"</table><table></table><table><tr><td></td></tr></table>{nested}<p>After all.</p></body></html>")
    (tmp_path / "odd.html").write_text(html)
    doc = extract_file(tmp_path / "odd.html")
    chunks = chunk_document(doc, PARAMS).chunks
    row = next(ln for ln in doc.text.split("\n") if ln.startswith("row one"))
    assert row.split(" | ") == ["row one", *(f"C{i}: {i * 3}" for i in range(3000))]
    # the one long row is cut as text is, each piece citing it, together covering all of it
    wide = [c for c in chunks if c["meta"].get("table") == 1]
    assert len(wide) > 10 and all(c["meta"]["row_start"] == c["meta"]["row_end"] == 2 for c in wide)
    assert all(len(c["text"]) <= 256 * 4 for c in wide)
    start = doc.text.index(row)
    assert wide[0]["meta"]["char_start"] == start and wide[-1]["meta"]["char_end"] == start + len(row)
    assert all(b["meta"]["char_start"] <= a["meta"]["char_end"] for a, b in zip(wide, wide[1:]))
    # the empty tables are tables 2 and 3; the nested one is table 4, its inner table in the cell
    assert "Core | Members: Ann | Bo; Cy | Di | Lead: Ann" in doc.text
    assert any(c["meta"].get("table") == 4 for c in chunks)
    assert doc.text.startswith("Before wide.") and doc.text.endswith("After all.")
    (tmp_path / "empty.html").write_text("<html><body><table><tr><td> </td></tr></table></body></html>")
    with pytest.raises(ExtractionSkipped):
        extract_file(tmp_path / "empty.html")


def test_layout_tables_and_name_value_pairs_stay_plain(tmp_path):
    html = ("<html><body><table><tr><td>Menu</td></tr><tr><td>Home page text here.</td></tr></table>"
            "<table><tr><td>Owner</td><td>Dana</td></tr><tr><td>Status</td><td>Active</td></tr></table>"
            "</body></html>")
    (tmp_path / "layout.html").write_text(html)
    doc = extract_file(tmp_path / "layout.html")
    assert doc.text.split("\n") == ["Menu", "Home page text here.", "Owner | Dana", "Status | Active"]
    assert not any(r.meta.get("table") == 1 for r in doc.regions)


def test_a_table_too_big_to_lay_out_is_read_as_plain_lines(tmp_path):
    rows = "".join(f'<tr><td colspan="1000">cell {i}</td><td rowspan="65534">x{i}</td></tr>' for i in range(5000))
    (tmp_path / "huge.html").write_text(f"<html><body><table>{rows}</table><p>End.</p></body></html>")
    doc = extract_file(tmp_path / "huge.html")
    lines = doc.text.split("\n")
    assert lines[0] == "cell 0" and lines[1] == "x0" and "cell 4999" in lines and lines[-1] == "End."


def test_a_workbook_statement_reads_as_rows_with_their_headers(tmp_path):
    """openpyxl writes a statement as a finance team keeps one: a title row, "Fiscal year" merged
    over three years, figures stored as numbers; rows past the ones the headers are judged from
    carry them too, and a run after an empty row finds headers of its own."""
    import openpyxl

    from ragweedd.extract.base import ExtractSettings
    from ragweedd.extract.sheets import XlsxExtractor

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Operations"
    ws.append(["Acme Corp statement of operations (in millions)"])
    ws.append(["", "Fiscal year"])
    ws.merge_cells(start_row=2, start_column=2, end_row=2, end_column=4)
    ws.append(["", 2015, 2016, 2017])
    for i in range(30):
        ws.append([f"Line item {i}", 1000.5 + i, 2000 + i, 3000.25])
    ws.append([])
    ws.append(["Name", "Email", "Phone"])
    ws.append(["Ann", "ann@example.org", "555-1234"])
    wb.save(tmp_path / "book.xlsx")
    doc = XlsxExtractor().extract(tmp_path / "book.xlsx", ExtractSettings())
    lines = doc.text.split("\n")
    assert lines[:3] == ["# Sheet: Operations", "Acme Corp statement of operations (in millions)",
                         "Line item 0 | Fiscal year 2015: 1000.5 | Fiscal year 2016: 2000 | Fiscal year 2017: 3000.25"]
    assert "Line item 29 | Fiscal year 2015: 1029.5 | Fiscal year 2016: 2029 | Fiscal year 2017: 3000.25" in lines
    assert "Ann | Email: ann@example.org | Phone: 555-1234" in lines and "Name" not in doc.text
    rows = [r.meta for r in doc.regions if "row_start" in r.meta]
    assert rows[0] == {"row_start": 4, "row_end": 23, "sheet": "Operations",
                       "table_title": "Acme Corp statement of operations (in millions)"}  # it names the sheet
    assert rows[-1] == {"row_start": 36, "row_end": 36, "sheet": "Operations", "table_title": "Operations"}

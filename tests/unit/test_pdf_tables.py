"""Tables in PDFs written by fpdf2 as filings set them: a statement title, a units note, a header of
two lines (a period spanning the columns, a year over each), rows whose labels run on dot leaders
(or on plain spaces) to right-aligned figures with "$", brackets and dashes. Each row comes out as
one line that names its column for every figure, the table's title (with its units) and page go
with its chunks, and the prose around it, numbers and all, stays as it was."""

from __future__ import annotations

from pathlib import Path

from ragweedd.chunk.chunker import ChunkParams, chunk_document
from ragweedd.extract.base import ExtractSettings
from ragweedd.extract.registry import extract_file

PROSE = ("Cash provided by operating activities rose to 1,469.5 million in 2015 from 1,287.5 million in "
         "2014, mainly on higher collections. ")
AFTER = "See the accompanying notes, which are an integral part of these statements."
CASH_FLOWS = [
    ("Net income", "$ 629.6", "$ 268.4"),
    ("Depreciation, amortization and accretion", "339.5", "313.6"),
    ("Gain on the sale of property", "(21.4)", "-"),
    ("Net cash provided by operating activities", "1,469.5", "1,287.5"),
    ("Purchases of property and equipment", "(184.9)", "(148.3)"),
    ("Net cash used for investing activities", "(1,488.4)", "(490.7)"),
]
# a second statement set without leaders: label and figures apart by white space only
BALANCE = [
    ("Cash and cash equivalents", "876.6", "1,117.4"),
    ("Trade receivables, net", "672.0", "591.8"),
    ("Total current assets", "4,821.5", "4,602.3"),
    ("Total assets", "11,726.5", "10,785.8"),
]


def _rows(pdf, rows) -> None:
    """A label and two figures a row, set right in their columns as filings set them."""
    for label, a, b in rows:
        pdf.cell(120, 5, label)
        pdf.cell(35, 5, a, align="R")
        pdf.cell(35, 5, b, align="R", new_x="LMARGIN", new_y="NEXT")


def _two_year_rows(pdf, rows) -> None:
    """A header of two years over ``_rows``."""
    pdf.cell(120, 5, "")
    pdf.cell(35, 5, "2015", align="R")
    pdf.cell(35, 5, "2014", align="R", new_x="LMARGIN", new_y="NEXT")
    _rows(pdf, rows)


def _statements_pdf(path: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=10)
    pdf.multi_cell(0, 5, PROSE * 3)
    pdf.ln(4)
    pdf.set_font("Helvetica", "B", 11)
    pdf.cell(0, 6, "Consolidated Statements of Cash Flows", new_x="LMARGIN", new_y="NEXT", align="C")
    pdf.set_font("Helvetica", size=9)
    pdf.cell(0, 5, "(In millions)", new_x="LMARGIN", new_y="NEXT", align="C")
    pdf.cell(120, 5, "")
    pdf.cell(70, 5, "Year Ended December 31,", align="C", new_x="LMARGIN", new_y="NEXT")
    pdf.cell(120, 5, "")
    pdf.cell(35, 5, "2015", align="R")
    pdf.cell(35, 5, "2014", align="R", new_x="LMARGIN", new_y="NEXT")
    pdf.cell(120, 5, "Cash flows from operating activities:", new_x="LMARGIN", new_y="NEXT")
    for label, a, b in CASH_FLOWS:
        text = label
        while pdf.get_string_width(text + ".") < 118:
            text += "."
        pdf.cell(120, 5, text)
        pdf.cell(35, 5, a, align="R")
        pdf.cell(35, 5, b, align="R", new_x="LMARGIN", new_y="NEXT")
    pdf.ln(3)
    pdf.set_font("Helvetica", size=10)
    pdf.multi_cell(0, 5, AFTER)
    pdf.ln(6)
    pdf.set_font("Helvetica", "B", 11)
    pdf.cell(0, 6, "Consolidated Balance Sheets", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=9)
    pdf.cell(0, 5, "(in millions)", new_x="LMARGIN", new_y="NEXT")
    pdf.cell(120, 5, "")
    pdf.cell(35, 5, "December 31, 2015", align="R")
    pdf.cell(35, 5, "December 31, 2014", align="R", new_x="LMARGIN", new_y="NEXT")
    _rows(pdf, BALANCE)
    pdf.output(str(path))
    return path


def test_statement_rows_carry_their_column_headers(tmp_path):
    doc = extract_file(_statements_pdf(tmp_path / "statements.pdf"), ExtractSettings(ocr_enabled=False))
    lines = doc.text.split("\n")
    assert doc.stats["tables"] == 2, doc.text
    head = "Year Ended December 31,"
    # a one- or two-word label under a short "...:" line says it: "Net income" is the cash flows' one
    want = ["Cash flows from operating activities: Net income | {h} 2015: $629.6 | {h} 2014: $268.4",
            "Gain on the sale of property | {h} 2015: (21.4) | {h} 2014: -",
            "Net cash provided by operating activities | {h} 2015: 1,469.5 | {h} 2014: 1,287.5",
            "Net cash used for investing activities | {h} 2015: (1,488.4) | {h} 2014: (490.7)"]
    for row in want:
        assert row.format(h=head) in lines, doc.text
    assert "Total assets | December 31, 2015: 11,726.5 | December 31, 2014: 10,785.8" in lines, doc.text
    assert "Cash flows from operating activities:" in lines
    assert "...." not in doc.text
    # the prose around the tables is left as it was, its figures too
    assert " ".join(PROSE.split()[:12]) in " ".join(doc.text.split())
    assert AFTER in doc.text
    tables = sorted((r for r in doc.regions if "table" in r.meta and "row_start" not in r.meta),
                    key=lambda r: r.start)
    assert [r.meta["table"] for r in tables] == [1, 2]
    assert tables[0].meta["table_title"].startswith("Consolidated Statements of Cash Flows")
    assert "In millions" in tables[0].meta["table_title"]
    assert tables[1].meta["table_title"].startswith("Consolidated Balance Sheets")
    assert "in millions" in tables[1].meta["table_title"]
    assert "higher collections" not in doc.text[tables[0].start:tables[0].end]

    chunks = chunk_document(doc, ChunkParams(256, 256, 256, 10)).chunks
    row = next(c for c in chunks if "Net cash provided by operating activities |" in c["text"])
    meta = row["meta"]
    assert meta["page_label"] == "1" and meta["table"] == 1
    assert "Cash Flows" in meta["table_title"]
    assert 1 <= meta["row_start"] <= meta["row_end"]
    prose = next(c for c in chunks if "mainly on higher collections" in c["text"])
    assert "table" not in prose["meta"]


def test_prose_with_figures_is_no_table(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    # lines ending in figures, but with word spaces before them: sentences, not rows
    for k in range(6):
        pdf.cell(0, 6, f"Revenue for the segment grew in quarter {k + 1} to {1200 + 37 * k:,}", new_x="LMARGIN",
                 new_y="NEXT")
    pdf.output(str(tmp_path / "prose.pdf"))
    doc = extract_file(tmp_path / "prose.pdf", ExtractSettings(ocr_enabled=False))
    assert doc.stats["tables"] == 0
    assert "Revenue for the segment grew in quarter 3 to 1,274" in doc.text
    assert not any("table" in r.meta for r in doc.regions)


def test_group_headers_head_their_columns(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 11)
    pdf.cell(0, 6, "Amounts recognized in accumulated other comprehensive loss", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=9)
    pdf.cell(90, 5, "")
    pdf.cell(50, 5, "Pension", align="C")
    pdf.cell(50, 5, "Other Benefits", align="C", new_x="LMARGIN", new_y="NEXT")
    pdf.cell(90, 5, "")
    for k, year in enumerate(["2015", "2014", "2015", "2014"]):
        pdf.cell(25, 5, year, align="R", new_x="LMARGIN" if k == 3 else "RIGHT", new_y="NEXT" if k == 3 else "TOP")
    rows = [("Net actuarial loss", "17,448", "19,031", "(1,862)", "(1,092)"),
            ("Prior service credits", "(1,224)", "(1,306)", "(41)", "(76)"),
            ("Total recognized", "16,224", "17,725", "(1,903)", "(1,168)")]
    for label, *figures in rows:
        pdf.cell(90, 5, label)
        for k, f in enumerate(figures):
            pdf.cell(25, 5, f, align="R", new_x="LMARGIN" if k == 3 else "RIGHT", new_y="NEXT" if k == 3 else "TOP")
    pdf.output(str(tmp_path / "groups.pdf"))
    doc = extract_file(tmp_path / "groups.pdf", ExtractSettings(ocr_enabled=False))
    assert ("Net actuarial loss | Pension 2015: 17,448 | Pension 2014: 19,031 | Other Benefits 2015: (1,862) | "
            "Other Benefits 2014: (1,092)") in doc.text.split("\n"), doc.text


def test_a_statement_set_in_body_type_is_the_section_of_its_rows(tmp_path):
    """The statement's title is in the same type as its rows, so the layout finds no heading there:
    its rows would be cited under the bold heading above ("Item 8. Financial Statements"); the
    table's title names the statement, which becomes their section. A table that names none (the
    selected data) adds no section."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 14)
    pdf.cell(0, 8, "Item 8. Financial Statements and Supplementary Data", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=9)
    pdf.multi_cell(0, 5, PROSE * 2)
    pdf.ln(4)
    for title, rows in (("Selected financial data (in millions)", CASH_FLOWS[:3]),
                        ("Acme Industries Inc. Consolidated Balance Sheets (in millions)", BALANCE)):
        pdf.cell(0, 5, title, new_x="LMARGIN", new_y="NEXT")
        _two_year_rows(pdf, rows)
        pdf.ln(4)
        pdf.multi_cell(0, 5, AFTER)
        pdf.ln(4)
    pdf.output(str(tmp_path / "tenk.pdf"))
    doc = extract_file(tmp_path / "tenk.pdf", ExtractSettings(ocr_enabled=False))
    assert doc.stats["tables"] == 2, doc.text
    chunks = chunk_document(doc, ChunkParams(64, 64, 64, 0)).chunks
    total = next(c for c in chunks if "Total assets |" in c["text"])
    assert total["meta"]["section"] == "Consolidated Balance Sheets"
    assert total["meta"]["section_path"][0].startswith("Item 8")
    selected = next(c for c in chunks if "Gain on the sale of property |" in c["text"])
    assert selected["meta"]["section"].startswith("Item 8")


def test_the_link_to_the_contents_atop_a_page_is_no_part_of_a_table_title(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=8)
    pdf.cell(0, 5, "Table of Contents", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=9)
    pdf.cell(0, 5, "Acme Industries Inc. Consolidated Balance Sheets (in millions)", new_x="LMARGIN", new_y="NEXT")
    _two_year_rows(pdf, BALANCE)
    pdf.output(str(tmp_path / "page.pdf"))
    doc = extract_file(tmp_path / "page.pdf", ExtractSettings(ocr_enabled=False))
    table = next(r for r in doc.regions if "table" in r.meta and "row_start" not in r.meta)
    assert table.meta["table_title"].startswith("Acme Industries Inc. Consolidated Balance Sheets"), table.meta

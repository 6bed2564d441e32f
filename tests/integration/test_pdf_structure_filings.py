"""Headings and table rows on real filings of the FinanceBench dev folder: ADOBE_2015_10K has an
outline, BOEING_2022_10K has none (its headings come from the layout), and a row of ADOBE's notes
whose figures pdfium splits at a raised footnote mark comes back on one line. Three releases and
8-Ks whose cover pages and contact blocks once gave labels (an address, a cover sentence, a name)
get none of those.

The filings are found as in test_pdf_real_filings.py: RAGWEED_FINANCEBENCH, else
../shared/eval/financebench beside the checkout; without them the tests skip (and fail when
RAGWEED_FINANCEBENCH is set, so a run meant to check them cannot skip by accident).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from ragweedd.chunk.chunker import ChunkParams, chunk_document  # noqa: E402
from ragweedd.extract.base import ExtractSettings  # noqa: E402
from ragweedd.extract.pdf import PdfExtractor  # noqa: E402

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
FOLDER = Path(os.environ.get("RAGWEED_FINANCEBENCH", ROOT.parent / "shared" / "eval" / "financebench")) / "docs"
PARAMS = ChunkParams(chunk_tokens=256, pdf_tokens=256, av_tokens=256, overlap_pct=10)
MDNA = re.compile(r"^item\s*7\.\s*management.s discussion and analysis", re.I)


def _filing(name: str) -> Path:
    path = FOLDER / name
    if not path.is_file():
        msg = f"{path} is absent"
        if os.environ.get("RAGWEED_FINANCEBENCH"):
            pytest.fail(msg + " (RAGWEED_FINANCEBENCH is set)")
        pytest.skip(msg + " (set RAGWEED_FINANCEBENCH to the folder holding docs/)")
    return path


def _chunk_with(chunks, text: str) -> dict:
    hits = [c for c in chunks if text in c["text"]]
    assert hits, f"no chunk holds {text!r}"
    return hits[0]


def test_outline_filing_sections_and_a_split_row():
    doc = PdfExtractor().extract(_filing("ADOBE_2015_10K.pdf"), ExtractSettings(ocr_enabled=False))
    assert doc.stats["heading_source"] == "outline" and doc.stats["headings"] >= 70
    assert doc.title == "ADBE 10K FY15"  # a metadata title that names something is kept
    chunks = chunk_document(doc, PARAMS).chunks
    mdna = "Item 7. Management's Discussion and Analysis of Financial Condition and Results of Operations"
    liquidity = _chunk_with(chunks, "Working capital | As of November 27, 2015: $2,608.3")
    assert liquidity["meta"]["section"] == "Liquidity and Capital Resources"
    regions = [r for r in doc.regions if "section" in r.meta]
    at = liquidity["meta"]["char_start"]
    path = next(r.meta["section_path"] for r in regions if r.start <= at < r.end)
    assert path == ["Part II.", mdna, "Liquidity and Capital Resources"]
    balance = _chunk_with(chunks, "Total current liabilities |")
    assert balance["meta"]["section"] == "Consolidated Balance Sheets"
    # p. 94: "(1)" raised after "(2,955)" made pdfium put the mark and "(4,553)" on lines of their own
    row = [ln for ln in doc.text.split("\n") if ln.startswith("Total net unrealized gains on available-for-sale")]
    assert len(row) == 1, row
    figures = [cell.rsplit(": ", 1)[-1] for cell in row[0].split(" | ")[1:]]
    assert figures == ["7,628", "(9,226)", "(2,955)", "(4,553)"], row  # the mark is no column's figure
    # a balance sheet row keeps its label and figures on one line, each under its date; no leaders
    assert re.search(r"^Cash and cash equivalents \| November 27, 2015: \$876,560 \| November 28, 2014: \$1,117,400$",
                     doc.text, re.M)
    assert "....." not in doc.text
    sheet = _chunk_with(chunks, "Cash and cash equivalents | November 27, 2015: $876,560")
    assert "CONSOLIDATED BALANCE SHEETS" in sheet["meta"]["table_title"]
    assert "Total assets | November 27, 2015: $11,726,472" in doc.text
    assert [r.meta["page"] for r in doc.regions if "page" in r.meta] == list(range(1, 117))


def test_layout_filing_finds_parts_items_and_subheadings():
    doc = PdfExtractor().extract(_filing("BOEING_2022_10K.pdf"), ExtractSettings(ocr_enabled=False))
    assert doc.stats["heading_source"] == "layout" and doc.stats["headings"] >= 100
    regions = [r for r in doc.regions if "section" in r.meta]
    paths = [r.meta["section_path"] for r in regions]
    assert any(p[0] == "PART II" and len(p) == 2 and MDNA.match(p[1]) for p in paths)
    risk = [p for p in paths if p[:2] == ["PART I", "Item 1A. Risk Factors"] and len(p) == 3]
    assert "Risks Related to Our Business and Operations" in {p[2] for p in risk}
    chunks = chunk_document(doc, PARAMS).chunks
    backlog = _chunk_with(chunks, "Total backlog")  # a figure of MD&A's tables
    at = backlog["meta"]["char_start"]
    path = next(r.meta["section_path"] for r in regions if r.start <= at < r.end)
    assert path[0] == "PART II" and MDNA.match(path[1]), path
    # a running header ("Table of Contents" on every page) is never a heading
    assert not any(re.fullmatch(r"table of contents", s, re.I) for p in paths for s in p)
    assert doc.title == "THE BOEING COMPANY"  # the metadata title is an EDGAR accession number


def _labels(name: str) -> tuple[list[dict], set[str]]:
    doc = PdfExtractor().extract(_filing(name), ExtractSettings(ocr_enabled=False))
    chunks = chunk_document(doc, PARAMS).chunks
    return chunks, {c["meta"].get("section") for c in chunks} - {None}


def test_cover_page_lines_are_no_labels_on_real_filings():
    """The labels issue 24 found: an address, a cover sentence, a contact's name, a bookmark that
    points at the balance sheet's page but names the next section."""
    _, labels = _labels("FOOTLOCKER_2022_8K_dated-2022-05-20.pdf")
    assert "Item 5.07. Submission of Matters to a Vote of Security Holders." in labels
    assert not any("West 34th Street" in s or s.startswith("Pursuant to Section 13") for s in labels), labels
    _, labels = _labels("MGMRESORTS_2022Q4_EARNINGS.pdf")
    assert "SARAH ROGERS" not in labels and "MGM China" in labels
    assert not any(re.search(r"months ended", s, re.I) for s in labels), labels
    chunks, labels = _labels("AMCOR_2023Q4_EARNINGS.pdf")
    assert "Pro Forma Statement of Income" not in labels
    balance = _chunk_with(chunks, "Total liabilities and shareholders' equity | June 30, 2022: 17,426")
    assert "Balance Sheet" in balance["meta"]["section"], balance["meta"]


# (filing, a statement's title words, a row as it must come out): the cash-flow and balance-sheet
# rows of three 10-Ks set three ways (dot leaders; no outline; figures apart by white space only)
STATEMENT_ROWS = [
    ("ADOBE_2015_10K.pdf", "CONSOLIDATED STATEMENTS OF CASH FLOWS",
     "Net cash provided by operating activities | Years Ended November 27, 2015: 1,469,502 | "
     "Years Ended November 28, 2014: 1,287,482 | Years Ended November 29, 2013: 1,151,686"),
    ("ADOBE_2015_10K.pdf", "CONSOLIDATED BALANCE SHEETS",
     "Total assets | November 27, 2015: $11,726,472 | November 28, 2014: $10,785,829"),
    ("BOEING_2022_10K.pdf", "Consolidated Statements of Financial Position",
     "Cash and cash equivalents | 2022: $14,614 | 2021: $8,052"),
    ("PEPSICO_2022_10K.pdf", "Consolidated Statement of Cash Flows",
     "Net Cash Provided by Operating Activities | 2022: 10,811 | 2021: 11,616 | 2020: 10,613"),
    ("PEPSICO_2022_10K.pdf", "Consolidated Balance Sheet",
     "Total Assets | 2022: $92,187 | 2021: $92,377"),
]


def test_statement_rows_come_out_with_their_years():
    docs: dict[str, list[dict]] = {}
    for name, title, row in STATEMENT_ROWS:
        if name not in docs:
            doc = PdfExtractor().extract(_filing(name), ExtractSettings(ocr_enabled=False))
            docs[name] = chunk_document(doc, PARAMS).chunks
        hit = [c for c in docs[name] if row in c["text"].split("\n")]
        assert hit, f"{name}: no chunk holds the row {row!r}"
        meta = hit[0]["meta"]
        assert title in (meta.get("table_title") or ""), (name, meta.get("table_title"))
        assert meta.get("page_label") and meta.get("row_start") and meta.get("row_end"), meta
        # the units the statement states go with it
        assert re.search(r"in (?:millions|thousands)", meta["table_title"], re.I), meta["table_title"]

"""PDF structure: headings from the outline or, without one, from the layout become section
regions that every chunk carries, and a table row pdfium splits across lines comes back on one.
Every PDF here is written by fpdf2; the chunks are the chunker's own."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragweedd.chunk.chunker import ChunkParams, chunk_document  # noqa: E402
from ragweedd.extract.base import ExtractedDoc, ExtractSettings  # noqa: E402
from ragweedd.extract.pdf import PdfExtractor  # noqa: E402

NO_OCR = ExtractSettings(ocr_enabled=False)
# about 240 characters a chunk, no overlap: several chunks per section
SMALL = ChunkParams(chunk_tokens=60, pdf_tokens=60, av_tokens=60, overlap_pct=0)


def _body(marker: str, n: int = 3) -> str:
    sentence = (f"The {marker} division reported steady results this year and the board expects "
                f"the {marker} business to keep growing in every region it serves. ")
    return sentence * n


def _extract(path: Path) -> ExtractedDoc:
    return PdfExtractor().extract(path, NO_OCR)


def _sections(doc: ExtractedDoc) -> list:
    return sorted((r for r in doc.regions if "section" in r.meta), key=lambda r: r.start)


def _check_chunks(doc: ExtractedDoc, expected: dict[str, str], anchors: dict[str, str] | None = None) -> None:
    """Each chunk's section is the heading line last above where the chunk starts (the first
    heading line inside it for a chunk that starts above every heading), and each section's body
    (its marker word) is under it. ``anchors``: headings not in the text, at the start of a text."""
    lines = sorted([(m.start(), h) for h in expected.values()
                    for m in re.finditer(rf"^{re.escape(h)}$", doc.text, re.M)]
                   + [(doc.text.index(t), h) for h, t in (anchors or {}).items()])
    assert [h for _, h in lines] == list(expected.values())
    chunks = chunk_document(doc, SMALL).chunks
    assert len(chunks) > len(expected)
    for c in chunks:
        start, end = c["meta"]["char_start"], c["meta"]["char_end"]
        above = [h for at, h in lines if at <= start]
        want = above[-1] if above else next((h for at, h in lines if at < end), None)
        assert c["meta"].get("section") == want, (c["text"][:80], c["meta"])
    for m, h in expected.items():
        for hit in re.finditer(rf"\b{m}\b", doc.text):
            assert [at for at, x in lines if x == h][0] < hit.start()
    assert set(expected.values()) <= {c["meta"].get("section") for c in chunks}


def _page_regions_ok(doc: ExtractedDoc, pages: list[list[str]]) -> None:
    """One region per page, in order, covering that page's text and nothing of the next."""
    regions = [r for r in doc.regions if "page" in r.meta]
    assert [r.meta for r in regions] == [{"page": i + 1} for i in range(len(pages))]
    for r, words in zip(regions, pages):
        text = doc.text[r.start:r.end]
        assert all(w in text for w in words), (r, words)
    assert all(a.end < b.start for a, b in zip(regions, regions[1:]))


# ---- outline -----------------------------------------------------------------------------------------


def _outline_pdf(path: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title("   ")  # blank metadata title: the first top-level heading stands in
    for name, level, marker, new_page in [("Company Overview", 0, "alpha", True),
                                          ("Liquidity and Capital Resources", 1, "beta", False),
                                          ("Results of Operations", 0, "gamma", True),
                                          ("Segment Revenue", 1, "delta", False)]:
        if new_page:
            pdf.add_page()
        pdf.start_section(name, level=level)
        pdf.set_font("Helvetica", "B", 12)
        pdf.cell(0, 8, name, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, _body(marker))
    # a bookmark whose title is nowhere on its page sits at the page's start
    pdf.add_page()
    pdf.start_section("Exhibits", level=0)
    pdf.multi_cell(0, 6, _body("epsilon"))
    pdf.output(str(path))
    return path


def test_outline_gives_each_chunk_its_section_and_path(tmp_path):
    doc = _extract(_outline_pdf(tmp_path / "outline.pdf"))
    assert doc.stats["heading_source"] == "outline"
    assert doc.stats["headings"] == 5
    _check_chunks(doc, {"alpha": "Company Overview", "beta": "Liquidity and Capital Resources",
                        "gamma": "Results of Operations", "delta": "Segment Revenue", "epsilon": "Exhibits"},
                   anchors={"Exhibits": "The epsilon division"})
    secs = _sections(doc)
    assert [r.meta["section_path"] for r in secs] == [
        ["Company Overview"], ["Company Overview", "Liquidity and Capital Resources"],
        ["Results of Operations"], ["Results of Operations", "Segment Revenue"], ["Exhibits"]]
    assert all(set(r.meta) == {"section", "section_path"} for r in secs)
    # each region starts at its heading and runs to the next one, across the page break
    assert all(doc.text.startswith(r.meta["section"], r.start) for r in secs[:4])
    assert all(a.end == b.start for a, b in zip(secs, secs[1:])) and secs[-1].end == len(doc.text)
    assert doc.text[secs[-1].start:].startswith("The epsilon division")
    _page_regions_ok(doc, [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]])
    assert doc.title == "Company Overview"


# ---- layout ------------------------------------------------------------------------------------------


def _layout_pdf(path: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title("Microsoft Word - draft_v3.docx")  # junk: the first heading stands in
    pdf.set_auto_page_break(False)

    def page(blocks):
        pdf.add_page()
        # a running header in large bold type and a page number: on every page, never a heading
        pdf.set_font("Helvetica", "B", 16)
        pdf.cell(0, 8, "Example Corp Annual Report", new_x="LMARGIN", new_y="NEXT")
        for kind, text in blocks:
            if kind == "big":
                pdf.set_font("Helvetica", size=18)
                pdf.cell(0, 10, text, new_x="LMARGIN", new_y="NEXT")
            elif kind == "bold":
                pdf.set_font("Helvetica", "B", 11)
                pdf.cell(0, 7, text, new_x="LMARGIN", new_y="NEXT")
            elif kind == "caps":
                pdf.set_font("Helvetica", size=11)
                pdf.cell(0, 7, text, new_x="LMARGIN", new_y="NEXT")
            else:
                pdf.set_font("Helvetica", size=11)
                pdf.multi_cell(0, 6, text, new_x="LMARGIN", new_y="NEXT")
        pdf.set_y(-20)
        pdf.set_font("Helvetica", size=9)
        pdf.cell(0, 6, str(pdf.page_no()), align="C")

    page([("big", "Annual Overview"), ("body", _body("alpha")), ("bold", "Regional Results"),
          ("body", _body("beta")),
          # an ALL-CAPS line over a short label is a table caption, not a heading
          ("caps", "SELECTED DATA"), ("body", "Revenue 12,345"), ("body", _body("beta", 1))])
    page([("big", "Outlook"), ("body", _body("gamma")), ("caps", "RISK FACTORS"), ("body", _body("delta")),
          # bold but a sentence: not a heading
          ("bold", "We expect growth to continue."), ("body", _body("delta", 1))])
    page([("body", _body("delta", 2)), ("bold", "Capital Allocation"), ("body", _body("epsilon"))])
    pdf.output(str(path))
    return path


def test_layout_headings_by_size_bold_and_capitals(tmp_path):
    doc = _extract(_layout_pdf(tmp_path / "layout.pdf"))
    assert doc.stats["heading_source"] == "layout"
    secs = _sections(doc)
    assert [r.meta["section_path"] for r in secs] == [
        ["Annual Overview"], ["Annual Overview", "Regional Results"],
        ["Outlook"], ["Outlook", "RISK FACTORS"], ["Outlook", "Capital Allocation"]]
    assert doc.stats["headings"] == 5
    _check_chunks(doc, {"alpha": "Annual Overview", "beta": "Regional Results", "gamma": "Outlook",
                        "delta": "RISK FACTORS", "epsilon": "Capital Allocation"})
    _page_regions_ok(doc, [["alpha", "beta"], ["gamma", "delta"], ["epsilon"]])
    assert doc.title == "Annual Overview"


def test_no_headings_no_section_regions(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_title("Quarterly memo")
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, _body("alpha", 6))
    pdf.output(str(tmp_path / "plain.pdf"))
    doc = _extract(tmp_path / "plain.pdf")
    assert doc.stats["heading_source"] == "none" and doc.stats["headings"] == 0
    assert not _sections(doc)
    assert doc.title == "Quarterly memo"


# ---- table rows ----------------------------------------------------------------------------------------

# Rows as a filing's notes set them (ADOBE_2015_10K p. 94): a footnote mark in small raised type
# after a figure makes pdfium start a new line at the mark and another at the figure after it.
ROWS = [("Unrealized gains on available-for-sale securities", "8,237", "(1)", "2,542"),
        ("Total net unrealized gains", "7,628", "(2)", "(4,553)"),
        ("Cumulative translation adjustments", "(44,377)", "(3)", "(167,442)")]


def _rows_pdf(path: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, "The components of accumulated other comprehensive income were as follows. " * 2)
    y = 60.0
    for label, a, mark, b in ROWS:
        pdf.set_font("Helvetica", size=10)
        pdf.text(20, y, label)  # each cell a text object of its own at the row's baseline
        pdf.text(120, y, a)
        pdf.set_font("Helvetica", size=6)
        pdf.text(138, y - 2.8, mark)
        pdf.set_font("Helvetica", size=10)
        pdf.text(160, y, b)
        y += 8
    pdf.output(str(path))
    return path


def test_table_row_label_and_figures_on_one_line(tmp_path):
    import pypdfium2 as pdfium

    path = _rows_pdf(tmp_path / "rows.pdf")
    with pdfium.PdfDocument(str(path)) as raw_doc:
        plain = raw_doc[0].get_textpage().get_text_range()
    # the fixture is what the test is about: pdfium alone splits these rows
    assert not any(re.search(rf"{re.escape(label)}.*{re.escape(b)}", plain) for label, _, _, b in ROWS)
    doc = _extract(path)
    lines = doc.text.split("\n")
    for label, a, mark, b in ROWS:
        row = [ln for ln in lines if label in ln]
        assert len(row) == 1
        # a table's row: its cells apart (" | ") on one line
        assert row[0].replace(" | ", " ").split() == [*label.split(), a, mark, b], row[0]
    assert doc.stats["rows_joined"] >= len(ROWS)
    # the prose above the table stays as it was
    assert "The components of accumulated other comprehensive income were as follows." in doc.text


def test_junk_titles_fall_back_to_a_heading():
    from ragweedd.extract.pdf_layout import Heading, usable_title

    heads = [Heading(0, 0, 0, "Cover Page"), Heading(0, 10, 0, "FORM 10-K"), Heading(1, 0, 0, "Acme Corp"),
             Heading(1, 5, 1, "Part I")]
    for junk in ["Microsoft Word - x.docx", "0000004962-23-000006", "report_final.pdf", "  ", None, "Document"]:
        assert usable_title(junk, heads) == "Acme Corp", junk
    assert usable_title("Annual Report 2023", heads) == "Annual Report 2023"
    assert usable_title(None, [Heading(0, 0, 0, "Contents")]) is None
    cover = "FORM 10-K\nACME HOLDINGS, INC.\n(Exact name of registrant as specified in its charter)\nDelaware"
    assert usable_title("0000004962-23-000006", heads, cover) == "ACME HOLDINGS, INC."
    # the name is a logo: the caption has no line of text above it, and the bold lines of the cover
    # (the state, the address) are no title; the file's name says more than a guess
    logo = ("FORM 10-K\nCommission File Number 001-02217\n(Exact name of Registrant as specified in its charter)\n"
            "Delaware 58-0628465\n(State or other jurisdiction of incorporation or organization)\n"
            "One Acme Plaza, Atlanta, Georgia\n(Address of principal executive offices)\n")
    cover_heads = [Heading(0, 40, 0, "Delaware"), Heading(0, 90, 0, "One Acme Plaza, Atlanta, Georgia")]
    assert usable_title("Document", [*cover_heads, *heads], logo) is None
    assert usable_title("Document", [*cover_heads, *heads]) == "Delaware"  # what it was taken for


@pytest.mark.parametrize("depth", [1, 3])
def test_section_regions_nest_and_close(depth):
    from ragweedd.extract.pdf_layout import Heading, section_regions

    placed = [(0, Heading(0, 0, 0, "A")), (10, Heading(0, 10, depth, "A.1")), (20, Heading(0, 20, 0, "B")),
              (20, Heading(0, 20, depth, "B.1")), (30, Heading(1, 0, depth, "B.2"))]
    regions = section_regions(placed, 40)
    assert [(r.start, r.end, r.meta["section_path"]) for r in regions] == [
        (0, 10, ["A"]), (10, 20, ["A", "A.1"]), (20, 30, ["B", "B.1"]), (30, 40, ["B", "B.2"])]


def test_outline_is_capped():
    from ragweedd.extract import pdf_layout

    class Dest:
        def get_index(self):
            return 0

    class Bookmark:
        level = 0

        def get_title(self):
            return "Again"

        def get_dest(self):
            return Dest()

    class LoopingDoc:
        def __len__(self):
            return 1

        def get_toc(self, max_depth):
            assert max_depth <= pdf_layout.MAX_OUTLINE_DEPTH
            while True:  # an outline whose siblings loop
                yield Bookmark()

    assert len(pdf_layout.outline_entries(LoopingDoc())) == pdf_layout.MAX_OUTLINE


def test_headings_of_a_dropped_page_are_left_out_and_offsets_follow_the_stripped_text(tmp_path, monkeypatch):
    from ragweedd.extract import pdf as pdf_mod
    from ragweedd.extract.pdf_layout import Heading
    from ragweedd.extract.pdf_text import PdfText

    garbage = "~}|{ #$%&' ¤¤¤ ~}|{ #$%&' ¤¤¤ " * 20  # unreadable: dropped (OCR is off)
    texts = ["\n  Intro\nThe alpha division grew.", garbage, "Outlook\nThe gamma division grew."]
    heads = [Heading(0, 3, 0, "Intro"), Heading(1, 0, 0, "Noise"), Heading(2, 0, 1, "Outlook")]
    layer = PdfText(texts, [None] * 3, None, "pdfium", {}, heads, "outline")
    monkeypatch.setattr(pdf_mod, "read_pdf_text", lambda path: layer)
    path = tmp_path / "x.pdf"
    path.write_bytes(b"%PDF-1.4 stand-in")
    doc = pdf_mod.PdfExtractor().extract(path, NO_OCR)
    assert doc.stats["pages_dropped"] == 1 and doc.stats["headings"] == 2
    secs = _sections(doc)
    assert [(doc.text[r.start:r.start + 7], r.meta["section_path"]) for r in secs] == [
        ("Intro\nT", ["Intro"]), ("Outlook", ["Intro", "Outlook"])]
    assert [r.meta["page"] for r in doc.regions if "page" in r.meta] == [1, 3]


@pytest.mark.parametrize("line, expected", [
    ("Cash and cash equivalents.......................... $ 876,560 $ 1,117,400",
     "Cash and cash equivalents\t$ 876,560 $ 1,117,400"),
    ("Total liabilities . . . . . . . . 4,724,892", "Total liabilities\t4,724,892"),
    ("........ $ 93,307 $ 68,377", "\t$ 93,307 $ 68,377"),
    ("Item 1A. Risk Factors ........................ 14", "Item 1A. Risk Factors\t14"),
    ("Revenue grew... then fell.", "Revenue grew... then fell."),  # an ellipsis is prose
    ("1.2.3 and 3.14", "1.2.3 and 3.14"),
])
def test_dot_leaders_become_one_tab(line, expected):
    from ragweedd.extract.pdf_layout import collapse_leaders

    assert collapse_leaders(line) == expected
    # one line at a time: the leaders of one row never join it to the next
    assert collapse_leaders(f"{line}\nNext row ..... 7") == f"{expected}\nNext row\t7"


# ---- labels are real headings (issue 24) ---------------------------------------------------------------
# Labels once came from a filing's cover page ("§ 330 West 34th Street, New York, New York 10001",
# "§ SARAH ROGERS", "§ Pursuant to Section 13 or 15(d) ..."), from a bookmark of a later section
# that pointed at the balance sheet's page, and from a heading of the page after a chunk's start.

COVER_LINES = ["Pursuant to Section 13 or 15(d) of the Securities Exchange Act of 1934",
               "Date of Report (Date of earliest event reported): May 3, 2023",
               "330 West 34th Street, New York, New York 10001",
               "Washington, D.C. 20549",
               "SARAH ROGERS",
               "Three Months Ended December 31, 2022",
               "Adjusted Free Cash Flow 803 834"]


def _labels(doc: ExtractedDoc, params: ChunkParams = SMALL) -> list[tuple[list[int], str | None]]:
    return [(c["meta"].get("pages") or [], c["meta"].get("section")) for c in chunk_document(doc, params).chunks]


def _first_pages(doc: ExtractedDoc) -> dict[str, int]:
    """Each section's page: the page its region starts on."""
    pages = [r for r in doc.regions if "page" in r.meta]
    out: dict[str, int] = {}
    for r in _sections(doc):
        page = next(p.meta["page"] for p in pages if p.start <= r.start < p.end or r.start < p.start)
        out.setdefault(r.meta["section"], page)
    return out


def _never_a_later_page(doc: ExtractedDoc, params: ChunkParams = SMALL) -> None:
    first = _first_pages(doc)
    for pages, label in _labels(doc, params):
        if label is not None:
            assert first[label] <= pages[0], (pages, label)


def _filing_pdf(path: Path) -> Path:
    """An 8-K-like filing without an outline: a cover page in bold and large type whose lines are
    an address, a date, the form's sentence, then sections with headings in bold or large type, a
    contact block with a name over a job title, and a table with a bold period column head."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(False)

    def line(text: str, style: str = "", size: int = 11) -> None:
        pdf.set_font("Helvetica", style, size)
        pdf.cell(0, 7, text, new_x="LMARGIN", new_y="NEXT")

    def prose(marker: str, n: int = 3) -> None:
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, _body(marker, n), new_x="LMARGIN", new_y="NEXT")

    pdf.add_page()
    line("UNITED STATES", "B", 14)
    line("FORM 8-K", "B", 16)
    line(COVER_LINES[0], "B", 12)
    prose("cover", 1)
    line(COVER_LINES[1], "B", 12)
    prose("cover", 1)
    line(COVER_LINES[2], "B", 12)
    prose("cover", 1)
    line(COVER_LINES[3], "B", 12)
    prose("cover", 1)
    pdf.add_page()
    line("Item 5.07. Submission of Matters to a Vote of Security Holders.", "B", 12)
    prose("alpha")
    line("Results of Operations", "", 16)
    prose("beta")
    line("Investor Contacts", "B", 12)
    prose("gamma", 1)
    line(COVER_LINES[4], "B", 12)
    line("Senior Vice President of Corporate Finance", "", 11)
    line("(702) 730-3942 or investors@example.com", "", 11)
    prose("gamma", 1)
    pdf.add_page()
    line("Consolidated Balance Sheets", "", 16)
    prose("delta", 1)
    line(COVER_LINES[5], "B", 11)
    line("Revenue and other income of the company 4,000 3,000", "", 11)
    line(COVER_LINES[6], "B", 11)
    prose("delta", 2)
    pdf.output(str(path))
    return path


def test_cover_page_lines_addresses_names_and_dates_are_no_labels(tmp_path):
    doc = _extract(_filing_pdf(tmp_path / "filing.pdf"))
    assert doc.stats["heading_source"] == "layout"
    heads = [r.meta["section"] for r in _sections(doc)]
    assert "Item 5.07. Submission of Matters to a Vote of Security Holders." in heads
    assert {"Results of Operations", "Investor Contacts", "Consolidated Balance Sheets"} <= set(heads), heads
    labels = {label for _, label in _labels(doc)}
    for bad in COVER_LINES:
        assert bad not in heads and bad not in labels, bad
    # the balance sheet's chunks are labelled with its heading, the period and a row in bold aside
    for pages, label in _labels(doc):
        if pages and pages[0] == 3:
            assert label == "Consolidated Balance Sheets", (pages, label)
    _never_a_later_page(doc)


def _outline_filing_pdf(path: Path) -> Path:
    """An earnings release whose outline, like AMCOR_2023Q4_EARNINGS's, points three bookmarks at
    one page: "GAAP Statement of Cash Flows" and "GAAP Balance Sheet" abbreviate the headings
    printed there, "Pro Forma Statement of Income" is nowhere on it."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(False)
    pages = [[("Highlights", "Highlights of the Quarter", "alpha")],
             [("Financial Results", "Financial Results", "beta")],
             [("GAAP Statement of Cash Flows", "U.S. GAAP Condensed Consolidated Statements of Cash Flows (Unaudited)",
               "gamma"),
              ("GAAP Balance Sheet", "U.S. GAAP Condensed Consolidated Balance Sheets (Unaudited)", "delta"),
              ("Pro Forma Statement of Income", None, None)]]
    for entries in pages:
        pdf.add_page()
        for mark, heading, marker in entries:
            pdf.start_section(mark, level=0)
            if heading:
                pdf.set_font("Helvetica", "B", 12)
                pdf.cell(0, 8, heading, new_x="LMARGIN", new_y="NEXT")
                pdf.set_font("Helvetica", size=11)
                pdf.multi_cell(0, 6, _body(marker, 2), new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def test_outline_bookmarks_sit_at_their_headings_and_an_unplaceable_one_labels_nothing(tmp_path):
    doc = _extract(_outline_filing_pdf(tmp_path / "release.pdf"))
    assert doc.stats["heading_source"] == "outline"
    secs = _sections(doc)
    assert [r.meta["section"] for r in secs] == ["Highlights", "Financial Results", "GAAP Statement of Cash Flows",
                                                 "GAAP Balance Sheet"]
    # each abbreviated bookmark starts at the line it abbreviates
    assert doc.text.startswith("U.S. GAAP Condensed Consolidated Statements of Cash Flows", secs[2].start)
    assert doc.text.startswith("U.S. GAAP Condensed Consolidated Balance Sheets", secs[3].start)
    chunks = chunk_document(doc, SMALL).chunks
    for c in chunks:
        assert c["meta"].get("section") != "Pro Forma Statement of Income"
        if "delta" in c["text"] and "gamma" not in c["text"]:
            assert c["meta"]["section"] == "GAAP Balance Sheet", c
    _never_a_later_page(doc)


def test_an_outline_mostly_off_its_pages_gives_way_to_the_layout(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(False)
    for mark, heading, marker in [("Narrative", "Annual Overview", "alpha"),
                                  ("Cautionary Statements", "Regional Results", "beta"),
                                  ("Recon of Measures", "Capital Allocation", "gamma")]:
        pdf.add_page()
        pdf.start_section(mark, level=0)  # a bookmark whose title is not the page's
        pdf.set_font("Helvetica", size=18)
        pdf.cell(0, 10, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", size=11)
        pdf.multi_cell(0, 6, _body(marker), new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(tmp_path / "off.pdf"))
    doc = _extract(tmp_path / "off.pdf")
    assert doc.stats["heading_source"] == "layout" and doc.stats["outline_ignored"] == 3
    assert [r.meta["section"] for r in _sections(doc)] == ["Annual Overview", "Regional Results",
                                                           "Capital Allocation"]


def test_a_chunk_is_never_labelled_with_a_heading_of_a_later_page(tmp_path):
    """A chunk that starts on a page without a heading and runs into the next page's heading is
    not labelled with that heading: it is not in force where the chunk is cited from."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, "The preface of the report runs on this page.")
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.cell(0, 10, "Annual Overview", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", size=11)
    pdf.multi_cell(0, 6, _body("alpha", 4))
    pdf.output(str(tmp_path / "late.pdf"))
    doc = _extract(tmp_path / "late.pdf")
    assert [r.meta["section"] for r in _sections(doc)] == ["Annual Overview"]
    labels = _labels(doc)
    assert labels[0] == ([1, 2], None), labels  # the fixture: the first chunk runs into page 2
    assert all(label == "Annual Overview" for pages, label in labels[1:] if pages[0] == 2)
    _never_a_later_page(doc)
    # every fixture of this file keeps to the rule too
    for make in (_outline_pdf, _layout_pdf):
        _never_a_later_page(_extract(make(tmp_path / f"{make.__name__}.pdf")))

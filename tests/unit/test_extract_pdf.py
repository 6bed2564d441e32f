"""PDF text through pdfium with pypdf as the fallback, and OCR only where the text layer is really
missing or unreadable. Every PDF here is written by fpdf2 (and PIL for page images); the one
pypdf refuses gets, as an incremental update, the large structure tree a tagged filing carries."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from ragweedd.errors import ExtractionError  # noqa: E402
from ragweedd.extract.base import ExtractSettings  # noqa: E402
from ragweedd.extract.registry import extract_file  # noqa: E402
from tests.tools import require_tool  # noqa: E402

S = ExtractSettings()
NO_OCR = ExtractSettings(ocr_enabled=False)

# A balance sheet as SEC filings set it: labels run on dot leaders to columns of figures. Under 40 %
# of its characters are letters, which the old letters-ratio rule called garbage.
BALANCE_SHEET = [
    ("Cash and cash equivalents", "$ 876,560", "$ 1,117,400"),
    ("Short-term investments", "3,111,083", "2,622,091"),
    ("Trade receivables, net of allowances", "672,006", "591,800"),
    ("Deferred income taxes", "-", "95,279"),
    ("Prepaid expenses and other current assets", "161,802", "175,758"),
    ("Total current assets", "4,821,451", "4,602,328"),
    ("Property and equipment, net", "787,421", "785,123"),
    ("Goodwill", "5,366,881", "4,721,962"),
    ("Purchased and other intangibles, net", "510,007", "469,662"),
    ("Investment in lease receivable", "80,439", "80,439"),
    ("Other assets", "159,832", "126,315"),
    ("Total assets", "$ 11,726,472", "$ 10,785,829"),
    ("Trade payables", "$ 93,307", "$ 68,377"),
    ("Accrued expenses", "678,364", "683,866"),
    ("Debt and capital lease obligations", "-", "603,229"),
    ("Accrued restructuring", "1,520", "17,120"),
    ("Income taxes payable", "6,165", "23,920"),
    ("Deferred revenue", "1,434,200", "1,097,923"),
    ("Total current liabilities", "2,213,556", "2,494,435"),
]


def _table_pdf(path: Path) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 11)
    pdf.cell(0, 6, "CONSOLIDATED BALANCE SHEETS", new_x="LMARGIN", new_y="NEXT", align="C")
    pdf.set_font("Helvetica", size=9)
    pdf.cell(0, 5, "(In thousands)", new_x="LMARGIN", new_y="NEXT", align="C")
    pdf.cell(120, 5, "")
    pdf.cell(35, 5, "2015", align="R")
    pdf.cell(35, 5, "2014", align="R", new_x="LMARGIN", new_y="NEXT")
    for label, a, b in BALANCE_SHEET:
        text = label
        while pdf.get_string_width(text + ".") < 118:
            text += "."
        pdf.cell(120, 5, text)
        pdf.cell(35, 5, a, align="R")
        pdf.cell(35, 5, b, align="R", new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


def _text_pdf(pages: list[str]) -> bytes:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


def _with_large_structure_tree(data: bytes, entries: int = 60_000) -> bytes:
    """Append an incremental update giving the catalog a structure tree whose parent tree holds
    2 x ``entries`` array elements, as large tagged documents do: valid for poppler and pdfium,
    over pypdf's limit of 100,000 elements per array."""
    root = int(re.search(rb"/Root (\d+) 0 R", data).group(1))
    catalog = re.search(rb"\n%d 0 obj\s*(<<.*?>>)\s*endobj" % root, data, re.S).group(1)
    prev = int(re.findall(rb"startxref\s+(\d+)", data)[-1])
    size = int(re.search(rb"/Size (\d+)", data).group(1))
    nums = b" ".join(b"%d []" % i for i in range(entries))
    body = catalog[:-2] + b" /StructTreeRoot << /Type /StructTreeRoot /ParentTree << /Nums [" + nums + b"] >> >> >>"
    obj_at = len(data) + 1
    update = b"\n%d 0 obj\n" % root + body + b"\nendobj\n"
    xref_at = len(data) + len(update)
    update += b"xref\n0 1\n0000000000 65535 f \n%d 1\n%010d 00000 n \n" % (root, obj_at)
    update += b"trailer\n<< /Size %d /Root %d 0 R /Prev %d >>\nstartxref\n%d\n%%%%EOF\n" % (size, root, prev, xref_at)
    return data + update


def _region_pages(doc) -> dict[int, dict]:
    return {r.meta["page"]: r.meta for r in doc.regions if "page" in r.meta}


def test_table_page_with_dot_leaders_keeps_its_text_layer(tmp_path):
    p = _table_pdf(tmp_path / "balance.pdf")
    for settings in (S, NO_OCR):
        doc = extract_file(p, settings)
        assert doc.ocr_type is None and doc.stats["pages_ocr_tried"] == 0, settings
        assert doc.stats["pages_need_ocr"] == 0 and doc.stats["pages_dropped"] == 0
        assert _region_pages(doc) == {1: {"page": 1}}
        # every row keeps its label and its figures on one line, each figure under its year
        assert "Cash and cash equivalents | 2015: $876,560 | 2014: $1,117,400" in doc.text, doc.text[:300]
        assert "Total assets | 2015: $11,726,472 | 2014: $10,785,829" in doc.text
        assert "...." not in doc.text


def test_pdf_that_pypdf_refuses_is_read_through_pdfium(tmp_path):
    pdfinfo = require_tool("pdfinfo")
    p = tmp_path / "tagged.pdf"
    p.write_bytes(_with_large_structure_tree(_text_pdf(["Lighthouse keepers log the weather.",
                                                        "Harbour pilots guide the ships in."])))
    import subprocess

    assert "Pages:           2" in subprocess.run([pdfinfo, str(p)], capture_output=True, text=True).stdout
    doc = extract_file(p, S)
    assert doc.stats["pdf_engine"] == "pdfium" and doc.stats["pages"] == 2
    i = doc.text.index("Harbour pilots")
    assert [r.meta for r in doc.regions if r.start <= i < r.end] == [{"page": 2}]


def test_file_pdfium_cannot_open_falls_back_to_pypdf(tmp_path):
    # Bytes before the header (a mail gateway's or web server's banner): pdfium gives up after
    # 1 KB, pypdf (and poppler) find the header further on.
    p = tmp_path / "banner.pdf"
    p.write_bytes(b"X" * 2000 + _text_pdf(["Tide tables for the northern harbour."]))
    doc = extract_file(p, S)
    assert doc.stats["pdf_engine"] == "pypdf" and "Data format error" in doc.stats["pdfium_error"]
    assert "Tide tables for the northern harbour." in doc.text and _region_pages(doc) == {1: {"page": 1}}


def test_owner_password_only_pdf_is_read(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_encryption(owner_password="owner-secret")
    pdf.set_font("Helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "Owner password only: the tide tables are public.")
    p = tmp_path / "owner.pdf"
    pdf.output(str(p))
    assert "the tide tables are public" in extract_file(p, S).text


def test_damaged_pdf_names_the_file(tmp_path):
    p = tmp_path / "half.pdf"
    p.write_bytes(_text_pdf(["Some text on a page."])[:200])
    with pytest.raises(ExtractionError, match="half.pdf: not a readable PDF"):
        extract_file(p, S)


def _image_pdf(path: Path, caption: str, image) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_auto_page_break(False)
    pdf.set_font("Helvetica", size=12)
    pdf.add_page()
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    buf.seek(0)
    pdf.image(buf, x=10, y=10, w=190)
    pdf.set_xy(10, 270)
    pdf.cell(0, 8, caption)
    pdf.add_page()
    pdf.multi_cell(0, 8, "The second page explains the figure in plain words for every reader.")
    pdf.output(str(path))
    return path


def test_ocr_replaces_a_short_layer_only_when_it_reads_better(tmp_path):
    require_tool("pdftoppm")
    require_tool("tesseract")
    from PIL import Image, ImageDraw, ImageFont

    # A figure with nothing to read (a smooth grey ramp): OCR finds nothing, the caption stays.
    ramp = Image.linear_gradient("L").resize((600, 400))
    doc = extract_file(_image_pdf(tmp_path / "figure.pdf", "Figure 3", ramp), S)
    assert "Figure 3" in doc.text and _region_pages(doc)[1] == {"page": 1}
    assert doc.stats["pages_ocr_tried"] == 1 and doc.stats["pages_ocr"] == 0

    # A scanned memo under a short typed stamp: OCR reads far more, and its text replaces the layer.
    img = Image.new("L", (1700, 1400), 255)
    draw = ImageDraw.Draw(img)
    try:
        font = ImageFont.truetype("DejaVuSans.ttf", 56)
    except OSError:
        font = ImageFont.load_default(size=56)
    for k, line in enumerate(["Invoice number 4471", "Payable to the harbour", "master within thirty days"]):
        draw.text((120, 200 + k * 110), line, fill=0, font=font)
    doc = extract_file(_image_pdf(tmp_path / "memo.pdf", "Copy", img), S)
    assert doc.stats["pages_ocr"] == 1 and _region_pages(doc)[1] == {"page": 1, "ocr": True}
    assert "4471" in doc.text and "harbour" in doc.text


def test_blank_page_is_not_ocrd(tmp_path):
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "A report whose next page is left blank on purpose, as printed reports do.")
    pdf.add_page()
    pdf.cell(0, 8, "2")
    p = tmp_path / "blank.pdf"
    pdf.output(str(p))
    doc = extract_file(p, S)
    assert _region_pages(doc) == {1: {"page": 1}, 2: {"page": 2}}
    assert doc.stats["pages_need_ocr"] == 0 and doc.ocr_type is None

"""Every format of DESIGN §5 through the one registry, on real files made by independent writers
(tests/data/make_fixtures.py): the text comes out, and so does its provenance (page, section,
sheet/rows, time range, member)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragweedd.errors import ToolMissingError  # noqa: E402
from ragweedd.extract.base import Extractor, ExtractSettings  # noqa: E402
from ragweedd.extract.registry import all_extractors, extract_file, extractor_for  # noqa: E402
from tests.conftest_extract import fx, speech  # noqa: E402,F401
from tests.tools import require_tool  # noqa: E402

S = ExtractSettings()


def metas(doc, key):
    return [r.meta[key] for r in doc.regions if key in r.meta]


def region_at(doc, needle):
    """Merged meta of every region covering the first occurrence of `needle`."""
    i = doc.text.index(needle)
    out = {}
    for r in doc.regions:
        if r.start <= i < r.end:
            out.update(r.meta)
    return out


def test_regions_lie_inside_the_text(fx):
    for key in ("md", "rst", "html", "docx", "odt", "xlsx", "xls", "csv", "pdf", "zip"):
        doc = extract_file(fx[key], S)
        assert doc.text.strip(), key
        for r in doc.regions:
            assert 0 <= r.start < r.end <= len(doc.text), (key, r)


def test_pdf_pages_in_order(fx):
    doc = extract_file(fx["pdf"], S)
    assert doc.kind == "pdf" and doc.ocr_type is None
    assert metas(doc, "page") == [1, 2, 3]
    assert region_at(doc, "krill populations") == {"page": 2}
    assert doc.stats["pages"] == 3


def test_scanned_pdf_is_ocrd(fx):
    require_tool("pdftoppm")
    require_tool("tesseract")
    doc = extract_file(fx["pdf_scanned"], S)
    assert doc.ocr_type == "tesseract"
    assert "invoice" in doc.text.lower() and "4471" in doc.text
    assert doc.regions[0].meta == {"page": 1, "ocr": True}


def test_mixed_pdf_ocrs_only_the_scanned_page(fx):
    require_tool("pdftoppm")
    require_tool("tesseract")
    doc = extract_file(fx["pdf_mixed"], S)
    assert doc.ocr_type == "tesseract:partial"
    assert region_at(doc, "humpback") == {"page": 1}
    assert region_at(doc, "4471") == {"page": 2, "ocr": True}


def test_scanned_pdf_without_ocr_tools_says_what_to_install(fx):
    with pytest.raises(ToolMissingError, match="no-such-tesseract") as ei:
        extract_file(fx["pdf_scanned"], ExtractSettings(tess_bin="no-such-tesseract"))
    assert "tesseract-ocr" in str(ei.value)


def test_mixed_pdf_without_ocr_keeps_text_pages(fx):
    doc = extract_file(fx["pdf_mixed"], ExtractSettings(ocr_enabled=False))
    assert "humpback" in doc.text and "4471" not in doc.text and doc.ocr_type is None


def test_docx_headings_become_sections(fx):
    doc = extract_file(fx["docx"], S)
    assert doc.title == "Beekeeping Handbook"
    assert region_at(doc, "queen cells")["section"] == "Swarm Control"
    assert region_at(doc, "three kilometres")["section"] == "Beekeeping Handbook"
    assert "Oxalic acid treatment" in doc.text  # table cells


def test_odt_text_and_sections(fx):
    doc = extract_file(fx["odt"], S)
    assert "Use sharp bypass secateurs" in doc.text  # <text:s/> kept as a space
    assert region_at(doc, "secateurs")["section"] == "Tools"
    assert doc.title == "Orchard Pruning"


def test_markdown_sections_atx_and_setext_not_fenced(fx):
    doc = extract_file(fx["md"], S)
    assert metas(doc, "section") == ["Solar Panels", "Installation Notes", "Setext Heading"]
    assert region_at(doc, "stainless bolts")["section"] == "Installation Notes"
    assert region_at(doc, "inverter")["section"] == "Setext Heading"


def test_rst_sections(fx):
    doc = extract_file(fx["rst"], S)
    assert metas(doc, "section") == ["Bicycle Maintenance", "Brakes"]
    assert region_at(doc, "brake pads")["section"] == "Brakes"


def test_source_code_is_text(fx):
    doc = extract_file(fx["py"], S)
    assert "def kepler_period" in doc.text and doc.kind == "text"


def test_html_strips_script_style_noscript_keeps_title(fx):
    doc = extract_file(fx["html"], S)
    assert doc.title == "Volcano Field Guide"
    assert doc.text.startswith("Volcano Field Guide")
    for hidden in ("SHOULD_NOT_APPEAR", "secretstyle", "NOSCRIPT_TEXT", "trackingPixel"):
        assert hidden not in doc.text
    assert "Basalt lava flows are fluid and travel long distances." in doc.text  # inline tags stay in line
    assert region_at(doc, "Evacuation")["section"] == "Pyroclastic Density Currents"


def test_svg_text_nodes(fx):
    doc = extract_file(fx["svg"], S)
    for w in ("Greenland breeding grounds", "Antarctic", "feeding waters", "Arctic tern"):
        assert w in doc.text
    assert "font:" not in doc.text and doc.title == "Migration Diagram"


def test_rtf_via_unrtf(fx):
    require_tool("unrtf")
    doc = extract_file(fx["rtf"], S)
    assert "Fresnel lenses focus the beam" in doc.text
    assert "###" not in doc.text and "\\par" not in doc.text


def test_tex_via_detex_does_not_follow_input(fx):
    require_tool("detex")
    doc = extract_file(fx["tex"], S)
    assert "basal sliding" in doc.text and "\\section" not in doc.text
    assert "root:" not in doc.text  # \input{/etc/passwd} was not followed
    assert doc.title == "Glacier Dynamics"
    assert region_at(doc, "under tension")["section"] == "Crevasses"


def test_xlsx_sheets_and_row_ranges(fx):
    doc = extract_file(fx["xlsx"], S)
    # the header row heads each value of the rows under it, and is no row of its own
    assert "# Sheet: Inventory" in doc.text and "anchor chain | quantity: 12 | warehouse: Rotterdam" in doc.text
    assert "item\tquantity" not in doc.text and "item | quantity" not in doc.text
    assert region_at(doc, "mooring buoy") == {"sheet": "Inventory", "row_start": 2, "row_end": 3,
                                              "table_title": "Inventory"}
    # two columns of words: nothing tells a header from a row, so "name | country" stays a row
    assert "name | country\nsupplier0 | Denmark" in doc.text
    r = region_at(doc, "supplier25 |")
    assert r["sheet"] == "Suppliers" and r["row_start"] <= 27 <= r["row_end"]  # supplier25 is on row 27


def test_xls_via_xlrd(fx):
    doc = extract_file(fx["xls"], S)
    assert "Dobsonian reflector | aperture_mm: 254" in doc.text  # 254.0 shown as a whole number
    assert region_at(doc, "Apochromatic")["sheet"] == "Telescopes"


def test_csv_dialect_sniffed(fx):
    doc = extract_file(fx["csv"], S)
    lines = doc.text.splitlines()
    assert lines[0] == "Vienna | country: Austria | population: 1900000 | river: Danube"
    # a quoted delimiter is kept whole
    assert lines[2] == "Cologne; Rhine city | country: Germany | population: 1080000 | river: Rhine"
    assert region_at(doc, "Budapest") == {"row_start": 2, "row_end": 4}


def test_json_pretty_printed(fx):
    doc = extract_file(fx["json"], S)
    assert '"recipe": "Sourdough bread"' in doc.text and '\n  "ingredients": [\n' in doc.text


def test_zip_members_with_provenance(fx):
    doc = extract_file(fx["zip"], S)
    assert region_at(doc, "krill") == {"member": "whales.pdf", "page": 2}
    assert region_at(doc, "stainless bolts") == {"member": "notes/notes.md", "section": "Installation Notes",
                                                  "line": 1}  # a text member keeps its own lines
    assert region_at(doc, "queen cells") == {"member": "nested/inner.zip/docs/bees.docx", "section": "Swarm Control"}
    assert "File: whales.pdf" in doc.text
    assert doc.stats["members_skipped"] == ["img/picture.png"]


@pytest.mark.parametrize("key", ["wav", "mp3"])
def test_speech_is_transcribed_with_timestamps(speech, key):
    doc = extract_file(speech[key], S)
    low = doc.text.lower()
    assert doc.kind == "av"
    for word in ("budget", "meeting", "solar", "bicycle"):
        assert word in low, doc.text
    assert doc.regions and all(r.meta["t_end"] >= r.meta["t_start"] >= 0 for r in doc.regions)
    assert doc.regions[-1].meta["t_end"] > 2.0  # the sentence lasts ~4 s
    assert doc.stats["engine"] == "faster-whisper"


def test_whisper_cli_configured_but_missing_is_a_clear_error(speech):
    with pytest.raises(ToolMissingError, match="whisper"):
        extract_file(speech["wav"], ExtractSettings(whisper_model="/nonexistent/ggml-base.en.bin"))


def test_registry_by_lowercase_extension():
    assert extractor_for(Path("A.PDF")).name == "pdf"
    assert extractor_for(Path("x.Md")).name == "text"
    assert extractor_for(Path("Makefile")).name == "text"
    assert extractor_for(Path("photo.jpg")) is None
    assert extractor_for(Path("noext")) is None
    for ext in (".pdf", ".docx", ".odt", ".txt", ".md", ".rst", ".py", ".html", ".htm", ".svg", ".rtf", ".tex",
                ".mp3", ".mp4", ".wav", ".m4a", ".webm", ".ogg", ".zip", ".xlsx", ".xls", ".csv", ".json",
                ".js", ".ts", ".go", ".rs", ".c", ".h", ".cpp", ".java", ".rb", ".sh", ".toml", ".yaml",
                ".yml", ".ini", ".cfg", ".sql", ".css"):
        assert extractor_for(Path("f" + ext)) is not None, ext


def test_every_extractor_follows_the_protocol():
    exs = all_extractors()
    assert len(exs) >= 14
    seen: set[str] = set()
    for ex in exs:
        assert isinstance(ex, Extractor)
        assert all(e.startswith(".") and e == e.lower() for e in ex.extensions)
        assert not (seen & set(ex.extensions)), ex.name
        seen |= set(ex.extensions)

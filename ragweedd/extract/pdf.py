"""PDF: the text layer page by page (pdfium, pypdf as fallback: pdf_text.py); a page whose layer is
unreadable, or missing on a page that holds an image, is OCR'd (DESIGN §5; the measure: text_quality.py).

OCR renders one page at a time (``pdftoppm -r DPI -f N -l N``) into a scratch directory and reads
it with tesseract, so a mixed PDF (typed pages + scanned pages) keeps both, and memory stays at one
page image. Every page becomes a region ``{"page": n}`` (plus ``"ocr": True`` when OCR'd).

Tables found on a page's text layer (pdf_tables.py) are laid out as tables from the other formats
are (tables.py): one line a row, each figure with its column's header, the table's title (the
statement name and units above it) and rows in the regions ``{"table", "table_title", "row_start",
"row_end"}``; they stand where their lines stood, the rest of the page as it was.

Headings (the outline, else the layout heuristic: pdf_layout.py) become a second set of regions
``{"section", "section_path"}``, each from its heading to the next one, across pages: ``section``
is the deepest heading the text sits under, ``section_path`` the headings from the outermost down
to it. A page that was OCR'd keeps the outline's headings (at the page's start) but not the
layout's: those were found in the text layer OCR replaced; a dropped page keeps none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragweedd.errors import ExtractionError, ExtractionSkipped
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, Region, ToolRequirement
from ragweedd.extract.pdf_layout import Heading, collapse_leaders, section_regions, usable_title
from ragweedd.extract.pdf_text import read_pdf_text
from ragweedd.extract.sniff import require_nonempty
from ragweedd.extract.tables import RawTable, add_table, lay_out
from ragweedd.extract.text_builder import TextBuilder, finish
from ragweedd.extract.text_quality import TextQuality, assess
from ragweedd.extract.tools import TOOL_PACKAGES, run_tool, scratch_dir, tool_path
from ragweedd.logging import lazy_logger
from ragweedd.statements import headed_statements, statement_title

log = lazy_logger(__name__)


def _wants_ocr(q: TextQuality, has_image: bool | None) -> bool:
    """An unreadable layer is always worth OCR (the glyphs render fine); a missing one only when the
    page holds an image, or when we could not tell: a blank or one-line page has nothing to read."""
    return q.unreadable or (q.missing and has_image is not False)


def ocr_page(path: Path, page_no: int, settings: ExtractSettings, work: Path) -> str:
    """Render one page with pdftoppm and read it with tesseract."""
    prefix = work / f"p{page_no}"
    run_tool(["pdftoppm", "-r", str(settings.ocr_dpi), "-f", str(page_no), "-l", str(page_no), "-gray",
              "-png", "-singlefile", str(path), str(prefix)], path=path, settings=settings)
    img = prefix.with_suffix(".png")
    if not img.exists():
        raise ExtractionError(f"{path}: pdftoppm produced no image for page {page_no}")
    try:
        out = run_tool([settings.tess_bin, str(img), "stdout"], path=path, settings=settings)
    finally:
        img.unlink(missing_ok=True)
    return out.decode("utf-8", "replace")


def _add_page(tb: TextBuilder, text: str, tables: list[tuple[int, int, RawTable]],
               numbered: int) -> list[tuple[int, int, int, int, bool]]:
    """Add one page's text to ``tb``, each table (pdf_tables.py) laid out as header-carrying rows in
    place of the lines it was read from, numbered on from ``numbered``. Returns the pieces the page
    became: (start, end) in the page's text, (start, end) in the document, and whether it is a
    table; empty when the page added nothing."""
    pieces: list[tuple[int, int, int, int, bool]] = []
    pos = 0
    sep = "\n\n"
    for k, (a, b, raw) in enumerate(tables + [(len(text), len(text), None)]):
        prose = text[pos:a]
        body = prose.strip()
        if body:
            before = tb.length
            tb.add(body, None, sep=sep)
            if tb.length > before:
                start = tb.length - len(body)
                at = pos + prose.index(body)
                pieces.append((at, at + len(body), start, tb.length, False))
                sep = "\n"
        if raw is None:
            break
        laid = lay_out(raw)
        before = tb.length
        if raw.before.strip():
            # the lines over the table, its title when they read as one (add_table takes it in)
            tb.add(laid.before or " ".join(raw.before.split()), None, sep=sep)
            sep = "\n"
        add_table(tb, numbered + k + 1, laid, sep=sep)
        if tb.length > before:
            start = before + (len(sep) if before else 0)
            pieces.append((a, b, start, tb.length, True))
            sep = "\n"
        pos = b
    return pieces


STATEMENT_HEADING_SLACK = 400  # characters: a heading this far above a statement's table is its own


def _statement_headings(regions: list[Region], placed: list[tuple[int, Heading]]) -> list[tuple[int, Heading]]:
    """A heading for each table whose title names a financial statement ("Consolidated Statements
    of Cash Flows") when no heading at or just above the table names it: statements are often set
    in body type, or their bookmark points a page off, and the section in force is then the
    statement before, which a chunk of this one would be cited under. The heading is one level
    below the deepest found, so the next heading of any level ends it."""
    level = max((h.level for _, h in placed), default=0) + 1
    out: list[tuple[int, Heading]] = []
    for r in sorted((r for r in regions if "table" in r.meta and "row_start" not in r.meta), key=lambda r: r.start):
        name = statement_title(str(r.meta.get("table_title") or ""))
        if name is None:
            continue
        kinds = headed_statements(name)
        near = [h for at, h in placed + out if r.start - STATEMENT_HEADING_SLACK <= at <= r.start + 1]
        if any(headed_statements(h.title) & kinds for h in near):
            continue
        out.append((r.start, Heading(page=-1, offset=0, level=level, title=name)))
    return out


def _map_offset(pieces: list[tuple[int, int, int, int, bool]], h: Heading, text: str) -> int:
    """Where heading ``h`` (at its offset in its page's text) is in the document ``text``: in a
    table, at the row that holds its title (a segment's name over its rows), else the table's start."""
    out = pieces[0][2]
    for a, b, start, end, table in pieces:
        if h.offset < a:
            break
        if not table:
            out = start + min(h.offset, b) - a
            continue
        out = start
        if h.offset < b:
            at = text.find(h.title, start, end)
            if at >= 0:
                out = at
    return out


class PdfExtractor:
    name = "pdf"
    extensions = (".pdf",)

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        require_nonempty(path)
        layer = read_pdf_text(path)
        texts = layer.texts
        n_pages = len(texts)
        if n_pages == 0:
            raise ExtractionSkipped(f"{path}: PDF has no pages")
        quality = [assess(t) for t in texts]
        need = [i for i, q in enumerate(quality) if _wants_ocr(q, layer.has_image[i])]
        ocr_done: set[int] = set()
        ocr_tried = 0
        can_ocr = settings.ocr_enabled and tool_path("pdftoppm") and tool_path(settings.tess_bin)
        if need and can_ocr:
            with scratch_dir(settings, "ragweed-ocr-") as work:
                for i in need:
                    got = collapse_leaders(ocr_page(path, i + 1, settings, work))
                    ocr_tried += 1
                    # OCR replaces the layer only when it reads better (text_quality.score).
                    if assess(got).score > quality[i].score:
                        texts[i] = got
                        ocr_done.add(i)
        elif need and settings.ocr_enabled:
            missing = [t for t in ("pdftoppm", settings.tess_bin) if not tool_path(t)]
            log.warning("pdf_ocr_unavailable", file=str(path), pages=len(need), missing=missing)
            if len(need) == n_pages and not any(t.strip() for t in texts):
                from ragweedd.errors import ToolMissingError

                pkgs = ", ".join(TOOL_PACKAGES["pdftoppm" if t == "pdftoppm" else "tesseract"] for t in missing)
                raise ToolMissingError(f"{path}: PDF has no text layer and OCR is unavailable "
                                       f"({', '.join(missing)} missing)",
                                       hint=f"install {pkgs} (or point tess_bin at tesseract)")
        tb = TextBuilder()
        dropped = 0
        # per kept page: where each piece of its text went in the document, for the headings
        page_map: dict[int, list[tuple[int, int, int, int, bool]]] = {}
        n_tables = 0
        for i, t in enumerate(texts):
            if i not in ocr_done and quality[i].unreadable:
                dropped += 1
                continue  # an unreadable layer OCR could not replace: indexing it would only add noise
            meta: dict[str, Any] = {"page": i + 1}
            if i in ocr_done:
                meta["ocr"] = True
            found = layer.tables[i] if i not in ocr_done and i < len(layer.tables) else []
            pieces = _add_page(tb, t, found, n_tables)
            n_tables += len(found)
            if pieces:
                tb.regions.append(Region(pieces[0][2], tb.length, meta))
                page_map[i] = pieces
        placed = []
        text = tb.text()
        for h in layer.headings:
            if h.page not in page_map or (h.page in ocr_done and layer.heading_source != "outline"):
                continue
            pieces = page_map[h.page]
            placed.append((pieces[0][2] if h.page in ocr_done else _map_offset(pieces, h, text), h))
        placed += _statement_headings(tb.regions, placed)
        sections = section_regions(placed, tb.length)
        ocr_type = None
        if ocr_done:
            ocr_type = "tesseract" if len(ocr_done) == n_pages else "tesseract:partial"
        stats = {"pages": n_pages, "pages_need_ocr": len(need), "pages_ocr_tried": ocr_tried,
                 "pages_ocr": len(ocr_done), "pages_dropped": dropped, "pdf_engine": layer.engine, **layer.stats,
                 "tables": n_tables, "headings": len(placed),
                 "heading_source": layer.heading_source if placed else "none"}
        title = usable_title(layer.title, [h for _, h in placed], "\n".join(texts[:2]))
        doc = ExtractedDoc(text=tb.text(), kind="pdf", regions=tb.regions + sections, ocr_type=ocr_type,
                           title=title, extractor=self.name, stats=stats)
        return finish(doc, path, "text (text layer empty and OCR found nothing)")

    def requirements(self) -> list[ToolRequirement]:
        return [
            ToolRequirement("pypdfium2", "pypdfium2 (pip; installed with ragweedd)", optional=True, kind="python",
                            purpose="fast PDF text (without it pypdf reads PDFs, about ten times slower)"),
            ToolRequirement("pdftoppm", TOOL_PACKAGES["pdftoppm"], optional=True, purpose="OCR of scanned pages"),
            ToolRequirement("tesseract", TOOL_PACKAGES["tesseract"], optional=True, purpose="OCR of scanned pages"),
        ]

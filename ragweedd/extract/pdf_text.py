"""A PDF's text layer, page by page: pdfium first, pypdf when pdfium cannot open the file.

pdfium (pypdfium2, the engine of Chrome's viewer) reads the filings pypdf refuses (pypdf's anti-DoS
limit of 100,000 array elements turned away valid SEC 10-Qs whose page tree it could not walk),
about ten times faster, and with more of their text. pypdf stays for what pdfium will not open: a
file pdfium calls damaged may still be readable by pypdf's lenient parser, and an encrypted file
gets pypdf's empty-password decryption and its clear "needs a password" error.

The pdfium path also reads each page's lines with their boxes (and, for a file without an
outline, their type) to join table rows pdfium split and to find headings: pdf_layout.py. The
pypdf fallback reads text only (no headings, rows as pypdf gives them).

Both libraries are imported inside the functions: ``ragweedctl`` and the sandbox child must start
without them. pdfium objects are not thread-safe; extraction runs single-threaded in the sandbox
child, and every document, page and text page is closed as soon as it has been read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragweedd.errors import ExtractionError
from ragweedd.extract import pdf_layout
from ragweedd.extract.pdf_layout import Heading
from ragweedd.extract.tables import RawTable
from ragweedd.logging import lazy_logger

log = lazy_logger(__name__)

# Pages with fewer characters than this are asked whether they hold an image (a cheap test that
# covers every page text_quality can call "missing": that needs under 16 readable characters).
_SHORT_PAGE_CHARS = 400


@dataclass
class PdfText:
    texts: list[str]  # one per page, in page order
    # Per page: whether it holds an image (None when unknown: only asked of pages with little text).
    has_image: list[bool | None]
    title: str | None = None
    engine: str = "pdfium"
    stats: dict = field(default_factory=dict)
    headings: list[Heading] = field(default_factory=list)  # in reading order, offsets into texts
    heading_source: str = "none"  # "outline" | "layout" | "none"
    # Per page: the tables found on it, as (start, end) in its text and the table (pdf_tables.py)
    tables: list[list[tuple[int, int, RawTable]]] = field(default_factory=list)


class _PdfiumCannotOpen(ExtractionError):
    """pdfium cannot read this file (or is not installed): pypdf is tried next."""


def read_pdf_text(path: Path) -> PdfText:
    """Every page's text layer; ExtractionError when neither engine can read the file."""
    try:
        return _read_pdfium(path)
    except _PdfiumCannotOpen as e:
        log.info("pdf_pdfium_fallback", file=str(path), reason=str(e))
        out = _read_pypdf(path)
        out.stats["pdfium_error"] = str(e)
        return out


def _read_pdfium(path: Path) -> PdfText:
    try:
        import pypdfium2 as pdfium
    except ImportError as e:  # a broken install still reads PDFs, slower
        raise _PdfiumCannotOpen(f"pypdfium2 is not importable: {e}") from None
    try:
        doc = pdfium.PdfDocument(str(path))
    except pdfium.PdfiumError as e:
        raise _PdfiumCannotOpen(str(e)) from None
    try:
        import pypdfium2.raw as raw

        n = len(doc)
        texts: list[str] = []
        has_image: list[bool | None] = []
        layouts: list[pdf_layout.PageLayout] = []
        tables: list[list[tuple[int, int, RawTable]]] = []
        failed = joined = 0
        # An outline of two or more bookmarks gives the headings; without one the type of every
        # line is read too (two more ctypes calls a line) for the layout heuristic, and so it is,
        # in a second pass, when most bookmark titles are not on their pages (outline_trusted).
        outline = pdf_layout.outline_entries(doc)
        with_fonts = len(outline) < 2
        for i in range(n):
            try:
                page = doc[i]
            except pdfium.PdfiumError as e:
                # One page pdfium cannot load becomes an empty layer: OCR (poppler) may still read it.
                log.warning("pdf_page_load_failed", file=str(path), page=i + 1, error=str(e))
                texts.append("")
                has_image.append(None)
                tables.append([])
                layouts.append(pdf_layout.PageLayout(""))
                failed += 1
                continue
            layout = pdf_layout.PageLayout("")
            try:
                textpage = page.get_textpage()
                try:
                    layout = pdf_layout.read_page(textpage, raw, with_fonts)
                finally:
                    textpage.close()
                text = layout.text
                joined += layout.rows_joined
                # Only a page with little text is asked about images: a scanned page has an empty
                # layer and an image, a blank or a short page has neither and is not worth OCR.
                has_image.append(_has_image(page, pdfium) if len(text) < _SHORT_PAGE_CHARS else None)
            except pdfium.PdfiumError as e:
                log.warning("pdf_page_text_failed", file=str(path), page=i + 1, error=str(e))
                text = ""
                layout = pdf_layout.PageLayout("")  # no headings from a page whose text is dropped
                has_image.append(None)
                failed += 1
            finally:
                page.close()
            texts.append(text)
            tables.append(pdf_layout.table_spans(layout))
            layouts.append(layout if with_fonts else pdf_layout.PageLayout(""))
        title = _pdfium_title(doc)
        headings: list[Heading] = []
        source = "none"
        if not with_fonts:
            headings, found = pdf_layout.place_outline(outline, texts)
            source = "outline"
            if not pdf_layout.outline_trusted(outline, found):
                # The outline is mostly wrong: read the type of the lines after all (a second pass,
                # only for such files) and take the layout's headings.
                layouts = [_layout_with_fonts(doc, i, pdfium, raw) for i in range(n)]
                # headings' offsets are into the page texts read first: a page read otherwise gives none
                layouts = [lay if lay.text == texts[i] else pdf_layout.PageLayout("")
                           for i, lay in enumerate(layouts)]
                headings, source = [], "none"
                with_fonts = True
        if with_fonts:
            headings = pdf_layout.layout_headings(layouts)
            source = "layout" if headings else "none"
    finally:
        doc.close()
    out = PdfText(texts, has_image, title, "pdfium", {"pages_failed": failed, "rows_joined": joined})
    out.headings, out.heading_source = headings, source
    out.tables = tables
    if outline and source != "outline":
        out.stats["outline_ignored"] = len(outline)
    return out


def _layout_with_fonts(doc: Any, i: int, pdfium: Any, raw: Any) -> pdf_layout.PageLayout:
    """Page ``i``'s lines with their type; an empty layout for a page pdfium cannot read."""
    try:
        page = doc[i]
    except pdfium.PdfiumError:
        return pdf_layout.PageLayout("")
    try:
        textpage = page.get_textpage()
        try:
            return pdf_layout.read_page(textpage, raw, True)
        finally:
            textpage.close()
    except pdfium.PdfiumError:
        return pdf_layout.PageLayout("")
    finally:
        page.close()


def _has_image(page: Any, pdfium: Any) -> bool:
    import pypdfium2.raw as raw

    try:
        for _ in page.get_objects(filter=(raw.FPDF_PAGEOBJ_IMAGE,), max_depth=4):
            return True
    except pdfium.PdfiumError:
        return True  # unknown: let OCR look
    return False


def _pdfium_title(doc: Any) -> str | None:
    try:
        title = (doc.get_metadata_value("Title") or "").strip()
    except Exception:  # noqa: BLE001 - metadata is decoration
        return None
    return title or None


def _read_pypdf(path: Path) -> PdfText:
    reader = _open_pypdf(path)
    try:
        pages = reader.pages
        n = len(pages)
    except Exception as e:  # noqa: BLE001 - pypdf raises assorted types for broken page trees
        raise ExtractionError(f"{path}: PDF page tree is damaged ({type(e).__name__}: {e})",
                              hint="the file is damaged; re-download it, or repair it with `qpdf in.pdf out.pdf`"
                              ) from None
    texts = []
    for i in range(n):
        try:
            texts.append(pdf_layout.collapse_leaders(pages[i].extract_text() or ""))
        except Exception as e:  # noqa: BLE001 - one broken content stream must not lose the other pages
            log.warning("pdf_page_text_failed", file=str(path), page=i + 1, error=f"{type(e).__name__}: {e}")
            texts.append("")
    title = None
    try:
        meta = reader.metadata
        title = (meta.title or None) if meta else None
    except Exception:  # noqa: BLE001 - metadata is decoration
        pass
    return PdfText(texts, [None] * n, title, "pypdf", {}, tables=[[] for _ in texts])


def _open_pypdf(path: Path) -> Any:
    import pypdf
    from pypdf.errors import PdfReadError

    try:
        reader = pypdf.PdfReader(str(path), strict=False)
        encrypted = reader.is_encrypted
    except (PdfReadError, ValueError, KeyError, TypeError, IndexError, AssertionError) as e:
        raise ExtractionError(f"{path}: not a readable PDF ({type(e).__name__}: {e})",
                              hint="the file is damaged or truncated; re-download or re-export it") from None
    if encrypted:
        try:
            ok = reader.decrypt("")  # owner-password-only PDFs open with an empty user password
        except Exception as e:  # noqa: BLE001 - pypdf raises assorted types for unsupported crypto
            raise ExtractionError(f"{path}: encrypted PDF that cannot be opened ({e})",
                                  hint="remove the password (e.g. `qpdf --decrypt`) to index it") from None
        if not ok:
            raise ExtractionError(f"{path}: encrypted PDF needs a password",
                                  hint="remove the password (e.g. `qpdf --decrypt in.pdf out.pdf`) to index it")
    return reader

"""PDF: pypdf text layer page by page; pages whose layer is empty or garbage are OCR'd (DESIGN §5).

OCR renders one page at a time (``pdftoppm -r DPI -f N -l N``) into a scratch directory and reads
it with tesseract, so a mixed PDF (typed pages + scanned pages) keeps both, and memory stays at one
page image. Every page becomes a region ``{"page": n}`` (plus ``"ocr": True`` when OCR'd).
"""

from __future__ import annotations

from pathlib import Path

from ragweedd.errors import ExtractionError, ExtractionSkipped
from ragweedd.extract.sniff import require_nonempty
from ragweedd.extract.text_builder import TextBuilder, finish
from ragweedd.extract.text_quality import is_garbage_text
from ragweedd.extract.tools import TOOL_PACKAGES, run_tool, scratch_dir, tool_path
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, ToolRequirement
from ragweedd.logging import lazy_logger

log = lazy_logger(__name__)


def _open_reader(path: Path):
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


def _page_text(page, path: Path, n: int) -> str:
    try:
        return page.extract_text() or ""
    except Exception as e:  # noqa: BLE001 - one broken content stream must not lose the other pages
        log.warning("pdf_page_text_failed", file=str(path), page=n, error=f"{type(e).__name__}: {e}")
        return ""


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


class PdfExtractor:
    name = "pdf"
    extensions = (".pdf",)

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        require_nonempty(path)
        reader = _open_reader(path)
        try:
            pages = reader.pages
            n_pages = len(pages)
        except Exception as e:  # noqa: BLE001
            raise ExtractionError(f"{path}: PDF page tree is damaged ({type(e).__name__}: {e})") from None
        if n_pages == 0:
            raise ExtractionSkipped(f"{path}: PDF has no pages")
        texts = [_page_text(pages[i], path, i + 1) for i in range(n_pages)]
        need = [i for i, t in enumerate(texts) if is_garbage_text(t)]
        ocr_done: set[int] = set()
        can_ocr = settings.ocr_enabled and tool_path("pdftoppm") and tool_path(settings.tess_bin)
        if need and can_ocr:
            with scratch_dir(settings, "ragweed-ocr-") as work:
                for i in need:
                    got = ocr_page(path, i + 1, settings, work)
                    if got.strip():
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
        for i, t in enumerate(texts):
            if i in need and i not in ocr_done:
                continue  # garbage text layer we could not replace: leave it out of the index
            meta = {"page": i + 1}
            if i in ocr_done:
                meta["ocr"] = True
            tb.add(t.strip(), meta, sep="\n\n")
        ocr_type = None
        if ocr_done:
            ocr_type = "tesseract" if len(ocr_done) == n_pages else "tesseract:partial"
        title = None
        try:
            meta = reader.metadata
            title = (meta.title or None) if meta else None
        except Exception:  # noqa: BLE001 - metadata is decoration
            pass
        doc = ExtractedDoc(text=tb.text(), kind="pdf", regions=tb.regions, ocr_type=ocr_type, title=title,
                           extractor=self.name, stats={"pages": n_pages, "pages_ocr": len(ocr_done)})
        return finish(doc, path, "text (text layer empty and OCR found nothing)")

    def requirements(self) -> list[ToolRequirement]:
        return [
            ToolRequirement("pdftoppm", TOOL_PACKAGES["pdftoppm"], optional=True, purpose="OCR of scanned pages"),
            ToolRequirement("tesseract", TOOL_PACKAGES["tesseract"], optional=True, purpose="OCR of scanned pages"),
        ]

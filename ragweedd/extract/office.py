"""Word processor documents: .docx through mammoth, .odt from its content.xml (DESIGN §5).

Both keep headings as ``section`` regions. Both formats are zips: the parts read here go through
the same byte cap as archive members, so a .docx that is really a zip bomb is refused.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from ragweedd.errors import ArchiveLimitError, ExtractionError
from ragweedd.extract.sniff import require_nonempty
from ragweedd.extract.text_builder import TextBuilder, finish, heading_regions
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, ToolRequirement

_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_BLOCKS = (
    "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "td", "th", "pre", "blockquote",
    "caption", "section", "article", "header", "footer", "nav", "main", "aside", "figure",
    "figcaption", "address", "br", "hr", "form", "fieldset", "legend", "details", "summary",
) + _HEADINGS


def html_to_text(html: str) -> tuple[str, list[str], str | None]:
    """Visible text of an HTML document (one line per block element), its headings and <title>.

    script/style/noscript/template are removed with their content; inline elements (b, a, span)
    stay inside their line, so sentences are not cut at a link."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html)
    for node in tree.css("script, style, noscript, template"):
        node.decompose()
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) or None if title_node else None
    root = tree.body or tree.root
    if root is None:
        return "", [], title
    headings = [" ".join(h.text().split()) for h in root.css(", ".join(_HEADINGS))]
    for node in root.css(", ".join(_BLOCKS)):
        node.insert_before("\n")
        node.insert_after("\n")
    lines = (" ".join(line.split()) for line in root.text(separator="").splitlines())
    text = "\n".join(line for line in lines if line)
    return text, [h for h in headings if h], title


def html_doc(html: str, name: str) -> ExtractedDoc:
    text, headings, title = html_to_text(html)
    if title and not text.startswith(title):
        text = f"{title}\n{text}" if text else title
    regions = heading_regions(text, headings)
    return ExtractedDoc(text=text, kind="text", regions=regions, title=title or (headings[0] if headings else None),
                        extractor=name)


def _check_zip(path: Path, settings: ExtractSettings, fmt: str) -> None:
    """Office files are zips: refuse broken ones and bombs before a parser inflates them."""
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise ExtractionError(f"{path}: not a valid {fmt} file (damaged or truncated: {e})",
                              hint=f"re-save or re-download the {fmt} file") from None
    total = sum(i.file_size for i in infos)
    if total > settings.zip_max_total_bytes:
        raise ArchiveLimitError(f"{path}: {fmt} parts declare {total} bytes uncompressed, over the cap of "
                                f"{settings.zip_max_total_bytes} (zip_max_total_mb)")
    for i in infos:
        # XML compresses well (100:1 is normal), so only absurd ratios are refused here
        if i.compress_size and i.file_size / i.compress_size > max(settings.zip_max_ratio, 1000):
            raise ArchiveLimitError(f"{path}: {fmt} part {i.filename!r} has compression ratio "
                                    f"{i.file_size / i.compress_size:.0f}:1, a zip bomb")


class DocxExtractor:
    name = "docx"
    extensions = (".docx", ".docm", ".dotx")

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        import mammoth

        require_nonempty(path)
        _check_zip(path, settings, ".docx")
        try:
            with open(path, "rb") as f:
                result = mammoth.convert_to_html(f)
        except (zipfile.BadZipFile, KeyError) as e:
            raise ExtractionError(f"{path}: not a valid .docx (missing part {e})",
                                  hint="re-save the document from its editor") from None
        except Exception as e:  # noqa: BLE001 - mammoth surfaces XML/zip errors of broken files as-is
            raise ExtractionError(f"{path}: could not read .docx ({type(e).__name__}: {e})") from None
        return finish(html_doc(f"<html><body>{result.value}</body></html>", self.name), path)

    def requirements(self) -> list[ToolRequirement]:
        return [ToolRequirement("mammoth", "mammoth (PyPI)", optional=False, kind="python")]


_ODF_TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"


def _odf_inline_text(el) -> str:
    """Text of an ODF paragraph with <text:s/>, <text:tab/>, <text:line-break/> honoured."""
    parts: list[str] = [el.text or ""]

    def walk(e) -> None:
        tag = e.tag.rsplit("}", 1)[-1] if isinstance(e.tag, str) else ""
        if tag == "s":
            parts.append(" " * int(e.get(f"{{{_ODF_TEXT}}}c", "1") or 1))
        elif tag == "tab":
            parts.append("\t")
        elif tag == "line-break":
            parts.append("\n")
        elif tag not in ("note", "frame"):
            # footnotes and frames hold paragraphs of their own, which root.iter() visits anyway
            parts.append(e.text or "")
            for c in e:
                walk(c)
        parts.append(e.tail or "")

    for c in el:
        walk(c)
    return "".join(parts)


class OdtExtractor:
    name = "odt"
    extensions = (".odt", ".ott")

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        import xml.etree.ElementTree as ET

        require_nonempty(path)
        _check_zip(path, settings, ".odt")
        try:
            with zipfile.ZipFile(path) as zf:
                with zf.open("content.xml") as f:
                    data = f.read(settings.zip_max_total_bytes + 1)
        except KeyError:
            raise ExtractionError(f"{path}: not an OpenDocument text (no content.xml inside)") from None
        except (zipfile.BadZipFile, OSError, EOFError) as e:
            raise ExtractionError(f"{path}: damaged .odt ({e})") from None
        if len(data) > settings.zip_max_total_bytes:
            raise ArchiveLimitError(f"{path}: content.xml is larger than the cap (zip_max_total_mb)")
        try:
            root = ET.fromstring(data)
        except ET.ParseError as e:
            raise ExtractionError(f"{path}: content.xml is not well-formed XML ({e})") from None
        h_tag, p_tag = f"{{{_ODF_TEXT}}}h", f"{{{_ODF_TEXT}}}p"
        tb = TextBuilder()
        section: str | None = None
        for el in root.iter():
            if el.tag == h_tag:
                t = " ".join(_odf_inline_text(el).split())
                if t:
                    section = t
                    tb.add(t, {"section": section}, sep="\n\n")
            elif el.tag == p_tag:
                t = _odf_inline_text(el).strip()
                if t:
                    tb.add(t, {"section": section} if section else None, sep="\n")
        doc = ExtractedDoc(text=tb.text(), kind="text", regions=tb.regions, extractor=self.name,
                           title=tb.regions[0].meta["section"] if tb.regions else None)
        return finish(doc, path)

    def requirements(self) -> list[ToolRequirement]:
        return []

"""Word processor documents: .docx through mammoth, .odt from its content.xml (DESIGN §5).

Both keep headings as ``section`` regions. Both formats are zips: the parts read here go through
the same byte cap as archive members, so a .docx that is really a zip bomb is refused.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path
from typing import Any

from ragweedd.errors import ArchiveLimitError, ExtractionError
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, Region, ToolRequirement
from ragweedd.extract.sniff import require_nonempty
from ragweedd.extract.tables import TABLE_MARK, Cell, LaidOut, RawTable, add_table, clean, flat_text, lay_out
from ragweedd.extract.text_builder import TextBuilder, finish, heading_regions

_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_BLOCKS = (
    "p", "div", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "td", "th", "pre", "blockquote",
    "caption", "section", "article", "header", "footer", "nav", "main", "aside", "figure",
    "figcaption", "address", "br", "hr", "form", "fieldset", "legend", "details", "summary",
) + _HEADINGS


def html_to_text(html: str) -> tuple[str, list[str], str | None, list[LaidOut]]:
    """Visible text of an HTML document (one line per block element), its headings, <title> and
    tables.

    script/style/noscript/template are removed with their content; inline elements (b, a, span)
    stay inside their line, so sentences are not cut at a link. Each table outside a table is laid
    out as rows that carry their headers (tables.py) and stands in the text as a marker line
    ``TABLE_MARK`` + its index, which ``html_doc`` replaces with its lines; a table inside a table's
    cell becomes that cell's text."""
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(html.replace(TABLE_MARK, ""))
    for node in tree.css("script, style, noscript, template"):
        node.decompose()
    title_node = tree.css_first("title")
    title = " ".join(title_node.text().split()) or None if title_node else None
    root = tree.body or tree.root
    if root is None:
        return "", [], title, []
    headings = [" ".join(h.text().split()) for h in root.css(", ".join(_HEADINGS))]
    for node in root.css(", ".join(_BLOCKS)):
        node.insert_before("\n")
        node.insert_after("\n")
    tables: list[LaidOut] = []
    found = root.css("table")
    outer = [_inside_table(t) is False for t in found]
    laid: dict[int, LaidOut] = {}
    # innermost first: a nested table is its cell's text by the time the outer one is read
    for k in range(len(found) - 1, -1, -1):
        node = found[k]
        laid[k] = lay_out(_html_table(node))
        if outer[k]:
            node.insert_before(f"\n{TABLE_MARK}{k}\n")
        else:
            node.insert_before(f" {flat_text(laid[k])} ")
        node.decompose()
    index = {k: n for n, k in enumerate(k for k in range(len(found)) if outer[k])}
    tables = [laid[k] for k in sorted(index)]
    lines = (" ".join(line.split()) for line in root.text(separator="").splitlines())
    text = "\n".join(line for line in lines if line)
    text = re.sub(rf"{TABLE_MARK}(\d+)", lambda m: f"{TABLE_MARK}{index.get(int(m.group(1)), '')}", text)
    return text, [h for h in headings if h], title, tables


def _inside_table(node: Any) -> bool:
    p = node.parent
    while p is not None:
        if p.tag == "table":
            return True
        p = p.parent
    return False


def _html_table(node: Any) -> RawTable:
    """The rows of one <table> (not of tables nested in it), its caption and header rows, and
    the paragraph just before it."""
    rows: list[list[Cell]] = []
    foot: list[list[Cell]] = []
    caption = ""
    head_rows = 0

    def read_row(tr: Any) -> list[Cell]:
        cells = []
        for td in tr.iter():
            if td.tag in ("td", "th"):
                cells.append(Cell(td.text(separator=""), _span(td.attributes.get("colspan")),
                                  _span(td.attributes.get("rowspan"), zero_ok=True), td.tag == "th"))
        return cells

    for child in node.iter():
        if child.tag == "caption":
            caption = clean(child.text(separator=""))
        elif child.tag == "tr":
            rows.append(read_row(child))
        elif child.tag in ("thead", "tbody", "tfoot"):
            group = [read_row(tr) for tr in child.iter() if tr.tag == "tr"]
            if child.tag == "thead" and len(rows) == head_rows:
                head_rows += len(group)
            (foot if child.tag == "tfoot" else rows).extend(group)
    before = ""
    prev = node.prev
    while prev is not None and prev.tag == "-text" and not (prev.text_content or "").strip():
        prev = prev.prev
    if prev is not None and prev.tag not in ("table", "ul", "ol", "dl"):
        before = clean(prev.text(separator="") if prev.tag != "-text" else prev.text_content or "")
    return RawTable(rows + foot, caption=caption, before=before, head_rows=head_rows)


def _span(value: str | None, zero_ok: bool = False) -> int:
    try:
        n = int((value or "1").strip())
    except ValueError:
        return 1
    return n if n > 0 or (zero_ok and n == 0) else 1


def html_doc(html: str, name: str) -> ExtractedDoc:
    text, headings, title, tables = html_to_text(html)
    if title and not text.startswith(title):
        text = f"{title}\n{text}" if text else title
    tb = TextBuilder()
    for k, part in enumerate(re.split(rf"^{TABLE_MARK}(\d+)$", text, flags=re.M)):
        if k % 2:
            add_table(tb, int(part) + 1, tables[int(part)])
        else:
            tb.add(part, None, sep="\n")
    text = tb.text()
    regions = heading_regions(text, headings) + tb.regions
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


def _odf_inline_text(el: Any) -> str:
    """Text of an ODF paragraph with <text:s/>, <text:tab/>, <text:line-break/> honoured."""
    parts: list[str] = [el.text or ""]

    def walk(e: Any) -> None:
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


_ODF_TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
_T = f"{{{_ODF_TABLE}}}"
# number-rows/columns-repeated is how odt writes runs of equal (mostly empty) rows and cells; a
# run of empty ones at the end of a table is layout, and a huge one must not become a huge grid
_MAX_REPEAT = 1000


class _OdtWalk:
    """content.xml in document order: headings and paragraphs (footnotes and frames too, as
    before), and each table:table laid out as a table (tables.py) at its place."""

    def __init__(self, tb: TextBuilder) -> None:
        self.tb = tb
        self.section: str | None = None
        self.tables = 0

    def walk(self, el: Any, before: str = "") -> None:
        prev = ""
        for child in el:
            tag = child.tag if isinstance(child.tag, str) else ""
            if tag == f"{{{_ODF_TEXT}}}h":
                t = " ".join(_odf_inline_text(child).split())
                if t:
                    self.section = t
                    self.tb.add(t, {"section": t}, sep="\n\n")
                prev = t
                self.walk(child)
            elif tag == f"{{{_ODF_TEXT}}}p":
                t = _odf_inline_text(child).strip()
                if t:
                    self.tb.add(t, {"section": self.section} if self.section else None, sep="\n")
                prev = t
                self.walk(child)
            elif tag == f"{_T}table":
                self.tables += 1
                start = self.tb.length
                add_table(self.tb, self.tables, lay_out(_odt_table(child, prev)))
                if self.section and self.tb.length > start:
                    # the table sits under the heading in force, as a paragraph there does
                    begin = start + 1 if start else 0
                    self.tb.regions.append(Region(begin, self.tb.length, {"section": self.section}))
                prev = ""
            else:
                self.walk(child)


def _odt_cell_text(cell: Any) -> str:
    """A cell's paragraphs on one line; a table inside it as its rows joined (tables.py)."""
    parts: list[str] = []

    def walk(el: Any, prev: str = "") -> None:
        for child in el:
            tag = child.tag if isinstance(child.tag, str) else ""
            if tag in (f"{{{_ODF_TEXT}}}p", f"{{{_ODF_TEXT}}}h"):
                prev = _odf_inline_text(child)
                parts.append(prev)
            elif tag == f"{_T}table":
                parts.append(flat_text(lay_out(_odt_table(child, prev))))
            else:
                walk(child)

    walk(cell)
    return clean(" ".join(parts))


def _odt_table(table: Any, before: str) -> RawTable:
    rows: list[list[Cell]] = []
    head_rows = 0

    def repeat(el: Any, attr: str) -> int:
        try:
            return max(1, int(el.get(f"{_T}{attr}", "1")))
        except ValueError:
            return 1

    def read_rows(el: Any, header: bool) -> None:
        nonlocal head_rows
        for child in el:
            tag = child.tag if isinstance(child.tag, str) else ""
            if tag == f"{_T}table-row":
                cells: list[Cell] = []
                for c in child:
                    ctag = c.tag if isinstance(c.tag, str) else ""
                    if ctag == f"{_T}covered-table-cell":
                        continue  # the slot of a spanning cell; the grid fills it from the span
                    if ctag != f"{_T}table-cell":
                        continue
                    text = _odt_cell_text(c)
                    n = repeat(c, "number-columns-repeated")
                    n = min(n, _MAX_REPEAT) if text else min(n, 1)
                    for _ in range(n):
                        cells.append(Cell(text, repeat(c, "number-columns-spanned"),
                                          repeat(c, "number-rows-spanned"), header))
                times = repeat(child, "number-rows-repeated")
                times = min(times, _MAX_REPEAT) if any(x.text for x in cells) else 1
                for _ in range(times):
                    rows.append(list(cells))
                    if header:
                        head_rows += 1
            elif tag == f"{_T}table-header-rows":
                read_rows(child, True)
            elif tag in (f"{_T}table-rows", f"{_T}table-row-group"):
                read_rows(child, header)

    read_rows(table, False)
    return RawTable(rows, before=before, head_rows=head_rows)


class OdtExtractor:
    name = "odt"
    extensions = (".odt", ".ott")

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
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
        tb = TextBuilder()
        _OdtWalk(tb).walk(root)
        doc = ExtractedDoc(text=tb.text(), kind="text", regions=tb.regions, extractor=self.name,
                           title=tb.regions[0].meta["section"] if tb.regions else None)
        return finish(doc, path)

    def requirements(self) -> list[ToolRequirement]:
        return []

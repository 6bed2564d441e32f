"""Markup and data formats: HTML, SVG, JSON, RTF (unrtf) and TeX (detex) (DESIGN §5)."""

from __future__ import annotations

import codecs
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from ragweedd.errors import ExtractionError, ExtractionSkipped
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, Region, ToolRequirement
from ragweedd.extract.office import html_doc
from ragweedd.extract.sniff import decode_text, looks_binary, read_head, require_nonempty
from ragweedd.extract.text_builder import finish, heading_regions
from ragweedd.extract.tools import TOOL_PACKAGES, need_tool, run_tool, scratch_dir

_CHARSET = re.compile(rb"""<meta[^>]+charset=["']?([A-Za-z0-9_.:-]+)""", re.I)


def _read_markup(path: Path) -> str:
    require_nonempty(path)
    why = looks_binary(read_head(path))
    if why:
        raise ExtractionSkipped(f"binary file {path}: {why}; not {path.suffix} markup")
    data = path.read_bytes()
    m = _CHARSET.search(data[:4096])
    if m and not data.startswith((b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")):
        try:
            enc = codecs.lookup(m.group(1).decode("ascii")).name
        except LookupError:
            enc = "utf-8"
        if enc not in ("utf-8", "ascii"):
            return data.decode(enc, errors="replace")
    return decode_text(data)


class HtmlExtractor:
    name = "html"
    extensions = (".html", ".htm", ".xhtml")

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        return finish(html_doc(_read_markup(path), self.name), path)

    def requirements(self) -> list[ToolRequirement]:
        return [ToolRequirement("selectolax", "selectolax (PyPI)", optional=False, kind="python")]


_SVG_SKIP = {"style", "script", "metadata", "defs"}


class SvgExtractor:
    name = "svg"
    extensions = (".svg",)

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        text = _read_markup(path)
        if "<!ENTITY" in text:
            # internal entities are how "billion laughs" documents explode; SVGs never need them
            raise ExtractionError(f"{path}: SVG declares XML entities, which are refused (entity expansion attacks)")
        try:
            root = ET.fromstring(text)
        except ET.ParseError as e:
            raise ExtractionError(f"{path}: not well-formed SVG/XML ({e})") from None
        parts: list[str] = []
        title = None

        def walk(el: Any) -> None:
            nonlocal title
            tag = el.tag.rsplit("}", 1)[-1] if isinstance(el.tag, str) else ""
            if tag in _SVG_SKIP:
                return
            t = " ".join((el.text or "").split())
            if t:
                if tag == "title" and title is None:
                    title = t
                parts.append(t)
            for c in el:
                walk(c)
                tail = " ".join((c.tail or "").split())
                if tail:
                    parts.append(tail)

        walk(root)
        return finish(ExtractedDoc(text="\n".join(parts), kind="text", title=title, extractor=self.name), path)

    def requirements(self) -> list[ToolRequirement]:
        return []


class JsonExtractor:
    name = "json"
    extensions = (".json", ".jsonl", ".ndjson", ".geojson")

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        require_nonempty(path)
        why = looks_binary(read_head(path))
        if why:
            raise ExtractionSkipped(f"binary file {path}: {why}; not JSON")
        raw = decode_text(path.read_bytes())
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            out, regions = [], []
            pos = 0
            for n, line in enumerate(raw.splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise ExtractionError(f"{path}: line {n} is not valid JSON ({e.msg} at column {e.colno})") from None
                block = json.dumps(obj, indent=2, ensure_ascii=False)
                regions.append(Region(pos, pos + len(block), {"row_start": n, "row_end": n}))
                out.append(block)
                pos += len(block) + 1
            text = "\n".join(out)
        else:
            try:
                obj = json.loads(raw)
            except json.JSONDecodeError as e:
                raise ExtractionError(f"{path}: not valid JSON: {e.msg} at line {e.lineno}, column {e.colno}",
                                      hint="fix the file or rename it if it is not JSON") from None
            except RecursionError:
                raise ExtractionError(f"{path}: JSON nested too deeply to parse") from None
            if obj in (None, {}, [], ""):
                raise ExtractionSkipped(f"{path}: JSON document is empty ({raw.strip()[:20]})")
            text = json.dumps(obj, indent=2, ensure_ascii=False)
            regions = []
        return finish(ExtractedDoc(text=text, kind="text", regions=regions, extractor=self.name), path)

    def requirements(self) -> list[ToolRequirement]:
        return []


class RtfExtractor:
    name = "rtf"
    extensions = (".rtf",)

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        require_nonempty(path)
        head = read_head(path, 64)
        if not head.lstrip().startswith(b"{\\rtf"):
            raise ExtractionError(f"{path}: not an RTF document (it does not start with '{{\\rtf')")
        exe = need_tool("unrtf", "RTF", path)
        with scratch_dir(settings, "ragweed-rtf-") as work:
            # cwd in scratch: unrtf writes embedded pictures into the current directory
            out = run_tool([exe, "--text", str(path.resolve())], path=path, settings=settings, cwd=str(work))
        lines = out.decode("utf-8", "replace").splitlines()
        # unrtf --text starts with a "###" comment block and a "-----------------" rule
        body = [ln for ln in lines if not ln.startswith("###")]
        while body and (not body[0].strip() or set(body[0].strip()) == {"-"}):
            body.pop(0)
        return finish(ExtractedDoc(text="\n".join(body).strip(), kind="text", extractor=self.name), path)

    def requirements(self) -> list[ToolRequirement]:
        return [ToolRequirement("unrtf", TOOL_PACKAGES["unrtf"], optional=False, purpose="RTF text")]


_TEX_SECTION = re.compile(r"\\(?:part|chapter|section|subsection|subsubsection)\*?\s*(?:\[[^\]]*\])?\{([^{}]*)\}")
_TEX_TITLE = re.compile(r"\\title\s*\{([^{}]*)\}")


class TexExtractor:
    name = "tex"
    extensions = (".tex", ".latex", ".ltx", ".sty", ".bib")

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        require_nonempty(path)
        why = looks_binary(read_head(path))
        if why:
            raise ExtractionSkipped(f"binary file {path}: {why}; not TeX")
        data = path.read_bytes()
        exe = need_tool("detex", "TeX", path)
        with scratch_dir(settings, "ragweed-tex-") as work:
            # stdin + -n: detex must not follow \input{/etc/passwd} or any other file
            out = run_tool([exe, "-n"], path=path, settings=settings, stdin=data, cwd=str(work))
        text = out.decode("utf-8", "replace")
        text = re.sub(r"\n{3,}", "\n\n", text).strip()
        src = decode_text(data)
        headings = [" ".join(h.split()) for h in _TEX_SECTION.findall(src)]
        m = _TEX_TITLE.search(src)
        title = " ".join(m.group(1).split()) if m else None
        return finish(ExtractedDoc(text=text, kind="text", regions=heading_regions(text, headings), title=title,
                                   extractor=self.name), path)

    def requirements(self) -> list[ToolRequirement]:
        return [ToolRequirement("detex", TOOL_PACKAGES["detex"], optional=False, purpose="TeX text")]

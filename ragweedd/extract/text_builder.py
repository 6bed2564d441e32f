"""Building an extracted document's text together with the provenance region (page, section,
sheet, time) of each block."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragweedd.errors import ExtractionSkipped
from ragweedd.extract.base import ExtractedDoc, Region


class TextBuilder:
    """Accumulates text blocks and the provenance region of each, merging neighbours with equal meta."""

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._len = 0
        self.regions: list[Region] = []

    def add(self, text: str, meta: dict[str, Any] | None = None, *, sep: str = "\n\n") -> None:
        text = text.strip("\n")
        if not text.strip():
            return
        if self._parts:
            self._parts.append(sep)
            self._len += len(sep)
        start = self._len
        self._parts.append(text)
        self._len += len(text)
        if meta:
            last = self.regions[-1] if self.regions else None
            if last is not None and last.meta == meta and last.end + len(sep) == start:
                self.regions[-1] = Region(last.start, self._len, meta)
            else:
                self.regions.append(Region(start, self._len, dict(meta)))

    def tail_line(self) -> str:
        """The last line of the text so far."""
        return self._parts[-1].rsplit("\n", 1)[-1] if self._parts else ""

    @property
    def length(self) -> int:
        return self._len

    def text(self) -> str:
        return "".join(self._parts)


def finish(doc: ExtractedDoc, path: Path, what: str = "text") -> ExtractedDoc:
    """Refuse to hand on a document without text: the caller would index nothing silently."""
    if not doc.text.strip():
        raise ExtractionSkipped(f"{path}: no {what} found in the file")
    return doc


def heading_regions(text: str, headings: list[str], extra: dict[str, Any] | None = None) -> list[Region]:
    """Regions ``section=<heading>`` from each heading's first occurrence (in order) to the next."""
    marks: list[tuple[int, str]] = []
    pos = 0
    for h in headings:
        h = " ".join(h.split())
        if not h:
            continue
        i = text.find(h, pos)
        if i < 0:
            continue
        marks.append((i, h))
        pos = i + len(h)
    out = []
    for k, (i, h) in enumerate(marks):
        end = marks[k + 1][0] if k + 1 < len(marks) else len(text)
        meta = {"section": h}
        if extra:
            meta.update(extra)
        out.append(Region(i, end, meta))
    return out

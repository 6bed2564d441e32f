"""Helpers shared by the extractors: sniffing binaries, decoding text, running external tools,
scratch directories, and building text with provenance regions.

Only the standard library is imported here: the sandbox child imports every extractor module at
start-up, and that must stay cheap.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

from ragweedd.errors import ExtractionError, ExtractionSkipped, ToolMissingError
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, Region

SNIFF_BYTES = 8192
# Bytes that never occur in text files (everything below 0x20 except \t \n \f \r and ESC).
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27))

TOOL_PACKAGES = {
    "pdftoppm": "poppler-utils (apt) / poppler (brew)",
    "tesseract": "tesseract-ocr (apt) / tesseract (brew)",
    "unrtf": "unrtf (apt, brew)",
    "detex": "texlive-binaries (apt) / texlive (brew)",
    "ffmpeg": "ffmpeg (apt, brew)",
    "whisper-cli": "whisper.cpp (brew) or build from github.com/ggerganov/whisper.cpp",
}


def looks_binary(head: bytes) -> str | None:
    """Why ``head`` (the first bytes of a file) is not text, or None when it looks like text."""
    if not head:
        return None
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None  # UTF-16 with BOM: NULs are expected
    if b"\x00" in head:
        return "contains NUL bytes"
    ctrl = sum(head.count(bytes([b])) for b in _CONTROL)
    if ctrl / len(head) > 0.10:
        return f"{ctrl * 100 // len(head)}% control characters"
    return None


def read_head(path: Path, n: int = SNIFF_BYTES) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def require_nonempty(path: Path) -> int:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ExtractionError(f"{path}: file disappeared before it could be read") from None
    if size == 0:
        raise ExtractionSkipped(f"{path}: empty file (0 bytes)")
    return size


def decode_text(data: bytes) -> str:
    """UTF-8 (BOM stripped, undecodable bytes replaced); UTF-16 when it carries a BOM."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")


def shannon_entropy(text: str) -> float:
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


_WORD = re.compile(r"[^\W\d_]{2,}")


def is_garbage_text(text: str) -> bool:
    """True when a PDF page's text layer is missing or unusable (font without a ToUnicode map,
    scanner noise): too few letters, too few word-like tokens, or character soup."""
    s = text.strip()
    if len(s) < 16:
        return True
    tokens = s.split()
    words = [t for t in tokens if _WORD.fullmatch(t.strip(".,;:!?()[]\"'"))]
    if len(words) < 3 or len(words) / max(1, len(tokens)) < 0.3:
        return True
    letters = sum(ch.isalpha() for ch in s)
    if letters / len(s) < 0.4:
        return True
    return shannon_entropy(s) > 7.0


def tool_path(name: str) -> str | None:
    return shutil.which(name)


def need_tool(name: str, fmt: str, path: Path) -> str:
    found = tool_path(name)
    if not found:
        pkg = TOOL_PACKAGES.get(os.path.basename(name), "your package manager")
        raise ToolMissingError(
            f"{path}: {fmt} files need the '{name}' program, which is not installed",
            hint=f"install {pkg}; `ragweedd doctor` lists every missing tool",
        )
    return found


def run_tool(argv: list[str], *, path: Path, settings: ExtractSettings, stdin: bytes | None = None,
             cwd: str | None = None) -> bytes:
    """Run an external tool; its stdout, or ExtractionError naming the tool, file and stderr."""
    try:
        proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=settings.tool_timeout_s,
                              cwd=cwd, stdin=None if stdin is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        err = ExtractionError(f"{path}: {os.path.basename(argv[0])} did not finish in {settings.tool_timeout_s:.0f} s")
        err.retryable = True
        raise err from None
    except OSError as e:
        raise ExtractionError(f"{path}: could not run {argv[0]}: {e}") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip()[-400:]
        raise ExtractionError(
            f"{path}: {os.path.basename(argv[0])} failed with exit code {proc.returncode}: {tail or 'no message'}"
        )
    return proc.stdout


@contextlib.contextmanager
def scratch_dir(settings: ExtractSettings, prefix: str = "ragweed-") -> Iterator[Path]:
    """A private temp directory (under settings.scratch_dir when set), removed afterwards."""
    base = settings.scratch_dir or None
    if base:
        os.makedirs(base, mode=0o700, exist_ok=True)
    d = tempfile.mkdtemp(prefix=prefix, dir=base)
    try:
        yield Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)


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


class _LazyLogger:
    """Defers importing structlog (and rich, which it pulls in) until something is logged: the
    sandbox child imports every extractor at start-up and most extractions log nothing."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._log = None

    def __getattr__(self, attr: str):
        if self._log is None:
            from ragweedd.logging import get_logger

            self._log = get_logger(self._name)
        return getattr(self._log, attr)


def lazy_logger(name: str) -> _LazyLogger:
    return _LazyLogger(name)

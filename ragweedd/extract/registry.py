"""The one registry of extractors, by lower-case file extension (DESIGN §5).

``extractor_for(path)`` returns None for unknown and binary formats: the pipeline marks such files
"skipped", not failed. ``extract_file`` runs in-process; ``ragweedd.ingest.sandbox`` runs it in a
capped subprocess for untrusted files.

Tests register extra extractors (a parser that hangs, one that eats memory) through the environment
variable RAGWEED_TEST_EXTRACTORS="module:attr[,module:attr]", where attr is an extractor instance or
a list of them; the sandbox child honours it because it reads the same variable at start-up.
"""

from __future__ import annotations

import importlib
import os
import time
from pathlib import Path

from ragweedd.errors import ExtractionSkipped
from ragweedd.extract.archive import ZipExtractor
from ragweedd.extract.av import AvExtractor
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, Extractor
from ragweedd.extract.markup import HtmlExtractor, JsonExtractor, RtfExtractor, SvgExtractor, TexExtractor
from ragweedd.extract.office import DocxExtractor, OdtExtractor
from ragweedd.extract.pdf import PdfExtractor
from ragweedd.extract.sheets import CsvExtractor, XlsExtractor, XlsxExtractor
from ragweedd.extract.text import TextExtractor

TEST_HOOK_ENV = "RAGWEED_TEST_EXTRACTORS"

# Files without an extension that are text by convention.
_TEXT_NAMES = {"makefile", "dockerfile", "readme", "license", "licence", "copying", "authors", "changelog",
               "containerfile", "gemfile", "rakefile", "procfile", "justfile", "vagrantfile"}

_BUILTIN: tuple[Extractor, ...] = (
    PdfExtractor(), DocxExtractor(), OdtExtractor(), TextExtractor(), HtmlExtractor(), SvgExtractor(),
    RtfExtractor(), TexExtractor(), AvExtractor(), ZipExtractor(), XlsxExtractor(), XlsExtractor(),
    CsvExtractor(), JsonExtractor(),
)

_by_ext: dict[str, Extractor] | None = None
_hook_value: str | None = None


def _load_test_hook(spec: str) -> list[Extractor]:
    out: list[Extractor] = []
    for item in filter(None, (s.strip() for s in spec.split(","))):
        mod_name, _, attr = item.partition(":")
        obj = getattr(importlib.import_module(mod_name), attr or "EXTRACTORS")
        out.extend(obj if isinstance(obj, (list, tuple)) else [obj])
    return out


def _table() -> dict[str, Extractor]:
    global _by_ext, _hook_value
    hook = os.environ.get(TEST_HOOK_ENV, "")
    if _by_ext is None or hook != _hook_value:
        table: dict[str, Extractor] = {}
        for ex in _BUILTIN + tuple(_load_test_hook(hook) if hook else ()):
            for ext in ex.extensions:
                table[ext.lower()] = ex
        _by_ext, _hook_value = table, hook
    return _by_ext


def all_extractors() -> list[Extractor]:
    seen: dict[int, Extractor] = {}
    for ex in _table().values():
        seen.setdefault(id(ex), ex)
    return list(seen.values())


def extractor_for(path: Path) -> Extractor | None:
    path = Path(path)
    ext = path.suffix.lower()
    if not ext:
        return _table()[".txt"] if path.name.lower() in _TEXT_NAMES else None
    return _table().get(ext)


def extract_file(path: Path, settings: ExtractSettings | None = None) -> ExtractedDoc:
    """Extract one file in this process. Raises ExtractionSkipped for unknown formats and empty or
    binary files, ExtractionError (or a subclass) for broken ones; never returns empty text."""
    path = Path(path)
    settings = settings or ExtractSettings()
    ex = extractor_for(path)
    if ex is None:
        raise ExtractionSkipped(f"{path}: unsupported file type {path.suffix or '(no extension)'!r}; skipped")
    t0 = time.perf_counter()
    doc = ex.extract(path, settings)
    if not doc.text.strip():  # an extractor bug must not index nothing in silence
        raise ExtractionSkipped(f"{path}: the {ex.name} extractor found no text")
    doc.extractor = doc.extractor or ex.name
    doc.stats.setdefault("extract_s", round(time.perf_counter() - t0, 4))
    return doc

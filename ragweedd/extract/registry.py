"""The one registry of extractors, by lower-case file extension (DESIGN §5).

``extractor_for(path)`` returns None for unknown and binary formats: the pipeline marks such files
"skipped", not failed. ``extract_file`` runs in-process; ``ragweedd.ingest.sandbox`` runs it in a
capped subprocess for untrusted files.

Extra extractors (plugins) are registered with ``register`` from "module:attr" specs, where attr is
an extractor instance or a list of them; ``extract_sandboxed(..., plugins=...)`` hands the same
specs to its child process, which registers them before it extracts.
"""

from __future__ import annotations

import importlib
import time
from pathlib import Path

from ragweedd.errors import ExtractionSkipped
from ragweedd.extract.archive import ZipExtractor
from ragweedd.extract.av import AvExtractor
from ragweedd.extract.base import ExtractedDoc, Extractor, ExtractSettings
from ragweedd.extract.markup import HtmlExtractor, JsonExtractor, RtfExtractor, SvgExtractor, TexExtractor
from ragweedd.extract.office import DocxExtractor, OdtExtractor
from ragweedd.extract.pdf import PdfExtractor
from ragweedd.extract.sheets import CsvExtractor, XlsExtractor, XlsxExtractor
from ragweedd.extract.text import TextExtractor

# Files without an extension that are text by convention.
_TEXT_NAMES = {"makefile", "dockerfile", "readme", "license", "licence", "copying", "authors", "changelog",
               "containerfile", "gemfile", "rakefile", "procfile", "justfile", "vagrantfile"}

_BUILTIN: tuple[Extractor, ...] = (
    PdfExtractor(), DocxExtractor(), OdtExtractor(), TextExtractor(), HtmlExtractor(), SvgExtractor(),
    RtfExtractor(), TexExtractor(), AvExtractor(), ZipExtractor(lambda p: extractor_for(p)), XlsxExtractor(),
    XlsExtractor(), CsvExtractor(), JsonExtractor(),
)

_by_ext: dict[str, Extractor] | None = None
_plugins: tuple[Extractor, ...] = ()
_plugin_specs: tuple[str, ...] = ()


def load_plugins(specs: list[str] | tuple[str, ...]) -> list[Extractor]:
    out: list[Extractor] = []
    for item in specs:
        mod_name, _, attr = item.partition(":")
        obj = getattr(importlib.import_module(mod_name), attr or "EXTRACTORS")
        out.extend(obj if isinstance(obj, (list, tuple)) else [obj])
    return out


def register(specs: list[str] | tuple[str, ...]) -> None:
    """Add the extractors named by "module:attr" specs; later ones win for an extension."""
    global _by_ext, _plugins, _plugin_specs
    new = [s for s in specs if s not in _plugin_specs]
    if new:
        _plugins = _plugins + tuple(load_plugins(new))
        _plugin_specs = _plugin_specs + tuple(new)
        _by_ext = None


def plugin_specs() -> tuple[str, ...]:
    return _plugin_specs


def _table() -> dict[str, Extractor]:
    global _by_ext
    if _by_ext is None:
        table: dict[str, Extractor] = {}
        for ex in _BUILTIN + _plugins:
            for ext in ex.extensions:
                table[ext.lower()] = ex
        _by_ext = table
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
    if settings.max_text_chars and len(doc.text) > settings.max_text_chars:
        # A small archive or PDF can hold far more text than its size says; the daemon must never
        # receive, chunk and embed hundreds of MB of it for one file.
        raise ExtractionSkipped(
            f"{path}: its extracted text ({len(doc.text) / 2**20:.1f} M characters) is larger than "
            f"ingest_max_text_mb ({settings.max_text_chars >> 20} MiB); skipped",
            hint="to index it, raise ingest_max_text_mb and touch the file (its bytes were read, so only "
                 "a change makes the scan read it again)")
    if not doc.text.strip():  # an extractor bug must not index nothing in silence
        raise ExtractionSkipped(f"{path}: the {ex.name} extractor found no text")
    doc.extractor = doc.extractor or ex.name
    doc.stats.setdefault("extract_s", round(time.perf_counter() - t0, 4))
    return doc

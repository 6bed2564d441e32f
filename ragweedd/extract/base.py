"""The extractor seam: a file in, text plus provenance regions out.

An extractor returns one ``ExtractedDoc``: the whole text of the file and ``regions`` that map
character ranges of that text to where they came from (a PDF page, a markdown/docx heading, a
spreadsheet sheet and row range, an audio time range, a zip member). The chunker intersects each
chunk's character span with the regions, so a chunk that crosses a page break knows both pages.

Region meta keys (all optional, JSON-serialisable):
    page (int, 1-based)          PDF page
    section (str)                heading the text sits under (markdown, rst, docx, odt, html title)
    sheet (str), row_start/row_end (int, 1-based)   spreadsheets and csv
    t_start/t_end (float seconds)                  audio/video transcripts
    member (str)                 path inside an archive ("a.zip/inner/b.pdf" for nested zips)
    ocr (bool)                   text of this region came from OCR
    line (int, 1-based)          the region's text is its file's (or archive member's) own text, line
                                 for line, and starts on this line: the chunker gives the chunks in it
                                 ``line_start``/``line_end``. Only extractors that hand on the decoded
                                 text unchanged set it (text.py); a transformed text (html, rtf, pdf)
                                 has no true line numbers.

The line mark is a region rather than a field of ``ExtractedDoc`` because regions are what reaches
the chunker on every road: through the sandbox's JSON reply, on the streamed path of a large text
file (``TextStream.regions``), and shifted into an archive's text for each member.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from ragweedd.config import Config

# Chunk-size family of a document (DESIGN §6): "text" (text/markdown/code/office), "pdf", "av".
KINDS = ("text", "pdf", "av")


@dataclass(frozen=True)
class Region:
    start: int
    end: int
    meta: dict[str, Any]


@dataclass
class ExtractedDoc:
    text: str
    kind: str = "text"
    regions: list[Region] = field(default_factory=list)
    ocr_type: str | None = None  # None, "tesseract" (whole doc) or "tesseract:partial"
    title: str | None = None
    extractor: str = ""
    # Measurements filled by the sandbox (peak_rss_mb, wall_s) and extractors (pages_ocr, ...).
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def lines_exact(self) -> bool:
        """Some of the text is a file's own text line for line (a ``line`` region), so its chunks
        carry line numbers."""
        return any("line" in r.meta for r in self.regions)


def own_lines(length: int) -> Region:
    """The region that marks a whole text of ``length`` characters as its file's own text, line for
    line from line 1."""
    return Region(0, length, {"line": 1})


@dataclass(frozen=True)
class ToolRequirement:
    """An external binary or model an extractor needs, and where a user gets it."""

    name: str  # e.g. "pdftoppm"
    package: str  # e.g. "poppler-utils (apt) / poppler (brew)"
    optional: bool = True  # optional tools degrade a feature (OCR) instead of disabling the format
    kind: str = "binary"  # "binary" (looked up on PATH), "python" (importable module), "path" (file)
    purpose: str = ""  # what the tool is for, shown by `ragweedd doctor`

    def present(self) -> bool:
        if self.kind == "binary":
            import shutil

            return shutil.which(self.name) is not None
        if self.kind == "python":
            import importlib.util

            try:
                return importlib.util.find_spec(self.name) is not None
            except (ImportError, ValueError):
                return False
        return Path(self.name).expanduser().exists()


@runtime_checkable
class Extractor(Protocol):
    # read-only members: an extractor's class attributes (``extensions = (".pdf",)``) satisfy them
    @property
    def name(self) -> str: ...

    @property
    def extensions(self) -> tuple[str, ...]:
        """Lower-case, with the dot: (".md", ".markdown")."""
        ...

    def extract(self, path: Path, settings: "ExtractSettings") -> ExtractedDoc:
        """Raise ExtractionSkipped (unsupported/empty/binary) or ExtractionError (broken file)."""
        ...

    def requirements(self) -> list[ToolRequirement]:
        ...


@dataclass(frozen=True)
class ExtractSettings:
    """What extractors may read from the configuration (kept small so sandboxes can pickle it)."""

    tess_bin: str = "tesseract"
    whisper_model: str = ""  # whisper.cpp model path; empty -> faster-whisper
    ocr_enabled: bool = True
    zip_max_depth: int = 3
    zip_max_members: int = 10_000
    zip_max_total_bytes: int = 512 * 1024 * 1024
    zip_max_ratio: float = 200.0
    scratch_dir: str = ""  # temp files of extractors go under here; empty = the system temp dir
    tool_timeout_s: float = 600.0  # one run of an external tool (unrtf, pdftoppm, tesseract, ffmpeg)
    ocr_dpi: int = 200
    max_text_chars: int = 0  # extracted text longer than this is skipped (ingest_max_text_mb); 0 = no cap

    @classmethod
    def from_config(cls, cfg: Config, scratch_dir: str | Path | None = None) -> "ExtractSettings":
        """The settings the daemon extracts with (``scratch_dir``: its Paths' scratch folder) and
        the doctor checks: one place, so both see the same tools, caps and timeouts."""
        scratch = str(scratch_dir) if scratch_dir is not None else ""
        cache_dir = str(getattr(cfg, "cache_dir", None) or "")
        if scratch_dir is None and cache_dir:
            scratch = str(Path(cache_dir).expanduser() / "scratch")
        return cls(
            tess_bin=cfg.tess_bin,
            whisper_model=cfg.whisper_model,
            zip_max_depth=cfg.zip_max_depth,
            zip_max_members=cfg.zip_max_members,
            zip_max_total_bytes=cfg.zip_max_total_mb * 1024 * 1024,
            zip_max_ratio=cfg.zip_max_ratio,
            scratch_dir=scratch,
            tool_timeout_s=min(600.0, float(cfg.extract_timeout_s)),
            max_text_chars=cfg.ingest_max_text_mb << 20,
        )

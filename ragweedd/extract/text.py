"""Plain text, markdown, reStructuredText and source code (DESIGN §5).

UTF-8 with undecodable bytes replaced and the BOM stripped (UTF-16 with a BOM is decoded too). A file
that looks binary (NUL bytes, many control characters) is skipped: it was renamed, not written.
Markdown ATX/setext headings and rst underlined titles become ``section`` regions. The text is the
file's own, line for line (decoding keeps every line break as it is on disk, "\r\n" included, and a
BOM is no line), so it carries a ``line`` region and its chunks get the line numbers an editor shows.
"""

from __future__ import annotations

import codecs
import re
from pathlib import Path
from typing import Iterable, Iterator

from ragweedd.errors import ExtractionSkipped
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, Region, ToolRequirement, own_lines
from ragweedd.extract.sniff import decode_text, looks_binary, read_head, require_nonempty
from ragweedd.extract.text_builder import finish

PLAIN_EXT = (".txt", ".text", ".log", ".org", ".adoc", ".asciidoc")
MARKDOWN_EXT = (".md", ".markdown", ".mdown", ".mkd")
RST_EXT = (".rst",)
CODE_EXT = (
    ".py", ".pyi", ".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".go", ".rs", ".c", ".h", ".cc",
    ".cpp", ".cxx", ".hpp", ".hh", ".java", ".kt", ".kts", ".scala", ".rb", ".php", ".pl", ".pm",
    ".lua", ".r", ".jl", ".swift", ".m", ".cs", ".fs", ".hs", ".ml", ".ex", ".exs", ".erl", ".clj",
    ".dart", ".zig", ".nim", ".sh", ".bash", ".zsh", ".fish", ".ps1", ".bat", ".toml", ".yaml",
    ".yml", ".ini", ".cfg", ".conf", ".properties", ".env", ".sql", ".css", ".scss", ".sass",
    ".less", ".xml", ".gradle", ".cmake", ".mk", ".proto", ".graphql", ".vue", ".svelte",
    ".tf", ".nix", ".dockerfile", ".diff", ".patch", ".ipynb",
)

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
_RST_UNDERLINE = set("=-~^\"'`#*+:._")


# A line longer than this is never a heading (nor a setext/rst title): no real heading is that
# long, and it lets a file be scanned for headings without holding any one huge line.
MAX_HEADING_LINE = 4096
# Text files larger than this are read, chunked and published piece by piece (ingest/pipeline.py).
STREAM_ABOVE_BYTES = 4 << 20
_PIECE_BYTES = 1 << 20
_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # where str.splitlines() cuts


def read_text_file(path: Path, max_bytes: int | None = None) -> str:
    require_text(path)
    data = path.read_bytes() if max_bytes is None else open(path, "rb").read(max_bytes)
    return decode_text(data)


def require_text(path: Path) -> None:
    """ExtractionSkipped for an empty file or one that looks binary."""
    require_nonempty(path)
    why = looks_binary(read_head(path))
    if why:
        raise ExtractionSkipped(f"binary file {path}: {why}; it is not indexed as text")


def iter_text_pieces(path: Path, piece_bytes: int = _PIECE_BYTES) -> Iterator[str]:
    """The decoded text of ``path`` in pieces of about ``piece_bytes``: the same text as
    ``decode_text(path.read_bytes())`` (an incremental decoder of the same codec, so a character
    cut between two reads decodes as if it were not), without holding the whole file."""
    with open(path, "rb") as f:
        data = f.read(max(piece_bytes, 2))  # the whole BOM, if any
        codec = "utf-16" if data.startswith((b"\xff\xfe", b"\xfe\xff")) else "utf-8-sig"
        dec = codecs.getincrementaldecoder(codec)(errors="replace")
        while data:
            text = dec.decode(data)
            if text:
                yield text
            data = f.read(piece_bytes)
        text = dec.decode(b"", final=True)
        if text:
            yield text


def iter_lines(pieces: Iterable[str]) -> Iterator[tuple[int, str, bool]]:
    """(length, text, too_long) of each line of the joined pieces, cut as
    ``str.splitlines(keepends=True)`` cuts; a line longer than MAX_HEADING_LINE keeps only its first
    MAX_HEADING_LINE characters in ``text`` (and ``too_long`` is True)."""
    pend: list | None = None  # [length, text] of a line that may go on in the next piece
    pend_cr = False  # the pending line ends with "\r": complete unless the next piece starts with "\n"

    def grown(line: list, more: str) -> list:
        room = MAX_HEADING_LINE + 1 - len(line[1])
        return [line[0] + len(more), line[1] + more[:room] if room > 0 else line[1]]

    def out(line: list) -> tuple[int, str, bool]:
        n, text = line
        return n, text[:MAX_HEADING_LINE], n > MAX_HEADING_LINE

    for piece in pieces:
        parts = piece.splitlines(keepends=True)
        for i, part in enumerate(parts):
            if pend is not None:
                if pend_cr:
                    done, pend, pend_cr = pend, None, False
                    if part.startswith("\n"):  # "\r" + "\n" cut apart by the read: one break
                        yield out(grown(done, "\n"))
                        part = part[1:]
                        if not part:
                            continue
                    else:
                        yield out(done)
                    line = [len(part), part[:MAX_HEADING_LINE + 1]]
                else:
                    line, pend = grown(pend, part), None
            else:
                line = [len(part), part[:MAX_HEADING_LINE + 1]]
            last = i == len(parts) - 1
            if last and (part[-1] not in _BREAKS or part[-1] == "\r"):
                pend, pend_cr = line, part[-1] == "\r"
            else:
                yield out(line)
    if pend is not None:
        yield out(pend)


def markdown_sections(text: str) -> list[Region]:
    return markdown_sections_of([text])


def markdown_sections_of(pieces: Iterable[str]) -> list[Region]:
    marks: list[tuple[int, str]] = []
    in_fence = False
    pos = 0
    prev: tuple[int, str, bool] | None = None
    for n, line, too_long in iter_lines(pieces):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and not too_long:
            m = _ATX.match(line.rstrip("\r\n"))
            if m:
                marks.append((pos, m.group(2).strip()))
            elif prev is not None and stripped and set(stripped) <= {"="} | {"-"} and len(set(stripped)) == 1 \
                    and not prev[2] and prev[1].strip() and not prev[1].lstrip().startswith(("-", "*", "#")):
                # setext heading: the previous line is the title
                if len(stripped) >= 2:
                    marks.append((pos - prev[0], prev[1].strip()))
        pos += n
        prev = (n, line, too_long)
    return _regions(marks, pos)


def rst_sections(text: str) -> list[Region]:
    return rst_sections_of([text])


def rst_sections_of(pieces: Iterable[str]) -> list[Region]:
    marks: list[tuple[int, str]] = []
    pos = 0
    prev: tuple[int, str, bool] | None = None
    for n, line, too_long in iter_lines(pieces):
        if prev is not None and not too_long and not prev[2]:
            under = line.rstrip("\r\n")
            title = prev[1].strip()
            if (title and under and len(set(under)) == 1 and under[0] in _RST_UNDERLINE
                    and len(under) >= len(title) and len(under) >= 2 and not set(title) <= _RST_UNDERLINE):
                marks.append((pos - prev[0], title))
        pos += n
        prev = (n, line, too_long)
    return _regions(marks, pos)


def _regions(marks: list[tuple[int, str]], n: int) -> list[Region]:
    out = []
    for k, (start, title) in enumerate(marks):
        end = marks[k + 1][0] if k + 1 < len(marks) else n
        out.append(Region(start, end, {"section": title}))
    return out


def plain_title(head: str) -> str | None:
    """A plain-text note's title: its first line when it stands alone as one (at most 200
    characters, with letters, followed by an empty line), as a note's first line usually is."""
    lines = head.lstrip("\ufeff").replace("\r\n", "\n").split("\n", 2)
    if len(lines) < 3 or lines[1].strip():
        return None
    first = lines[0].strip()
    if not first or len(first) > 200 or sum(ch.isalpha() for ch in first) < 3:
        return None
    return first


class TextStream:
    """A text file to be chunked piece by piece: what ``TextExtractor.extract`` gives (its regions,
    title, kind), with the text re-read from the file on each ``pieces()`` instead of held."""

    kind = "text"
    extractor = "text"
    ocr_type = None
    lines_exact = True

    def __init__(self, path: Path) -> None:
        require_text(path)
        self.path = path
        ext = path.suffix.lower()
        self.regions: list[Region] = []
        if ext in MARKDOWN_EXT:
            self.regions = markdown_sections_of(self.pieces())
        elif ext in RST_EXT:
            self.regions = rst_sections_of(self.pieces())
        self.title = self.regions[0].meta["section"] if self.regions else None
        if ext in PLAIN_EXT:
            self.title = plain_title(next(self.pieces(), ""))
        # one more pass over the file for its length: the line region must end where the text ends
        self.regions.append(own_lines(sum(len(p) for p in self.pieces())))

    def pieces(self) -> Iterator[str]:
        return iter_text_pieces(self.path)


class TextExtractor:
    name = "text"
    extensions = PLAIN_EXT + MARKDOWN_EXT + RST_EXT + CODE_EXT

    def extract(self, path: Path, settings: ExtractSettings) -> ExtractedDoc:
        text = read_text_file(path)
        ext = path.suffix.lower()
        regions: list[Region] = []
        if ext in MARKDOWN_EXT:
            regions = markdown_sections(text)
        elif ext in RST_EXT:
            regions = rst_sections(text)
        title = regions[0].meta["section"] if regions else None
        if ext in PLAIN_EXT:
            title = plain_title(text[:1000])
        regions.append(own_lines(len(text)))
        return finish(ExtractedDoc(text=text, kind="text", regions=regions, title=title, extractor=self.name), path)

    def requirements(self) -> list[ToolRequirement]:
        return []

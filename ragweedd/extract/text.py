"""Plain text, markdown, reStructuredText and source code (DESIGN §5).

UTF-8 with undecodable bytes replaced and the BOM stripped (UTF-16 with a BOM is decoded too). A file
that looks binary (NUL bytes, many control characters) is skipped: it was renamed, not written.
Markdown ATX/setext headings and rst underlined titles become ``section`` regions.
"""

from __future__ import annotations

import re
from pathlib import Path

from ragweedd.errors import ExtractionSkipped
from ragweedd.extract.sniff import decode_text, looks_binary, read_head, require_nonempty
from ragweedd.extract.text_builder import finish
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, Region, ToolRequirement

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


def read_text_file(path: Path, max_bytes: int | None = None) -> str:
    require_nonempty(path)
    head = read_head(path)
    why = looks_binary(head)
    if why:
        raise ExtractionSkipped(f"binary file {path}: {why}; it is not indexed as text")
    data = path.read_bytes() if max_bytes is None else open(path, "rb").read(max_bytes)
    return decode_text(data)


def markdown_sections(text: str) -> list[Region]:
    marks: list[tuple[int, str]] = []
    in_fence = False
    pos = 0
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence:
            m = _ATX.match(line.rstrip("\r\n"))
            if m:
                marks.append((pos, m.group(2).strip()))
            elif i > 0 and stripped and set(stripped) <= {"="} | {"-"} and len(set(stripped)) == 1 \
                    and lines[i - 1].strip() and not lines[i - 1].lstrip().startswith(("-", "*", "#")):
                # setext heading: the previous line is the title
                if len(stripped) >= 2:
                    marks.append((pos - len(lines[i - 1]), lines[i - 1].strip()))
        pos += len(line)
    return _regions(marks, len(text))


def rst_sections(text: str) -> list[Region]:
    marks: list[tuple[int, str]] = []
    lines = text.splitlines(keepends=True)
    offsets = []
    pos = 0
    for line in lines:
        offsets.append(pos)
        pos += len(line)
    for i in range(1, len(lines)):
        under = lines[i].rstrip("\r\n")
        title = lines[i - 1].strip()
        if (title and under and len(set(under)) == 1 and under[0] in _RST_UNDERLINE
                and len(under) >= len(title) and len(under) >= 2 and not set(title) <= _RST_UNDERLINE):
            marks.append((offsets[i - 1], title))
    return _regions(marks, len(text))


def _regions(marks: list[tuple[int, str]], n: int) -> list[Region]:
    out = []
    for k, (start, title) in enumerate(marks):
        end = marks[k + 1][0] if k + 1 < len(marks) else n
        out.append(Region(start, end, {"section": title}))
    return out


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
        return finish(ExtractedDoc(text=text, kind="text", regions=regions, title=title, extractor=self.name), path)

    def requirements(self) -> list[ToolRequirement]:
        return []

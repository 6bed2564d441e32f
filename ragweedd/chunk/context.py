"""The context line of a chunk: which document and which section it comes from.

A chunk of a filing's table ("Total revenue  4,795,511  4,147,065") does not say whose revenue or
which year; questions do ("Adobe's revenue in FY2015"). So each chunk is embedded and
keyword-indexed with a short line before it: the document's name, its title when that says more,
and the section path (``ADOBE 2015 10K · ADBE 10K FY15 › Item 7. Management's Discussion ›
Revenue``). The stored and cited text stays the chunk alone; the line is kept in the chunk's
metadata (``context``) and in a column of its own in the keyword index.

The format is versioned (``CONTEXT_FORMAT``): the version is part of the embedder id a collection
is built with, so a change of format re-embeds the collection instead of mixing vectors made from
different inputs.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from ragweedd.contract import shown_path

CONTEXT_FORMAT = "ctx1"
SEP_TITLE = " · "
SEP_SECTION = " › "
# About 30 tokens of a 256-token window: less than the 15% overlap, so the part of a chunk the
# embedder cuts off to make room is in the next chunk.
MAX_CONTEXT_CHARS = 120
MAX_LABEL_CHARS = 70

# Titles that name nothing: SEC accession numbers, office defaults, bare file names.
_ACCESSION = re.compile(r"^\d{10}-\d{2}-\d{6}$")
_FILE_NAME = re.compile(r"^[\w\-. ]+\.(pdf|docx?|odt|rtf|txt|md|html?|pptx?|xlsx?)$", re.I)
_JUNK_TITLES = {"document", "untitled", "title", "untitled document", "microsoft word", "slide 1", "none"}
_OFFICE_PREFIX = re.compile(r"^(microsoft (word|powerpoint|excel)|libreoffice|openoffice)\s*-\s*", re.I)


def readable_name(path: str) -> str:
    """A file name as words: ``3M_2018_10K.pdf`` -> "3M 2018 10K"; "" for a name without a letter
    (``4983.txt``, ``IMG_0001``-style numbers say nothing a search could use)."""
    # a name that is not UTF-8 (lone surrogates in Python) is read as faces show it: ``\xNN``
    stem = shown_path(PurePath(path).name)
    if "." in stem.strip("."):
        stem = stem.rsplit(".", 1)[0]
    name = re.sub(r"\s+", " ", re.sub(r"[_\-.+]+", " ", stem)).strip()
    return name if sum(ch.isalpha() for ch in name) >= 2 else ""


def useful_title(title: str | None) -> str | None:
    """The title a document declares, or None when it names nothing (an accession number,
    "Document", "Microsoft Word - x.docx", a file name)."""
    if not title:
        return None
    t = _OFFICE_PREFIX.sub("", re.sub(r"\s+", " ", title)).strip()
    if not t or _ACCESSION.match(t) or t.lower() in _JUNK_TITLES or _FILE_NAME.match(t):
        return None
    if sum(ch.isalpha() for ch in t) < 3:
        return None
    return t


def document_label(path: str, title: str | None) -> str:
    """The document part of the context line: its readable name, and its title when the title
    is useful and not already the name."""
    name = readable_name(path)
    t = useful_title(title)
    if t is None or (name and _norm(t) in _norm(name)):
        return name
    if not name or _norm(name) in _norm(t):
        return t
    return f"{name}{SEP_TITLE}{t}"


def context_line(label: str, section_path: list[str] | None, section: str | None = None,
                 table: str | None = None) -> str:
    """The context line of one chunk: the document label, then its section path, then the title
    of the table the chunk is part of (every chunk of a table says which table it is)."""
    parts: list[str] = []
    for s in [*(section_path or ([section] if section else [])), *([table] if table else [])]:
        s = (s or "").strip()
        # a heading that repeats the title (a markdown file's first heading is both) is said once
        if s and _norm(s) and _norm(s) not in {_norm(p) for p in parts} and not (
                label and parts == [] and _norm(label).endswith(_norm(s))):
            parts.append(s)
    if len(label) > MAX_LABEL_CHARS:
        label = label[:MAX_LABEL_CHARS - 1].rstrip() + "…"
    # the innermost sections say most about the chunk: outer ones give way first
    while parts and len(SEP_SECTION.join(([label] if label else []) + parts)) > MAX_CONTEXT_CHARS and len(parts) > 1:
        parts.pop(0)
    line = SEP_SECTION.join(([label] if label else []) + parts)
    if len(line) > MAX_CONTEXT_CHARS:
        line = line[:MAX_CONTEXT_CHARS - 1].rstrip() + "…"
    return line


def index_embedder_id(embedder_id: str, with_context: bool) -> str:
    """The id a collection's vectors are recorded under: the model, and the context format when
    chunks are embedded with their context line (a change of either re-embeds the collection)."""
    return f"{embedder_id}+{CONTEXT_FORMAT}" if with_context else embedder_id


def embed_input(text: str, context: str | None) -> str:
    """What the embedder reads for a chunk."""
    return f"{context}\n{text}" if context else text


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", s.lower())

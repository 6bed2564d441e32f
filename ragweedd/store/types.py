"""Values that cross the storage seam, the same for every backend: vector space names, a chunk to
publish, a queued job, a file skipped from its stat, a stored row. The layers above ``store/`` import these from here
and never from a backend's modules (tests/unit/test_store_seam.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, NotRequired, Protocol, Sequence, TypedDict, Union

from ragweedd.errors import RequestError

PRIMARY = "primary"  # vector space of the main embedder; extra passes are "384" / "1024"
MIGRATION = "next"  # the vector space of the model a collection is moving to


class ChunkRecord(TypedDict):
    """One chunk as the chunker makes it, the pipeline dresses it and ``publish`` stores it."""

    chunk_idx: int  # 0-based position in its document
    text: str  # what is embedded, keyword-indexed and quoted
    meta: dict[str, Any]  # provenance: page, section, char/line span, sheet rows, time, ...
    text_hash: NotRequired[str]  # SHA-256 of text (the store hashes it again for its own rows)
    context: NotRequired[str]  # the title/section line put before the text when it is embedded
    embed_hash: NotRequired[str]  # SHA-256 of what is embedded (context and text), the embed cache's key


class Row(Protocol):
    """A stored row, read by column name (``row["md5"]``), as sqlite3.Row and mappings allow."""

    def __getitem__(self, key: Any, /) -> Any: ...

    def keys(self) -> Any: ...


@dataclass(frozen=True)
class Job:
    """One claimed unit of ingest work: a path of a collection to index (op "upsert") or let go of
    ("delete"), and how often it was tried."""

    id: int
    collection: str
    path: str
    root: str | None
    op: str
    tries: int


class SkippedFile(NamedTuple):
    """A file skipped from its stat alone (empty, or a type no extractor reads): the row it gets."""

    path: str
    root: str | None
    size: int
    mtime_ns: int
    inode: int
    md5: str | None  # the empty md5 for an empty file; None when the bytes were never read
    reason: str


# --- keyword queries ---------------------------------------------------------------------------
# A keyword query crosses the seam as this small tree; each backend renders it in its own
# language (SQLite: an FTS5 MATCH expression; PostgreSQL: a tsquery of literals). Its leaves hold
# index terms (ragweedd/keyterms.py) only, so no text of a user's query can become an operator.


@dataclass(frozen=True)
class Terms:
    """Index terms that stand together in this order: one word, or a phrase."""

    terms: tuple[str, ...]


@dataclass(frozen=True)
class AllOf:
    """Rows that match every part."""

    parts: tuple[KeywordQuery, ...]


@dataclass(frozen=True)
class AnyOf:
    """Rows that match at least one part."""

    parts: tuple[KeywordQuery, ...]


KeywordQuery = Union[Terms, AllOf, AnyOf]


def all_of(parts: Sequence[KeywordQuery]) -> KeywordQuery:
    """Every part; the part itself when there is one."""
    if not parts:
        raise RequestError("a keyword query needs at least one word")
    return parts[0] if len(parts) == 1 else AllOf(tuple(parts))


def any_of(parts: Sequence[KeywordQuery]) -> KeywordQuery:
    """Any of the parts; the part itself when there is one."""
    if not parts:
        raise RequestError("a keyword query needs at least one word")
    return parts[0] if len(parts) == 1 else AnyOf(tuple(parts))


def leaves(q: KeywordQuery) -> list[Terms]:
    """The query's words and phrases, left to right."""
    if isinstance(q, Terms):
        return [q]
    return [t for p in q.parts for t in leaves(p)]


def describe(q: KeywordQuery) -> str:
    """The query as a person reads it in the retrieval meta: quoted words and phrases joined by
    AND and OR (which is also FTS5's own syntax)."""
    if isinstance(q, Terms):
        return '"' + " ".join(q.terms).replace('"', '""') + '"'
    inner = (" AND " if isinstance(q, AllOf) else " OR ").join(
        describe(p) if isinstance(p, Terms) else f"({describe(p)})" for p in q.parts)
    return inner

"""Turn an extracted document into chunk records with exact provenance.

Each chunk keeps its character span in the extracted text and whatever the extractor's regions say
about that span: every page it touches (``page_label`` "3" or "3-4"), the section heading, sheet and
row range, the table (its number and title) and its rows, time range, archive member, and the lines
(``line_start``/``line_end``, 1-based, inclusive, of its first and last character) where a ``line``
region says the text is the file's own. A table is chunked apart from the text around it, by whole
rows (``table_spans``).
Chunks that the entropy filter drops are counted, not stored.
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable, Iterator

from ragweedd.chunk.entropy import shannon_entropy, verdict, word_count
from ragweedd.chunk.splitter import chunk_chars_for, iter_spans
from ragweedd.extract.base import ExtractedDoc, Region
from ragweedd.store.types import ChunkRecord
from ragweedd.text_stats import LOGOGRAPHIC_EXTRA_BITS, logographic_share

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.embed.base import Embedder


@dataclass(frozen=True)
class ChunkParams:
    chunk_tokens: int
    pdf_tokens: int
    av_tokens: int
    overlap_pct: int
    entropy_max: float = 7.0
    entropy_min: float = 0.5
    pdf_overlap_pct: int | None = None  # PDFs' own overlap; None = overlap_pct

    @classmethod
    def from_config(cls, cfg: Config, preferred_tokens: int, preferred_overlap_pct: int = 15,
                    preferred_pdf_overlap_pct: int = 50) -> "ChunkParams":
        """``chunk_size`` and ``chunk_overlap_pct`` of 'auto' take the embedder's own figures
        (its overlap for PDFs and for other text differ: docs/chunking.md)."""
        tokens = preferred_tokens if cfg.chunk_size == "auto" else int(cfg.chunk_size)
        if cfg.chunk_overlap_pct == "auto":
            overlap, pdf_overlap = preferred_overlap_pct, preferred_pdf_overlap_pct
        else:
            overlap = pdf_overlap = int(cfg.chunk_overlap_pct)
        return cls(tokens, cfg.chunk_size_pdf, cfg.chunk_size_av, overlap, cfg.ingest_entropy_max,
                   cfg.ingest_entropy_min, pdf_overlap)

    @classmethod
    def for_embedder(cls, cfg: Config, embedder: Embedder) -> "ChunkParams":
        return cls.from_config(cfg, getattr(embedder, "preferred_chunk_tokens", 256),
                               getattr(embedder, "preferred_overlap_pct", 15),
                               getattr(embedder, "preferred_overlap_pct_pdf", 50))

    def overlap_for(self, kind: str) -> int:
        return self.pdf_overlap_pct if kind == "pdf" and self.pdf_overlap_pct is not None else self.overlap_pct


@dataclass
class ChunkResult:
    chunks: list[ChunkRecord] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _RegionIndex:
    """Regions grouped by the set of keys they carry; within a group regions do not overlap."""

    def __init__(self, regions: list[Region]) -> None:
        groups: dict[frozenset, list[Region]] = {}
        for r in regions:
            groups.setdefault(frozenset(r.meta), []).append(r)
        self.groups = []
        for rs in groups.values():
            rs.sort(key=lambda r: (r.start, r.end))
            self.groups.append((rs, [r.start for r in rs], [r.end for r in rs]))

    def overlapping(self, start: int, end: int) -> list[Region]:
        out: list[Region] = []
        for rs, starts, ends in self.groups:
            hi = bisect_left(starts, end)
            lo = bisect_right(ends, start)
            out.extend(r for r in rs[lo:hi] if r.end > start and r.start < end)
        return out


def provenance(regions: list[Region], start: int | None = None) -> dict[str, Any]:
    """What the regions overlapping a chunk that starts at ``start`` say about it.

    The section is the heading in force where the chunk starts (the region holding ``start``);
    a chunk that starts above every heading takes the first heading inside it only when that
    heading is on the chunk's first page: a heading of a later page is not yet in force on the
    page the chunk is cited by (an 8-K's cover page labelled "Item 5.07" of the next page)."""
    meta: dict[str, Any] = {}
    ordered = sorted(regions, key=lambda r: r.start)
    pages = sorted({r.meta["page"] for r in regions if "page" in r.meta})
    if pages:
        meta["pages"] = pages
        meta["page_label"] = str(pages[0]) if len(pages) == 1 else f"{pages[0]}-{pages[-1]}"
    first_page_end = next((r.end for r in ordered if "page" in r.meta), None)
    # the heading path (PDF outline or layout headings) comes with its section, from one region
    sections = [r for r in ordered if "section" in r.meta]
    if sections:
        head = sections[0]
        if (start is None or head.start <= start or first_page_end is None
                or head.start < first_page_end):
            meta["section"] = head.meta["section"]
            if "section_path" in head.meta:
                meta["section_path"] = head.meta["section_path"]
    # a table is chunked apart from the text around it: the chunk is in this table, all of it
    table = next((r for r in ordered if "table" in r.meta), None)
    if table is not None:
        meta["table"] = table.meta["table"]
        if table.meta.get("table_title"):
            meta["table_title"] = table.meta["table_title"]
    sheets = [r.meta["sheet"] for r in ordered if "sheet" in r.meta]
    if sheets:
        meta["sheet"] = sheets[0]
    if "table_title" not in meta:
        # a run of spreadsheet rows is named by its sheet and title rows (sheets.py)
        titled = next((r for r in ordered
                       if r.meta.get("table_title") and r.meta.get("sheet") == meta.get("sheet")), None)
        if titled is not None:
            meta["table_title"] = titled.meta["table_title"]
    # the rows of the sheet cited (a chunk does not cross sheets, but a zip's members could meet)
    rows = [r for r in regions if "row_start" in r.meta and r.meta.get("sheet") == meta.get("sheet")]
    if rows:
        meta["row_start"] = min(r.meta["row_start"] for r in rows)
        meta["row_end"] = max(r.meta.get("row_end", r.meta["row_start"]) for r in rows)
    times = [r for r in regions if "t_start" in r.meta]
    if times:
        meta["t_start"] = min(r.meta["t_start"] for r in times)
        meta["t_end"] = max(r.meta.get("t_end", r.meta["t_start"]) for r in times)
    members = [r.meta["member"] for r in sorted(regions, key=lambda r: r.start) if "member" in r.meta]
    if members:
        meta["ole_parent_name"] = max(members, key=len)  # the innermost member path
    if any(r.meta.get("ocr") for r in regions):
        meta["ocr"] = True
    return meta


def _breaks(seg: str, nxt: str) -> int:
    """Line breaks in ``seg`` as editors count them: "\n", "\r\n" and a lone "\r" (old Mac files)
    each end one line; ``nxt`` is the character after ``seg`` ("" at the end of the text), which
    tells whether a final "\r" is half of a "\r\n". The other characters str.splitlines() cuts at
    (form feed, U+2028, ...) end no line in an editor, so they are not counted."""
    n = seg.count("\n") + seg.count("\r") - seg.count("\r\n")
    return n - 1 if nxt == "\n" and seg.endswith("\r") else n


class _LineCounter:
    """Line numbers of positions in a text seen only as the overlapping spans of ``iter_spans``, in
    order, without holding the text: the breaks before the current span's start are kept as a count
    and moved on by the part of the previous span the next one no longer covers (spans cover the
    text, each starting at or before the previous one's end), so the whole text is counted about
    once, whatever its size and however it was cut into pieces."""

    def __init__(self, regions: list[Region]) -> None:
        self.regions = sorted((r for r in regions if "line" in r.meta and r.end > r.start),
                              key=lambda r: r.start)
        self.starts = [r.start for r in self.regions]
        self.base: dict[int, int] = {}  # region index -> breaks before its start
        self.next_region = 0
        self.start = 0  # the current span: text[start:start + len(span)]
        self.span = ""
        self.breaks = 0  # line breaks in text[:start]

    def see(self, start: int, span: str) -> None:
        """Move on to the next span of ``iter_spans``."""
        if start > self.start:
            self.breaks += _breaks(self.span[:start - self.start], span[:1])
        self.start, self.span = start, span
        end = start + len(span)
        while self.next_region < len(self.regions) and self.starts[self.next_region] < end:
            k = self.next_region
            if self.starts[k] >= start:
                self.base[k] = self.before(self.starts[k])
            self.next_region += 1

    def before(self, pos: int) -> int:
        """Line breaks in text[:pos], for pos within the current span."""
        q = pos - self.start
        return self.breaks + _breaks(self.span[:q], self.span[q:q + 1])

    def lines(self, start: int, end: int) -> tuple[int, int] | None:
        """(first, last) line of text[start:end] (inside the current span), or None outside a
        ``line`` region."""
        k = bisect_right(self.starts, start) - 1
        if k < 0 or k not in self.base or self.regions[k].end <= start:
            return None
        r = self.regions[k]
        first = r.meta["line"] + self.before(start) - self.base[k]
        # a chunk that runs past its region (into the next archive member) ends at the region's end
        last = r.meta["line"] + self.before(min(end, r.end) - 1) - self.base[k]
        return first, last


class _RowCounter:
    """The rows a chunk holds, exactly, where a region of rows has one line per row (a run of
    consecutive spreadsheet rows: sheets.py); elsewhere (a JSON Lines object printed over many
    lines) the rows of the regions it touches."""

    def __init__(self, regions: list[Region]) -> None:
        self.regions = [r for r in regions if "row_start" in r.meta]
        self.breaks: list[int] = []
        self.one_per_line: set[int] = set()

    def see(self, text: str) -> None:
        self.breaks = [m.start() for m in re.finditer("\n", text)]
        for r in self.regions:
            first, last = r.meta["row_start"], r.meta.get("row_end", r.meta["row_start"])
            if self._breaks(r.start, r.end) == last - first:
                self.one_per_line.add(id(r))

    def _breaks(self, a: int, b: int) -> int:
        """Line breaks in text[a:b]."""
        return bisect_left(self.breaks, b) - bisect_left(self.breaks, a)

    def _row(self, r: Region, pos: int) -> int:
        """The row of the character at ``pos`` inside ``r``."""
        return r.meta["row_start"] + self._breaks(r.start, pos)

    def rows(self, over: list[Region], start: int, end: int, sheet: str | None) -> tuple[int, int] | None:
        mine = sorted((r for r in over if "row_start" in r.meta and r.meta.get("sheet") == sheet),
                      key=lambda r: r.start)
        if not mine:
            return None
        first, last = mine[0], mine[-1]
        lo = (self._row(first, max(start, first.start)) if id(first) in self.one_per_line
              else first.meta["row_start"])
        hi = (self._row(last, min(end, last.end) - 1) if id(last) in self.one_per_line
              else last.meta.get("row_end", last.meta["row_start"]))
        return lo, hi


def _sheet_cuts(regions: list[Region]) -> list[int]:
    """Where the text passes from one sheet to the next (of a workbook, or of a zip's workbooks)."""
    cuts: list[int] = []
    last = None
    for r in sorted((r for r in regions if "sheet" in r.meta), key=lambda r: r.start):
        key = (r.meta.get("member"), r.meta["sheet"])
        if last is not None and key != last and r.start > 0 and (not cuts or r.start > cuts[-1]):
            cuts.append(r.start)
        last = key
    return cuts


def _tables(regions: list[Region]) -> list[Region]:
    """The regions of whole tables (tables.py): each is chunked on its own, by rows."""
    return sorted((r for r in regions if "table" in r.meta and "row_start" not in r.meta and r.end > r.start),
                  key=lambda r: r.start)


def table_spans(text: str, start: int, chars: int, overlap: int) -> Iterator[tuple[int, int, str]]:
    """The chunks of one table's text (at ``start`` of the whole text): whole rows, one a line,
    packed into chunks of about equal size, none over ``chars`` (a table that fits stays one
    chunk); rows are not repeated across chunks, as each carries its headers. A row longer than
    ``chars`` alone is cut as any text is."""
    lines = text.split("\n")
    total = len(text)
    parts = -(-total // chars)
    target = min(chars, -(-total // parts) + 1)
    pos = 0
    run_start, run_len = 0, 0
    for line in lines:
        size = len(line) + 1
        if run_len and run_len + len(line) > target:
            yield start + run_start, start + run_start + run_len - 1, text[run_start:run_start + run_len - 1]
            run_len = 0
        if not run_len:
            run_start = pos
        if len(line) > chars:
            for s, e, t in iter_spans([line], chars, overlap):
                yield start + pos + s, start + pos + e, t
            run_len = 0
        else:
            run_len += size
        pos += size
    if run_len:
        yield start + run_start, start + run_start + run_len - 1, text[run_start:run_start + run_len - 1]


def chunk_document(doc: ExtractedDoc, params: ChunkParams) -> ChunkResult:
    result = ChunkResult()
    result.chunks = list(iter_chunks([doc.text], doc.kind, doc.regions, params, result.dropped))
    return result


def iter_chunks(pieces: Iterable[str], kind: str, regions: list[Region], params: ChunkParams,
                dropped: dict[str, int]) -> Iterator[ChunkRecord]:
    """The chunk records of the text that ``pieces`` make up, one at a time (a large file is
    chunked without holding its text); chunks the entropy filter drops are counted in ``dropped``.
    ``chunk_document`` is this over one piece, so both give the same chunks."""
    chars = chunk_chars_for(kind, params.chunk_tokens, params.pdf_tokens, params.av_tokens)
    overlap = chars * params.overlap_for(kind) // 100
    index = _RegionIndex(regions)
    counter = _LineCounter(regions) if any("line" in r.meta for r in regions) else None
    n = 0
    cuts = _sheet_cuts(regions)
    tables = _tables(regions)
    if tables:
        cuts = sorted({*cuts, *(x for t in tables for x in (t.start, t.end) if x > 0)})
    rows = _RowCounter(regions) if any("row_start" in r.meta for r in regions) else None
    spans: Iterable[tuple[int, int, str]]
    if cuts or rows is not None:
        # Spreadsheets, CSV and JSON Lines are extracted in memory (only plain text is streamed),
        # so joining their pieces costs nothing the extractor did not.
        text = "".join(pieces)
        if rows is not None:
            rows.see(text)
        # A chunk stays inside one sheet, or one table, so its citation (sheet or table, rows)
        # names all of it.
        bounds = sorted({0, *(c for c in cuts if c < len(text)), len(text)})
        table_at = {t.start: t.end for t in tables}
        spans = ((a + s, a + e, t) for a, b in zip(bounds, bounds[1:])
                 for s, e, t in (table_spans(text[a:b], 0, chars, overlap) if table_at.get(a) == b
                                 else iter_spans([text[a:b]], chars, overlap)))
    else:
        spans = iter_spans(pieces, chars, overlap)
    for start, end, span in spans:
        if counter is not None:
            counter.see(start, span)
        body = span.strip()
        if not body:
            continue
        # strip() and str.isspace() agree on what whitespace is, so this is the span trimmed
        start += len(span) - len(span.lstrip())
        end = start + len(body)
        h = shannon_entropy(body)
        words = word_count(body)
        # Chinese or Japanese prose has 5-7.5 bits a character (thousands of characters in use):
        # under the alphabetic threshold a tenth of XQuAD's Chinese paragraphs were dropped as garbage
        limit = params.entropy_max + LOGOGRAPHIC_EXTRA_BITS * logographic_share(body) if h > params.entropy_max \
            else params.entropy_max
        why = verdict(h, words, entropy_max=limit, entropy_min=params.entropy_min)
        if why:
            dropped[why] = dropped.get(why, 0) + 1
            continue
        over = index.overlapping(start, end)
        meta = provenance(over, start)
        if rows is not None:
            exact = rows.rows(over, start, end, meta.get("sheet"))
            if exact is not None:
                meta["row_start"], meta["row_end"] = exact
        meta.update({"char_start": start, "char_end": end, "text_entropy": round(h, 4), "word_count": words})
        lines = counter.lines(start, end) if counter is not None else None
        if lines is not None:
            meta["line_start"], meta["line_end"] = lines
        yield {"chunk_idx": n, "text": body, "text_hash": text_hash(body), "meta": meta}
        n += 1

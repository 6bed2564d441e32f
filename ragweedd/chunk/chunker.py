"""Turn an extracted document into chunk records with exact provenance.

Each chunk keeps its character span in the extracted text and whatever the extractor's regions say
about that span: every page it touches (``page_label`` "3" or "3-4"), the section heading, sheet and
row range, time range, archive member. Chunks that the entropy filter drops are counted, not stored.
"""

from __future__ import annotations

import hashlib
from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator

from ragweedd.chunk.entropy import shannon_entropy, verdict, word_count
from ragweedd.chunk.splitter import chunk_chars_for, iter_spans
from ragweedd.extract.base import ExtractedDoc, Region


@dataclass(frozen=True)
class ChunkParams:
    chunk_tokens: int
    pdf_tokens: int
    av_tokens: int
    overlap_pct: int
    entropy_max: float = 7.0
    entropy_min: float = 0.5

    @classmethod
    def from_config(cls, cfg, preferred_tokens: int) -> "ChunkParams":
        tokens = preferred_tokens if cfg.chunk_size == "auto" else int(cfg.chunk_size)
        return cls(tokens, cfg.chunk_size_pdf, cfg.chunk_size_av, cfg.chunk_overlap_pct,
                   cfg.ingest_entropy_max, cfg.ingest_entropy_min)


@dataclass
class ChunkResult:
    chunks: list[dict[str, Any]] = field(default_factory=list)
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


def provenance(regions: list[Region]) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    pages = sorted({r.meta["page"] for r in regions if "page" in r.meta})
    if pages:
        meta["pages"] = pages
        meta["page_label"] = str(pages[0]) if len(pages) == 1 else f"{pages[0]}-{pages[-1]}"
    for key in ("section", "sheet"):
        vals = [r.meta[key] for r in sorted(regions, key=lambda r: r.start) if key in r.meta]
        if vals:
            meta[key] = vals[0]
    rows = [r for r in regions if "row_start" in r.meta]
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


def chunk_document(doc: ExtractedDoc, params: ChunkParams) -> ChunkResult:
    result = ChunkResult()
    result.chunks = list(iter_chunks([doc.text], doc.kind, doc.regions, params, result.dropped))
    return result


def iter_chunks(pieces: Iterable[str], kind: str, regions: list[Region], params: ChunkParams,
                dropped: dict[str, int]) -> Iterator[dict[str, Any]]:
    """The chunk records of the text that ``pieces`` make up, one at a time (a large file is
    chunked without holding its text); chunks the entropy filter drops are counted in ``dropped``.
    ``chunk_document`` is this over one piece, so both give the same chunks."""
    chars = chunk_chars_for(kind, params.chunk_tokens, params.pdf_tokens, params.av_tokens)
    overlap = chars * params.overlap_pct // 100
    index = _RegionIndex(regions)
    n = 0
    for start, end, span in iter_spans(pieces, chars, overlap):
        body = span.strip()
        if not body:
            continue
        # strip() and str.isspace() agree on what whitespace is, so this is the span trimmed
        start += len(span) - len(span.lstrip())
        end = start + len(body)
        h = shannon_entropy(body)
        words = word_count(body)
        why = verdict(h, words, entropy_max=params.entropy_max, entropy_min=params.entropy_min)
        if why:
            dropped[why] = dropped.get(why, 0) + 1
            continue
        meta = provenance(index.overlapping(start, end))
        meta.update({"char_start": start, "char_end": end, "text_entropy": round(h, 4), "word_count": words})
        yield {"chunk_idx": n, "text": body, "text_hash": text_hash(body), "meta": meta}
        n += 1

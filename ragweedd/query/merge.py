"""Merging vector and keyword candidates into one ranked result list (DESIGN §8, "Merge").

Fusion "boost" (the design's): score = vector similarity + FTS_WEIGHT when the keyword plan found
the chunk; a chunk found only by keywords gets its similarity from its stored vector, so every
score is on the cosine scale and collections merge directly. Fusion "rrf": score = sum over the
two lists of 1 / (RRF_K + rank), ranks 1-based in the dense list (all collections, by similarity)
and the keyword list (all collections, by BM25; BM25 of different collections is only roughly
comparable, which RRF's use of ranks tolerates).

Then, in this order: sort; keep at most MAX_CHUNKS_PER_FILE per (collection, source file); drop a
chunk whose first 200 characters (whitespace collapsed) repeat a higher-scoring one; rel_score =
(score - min) / (max - min) over that set (1.0 for all when max == min); drop rel_score < MIN_SCORE;
cut to the number of results asked for; mark the top PRE_ANNOTATE_KEEP percent (rounded up) of
what is returned with ``annotate: true``. Everything is returned; the answer layer annotates only
the marked results.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass
class Candidate:
    collection: str
    chunk_id: int
    sim: float | None = None
    bm25: float | None = None
    dense_rank: int | None = None
    fts_rank: int | None = None
    in_dense: bool = False  # found by the vector search (not just scored from its stored vector)
    score: float = 0.0


def fuse(cands: list[Candidate], *, mode: str, fusion: str, fts_weight: float, rrf_k: int) -> None:
    dense = sorted((c for c in cands if c.in_dense), key=lambda c: -(c.sim or 0.0))
    for r, c in enumerate(dense, 1):
        c.dense_rank = r
    kw = sorted((c for c in cands if c.bm25 is not None), key=lambda c: -(c.bm25 or 0.0))
    for r, c in enumerate(kw, 1):
        c.fts_rank = r
    for c in cands:
        if mode == "dense":
            c.score = c.sim or 0.0
        elif mode == "keyword":
            c.score = c.bm25 or 0.0
        elif fusion == "rrf":
            c.score = ((1.0 / (rrf_k + c.dense_rank)) if c.dense_rank else 0.0) + \
                      ((1.0 / (rrf_k + c.fts_rank)) if c.fts_rank else 0.0)
        else:
            c.score = (c.sim or 0.0) + (fts_weight if c.bm25 is not None else 0.0)


def dedup_key(text: str) -> str:
    return " ".join((text or "").split())[:200]


def finish(hits: list[dict[str, Any]], *, max_per_file: int, min_score: float, limit: int,
           keep_pct: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """hits carry 'score'; returns (results, counts per stage)."""
    counts = {"merged": len(hits)}
    hits = sorted(hits, key=lambda h: (-h["score"], h["collection"], h["embedding_id"]))
    per_file: dict[tuple[str, str], int] = {}
    capped = []
    for h in hits:
        key = (h["collection"], h.get("source_file") or h.get("doc_id") or "")
        if per_file.get(key, 0) >= max_per_file:
            continue
        per_file[key] = per_file.get(key, 0) + 1
        capped.append(h)
    counts["after_file_cap"] = len(capped)
    seen: set[str] = set()
    unique = []
    for h in capped:
        k = dedup_key(h.get("text", ""))
        if k in seen:
            continue
        seen.add(k)
        unique.append(h)
    counts["after_dedup"] = len(unique)
    if unique:
        hi, lo = unique[0]["score"], min(h["score"] for h in unique)
        for h in unique:
            h["rel_score"] = 1.0 if hi == lo else (h["score"] - lo) / (hi - lo)
    kept = [h for h in unique if h["rel_score"] >= min_score]
    counts["after_min_score"] = len(kept)
    out = kept[:limit]
    n_ann = math.ceil(len(out) * keep_pct / 100)
    for i, h in enumerate(out):
        h["rank"] = i + 1
        h["annotate"] = i < n_ann
    counts["returned"] = len(out)
    counts["for_annotation"] = n_ann
    return out, counts

"""Merging vector and keyword candidates into one ranked result list (DESIGN §8, "Merge").

Every candidate of a hybrid search has both scores where it can: a chunk found only by keywords
gets its cosine from its stored vector, a chunk found only by the vector search gets its BM25 for
the query's words from the keyword reader (query/bm25.py), so the fusion sees both legs fully.

Fusion "zscore" (the default; measured best over SciFact train and FinanceBench dev together, see
docs/retrieval.md): each leg's scores are standardised by the mean and deviation of that leg's top
scores (the dense leg's first ``top_k`` over all collections, one cosine scale; the keyword leg's
first ``fts_top_k`` per collection, since BM25 scales differ between collections), and
score = a * z(dense) + (1 - a) * z(keyword), a = ``zscore_dense_weight``. A chunk without any of the
query's words has BM25 0 (a keyword window its matches do not fill is filled with zeros); a chunk
without a cosine (its vector still pending) gets the lowest z of the dense window. Standardising
puts both legs on one scale (how far a chunk stands above its leg's usual top scores), whatever the
raw scale of BM25 in a collection or the range of cosines a model gives: a model whose cosines all
lie between 0.5 and 0.9 is weighed like one whose cosines spread from 0.1 to 0.8, which dividing by
the best score does not do.
Fusion "convex": score = a * cosine + (1 - a) * bm25 / (the best bm25 of the query in that
collection), a = ``convex_dense_weight``. Fusion "rrf": score = sum over the two lists of
w / (RRF_K + rank), ranks 1-based in the dense list (all collections, by similarity) and the keyword
leg's own list (all collections, by BM25), w = 1 for the dense list and ``rrf_keyword_weight`` for
the keyword list. Fusion "boost" (the original design's): score = vector similarity + FTS_WEIGHT
when the keyword leg found the chunk.

Then, in this order: sort; drop a chunk whose pages a higher-scoring chunk of the same file already
covers (with 50% overlap between PDF chunks, two chunks of one page would otherwise spend the file's
places on one page: measured +0.026 page hit@5 on FinanceBench dev); keep at most
MAX_CHUNKS_PER_FILE per (collection, source file); drop a
chunk whose first 200 characters (whitespace collapsed) repeat a higher-scoring one; rel_score =
(score - min) / (max - min) over that set (1.0 for all when max == min); drop rel_score < MIN_SCORE;
cut to the number of results asked for; mark the top PRE_ANNOTATE_KEEP percent (rounded up) of
what is returned with ``annotate: true``. Everything is returned; the answer layer annotates only
the marked results.

Known items (a chunk holding a query word at most three chunks hold: an identifier, a code, a name;
query/fts_plan.py ``known_item_rows``): under zscore their dense z is at least the window's lowest,
and ``finish`` never drops them (pages, cap, dedup against other chunks, MIN_SCORE) and gives the
best of them up to half of the places asked for: the one passage holding a rare word is shown
whatever the embedder makes of it.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ragweedd.config import Config, default_config


@dataclass
class Candidate:
    collection: str
    chunk_id: int
    sim: float | None = None
    bm25: float | None = None
    dense_rank: int | None = None
    fts_rank: int | None = None
    in_dense: bool = False  # found by the vector search (not just scored from its stored vector)
    in_keyword: bool = False  # found by the keyword leg (not just scored for the query's words)
    words_scored: bool = False  # its BM25 for the query's words was worked out (None: none of them)
    known_item: bool = False  # holds a query word almost no other chunk holds (fts_plan.known_item_rows)
    score: float = 0.0


FUSIONS = ("zscore", "convex", "rrf", "boost")


@dataclass(frozen=True)
class FusionParams:
    """The fusion settings of a configuration (``of``); the defaults live in config.py only."""

    fusion: str
    dense_weight: float
    fts_weight: float
    rrf_k: int
    rrf_keyword_weight: float
    dense_window: int
    keyword_window: int
    rrf_dense_weight: float = 1.0

    @classmethod
    def default(cls, fusion: str, **changes: Any) -> "FusionParams":
        """The default configuration's settings for ``fusion``, with ``changes``."""

        return dataclasses.replace(cls.of(default_config(), fusion), **changes)

    @classmethod
    def of(cls, cfg: Config, fusion: str | None = None, *, dense_blind: bool = False) -> "FusionParams":
        """``dense_blind``: the query is in a language no working embedder reads (embed.languages):
        the dense leg gets ``uncovered_dense_weight``, so it cannot push down what the keyword leg
        found (XQuAD: an English-only MiniLM put German hybrid below keyword-only)."""
        fusion = fusion or cfg.fusion
        a = cfg.convex_dense_weight if fusion == "convex" else cfg.zscore_dense_weight
        rrf_dense = 1.0
        if dense_blind:
            a = rrf_dense = cfg.uncovered_dense_weight
        return cls(fusion, a, cfg.fts_weight, cfg.rrf_k, cfg.rrf_keyword_weight, cfg.top_k, cfg.fts_top_k,
                   rrf_dense)


def _window_stats(scores: list[float]) -> tuple[float, float, float]:
    """(mean, deviation, lowest) of a leg's top scores; deviation 1 when they are all alike."""
    if not scores:
        return 0.0, 1.0, 0.0
    mean = sum(scores) / len(scores)
    sd = math.sqrt(sum((x - mean) ** 2 for x in scores) / len(scores))
    return mean, (sd if sd > 1e-12 else 1.0), min(scores)


def fuse(cands: list[Candidate], *, mode: str, params: FusionParams) -> None:
    dense = sorted((c for c in cands if c.in_dense), key=lambda c: -(c.sim or 0.0))
    for r, c in enumerate(dense, 1):
        c.dense_rank = r
    kw = sorted((c for c in cands if c.in_keyword), key=lambda c: -(c.bm25 or 0.0))
    for r, c in enumerate(kw, 1):
        c.fts_rank = r
    by_col: dict[str, list[Candidate]] = {}
    for c in cands:
        if c.bm25 is not None:
            by_col.setdefault(c.collection, []).append(c)
    best_bm25 = {name: max(x.bm25 or 0.0 for x in xs) for name, xs in by_col.items()}
    if mode == "hybrid" and params.fusion == "zscore":
        dstat = _window_stats([c.sim or 0.0 for c in sorted((c for c in cands if c.sim is not None),
                                                            key=lambda c: -(c.sim or 0.0))[:params.dense_window]])
        # A chunk without the query's words has BM25 0, so a window the matches do not fill is
        # filled with zeros: a word only one chunk holds then lifts that chunk far above the rest
        # instead of standing alone in its window (deviation 0) and counting for nothing.
        kstat = {}
        for name, xs in by_col.items():
            window = sorted((x.bm25 or 0.0 for x in xs), reverse=True)[:params.keyword_window]
            kstat[name] = _window_stats(window + [0.0] * (params.keyword_window - len(window)))
    a, k = params.dense_weight, params.rrf_k
    for c in cands:
        if mode == "dense":
            c.score = c.sim or 0.0
        elif mode == "keyword":
            c.score = c.bm25 or 0.0
        elif params.fusion == "zscore":
            m, sd, lo = dstat
            zd = ((c.sim if c.sim is not None else lo) - m) / sd
            if c.known_item:
                # A word almost no chunk holds (a code, a made-up name) means nothing to the model:
                # the chunk's cosine says nothing about it, and in a narrow dense window (cosines
                # 0.44-0.45) a cosine of 0.07 is dozens of deviations down and would bury the one
                # passage the keyword leg found. Such a chunk is never put below the window, like a
                # chunk without a cosine; the vector leg may still lift it.
                zd = max(zd, (lo - m) / sd)
            km, ksd, _ = kstat.get(c.collection, (0.0, 1.0, 0.0))
            zk = ((c.bm25 or 0.0) - km) / ksd
            c.score = a * zd + (1.0 - a) * zk
        elif params.fusion == "convex":
            top = best_bm25.get(c.collection) or 0.0
            c.score = a * (c.sim or 0.0) + (1.0 - a) * ((c.bm25 or 0.0) / top if top > 0 else 0.0)
        elif params.fusion == "rrf":
            c.score = ((params.rrf_dense_weight / (k + c.dense_rank)) if c.dense_rank else 0.0) + \
                      ((params.rrf_keyword_weight / (k + c.fts_rank)) if c.fts_rank else 0.0)
        else:
            c.score = (c.sim or 0.0) + (params.fts_weight if c.in_keyword else 0.0)


def dedup_key(text: str) -> str:
    return " ".join((text or "").split())[:200]


def finish(hits: list[dict[str, Any]], *, max_per_file: int, min_score: float, limit: int,
           keep_pct: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """hits carry 'score' (and 'known_item' when they hold a word almost no other chunk holds);
    returns (results, counts per stage). A known item is never dropped for sharing pages, by the
    per-file cap, as a repeat of a chunk that is not one, or by min_score, and at most
    ``ceil(limit / 2)`` of them (the best) take the last places of the results when their score
    leaves them out: whatever the fusion made of it, the one passage holding a rare word is shown."""
    counts = {"merged": len(hits)}
    hits = sorted(hits, key=lambda h: (-h["score"], h["collection"], h["embedding_id"]))

    def file_of(h: dict[str, Any]) -> tuple[str, str]:
        return h["collection"], h.get("source_file") or h.get("doc_id") or ""

    shown: dict[tuple[str, str], list[frozenset[int]]] = {}
    new_pages = []
    for h in hits:
        key = file_of(h)
        pages = frozenset(h.get("pages") or ())
        if pages and not h.get("known_item") and any(pages <= s for s in shown.get(key, ())):
            continue  # a page a better chunk of the file already shows: no new place to cite
        if pages:
            shown.setdefault(key, []).append(pages)
        new_pages.append(h)
    counts["after_same_pages"] = len(new_pages)
    # A file's known items are counted first, so its other chunks fill only the places left.
    per_file: dict[tuple[str, str], int] = {}
    for h in new_pages:
        if h.get("known_item"):
            per_file[file_of(h)] = per_file.get(file_of(h), 0) + 1
    capped = []
    for h in new_pages:
        key = file_of(h)
        if not h.get("known_item"):
            if per_file.get(key, 0) >= max_per_file:
                continue
            per_file[key] = per_file.get(key, 0) + 1
        capped.append(h)
    counts["after_file_cap"] = len(capped)
    seen: set[str] = set()
    seen_known: set[str] = set()
    unique = []
    for h in capped:
        k = dedup_key(h.get("text", ""))
        if k in (seen_known if h.get("known_item") else seen):
            continue
        seen.add(k)
        if h.get("known_item"):
            seen_known.add(k)
        unique.append(h)
    counts["after_dedup"] = len(unique)
    if unique:
        hi, lo = unique[0]["score"], min(h["score"] for h in unique)
        for h in unique:
            h["rel_score"] = 1.0 if hi == lo else (h["score"] - lo) / (hi - lo)
    kept = [h for h in unique if h["rel_score"] >= min_score or h.get("known_item")]
    counts["after_min_score"] = len(kept)
    out = kept[:limit]
    room = math.ceil(limit / 2) - sum(1 for h in out if h.get("known_item"))
    late = [h for h in kept[limit:] if h.get("known_item")][:max(room, 0)]
    if late:
        # they replace the weakest results that are not known items, after everything above
        drop = {id(h) for h in [h for h in out if not h.get("known_item")][-len(late):]}
        out = [h for h in out if id(h) not in drop] + late
    n_ann = math.ceil(len(out) * keep_pct / 100)
    for i, h in enumerate(out):
        h["rank"] = i + 1
        h["annotate"] = i < n_ann
    counts["returned"] = len(out)
    counts["for_annotation"] = n_ann
    return out, counts

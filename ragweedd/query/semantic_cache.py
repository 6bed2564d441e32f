"""The semantic search cache: a search whose query embeds within ``search_cache_similarity``
(cosine) of a cached query's, with the same options, answers with the cached result.

Why it can never serve a stale result: an entry holds the ``search_version`` of every collection it
searched, read *before* that search ran (ragweedd/store/sqlite/rag_db.py: the change sequence, the newest
chunk id, the extra passes' change sequence and the count of path writes -- together they move with
every add, delete, re-embed, rename and path removal). A lookup compares them with the versions read
now; any difference and the entry is dropped, never served. A write that lands while the search
runs moves the versions past the stored ones, so at worst that entry is never used. A removed
collection clears the cache (a new collection of the same name starts its sequences again).

The key holds everything else that changes a result: mode, fusion, the collections, the filters, the
number of results and both candidate depths. The searcher's configuration (weights, feedback, HyDE,
embedder) is fixed for the cache's life: one cache belongs to one Services. Keyword-only searches
embed nothing, so they match only the same query text (whitespace and case aside).

Two queries must also hold the same numbers: the embedder puts "revenue of apple in 2022" at
0.981 of "... in 2023" (benchmarks/search_cache_threshold.py), above any useful threshold.
The same for scale words (thousand, million, billion, trillion; k, m, mn, bn, tn): "... in million"
and "... in billion" embed at 0.987.

Entries are kept least recently used first out, ``search_cache_size`` at most; results are copied in
and out, so a later stage (the rerank) never changes a cached result.
"""

from __future__ import annotations

import copy
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from ragweedd.config import Config
from ragweedd.contract import SearchResult


@dataclass
class _Entry:
    key: Hashable
    versions: dict[str, tuple[int, ...]]
    text: str
    vec: Any  # unit query vector (numpy), None for keyword-only searches
    numbers: tuple[str, ...]
    result: SearchResult
    stored_at: float


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# scale words are part of a number: "revenue in million" and "... in billion" embed at 0.987
_SCALE = re.compile(r"(?<![a-z])(thousand|million|billion|trillion)s?(?![a-z])|(?<=\d)\s?(k|m|mn|bn|tn)(?![a-z])")
_SCALE_NAME = {"k": "thousand", "m": "million", "mn": "million", "bn": "billion", "tn": "trillion"}


def normal_text(query: str) -> str:
    return " ".join(query.lower().split())


def numbers_of(query: str) -> tuple[str, ...]:
    """The query's numbers and scale words ("12m" and "12 million" alike), which a hit must share."""
    scales = [word or _SCALE_NAME[abbr] for word, abbr in _SCALE.findall(query.lower())]
    return tuple(sorted(_NUMBER.findall(query))) + tuple(sorted(scales))


class SemanticCache:
    """Thread-safe; shared by every searcher of one Services."""

    def __init__(self, size: int, similarity: float) -> None:
        self.size = size
        self.similarity = similarity
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._next = 0
        self._lock = threading.Lock()

    @classmethod
    def of(cls, cfg: Config) -> "SemanticCache | None":
        return cls(cfg.search_cache_size, cfg.search_cache_similarity) if cfg.search_cache_size > 0 else None

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, key: Hashable, versions: Mapping[str, tuple[int, ...]], query: str,
               qvec: Any) -> tuple[SearchResult | None, dict[str, Any]]:
        """(a copy of the cached result or None, what the cache did for retrieval_meta)."""
        import numpy as np

        text, numbers = normal_text(query), numbers_of(query)
        q = None if qvec is None else np.asarray(qvec, dtype=np.float32).reshape(-1)
        best: tuple[float, int] | None = None
        closest: float | None = None  # the nearest valid entry, for tuning search_cache_similarity
        with self._lock:
            for eid, e in list(self._entries.items()):
                if e.key != key:
                    continue
                if e.versions != dict(versions):
                    del self._entries[eid]  # its collections changed: it can never answer again
                    continue
                if e.text == text:
                    sim = 1.0
                elif e.numbers != numbers or q is None or e.vec is None or e.vec.shape != q.shape:
                    continue
                else:
                    sim = float(e.vec @ q)
                closest = sim if closest is None else max(closest, sim)
                if sim >= self.similarity and (best is None or sim > best[0]):
                    best = (sim, eid)
            if best is None:
                miss: dict[str, Any] = {"hit": False, "entries": len(self._entries)}
                if closest is not None:
                    miss["closest_similarity"] = round(closest, 6)
                return None, miss
            e = self._entries[best[1]]
            self._entries.move_to_end(best[1])
            result = copy.deepcopy(e.result)
        return result, {"hit": True, "similarity": round(best[0], 6),
                        "cached_query": e.result["retrieval_meta"]["query"],
                        "age_s": round(time.time() - e.stored_at, 3), "entries": len(self._entries)}

    def store(self, key: Hashable, versions: Mapping[str, tuple[int, ...]], query: str, qvec: Any,
              result: SearchResult) -> None:
        import numpy as np

        vec = None if qvec is None else np.array(qvec, dtype=np.float32).reshape(-1)
        entry = _Entry(key, dict(versions), normal_text(query), vec, numbers_of(query), copy.deepcopy(result),
                       time.time())
        with self._lock:
            for eid, e in list(self._entries.items()):
                if e.key == key and e.text == entry.text:
                    del self._entries[eid]  # the same question again (its old entry was stale)
            self._next += 1
            self._entries[self._next] = entry
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

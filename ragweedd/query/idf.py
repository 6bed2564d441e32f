"""Document frequencies and IDF of query words, with the lazy cache of DESIGN §8.

Query words become index terms as chunks do, through ragweedd/keyterms.py (one form on every backend).

Where a df comes from, fastest first:

1. the per-process memo (valid while the collection's change sequence is unchanged);
2. ``fts_idf_cache`` in ingest_db (the design's persistent cache, keyed by collection; IdfCacheDB);
3. the keyword index itself (FtsReader.df_word: fts5vocab, or count(*) MATCH without it).

Words with df = 0 are not cached (see ``df``); words with df > 50 % of chunks are not cached (their
df moves with every change and they are cheap to recount). Invalidation: the cache of a collection
records the collection's chunk count and change sequence when it was (re)started, in two reserved
rows. When the chunks added or deleted since then exceed 10 % of that count, the collection's cache
rows are dropped and restarted. Smaller drift changes IDF values by at most ~0.1 nats, below what moves a plan.

IDF is BM25's (Lucene form): ln(1 + (N - df + 0.5) / (df + 0.5)). It is positive for every df, about
0.69 at df = N/2 and ln(2N + 1) for a word the collection has never seen (df = 0).
"""

from __future__ import annotations

import math
import threading
from typing import Callable

from ragweedd.errors import StorageError
from ragweedd.logging import get_logger
from ragweedd.store.protocols import IdfCacheStore, KeywordReader

log = get_logger("ragweedd.query.idf")

CACHE_MAX_DF_FRACTION = 0.5
DRIFT_FRACTION = 0.10


def idf(df: int, n: int) -> float:
    n = max(n, 0)
    df = min(max(df, 0), n) if n else max(df, 0)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class IdfCache:
    """The lazy IDF cache of one collection: memo -> fts_idf_cache -> fts5vocab / count(*).

    ``n_docs`` and ``seq`` are callables so a cache lives as long as the collection handle and
    notices changes: ``seq()`` must be cheap (rag.max_seq() is an index lookup)."""

    def __init__(self, collection: str, stats: KeywordReader, *, n_docs: Callable[[], int],
                 seq: Callable[[], int], cache: IdfCacheStore | None = None,
                 changes_since: Callable[[int], tuple[int, int]] | None = None,
                 version: Callable[[], object] | None = None) -> None:
        self.collection = collection
        self.stats = stats
        self._n_docs = n_docs
        self._seq = seq
        # What the per-process memo is valid for: the change sequence, and (``version``) anything
        # else that moves when keyword rows arrive without a change entry (chunks published before
        # their vectors log their change only when the vectors come).
        self._version = version or seq
        self._changes_since = changes_since
        self.cache = cache
        self._memo: dict[str, int] = {}
        self._memo_version: object = None
        self._n: int | None = None
        self._lock = threading.Lock()
        self.source_counts = {"memo": 0, "cache": 0, "vocab": 0}

    # --- validity ---------------------------------------------------------------------------
    def _refresh(self) -> None:
        version = self._version()
        if version == self._memo_version and self._n is not None:
            return
        seq = self._seq()
        self._memo.clear()
        self._n = self._n_docs()
        self._memo_version = version
        if self.cache is not None:
            try:
                self._check_persistent(self.cache, seq, self._n)
            except StorageError as e:  # the cache is an optimisation; a busy ingest_db never fails a search
                log.info("idf_cache_unavailable", collection=self.collection, error=str(e))

    def _check_persistent(self, cache: IdfCacheStore, seq: int, n: int) -> None:
        built_n, built_seq = cache.built_at(self.collection)
        if built_n is not None and built_seq is not None and built_seq <= seq:
            if self._changes_since is not None:
                added, deleted = self._changes_since(int(built_seq))
                drift = added + deleted
            else:
                drift = abs(n - int(built_n))
            if drift <= DRIFT_FRACTION * max(int(built_n), 1):
                return
        # Missing, from a rebuilt database (seq went backwards) or drifted: start again.
        cache.restart(self.collection, n, seq)
        log.info("idf_cache_reset", collection=self.collection, n=n, seq=seq, drift_from=built_n)

    # --- lookups ----------------------------------------------------------------------------
    @property
    def n_docs(self) -> int:
        with self._lock:
            self._refresh()
            return int(self._n or 0)

    def df(self, words: list[str]) -> dict[str, int]:
        with self._lock:
            self._refresh()
            n = self._n or 0
            out: dict[str, int] = {}
            missing = []
            for w in words:
                if w in self._memo:
                    out[w] = self._memo[w]
                    self.source_counts["memo"] += 1
                else:
                    missing.append(w)
            if missing and self.cache is not None:
                try:
                    for term, doc in self.cache.lookup(self.collection, missing).items():
                        out[term] = self._memo[term] = doc
                        self.source_counts["cache"] += 1
                except StorageError:
                    pass
                missing = [w for w in missing if w not in out]
            fresh = []
            for w in missing:
                d = self.stats.df_word(w)
                out[w] = self._memo[w] = d
                self.source_counts["vocab"] += 1
                # df = 0 is never persisted: the plan reads it as "absent, drop the word", so a
                # cached 0 would hide the first file that brings the word until the 10% drift reset
                # (a note saved after someone searched for its words). A nonzero df that drifts
                # only nudges a weight.
                if 0 < d <= CACHE_MAX_DF_FRACTION * n:
                    fresh.append((w, d))
            if fresh and self.cache is not None:
                try:
                    self.cache.remember(self.collection, fresh)
                except StorageError as e:
                    log.info("idf_cache_write_skipped", collection=self.collection, error=str(e))
            return out

    def idf(self, words: list[str]) -> dict[str, float]:
        dfs = self.df(words)
        n = self.n_docs
        return {w: idf(d, n) for w, d in dfs.items()}

"""Document frequencies and IDF of query words, with the lazy cache of DESIGN §8.

Terms. fts_chunks is tokenised with ``porter unicode61``, so the index holds stems ("cells" ->
"cell") with diacritics folded. A query word is turned into the exact term the index holds by
SQLite itself: it is written into a private in-memory FTS5 table with the same tokenizer and read
back through fts5vocab. No Python re-implementation of Porter can drift from SQLite's.

Where a df comes from, fastest first:

1. the per-process memo (valid while the collection's change sequence is unchanged);
2. ``fts_idf_cache`` in ingest_db (the design's persistent cache, keyed by collection);
3. a TEMP ``fts5vocab`` table over fts_chunks (``SELECT doc FROM vocab WHERE term=?``, ~0.05 ms),
   or ``SELECT count(*) ... MATCH ?`` (~1.5 ms at 500k chunks) when fts5vocab cannot be created.

Words with df = 0 are not cached (see ``df``); words with df > 50 % of chunks are not cached (their df moves with every change and they are
cheap to recount). Invalidation: the cache of a collection records the collection's chunk count
and change sequence when it was (re)started, in two reserved rows. When the chunks added or
deleted since then exceed 10 % of that count, the collection's cache rows are dropped and
restarted. Smaller drift changes IDF values by at most ~0.1 nats, below what moves a plan.

IDF is BM25's (Lucene form): ln(1 + (N - df + 0.5) / (df + 0.5)). It is positive for every df, about
0.69 at df = N/2 and ln(2N + 1) for a word the collection has never seen (df = 0).
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from typing import Callable

from ragweedd.logging import get_logger

log = get_logger("ragweedd.query.idf")

CACHE_MAX_DF_FRACTION = 0.5
DRIFT_FRACTION = 0.10
_META_N = "\x00n"  # reserved cache rows: never a query term (terms are alphanumeric)
_META_SEQ = "\x00seq"


def idf(df: int, n: int) -> float:
    n = max(n, 0)
    df = min(max(df, 0), n) if n else max(df, 0)
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class Stemmer:
    """query word -> the term(s) fts_chunks stores for it, via SQLite's own tokenizer."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._memo: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def _conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            c.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
            c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
            self._local.conn = c
        return c

    def terms(self, word: str) -> tuple[str, ...]:
        hit = self._memo.get(word)
        if hit is not None:
            return hit
        c = self._conn()
        c.execute("INSERT INTO t(rowid, x) VALUES (1, ?)", (word,))
        try:
            out = tuple(r[0] for r in c.execute("SELECT term FROM v ORDER BY offset"))
        finally:
            c.execute("DELETE FROM t")
        with self._lock:
            if len(self._memo) > 100_000:
                self._memo.clear()
            self._memo[word] = out
        return out


STEMMER = Stemmer()


class CollectionStats:
    """df lookups for one collection's fts_chunks on one connection (any thread: own connection)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.vocab: str | None = None
        try:
            # TEMP: no schema change to rag.sqlite3, and each reading connection gets its own.
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_chunks_vocab "
                         "USING fts5vocab(main, fts_chunks, 'row')")
            conn.execute("SELECT doc FROM temp.fts_chunks_vocab WHERE term = 'x'").fetchall()
            self.vocab = "temp.fts_chunks_vocab"
        except sqlite3.Error as e:
            log.warning("fts5vocab_unavailable", error=str(e), fallback="count(*) MATCH")

    def df_term(self, term: str) -> int:
        if self.vocab:
            row = self.conn.execute(f"SELECT doc FROM {self.vocab} WHERE term = ?", (term,)).fetchone()
            return int(row[0]) if row else 0
        return self.df_match(term)

    def df_match(self, term: str) -> int:
        q = '"' + term.replace('"', '""') + '"'
        return int(self.conn.execute("SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH ?", (q,)).fetchone()[0])

    def df_word(self, word: str) -> int:
        """df of a query word or phrase (see below for phrases)."""
        terms = STEMMER.terms(word)
        if not terms:
            return 0
        if len(terms) == 1:
            return self.df_term(terms[0])
        if self.vocab:
            # A phrase ("heart attack", a multi-word synonym): the smallest df of its words bounds
            # the phrase's df from above and costs microseconds; an exact phrase count costs a full
            # scan of the rarest word's positions (seconds at 500k chunks for common words). The
            # plan only needs "can it match" and an order of magnitude for its budget.
            return min(self.df_term(t) for t in terms)
        q = '"' + " ".join(terms).replace('"', '""') + '"'
        return int(self.conn.execute("SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH ?", (q,)).fetchone()[0])


class IdfCache:
    """The lazy IDF cache of one collection: memo -> fts_idf_cache -> fts5vocab / count(*).

    ``n_docs`` and ``seq`` are callables so a cache lives as long as the collection handle and
    notices changes: ``seq()`` must be cheap (rag.max_seq() is an index lookup)."""

    def __init__(self, collection: str, stats: CollectionStats, *, n_docs: Callable[[], int],
                 seq: Callable[[], int], cache_conn: sqlite3.Connection | None = None,
                 changes_since: Callable[[int], tuple[int, int]] | None = None) -> None:
        self.collection = collection
        self.stats = stats
        self._n_docs = n_docs
        self._seq = seq
        self._changes_since = changes_since
        self.cache_conn = cache_conn
        self._memo: dict[str, int] = {}
        self._memo_seq: int | None = None
        self._n: int | None = None
        self._lock = threading.Lock()
        self.source_counts = {"memo": 0, "cache": 0, "vocab": 0}

    # --- validity ---------------------------------------------------------------------------
    def _refresh(self) -> None:
        seq = self._seq()
        if seq == self._memo_seq and self._n is not None:
            return
        self._memo.clear()
        self._n = self._n_docs()
        self._memo_seq = seq
        if self.cache_conn is not None:
            try:
                self._check_persistent(seq, self._n)
            except sqlite3.Error as e:  # the cache is an optimisation; a busy ingest_db never fails a search
                log.info("idf_cache_unavailable", collection=self.collection, error=str(e))

    def _check_persistent(self, seq: int, n: int) -> None:
        c = self.cache_conn
        rows = dict(c.execute("SELECT term, doc FROM fts_idf_cache WHERE collection=? AND term IN (?, ?)",
                              (self.collection, _META_N, _META_SEQ)).fetchall())
        built_n, built_seq = rows.get(_META_N), rows.get(_META_SEQ)
        if built_n is not None and built_seq is not None and built_seq <= seq:
            if self._changes_since is not None:
                added, deleted = self._changes_since(int(built_seq))
                drift = added + deleted
            else:
                drift = abs(n - int(built_n))
            if drift <= DRIFT_FRACTION * max(int(built_n), 1):
                return
        # Missing, from a rebuilt database (seq went backwards) or drifted: start again.
        now = time.time()
        c.execute("BEGIN IMMEDIATE")
        try:
            c.execute("DELETE FROM fts_idf_cache WHERE collection=?", (self.collection,))
            c.executemany("INSERT INTO fts_idf_cache(collection, term, doc, built_at) VALUES (?,?,?,?)",
                          [(self.collection, _META_N, n, now), (self.collection, _META_SEQ, seq, now)])
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
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
            if missing and self.cache_conn is not None:
                try:
                    q = ",".join("?" * len(missing))
                    for term, doc in self.cache_conn.execute(
                            f"SELECT term, doc FROM fts_idf_cache WHERE collection=? AND term IN ({q})",
                            (self.collection, *missing)):
                        out[term] = self._memo[term] = int(doc)
                        self.source_counts["cache"] += 1
                except sqlite3.Error:
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
                    fresh.append((self.collection, w, d, time.time()))
            if fresh and self.cache_conn is not None:
                try:
                    self.cache_conn.executemany(
                        "INSERT OR REPLACE INTO fts_idf_cache(collection, term, doc, built_at) VALUES (?,?,?,?)", fresh)
                except sqlite3.Error as e:
                    log.info("idf_cache_write_skipped", collection=self.collection, error=str(e))
            return out

    def idf(self, words: list[str]) -> dict[str, float]:
        dfs = self.df(words)
        n = self.n_docs
        return {w: idf(d, n) for w, d in dfs.items()}

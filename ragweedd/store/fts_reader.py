"""The keyword index as the query planner sees it: SQLite's stemming and document frequencies.

Terms. fts_chunks is tokenised with ``porter unicode61``, so the index holds stems ("cells" ->
"cell") with diacritics folded. A query word is turned into the exact term the index holds by
SQLite itself: it is written into a private in-memory FTS5 table with the same tokenizer and read
back through fts5vocab. No Python re-implementation of Porter can drift from SQLite's.

Document frequencies come from a TEMP ``fts5vocab`` table over fts_chunks (one indexed lookup,
~0.05 ms), or ``count(*) ... MATCH`` (~1.5 ms at 500k chunks) when fts5vocab cannot be created.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from ragweedd.logging import get_logger
from ragweedd.store.rag_db import _change_counts_after, keyword_match
from ragweedd.store.sqlite import connect

log = get_logger("ragweedd.query.idf")


class Stemmer:
    """query word -> the term(s) fts_chunks stores for it, via SQLite's own tokenizer."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._memo: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def _conn(self) -> sqlite3.Connection:
        # A private in-memory database per thread: no file, so no writer lock to take.
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


class _TermCounter:
    """Occurrences of given index terms in given rows' text, counted by SQLite's own tokenizer: the
    rows are written into a private in-memory FTS5 table with fts_chunks' tokenizer and read back
    through fts5vocab, so a count is exactly the one FTS5 would see. One table per thread."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is None:
            c = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            # contentless: the text is only tokenised once, and 'delete-all' empties the table
            # without reading it back (a delete of a stored row tokenises it again)
            c.execute("CREATE VIRTUAL TABLE t USING fts5(content, context, content='', "
                      "tokenize='porter unicode61')")
            c.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
            self._local.conn = c
        return c

    def counts(self, rows: list[tuple[int, str, str]], terms: list[str]) -> dict[int, dict[str, int]]:
        c = self._conn()
        out: dict[int, dict[str, int]] = {}
        c.execute("BEGIN")
        try:
            c.executemany("INSERT INTO t(rowid, content, context) VALUES (?,?,?)", rows)
            q = ",".join("?" * len(terms))
            for term, doc, n in c.execute(f"SELECT term, doc, count(*) FROM v WHERE term IN ({q}) GROUP BY term, doc",
                                          terms):
                out.setdefault(int(doc), {})[term] = int(n)
        finally:
            c.execute("INSERT INTO t(t) VALUES ('delete-all')")
            c.execute("COMMIT")
        return out


TERM_COUNTER = _TermCounter()


def _varints(blob: bytes) -> list[int]:
    """SQLite's varints (as FTS5 writes its size records): 7 bits a byte, high bit = more, the
    ninth byte whole."""
    out, i = [], 0
    while i < len(blob):
        v = 0
        for k in range(9):
            b = blob[i]
            i += 1
            if k == 8:
                v = (v << 8) | b
                break
            v = (v << 7) | (b & 0x7F)
            if not b & 0x80:
                break
        out.append(v)
    return out


class FtsReader:
    """Keyword reads of one collection's rag.sqlite3 on one connection: document frequencies, MATCH
    with bm25, and the chunk count and change sequence the IDF cache is validated against. Opened
    on a path it owns a read-only connection (the keyword plan runs beside the vector search);
    given a connection it borrows it."""

    def __init__(self, source: Path | str | sqlite3.Connection) -> None:
        if isinstance(source, sqlite3.Connection):
            self.conn, self._owned = source, False
        else:
            self.conn, self._owned = connect(source, readonly=True), True
        self.vocab: str | None = None
        # Databases from before the context column (rag migration 4) score content alone.
        cols = {r[1] for r in self.conn.execute("PRAGMA table_info(fts_chunks)")}
        self._context_col = "context" if "context" in cols else "''"
        # TEMP: no schema change to rag.sqlite3, and each reading connection gets its own. Creating
        # it is a write to the temp schema, which query_only forbids, so it is lifted for this.
        query_only = self.conn.execute("PRAGMA query_only").fetchone()[0]
        try:
            if query_only:
                self.conn.execute("PRAGMA query_only = OFF")
            self.conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_chunks_vocab "
                              "USING fts5vocab(main, fts_chunks, 'row')")
            self.conn.execute("SELECT doc FROM temp.fts_chunks_vocab WHERE term = 'x'").fetchall()
            self.vocab = "temp.fts_chunks_vocab"
        except sqlite3.Error as e:
            log.warning("fts5vocab_unavailable", error=str(e), fallback="count(*) MATCH")
        finally:
            if query_only:
                self.conn.execute("PRAGMA query_only = ON")

    def close(self) -> None:
        if self._owned:
            self.conn.close()

    # --- document frequencies -------------------------------------------------------------------
    def df_term(self, term: str) -> int:
        if self.vocab:
            row = self.conn.execute(f"SELECT doc FROM {self.vocab} WHERE term = ?", (term,)).fetchone()
            return int(row[0]) if row else 0
        return self.df_match(term)

    def df_match(self, term: str) -> int:
        """Rows holding ``term`` (several terms: the exact phrase), counted through MATCH."""
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
        return self.df_match(" ".join(terms))

    # --- matching and validity --------------------------------------------------------------------
    def match(self, expr: str, limit: int) -> list[tuple[int, float]]:
        """[(chunk id, bm25 as a positive score)] for a safe FTS5 expression, best first."""
        return keyword_match(self.conn, expr, limit)

    def row_stats(self, ids: list[int], terms: list[str]) -> tuple[dict[int, int], dict[int, dict[str, int]]]:
        """({row: its tokens in all columns}, {row: {term: occurrences}}) for the given rows and
        index terms: what FTS5's bm25() reads for a row, for rows and terms of our choosing."""
        lengths: dict[int, int] = {}
        rows: list[tuple[int, str, str]] = []
        for i in range(0, len(ids), 500):
            part = list(ids[i:i + 500])
            q = ",".join("?" * len(part))
            for rid, sz in self.conn.execute(f"SELECT id, sz FROM fts_chunks_docsize WHERE id IN ({q})", part):
                lengths[int(rid)] = sum(_varints(bytes(sz)))
            if terms:
                rows.extend((int(r[0]), r[1] or "", r[2] or "") for r in self.conn.execute(
                    f"SELECT rowid, content, {self._context_col} FROM fts_chunks WHERE rowid IN ({q})", part))
        return lengths, (TERM_COUNTER.counts(rows, terms) if rows else {})

    def mean_row_tokens(self) -> float:
        """Tokens per row over the whole index, from FTS5's own totals record."""
        row = self.conn.execute("SELECT block FROM fts_chunks_data WHERE id = 1").fetchone()
        if row is None:
            return 0.0
        v = _varints(bytes(row[0]))
        return sum(v[1:]) / v[0] if v and v[0] else 0.0

    def chunk_count(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])

    def max_seq(self) -> int:
        return int(self.conn.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0])

    def version(self) -> tuple[int, int]:
        """(change sequence, newest chunk id): moves with every write, including chunks published
        before their vectors, which log their change only when the vectors come. Two index lookups."""
        row = self.conn.execute("SELECT (SELECT coalesce(max(seq), 0) FROM changes),"
                                " (SELECT coalesce(max(id), 0) FROM embeddings)").fetchone()
        return int(row[0]), int(row[1])

    def change_counts_after(self, seq: int) -> tuple[int, int]:
        """(adds, deletes) logged after ``seq``."""
        return _change_counts_after(self.conn, seq)

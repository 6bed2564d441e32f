"""The keyword index as the query planner sees it: index terms and document frequencies.

Terms. fts_chunks indexes each chunk's index form (ragweedd/keyterms.py, store/sqlite/rag_keywords.py):
Snowball stems of the chunk's language, bigrams for scripts without spaces, accents folded. The
query planner turns a query into the same form (``keyterms.query_terms``) and hands this module
terms, never raw words: a term is looked up as it is, and a "word" of several terms (a WordNet
synonym such as "heart attack") is the phrase of its terms.

Document frequencies come from a TEMP ``fts5vocab`` table over fts_chunks (one indexed lookup,
~0.05 ms), or ``count(*) ... MATCH`` (~1.5 ms at 500k chunks) when fts5vocab cannot be created.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from pathlib import Path

from ragweedd.logging import get_logger
from ragweedd.store.sqlite.connection import connect
from ragweedd.store.sqlite.rag_db import _change_counts_after, keyword_match
from ragweedd.store.sqlite.rag_keywords import languages
from ragweedd.store.types import KeywordQuery

log = get_logger("ragweedd.query.idf")


class Stemmer:
    """An index form (terms joined by spaces) -> its terms. The form is made by ragweedd/keyterms.py
    on both sides, so there is nothing left to stem here; the name stays for the callers."""

    def terms(self, word: str) -> tuple[str, ...]:
        return tuple(word.split())


STEMMER = Stemmer()


def count_terms(rows: list[tuple[int, str, str]], terms: list[str]) -> dict[int, dict[str, int]]:
    """{row: {term: occurrences}} in rows of (id, terms, context terms): the index form is split
    at spaces by FTS5's ascii tokenizer, so splitting it here counts what FTS5 counts."""
    want = set(terms)
    out: dict[int, dict[str, int]] = {}
    for rid, body, head in rows:
        c = Counter(t for t in f"{body} {head}".split() if t in want)
        if c:
            out[rid] = dict(c)
    return out


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
        # A database opened read-only before its writer migrated it (rag migration 8) has no index
        # form columns yet: its rows count nothing until then.
        cols = {r[1] for r in self.conn.execute("PRAGMA table_info(fts_chunks)")}
        self._form_cols = "terms, context_terms" if "terms" in cols else "'', ''"
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
    def match(self, query: KeywordQuery, limit: int) -> list[tuple[int, float]]:
        """[(chunk id, bm25 as a positive score)] of the rows FTS5 MATCH finds, best first."""
        return keyword_match(self.conn, query, limit)

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
                    f"SELECT rowid, {self._form_cols} FROM fts_chunks WHERE rowid IN ({q})", part))
        return lengths, (count_terms(rows, terms) if rows else {})

    def languages(self) -> dict[str, int]:
        """{language: chunks} the collection's keyword rows were written in."""
        return languages(self.conn)

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

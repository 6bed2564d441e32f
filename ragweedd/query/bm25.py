"""BM25 of chosen rows for chosen terms, computed the way FTS5's bm25() computes it.

FTS5 ranks a MATCH by bm25() over the terms of the expression, and it pays for every row any term
matches (query/fts_plan.py: the OR tier's postings budget). Two things need scores FTS5 cannot give
cheaply: the words the budget left out of MATCH, which still count in plain BM25, and the rows only
the vector search found, which the fusion should judge by their keywords too. This module gives
them, for a few hundred rows at a time, with FTS5's formula and inputs, so its scores add to FTS5's:

    score = sum over terms t of  idf(t) * f * (k1 + 1) / (f + k1 * (1 - b + b * D / avgdl))

with k1 = 1.2, b = 0.75, f = occurrences of t in the row (all columns, weight 1), D = the row's
tokens, avgdl = tokens per row over the index, idf(t) = ln((N - n + 0.5) / (n + 0.5)) with n = rows
holding t (1e-6 when that is not positive: FTS5's floor for words in more than half the rows).
Row sizes and term counts come from the keyword reader (store/sqlite/fts_reader.py: row_stats).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ragweedd.store.protocols import KeywordReader

K1 = 1.2
B = 0.75


def fts5_idf(df: int, n: int) -> float:
    v = math.log((n - df + 0.5) / (df + 0.5)) if n > 0 else 0.0
    return v if v > 0 else 1e-6


@dataclass
class Bm25Terms:
    """Index terms with their IDF, and the collection's mean row length."""

    idf: dict[str, float]
    avgdl: float

    def score_rows(self, reader: KeywordReader, ids: list[int],
                   terms: list[str] | None = None) -> dict[int, float]:
        """{row: BM25 over ``terms`` (default: all)}; rows holding none of them score 0."""
        use = [t for t in (self.idf if terms is None else terms) if t in self.idf]
        if not ids or not use or self.avgdl <= 0:
            return {i: 0.0 for i in ids}
        lengths, counts = reader.row_stats(ids, use)
        out = {}
        for i in ids:
            norm = K1 * (1 - B + B * lengths.get(i, 0) / self.avgdl)
            s = 0.0
            for t, f in counts.get(i, {}).items():
                s += self.idf[t] * f * (K1 + 1) / (f + norm)
            out[i] = s
        return out

"""Plain FTS5 BM25 search: every alphanumeric word of the query, OR-ed, ranked by bm25.

Query words are reduced to alphanumeric runs and each is quoted, so no FTS5 operator character can
ever reach MATCH.
"""

from __future__ import annotations

from ragweedd.query.fts_plan import fts_string, query_words
from ragweedd.store.protocols import RagStore


def bm25_search(rag: RagStore, query: str, k: int, *, mode: str = "OR") -> list[tuple[int, float]]:
    """[(chunk id, bm25 score as a positive number, higher is better)]."""
    words = query_words(query)
    if not words:
        return []
    match = f" {mode} ".join(fts_string(w) for w in words)
    return rag.keyword_match(match, k)

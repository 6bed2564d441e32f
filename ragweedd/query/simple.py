"""Dense-only and keyword-only search over one or more collections (the foundation's search).

The hybrid pipeline of DESIGN §8 builds on these two halves.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragweedd.paths import Paths
from ragweedd.query.exact import load_matrix, top_k
from ragweedd.query.keyword import bm25_search
from ragweedd.store.rag_db import RagDB


def open_collections(paths: Paths, names: list[str] | None) -> list[RagDB]:
    if names is None:
        names = sorted(p.name for p in paths.collections.glob("*") if (p / "rag.sqlite3").exists())
    out = []
    for n in names:
        db = paths.rag_db(n)
        if not Path(db).exists():
            from ragweedd.errors import NotFoundError

            raise NotFoundError(f"collection '{n}' has no index at {db}",
                                hint="ingest into it first: ragweedd ingest PATH --collection " + n)
        out.append(RagDB(db, n))
    return out


def dense_search(rags: list[RagDB], embedder, query: str, k: int) -> list[dict[str, Any]]:
    """Exact (brute-force) vector search: the reference the HNSW index is checked against."""
    from ragweedd.embed.long import embed_texts

    qv = embed_texts(embedder, [query.lower()])[0]
    return _ranked(rags, lambda rag: top_k(*load_matrix(rag), qv, k), k)


def keyword_search(rags: list[RagDB], query: str, k: int) -> list[dict[str, Any]]:
    """Plain FTS5 BM25 over every query word (OR), no tiers or synonyms."""
    return _ranked(rags, lambda rag: bm25_search(rag, query, k), k)


def _ranked(rags: list[RagDB], score, k: int) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    for rag in rags:
        scored = score(rag)
        rows = rag.hits([i for i, _ in scored])
        for i, s in scored:
            h = rows[i]
            h["score"] = s
            hits.append(h)
    hits.sort(key=lambda h: -h["score"])
    return hits[:k]

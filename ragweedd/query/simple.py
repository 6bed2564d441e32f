"""Dense-only and keyword-only search over one or more collections (the foundation's search).

The hybrid pipeline of DESIGN §8 builds on these two halves.
"""

from __future__ import annotations

from typing import Any

from ragweedd.paths import Paths
from ragweedd.query.exact import load_matrix, top_k
from ragweedd.query.keyword import bm25_search
from ragweedd.store.protocols import RagStore, StoreBackend


def backend_of(stores: StoreBackend | Paths) -> StoreBackend:
    """The store backend to open collections through (a data directory's SQLite files when given
    its Paths)."""
    if isinstance(stores, Paths):
        from ragweedd.store.sqlite_backend import SqliteBackend

        return SqliteBackend(stores)
    return stores


def open_collections(stores: StoreBackend | Paths, names: list[str] | None) -> list[RagStore]:
    stores = backend_of(stores)
    if names is None:
        names = stores.indexed_collections()
    out = []
    for n in names:
        if not stores.has_rag(n):
            from ragweedd.errors import NotFoundError

            raise NotFoundError(f"collection '{n}' has no index yet",
                                hint="ingest into it first: ragweedd ingest PATH --collection " + n)
        out.append(stores.open_rag(n))
    return out


def dense_search(rags: list[RagStore], embedder, query: str, k: int) -> list[dict[str, Any]]:
    """Exact (brute-force) vector search: the reference the HNSW index is checked against."""
    from ragweedd.embed.long import embed_texts

    qv = embed_texts(embedder, [query.lower()])[0]
    return _ranked(rags, lambda rag: top_k(*load_matrix(rag), qv, k), k)


def keyword_search(rags: list[RagStore], query: str, k: int) -> list[dict[str, Any]]:
    """Plain FTS5 BM25 over every query word (OR), no tiers or synonyms."""
    return _ranked(rags, lambda rag: bm25_search(rag, query, k), k)


def _ranked(rags: list[RagStore], score, k: int) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    for rag in rags:
        scored = score(rag)
        rows = rag.hits([i for i, _ in scored])
        for i, s in scored:
            h = rows.get(i)
            if h is None:  # its text failed its hash: left out (store/rag_served.py)
                continue
            h["score"] = s
            hits.append(h)
    hits.sort(key=lambda h: -h["score"])
    return hits[:k]

"""Helpers for the retrieval tests: a real FTS5 table with the rag.sqlite3 schema, the WordNet
requirement (skip when missing, fail when RAGWEED_REQUIRE_TOOLS=1, as tests/tools.py does), and
searches simpler than the daemon's to check what a collection holds: exact dense, plain BM25, and a
whole hybrid search in one call."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ragweedd.index.managed import DiskIndexes
from ragweedd.query.exact import load_matrix, top_k
from ragweedd.query.filters import Filters
from ragweedd.query.fts_plan import keyword_leg, phrase_of, query_words
from ragweedd.query.hybrid import Searcher
from ragweedd.query.idf import IdfCache
from ragweedd.query.vectors import VectorSearch
from ragweedd.store.backends import open_data_dir
from ragweedd.store.protocols import RagStore
from ragweedd.store.sqlite import rag_keywords
from ragweedd.store.sqlite.fts_reader import FtsReader
from ragweedd.store.sqlite.idf_cache_db import IdfCacheDB
from ragweedd.store.types import all_of, any_of

WORDNET_DIR = "/usr/share/wordnet"


def require_wordnet(directory: str = WORDNET_DIR) -> str:
    if (Path(directory) / "index.noun").is_file() and (Path(directory) / "data.noun").is_file():
        return directory
    msg = f"WordNet dictionary files are not installed in {directory} (Debian package wordnet-base)"
    if os.environ.get("RAGWEED_REQUIRE_TOOLS") == "1":
        pytest.fail(msg + " (RAGWEED_REQUIRE_TOOLS=1)")
    pytest.skip(msg)


# a collection's database also holds the id ranges of documents in transit, which every keyword
# match leaves out (ragweedd/store/sqlite/rag_hidden.py)
HIDDEN_DDL = ("CREATE TABLE hidden_chunks (lo INTEGER NOT NULL, hi INTEGER NOT NULL, md5 TEXT NOT NULL,"
              " state TEXT NOT NULL, owner TEXT)")


def fts_db(texts: list[str] | list[tuple[str, str]], path: str | Path = ":memory:", lang: str | None = "en"
           ) -> sqlite3.Connection:
    """fts_chunks and keyword_languages as a collection has them, its rows written as a collection
    writes them (index form): texts, or (text, context line) pairs, each a document of its own in
    ``lang`` (None: each detected; the default: English, as the word soups of tests are)."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute(HIDDEN_DDL)
    conn.execute(rag_keywords.FTS_DDL)
    conn.execute(rag_keywords.LANGUAGES_DDL)
    pairs = [(t, "") if isinstance(t, str) else t for t in texts]
    conn.execute("BEGIN")
    for i, (t, c) in enumerate(pairs):
        rag_keywords.insert_rows(conn, [(i + 1, f"x:{i}", t, f"/f{i}.txt", c)], lang=lang)
    conn.execute("COMMIT")
    return conn


def idf_cache(fts: FtsReader, collection: str = "c", cache_conn=None, seq=lambda: 1) -> IdfCache:
    n = fts.conn.execute("SELECT count(*) FROM fts_chunks").fetchone()[0]
    return IdfCache(collection, fts, n_docs=lambda: n, seq=seq,
                    cache=IdfCacheDB(cache_conn) if cache_conn is not None else None)


def fts_search(fts, query: str, idf_cache: IdfCache, cfg, limit: int, **kw) -> tuple[list, dict[str, Any]]:
    """The keyword leg of a search without its plan: (hits, meta)."""
    hits, meta, _ = keyword_leg(fts, query, idf_cache, cfg, limit, **kw)
    return hits, meta


@contextmanager
def open_searcher(cfg, paths, embedder, *, collections: list[str] | None = None, vectors=None,
                  **kw: Any) -> Iterator[Searcher]:
    """A Searcher over a data directory's files, as a one-shot command has it: its own vector
    search over the index files on disk unless ``vectors`` is given; closed on leaving."""
    disk = DiskIndexes(cfg, paths) if vectors is None else None
    vs = vectors if vectors is not None else VectorSearch(cfg, disk)
    try:
        with Searcher(cfg, paths, embedder, collections=collections, vectors=vs, stores=open_data_dir(paths),
                      **kw) as s:
            yield s
    finally:
        if disk is not None:
            vs.close()
            disk.close()


def one_shot_search(cfg, paths, embedder, query: str, *, collections: list[str] | None = None,
                    top_k: int = 10, mode: str = "hybrid", filters: Filters | None = None,
                    vectors=None) -> dict[str, Any]:
    """Search once as the daemon searches: open, search, close. ``top_k`` is the number of results shown."""
    if filters is None:
        filters = Filters.make(collections=collections)
    with open_searcher(cfg, paths, embedder, collections=collections, vectors=vectors) as s:
        return s.search(query, filters=filters, limit=top_k, mode=mode)


def dense_search(rags: list[RagStore], embedder, query: str, k: int) -> list[dict[str, Any]]:
    """Exact (brute-force) vector search: the reference the HNSW index is checked against."""
    from ragweedd.embed.long import embed_texts

    qv = embed_texts(embedder, [query.lower()])[0]
    return _ranked(rags, lambda rag: top_k(*load_matrix(rag), qv, k), k)


def bm25_search(rag: RagStore, query: str, k: int, *, mode: str = "OR") -> list[tuple[int, float]]:
    """[(chunk id, bm25 score as a positive number, higher is better)] for every alphanumeric word
    of the query, quoted (no FTS5 operator reaches MATCH) and joined by ``mode``."""
    words = query_words(query)
    if not words:
        return []
    parts = [p for p in (phrase_of(w) for w in words) if p is not None]
    return rag.keyword_match(all_of(parts) if mode == "AND" else any_of(parts), k)


def keyword_search(rags: list[RagStore], query: str, k: int) -> list[dict[str, Any]]:
    """Plain BM25 over every query word (OR), no tiers or synonyms."""
    return _ranked(rags, lambda rag: bm25_search(rag, query, k), k)


def _ranked(rags: list[RagStore], score, k: int) -> list[dict[str, Any]]:
    hits: list[dict[str, Any]] = []
    for rag in rags:
        scored = score(rag)
        rows = rag.hits([i for i, _ in scored])
        for i, s in scored:
            h = rows.get(i)
            if h is None:  # its text failed its hash: left out (store/sqlite/rag_served.py)
                continue
            h["score"] = s
            hits.append(h)
    hits.sort(key=lambda h: -h["score"])
    return hits[:k]

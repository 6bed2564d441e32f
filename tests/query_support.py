"""Helpers for the retrieval tests: a real FTS5 table with the rag.sqlite3 schema, and the WordNet
requirement (skip when missing, fail when RAGWEED_REQUIRE_TOOLS=1, as tests/tools.py does)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from ragweedd.query.idf import IdfCache
from ragweedd.store.fts_reader import FtsReader
from ragweedd.store.idf_cache_db import IdfCacheDB

WORDNET_DIR = "/usr/share/wordnet"


def require_wordnet(directory: str = WORDNET_DIR) -> str:
    if (Path(directory) / "index.noun").is_file() and (Path(directory) / "data.noun").is_file():
        return directory
    msg = f"WordNet dictionary files are not installed in {directory} (Debian package wordnet-base)"
    if os.environ.get("RAGWEED_REQUIRE_TOOLS") == "1":
        pytest.fail(msg + " (RAGWEED_REQUIRE_TOOLS=1)")
    pytest.skip(msg)


# a collection's database also holds the id ranges of documents in transit, which every keyword
# match leaves out (ragweedd/store/rag_hidden.py)
HIDDEN_DDL = ("CREATE TABLE hidden_chunks (lo INTEGER NOT NULL, hi INTEGER NOT NULL, md5 TEXT NOT NULL,"
              " state TEXT NOT NULL, owner TEXT)")


def fts_db(texts: list[str], path: str | Path = ":memory:") -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute(HIDDEN_DDL)
    conn.execute("CREATE VIRTUAL TABLE fts_chunks USING fts5(embedding_id UNINDEXED, content, "
                 "source_file UNINDEXED, tokenize='porter unicode61')")
    conn.executemany("INSERT INTO fts_chunks(rowid, embedding_id, content, source_file) VALUES (?,?,?,?)",
                     [(i + 1, f"x:{i}", t, f"/f{i}.txt") for i, t in enumerate(texts)])
    return conn


def idf_cache(fts: FtsReader, collection: str = "c", cache_conn=None, seq=lambda: 1) -> IdfCache:
    n = fts.conn.execute("SELECT count(*) FROM fts_chunks").fetchone()[0]
    return IdfCache(collection, fts, n_docs=lambda: n, seq=seq,
                    cache=IdfCacheDB(cache_conn) if cache_conn is not None else None)

"""The periodic integrity check: SQLite ``PRAGMA integrity_check`` of every database, FTS5's own
'integrity-check', and count agreement between chunks, FTS rows, stored vectors and the vector
index (when an index manager reports its count).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ragweedd.store.integrity import collection_counts
from ragweedd.store.integrity import integrity_check as sqlite_integrity_check


def check_db(path: Path) -> list[str]:
    return [f"{path}: {r}" for r in sqlite_integrity_check(path)]


def check_collection(path: Path, index_count: int | None = None) -> dict:
    problems = check_db(path)
    c = collection_counts(path)
    if c.fts_error is not None:
        problems.append(f"{path}: FTS integrity-check failed: {c.fts_error}")
    chunks, fts, vectors = c.chunks, c.fts_rows, c.vectors
    if fts != chunks:
        problems.append(f"{path}: {fts} keyword rows for {chunks} chunks (rebuild the keyword index)")
    if vectors != chunks:
        problems.append(f"{path}: {vectors} stored vectors for {chunks} chunks")
    if index_count is not None and index_count != chunks:
        problems.append(f"{path}: vector index holds {index_count} vectors for {chunks} chunks")
    return {"chunks": chunks, "fts_rows": fts, "vectors": vectors, "index_count": index_count,
            "problems": problems}


def integrity_check(paths, collections: list[str], index_count: Callable[[str], int | None] = lambda c: None) -> dict:
    out: dict = {"ok": True, "ingest_db": check_db(paths.ingest_db), "collections": {}}
    if out["ingest_db"]:
        out["ok"] = False
    for name in collections:
        db = paths.rag_db(name)
        if not Path(db).exists():
            continue
        res = check_collection(db, index_count(name))
        out["collections"][name] = res
        if res["problems"]:
            out["ok"] = False
    return out

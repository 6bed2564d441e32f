"""The periodic integrity check: SQLite ``PRAGMA integrity_check`` of every database, FTS5's own
'integrity-check', and count agreement between chunks, FTS rows, stored vectors and the vector
index (when an index manager reports its count).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ragweedd.store.rag_db import PRIMARY
from ragweedd.store.sqlite import connect


def check_db(path: Path) -> list[str]:
    conn = connect(path, readonly=True)
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        return [] if rows == ["ok"] else [f"{path}: {r}" for r in rows[:20]]
    finally:
        conn.close()


def check_collection(path: Path, index_count: int | None = None) -> dict:
    problems = check_db(path)
    # FTS5's integrity-check is a write statement in form only; it needs a writable handle.
    conn = connect(path)
    try:
        try:
            conn.execute("INSERT INTO fts_chunks(fts_chunks) VALUES ('integrity-check')")
        except Exception as e:
            problems.append(f"{path}: FTS integrity-check failed: {e}")
        chunks = conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        fts = conn.execute("SELECT count(*) FROM fts_chunks").fetchone()[0]
        vectors = conn.execute("SELECT count(*) FROM vectors WHERE space=?", (PRIMARY,)).fetchone()[0]
    finally:
        conn.close()
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

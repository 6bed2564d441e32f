"""Integrity checks of the databases themselves: SQLite's ``PRAGMA integrity_check``, FTS5's own
'integrity-check', and the row counts that must agree in a rag.sqlite3 (store/sqlite/integrity_check.py turns
them into problems)."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ragweedd.store.sqlite.connection import connect, transaction
from ragweedd.store.sqlite.rag_db import PRIMARY
from ragweedd.store.sqlite.rag_hidden import visible


def quick_check(path: Path | str, max_rows: int = 3, *, recover: bool = False) -> list[str]:
    """``PRAGMA quick_check`` findings, empty when the file is sound; a file SQLite cannot even
    open or read is a finding too (never an exception: this runs to decide on a repair).

    ``recover`` opens the file read-write, as its owner does at start: SQLite then rebuilds a
    stale -shm and recovers what the -wal holds. A read-only handle cannot, and reports a sound
    database whose -wal was deleted after a crash as a disk I/O error."""
    try:
        conn = connect(path, readonly=not recover)
    except Exception as e:  # noqa: BLE001 - the finding is that it cannot be opened
        return [f"cannot be opened: {getattr(e, 'message', None) or e}"]
    try:
        rows = [r[0] for r in conn.execute("PRAGMA quick_check")]
        return [] if rows == ["ok"] else _brief(rows, max_rows)
    except sqlite3.DatabaseError as e:
        return [f"cannot be read: {e}"]
    finally:
        conn.close()


def _brief(rows: list[str], max_rows: int) -> list[str]:
    """SQLite's findings, a few lines of them: one damaged file can yield hundreds ("On tree page
    N ..."), which would bury the file name and the action in status and the log."""
    lines = [ln for r in rows for ln in str(r).splitlines() if ln.strip() and not ln.startswith("*** in database")]
    out = lines[:max_rows]
    if len(lines) > max_rows:
        out.append(f"... and {len(lines) - max_rows} more findings")
    return out


def integrity_check(path: Path | str, max_rows: int = 20) -> list[str]:
    """SQLite's findings, empty when the file is sound."""
    conn = connect(path, readonly=True)
    try:
        rows = [r[0] for r in conn.execute("PRAGMA integrity_check")]
        return [] if rows == ["ok"] else rows[:max_rows]
    finally:
        conn.close()


@dataclass
class CollectionCounts:
    chunks: int
    fts_rows: int
    vectors: int  # in the primary space
    pending: int  # chunks whose vector the embedding stage has not written yet
    fts_error: str | None  # what FTS5's integrity-check reported, None when it passed


def collection_counts(path: Path | str) -> CollectionCounts:
    # FTS5's integrity-check is a write statement in form only; it needs a writable handle, and so
    # the writer lock like any write.
    conn = connect(path)
    try:
        fts_error = None
        try:
            with transaction(conn):
                conn.execute("INSERT INTO fts_chunks(fts_chunks) VALUES ('integrity-check')")
        except Exception as e:  # noqa: BLE001 - whatever FTS5 says is the finding
            fts_error = str(e)
        # One read transaction: the counts come from one snapshot, while the embedding stage
        # commits a batch of vectors every second or so. Chunks being copied in or deleted slice
        # by slice (store/sqlite/rag_hidden.py) are not counted: their rows are complete only at the end.
        conn.execute("BEGIN")
        try:
            chunks = conn.execute("SELECT count(*) FROM embeddings WHERE " + visible("embeddings.id")).fetchone()[0]
            fts = conn.execute("SELECT count(*) FROM fts_chunks WHERE " + visible("fts_chunks.rowid")).fetchone()[0]
            vectors = conn.execute("SELECT count(*) FROM vectors WHERE space=? AND " + visible("vectors.id"),
                                   (PRIMARY,)).fetchone()[0]
            try:
                pending = conn.execute("SELECT count(*) FROM pending_vectors WHERE "
                                       + visible("pending_vectors.id")).fetchone()[0]
            except sqlite3.OperationalError:
                pending = 0  # a database from before the table existed (created by the next writer)
        finally:
            conn.execute("COMMIT")
    finally:
        conn.close()
    return CollectionCounts(chunks, fts, vectors, pending, fts_error)

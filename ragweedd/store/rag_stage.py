"""A large document's publish in bounded steps, swapped in whole (used by ``RagDB.publish``).

One write transaction for the whole of a 60 MB text file (tens of thousands of chunks, drawn from
a chunker and the embed cache as they are written) held the collection's writer lock for minutes:
every other file's publish waited behind it. Here the chunks, their metadata and vectors are first
written batch by batch to TEMP tables of the writer's own connection, then copied into the
collection by plain ``INSERT .. SELECT`` in one short transaction that also removes the path's old
content. So:

* no search ever sees part of the file, nor the old and new versions together: the old version is
  served until the swap commits, then only the new one;
* the writer lock is held only for the swap (pure SQL, no chunking or cache look-ups), and other
  files' publishes get in between the batches;
* a crash or a stop before the swap leaves nothing: TEMP tables belong to the connection and vanish
  with it (the file's job is still queued and runs again at the next start).

TEMP tables live in the connection's private temp database, not in rag.sqlite3: writing them
takes neither SQLite's lock on the collection's file nor this process's writer lock for it.
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING, Any, Iterable

from ragweedd.store.pathnames import to_db

if TYPE_CHECKING:
    from ragweedd.store.rag_db import RagDB

STAGE_BATCH = 2000

_TABLES = (
    "CREATE TEMP TABLE IF NOT EXISTS stage_chunks(seq INTEGER PRIMARY KEY, chunk_idx INTEGER NOT NULL,"
    " text TEXT NOT NULL, text_sha256 TEXT NOT NULL, context TEXT NOT NULL, pending INTEGER NOT NULL)",
    "CREATE TEMP TABLE IF NOT EXISTS stage_meta(seq INTEGER NOT NULL, key TEXT NOT NULL,"
    " string_value TEXT, int_value INTEGER, float_value REAL)",
    "CREATE TEMP TABLE IF NOT EXISTS stage_vectors(seq INTEGER NOT NULL, space TEXT NOT NULL, vec BLOB NOT NULL)",
)


def _clear(conn: Any) -> None:
    for t in ("stage_chunks", "stage_meta", "stage_vectors"):
        conn.execute(f"DELETE FROM temp.{t}")


def publish_staged(rag: RagDB, *, md5: str, source_file: str, rel_path: str, kind: str, extractor: str,
                   ocr_type: str | None, title: str | None, size_bytes: int, chunks: Iterable[dict],
                   vectors: dict[str, Iterable[bytes | None]], embedders: dict[str, tuple[str, int]],
                   replaces_path: bool = True, batch: int = STAGE_BATCH) -> list[int]:
    """``RagDB.publish`` for a large document (same arguments, same result), staged as described
    in the module docstring. Whatever ``chunks`` raises while it is drawn (a stop) leaves the
    collection untouched."""
    from ragweedd.store.rag_db import PRIMARY, _typed, text_sha256
    from ragweedd.store.sqlite import transaction

    conn = rag.conn
    if conn.in_transaction or rag.has_document(md5):
        # inside a caller's larger write it joins that one; content already here only gains the path
        return rag._publish_rows(md5=md5, source_file=source_file, rel_path=rel_path, kind=kind,
                                 extractor=extractor, ocr_type=ocr_type, title=title, size_bytes=size_bytes,
                                 chunks=chunks, vectors=vectors, embedders=embedders, replaces_path=replaces_path)
    stored, stored_rel = to_db(source_file), to_db(rel_path)
    # Emptied tables give their pages back, so the temp file does not keep a large file's size for
    # as long as the connection lives (only takes effect before the first TEMP table).
    conn.execute("PRAGMA temp.auto_vacuum = FULL")
    for sql in _TABLES:
        conn.execute(sql)
    _clear(conn)
    try:
        vec_iters = {space: iter(vecs) for space, vecs in vectors.items()}
        rows: list[tuple] = []
        metas: list[tuple] = []
        vecs_out: list[tuple] = []
        n = 0

        def flush() -> None:
            # One short transaction of the connection's temp database: no lock on rag.sqlite3.
            conn.execute("SAVEPOINT stage")
            try:
                conn.executemany("INSERT INTO temp.stage_chunks VALUES (?,?,?,?,?,?)", rows)
                conn.executemany("INSERT INTO temp.stage_meta VALUES (?,?,?,?,?)", metas)
                conn.executemany("INSERT INTO temp.stage_vectors VALUES (?,?,?)", vecs_out)
            except BaseException:
                conn.execute("ROLLBACK TO stage")
                conn.execute("RELEASE stage")
                raise
            conn.execute("RELEASE stage")
            rows.clear()
            metas.clear()
            vecs_out.clear()

        for c in chunks:
            n += 1
            meta = dict(c["meta"])
            if c.get("context"):
                meta["context"] = c["context"]
            meta.update({"source_file_name": stored, "source_md5": md5, "source_rel_path": stored_rel,
                         "size_bytes": size_bytes})
            if ocr_type and "ocr_type" not in meta:
                meta["ocr_type"] = ocr_type
            metas.extend((n, k, *_typed(v)) for k, v in meta.items() if v is not None)
            pending = PRIMARY not in vec_iters
            for space, it in vec_iters.items():
                vec = next(it)
                if vec is None:
                    pending = pending or space == PRIMARY
                    continue
                vecs_out.append((n, space, vec))
            rows.append((n, c["chunk_idx"], c["text"], text_sha256(c["text"]), c.get("context") or "",
                         int(pending)))
            if len(rows) >= batch:
                flush()
        if rows:
            flush()
        return _swap(rag, md5=md5, stored=stored, stored_rel=stored_rel, source_file=source_file,
                     rel_path=rel_path, kind=kind, extractor=extractor, ocr_type=ocr_type, title=title,
                     size_bytes=size_bytes, n=n, embedders=embedders, replaces_path=replaces_path,
                     transaction=transaction, primary=PRIMARY)
    finally:
        try:
            if conn.in_transaction:  # a savepoint cut off by an exception between its statements
                conn.execute("ROLLBACK")
            _clear(conn)
        except sqlite3.Error:
            pass  # never hides what failed; the next staged publish empties the tables first


def _swap(rag: RagDB, *, md5: str, stored: str, stored_rel: str, source_file: str, rel_path: str, kind: str,
          extractor: str, ocr_type: str | None, title: str | None, size_bytes: int, n: int,
          embedders: dict[str, tuple[str, int]], replaces_path: bool, transaction: Any, primary: str) -> list[int]:
    """The staged document replaces the path's old content in one transaction. Chunk ids are
    given in order after the highest one, as row-by-row inserts would have given them."""
    conn = rag.conn
    now = time.time()
    with transaction(conn):
        if replaces_path:
            old = rag.md5_of_path(source_file)
            if old is not None and old != md5:
                rag._remove_path(source_file)
        if rag.has_document(md5):  # published meanwhile through another path: only the path is new
            rag._add_path(md5, source_file, rel_path)
            return []
        conn.execute(
            "INSERT INTO documents(md5, kind, extractor, ocr_type, title, size_bytes, chunks, added_at)"
            " VALUES (?,?,?,?,?,?,?,?)", (md5, kind, extractor, ocr_type, title, size_bytes, n, now))
        conn.execute(
            "INSERT OR REPLACE INTO document_paths(source_file, md5, rel_path, added_at) VALUES (?,?,?,?)",
            (stored, md5, stored_rel, now))
        for space, (eid, dim) in embedders.items():
            if rag.embedder(space) is None:
                rag.set_embedder(eid, dim, space)
        base = conn.execute("SELECT coalesce(max(id), 0) FROM embeddings").fetchone()[0]
        conn.execute(
            "INSERT INTO embeddings(id, collection_id, embedding_id, md5, chunk_idx, created_at, text_sha256)"
            " SELECT ? + seq, ?, ? || ':' || chunk_idx, ?, chunk_idx, ?, text_sha256 FROM temp.stage_chunks"
            " ORDER BY seq", (base, rag.collection_id, md5, md5, now))
        conn.execute(
            "INSERT INTO embedding_metadata(id, key, string_value, int_value, float_value)"
            " SELECT ? + seq, key, string_value, int_value, float_value FROM temp.stage_meta", (base,))
        conn.execute(
            "INSERT INTO embedding_metadata(id, key, string_value, int_value, float_value)"
            " SELECT ? + seq, 'chroma:document', text, NULL, NULL FROM temp.stage_chunks", (base,))
        conn.execute(
            "INSERT INTO fts_chunks(rowid, embedding_id, content, source_file, context)"
            " SELECT ? + seq, ? || ':' || chunk_idx, text, ?, context FROM temp.stage_chunks ORDER BY seq",
            (base, md5, stored))
        for space, (eid, _dim) in embedders.items():
            conn.execute("INSERT INTO vectors(id, space, embedder_id, vec)"
                         " SELECT ? + seq, space, ?, vec FROM temp.stage_vectors WHERE space = ? ORDER BY seq",
                         (base, eid, space))
        conn.execute("INSERT INTO pending_vectors(id) SELECT ? + seq FROM temp.stage_chunks WHERE pending"
                     " ORDER BY seq", (base,))
        conn.execute("INSERT INTO changes(op, id, at) SELECT 'add', ? + seq, ? FROM temp.stage_chunks"
                     " WHERE NOT pending ORDER BY seq", (base, now))
        return [r[0] for r in conn.execute("SELECT id FROM embeddings WHERE md5=? ORDER BY chunk_idx", (md5,))]

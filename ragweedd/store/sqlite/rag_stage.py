"""A large document's publish in bounded steps, switched in whole (used by ``RagDB.publish``).

One write transaction for the whole of a 60 MB text file (tens of thousands of chunks) held the
collection's writer lock for minutes, and even a copy of ready rows took 30-50 s (FTS5 tokenises
every text): every other file's publish waited behind it. Here it goes in three steps:

1. the chunks, their metadata and vectors are written batch by batch to TEMP tables of the
   writer's own connection while they are drawn from the chunker and the embed cache (no lock on
   rag.sqlite3 at all: TEMP tables live in the connection's private temp database);
2. they are copied into the collection by ``INSERT .. SELECT``, a slice of chunks per short
   transaction (sized to hold the lock about 0.2 s: ``Pace``), under a hidden range of chunk ids
   that every search leaves out (store/sqlite/rag_hidden.py); other publishes get the lock in between;
3. one short transaction shows them: it points the path at the new document, logs its chunks for
   the vector indexes, and hides the path's old content (its deletes logged); the old rows are
   then deleted slice by slice, out of sight.

So:

* no search ever sees part of the file, nor the old and new versions together: the old version is
  served until the switch commits, then only the new one;
* the writer lock is never held for more than one slice or the switch (a fraction of a second
  however large the file: the switch writes one change-log row per chunk, nothing else that grows);
* a crash or a stop at any moment leaves nothing a search can see: TEMP tables vanish with the
  connection, copied rows stay hidden (their range is abandoned and deleted by the start-up
  repair or the next large publish), and the file's job is still queued and runs again.
"""

from __future__ import annotations

import sqlite3
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from ragweedd import keyterms
from ragweedd.errors import Interrupted, StorageError
from ragweedd.store.pathnames import to_db
from ragweedd.store.rows import _typed, text_sha256
from ragweedd.store.sqlite import rag_keywords
from ragweedd.store.sqlite.connection import transaction
from ragweedd.store.sqlite.rag_hidden import Pace, new_owner, owner_done
from ragweedd.store.types import PRIMARY

if TYPE_CHECKING:
    from ragweedd.store.sqlite.rag_db import RagDB
    from ragweedd.store.types import ChunkRecord

STAGE_BATCH = 2000

_TABLES = (
    "CREATE TEMP TABLE IF NOT EXISTS stage_chunks(seq INTEGER PRIMARY KEY, chunk_idx INTEGER NOT NULL,"
    " text TEXT NOT NULL, text_sha256 TEXT NOT NULL, context TEXT NOT NULL, pending INTEGER NOT NULL)",
    "CREATE TEMP TABLE IF NOT EXISTS stage_meta(seq INTEGER NOT NULL, key TEXT NOT NULL,"
    " string_value TEXT, int_value INTEGER, float_value REAL)",
    "CREATE TEMP TABLE IF NOT EXISTS stage_vectors(seq INTEGER NOT NULL, space TEXT NOT NULL, vec BLOB NOT NULL)",
    # each slice reads its chunks' rows
    "CREATE INDEX IF NOT EXISTS temp.stage_meta_seq ON stage_meta(seq)",
    "CREATE INDEX IF NOT EXISTS temp.stage_vectors_seq ON stage_vectors(seq, space)",
)


def _clear(conn: Any) -> None:
    for t in ("stage_chunks", "stage_meta", "stage_vectors"):
        conn.execute(f"DELETE FROM temp.{t}")


def publish_staged(rag: RagDB, *, md5: str, source_file: str, rel_path: str, kind: str, extractor: str,
                   ocr_type: str | None, title: str | None, size_bytes: int, chunks: Iterable[ChunkRecord],
                   vectors: Mapping[str, Iterable[bytes | None]], embedders: dict[str, tuple[str, int]],
                   replaces_path: bool = True, batch: int = STAGE_BATCH,
                   should_stop: Callable[[], bool] | None = None) -> list[int]:
    """``RagDB.publish`` for a large document (same arguments, same result), staged as described
    in the module docstring. Whatever ``chunks`` raises while it is drawn (a stop) leaves the
    collection untouched; whatever fails later leaves only hidden rows, deleted by the next purge."""

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
        doc = dict(md5=md5, kind=kind, extractor=extractor, ocr_type=ocr_type, title=title, size_bytes=size_bytes,
                   source_file=source_file, rel_path=rel_path, stored=stored, stored_rel=stored_rel,
                   primary_eid=embedders[PRIMARY][0] if PRIMARY in embedders else None)
        ids = _copy_in(rag, doc, n=n, embedders=embedders, replaces_path=replaces_path, primary=PRIMARY,
                       transaction=transaction, should_stop=should_stop)
    finally:
        try:
            if conn.in_transaction:  # a savepoint cut off by an exception between its statements
                conn.execute("ROLLBACK")
            _clear(conn)
        except sqlite3.Error:
            pass  # never hides what failed; the next staged publish empties the tables first
    rag.purge_hidden()  # the old version, hidden by the switch (and whatever earlier publishes left)
    return ids


def _copy_in(rag: RagDB, doc: dict[str, Any], *, n: int, embedders: dict[str, tuple[str, int]],
             replaces_path: bool, primary: str, transaction: Any,
             should_stop: Callable[[], bool] | None = None) -> list[int]:
    """Steps 2 and 3 of the module docstring. Chunk ids are given in order after the highest
    one, as row-by-row inserts would have given them."""
    conn = rag.conn
    owner = new_owner()
    try:
        now = time.time()
        with transaction(conn):
            base = conn.execute("SELECT coalesce(max(id), 0) FROM embeddings").fetchone()[0]
            if n:
                conn.execute("INSERT INTO hidden_chunks(lo, hi, md5, state, owner) VALUES (?,?,?,'adding',?)",
                             (base + 1, base + n, doc["md5"], owner))
                _slice(conn, rag, doc, base, n, n, now, primary)  # the last id first: the range is reserved
        lo, pace = 1, Pace()
        while lo < n:
            if should_stop is not None and should_stop():
                raise Interrupted(f"stopped while copying {doc['source_file']} into the collection")
            hi = min(lo + pace.size - 1, n - 1)
            with transaction(conn):
                t0 = time.perf_counter()
                _still_ours(conn, owner, doc)
                _slice(conn, rag, doc, base, lo, hi, now, primary)
            pace.took(time.perf_counter() - t0)
            lo = hi + 1
        with transaction(conn):
            if n:
                _still_ours(conn, owner, doc)
            shown = _switch(rag, doc, base=base, n=n, owner=owner, embedders=embedders,
                            replaces_path=replaces_path, primary=primary)
    except BaseException as e:
        owner_done(owner)
        try:  # what was copied is abandoned: out of sight, and deleted now if it can be
            with transaction(conn):
                conn.execute("UPDATE hidden_chunks SET state='removing', owner=NULL WHERE owner=?", (owner,))
            if isinstance(e, Exception) and not isinstance(e, Interrupted):
                rag.purge_hidden(doc["md5"])  # a stop leaves them to the next start's repair
        except sqlite3.Error:
            pass  # left for the next purge (the next large publish, the start-up repair)
        raise
    finally:
        owner_done(owner)
    if not shown:
        return []
    return [r[0] for r in conn.execute("SELECT id FROM embeddings WHERE md5=? ORDER BY chunk_idx", (doc["md5"],))]


def _still_ours(conn: Any, owner: str, doc: dict[str, Any]) -> None:
    if conn.execute("SELECT 1 FROM hidden_chunks WHERE owner=? AND state='adding'", (owner,)).fetchone() is None:
        # Another process writing this collection (a one-shot command beside the daemon) took
        # the range for a leftover and is deleting it.
        raise StorageError(f"the publish of {doc['source_file']} was cut off: another process writing the "
                           f"collection took its half-copied rows for a crash's leftovers",
                           hint="the file is ingested again at its next change or the next scan")


def _slice(conn: Any, rag: RagDB, doc: dict[str, Any], base: int, lo: int, hi: int, now: float,
           primary: str) -> None:
    """Chunks ``lo``..``hi`` (1-based, in staging order) into the collection under their hidden
    range. Vectors of extra passes wait for the switch: a write of one is logged for its index."""
    md5, stored = doc["md5"], doc["stored"]
    span = (lo, hi)
    conn.execute(
        "INSERT INTO embeddings(id, collection_id, embedding_id, md5, chunk_idx, created_at, text_sha256)"
        " SELECT ? + seq, ?, ? || ':' || chunk_idx, ?, chunk_idx, ?, text_sha256 FROM temp.stage_chunks"
        " WHERE seq BETWEEN ? AND ? ORDER BY seq", (base, rag.collection_id, md5, md5, now, *span))
    conn.execute(
        "INSERT INTO embedding_metadata(id, key, string_value, int_value, float_value)"
        " SELECT ? + seq, key, string_value, int_value, float_value FROM temp.stage_meta"
        " WHERE seq BETWEEN ? AND ?", (base, *span))
    conn.execute(
        "INSERT INTO embedding_metadata(id, key, string_value, int_value, float_value)"
        " SELECT ? + seq, 'chroma:document', text, NULL, NULL FROM temp.stage_chunks WHERE seq BETWEEN ? AND ?",
        (base, *span))
    # the index form through the SQL functions of store/sqlite/rag_keywords.py, as every keyword row
    if "lang" not in doc:  # one language per document, told from chunks spread over all of it
        doc["lang"] = keyterms.detect_document([r[0] for r in conn.execute(
            "SELECT text FROM temp.stage_chunks WHERE seq % max(1, (SELECT count(*) FROM temp.stage_chunks) / 40) = 0"
            " ORDER BY seq LIMIT 40")])
    conn.execute(
        f"INSERT INTO fts_chunks({rag_keywords.FTS_COLUMNS})"
        " SELECT ? + seq, ? || ':' || chunk_idx, text, ?, context, ?, kw_form(text, ?), kw_form(context, ?)"
        " FROM temp.stage_chunks WHERE seq BETWEEN ? AND ? ORDER BY seq",
        (base, md5, stored, doc["lang"], doc["lang"], doc["lang"], *span))
    rag_keywords.count_languages(conn, {doc["lang"]: hi - lo + 1})
    if doc["primary_eid"] is not None:
        conn.execute("INSERT INTO vectors(id, space, embedder_id, vec) SELECT ? + seq, space, ?, vec"
                     " FROM temp.stage_vectors WHERE space = ? AND seq BETWEEN ? AND ? ORDER BY seq",
                     (base, doc["primary_eid"], primary, *span))
    conn.execute("INSERT INTO pending_vectors(id) SELECT ? + seq FROM temp.stage_chunks WHERE pending"
                 " AND seq BETWEEN ? AND ? ORDER BY seq", (base, *span))


def _switch(rag: RagDB, doc: dict[str, Any], *, base: int, n: int, owner: str,
            embedders: dict[str, tuple[str, int]], replaces_path: bool, primary: str) -> bool:
    """Inside the caller's transaction: the path shows the copied document, and its old content
    leaves (hidden, when large). False when the content was published meanwhile through another
    path: only the path is new, and the copy goes."""
    conn = rag.conn
    md5, source_file = doc["md5"], doc["source_file"]
    now = time.time()
    if replaces_path:
        old = rag.md5_of_path(source_file)
        if old is not None and old != md5:
            rag._remove_path(source_file)
    if rag.has_document(md5):
        rag._add_path(md5, source_file, doc["rel_path"])
        conn.execute("UPDATE hidden_chunks SET state='removing', owner=NULL WHERE owner=?", (owner,))
        return False
    conn.execute(
        "INSERT INTO documents(md5, kind, extractor, ocr_type, title, size_bytes, chunks, added_at)"
        " VALUES (?,?,?,?,?,?,?,?)",
        (md5, doc["kind"], doc["extractor"], doc["ocr_type"], doc["title"], doc["size_bytes"], n, now))
    conn.execute(
        "INSERT OR REPLACE INTO document_paths(source_file, md5, rel_path, added_at) VALUES (?,?,?,?)",
        (doc["stored"], md5, doc["stored_rel"], now))
    for space, (eid, dim) in embedders.items():
        if rag.embedder(space) is None:
            rag.set_embedder(eid, dim, space)
    for space, (eid, _dim) in embedders.items():  # the primary's came with their chunks
        if space != primary:
            conn.execute("INSERT INTO vectors(id, space, embedder_id, vec) SELECT ? + seq, space, ?, vec"
                         " FROM temp.stage_vectors WHERE space = ? ORDER BY seq", (base, eid, space))
    conn.execute("INSERT INTO changes(op, id, at) SELECT 'add', id, ? FROM vectors WHERE space=?"
                 " AND id BETWEEN ? AND ? ORDER BY id", (now, primary, base + 1, base + n))
    conn.execute("DELETE FROM hidden_chunks WHERE owner=?", (owner,))
    return True



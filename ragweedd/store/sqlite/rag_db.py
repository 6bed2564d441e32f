"""rag.sqlite3 of one collection: chunks, metadata, FTS5, vectors and the change log (DESIGN §3).

The Chroma-style names of the original design are kept (collections, embeddings,
embedding_metadata with string keys, fts_chunks). Added: ``documents`` and ``document_paths`` (which
paths hold which content), ``vectors`` (the source of truth for every index; HNSW files are derived)
and ``changes``, a sequence of add/delete operations that index files replay after their
``applied_seq``. Chunk rows, their FTS rows, their vectors and their change entries are always written
in one transaction.

Chunk identity: ``embeddings.id`` (INTEGER) is the label in every vector index and the rowid of the
chunk's fts_chunks row; ``embedding_id`` is the text key "<md5>:<chunk_idx>".
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, cast

from ragweedd.errors import NotCreatedYetError
from ragweedd.logging import get_logger
from ragweedd.store.pathnames import from_db, to_db
from ragweedd.store.rows import _typed, hit_fields, text_sha256
from ragweedd.store.sqlite import rag_keywords
from ragweedd.store.sqlite.connection import Migration, connect, migrate, recorded_migrations, transaction, write
from ragweedd.store.sqlite.rag_hidden import HIDE_ABOVE, HiddenChunks, visible
from ragweedd.store.sqlite.rag_local import OneMachine
from ragweedd.store.sqlite.rag_passes import PRIMARY, PassVectors
from ragweedd.store.sqlite.rag_served import ServedText
from ragweedd.store.sqlite.rag_swap import ModelSwap
from ragweedd.store.sqlite.tree_db import TreeRows
from ragweedd.store.types import ChunkRecord, KeywordQuery

log = get_logger("ragweedd.store")

MIGRATIONS: list[Migration] = [
    (1, "initial", """
CREATE TABLE collections (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    topic TEXT,
    metadata_json TEXT
);
CREATE TABLE embeddings (
    id INTEGER PRIMARY KEY,
    collection_id INTEGER NOT NULL REFERENCES collections(id),
    embedding_id TEXT NOT NULL UNIQUE,
    md5 TEXT NOT NULL,
    chunk_idx INTEGER NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX embeddings_md5 ON embeddings(md5);
CREATE TABLE embedding_metadata (
    id INTEGER NOT NULL REFERENCES embeddings(id) ON DELETE CASCADE,
    key TEXT NOT NULL,
    string_value TEXT,
    int_value INTEGER,
    float_value REAL,
    PRIMARY KEY (id, key)
);
CREATE INDEX embedding_metadata_key ON embedding_metadata(key, string_value);
CREATE VIRTUAL TABLE fts_chunks USING fts5(
    embedding_id UNINDEXED, content, source_file UNINDEXED, tokenize='porter unicode61'
);
CREATE TABLE documents (
    md5 TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    extractor TEXT,
    ocr_type TEXT,
    title TEXT,
    size_bytes INTEGER,
    chunks INTEGER NOT NULL,
    added_at REAL NOT NULL
);
CREATE TABLE document_paths (
    source_file TEXT PRIMARY KEY,
    md5 TEXT NOT NULL REFERENCES documents(md5) ON DELETE CASCADE,
    rel_path TEXT NOT NULL,
    added_at REAL NOT NULL
);
CREATE INDEX document_paths_md5 ON document_paths(md5);
CREATE TABLE vectors (
    id INTEGER NOT NULL REFERENCES embeddings(id) ON DELETE CASCADE,
    space TEXT NOT NULL,
    embedder_id TEXT NOT NULL,
    vec BLOB NOT NULL,
    PRIMARY KEY (id, space)
);
CREATE TABLE changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    op TEXT NOT NULL CHECK (op IN ('add', 'delete')),
    id INTEGER NOT NULL,
    at REAL NOT NULL
);
CREATE TABLE embedders (
    space TEXT PRIMARY KEY,
    embedder_id TEXT NOT NULL,
    dim INTEGER NOT NULL,
    since REAL NOT NULL
);
"""),
    # SHA-256 of each chunk's text, written with the chunk, so the integrity check can tell a
    # stored text that changed on disk (bit rot, a damaged page) from the text that was indexed.
    # Rows from before this migration get theirs on the next check.
    (2, "chunk_text_hash", """
ALTER TABLE embeddings ADD COLUMN text_sha256 TEXT;
"""),
    # Chunks are published (stored, keyword-searchable) as soon as their file is extracted; the
    # chunks whose vector is still to be computed are listed here until the embedding stage writes
    # it (ragweedd/ingest/vectorize.py). Deleting a chunk deletes its row.
    (3, "pending_vectors", """
CREATE TABLE pending_vectors (
    id INTEGER PRIMARY KEY REFERENCES embeddings(id) ON DELETE CASCADE
);
"""),
    # The chunk's context (document title, section path) is keyword-indexed in a column of its own,
    # so the stored and cited text stays the chunk itself. FTS5 tables cannot gain a column: the
    # table is built again from the stored chunk texts.
    (4, "fts_context_column", """
DROP TABLE fts_chunks;
CREATE VIRTUAL TABLE fts_chunks USING fts5(
    embedding_id UNINDEXED, content, source_file UNINDEXED, context, tokenize='porter unicode61'
);
INSERT INTO fts_chunks(rowid, embedding_id, content, source_file, context)
SELECT e.id, e.embedding_id,
       coalesce((SELECT string_value FROM embedding_metadata WHERE id = e.id AND key = 'chroma:document'), ''),
       coalesce((SELECT string_value FROM embedding_metadata WHERE id = e.id AND key = 'source_file_name'), ''),
       coalesce((SELECT string_value FROM embedding_metadata WHERE id = e.id AND key = 'context'), '')
FROM embeddings e;
"""),
    # The extra embedding passes (multi_embed_384 / multi_embed_1024) keep their vectors in
    # ``vectors`` under their space name and have a change log of their own, so the primary index
    # never replays a pass's writes. Triggers keep it, so every path that removes a chunk (its
    # vectors go by ON DELETE CASCADE) logs the pass deletes without knowing about passes.
    (5, "pass_changes", """
CREATE TABLE pass_changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    space TEXT NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('add', 'delete')),
    id INTEGER NOT NULL
);
CREATE INDEX pass_changes_space ON pass_changes(space, seq);
CREATE TRIGGER pass_vector_added AFTER INSERT ON vectors WHEN NEW.space != 'primary' BEGIN
    INSERT INTO pass_changes(space, op, id) VALUES (NEW.space, 'add', NEW.id);
END;
CREATE TRIGGER pass_vector_deleted AFTER DELETE ON vectors WHEN OLD.space != 'primary' BEGIN
    INSERT INTO pass_changes(space, op, id) VALUES (OLD.space, 'delete', OLD.id);
END;
INSERT INTO pass_changes(space, op, id) SELECT space, 'add', id FROM vectors WHERE space != 'primary' ORDER BY id;
"""),
    # A path renamed, linked to content already here, or removed while another path keeps the
    # content logs no chunk change, yet it changes what a search shows and what a path filter
    # lets through. Triggers count every such write, so a cached search result keyed by
    # ``search_version`` can never outlive one (ragweedd/query/semantic_cache.py).
    (6, "path_version", """
CREATE TABLE path_version (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    n INTEGER NOT NULL
);
INSERT INTO path_version(id, n) VALUES (1, 0);
CREATE TRIGGER path_added AFTER INSERT ON document_paths BEGIN
    UPDATE path_version SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER path_removed AFTER DELETE ON document_paths BEGIN
    UPDATE path_version SET n = n + 1 WHERE id = 1;
END;
CREATE TRIGGER path_changed AFTER UPDATE ON document_paths BEGIN
    UPDATE path_version SET n = n + 1 WHERE id = 1;
END;
"""),
    # Ranges of chunk ids no search may see: a large document being copied in or deleted slice
    # by slice (store/sqlite/rag_hidden.py).
    (7, "hidden_chunks", """
CREATE TABLE hidden_chunks (
    lo INTEGER NOT NULL,
    hi INTEGER NOT NULL,
    md5 TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('adding', 'removing')),
    owner TEXT
);
CREATE INDEX hidden_chunks_md5 ON hidden_chunks(md5);
"""),
    # Keywords in any language: the index form of store/sqlite/rag_keywords.py (issue 31), rebuilt from
    # the stored chunk texts in the migration's one transaction.
    (8, "multilingual_keywords", rag_keywords.MIGRATION_SQL),
]

# Above this many chunks a document is published staged (store/sqlite/rag_stage.py): written row by row
# in one transaction, 5,000 chunks held the collection's writer lock for over 2 s.
STAGE_ABOVE = 500


class RagDB(PassVectors, ModelSwap, ServedText, HiddenChunks, TreeRows, OneMachine):
    def __init__(self, path: Path | str, collection: str, *, topic: str = "", readonly: bool = False) -> None:
        self.path = Path(path)
        self.collection = collection
        self.conn = connect(self.path, readonly=readonly)
        rag_keywords.register(self.conn)
        # Opening a collection that is up to date only reads (the migration check too): a search
        # opening it never waits for the writer lock a long publish may hold.
        if not readonly:
            self._say_keyword_rebuild()
            migrate(self.conn, MIGRATIONS, db_name=str(self.path))
        row = self._collection_row(collection)
        if row is None and not readonly:
            write(self.conn, "INSERT OR IGNORE INTO collections(name, topic) VALUES (?, ?)", (collection, topic))
            row = self._collection_row(collection)
        if row is None:
            self.conn.close()
            raise NotCreatedYetError(f"{self.path} does not hold collection '{collection}' yet",
                               hint="it is still being created by the ingest side; this resolves itself")
        self.collection_id = row[0]

    def _say_keyword_rebuild(self) -> None:
        """Migration 8 rebuilds the keyword index from every chunk's text (2-3 ms a chunk): say
        so before it starts, so a long first open after the upgrade is not taken for a hang."""
        done = recorded_migrations(self.conn)
        if 8 in done or 7 not in done:
            return
        n = int(self.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0])
        if n:
            log.warning("keyword_index_rebuild", collection=self.collection, chunks=n,
                        message=f"rebuilding the keyword index of '{self.collection}' for search in every "
                                f"language ({n} chunks, about {max(1, n // 400)} s); it is done once, "
                                "searches meanwhile use the old index")

    def _collection_row(self, collection: str) -> Any:
        try:
            return self.conn.execute("SELECT id FROM collections WHERE name=?", (collection,)).fetchone()
        except sqlite3.OperationalError:
            return None  # a reader that came before the writer's first migration: no tables yet

    def close(self) -> None:
        self.conn.close()

    # --- embedder identity ----------------------------------------------------------------------
    def embedder(self, space: str = PRIMARY) -> tuple[str, int] | None:
        row = self.conn.execute("SELECT embedder_id, dim FROM embedders WHERE space=?", (space,)).fetchone()
        return (row[0], row[1]) if row else None

    def set_embedder(self, embedder_id: str, dim: int, space: str = PRIMARY) -> None:
        write(
            self.conn, "INSERT OR REPLACE INTO embedders(space, embedder_id, dim, since) VALUES (?,?,?,?)",
            (space, embedder_id, dim, time.time()),
        )

    # --- documents and paths -------------------------------------------------------------------
    def has_document(self, md5: str) -> bool:
        return self.conn.execute("SELECT 1 FROM documents WHERE md5=?", (md5,)).fetchone() is not None

    def paths_of(self, md5: str) -> list[str]:
        return [from_db(p) for p in self._stored_paths_of(md5)]

    def _stored_paths_of(self, md5: str) -> list[str]:
        return [r[0] for r in self.conn.execute(
            "SELECT source_file FROM document_paths WHERE md5=? ORDER BY added_at, source_file", (md5,))]

    def md5_of_path(self, source_file: str) -> str | None:
        row = self.conn.execute("SELECT md5 FROM document_paths WHERE source_file=?",
                                (to_db(source_file),)).fetchone()
        return row[0] if row else None

    def _add_path(self, md5: str, source_file: str, rel_path: str) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO document_paths(source_file, md5, rel_path, added_at) VALUES (?,?,?,?)",
            (to_db(source_file), md5, to_db(rel_path), time.time()),
        )
        self._refresh_display_path(md5)

    def _refresh_display_path(self, md5: str) -> None:
        # FTS and metadata carry one display path per chunk; keep it pointing at a live path.
        # Everything here stays in the stored form (see store/pathnames.py).
        paths = self._stored_paths_of(md5)
        if not paths:
            return
        shown = paths[0]
        rel = self.conn.execute("SELECT rel_path FROM document_paths WHERE source_file=?", (shown,)).fetchone()[0]
        ids = [r[0] for r in self.conn.execute("SELECT id FROM embeddings WHERE md5=?", (md5,))]
        if not ids:
            return
        cur = self.conn.execute(
            "SELECT string_value FROM embedding_metadata WHERE id=? AND key='source_file_name'", (ids[0],)
        ).fetchone()
        if cur and cur[0] == shown:
            return
        for i in ids:
            self.conn.execute(
                "UPDATE embedding_metadata SET string_value=? WHERE id=? AND key='source_file_name'", (shown, i))
            self.conn.execute(
                "UPDATE embedding_metadata SET string_value=? WHERE id=? AND key='source_rel_path'", (rel, i))
        self.conn.executemany("UPDATE fts_chunks SET source_file=? WHERE rowid=?", [(shown, i) for i in ids])

    def link_path(self, md5: str, source_file: str, rel_path: str) -> list[int]:
        """Point a path at content already indexed here. If the path held other content, that
        content leaves (unless still held elsewhere) in the same transaction. Returns deleted ids."""
        with transaction(self.conn):
            deleted: list[int] = []
            old = self.md5_of_path(source_file)
            if old is not None and old != md5:
                _, deleted = self._remove_path(source_file)
            self._add_path(md5, source_file, rel_path)
        self._purge_after([old])
        return deleted

    def chunks_of(self, md5: str) -> int:
        return self.conn.execute("SELECT count(*) FROM embeddings WHERE md5=?", (md5,)).fetchone()[0]

    def chunk_ids_of(self, md5: str) -> list[int]:
        """A document's chunk ids in reading order."""
        return [r[0] for r in self.conn.execute("SELECT id FROM embeddings WHERE md5=? ORDER BY chunk_idx", (md5,))]

    def chunk_ids_of_documents(self, md5s: Sequence[str]) -> set[int]:
        ids: set[int] = set()
        md5s = list(md5s)
        for i in range(0, len(md5s), 500):
            part = md5s[i:i + 500]
            q = ",".join("?" * len(part))
            ids.update(r[0] for r in self.conn.execute(f"SELECT id FROM embeddings WHERE md5 IN ({q})", part))
        return ids

    def document_paths(self) -> list[tuple[str, str, str]]:
        """(source_file, rel_path, md5) of every path that holds content here."""
        return [(from_db(r[0]), from_db(r[1]), r[2])
                for r in self.conn.execute("SELECT source_file, rel_path, md5 FROM document_paths")]

    def remove_path(self, source_file: str) -> tuple[str | None, list[int]]:
        """Forget a path. When no other path holds its content, the content's chunks leave FTS and
        the vector log in the same transaction (a large document's rows are deleted after it, out
        of sight: store/sqlite/rag_hidden.py). Returns (md5, ids of deleted chunks)."""
        with transaction(self.conn):
            out = self._remove_path(source_file)
        self._purge_after([out[0]])
        return out

    def _remove_path(self, source_file: str) -> tuple[str | None, list[int]]:
        md5 = self.md5_of_path(source_file)
        if md5 is None:
            return None, []
        self.conn.execute("DELETE FROM document_paths WHERE source_file=?", (to_db(source_file),))
        if self.paths_of(md5):
            self._refresh_display_path(md5)
            return md5, []
        return md5, self._delete_document(md5)

    def _delete_document(self, md5: str) -> list[int]:
        if self.chunks_of(md5) > HIDE_ABOVE:
            return self._hide_document(md5)  # deleted by _purge_after, slice by slice
        ids = [r[0] for r in self.conn.execute("SELECT id FROM embeddings WHERE md5=?", (md5,))]
        now = time.time()
        for i in range(0, len(ids), 500):
            part = ids[i:i + 500]
            q = ",".join("?" * len(part))
            self.conn.execute(f"DELETE FROM fts_chunks WHERE rowid IN ({q})", part)
            self.conn.execute(f"DELETE FROM embeddings WHERE id IN ({q})", part)
        self.conn.executemany("INSERT INTO changes(op, id, at) VALUES ('delete', ?, ?)", [(i, now) for i in ids])
        self.conn.execute("DELETE FROM documents WHERE md5=?", (md5,))
        return ids

    def publish(self, *, md5: str, source_file: str, rel_path: str, kind: str, extractor: str,
                ocr_type: str | None, title: str | None, size_bytes: int, chunks: Iterable[ChunkRecord],
                vectors: Mapping[str, Iterable[bytes | None]], embedders: dict[str, tuple[str, int]],
                replaces_path: bool = True, should_stop: Callable[[], bool] | None = None) -> list[int]:
        """Add one document's chunks, metadata, FTS rows, vectors and change entries in one
        transaction. If ``source_file`` held other content, that content leaves in the same
        transaction (unless another path still holds it). Idempotent: content already present only
        gains the path. Returns the new chunk ids. ``chunks`` and each space's ``vectors`` are
        read in step, once, so a large file's may be generators (drawn chunk, then its vectors).

        A primary vector may be None: the chunk is stored and keyword-searchable now, listed in
        ``pending_vectors``, and logged for the vector index only when ``add_vectors`` writes its
        vector. A chunk's optional ``context`` (title and section path) goes to its metadata and
        to the keyword index beside its text.

        A large document (chunks given as an iterator, or more than ``STAGE_ABOVE``) is staged
        batch by batch, copied in by short transactions out of sight and switched in by one
        (store/sqlite/rag_stage.py), so the writer lock is never held long; a large old version leaves
        likewise (store/sqlite/rag_hidden.py). ``should_stop()`` is asked between those transactions:
        True ends the publish with :class:`Interrupted`, the rows copied so far left hidden for
        the next start's repair (deleting them would hold up the stop)."""
        args = dict(md5=md5, source_file=source_file, rel_path=rel_path, kind=kind, extractor=extractor,
                    ocr_type=ocr_type, title=title, size_bytes=size_bytes, chunks=chunks, vectors=vectors,
                    embedders=embedders, replaces_path=replaces_path)
        if not self.conn.in_transaction:
            self.wait_unhidden(md5)  # a copy of the same content under way, or left by a crash
        if not isinstance(chunks, (list, tuple)) or len(chunks) > STAGE_ABOVE:
            from ragweedd.store.sqlite.rag_stage import publish_staged

            return publish_staged(self, should_stop=should_stop, **args)  # type: ignore[arg-type]
        old = self.md5_of_path(source_file)
        ids = self._publish_rows(**args)  # type: ignore[arg-type]
        self._purge_after([old])
        return ids

    def _publish_rows(self, *, md5: str, source_file: str, rel_path: str, kind: str, extractor: str,
                      ocr_type: str | None, title: str | None, size_bytes: int, chunks: Iterable[ChunkRecord],
                      vectors: Mapping[str, Iterable[bytes | None]], embedders: dict[str, tuple[str, int]],
                      replaces_path: bool = True) -> list[int]:
        """``publish`` row by row in one transaction (a document of ordinary size)."""
        stored, stored_rel = to_db(source_file), to_db(rel_path)
        with transaction(self.conn):
            if replaces_path:
                old = self.md5_of_path(source_file)
                if old is not None and old != md5:
                    self._remove_path(source_file)
            if self.has_document(md5):
                self._add_path(md5, source_file, rel_path)
                return []
            now = time.time()
            self.conn.execute(
                "INSERT INTO documents(md5, kind, extractor, ocr_type, title, size_bytes, chunks, added_at)"
                " VALUES (?,?,?,?,?,?,?,?)", (md5, kind, extractor, ocr_type, title, size_bytes, 0, now))
            self.conn.execute(
                "INSERT OR REPLACE INTO document_paths(source_file, md5, rel_path, added_at) VALUES (?,?,?,?)",
                (stored, md5, stored_rel, now))
            for space, (eid, dim) in embedders.items():
                if self.embedder(space) is None:
                    self.set_embedder(eid, dim, space)
            ids = []
            keyword_rows: list[tuple[int, str, str, str, str]] = []
            vec_iters = {space: iter(vecs) for space, vecs in vectors.items()}
            for c in chunks:
                cur = self.conn.execute(
                    "INSERT INTO embeddings(collection_id, embedding_id, md5, chunk_idx, created_at, text_sha256)"
                    " VALUES (?,?,?,?,?,?)",
                    (self.collection_id, f"{md5}:{c['chunk_idx']}", md5, c["chunk_idx"], now, text_sha256(c["text"])))
                # typed Optional for cursors that inserted nothing; an INSERT into a rowid table sets it
                cid = cast(int, cur.lastrowid)
                ids.append(cid)
                meta = dict(c["meta"])
                if c.get("context"):
                    meta["context"] = c["context"]
                meta.update({"chroma:document": c["text"], "source_file_name": stored,
                             "source_md5": md5, "source_rel_path": stored_rel, "size_bytes": size_bytes})
                if ocr_type and "ocr_type" not in meta:
                    meta["ocr_type"] = ocr_type
                self.conn.executemany(
                    "INSERT INTO embedding_metadata(id, key, string_value, int_value, float_value) VALUES (?,?,?,?,?)",
                    [(cid, k, *_typed(v)) for k, v in meta.items() if v is not None])
                keyword_rows.append((cid, f"{md5}:{c['chunk_idx']}", c["text"], stored, c.get("context") or ""))
                pending = False
                for space, vecs in vec_iters.items():
                    vec = next(vecs)
                    if vec is None:
                        pending = pending or space == PRIMARY
                        continue
                    self.conn.execute("INSERT INTO vectors(id, space, embedder_id, vec) VALUES (?,?,?,?)",
                                      (cid, space, embedders[space][0], vec))
                if pending or PRIMARY not in vec_iters:
                    self.conn.execute("INSERT INTO pending_vectors(id) VALUES (?)", (cid,))
                else:
                    self.conn.execute("INSERT INTO changes(op, id, at) VALUES ('add', ?, ?)", (cid, now))
            rag_keywords.insert_rows(self.conn, keyword_rows)
            self.conn.execute("UPDATE documents SET chunks=? WHERE md5=?", (len(ids), md5))
            return ids

    # --- integrity ---------------------------------------------------------------------------------
    def chunk_text_mismatches(self, *, backfill: bool = False) -> set[str]:
        """md5s of the documents whose stored chunk text (metadata or FTS row) no longer matches the
        hash stored with it, or whose chunk lost its text, keyword row or vector (a chunk still
        waiting for its vector has none yet, and is listed in ``pending_vectors``). With
        ``backfill``, chunks stored before hashes existed get theirs."""
        bad: set[str] = set()
        missing: list[tuple[str, int]] = []
        rows = self.conn.execute(
            "SELECT e.id, e.md5, e.text_sha256, m.string_value, f.content, coalesce(v.id, p.id) FROM embeddings e"
            " LEFT JOIN embedding_metadata m ON m.id = e.id AND m.key = 'chroma:document'"
            " LEFT JOIN fts_chunks f ON f.rowid = e.id"
            " LEFT JOIN vectors v ON v.id = e.id AND v.space = ?"
            " LEFT JOIN pending_vectors p ON p.id = e.id WHERE " + visible("e.id"), (PRIMARY,))
        for cid, md5, stored, meta_text, fts_text, vec in rows:
            if meta_text is None or fts_text is None or vec is None:
                bad.add(md5)
            elif stored is None:
                if meta_text == fts_text:
                    missing.append((text_sha256(meta_text), cid))
                else:
                    bad.add(md5)
            elif text_sha256(meta_text) != stored or text_sha256(fts_text) != stored:
                bad.add(md5)
        if backfill and missing:
            with transaction(self.conn):
                self.conn.executemany("UPDATE embeddings SET text_sha256=? WHERE id=?", missing)
        return bad

    def drop_documents(self, md5s: Sequence[str]) -> tuple[list[str], list[int]]:
        """Remove documents (their paths, chunks, FTS rows, vectors; deletes logged) so their files
        are ingested again from disk. Returns (their paths, deleted chunk ids)."""
        paths: list[str] = []
        ids: list[int] = []
        with transaction(self.conn):
            for md5 in md5s:
                paths += self.paths_of(md5)
                self.conn.execute("DELETE FROM document_paths WHERE md5=?", (md5,))
                ids += self._delete_document(md5)
        self._purge_after(md5s)
        return paths, ids

    def reindex(self) -> None:
        """Rebuild every ordinary index from its table. A chunk text changed in the table but not
        in the index on (key, string_value) (bit rot, an edit under SQLite's feet) passes
        quick_check, but deleting that row then fails as "malformed"; after REINDEX it does not."""
        with transaction(self.conn):
            self.conn.execute("REINDEX")

    def rebuild_fts_index(self) -> None:
        """FTS5's own 'rebuild': the keyword index is recomputed from the stored FTS rows (after a
        row whose text had changed was removed with the wrong terms)."""
        with transaction(self.conn):
            self.conn.execute("INSERT INTO fts_chunks(fts_chunks) VALUES ('rebuild')")

    # --- vectors that follow their chunks ----------------------------------------------------------
    def pending_batch(self, limit: int, after_id: int = 0) -> list[tuple[int, str, str, str]]:
        """Up to ``limit`` chunks still waiting for their primary vector, oldest first:
        (chunk id, embedding_id, text, context)."""
        return [(int(r[0]), r[1], r[2] or "", r[3] or "") for r in self.conn.execute(
            "SELECT p.id, e.embedding_id, t.string_value, c.string_value FROM pending_vectors p"
            " JOIN embeddings e ON e.id = p.id"
            " LEFT JOIN embedding_metadata t ON t.id = p.id AND t.key = 'chroma:document'"
            " LEFT JOIN embedding_metadata c ON c.id = p.id AND c.key = 'context'"
            " WHERE p.id > ? AND " + visible("p.id") + " ORDER BY p.id LIMIT ?", (after_id, limit))]

    def add_vectors(self, embedder_id: str, items: Sequence[tuple[int, str, str, bytes]]) -> list[int]:
        """Write primary vectors of pending chunks and log them for the vector index, in one
        transaction. ``items`` are (chunk id, embedding_id, context, vector) as ``pending_batch``
        read them. A chunk is passed over unless it is still pending and still the chunk that was
        read: a chunk id is reused when the newest file's chunks are replaced (an edit), and its
        embedding_id (content MD5 and chunk index) and context then tell the new chunk from the one
        whose text was embedded. So no chunk gets a vector of another text, two vectors or two
        change entries. Returns the ids written."""
        done: list[int] = []
        now = time.time()
        with transaction(self.conn):
            for cid, embedding_id, context, vec in items:
                same = self.conn.execute(
                    "SELECT 1 FROM embeddings e LEFT JOIN embedding_metadata c ON c.id = e.id AND c.key = 'context'"
                    " WHERE e.id = ? AND e.embedding_id = ? AND coalesce(c.string_value, '') = ? AND "
                    + visible("e.id"), (cid, embedding_id, context)).fetchone()
                if same is None or not self.conn.execute("DELETE FROM pending_vectors WHERE id=?", (cid,)).rowcount:
                    continue
                self.conn.execute("INSERT OR REPLACE INTO vectors(id, space, embedder_id, vec) VALUES (?,?,?,?)",
                                  (cid, PRIMARY, embedder_id, vec))
                self.conn.execute("INSERT INTO changes(op, id, at) VALUES ('add', ?, ?)", (cid, now))
                done.append(cid)
        return done

    def pending_summary(self) -> tuple[int, int]:
        """(chunks waiting for their vector, documents with at least one such chunk)."""
        row = self.conn.execute("SELECT count(*), count(DISTINCT e.md5) FROM pending_vectors p"
                                " JOIN embeddings e ON e.id = p.id WHERE " + visible("p.id")).fetchone()
        return int(row[0]), int(row[1])

    # --- reading -----------------------------------------------------------------------------------
    def max_seq(self) -> int:
        return self.conn.execute("SELECT coalesce(max(seq), 0) FROM changes").fetchone()[0]

    def search_version(self) -> tuple[int, int, int, int]:
        """(change sequence, newest chunk id, extra passes' change sequence, path writes): moves
        with every write that can change a search's results -- chunks added (also those still
        waiting for their vector, which log their change only later), deleted, vectors written,
        paths added, renamed or removed. Four index lookups."""
        row = self.conn.execute(
            "SELECT (SELECT coalesce(max(seq), 0) FROM changes), (SELECT coalesce(max(id), 0) FROM embeddings),"
            " (SELECT coalesce(max(seq), 0) FROM pass_changes), (SELECT n FROM path_version WHERE id = 1)"
        ).fetchone()
        return int(row[0]), int(row[1]), int(row[2]), int(row[3] or 0)

    def min_seq(self) -> int | None:
        """The oldest change still in the log (None when it is empty)."""
        return self.conn.execute("SELECT min(seq) FROM changes").fetchone()[0]

    def changes_after(self, seq: int) -> list[tuple[int, str, int]]:
        return [tuple(r) for r in self.conn.execute(
            "SELECT seq, op, id FROM changes WHERE seq > ? ORDER BY seq", (seq,))]

    def changes_batch_after(self, seq: int, limit: int) -> list[tuple[int, str, int]]:
        """At most ``limit`` changes after ``seq``, oldest first: (seq, op, chunk id)."""
        return [tuple(r) for r in self.conn.execute(
            "SELECT seq, op, id FROM changes WHERE seq > ? ORDER BY seq LIMIT ?", (seq, limit))]

    def change_counts_after(self, seq: int) -> tuple[int, int]:
        """(adds, deletes) logged after ``seq``."""
        return _change_counts_after(self.conn, seq)

    def vectors_for(self, ids: Sequence[int], space: str = PRIMARY) -> dict[int, bytes]:
        out = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i:i + 500])
            q = ",".join("?" * len(part))
            for r in self.conn.execute(f"SELECT id, vec FROM vectors WHERE space=? AND id IN ({q})", (space, *part)):
                out[r[0]] = r[1]
        return out

    def iter_vectors(self, space: str = PRIMARY, batch: int = 10000) -> Iterator[tuple[list[int], list[bytes]]]:
        last = -1
        while True:
            rows = self.conn.execute(
                "SELECT id, vec, " + visible("vectors.id") + " FROM vectors WHERE space=? AND id > ?"
                " ORDER BY id LIMIT ?", (space, last, batch)).fetchall()
            if not rows:
                return
            shown = [r for r in rows if r[2]]
            if shown:
                yield [r[0] for r in shown], [r[1] for r in shown]
            last = rows[-1][0]

    def chunk_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM embeddings").fetchone()[0]

    def document_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM documents").fetchone()[0]

    def entropy_rows(self) -> list[tuple[int, float | None, int | None]]:
        """(chunk id, text_entropy, word_count) of every chunk; None where a chunk lacks the key."""
        return [tuple(r) for r in self.conn.execute(
            "SELECT e.id, (SELECT float_value FROM embedding_metadata WHERE id=e.id AND key='text_entropy'),"
            " (SELECT int_value FROM embedding_metadata WHERE id=e.id AND key='word_count') FROM embeddings e"
            " WHERE " + visible("e.id"))]

    def rebuild_fts(self, batch: int = 1000) -> int:
        """Backfill the keyword index from stored chunk text (see ``fts_rebuild``)."""
        return fts_rebuild(self.conn, batch)

    def keyword_match(self, query: KeywordQuery, limit: int) -> list[tuple[int, float]]:
        """[(chunk id, bm25 as a positive score)] of the rows FTS5 MATCH finds, best first."""
        return keyword_match(self.conn, query, limit)

    def briefs(self, ids: Sequence[int]) -> dict[int, tuple[str, str, str, list[int] | None]]:
        """{chunk id: (document md5, its file as stored, chunk text, its pages)}: what ranking needs
        (the per-file cap, the same-pages and text dedup) for every candidate, one row each; ``hits``
        is for the few returned. A chunk whose keyword row is missing (a keyword backfill under
        way) is absent. Its text is not served (``hits`` reads and checks what is), so it is not
        hashed here: that would cost a hash for every candidate of every search."""
        out: dict[int, tuple[str, str, str, list[int] | None]] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i:i + 500])
            q = ",".join("?" * len(part))
            for r in self.conn.execute(
                    f"SELECT e.id, e.md5, f.source_file, f.content, m.string_value FROM embeddings e"
                    f" JOIN fts_chunks f ON f.rowid = e.id"
                    f" LEFT JOIN embedding_metadata m ON m.id = e.id AND m.key = 'pages' WHERE e.id IN ({q})"
                    f" AND {visible('e.id')}", part):
                out[int(r[0])] = (r[1], r[2] or "", r[3] or "", json.loads(r[4]) if r[4] else None)
        return out

    def headings(self, ids: Sequence[int]) -> dict[int, str]:
        """{chunk id: its section heading and table title, joined}: what says which part of a
        document a chunk is in, for every candidate of a search, without reading its text."""
        out: dict[int, str] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i:i + 500])
            q = ",".join("?" * len(part))
            # "+m.key": read by the primary key (id, key); the planner otherwise walks the key index
            # over every chunk's section (seconds at 50k chunks instead of milliseconds)
            for cid, value in self.conn.execute(
                    f"SELECT m.id, m.string_value FROM embedding_metadata m WHERE +m.key IN ('section', 'table_title')"
                    f" AND m.id IN ({q}) AND {visible('m.id')} ORDER BY m.key", part):
                out[int(cid)] = f"{out[int(cid)]} {value}" if int(cid) in out else str(value or "")
        return out

    def hits(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        """Search-hit dicts (without scores) for chunk ids, in one pass over the metadata. A chunk
        whose text fails its hash is left out (``rotten``): what is served is what was indexed."""
        out: dict[int, dict[str, Any]] = {}
        hashes: dict[int, str | None] = {}
        for i in range(0, len(ids), 500):
            part = list(ids[i:i + 500])
            q = ",".join("?" * len(part))
            for r in self.conn.execute(
                f"SELECT e.id, e.md5, e.chunk_idx, m.key, m.string_value, m.int_value, m.float_value, e.text_sha256"
                f" FROM embeddings e JOIN embedding_metadata m ON m.id = e.id"
                f" WHERE e.id IN ({q}) AND {visible('e.id')}", part):
                h = out.get(r[0])
                if h is None:
                    h = out[r[0]] = {"embedding_id": r[0], "collection": self.collection, "doc_id": r[1],
                                     "chunk_idx": r[2], "_meta": {}}
                    hashes[r[0]] = r[7]
                h["_meta"][r[3]] = r[4] if r[4] is not None else (r[5] if r[5] is not None else r[6])
        for cid in self.rotten([(cid, h["doc_id"], hashes[cid], h["_meta"].get("chroma:document"))
                                for cid, h in out.items()]):
            del out[cid]
        for h in out.values():
            h.update(hit_fields(h.pop("_meta")))
        return out


def keyword_match(conn: sqlite3.Connection, query: KeywordQuery, limit: int) -> list[tuple[int, float]]:
    # ORDER BY bm25(...) rather than ORDER BY rank: measured ~1.5x faster on the same queries.
    # Rows of a document being copied in or deleted (store/sqlite/rag_hidden.py) never match.
    rows = conn.execute(
        "SELECT rowid, bm25(fts_chunks) AS s FROM fts_chunks WHERE fts_chunks MATCH ? AND "
        + visible("fts_chunks.rowid") + " ORDER BY s LIMIT ?", (rag_keywords.fts5_match(query), limit)).fetchall()
    return [(int(r[0]), -float(r[1])) for r in rows]


def _change_counts_after(conn: sqlite3.Connection, seq: int) -> tuple[int, int]:
    rows = dict(conn.execute("SELECT op, count(*) FROM changes WHERE seq > ? GROUP BY op", (seq,)).fetchall())
    return int(rows.get("add", 0)), int(rows.get("delete", 0))


# moved beside the rest of the keyword rows' code; the name stays for callers
fts_rebuild = rag_keywords.rebuild

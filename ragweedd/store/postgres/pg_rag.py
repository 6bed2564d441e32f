"""One collection in PostgreSQL: chunks, metadata, keyword rows, vectors and the change logs.

The PostgreSQL twin of RagDB (store/sqlite/rag_db.py), with the same methods and the same meaning; the
schema is store/postgres/pg_schema.py. Paths are this source's (the ``source`` the store was opened with):
``publish``, ``link_path``, ``remove_path`` and ``md5_of_path`` speak of this machine's paths, and
content stays while any source still holds a path to it.

Vector search does not go through index files: ``nearest`` asks pgvector, through the partial HNSW
index of the collection's space when the search is unfiltered, and exactly over the allowed chunks
when a filter gives them (so a filter never returns fewer hits than exist).
"""

from __future__ import annotations

import json
import struct
import time
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from ragweedd import keyterms
from ragweedd.errors import InternalError, NotCreatedYetError, RequestError
from ragweedd.store.pathnames import to_db
from ragweedd.store.postgres import pg_terms
from ragweedd.store.postgres.connection import PgConn, from_pg, maybe_from_pg, to_pg
from ragweedd.store.postgres.pg_claims import LIVE_CLAIMERS, hold, new_claimer
from ragweedd.store.postgres.pg_keyword import PgKeyword
from ragweedd.store.postgres.pg_tree import PgTreeRows
from ragweedd.store.rows import hit_fields, text_sha256
from ragweedd.store.types import PRIMARY, ChunkRecord

if TYPE_CHECKING:
    import numpy as np

PUBLISH_BATCH = 500  # chunks written per statement by publish


def vec_text(vec: bytes | Any) -> str:
    """A float32 vector (bytes, as the SQLite store keeps it, or an array) as pgvector's text."""
    import numpy as np

    a = np.frombuffer(vec, dtype=np.float32) if isinstance(vec, (bytes, bytearray, memoryview)) \
        else np.asarray(vec, dtype=np.float32).reshape(-1)
    return "[" + ",".join(repr(float(x)) for x in a) + "]"


def vectors_copy_data(collection_id: int, space: str, embedder_id: str, items: Sequence[tuple[int, Any]]) -> bytes:
    """COPY BINARY data of vectors rows (id, collection_id, space, embedder_id, vec); a vector is
    float32 bytes (as the SQLite store keeps it) or an array."""

    import numpy as np

    head = struct.pack(">ii", 4, collection_id)
    sp, em = space.encode(), embedder_id.encode()
    fixed = struct.pack(">i", len(sp)) + sp + struct.pack(">i", len(em)) + em
    out = [b"PGCOPY\n\xff\r\n\x00", struct.pack(">ii", 0, 0)]
    for cid, vec in items:
        a = np.frombuffer(vec, dtype=np.float32) if isinstance(vec, (bytes, bytearray, memoryview)) \
            else np.asarray(vec, dtype=np.float32).reshape(-1)
        body = struct.pack(">hh", len(a), 0) + a.astype(">f4").tobytes()
        out += [struct.pack(">hiq", 5, 8, cid), head, fixed, struct.pack(">i", len(body)), body]
    out.append(struct.pack(">h", -1))
    return b"".join(out)


def vec_bytes(text: str) -> bytes:
    import numpy as np

    return np.array(text.strip("[]").split(","), dtype=np.float32).tobytes() if text != "[]" else b""


class PgRag(PgTreeRows, PgKeyword):
    def __init__(self, db: PgConn, collection: str, *, source: str, topic: str = "", readonly: bool = False,
                 claimer: int | None = None) -> None:
        """``claimer``: the process's (store/postgres/pg_claims.py), held by its backend; a store opened
        on its own takes one of its own when it first claims chunks to embed."""
        self.db = db
        self._claimer = claimer
        self.collection = collection
        self.source = source
        if not readonly:
            db.run("INSERT INTO collections(name, topic) VALUES (%s, %s) ON CONFLICT (name) DO NOTHING",
                   (collection, topic))
        cid = db.value("SELECT id FROM collections WHERE name=%s", (collection,))
        if cid is None:
            raise NotCreatedYetError(f"the PostgreSQL store does not hold collection '{collection}' yet",
                                     hint="it is still being created by the ingest side; this resolves itself")
        self.collection_id = int(cid)
        self._embedders_seen: set[str] = set()
        self._doc_lang: tuple[str, str] = ("", "")  # (md5, language) of the document being written

    def close(self) -> None:
        self.db.close()

    def _content_lock(self, c: Any, md5: str) -> None:
        # One writer at a time decides whether a content stays, comes or goes (its last path on any
        # machine removed while another machine links a new one).
        c.execute("SELECT pg_advisory_xact_lock(%s, hashtext(%s))", (2, md5))

    def _log(self, c: Any, deletes: Sequence[int] = (), adds: Sequence[int] = (), paths: bool = False) -> None:
        """Write a transaction's change entries, as its last statements. Entries of a collection
        must commit in sequence order (see pg_schema.py): the collection's lock is taken here and
        held to the commit that follows, so writers are serialised only for that moment, never
        for the work before it."""
        if not deletes and not adds and not paths:
            return
        c.execute("SELECT pg_advisory_xact_lock(%s, %s)", (1, self.collection_id))
        if paths:  # a path written: a cached search result must not outlive it (search_version)
            c.execute("INSERT INTO path_changes(collection_id) VALUES (%s)", (self.collection_id,))
        now = time.time()
        for op, ids in (("delete", sorted(deletes)), ("add", sorted(adds))):
            if ids:
                c.execute("INSERT INTO changes(collection_id, op, id, at) SELECT %s, %s, x, %s"
                          " FROM unnest(%s::bigint[]) AS x ORDER BY x", (self.collection_id, op, now, ids))

    # --- embedder identity ----------------------------------------------------------------------
    def embedder(self, space: str = PRIMARY) -> tuple[str, int] | None:
        r = self.db.one("SELECT embedder_id, dim FROM embedders WHERE collection_id=%s AND space=%s",
                        (self.collection_id, space))
        return (r["embedder_id"], int(r["dim"])) if r else None

    def set_embedder(self, embedder_id: str, dim: int, space: str = PRIMARY) -> None:
        with self.db.tx() as c:
            c.execute("INSERT INTO embedders(collection_id, space, embedder_id, dim, since) VALUES (%s,%s,%s,%s,%s)"
                      " ON CONFLICT (collection_id, space) DO UPDATE SET embedder_id=excluded.embedder_id,"
                      " dim=excluded.dim, since=excluded.since",
                      (self.collection_id, space, embedder_id, dim, time.time()))
            self._ensure_hnsw(c, space, dim)

    def check_embedder(self, embedder_id: str, c: Any = None) -> None:
        """Refuse vectors of another embedder than the collection's (a daemon still running with
        the model the collection was moved away from on another machine); ``c``: the caller's
        transaction, where the vectors are written."""
        q = ("SELECT embedder_id FROM embedders WHERE collection_id=%s AND space=%s", (self.collection_id, PRIMARY))
        r = c.execute(*q).fetchone() if c is not None else self.db.one(*q)
        if r is not None and r["embedder_id"] != embedder_id:
            from ragweedd.errors import EmbedderMismatchError

            raise EmbedderMismatchError(f"collection '{self.collection}' in the shared database is embedded with "
                                        f"{r['embedder_id']}, but this process embeds with {embedder_id}",
                                        hint="set [embed] model (and chunk_context) to match and restart ragweedd")

    def restart_vectors(self, embedder_id: str, dim: int) -> int:
        """Record ``embedder_id`` as the collection's embedder and set every chunk waiting for its
        vector (ragweedd reembed): the primary vectors made by the one before are dropped, with the
        HNSW index of their dimension when it differs. Returns the chunks set waiting."""
        with self.db.tx() as c:
            old = c.execute("SELECT dim FROM embedders WHERE collection_id=%s AND space=%s",
                            (self.collection_id, PRIMARY)).fetchone()
            gone = [int(r["id"]) for r in c.execute(
                "DELETE FROM vectors WHERE collection_id=%s AND space=%s RETURNING id", (self.collection_id, PRIMARY))]
            n = c.execute("INSERT INTO pending_vectors(id, collection_id) SELECT id, collection_id FROM chunks"
                          " WHERE collection_id=%s ON CONFLICT (id) DO UPDATE SET claimed_by = NULL",
                          (self.collection_id,)).rowcount
            c.execute("INSERT INTO embedders(collection_id, space, embedder_id, dim, since) VALUES (%s,%s,%s,%s,%s)"
                      " ON CONFLICT (collection_id, space) DO UPDATE SET embedder_id=excluded.embedder_id,"
                      " dim=excluded.dim, since=excluded.since",
                      (self.collection_id, PRIMARY, embedder_id, dim, time.time()))
            resized = old is not None and int(old["dim"]) != int(dim)
            if resized:
                c.execute(f"DROP INDEX IF EXISTS vectors_hnsw_{self.collection_id}_{PRIMARY}_{int(old['dim'])}")
            else:
                self._ensure_hnsw(c, PRIMARY, dim)
            self._log(c, deletes=gone)
        if resized:
            self.ensure_vector_index(dim)
        return n

    def ensure_vector_index(self, dim: int) -> None:
        """The HNSW index of the primary vectors, built after a change of dimension: an index build
        also reads the rows deleted but still visible to an older snapshot (whose vectors have the
        old dimension), so those are vacuumed away first. Until it exists, searches rank exactly."""
        self.db.run("VACUUM vectors")
        try:
            with self.db.tx() as c:
                self._ensure_hnsw(c, PRIMARY, dim)
        except Exception as e:
            from ragweedd.errors import StorageError

            raise StorageError(f"collection '{self.collection}': its vectors were reset, but the vector index for "
                               f"{int(dim)} dimensions cannot be built while another session still sees the old "
                               f"vectors ({e})", hint="run ragweedd reembed again in a while; searches meanwhile "
                                                      "rank the vectors exactly (slower)") from e

    def _ensure_hnsw(self, c: Any, space: str, dim: int) -> None:
        # One partial HNSW index per (collection, space, dimension); inner product on unit vectors.
        # The name and the literals in it are built from integers and a checked space name only.
        if not space.replace("_", "").isalnum():
            raise InternalError(f"bad vector space name {space!r}")
        name = f"vectors_hnsw_{self.collection_id}_{space}_{int(dim)}"
        c.execute(f"CREATE INDEX IF NOT EXISTS {name} ON vectors USING hnsw ((vec::vector({int(dim)}))"
                  f" vector_ip_ops) WHERE collection_id = {self.collection_id} AND space = '{space}'")

    # --- documents and paths -------------------------------------------------------------------
    def has_document(self, md5: str) -> bool:
        return self.db.one("SELECT 1 FROM documents WHERE collection_id=%s AND md5=%s",
                           (self.collection_id, md5)) is not None

    def paths_of(self, md5: str) -> list[str]:
        return [from_pg(r["source_file"]) for r in self.db.all(
            "SELECT source_file FROM document_paths WHERE collection_id=%s AND md5=%s AND source=%s"
            " ORDER BY added_at, source_file", (self.collection_id, md5, self.source))]

    def sources_of(self, md5: str) -> list[tuple[str, str]]:
        """(source, path) of every path that holds the content, on any machine."""
        return [(r["source"], from_pg(r["source_file"])) for r in self.db.all(
            "SELECT source, source_file FROM document_paths WHERE collection_id=%s AND md5=%s"
            " ORDER BY added_at, source, source_file", (self.collection_id, md5))]

    def md5_of_path(self, source_file: str) -> str | None:
        return self.db.value("SELECT md5 FROM document_paths WHERE collection_id=%s AND source=%s AND source_file=%s",
                             (self.collection_id, self.source, to_pg(source_file)))

    def _add_path(self, c: Any, md5: str, source_file: str, rel_path: str) -> None:
        c.execute("INSERT INTO document_paths(collection_id, source, source_file, md5, rel_path, added_at)"
                  " VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (collection_id, source, source_file)"
                  " DO UPDATE SET md5=excluded.md5, rel_path=excluded.rel_path, added_at=excluded.added_at",
                  (self.collection_id, self.source, to_pg(source_file), md5, to_pg(rel_path), time.time()))
        self._refresh_display_path(c, md5)

    def _refresh_display_path(self, c: Any, md5: str) -> None:
        # Chunks carry one display path: keep it pointing at a live path (any source's).
        r = c.execute("SELECT source_file, rel_path FROM document_paths WHERE collection_id=%s AND md5=%s"
                      " ORDER BY added_at, source, source_file LIMIT 1", (self.collection_id, md5)).fetchone()
        if r is None:
            return
        c.execute("UPDATE chunks SET source_file=%s, source_rel_path=%s WHERE collection_id=%s AND md5=%s"
                  " AND source_file IS DISTINCT FROM %s",
                  (r["source_file"], r["rel_path"], self.collection_id, md5, r["source_file"]))

    def link_path(self, md5: str, source_file: str, rel_path: str) -> list[int]:
        with self.db.tx() as c:
            deleted: list[int] = []
            old = self.md5_of_path(source_file)
            if old is not None and old != md5:
                _, deleted = self._remove_path(c, source_file)
            self._content_lock(c, md5)
            self._add_path(c, md5, source_file, rel_path)
            self._log(c, deletes=deleted, paths=True)
            return deleted

    def chunks_of(self, md5: str) -> int:
        return int(self.db.value("SELECT count(*) FROM chunks WHERE collection_id=%s AND md5=%s",
                                 (self.collection_id, md5)))

    def chunk_ids_of(self, md5: str) -> list[int]:
        return [int(r["id"]) for r in self.db.all(
            "SELECT id FROM chunks WHERE collection_id=%s AND md5=%s ORDER BY chunk_idx", (self.collection_id, md5))]

    def chunk_ids_of_documents(self, md5s: Sequence[str]) -> set[int]:
        return {int(r["id"]) for r in self.db.all(
            "SELECT id FROM chunks WHERE collection_id=%s AND md5 = ANY(%s)", (self.collection_id, list(md5s)))}

    def document_paths(self) -> list[tuple[str, str, str]]:
        """(source_file, rel_path, md5) of every path of this source that holds content here."""
        return [(from_pg(r["source_file"]), from_pg(r["rel_path"]), r["md5"]) for r in self.db.all(
            "SELECT source_file, rel_path, md5 FROM document_paths WHERE collection_id=%s AND source=%s",
            (self.collection_id, self.source))]

    def every_document_path(self) -> list[tuple[str, str, str]]:
        """(source_file, rel_path, md5) of every path that holds content here, on any machine:
        what a search filter matches, as a search finds every machine's documents."""
        return [(from_pg(r["source_file"]), from_pg(r["rel_path"]), r["md5"]) for r in self.db.all(
            "SELECT source_file, rel_path, md5 FROM document_paths WHERE collection_id=%s", (self.collection_id,))]

    def remove_path(self, source_file: str) -> tuple[str | None, list[int]]:
        with self.db.tx() as c:
            md5, ids = self._remove_path(c, source_file)
            self._log(c, deletes=ids, paths=md5 is not None)
            return md5, ids

    def _remove_path(self, c: Any, source_file: str) -> tuple[str | None, list[int]]:
        md5 = self.md5_of_path(source_file)
        if md5 is None:
            return None, []
        self._content_lock(c, md5)
        c.execute("DELETE FROM document_paths WHERE collection_id=%s AND source=%s AND source_file=%s",
                  (self.collection_id, self.source, to_pg(source_file)))
        if c.execute("SELECT 1 FROM document_paths WHERE collection_id=%s AND md5=%s LIMIT 1",
                     (self.collection_id, md5)).fetchone():
            self._refresh_display_path(c, md5)
            return md5, []
        return md5, self._delete_document(c, md5)

    def _delete_document(self, c: Any, md5: str) -> list[int]:
        """Delete a content's chunks (their vectors go by cascade); the caller logs the ids."""
        ids = [int(r["id"]) for r in c.execute("DELETE FROM chunks WHERE collection_id=%s AND md5=%s RETURNING id",
                                               (self.collection_id, md5)).fetchall()]
        c.execute("DELETE FROM documents WHERE collection_id=%s AND md5=%s", (self.collection_id, md5))
        return sorted(ids)

    def forget_source(self) -> int:
        """Remove every path this source holds in the collection (a collection removed on this
        machine): content that no other machine's path holds leaves with its chunks. Other sources'
        paths, and the collection itself, stay. Returns the paths removed; one transaction each,
        like the deletes of a watcher."""
        mine = [r["source_file"] for r in self.db.all(
            "SELECT source_file FROM document_paths WHERE collection_id=%s AND source=%s",
            (self.collection_id, self.source))]
        for p in mine:
            self.remove_path(from_pg(p))
        return len(mine)

    def drop_documents(self, md5s: Sequence[str]) -> tuple[list[str], list[int]]:
        paths: list[str] = []
        ids: list[int] = []
        with self.db.tx() as c:
            for md5 in md5s:
                self._content_lock(c, md5)
                paths += self.paths_of(md5)
                c.execute("DELETE FROM document_paths WHERE collection_id=%s AND md5=%s", (self.collection_id, md5))
                ids += self._delete_document(c, md5)
            self._log(c, deletes=ids, paths=bool(md5s))
        return paths, ids

    def publish(self, *, md5: str, source_file: str, rel_path: str, kind: str, extractor: str,
                ocr_type: str | None, title: str | None, size_bytes: int, chunks: Iterable[ChunkRecord],
                vectors: Mapping[str, Iterable[bytes | None]], embedders: dict[str, tuple[str, int]],
                replaces_path: bool = True, should_stop: Callable[[], bool] | None = None) -> list[int]:
        """As RagDB.publish: one document's chunks, keyword rows, vectors and change entries in one
        transaction; content already here (from any source) only gains the path. ``should_stop``
        is not asked: one transaction has no point between slices (a stop is asked by the chunks
        as they are drawn)."""
        stored, stored_rel = to_pg(source_file), to_pg(rel_path)
        with self.db.tx() as c:
            gone: list[int] = []
            if replaces_path:
                old = self.md5_of_path(source_file)
                if old is not None and old != md5:
                    _, gone = self._remove_path(c, source_file)
            # Two machines publishing the same new content at once: the second waits here for
            # the first's commit and then only links its path.
            self._content_lock(c, md5)
            if self.has_document(md5):
                self._add_path(c, md5, source_file, rel_path)
                self._log(c, deletes=gone, paths=True)
                return []
            now = time.time()
            c.execute("INSERT INTO documents(collection_id, md5, kind, extractor, ocr_type, title, size_bytes, chunks,"
                      " added_at) VALUES (%s,%s,%s,%s,%s,%s,%s,0,%s)",
                      (self.collection_id, md5, kind, extractor, ocr_type, title, size_bytes, now))
            c.execute("INSERT INTO document_paths(collection_id, source, source_file, md5, rel_path, added_at)"
                      " VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (collection_id, source, source_file)"
                      " DO UPDATE SET md5=excluded.md5, rel_path=excluded.rel_path, added_at=excluded.added_at",
                      (self.collection_id, self.source, stored, md5, stored_rel, now))
            for space, (eid, dim) in embedders.items():
                if space in self._embedders_seen:
                    continue
                if self.embedder(space) is None:
                    self.set_embedder(eid, dim, space)  # rolled back with this transaction: not remembered
                else:
                    self._embedders_seen.add(space)  # an embedder row is only ever replaced, never deleted
            ids: list[int] = []
            adds: list[int] = []
            # Chunks and vectors are drawn in step (a large file's may be generators) and written
            # a batch at a time: a few statements per batch rather than per chunk, and a bounded
            # batch in memory rather than the whole file.
            rows: list[tuple[str, int, str, str, str, str]] = []
            vecs_of: dict[str, list[Any]] = {space: [] for space in vectors}
            vec_iters = {space: iter(vecs) for space, vecs in vectors.items()}
            for ch in chunks:
                meta = {k: v for k, v in dict(ch["meta"]).items() if v is not None}
                meta.update({"source_md5": md5, "size_bytes": size_bytes})
                if ocr_type and "ocr_type" not in meta:
                    meta["ocr_type"] = ocr_type
                text, context = ch["text"], ch.get("context") or ""
                rows.append((f"{md5}:{ch['chunk_idx']}", ch["chunk_idx"], text_sha256(text), text, context,
                             json.dumps(meta)))
                for space, it in vec_iters.items():
                    vecs_of[space].append(next(it))
                if len(rows) >= PUBLISH_BATCH:
                    self._write_batch(c, md5, now, stored, stored_rel, rows, vecs_of, embedders, ids, adds)
            self._write_batch(c, md5, now, stored, stored_rel, rows, vecs_of, embedders, ids, adds)
            c.execute("UPDATE documents SET chunks=%s WHERE collection_id=%s AND md5=%s",
                      (len(ids), self.collection_id, md5))
            self._log(c, deletes=gone, adds=adds, paths=True)
            return ids

    def _write_batch(self, c: Any, md5: str, now: float, stored: str, stored_rel: str,
                     rows: list[tuple[str, int, str, str, str, str]], vecs_of: dict[str, list[Any]],
                     embedders: dict[str, tuple[str, int]], ids: list[int], adds: list[int]) -> None:
        """Write the chunks in ``rows`` with their vectors (``vecs_of``: each space's, in step;
        None: still to come), add their ids to ``ids`` and the ones with a primary vector to
        ``adds``; then empty ``rows`` and ``vecs_of``."""
        new = self._insert_chunks(c, md5, now, stored, stored_rel, rows)
        for space, vecs in vecs_of.items():
            have = [(cid, v) for cid, v in zip(new, vecs) if v is not None]
            if have:
                self._copy_vectors(c, space, embedders[space][0], have)
        primary = vecs_of.get(PRIMARY)
        pending = [cid for n, cid in enumerate(new) if primary is None or primary[n] is None]
        if pending:
            c.execute("INSERT INTO pending_vectors(id, collection_id) SELECT x, %s FROM unnest(%s::bigint[]) AS x",
                      (self.collection_id, pending))
        waiting = set(pending)
        ids += new
        adds += [cid for cid in new if cid not in waiting]
        rows.clear()
        for vecs in vecs_of.values():
            vecs.clear()

    def _insert_chunks(self, c: Any, md5: str, now: float, stored: str, stored_rel: str,
                       rows: Sequence[tuple[str, int, str, str, str, str]]) -> list[int]:
        """Chunks in one statement; their ids, in the order of ``rows`` (ids are drawn in that
        order, as one INSERT per chunk drew them)."""
        if not rows:
            return []
        eids, idxs, shas, texts, contexts, metas = (list(col) for col in zip(*rows))
        # the document's language, told from its first batch (pg_terms: the keyword index form)
        if self._doc_lang[0] != md5:
            self._doc_lang = (md5, keyterms.detect_document(texts))
        lang = self._doc_lang[1]
        _, tsvs, tokens = pg_terms.document_rows(zip(range(len(texts)), texts, contexts), lang)
        got = {r["embedding_id"]: int(r["id"]) for r in c.execute(
            "INSERT INTO chunks(collection_id, embedding_id, md5, chunk_idx, created_at, text_sha256, content,"
            " context, source_file, source_rel_path, meta, tokens, tsv, lang)"
            " SELECT %s, u.eid, %s, u.idx, %s, u.sha, u.content, u.context, %s, %s, u.meta::jsonb, u.tokens,"
            " u.tsv::tsvector, %s"
            " FROM unnest(%s::text[], %s::int[], %s::text[], %s::text[], %s::text[], %s::text[], %s::int[], %s::text[])"
            " WITH ORDINALITY AS u(eid, idx, sha, content, context, meta, tokens, tsv, n) ORDER BY u.n"
            " RETURNING id, embedding_id",
            (self.collection_id, md5, now, stored, stored_rel, lang, eids, idxs, shas, texts, contexts, metas,
             tokens, tsvs)).fetchall()}
        pg_terms.count_languages(c, self.collection_id, {lang: len(eids)})
        return [got[e] for e in eids]

    def _copy_vectors(self, c: Any, space: str, embedder_id: str, items: Sequence[tuple[int, Any]]) -> None:
        """Vectors of one space by COPY in binary: pgvector's binary form is the float32s as
        they are (big-endian) behind a 4-byte header, where the text form costs a float
        formatting and parsing per component."""
        with c.cursor().copy("COPY vectors(id, collection_id, space, embedder_id, vec)"
                             " FROM STDIN (FORMAT BINARY)") as cp:
            cp.write(vectors_copy_data(self.collection_id, space, embedder_id, items))

    # --- vectors that follow their chunks ----------------------------------------------------------
    def pending_batch(self, limit: int, after_id: int = 0) -> list[tuple[int, str, str, str]]:
        """As RagDB.pending_batch, and the rows are taken: another process's embedding stage skips
        them while this process lives (one that died leaves them to the others)."""
        me = str(self._claimed_as())
        return [(int(r["id"]), r["embedding_id"], r["content"], r["context"]) for r in self.db.all(
            "WITH picked AS (SELECT id FROM pending_vectors WHERE collection_id=%s AND id > %s"
            f" AND (claimed_by IS NULL OR claimed_by = %s OR claimed_by NOT IN ({LIVE_CLAIMERS}))"
            " ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED),"
            " taken AS (UPDATE pending_vectors p SET claimed_by = %s FROM picked WHERE p.id = picked.id"
            " RETURNING p.id)"
            " SELECT t.id, e.embedding_id, e.content, e.context FROM taken t JOIN chunks e ON e.id = t.id"
            " ORDER BY t.id", (self.collection_id, after_id, me, limit, me))]

    def release_claims(self) -> int:
        """Give back the waiting chunks this process took and did not embed (its embedder failed,
        or the collection moved to another model): the other processes take them at once."""
        if self._claimer is None:
            return 0
        return self.db.run("UPDATE pending_vectors SET claimed_by = NULL WHERE collection_id=%s AND claimed_by=%s",
                           (self.collection_id, str(self._claimer)))

    def _claimed_as(self) -> int:
        if self._claimer is None:
            claimer = self._claimer = new_claimer()
            hold(self.db, claimer)
            self.db.on_reconnect.append(lambda: hold(self.db, claimer))
        return self._claimer

    def add_vectors(self, embedder_id: str, items: Sequence[tuple[int, str, str, bytes]]) -> list[int]:
        """As RagDB.add_vectors: a chunk gets its vector only while still pending and still the
        chunk whose text was read (same embedding_id and context)."""
        done: list[int] = []
        with self.db.tx() as c:
            self.check_embedder(embedder_id, c)
            for cid, embedding_id, context, vec in items:
                if c.execute("DELETE FROM pending_vectors p USING chunks e WHERE p.id=%s AND e.id=p.id"
                             " AND e.embedding_id=%s AND e.context=%s",
                             (cid, embedding_id, context)).rowcount == 0:
                    continue
                c.execute("INSERT INTO vectors(id, collection_id, space, embedder_id, vec) VALUES (%s,%s,%s,%s,%s)"
                          " ON CONFLICT (id, space) DO UPDATE SET embedder_id=excluded.embedder_id, vec=excluded.vec",
                          (cid, self.collection_id, PRIMARY, embedder_id, vec_text(vec)))
                done.append(cid)
            self._log(c, adds=done)
        return done

    def pending_summary(self) -> tuple[int, int]:
        r = self.db.one("SELECT count(*) AS n, count(DISTINCT e.md5) AS d FROM pending_vectors p"
                        " JOIN chunks e ON e.id = p.id WHERE p.collection_id=%s", (self.collection_id,))
        assert r is not None
        return int(r["n"]), int(r["d"])

    # --- extra passes ------------------------------------------------------------------------------
    def pass_missing_batch(self, space: str, limit: int, after_id: int = 0) -> list[tuple[int, str, str, str]]:
        """As RagDB.pass_missing_batch: chunks without a vector in the extra pass ``space``."""
        return [(int(r["id"]), r["embedding_id"], r["content"], r["context"]) for r in self.db.all(
            "SELECT e.id, e.embedding_id, e.content, e.context FROM chunks e WHERE e.collection_id=%s AND e.id > %s"
            " AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.id = e.id AND v.space = %s) ORDER BY e.id LIMIT %s",
            (self.collection_id, after_id, space, limit))]

    def add_pass_vectors(self, space: str, embedder_id: str, items: Sequence[tuple[int, str, str, bytes]]) -> list[int]:
        """As RagDB.add_pass_vectors (logged in pass_changes by the trigger)."""
        if space == PRIMARY:
            raise InternalError("add_pass_vectors writes extra passes only; primary vectors go through add_vectors")
        done: list[int] = []
        with self.db.tx() as c:
            self.check_embedder(embedder_id, c)
            for cid, embedding_id, context, vec in items:
                n = c.execute(
                    "INSERT INTO vectors(id, collection_id, space, embedder_id, vec)"
                    " SELECT e.id, e.collection_id, %s, %s, %s FROM chunks e WHERE e.id=%s AND e.embedding_id=%s"
                    " AND e.context=%s ON CONFLICT (id, space) DO NOTHING",
                    (space, embedder_id, vec_text(vec), cid, embedding_id, context)).rowcount
                if n:
                    done.append(cid)
        return done

    def reset_pass(self, space: str, embedder_id: str, dim: int) -> int:
        """As RagDB.reset_pass: the pass's old vectors go (deletes logged), the new embedder is recorded."""
        if space == PRIMARY:
            raise InternalError("reset_pass resets extra passes only")
        with self.db.tx() as c:
            n = c.execute("DELETE FROM vectors WHERE collection_id=%s AND space=%s",
                          (self.collection_id, space)).rowcount
            self.set_embedder(embedder_id, dim, space)
        return int(n)

    def pass_vector_count(self, space: str) -> int:
        return int(self.db.value("SELECT count(*) FROM vectors WHERE collection_id=%s AND space=%s",
                                 (self.collection_id, space)))

    def pass_max_seq(self, space: str) -> int:
        return int(self.db.value("SELECT coalesce(max(seq), 0) FROM pass_changes WHERE collection_id=%s AND space=%s",
                                 (self.collection_id, space)))

    def pass_changes_after(self, space: str, seq: int, limit: int = -1) -> list[tuple[int, str, int]]:
        return [(int(r["seq"]), r["op"], int(r["id"])) for r in self.db.all(
            "SELECT seq, op, id FROM pass_changes WHERE collection_id=%s AND space=%s AND seq > %s ORDER BY seq"
            " LIMIT %s", (self.collection_id, space, seq, None if limit < 0 else limit))]

    def max_chunk_id(self) -> int:
        return int(self.db.value("SELECT coalesce(max(id), 0) FROM chunks WHERE collection_id=%s",
                                 (self.collection_id,)))

    # --- the change log ----------------------------------------------------------------------------
    def max_seq(self) -> int:
        return int(self.db.value("SELECT coalesce(max(seq), 0) FROM changes WHERE collection_id=%s",
                                 (self.collection_id,)))

    def min_seq(self) -> int | None:
        v = self.db.value("SELECT min(seq) FROM changes WHERE collection_id=%s", (self.collection_id,))
        return None if v is None else int(v)

    def search_version(self) -> tuple[int, int, int, int]:
        r = self.db.one(
            "SELECT (SELECT coalesce(max(seq), 0) FROM changes WHERE collection_id=%(c)s) AS a,"
            " (SELECT coalesce(max(id), 0) FROM chunks WHERE collection_id=%(c)s) AS b,"
            " (SELECT coalesce(max(seq), 0) FROM pass_changes WHERE collection_id=%(c)s) AS p,"
            " (SELECT coalesce(max(seq), 0) FROM path_changes WHERE collection_id=%(c)s) AS n",
            {"c": self.collection_id})
        assert r is not None
        return int(r["a"]), int(r["b"]), int(r["p"]), int(r["n"])

    def changes_after(self, seq: int) -> list[tuple[int, str, int]]:
        return self.changes_batch_after(seq, -1)

    def changes_batch_after(self, seq: int, limit: int) -> list[tuple[int, str, int]]:
        return [(int(r["seq"]), r["op"], int(r["id"])) for r in self.db.all(
            "SELECT seq, op, id FROM changes WHERE collection_id=%s AND seq > %s ORDER BY seq LIMIT %s",
            (self.collection_id, seq, None if limit < 0 else limit))]

    def change_counts_after(self, seq: int) -> tuple[int, int]:
        rows = {r["op"]: int(r["n"]) for r in self.db.all(
            "SELECT op, count(*) AS n FROM changes WHERE collection_id=%s AND seq > %s GROUP BY op",
            (self.collection_id, seq))}
        return rows.get("add", 0), rows.get("delete", 0)

    # --- vectors -----------------------------------------------------------------------------------
    def vectors_for(self, ids: Sequence[int], space: str = PRIMARY) -> dict[int, bytes]:
        return {int(r["id"]): vec_bytes(r["v"]) for r in self.db.all(
            "SELECT id, vec::text AS v FROM vectors WHERE space=%s AND id = ANY(%s) AND collection_id=%s",
            (space, list(ids), self.collection_id))}

    def iter_vectors(self, space: str = PRIMARY, batch: int = 10000) -> Iterator[tuple[list[int], list[bytes]]]:
        last = -1
        while True:
            rows = self.db.all("SELECT id, vec::text AS v FROM vectors WHERE collection_id=%s AND space=%s AND id > %s"
                               " ORDER BY id LIMIT %s", (self.collection_id, space, last, batch))
            if not rows:
                return
            yield [int(r["id"]) for r in rows], [vec_bytes(r["v"]) for r in rows]
            last = int(rows[-1]["id"])

    def nearest(self, q: np.ndarray, k: int, *, space: str = PRIMARY, allowed: Iterable[int] | None = None,
                ef: int | None = None) -> list[tuple[int, float]]:
        """The k chunks most similar to the unit vector ``q``: [(chunk id, dot product)], best
        first. Unfiltered: the HNSW index of the space, searched with ``ef`` candidates (pgvector's
        hnsw.ef_search; at least k); ``allowed``: exactly over those chunks, in the database."""

        emb = self.embedder(space)
        if emb is None or k <= 0:
            return []
        dim = emb[1]
        if q.shape[-1] != dim:
            raise RequestError(f"collection '{self.collection}' holds {dim}-dimensional vectors, the query has "
                               f"{q.shape[-1]}", hint="the query must be embedded by the collection's embedder")
        qt = vec_text(q)
        if allowed is not None:
            # the bare column does not match the index expression: an exact scan of the allowed rows
            rows = self.db.all("SELECT id, (vec <#> %s::vector) AS d FROM vectors WHERE collection_id=%s"
                               " AND space=%s AND id = ANY(%s) ORDER BY d LIMIT %s",
                               (qt, self.collection_id, space, sorted(set(allowed)), k))
        else:
            with self.db.tx() as c:
                # ef_search is at most 1000 in pgvector; a larger k still gets what the index holds
                c.execute(f"SET LOCAL hnsw.ef_search = {min(1000, max(int(ef or 40), k))}")
                rows = c.execute(f"SELECT id, (vec::vector({int(dim)}) <#> %s::vector({int(dim)})) AS d"
                                 f" FROM vectors WHERE collection_id=%s AND space=%s ORDER BY d LIMIT %s",
                                 (qt, self.collection_id, space, k)).fetchall()
        return [(int(r["id"]), -float(r["d"])) for r in rows]

    # --- counts and reading ------------------------------------------------------------------------
    def chunk_count(self) -> int:
        return int(self.db.value("SELECT count(*) FROM chunks WHERE collection_id=%s", (self.collection_id,)))

    def document_count(self) -> int:
        return int(self.db.value("SELECT count(*) FROM documents WHERE collection_id=%s", (self.collection_id,)))

    def vector_accounts(self) -> tuple[int, int, int, int]:
        """(chunks, primary vectors, chunks waiting for one, chunks with neither), in one snapshot."""
        r = self.db.one(
            "SELECT count(*) AS chunks, count(*) FILTER"
            " (WHERE EXISTS (SELECT 1 FROM vectors v WHERE v.id=e.id AND v.space='primary')) AS vectors,"
            " count(*) FILTER (WHERE EXISTS (SELECT 1 FROM pending_vectors p WHERE p.id=e.id)) AS pending,"
            " count(*) FILTER (WHERE NOT EXISTS (SELECT 1 FROM vectors v WHERE v.id=e.id AND v.space='primary')"
            " AND NOT EXISTS (SELECT 1 FROM pending_vectors p WHERE p.id=e.id)) AS lost"
            " FROM chunks e WHERE e.collection_id=%s", (self.collection_id,))
        assert r is not None
        return int(r["chunks"]), int(r["vectors"]), int(r["pending"]), int(r["lost"])

    def requeue_unembedded(self) -> int:
        """Chunks with no primary vector and none waiting go back to the embedding stage."""
        return self.db.run(
            "INSERT INTO pending_vectors(id, collection_id) SELECT e.id, e.collection_id FROM chunks e"
            " WHERE e.collection_id=%s AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.id=e.id AND v.space='primary')"
            " ON CONFLICT (id) DO NOTHING", (self.collection_id,))

    def entropy_rows(self) -> list[tuple[int, float | None, int | None]]:
        return [(int(r["id"]), r["e"], r["w"]) for r in self.db.all(
            "SELECT id, (meta->>'text_entropy')::float8 AS e, (meta->>'word_count')::int AS w FROM chunks"
            " WHERE collection_id=%s", (self.collection_id,))]

    def rebuild_fts(self, batch: int = 1000) -> int:
        """The keyword index is a generated column: nothing to backfill."""
        return 0

    def briefs(self, ids: Sequence[int]) -> dict[int, tuple[str, str, str, list[int] | None]]:
        out: dict[int, tuple[str, str, str, list[int] | None]] = {}
        for r in self.db.all("SELECT id, md5, source_file, content, meta->'pages' AS pages FROM chunks"
                             " WHERE collection_id=%s AND id = ANY(%s)", (self.collection_id, list(ids))):
            pages = r["pages"]
            if isinstance(pages, str):
                pages = json.loads(pages)
            out[int(r["id"])] = (r["md5"], _sqlite_form(r["source_file"]) or "", r["content"] or "", pages or None)
        return out

    def headings(self, ids: Sequence[int]) -> dict[int, str]:
        return {int(r["id"]): r["heading"] for r in self.db.all(
            "SELECT id, trim(coalesce(meta->>'section', '') || ' ' || coalesce(meta->>'table_title', '')) AS heading"
            " FROM chunks WHERE collection_id=%s AND id = ANY(%s)", (self.collection_id, list(ids)))}

    def hits(self, ids: Sequence[int]) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for r in self.db.all("SELECT id, md5, chunk_idx, content, context, source_file, source_rel_path, meta"
                             " FROM chunks WHERE collection_id=%s AND id = ANY(%s)", (self.collection_id, list(ids))):
            meta = dict(r["meta"])
            # the stored metadata of the SQLite store, so one hit_fields shapes both
            for k in ("pages",):
                if k in meta and not isinstance(meta[k], str):
                    meta[k] = json.dumps(meta[k])
            meta.update({"chroma:document": r["content"], "source_file_name": _sqlite_form(r["source_file"]),
                         "source_rel_path": _sqlite_form(r["source_rel_path"])})
            if r["context"]:
                meta["context"] = r["context"]
            h = {"embedding_id": int(r["id"]), "collection": self.collection, "doc_id": r["md5"],
                 "chunk_idx": r["chunk_idx"]}
            h.update(hit_fields(meta))
            out[int(r["id"])] = h
        return out


def _sqlite_form(text: str | None) -> str | None:
    # hit_fields decodes the SQLite stored form; hand it that form of the PostgreSQL one

    return None if text is None else to_db(maybe_from_pg(text) or "")

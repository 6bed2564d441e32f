"""Copy a SQLite data directory into a PostgreSQL store: every collection's documents, chunks,
vectors (every space, with the embedders that made them) and paths, the ingest state, the embed
cache, the collections added at run time and the history.

Each document goes through ``PgRag.publish`` (one transaction per document, the change log written
as ingest writes it), so a copy stopped half way leaves whole documents only, and running it again
goes on where it stopped: content already in PostgreSQL only gains its paths, rows already copied
are left alone. Paths are written as the target backend's source (config ``source_name``): the
machine that held the SQLite directory; so is the history, which is private to its source.
Chunks still waiting for their vector stay waiting.
Nothing is written to the SQLite files.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from ragweedd.store.pathnames import from_db
from ragweedd.store.postgres.backend import PgBackend
from ragweedd.store.sqlite.backend import SqliteBackend
from ragweedd.store.sqlite.connection import connect
from ragweedd.store.sqlite.ingest_db import IngestDB
from ragweedd.store.sqlite.rag_db import RagDB
from ragweedd.store.types import ChunkRecord

# Metadata the PostgreSQL store keeps in columns of its own, or writes itself at publish.
_COLUMNS = {"chroma:document", "source_file_name", "source_rel_path", "context", "source_md5", "size_bytes"}


@dataclass
class CopyReport:
    collections: dict[str, dict[str, int]] = field(default_factory=dict)
    files: int = 0
    embed_cache: int = 0
    history: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"collections": self.collections, "files": self.files, "embed_cache": self.embed_cache,
                "history": self.history}


def copy_to_postgres(src: SqliteBackend, dst: PgBackend, *,
                     progress: Callable[[str], None] | None = None) -> CopyReport:
    say = progress or (lambda _m: None)
    report = CopyReport()
    for name in src.indexed_collections():
        rag = src.open_rag(name, readonly=True)
        try:
            report.collections[name] = _copy_collection(rag, dst, say)
        finally:
            rag.close()
    if src.paths.ingest_db.exists():
        ing = IngestDB(src.paths.ingest_db, readonly=True)
        try:
            report.files, report.embed_cache = _copy_ingest(ing, dst)
        finally:
            ing.close()
    if src.paths.history_db.exists():
        report.history = _copy_history(src.paths.history_db, dst)
    return report


def _copy_collection(rag: RagDB, dst: PgBackend, say: Callable[[str], None]) -> dict[str, int]:
    out = dst.open_rag(rag.collection)
    copied = linked = 0
    try:
        embedders = {r["space"]: (r["embedder_id"], int(r["dim"]))
                     for r in rag.conn.execute("SELECT space, embedder_id, dim FROM embedders")}
        for space, (eid, dim) in embedders.items():
            if out.embedder(space) is None:
                out.set_embedder(eid, dim, space)
        docs = rag.conn.execute("SELECT * FROM documents ORDER BY added_at, md5").fetchall()
        for n, d in enumerate(docs, 1):
            md5 = d["md5"]
            paths = rag.conn.execute("SELECT source_file, rel_path FROM document_paths WHERE md5=?"
                                     " ORDER BY added_at, source_file", (md5,)).fetchall()
            if not paths:
                continue
            first = paths[0]
            if not out.has_document(md5):
                chunks, vectors = _chunks_of(rag, md5, list(embedders))
                out.publish(md5=md5, source_file=from_db(first["source_file"]), rel_path=from_db(first["rel_path"]),
                            kind=d["kind"], extractor=d["extractor"] or "", ocr_type=d["ocr_type"], title=d["title"],
                            size_bytes=int(d["size_bytes"] or 0), chunks=chunks, vectors=vectors,
                            embedders={s: embedders[s] for s in vectors})
                copied += 1
            for p in paths:
                if out.md5_of_path(from_db(p["source_file"])) != md5:
                    out.link_path(md5, from_db(p["source_file"]), from_db(p["rel_path"]))
                    linked += 1
            if n % 500 == 0:
                say(f"{rag.collection}: {n}/{len(docs)} documents")
        return {"documents": len(docs), "copied": copied, "paths_linked": linked, "chunks": out.chunk_count()}
    finally:
        out.close()


def _chunks_of(rag: RagDB, md5: str, spaces: list[str]) -> tuple[list[ChunkRecord], dict[str, Iterable[bytes | None]]]:
    rows = rag.conn.execute("SELECT id, chunk_idx FROM embeddings WHERE md5=? ORDER BY chunk_idx", (md5,)).fetchall()
    chunks: list[ChunkRecord] = []
    vectors: dict[str, list[Any]] = {s: [] for s in spaces}  # None: a vector still to come
    for r in rows:
        meta: dict[str, Any] = {}
        for m in rag.conn.execute("SELECT key, string_value, int_value, float_value FROM embedding_metadata"
                                  " WHERE id=?", (r["id"],)):
            v = m["string_value"] if m["string_value"] is not None else (
                m["int_value"] if m["int_value"] is not None else m["float_value"])
            meta[m["key"]] = v
        if isinstance(meta.get("pages"), str):
            meta["pages"] = json.loads(meta["pages"])
        chunks.append({"chunk_idx": r["chunk_idx"], "text": meta.get("chroma:document") or "",
                       "context": meta.get("context") or "",
                       "meta": {k: v for k, v in meta.items() if k not in _COLUMNS}})
        have = {v["space"]: bytes(v["vec"]) for v in rag.conn.execute("SELECT space, vec FROM vectors WHERE id=?",
                                                                        (r["id"],))}
        for s in spaces:
            vectors[s].append(have.get(s))
    return chunks, dict(vectors)


def _copy_ingest(ing: IngestDB, dst: PgBackend) -> tuple[int, int]:
    out = dst.open_ingest()
    files = 0
    try:
        for name in ing.collections_with_files():
            for r in ing.live_files(name):
                if out.live_file(name, r["source_file"]) is not None:
                    continue
                out.set_file(name, r["source_file"], md5=r["md5"], size=r["size_bytes"], mtime_ns=r["mtime_ns"],
                             inode=r["inode"], status=r["extract_status"], chunks=r["chunks"], error=r["error"],
                             root=r["root"], tries=r["tries"])
                files += 1
        for name, paths, ignore, topic in ing.run_time_collections():
            out.save_collection(name, paths, ignore, topic)
        cached = 0
        last = ("", "")
        while True:
            rows = ing.conn.execute("SELECT text_hash, embedder_id, dim, vec FROM embed_cache"
                                    " WHERE (embedder_id, text_hash) > (?, ?) ORDER BY embedder_id, text_hash"
                                    " LIMIT 2000", (last[1], last[0])).fetchall()
            if not rows:
                break
            by_embedder: dict[tuple[str, int], list[tuple[str, bytes]]] = {}
            for r in rows:
                by_embedder.setdefault((r["embedder_id"], int(r["dim"])), []).append((r["text_hash"], bytes(r["vec"])))
            for (eid, dim), items in by_embedder.items():
                out.store_vectors(eid, dim, items)
            cached += len(rows)
            last = (rows[-1]["text_hash"], rows[-1]["embedder_id"])
        return files, cached
    finally:
        out.close()


def _copy_history(path: Any, dst: PgBackend) -> int:
    """This machine's history, written under the target's source: the history store of a backend
    reads and writes only its own source's rows, so a copy is seen by this machine alone."""
    src = connect(path, readonly=True)
    out = dst.open_history()
    n = 0
    try:
        for r in src.execute("SELECT id, kind, query, created_at, body_json FROM history ORDER BY created_at, rowid"):
            if out.get(r["id"]) is None:
                out.insert(r["id"], r["kind"], r["query"], r["created_at"], r["body_json"])
                n += 1
        out.adopt_conversations()  # each turn's record names its conversation
        return n
    finally:
        out.close()
        src.close()

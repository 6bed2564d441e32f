"""The real Engine behind the HTTP API (ragweedd/api/engine.py documents the protocol).

A thin layer: collections, scans and status come from the daemon core (ragweedd/daemon.py), search
from ragweedd.query (the hybrid pipeline when present, else dense + keyword with the FTS boost),
answers from ragweedd.answer. Blocking work runs in threads so the event loop stays free.
"""

from __future__ import annotations

import asyncio
import fnmatch
import json
import os
import time
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

from ragweedd.errors import NotFoundError, RequestError
from ragweedd.logging import get_logger
from ragweedd.store.sqlite import connect, transaction

log = get_logger("ragweedd.engine")

_STATE = {"pending": "queued", "extracting": "queued", "embedding": "queued", "done": "indexed",
          "failed": "failed", "skipped": "skipped", "deleted": "superseded"}


class History:
    """Searches and answers, newest first (state dir, history.sqlite3)."""

    def __init__(self, path: Path) -> None:
        self.conn = connect(path)
        self.conn.execute("CREATE TABLE IF NOT EXISTS history(id TEXT PRIMARY KEY, kind TEXT NOT NULL,"
                          " query TEXT NOT NULL, created_at REAL NOT NULL, body_json TEXT NOT NULL)")

    def add(self, kind: str, query: str, body: dict) -> str:
        hid = uuid.uuid4().hex[:16]
        with transaction(self.conn):
            self.conn.execute("INSERT INTO history VALUES (?,?,?,?,?)",
                              (hid, kind, query, time.time(), json.dumps(body, default=str)))
        return hid

    def update(self, hid: str, body: dict) -> None:
        with transaction(self.conn):
            self.conn.execute("UPDATE history SET body_json=? WHERE id=?", (json.dumps(body, default=str), hid))

    def list(self, offset: int, limit: int) -> dict:
        total = self.conn.execute("SELECT count(*) FROM history").fetchone()[0]
        rows = self.conn.execute("SELECT id, kind, query, created_at FROM history ORDER BY created_at DESC"
                                 " LIMIT ? OFFSET ?", (limit, offset)).fetchall()
        return {"items": [{"id": r[0], "kind": r[1], "query": r[2],
                           "created_at": _iso(r[3])} for r in rows], "total": total}

    def show(self, hid: str) -> dict:
        r = self.conn.execute("SELECT * FROM history WHERE id=?", (hid,)).fetchone()
        if r is None:
            raise NotFoundError(f"history entry '{hid}' does not exist", hint="list entries with GET /v1/history")
        return {"id": r["id"], "kind": r["kind"], "query": r["query"], "created_at": _iso(r["created_at"]),
                **json.loads(r["body_json"])}


def _iso(t: float | None) -> str | None:
    if t is None:
        return None
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, timezone.utc).isoformat()


class DaemonEngine:
    def __init__(self, core) -> None:
        self.core = core  # ragweedd.daemon.Core
        self.cfg, self.paths = core.cfg, core.paths
        self.history = History(self.paths.history_db)
        self._ro = connect(self.paths.ingest_db)

    async def status(self) -> dict[str, Any]:
        return await asyncio.to_thread(self.core.status)

    async def list_collections(self) -> list[dict[str, Any]]:
        return [self.core.collections.describe(n) for n in sorted(self.core.collections.items)]

    async def add_collection(self, name, paths, ignore=None, topic=""):
        res = await asyncio.to_thread(self.core.collections.add, name, list(paths), list(ignore or []), topic)
        self.core.scan_async(name)
        return res

    async def remove_collection(self, name):
        res = await asyncio.to_thread(self.core.remove_collection, name)
        return res

    async def scan(self, name):
        self.core.collections.get(name)
        self.core.scan_async(name)
        return {"collection": name, "queued": True}

    async def reanalyze(self, name):
        self.core.collections.get(name)
        self.core.jobs.run_now("cluster_reanalysis")
        return {"collection": name, "queued": True}

    async def rebuild_fts(self, name):
        self.core.collections.get(name)
        await asyncio.to_thread(self.core.rebuild_fts, name)
        return {"collection": name, "queued": True}

    # --- documents ---------------------------------------------------------------------------------
    async def list_documents(self, collection=None, state=None, path_glob=None, offset=0, limit=50):
        if collection is not None:
            self.core.collections.get(collection)
        return await asyncio.to_thread(self._list_documents, collection, state, path_glob, offset, limit)

    def _list_documents(self, collection, state, path_glob, offset, limit):
        where, args = ["superseded=0"], []
        if collection:
            where.append("collection=?")
            args.append(collection)
        if state:
            raw = [k for k, v in _STATE.items() if v == state]
            if not raw:
                raise RequestError(f"unknown document state {state!r}", hint="one of queued, indexed, failed, skipped")
            where.append(f"extract_status IN ({','.join('?' * len(raw))})")
            args.extend(raw)
        rows = self._ro.execute(f"SELECT * FROM ingest_files WHERE {' AND '.join(where)}"
                                " ORDER BY collection, source_file", args).fetchall()
        if path_glob:
            rows = [r for r in rows if fnmatch.fnmatch(r["source_file"], path_glob)
                    or fnmatch.fnmatch(os.path.basename(r["source_file"]), path_glob)]
        return {"items": [_doc(r) for r in rows[offset:offset + limit]], "total": len(rows)}

    async def get_document(self, doc_key):
        return await asyncio.to_thread(self._get_document, doc_key)

    def _get_document(self, doc_key):
        if not str(doc_key).isdigit():
            raise NotFoundError(f"document '{doc_key}' does not exist", hint="document keys come from GET /v1/documents")
        r = self._ro.execute("SELECT * FROM ingest_files WHERE id=?", (int(doc_key),)).fetchone()
        if r is None:
            raise NotFoundError(f"document '{doc_key}' does not exist", hint="document keys come from GET /v1/documents")
        out = _doc(r)
        detail = []
        db = self.paths.rag_db(r["collection"])
        if r["md5"] and Path(db).exists():
            from ragweedd.store.rag_db import RagDB

            rag = RagDB(db, r["collection"], readonly=True)
            try:
                ids = [x[0] for x in rag.conn.execute("SELECT id FROM embeddings WHERE md5=? ORDER BY chunk_idx",
                                                      (r["md5"],))]
                hits = rag.hits(ids)
                for i in ids:
                    h = hits[i]
                    detail.append({k: h.get(k) for k in ("chunk_idx", "text", "page_label", "section", "span",
                                                         "t_start", "t_end")})
            finally:
                rag.close()
        out["chunks_detail"] = detail
        return out

    async def upload(self, collection, filename, data):
        self.core.collections.get(collection)
        target = Path(self.core.collections.upload_dir(collection)) / filename
        await asyncio.to_thread(_write_atomic, target, data)
        self.core.queue.put(collection, str(target), "upsert", str(target.parent))
        return {"collection": collection, "source_file": str(target), "state": "queued", "size_bytes": len(data)}

    # --- search and answers ------------------------------------------------------------------------
    def _collections(self, names):
        if names:
            for n in names:
                self.core.collections.get(n)
            return list(names)
        return sorted(n for n in self.core.collections.items if Path(self.paths.rag_db(n)).exists())

    async def search(self, query, collections=None, top_k=None, path_glob=None, file_type=None, doc_id=None):
        if not isinstance(query, str) or not query.strip():
            raise RequestError("the query is empty", hint="send a non-empty 'query'")
        names = self._collections(collections)
        t0 = time.perf_counter()
        res = await asyncio.to_thread(self.core.search, query, names, top_k or 10,
                                      dict(path_glob=path_glob, file_type=file_type, doc_id=doc_id))
        res.setdefault("retrieval_meta", {})["total_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        res["history_id"] = self.history.add("search", query, {"results": res["results"],
                                                               "retrieval_meta": res["retrieval_meta"]})
        return res

    async def ask(self, query, collections=None, top_k=None, path_glob=None, file_type=None, doc_id=None):
        res = await self.search(query, collections, top_k, path_glob, file_type, doc_id)
        from ragweedd.answer.pipeline import answer_question

        hid = self.history.add("ask", query, {"sources": res["results"], "retrieval_meta": res["retrieval_meta"]})
        return self._ask_events(answer_question(query, res["results"], self.cfg), hid,
                                {"sources": res["results"], "retrieval_meta": res["retrieval_meta"]})

    async def _ask_events(self, events, hid: str, body: dict) -> AsyncIterator[dict]:
        async for ev in events:
            if ev.get("type") == "done":
                ev = {**ev, "history_id": hid}
                body.update({k: v for k, v in ev.items() if k != "type"})
                await asyncio.to_thread(self.history.update, hid, body)
            yield ev

    async def ask_continue(self, history_id):
        entry = self.history.show(history_id)
        state = entry.get("state") or entry.get("continue_state")
        from ragweedd.answer.pipeline import continue_answer

        return self._ask_events(continue_answer(state, self.cfg), history_id, entry)

    async def history_list(self, offset=0, limit=50):
        return self.history.list(offset, limit)

    async def history_show(self, history_id):
        return self.history.show(history_id)


def _doc(r) -> dict:
    return {"doc_key": str(r["id"]), "collection": r["collection"], "source_file": r["source_file"],
            "filename": os.path.basename(r["source_file"]), "state": _STATE.get(r["extract_status"], "queued"),
            "size_bytes": r["size_bytes"] or 0, "chunks": r["chunks"], "error": r["error"],
            "updated_at": _iso(r["updated_at"])}


def _write_atomic(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.upload")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)

"""The real Engine behind the HTTP API (ragweedd/api/engine.py documents the protocol).

A thin layer: collections, scans and status come from the daemon core (ragweedd/daemon.py), search
from ragweedd.query (the hybrid pipeline when present, else dense + keyword with the FTS boost),
answers from ragweedd.answer. Blocking work runs in threads so the event loop stays free.
"""

from __future__ import annotations

import asyncio
import fnmatch
import os
import time
from pathlib import Path
from typing import Any, AsyncIterator

from ragweedd.answer import history as hist
from ragweedd.answer.history import iso as _iso
from ragweedd.errors import NotFoundError, RagweedError, RequestError
from ragweedd.logging import get_logger
from ragweedd.store.sqlite import connect

log = get_logger("ragweedd.engine")

_STATE = {"pending": "queued", "extracting": "queued", "embedding": "queued", "done": "indexed",
          "failed": "failed", "skipped": "skipped", "deleted": "superseded"}


class DaemonEngine:
    def __init__(self, core) -> None:
        self.core = core  # ragweedd.daemon.Core
        self.cfg, self.paths = core.cfg, core.paths
        self.history = hist.HistoryStore(self.paths.history_db, max_entries=self.cfg.history_max_entries)
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

    async def _search(self, query, collections, top_k, path_glob, file_type, doc_id) -> dict:
        if not isinstance(query, str) or not query.strip():
            raise RequestError("the query is empty", hint="send a non-empty 'query'")
        names = self._collections(collections)
        t0 = time.perf_counter()
        res = await asyncio.to_thread(self.core.search, query, names, top_k or 10,
                                      dict(path_glob=path_glob, file_type=file_type, doc_id=doc_id))
        res.setdefault("retrieval_meta", {})["total_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        return res

    async def search(self, query, collections=None, top_k=None, path_glob=None, file_type=None, doc_id=None):
        res = await self._search(query, collections, top_k, path_glob, file_type, doc_id)
        res["history_id"] = await asyncio.to_thread(self.history.add, "search", query, hist.search_record(res))
        return res

    async def ask(self, query, collections=None, top_k=None, path_glob=None, file_type=None, doc_id=None):
        # one "ask" entry per answer (its retrieval included), not a "search" entry as well
        res = await self._search(query, collections, top_k, path_glob, file_type, doc_id)
        from ragweedd.answer.answering import answer_question

        body = hist.pending_answer(res)
        hid = await asyncio.to_thread(self.history.add, "ask", query, body)
        return self._ask_events(answer_question(query, res["results"], self.cfg), hid, body,
                                res["retrieval_meta"], record_errors=True)

    async def _ask_events(self, events, hid: str, body: dict, meta: dict, *,
                          record_errors: bool) -> AsyncIterator[dict]:
        parts: list[str] = []
        try:
            async for ev in events:
                if ev.get("type") == "token":
                    parts.append(ev.get("text", ""))
                elif ev.get("type") == "done":
                    rec = hist.answer_record(ev, meta)
                    ev = {**ev, "history_id": hid, "finish_reason": rec["finish_reason"], "timings": rec["timings"]}
                    await asyncio.to_thread(self.history.update, hid, rec)
                yield ev
        except RagweedError as e:
            # a failed continuation keeps the entry (and its state) as it was, so it can be retried
            if record_errors:
                await asyncio.to_thread(self.history.update, hid, hist.failed_answer(body, e.to_dict(), "".join(parts)))
            raise

    async def ask_continue(self, history_id):
        entry = await asyncio.to_thread(self.history.show, history_id)
        if entry.get("kind") != "ask" or not entry.get("state"):
            raise RequestError(f"history entry '{history_id}' cannot be continued: only answers cut at max_tokens can",
                               hint="continue an answer whose done event had continuable = true")
        from ragweedd.answer.answering import continue_answer

        async def events():
            yield {"type": "sources", "sources": entry.get("sources") or []}
            async for ev in continue_answer(entry["state"], self.cfg):
                yield ev

        return self._ask_events(events(), history_id, entry, entry.get("retrieval_meta") or {}, record_errors=False)

    async def history_list(self, offset=0, limit=50):
        return await asyncio.to_thread(self.history.list, offset, limit)

    async def history_show(self, history_id):
        return await asyncio.to_thread(self.history.show, history_id)


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

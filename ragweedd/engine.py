"""The daemon's implementation of the contract's ``Engine`` (ragweedd/contract.py): what the HTTP API
and every other face call.

The event loop only awaits here: every call that takes a subsystem lock, reads or writes SQLite,
walks a folder or runs a search goes to a worker thread (``asyncio.to_thread``).

When the integrity check finds a damaged database the daemon repairs it live (ragweedd/daemon.py):
the core is stopped, the start-up repair runs and a new core starts. Meanwhile every call answers
``RepairingError`` (503) instead of reaching a core whose connections are being closed; calls
already running are waited for (up to ``REPAIR_DRAIN_S``) before the old core stops.
"""

from __future__ import annotations

import asyncio
import functools
import os
import re
import time
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar, cast

from ragweedd.answer import history as hist
from ragweedd.contract import (
    DOC_STATES,
    FILE_STATE_SHOWN,
    AskEvent,
    ChunkDetail,
    Collection,
    Conversation,
    ConversationDeleted,
    ConversationPage,
    Document,
    DocumentDetail,
    DocumentPage,
    HistoryEntry,
    HistoryPage,
    Hit,
    MissingTool,
    Queued,
    Removed,
    SearchResult,
    SourceFile,
    Status,
    ThreadTurn,
    Uploaded,
    iso,
    place_uri,
    shown_hit,
    shown_path,
)
from ragweedd.daemon_core import Core
from ragweedd.errors import NotFoundError, RepairingError, RequestError
from ragweedd.logging import get_logger
from ragweedd.status import build_status, collection_of, missing_tools, shared_collections
from ragweedd.store.failures import damage_in

log = get_logger("ragweedd.engine")
TOOLS_TTL_S = 60.0  # missing external tools are looked up again at most this often
_DOC_KEY = re.compile(r"[0-9]{1,18}")  # ASCII digits only: str.isdigit() accepts '¹' and '١'
REPAIR_DRAIN_S = 30.0  # how long a live repair waits for calls already running on the old core
# How long a call that arrives while the core is being replaced waits for the new one before it is
# refused with 503: a planned switch (a changed embed.model) or a live repair takes moments, and a
# client should see a slower answer, not an error.
REPLACE_WAIT_S = 30.0
_F = TypeVar("_F", bound=Callable[..., Awaitable[Any]])


def _on_core(fn: _F) -> _F:
    """Hold the call while the core is being replaced (up to REPLACE_WAIT_S, then refuse it), and
    count it while it runs so the replacement can wait for it. Streams (ask) are counted until
    their events are handed over."""

    @functools.wraps(fn)
    async def call(self: "DaemonEngine", *args: Any, **kwargs: Any) -> Any:
        if self.repairing is not None:
            await self._await_core(fn.__name__)
        self._inflight += 1
        try:
            return await fn(self, *args, **kwargs)
        except Exception as e:
            damage = damage_in(e)
            if damage is None:
                raise
            self._check_now(damage)
            raise RepairingError(f"a database of ragweedd is damaged ({damage}); the integrity check runs now "
                                 "and repairs it from your files",
                                 hint="retry in a minute; status shows what was found and repaired") from e
        finally:
            self._inflight -= 1

    return cast(_F, call)




class DaemonEngine:
    def __init__(self, core: Core) -> None:
        self.core = core
        self.cfg, self.paths = core.cfg, core.paths
        self.repairing: str | None = None  # why, while the core is being replaced
        self._replaced: asyncio.Event | None = None  # set when the replacement is over
        self._inflight = 0
        self._damage_check_at = -60.0
        self._tools: list[MissingTool] = []
        self._tools_at = -TOOLS_TTL_S

    @property
    def services(self) -> Any:
        return self.core.services

    def _check_now(self, damage: str) -> None:
        """A request met a damaged database: run the integrity check (and so the live repair) now
        instead of at its next scheduled time; once per minute at most."""
        now = time.monotonic()
        if now - self._damage_check_at < 60 or self.core.jobs is None:
            return
        self._damage_check_at = now
        log.error("damage_seen", error=damage, action="integrity check now")
        self.core.jobs.run_now("integrity_check")

    async def replace_core(self, swap: Callable[[Core], Core], reason: str) -> None:
        """Hand the core to ``swap`` (which stops it and returns a started replacement) with no
        call running on it. If ``swap`` fails the error propagates: the daemon then exits and its
        next start runs the same repair."""
        self.repairing = reason
        self._replaced = asyncio.Event()
        deadline = time.monotonic() + REPAIR_DRAIN_S
        while self._inflight and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        try:
            self.core = await asyncio.to_thread(swap, self.core)
        finally:
            self.repairing = None
            self._replaced.set()

    async def _await_core(self, what: str) -> None:
        """A call that arrived during a replacement: wait for the new core, or refuse with 503."""
        reason, replaced = self.repairing, self._replaced
        if replaced is not None:
            try:
                await asyncio.wait_for(replaced.wait(), REPLACE_WAIT_S)
            except asyncio.TimeoutError:
                pass
        if self.repairing is not None:
            raise RepairingError(f"ragweedd is replacing its running parts: {reason}",
                                 hint="retry in a few seconds; status then shows what was done")
        log.info("call_waited_for_replacement", call=what)

    # --- status and collections ------------------------------------------------------------------
    @_on_core
    async def status(self) -> Status:
        return await asyncio.to_thread(self._status)

    def _status(self) -> Status:
        now = time.monotonic()
        if now - self._tools_at >= TOOLS_TTL_S:
            self._tools, self._tools_at = missing_tools(self.cfg), now
        return build_status(self.core, self._tools)

    @_on_core
    async def list_collections(self) -> list[Collection]:
        # this machine's collections, then (on PostgreSQL) the other machines' ones it can search
        return await asyncio.to_thread(
            lambda: [collection_of(self.core, n) for n in sorted(self.core.collections.items)]
            + shared_collections(self.core))

    @_on_core
    async def add_collection(self, name: str, paths: list[str], ignore: list[str] | None = None,
                             topic: str = "") -> Collection:
        def add() -> Collection:
            self.core.collections.add(name, list(paths), list(ignore or []), topic)
            self.core.scan_async(name)
            return collection_of(self.core, name)

        return await asyncio.to_thread(add)

    @_on_core
    async def remove_collection(self, name: str) -> Removed:
        res = await asyncio.to_thread(self.core.remove_collection, name)
        return {"name": res["name"], "removed": bool(res["removed"])}

    @_on_core
    async def scan(self, name: str) -> Queued:
        def queue() -> Queued:
            self.core.collections.get(name)
            self.core.scan_async(name)
            return {"collection": name, "queued": True}

        return await asyncio.to_thread(queue)

    @_on_core
    async def reanalyze(self, name: str) -> Queued:
        def queue() -> Queued:
            self.core.collections.get(name)
            self.core.jobs.run_now("cluster_reanalysis")
            return {"collection": name, "queued": True}

        return await asyncio.to_thread(queue)

    @_on_core
    async def rebuild_fts(self, name: str) -> Queued:
        def rebuild() -> Queued:
            self.core.collections.get(name)
            self.core.rebuild_fts(name)
            return {"collection": name, "queued": True}

        return await asyncio.to_thread(rebuild)

    # --- documents ---------------------------------------------------------------------------------
    @_on_core
    async def list_documents(self, collection: str | None = None, state: str | None = None,
                             path_glob: str | None = None, offset: int = 0, limit: int = 50) -> DocumentPage:
        raw: list[str] | None = None
        if state:
            if state not in DOC_STATES:
                raise RequestError(f"unknown document state {state!r}", hint="one of " + ", ".join(DOC_STATES))
            raw = [k for k, v in FILE_STATE_SHOWN.items() if v == state]

        def page() -> DocumentPage:
            if collection is not None:
                self.core.collections.get(collection)
            rows, total = self.core.read(lambda db: db.live_files_page(
                collection=collection, states=raw, path_glob=path_glob, offset=offset, limit=limit))
            return {"items": [_document(r) for r in rows], "total": total}

        return await asyncio.to_thread(page)

    @_on_core
    async def get_document(self, doc_key: str) -> DocumentDetail:
        if not _DOC_KEY.fullmatch(str(doc_key)):
            raise NotFoundError(f"document '{str(doc_key)[:80]}' does not exist",
                                action="list_documents")
        return await asyncio.to_thread(self._get_document, int(doc_key))

    def _get_document(self, file_id: int) -> DocumentDetail:
        r = self.core.read(lambda db: db.file_by_id(file_id))
        if r is None:
            raise NotFoundError(f"document '{file_id}' does not exist",
                                action="list_documents")
        detail: list[ChunkDetail] = []
        stores = self.services.stores
        if r["md5"] and stores.has_rag(r["collection"]):
            rag = stores.open_rag(r["collection"], readonly=True)
            try:
                ids = rag.chunk_ids_of(r["md5"])
                hits = rag.hits(ids)
            finally:
                rag.close()
            for i in ids:
                h = hits.get(i)
                if h is None:  # its text failed its hash: not shown (store/sqlite/rag_served.py)
                    continue
                detail.append({"chunk_idx": h["chunk_idx"], "text": h["text"], "page_label": h["page_label"],
                               "section": h["section"], "span": h["span"], "lines": h["lines"],
                               "t_start": h["t_start"], "t_end": h["t_end"], "uri": h["uri"]})
        doc = _document(r)
        return {**doc, "chunks_detail": detail}  # type: ignore[typeddict-item]

    @_on_core
    async def source_file(self, doc_key: str) -> SourceFile:
        if not _DOC_KEY.fullmatch(str(doc_key)):
            raise NotFoundError(f"document '{str(doc_key)[:80]}' does not exist",
                                action="list_documents")

        def find() -> SourceFile:
            r = self.core.read(lambda db: db.file_by_id(int(doc_key)))
            if r is None:
                raise NotFoundError(f"document '{doc_key}' does not exist",
                                    action="list_documents")
            live = not r["superseded"] and r["extract_status"] == "done"
            return {"doc_key": str(r["id"]), "collection": r["collection"], "path": r["source_file"],
                    "indexed": bool(live), "roots": list(self.core.collections.roots_of(r["collection"]))}

        return await asyncio.to_thread(find)

    @_on_core
    async def upload(self, collection: str, filename: str, data: bytes) -> Uploaded:
        from ragweedd.extract.registry import extractor_for

        if extractor_for(Path(filename)) is None:  # stored, it would only ever be "skipped"
            kind = f"type {Path(filename).suffix!r}" if Path(filename).suffix else "type (no extension)"
            raise RequestError(f"file {filename[:100]!r} is of a {kind} ragweedd does not index",
                               hint="docs/formats.md lists the formats it reads; convert the file to one of them")

        def write() -> Uploaded:
            self.core.collections.get(collection)
            target = Path(self.core.collections.upload_dir(collection)) / filename
            _write_atomic(target, data)
            self.core.queue.put(collection, str(target), "upsert", str(target.parent))
            return {"collection": collection, "source_file": str(target), "state": "queued",
                    "size_bytes": len(data)}

        return await asyncio.to_thread(write)

    # --- search and answers ------------------------------------------------------------------------
    async def _search(self, query: str, collections: list[str] | None, top_k: int | None, path_glob: str | None,
                      file_type: str | None, doc_id: str | None,
                      thread: list[ThreadTurn] | None = None) -> SearchResult:
        if not isinstance(query, str) or not query.strip():
            raise RequestError("the query is empty", hint="send a non-empty 'query'")
        t0 = time.perf_counter()
        # the search runs in a worker thread, the optional LLM rerank after it on this loop
        if thread is None:
            res = await self.services.search_async(query, collections, top_k or 10,
                                                   path_glob=path_glob, file_type=file_type, doc_id=doc_id)
        else:  # a question of a conversation: rewritten from the earlier turns first
            res = await self.services.followup_search(query, thread, collections=collections, limit=top_k or 10,
                                                      path_glob=path_glob, file_type=file_type, doc_id=doc_id)
        res["retrieval_meta"]["total_ms"] = round((time.perf_counter() - t0) * 1000, 2)
        # names are shown from here on (history, answers, every face); uri opens the real file
        res["results"] = [cast(Hit, shown_hit(dict(h))) for h in res["results"]]
        return res

    @_on_core
    async def search(self, query: str, collections: list[str] | None = None, top_k: int | None = None,
                     path_glob: str | None = None, file_type: str | None = None,
                     doc_id: str | None = None) -> SearchResult:
        res = await self._search(query, collections, top_k, path_glob, file_type, doc_id)
        res["history_id"] = await asyncio.to_thread(self.services.history.add, "search", query,
                                                    hist.search_record(dict(res)))
        return res

    @_on_core
    async def ask(self, query: str, collections: list[str] | None = None, top_k: int | None = None,
                  path_glob: str | None = None, file_type: str | None = None,
                  doc_id: str | None = None, mode: str = "hybrid", conversation_id: str | None = None,
                  thread: list[ThreadTurn] | None = None) -> AsyncIterator[AskEvent]:
        # one "ask" entry per answer (its retrieval included), not a "search" entry as well
        history = self.services.history
        held = thread is not None  # the client holds the thread: nothing of it is stored
        if held and conversation_id is not None:
            raise RequestError("an answer continues a stored conversation or the thread its client sends, not both")
        if not isinstance(query, str) or not query.strip():
            raise RequestError("the query is empty", hint="send a non-empty 'query'")
        if conversation_id is not None:  # an unknown or deleted one fails before anything is searched
            thread = await asyncio.to_thread(history.thread, hist.check_conversation_id(conversation_id))
        res = await self._search(query, collections, top_k, path_glob, file_type, doc_id, thread or [])
        used = res["retrieval_meta"]["rewrite"]["filters"]  # the follow-up's own, or the earlier turn's
        tree = self.services.tree_scope(used.get("collections"), mode, path_glob=used.get("path_glob"),
                                        file_type=used.get("file_type"), doc_id=used.get("doc_id"))
        return await self.services.ask_flow.ask(query, res, tree=tree, conversation_id=conversation_id,
                                                thread=thread, in_conversation=not held)

    @_on_core
    async def ask_continue(self, history_id: str) -> AsyncIterator[AskEvent]:
        _, events = await self.services.ask_flow.resume(history_id)
        return events

    @_on_core
    async def history_list(self, offset: int = 0, limit: int = 50) -> HistoryPage:
        return cast(HistoryPage, await asyncio.to_thread(self.services.history.list, offset, limit))

    @_on_core
    async def history_show(self, history_id: str) -> HistoryEntry:
        return cast(HistoryEntry, await asyncio.to_thread(self.services.history.show, history_id))

    @_on_core
    async def conversations_list(self, offset: int = 0, limit: int = 50) -> ConversationPage:
        return cast(ConversationPage, await asyncio.to_thread(self.services.history.conversations, offset, limit))

    @_on_core
    async def conversation_show(self, conversation_id: str) -> Conversation:
        return cast(Conversation, await asyncio.to_thread(self.services.history.conversation, conversation_id))

    @_on_core
    async def conversation_delete(self, conversation_id: str) -> ConversationDeleted:
        return cast(ConversationDeleted,
                    await asyncio.to_thread(self.services.history.delete_conversation, conversation_id))


def _document(r: Any) -> Document:
    return {"doc_key": str(r["id"]), "collection": r["collection"], "source_file": shown_path(r["source_file"]),
            "filename": shown_path(os.path.basename(r["source_file"])), "uri": place_uri(r["source_file"]),
            "state": FILE_STATE_SHOWN.get(r["extract_status"], "queued"), "size_bytes": r["size_bytes"] or 0,
            "chunks": r["chunks"], "error": r["error"], "updated_at": iso(r["updated_at"])}


def _write_atomic(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    # a short temporary name: the target's own name may already be 255 bytes long
    tmp = target.with_name(f".upload-{os.getpid()}-{time.monotonic_ns()}.part")
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)

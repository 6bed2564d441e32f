"""The seam between the HTTP API and the daemon's engine.

The routes in ragweedd/api/routes.py call only these methods. The real engine (ingest, store, query,
answer) implements them; ragweedd/api/fake_engine.py is an in-memory stand-in for tests.

Rules every implementation follows:

* Methods are coroutines (``ask`` and ``ask_continue`` return async iterators) and must not block the
  event loop for long: CPU work goes to a thread or process.
* Failures are ragweedd.errors exceptions: NotFoundError (404), RequestError (400), EmbedderError
  (503), ProviderError (502/429/504)... The API turns them into ``{"error": {"code", "message",
  "hint"}}`` with the exception's ``http_status``. Any other exception becomes a 500 whose body
  leaks nothing; the traceback goes to the log.
* Return values are JSON-serialisable dicts/lists (no Path, datetime or numpy objects).

Shapes
------
A *hit* (search result / answer source)::

    {"embedding_id": str, "collection": str, "doc_id": str, "source_file": str, "filename": str,
     "text": str, "score": float, "rel_score": float, "page_label": str | None,
     "section": str | None, "span": [start, end] | None, "t_start": float | None,
     "t_end": float | None, "member": str | None}

An *ask event* is a dict with a ``type``:

* ``{"type": "sources", "sources": [hit, ...]}`` -- once, first; sources are numbered from 1 in order.
* ``{"type": "annotation", "n": int, "annotation": str, "relevant": bool}`` -- zero or more.
* ``{"type": "token", "text": str}`` -- the answer as it is written.
* ``{"type": "done", "history_id": str, "finish_reason": "stop" | "max_tokens", ...}`` -- last.
* ``{"type": "error", "error": {"code", "message", "hint"?}}`` -- instead of ``done`` when the
  answer failed after it started (errors before the first event are raised instead).

A *document* in listings::

    {"doc_key": str, "collection": str, "source_file": str, "filename": str, "state": str,
     "size_bytes": int, "chunks": int, "error": str | None, "updated_at": str | None}

``state`` is one of ``queued``, ``indexed``, ``failed``, ``skipped``, ``superseded``.
``get_document`` adds ``"chunks_detail": [{"chunk_idx", "text", "page_label", "section", "span",
"t_start", "t_end"}]``; ``chunks`` stays the count.
"""

from __future__ import annotations

from typing import Any, AsyncIterator, Protocol, runtime_checkable

DOC_STATES = ("queued", "indexed", "failed", "skipped", "superseded")
ASK_EVENT_TYPES = ("sources", "annotation", "token", "done", "error")


@runtime_checkable
class Engine(Protocol):
    async def status(self) -> dict[str, Any]:
        """Daemon status passed through to GET /v1/status: collections, files_by_state,
        queue_depth, ingest (progress), embedder, index_sizes, last_flush, next_jobs,
        degraded (list of reasons), missing_tools."""

    async def list_collections(self) -> list[dict[str, Any]]:
        """[{"name", "paths", "ignore", "topic", "documents", "available"}]"""

    async def add_collection(self, name: str, paths: list[str], ignore: list[str] | None = None,
                             topic: str = "") -> dict[str, Any]:
        """Create and persist a collection; RequestError if it exists or a root is not a folder."""

    async def remove_collection(self, name: str) -> dict[str, Any]:
        """Forget a collection and its index (never the user's files)."""

    async def scan(self, name: str) -> dict[str, Any]:
        """Queue a reconciliation scan now; returns {"collection", "queued": bool}."""

    async def reanalyze(self, name: str) -> dict[str, Any]:
        """Queue a cluster re-analysis (entry points)."""

    async def rebuild_fts(self, name: str) -> dict[str, Any]:
        """Queue a rebuild of the FTS5 index from stored chunks."""

    async def list_documents(self, collection: str | None = None, state: str | None = None,
                             path_glob: str | None = None, offset: int = 0,
                             limit: int = 50) -> dict[str, Any]:
        """{"items": [document...], "total": int}"""

    async def get_document(self, doc_key: str) -> dict[str, Any]:
        """One document with ``chunks_detail``; NotFoundError if unknown."""

    async def upload(self, collection: str, filename: str, data: bytes) -> dict[str, Any]:
        """Write ``data`` as ``filename`` into the collection's managed folder and queue it.
        ``filename`` has already been checked to be a bare name (no separators, not . or ..)."""

    async def search(self, query: str, collections: list[str] | None = None, top_k: int | None = None,
                     path_glob: str | None = None, file_type: str | None = None,
                     doc_id: str | None = None) -> dict[str, Any]:
        """{"results": [hit...], "retrieval_meta": {...}, "history_id": str}"""

    async def ask(self, query: str, collections: list[str] | None = None, top_k: int | None = None,
                  path_glob: str | None = None, file_type: str | None = None,
                  doc_id: str | None = None) -> AsyncIterator[dict[str, Any]]:
        """Validate the request (raise here for unknown collections etc.), then return an async
        iterator of ask events (see module doc). The API also accepts a plain async generator."""

    async def ask_continue(self, history_id: str) -> AsyncIterator[dict[str, Any]]:
        """Continue an answer cut at max_tokens; same events (``sources`` repeats the sources)."""

    async def history_list(self, offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """{"items": [{"id", "kind": "search"|"ask", "query", "created_at"}...], "total": int}"""

    async def history_show(self, history_id: str) -> dict[str, Any]:
        """The full entry: query, results/sources, filtered annotations, answer, retrieval_meta."""

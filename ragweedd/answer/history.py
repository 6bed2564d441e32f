"""The history of searches and answers (DESIGN §8 and §10): what a record holds and how entries are
listed. The rows live in $STATE/history.sqlite3 (store/history_db.py).

A record holds retrieval_meta, results or sources, annotations, filtered set, answer, provider,
model, timings, token usage and, for an answer cut at max_tokens, the continuation ``state``.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

from ragweedd.contract import iso
from ragweedd.errors import NotFoundError, RequestError, StorageError
from ragweedd.logging import get_logger
from ragweedd.store.history_db import HistoryDB
from ragweedd.store.protocols import HistoryRows

log = get_logger(__name__)

KINDS = ("search", "ask")
MAX_LIMIT = 1000
# Columns of the listing; everything else lives in body_json.
_COLUMNS = ("id", "kind", "query", "created_at")


class HistoryStore:
    """Searches and answers, newest first. ``max_entries`` > 0 bounds the table: each insert drops
    the oldest rows beyond it (0 keeps everything)."""

    def __init__(self, rows: HistoryRows | Path | str, *, max_entries: int = 0) -> None:
        """``rows``: the store's history rows (``StoreBackend.open_history()``), or the path of a
        history.sqlite3 to open."""
        self.max_entries = int(max_entries or 0)
        self.db: HistoryRows = HistoryDB(Path(rows)) if isinstance(rows, (str, Path)) else rows

    # --- writing ----------------------------------------------------------------------------------
    def add(self, kind: str, query: str, body: dict[str, Any], *, created_at: float | None = None) -> str:
        if kind not in KINDS:
            raise RequestError(f"history kind {kind!r} is unknown", hint="one of " + ", ".join(KINDS))
        if not isinstance(query, str):
            raise RequestError(f"a history query must be text, not {type(query).__name__}")
        hid = uuid.uuid4().hex[:16]
        self.db.insert(hid, kind, query, time.time() if created_at is None else created_at, _dumps(body),
                       keep=self.max_entries)
        return hid

    def update(self, hid: str, body: dict[str, Any]) -> None:
        """Replace an entry's record (the answer finished, or was continued)."""
        body = {k: v for k, v in body.items() if k not in _COLUMNS}
        if not self.db.set_body(hid, _dumps(body)):
            raise NotFoundError(f"history entry '{hid}' does not exist (it may have been dropped by "
                                f"history_max_entries)", action="list_history")

    def delete(self, hid: str) -> bool:
        return self.db.delete(hid)

    # --- reading ----------------------------------------------------------------------------------
    def list(self, offset: int = 0, limit: int = 50, kind: str | None = None) -> dict[str, Any]:
        offset = _whole("offset", offset, 0, None)
        limit = _whole("limit", limit, 1, MAX_LIMIT)
        if kind is not None and kind not in KINDS:
            raise RequestError(f"history kind {kind!r} is unknown", hint="one of " + ", ".join(KINDS))
        total, rows = self.db.page(offset, limit, kind)
        return {"items": [{"id": r[0], "kind": r[1], "query": r[2], "created_at": iso(r[3])} for r in rows],
                "total": total}

    def show(self, hid: str) -> dict[str, Any]:
        if not isinstance(hid, str) or not hid:
            raise RequestError("a history id is needed", hint="ids come from GET /v1/history")
        r = self.db.get(hid)
        if r is None:
            raise NotFoundError(f"history entry '{hid}' does not exist", action="list_history")
        try:
            body = json.loads(r["body_json"])
            if not isinstance(body, dict):
                raise ValueError("not an object")
        except ValueError as e:
            raise StorageError(f"history entry '{hid}' in {self.db} is damaged ({e})",
                               hint="delete the entry or move history.sqlite3 aside") from None
        return {**body, "id": r["id"], "kind": r["kind"], "query": r["query"], "created_at": iso(r["created_at"])}

    def count(self) -> int:
        return self.db.count()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "HistoryStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- building records ------------------------------------------------------------------------------
def search_record(res: dict[str, Any]) -> dict[str, Any]:
    """What a search stores: its results and retrieval_meta."""
    return {"results": res.get("results", []), "retrieval_meta": res.get("retrieval_meta") or {}}


def pending_answer(res: dict[str, Any]) -> dict[str, Any]:
    """The record of an answer that has started: what retrieval found. ``status`` tells a reader
    that an entry still marked "streaming" never finished (client gone, daemon stopped)."""
    return {"status": "streaming", "retrieved": res.get("results", []),
            "sources": res.get("results", []), "retrieval_meta": res.get("retrieval_meta") or {}}


def answer_record(done: dict[str, Any], retrieval_meta: dict[str, Any] | None) -> dict[str, Any]:
    """The record of a finished answer from the pipeline's ``done`` event: query, sources,
    annotations, filtered set, answer, provider, model, timings (retrieval stages included), usage,
    and ``state`` only while the answer can still be continued."""
    rec = {k: v for k, v in done.items() if k not in ("type", *_COLUMNS)}
    rec["status"] = "done"
    rec["retrieval_meta"] = retrieval_meta or {}
    rec["state"] = done.get("state")  # a continuation that finished must not leave the old state behind
    rec["finish_reason"] = finish_reason(done)
    rec["timings"] = {**stage_timings(retrieval_meta), **(done.get("timings") or {})}
    return rec


def failed_answer(body: dict[str, Any], error: dict[str, Any], partial: str) -> dict[str, Any]:
    return {**body, "status": "error", "error": error, "answer": partial}


def finish_reason(done: dict[str, Any]) -> str:
    return "max_tokens" if done.get("stop_reason") == "max_tokens" else "stop"


def stage_timings(meta: dict[str, Any] | None) -> dict[str, float]:
    """embed_ms and retrieve_ms from a retrieval_meta (hybrid search reports per-stage timings; the
    simple fallback only a total)."""
    meta = meta or {}
    t = meta.get("timings_ms") or {}
    out: dict[str, float] = {}
    if "embed" in t:
        out["embed_ms"] = round(float(t["embed"]), 1)
    total = t.get("total", meta.get("ms", meta.get("total_ms")))
    if total is not None:
        out["retrieve_ms"] = round(float(total) - out.get("embed_ms", 0.0), 1)
    return out


# --- helpers ---------------------------------------------------------------------------------------
def _dumps(body: Any) -> str:
    if not isinstance(body, dict):
        raise RequestError(f"a history record must be an object, not {type(body).__name__}")
    # default=str: numpy floats and Paths from retrieval end up as text rather than failing the answer
    return json.dumps(body, ensure_ascii=False, default=str)


def _whole(name: str, v: Any, lo: int, hi: int | None) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < lo or (hi is not None and v > hi):
        rng = f">= {lo}" if hi is None else f"from {lo} to {hi}"
        raise RequestError(f"history {name} must be a whole number {rng}, not {v!r}")
    return v

"""The history of searches and answers (DESIGN §8 and §10): what a record holds and how entries are
listed. The rows live in $STATE/history.sqlite3 (store/sqlite/history_db.py).

A record holds retrieval_meta, results or sources, annotations, filtered set, answer, provider,
model, timings, token usage and, for an answer cut at max_tokens, the continuation ``state``.

A conversation is an id (``c`` and 16 hex digits, told apart from a history id at a glance) and
the answers that are its turns, in order; ``thread`` reads them back as a follow-up needs them.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any, List

from ragweedd.contract import CONVERSATION_ID_PATTERN, ThreadTurn, iso, without_marks
from ragweedd.errors import NotFoundError, RequestError, StorageError
from ragweedd.logging import get_logger
from ragweedd.store.protocols import HistoryRows

log = get_logger(__name__)

KINDS = ("search", "ask")
MAX_LIMIT = 1000
# Columns of the listing; everything else lives in body_json.
_COLUMNS = ("id", "kind", "query", "created_at")
_CONVERSATION_ID = re.compile(CONVERSATION_ID_PATTERN.replace("$", r"\Z"))
TITLE_CHARS = 200
# How many earlier turns a follow-up reads (rewrite and prompt); older ones are not loaded at all.
THREAD_TURNS = 20


def new_conversation_id() -> str:
    return "c" + uuid.uuid4().hex[:16]


def check_conversation_id(cid: Any) -> str:
    """A conversation id of the right shape, or a RequestError that says what one looks like (and
    that a history id is not one)."""
    if isinstance(cid, str) and _CONVERSATION_ID.match(cid):
        return cid
    shown = repr(cid)[:60]
    if isinstance(cid, str) and re.fullmatch(r"[0-9a-f]{16}", cid):
        raise RequestError(f"{shown} is a history id, not a conversation id",
                           hint="a conversation id is 'c' and 16 hex digits; an answer's conversation_id names it")
    raise RequestError(f"conversation id {shown} is not one: a conversation id is 'c' and 16 hex digits",
                       action="list_conversations")


class HistoryStore:
    """Searches and answers, newest first. ``max_entries`` > 0 bounds the table: each insert drops
    the oldest rows beyond it (0 keeps everything)."""

    def __init__(self, rows: HistoryRows, *, max_entries: int = 0) -> None:
        """``rows``: the store's history rows (``StoreBackend.open_history()``)."""
        self.max_entries = int(max_entries or 0)
        self.db: HistoryRows = rows

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

    def add_turn(self, query: str, body: dict[str, Any], *, conversation_id: str | None) -> tuple[str, str, int]:
        """Record an answer as the next turn of ``conversation_id``, or as the first of a new
        conversation when it is None: (history id, conversation id, turn). A conversation that does
        not exist (deleted, dropped by history_max_entries, never made) is a NotFoundError and
        nothing is written."""
        new = conversation_id is None
        cid = new_conversation_id() if conversation_id is None else check_conversation_id(conversation_id)
        hid = uuid.uuid4().hex[:16]
        body = {k: v for k, v in body.items() if k not in _COLUMNS}
        turn = self.db.insert_turn(hid, query, time.time(),
                                   lambda t: _dumps({**body, "conversation_id": cid, "turn": t}),
                                   conversation=cid, title=" ".join(query.split())[:TITLE_CHARS] if new else None,
                                   keep=self.max_entries)
        if not turn:
            raise _no_conversation(cid)
        return hid, cid, turn

    def update(self, hid: str, body: dict[str, Any]) -> None:
        """Replace an entry's record (the answer finished, or was continued)."""
        body = {k: v for k, v in body.items() if k not in _COLUMNS}
        if not self.db.set_body(hid, _dumps(body)):
            raise NotFoundError(f"history entry '{hid}' does not exist (it may have been dropped by "
                                f"history_max_entries)", action="list_history")

    def delete(self, hid: str) -> bool:
        return self.db.delete(hid)

    def delete_conversation(self, cid: str) -> dict[str, Any]:
        """Delete a conversation with all its turns: {id, deleted, turns}."""
        turns = self.db.delete_conversation(check_conversation_id(cid))
        if turns is None:
            raise _no_conversation(cid)
        return {"id": cid, "deleted": True, "turns": turns}

    # --- reading ----------------------------------------------------------------------------------
    def list(self, offset: int = 0, limit: int = 50, kind: str | None = None) -> dict[str, Any]:
        offset = _whole("offset", offset, 0, None)
        limit = _whole("limit", limit, 1, MAX_LIMIT)
        if kind is not None and kind not in KINDS:
            raise RequestError(f"history kind {kind!r} is unknown", hint="one of " + ", ".join(KINDS))
        total, rows = self.db.page(offset, limit, kind)
        return {"items": [{"id": r[0], "kind": r[1], "query": r[2], "created_at": iso(r[3]),
                           "conversation_id": r[4], "turn": r[5]} for r in rows],
                "total": total}

    def show(self, hid: str) -> dict[str, Any]:
        if not isinstance(hid, str) or not hid:
            raise RequestError("a history id is needed", hint="ids come from GET /v1/history")
        r = self.db.get(hid)
        if r is None:
            if _CONVERSATION_ID.match(hid):
                raise RequestError(f"'{hid}' is a conversation id, not a history id",
                                   hint=f"GET /v1/conversations/{hid} shows the conversation")
            raise NotFoundError(f"history entry '{hid}' does not exist", action="list_history")
        return _entry(r, self.db)

    def conversations(self, offset: int = 0, limit: int = 50) -> dict[str, Any]:
        """The conversations, the most recently continued first: {items, total}."""
        offset = _whole("offset", offset, 0, None)
        limit = _whole("limit", limit, 1, MAX_LIMIT)
        total, rows = self.db.conversation_page(offset, limit)
        return {"items": [{"id": r[0], "title": r[1], "created_at": iso(r[2]), "updated_at": iso(r[3]),
                           "turn_count": r[4]} for r in rows], "total": total}

    def conversation(self, cid: str) -> dict[str, Any]:
        """A conversation with every turn's entry in order (without continuation state)."""
        found = self.db.conversation(check_conversation_id(cid))
        if found is None:
            raise _no_conversation(cid)
        c, rows = found
        turns = []
        for r in rows:
            try:
                e = _entry(r, self.db)
            except StorageError as err:  # one damaged turn does not hide the others
                e = {"id": r["id"], "kind": r["kind"], "query": r["query"], "created_at": iso(r["created_at"]),
                     "conversation_id": r["conversation_id"], "turn": r["turn"], "status": "error",
                     "error": err.to_dict(), "answer": ""}
            e.pop("state", None)
            turns.append(e)
        return {"id": c["id"], "title": c["title"], "created_at": iso(c["created_at"]),
                "updated_at": iso(c["updated_at"]), "turns": turns}

    def thread(self, cid: str) -> List[ThreadTurn]:  # noqa: UP006 - ``list`` is the method above
        """The earlier turns of a conversation as a follow-up reads them, oldest first (at most
        THREAD_TURNS, the newest)."""
        return [thread_turn(e) for e in self.conversation(cid)["turns"][-THREAD_TURNS:]]

    def count(self) -> int:
        return self.db.count()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> "HistoryStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _no_conversation(cid: str) -> NotFoundError:
    return NotFoundError(f"conversation '{cid}' does not exist: it was deleted, dropped with the oldest "
                         "history (history_max_entries), or never made here", action="list_conversations")


def _entry(r: dict[str, Any], where: Any) -> dict[str, Any]:
    hid = r["id"]
    try:
        body = json.loads(r["body_json"])
        if not isinstance(body, dict):
            raise TypeError("not an object")
    except (ValueError, TypeError) as e:
        raise StorageError(f"history entry '{hid}' in {where} is damaged ({e})",
                           hint="delete the entry or move history.sqlite3 aside") from None
    return {**body, "id": hid, "kind": r["kind"], "query": r["query"], "created_at": iso(r["created_at"]),
            "conversation_id": r.get("conversation_id"), "turn": r.get("turn")}


def thread_turn(entry: dict[str, Any]) -> ThreadTurn:
    """An answer's entry as a later turn reads it: the question, what it searched, its answer (none
    when it failed), its filters and the documents its answer cited."""
    rw = entry.get("rewrite") or {}
    cited = (entry.get("cited") if entry.get("mode") == "llm" else entry.get("sources")) or []
    docs = list(dict.fromkeys(str(s["doc_id"]) for s in cited if isinstance(s, dict) and s.get("doc_id")))
    answer = entry.get("answer") if entry.get("status") == "done" else ""
    return {"question": str(entry.get("query") or ""), "query": str(rw.get("query") or entry.get("query") or ""),
            "answer": without_marks(answer) if isinstance(answer, str) else "",
            "filters": dict(rw.get("filters") or {}), "documents": docs}


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

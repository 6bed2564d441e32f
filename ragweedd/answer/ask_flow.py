"""The ask flow, once for every face: retrieval result -> history entry -> answer events -> the
finished record in the history.

The daemon's API streams these events; ``ragweedd ask`` prints them. An answer is a turn of a
conversation (a new one unless it continues one), or, when the client holds the thread (the
OpenAI-compatible face), an entry of no conversation. An answer is recorded as
"streaming" before its first event, so an entry that never finishes (client gone, daemon stopped)
says so; a failure is recorded with what was written so far. A failed continuation keeps the entry
as it was, so it can be tried again. History writes run in a worker thread: the event loop only
awaits.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, cast

from ragweedd.answer import history as hist
from ragweedd.answer.answering import answer_question, continue_answer
from ragweedd.config import Config
from ragweedd.contract import AskEvent, SearchResult, ThreadTurn
from ragweedd.errors import RagweedError, RequestError

if TYPE_CHECKING:
    from ragweedd.answer.tree_ask import TreeScope


class AskFlow:
    def __init__(self, cfg: Config, history: hist.HistoryStore, *, embedder: Callable[[], Any] | None = None) -> None:
        self.cfg = cfg
        self.history = history
        # called when an answer starts, so a continuation (which quotes nothing new) loads no model
        self._embedder = embedder

    async def ask(self, query: str, res: SearchResult, *, tree: TreeScope | None = None,
                  conversation_id: str | None = None, thread: list[ThreadTurn] | None = None,
                  in_conversation: bool = True) -> AsyncIterator[AskEvent]:
        """Start an answer from a search result; the history entry exists once this returns. With
        ``tree`` the answer reads section trees (ragweedd/answer/tree_ask.py), the search result
        being its candidates and its fallback. The answer is the next turn of ``conversation_id``
        (None: the first of a new conversation) after the earlier turns ``thread``; with
        ``in_conversation`` false it belongs to none (``thread`` then comes from the client)."""

        if tree is not None and not self.cfg.llm_synthesis:
            from ragweedd.answer.tree_ask import no_llm_error

            raise no_llm_error()  # before the history has an entry for an answer that cannot start
        body = hist.pending_answer(dict(res))
        rewrite = (res.get("retrieval_meta") or {}).get("rewrite")
        turn: dict[str, Any] = {"rewrite": rewrite} if rewrite else {}
        body.update(turn)
        if in_conversation:
            hid, cid, n = await asyncio.to_thread(self.history.add_turn, query, body, conversation_id=conversation_id)
            turn.update(conversation_id=cid, turn=n)
            body.update(turn)
        else:
            hid = await asyncio.to_thread(self.history.add, "ask", query, body)
        hits = cast(list[dict[str, Any]], res["results"])
        embedder = self._embedder() if self._embedder is not None else None
        searched = rewrite["query"] if rewrite else None
        if tree is not None:
            from ragweedd.answer.tree_ask import tree_answer

            # the sections are chosen for the standalone query ("and in 2016?" routes nowhere); the
            # answer reads the thread as the ordinary mode's does
            events = tree_answer(query, dict(res), self.cfg, tree, embedder=embedder, thread=thread, searched=searched)
        else:
            events = answer_question(query, hits, self.cfg, embedder=embedder, thread=thread, searched=searched)
        return self._recorded(events, hid, body, res.get("retrieval_meta") or {}, record_errors=True, turn=turn)

    async def resume(self, history_id: str) -> tuple[dict[str, Any], AsyncIterator[AskEvent]]:
        """Continue an answer cut at max_tokens: (the entry as it was, the events; ``sources``
        repeats the entry's sources first)."""
        entry = await asyncio.to_thread(self.history.show, history_id)
        if entry.get("kind") != "ask" or not entry.get("state"):
            raise RequestError(f"history entry '{history_id}' cannot be continued: only answers cut at "
                               "max_tokens can", hint="continue an answer whose done event had continuable = true")

        async def events() -> AsyncIterator[dict[str, Any]]:
            yield {"type": "sources", "sources": entry.get("sources") or []}
            async for ev in continue_answer(entry["state"], self.cfg):
                yield ev

        turn = {k: entry[k] for k in ("conversation_id", "turn", "rewrite") if entry.get(k) is not None}
        return entry, self._recorded(events(), history_id, entry, entry.get("retrieval_meta") or {},
                                     record_errors=False, turn=turn)

    async def _recorded(self, events: AsyncIterator[dict[str, Any]], hid: str, body: dict[str, Any],
                        meta: dict[str, Any], *, record_errors: bool,
                        turn: dict[str, Any] | None = None) -> AsyncIterator[AskEvent]:
        """The events with the history kept in step; ``turn`` (conversation_id, turn, rewrite) goes
        on the first event and on the done record."""
        parts: list[str] = []
        finished = False
        try:
            async for ev in events:
                if ev.get("type") == "token":
                    parts.append(ev.get("text", ""))
                elif ev.get("type") == "sources" and turn:
                    ev = {**ev, **turn}
                elif ev.get("type") == "done":
                    ev = {**ev, **(turn or {})}
                    rec = hist.answer_record(ev, meta)
                    await asyncio.to_thread(self.history.update, hid, rec)
                    finished = True
                    # the resume state (prompt messages) stays in the history; faces get the record
                    ev = {**{k: v for k, v in ev.items() if k != "state"}, "history_id": hid,
                          "finish_reason": rec["finish_reason"], "timings": rec["timings"]}
                yield ev  # type: ignore[misc]
        except (RagweedError, asyncio.CancelledError, KeyboardInterrupt) as e:
            if record_errors:
                why = e.to_dict() if isinstance(e, RagweedError) else {"code": "cancelled", "message": "interrupted"}
                # shielded: a cancelled stream still records why it ended
                await asyncio.shield(asyncio.to_thread(
                    self.history.update, hid, hist.failed_answer(body, why, "".join(parts))))
            raise
        except GeneratorExit:
            # the face stopped reading before the end (an HTTP client that went away closes the
            # stream): the entry says so instead of "streaming" for ever
            if record_errors and not finished:
                why = {"code": "cancelled", "message": "the client stopped reading before the answer was complete"}
                await asyncio.shield(asyncio.to_thread(
                    self.history.update, hid, hist.failed_answer(body, why, "".join(parts))))
            raise
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()

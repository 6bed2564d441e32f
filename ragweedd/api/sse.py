"""What the answer faces (/v1/ask, /v1/chat/completions, the MCP ``ask`` tool) share: one of
``max_concurrent_answers`` slots held while an answer is written, waiting for the next event while
keeping the connection alive, and turning a failure after the headers were sent into something the
stream can carry."""

from __future__ import annotations

import asyncio
import inspect
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

from aiohttp import web

from ragweedd.api.security import ApiState, error_response
from ragweedd.errors import RagweedError

SSE_KEEPALIVE_S = 15.0


class AnswersBusy(RagweedError):
    """Every answer slot is taken."""

    http_status = 429
    code = "too_many_answers"

    def __init__(self, limit: int) -> None:
        super().__init__(f"{limit} answers are already being written",
                         hint="retry in a few seconds or raise max_concurrent_answers in the config")

    def response(self) -> web.Response:
        # the error middleware's envelope, with the Retry-After it does not send
        return error_response(self.http_status, self.code, self.message, self.hint, headers={"Retry-After": "2"})


@asynccontextmanager
async def answer_events(st: ApiState | None, start: Callable[[], Any]) -> AsyncIterator[tuple[dict | None,
                                                                                              AsyncIterator[dict]]]:
    """(first event, the rest) of the answer ``start()`` begins, holding an answer slot of ``st``
    (none counted without one) until the block ends, then closing the events. The first event is
    read before the caller sends a byte, so a request the engine rejects gets its HTTP status
    instead of an error inside a 200 stream. Raises :class:`AnswersBusy` when no slot is free."""
    if st is not None:
        if st.answers_in_flight >= st.max_concurrent_answers:
            raise AnswersBusy(st.max_concurrent_answers)
        st.answers_in_flight += 1
    events: Any = None
    try:
        res = start()
        events = (await res) if inspect.isawaitable(res) else res
        yield await anext(events, None), events
    finally:
        if st is not None:
            st.answers_in_flight -= 1
        if events is not None and hasattr(events, "aclose"):
            try:
                await events.aclose()
            except Exception:  # noqa: BLE001 - the answer is over either way
                pass


async def next_event(events: AsyncIterator[dict], resp: web.StreamResponse,
                     interval: float = SSE_KEEPALIVE_S) -> dict | None:
    """The next event (None at the end). While it is late, an SSE comment every ``interval``
    seconds keeps proxies and clients from timing out (annotation can take a while)."""
    nxt = asyncio.ensure_future(anext(events, None))
    try:
        while not (await asyncio.wait({nxt}, timeout=interval))[0]:
            await resp.write(b": keep-alive\n\n")
    except BaseException:
        nxt.cancel()
        raise
    return nxt.result()


def stream_error(e: Exception, log: Any, path: str, event: str) -> dict:
    """The error body for a failure inside a stream whose headers are already sent; an unexpected
    one is logged whole and shown without its internals."""
    if isinstance(e, RagweedError):
        return e.to_dict()
    log.exception(event, path=path)
    return {"code": "internal", "message": "the answer failed inside ragweedd", "hint": "see the daemon log"}

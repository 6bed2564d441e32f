"""What the two streamed answers (/v1/ask's events and /v1/chat/completions' chunks) share: waiting
for the next event while keeping the connection alive, and turning a failure after the headers
were sent into something the stream can carry."""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from aiohttp import web

from ragweedd.errors import RagweedError

SSE_KEEPALIVE_S = 15.0


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

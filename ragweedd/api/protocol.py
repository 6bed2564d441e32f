"""The connection layer under the app: timeouts, and the error envelope for requests aiohttp's own
HTTP parser refuses.

aiohttp answers a request it cannot parse (no or two Host headers, an over-long request line or
header, garbage) itself, in text/plain, before any middleware runs; and it keeps a connection open
as long as the peer likes. ``ApiRunner`` builds the server with ``ApiRequestHandler``, which

- renders those parser errors as the documented ``{"error": {...}}`` envelope;
- closes a connection that has not sent a whole request head within ``idle_timeout`` of
  connecting or of its previous response (aiohttp's keep-alive timer, which also covers a head
  sent one byte at a time: it is not reset by incoming bytes);
- closes a connection whose peer stops reading: when the socket's send buffer stays full for
  ``write_timeout`` (the transport paused writing), the transport is aborted, so a pending write
  fails and whatever the handler held (an answer slot) is released.

The request body has its own deadline in the routes (``read_body``).
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from ragweedd.api.jsontext import dumps
from ragweedd.logging import get_logger

log = get_logger("ragweedd.api")


# What follows the parser's reason: the offending bytes, quoted or escaped. They may be a token or a
# session cookie (a header with one bad byte, as a token file saved with CRLF gives), so neither the
# log nor the answer repeats them.
_VALUE = re.compile(r"""b?'(?:[^'\\]|\\.)*'|b?"(?:[^"\\]|\\.)*"|\\x[0-9a-fA-F]{2}""")


def parser_reason(text: str) -> str:
    """The parser's reason without any value it quotes: its words up to the first colon, with
    quoted or escaped bytes cut out."""
    words = " ".join(_VALUE.sub("...", text).split())
    head = words.split(":", 1)[0].strip()
    return (head or "malformed request")[:200]


class ApiRequestHandler(RequestHandler):
    write_timeout: float = 30.0
    _write_timer: asyncio.TimerHandle | None = None

    def handle_error(self, request: Any, status: int = 500, exc: BaseException | None = None,
                     message: str | None = None) -> web.StreamResponse:
        if request.writer.output_size > 0:  # headers went out already: nothing can be said
            raise ConnectionError("the response was already started")
        if status >= 500:
            log.error("api_connection_error", status=status, error=type(exc).__name__ if exc else None,
                      exc_info=exc)
            err = {"code": "internal", "message": "internal error in ragweedd", "hint": "see the daemon log"}
        else:
            why = parser_reason(str(getattr(exc, "message", None) or message or "malformed request"))
            log.info("api_bad_http", status=status, reason=why)
            err = {"code": "bad_request", "message": f"the HTTP request could not be parsed: {why}",
                   "hint": "send one HTTP/1.1 request with exactly one Host header (localhost:PORT), "
                           "a request line under 64 KiB and headers under 16 KiB each"}
        resp = web.Response(status=status, body=dumps({"error": err}).encode(),
                            content_type="application/json",
                            headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})
        resp.force_close()
        return resp

    def pause_writing(self) -> None:
        super().pause_writing()
        if self.write_timeout > 0 and self._write_timer is None:
            self._write_timer = asyncio.get_running_loop().call_later(self.write_timeout, self._write_stalled)

    def resume_writing(self) -> None:
        self._cancel_write_timer()
        super().resume_writing()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_write_timer()
        super().connection_lost(exc)

    def _cancel_write_timer(self) -> None:
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None

    def _write_stalled(self) -> None:
        self._write_timer = None
        log.info("api_client_stalled", action="connection closed", write_timeout_s=self.write_timeout)
        transport = self.transport
        if transport is not None:
            transport.abort()  # connection_lost follows: a waiting write raises ConnectionResetError


class ApiServerFactory(web.Server):
    """aiohttp's Server, building ApiRequestHandler for each connection."""

    def __init__(self, *args: Any, write_timeout: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.write_timeout = write_timeout

    def __call__(self) -> RequestHandler:
        handler = ApiRequestHandler(self, loop=self._loop, **self._kwargs)
        handler.write_timeout = self.write_timeout
        return handler


class ApiRunner(web.AppRunner):
    """AppRunner whose server is ApiServerFactory (same start-up and cleanup of the app)."""

    def __init__(self, app: web.Application, *, write_timeout: float, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._write_timeout = write_timeout

    async def _make_server(self) -> web.Server:
        server = await super()._make_server()
        # The app's startup hooks ran and it is frozen; rebuild the same server with our handler.
        return ApiServerFactory(server.request_handler, request_factory=server.request_factory,
                                loop=server._loop, handler_cancellation=server.handler_cancellation,
                                write_timeout=self._write_timeout, **server._kwargs)

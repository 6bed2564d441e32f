"""``/mcp``: the MCP tools (ragweedd/api/mcp_tools.py) over streamable HTTP, in the daemon's aiohttp app.

The SDK's streamable-HTTP transport is an ASGI app (StreamableHTTPSessionManager.handle_request);
this handler hands it each aiohttp request as one ASGI call. /mcp sits behind the app's middlewares
like every route: the Host and Origin checks and the bearer token (ragweedd/api/security.py).

The manager runs *stateless* with JSON responses: every POST is answered in full by one JSON body,
with no session to keep and no long-lived SSE stream (which the daemon's idle and write timeouts
would cut); the tools need neither, as none of them sends progress or asks the client anything. Any
other method (a GET that would open a stream, a DELETE of a session) is a 405.

The SDK is imported at the first request to /mcp, so a daemon nobody asks over MCP never pays for it.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

from ragweedd.api.routes import read_body
from ragweedd.api.security import STATE_KEY, error_response
from ragweedd.logging import get_logger

log = get_logger("ragweedd.api")
DISCONNECT_POLL_S = 0.5


class McpHttp:
    def __init__(self, allow_writes: bool) -> None:
        self.allow_writes = allow_writes
        self.manager: Any = None
        self._task: asyncio.Task | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._lock = asyncio.Lock()

    async def _start(self, app: web.Application) -> Any:
        async with self._lock:
            if self.manager is not None:
                return self.manager
            from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

            from ragweedd.api.mcp_tools import EngineBackend, build_server

            st = app[STATE_KEY]
            server = build_server(EngineBackend(st.engine, st), allow_writes=self.allow_writes)
            manager = StreamableHTTPSessionManager(server._lowlevel_server, json_response=True, stateless=True,
                                                   max_request_body_size=st.max_body_bytes)
            # The manager's task group must be entered and left by one task: its own.
            self._task = asyncio.create_task(self._run(manager), name="ragweedd-mcp")
            waiter = asyncio.ensure_future(self._ready.wait())
            await asyncio.wait({waiter, self._task}, return_when=asyncio.FIRST_COMPLETED)
            if not self._ready.is_set():
                waiter.cancel()
                self._task.result()  # raises what stopped it
            self.manager = manager
            log.info("mcp_http_started", allow_writes=self.allow_writes)
            return manager

    async def _run(self, manager: Any) -> None:
        async with manager.run():
            self._ready.set()
            await self._stop.wait()

    async def close(self, _app: web.Application) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, 10)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if request.method != "POST":
            # Stateless: no server-initiated messages and no session, so the SSE stream a GET opens
            # would only carry keep-alive pings for ever (each one holding a connection past the idle
            # timeout), and a DELETE has no session to end. The MCP spec lets a server say 405.
            resp = error_response(405, "method_not_allowed", f"/mcp takes POST (JSON-RPC), not {request.method[:16]}",
                                  "send each JSON-RPC request as a POST; this server opens no event stream")
            resp.headers["Allow"] = "POST"
            return resp
        if request.content_type != "application/json":
            # the SDK's transport says so in plain text; an MCP client reads a JSON-RPC error
            return web.json_response({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32600, "message": f"the body must be application/json, not {request.content_type[:60]!r}"}},
                status=415, headers={"Cache-Control": "no-store"})
        try:
            manager = await self._start(request.app)
        except ImportError as e:
            return error_response(501, "mcp_unavailable", f"the MCP endpoint needs the 'mcp' package ({e})",
                                  "install it with `pip install 'mcp>=2.3'` and restart ragweedd")

        body = await read_body(request)
        return await _asgi(manager.handle_request, request, body)


async def _asgi(app: Any, request: web.Request, body: bytes) -> web.StreamResponse:
    """One ASGI http call for one aiohttp request whose body is already read."""
    scope = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
        "method": request.method, "scheme": "http", "path": request.path,
        "raw_path": request.raw_path.split("?", 1)[0].encode("latin-1"),
        "query_string": request.query_string.encode("latin-1"), "root_path": "",
        "headers": [(k.lower(), v) for k, v in request.raw_headers],
        "client": request.transport.get_extra_info("peername") if request.transport else None,
        "server": None,
    }
    body_sent = False

    async def receive() -> dict:
        nonlocal body_sent
        if not body_sent:
            body_sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        while request.transport is not None and not request.transport.is_closing():
            await asyncio.sleep(DISCONNECT_POLL_S)
        return {"type": "http.disconnect"}

    resp: web.StreamResponse | None = None

    async def send(msg: dict) -> None:
        nonlocal resp
        if msg["type"] == "http.response.start":
            headers = CIMultiDict((k.decode("latin-1"), v.decode("latin-1")) for k, v in msg.get("headers", []))
            resp = web.StreamResponse(status=msg["status"], headers=headers)
        elif msg["type"] == "http.response.body" and resp is not None:
            if not resp.prepared:
                resp.headers.setdefault("Cache-Control", "no-store")
                resp.headers.setdefault("X-Content-Type-Options", "nosniff")
                await resp.prepare(request)
            if msg.get("body"):
                await resp.write(msg["body"])
            if not msg.get("more_body"):
                await resp.write_eof()

    await app(scope, receive, send)
    if resp is None:
        return error_response(500, "internal", "the MCP transport sent no response", "see the daemon log")
    return resp


def add_mcp_route(app: web.Application, *, allow_writes: bool) -> None:
    """Before the app starts (its router freezes then)."""
    mcp = McpHttp(allow_writes)
    app.router.add_route("*", "/mcp", mcp.handle)
    app.on_cleanup.append(mcp.close)

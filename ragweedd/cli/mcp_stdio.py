"""``ragweedctl mcp``: the MCP tool set of api/mcp_tools.py served over stdio, every call proxied to
the running daemon's HTTP API with ragweedctl's own client (port and token files, the health
proof). Imported only by that command: the ``mcp`` SDK stays out of ragweedctl's start-up."""

from __future__ import annotations

from typing import TextIO
from urllib.parse import urlencode

import anyio
from mcp.server.mcpserver.exceptions import ToolError

from ragweedd.api.mcp_tools import DEFAULT_TIMEOUT, TIMEOUTS, build_server
from ragweedd.cli.ctl_http import Client, CtlError


class HttpBackend:
    """Every call opens a new ragweedctl Client, so a daemon started (or restarted, with a new port
    or token) after the MCP server is found without restarting the MCP host."""

    def __init__(self, state_dir: str, timeout: float | None = None) -> None:
        self.state_dir = state_dir
        self.timeout = timeout

    def connect(self) -> Client:
        return Client(self.state_dir, timeout=self.timeout)

    def _call(self, method: str, path: str, body: dict | None, raw: bytes | None, query: dict | None) -> dict:
        kind = "ask" if path == "/v1/ask" else "upload" if path.endswith("/documents") and raw is not None else ""
        try:
            client = self.connect()
            items = {k: v for k, v in (query or {}).items() if v is not None}
            full = path + ("?" + urlencode(items) if items else "")
            return client.call(method, full, body, raw=raw, timeout=TIMEOUTS.get(kind, DEFAULT_TIMEOUT))
        except CtlError as e:  # the daemon's error envelope, or ragweedctl's own (not running)
            raise ToolError(e.say("mcp")) from None
        except OSError as e:
            raise ToolError(f"connection to ragweedd failed: {e}") from None

    async def call(self, method: str, path: str, body: dict | None = None, *, raw: bytes | None = None,
                   query: dict | None = None) -> dict:
        # ragweedctl's client is blocking (standard library sockets): keep it off the event loop.
        return await anyio.to_thread.run_sync(self._call, method, path, body, raw, query)


def run_stdio(state_dir: str, *, allow_writes: bool, timeout: float | None, err: TextIO) -> int:
    """``ragweedctl mcp``: serve until the MCP host closes stdin."""
    backend = HttpBackend(state_dir, timeout)
    try:
        backend.connect()
    except CtlError as e:
        # Served anyway: the host shows the tools, and each call says the same until the daemon is up.
        err.write(f"ragweedctl mcp: {e}\nragweedctl mcp: serving anyway; every tool call reports this "
                  "until ragweedd runs\n")
        err.flush()
    server = build_server(backend, allow_writes=allow_writes)
    anyio.run(server.run_stdio_async)
    return 0

"""build_app: the aiohttp application of the localhost API (routes, middlewares, state).

The daemon may add its own cleanup contexts to the returned app before starting it.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from ragweedd.api.openai_compat import add_openai_routes
from ragweedd.api.routes import add_routes
from ragweedd.api.security import STATE_KEY, ApiState, error_middleware, security_middleware
from ragweedd.api.web_routes import add_web_routes
from ragweedd.errors import InternalError
from ragweedd.logging import get_logger


def build_app(engine: Any, *, token: str, port: int, max_body_bytes: int = 64 * 2**20,
              max_concurrent_answers: int = 4, extra_hosts: tuple[str, ...] = ()) -> web.Application:
    """``port`` is the port clients use in Host/Origin; when binding to port 0 the server sets it
    once the port is known (``app[STATE_KEY].set_port``)."""
    if not token or len(token) < 16:
        raise InternalError("build_app needs the API token (at least 16 characters)")
    app = web.Application(middlewares=[error_middleware, security_middleware],
                          client_max_size=max_body_bytes)
    app[STATE_KEY] = ApiState(engine=engine, token=token, port=port, max_body_bytes=max_body_bytes,
                              max_concurrent_answers=max_concurrent_answers,
                              extra_hosts=tuple(h.lower() for h in extra_hosts),
                              log=get_logger("ragweedd.api"))
    add_routes(app)
    add_openai_routes(app)
    add_web_routes(app)
    return app

"""structlog set-up: JSON lines when stdout is not a terminal, a console renderer when it is.

Call ``configure()`` once per process; modules use ``get_logger(__name__)``. Secrets never go into
events: ``_redact`` blanks any key that looks like a token or API key.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any

_SECRET_KEYS = ("token", "api_key", "apikey", "authorization", "password", "secret")
_configured = False


def _redact(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    for key in list(event):
        low = key.lower()
        if any(s in low for s in _SECRET_KEYS) and not low.endswith(("_file", "_path", "tokens")):
            event[key] = "***"
    return event


def configure(level: str = "info", *, json: bool | None = None, stream: Any = None,
              brief: bool = False) -> None:
    """``brief``: one short human line per event (``ragweedd: warning: event (key=value, ...)``), no
    time stamp: what the one-shot commands print without ``--verbose`` (warnings and errors only)."""
    import structlog

    global _configured
    stream = stream or sys.stdout
    if json is None:
        json = not (hasattr(stream, "isatty") and stream.isatty())
    lvl = getattr(logging, level.upper(), logging.INFO)
    processors: list[structlog.typing.Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _redact,
        structlog.processors.format_exc_info,
    ]
    renderer: Any
    if brief:
        renderer = _brief
    else:
        renderer = structlog.processors.JSONRenderer() if json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=processors + [renderer],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.PrintLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    _configured = True


def _brief(_logger: Any, _name: str, event: MutableMapping[str, Any]) -> str:
    """``ragweedd: warning: hyde_fallback (error=timed out)``; a traceback, when there is one, after it."""
    level = event.pop("level", "info")
    name = event.pop("event", "")
    event.pop("timestamp", None)
    exc = event.pop("exception", None)
    rest = ", ".join(f"{k}={v}" for k, v in event.items())
    line = f"ragweedd: {level}: {name}" + (f" ({rest})" if rest else "")
    return line + (f"\n{exc}" if exc else "")


def at_least(level: str, floor: str) -> str:
    """The stricter of two level names: ``at_least("debug", "warning")`` is "warning"."""
    def num(name: str) -> int:
        return getattr(logging, name.upper(), logging.INFO)

    return level if num(level) >= num(floor) else floor


def get_logger(name: str = "ragweedd") -> Any:
    import structlog

    if not _configured:
        configure()
    return structlog.get_logger(name)


class _LazyLogger:
    """Defers importing structlog (and rich, which it pulls in) until something is logged: the
    sandbox child imports every extractor at start-up and most extractions log nothing."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._log = None

    def __getattr__(self, attr: str) -> Any:
        if self._log is None:
            self._log = get_logger(self._name)
        return getattr(self._log, attr)


def lazy_logger(name: str) -> _LazyLogger:
    return _LazyLogger(name)

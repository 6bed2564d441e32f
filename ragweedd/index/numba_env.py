"""Where numba keeps its compiled kernels (DESIGN §7).

The HNSW kernels are compiled with ``cache=True`` so a warm daemon start loads machine code instead of
compiling for tens of seconds. numba reads ``NUMBA_CACHE_DIR`` when it is imported and, when it cannot
write to any cache location, *refuses to decorate* a cached function (RuntimeError at import time).
A read-only install (system package, read-only home, container) must still start, so before numba is
imported we check that the directory is writable and otherwise fall back to a private temporary
directory: the kernels are then compiled once per process, which is slow but works.

This module must not import numba itself.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ragweedd.paths import Paths

_ENV = "NUMBA_CACHE_DIR"
_fallback_dir: str | None = None


def _writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
        return True
    except OSError:
        return False


def _fallback() -> str:
    global _fallback_dir
    if _fallback_dir is None or not os.path.isdir(_fallback_dir):
        _fallback_dir = tempfile.mkdtemp(prefix="ragweedd-numba-")
    return _fallback_dir


def _apply(path: str) -> None:
    os.environ[_ENV] = path
    # numba copies the variable into numba.core.config at import; the cache locator reads the config
    # attribute each time a cached function is decorated, so updating it still takes effect.
    # Any: read from sys.modules so this module never imports numba itself
    cfg: Any = sys.modules.get("numba.core.config")
    if cfg is not None:
        cfg.CACHE_DIR = path


def setup_numba_cache(path: str | os.PathLike | None) -> str:
    """Point numba's cache at ``path`` (normally ``$CACHE/numba``); returns the directory in use.

    Falls back to a temporary directory, with a warning, when ``path`` cannot be written."""
    chosen = str(path) if path else ""
    if chosen and _writable(chosen):
        _apply(chosen)
        return chosen
    fb = _fallback()
    if chosen:
        _warn(chosen, fb)
    _apply(fb)
    return fb


def setup_for(paths: Paths) -> str:
    """The daemon's and CLI's choice: an explicit NUMBA_CACHE_DIR (the systemd unit sets one; test
    runs share one) wins, else ``$CACHE/numba``."""
    return setup_numba_cache(os.environ.get(_ENV) or paths.numba_cache)


def ensure_usable_cache() -> str | None:
    """Called by the kernel module right before ``import numba``.

    Keeps a usable NUMBA_CACHE_DIR; if none is set, numba's own default (``__pycache__`` beside the
    sources) is tried and, when that is read-only too, a temporary directory is used."""
    current = os.environ.get(_ENV)
    if current:
        if _writable(current):
            return current
        return setup_numba_cache(current)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "__pycache__")
    if _writable(here):
        return None
    return setup_numba_cache(None)


def _warn(wanted: str, used: str) -> None:
    try:
        from ragweedd.logging import get_logger

        get_logger(__name__).warning(
            "numba_cache_not_writable", wanted=wanted, using=used,
            hint="kernels are compiled at every start; make the cache directory writable to start faster",
        )
    except Exception:  # noqa: BLE001 - logging must never stop the index from loading
        print(f"ragweedd: numba cache {wanted} is not writable; using {used}", file=sys.stderr)

"""Suite-wide set-up.

Every daemon and CLI subprocess the tests start shares one numba cache, so the HNSW kernels are
compiled once per checkout instead of once per test (each test has its own cache_dir).
"""

import atexit
import logging
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "numba"))

# A test (or a command it runs) that names no data_dir, state_dir or config would otherwise read and
# write the real user's ~/.local/state/ragweedd/history.sqlite3 and config: a clone of an older commit
# then fails on the newer history database a later commit left there. Each test process gets its own.
_HOME_DIRS = tempfile.mkdtemp(prefix="ragweed-test-xdg-")
atexit.register(shutil.rmtree, _HOME_DIRS, True)
for _var in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
    os.environ[_var] = os.path.join(_HOME_DIRS, _var.lower())



class _LoggerTable(dict):
    """pytest's log capture (``catching_logs.__enter__``) walks ``loggerDict.values()`` at the start of
    every test phase without logging's lock. A daemon a module-scoped fixture keeps running has
    threads that can make a logger meanwhile (a library imported on first use), and the walk then
    fails with "dictionary changed size during iteration" in that test's set-up. ``values()`` here
    is a copy, taken in one step under the GIL, so the walk never sees the table change."""

    def values(self):  # type: ignore[override]
        return list(super().values())


logging.Logger.manager.loggerDict = _LoggerTable(logging.Logger.manager.loggerDict)

# A real PostgreSQL with pgvector (session-wide), a fresh database per test that asks for one, and
# ``store``: each backend in turn.
import pytest  # noqa: E402

from tests.pg_fixture import pg_dsn, pg_server, store  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _logging_set_up_is_put_back():
    """A test that runs a command's ``main()`` in this process configures structlog with the
    stream pytest captures for that test, which is closed once the test ends: every later log line
    of another test (a worker thread's warning) would then fail with "I/O operation on closed file".
    The configuration from before the test is put back after it."""
    import structlog

    saved = structlog.get_config()
    yield
    structlog.configure(**saved)

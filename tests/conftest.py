"""Suite-wide set-up.

Every daemon and CLI subprocess the tests start shares one numba cache, so the HNSW kernels are
compiled once per checkout instead of once per test (each test has its own cache_dir).
"""

import os
from pathlib import Path

os.environ.setdefault("NUMBA_CACHE_DIR", str(Path(__file__).resolve().parent.parent / ".pytest_cache" / "numba"))

# A real PostgreSQL with pgvector (session-wide) and a fresh database per test that asks for one.
from tests.pg_fixture import pg_dsn, pg_server  # noqa: E402,F401

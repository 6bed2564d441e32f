"""Which storage backend a configuration names (config ``store``), opened for the composition root.

``store = "sqlite"`` (the default) is the data directory's SQLite files; a ``postgresql://`` URI
is one PostgreSQL database with pgvector shared by several machines (docs/postgres.md). On
PostgreSQL the one-shot commands (ingest, search, ask) run; the daemon's own parts (watcher, job
workers, index sync, integrity jobs) still open the SQLite files, so the daemon is refused with a
clear message rather than writing where searches do not look.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragweedd.config import redact_dsn
from ragweedd.errors import ConfigError

if TYPE_CHECKING:
    from ragweedd.paths import Paths
    from ragweedd.store.protocols import StoreBackend


def is_postgres(cfg: Any) -> bool:
    return str(getattr(cfg, "store", "sqlite")).startswith(("postgresql://", "postgres://"))


def open_backend(cfg: Any, paths: Paths) -> StoreBackend:
    if is_postgres(cfg):
        from ragweedd.store.pg_backend import PgBackend

        return PgBackend(cfg.store, source=cfg.source_name)
    from ragweedd.store.sqlite_backend import SqliteBackend

    return SqliteBackend(paths)


def require_local_ingest(cfg: Any, what: str) -> None:
    """Refuse ``what`` (the daemon, an ingest) on a store it cannot write yet."""
    if is_postgres(cfg):
        raise ConfigError(
            f"{getattr(cfg, 'source', None) or 'config'}: store = {redact_dsn(cfg.store)!r}: {what} cannot write "
            "to PostgreSQL yet in this version (its stores and search are in place; ingest still writes SQLite)",
            hint='set store = "sqlite" to ingest; see docs/postgres.md for what works on PostgreSQL today')

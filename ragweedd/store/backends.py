"""Which storage backend a configuration names (config ``store``), opened for the composition root.

``store = "sqlite"`` (the default) is the data directory's SQLite files; a ``postgresql://`` URI
is one PostgreSQL database with pgvector shared by several machines (docs/postgres.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any


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

"""The one door to storage: which backend a configuration's ``store`` names, opened for the
composition root.

A backend is picked from ``SCHEMES`` by the scheme of the store URI: ``store = "sqlite"`` (the
default) is the data directory's SQLite files; a ``postgresql://`` URI is one PostgreSQL database
with pgvector shared by several machines (docs/postgres.md). Adding a backend is one entry here and
one implementation of ``StoreBackend`` (docs/architecture.md, "Adding a storage backend"). The layers
above ``store/`` import this module, ``protocols``, ``types``, ``failures`` and ``served_rot``, never a
backend's own modules (tests/unit/test_store_seam.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.config import Config
from ragweedd.errors import ConfigError

if TYPE_CHECKING:
    from ragweedd.paths import Paths
    from ragweedd.store.protocols import DataDirStores, StoreBackend, SummaryStore


@dataclass(frozen=True)
class BackendKind:
    name: str
    open: Callable[[str, Paths, str], StoreBackend]  # (store setting, data dir paths, source name)


def _open_sqlite(store: str, paths: Paths, source: str) -> StoreBackend:
    from ragweedd.store.sqlite.backend import SqliteBackend

    return SqliteBackend(paths)


def _open_postgres(store: str, paths: Paths, source: str) -> StoreBackend:
    from ragweedd.store.postgres.backend import PgBackend

    return PgBackend(store, source=source)


SQLITE = BackendKind("sqlite", _open_sqlite)
POSTGRES = BackendKind("postgresql", _open_postgres)
SCHEMES: dict[str, BackendKind] = {"sqlite": SQLITE, "postgresql": POSTGRES, "postgres": POSTGRES}


def kind_of(store: str) -> BackendKind:
    """The backend a ``store`` setting names: "sqlite", or a URI whose scheme is in SCHEMES."""
    scheme = store.split("://", 1)[0] if "://" in store else store
    kind = SCHEMES.get(scheme.lower())
    if kind is None:
        raise ConfigError(f"store = {store.split('://', 1)[0]!r} names no storage backend",
                          hint="use \"sqlite\" (the default) or a postgresql:// URI; see docs/postgres.md")
    return kind


def is_shared(cfg: Config) -> bool:
    """Whether the configured store is a database server several machines share (known from the
    setting alone, before anything is opened: the daemon's start-up and the CLI ask it)."""
    return kind_of(str(getattr(cfg, "store", "sqlite"))) is not SQLITE


def open_backend(cfg: Config, paths: Paths) -> StoreBackend:
    """The backend the configuration names."""
    store = str(getattr(cfg, "store", "sqlite"))
    return kind_of(store).open(store, paths, str(getattr(cfg, "source_name", "") or ""))


def open_store(store: str, paths: Paths, *, source: str = "") -> StoreBackend:
    """The backend a ``store`` setting names, apart from any configuration (``ragweedd migrate``
    opens its source and its target side by side)."""
    return kind_of(store).open(store, paths, source)


def open_data_dir(paths: Paths) -> DataDirStores:
    """A data directory's own SQLite files, whatever the configuration says (a one-shot reader of
    a directory built by ``ragweedd ingest``, a change of embedding model, the tests' fixtures)."""
    from ragweedd.store.sqlite.backend import SqliteBackend

    return SqliteBackend(paths)


def data_dir_of(stores: StoreBackend) -> DataDirStores | None:
    """``stores`` as a data directory's own files, which can move to another embedding model beside
    the one that serves (ragweedd/ingest/model_swap.py); None for a backend that cannot (a
    database server's collections share one model among machines: docs/postgres.md)."""
    from ragweedd.store.sqlite.backend import SqliteBackend

    return stores if isinstance(stores, SqliteBackend) else None


def open_summary_cache(path: Path) -> SummaryStore:
    """The tree summaries written by an LLM: a cache of this machine's own (a local SQLite file,
    whichever backend holds the index), kept across restarts."""
    from ragweedd.store.sqlite.tree_db import SummaryCache

    return SummaryCache(path)


def copy_between(src: StoreBackend, dst: StoreBackend, progress: Callable[[str], None]) -> Any:
    """Copy every collection, the ingest state and the history from a data directory's files into a
    database server (``ragweedd migrate``); what was copied, for the report."""
    from ragweedd.store.postgres.backend import PgBackend
    from ragweedd.store.postgres.pg_copy import copy_to_postgres
    from ragweedd.store.sqlite.backend import SqliteBackend

    if not isinstance(src, SqliteBackend) or not isinstance(dst, PgBackend):
        raise ConfigError("ragweedd migrate copies a data directory's SQLite files into a PostgreSQL database",
                          hint="give a postgresql:// URI as the target; see docs/postgres.md")
    return copy_to_postgres(src, dst, progress=progress)

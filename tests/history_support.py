"""A history store opened on a history.sqlite3 by its path, as the daemon's SQLite backend opens it
(``StoreBackend.open_history()``), or on rows the test made itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragweedd.answer.history import HistoryStore
from ragweedd.store.sqlite.history_db import HistoryDB


def open_history(rows: Any, **kw: Any) -> HistoryStore:
    return HistoryStore(HistoryDB(Path(rows)) if isinstance(rows, (str, Path)) else rows, **kw)

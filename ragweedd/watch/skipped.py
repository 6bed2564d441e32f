"""Files skipped from their stat alone, settled by the watch side without a job each.

An empty file, or a type no extractor reads, has nothing to index: the pipeline would only write
its 'skipped' row. Queueing a job for each cost a claim, a pipeline run and a finish per file, so
a folder of 50,000 such files took minutes and a real file dropped meanwhile waited behind them
all. The scan and the watcher's event path therefore decide this from the stat they already have
and write the rows themselves, a few thousand per transaction; only files that need the
pipeline are queued, and they are queued first.

What the rows say must be exactly what the pipeline would have written (same md5, reason,
stat), and nothing may go stale or be counted twice:

- ``IngestDB.record_skipped`` leaves a path to the pipeline whenever a job exists for it or its
  live row is not a skip (indexed content has to leave the index; only the pipeline does that).
- After each batch commits, every written path is stat-ed again: a file that changed or went away
  between the first look and the commit (its event may have been handled before the row existed)
  is queued as an upsert, and the worker settles it from what is on disk then. A change after
  that second look produces an event that finds the row.
- A skipped file that is gone has its row marked deleted the same way (``forget``): only when
  the path is absent and its row is a skip with no job (``IngestDB.forget_skipped`` hands back
  anything else); a path back on disk after its batch is queued as an upsert.
- A crash loses at most the batch being written; the start-up scan finds those files again.
"""

from __future__ import annotations

import functools
import os
import stat as stat_mod
from typing import TYPE_CHECKING, Callable, Iterator, TypeVar

from ragweedd.store.failures import is_disk_full
from ragweedd.store.protocols import IngestStore
from ragweedd.store.types import SkippedFile

if TYPE_CHECKING:
    pass

BATCH = 2000  # rows per transaction: the writer lock is held for tens of milliseconds at most


def _changed_since(f: SkippedFile) -> bool:
    try:
        st = os.lstat(f.path)
    except OSError:
        return True
    return (not stat_mod.S_ISREG(st.st_mode) or st.st_size != f.size or st.st_mtime_ns != f.mtime_ns
            or st.st_ino != f.inode)


T = TypeVar("T")
WriteAllowed = Callable[[Callable[[], list[str]]], "list[str] | None"]


def _batches(write_part: Callable[[list[T]], list[str]], items: list[T], key: Callable[[T], str], *,
             write_allowed: WriteAllowed) -> Iterator[tuple[list[T], set[str]]]:
    """(batch, paths held back by the store) for each batch written; stops once the collection is
    removed. A full disk holds back the whole batch (the queue keeps it in memory until space is
    back)."""
    for i in range(0, len(items), BATCH):
        part = items[i:i + BATCH]
        try:
            held = write_allowed(functools.partial(write_part, part))
        except Exception as e:
            if not is_disk_full(e):
                raise
            held = [key(x) for x in part]
        if held is None:
            return
        yield part, set(held)


def record(db: IngestStore, collection: str, files: list[SkippedFile], *,
           write_allowed: WriteAllowed) -> tuple[int, list[SkippedFile]]:
    """Write ``files`` as skipped rows in batches. ``write_allowed(write)`` runs one batch's
    ``write`` while the collection cannot be removed, or returns None (without running it) once it
    has been: the rest is dropped. Returns (rows written or already current, files the pipeline
    must settle: held by ``record_skipped`` or changed since their stat)."""
    done = 0
    to_queue: list[SkippedFile] = []
    write = functools.partial(db.record_skipped, collection)
    for part, held in _batches(write, files, lambda f: f.path, write_allowed=write_allowed):
        for f in part:
            if f.path in held or _changed_since(f):
                to_queue.append(f)
            else:
                done += 1
    return done, to_queue


def forget(db: IngestStore, collection: str, gone: list[tuple[str, str | None]], *,
           write_allowed: WriteAllowed) -> tuple[int, list[tuple[str, str | None, str]]]:
    """Mark the skipped rows of ``gone`` (path, root) -- paths found absent -- deleted, in batches,
    without a job each. Returns (rows settled, (path, root, op) the pipeline must settle: held by
    ``forget_skipped`` (op 'delete'), or back on disk since (op 'upsert'))."""
    done = 0
    to_queue: list[tuple[str, str | None, str]] = []
    write = functools.partial(_forget_paths, db, collection)
    for part, held in _batches(write, gone, lambda g: g[0], write_allowed=write_allowed):
        for path, root in part:
            if path in held:
                to_queue.append((path, root, "delete"))
            elif os.path.lexists(path):
                to_queue.append((path, root, "upsert"))
            else:
                done += 1
    return done, to_queue


def _forget_paths(db: IngestStore, collection: str, part: list[tuple[str, str | None]]) -> list[str]:
    return db.forget_skipped(collection, [p for p, _ in part])

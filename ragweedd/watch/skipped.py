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
- A crash loses at most the batch being written; the start-up scan finds those files again.
"""

from __future__ import annotations

import functools
import hashlib
import os
import stat as stat_mod
from pathlib import Path
from typing import Callable, Sequence

from ragweedd.store.ingest_db import IngestDB, SkippedFile
from ragweedd.store.sqlite import is_disk_full

BATCH = 2000  # rows per transaction: the writer lock is held for tens of milliseconds at most
EMPTY_MD5 = hashlib.md5(b"", usedforsecurity=False).hexdigest()


def skip_reason(path: str, size: int) -> tuple[str | None, str] | None:
    """(md5, reason) when the stat alone says the file has nothing to index, else None. The same
    decision and words as the pipeline's (tests/integration/test_skip_from_scan.py holds them
    together): an empty file (its md5 is known), or a type no extractor reads (never read)."""
    from ragweedd.extract.registry import extractor_for

    p = Path(path)
    if extractor_for(p) is None:
        return None, f"{path}: unsupported file type {p.suffix or '(no extension)'!r}; skipped"
    if size == 0:
        return EMPTY_MD5, f"{path}: empty file (0 bytes)"
    return None


def skipped_file(path: str, root: str | None, st: os.stat_result) -> SkippedFile | None:
    """The row of a regular file that is skipped from ``st``, or None when it needs the pipeline."""
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    why = skip_reason(path, st.st_size)
    if why is None:
        return None
    return SkippedFile(path, root, st.st_size, st.st_mtime_ns, st.st_ino, why[0], why[1])


def _changed_since(f: SkippedFile) -> bool:
    try:
        st = os.lstat(f.path)
    except OSError:
        return True
    return (not stat_mod.S_ISREG(st.st_mode) or st.st_size != f.size or st.st_mtime_ns != f.mtime_ns
            or st.st_ino != f.inode)


def record(db: IngestDB, collection: str, files: Sequence[SkippedFile], *,
           write_allowed: Callable[[Callable[[], list[str]]], list[str] | None]) -> tuple[int, list[SkippedFile]]:
    """Write ``files`` as skipped rows in batches. ``write_allowed(write)`` runs one batch's
    ``write`` while the collection cannot be removed, or returns None (without running it) once it
    has been: the rest is dropped. Returns (rows written or already current, files the pipeline
    must settle: held by ``record_skipped`` or changed since their stat)."""
    done = 0
    to_queue: list[SkippedFile] = []
    for i in range(0, len(files), BATCH):
        part = files[i:i + BATCH]
        try:
            held = write_allowed(functools.partial(db.record_skipped, collection, part))
        except Exception as e:
            if not is_disk_full(e):
                raise
            # The queue keeps what it cannot write in memory until space is back; so do these.
            held = [f.path for f in part]
        if held is None:
            break
        held_set = set(held)
        for f in part:
            if f.path in held_set or _changed_since(f):
                to_queue.append(f)
            else:
                done += 1
    return done, to_queue

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
import hashlib
import os
import stat as stat_mod
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, TypeVar

from ragweedd.store.failures import is_disk_full
from ragweedd.store.protocols import IngestStore
from ragweedd.store.types import Row, SkippedFile

if TYPE_CHECKING:
    from ragweedd.config import Config

BATCH = 2000  # rows per transaction: the writer lock is held for tens of milliseconds at most
EMPTY_MD5 = hashlib.md5(b"", usedforsecurity=False).hexdigest()


# Extractors whose input is the text itself: their cap is ingest_max_text_mb (every other format's
# is ingest_max_file_mb).
TEXT_LIKE = frozenset({"text", "html", "svg", "json", "csv", "tex", "rtf"})


def skip_reason(path: str, size: int, cfg: Config | None = None) -> tuple[str | None, str] | None:
    """(md5, reason) when the stat alone says the file is not to be indexed, else None: an empty
    file (its md5 is known), a type no extractor reads, or (given ``cfg``) a file over its size cap;
    their bytes are never read. The one rule for the pipeline and the watch side (which passes no
    ``cfg`` and leaves files over a cap to the pipeline: there are few, and it skips them alike)."""
    from ragweedd.extract.registry import extractor_for

    p = Path(path)
    ex = extractor_for(p)
    if ex is None:
        return None, f"{path}: unsupported file type {p.suffix or '(no extension)'!r}; skipped"
    if size == 0:
        return EMPTY_MD5, f"{path}: empty file (0 bytes)"
    if cfg is not None:
        key, cap = (("ingest_max_text_mb", cfg.ingest_max_text_mb) if ex.name in TEXT_LIKE
                    else ("ingest_max_file_mb", cfg.ingest_max_file_mb))
        if size > cap << 20:
            return None, (f"{path}: larger than {key} ({cap} MiB): {size / 2**20:.1f} MiB; skipped "
                          f"(raise {key} to index it; it is read again at the next start or scan)")
    return None


# A file's ctime moves with every change of its content or inode, and nothing sets it back; the
# mtime can be put back (cp -p, rsync -t, tar x, a restore). A ctime later than when the row was
# written means the recorded size, mtime and inode may hide new content: the file is read again
# (its MD5 says whether it changed, and the row is written anew either way).


def stat_unchanged(row: Row, st: os.stat_result) -> bool:
    """Whether ``row`` (an ingest_files row: size_bytes, mtime_ns, inode, updated_at) still
    describes the file ``st`` was taken of."""
    if row["size_bytes"] != st.st_size or row["mtime_ns"] != st.st_mtime_ns or row["inode"] != st.st_ino:
        return False
    recorded = row["updated_at"]
    return recorded is None or st.st_ctime_ns <= recorded * 1e9


def cap_lifted(row: Row | None, path: str, size: int, cfg: Config | None) -> bool:
    """True for a row skipped because the file was over a size cap that no longer holds (the cap
    was raised): the file must be read although its stat is unchanged. Such a row is the only
    skip of a non-empty file of a readable type whose bytes were never read (no md5)."""
    return (row is not None and row["extract_status"] == "skipped" and row["md5"] is None and size > 0
            and skip_reason(path, size, cfg) is None)


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

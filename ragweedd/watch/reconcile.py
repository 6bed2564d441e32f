"""Reconciliation scans (DESIGN §4): compare what is on disk with what ingest_db holds.

Watchers lose events (overflow, watch limits, network mounts, the daemon being stopped), so the
daemon scans at start, periodically and after an overflow. A scan stats every file under the
collection's available roots and compares (size, mtime_ns, inode) with the live ingest_files row;
only differences count: new or changed paths, paths whose ingest never finished, and deletes for
rows whose file is gone. A new or changed file that the stat alone says is skipped (empty, or a
type no extractor reads) and that holds no indexed content is listed apart (``skipped``): its row
is written without a job (watch/skipped.py), and a skipped row whose file is gone is listed apart
too (``skipped_gone``); every other difference becomes a job. A root that is
missing, or has become an empty mount point (a disk that was not mounted), contributes no deletes:
its rows are kept until it returns.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable

from ragweedd.files.ignore import walk_files
from ragweedd.files.roots import root_state
from ragweedd.files.skip_rules import cap_lifted, skipped_file, stat_unchanged
from ragweedd.paths import within
from ragweedd.store.types import SkippedFile

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.store.protocols import IngestStore

FINISHED = ("done", "skipped", "failed")
PROGRESS_EVERY = 512  # files walked between two looks at cancellation and two progress reports


@dataclass
class ScanResult:
    collection: str
    files_seen: int = 0
    upserts: list[str] = field(default_factory=list)
    deletes: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)  # rows to write without a job
    skipped_gone: list[str] = field(default_factory=list)  # skipped rows whose file is gone: no job either
    unavailable_roots: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def summary(self) -> dict:
        return {"collection": self.collection, "files_seen": self.files_seen, "upserts": len(self.upserts),
                "skipped": len(self.skipped), "deletes": len(self.deletes),
                "skipped_gone": len(self.skipped_gone), "unavailable_roots": self.unavailable_roots,
                "seconds": round(self.seconds, 3)}


def scan(db: IngestStore, collection: str, roots: Iterable[str], ignore: Iterable[str] = (), *,
         skip_roots: Iterable[str] = (), cancelled: Callable[[], bool] = lambda: False, cfg: Config | None = None,
         progress: Callable[[int], None] | None = None) -> ScanResult:
    """Differences between disk and the ingest_files rows of ``collection`` (``db``: the ingest state).
    Roots in ``skip_roots`` are treated like unavailable ones (their rows are left alone). The walk
    stops early, with a partial result, once ``cancelled()`` is true (the collection was removed). The rows
    are read once, before the walk, so nothing is held while the disk is read. With ``cfg``, a file
    skipped for a size cap that has since been raised is read again. ``progress(files_seen)`` is
    told the count as the walk goes (every PROGRESS_EVERY files; status shows it)."""
    t0 = time.monotonic()
    roots = [str(r) for r in roots]
    ignore = tuple(ignore)
    res = ScanResult(collection)
    # a copy: the walk pops what it finds, and the store's mapping is not ours to change
    rows = dict(db.live_stats(collection))
    available: list[str] = []
    skip = set(map(str, skip_roots))
    if not roots:
        # nothing says where the collection's files live (one an older version ingested once):
        # its rows are kept as they are, never taken as deleted
        res.seconds = time.monotonic() - t0
        return res
    for root in roots:
        state = "skipped" if root in skip else root_state(root)
        if state == "missing" and root not in skip and root in rows and root_state(os.path.dirname(root)) == "ok":
            continue  # a file root that is gone while its folder is there: deleted, below
        if state != "ok":
            res.unavailable_roots.append(root)
            continue
        available.append(root)
        for f in walk_files(Path(root), ignore):
            p = str(f)
            try:
                st = f.stat()
            except OSError:
                continue
            res.files_seen += 1
            if res.files_seen % PROGRESS_EVERY == 0:
                if progress is not None:
                    progress(res.files_seen)
                if cancelled():
                    res.seconds = time.monotonic() - t0
                    return res
            row = rows.pop(p, None)
            if row is None or row["extract_status"] not in FINISHED or not stat_unchanged(row, st):
                # A path with content in the index goes through the pipeline, which removes it.
                sk = skipped_file(p, root, st) if row is None or row["extract_status"] == "skipped" else None
                if sk is not None:
                    res.skipped.append(sk)
                else:
                    res.upserts.append(p)
            elif cfg is not None and cap_lifted(row, p, st.st_size, cfg):
                res.upserts.append(p)
    for p in rows:
        if any(within(p, r) for r in res.unavailable_roots):
            continue  # never delete what an absent root holds
        # Gone, or present but no longer walked (now ignored, a symlink, outside every root): the
        # worker removes it unless it finds an indexable file there when the job runs. A skipped
        # row of a path that is simply gone has nothing in the index: its row is settled directly.
        if rows[p]["extract_status"] == "skipped" and not os.path.lexists(p):
            res.skipped_gone.append(p)
        else:
            res.deletes.append(p)
    res.seconds = time.monotonic() - t0
    return res

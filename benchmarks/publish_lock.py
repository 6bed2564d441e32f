"""How long publishing a large text file holds the collection's writer lock, with the real Pipeline.

Writes a text file of ``--mb`` MiB (random words, 12 per line), ingests it with the hash embedder
(no model: the numbers are the store's own) at ``chunk_size = 256`` with the vectors left to the
embedding stage (as the daemon does), then ingests an edited version of it (one line changed), so
the second publish also removes the first version. Every hold of rag.sqlite3's writer lock is
timed (the lock object of ragweedd/store/sqlite/connection.py is wrapped; nothing in ragweedd changes) and
the longest, the 90th percentile, the median, the hold of the transaction that shows the new
document and how many there were are printed per publish, with the publish's wall time. The
longest hold is what a small file's publish may wait for. Writes JSON
(benchmarks/results/publish_lock.json).

    .venv/bin/python benchmarks/publish_lock.py [--mb 60] [--name after]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._common import table, write_json  # noqa: E402
from benchmarks.big_text_rss import write_text  # noqa: E402
from ragweedd.store.backends import open_data_dir


class TimedLock:
    """An RLock that records how long each outermost hold lasted."""

    def __init__(self) -> None:
        self.inner = threading.RLock()
        self.depth = threading.local()
        self.holds: list[float] = []
        self.t0 = 0.0
        self.marked = False  # the hold under way is the switch
        self.switch: list[float] = []

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        ok = self.inner.acquire(blocking, timeout)
        if ok:
            d = getattr(self.depth, "n", 0)
            if d == 0:
                self.t0 = time.perf_counter()
            self.depth.n = d + 1
        return ok

    def release(self) -> None:
        self.depth.n -= 1
        if self.depth.n == 0:
            self.holds.append(time.perf_counter() - self.t0)
            if self.marked:
                self.switch.append(self.holds[-1])
                self.marked = False
        self.inner.release()

    __enter__ = acquire

    def __exit__(self, *exc: object) -> None:
        self.release()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mb", type=float, default=60.0)
    ap.add_argument("--name", default="publish_lock", help="name of the JSON file in benchmarks/results")
    a = ap.parse_args()

    from ragweedd.config import load_config
    from ragweedd.embed.hashing import HashEmbedder
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.paths import Paths
    from ragweedd.store.sqlite import connection as store_sqlite

    rows = []
    with tempfile.TemporaryDirectory(prefix="ragweed-publock-") as tmp:
        base = Path(tmp)
        folder = base / "docs"
        folder.mkdir()
        f = folder / "big.txt"
        write_text(f, a.mb, False)
        cfg = load_config(text=f"chunk_size = 256\ningest_max_text_mb = {int(a.mb) + 2}\n"
                               "[embed]\nmodel = 'hash:64'\nbatch_size = 256\n", env={})
        paths = Paths.resolve(str(base / "data"), str(base / "state"), str(base / "cache"))
        lock = TimedLock()
        db = paths.rag_db("c")
        db.parent.mkdir(parents=True, exist_ok=True)
        db.touch(mode=0o600)
        store_sqlite._WRITER_LOCKS[os.path.realpath(db)] = lock  # type: ignore[assignment]
        from ragweedd.store.sqlite import rag_stage

        # The transaction that shows the new document (the whole copy, in the single-swap
        # version): its hold is reported apart.
        name = "_switch" if hasattr(rag_stage, "_switch") else "_swap"
        inner = getattr(rag_stage, name)

        def marked(*args, **kw):
            lock.marked = True
            return inner(*args, **kw)

        setattr(rag_stage, name, marked)
        pipe = Pipeline(cfg, paths, HashEmbedder(64), defer_vectors=True, stores=open_data_dir(paths))
        try:
            for what in ("first version", "edited version (replaces the first)"):
                if what.startswith("edited"):
                    with open(f, "r+") as fh:
                        fh.seek(1000)
                        fh.write("edited")
                lock.holds.clear()
                lock.switch.clear()
                t0 = time.monotonic()
                out = pipe.ingest_file("c", f, folder)
                holds = list(lock.holds)
                rows.append({"publish": what, "file_mib": round(f.stat().st_size / 2**20, 1), "status": out.status,
                             "chunks": out.chunks, "seconds": round(time.monotonic() - t0, 1),
                             "lock_holds": len(holds), "longest_hold_s": round(max(holds), 3),
                             "p90_hold_s": round(statistics.quantiles(holds, n=10)[-1], 3) if len(holds) > 1 else None,
                             "median_hold_s": round(statistics.median(holds), 4),
                             "switch_hold_s": round(max(lock.switch), 3) if lock.switch else None,
                             "held_total_s": round(sum(holds), 1)})
        finally:
            pipe.close()
    print(table(rows, list(rows[0])))
    print(write_json(a.name, {"mb": a.mb, "rows": rows}))
    return 0


if __name__ == "__main__":
    random.seed(0)
    raise SystemExit(main())

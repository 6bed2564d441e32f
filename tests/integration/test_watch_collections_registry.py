"""The collections registry is read without a lock by every API thread (status, listings, the
searchers' collection names): adding or removing a collection must never change a dict a reader is
iterating (issue 12 item 9: 500 "dictionary changed size during iteration" during searches)."""

from __future__ import annotations

from ragweedd.config import load_config
from ragweedd.paths import Paths
from ragweedd.store.backends import open_data_dir
from ragweedd.store.sqlite.job_queue import JobQueue
from ragweedd.watch.collections import Collections
from ragweedd.watch.debounce import Debouncer
from ragweedd.watch.watcher import Watcher


def test_a_reader_iterating_the_collections_survives_add_and_remove(tmp_path):
    cfg = load_config(env={}, text=f'data_dir = "{tmp_path}/data"\nstate_dir = "{tmp_path}/s"\n'
                                   f'cache_dir = "{tmp_path}/c"\n')
    paths = Paths.from_config(cfg).ensure()
    queue = JobQueue(paths.ingest_db)
    deb = Debouncer(queue.put_many, debounce_s=0.1, delete_hold_s=0.1).start()
    cols = Collections(cfg, paths, queue, deb, lambda c: Watcher(
        deb, known_under=c.known_under, is_known=c.is_known, on_root_event=lambda *a: None,
        on_overflow=lambda names: None), open_db=open_data_dir(paths).open_ingest)
    try:
        for n in ("a", "b"):
            (tmp_path / n).mkdir()
            cols.add(n, [str(tmp_path / n)])
        (tmp_path / "x").mkdir()
        it = iter(cols.items)  # a reader part-way through (list(cols.items) on another thread)
        assert next(it) == "a"
        cols.add("x", [str(tmp_path / "x")])
        assert next(it) == "b"  # before: RuntimeError: dictionary changed size during iteration
        it = iter(cols.items)
        assert next(it) == "a"
        cols.remove("b")
        assert list(it) == ["b", "x"]  # the reader's snapshot
        assert sorted(cols.items) == ["a", "x"]
    finally:
        deb.stop()
        cols.close()
        queue.close()

"""Files skipped from their stat (empty, or a type no extractor reads) cost a stat and a row, not a
job and a pipeline run: the scan and the watcher's events write their rows in batches and queue
only what needs the pipeline. Real SQLite, the real scan, the real queue and workers.

The rows must be exactly what the pipeline writes, and a skipped file that is later edited,
renamed or deleted must settle exactly as before: never stale, never twice."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.ingest.worker import Workers, make_extract
from ragweedd.paths import Paths
from ragweedd.store.backends import open_data_dir
from ragweedd.store.sqlite.ingest_db import IngestDB
from ragweedd.store.sqlite.job_queue import JobQueue
from ragweedd.store.types import SkippedFile
from ragweedd.watch.collections import Collections
from ragweedd.watch.debounce import Debouncer
from ragweedd.watch.watcher import Watcher
from tests.tools import wait_until

ROOT = Path(__file__).resolve().parents[2]
ROW_FIELDS = ("md5", "size_bytes", "chunks", "extract_status", "mtime_ns", "inode", "error", "tries", "root",
              "superseded")


class FakeWatcher:
    degraded: dict = {}

    def watch(self, *a):
        return "native"

    def unwatch(self, *a):
        pass

    def mode(self, *a):
        return "native"

    def stop(self):
        pass


def _cfg(tmp_path):
    return load_config(env={}, text=f'data_dir = "{tmp_path}/data"\nstate_dir = "{tmp_path}/s"\n'
                                   f'cache_dir = "{tmp_path}/c"\nchunk_size = 64\n')


@pytest.fixture
def env(tmp_path):
    cfg = _cfg(tmp_path)
    paths = Paths.from_config(cfg).ensure()
    queue = JobQueue(paths.ingest_db)
    made: list = []

    def collections(watcher_factory=lambda c: FakeWatcher(), debouncer=None) -> Collections:
        cols = Collections(cfg, paths, queue, debouncer, watcher_factory, open_db=open_data_dir(paths).open_ingest)
        made.append(cols)
        return cols

    yield cfg, paths, queue, collections
    for c in made:
        c.close()
    queue.close()


def _make(root: Path, n: int) -> list[Path]:
    """n files with nothing to index: half empty notes, half bytes of a type nothing reads."""
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for i in range(n):
        p = root / (f"e{i:04d}.txt" if i % 2 == 0 else f"f{i:04d}.bin")
        if i % 2:
            p.write_bytes(b"\x00\x01 no format ragweedd reads")
        else:
            p.touch()
        out.append(p)
    return out


def _live(paths, collection: str) -> dict[str, sqlite3.Row]:
    db = IngestDB(paths.ingest_db, readonly=True)
    try:
        return {r["source_file"]: r for r in db.live_files(collection)}
    finally:
        db.close()


def _jobs(queue: JobQueue) -> list[tuple[str, str]]:
    return sorted((r["path"], r["op"]) for r in queue.conn.execute("SELECT path, op FROM jobs"))


def test_a_scan_writes_skipped_rows_itself_and_queues_only_real_files(env, tmp_path):
    cfg, paths, queue, collections = env
    root = tmp_path / "drop"
    files = _make(root, 400)
    real = [root / f"note{i}.txt" for i in range(3)]
    for i, p in enumerate(real):
        p.write_text(f"Real note number {i} about lighthouses and their keepers.\n" * 5)
    cols = collections()
    cols.add("c", [str(root)])
    summary = cols.scan("c")
    # Before, every one of the 400 became a job and a pipeline run: 403 jobs and no rows here.
    assert _jobs(queue) == sorted((str(p), "upsert") for p in real)
    rows = _live(paths, "c")
    assert sorted(rows) == sorted(str(p) for p in files)
    assert {r["extract_status"] for r in rows.values()} == {"skipped"}
    assert summary["skipped"] == 400 and summary["upserts"] == 3
    # Exactly the rows the pipeline writes for the same files (same md5, reason, stat, root).
    pipe = Pipeline(cfg, paths, HashEmbedder(64), stores=open_data_dir(paths))
    try:
        for p in (files[0], files[1]):
            assert pipe.ingest_file("ref", p, root).status == "skipped"
        ref = _live(paths, "ref")
    finally:
        pipe.close()
    for p in (files[0], files[1]):
        assert {k: rows[str(p)][k] for k in ROW_FIELDS} == {k: ref[str(p)][k] for k in ROW_FIELDS}
    # A second scan finds nothing to do: no job, no row touched.
    before = {p: r["updated_at"] for p, r in rows.items()}
    again = cols.scan("c")
    assert again["skipped"] == 0 and again["upserts"] == 3  # the real notes, still queued (no worker here)
    assert {p: r["updated_at"] for p, r in _live(paths, "c").items()} == before
    assert len(_jobs(queue)) == 3


@pytest.mark.parametrize("name,size", [("empty.txt", 0), ("x.bin", 10), ("x.bin", 0), ("NOEXT", 5),
                                       ("README", 0), ("README", 9), ("doc.PDF", 0), ("a.md", 3)])
def test_the_skip_decision_and_its_words_are_the_pipelines(name, size):
    from ragweedd.config import load_config
    from ragweedd.files.skip_rules import skip_reason

    src = f"/somewhere/{name}"
    cfg = load_config(text="", env={})
    assert skip_reason(src, size) == Pipeline._skip_from_stat(src, size, cfg)


def test_files_over_a_size_cap_are_left_to_the_pipeline_by_the_watch_side():
    from ragweedd.config import load_config
    from ragweedd.files.skip_rules import skip_reason

    cfg = load_config(text="ingest_max_text_mb = 1\n", env={})
    why = Pipeline._skip_from_stat("/somewhere/big.txt", 2 << 20, cfg)
    assert why is not None and "larger than ingest_max_text_mb (1 MiB)" in why[1]
    assert skip_reason("/somewhere/big.txt", 2 << 20) is None


def _workers(cfg, paths, queue, cols) -> Workers:
    stores = open_data_dir(paths)

    def new_pipeline(should_stop):
        return Pipeline(cfg, paths, HashEmbedder(64), extract=make_extract(cfg, should_stop=should_stop),
                        should_stop=should_stop, stores=stores)

    w = Workers(cfg, paths, queue, new_pipeline=new_pipeline, resolve=cols.resolve, on_changes=lambda c: None,
                on_root_missing=cols.on_root_missing)
    w.start()
    return w


def _drained(queue: JobQueue, workers: Workers) -> bool:
    d = queue.depth()
    return not d.get("queued") and not d.get("running") and workers.busy == 0


def test_skipped_files_edited_renamed_or_deleted_settle_as_before_through_a_scan(env, tmp_path):
    cfg, paths, queue, collections = env
    root = tmp_path / "drop"
    files = _make(root, 40)
    cols = collections()
    cols.add("c", [str(root)])
    workers = _workers(cfg, paths, queue, cols)
    try:
        cols.scan("c")
        assert len(_live(paths, "c")) == 40 and not _jobs(queue)
        edited, renamed, deleted, blob_renamed = files[0], files[2], files[4], files[1]
        edited.write_text("Now the empty note holds words about tidal pools and anemones.\n" * 4)
        os.rename(renamed, root / "renamed.txt")
        deleted.unlink()
        os.rename(blob_renamed, root / "renamed.bin")
        cols.scan("c")
        wait_until(lambda: _drained(queue, workers), 30, what="the queue to drain")
    finally:
        workers.stop()
    rows = _live(paths, "c")
    on_disk = sorted(str(p) for p in root.iterdir())
    assert sorted(rows) == on_disk  # nothing stale, nothing missing
    assert rows[str(edited)]["extract_status"] == "done" and rows[str(edited)]["chunks"] > 0
    assert rows[str(root / "renamed.txt")]["extract_status"] == "skipped"
    assert rows[str(root / "renamed.bin")]["extract_status"] == "skipped"
    assert {r["extract_status"] for p, r in rows.items() if p != str(edited)} == {"skipped"}
    # The edit only: not one pipeline run for a skipped file, found, renamed or deleted.
    assert workers.progress.done == 1
    assert sum(1 for r in queue.conn.execute("SELECT 1 FROM ingest_files WHERE collection='c' AND superseded=1"
                                             " AND extract_status='deleted'")) == 3


def test_watcher_events_write_skipped_rows_and_queue_real_files_first(env, tmp_path, monkeypatch):
    cfg, paths, queue, collections = env
    root = tmp_path / "live"
    root.mkdir()
    holder: dict = {}
    deb = Debouncer(lambda items: holder["cols"].take_events(items), debounce_s=0.1, delete_hold_s=0.1)
    cols = holder["cols"] = collections(lambda c: Watcher(
        deb, known_under=c.known_under, is_known=c.is_known, on_root_event=lambda *a: None,
        on_overflow=lambda names: None), deb)
    order: list[str] = []
    queued: set[tuple[str, str]] = set()
    real_put, real_record = queue.put_many, IngestDB.record_skipped

    def put_many(items, **kw):
        order.extend("job" for _ in items)
        queued.update((p, op) for _, p, op, _ in items)
        return real_put(items, **kw)

    def record_skipped(self, collection, files):
        order.extend("row" for _ in files)
        return real_record(self, collection, files)

    monkeypatch.setattr(queue, "put_many", put_many)
    monkeypatch.setattr(IngestDB, "record_skipped", record_skipped)
    workers = None
    try:
        deb.start()
        cols.add("c", [str(root)])
        time.sleep(0.3)
        real = root / "zz-real.txt"
        real.write_text("A real note about kelp forests arrives with the empty files.\n" * 4)
        files = _make(root, 300)
        wait_until(lambda: len(_live(paths, "c")) >= 300, 30, what="rows for the 300 skipped files")
        assert _jobs(queue) == [(str(real), "upsert")]  # before: 301 jobs, no rows
        assert "job" in order and order.index("job") < order.index("row")
        workers = _workers(cfg, paths, queue, cols)
        wait_until(lambda: _live(paths, "c").get(str(real)) is not None
                   and _live(paths, "c")[str(real)]["extract_status"] == "done", 30, what="the real note")
        # Edited, renamed and deleted while watched: the same outcomes as a scan gives.
        files[0].write_text("The empty note now talks about sea otters and their rafts.\n" * 4)
        os.rename(files[2], root / "renamed.txt")
        files[4].unlink()

        def settled():
            rows = _live(paths, "c")
            return (sorted(rows) == sorted(str(p) for p in root.iterdir())
                    and rows[str(files[0])]["extract_status"] == "done" and _drained(queue, workers))
        wait_until(settled, 30, what="the edits, rename and delete to settle")
    finally:
        if workers is not None:
            workers.stop()
        deb.stop()
    rows = _live(paths, "c")
    assert rows[str(root / "renamed.txt")]["extract_status"] == "skipped"
    # Jobs only for what needs the pipeline: the real note and the edit. The rename's old path and
    # the deleted file held skipped rows: those are marked deleted without a job.
    assert queued == {(str(real), "upsert"), (str(files[0]), "upsert")}


def test_rows_that_only_the_pipeline_may_settle_are_left_to_it(env, tmp_path):
    from ragweedd.files.skip_rules import skipped_file
    from ragweedd.watch import skipped

    cfg, paths, queue, _ = env
    root = tmp_path / "r"
    root.mkdir()
    queued, indexed, current, moved, fresh = (root / n for n in ("q.txt", "i.txt", "c.txt", "m.txt", "n.txt"))
    for p in (queued, current, moved, fresh):
        p.touch()
    indexed.write_text("Indexed words about harbour seals.\n" * 4)
    pipe = Pipeline(cfg, paths, HashEmbedder(64), stores=open_data_dir(paths))
    try:
        assert pipe.ingest_file("c", indexed, root).status == "indexed"
        assert pipe.ingest_file("c", current, root).status == "skipped"
        assert pipe.ingest_file("c", moved, root).status == "skipped"
        indexed.write_bytes(b"")  # now empty: its indexed content must leave, which only the pipeline does
    finally:
        pipe.close()
    queue.put("c", str(queued), "upsert", str(root))
    os.utime(moved, ns=(1, 1))
    db = IngestDB(paths.ingest_db)
    try:
        before = db.live_file("c", str(current))["updated_at"]
        files = [skipped_file(str(p), str(root), os.lstat(p)) for p in (queued, indexed, current, moved, fresh)]
        assert all(files)
        gone = root / "gone.txt"
        gone.touch()
        files.append(skipped_file(str(gone), str(root), os.lstat(gone)))
        gone.unlink()  # deleted after its stat, before its row: its event may already be handled
        written, late = skipped.record(db, "c", files, write_allowed=lambda write: write())
        assert sorted(f.path for f in late) == sorted([str(queued), str(indexed), str(gone)])
        assert written == 3
        assert db.live_file("c", str(current))["updated_at"] == before  # already current: untouched
        assert db.live_file("c", str(moved))["mtime_ns"] == 1
        assert db.live_file("c", str(fresh))["extract_status"] == "skipped"
        assert db.live_file("c", str(indexed))["extract_status"] == "done"
        # Deletes: only a skipped row of a path that is gone is settled without the pipeline.
        for p in (current, moved, indexed):
            p.unlink()
        moved.touch()  # back on disk after it was found gone
        never = str(root / "never-seen.txt")
        done, back = skipped.forget(db, "c", [(str(p), str(root)) for p in (current, moved, indexed, queued)]
                                    + [(never, str(root))], write_allowed=lambda write: write())
        assert done == 1 and db.live_file("c", str(current)) is None
        assert sorted(back) == sorted([(str(moved), str(root), "upsert"), (str(indexed), str(root), "delete"),
                                       (str(queued), str(root), "delete"), (never, str(root), "delete")])
        assert db.live_file("c", str(indexed))["extract_status"] == "done"
    finally:
        db.close()


_CRASHER = r"""
import sys, time
from ragweedd.config import load_config
from ragweedd.paths import Paths
from ragweedd.store.types import SkippedFile
from ragweedd.store.sqlite.ingest_db import IngestDB
from ragweedd.store.sqlite.job_queue import JobQueue
from ragweedd.store.backends import open_data_dir
from ragweedd.watch import skipped
from ragweedd.watch.collections import Collections

tmp, root = sys.argv[1], sys.argv[2]
skipped.BATCH = 100
real = IngestDB.record_skipped
def slow(self, collection, files):
    held = real(self, collection, files)
    print("batch", flush=True)
    time.sleep(0.05)
    return held
IngestDB.record_skipped = slow

class W:
    degraded = {}
    def watch(self, *a): return "native"
    def unwatch(self, *a): pass
    def mode(self, *a): return "native"
    def stop(self): pass

cfg = load_config(env={}, text=f'data_dir = "{tmp}/data"\nstate_dir = "{tmp}/s"\ncache_dir = "{tmp}/c"\n')
paths = Paths.from_config(cfg).ensure()
cols = Collections(cfg, paths, JobQueue(paths.ingest_db), None, lambda c: W(), open_db=open_data_dir(paths).open_ingest)
if "c" not in cols.items:
    cols.add("c", [root])
cols.scan("c")
print("finished", flush=True)
"""


def test_kill_9_while_skipped_rows_are_written_then_a_scan_converges(env, tmp_path):
    cfg, paths, queue, collections = env
    root = tmp_path / "drop"
    files = _make(root, 3000)
    env_vars = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", _CRASHER, str(tmp_path), str(root)], stdout=subprocess.PIPE,
                            env=env_vars, cwd=str(ROOT), text=True)
    batches = 0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            batches += line.startswith("batch")
            if batches == 5:
                proc.kill()  # SIGKILL in the middle of the batches
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)
    killed_with = len(_live(paths, "c"))
    assert 0 < killed_with < len(files)
    assert killed_with % 100 == 0  # a batch is one transaction: all of it or none of it
    # The restart's scan writes the rest; nothing is duplicated, nothing queued.
    cols = collections()
    summary = cols.scan("c")
    assert summary["skipped"] == len(files) - killed_with
    rows = _live(paths, "c")
    assert sorted(rows) == sorted(str(p) for p in files)
    n = queue.conn.execute("SELECT count(*) FROM ingest_files WHERE collection='c'").fetchone()[0]
    assert n == len(files)
    assert _jobs(queue) == []


def test_status_counts_walk_the_state_index_not_the_table(env, tmp_path):
    """Status counts live files by state, and each collection's indexed ones, on every call: with
    200,000 skipped rows that was a scan of the whole table (170 + 80 ms a status)."""
    _, paths, _, _ = env
    db = IngestDB(paths.ingest_db)
    try:
        db.record_skipped("c", [SkippedFile(f"/r/f{i}.bin", "/r", 3, 1, i, None, "unsupported") for i in range(3000)])
        seen: list[str] = []
        db.conn.set_trace_callback(seen.append)
        assert db.done_count("c") == 0
        assert db.counts_by_state() == {"skipped": 3000}
        db.conn.set_trace_callback(None)
        plans = {q: " ".join(str(r[3]) for r in db.conn.execute("EXPLAIN QUERY PLAN " + q)) for q in seen}
    finally:
        db.close()
    assert len(plans) == 2, plans
    for q, plan in plans.items():
        assert "ingest_files_state" in plan, (q, plan)
    assert any("SEARCH" in p for p in plans.values()), plans  # done_count: a range, not a scan


def test_skipped_files_under_overlapping_roots_get_a_row_in_every_collection(env, tmp_path):
    """Two collections on one folder and a third on its parent: an empty or unreadable file dropped
    there is a skipped row in all three, and its delete settles in all three, without a job."""
    cfg, paths, queue, collections = env
    parent = tmp_path / "x"
    root = parent / "docs"
    root.mkdir(parents=True)
    holder: dict = {}
    deb = Debouncer(lambda items: holder["cols"].take_events(items), debounce_s=0.1, delete_hold_s=0.1)
    cols = holder["cols"] = collections(lambda c: Watcher(
        deb, known_under=c.known_under, is_known=c.is_known, on_root_event=lambda *a: None,
        on_overflow=lambda names: None), deb)
    names = ("c1", "b2", "whole")
    try:
        deb.start()
        cols.add("c1", [str(root)])
        cols.add("b2", [str(root)])
        cols.add("whole", [str(parent)])
        time.sleep(0.3)
        files = _make(root, 6)
        want = sorted(str(p) for p in files)
        wait_until(lambda: all(sorted(_live(paths, n)) == want for n in names), 30,
                   what="a skipped row in every collection for every file")
        for p in files[:3]:
            p.unlink()
        left = sorted(str(p) for p in files[3:])
        wait_until(lambda: all(sorted(_live(paths, n)) == left for n in names), 30,
                   what="the deletes to settle in every collection")
    finally:
        deb.stop()
    assert _jobs(queue) == []  # rows and their deletes, no job in any collection

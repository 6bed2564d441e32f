"""Debouncer (real files, real timing) and reconciliation scans (real pipeline and SQLite)."""

from __future__ import annotations

import os
import threading
import time

import pytest

from ragweedd.config import load_config
from ragweedd.files.ignore import is_ignored
from ragweedd.files.roots import root_state
from ragweedd.paths import Paths
from ragweedd.store.backends import open_data_dir
from ragweedd.watch.debounce import Debouncer
from ragweedd.watch.reconcile import scan
from tests.tools import EventSink


def test_burst_of_events_is_one_upsert(tmp_path):
    sink = EventSink()
    d = Debouncer(sink, debounce_s=0.2, delete_hold_s=0.2).start()
    p = tmp_path / "a.txt"
    for i in range(20):
        p.write_text("x" * i)
        d.upsert("c", str(p))
        time.sleep(0.01)
    time.sleep(0.6)
    d.stop()
    assert sink.items == [("c", str(p), "upsert", None)]


def test_delete_then_recreate_within_hold_is_a_modify(tmp_path):
    sink = EventSink()
    d = Debouncer(sink, debounce_s=0.1, delete_hold_s=0.4).start()
    p = tmp_path / "a.txt"
    d.delete("c", str(p))
    time.sleep(0.15)  # past the debounce but inside the delete hold
    p.write_text("new")
    d.upsert("c", str(p))
    time.sleep(0.6)
    d.stop()
    assert sink.items == [("c", str(p), "upsert", None)]


def test_a_lone_delete_is_emitted_after_the_hold(tmp_path):
    sink = EventSink()
    d = Debouncer(sink, debounce_s=0.05, delete_hold_s=0.3).start()
    t0 = time.monotonic()
    d.delete("c", str(tmp_path / "gone.txt"))
    with sink.cv:
        sink.cv.wait_for(lambda: sink.items, 60)
    assert time.monotonic() - t0 >= 0.28
    d.stop()
    assert sink.items == [("c", str(tmp_path / "gone.txt"), "delete", None)]


def test_a_file_still_growing_is_not_emitted_until_stable(tmp_path):
    sink = EventSink()
    d = Debouncer(sink, debounce_s=0.1, delete_hold_s=0.1).start()
    p = tmp_path / "big.bin"
    p.write_bytes(b"")
    d.upsert("c", str(p))  # one event, then the writer keeps writing without further events
    # The looks are debounce_s apart; a writer faster than that must never be caught "stable". On
    # a loaded machine the writer itself may stall longer than that, and then the file did stand
    # still: only a write gap under debounce_s makes an emission wrong.
    last = time.monotonic()
    for _ in range(20):
        time.sleep(0.04)
        with open(p, "ab") as f:
            f.write(b"y" * 1000)
        now = time.monotonic()
        stalled, last = now - last >= 0.1, now
        if stalled:
            break
        assert not sink.items, "emitted while the file was still changing"
    with sink.cv:
        sink.cv.wait_for(lambda: sink.items, 60)
    d.stop()
    assert sink.items == [("c", str(p), "upsert", None)]


def test_stop_with_flush_hands_over_held_events(tmp_path):
    sink = EventSink()
    d = Debouncer(sink, debounce_s=60, delete_hold_s=60).start()
    d.upsert("c", str(tmp_path / "x"), "/r")
    d.stop(flush=True)
    assert sink.items == [("c", str(tmp_path / "x"), "upsert", "/r")]


@pytest.mark.parametrize("rel,ignored", [
    ("a.txt", False), ("a.txt.swp", True), ("a.txt~", True), (".#a.txt", True), ("#a.txt#", True),
    ("~$report.docx", True), (".~lock.report.odt#", True), ("4913", True), (".DS_Store", True),
    ("Thumbs.db", True), (".git/config", True), ("src/node_modules/x.js", True),
    ("a.txt___jb_tmp___", True), ("a.txt___jb_old___", True), ("drafts/x.md", True), ("final/x.md", False),
])
def test_ignore_patterns(rel, ignored):
    assert is_ignored(rel, ["drafts/**"]) is ignored


# --- reconciliation -------------------------------------------------------------------------------
@pytest.fixture
def pipe(tmp_path):
    from ragweedd.embed.hashing import HashEmbedder
    from ragweedd.ingest.pipeline import Pipeline

    cfg = load_config(env={}, text=f'data_dir = "{tmp_path}/data"\nstate_dir = "{tmp_path}/s"\n'
                                   f'cache_dir = "{tmp_path}/c"\n')
    p = Pipeline(cfg, Paths.from_config(cfg), HashEmbedder(64), stores=open_data_dir(Paths.from_config(cfg)))
    yield p
    p.close()


def _ingest_all(pipe, root):
    for f in sorted(root.rglob("*.txt")):
        pipe.ingest_file("c", f, root)


def test_scan_finds_only_differences(pipe, tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    for n in "abcd":
        (root / f"{n}.txt").write_text(f"file {n} text")
    _ingest_all(pipe, root)
    assert scan(pipe.db, "c", [str(root)]).upserts == []
    time.sleep(0.01)
    (root / "a.txt").write_text("file a changed text")   # modified
    (root / "b.txt").unlink()                             # deleted
    (root / "e.txt").write_text("file e is new")          # new
    os.rename(root / "c.txt", root / "c2.txt")            # renamed
    (root / "x.swp").write_text("ignored")                 # never seen
    res = scan(pipe.db, "c", [str(root)])
    assert sorted(res.upserts) == sorted(str(root / n) for n in ("a.txt", "e.txt", "c2.txt"))
    assert sorted(res.deletes) == sorted(str(root / n) for n in ("b.txt", "c.txt"))
    assert res.files_seen == 4


def test_scan_of_a_missing_root_deletes_nothing(pipe, tmp_path):
    root = tmp_path / "usb"
    root.mkdir()
    (root / "a.txt").write_text("on the usb stick")
    _ingest_all(pipe, root)
    os.rename(root, tmp_path / "elsewhere")
    assert root_state(root) == "missing"
    res = scan(pipe.db, "c", [str(root)])
    assert res.deletes == [] and res.unavailable_roots == [str(root)]


def test_scan_reenqueues_unfinished_ingests(pipe, tmp_path):
    root = tmp_path / "r"
    root.mkdir()
    (root / "a.txt").write_text("half done")
    _ingest_all(pipe, root)
    pipe.db.conn.execute("UPDATE ingest_files SET extract_status='embedding'")  # killed mid-file
    assert scan(pipe.db, "c", [str(root)]).upserts == [str(root / "a.txt")]


def test_scan_drops_rows_of_paths_now_ignored(pipe, tmp_path):
    root = tmp_path / "r"
    (root / "drafts").mkdir(parents=True)
    (root / "drafts" / "d.txt").write_text("a draft")
    _ingest_all(pipe, root)
    res = scan(pipe.db, "c", [str(root)], ["drafts/**"])
    assert res.deletes == [str(root / "drafts" / "d.txt")]


def test_a_moved_folder_emits_every_new_path_before_any_old_one(tmp_path):
    """Renaming an indexed folder must never remove content that the new paths hold: the queue takes
    upserts before deletes that are ready with them, so each new path's upsert must be out before
    its old path's delete (a CI run
    caught one file removed and re-added when the old paths' deletes came out ahead)."""
    from ragweedd.watch.watcher import Watcher

    root = tmp_path / "vault"
    (root / "projects").mkdir(parents=True)
    old = [str(root / "projects" / f"n{i:03d}.txt") for i in range(300)]
    for i, p in enumerate(old):
        with open(p, "w") as f:
            f.write(f"note {i}")
    sink = EventSink()
    d = Debouncer(sink, debounce_s=0.2, delete_hold_s=0.2).start()
    w = Watcher(d, known_under=lambda c, prefix: [p for p in old if p.startswith(prefix + os.sep)],
                is_known=lambda c, p: p in old, on_root_event=lambda c, r: None, on_overflow=lambda names: None)
    try:
        w.watch("c", str(root))
        time.sleep(0.3)
        os.rename(root / "projects", root / "archive")
        with sink.cv:
            sink.cv.wait_for(lambda: sum(1 for i in sink.items if i[2] == "delete") >= len(old), 120)
    finally:
        w.stop()
        d.stop()
    ops = [(op, path) for _, path, op, _ in sink.items]
    ups = {p for op, p in ops if op == "upsert"}
    assert ups == {p.replace(os.sep + "projects" + os.sep, os.sep + "archive" + os.sep) for p in old}
    assert {p for op, p in ops if op == "delete"} == set(old)
    at = {(op, p): i for i, (op, p) in enumerate(ops)}  # watchdog also reports each file's own move
    late = [p for p in old if at[("upsert", p.replace(os.sep + "projects" + os.sep, os.sep + "archive" + os.sep))]
            > at[("delete", p)]]
    assert not late, f"{len(late)} old paths were deleted before their new path was upserted"


def test_a_scan_walking_the_disk_does_not_hold_up_listings(pipe, tmp_path, monkeypatch):
    """GET /v1/collections (describe) and the watcher's lookups must answer while a scan walks a
    large folder: the scan holds no lock of theirs during the walk."""
    import ragweedd.watch.reconcile as reconcile
    from ragweedd.watch.collections import Collections

    root = tmp_path / "big"
    root.mkdir()
    for i in range(5):
        (root / f"f{i}.txt").write_text(f"file {i}")
    _ingest_all(pipe, root)

    class FakeWatcher:
        degraded: dict = {}

        def watch(self, *a):
            return "native"

        def unwatch(self, *a):
            pass

        def watching(self, *a):
            return True

        def mode(self, *a):
            return "native"

        def stop(self):
            pass

    class FakeQueue:
        items: list = []

        def put_many(self, items):
            self.items.extend(items)

    walking, release = threading.Event(), threading.Event()
    real_walk = reconcile.walk_files

    def slow_walk(*a, **kw):
        for f in real_walk(*a, **kw):
            walking.set()
            assert release.wait(10)
            yield f

    monkeypatch.setattr(reconcile, "walk_files", slow_walk)
    cols = Collections(pipe.cfg, pipe.paths, FakeQueue(), None, lambda c: FakeWatcher(),
                       open_db=pipe.stores.open_ingest)
    try:
        cols.add("c", [str(root)])
        (root / "new.txt").write_text("new file")
        t = threading.Thread(target=cols.scan, args=("c",))
        t.start()
        assert walking.wait(10)
        t0 = time.monotonic()
        assert cols.describe("c")["documents"] == 5
        assert cols.is_known("c", str(root / "f0.txt"))
        assert len(cols.known_under("c", str(root))) == 5
        assert time.monotonic() - t0 < 1.0
        release.set()
        t.join(10)
        assert not t.is_alive()
        assert [(p, op) for _, p, op, _ in FakeQueue.items] == [(str(root / "new.txt"), "upsert")]
        assert cols.describe("c")["last_scan"]["upserts"] == 1
    finally:
        release.set()
        cols.close()

"""A folder chain a thousand levels deep created while the real Watcher runs: other events keep
flowing, the walk of each appearing folder stays bounded, and the part too deep for it is handed to
a reconciliation scan and reported."""

from __future__ import annotations

import os
import time

import pytest

from ragweedd.files.ignore import is_ignored, walk_files
from ragweedd.watch.debounce import Debouncer
from ragweedd.watch.watcher import WALK_DEPTH, Watcher
from tests.tools import EventSink, folder_chain, remove_folder_chain

# watchdog warns, with every watched path of the chain in the message, when it sets a watch twice
# for one folder of a deep chain: harmless, and megabytes of test output.
pytestmark = pytest.mark.filterwarnings("ignore:Callback with id:RuntimeWarning")

LEVELS = 1000


def _watcher() -> tuple[EventSink, list[list[str]], Debouncer, Watcher]:
    """A real Watcher over a real Debouncer that reports to an event sink, and the scans it asks for."""
    sink = EventSink()
    rescans: list[list[str]] = []
    d = Debouncer(sink, debounce_s=0.1, delete_hold_s=0.1).start()
    w = Watcher(d, known_under=lambda c, p: [], is_known=lambda c, p: False, on_root_event=lambda c, r: None,
                on_overflow=lambda names: None, on_rescan=rescans.append)
    return sink, rescans, d, w


def test_a_thousand_level_folder_created_while_watching_does_not_stall_new_files(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    sink, rescans, d, w = _watcher()
    try:
        assert w.watch("c", str(root)) == "native"
        time.sleep(0.3)
        fd = folder_chain(str(root), "deep", LEVELS, pause_s=0.001)
        try:
            with open(os.open("bottom.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
                f.write("at the bottom")
        finally:
            os.close(fd)
        fresh = root / "fresh.txt"
        fresh.write_text("written after the deep folder")
        t0 = time.monotonic()
        # Before the walks were bounded this took minutes at 100% CPU.
        assert sink.wait_for_path(str(fresh), 30), "a new file was not reported within 30 s"
        took = time.monotonic() - t0
        assert took < 30
        bottom = str(root / "deep" / os.sep.join(["d"] * LEVELS) / "bottom.txt")
        # Written into a watched folder after it appeared: its own event reports it.
        assert sink.wait_for_path(bottom, 30), "the file at the bottom of the chain was not reported"
    finally:
        w.stop()
        d.stop()
        remove_folder_chain(str(root), "deep")


def test_a_folder_deeper_than_the_walk_moved_in_asks_for_a_scan_and_is_reported(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.close(folder_chain(str(outside), "deep", WALK_DEPTH + 20))
    sink, rescans, d, w = _watcher()
    try:
        assert w.watch("c", str(root)) == "native"
        time.sleep(0.3)
        os.rename(outside / "deep", root / "deep")
        deadline = time.monotonic() + 10
        while not rescans and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ["c"] in rescans  # the part the walk did not list is left to a reconciliation scan
        notes = [n for n in w.degraded.values() if "levels deep" in n]
        assert len(notes) == 1 and f"more than {WALK_DEPTH} levels" in notes[0], w.degraded
        os.rename(root / "deep", outside / "deep")
        w.check()
        assert not w.degraded  # reported until it is gone
    finally:
        w.stop()
        d.stop()


def test_a_bounded_walk_prunes_like_is_ignored_and_reports_what_it_cut(tmp_path):
    root = tmp_path / "r"
    for rel in ["a/keep.txt", "a/.git/x.txt", "a/b/drafts/y.txt", "a/b/z.txt", "node_modules/m.txt",
                "top.txt~", "own/secret.txt", "a/b/c/d/e/deep.txt"]:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x")
    extra = ("drafts/", "/own")
    got = {os.path.relpath(p, root) for p in walk_files(root, extra)}
    every = {os.path.relpath(os.path.join(dp, f), root) for dp, _, fs in os.walk(root) for f in fs}
    assert got == {r for r in every if not is_ignored(r, extra)}
    # The same walk from a subfolder matches patterns against paths relative to the collection root.
    sub = {os.path.relpath(p, root) for p in walk_files(root / "a", ("a/b/**",), base="a/")}
    assert sub == {"a/keep.txt"}
    cut: list[str] = []
    shallow = {os.path.relpath(p, root) for p in walk_files(root / "a", (), base="a/", max_depth=2, cut=cut)}
    assert shallow == {"a/keep.txt", "a/b/z.txt"}
    assert sorted(os.path.relpath(c, root) for c in cut) == ["a/b/c", "a/b/drafts"]

"""Collections whose roots overlap (one folder in two collections, or one root inside another's),
watched by the real Watcher: every change reaches every collection that holds the file."""

from __future__ import annotations

import os
import time

from ragweedd.watch.debounce import Debouncer
from ragweedd.watch.watcher import Watcher
from tests.tools import EventSink


def _watched(tmp_path, pairs):
    sink = EventSink()
    d = Debouncer(sink, debounce_s=0.1, delete_hold_s=0.1).start()
    w = Watcher(d, known_under=lambda c, prefix: [], is_known=lambda c, p: True,
                on_root_event=lambda c, r: None, on_overflow=lambda names: None)
    for name, root in pairs:
        assert w.watch(name, str(root)) == "native"
    time.sleep(0.3)
    return sink, d, w


def _create_edit_delete(sink, path, names):
    path.write_text("first version")
    want = {(n, str(path), "upsert") for n in names}
    assert want <= sink.wait_for(want), f"create reached only {sorted(sink._seen())}"
    sink.clear()
    time.sleep(0.05)
    path.write_text("second version, longer")
    assert want <= sink.wait_for(want), f"edit reached only {sorted(sink._seen())}"
    sink.clear()
    os.unlink(path)
    gone = {(n, str(path), "delete") for n in names}
    assert gone <= sink.wait_for(gone), f"delete reached only {sorted(sink._seen())}"


def test_two_collections_on_one_folder_both_see_every_change(tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    sink, d, w = _watched(tmp_path, [("c1", root), ("b2", root)])
    try:
        _create_edit_delete(sink, root / "both.txt", ["c1", "b2"])
        w.unwatch("b2", str(root))  # the other collection keeps its events
        sink.clear()
        (root / "after.txt").write_text("only c1 now")
        assert ("c1", str(root / "after.txt"), "upsert") in sink.wait_for({("c1", str(root / "after.txt"), "upsert")})
    finally:
        w.stop()
        d.stop()


def test_a_root_inside_another_collections_root_both_see_every_change(tmp_path):
    inner = tmp_path / "x" / "docs"
    inner.mkdir(parents=True)
    sink, d, w = _watched(tmp_path, [("c1", inner), ("whole", tmp_path / "x")])
    try:
        _create_edit_delete(sink, inner / "nested.txt", ["c1", "whole"])
    finally:
        w.stop()
        d.stop()

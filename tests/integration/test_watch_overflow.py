"""Issue 12 item 8: an inotify overflow rescans only the collections on the root whose watch
overflowed, and a root that keeps overflowing is polled instead (and says so).

watchdog reports an overflow only by logging (then rebuilding that watch): the test logs watchdog's
own per-watch line through watchdog's own logger, as its inotify reader does on IN_Q_OVERFLOW."""

from __future__ import annotations

import logging
import os
import threading

from ragweedd.watch.debounce import Debouncer
from ragweedd.watch.watcher import OVERFLOW_LIMIT, Watcher
from tests.tools import wait_until


def _overflow(root) -> None:
    logging.getLogger("watchdog.observers.inotify_c").warning("Inotify queue overflowed; filesystem events were lost")
    logging.getLogger("watchdog.observers.inotify").warning(
        "Inotify queue overflowed; reconciling recursive watches below %r", os.fsencode(str(root)))


def test_overflow_rescans_only_its_root_and_a_root_that_keeps_overflowing_is_polled(tmp_path, monkeypatch):
    import ragweedd.watch.watcher as watcher

    monkeypatch.setattr(watcher, "OVERFLOW_BURST_S", 0.0)  # every overflow its own burst (see below)
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    items: list = []
    lock = threading.Lock()

    def sink(batch):
        with lock:
            items.extend(batch)

    rescans: list[list[str]] = []
    d = Debouncer(sink, debounce_s=0.05, delete_hold_s=0.05).start()
    w = Watcher(d, known_under=lambda c, p: [], is_known=lambda c, p: False, on_root_event=lambda c, r: None,
                on_overflow=rescans.append)
    try:
        assert w.watch("a", str(a)) == "native"
        assert w.watch("a2", str(a)) == "native"  # a second collection on the same folder
        assert w.watch("b", str(b)) == "native"
        _overflow(a)
        assert rescans == [["a", "a2"]]  # not b: before, every overflow rescanned every collection
        for _ in range(OVERFLOW_LIMIT - 1):
            _overflow(a)
        assert w.check() == ["a", "a2"]  # moved to polling: those collections are scanned once more
        assert w.mode("a", str(a)) == w.mode("a2", str(a)) == "polling"
        assert w.mode("b", str(b)) == "native"
        assert any("overflow" in r and str(a) in r for r in w.degraded.values()), w.degraded
        (a / "polled.txt").write_text("seen by polling")
        wait_until(lambda: any(p == str(a / "polled.txt") for _, p, _, _ in items), 15, what="the polled file")
    finally:
        w.stop()
        d.stop()


def test_one_burst_of_overflows_rescans_but_does_not_move_the_root_to_polling(tmp_path, monkeypatch):
    """50,000 files unpacked at once overflow inotify's queue several times within seconds: that is
    one burst, its rescan covers it, and the root stays natively watched (before, the copy moved
    it to polling for good). Bursts that go on for minutes still move it to polling."""
    import ragweedd.watch.watcher as watcher

    a = tmp_path / "a"
    a.mkdir()
    rescans: list[list[str]] = []
    d = Debouncer(lambda batch: None, debounce_s=0.05, delete_hold_s=0.05)
    w = Watcher(d, known_under=lambda c, p: [], is_known=lambda c, p: False, on_root_event=lambda c, r: None,
                on_overflow=rescans.append)
    try:
        assert w.watch("a", str(a)) == "native"
        for _ in range(OVERFLOW_LIMIT * 2):  # one burst: well within OVERFLOW_BURST_S
            _overflow(a)
        assert rescans == [["a"]] * (OVERFLOW_LIMIT * 2)  # each asks; the daemon coalesces the scans
        assert w.check() == [] and w.mode("a", str(a)) == "native"
        assert not w.degraded
        # The same root overflowing again and again, each time a burst of its own.
        monkeypatch.setattr(watcher, "OVERFLOW_BURST_S", 0.0)
        for _ in range(OVERFLOW_LIMIT - 1):
            _overflow(a)
        assert w.check() == ["a"] and w.mode("a", str(a)) == "polling"
    finally:
        w.stop()

"""The debouncer counts the events its sink could not take, for the daemon's scan once the store
answers again (ragweedd/daemon_core.py ``_store_back``)."""

from __future__ import annotations

from ragweedd.watch.debounce import Debouncer
from tests.tools import wait_until


def test_dropped_events_are_counted_until_taken_and_the_status_note_leaves_with_them(tmp_path):
    failing = [True]
    taken: list = []

    def sink(items):
        if failing[0]:
            raise RuntimeError("database away")
        taken.extend(items)

    d = Debouncer(sink, debounce_s=0.05, delete_hold_s=0.05).start()
    try:
        for i in range(3):
            d.delete("c", str(tmp_path / f"gone{i}.txt"))
        wait_until(lambda: d.dropped == 3, 5, 0.02, "three dropped events")
        assert d.last_error and "database away" in d.last_error
        failing[0] = False
        d.delete("c", str(tmp_path / "later.txt"))
        wait_until(lambda: taken, 5, 0.02, "the next event taken")
        assert d.dropped == 3, "a later success does not make the lost events found"
        assert d.take_dropped() == 3 and d.dropped == 0 and d.last_error is None
        assert d.take_dropped() == 0
    finally:
        d.stop()

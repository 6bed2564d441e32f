"""Issue 24 point 7, the parts: work handed from one stage to the next is never nowhere (the
debouncer holds events until its sink returns), a scan reports what it has seen while it walks,
and the status text says what keeps the daemon busy instead of "idle"."""

from __future__ import annotations

import threading

from ragweedd.cli.ctl_text import ingest_line
from ragweedd.watch.debounce import Debouncer
from ragweedd.watch.reconcile import PROGRESS_EVERY, scan
from tests.tools import wait_until


def test_events_being_handed_to_the_sink_are_still_held_by_the_debouncer(tmp_path):
    entered, release = threading.Event(), threading.Event()
    got: list = []

    def sink(items):
        entered.set()
        assert release.wait(10)
        got.extend(items)

    d = Debouncer(sink, debounce_s=0.01, delete_hold_s=0.01).start()
    try:
        for i in range(3):
            d.upsert("notes", str(tmp_path / f"f{i}.txt"))
        assert entered.wait(10)
        # taken off the pending map, not yet queued: status must still count them
        assert len(d) == 3
        release.set()
        wait_until(lambda: len(got) == 3, 10, 0.01, "the sink to return")
        wait_until(lambda: len(d) == 0, 10, 0.01, "the debouncer to let go")
    finally:
        release.set()
        d.stop()


class _NoRows:
    def live_stats(self, collection):
        return {}


def test_a_scan_reports_the_files_it_has_seen_while_it_walks(tmp_path):
    for i in range(PROGRESS_EVERY * 2 + 5):
        (tmp_path / f"n{i}.txt").write_text("x")
    seen: list[int] = []
    res = scan(_NoRows(), "notes", [str(tmp_path)], progress=seen.append)
    assert seen == [PROGRESS_EVERY, PROGRESS_EVERY * 2] and res.files_seen == PROGRESS_EVERY * 2 + 5


def _ing(**kw):
    ing = {"running": False, "done": 0, "total": 0, "files_per_s": 0.0, "chunks_per_s": 0.0, "eta_s": None,
           "done_since_start": 0, "failed_since_start": 0, "chunks_since_start": 0, "embedded_since_start": 0,
           "workers": 2, "scans": [], "settling": 0, "events_seen": 0, "busy_with": []}
    ing.update(kw)
    return ing


def test_the_ingest_line_says_idle_only_when_nothing_is_left():
    walking = _ing(scans=[{"collection": "notes", "state": "walking", "files_seen": 12345}],
                   busy_with=["scanning 'notes' (12,345 files seen)"])
    assert ingest_line(walking) == "ingest: scanning 'notes' (12,345 files seen)"
    waiting = _ing(scans=[{"collection": "notes", "state": "waiting", "files_seen": 0}], busy_with=["x"])
    assert ingest_line(waiting) == "ingest: scan of 'notes' about to start"
    settling = _ing(settling=40, busy_with=["40 file change events settling"])
    assert ingest_line(settling) == "ingest: 40 file changes settling"
    vectors = _ing(done_since_start=7, busy_with=["1,436 chunks waiting for vectors"])
    assert ingest_line(vectors) == ("ingest: all files read (7 files since start, 0 failed), not idle yet: "
                                    "1,436 chunks waiting for vectors")
    assert ingest_line(_ing(done_since_start=7)) == "ingest: idle (7 files since start, 0 failed)"

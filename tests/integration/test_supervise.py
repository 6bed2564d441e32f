"""The restart net under the daemon's loops (ragweedd/ingest/supervise.py), on real threads."""

import threading
import time

from ragweedd.ingest import supervise
from ragweedd.ingest.supervise import Supervisor


def test_a_loop_that_raises_is_run_again_after_a_growing_wait_and_reported(monkeypatch):
    monkeypatch.setattr(supervise, "RESTART_START_S", 0.05)
    runs: list[float] = []
    given_back: list[str] = []

    def loop():
        runs.append(time.monotonic())
        if len(runs) <= 3:
            raise SystemExit(f"run {len(runs)}")  # not an Exception: still no silent end

    sup = Supervisor("test loop", "nothing happens")
    t = threading.Thread(target=sup.run, args=(loop,), kwargs={"after_failure": lambda e: given_back.append(str(e))})
    t.start()
    t.join(5)
    assert not t.is_alive() and len(runs) == 4, "the loop returned normally on its fourth run"
    assert given_back == ["run 1", "run 2", "run 3"]
    waits = [b - a for a, b in zip(runs, runs[1:])]
    assert waits[0] >= 0.05 and waits[1] >= 0.1 and waits[2] >= 0.2, waits
    problem = sup.problem()
    assert problem and "test loop thread failed 3 time(s)" in problem and "SystemExit: run 3" in problem


def test_stop_ends_a_restart_wait_at_once_and_nothing_is_reported_without_a_failure(monkeypatch):
    monkeypatch.setattr(supervise, "RESTART_START_S", 30.0)
    sup = Supervisor("test loop", "nothing happens")
    assert sup.problem() is None
    t = threading.Thread(target=sup.run, args=(lambda: 1 / 0,))
    t.start()
    time.sleep(0.2)
    t0 = time.monotonic()
    sup.stop()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - t0 < 2
    assert sup.failures == 1 and "ZeroDivisionError" in (sup.problem() or "")

"""The restart net under the daemon's loops (ragweedd/supervise.py), on real threads."""

import threading
import time

from ragweedd import supervise
from ragweedd.supervise import Supervisor


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


def test_a_failure_that_was_only_the_database_server_away_leaves_the_report_once_the_loop_runs_again(
        monkeypatch):
    from ragweedd.errors import StoreUnreachableError

    monkeypatch.setattr(supervise, "RESTART_START_S", 0.05)
    monkeypatch.setattr(supervise, "CLEARED_AFTER_S", 0.0)  # cleared as soon as the loop runs again
    running, stop = threading.Event(), threading.Event()
    runs: list[int] = []

    def loop(error):
        runs.append(1)
        if len(runs) == 1:
            raise error
        running.set()
        stop.wait(10)

    for error, cleared in ((StoreUnreachableError("PostgreSQL at postgresql://h/db cannot be reached"), True),
                           (ZeroDivisionError("a bug"), False)):
        runs.clear()
        running.clear()
        stop.clear()
        sup = Supervisor("test loop", "nothing happens")
        t = threading.Thread(target=sup.run, args=(lambda e=error: loop(e),))
        t.start()
        try:
            assert running.wait(5)
            if cleared:  # the server answers again and the loop runs: not the thread's failure
                assert sup.problem() is None and sup.failures == 1
            else:  # a bug stays reported while it is recent, whether or not the loop runs now
                assert "ZeroDivisionError: a bug" in (sup.problem() or "")
        finally:
            stop.set()
            sup.stop()
            t.join(5)

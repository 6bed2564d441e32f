"""Restart of a daemon thread whose loop ended by an exception.

The ingest workers and the index-sync thread each catch what one file or one collection can raise;
this is the net under that: whatever still escapes (a bug, a library calling ``sys.exit``, a
database that cannot be opened when the loop starts) is logged with its traceback, counted, and the
loop is run again after a backoff (1 s, doubling to 60 s; back to 1 s after a minute of running).
While a failure is recent, ``problem()`` says so for status' ``degraded``, with the reason: a thread
never stops silently, and one that keeps failing keeps saying why.

A failure because the database server cannot be reached (an outage of a shared PostgreSQL) is not
the thread's: its loop is restarted every few seconds at most, so it resumes soon after the server
returns, and once the restarted loop has run for ``CLEARED_AFTER_S`` the failure is no longer
reported (while the server is away, status says so on its own).
"""

from __future__ import annotations

import threading
import time
from typing import Callable

from ragweedd.logging import get_logger

log = get_logger("ragweedd.daemon")
RESTART_START_S = 1.0
RESTART_MAX_S = 60.0
HEALTHY_AFTER_S = 60.0  # a loop that ran this long before failing restarts after the shortest wait
REPORT_FOR_S = 600.0  # how long a failure stays under ``degraded`` after the last one
SERVER_AWAY_RESTART_S = 5.0  # the longest wait before a restart after the server was away
CLEARED_AFTER_S = 5.0  # a restart after the server was away that ran this long: the failure is over


class Supervisor:
    def __init__(self, what: str, effect: str) -> None:
        self.what, self.effect = what, effect  # "ingest worker", "nothing is indexed while it waits"
        self.failures = 0
        self.last_error: str | None = None
        self.last_at: float | None = None
        self._away = False  # the last failure was the database server out of reach
        self._resumed_at: float | None = None  # when the loop last started again after a failure
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def stop(self) -> None:
        """No more restarts; a backoff wait in progress ends at once."""
        self._stop.set()

    def run(self, loop: Callable[[], None], *, after_failure: Callable[[BaseException], None] | None = None) -> None:
        """Run ``loop`` until it returns; when it raises, record it, call ``after_failure`` (give back
        what the loop held) and run it again after the backoff, unless stopping."""
        wait = RESTART_START_S
        while not self._stop.is_set():
            t0 = time.monotonic()
            with self._lock:
                if self.last_at is not None:
                    self._resumed_at = time.time()
            try:
                loop()
                return
            except BaseException as e:  # noqa: BLE001 - SystemExit too: a thread must not end silently
                from ragweedd.store.failures import server_unreachable

                error = f"{type(e).__name__}: {e}"
                away = server_unreachable(e)
                with self._lock:
                    self.failures += 1
                    self.last_error, self.last_at = error, time.time()
                    self._away, self._resumed_at = away, None
                if away:
                    wait = min(wait, SERVER_AWAY_RESTART_S)
                if time.monotonic() - t0 >= HEALTHY_AFTER_S:
                    wait = RESTART_START_S
                log.error("thread_failed", thread=threading.current_thread().name, what=self.what, error=error,
                          failures=self.failures, restart_in_s=wait, exc_info=True)
                if after_failure is not None:
                    try:
                        after_failure(e)
                    except Exception as e2:  # noqa: BLE001 - the restart matters more
                        log.error("thread_cleanup_failed", what=self.what, error=str(e2))
            if self._stop.wait(wait):
                return
            wait = min(SERVER_AWAY_RESTART_S if self._away else RESTART_MAX_S, wait * 2)
            log.info("thread_restarted", thread=threading.current_thread().name, what=self.what)

    def problem(self) -> str | None:
        """What ``degraded`` says while the last failure is recent (None otherwise)."""
        with self._lock:
            if self.last_at is None or time.time() - self.last_at > REPORT_FOR_S:
                return None
            if self._away and self._resumed_at is not None and time.time() - self._resumed_at >= CLEARED_AFTER_S:
                return None  # the server is back and the loop runs again
            n, error, at = self.failures, self.last_error, self.last_at
        return (f"the {self.what} thread failed {n} time(s), last {round(time.time() - at)} s ago ({error}); "
                f"it is restarted with a backoff ({self.effect} meanwhile); see the daemon log")

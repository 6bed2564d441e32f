"""Background jobs on APScheduler 3.x (DESIGN §7): nightly cluster re-analysis, a periodic
integrity check, and the periodic reconciliation scan.

The nightly job uses a cron trigger at ``cluster_schedule`` local time with ``coalesce=True`` and a
misfire grace of a day: a laptop asleep at 03:00 runs it once when it wakes, not once per missed
night. The scheduler's thread sleeps until the next run time, so an idle daemon does not wake up for
it.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import TYPE_CHECKING, Callable

from ragweedd.logging import get_logger

if TYPE_CHECKING:
    from ragweedd.config import Config

log = get_logger("ragweedd.jobs")

MISFIRE_GRACE_S = 24 * 3600


class Jobs:
    def __init__(self, cfg: Config, *, reanalyze: Callable[[], object], integrity: Callable[[], object],
                 scan: Callable[[], object] | None) -> None:
        from apscheduler.schedulers.background import BackgroundScheduler
        from apscheduler.triggers.cron import CronTrigger
        from apscheduler.triggers.interval import IntervalTrigger

        self.sched = BackgroundScheduler(daemon=True, job_defaults={
            "coalesce": True, "misfire_grace_time": MISFIRE_GRACE_S, "max_instances": 1})
        self.last: dict[str, dict] = {}
        hh, mm = (int(x) for x in cfg.cluster_schedule.split(":"))
        self.sched.add_job(self._wrap("cluster_reanalysis", reanalyze), CronTrigger(hour=hh, minute=mm),
                           id="cluster_reanalysis", name="nightly cluster re-analysis",
                           coalesce=True, misfire_grace_time=MISFIRE_GRACE_S)
        self.sched.add_job(self._wrap("integrity_check", integrity),
                           IntervalTrigger(seconds=cfg.integrity_interval_s), id="integrity_check",
                           name="integrity check")
        if scan is not None and cfg.scan_interval_s > 0:
            self.sched.add_job(self._wrap("reconcile_scan", scan), IntervalTrigger(seconds=cfg.scan_interval_s),
                               id="reconcile_scan", name="periodic reconciliation scan")

    def _wrap(self, name: str, fn: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            t0 = time.monotonic()
            try:
                result = fn()
                self.last[name] = {"at": time.time(), "ok": True, "seconds": round(time.monotonic() - t0, 3),
                                   "result": result}
                log.info("job_done", job=name, seconds=round(time.monotonic() - t0, 3))
            except Exception as e:  # noqa: BLE001 - a job's failure is recorded in its status; the scheduler goes on
                self.last[name] = {"at": time.time(), "ok": False, "error": f"{type(e).__name__}: {e}"}
                log.error("job_failed", job=name, error=str(e), error_type=type(e).__name__)

        return run

    def start(self) -> None:
        self.sched.start()

    def stop(self) -> None:
        if self.sched.running:
            self.sched.shutdown(wait=False)

    def next_runs(self) -> dict[str, str | None]:
        # a job of a scheduler not started yet has no next_run_time attribute at all
        out = {}
        for j in self.sched.get_jobs():
            nxt = getattr(j, "next_run_time", None)
            out[j.id] = nxt.isoformat() if nxt else None
        return out

    def run_now(self, job_id: str) -> None:
        """Queue a job to run at once (API: reanalyze)."""

        job = self.sched.get_job(job_id)
        if job is not None:
            nxt = getattr(job, "next_run_time", None)
            job.modify(next_run_time=datetime.now(nxt.tzinfo if nxt else None))

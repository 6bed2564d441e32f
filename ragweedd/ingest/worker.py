"""Ingest workers: threads that take jobs from the durable queue and run the pipeline on them.

Each worker lowers its own priority (``os.nice`` is per thread on Linux; ``ionice -c3 -p TID`` puts
its disk I/O in the idle class where the tool exists) and owns its Pipeline, so its SQLite
connections are its own. Plain-text formats are read in-process: their extractor is a UTF-8 decode
with no parser to exploit, and a subprocess per note would cost more than the note. Every other
format is extracted in the capped sandbox subprocess (DESIGN §4).

The small-file lane: a big or slow file (a 60 MB log, a PDF to OCR, an extractor that runs to its
wall-time cap) holds its worker for minutes. So once a worker has been on one job for
``SLOW_AFTER_S``, one more thread takes jobs, but only deletes and files of at most
``ingest_small_file_mb``; a bigger file it meets is handed back for the regular workers and passed
over from then on. A small file dropped behind a big one is indexed within seconds, while the
machine runs at most one extra ingest thread, and only while something is slow.

Deletes are guarded: a delete runs only while the file's collection root exists and the path is
still absent; a root that vanished deletes nothing (the reconciliation scan settles it on return).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ragweedd.config import ingest_worker_count
from ragweedd.errors import Interrupted
from ragweedd.extract.registry import extract_file, extractor_for
from ragweedd.extract.text import TextExtractor
from ragweedd.files.ignore import is_ignored
from ragweedd.files.roots import root_state
from ragweedd.ingest.priority import lower_priority
from ragweedd.ingest.sandbox import extract_sandboxed
from ragweedd.logging import get_logger
from ragweedd.paths import deepest_root
from ragweedd.store.failures import is_disk_full, server_unreachable
from ragweedd.store.protocols import JobStore
from ragweedd.store.types import Job
from ragweedd.supervise import Supervisor

if TYPE_CHECKING:
    from ragweedd.config import Config
    from ragweedd.extract.base import ExtractedDoc, ExtractSettings
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.paths import Paths

log = get_logger("ragweedd.ingest")
# Backoff of writes on a full disk: doubles from 1 s up to 30 s, so ingest resumes well within a
# minute of space coming back, while a disk that stays full costs a try every 30 s.
BACKOFF_START_S = 1.0
BACKOFF_MAX_S = 30.0
# A job that met the database server away is kept and run again: first after 0.5 s, then twice as
# long up to 5 s, so a file is indexed within seconds of the server's return.
SERVER_WAIT_START_S = 0.5
SERVER_WAIT_MAX_S = 5.0
# A job running this long opens the small-file lane; how often the idle lane looks.
SLOW_AFTER_S = 2.0
LANE_POLL_S = 0.5


def make_extract(cfg: Config,
                 should_stop: Callable[[], bool] | None = None) -> Callable[[Path, ExtractSettings], ExtractedDoc]:
    """The extract function the daemon's pipelines use: in-process for plain text, sandboxed else.
    ``should_stop`` (the workers' stop flag) kills a running sandbox child when the daemon stops."""

    def extract(path: Path, settings: ExtractSettings) -> ExtractedDoc:
        ex = extractor_for(path)
        if ex is None or isinstance(ex, TextExtractor):
            return extract_file(path, settings)
        return extract_sandboxed(path, settings, timeout_s=cfg.extract_timeout_s, cpu_s=cfg.extract_cpu_s,
                                 memory_mb=cfg.extract_memory_mb, should_stop=should_stop)

    return extract


@dataclass
class Progress:
    """Ingest progress for status and logs: files done of the current batch, chunks/s, ETA."""

    done: int = 0
    failed: int = 0
    chunks: int = 0
    embedded: int = 0
    batch_start: float | None = None
    batch_done: int = 0
    recent: deque = field(default_factory=lambda: deque(maxlen=200))  # (t, chunks) per finished job
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, chunks: int, embedded: int, failed: bool) -> None:
        now = time.monotonic()
        with self.lock:
            if self.batch_start is None:
                self.batch_start, self.batch_done = now, 0
            self.done += 1
            self.batch_done += 1
            self.failed += int(failed)
            self.chunks += chunks
            self.embedded += embedded
            self.recent.append((now, chunks))

    def idle(self) -> None:
        with self.lock:
            self.batch_start = None

    def snapshot(self, queued: int) -> dict:
        with self.lock:
            now = time.monotonic()
            rate = files_rate = 0.0
            if len(self.recent) >= 2:
                span = max(1e-3, now - self.recent[0][0])
                rate = sum(c for _, c in self.recent) / span
                files_rate = len(self.recent) / span
            eta = round(queued / files_rate, 1) if files_rate > 0 and queued else (0.0 if not queued else None)
            return {"files_done": self.batch_done if self.batch_start is not None else 0,
                    "files_total": (self.batch_done if self.batch_start is not None else 0) + queued,
                    "files_done_since_start": self.done, "failed_since_start": self.failed,
                    "chunks_since_start": self.chunks, "embedded_since_start": self.embedded,
                    "chunks_per_s": round(rate, 2), "files_per_s": round(files_rate, 3), "eta_s": eta}


class Workers:
    """``n`` ingest threads. ``resolve(collection)`` returns (roots, ignore, available) or None when
    the collection no longer exists; ``on_changes(collection)`` tells the index side that new
    change-log entries may exist (the index manager's hook)."""

    def __init__(self, cfg: Config, paths: Paths, queue: JobStore, *,
                 new_pipeline: Callable[[Callable[[], bool]], Pipeline], resolve: Callable,
                 on_changes: Callable[[str], None], on_root_missing: Callable[[str, str], None],
                 vectorizer: Any = None) -> None:
        """``new_pipeline(should_stop)`` makes each worker thread's pipeline (ragweedd/ingest_line.py);
        ``should_stop`` is the workers' stop flag, which also ends a running extraction. With a
        ``vectorizer`` (ingest/vectorize.py) the pipelines leave vectors to it, and it is told of
        each published file."""
        self.cfg, self.paths, self.queue = cfg, paths, queue
        self.new_pipeline = new_pipeline
        self._removed: list[str] = []  # collections removed while running, in order (forget())
        self.vectorizer = vectorizer
        self._stop = threading.Event()
        self.resolve, self.on_changes, self.on_root_missing = resolve, on_changes, on_root_missing
        self.progress = Progress()
        self.priority: dict[str, bool] = {}
        self._threads: list[threading.Thread] = []
        self._busy = 0
        self._busy_lock = threading.Lock()
        self._started: dict[int, float] = {}  # regular worker thread -> when its current job began
        self._big: set[int] = set()  # jobs the small-file lane found too big; they wait for a regular worker
        self._lane_lock = threading.Lock()
        self.disk_full_since: float | None = None
        self.disk_full_error = ""
        self._backoff = BACKOFF_START_S
        self.supervisor = Supervisor("ingest worker", "files wait in the queue")
        self._held = threading.local()  # the job a worker thread has claimed and not yet finished
        # worker thread -> (since when, last error) while its job waits for the database server
        self._server_waits: dict[int, tuple[float, str]] = {}

    def start(self) -> None:
        for i in range(ingest_worker_count(self.cfg)):
            t = threading.Thread(target=self._supervised, name=f"ragweedd-ingest-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        if self.cfg.ingest_small_file_mb > 0:
            t = threading.Thread(target=self._supervised, args=(True,), name="ragweedd-ingest-small", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Let running jobs finish (bounded), then return; unfinished jobs stay in the queue."""
        self._stop.set()
        self.supervisor.stop()
        self.queue.close_waiters()
        end = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.1, end - time.monotonic()))

    @property
    def busy(self) -> int:
        return self._busy

    def _supervised(self, small: bool = False) -> None:
        self.supervisor.run(lambda: self._run(small), after_failure=self._give_back)

    def _give_back(self, e: BaseException) -> None:
        """After the worker loop failed: the job it held is failed with the reason (a try spent, so
        a file that keeps killing the loop ends up 'failed' instead of looping forever)."""
        job, self._held.job = getattr(self._held, "job", None), None
        if job is not None:
            try:
                self.queue.fail(job, f"the ingest worker failed on this file: {type(e).__name__}: {e}",
                                retryable=True)
            except Exception as e2:  # noqa: BLE001 - given back once the queue can be written
                log.error("ingest_job_not_recorded", path=job.path, error=str(e2))
                self.queue.abandon(job)

    def _let_go(self, job: Job) -> None:
        """Give ``job`` back untouched; when that cannot be written (the server away, a full disk),
        the queue gives it back at its next claim that can write."""
        try:
            self.queue.release(job)
        except Exception as e:  # noqa: BLE001
            log.warning("ingest_job_not_released", path=job.path, error=str(e),
                        effect="queued again as soon as the job queue can be written")
            self.queue.abandon(job)

    def _run(self, small: bool = False) -> None:
        """A regular worker, or with ``small`` the small-file lane (see the module docstring)."""
        self.priority = lower_priority(self.cfg.ingest_nice)
        pipe = self._pipeline()
        me = threading.get_ident()
        try:
            while not self._stop.is_set():
                if small and not self._someone_slow():
                    self._stop.wait(LANE_POLL_S)
                    continue
                try:
                    if small:
                        with self._lane_lock:
                            skip = set(self._big)
                        job = self.queue.claim(LANE_POLL_S, skip=skip)
                    else:
                        job = self.queue.claim()
                except Exception as e:  # noqa: BLE001 - claiming is a write too: a full disk must not end the thread
                    self._storage_trouble(e)
                    continue
                if job is None:
                    if small:
                        continue
                    break
                if self._stop.is_set():
                    self._let_go(job)
                    break
                if small and self._too_big(job):
                    with self._lane_lock:
                        self._big.add(job.id)
                    self._let_go(job)
                    continue
                with self._busy_lock:
                    self._busy += 1
                if not small:
                    with self._lane_lock:
                        self._started[me] = time.monotonic()
                try:
                    self._held.job = job
                    pipe = self._run_job(pipe, job)
                    self._held.job = None
                finally:
                    with self._lane_lock:
                        self._started.pop(me, None)
                        self._big.discard(job.id)
                    with self._busy_lock:
                        self._busy -= 1
                        if self._busy == 0 and not self.queue.depth().get("queued"):
                            self.progress.idle()
        finally:
            pipe.close()

    def _someone_slow(self) -> bool:
        now = time.monotonic()
        with self._lane_lock:
            return any(now - t >= SLOW_AFTER_S for t in self._started.values())

    def _too_big(self, job: Job) -> bool:
        """Whether the small-file lane leaves ``job`` to the regular workers."""
        if job.op == "delete":
            return False
        try:
            return os.stat(job.path).st_size > self.cfg.ingest_small_file_mb * 2**20
        except OSError:
            return False  # gone or unreadable: the pipeline settles that in no time

    def _run_job(self, pipe: Pipeline, job: Job) -> Pipeline:
        """Run ``job``; on a full disk keep it and run it again with backoff until space is back
        (a full disk says nothing about the file, so it costs the job no try). A job interrupted
        because the daemon is stopping goes back to the queue untouched (no try spent; its embedded
        batches are in the embed cache). Nothing a job
        raises ends the worker thread. Returns the pipeline to use next: after a full disk the
        old one's connections are closed and new ones opened, because SQLite can keep a
        connection that hit SQLITE_FULL failing even once space is back."""

        while True:
            try:
                self._one(pipe, job)
            except Interrupted as e:
                self._server_back(job)
                log.info("ingest_job_released", collection=job.collection, path=job.path, reason=str(e))
                self._let_go(job)
                return pipe
            except Exception as e:
                if server_unreachable(e):
                    # Nothing is wrong with the file: keep the job (no try spent) and run it again
                    # once the server answers. Its connections open again by themselves.
                    if self._server_wait(job, e):
                        continue
                    self._server_back(job)
                    self._let_go(job)  # stopping: the next start takes it
                    return pipe
                self._server_back(job)
                if not is_disk_full(e):
                    log.error("ingest_worker_error", collection=job.collection, path=job.path, error=str(e),
                              error_type=type(e).__name__, exc_info=True)
                    try:
                        self.queue.fail(job, f"{type(e).__name__}: {e}", retryable=True)
                    except Exception as e2:  # noqa: BLE001 - the queue gives it back once it can write
                        log.error("ingest_job_not_recorded", path=job.path, error=str(e2),
                                  effect="queued again as soon as the job queue can be written")
                        self.queue.abandon(job)
                    return pipe
                pipe = self._fresh(pipe)
                if self._storage_trouble(e):
                    continue
                self._let_go(job)  # stopping: give the job back if the disk lets us
                return pipe
            self._server_back(job)
            if self.disk_full_since is not None:
                log.info("disk_space_back", data_dir=str(self.paths.data),
                         paused_s=round(time.monotonic() - self.disk_full_since, 1))
                self.disk_full_since = None
                self._backoff = BACKOFF_START_S
            return pipe

    def _server_wait(self, job: Job, e: BaseException) -> bool:
        """Wait before running ``job`` again while the database server cannot be reached (said in
        status). False when the daemon is stopping."""
        me = threading.get_ident()
        with self._lane_lock:
            first = me not in self._server_waits
            since = time.monotonic() if first else self._server_waits[me][0]
            self._server_waits[me] = (since, f"{type(e).__name__}: {e}")
            waited = time.monotonic() - since
        if first:
            log.warning("ingest_job_waits_for_server", collection=job.collection, path=job.path, error=str(e),
                        effect="the job is kept and run again as soon as the database server answers")
        delay = min(SERVER_WAIT_MAX_S, max(SERVER_WAIT_START_S, waited))
        return not self._stop.wait(delay)

    def _server_back(self, job: Job) -> None:
        """The job's run ended other than on the server away: it no longer waits for it."""
        with self._lane_lock:
            waited = self._server_waits.pop(threading.get_ident(), None)
        if waited is None:
            return
        since = waited[0]
        log.info("ingest_job_ran_after_server_wait", collection=job.collection, path=job.path,
                 waited_s=round(time.monotonic() - since, 1))

    def _fresh(self, pipe: Pipeline) -> Pipeline:
        try:
            pipe.close()
        except Exception as e:  # noqa: BLE001 - closing a connection that hit a full disk may fail too
            log.warning("pipeline_close_failed", error=str(e))
        return self._pipeline()

    def _pipeline(self) -> Pipeline:
        return self.new_pipeline(self._stop.is_set)

    def forget(self, collection: str) -> None:
        """A removed collection: each worker's pipeline closes what it holds open of it before its
        next job."""
        self._removed.append(collection)

    def _changed(self, collection: str) -> None:
        self.on_changes(collection)
        if self.vectorizer is not None:
            self.vectorizer.notify(collection)

    def _storage_trouble(self, e: BaseException) -> bool:
        """Wait before retrying after ``e``: backoff on a full disk (reported in status), a short
        pause on anything else. Returns False when the daemon is stopping."""
        if is_disk_full(e):
            first = self.disk_full_since is None
            if first:
                self.disk_full_since = time.monotonic()
            self.disk_full_error = f"{type(e).__name__}: {e}"
            log.error("disk_full", data_dir=str(self.paths.data), free_mb=self.free_mb(), error=str(e),
                      retry_in_s=self._backoff, exc_info=first)
            delay = self._backoff
            self._backoff = min(BACKOFF_MAX_S, self._backoff * 2)
        elif server_unreachable(e):  # a claim meeting the server away: no traceback each second
            log.warning("ingest_worker_error", error=str(e), error_type=type(e).__name__,
                        effect="claims are tried again every second until the database server answers")
            delay = 1.0
        else:
            log.error("ingest_worker_error", error=str(e), error_type=type(e).__name__, exc_info=True)
            delay = 1.0
        return not self._stop.wait(delay)

    def free_mb(self) -> float:
        try:
            return round(shutil.disk_usage(self.paths.data).free / 2**20, 1)
        except OSError:
            return -1.0

    def server_trouble(self) -> str | None:
        """What status shows under ``degraded`` while jobs wait for the database server: the ones
        workers hold and run again, and the ones whose outcome could not be written."""
        with self._lane_lock:
            waits = list(self._server_waits.values())
        adrift = int(getattr(self.queue, "abandoned", 0))
        if not waits and not adrift:
            return None
        parts = []
        if waits:
            since, error = min(waits)
            parts.append(f"{len(waits)} file{'s' if len(waits) != 1 else ''} being ingested wait for the database "
                         f"server since {round(time.monotonic() - since)} s (last error: {error}); each is run "
                         f"again within {SERVER_WAIT_MAX_S:g} s of its return, no try spent")
        if adrift:
            parts.append(f"{adrift} ingest job{'s' if adrift != 1 else ''} whose outcome could not be written "
                         f"while it was away go back to the queue as soon as it answers")
        return "ingest waits for the database server: " + "; ".join(parts)

    def trouble(self) -> str | None:
        """What status shows under ``degraded`` while ingest is paused by a full disk."""
        if self.disk_full_since is None:
            return None
        return (f"disk full: cannot write the data dir {self.paths.data} ({self.free_mb()} MB free); ingest is "
                f"paused since {round(time.monotonic() - self.disk_full_since)} s and retried every "
                f"{self._backoff:g} s at most; free space on that disk and it resumes by itself "
                f"(last error: {self.disk_full_error})")

    def _one(self, pipe: Pipeline, job: Job) -> None:
        if pipe.seen_removals != len(self._removed):
            for name in self._removed[pipe.seen_removals:]:
                pipe.forget(name)  # its connection to a removed collection's store
            pipe.seen_removals = len(self._removed)
        info = self.resolve(job.collection)
        if info is None:  # collection removed meanwhile
            self.queue.done(job)
            return
        roots, ignore, _available = info
        root = deepest_root(job.path, roots)
        t0 = time.monotonic()
        try:
            gone_file_root = root == job.path and root_state(os.path.dirname(job.path)) == "ok"
            if root is not None and root_state(root) != "ok" and not gone_file_root:
                # Never delete (or index) anything under a root that is not there: an unmounted disk
                # or a renamed-away folder must not empty the collection.
                self.on_root_missing(job.collection, root)
                self.queue.done(job)
                return
            p = Path(job.path)
            ignored = root is None or is_ignored(os.path.relpath(job.path, root), ignore)
            # The op only says what the watcher saw last; what is on disk now decides.
            exists = not ignored and p.is_file() and not p.is_symlink()
            if not exists:
                ids = pipe.remove_file(job.collection, job.path)
                log.info("ingest_file", collection=job.collection, path=job.path, status="deleted",
                         chunks_removed=len(ids), embedded=0, ms=round((time.monotonic() - t0) * 1000, 1))
                if ids:  # told before the job is done, so no one sees an idle daemon in between
                    self._changed(job.collection)
                self.queue.done(job)
                self.progress.record(0, 0, False)
                return
            # a file given as a root by itself is named relative to its folder, as the one-shot
            # ingest that recorded it named it
            base = root if root is None or root != job.path else os.path.dirname(root)
            out = pipe.ingest_file(job.collection, p, base)
        except Exception as e:  # one bad file never stops the worker
            if is_disk_full(e) or isinstance(e, Interrupted) or server_unreachable(e):
                raise  # not the file's fault: _run_job retries it once space or the server is back
            retry = self.queue.fail(job, f"{type(e).__name__}: {e}", retryable=True)
            log.error("ingest_job_error", collection=job.collection, path=job.path, error=str(e),
                      error_type=type(e).__name__, retry=retry, exc_info=not hasattr(e, "to_dict"))
            self.progress.record(0, 0, not retry)
            return
        if out.status in ("indexed", "linked", "failed", "skipped") and out.index_changed:
            # Told before the job is done, so no one sees an idle daemon before vectors are queued.
            self._changed(job.collection)
        if out.status == "failed":
            retry = self.queue.fail(job, out.error or "failed", retryable=out.retryable)
            if not retry:
                log.warning("ingest_file_failed", collection=job.collection, path=job.path, error=out.error,
                            tries=job.tries + 1)
            self.progress.record(0, 0, not retry)
        else:
            self.queue.done(job)
            self.progress.record(out.chunks if out.status == "indexed" else 0, out.embedded, False)

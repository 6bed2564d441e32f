"""Ingest workers: threads that take jobs from the durable queue and run the pipeline on them.

Each worker lowers its own priority (``os.nice`` is per thread on Linux; ``ionice -c3 -p TID`` puts
its disk I/O in the idle class where the tool exists) and owns its Pipeline, so its SQLite
connections are its own. Plain-text formats are read in-process: their extractor is a UTF-8 decode
with no parser to exploit, and a subprocess per note would cost more than the note. Every other
format is extracted in the capped sandbox subprocess (DESIGN §4).

Deletes are guarded: a delete runs only while the file's collection root exists and the path is
still absent; a root that vanished deletes nothing (the reconciliation scan settles it on return).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ragweedd.logging import get_logger
from ragweedd.store.job_queue import Job, JobQueue

log = get_logger("ragweedd.ingest")


def make_extract(cfg):
    """The extract function the daemon's pipelines use: in-process for plain text, sandboxed else."""
    from ragweedd.extract.registry import extract_file, extractor_for
    from ragweedd.extract.text import TextExtractor
    from ragweedd.ingest.sandbox import extract_sandboxed

    def extract(path: Path, settings):
        ex = extractor_for(path)
        if ex is None or isinstance(ex, TextExtractor):
            return extract_file(path, settings)
        return extract_sandboxed(path, settings, timeout_s=cfg.extract_timeout_s, cpu_s=cfg.extract_cpu_s,
                                 memory_mb=cfg.extract_memory_mb)

    return extract


def lower_priority(nice: int) -> dict[str, bool]:
    """Lower the calling thread's CPU and I/O priority; returns what was applied."""
    done = {"nice": False, "ionice": False}
    if nice > 0 and hasattr(os, "nice"):
        try:
            os.nice(nice)
            done["nice"] = True
        except OSError:
            pass
    if sys.platform.startswith("linux") and shutil.which("ionice"):
        try:
            r = subprocess.run(["ionice", "-c3", "-p", str(threading.get_native_id())],
                               capture_output=True, timeout=5)
            done["ionice"] = r.returncode == 0
        except (OSError, subprocess.SubprocessError):
            pass
    return done


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

    def __init__(self, cfg, paths, queue: JobQueue, embedder, *, resolve: Callable,
                 on_changes: Callable[[str], None], on_root_missing: Callable[[str, str], None],
                 extract: Callable | None = None) -> None:
        self.cfg, self.paths, self.queue, self.embedder = cfg, paths, queue, embedder
        self.extract = extract or make_extract(cfg)
        self.resolve, self.on_changes, self.on_root_missing = resolve, on_changes, on_root_missing
        self.progress = Progress()
        self.priority: dict[str, bool] = {}
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._busy = 0
        self._busy_lock = threading.Lock()

    def start(self) -> None:
        for i in range(self.cfg.ingest_workers):
            t = threading.Thread(target=self._run, name=f"ragweedd-ingest-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout_s: float = 30.0) -> None:
        """Let running jobs finish (bounded), then return; unfinished jobs stay in the queue."""
        self._stop.set()
        self.queue.close_waiters()
        end = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(max(0.1, end - time.monotonic()))

    @property
    def busy(self) -> int:
        return self._busy

    def _run(self) -> None:
        from ragweedd.ingest.pipeline import Pipeline

        self.priority = lower_priority(self.cfg.ingest_nice)
        pipe = Pipeline(self.cfg, self.paths, self.embedder, extract=self.extract)
        try:
            while not self._stop.is_set():
                job = self.queue.claim()
                if job is None:
                    break
                if self._stop.is_set():
                    self.queue.release(job)
                    break
                with self._busy_lock:
                    self._busy += 1
                try:
                    self._one(pipe, job)
                finally:
                    with self._busy_lock:
                        self._busy -= 1
                        if self._busy == 0 and not self.queue.depth().get("queued"):
                            self.progress.idle()
        finally:
            pipe.close()

    def _one(self, pipe, job: Job) -> None:
        from ragweedd.watch.ignore import is_ignored
        from ragweedd.watch.reconcile import root_state

        info = self.resolve(job.collection)
        if info is None:  # collection removed meanwhile
            self.queue.done(job)
            return
        roots, ignore, _available = info
        root = _root_of(job.path, roots)
        t0 = time.monotonic()
        try:
            if root is not None and root_state(root) != "ok":
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
                self.queue.done(job)
                self.progress.record(0, 0, False)
                if ids:
                    self.on_changes(job.collection)
                return
            out = pipe.ingest_file(job.collection, p, root)
        except Exception as e:  # one bad file never stops the worker
            retry = self.queue.fail(job, f"{type(e).__name__}: {e}", retryable=True)
            log.error("ingest_job_error", collection=job.collection, path=job.path, error=str(e),
                      error_type=type(e).__name__, retry=retry, exc_info=not hasattr(e, "to_dict"))
            self.progress.record(0, 0, not retry)
            return
        if out.status == "failed":
            retry = self.queue.fail(job, out.error or "failed", retryable=out.retryable)
            if not retry:
                log.warning("ingest_file_failed", collection=job.collection, path=job.path, error=out.error,
                            tries=job.tries + 1)
            self.progress.record(0, 0, not retry)
        else:
            self.queue.done(job)
            self.progress.record(out.chunks if out.status == "indexed" else 0, out.embedded, False)
        if out.status in ("indexed", "linked", "failed", "skipped"):
            self.on_changes(job.collection)


def _root_of(path: str, roots) -> str | None:
    best = None
    for r in roots:
        r = str(r)
        if path == r or path.startswith(r.rstrip(os.sep) + os.sep):
            if best is None or len(r) > len(best):
                best = r
    return best

"""The durable ingest job queue: the ``jobs`` table of ingest_db.sqlite3 (DESIGN §4).

One row per (collection, path) that needs work. A later event for the same path coalesces into the
existing row (the newest op wins), so an editor's burst of writes is one job. A job survives
restarts: rows left ``running`` by a crash go back to ``queued`` when the queue opens. A job that
fails is retried with exponential backoff; after ``max_tries`` it stays ``failed`` with its error
(the file's own row in ingest_files carries the error too).

Ready upserts are served before ready deletes: when a folder is renamed, every new path is linked
to its already-indexed content before the old paths let go of it, so nothing is removed and
re-added, and nothing is re-embedded.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Callable, Collection
from pathlib import Path

from ragweedd.contract import shown_path
from ragweedd.store.pathnames import from_db, maybe_from_db, to_db
from ragweedd.store.rows import retry_wait
from ragweedd.store.sqlite.connection import connect, is_disk_full, migrate, transaction
from ragweedd.store.sqlite.ingest_schema import MIGRATIONS
from ragweedd.store.types import Job

# The next ready job, upserts before deletes: it walks the jobs_next index in order and stops at the
# first row that is ready (``+not_before`` keeps SQLite from picking the not_before index, which
# would sort every queued job on each claim: quadratic over a 50,000-file drop).
CLAIM_SQL = ("SELECT * FROM jobs WHERE state='queued' AND +not_before <= ?"
             " ORDER BY op = 'delete', id LIMIT 1")
# The same, passing over the jobs a caller cannot take (the small-file lane skips big files).
CLAIM_SKIP_SQL = ("SELECT * FROM jobs WHERE state='queued' AND +not_before <= ?"
                  " AND id NOT IN (SELECT value FROM json_each(?)) ORDER BY op = 'delete', id LIMIT 1")
PARKED_RETRY_S = 5.0  # how often events kept in memory on a full disk are written again


class JobQueue:
    """Thread-safe; each method is one short transaction on the queue's own connection."""

    def __init__(self, db_path: Path | str, *, max_tries: int = 3) -> None:
        self.conn = connect(db_path)
        migrate(self.conn, MIGRATIONS, db_name=str(db_path))
        self.max_tries = max_tries
        self._lock = threading.Lock()
        self._cond = threading.Condition()
        self._closed = False
        self._parked: list[tuple[str, str, str, str | None]] = []
        self.serves: Callable[[], Collection[str]] | None = None  # one daemon per data directory: unused
        self._abandoned: dict[int, Job] = {}  # given up on by their worker, their outcome unwritten
        with self._lock, transaction(self.conn):
            self.conn.execute("UPDATE jobs SET state='queued' WHERE state='running'")

    def close_waiters(self) -> None:
        """Wake every waiting claim() and make it return None (shutdown)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def close(self) -> None:
        self.close_waiters()
        with self._lock:
            self.conn.close()

    # --- producers ---------------------------------------------------------------------------
    def put(self, collection: str, path: str, op: str, root: str | None = None, *, delay_s: float = 0.0) -> None:
        self.put_many([(collection, path, op, root)], delay_s=delay_s)

    def put_many(self, items: list[tuple[str, str, str, str | None]], *, delay_s: float = 0.0) -> int:
        """Queue ``items``. On a full disk they are kept in memory (``unwritten``) instead of raising
        into the watcher's thread, and written by the next put or claim once space is back; if the
        daemon stops first, its start-up scan finds those files again."""
        if not items:
            return 0
        with self._lock:
            items = self._parked + list(items)
            self._parked = []
        try:
            return self._put_many(items, delay_s)
        except sqlite3.Error as e:
            if not is_disk_full(e):
                raise
            with self._lock:
                self._parked = items + self._parked
            with self._cond:
                self._cond.notify_all()  # a waiting claim() retries them after PARKED_RETRY_S
            return 0

    @property
    def unwritten(self) -> int:
        """Events kept in memory because the disk was full when they came."""
        return len(self._parked)

    @property
    def abandoned(self) -> int:
        """Jobs whose outcome could not be written, waiting to go back to queued."""
        return len(self._abandoned)

    def abandon(self, job: Job) -> None:
        """The worker that claimed ``job`` no longer works on it and could not write its outcome (a
        full disk): it goes back to queued at the next claim that can write, rather than staying
        'running' until the daemon restarts."""
        with self._lock:
            self._abandoned[job.id] = job
        with self._cond:
            self._cond.notify_all()

    def _give_back_abandoned(self) -> None:
        with self._lock:
            jobs = list(self._abandoned.values())
        for job in jobs:
            try:
                self.release(job)
            except sqlite3.Error:
                return  # still cannot write: the next claim tries again
            with self._lock:
                self._abandoned.pop(job.id, None)

    def _write_parked(self) -> None:
        with self._lock:
            items, self._parked = self._parked, []
        if items:
            self.put_many(items)

    def _put_many(self, items: list[tuple[str, str, str, str | None]], delay_s: float) -> int:
        now = time.time()
        with self._lock, transaction(self.conn):
            for collection, path, op, root in items:
                assert op in ("upsert", "delete"), op
                # A new event resets a failed or backing-off job: the file changed, so try again now.
                # A running job keeps its state; the new op is picked up again when it finishes.
                self.conn.execute(
                    "INSERT INTO jobs(collection, path, root, op, state, tries, not_before, enqueued_at, updated_at)"
                    " VALUES (?,?,?,?, 'queued', 0, ?, ?, ?)"
                    " ON CONFLICT(collection, path) DO UPDATE SET op=excluded.op, root=coalesce(excluded.root, root),"
                    " state=CASE WHEN state='running' THEN 'running' ELSE 'queued' END,"
                    " tries=CASE WHEN state='running' THEN tries ELSE 0 END,"
                    " not_before=excluded.not_before, error=NULL, updated_at=excluded.updated_at,"
                    " enqueued_at=CASE WHEN state='running' THEN -1 ELSE enqueued_at END",
                    (collection, to_db(path), None if root is None else to_db(root), op, now + delay_s, now, now))
        with self._cond:
            self._cond.notify_all()
        return len(items)

    # --- consumers ---------------------------------------------------------------------------
    def claim(self, timeout_s: float | None = None, skip: Collection[int] = ()) -> Job | None:
        """The next ready job (marked running) whose id is not in ``skip``, waiting up to
        ``timeout_s`` for one. Waits on a condition, never by polling: producers notify, and a
        backing-off job's not_before bounds the wait."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self._cond:
                if self._closed:
                    return None
            if self._parked:
                self._write_parked()
            if self._abandoned:
                self._give_back_abandoned()
            job, next_at = self._try_claim(skip)
            if job is not None:
                return job
            wait = None if next_at is None else max(0.0, next_at - time.time())
            if self._parked or self._abandoned:
                wait = PARKED_RETRY_S if wait is None else min(wait, PARKED_RETRY_S)
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = left if wait is None else min(wait, left)
            with self._cond:
                if self._closed:
                    return None
                self._cond.wait(wait)

    def _try_claim(self, skip: Collection[int] = ()) -> tuple[Job | None, float | None]:
        now = time.time()
        skipped = json.dumps(sorted(skip)) if skip else None
        with self._lock, transaction(self.conn):
            if skipped is None:
                row = self.conn.execute(CLAIM_SQL, (now,)).fetchone()
            else:
                row = self.conn.execute(CLAIM_SKIP_SQL, (now, skipped)).fetchone()
            if row is None:
                if skipped is None:
                    nxt = self.conn.execute("SELECT min(not_before) FROM jobs WHERE state='queued'").fetchone()[0]
                else:
                    nxt = self.conn.execute(
                        "SELECT min(not_before) FROM jobs WHERE state='queued'"
                        " AND id NOT IN (SELECT value FROM json_each(?))", (skipped,)).fetchone()[0]
                return None, nxt
            self.conn.execute("UPDATE jobs SET state='running', updated_at=?, enqueued_at=abs(enqueued_at)"
                              " WHERE id=?", (now, row["id"]))
            return Job(row["id"], row["collection"], from_db(row["path"]), maybe_from_db(row["root"]), row["op"],
                       row["tries"]), None

    def done(self, job: Job) -> None:
        """Finished: the row goes, unless a newer event arrived while it ran (then it runs again)."""
        with self._lock, transaction(self.conn):
            row = self.conn.execute("SELECT enqueued_at FROM jobs WHERE id=?", (job.id,)).fetchone()
            if row is not None and row[0] < 0:
                self.conn.execute("UPDATE jobs SET state='queued', enqueued_at=?, tries=0 WHERE id=?",
                                  (time.time(), job.id))
            else:
                self.conn.execute("DELETE FROM jobs WHERE id=?", (job.id,))
        with self._cond:
            self._cond.notify_all()

    def fail(self, job: Job, error: str, *, retryable: bool = True) -> bool:
        """Record a failure; returns True when the job will be retried (after a backoff)."""
        tries = job.tries + 1
        error = shown_path(error)  # a message may quote an odd name
        retry = retryable and tries < self.max_tries
        now = time.time()
        with self._lock, transaction(self.conn):
            row = self.conn.execute("SELECT enqueued_at FROM jobs WHERE id=?", (job.id,)).fetchone()
            if row is not None and row[0] < 0:  # the file changed again while this try ran
                retry, tries = True, 0
                self.conn.execute("UPDATE jobs SET state='queued', tries=0, not_before=?, enqueued_at=?,"
                                  " error=? WHERE id=?", (now, now, error, job.id))
            elif retry:
                wait = retry_wait(tries)
                self.conn.execute("UPDATE jobs SET state='queued', tries=?, not_before=?, error=?, updated_at=?"
                                  " WHERE id=?", (tries, now + wait, error, now, job.id))
            else:
                self.conn.execute("UPDATE jobs SET state='failed', tries=?, error=?, updated_at=? WHERE id=?",
                                  (tries, error, now, job.id))
        with self._cond:
            self._cond.notify_all()
        return retry

    def release(self, job: Job) -> None:
        """Give a claimed job back untouched (shutdown while it was about to run, or the small-file
        lane passing over a big file)."""
        with self._lock, transaction(self.conn):
            self.conn.execute("UPDATE jobs SET state='queued' WHERE id=? AND state='running'", (job.id,))
        # A worker that found nothing while this job was held waits on the condition with no
        # deadline: without this it would never see the job again.
        with self._cond:
            self._cond.notify_all()

    # --- reading -----------------------------------------------------------------------------
    def depth(self, collection: str | None = None) -> dict[str, int]:
        with self._lock:
            return job_depth(self.conn, collection)

    def pending_paths(self, collection: str) -> set[str]:
        with self._lock:
            return {from_db(r[0]) for r in self.conn.execute(
                "SELECT path FROM jobs WHERE collection=? AND state != 'failed'", (collection,))}

    def failed(self, limit: int = 50) -> list[dict]:
        with self._lock:
            return failed_jobs(self.conn, limit)

    def drop_collection(self, collection: str) -> None:
        with self._lock, transaction(self.conn):
            self.conn.execute("DELETE FROM jobs WHERE collection=?", (collection,))


# Shared with IngestDB's read-only handle, so status can count jobs without the queue's lock.
def job_depth(conn: sqlite3.Connection, collection: str | None = None) -> dict[str, int]:
    """Jobs by state ("queued", "running", "failed"), of one collection or all."""
    q = "SELECT state, count(*) FROM jobs"
    args: tuple = ()
    if collection:
        q += " WHERE collection=?"
        args = (collection,)
    return {r[0]: r[1] for r in conn.execute(q + " GROUP BY state", args)}


def failed_jobs(conn: sqlite3.Connection, limit: int) -> list[dict]:
    return [{**dict(r), "path": from_db(r["path"])} for r in conn.execute(
        "SELECT collection, path, op, tries, error FROM jobs WHERE state='failed' ORDER BY id LIMIT ?", (limit,))]


"""The durable ingest job queue on PostgreSQL, shared by every ragweedd process of one source.

Same behaviour as JobQueue (store/sqlite/job_queue.py): one row per (collection, path), the newest event
wins, upserts before deletes, retries with backoff, failures kept. What differs:

* Rows belong to a source (config ``source_name``): a path can only be read on the machine or
  share that holds it, so a process claims only its own source's jobs; processes that watch the
  same share under the same source name split its jobs between them.
* A claim is ``SELECT … FOR UPDATE SKIP LOCKED``: two processes claiming at the same moment never
  take the same row, and neither waits for the other.
* A running row names its claimer (``claimed_by``, store/postgres/pg_claims.py: a number the process holds
  as an advisory lock of its session). A process that died (kill -9, a machine gone) loses its
  session and with it the lock, so its rows are the running rows whose claimer holds no lock; they
  go back to queued when a queue opens and whenever a claim finds nothing ready. A live process's
  jobs are never taken.
* A daemon claims only jobs of the collections it serves (``serves``): two daemons of one source
  with different collections leave each other's jobs alone.
* Another process's put does not wake this one's waiting claim: a claim waits at most
  ``POLL_S`` before looking again.
* A process's own claims outlive an outage of the server: its claimer's lock is taken again as
  soon as it reconnects, so the rows it left running are no one's orphans. The queue therefore
  knows which of its claims a worker still works on (``_Held``); a row running under its claimer
  that no worker holds (its outcome could not be written while the server was away, or a claim's
  answer was lost with the connection) goes back to queued at the next claim that reaches the
  server, so it is ingested again within seconds of the server's return, never twice at once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection

from ragweedd.contract import shown_path
from ragweedd.errors import InternalError
from ragweedd.logging import get_logger
from ragweedd.store.postgres.connection import PgConn, from_pg, maybe_from_pg, to_pg
from ragweedd.store.postgres.pg_claims import LIVE_CLAIMERS, hold, new_claimer
from ragweedd.store.rows import retry_wait
from ragweedd.store.types import Job

log = get_logger("ragweedd.ingest")
POLL_S = 1.0

_PUT = ("INSERT INTO jobs AS j (source, collection, path, root, op, state, tries, not_before, enqueued_at,"
        " updated_at) VALUES (%s,%s,%s,%s,%s,'queued',0,%s,%s,%s)"
        " ON CONFLICT (source, collection, path) DO UPDATE SET op=excluded.op,"
        " root=coalesce(excluded.root, j.root),"
        " state=CASE WHEN j.state='running' THEN 'running' ELSE 'queued' END,"
        " tries=CASE WHEN j.state='running' THEN j.tries ELSE 0 END,"
        " not_before=excluded.not_before, error=NULL, updated_at=excluded.updated_at,"
        " enqueued_at=CASE WHEN j.state='running' THEN -1 ELSE j.enqueued_at END")
_ORPHANS = ("UPDATE jobs SET state='queued', claimed_by=NULL WHERE source=%s AND state='running'"
            f" AND claimed_by IS NOT NULL AND claimed_by NOT IN ({LIVE_CLAIMERS})")
# this process's own running rows that none of its workers holds any more
_LET_GO = ("UPDATE jobs SET state='queued', claimed_by=NULL WHERE source=%s AND state='running'"
           " AND claimed_by=%s AND NOT (id = ANY(%s))")


class _Held:
    """The jobs the queues of one claimer in this process have claimed and not yet settled: the
    rows of that claimer running in the table and not in here are no worker's. One lock covers a
    claim and its entry here, and the look for rows no worker holds, so neither sees the other
    half done."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.working: set[int] = set()


_HELD: dict[str, _Held] = {}
_HELD_LOCK = threading.Lock()


def _held_by(claimer: str) -> _Held:
    with _HELD_LOCK:
        return _HELD.setdefault(claimer, _Held())


class PgJobQueue:
    def __init__(self, dsn: str, *, source: str, max_tries: int = 3, claimer: int | None = None) -> None:
        """``claimer``: the process's (store/postgres/pg_claims.py), held by its backend; a queue opened on
        its own holds one of its own."""
        self.db = PgConn(dsn)
        self.source = source
        self.max_tries = max_tries
        if claimer is None:
            claimer = new_claimer()
            hold(self.db, claimer)
            self.db.on_reconnect.append(lambda: hold(self.db, claimer))
        self.claimer = str(claimer)
        # the collections this process ingests (a daemon's): it claims no job of another, which
        # a process of the same source serving that collection is there to take
        self.serves: Callable[[], Collection[str]] | None = None
        self._cond = threading.Condition()
        self._closed = False
        self._held = _held_by(self.claimer)  # which of this claimer's jobs a worker still holds
        self._let_go_due = False  # a claim or an outcome was lost: look for rows no worker holds
        self._abandoned: set[int] = set()  # given up on by their worker, not yet given back
        self.requeue_orphans()

    @property
    def unwritten(self) -> int:
        return 0

    @property
    def abandoned(self) -> int:
        """Jobs given up on by a worker whose outcome could not be written: they wait for the
        server, and go back to queued at the next claim that reaches it."""
        return len(self._abandoned)

    def abandon(self, job: Job) -> None:
        """The worker that claimed ``job`` no longer works on it and could not write its outcome (the
        server was away): its row goes back to queued at the next claim that reaches the server,
        not a try spent; the claimer's lock, taken again on reconnecting, would keep it running
        for as long as this process lives."""
        with self._held.lock:
            self._held.working.discard(job.id)
            self._abandoned.add(job.id)
            self._let_go_due = True
        with self._cond:
            self._cond.notify_all()

    def _let_go(self) -> None:
        """Give back the rows this process left running that no worker holds (``abandon``)."""
        with self._held.lock:
            n = self.db.run(_LET_GO, (self.source, self.claimer, sorted(self._held.working)))
            self._let_go_due = False
            self._abandoned.clear()
        if n:
            log.info("ingest_jobs_given_back", jobs=n, reason="their outcome could not be written while the "
                     "database server was away, or a claim's answer was lost with the connection; they run again")

    def requeue_orphans(self) -> int:
        """Running jobs of this source whose claimer's connection is gone go back to queued."""
        return self.db.run(_ORPHANS, (self.source,))

    def close_waiters(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def close(self) -> None:
        self.close_waiters()
        self.db.close()

    # --- producers ---------------------------------------------------------------------------
    def put(self, collection: str, path: str, op: str, root: str | None = None, *, delay_s: float = 0.0) -> None:
        self.put_many([(collection, path, op, root)], delay_s=delay_s)

    def put_many(self, items: list[tuple[str, str, str, str | None]], *, delay_s: float = 0.0) -> int:
        if not items:
            return 0
        now = time.time()
        rows = []
        for collection, path, op, root in items:
            if op not in ("upsert", "delete"):
                raise InternalError(f"job op must be 'upsert' or 'delete', not {op!r}")
            rows.append((self.source, collection, to_pg(path), None if root is None else to_pg(root), op,
                         now + delay_s, now, now))
        if len(rows) == 1:
            self.db.run(_PUT, rows[0])  # one statement is its own transaction: one round trip
        else:
            with self.db.tx() as c:
                c.cursor().executemany(_PUT, rows)  # sent as one pipeline, not a round trip per row
        with self._cond:
            self._cond.notify_all()
        return len(items)

    # --- consumers ---------------------------------------------------------------------------
    def claim(self, timeout_s: float | None = None, skip: Collection[int] = ()) -> Job | None:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            with self._cond:
                if self._closed:
                    return None
            job, next_at = self._try_claim(skip)
            if job is not None:
                return job
            wait = POLL_S if next_at is None else min(POLL_S, max(0.0, next_at - time.time()))
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                wait = min(wait, left)
            with self._cond:
                if self._closed:
                    return None
                self._cond.wait(wait)

    def _try_claim(self, skip: Collection[int] = ()) -> tuple[Job | None, float | None]:
        if self._let_go_due:
            self._let_go()
        now = time.time()
        mine, names = ("", []) if self.serves is None else (" AND collection = ANY(%s)", list(self.serves()))
        # one statement (its own transaction): the claim costs one round trip
        with self._held.lock:
            try:
                row = self.db.one(
                    "UPDATE jobs SET state='running', updated_at=%s, enqueued_at=abs(enqueued_at), claimed_by=%s"
                    " WHERE id = (SELECT id FROM jobs WHERE source=%s AND state='queued' AND not_before <= %s"
                    f" AND NOT (id = ANY(%s)){mine} ORDER BY (op = 'delete'), id LIMIT 1 FOR UPDATE SKIP LOCKED)"
                    " RETURNING *", (now, self.claimer, self.source, now, list(skip), *([names] if mine else [])),
                    retry=False)  # run twice, it would take a second job and leave the first running
            except Exception:
                self._let_go_due = True  # the claim may have been made, its answer lost
                raise
            if row is not None:
                self._held.working.add(int(row["id"]))
        if row is None:
            nxt = self.db.one("SELECT min(not_before) AS t FROM jobs WHERE source=%s AND state='queued'"
                              f" AND NOT (id = ANY(%s)){mine}", (self.source, list(skip), *([names] if mine else [])))
            self.db.run(_ORPHANS, (self.source,))
            self._let_go()  # and this process's own that no worker holds: nothing is left behind
            return None, (nxt["t"] if nxt else None)
        r: dict = row
        return Job(int(r["id"]), r["collection"], from_pg(r["path"]), maybe_from_pg(r["root"]), r["op"],
                   int(r["tries"])), None

    def done(self, job: Job) -> None:
        # An event while it ran marked the row (enqueued_at < 0): it runs again. Each statement
        # is atomic against a put's upsert of the row, so the delete or the requeue wins whole.
        # Only while the row is still this process's claim: one taken over by another process (this
        # one's connection dropped meanwhile) is that one's to finish. Under the connection's lock
        # with the end of the claim (``_working``): a job queued again here and claimed at once by
        # another worker stays that worker's.
        with self._held.lock:
            if self.db.run("DELETE FROM jobs WHERE id=%s AND enqueued_at >= 0 AND claimed_by=%s",
                           (job.id, self.claimer)) == 0:
                self.db.run("UPDATE jobs SET state='queued', enqueued_at=%s, tries=0, claimed_by=NULL"
                            " WHERE id=%s AND enqueued_at < 0 AND claimed_by=%s", (time.time(), job.id, self.claimer))
            self._held.working.discard(job.id)
        with self._cond:
            self._cond.notify_all()

    def fail(self, job: Job, error: str, *, retryable: bool = True) -> bool:
        tries = job.tries + 1
        error = shown_path(error)
        retry = retryable and tries < self.max_tries
        now = time.time()
        with self._held.lock:
            with self.db.tx() as c:
                row = c.execute("SELECT enqueued_at FROM jobs WHERE id=%s AND claimed_by=%s FOR UPDATE",
                                (job.id, self.claimer)).fetchone()
                if row is None:  # taken over by another process meanwhile: its claim now
                    retry = True
                elif row["enqueued_at"] < 0:
                    retry = True
                    c.execute("UPDATE jobs SET state='queued', tries=0, not_before=%s, enqueued_at=%s, error=%s,"
                              " claimed_by=NULL WHERE id=%s", (now, now, error, job.id))
                elif retry:
                    wait = retry_wait(tries)
                    c.execute("UPDATE jobs SET state='queued', tries=%s, not_before=%s, error=%s, updated_at=%s,"
                              " claimed_by=NULL WHERE id=%s", (tries, now + wait, error, now, job.id))
                else:
                    c.execute("UPDATE jobs SET state='failed', tries=%s, error=%s, updated_at=%s, claimed_by=NULL"
                              " WHERE id=%s", (tries, error, now, job.id))
            self._held.working.discard(job.id)  # once written: a worker whose write failed still holds it
        with self._cond:
            self._cond.notify_all()
        return retry

    def release(self, job: Job) -> None:
        with self._held.lock:
            self.db.run("UPDATE jobs SET state='queued', claimed_by=NULL WHERE id=%s AND state='running'"
                        " AND claimed_by=%s", (job.id, self.claimer))
            self._held.working.discard(job.id)
        with self._cond:
            self._cond.notify_all()

    # --- reading -----------------------------------------------------------------------------
    def depth(self, collection: str | None = None) -> dict[str, int]:
        """Jobs of this source by state, of one collection or all."""
        if collection:
            rows = self.db.all("SELECT state, count(*) AS n FROM jobs WHERE source=%s AND collection=%s GROUP BY state",
                               (self.source, collection))
        else:
            rows = self.db.all("SELECT state, count(*) AS n FROM jobs WHERE source=%s GROUP BY state", (self.source,))
        return {r["state"]: int(r["n"]) for r in rows}

    def pending_paths(self, collection: str) -> set[str]:
        return {from_pg(r["path"]) for r in self.db.all(
            "SELECT path FROM jobs WHERE source=%s AND collection=%s AND state <> 'failed'", (self.source, collection))}

    def failed(self, limit: int = 50) -> list[dict]:
        return [{**r, "path": from_pg(r["path"])} for r in self.db.all(
            "SELECT collection, path, op, tries, error FROM jobs WHERE source=%s AND state='failed'"
            " ORDER BY id LIMIT %s",
            (self.source, limit))]

    def drop_collection(self, collection: str) -> None:
        self.db.run("DELETE FROM jobs WHERE source=%s AND collection=%s", (self.source, collection))

"""The durable job queue on a real SQLite file and on a real PostgreSQL (each test runs on both):
coalescing, restart survival, backoff, failure."""

from __future__ import annotations

import threading
import time

import pytest

from ragweedd.store.sqlite.job_queue import JobQueue
from tests.tools import wait_until


@pytest.fixture(params=["sqlite", "postgresql"])
def make_queue(request, tmp_path):
    """make_queue(max_tries=3) -> a queue on this test's store; every call is another process's
    view of the same queue (the same file, or the same database and source)."""
    made = []

    def make(max_tries: int = 3):
        if request.param == "sqlite":
            q = JobQueue(tmp_path / "ingest_db.sqlite3", max_tries=max_tries)
        else:
            from ragweedd.store.postgres.backend import PgBackend

            backend = PgBackend(request.getfixturevalue("pg_dsn"), source="host")
            q = backend.open_jobs(max_tries=max_tries)
            q.backend = backend  # the process's own connection, which holds its claimer's lock
        made.append(q)
        return q

    yield make
    for q in made:
        for part in (q, getattr(q, "backend", None)):
            try:
                if part is not None:
                    part.close()
            except Exception:  # noqa: BLE001 - a test may have "killed" it already
                pass


def _die(q) -> None:
    """The process holding ``q`` dies: its connections go, without done() or release()."""
    if isinstance(q, JobQueue):
        q.conn.close()
        return
    q.db.conn.close()
    q.backend._db.conn.close()


def test_events_for_one_path_coalesce_and_newest_op_wins(make_queue):
    q = make_queue()
    q.put("c", "/r/a.txt", "upsert", "/r")
    q.put("c", "/r/a.txt", "delete", "/r")
    q.put("c", "/r/a.txt", "upsert", "/r")
    q.put("c", "/r/b.txt", "upsert", "/r")
    assert q.depth() == {"queued": 2}
    job = q.claim(0)
    assert (job.path, job.op) == ("/r/a.txt", "upsert")


def test_upserts_are_served_before_deletes(make_queue):
    q = make_queue()
    q.put_many([("c", "/old/x", "delete", "/"), ("c", "/new/x", "upsert", "/"), ("c", "/old/y", "delete", "/")])
    order = []
    while (j := q.claim(0)) is not None:
        order.append(j.path)
        q.done(j)
    assert order == ["/new/x", "/old/x", "/old/y"]


def test_jobs_survive_a_restart_and_running_jobs_are_requeued(make_queue):
    q = make_queue()
    q.put_many([("c", f"/r/{i}", "upsert", "/r") for i in range(5)])
    running = q.claim(0)
    assert q.depth() == {"queued": 4, "running": 1}
    _die(q)  # the process dies here: no done(), no release()
    q2 = make_queue()
    if q2.depth() != {"queued": 5}:  # PostgreSQL: the dead session may take a moment to leave
        wait_until(lambda: q2.requeue_orphans() or q2.depth() == {"queued": 5}, 10, what="requeued")
    assert q2.depth() == {"queued": 5}
    got = set()
    while (j := q2.claim(0)) is not None:
        got.add(j.path)
        q2.done(j)
    assert running.path in got and len(got) == 5
    assert q2.depth() == {}


def test_an_event_during_a_run_makes_the_job_run_again(make_queue):
    q = make_queue()
    q.put("c", "/r/a", "upsert")
    j = q.claim(0)
    q.put("c", "/r/a", "upsert")  # the file changed while it was being ingested
    q.done(j)
    j2 = q.claim(0)
    assert j2 is not None and j2.path == "/r/a"
    q.done(j2)
    assert q.claim(0) is None


def test_failures_back_off_then_fail_after_max_tries(make_queue, monkeypatch):
    import ragweedd.store.rows as rows  # the backoff both backends' queues wait

    monkeypatch.setattr(rows, "BACKOFF_BASE_S", 0.2)
    q = make_queue(max_tries=3)
    q.put("c", "/r/bad.pdf", "upsert")
    j = q.claim(0)
    assert q.fail(j, "broken xref", retryable=True) is True
    assert q.claim(0) is None  # backing off
    t0 = time.monotonic()
    j = q.claim(5)
    assert j is not None and j.tries == 1 and time.monotonic() - t0 >= 0.1
    assert q.fail(j, "broken xref", retryable=True) is True
    j = q.claim(5)
    assert j.tries == 2
    assert q.fail(j, "broken xref", retryable=True) is False
    assert q.depth() == {"failed": 1}
    assert q.failed() == [{"collection": "c", "path": "/r/bad.pdf", "op": "upsert", "tries": 3, "error": "broken xref"}]
    # A new event for the failed path (the user fixed the file) makes it eligible again.
    q.put("c", "/r/bad.pdf", "upsert")
    assert q.claim(0).tries == 0


def test_non_retryable_failure_fails_at_once(make_queue):
    q = make_queue(max_tries=5)
    q.put("c", "/r/zipbomb.zip", "upsert")
    assert q.fail(q.claim(0), "ratio cap", retryable=False) is False
    assert q.depth() == {"failed": 1}


def test_claim_waits_without_polling_and_wakes_on_put(make_queue):
    q = make_queue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.claim(10)))
    t.start()
    time.sleep(0.3)
    assert not got
    q.put("c", "/r/late", "upsert")
    t.join(5)
    assert got and got[0].path == "/r/late"


def test_close_waiters_releases_blocked_claims(make_queue):
    q = make_queue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.claim()))
    t.start()
    time.sleep(0.2)
    q.close_waiters()
    t.join(5)
    assert got == [None]


def test_a_claim_walks_the_claim_index_instead_of_sorting_the_queue(tmp_path):
    from ragweedd.store.sqlite.job_queue import CLAIM_SQL

    q = JobQueue(tmp_path / "ingest_db.sqlite3")
    q.put_many([("c", f"/r/f{i}", "delete" if i % 3 else "upsert", "/r") for i in range(3000)])
    plan = " ".join(str(r[3]) for r in q.conn.execute("EXPLAIN QUERY PLAN " + CLAIM_SQL, (time.time(),)))
    assert "jobs_next" in plan and "TEMP B-TREE" not in plan, plan
    first = q.claim(timeout_s=0)
    assert first is not None and first.op == "upsert" and first.path == "/r/f0"
    q.close()


def test_claim_passes_over_skipped_jobs_and_waits_instead_of_spinning(make_queue):
    """The small-file lane skips the jobs it handed back (too big for it): it gets the next one, and
    with only skipped jobs ready it waits out its timeout (no busy loop on their past not_before)."""
    q = make_queue()
    q.put_many([("c", "/r/big.log", "upsert", "/r"), ("c", "/r/note.md", "upsert", "/r")])
    big = q.claim(0)
    assert big.path == "/r/big.log"
    q.release(big)
    small = q.claim(0, skip={big.id})
    assert small.path == "/r/note.md"
    q.done(small)
    t0 = time.monotonic()
    assert q.claim(0.3, skip={big.id}) is None
    assert time.monotonic() - t0 >= 0.29
    assert q.claim(0).id == big.id  # a regular worker still gets it


def test_a_released_job_wakes_a_worker_waiting_for_one(make_queue):
    # The small-file lane claims a big file and gives it back; a regular worker that asked for a
    # job while it was held waits with no deadline and must be woken by the release.
    q = make_queue()
    q.put("c", "/big.txt", "upsert")
    held = q.claim(timeout_s=1)
    assert held is not None
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(q.claim()))
    waiter.start()
    time.sleep(0.3)  # the waiter found nothing ready and sleeps on the condition
    q.release(held)
    waiter.join(5)
    alive = waiter.is_alive()
    if alive:
        q.close()  # let the thread end
        waiter.join(5)
    assert not alive and got and got[0].path == "/big.txt"
    q.close()

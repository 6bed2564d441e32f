"""Claims in a shared PostgreSQL store (store/postgres/pg_claims.py): machines that log in as different
roles, as a team's usually do, never take each other's running jobs or the chunks another is
embedding, and take them as soon as that process is gone; a daemon claims only the jobs of the
collections it serves."""

from __future__ import annotations

import uuid

import pytest

from ragweedd.store.types import PRIMARY
from tests.tools import wait_until


def _dsn_as(admin_uri: str, user: str, dbname: str) -> str:
    return f"postgresql://{user}@/{dbname}?{admin_uri.partition('?')[2]}"


@pytest.fixture
def two_roles(pg_server):
    """One database owned by a group role, and two login roles in it (two machines' users)."""
    import psycopg

    tag = uuid.uuid4().hex[:8]
    group, db, users = f"rwg_{tag}", f"rwc_{tag}", [f"rwa_{tag}", f"rwb_{tag}"]
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f'CREATE ROLE "{group}"')
        for u in users:
            c.execute(f'CREATE USER "{u}" IN ROLE "{group}"')
        c.execute(f'CREATE DATABASE "{db}" OWNER "{group}"')
    with psycopg.connect(_dsn_as(pg_server, "postgres", db), autocommit=True) as c:
        c.execute("CREATE EXTENSION vector")
        c.execute(f'GRANT CREATE, USAGE ON SCHEMA public TO "{group}"')
    dsns = [_dsn_as(pg_server, u, db) for u in users]
    for d in dsns:  # objects made by either role belong to the group, so both may use them
        with psycopg.connect(d, autocommit=True) as c:
            c.execute(f'ALTER ROLE CURRENT_USER SET role = "{group}"')
    yield dsns
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        for u in users:
            c.execute(f'DROP USER IF EXISTS "{u}"')
        c.execute(f'DROP ROLE IF EXISTS "{group}"')


def test_a_running_job_of_another_role_is_not_taken_until_its_process_is_gone(two_roles):
    from ragweedd.store.postgres.backend import PgBackend

    a_dsn, b_dsn = two_roles
    a, b = PgBackend(a_dsn, source="nas"), PgBackend(b_dsn, source="nas")
    qa, qb = a.open_jobs(max_tries=3), b.open_jobs(max_tries=3)
    try:
        qa.put_many([("c", "/s/one.txt", "upsert", "/s"), ("c", "/s/two.txt", "upsert", "/s")])
        job = qa.claim(timeout_s=5)
        assert job is not None
        assert qb.requeue_orphans() == 0, "a live process's running job must stay its own"
        other = qb.claim(timeout_s=0)
        assert other is not None and other.path != job.path
        assert qb.claim(timeout_s=0) is None  # nothing else: job stays with a
        qa.close()
        a.close()  # process a is gone: its session, and its claimer's lock, end (a moment later)
        assert wait_until(qb.requeue_orphans, 10, 0.05, "the job of the process gone") == 1
        again = qb.claim(timeout_s=5)
        assert again is not None and again.path == job.path
    finally:
        qb.close()
        b.close()


def test_chunks_another_role_is_embedding_are_skipped_until_its_process_is_gone(two_roles):
    from ragweedd.store.postgres.backend import PgBackend

    a_dsn, b_dsn = two_roles
    a, b = PgBackend(a_dsn, source="x"), PgBackend(b_dsn, source="y")
    ra = a.open_rag("notes")
    ra.publish(md5="c" * 32, source_file="/n.md", rel_path="n.md", kind="text", extractor="text", ocr_type=None,
               title=None, size_bytes=10, chunks=[{"chunk_idx": i, "text": f"chunk {i}", "meta": {}} for i in range(4)],
               vectors={}, embedders={PRIMARY: ("e", 4)})
    rb = b.open_rag("notes")
    try:
        taken = ra.pending_batch(2)
        assert len(taken) == 2
        rest = rb.pending_batch(10)
        assert {r[0] for r in rest}.isdisjoint(r[0] for r in taken) and len(rest) == 2
        assert rb.pending_batch(10, after_id=rest[-1][0]) == []
        ra.close()
        a.close()
        every = sorted(r[0] for r in taken + rest)
        wait_until(lambda: sorted(r[0] for r in rb.pending_batch(10)) == every, 10, 0.05,
                   "the chunks of the process gone")
    finally:
        rb.close()
        b.close()


def test_a_daemon_claims_only_jobs_of_the_collections_it_serves(pg_dsn):
    from ragweedd.store.postgres.backend import PgBackend

    backend = PgBackend(pg_dsn, source="nas")
    q = backend.open_jobs(max_tries=3)
    try:
        q.put_many([("theirs", "/s/a.txt", "upsert", "/s"), ("mine", "/s/b.txt", "upsert", "/s")])
        q.serves = lambda: ["mine"]
        job = q.claim(timeout_s=1)
        assert job is not None and job.collection == "mine"
        q.done(job)
        assert q.claim(timeout_s=0) is None
        assert q.depth() == {"queued": 1}  # left for the daemon of this source that serves it
    finally:
        q.close()
        backend.close()


def test_a_process_whose_connection_dropped_finishes_only_what_is_still_its_claim(pg_dsn):
    """Its claimer's lock went with the connection, so another process took its running job: the
    first one's done() must leave the second one's claim alone; keep_claim() takes the lock back."""
    import psycopg

    from ragweedd.store.postgres.backend import PgBackend

    a, b = PgBackend(pg_dsn, source="nas"), PgBackend(pg_dsn, source="nas")
    qa, qb = a.open_jobs(max_tries=3), b.open_jobs(max_tries=3)
    try:
        qa.put("c", "/s/big.txt", "upsert", "/s")
        job = qa.claim(timeout_s=5)
        assert job is not None
        pid = a._db.value("SELECT pg_backend_pid()")
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        wait_until(qb.requeue_orphans, 10, 0.05, "the job of the process that looks gone")
        taken = qb.claim(timeout_s=5)
        assert taken is not None and taken.id == job.id
        qa.done(job)  # the first process finishes its run: the row is the second one's now
        assert qb.depth() == {"running": 1}
        assert not qa.fail(job, "late failure") or qb.depth() == {"running": 1}
        qa.release(job)
        assert qb.depth() == {"running": 1}
        qb.done(taken)
        assert qb.depth() == {}
        a.keep_claim()  # the lock is taken again on a new connection
        qa.put("c", "/s/next.txt", "upsert", "/s")
        again = qa.claim(timeout_s=5)
        assert again is not None and qb.requeue_orphans() == 0
    finally:
        for x in (qa, qb, a, b):
            x.close()


def test_chunks_taken_and_not_embedded_are_given_back(pg_dsn):
    from ragweedd.store.postgres.backend import PgBackend

    a, b = PgBackend(pg_dsn, source="x"), PgBackend(pg_dsn, source="y")
    ra, rb = a.open_rag("notes"), b.open_rag("notes")
    try:
        ra.publish(md5="d" * 32, source_file="/n.md", rel_path="n.md", kind="text", extractor="text", ocr_type=None,
                   title=None, size_bytes=10, chunks=[{"chunk_idx": i, "text": f"c{i}", "meta": {}} for i in range(3)],
                   vectors={}, embedders={PRIMARY: ("e", 4)})
        assert len(ra.pending_batch(10)) == 3 and rb.pending_batch(10) == []
        assert ra.release_claims() == 3
        assert len(rb.pending_batch(10)) == 3  # at once, with the first process still alive
    finally:
        for x in (ra, rb, a, b):
            x.close()


def test_an_embedding_stage_takes_up_chunks_another_process_took_without_being_told(two_roles, tmp_path):
    """Process b takes every waiting chunk, writes the vectors of half, and dies. Nobody tells a's
    embedding stage, which had looked and found all four taken: it must see b's vectors and embed
    what b left, and its status must come back to nothing waiting."""
    from ragweedd.chunk.context import index_embedder_id
    from ragweedd.config import load_config
    from ragweedd.embed.hashing import HashEmbedder
    from ragweedd.ingest.vectorize import Vectorizer
    from ragweedd.paths import Paths
    from ragweedd.store.postgres.backend import PgBackend

    cfg = load_config(text="", env={})
    emb = HashEmbedder(8)
    eid = index_embedder_id(emb.id, cfg.chunk_context)
    a_dsn, b_dsn = two_roles
    a, b = PgBackend(a_dsn, source="x"), PgBackend(b_dsn, source="y")
    ra = a.open_rag("notes")
    ra.publish(md5="c" * 32, source_file="/n.md", rel_path="n.md", kind="text", extractor="text", ocr_type=None,
               title=None, size_bytes=10, chunks=[{"chunk_idx": i, "text": f"chunk {i}", "meta": {}} for i in range(4)],
               vectors={}, embedders={PRIMARY: (eid, 8)})
    rb = b.open_rag("notes")
    taken = rb.pending_batch(10)
    assert len(taken) == 4
    paths = Paths.resolve(str(tmp_path / "d"), str(tmp_path / "s"), str(tmp_path / "c")).ensure()
    vec = Vectorizer(cfg, paths, emb, eid, collections=lambda: ["notes"], on_changes=lambda name: None, stores=a)
    vec.start()
    try:
        wait_until(lambda: vec.snapshot()["pending_chunks"] == 4 and not vec.snapshot()["running"], 60, 0.05,
                   "a's first look, every chunk taken by b")
        assert vec.written == 0
        half = [(cid, emb_id, ctx, emb.embed_batch([text])[0].astype("float32").tobytes())
                for cid, emb_id, text, ctx in taken[:2]]
        assert len(rb.add_vectors(eid, half)) == 2
        wait_until(lambda: vec.snapshot()["pending_chunks"] == 2, 60, 0.05, "a seeing the vectors b wrote")
        assert vec.written == 0, "the two chunks b still holds are b's while it lives"
        rb.close()
        b.close()
        # the figures are refreshed inside the fill, before it returns: settled is nothing waiting
        # and nothing running
        wait_until(lambda: vec.snapshot()["pending_chunks"] == 0 and not vec.snapshot()["running"], 60, 0.05,
                   "a embedding what b left")
        assert vec.written == 2 and ra.pending_summary() == (0, 0)
    finally:
        vec.stop()
        ra.close()
        a.close()

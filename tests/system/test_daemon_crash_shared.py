"""Two daemons writing one PostgreSQL database, killed with -9 at random moments while they
ingest one share together while its files are edited, deleted and added between the runs: every
restart converges to the state of a clean ingest of the final folder, no file is held twice, and
nothing already stored is embedded again (beyond one batch per kill).

Both daemons watch the same folder under the same ``source_name`` (a share mounted at the same
path on two machines), so they split its jobs through the queue's SKIP LOCKED claims.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time

import pytest

from tests.system.conftest import ROOT, wait_until

N = 800
BATCH = 32  # the most texts one embedding call sends (a kill can lose one call's work)


def _all(dsn: str, sql: str, args: tuple = ()) -> list[tuple]:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        return conn.execute(sql, args).fetchall()  # type: ignore[arg-type]


@pytest.mark.slow
# pytest-timeout's 600 s would stop the test before its own deadline below could say what it saw
@pytest.mark.timeout(1800)
def test_two_daemons_on_one_database_killed_at_random_converge(pg_dsn, daemon, tmp_path):
    share = tmp_path / "share"
    share.mkdir()
    def write(i: int, version: int = 0) -> None:
        (share / f"doc{i:04d}.txt").write_text(
            f"Document {i} v{version} is about the subject s{i:04d}topic. "
            + " ".join(f"t{i}v{version}w{j}" for j in range(40)))

    for i in range(N):
        write(i)
    names = set(range(N))
    a = daemon({"c": [share]}, start=False, store=pg_dsn, source_name="nas")
    b = daemon({"c": [share]}, start=False, store=pg_dsn, source_name="nas")
    rng = random.Random(20261123)
    kills = 0
    for round_ in range(6):
        if round_:  # while both are down: a few edits, deletes and new files
            for i in rng.sample(sorted(names), 6):
                write(i, round_)
            for i in rng.sample(sorted(names), 3):
                (share / f"doc{i:04d}.txt").unlink()
                names.discard(i)
            for i in range(N + 3 * round_, N + 3 * round_ + 3):
                write(i)
                names.add(i)
        a.start(wait=False)
        b.start(wait=False)
        a.wait_ready()
        b.wait_ready()
        time.sleep(rng.uniform(0.3, 2.0))
        for d in rng.sample([a, b], rng.choice([1, 2])):  # one of them, or both
            d.kill9()
            kills += 1
        for d in (a, b):  # the survivor, if any, goes on alone for a moment, then stops cleanly
            if d.proc is not None and d.proc.poll() is None:
                time.sleep(rng.uniform(0.0, 1.0))
                d.stop()
    a.start()
    b.start()
    n = len(names)
    seen: dict = {}

    def converged() -> bool:
        seen.update(done=sum(1 for r in a.live_rows("c").values() if r["extract_status"] == "done"), of=n,
                    a_idle=a.idle(), b_idle=b.idle())
        return seen["done"] == n and seen["a_idle"] and seen["b_idle"]

    # a deadline for a hang only: two daemons re-embedding after six kills take minutes on a loaded machine
    try:
        wait_until(converged, 1200, 0.5, "every file indexed after the last restart")
    except AssertionError as e:
        raise AssertionError(f"{e}; last seen {seen}; a: {a.status()['ingest']}; b: {b.status()['ingest']}") from None
    time.sleep(1)
    st_a, st_b = a.status(), b.status()
    a.stop()
    b.stop()

    cid = _all(pg_dsn, "SELECT id FROM collections WHERE name='c'")[0][0]
    assert _all(pg_dsn, "SELECT count(*) FROM jobs")[0][0] == 0
    rows = _all(pg_dsn, "SELECT source_file, count(*) FROM ingest_files WHERE superseded=0 GROUP BY 1")
    assert len(rows) == n and all(r[1] == 1 for r in rows), "each file has one ingest row"
    docs, paths, chunks, vecs, pending = _all(
        pg_dsn, "SELECT (SELECT count(*) FROM documents WHERE collection_id=%s),"
        " (SELECT count(*) FROM document_paths WHERE collection_id=%s AND source='nas'),"
        " (SELECT count(*) FROM chunks WHERE collection_id=%s),"
        " (SELECT count(*) FROM vectors WHERE collection_id=%s AND space='primary'),"
        " (SELECT count(*) FROM pending_vectors WHERE collection_id=%s)", (cid,) * 5)[0]
    orphans = _all(pg_dsn, "SELECT count(*) FROM chunks e WHERE NOT EXISTS"
                   " (SELECT 1 FROM document_paths p WHERE p.collection_id=e.collection_id AND p.md5=e.md5)")[0][0]
    doubled = _all(pg_dsn, "SELECT count(*) FROM (SELECT md5, chunk_idx FROM chunks GROUP BY 1, 2"
                   " HAVING count(*) > 1) t")[0][0]
    cached = _all(pg_dsn, "SELECT count(*) FROM embed_cache")[0][0]

    # A clean one-shot ingest of the same folder into SQLite is the reference.
    ref = daemon({"c": [share]}, start=False)
    subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(ref.cfg), "ingest", "-c", "c"],
                   env=ref.env, cwd=ROOT, check=True, capture_output=True, timeout=300)
    ref_chunks = ref.probe.chunks("c")
    assert docs == n and paths == n
    assert chunks == vecs == ref_chunks and pending == 0, (chunks, vecs, ref_chunks, pending)
    assert orphans == 0 and doubled == 0
    for st in (st_a, st_b):
        assert st["index"]["c"]["vectors"] == chunks and st["index"]["c"]["error"] is None, st["index"]
        assert st["integrity"] is None or st["integrity"]["ok"], st["integrity"]
    # Both daemons' embedders together: every distinct text once, plus at most one lost batch per
    # kill (a batch embedded but not yet committed when its daemon died).
    sent = a.embed_calls() + b.embed_calls()
    assert cached >= chunks  # every chunk text is distinct here; edits left their old texts cached
    assert cached <= sent <= cached + kills * BATCH, (sent, cached, kills)
    # both took part: the share's jobs were split between them
    assert a.ingests_any() and b.ingests_any()

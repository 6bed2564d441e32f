"""kill -9 at random moments while ingesting 1,000 files: every restart converges to a state equal
to a clean ingest, with nothing that was already stored embedded again."""

from __future__ import annotations

import random
import time

import pytest

from tests.system.conftest import wait_until

N = 1000


@pytest.mark.slow
def test_kill9_at_random_moments_converges(daemon, tmp_path):
    root = tmp_path / "corpus"
    root.mkdir()
    for i in range(N):
        # Two chunks' worth of distinct text per file keeps the embed batches busy.
        (root / f"doc{i:04d}.txt").write_text(
            f"Document {i} is about the subject s{i:04d}topic. " + " ".join(f"t{i}w{j}" for j in range(40)))
    d = daemon({"c": [root]}, start=False)
    rng = random.Random(20240601)
    kills = 0
    for _ in range(10):
        d.start()
        time.sleep(rng.uniform(0.5, 3.0))
        d.kill9()
        kills += 1
    d.start()
    wait_until(lambda: sum(1 for r in d.live_rows("c").values() if r["extract_status"] == "done") == N
               and d.idle(), 240, 0.5, "every file indexed after the last restart")
    time.sleep(1)
    st = d.status()
    d.stop()

    with d.db() as c:
        assert c.execute("SELECT count(*) FROM jobs").fetchone()[0] == 0
        rows = c.execute("SELECT source_file, count(*) FROM ingest_files WHERE superseded=0 GROUP BY 1").fetchall()
        assert len(rows) == N and all(r[1] == 1 for r in rows)
        cached = c.execute("SELECT count(*) FROM embed_cache").fetchone()[0]
    with d.db("c") as c:
        chunks = c.execute("SELECT count(*) FROM embeddings").fetchone()[0]
        docs = c.execute("SELECT count(*) FROM documents").fetchone()[0]
        paths = c.execute("SELECT count(*) FROM document_paths").fetchone()[0]
        fts = c.execute("SELECT count(*) FROM fts_chunks").fetchone()[0]
        vecs = c.execute("SELECT count(*) FROM vectors").fetchone()[0]
        orphans = c.execute("SELECT count(*) FROM embeddings e WHERE NOT EXISTS"
                            " (SELECT 1 FROM document_paths p WHERE p.md5 = e.md5)").fetchone()[0]
        fts_orphans = c.execute("SELECT count(*) FROM fts_chunks WHERE rowid NOT IN (SELECT id FROM embeddings)"
                                ).fetchone()[0]
        per_doc = c.execute("SELECT count(*) FROM (SELECT md5, chunk_idx, count(*) n FROM embeddings"
                            " GROUP BY 1, 2 HAVING n > 1)").fetchone()[0]

    # A clean one-shot ingest of the same folder is the reference.
    ref = daemon({"c": [root]}, start=False)
    import subprocess
    import sys

    from tests.system.conftest import ROOT

    subprocess.run([sys.executable, "-m", "ragweedd", "--config", str(ref.cfg), "ingest", "-c", "c"],
                   env=ref.env, cwd=ROOT,
                   check=True, capture_output=True, timeout=300)
    with ref.db("c") as c:
        ref_chunks = c.execute("SELECT count(*) FROM embeddings").fetchone()[0]
    assert docs == N and paths == N
    assert chunks == fts == vecs == ref_chunks, (chunks, fts, vecs, ref_chunks)
    assert orphans == 0 and fts_orphans == 0 and per_doc == 0
    idx = st["index"].get("c", {})
    assert idx["error"] is None and idx["vectors"] == chunks, idx  # the HNSW index agrees with SQLite
    # Nothing stored was embedded again: every text sent to the embedder beyond the distinct chunk
    # texts must be one that a kill interrupted before its batch was committed (one batch per kill).
    sent = d.embed_calls()
    assert cached == chunks  # every chunk text is distinct here
    assert cached <= sent <= cached + kills * 32, (sent, cached)

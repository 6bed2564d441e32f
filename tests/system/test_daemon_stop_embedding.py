"""Issue 12 item 10: SIGTERM in the middle of embedding a large file stops the daemon in seconds.

Embedding checks for shutdown between batches; the interrupted job goes back to the queue untouched
and the batches already embedded are in the embed cache, so after a restart only the rest is
embedded. The embedder is made slow through daemon_main's ``--slow-embed`` (the hash embedder alone
would finish the file before the signal lands).
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time

from tests.system.conftest import ROOT, wait_until


def _start_slow(d, seconds: float) -> None:
    out = open(d.out, "ab")
    argv = [sys.executable, str(ROOT / "tests" / "system" / "daemon_main.py"), "--config", str(d.cfg),
            "--embed-log", str(d.embed_log), "--slow-embed", str(seconds)]
    d.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=d.env, cwd=str(ROOT))
    out.close()
    d.wait_ready()


def _big_text(n_words: int) -> str:
    rng = random.Random(12)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(5000)]
    lines = []
    for i in range(0, n_words, 12):
        lines.append(" ".join(rng.choice(vocab) for _ in range(12)) + f" line{i}.")
    return "\n".join(lines) + "\n"


def test_sigterm_while_embedding_stops_fast_and_resumes_from_cache(daemon, tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    d = daemon({"notes": [folder]}, start=False)
    _start_slow(d, 0.2)
    big = folder / "big.txt"
    big.write_text(_big_text(600_000))  # about 4 MB: thousands of chunks, 0.2 s per batch of 32

    wait_until(lambda: d.embed_calls() >= 32 * 5, 120, 0.1, "embedding of the big file to be under way")
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    rc = d.proc.wait(30)
    took = time.monotonic() - t0
    assert rc == 0, d.out.read_text()[-3000:]
    print(f"stop took {took:.2f} s")
    assert took < 5, f"stopping took {took:.1f} s"
    first_run = d.embed_calls()
    assert not d.ingests(big), "the file finished before the signal: make it bigger"
    assert any(e.get("event") == "ingest_job_released" for e in d.events()), d.out.read_text()[-3000:]
    with d.db() as c:  # the job went back untouched: queued, no try spent
        rows = c.execute("SELECT state, tries FROM jobs WHERE path=?", (str(big),)).fetchall()
    assert [tuple(r) for r in rows] == [("queued", 0)]

    d.start()
    d.wait_idle(300)
    [ev] = d.ingests(big)
    with d.db("notes") as c:
        chunks = c.execute("SELECT count(DISTINCT text_sha256) FROM embeddings").fetchone()[0]
    assert chunks > 2000
    # Every distinct chunk text was embedded exactly once over both runs: nothing cached is redone.
    assert d.embed_calls() == chunks
    assert ev["embedded"] == chunks - first_run


def test_sigterm_while_publishing_a_streamed_large_file_stops_fast(daemon, tmp_path):
    """A text file over 4 MiB is embedded in a first pass and published in a second one (one
    transaction); a stop during that second pass rolls it back and gives the job back."""
    folder = tmp_path / "notes"
    folder.mkdir()
    d = daemon({"notes": [folder]})
    big = folder / "big.txt"
    big.write_text(_big_text(2_500_000))  # about 17 MB: tens of thousands of chunks

    def first_pass_done():
        n = d.embed_calls()
        time.sleep(1.0)
        return n > 1000 and d.embed_calls() == n  # embedding has stopped: publishing is under way
    wait_until(first_pass_done, 300, 0.2, "the first pass (embedding) of the big file to end")
    assert not d.ingests(big), "the file was published before the signal: make it bigger"
    t0 = time.monotonic()
    d.proc.send_signal(signal.SIGTERM)
    rc = d.proc.wait(60)
    took = time.monotonic() - t0
    assert rc == 0, d.out.read_text()[-3000:]
    assert took < 5, f"stopping took {took:.1f} s"
    assert not d.ingests(big)
    with d.db() as c:
        rows = c.execute("SELECT state, tries FROM jobs WHERE path=?", (str(big),)).fetchall()
    assert [tuple(r) for r in rows] == [("queued", 0)]
    with d.db("notes") as c:  # the rolled-back publish left nothing behind
        assert c.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 0

"""A daemon thread whose loop ends by an exception is restarted and says so in status, never a
silent stop: the ingest worker (its pipeline cannot be opened the first times) and the index-sync
thread (a SystemExit escapes its per-collection ``except Exception``), through the real daemon."""

from __future__ import annotations

from tests.system.conftest import wait_until


def _degraded(d, text: str) -> list[str]:
    return [m for m in d.status()["degraded"] if text in m]


def test_an_ingest_worker_that_fails_is_restarted_and_reported(daemon, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("wombatfirst in the queue")
    d = daemon({"notes": [notes]}, launcher_args=["--fail-worker-start", "2"])
    msg = wait_until(lambda: _degraded(d, "ingest worker thread failed"), 30, what="the failure in degraded")
    assert "RuntimeError: the embedder is not ready (test)" in msg[0], msg
    # restarted after 1 s, then 2 s: the loop opens its pipeline on the third run and ingests
    wait_until(lambda: d.ingests(notes / "a.txt"), 30, what="the file indexed after the restarts")
    (notes / "b.txt").write_text("wombatsecond arrives later")
    wait_until(lambda: d.ingests(notes / "b.txt"), 30, what="a later file indexed by the restarted worker")
    st = d.status()
    assert any("failed 2 time(s)" in m for m in st["degraded"]), st["degraded"]
    assert not [m for m in st["degraded"] if "thread stopped" in m], st["degraded"]
    assert [e for e in d.events("thread_failed") if e.get("what") == "ingest worker"]
    assert d.proc.poll() is None


def test_the_index_sync_thread_that_fails_is_restarted_and_reported(daemon, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.txt").write_text("koalafirst goes into the vector index")
    d = daemon({"notes": [notes]}, launcher_args=["--fail-index-sync", "1"])
    msg = wait_until(lambda: _degraded(d, "index sync thread failed"), 30, what="the failure in degraded")
    assert "SystemExit: a library called sys.exit (test)" in msg[0], msg
    wait_until(lambda: d.ingests(notes / "a.txt"), 30, what="the file indexed")
    # the restarted thread applies what the failed run was doing and what came meanwhile
    wait_until(lambda: (d.status()["index"].get("notes") or {}).get("vectors") == 1, 30,
               what="the chunk in the live vector index")
    (notes / "b.txt").write_text("koalasecond follows it")
    wait_until(lambda: d.ingests(notes / "b.txt"), 30, what="a later file indexed")
    wait_until(lambda: (d.status()["index"].get("notes") or {}).get("vectors") == 2, 30,
               what="the later chunk applied by the restarted sync thread")
    assert not [m for m in d.status()["degraded"] if "thread stopped" in m]
    assert d.proc.poll() is None


def test_a_file_that_ends_the_worker_loop_is_failed_with_the_reason_and_the_rest_is_indexed(daemon, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "exit.txt").write_text("the file whose extraction calls sys.exit")
    for n in range(3):
        (notes / f"ok{n}.txt").write_text(f"platypus{n} is fine")
    d = daemon({"notes": [notes]}, launcher_args=["--exit-on-file", "exit.txt"])
    for n in range(3):
        wait_until(lambda n=n: d.ingests(notes / f"ok{n}.txt"), 60, what=f"ok{n}.txt indexed")

    def failed():
        return [j for j in d.status()["failed_jobs"] if j["path"] == str(notes / "exit.txt")]
    # each try ends the loop; the job it held is failed (a try spent), so it stops at max tries
    [job] = wait_until(failed, 90, what="the job of the file failed for good")
    assert "SystemExit: an extractor called sys.exit on exit.txt (test)" in job["error"], job
    assert _degraded(d, "ingest worker thread failed"), d.status()["degraded"]
    (notes / "later.txt").write_text("echidna after the failures")
    wait_until(lambda: d.ingests(notes / "later.txt"), 60, what="a later file indexed by the restarted worker")
    assert d.proc.poll() is None

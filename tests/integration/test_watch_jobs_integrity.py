"""Scheduled jobs: the nightly job's misfire policy, and the integrity check on real databases."""

from __future__ import annotations

from ragweedd.config import load_config
from ragweedd.jobs.scheduler import MISFIRE_GRACE_S, Jobs
from ragweedd.paths import Paths
from ragweedd.store.backends import open_data_dir
from ragweedd.store.sqlite.integrity_check import integrity_check


def _cfg(tmp_path, extra=""):
    return load_config(env={}, text=f'data_dir = "{tmp_path}/data"\nstate_dir = "{tmp_path}/s"\n'
                                    f'cache_dir = "{tmp_path}/c"\ncluster_schedule = "03:15"\n{extra}')


def test_nightly_job_runs_once_after_a_missed_night(tmp_path):
    ran = []
    jobs = Jobs(_cfg(tmp_path), reanalyze=lambda: ran.append(1), integrity=lambda: None, scan=lambda: None)
    jobs.start()
    try:
        job = jobs.sched.get_job("cluster_reanalysis")
        assert job.coalesce is True and job.misfire_grace_time == MISFIRE_GRACE_S
        assert str(job.trigger.fields[5]) == "3" and str(job.trigger.fields[6]) == "15"  # hour, minute
        nxt = jobs.next_runs()
        assert set(nxt) == {"cluster_reanalysis", "integrity_check", "reconcile_scan"}
        assert "T03:15:00" in nxt["cluster_reanalysis"]
        jobs.run_now("cluster_reanalysis")
        import time

        for _ in range(50):
            if ran:
                break
            time.sleep(0.1)
        assert ran == [1] and jobs.last["cluster_reanalysis"]["ok"]
    finally:
        jobs.stop()


def test_scan_job_is_off_when_interval_is_zero(tmp_path):
    jobs = Jobs(_cfg(tmp_path, "scan_interval_s = 0"), reanalyze=lambda: None, integrity=lambda: None,
                scan=lambda: None)
    assert jobs.sched.get_job("reconcile_scan") is None


def test_integrity_check_finds_a_missing_fts_row(tmp_path):
    from ragweedd.embed.hashing import HashEmbedder
    from ragweedd.ingest.pipeline import Pipeline
    from ragweedd.store.sqlite.connection import connect

    cfg = _cfg(tmp_path)
    paths = Paths.from_config(cfg)
    pipe = Pipeline(cfg, paths, HashEmbedder(32), stores=open_data_dir(paths))
    (tmp_path / "a.txt").write_text("Integrity checks compare counts of chunks, keyword rows and vectors.")
    pipe.ingest_file("c", tmp_path / "a.txt", tmp_path)
    pipe.close()
    ok = integrity_check(paths, ["c"], lambda c: 1)
    assert ok["ok"] and ok["collections"]["c"]["chunks"] == 1
    assert not integrity_check(paths, ["c"], lambda c: 0)["ok"]  # the index disagrees with SQLite
    conn = connect(paths.rag_db("c"))
    conn.execute("DELETE FROM fts_chunks")
    conn.close()
    bad = integrity_check(paths, ["c"])
    assert not bad["ok"]
    assert any("keyword rows" in p for p in bad["collections"]["c"]["problems"])

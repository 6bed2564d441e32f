"""Big and pathological files against a real daemon (hostile-input pass, "big files hold the only
worker"):

* a small file dropped behind a big one is indexed within seconds (the small-file lane), not after it;
* a file over its size cap is listed as skipped with the reason;
* an extractor child (here stuck on 100,000 nested <div>, quadratic in the HTML parser) dies with the
  daemon: at once when the daemon is SIGKILLed (nothing can clean up then), and on a stop, which
  gives its job back to the queue untouched.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.system.conftest import ROOT, wait_until


def _start_slow(d, seconds: float) -> None:
    out = open(d.out, "ab")
    argv = [sys.executable, str(ROOT / "tests" / "system" / "daemon_main.py"), "--config", str(d.cfg),
            "--embed-log", str(d.embed_log), "--slow-embed", str(seconds)]
    d.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=d.env, cwd=str(ROOT))
    out.close()
    d.wait_ready()


def _text(n_bytes: int, seed: int = 4) -> str:
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9)))
             for _ in range(3000)]
    lines, n = [], 0
    while n < n_bytes:
        line = " ".join(rng.choice(vocab) for _ in range(12)) + ".\n"
        lines.append(line)
        n += len(line)
    return "".join(lines)


def _sandbox_children(pid: int) -> list[int]:
    """Extraction children of ``pid`` (found through /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid and b"ragweedd.ingest.sandbox_child" in cmd:
            out.append(int(entry))
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def _deep_html(path: Path, depth: int = 100_000) -> None:
    # 1.1 MB; selectolax needs about a minute for it (quadratic in the depth)
    path.write_text("<html><body>" + "<div>" * depth + "deep" + "</div>" * depth + "</body></html>")


def test_small_file_is_not_queued_behind_a_big_one(daemon, tmp_path):
    """A big file whose extraction holds the only worker for a minute (100,000 nested <div>, 1.1
    MB): a small file dropped behind it is indexed within seconds by the small-file lane. (A big
    file's embedding no longer holds a worker at all: its vectors follow from the embedding stage.)"""
    folder = tmp_path / "notes"
    folder.mkdir()
    d = daemon({"notes": [folder]})
    big = folder / "deep.html"
    _deep_html(big)
    wait_until(lambda: _sandbox_children(d.proc.pid), 60, 0.1, "the big file's extraction to be under way")
    time.sleep(2.5)  # the big job has now held the worker for longer than the lane's 2 s
    small = folder / "small.md"
    small.write_text("# Herons\n\nThe grey heron stands still in shallow water and waits for fish.\n")
    t0 = time.monotonic()
    wait_until(lambda: d.ingests(small), 15, 0.1, "the small file to be indexed")
    took = time.monotonic() - t0
    print(f"small file indexed {took:.1f} s after it was written, while the big one was still extracted")
    assert not d.ingests(big, None), "the big file finished first: make it bigger"
    assert _sandbox_children(d.proc.pid), "the big file's extraction is no longer running"
    assert took < 8
    assert [h["source_file"] for h in d.search("grey heron shallow water")][:1] == [str(small)]


def test_file_over_the_size_cap_is_listed_as_skipped_with_the_reason(daemon, tmp_path):
    folder = tmp_path / "notes"
    folder.mkdir()
    big = folder / "huge.log"
    big.write_text(_text((1 << 20) + 5000))
    (folder / "ok.txt").write_text("a note small enough to be indexed, about kingfishers.\n")
    d = daemon({"notes": [folder]}, extra="ingest_max_text_mb = 1")
    d.wait_idle(60)
    r = d.api("GET", "/v1/documents", params={"collection": "notes", "state": "skipped"})
    assert r.status_code == 200, r.text
    [item] = r.json()["items"]
    assert item["source_file"] == str(big) and item["state"] == "skipped"
    assert "larger than ingest_max_text_mb (1 MiB)" in item["error"], item
    assert d.status()["files_by_state"].get("skipped") == 1
    # The cap raised and the daemon restarted: the file, unchanged on disk, is read now.
    d.stop()
    d.cfg.write_text(d.cfg.read_text().replace("ingest_max_text_mb = 1", "ingest_max_text_mb = 4"))
    d.start()
    wait_until(lambda: d.ingests(big), 60, what="the file read once its cap was raised")
    d.wait_idle(60)
    assert d.status()["files_by_state"].get("skipped", 0) == 0


def test_sandbox_child_dies_when_the_daemon_is_sigkilled(daemon, tmp_path):
    folder = tmp_path / "web"
    folder.mkdir()
    d = daemon({"web": [folder]}, extra="extract_timeout_s = 120\nextract_cpu_s = 120")
    _deep_html(folder / "deep.html")
    children: list[int] = []

    def started() -> bool:
        children[:] = _sandbox_children(d.proc.pid)
        return bool(children)

    wait_until(started, 30, 0.05, "the extraction child to start")
    time.sleep(0.5)  # past its start-up, into the parse
    assert all(_alive(p) for p in children)
    d.kill9()
    t0 = time.monotonic()
    try:
        wait_until(lambda: not any(_alive(p) for p in children), 5, 0.05, "the extraction child to die")
    finally:
        for p in children:  # never leave one behind, whatever the outcome
            if _alive(p):
                os.kill(p, signal.SIGKILL)
    print(f"child gone {time.monotonic() - t0:.2f} s after the daemon was SIGKILLed")


def test_stopping_the_daemon_kills_its_sandbox_child_and_gives_the_job_back(daemon, tmp_path):
    folder = tmp_path / "web"
    folder.mkdir()
    d = daemon({"web": [folder]}, extra="extract_timeout_s = 120\nextract_cpu_s = 120")
    page = folder / "deep.html"
    _deep_html(page)
    children: list[int] = []

    def started() -> bool:
        children[:] = _sandbox_children(d.proc.pid)
        return bool(children)

    wait_until(started, 30, 0.05, "the extraction child to start")
    time.sleep(0.5)
    t0 = time.monotonic()
    try:
        assert d.stop(30) == 0
        took = time.monotonic() - t0
        assert not any(_alive(p) for p in children)
    finally:
        for p in children:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
    print(f"daemon stopped in {took:.2f} s")
    assert took < 5, f"stopping took {took:.1f} s"
    with d.db() as c:  # given back untouched: no try spent, tried again at the next start
        assert [tuple(r) for r in c.execute("SELECT state, tries FROM jobs WHERE path=?", (str(page),))] == [
            ("queued", 0)]


def test_parser_killed_at_its_wall_time_is_not_retried(daemon, tmp_path):
    """Quadratic HTML killed at the (here 2 s) wall-time cap: one try, the job fails for good, and
    saving the same bytes again does not run the parser on them again."""
    folder = tmp_path / "web"
    folder.mkdir()
    d = daemon({"web": [folder]}, extra="extract_timeout_s = 2\nextract_max_tries = 3")
    page = folder / "deep.html"
    _deep_html(page, depth=50_000)  # about 10 s of parsing

    def failed_rows():
        with d.db() as c:
            return [tuple(r) for r in c.execute("SELECT state, tries FROM jobs WHERE path=?", (str(page),))]

    wait_until(lambda: failed_rows() == [("failed", 1)], 20, 0.1, "the job to fail")
    time.sleep(3)  # a retry (backoff 2 s) would have started by now
    assert failed_rows() == [("failed", 1)]
    [ev] = d.ingests(page, "failed")
    assert "killed after 2 s wall time" in ev["error"]
    page.write_bytes(page.read_bytes())  # saved again, unchanged
    wait_until(lambda: len(d.ingests(page, "failed")) == 2, 15, 0.1, "the saved file's job")
    again = d.ingests(page, "failed")[-1]
    assert again["ms"] < 1000, again  # told from its MD5, no sandbox run
    assert d.live_rows("web")[str(page)]["extract_status"] == "failed"

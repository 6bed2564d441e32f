"""Issue 12 item 3: with the data dir on a full filesystem the ingest worker must not die. Status
names the trouble (disk full, the data dir, MB free), writes are retried with backoff, and ingest
resumes within a minute of space coming back, with no restart and no corrupt database.

A real full filesystem: the data dir is a small tmpfs (needs root to mount; skipped otherwise)."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from tests.system.conftest import wait_until


def _mount_tmpfs(where: Path, size: str) -> None:
    where.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(where)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")


def _umount(where: Path) -> None:
    if subprocess.run(["umount", str(where)], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(where)], capture_output=True)


def _fill(path: Path) -> None:
    """Write until the filesystem is full."""
    block = b"\0" * 65536
    with open(path, "wb", buffering=0) as f:
        try:
            while True:
                f.write(block)
        except OSError as e:
            assert e.errno == errno.ENOSPC, e
    # small files take the last bytes
    for i in range(100):
        try:
            (path.parent / f"{path.name}.{i}").write_bytes(b"\0" * 4096)
        except OSError:
            break


def _text(i: int, paragraphs: int = 12) -> str:
    return "\n\n".join(f"note {i} paragraph {j} about the quince {i * 1000 + j} orchard and its "
                       f"ledger of word{i}x{j} entries " * 6 for j in range(paragraphs))


def _quick_check(path: Path) -> str:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute("PRAGMA quick_check").fetchone()[0]
    finally:
        conn.close()


def test_disk_full_pauses_ingest_and_resumes_without_restart(daemon, tmp_path):
    root = tmp_path / "notes"
    root.mkdir()
    for i in range(3):
        (root / f"first{i}.txt").write_text(_text(i))
    d = daemon({"notes": [root]}, start=False)
    data = d.base / "data"
    _mount_tmpfs(data, "32m")
    try:
        d.start()
        d.wait_idle(60)
        assert len(d.live_rows("notes")) == 3
        filler = data / "filler.bin"
        _fill(filler)
        n = 20
        for i in range(n):
            (root / f"late{i}.txt").write_text(_text(100 + i, 50))

        def full_reported():
            s = d.status()
            return [r for r in s["degraded"] if "disk full" in r]
        reasons = wait_until(full_reported, 90, 0.5, "status to report the full disk")
        assert str(data) in reasons[0] and "MB free" in reasons[0], reasons
        pid = d.proc.pid
        # Some room comes back: enough for the job queue's small writes (the events kept in memory
        # are queued), not for the chunks, so the ingest worker itself meets the full disk and
        # backs off instead of dying.
        os.truncate(filler, filler.stat().st_size - 256 * 1024)
        wait_until(lambda: d.events("disk_full"), 60, 0.5, "the worker to meet the full disk")
        reasons = full_reported()
        assert reasons and str(data) in reasons[0] and "MB free" in reasons[0], reasons
        assert d.proc.poll() is None

        # space comes back: ingest resumes by itself, within a minute
        for p in data.glob("filler.bin*"):
            p.unlink()
        t0 = time.monotonic()

        def all_done():
            rows = d.live_rows("notes")
            return len(rows) == n + 3 and all(r["extract_status"] == "done" for r in rows.values())
        wait_until(all_done, 60, 0.5, "every file to be indexed after space came back")
        assert time.monotonic() - t0 < 60
        d.wait_idle(30)
        s = d.status()
        assert not [r for r in s["degraded"] if "disk full" in r], s["degraded"]
        assert s["failed_jobs"] == [], s["failed_jobs"]
        assert d.proc.pid == pid and d.proc.poll() is None  # no restart
        assert d.search("word115x7")[0]["source_file"].endswith("late15.txt")
        d.stop()
        assert _quick_check(data / "ingest_db.sqlite3") == "ok"
        assert _quick_check(data / "collections" / "notes" / "rag.sqlite3") == "ok"
    finally:
        d.stop()
        _umount(data)

"""Issue 24 point 7: status says idle only when every file is recorded, extracted and embedded and
nothing is scanning or settling.

Each test watches a real daemon (real folders, the real watcher) while it works and holds it to one
rule at every status answer: a daemon that says idle has recorded every file there is. The rows are
read after the answer, and rows only grow here, so a late read can hide a lie but never invent one.
The daemon makes the transient windows visible itself (``ingest.scans``, ``ingest.settling``,
``ingest.busy_with``); nothing here depends on catching a moment by timing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.system.conftest import ROOT, wait_until

TEXT = "A small note about herons number {i} and the mill race beside them.\n"


def _files(folder: Path, texts: int, skipped: int, empty: int = 0) -> int:
    """``texts`` small text files (the pipeline reads them), ``skipped`` files of a type no extractor
    reads and ``empty`` empty ones (both recorded from their stat alone, in batches). Returns how
    many files there are."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(texts):
        (folder / f"note{i:05d}.txt").write_text(TEXT.format(i=i))
    for i in range(skipped):
        (folder / f"blob{i:05d}.bin").write_bytes(b"\x00\x01" * 8)
    for i in range(empty):
        (folder / f"empty{i:05d}.txt").write_bytes(b"")
    return texts + skipped + empty


def _rows(d, collection: str = "notes") -> int:
    return len(d.live_rows(collection))


def _ctl_status(d) -> str:
    env = {**os.environ, "RAGWEED_STATE_DIR": str(d.base / "state")}
    p = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "status"], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def _never_idle_early(d, total: int, timeout: float = 90) -> list[dict]:
    """Poll status until the daemon says idle with every file recorded; fail the moment it says
    idle with fewer. Returns the answers seen."""
    seen: list[dict] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        s = d.status()
        n = _rows(d)
        seen.append(s)
        if d.idle_in(s):
            assert n == total, (f"status said idle with {n} of {total} files recorded "
                                f"(answer {len(seen)}: queue {s['queue']}, ingest {s['ingest']})")
            return seen
    raise AssertionError(f"not idle after {timeout} s: {_rows(d)} of {total} recorded; last {seen[-1]}")


def test_a_daemon_started_over_many_new_files_is_busy_until_every_file_is_recorded(daemon, tmp_path):
    folder = tmp_path / "notes"
    total = _files(folder, texts=300, skipped=9000, empty=300)
    d = daemon({"notes": [folder]}, start=False)
    d.start()
    first = d.status()
    assert not d.idle_in(first), f"the first answer said idle with {_rows(d)} of {total} files recorded: {first}"
    text = _ctl_status(d)
    rows = _rows(d)
    assert "ingest: idle" not in text or rows == total, f"{rows} of {total} recorded:\n{text}"
    seen = _never_idle_early(d, total)
    assert len(seen) >= 2
    # the scan was shown while it ran, with the files it had seen
    assert any(sc["collection"] == "notes" for s in [first] + seen for sc in s["ingest"].get("scans", [])), \
        "no status answer showed the start-up scan"
    text = _ctl_status(d)
    assert "ingest: idle" in text, text


def test_files_dropped_in_while_it_runs_are_never_idle_before_they_are_recorded(any_daemon, tmp_path):
    root = tmp_path / "notes"
    root.mkdir()
    d = any_daemon({"notes": [root]})
    d.wait_idle(60)
    # A folder of files skipped from their stat moved in whole: one event, the watcher walks it, the
    # debouncer holds every file, then their rows are written in batches (no job at all).
    stage = tmp_path / "stage" / "batch"
    total = _files(stage, texts=0, skipped=2500, empty=100)
    os.rename(stage, root / "batch")
    # The kernel tells the watcher of the move a moment after it: until then nobody knows of it.
    # From the first answer that shows the work on, idle must wait for the last row.
    wait_until(lambda: not d.idle() or _rows(d) == total, 30, 0.02, "the daemon to hear of the files")
    _never_idle_early(d, total)
    # Then loose files written one by one, text and skipped ones mixed.
    for i in range(60):
        (root / f"loose{i:03d}.bin").write_bytes(b"\x02" * 4)
        (root / f"loose{i:03d}.txt").write_text(TEXT.format(i=i))
    total += 120
    wait_until(lambda: not d.idle() or _rows(d) == total, 30, 0.02, "the daemon to hear of the files")
    _never_idle_early(d, total)
    ing = d.status()["ingest"]
    assert ing["events_seen"] >= 121 and ing["settling"] == 0 and ing["busy_with"] == [] and ing["scans"] == [], ing


def test_not_idle_while_chunks_wait_for_vectors(daemon, tmp_path):
    folder = tmp_path / "notes"
    _files(folder, texts=5, skipped=0)
    down = tmp_path / "embedder-down"
    down.touch()
    d = daemon({"notes": [folder]}, start=False, launcher_args=["--embed-down-while", str(down)])
    d.start()
    wait_until(lambda: d.status()["vectors"]["files_searchable"] == 5, 60, 0.2, "the files published")
    wait_until(lambda: d.status()["queue"]["queued"] + d.status()["queue"]["running"] == 0, 30, 0.1,
               "the queue to drain")
    text = _ctl_status(d)
    assert "ingest: idle" not in text and "chunks waiting" in text, text
    s = d.status()
    assert s["vectors"]["pending_chunks"] > 0
    assert not d.idle_in(s), s
    assert any("waiting for vectors" in b for b in s["ingest"]["busy_with"]), s["ingest"]
    down.unlink()  # the embedder answers again: the vectors are made, and only then is it idle
    d.wait_idle(90)
    assert d.status()["vectors"]["pending_chunks"] == 0
    assert "ingest: idle" in _ctl_status(d)

"""Files skipped from their stat, through the real daemon: empty and unsupported files found by the
start-up scan or dropped while it watches get their rows without one pipeline run each (no
``ingest_file`` line), a real file dropped with them is indexed, and later edits, renames and
deletes of skipped files settle as they always did. Speed is measured by
benchmarks/skipped_files.py, not here."""

from __future__ import annotations

import os
from pathlib import Path

from tests.system.conftest import wait_until


def _make(root: Path, prefix: str, n: int) -> list[Path]:
    out = []
    for i in range(n):
        p = root / (f"{prefix}{i:04d}.txt" if i % 2 == 0 else f"{prefix}{i:04d}.bin")
        if i % 2:
            p.write_bytes(b"\x00\x01 bytes of a type no extractor reads")
        else:
            p.touch()
        out.append(p)
    return out


def _matches_disk(d, root: Path) -> bool:
    return sorted(d.live_rows("docs")) == sorted(str(p) for p in root.iterdir())


def test_skipped_files_cost_a_row_not_a_pipeline_run(daemon, tmp_path):
    root = tmp_path / "docs"
    root.mkdir()
    found = _make(root, "s", 600)
    real = root / "real-one.txt"
    real.write_text("The first real note talks about lighthouse keepers and their logbooks.\n" * 3)
    d = daemon({"docs": [root]})
    wait_until(lambda: _matches_disk(d, root), 60, what="rows for every file found at start")
    wait_until(lambda: d.ingests(real), 60, what="the real note found at start")
    # Dropped while the daemon watches: the same, through the watcher's events.
    dropped = _make(root, "w", 400)
    real2 = root / "real-two.txt"
    real2.write_text("The second real note talks about tide tables and harbour pilots.\n" * 3)
    wait_until(lambda: _matches_disk(d, root), 60, what="rows for every file dropped while watching")
    wait_until(lambda: d.ingests(real2), 60, what="the real note dropped with them")
    d.wait_idle()
    rows = d.live_rows("docs")
    assert {rows[str(p)]["extract_status"] for p in found + dropped} == {"skipped"}
    runs = {e["path"] for e in d.events("ingest_file")}
    # Before, each of the 1,000 skipped files was a job and a pipeline run with its own log line.
    assert runs == {str(real), str(real2)}, f"{len(runs)} pipeline runs"

    # Later changes settle exactly as before: an edit is indexed, a rename moves the row, a delete
    # removes it; nothing stale is left, nothing is listed twice.
    found[0].write_text("Once empty, this note now describes puffins nesting on the cliffs.\n" * 3)
    os.rename(found[2], root / "renamed.txt")
    dropped[4].unlink()
    wait_until(lambda: d.ingests(found[0]), 60, what="the edited skipped file to be indexed")
    wait_until(lambda: _matches_disk(d, root), 60, what="the rename and the delete")
    d.wait_idle()
    rows = d.live_rows("docs")
    assert rows[str(root / "renamed.txt")]["extract_status"] == "skipped"
    # The rename's old path and the deleted file held skipped rows: marked deleted without a job.
    assert {e["path"] for e in d.events("ingest_file")} == {str(real), str(real2), str(found[0])}
    assert rows[str(found[0])]["extract_status"] == "done"
    assert any("puffins" in h["text"] for h in d.search("puffins nesting on the cliffs"))
    with d.db() as c:
        live = c.execute("SELECT count(*) FROM ingest_files WHERE collection='docs' AND superseded=0").fetchone()[0]
    assert live == len(list(root.iterdir()))
    # A restart's scan finds nothing to do for them.
    scans = len(d.events("scan_done"))
    d.stop()
    d.start()
    wait_until(lambda: len(d.events("scan_done")) > scans, 60, what="the restart's scan")
    last = d.events("scan_done")[-1]
    assert last["skipped"] == 0 and last["upserts"] == 0 and last["deletes"] == 0, last

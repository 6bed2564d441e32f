"""Editor save patterns each produce exactly one re-index, and no temp file is ever indexed."""

from __future__ import annotations

import os
import time

import pytest

from tests.system.conftest import wait_until

OLD = "The original paragraph talks about lighthouses and foghorns on the northern coast."
NEW = "The rewritten paragraph is about glaciers, crevasses and alpine huts instead."


def vim_save(p, text):
    probe = p.parent / "4913"
    probe.write_text("")
    probe.unlink()
    backup = p.with_name(p.name + "~")
    os.rename(p, backup)
    p.write_text(text)
    backup.unlink()


def jetbrains_save(p, text):
    tmp = p.with_name(p.name + "___jb_tmp___")
    old = p.with_name(p.name + "___jb_old___")
    tmp.write_text(text)
    os.rename(p, old)
    os.rename(tmp, p)
    old.unlink()


def office_save(p, text):
    lock = p.with_name("~$" + p.name)
    lock.write_text("owner")
    tmp = p.with_name("~WRL0001.tmp")
    tmp.write_text(text)
    backup = p.with_name("~WRD0002.tmp")
    os.rename(p, backup)
    os.rename(tmp, p)
    backup.unlink()
    lock.unlink()


@pytest.mark.parametrize("save", [vim_save, jetbrains_save, office_save], ids=["vim", "jetbrains", "office"])
def test_editor_save_is_one_reindex(daemon, tmp_path, save):
    folder = tmp_path / "notes"
    folder.mkdir()
    note = folder / "note.txt"
    note.write_text(OLD)
    d = daemon({"notes": [folder]})
    wait_until(lambda: d.ingests(note), 30, what="first index")
    d.wait_idle()

    save(note, NEW)
    wait_until(lambda: any("glaciers" in h["text"] for h in d.search("glaciers crevasses")), 30,
               what="the new text to be searchable")
    time.sleep(1.5)  # longer than debounce + delete hold: any second re-index would have happened
    d.wait_idle()
    assert len(d.ingests(note)) == 2, d.ingests(note, None)  # the first index + exactly one re-index
    assert not d.ingests(note, "deleted"), "the save was taken for a delete"
    rows = d.live_rows("notes")
    assert list(rows) == [str(note)], f"temp files were indexed: {sorted(rows)}"
    with d.db() as c:
        temp = c.execute("SELECT source_file FROM ingest_files WHERE source_file != ?", (str(note),)).fetchall()
    assert temp == []
    indexed = {e["path"] for e in d.events("ingest_file") if e["status"] == "indexed"}
    assert indexed == {str(note)}
    assert not any("lighthouses" in h["text"] for h in d.search("lighthouses foghorns"))

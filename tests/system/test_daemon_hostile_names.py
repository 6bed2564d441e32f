"""Issue 12 item 2 through the real daemon: one file name that is not UTF-8 (with a newline), and
folders about 1,000 levels deep, must neither stop the daemon from starting nor stop it from
watching, and what it cannot handle is reported in status with the name shown safely."""

from __future__ import annotations

import os

import pytest

from tests.system.conftest import wait_until


def _deep(base, levels: int = 1000) -> str:
    """A folder ``levels`` deep below base (made with relative mkdirs: the full path is long)."""
    os.makedirs(base, exist_ok=True)
    fd = os.open(base, os.O_RDONLY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = nfd
        with open(os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write("a note at the bottom of a very deep folder")
    finally:
        os.close(fd)
    return str(base)


def _remove_deep(path) -> None:
    """rmtree recurses (and so does pytest's clean-up of old temp folders): flatten first, by
    renaming each level's only child up into ``path`` and deleting the emptied folder."""
    path = str(path)
    if not os.path.isdir(path):
        return
    n = 0
    while True:
        kids = os.listdir(path)
        subs = [k for k in kids if os.path.isdir(os.path.join(path, k)) and not os.path.islink(os.path.join(path, k))]
        if not subs:
            break
        for k in subs:
            inner = os.path.join(path, k)
            for g in os.listdir(inner):
                n += 1
                while os.path.lexists(os.path.join(path, f"up{n}")):
                    n += 1
                os.rename(os.path.join(inner, g), os.path.join(path, f"up{n}"))
            os.rmdir(inner)
    for k in os.listdir(path):
        os.unlink(os.path.join(path, k))


@pytest.fixture
def deep_dirs(tmp_path):
    made: list = []
    yield made
    for p in made:
        _remove_deep(p)


def test_an_undecodable_name_and_deep_folders_do_not_stop_the_daemon(daemon, tmp_path, deep_dirs):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "plain.txt").write_text("plainwombat lives here")
    bad = os.path.join(os.fsencode(notes), b"bad\xff\nname.txt")
    with open(bad, "wb") as f:
        f.write(b"badnamemarker text")
    deep_dirs += [tmp_path / "deep", tmp_path / "notes" / "grown"]
    deep = _deep(tmp_path / "deep")  # a second collection whose root holds a 1,000-level folder
    d = daemon({"notes": [notes], "deep": [deep]})

    wait_until(lambda: d.ingests(notes / "plain.txt"), 60, what="the plain file indexed")
    wait_until(lambda: any("not valid UTF-8" in m for m in d.status()["degraded"]), 30, what="bad name reported")
    msg = next(m for m in d.status()["degraded"] if "not valid UTF-8" in m)
    assert "bad\\xff\\x0aname.txt" in msg and "\n" not in msg, msg

    # A new event for the odd name (the debouncer meets it), then ordinary edits still get indexed.
    with open(bad, "ab") as f:
        f.write(b" more")
    (notes / "later.txt").write_text("laterkoala arrives")
    wait_until(lambda: d.ingests(notes / "later.txt"), 30, what="a later file indexed")
    (notes / "plain.txt").unlink()
    wait_until(lambda: d.ingests(notes / "plain.txt", "deleted"), 30, what="a delete")

    # A deep folder appearing under a watched root (watchdog walks it recursively) must not end
    # the watching of the other roots.
    _deep(notes / "grown", 1000)
    (notes / "after.txt").write_text("afterdeep platypus")
    wait_until(lambda: d.ingests(notes / "after.txt"), 40, what="a file written after the deep folder grew")
    d.wait_idle()
    st = d.status()
    assert not [m for m in st["degraded"] if "thread stopped" in m], st["degraded"]
    assert d.api("POST", "/v1/collections/deep/scan").status_code in (200, 202)
    wait_until(lambda: d.ingests(os.path.join(deep, *(["d"] * 1000), "deep.txt")), 60, what="the deep file indexed")
    assert d.proc.poll() is None

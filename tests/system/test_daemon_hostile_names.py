"""File names that are not UTF-8 (Latin-1 bytes, a newline) and folders about 1,000 levels deep,
through the real daemon: the odd names are indexed, searched, edited, renamed and deleted like any
other and survive a restart, every API answer stays valid Unicode (the name shown with \\xNN, the
uri holding the real bytes), and neither kind of path stops the daemon from starting or watching."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from urllib.parse import quote, unquote_to_bytes

import pytest

from tests.system.conftest import stop, wait_until


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
    wait_until(lambda: _search(d, "badnamemarker"), 30, what="the odd name indexed")

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
    wait_until(lambda: d.ingests(notes / "after.txt"), 300, what="a file written after the deep folder grew")
    d.wait_idle()
    st = d.status()
    assert not [m for m in st["degraded"] if "thread stopped" in m], st["degraded"]
    assert d.api("POST", "/v1/collections/deep/scan").status_code in (200, 202)
    wait_until(lambda: d.ingests(os.path.join(deep, *(["d"] * 1000), "deep.txt")), 60, what="the deep file indexed")
    assert d.proc.poll() is None


# --- names that are not UTF-8, end to end ---------------------------------------------------------
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _strict(resp) -> dict:
    """The JSON of a response, parsed strictly: the body is UTF-8 and no string holds a lone
    surrogate (which lenient parsers accept from a \\udcXX escape and strict ones refuse)."""
    obj = json.loads(resp.content.decode("utf-8"))

    def walk(v):
        if isinstance(v, str):
            v.encode("utf-8")  # raises on a lone surrogate
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(k)
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)
    walk(obj)
    return obj


def _search(d, query: str) -> list[dict]:
    r = d.api("POST", "/v1/search", json={"query": query, "top_k": 5})
    if r.status_code == 400 and r.json()["error"].get("action", {}).get("id") == "wait_for_indexing":
        return []  # the daemon has not made the collection's store yet (docs/api.md): asked again
    assert r.status_code == 200, r.text
    return [h for h in _strict(r)["results"] if query in h["text"]]


def _docs(d, **params) -> dict:
    r = d.api("GET", "/v1/documents", params={"collection": "notes", "limit": 200, **params})
    assert r.status_code == 200, r.text
    return _strict(r)


def _shown(folder, name: bytes) -> str:
    return str(folder) + "/" + name.decode("utf-8", "backslashreplace")


def test_names_that_are_not_utf8_are_indexed_and_followed_end_to_end(daemon, tmp_path):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "plain.txt").write_text("plainwombat lives here")
    latin, odd = b"caf\xe9.txt", b"bad\xff\nname.txt"
    folder = os.fsencode(notes)
    with open(os.path.join(folder, latin), "wb") as f:
        f.write(b"latinaardvark on the menu")
    with open(os.path.join(folder, odd), "wb") as f:
        f.write(b"newlinequokka in the name")
    sub, inner = os.path.join(folder, b"Archiv\xe4"), b"n\xf6te.txt"
    os.mkdir(sub)
    with open(os.path.join(sub, inner), "wb") as f:
        f.write(b"folderlynx inside an odd folder")
    d = daemon({"notes": [notes]})

    hits = wait_until(lambda: _search(d, "latinaardvark"), 60, what="the Latin-1 name indexed")
    h = hits[0]
    assert h["source_file"] == _shown(notes, latin) and h["filename"] == "caf\\xe9.txt", h
    assert h["uri"] == "file://" + quote(os.path.join(folder, latin)) + "#L1", h["uri"]  # its one line
    assert unquote_to_bytes(h["uri"][len("file://"):].partition("#")[0]) == os.path.join(folder, latin)
    r = d.api("POST", "/v1/search", json={"query": "latinaardvark", "path_glob": "*/caf\\xe9.*"})
    assert [h["filename"] for h in _strict(r)["results"]] == ["caf\\xe9.txt"], "a search filter matches the shown name"
    h = wait_until(lambda: _search(d, "newlinequokka"), 30, what="the name with a newline indexed")[0]
    assert h["source_file"] == _shown(notes, odd) and "\n" in h["source_file"], h

    # the documents listing, a glob over the shown name, and the exact doc key
    docs = _docs(d)
    assert sorted(x["source_file"] for x in docs["items"]) == sorted(
        [_shown(notes, latin), _shown(notes, odd), str(notes / "plain.txt"), _shown(notes, b"Archiv\xe4/" + inner)]
    ), docs
    assert [x["source_file"] for x in _docs(d, path_glob="caf*")["items"]] == [_shown(notes, latin)]
    key = next(x["doc_key"] for x in docs["items"] if x["source_file"] == _shown(notes, latin))
    r = d.api("GET", f"/v1/documents/{key}")
    assert r.status_code == 200, r.text
    detail = _strict(r)
    assert detail["uri"].endswith("/caf%E9.txt") and "latinaardvark" in detail["chunks_detail"][0]["text"]
    st = _strict(d.api("GET", "/v1/status"))
    assert not [m for m in st["degraded"] if "UTF-8" in m or "thread" in m], st["degraded"]

    # an edit replaces the old text; nothing stale, one live document for the name
    with open(os.path.join(folder, latin), "wb") as f:
        f.write(b"latinnewt took its place")
    wait_until(lambda: _search(d, "latinnewt"), 30, what="the edit re-indexed")
    d.wait_idle()
    assert not _search(d, "latinaardvark"), "the old text of an edited odd name is still found"
    assert _docs(d, path_glob="caf*")["total"] == 1

    # a rename moves the entry; a delete removes it
    renamed = b"caf\xe9-menu\xe8.txt"
    os.rename(os.path.join(folder, latin), os.path.join(folder, renamed))
    os.unlink(os.path.join(folder, odd))
    wait_until(lambda: [h["source_file"] for h in _search(d, "latinnewt")] == [_shown(notes, renamed)], 30,
               what="the renamed file found under its new name only")
    wait_until(lambda: not _search(d, "newlinequokka"), 30, what="the deleted odd name gone from search")
    # a folder with an odd name renamed to another odd name: its file moves with it
    moved = b"Neu\xf6/" + inner
    os.rename(sub, os.path.join(folder, b"Neu\xf6"))
    wait_until(lambda: [h["source_file"] for h in _search(d, "folderlynx")] == [_shown(notes, moved)], 30,
               what="the file of the renamed folder found under its new path only")
    d.wait_idle()
    assert sorted(x["source_file"] for x in _docs(d)["items"]) == sorted(
        [_shown(notes, renamed), str(notes / "plain.txt"), _shown(notes, moved)])

    # a restart keeps it as it is: no duplicate, no re-ingest of an unchanged odd name
    assert d.stop() == 0
    d.start()
    d.wait_idle()
    assert [h["source_file"] for h in _search(d, "latinnewt")] == [_shown(notes, renamed)]
    assert _docs(d)["total"] == 3
    with d.db() as c:
        live = [r[0] for r in c.execute("SELECT source_file FROM ingest_files WHERE superseded=0")]
    assert sorted(live) == sorted([str(notes / "plain.txt"), str(notes) + "/caf\x00e9-menu\x00e8.txt",
                                   str(notes) + "/Neu\x00f6/n\x00f6te.txt"]), live

    # ragweedctl prints the shown name with its control characters escaped
    env = {**os.environ, "RAGWEED_STATE_DIR": str(d.base / "state")}
    p = subprocess.run([sys.executable, "-m", "ragweedd.cli.ctl", "docs", "--collection", "notes"],
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "caf\\xe9-menu\\xe8.txt" in p.stdout, p.stdout


def test_a_ten_thousand_level_folder_moved_in_costs_only_itself_its_live_watching(daemon, tmp_path, deep_dirs):
    """watchdog walks a folder moved into a root and sets a watch on every level it can reach:
    before the watcher made room for that walk, its RecursionError ended live watching for the
    whole root, and for good (a restart walked the same folder again)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "kept.txt").write_text("keptnumbat first words")
    deep_dirs += [tmp_path / "outside", notes / "grown"]
    d = daemon({"notes": [notes]})
    wait_until(lambda: d.ingests(notes / "kept.txt"), 60, what="the first file indexed")

    _deep(tmp_path / "outside", 10_000)
    os.rename(tmp_path / "outside" / "d", notes / "grown")
    (notes / "after.txt").write_text("afterdeep quokka")
    wait_until(lambda: d.ingests(notes / "after.txt"), 60, what="a file written after the move")
    (notes / "kept.txt").write_text("keptnumbat edited words")
    wait_until(lambda: len(d.ingests(notes / "kept.txt")) >= 2, 60, what="an edit after the move")
    degraded = d.status()["degraded"]
    assert degraded and all("grown" in m for m in degraded), degraded  # the deep folder, nothing else

    # The watch set again at start walks the same folder: the root is still watched live.
    stop(d)
    d.start()
    before = len(d.ingests(notes / "kept.txt"))
    (notes / "restarted.txt").write_text("restartedwallaby words")
    wait_until(lambda: d.ingests(notes / "restarted.txt"), 60, what="a file written after the restart")
    (notes / "kept.txt").write_text("keptnumbat edited again")
    wait_until(lambda: len(d.ingests(notes / "kept.txt")) > before, 60, what="an edit after the restart")
    assert not [m for m in d.status()["degraded"] if "cannot be watched" in m or "thread" in m]
    assert d.proc.poll() is None
    stop(d)  # before the deep folder is taken apart: each level moved out would be walked again

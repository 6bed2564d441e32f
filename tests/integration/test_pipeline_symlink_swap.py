"""A path swapped for a symlink between the look at it and its read is never followed. The swap
happens just before the pipeline opens the path (``open_regular``), exactly in that window."""

from __future__ import annotations

import os
import sqlite3

import pytest

from ragweedd.config import load_config
from ragweedd.embed.hashing import HashEmbedder
from ragweedd.ingest import pipeline
from ragweedd.ingest.pipeline import Pipeline
from ragweedd.ingest.worker import make_extract
from ragweedd.paths import Paths
from ragweedd.store.backends import open_data_dir

SECRET = "outsidesecret kangaroo " * 30


@pytest.fixture
def setup(tmp_path):
    cfg = load_config(env={}, text=f'data_dir = "{tmp_path}/data"\nstate_dir = "{tmp_path}/s"\n'
                                   f'cache_dir = "{tmp_path}/c"\n')
    root = tmp_path / "root"
    (root / "sub").mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    for name in ("secret.txt", "secret.html"):
        (outside / name).write_text(f"<p>{SECRET}</p>" if name.endswith(".html") else SECRET)
    return cfg, root, outside


def swap_before_open(monkeypatch, swap) -> None:
    """Run ``swap(path)`` each time the pipeline is about to open a file."""
    real = pipeline.open_regular

    def open_regular(path, root):
        swap(path)
        return real(path, root)

    monkeypatch.setattr(pipeline, "open_regular", open_regular)


def _texts(cfg, collection="c") -> str:
    """Every chunk text the collection holds (its FTS rows)."""
    p = Paths.from_config(cfg).rag_db(collection)
    if not p.exists():
        return ""
    with sqlite3.connect(f"file:{p}?mode=ro", uri=True) as c:
        return " ".join(r[0] for r in c.execute("SELECT content FROM fts_chunks"))


@pytest.mark.parametrize("name", ["notes.txt", "notes.html"])  # in-process text; sandboxed extractor
def test_a_file_swapped_for_a_symlink_before_the_open_is_not_followed(setup, name, monkeypatch):
    cfg, root, outside = setup
    target = root / "sub" / name
    target.write_text("<p>harmless wombat notes</p>" if name.endswith(".html") else "harmless wombat notes " * 10)

    def swap(path: str) -> None:
        if path == str(target):
            os.unlink(path)
            os.symlink(outside / ("secret" + target.suffix), path)

    swap_before_open(monkeypatch, swap)
    pipe = Pipeline(cfg, Paths.from_config(cfg), HashEmbedder(64), extract=make_extract(cfg),
                    stores=open_data_dir(Paths.from_config(cfg)))
    try:
        out = pipe.ingest_file("c", target, root)
    finally:
        pipe.close()
    assert out.status == "skipped" and "symbolic link" in (out.error or ""), out
    assert "kangaroo" not in _texts(cfg)


def test_a_folder_on_the_way_swapped_for_a_symlink_is_not_followed(setup, monkeypatch):
    cfg, root, outside = setup
    target = root / "sub" / "secret.txt"
    target.write_text("harmless wombat notes " * 10)

    def swap(path: str) -> None:
        if path == str(target):
            os.rename(root / "sub", root / "sub.old")
            os.symlink(outside, root / "sub")  # root/sub/secret.txt now names the outside file

    swap_before_open(monkeypatch, swap)
    pipe = Pipeline(cfg, Paths.from_config(cfg), HashEmbedder(64), stores=open_data_dir(Paths.from_config(cfg)))
    try:
        out = pipe.ingest_file("c", target, root)
    finally:
        pipe.close()
    assert out.status == "skipped", out
    assert "kangaroo" not in _texts(cfg)


def test_an_indexed_file_swapped_for_a_symlink_loses_its_old_entry_and_gains_nothing(setup, monkeypatch):
    cfg, root, outside = setup
    target = root / "notes.txt"
    target.write_text("harmless wombat notes " * 10)
    swapping = []

    def swap(path: str) -> None:
        if swapping and path == str(target):
            os.unlink(path)
            os.symlink(outside / "secret.txt", path)

    swap_before_open(monkeypatch, swap)
    pipe = Pipeline(cfg, Paths.from_config(cfg), HashEmbedder(64), stores=open_data_dir(Paths.from_config(cfg)))
    try:
        assert pipe.ingest_file("c", target, root).status == "indexed"
        os.utime(target, ns=(1, 1))  # changed: the next ingest reads it again
        swapping.append(1)
        out = pipe.ingest_file("c", target, root)
        assert out.status == "skipped", out
        target.unlink()
        target.write_text("harmless wombat notes again " * 10)  # a regular file once more
        swapping.clear()
        assert pipe.ingest_file("c", target, root).status == "indexed"
    finally:
        pipe.close()
    texts = _texts(cfg)
    assert "kangaroo" not in texts and "again" in texts

"""A collection removed while a search opens or reads it: the search answers (a search begun before
the removal may still answer from it), or, when it named only the removed collection, says that
collection does not exist; the next search has none of it. Never an internal error (a 500).

The removal is made to happen at each awkward moment by running it from inside the search, at the
start of one of its stages: the real core removes the collection (its index closed, its files
deleted), then the real stage goes on."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ragweedd.config import load_config
from ragweedd.errors import NotFoundError


def _config(tmp_path: Path, a: Path):
    return load_config(text=f"""
data_dir = "{tmp_path / 'data'}"
state_dir = "{tmp_path / 'state'}"
cache_dir = "{tmp_path / 'cache'}"
debounce_s = 0.1
delete_hold_s = 0.1
log_level = "warning"

[embed]
model = "hash:64"
[collections.a]
paths = ["{a}"]
""", env={})


@pytest.fixture
def core(tmp_path):
    from ragweedd.engine import DaemonEngine
    from ragweedd.services import open_daemon

    a, b = tmp_path / "a", tmp_path / "b"
    for folder, word in ((a, "alpaca"), (b, "bison")):
        folder.mkdir()
        for i in range(5):
            (folder / f"n{i}.txt").write_text(f"{word} note number {i} " * 20)
    c = open_daemon(_config(tmp_path, a))
    c.start()
    try:
        engine = DaemonEngine(c)
        asyncio.run(engine.add_collection("b", [str(b)]))  # added, not configured: it can be removed
        end = time.monotonic() + 120
        while time.monotonic() < end:
            st = asyncio.run(engine.status())
            if st["files_by_state"].get("indexed") == 10 and not st["ingest"]["running"]:
                break
            time.sleep(0.05)
        else:
            raise AssertionError(f"not indexed: {st['files_by_state']}")
        yield c
    finally:
        c.stop()


def _stage(name: str):
    from ragweedd.query.hybrid import Searcher
    from ragweedd.query.vectors import VectorSearch

    return {"open": (Searcher, "__init__"), "vector": (VectorSearch, "search"),
            "keyword": (Searcher, "_keyword"), "hits": (Searcher, "_full_hits")}[name]


@pytest.mark.parametrize("named", [None, ["b"], ["a", "b"]])
@pytest.mark.parametrize("stage", ["open", "vector", "keyword", "hits"])
def test_a_collection_removed_in_the_middle_of_a_search(core, monkeypatch, stage, named):
    from ragweedd.engine import DaemonEngine

    owner, attr = _stage(stage)
    real = getattr(owner, attr)
    removed: list[str] = []

    def at_stage(self, *args, **kw):
        if not removed:
            removed.append("b")
            core.remove_collection("b")
        return real(self, *args, **kw)

    monkeypatch.setattr(owner, attr, at_stage)
    engine = DaemonEngine(core)
    try:
        res = asyncio.run(engine.search("bison note", collections=named))
    except NotFoundError as e:  # it named the removed collection
        assert named is not None and "b" in named and "'b'" in e.message, e.message
    else:
        assert res["results"]
        if stage == "open":  # the removal came before the search opened anything
            assert {r["collection"] for r in res["results"]} == {"a"}
    assert removed == ["b"]
    monkeypatch.undo()
    res = asyncio.run(engine.search("bison note"))  # the core still serves what is left, and only that
    assert res["results"] and {r["collection"] for r in res["results"]} == {"a"}
    with pytest.raises(NotFoundError, match="'b' does not exist"):
        asyncio.run(engine.search("bison note", collections=["b"]))

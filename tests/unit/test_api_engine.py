"""The Engine seam: the FakeEngine and the daemon's real engine both implement every method of the
protocol in ragweedd/api/engine.py with the parameter names the routes pass."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from ragweedd.api.engine import Engine  # noqa: E402
from fake_engine import FakeEngine  # noqa: E402

METHODS = [n for n, v in vars(Engine).items() if inspect.isfunction(v) and not n.startswith("_")]


def _params(fn) -> list[str]:
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def check_implements(cls) -> list[str]:
    problems = []
    for name in METHODS:
        impl = getattr(cls, name, None)
        if impl is None:
            problems.append(f"{cls.__name__}.{name} is missing")
            continue
        want, have = _params(getattr(Engine, name)), _params(impl)
        if have[: len(want)] != want:
            problems.append(f"{cls.__name__}.{name}{tuple(have)} != protocol {tuple(want)}")
        if not (inspect.iscoroutinefunction(impl) or inspect.isasyncgenfunction(impl)):
            problems.append(f"{cls.__name__}.{name} is not async")
    return problems


def test_protocol_lists_the_routes_methods():
    assert {"status", "list_collections", "add_collection", "remove_collection", "scan", "reanalyze",
            "rebuild_fts", "list_documents", "get_document", "upload", "search", "ask", "ask_continue",
            "history_list", "history_show"} == set(METHODS)


def test_fake_engine_implements_the_protocol():
    assert check_implements(FakeEngine) == []
    assert isinstance(FakeEngine(), Engine)


def test_checker_catches_drift():
    class Drifted(FakeEngine):
        async def search(self, text, collections=None):  # renamed parameter
            return {}

        def scan(self, name):  # not async
            return {}

    problems = check_implements(Drifted)
    assert any("search" in p for p in problems) and any("scan is not async" in p for p in problems)


def test_daemon_engine_implements_the_protocol():
    try:
        mod = importlib.import_module("ragweedd.engine")
    except ImportError as e:  # the daemon is built in parallel; its absence is not this seam's failure
        pytest.skip(f"ragweedd.engine not importable yet: {e}")
    assert check_implements(mod.DaemonEngine) == []


def test_fake_engine_behaves():
    async def go():
        eng = FakeEngine()
        res = await eng.search("sqlite bm25")
        assert res["results"][0]["filename"] == "sqlite.md" and res["results"][0]["rel_score"] == 1.0
        events = [ev async for ev in await eng.ask("sqlite bm25")]
        assert [e["type"] for e in events][0] == "sources" and events[-1]["type"] == "done"
        assert eng.answers_in_flight == 0
        hist = await eng.history_list()
        assert hist["total"] == 2 and hist["items"][0]["kind"] == "ask"
        docs = await eng.list_documents(state="failed")
        assert docs["total"] == 1 and docs["items"][0]["error"]
    asyncio.run(go())

"""The Engine seam: the daemon's real engine (ragweedd.engine.DaemonEngine) implements every method
of the contract's ``Engine`` protocol (ragweedd/contract.py) with the same parameters, as coroutines.
There is no fake engine any more; the faces are tested against this one."""

from __future__ import annotations

import inspect

from ragweedd.contract import Engine
from ragweedd.engine import DaemonEngine  # an import error is a failure here, never a skip

METHODS = [n for n, v in vars(Engine).items() if inspect.isfunction(v) and not n.startswith("_")]


def _params(fn) -> list[tuple[str, object, object]]:
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values() if p.name != "self"]


def check_implements(cls) -> list[str]:
    problems = []
    for name in METHODS:
        impl = getattr(cls, name, None)
        if impl is None:
            problems.append(f"{cls.__name__}.{name} is missing")
            continue
        want, have = _params(getattr(Engine, name)), _params(impl)
        if have != want:
            problems.append(f"{cls.__name__}.{name}{[p[0] for p in have]} != protocol {[p[0] for p in want]}"
                            f" (names, kinds and defaults must match)")
        if not (inspect.iscoroutinefunction(impl) or inspect.isasyncgenfunction(impl)):
            problems.append(f"{cls.__name__}.{name} is not async")
    return problems


def test_protocol_lists_the_routes_methods():
    assert {"status", "list_collections", "add_collection", "remove_collection", "scan", "reanalyze",
            "rebuild_fts", "list_documents", "get_document", "source_file", "upload", "search", "ask", "ask_continue",
            "history_list", "history_show"} == set(METHODS)


def test_daemon_engine_implements_the_protocol():
    assert check_implements(DaemonEngine) == []


def test_checker_catches_drift():
    class Drifted(DaemonEngine):
        async def search(self, text, collections=None):  # renamed parameter
            return {}

        def scan(self, name):  # not async
            return {}

        async def list_documents(self, collection=None, state=None, path_glob=None, offset=0, limit=10):
            return {}  # another default

    del_problems = check_implements(type("NoStatus", (), {n: getattr(DaemonEngine, n) for n in METHODS
                                                          if n != "status"}))
    problems = check_implements(Drifted)
    assert any("search" in p for p in problems) and any("scan is not async" in p for p in problems)
    assert any("list_documents" in p for p in problems)
    assert del_problems == ["NoStatus.status is missing"]

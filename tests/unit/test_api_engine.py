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
            "history_list", "history_show", "conversations_list", "conversation_show",
            "conversation_delete"} == set(METHODS)


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


def _engine_with_core(name: str):
    import types

    from ragweedd.engine import DaemonEngine, _on_core

    class Probe(DaemonEngine):
        @_on_core
        async def which(self) -> str:
            return self.core.name

    return Probe(types.SimpleNamespace(cfg=None, paths=None, name=name))


def test_a_call_during_a_core_replacement_waits_for_the_new_core():
    import asyncio
    import time

    eng = _engine_with_core("old")

    def swap(core):
        time.sleep(0.4)  # stopping the old core, switching the vectors, starting the new
        core.name = "stopped"
        import types
        return types.SimpleNamespace(cfg=None, paths=None, name="new")

    async def go():
        replacing = asyncio.create_task(eng.replace_core(swap, "embed.model changed"))
        await asyncio.sleep(0.05)
        assert eng.repairing == "embed.model changed"
        answer = await eng.which()  # arrives mid-switch: answered by the new core, not refused
        await replacing
        return answer

    assert asyncio.run(go()) == "new"


def test_a_replacement_that_outlasts_the_wait_is_refused_with_503(monkeypatch):
    import asyncio
    import time
    import types

    import pytest

    from ragweedd import engine as engine_mod
    from ragweedd.errors import RepairingError

    monkeypatch.setattr(engine_mod, "REPLACE_WAIT_S", 0.1)
    eng = _engine_with_core("old")

    def swap(core):
        time.sleep(0.6)
        return types.SimpleNamespace(cfg=None, paths=None, name="new")

    async def go():
        replacing = asyncio.create_task(eng.replace_core(swap, "a damaged database"))
        await asyncio.sleep(0.05)
        with pytest.raises(RepairingError, match="replacing its running parts: a damaged database"):
            await eng.which()
        await replacing
        return await eng.which()

    assert asyncio.run(go()) == "new"

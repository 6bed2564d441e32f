"""The composition root stops what it starts: a daemon core started, used (ingest, search, ask,
status) and stopped leaves no thread and no open database behind; so does a one-shot command's
Services. And the one-shot writer never writes beside a running daemon."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from ragweedd.config import load_config
from ragweedd.errors import AlreadyRunningError


def _config(tmp_path: Path, docs: Path):
    return load_config(text=f"""
data_dir = "{tmp_path / 'data'}"
state_dir = "{tmp_path / 'state'}"
cache_dir = "{tmp_path / 'cache'}"
debounce_s = 0.1
delete_hold_s = 0.1
log_level = "warning"
[embed]
model = "hash:64"
[collections.notes]
paths = ["{docs}"]
""", env={})


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for i, topic in enumerate(["sourdough starter feeding", "lighthouse keeper schedule", "tea inventory"]):
        (docs / f"n{i}.md").write_text(f"# Note {i}\n\nA note about {topic}, written for the lifecycle test.\n")
    return docs


def _open_databases(under: Path) -> list[str]:
    """Databases below ``under`` this process has open (other tests' leftovers are not ours)."""
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if ".sqlite3" in target and target.startswith(str(under)):
            out.append(target)
    return out


def _wait(pred, timeout: float, what: str):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to list open files")
def test_started_and_stopped_daemon_leaves_no_thread_or_database_open(tmp_path):
    from ragweedd.engine import DaemonEngine
    from ragweedd.services import open_daemon

    docs = _docs(tmp_path)
    cfg = _config(tmp_path, docs)
    threads_before = set(threading.enumerate())
    assert not _open_databases(tmp_path)
    core = open_daemon(cfg)
    core.start()
    engine = DaemonEngine(core)

    async def use() -> None:
        st = await engine.status()
        assert st["collections"][0]["name"] == "notes"
        for _ in range(100):
            st = await engine.status()
            if st["files_by_state"].get("indexed") == 3 and not st["ingest"]["running"]:
                break
            await asyncio.sleep(0.05)
        assert st["files_by_state"] == {"indexed": 3}, st["files_by_state"]
        res = await engine.search("lighthouse keeper")
        assert res["results"][0]["filename"] == "n1.md"
        assert res["results"][0]["uri"].startswith((docs / "n1.md").as_uri() + "#L")  # opens its lines
        events = [ev async for ev in await engine.ask("sourdough starter")]
        assert events[-1]["type"] == "done"
        page = await engine.list_documents("notes")
        assert page["total"] == 3
        await engine.get_document(page["items"][0]["doc_key"])

    asyncio.run(use())
    # searches ran on worker threads, each with its own Searcher: all of them close with the core
    assert _open_databases(tmp_path)
    core.stop()
    _wait(lambda: not (set(threading.enumerate()) - threads_before), 10, "the daemon's threads to end")
    assert not _open_databases(tmp_path), _open_databases(tmp_path)


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to list open files")
def test_oneshot_services_close_everything(tmp_path):
    from ragweedd.services import open_oneshot

    docs = _docs(tmp_path)
    cfg = _config(tmp_path, docs)
    services = open_oneshot(cfg)
    pipe = services.pipeline()
    for p in sorted(docs.iterdir()):
        assert pipe.ingest_file("notes", p, docs).status == "indexed"
    pipe.close()
    threads_before = set(threading.enumerate())
    res = services.search("tea inventory", ["notes"], 3)
    assert res["results"][0]["filename"] == "n2.md"
    services.close()
    assert not _open_databases(tmp_path), _open_databases(tmp_path)
    assert not (set(threading.enumerate()) - threads_before)


def test_oneshot_ingest_refuses_to_write_beside_a_running_daemon(tmp_path):
    from ragweedd.daemon import data_writer_lock
    from ragweedd.paths import Paths

    docs = _docs(tmp_path)
    cfg = _config(tmp_path, docs)
    paths = Paths.from_config(cfg).ensure()
    held = data_writer_lock(paths)
    held.acquire()  # what a running daemon holds for its whole life
    try:
        from ragweedd.cli.command import _ingest

        class Args:
            collection, paths, force, rebuild_fts = "notes", [str(docs)], False, False

        with pytest.raises(AlreadyRunningError) as ei:
            _ingest(cfg, Args())
        assert str(os.getpid()) in str(ei.value) and "writes this data directory" in str(ei.value)
        assert not (paths.collections / "notes").exists(), "nothing may be written"
    finally:
        held.release()


def test_a_search_before_the_first_file_is_in_says_it_is_coming(tmp_path):
    from ragweedd.errors import RequestError
    from ragweedd.paths import Paths
    from ragweedd.services import Services

    cfg = load_config(text=f'data_dir = "{tmp_path}/data"\nstate_dir = "{tmp_path}/state"\n'
                           f'cache_dir = "{tmp_path}/cache"\n[embed]\nmodel = "hash:64"\n', env={})
    paths = Paths.from_config(cfg).ensure()
    names: list[str] = []
    svc = Services(cfg, paths, collection_names=lambda: list(names), reranker=None, hyde=None)
    try:
        # a daemon with no collection: add one
        with pytest.raises(RequestError, match="nothing is indexed yet in ") as e:
            svc.search("garden")
        assert e.value.action == {"id": "add_collection"} and "ragweedctl add" in e.value.hint_in("ctl")
        # a collection declared, its first file still being read: try again soon
        names.append("notes")
        with pytest.raises(RequestError, match="nothing is indexed yet in notes") as e:
            svc.search("garden")
        hint = e.value.hint_in("ctl") or ""
        assert "ragweedctl status" in hint and "files in its folders" in hint
    finally:
        svc.close()

"""The index kernels are compiled before the first vector needs them: ``make run`` fills the
daemon's numba cache once (``python -m ragweedd.index.warm``), and a daemon whose cache lacks them
compiles them in a thread of its own at start (ragweedd/index/warm.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ragweedd.index import warm

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "RAGWEED_CONFIG")}
    env.update(HOME=str(tmp / "home"), XDG_CACHE_HOME=str(tmp / "cache"), XDG_CONFIG_HOME=str(tmp / "config"),
               XDG_DATA_HOME=str(tmp / "data"), XDG_STATE_HOME=str(tmp / "state"), PYTHONPATH=str(ROOT))
    return env


def test_the_install_step_compiles_into_the_cache_the_daemon_reads_and_only_once(tmp_path):
    cache = tmp_path / "cache" / "ragweedd" / "numba"  # Paths.numba_cache on the default configuration
    assert not warm.cached(str(cache))
    first = subprocess.run([sys.executable, "-m", "ragweedd.index.warm"], env=_env(tmp_path), capture_output=True,
                           text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    assert f"compiling the index kernels into {cache}" in first.stdout
    assert warm.cached(str(cache))
    again = subprocess.run([sys.executable, "-m", "ragweedd.index.warm"], env=_env(tmp_path), capture_output=True,
                           text=True, timeout=120)
    assert again.returncode == 0 and f"already cached in {cache}" in again.stdout


def test_a_daemon_warms_the_kernels_only_when_its_cache_lacks_them(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    t = warm.start(str(empty))  # this process's kernels: compiled already or loaded from its cache
    assert t is not None and t.daemon
    t.join(600)
    assert not t.is_alive()
    have = tmp_path / "have" / "index_0123"
    have.mkdir(parents=True)
    for name in warm.ENTRY_POINTS:
        (have / f"_kernels.{name}-100.py311.nbi").write_bytes(b"")
    assert warm.cached(str(tmp_path / "have"))
    assert warm.start(str(tmp_path / "have")) is None
    (have / "_kernels.link_batch-100.py311.nbi").unlink()
    assert not warm.cached(str(tmp_path / "have"))


def test_a_stop_while_the_warm_up_compiles_does_not_wait_for_the_compiler(tmp_path, monkeypatch):
    """The sync thread stuck behind the compiler (here: an apply held on a gate) is not waited for
    while the warm-up runs: the stop skips the flush at once and the next start replays the log."""
    import threading

    import numpy as np

    from ragweedd.index import sync as index_sync
    from ragweedd.index.manager import IndexManager
    from ragweedd.index.sync import IndexSync
    from ragweedd.store.backends import open_data_dir
    from ragweedd.store.sqlite.rag_db import RagDB
    from ragweedd.store.types import PRIMARY
    from tests.integration.test_vectors_hnsw import _setup
    from tests.tools import wait_until

    cfg, paths, pipe, docs = _setup(tmp_path, n_files=3)
    pipe.close()
    sync = IndexSync(cfg, paths, 64, stores=open_data_dir(paths))
    sync.start(["c"])
    wait_until(lambda: sync.managers.get("c") is not None and sync._syncing is None, 60, 0.05, "the first sync")
    entered, gate = threading.Event(), threading.Event()
    real_apply = IndexManager.apply

    def held_apply(self, *a, **kw):
        entered.set()
        gate.wait(120)
        return real_apply(self, *a, **kw)

    monkeypatch.setattr(IndexManager, "apply", held_apply)
    monkeypatch.setattr(index_sync, "CLOSE_WAIT_S", 600.0)  # what a stop would wait without the warm-up's word
    rag = RagDB(paths.rag_db("c"), "c")
    vec = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    rag.publish(md5="e" * 32, source_file=str(docs / "late.txt"), rel_path="late.txt", kind="text",
                extractor="text", ocr_type=None, title=None, size_bytes=1,
                chunks=[{"chunk_idx": 0, "text": "late words", "meta": {}}], vectors={PRIMARY: [vec.tobytes()]},
                embedders={PRIMARY: ("hash:64", 64)})
    rag.close()
    sync.notify("c")
    assert entered.wait(60), "the sync thread never reached the held apply"
    warm._compiling.set()
    closed = threading.Event()
    try:
        threading.Thread(target=lambda: (sync.close(), closed.set()), daemon=True).start()
        assert closed.wait(60), "the stop waited for the sync thread held behind the compiler"
        assert sync.managers == {}  # abandoned, not flushed: the files keep their older applied_seq
    finally:
        warm._compiling.clear()
        gate.set()

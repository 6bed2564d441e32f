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

"""Crash safety of index flushes: a real subprocess dies (os._exit) at each named point of a flush;
the parent then loads either the complete old index or the complete new one, never a mixture."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from exact_index import ExactIndex
from index_faults import inject

from ragweedd.errors import CorruptIndexError
from ragweedd.index.hnsw import HnswIndex

POINTS_OLD = ["data_level0_written", "link_lists_written", "index_meta_written", "data_renamed", "header_written"]
POINTS_NEW = ["header_renamed", "published"]

# The child loads the old index (no numba needed for load/save), changes it, and flushes with a hook
# that kills the process at the named point, as a power cut or kill -9 would.
CHILD = textwrap.dedent("""
    import os, sys
    import numpy as np
    from exact_index import ExactIndex
    from index_faults import inject
    directory, point = sys.argv[1], sys.argv[2]
    idx, seq = ExactIndex.load(directory)
    rng = np.random.default_rng(1)
    v = rng.standard_normal((300, 16)).astype(np.float32)
    idx.add(np.arange(1000, 1300), v / np.linalg.norm(v, axis=1, keepdims=True))
    idx.delete(np.arange(0, 50))
    def hook(name):
        if name == point:
            os._exit(17)
    inject(hook)
    idx.save(directory, applied_seq=seq + 1)
    os._exit(0)
""")

OLD = set(range(200))
NEW = set(range(50, 200)) | set(range(1000, 1300))


@pytest.fixture
def old_index(tmp_path):
    rng = np.random.default_rng(0)
    v = rng.standard_normal((200, 16)).astype(np.float32)
    idx = ExactIndex(16)
    idx.add(np.arange(200), v / np.linalg.norm(v, axis=1, keepdims=True))
    idx.save(tmp_path, applied_seq=1)
    return tmp_path


def _run_child(directory, point):
    # The child imports ExactIndex from tests/, which pytest put on our sys.path but not on its.
    tests_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), tests_dir]))
    return subprocess.run([sys.executable, "-c", CHILD, str(directory), point], env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("point", POINTS_OLD + POINTS_NEW + ["none"])
def test_kill_at_each_point_loads_old_or_new(old_index, point):
    r = _run_child(old_index, point)
    assert r.returncode == (0 if point == "none" else 17), r.stderr
    idx, seq = ExactIndex.load(old_index)
    got = set(idx.labels().tolist())
    if point in POINTS_OLD:
        assert (seq, got) == (1, OLD)
    else:
        assert (seq, got) == (2, NEW)
    # the next flush succeeds and removes every leftover of the interrupted one
    idx.save(old_index, applied_seq=seq + 1)
    left = sorted(p.name for p in old_index.iterdir())
    assert not [n for n in left if n.endswith(".tmp")], left
    assert len([n for n in left if ".g" in n]) == 3, left
    assert set(ExactIndex.load(old_index)[0].labels().tolist()) == got


@pytest.mark.parametrize("point", POINTS_OLD + POINTS_NEW)
def test_exception_at_each_point_in_process(tmp_path, point, monkeypatch):
    rng = np.random.default_rng(3)
    v = rng.standard_normal((400, 24)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    idx = HnswIndex(24, seed=1)
    idx.add(np.arange(200), v[:200])
    idx.save(tmp_path, applied_seq=1)
    idx.add(np.arange(200, 400), v[200:])

    def hook(name):
        if name == point:
            raise OSError(28, "No space left on device (injected)")

    inject(hook, monkeypatch.setattr)
    with pytest.raises(OSError, match="injected"):
        idx.save(tmp_path, applied_seq=2)
    monkeypatch.undo()
    back, seq = HnswIndex.load(tmp_path)
    assert (seq, len(back)) == ((1, 200) if point in POINTS_OLD else (2, 400))
    lab, _ = back.search(v[150], 1, 32)
    assert lab.tolist() == [150]


def test_stale_plain_name_is_not_mixed_in(old_index):
    """A crash after the header rename but before the plain names were refreshed: the plain
    data_level0.bin still holds the old generation. The reader follows the header, not the plain name."""
    r = _run_child(old_index, "header_renamed")
    assert r.returncode == 17
    assert not (old_index / "data_level0.bin").samefile(old_index / "data_level0.bin.g2")
    idx, seq = ExactIndex.load(old_index)
    assert seq == 2 and set(idx.labels().tolist()) == NEW
    # and if the generation file is lost, the stale plain name is refused instead of loaded
    (old_index / "data_level0.bin.g2").unlink()
    with pytest.raises(CorruptIndexError):
        ExactIndex.load(old_index)

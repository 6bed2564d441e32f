"""numba kernel cache: a warm start compiles nothing, and a read-only cache still starts.

Each case runs a real subprocess that builds a small index and searches it (so every kernel the
daemon uses runs), then reports numba's per-kernel cache statistics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from ragweedd.index import numba_env

CHILD = textwrap.dedent("""
    import json, os, sys
    import numpy as np
    from ragweedd.index.hnsw import HnswIndex
    from ragweedd.index import _kernels as K
    rng = np.random.default_rng(0)
    v = rng.standard_normal((400, 16)).astype(np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    if sys.argv[1] == "full":
        idx = HnswIndex(16)
        idx.add(np.arange(400), v)          # two batches: link_batch, then batch_candidates too
        L, _ = idx.search_batch(v[:4], 5, 32)
        assert L[:, 0].tolist() == [0, 1, 2, 3]
        kernels = [K.search_one, K.search_many, K.batch_candidates, K.link_batch]
    else:  # a graph built by hand (a ring) so that only the search kernel is compiled
        from ragweedd.index.fileformat import IndexData
        n = 400
        links = np.zeros((n, 32), np.int32)
        links[:, 0], links[:, 1] = (np.arange(n) + 1) % n, (np.arange(n) - 1) % n
        d = IndexData(kind="hnsw", dim=16, M=16, M0=32, ef_construction=200, seed=1, n=n, live=n,
                      tombstones=0, entry=0, max_level=0, vecs=v, labels=np.arange(n), links0=links,
                      cnt0=np.full(n, 2, np.int32), levels=np.zeros(n, np.int8), deleted=np.zeros(n, np.uint8),
                      uoff=np.full(n, -1, np.int32), ulinks=np.zeros((0, 16), np.int32), ucnt=np.zeros(0, np.int32))
        idx = HnswIndex.from_data(d)
        kernels = [K.search_one]
    lab, _ = idx.search(v[3], 5, 400)
    assert lab[0] == 3
    print(json.dumps({
        "hits": sum(sum(k.stats.cache_hits.values()) for k in kernels),
        "misses": sum(sum(k.stats.cache_misses.values()) for k in kernels),
        "cache_dir": os.environ.get("NUMBA_CACHE_DIR"),
    }))
""")


def _run(env_extra, mode="full"):
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(env_extra, PYTHONPATH=os.getcwd(), PYTHONDONTWRITEBYTECODE="1")
    r = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, capture_output=True, text=True, timeout=300,
                       cwd=os.getcwd())
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1]), r.stdout + r.stderr


def test_warm_start_loads_every_kernel_from_the_cache(tmp_path):
    cache = tmp_path / "numba"
    cache.mkdir()
    cold, _ = _run({"NUMBA_CACHE_DIR": str(cache)})
    assert cold["cache_dir"] == str(cache)
    assert cold["misses"] >= 4  # compiled...
    assert any(p.suffix == ".nbi" for p in cache.rglob("*"))  # ...and written to the cache
    warm, _ = _run({"NUMBA_CACHE_DIR": str(cache)})
    assert warm["misses"] == 0, warm
    assert warm["hits"] >= 4


def _make_read_only(path) -> bool:
    """Mode 0555; as root (which ignores modes) also the immutable attribute. False if impossible."""
    path.chmod(0o555)
    if os.geteuid() != 0:
        return True
    return subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0


def test_read_only_cache_dir_still_starts(tmp_path):
    cache = tmp_path / "ro-cache"
    cache.mkdir()
    if not _make_read_only(cache):
        cache = tmp_path / "a-file" / "cache"  # cannot be created, even by root
        (tmp_path / "a-file").write_text("")
    try:
        res, err = _run({"NUMBA_CACHE_DIR": str(cache)}, mode="search")
    finally:
        if cache.is_dir() and os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(cache)], capture_output=True)
    assert res["cache_dir"] != str(cache)  # fell back to a private directory, with a warning
    assert "numba_cache_not_writable" in err
    assert not cache.is_dir() or list(cache.iterdir()) == []


def test_setup_numba_cache(tmp_path, monkeypatch):
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    good = tmp_path / "cache" / "numba"
    assert numba_env.setup_numba_cache(good) == str(good)
    assert os.environ["NUMBA_CACHE_DIR"] == str(good) and good.is_dir()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    used = numba_env.setup_numba_cache(blocker / "sub")  # cannot create a directory under a file
    assert used != str(blocker / "sub") and os.path.isdir(used)
    assert os.environ["NUMBA_CACHE_DIR"] == used
    if "numba.core.config" in sys.modules:
        assert sys.modules["numba.core.config"].CACHE_DIR == used

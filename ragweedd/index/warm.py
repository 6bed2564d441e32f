"""The index kernels made ready before the first vector needs them.

numba compiles the HNSW kernels (index/_kernels.py) the first time they run and keeps them in its
cache directory (index/numba_env.py); on a fresh cache that takes tens of seconds of CPU. Left to
the first vector, it lands in the index sync thread: the first files' vectors wait, and a stop in
that window waits too (the sync thread is in the compiler, so the index is not flushed). So the
daemon runs them once at start on a small index, in a thread of its own, when the cache does not
hold them yet (``start``); ``make`` does it at install (``python -m ragweedd.index.warm``), so the
first start finds them cached.
"""

from __future__ import annotations

import glob
import os
import threading
import time

from ragweedd.logging import get_logger

log = get_logger("ragweedd.index")

# the kernels the daemon's index calls (adds and single searches; search_many serves only the
# benchmarks' batches); the ones they call are compiled, and cached, with them
ENTRY_POINTS = ("batch_candidates", "link_batch", "search_one")

_compiling = threading.Event()


def compiling() -> bool:
    """Whether the start's warm-up is compiling now: whoever needs a kernel meanwhile waits for it."""
    return _compiling.is_set()


def cached(cache_dir: str | None) -> bool:
    """Whether numba's cache in ``cache_dir`` holds every entry point (of any source version: a
    stale entry is recompiled by numba on first use, which ``warm`` then does)."""
    if not cache_dir:
        return False
    return all(glob.glob(os.path.join(glob.escape(cache_dir), "**", f"_kernels.{name}-*.nbi"), recursive=True)
               for name in ENTRY_POINTS)


def warm() -> float:
    """Compile, or load from the cache, every kernel the index calls; returns the seconds taken."""
    import numpy as np

    from ragweedd.index.hnsw import HnswIndex

    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((300, 16)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    idx = HnswIndex(16)
    idx.add(np.arange(len(vecs)), vecs)
    idx.search(vecs[0], k=5, ef=32)
    idx.delete([1])
    return time.perf_counter() - t0


def start(cache_dir: str | None) -> threading.Thread | None:
    """Warm the kernels in a daemon thread when the cache lacks them (a stop never waits for it)."""
    if cached(cache_dir):
        return None

    def run() -> None:
        try:
            log.info("index_kernels_ready", seconds=round(warm(), 2), cache_dir=cache_dir)
        except Exception as e:  # noqa: BLE001 - the first vector compiles them anyway; warming only saves time
            log.warning("index_kernels_warm_failed", error=f"{type(e).__name__}: {e}")
        finally:
            _compiling.clear()

    _compiling.set()

    t = threading.Thread(target=run, name="index-kernels-warm", daemon=True)
    t.start()
    return t


def main() -> int:
    """``python -m ragweedd.index.warm``: fill the cache the daemon on the default configuration uses."""
    from ragweedd.config import load_config
    from ragweedd.index.numba_env import setup_for
    from ragweedd.paths import Paths, default_config_file

    cfg_file = default_config_file()
    cfg = load_config(cfg_file if cfg_file.exists() else None)
    cache_dir = setup_for(Paths.from_config(cfg))
    if cached(cache_dir):
        print(f"ragweedd: index kernels already cached in {cache_dir}")
        return 0
    print(f"ragweedd: compiling the index kernels into {cache_dir} (once; up to a minute)", flush=True)
    print(f"ragweedd: done in {warm():.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

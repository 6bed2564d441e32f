"""Runs the real daemon (``ragweedd.daemon.run_daemon``) with test parts handed to the composition
root, never through the environment:

    python tests/system/daemon_main.py --config CFG [--embed-log FILE] [--fail-watch ROOT] [--slow-embed S]

--embed-log   every embedding call appends one line with its number of texts (to count re-embeds)
--fail-watch  the native watch of ROOT fails as if inotify were out of watches (ENOSPC)
--slow-embed  every embedding call sleeps S seconds after it is logged (a slow model)
--fail-worker-start N   the first N ingest pipelines fail to open (the embedder raises when asked its
              chunk size), so the first N runs of the worker loop end by an exception
--fail-index-sync N     the first N index syncs end the sync loop with SystemExit (what a library
              calling sys.exit does; ``except Exception`` does not catch it)
--exit-on-file NAME     extracting a file named NAME calls sys.exit inside the ingest worker
--embed-down-while FILE every embedding call fails (as an unreachable model server) while FILE exists
"""

from __future__ import annotations

import argparse
import errno
import functools
import os
import sys
import time
from pathlib import Path
from typing import Any


class CountingEmbedder:
    def __init__(self, inner: Any, log: Path) -> None:
        self._inner, self._log = inner, log

    def embed_batch(self, texts):
        with open(self._log, "a", encoding="utf-8") as f:
            f.write(f"{len(texts)}\n")
        return self._inner.embed_batch(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class SlowEmbedder:
    def __init__(self, inner: Any, seconds: float) -> None:
        self._inner, self._seconds = inner, seconds

    def embed_batch(self, texts):
        time.sleep(self._seconds)
        return self._inner.embed_batch(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class DownEmbedder:
    """Fails like an unreachable model server while ``flag`` exists."""

    def __init__(self, inner: Any, flag: Path) -> None:
        self._inner, self._flag = inner, flag

    def embed_batch(self, texts):
        if self._flag.exists():
            from ragweedd.errors import EmbedderError

            raise EmbedderError("the embedding server is not reachable (test)")
        return self._inner.embed_batch(texts)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class FailingStartEmbedder:
    """Raises when a pipeline asks its preferred chunk size, the first ``n`` times."""

    def __init__(self, inner: Any, n: int) -> None:
        self._inner, self._left = inner, n

    @property
    def preferred_chunk_tokens(self) -> int:
        if self._left > 0:
            self._left -= 1
            raise RuntimeError("the embedder is not ready (test)")
        return getattr(self._inner, "preferred_chunk_tokens", 256)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def fail_index_sync(n: int) -> None:
    from ragweedd.index.sync import IndexSync

    real = IndexSync.sync
    left = [n]

    def sync(self, name: str) -> int:
        if left[0] > 0:
            left[0] -= 1
            raise SystemExit("a library called sys.exit (test)")
        return real(self, name)

    IndexSync.sync = sync  # type: ignore[method-assign]


def failing_observer(root: str):
    from watchdog.observers import Observer

    class FailingObserver(Observer):
        def schedule(self, event_handler, path, recursive=False, **kw):
            if os.path.samefile(path, root):
                raise OSError(errno.ENOSPC, "inotify watch limit reached (test)")
            return super().schedule(event_handler, path, recursive=recursive, **kw)

    return FailingObserver()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--embed-log")
    ap.add_argument("--fail-watch")
    ap.add_argument("--slow-embed", type=float, default=0.0)
    ap.add_argument("--fail-worker-start", type=int, default=0)
    ap.add_argument("--fail-index-sync", type=int, default=0)
    ap.add_argument("--exit-on-file")
    ap.add_argument("--embed-down-while")
    a = ap.parse_args()

    from ragweedd.cli.common import load
    from ragweedd.daemon import run_daemon
    from ragweedd.embed.factory import make_embedder
    from ragweedd.index.numba_env import setup_for
    from ragweedd.logging import configure
    from ragweedd.paths import Paths
    from ragweedd.watch.watcher import Watcher

    cfg = load(a.config)
    configure(cfg.log_level, stream=sys.stdout)
    setup_for(Paths.from_config(cfg).ensure())
    embedder = make_embedder(cfg.embed_model, cfg)
    if a.slow_embed > 0:
        embedder = SlowEmbedder(embedder, a.slow_embed)
    if a.embed_log:
        embedder = CountingEmbedder(embedder, Path(a.embed_log))
    if a.embed_down_while:
        embedder = DownEmbedder(embedder, Path(a.embed_down_while))
    if a.fail_worker_start:
        embedder = FailingStartEmbedder(embedder, a.fail_worker_start)
    if a.fail_index_sync:
        fail_index_sync(a.fail_index_sync)
    watcher_factory = None
    if a.fail_watch:
        watcher_factory = functools.partial(Watcher, native_observer=functools.partial(failing_observer, a.fail_watch))
    extract = None
    if a.exit_on_file:
        from ragweedd.ingest.worker import make_extract

        inner = make_extract(cfg)

        def extract(path, settings):
            if Path(path).name == a.exit_on_file:
                sys.exit(f"an extractor called sys.exit on {a.exit_on_file} (test)")
            return inner(path, settings)
    return run_daemon(cfg, embedder=embedder, watcher_factory=watcher_factory, extract=extract)


if __name__ == "__main__":
    raise SystemExit(main())

"""Runs the real daemon (``ragweedd.daemon.run_daemon``) with test parts handed to the composition
root, never through the environment:

    python tests/system/daemon_main.py --config CFG [--embed-log FILE] [--fail-watch ROOT] [--slow-embed S]

--embed-log   every embedding call appends one line with its number of texts (to count re-embeds)
--fail-watch  the native watch of ROOT fails as if inotify were out of watches (ENOSPC)
--slow-embed  every embedding call sleeps S seconds after it is logged (a slow model)
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

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


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
    watcher_factory = None
    if a.fail_watch:
        watcher_factory = functools.partial(Watcher, native_observer=functools.partial(failing_observer, a.fail_watch))
    return run_daemon(cfg, embedder=embedder, watcher_factory=watcher_factory)


if __name__ == "__main__":
    raise SystemExit(main())

"""Shared pieces of the ragweedd command line: config loading, embedder construction, printing."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ragweedd.cli.ctl_http import pid_alive
from ragweedd.cli.ctl_text import print_hit_list, use_color
from ragweedd.config import Config, load_config
from ragweedd.contract import shown_hit
from ragweedd.embed.factory import make_embedder as make
from ragweedd.paths import Paths, default_config_file

if TYPE_CHECKING:
    from ragweedd.embed.base import Embedder


def load(config_path: str | None) -> Config:
    return load_noted(config_path)[0]


def load_noted(config_path: str | None) -> tuple[Config, str]:
    """The configuration in force and why it is that one.

    One user has one index: without ``--config`` or ``$RAGWEED_CONFIG``, a one-shot command uses
    the file the running daemon was started with (recorded in its port file), so ``ragweedd ask``
    and ``ragweedctl ask`` read the same collections whichever way the daemon was started (``make
    run``, a service with ``--config``). With no daemon running it is the default file, if any."""

    if config_path:
        return load_config(config_path), "given with --config"
    if os.environ.get("RAGWEED_CONFIG"):
        return load_config(default_config_file()), "from $RAGWEED_CONFIG"
    daemon = running_daemon()
    if daemon is not None and "config" in daemon:
        file = daemon["config"]
        why = f"the running daemon's (pid {daemon['pid']})"
        return load_config(file if isinstance(file, str) else None), why
    default = default_config_file()
    if default.exists():
        return load_config(default), "the default file"
    return load_config(None), "no config file: built-in defaults"


def running_daemon(state_dir: str | None = None) -> dict[str, Any] | None:
    """What the live daemon's port file says (host, port, pid, config), or None when no daemon of
    this user runs. The state dir is the one ragweedctl looks in."""

    state = state_dir or os.path.expanduser(os.environ.get("RAGWEED_STATE_DIR", "")) or str(Paths.resolve().state)
    try:
        with open(os.path.join(state, "port"), encoding="utf-8") as f:
            info = json.loads(f.read(8192))
    except (OSError, ValueError):
        return None
    pid = info.get("pid") if isinstance(info, dict) else None
    if not isinstance(pid, int) or pid <= 0 or not pid_alive(pid):
        return None
    return info


def make_embedder(cfg: Config) -> Embedder:
    return make(cfg.embed_model, cfg)


def print_hits(hits: Sequence[Mapping[str, Any]], as_json: bool, extra: dict | None = None) -> None:
    """``ragweedd search``'s output: the same as ``ragweedctl search`` (ctl_text.print_hit_list)."""

    shown = [shown_hit(dict(h)) for h in hits]  # a name that is not UTF-8 cannot be printed as it is
    if as_json:
        json.dump({"results": shown, **(extra or {})}, sys.stdout, ensure_ascii=False, default=str)
        sys.stdout.write("\n")
        return
    print_hit_list(shown, sys.stdout, use_color(sys.stdout))


def resolve_inputs(paths: list[str]) -> list[Path]:
    out = []
    for p in paths:
        q = Path(p).expanduser()
        if not q.exists():
            from ragweedd.errors import RequestError

            raise RequestError(f"{q} does not exist", hint="pass existing files or folders")
        out.append(q.resolve())
    return out

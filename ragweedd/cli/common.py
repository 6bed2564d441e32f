"""Shared pieces of the ragweedd command line: config loading, embedder construction, printing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ragweedd.config import Config, load_config
from ragweedd.paths import default_config_file


def load(config_path: str | None) -> Config:
    if config_path:
        return load_config(config_path)
    default = default_config_file()
    return load_config(default if default.exists() else None)


def make_embedder(cfg: Config):
    from ragweedd.embed.factory import make_embedder as make

    return make(cfg.embed_model, cfg)


def print_hits(hits: list[dict[str, Any]], as_json: bool, extra: dict | None = None) -> None:
    """``ragweedd search``'s output: the same as ``ragweedctl search`` (ctl_text.print_hit_list)."""
    from ragweedd.cli.ctl_text import print_hit_list, use_color
    from ragweedd.contract import shown_hit

    hits = [shown_hit(dict(h)) for h in hits]  # a name that is not UTF-8 cannot be printed as it is
    if as_json:
        json.dump({"results": hits, **(extra or {})}, sys.stdout, ensure_ascii=False, default=str)
        sys.stdout.write("\n")
        return
    print_hit_list(hits, sys.stdout, use_color(sys.stdout))


def resolve_inputs(paths: list[str]) -> list[Path]:
    out = []
    for p in paths:
        q = Path(p).expanduser()
        if not q.exists():
            from ragweedd.errors import RequestError

            raise RequestError(f"{q} does not exist", hint="pass existing files or folders")
        out.append(q.resolve())
    return out

"""Shared pieces of the ragweedd command line: config loading, embedder construction, printing."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ragweedd.cli.ctl_text import rows_text
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


def where(hit: dict[str, Any]) -> str:
    """Human form of a hit's place: page, section, rows, time, member, lines (else char span)."""
    bits = []
    if hit.get("member"):
        bits.append(f"in {hit['member']}")
    if hit.get("page_label"):
        bits.append(f"p.{hit['page_label']}")
    if hit.get("sheet"):
        bits.append(f"sheet {hit['sheet']}")
    rows = rows_text(hit.get("rows"))
    if rows:
        bits.append(rows)  # a CSV has rows and no sheet
    if hit.get("t_start") is not None:
        bits.append(f"{_clock(hit['t_start'])}-{_clock(hit.get('t_end') or hit['t_start'])}")
    if hit.get("section"):
        bits.append(f"§ {hit['section']}")
    span = hit.get("span") or [None, None]
    lines = hit.get("lines")
    if lines:
        bits.append(f"line {lines[0]}" if lines[0] == lines[-1] else f"lines {lines[0]}-{lines[-1]}")
    elif span[0] is not None and not rows:
        bits.append(f"chars {span[0]}-{span[1]}")
    return ", ".join(bits)


def _clock(t: float) -> str:
    t = int(t)
    return f"{t // 3600:d}:{t // 60 % 60:02d}:{t % 60:02d}" if t >= 3600 else f"{t // 60:d}:{t % 60:02d}"


def snippet(text: str, width: int = 160) -> str:
    s = " ".join(text.split())
    return s if len(s) <= width else s[: width - 1] + "…"


def print_hits(hits: list[dict[str, Any]], as_json: bool, extra: dict | None = None) -> None:
    from ragweedd.contract import shown_hit

    hits = [shown_hit(dict(h)) for h in hits]  # a name that is not UTF-8 cannot be printed as it is
    if as_json:
        json.dump({"results": hits, **(extra or {})}, sys.stdout, ensure_ascii=False, default=str)
        sys.stdout.write("\n")
        return
    if not hits:
        print("no results")
        return
    for n, h in enumerate(hits, 1):
        print(f"{n:2d}. {h['score']:.3f}  {h['collection']}/{h.get('source_rel_path') or h['filename']}"
              f"  [{where(h)}]")
        if h.get("uri"):
            print(f"    {h['uri']}")
        print(f"    {snippet(h['text'])}")


def resolve_inputs(paths: list[str]) -> list[Path]:
    out = []
    for p in paths:
        q = Path(p).expanduser()
        if not q.exists():
            from ragweedd.errors import RequestError

            raise RequestError(f"{q} does not exist", hint="pass existing files or folders")
        out.append(q.resolve())
    return out

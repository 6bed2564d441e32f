"""``ragweedctl keys set|list|remove``: provider API keys in the 0600 keys file the daemon reads.

The key is read without echo (getpass on a terminal, else one line of stdin, for
``pass show anthropic | ragweedctl keys set anthropic``) and never printed, not even in ``--json``:
``list`` tells only where each provider's key comes from. See ragweedd/keyfile.py for the file,
its place and the precedence (config, then environment, then this file).
"""

from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

from ragweedd.cli.ctl_http import CtlError
from ragweedd.errors import ConfigError, KeyFileError
from ragweedd.keyfile import KEY_PROVIDERS, keys_file, read_keys, unknown_provider, write_keys

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: ragweedctl starts without importing typing
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Mapping
    from typing import TextIO

    from ragweedd.config import Config  # ragweedctl starts without the config module

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


def add_parser(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Register ``keys`` through ragweedctl's ``add(name, help)``."""
    k = add("keys", "store, list or remove LLM API keys (a 0600 file the daemon reads)")
    k.add_argument("action", choices=["set", "list", "remove"],
                   help="set: store a key (asked without echo); list: where each key comes from; remove: delete one")
    prov = k.add_argument("provider", nargs="?", metavar="PROVIDER", help=f"one of {', '.join(KEY_PROVIDERS)}")
    # not argparse choices: an unknown name gets our message (which also says ollama needs no key);
    # the completion scripts offer these
    prov.completions = tuple(KEY_PROVIDERS)  # type: ignore[attr-defined]
    k.add_argument("--config", metavar="FILE", help="config file to look for keys in (list only; default: "
                                                    "the daemon's default config file)")


def run(a: argparse.Namespace, out: TextIO, stdin: TextIO | None = None) -> int:
    stdin = stdin or sys.stdin
    if a.action == "list":
        if a.provider:
            raise CtlError("keys list takes no PROVIDER", EXIT_USAGE)
        return _list(a, out)
    if not a.provider:
        raise CtlError(f"keys {a.action} needs a PROVIDER: one of {', '.join(KEY_PROVIDERS)}", EXIT_USAGE)
    if a.provider not in KEY_PROVIDERS:
        raise CtlError(unknown_provider(a.provider), EXIT_USAGE)
    path = keys_file()
    try:
        keys = read_keys(path)
    except KeyFileError as e:
        raise CtlError(e.message, EXIT_ERROR, hint=e.hint) from None
    if a.action == "set":
        keys[a.provider] = _read_secret(a.provider, stdin)
        done = "stored"
    else:
        if a.provider not in keys:
            raise CtlError(f"no key for {a.provider} in {path}; `ragweedctl keys list` shows where keys come from",
                           EXIT_USAGE)
        del keys[a.provider]
        done = "removed"
    try:
        write_keys(keys, path)
    except OSError as e:
        raise CtlError(f"cannot write {path}: {e.strerror}", EXIT_ERROR) from None
    todo = _synthesis_todo(a.provider) if done == "stored" else None
    if a.json:
        out.write(json_dumps({"provider": a.provider, "file": str(path), "action": done,
                              "next_step": todo[0] if todo else None}))
        return EXIT_OK
    out.write(f"{done} the {a.provider} key {'in' if done == 'stored' else 'from'} {path}\n")
    if todo:
        _offer_synthesis(a.provider, *todo, out, stdin)
    return EXIT_OK


def _synthesis_todo(provider: str) -> tuple[str, Path | None, str] | None:
    """(what the user must still do, the config file to edit, the model) when answers will not use
    the key just stored: [llm] synthesis is empty or names another provider, in the configuration
    the daemon runs with (or would run with)."""
    from ragweedd.cli import common
    from ragweedd.errors import RagweedError
    from ragweedd.keyfile import SUGGESTED_SYNTHESIS
    from ragweedd.paths import default_config_file

    try:
        cfg, _ = common.load_noted(None)
    except RagweedError as e:
        return f"the configuration could not be read ({e}), so answers may not use this key", None, ""
    model = SUGGESTED_SYNTHESIS[provider]
    source = str(cfg.source)
    file = None if source.startswith("<") else Path(source)
    target = file or default_config_file()
    if cfg.llm_synthesis.split(":", 1)[0] == provider:
        return None
    now = f"answers are written by {cfg.llm_synthesis}" if cfg.llm_synthesis else "[llm] synthesis is empty"
    return (f"answers do not use this key yet: {now} in {target}. Set [llm] synthesis = \"{model}\" there "
            "and restart the daemon", target, model)


def _offer_synthesis(provider: str, todo: str, target: Path | None, model: str, out: TextIO, stdin: TextIO) -> None:
    out.write(todo + "\n")
    if target is None or not (stdin.isatty() and out.isatty()):
        return
    out.write(f"Set [llm] synthesis = \"{model}\" in {target} now? [y/N] ")
    out.flush()
    answer = stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        return
    try:
        set_synthesis(target, model)
    except OSError as e:
        out.write(f"not changed: {e}\n")
        return
    except ConfigError as e:
        out.write(f"not changed: {e.message}\n")
        return
    out.write(f"set in {target}; restart the daemon to use it (Ctrl-C and start it again, or "
              "`systemctl --user restart ragweedd` for the service)\n")


_LLM_TABLE = re.compile(r"^\s*\[\s*llm\s*\]\s*(#.*)?$")


def set_synthesis(path: Path, model: str) -> None:
    """Write ``synthesis = "model"`` into the [llm] table of the TOML file at ``path`` (created if
    absent), keeping every other line and comment; ValueError (nothing written) when the result would
    not be a valid configuration, for example a synthesis key already there."""
    from ragweedd.config import load_config
    from ragweedd.errors import RagweedError

    text = path.read_text(encoding="utf-8") if path.exists() else ""
    lines = text.splitlines(keepends=True)
    line = f'synthesis = "{model}"\n'
    at = next((i for i, x in enumerate(lines) if _LLM_TABLE.match(x)), None)
    if at is None:
        new = text + ("\n" if text and not text.endswith("\n") else "") + ("\n" if text else "") + "[llm]\n" + line
    else:
        end = next((i for i in range(at + 1, len(lines)) if lines[i].lstrip().startswith("[")), len(lines))
        old = next((i for i in range(at + 1, end) if re.match(r"\s*synthesis\s*=", lines[i])), None)
        if old is not None:  # another provider's model: replaced, not added twice
            lines[old] = line
        else:
            lines.insert(at + 1, line)
        new = "".join(lines)
    try:
        load_config(text=new, env={})
    except RagweedError as e:
        raise ConfigError(f"{path} would not be a valid configuration ({e})", hint="edit it by hand") from None
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(new, encoding="utf-8")
    if path.exists():
        os.chmod(tmp, stat.S_IMODE(path.stat().st_mode))
    os.replace(tmp, path)


def _read_secret(provider: str, stdin: TextIO) -> str:
    if stdin.isatty():
        import getpass

        try:
            key = getpass.getpass(f"{provider} API key (not shown): ")
        except EOFError:
            key = ""
    else:
        key = stdin.readline()
    key = key.strip()
    if not key:
        raise CtlError(f"no key given for {provider} (type it at the prompt, or pipe it on stdin)", EXIT_USAGE)
    if any(c.isspace() or ord(c) < 32 for c in key):
        raise CtlError(f"the {provider} key contains spaces or control characters; an API key has none", EXIT_USAGE)
    return key


def sources(cfg: Config | None, env: Mapping[str, str], stored: dict[str, str]) -> list[dict]:
    """Where each provider's key comes from, in the daemon's order (never the key itself)."""
    rows = []
    for provider, names in KEY_PROVIDERS.items():
        found: list[dict[str, str]] = []
        if cfg is not None and bool(getattr(cfg, f"llm_{provider}_api_key", None)):
            found.append({"source": "config", "where": f"llm.{provider}_api_key in {cfg.source}"})
        for n in names:
            if env.get(n):
                found.append({"source": "env", "where": n})
        if provider in stored:
            found.append({"source": "file", "where": str(keys_file())})
        rows.append({"provider": provider, "source": found[0]["source"] if found else None,
                     "where": found[0]["where"] if found else None,
                     "shadowed": [f["source"] for f in found[1:]]})
    return rows


def _list(a: argparse.Namespace, out: TextIO) -> int:
    problem = None
    try:
        stored = read_keys()
    except KeyFileError as e:
        stored, problem = {}, str(e)
    cfg = None
    from ragweedd.errors import RagweedError

    try:
        from ragweedd.cli import common

        cfg = common.load(a.config)
    except RagweedError as e:
        problem = (problem + "; " if problem else "") + f"config not read: {e}"
    rows = sources(cfg, os.environ, stored)
    if a.json:
        out.write(json_dumps({"keys_file": str(keys_file()), "providers": rows, "problem": problem}))
        return EXIT_OK
    for r in rows:
        if r["source"] is None:
            out.write(f"{r['provider']:<10} not set\n")
            continue
        note = f"  (also {', '.join(r['shadowed'])}, not used)" if r["shadowed"] else ""
        env_note = " (this shell's environment; a service started by systemd/launchd does not see it)" \
            if r["source"] == "env" else ""
        out.write(f"{r['provider']:<10} {r['source']:<7} {r['where']}{env_note}{note}\n")
    if problem:
        out.write(f"warning: {problem}\n")
    return EXIT_OK


def json_dumps(data: object) -> str:
    import json

    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"

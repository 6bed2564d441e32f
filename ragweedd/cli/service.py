"""`ragweedctl service install|uninstall|status`: the systemd user unit (Linux) or the launchd agent
(macOS). Standard library and ragweedd.errors only (ragweedctl imports it).

The unit and plist are rendered here; systemd/ragweedd.service and launchd/com.ragweed.ragweedd.plist
in the source tree are the same renderings with @PLACEHOLDER@ paths, kept equal by a test, so what
is reviewed in the repository is what gets installed.
"""

from __future__ import annotations

import json
import os
import plistlib
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ragweedd.errors import ServiceError
from ragweedd.paths import default_config_file

if TYPE_CHECKING:
    from collections.abc import Callable

UNIT_NAME = "ragweedd.service"
LABEL = "com.ragweed.ragweedd"


def _sd_quote(s: str) -> str:
    # systemd expands %specifiers and $VARS inside ExecStart/Environment, even in quotes.
    s = s.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return f'"{s}"'


def systemd_unit(ragweedd: str, config: str | None, state_dir: str | None = None) -> str:
    args = [_sd_quote(ragweedd)]
    if config:
        args += ["--config", _sd_quote(config)]
    args.append("run")
    env = ["Environment=NUMBA_CACHE_DIR=%h/.cache/ragweedd/numba", "Environment=PYTHONUNBUFFERED=1"]
    if state_dir:
        env.append("Environment=" + _sd_quote(f"RAGWEED_STATE_DIR={state_dir}"))
    return "\n".join([
        "# ragweedd as a systemd user service. `ragweedctl service install` renders this file with",
        "# the real paths into ~/.config/systemd/user/ and runs: systemctl --user enable --now ragweedd",
        "[Unit]",
        "Description=ragweedd local document indexer and question-answering daemon",
        "",
        "[Service]",
        "Type=simple",
        "ExecStart=" + " ".join(args),
        *env,
        "Restart=on-failure",
        "RestartSec=5",
        "# Logs are JSON lines on stdout; journald keeps them (journalctl --user -u ragweedd).",
        "StandardOutput=journal",
        "StandardError=journal",
        "# Indexing is background work: stay out of the way of interactive programs.",
        "Nice=10",
        "KillSignal=SIGTERM",
        "TimeoutStopSec=60",
        "NoNewPrivileges=yes",
        "",
        "[Install]",
        "WantedBy=default.target",
        "",
    ])


def launchd_plist(ragweedd: str, config: str | None, home: str, state_dir: str | None = None) -> bytes:
    args = [ragweedd] + (["--config", config] if config else []) + ["run"]
    env = {"NUMBA_CACHE_DIR": f"{home}/Library/Caches/ragweedd/numba", "PYTHONUNBUFFERED": "1"}
    if state_dir:
        env["RAGWEED_STATE_DIR"] = state_dir
    log = f"{home}/Library/Logs/ragweedd/ragweedd.log"
    return plistlib.dumps({
        "Label": LABEL,
        "ProgramArguments": args,
        "RunAtLoad": True,
        # Restart after a crash, not after a clean stop (like systemd's Restart=on-failure).
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 10,
        "StandardOutPath": log,
        "StandardErrorPath": log,
        "EnvironmentVariables": env,
        "ProcessType": "Background",
        "Nice": 10,
        "ExitTimeOut": 60,
    }, sort_keys=True)


# --------------------------------------------------------------------------- plans
@dataclass
class Plan:
    platform: str
    target: Path
    content: bytes | None = None
    mkdirs: list[Path] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)
    tolerant: set[int] = field(default_factory=set)  # command indexes whose failure is fine
    remove: bool = False
    remove_at: int = 0  # the file is removed before the command with this index (len = after all)
    notes: list[str] = field(default_factory=list)


def _platform(platform: str | None) -> str:
    p = platform or sys.platform
    if p.startswith("linux"):
        return "systemd"
    if p == "darwin":
        return "launchd"
    raise ServiceError(f"service install is not supported on {p}", 2, hint="run `ragweedd run` yourself")


def default_ragweedd() -> Path:
    """The ragweedd console script installed beside this interpreter (venv or system bin)."""
    return Path(sys.executable).parent / "ragweedd"


def _resolve_paths(ragweedd: str | None, config: str | None, notes: list[str]) -> tuple[str, str | None]:
    exe = Path(ragweedd).expanduser() if ragweedd else default_ragweedd()
    exe = exe.absolute()
    if not exe.is_file() or not os.access(exe, os.X_OK):
        raise ServiceError(f"ragweedd executable not found at {exe}", 2,
                           hint="check the path given to --ragweedd") if ragweedd else ServiceError(
            f"ragweedd executable not found at {exe} (next to {sys.executable})", 2, hint="pass --ragweedd PATH")
    if config:
        cfg = Path(config).expanduser().absolute()
        if not cfg.is_file():
            raise ServiceError(f"config file {cfg} does not exist", 2, hint="create it or leave out --config")
        return str(exe), str(cfg)

    cfg = default_config_file()
    if cfg.is_file():
        return str(exe), str(cfg.absolute())
    notes.append(f"no config file at {cfg}: the service runs with the defaults "
                 "(write that file and run `ragweedctl service install` again to use it)")
    return str(exe), None


def plan(action: str, *, platform: str | None = None, ragweedd: str | None = None,
         config: str | None = None, state_dir: str | None = None, home: str | None = None) -> Plan:
    kind = _platform(platform)
    home = home or str(Path.home())
    if kind == "systemd":
        base = os.environ.get("XDG_CONFIG_HOME") or f"{home}/.config"
        target = Path(base) / "systemd" / "user" / UNIT_NAME
        sc = ["systemctl", "--user"]
        p = Plan(kind, target)
        if action == "install":
            exe, cfg = _resolve_paths(ragweedd, config, p.notes)
            p.content = systemd_unit(exe, cfg, state_dir).encode()
            p.mkdirs = [target.parent]
            p.commands = [sc + ["daemon-reload"], sc + ["enable", "--now", UNIT_NAME]]
        elif action == "uninstall":
            p.remove, p.remove_at = True, 1
            p.commands = [sc + ["disable", "--now", UNIT_NAME], sc + ["daemon-reload"]]
            p.tolerant = {0}
        else:
            p.commands = [sc + ["is-enabled", UNIT_NAME], sc + ["is-active", UNIT_NAME]]
            p.tolerant = {0, 1}
        return p
    uid = os.getuid() if hasattr(os, "getuid") else 0
    target = Path(home) / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    p = Plan(kind, target)
    domain = f"gui/{uid}"
    if action == "install":
        exe, cfg = _resolve_paths(ragweedd, config, p.notes)
        p.content = launchd_plist(exe, cfg, home, state_dir)
        p.mkdirs = [target.parent, Path(home) / "Library" / "Logs" / "ragweedd"]
        # bootout first: bootstrap fails with "service already loaded" on a re-install.
        p.commands = [["launchctl", "bootout", f"{domain}/{LABEL}"],
                      ["launchctl", "bootstrap", domain, str(target)],
                      ["launchctl", "enable", f"{domain}/{LABEL}"]]
        p.tolerant = {0}
    elif action == "uninstall":
        p.remove, p.remove_at = True, 1
        p.commands = [["launchctl", "bootout", f"{domain}/{LABEL}"]]
        p.tolerant = {0}
    else:
        p.commands = [["launchctl", "print", f"{domain}/{LABEL}"]]
        p.tolerant = {0}
    return p


# --------------------------------------------------------------------------- execution
def run(action: str, *, dry_run: bool = False, config: str | None = None, ragweedd: str | None = None,  # noqa: C901 - one branch per action of the service plan, each a few lines
        state_dir: str | None = None, as_json: bool = False, out: TextIO | None = None, platform: str | None = None,
        home: str | None = None) -> int:
    out = out or sys.stdout
    p = plan(action, platform=platform, ragweedd=ragweedd, config=config, state_dir=state_dir, home=home)
    report: dict = {"action": action, "platform": p.platform, "file": str(p.target), "dry_run": dry_run,
                    "commands": [" ".join(c) for c in p.commands], "notes": p.notes}
    say = (lambda s: None) if as_json else (lambda s: out.write(s + "\n"))
    if p.content is not None:
        report["content"] = p.content.decode()
    if dry_run:
        say(f"# {action} ({p.platform}), dry run: nothing is changed")
        if p.content is not None:
            say(f"# would write {p.target}:")
            say(p.content.decode().rstrip("\n"))
        if p.remove:
            say(f"# would remove {p.target}")
        for c in p.commands:
            say("# would run: " + " ".join(c))
        for n in p.notes:
            say("# note: " + n)
        if as_json:
            out.write(json.dumps(report, indent=2) + "\n")
        return 0
    tool = p.commands[0][0]
    if shutil.which(tool) is None:
        raise ServiceError(f"{tool} is not installed or not on PATH, so the {p.platform} service cannot be "
                           "managed here", hint="run `ragweedd run` yourself instead")
    if p.content is not None:
        for d in p.mkdirs:
            d.mkdir(parents=True, exist_ok=True)
        tmp = p.target.with_name(p.target.name + ".tmp")
        tmp.write_bytes(p.content)
        os.replace(tmp, p.target)
        say(f"wrote {p.target}")
    results = []
    for i, cmd in enumerate(p.commands):
        if p.remove and i == p.remove_at:
            _remove(p.target, say)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        results.append({"command": " ".join(cmd), "returncode": r.returncode,
                        "output": (r.stdout + r.stderr).strip()})
        if r.returncode != 0 and i not in p.tolerant:
            raise ServiceError(f"`{' '.join(cmd)}` failed (exit {r.returncode}): {(r.stderr or r.stdout).strip()}")
        if action == "status":
            say(f"{' '.join(cmd)}: {(r.stdout or r.stderr).strip() or r.returncode}")
    if p.remove and p.remove_at >= len(p.commands):
        _remove(p.target, say)
    if action == "status":
        report["installed"] = p.target.exists()
        if p.platform == "systemd":
            report["enabled"], report["active"] = (x["output"] for x in results)
        else:
            report["loaded"] = results[0]["returncode"] == 0
        say(f"unit file: {p.target} ({'present' if report['installed'] else 'absent'})")
    elif action == "install":
        say(f"ragweedd is installed as a {p.platform} service and started")
    else:
        say("ragweedd service removed")
    for n in p.notes:
        say("note: " + n)
    report["results"] = results
    if as_json:
        out.write(json.dumps(report, indent=2) + "\n")
    return 0


def _remove(target: Path, say: Callable[[str], object]) -> None:
    try:
        target.unlink()
        say(f"removed {target}")
    except FileNotFoundError:
        say(f"{target} was not installed")

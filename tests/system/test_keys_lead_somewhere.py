"""A stored key leads somewhere: `ragweedctl keys set` says what else answers need (and offers to
set it on a terminal), `ask` without an LLM says whether a key is stored and what is missing, and the
one-shot commands use the running daemon's configuration."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import time
import tomllib
from pathlib import Path

from tests.system.conftest import ROOT, Daemon, serving, wait_indexed, wait_until

CTL = [sys.executable, "-m", "ragweedd.cli.ctl"]
FAKE_KEY = "sk-test-0123456789abcdef"


def env_for(xdg: Path, **more: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("RAGWEED_")}
    return {**env, "XDG_CONFIG_HOME": str(xdg), "XDG_STATE_HOME": str(xdg.parent / "state"), **more}


def keys_set(xdg: Path, provider: str, *more: str) -> subprocess.CompletedProcess:
    return subprocess.run(CTL + [*more, "keys", "set", provider], input=FAKE_KEY + "\n", capture_output=True,
                          text=True, cwd=ROOT, env=env_for(xdg), timeout=60)


def test_keys_set_without_synthesis_says_exactly_what_to_set(tmp_path):
    xdg = tmp_path / "xdg"
    config = xdg / "ragweedd" / "config.toml"
    p = keys_set(xdg, "anthropic")
    assert p.returncode == 0, p.stderr
    assert 'Set [llm] synthesis = "anthropic:claude-sonnet-4-5"' in p.stdout and str(config) in p.stdout, p.stdout
    assert "restart the daemon" in p.stdout and FAKE_KEY not in p.stdout + p.stderr
    assert not config.exists()  # not a terminal: nothing is changed without asking
    js = json.loads(keys_set(xdg, "openai", "--json").stdout)
    assert js["action"] == "stored" and 'synthesis = "openai:gpt-4.1-mini"' in js["next_step"]
    config.write_text('[llm]\nsynthesis = "ollama:gemma3:1b"\n')
    p = keys_set(xdg, "gemini")
    assert "answers are written by ollama:gemma3:1b" in p.stdout and "gemini:" in p.stdout, p.stdout
    config.write_text('[llm]\nsynthesis = "gemini:gemini-2.5-flash"\n')
    p = keys_set(xdg, "gemini")
    assert p.returncode == 0 and p.stdout.strip().count("\n") == 0, p.stdout  # all set: just "stored"


def _on_a_terminal(argv: list[str], env: dict, replies: list[str]) -> str:
    """Run ``argv`` on a pseudo-terminal, typing each reply when the program asks (a line ending in
    ': ' or '] ')."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, cwd=ROOT, env=env, close_fds=True)
    os.close(slave)
    seen = b""
    pending = list(replies)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the program ended and closed the terminal
                break
            if not chunk:
                break
            seen += chunk
            if pending and seen.rstrip(b" ").endswith((b":", b"]")):
                os.write(master, (pending.pop(0) + "\n").encode())
    finally:
        os.close(master)
    assert proc.wait(30) == 0, seen.decode(errors="replace")
    return seen.decode(errors="replace")


def test_on_a_terminal_keys_set_offers_to_set_synthesis_and_keeps_the_rest_of_the_file(tmp_path):
    xdg = tmp_path / "xdg"
    config = xdg / "ragweedd" / "config.toml"
    config.parent.mkdir(parents=True)
    config.write_text('# my settings\ntop_k = 30\n\n[llm]\nannotation = "ollama:gemma3:1b"  # small\n\n'
                      '[collections.notes]\npaths = ["/tmp"]\n')
    screen = _on_a_terminal(CTL + ["keys", "set", "anthropic"], env_for(xdg), [FAKE_KEY, "y"])
    assert "now? [y/N]" in screen and "restart the daemon" in screen, screen
    text = config.read_text()
    data = tomllib.loads(text)
    assert data["llm"] == {"annotation": "ollama:gemma3:1b", "synthesis": "anthropic:claude-sonnet-4-5"}
    assert text.startswith("# my settings\ntop_k = 30\n") and "# small" in text and data["collections"]
    # declined: nothing changes
    config.write_text("top_k = 30\n")
    _on_a_terminal(CTL + ["keys", "set", "openai"], env_for(xdg), [FAKE_KEY, "n"])
    assert config.read_text() == "top_k = 30\n"


def test_ask_without_an_llm_says_whether_a_key_is_stored_and_what_is_missing(tmp_path):
    xdg = tmp_path / "xdg"
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "cats.md").write_text("# Cats\n\nCats purr when they are content.\n")
    d = Daemon(tmp_path / "d", {"notes": [folder]}, env=env_for(xdg))
    with serving(d):
        wait_indexed(d, "notes", 1)
        body = d.api("POST", "/v1/ask", json={"query": "why do cats purr?", "stream": False}).json()
        assert body["mode"] == "passages" and "no provider key is set" in body["llm_setup"], body
        assert keys_set(xdg, "anthropic").returncode == 0
        body = d.api("POST", "/v1/ask", json={"query": "why do cats purr?", "stream": False}).json()
        setup = body["llm_setup"]
        assert "a key for anthropic is set" in setup and str(d.cfg) in setup, setup
        assert 'synthesis = "anthropic:claude-sonnet-4-5"' in setup
        p = subprocess.run(CTL + ["--state-dir", str(d.base / "state"), "ask", "why do cats purr?"],
                           capture_output=True, text=True, cwd=ROOT, env=env_for(xdg), timeout=120)
        assert p.returncode == 0 and "note: no LLM writes answers: a key for anthropic is set" in p.stderr, p
        assert "note:" not in p.stdout  # guidance stays out of the answer a script reads


def test_oneshot_commands_use_the_running_daemons_configuration(tmp_path):
    """check-config (and every one-shot command) without --config reads the file the daemon runs
    with, not the default file; with no daemon, the default file again."""
    xdg = tmp_path / "xdg"
    default = xdg / "ragweedd" / "config.toml"
    default.parent.mkdir(parents=True)
    default.write_text("top_k = 11\n")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_text("The daemon's collection holds the axolotl.")
    d = Daemon(tmp_path / "d", {"daemons": [folder]}, env=env_for(xdg))
    env = env_for(xdg, RAGWEED_STATE_DIR=str(d.base / "state"), RAGWEED_EMBED_MODEL="hash:64")

    def oneshot(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "ragweedd", *argv], capture_output=True, text=True, cwd=ROOT,
                              env=env, timeout=120, stdin=subprocess.DEVNULL)
    with serving(d):
        wait_indexed(d, "daemons", 1)
        p = oneshot("check-config")
        assert p.returncode == 0 and f"source: {d.cfg}; the running daemon's (pid {d.proc.pid})" in p.stdout, p
        js = json.loads(oneshot("--json", "check-config").stdout)
        assert js["source"] == str(d.cfg) and "daemons" in js["collections"]
        found = oneshot("search", "axolotl")
        assert found.returncode == 0 and "axolotl" in found.stdout, found
    wait_until(lambda: not (d.base / "state" / "port").exists(), 30, 0.1, "the port file removed at stop")
    p = oneshot("check-config")
    assert f"source: {default}; the default file" in p.stdout, p.stdout

"""The API keys file (ragweedd/keyfile.py) and ``ragweedctl keys``: 0600 from the first byte, atomic,
read without echo, never printed; unknown providers refused with the known ones; the order in which the
providers take a key (config, environment, file); a file others can read is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragweedd.config import load_config
from ragweedd.errors import KeyFileError, ProviderAuthError
from ragweedd.keyfile import keys_file, read_keys, write_keys
from ragweedd.llm.factory import make_provider

ROOT = Path(__file__).resolve().parents[2]
CTL = [sys.executable, "-m", "ragweedd.cli.ctl"]


@pytest.fixture
def xdg(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for n in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(n, raising=False)
    return tmp_path / "xdg"


def ctl(xdg: Path, *argv: str, stdin: str = "", env: dict | None = None) -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return subprocess.run(CTL + list(argv), input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60,
                          env={**e, "XDG_CONFIG_HOME": str(xdg), **(env or {})})


def test_file_place_and_mode(xdg):
    assert keys_file() == xdg / "ragweedd" / "keys.toml"
    old = os.umask(0)  # the loosest umask: the file is 0600 anyway
    try:
        write_keys({"anthropic": 'sk-"quoted"\\back'})
    finally:
        os.umask(old)
    f = keys_file()
    assert f.stat().st_mode & 0o777 == 0o600 and f.parent.stat().st_mode & 0o777 == 0o700
    assert read_keys() == {"anthropic": 'sk-"quoted"\\back'}
    assert not list(f.parent.glob(".*tmp"))


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644])
def test_a_file_others_can_read_is_not_used(xdg, mode):
    write_keys({"openai": "sk-1"})
    keys_file().chmod(mode)
    with pytest.raises(KeyFileError, match="chmod 600"):
        read_keys()
    with pytest.raises(ProviderAuthError, match="chmod 600"):
        make_provider("openai:gpt-x", None, env={})


@pytest.mark.parametrize("text,words", [("anthropic = 'x\n", "not valid TOML"), ("ollama = 'x'\n", "unknown provider"),
                                        ("openai = 3\n", "non-empty string")])
def test_a_damaged_file_is_a_clear_error_that_never_quotes_it(xdg, text, words):
    f = keys_file()
    f.parent.mkdir(parents=True)
    f.write_text(text)
    f.chmod(0o600)
    with pytest.raises(KeyFileError, match=words) as ei:
        read_keys()
    assert "'x" not in str(ei.value)


def key_of(provider) -> str:
    """The key a built provider would send (its SDK client holds it)."""
    client = getattr(provider, "_client", None) or getattr(provider, "client", None)
    return client.api_key


def test_precedence_config_then_environment_then_file(xdg):
    write_keys({"anthropic": "from-file", "openai": "from-file"})
    cfg = load_config(text='[llm]\nanthropic_api_key = "from-config"\n', env={})
    assert key_of(make_provider("anthropic:m", cfg, env={"ANTHROPIC_API_KEY": "from-env"})) == "from-config"
    assert key_of(make_provider("anthropic:m", None, env={"ANTHROPIC_API_KEY": "from-env"})) == "from-env"
    assert key_of(make_provider("anthropic:m", None, env={})) == "from-file"
    # a local OpenAI-compatible server: the file's key when there is one, else no real key
    cfg = load_config(text='[llm]\nopenai_base_url = "http://127.0.0.1:9/v1"\n', env={})
    assert key_of(make_provider("openai:m", cfg, env={})) == "from-file"
    write_keys({})
    assert key_of(make_provider("openai:m", cfg, env={})) == "not-needed"
    with pytest.raises(ProviderAuthError, match="ragweedctl keys set gemini"):
        make_provider("gemini:m", None, env={})


def test_ctl_keys_set_list_remove(xdg):
    p = ctl(xdg, "keys", "set", "gemini", stdin="g-secret-key\n")
    assert p.returncode == 0 and "g-secret-key" not in p.stdout + p.stderr
    assert read_keys(xdg / "ragweedd" / "keys.toml") == {"gemini": "g-secret-key"}
    p = ctl(xdg, "keys", "list", env={"OPENAI_API_KEY": "o-env", "GOOGLE_API_KEY": "g-env"})
    assert p.returncode == 0, p.stderr
    rows = {line.split()[0]: line for line in p.stdout.splitlines() if line.split()}
    assert "not set" in rows["anthropic"]
    assert "env" in rows["openai"] and "OPENAI_API_KEY" in rows["openai"]
    assert "env" in rows["gemini"] and "also file, not used" in rows["gemini"]
    assert "o-env" not in p.stdout and "g-env" not in p.stdout and "g-secret-key" not in p.stdout
    p = ctl(xdg, "--json", "keys", "list")
    doc = json.loads(p.stdout)
    assert {r["provider"]: r["source"] for r in doc["providers"]} == {"anthropic": None, "openai": None,
                                                                    "gemini": "file"}
    assert "g-secret-key" not in p.stdout
    p = ctl(xdg, "keys", "remove", "gemini")
    assert p.returncode == 0 and read_keys(xdg / "ragweedd" / "keys.toml") == {}
    assert (xdg / "ragweedd" / "keys.toml").stat().st_mode & 0o777 == 0o600
    p = ctl(xdg, "keys", "remove", "gemini")
    assert p.returncode == 2 and "no key for gemini" in p.stderr


@pytest.mark.parametrize("argv,stdin,words", [
    (["keys", "set", "ollama"], "x\n", "unknown provider 'ollama'; keys are kept for anthropic, openai, gemini"),
    (["keys", "set", "mistral"], "x\n", "anthropic, openai, gemini"),
    (["keys", "set"], "x\n", "needs a PROVIDER"),
    (["keys", "set", "openai"], "\n", "no key given"),
    (["keys", "set", "openai"], "two words\n", "spaces or control characters"),
    (["keys", "list", "openai"], "", "takes no PROVIDER"),
])
def test_ctl_keys_bad_input(xdg, argv, stdin, words):
    p = ctl(xdg, *argv, stdin=stdin)
    assert p.returncode == 2 and words in p.stderr, p.stderr
    assert not (xdg / "ragweedd" / "keys.toml").exists()


def test_ctl_keys_set_on_a_terminal_reads_without_echo(xdg):
    """On a terminal the key is asked with getpass: typed, it does not appear in the output."""
    pty = pytest.importorskip("pty")
    master, slave = pty.openpty()
    e = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    p = subprocess.Popen(CTL + ["keys", "set", "anthropic"], stdin=slave, stdout=slave, stderr=slave, cwd=ROOT,
                         env={**e, "XDG_CONFIG_HOME": str(xdg)}, start_new_session=True)
    seen = b""
    while b"not shown" not in seen:
        seen += os.read(master, 1024)
    os.write(master, b"typed-secret\n")
    while b"[y/N]" not in seen:  # no [llm] synthesis yet: it offers to set one (declined here)
        seen += os.read(master, 1024)
    os.write(master, b"n\n")
    assert p.wait(60) == 0
    os.close(slave)
    try:
        while chunk := os.read(master, 1024):
            seen += chunk
    except OSError:
        pass
    os.close(master)
    assert b"typed-secret" not in seen and b"stored the anthropic key" in seen
    assert read_keys(xdg / "ragweedd" / "keys.toml") == {"anthropic": "typed-secret"}

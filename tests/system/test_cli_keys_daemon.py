"""The keys file end to end, and the daemon's start-up line: ``ragweedctl keys set`` stores a key, a real
daemon subprocess (and the one-shot ``ragweedd ask``) answers through the OpenAI SDK against the local
wire-protocol server of tests/fakes/llm_server.py, which refuses any other key; the key never shows in
the daemon's log or in /v1/status; a keys file others can read is refused with a clear warning."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.llm_server import API_KEY, FakeLLMServer
from tests.system.conftest import ROOT, Daemon, serving, stop, wait_indexed, wait_until

ANSWER = "Cats purr when they are content [1]."
CTL = [sys.executable, "-m", "ragweedd.cli.ctl"]


def reply(provider, messages):
    return ANSWER


@pytest.fixture(scope="module")
def llm():
    with FakeLLMServer(models=("test-model",), reply=reply) as srv:
        yield srv


def llm_toml(llm: FakeLLMServer) -> str:
    # no openai_api_key: the key must come from the keys file (a local base_url alone sends a dummy key,
    # which the fake server refuses with 401)
    return "\n".join(["[llm]", 'synthesis = "openai:test-model"', f'openai_base_url = "{llm.url}/v1"',
                      "max_retries = 0", "timeout_s = 20"])


def ctl_env(xdg: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**env, "XDG_CONFIG_HOME": str(xdg)}


def keys(xdg: Path, *argv: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(CTL + ["keys", *argv], input=stdin, capture_output=True, text=True, cwd=ROOT,
                          env=ctl_env(xdg), timeout=60)


def docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cats.md").write_text("# Cats\n\nCats purr when they are content. A purring cat is relaxed.\n")
    return folder


def ask(d: Daemon) -> tuple[int, dict]:
    r = d.api("POST", "/v1/ask", json={"query": "why do cats purr?", "stream": False})
    return r.status_code, r.json()


def test_key_set_with_ragweedctl_is_used_by_the_daemon_and_never_shown(tmp_path, llm):
    xdg = tmp_path / "xdg"
    p = keys(xdg, "set", "openai", stdin=API_KEY + "\n")
    assert p.returncode == 0, p.stderr
    f = xdg / "ragweedd" / "keys.toml"
    assert API_KEY not in p.stdout + p.stderr and str(f) in p.stdout
    assert f.stat().st_mode & 0o777 == 0o600

    d = Daemon(tmp_path / "d", {"notes": [docs(tmp_path / "docs")]}, extra=llm_toml(llm), env=ctl_env(xdg))
    with serving(d):
        wait_indexed(d, "notes", 1)
        code, body = ask(d)
        assert code == 200, body
        assert body["answer"].startswith("Cats purr"), body
        assert any(r["path"].endswith("/chat/completions") for r in llm.requests)
        status = d.api("GET", "/v1/status").text
        assert API_KEY not in status

        # removed: the next answer has no key (read at every answer, no restart needed)
        assert keys(xdg, "remove", "openai").returncode == 0
        code, body = ask(d)
        assert code != 200 and "key" in json.dumps(body).lower(), body
    log = d.out.read_text()
    assert API_KEY not in log
    assert "keys_file" in log  # the start-up line names the file and its providers, never the key


def test_oneshot_ask_uses_the_keys_file(tmp_path, llm):
    xdg = tmp_path / "xdg"
    assert keys(xdg, "set", "openai", stdin=API_KEY + "\n").returncode == 0
    folder = docs(tmp_path / "docs")
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'data_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\n{llm_toml(llm)}\n'
                   f'[collections.notes]\npaths = ["{folder}"]\n')
    env = {**ctl_env(xdg), "RAGWEED_EMBED_MODEL": "hash:64"}
    base = [sys.executable, "-m", "ragweedd", "--config", str(cfg)]
    assert subprocess.run(base + ["ingest", "-c", "notes"], env=env, cwd=ROOT, capture_output=True,
                          timeout=120).returncode == 0
    p = subprocess.run(base + ["ask", "why do cats purr?"], env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("Cats purr"), p.stdout
    assert API_KEY not in p.stdout + p.stderr
    # without the file the same command has no key: the fake server refuses the dummy one
    (xdg / "ragweedd" / "keys.toml").unlink()
    p = subprocess.run(base + ["ask", "why do cats purr?"], env=env, cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != 0 and "key" in p.stderr.lower(), p.stderr


def test_keys_file_others_can_read_is_refused_with_a_warning(tmp_path, llm):
    xdg = tmp_path / "xdg"
    assert keys(xdg, "set", "openai", stdin=API_KEY + "\n").returncode == 0
    f = xdg / "ragweedd" / "keys.toml"
    f.chmod(0o644)
    d = Daemon(tmp_path / "d", {"notes": [docs(tmp_path / "docs")]}, extra=llm_toml(llm), env=ctl_env(xdg))
    with serving(d):
        wait_indexed(d, "notes", 1)
        code, body = ask(d)
        assert code != 200
        assert "chmod 600" in json.dumps(body), body
    log = d.out.read_text()
    assert "keys_file_unusable" in log and "chmod 600" in log and API_KEY not in log
    # ragweedctl says the same and changes nothing
    p = keys(xdg, "set", "openai", stdin="other\n")
    assert p.returncode == 1 and "chmod 600" in p.stderr
    assert API_KEY in f.read_text()


@pytest.mark.parametrize("argv,stream", [(["run"], "stderr"), (["--json", "run"], "stdout")])
def test_run_prints_where_the_api_and_web_ui_are(tmp_path, argv, stream):
    """``ragweedd run`` itself (not the test launcher) on port 0: the line names the port really bound;
    with --json it is one JSON object on stdout."""
    cfg = tmp_path / "c.toml"
    cfg.write_text(f'listen = "127.0.0.1:0"\ndata_dir = "{tmp_path / "data"}"\nstate_dir = "{tmp_path / "state"}"\n'
                   f'cache_dir = "{tmp_path / "cache"}"\n')
    env = {**os.environ, "RAGWEED_EMBED_MODEL": "hash:64", "PYTHONUNBUFFERED": "1"}
    err, out = tmp_path / "err.log", tmp_path / "out.log"
    shown = err if stream == "stderr" else out
    marker = "API at" if stream == "stderr" else "ragweedd_ready"
    port_file = tmp_path / "state" / "port"
    with open(err, "wb") as e, open(out, "wb") as o:
        proc = subprocess.Popen([sys.executable, "-m", "ragweedd", "--config", str(cfg), *argv],
                                stdout=o, stderr=e, env=env, cwd=ROOT)
    try:
        wait_until(lambda: proc.poll() is not None or (port_file.exists() and marker in shown.read_text()),
                   60, 0.1, "the start-up line")
        assert proc.poll() is None, err.read_text()[-2000:]
        port = json.loads(port_file.read_text())["port"]
        assert port > 0
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    assert proc.returncode == 0
    text = shown.read_text()
    if stream == "stderr":
        assert (f"ragweedd: API at http://127.0.0.1:{port}/v1  web UI: http://127.0.0.1:{port}/  "
                "(ragweedctl open signs you in)") in text, text
        assert '"event": "api_listening"' in out.read_text()  # the log line stays
    else:
        ready = [json.loads(x) for x in text.splitlines() if "ragweedd_ready" in x]
        assert ready and ready[0]["api"] == f"http://127.0.0.1:{port}/v1", text
        assert ready[0]["web_ui"] == f"http://127.0.0.1:{port}/"
        assert "API at" not in err.read_text()


def test_status_watch_against_a_real_daemon(tmp_path):
    d = Daemon(tmp_path / "d", {"notes": [docs(tmp_path / "docs")]})
    try:
        d.start()
        wait_indexed(d, "notes", 1)
        state = str(d.base / "state")
        p = subprocess.run(CTL + ["--state-dir", state, "status", "--watch", "--interval", "0.2", "--count", "3"],
                           capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert p.returncode == 0, p.stderr
        lines = p.stdout.splitlines()
        assert len(lines) == 3 and all("ingest:" in x and "vectors:" in x for x in lines), p.stdout
        assert "\x1b" not in p.stdout and "\r" not in p.stdout  # not a terminal: plain lines
        p = subprocess.run(CTL + ["--state-dir", state, "--json", "status", "--watch", "--interval", "0.1",
                                  "--count", "2"], capture_output=True, text=True, cwd=ROOT, timeout=60)
        docs_ = [json.loads(x) for x in p.stdout.splitlines()]
        assert p.returncode == 0 and len(docs_) == 2 and all("ingest" in s for s in docs_)
        # Ctrl-C ends it cleanly: exit 0, no traceback
        proc = subprocess.Popen(CTL + ["--state-dir", state, "status", "--watch", "--interval", "0.1"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        first = proc.stdout.readline()
        assert "ingest:" in first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0 and "Traceback" not in err, err
        # on a terminal: the same three lines redrawn in place
        import pty

        master, slave = pty.openpty()
        proc = subprocess.Popen(CTL + ["--state-dir", state, "status", "--watch", "--interval", "0.1", "--count", "3"],
                                stdout=slave, stderr=subprocess.PIPE, cwd=ROOT)
        os.close(slave)
        seen = b""
        try:
            while chunk := os.read(master, 65536):
                seen += chunk
        except OSError:  # EIO: the child closed the terminal
            pass
        os.close(master)
        assert proc.wait(30) == 0
        screen = seen.decode()
        assert screen.count("\x1b[3F") == 2 and screen.count("\x1b[Kingest") == 3, screen
        assert "vectors: all 1 files" in screen
        p = subprocess.run(CTL + ["--state-dir", state, "status", "--watch", "--interval", "0"],
                           capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert p.returncode == 2 and "--interval" in p.stderr
    finally:
        stop(d)

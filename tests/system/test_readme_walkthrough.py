"""README.md works as written: its shell blocks, run in order on a scratch HOME, as a new user would.

The first block's `make run` is started in the background (it runs until stopped, as in the user's
first terminal) and its `make test` is not run (this is that suite). Every other line of every
```sh block runs in one bash session, in order, with nothing changed but HOME and the port the daemon
listens on; each must exit 0. The one-shot `ragweedd ask` and the daemon's `ragweedctl ask` must
cite the same source for the same question (one index, one answer).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess

from tests.system.conftest import ROOT, free_port, wait_until

MARK = "@@readme-line"


def readme_blocks() -> list[list[str]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [[ln for ln in block.splitlines() if ln.strip()]
            for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M)]


def sources_of(output: str) -> list[str]:
    """The cited files, in the order the answer numbers them (``[N] strong  collection/file ...``)."""
    return re.findall(r"^\[\d+\]\s+(?:(?:strong|partial|weak)\s+)?(\S+)", output.split("Sources:", 1)[-1],
                      flags=re.M)


def test_every_readme_line_runs_in_order_and_both_asks_cite_the_same_source(tmp_path):
    blocks = readme_blocks()
    setup = [ln.split("#", 1)[0].strip() for ln in blocks[0]]
    assert setup == ["make run", "make test"], "the README's first block is the two set-up commands"
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "RAGWEED_", "VIRTUAL_ENV"))}
    env.update(HOME=str(home), RAGWEED_LISTEN=f"127.0.0.1:{free_port()}", PYTHONUNBUFFERED="1")
    port_file = home / ".local" / "state" / "ragweedd" / "port"
    log = tmp_path / "make-run.log"
    with open(log, "wb") as out:
        daemon = subprocess.Popen(["bash", "-c", "make run"], cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_until(lambda: daemon.poll() is not None or port_file.exists(), 300, 0.2, "make run's daemon")
        assert daemon.poll() is None, log.read_text()[-3000:]
        made_run = log.read_text()
        assert "deprecated" not in made_run.lower(), made_run  # no build warnings on the user's screen
        assert ".venv/bin" in made_run, "make run says where the programs are"

        lines = [ln for block in blocks[1:] for ln in block]
        script = "".join(f"{ln}\necho '{MARK} {i}' $?\n" for i, ln in enumerate(lines))
        p = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                           stdin=subprocess.DEVNULL, timeout=900)
        outputs: dict[str, str] = {}
        rest = p.stdout
        for i, ln in enumerate(lines):
            before, sep, after = rest.partition(f"{MARK} {i} ")
            assert sep, f"line {i} ({ln!r}) did not finish\nstdout: {p.stdout[-3000:]}\nstderr: {p.stderr[-3000:]}"
            code, _, rest = after.partition("\n")
            assert code == "0", f"`{ln}` exited {code}\n{before[-3000:]}\nstderr: {p.stderr[-3000:]}"
            outputs[ln.split("#", 1)[0].strip()] = before
        one_shot = outputs['ragweedd ask "how often do I feed the starter?"']
        daemon_ask = outputs['ragweedctl ask "how often do I feed the starter?"']
        assert sources_of(one_shot) and sources_of(one_shot)[0].endswith("sourdough.txt"), one_shot
        assert sources_of(one_shot)[0] == sources_of(daemon_ask)[0], (one_shot, daemon_ask)
        assert "once a day" in one_shot and "once a day" in daemon_ask
        status = outputs["ragweedctl status"]
        assert "collection notes: 7 documents" in status, status
        config = outputs["ragweedd check-config"]
        assert "running daemon" in config.splitlines()[0], config
        assert (home / ".local/share/man/man1/ragweedd.1").stat().st_size > 1000
    finally:
        os.killpg(daemon.pid, signal.SIGTERM)
        daemon.wait(60)

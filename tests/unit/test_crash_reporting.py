"""`ragweedd run` never ends without a trace (issue 12, "also look into"): a thread that dies is
logged with its traceback, a fatal signal prints every thread's stack (faulthandler), SIGHUP stops
the daemon with a log line, and however run_daemon ends, the log says how. Each case runs in a
subprocess: the hooks are process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import sys, threading, time
from ragweedd.logging import configure
from ragweedd.cli import command
configure("info", stream=sys.stdout)
command.install_crash_reporting()
"""


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=ROOT, timeout=60)


def test_a_dying_thread_is_logged():
    p = run("""
        t = threading.Thread(target=lambda: 1 / 0, name="ingest-worker")
        t.start(); t.join()
        import faulthandler; print("faulthandler", faulthandler.is_enabled())
    """)
    assert "thread_crashed" in p.stdout and "ingest-worker" in p.stdout, p.stdout + p.stderr
    assert "ZeroDivisionError" in p.stdout and "faulthandler True" in p.stdout


def test_a_fatal_signal_prints_every_thread():
    p = run("""
        threading.Thread(target=time.sleep, args=(30,), name="sleeper", daemon=True).start()
        import faulthandler; faulthandler._sigsegv()
    """)
    assert p.returncode != 0
    assert "Fatal Python error: Segmentation fault" in p.stderr and "Thread 0x" in p.stderr, p.stderr


def test_sighup_stops_like_sigterm_with_a_log_line():
    p = run("""
        import os, signal
        got = []
        signal.signal(signal.SIGTERM, lambda s, f: got.append(s))
        os.kill(os.getpid(), signal.SIGHUP)
        time.sleep(0.2)
        print("got", got == [signal.SIGTERM])
    """)
    assert "daemon_signal" in p.stdout and "SIGHUP" in p.stdout and "got True" in p.stdout, p.stdout + p.stderr


def test_every_end_of_run_is_logged():
    p = run("""
        print(command.run_logged(lambda: 0))
        def boom():
            raise RuntimeError("disk on fire")
        try:
            command.run_logged(boom)
        except RuntimeError:
            print("re-raised")
    """)
    assert '"daemon_exit"' in p.stdout and "daemon_exit_unexpected" in p.stdout, p.stdout
    assert "disk on fire" in p.stdout and "re-raised" in p.stdout

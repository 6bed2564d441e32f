"""Run an extractor in a capped subprocess (DESIGN §4: untrusted files).

The child (``python -m ragweedd.ingest.sandbox_child``) caps itself with RLIMIT_AS and RLIMIT_CPU
where the OS honours them. The parent watches the child's wall time, resident memory and CPU time
(from /proc where there is one) and kills the child's whole process group (external tools included)
when a cap is hit, raising SandboxLimitError that says which cap and how to raise it. Errors raised
in the child come back as the same exception classes with their messages and ``retryable`` flags.

A wall-time kill is not retried: a parser that needs more than ``extract_timeout_s`` for this content
(say quadratic time on 500,000 nested tags) will need it again, and retrying would hold the worker
for several times the cap. The file stays failed until its content changes.

No child outlives the daemon: the child asks the kernel to SIGKILL it when the daemon thread that
started it dies (PR_SET_PDEATHSIG, so even a SIGKILLed daemon takes it along), and when the daemon
stops (``should_stop()`` turns true) the child's whole process group is killed at once and the
job is given back to the queue (:class:`~ragweedd.errors.Interrupted`).

The child's peak RSS (from wait4) is recorded in ``doc.stats["peak_rss_mb"]`` or, on failure, in the
exception's ``peak_rss_mb`` attribute.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

import ragweedd.errors as errors
from ragweedd.errors import ExtractionError, SandboxLimitError
from ragweedd.extract.base import ExtractedDoc, ExtractSettings, Region
from ragweedd.extract.registry import plugin_specs

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _proc_rss_mb(pid: int) -> tuple[float, float] | None:
    """(current, peak) resident MiB of a live process, from /proc (Linux)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            fields = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
        rss = int(fields[b"VmRSS"].split()[0]) / 1024
        return rss, max(rss, int(fields[b"VmHWM"].split()[0]) / 1024)
    except (OSError, KeyError, IndexError, ValueError):
        return None


def _proc_cpu_s(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime
    except (OSError, IndexError, ValueError):
        return None


def _maxrss_mb(ru_maxrss: int) -> float:
    # Linux reports KiB, macOS bytes
    return ru_maxrss / (1048576 if sys.platform == "darwin" else 1024)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["MALLOC_ARENA_MAX"] = "2"  # fewer reserved arenas: RLIMIT_AS counts reservations
    env.setdefault("OMP_NUM_THREADS", "2")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _error_from_reply(reply: dict, peak: float | None) -> ExtractionError:
    cls = getattr(errors, str(reply.get("error")), None)
    if not (isinstance(cls, type) and issubclass(cls, ExtractionError)):
        cls = ExtractionError
    err = cls(reply.get("message") or "extraction failed", hint=reply.get("hint"))
    err.retryable = bool(reply.get("retryable", False))
    err.peak_rss_mb = peak
    if reply.get("limit"):
        err.limit = reply["limit"]
    return err


def _limit_error(msg: str, limit: str, retryable: bool, peak: float | None, hint: str) -> SandboxLimitError:
    err = SandboxLimitError(msg, hint=hint)
    err.retryable = retryable
    err.limit = limit
    err.peak_rss_mb = peak
    return err


def extract_sandboxed(path: Path, settings: ExtractSettings | None = None, *, timeout_s: float = 300.0,
                      cpu_s: int = 300, memory_mb: int = 2048,
                      should_stop: Callable[[], bool] | None = None) -> ExtractedDoc:
    """Extract ``path`` in a subprocess with wall-time, CPU-time and memory caps. When
    ``should_stop()`` turns true the child is killed and Interrupted is raised."""
    path = Path(path).resolve()
    settings = settings or ExtractSettings()

    # the child registers the same extractor plugins as this process
    request = json.dumps({"path": str(path), "settings": dataclasses.asdict(settings),
                          "cpu_s": int(cpu_s), "memory_mb": int(memory_mb),
                          "plugins": list(plugin_specs())}).encode()
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as errf, tempfile.TemporaryDirectory(prefix="ragweed-sbx-") as cwd:
        proc = subprocess.Popen([sys.executable, "-m", "ragweedd.ingest.sandbox_child", str(os.getpid())],
                                stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=errf, cwd=cwd, env=_child_env(),
                                start_new_session=True)
        out_chunks: list[bytes] = []

        def pump() -> None:
            # the reply can be megabytes: read it while the child runs so its write never blocks
            stdout = proc.stdout
            assert stdout is not None
            for chunk in iter(lambda: stdout.read(65536), b""):
                out_chunks.append(chunk)

        reader = threading.Thread(target=pump, daemon=True)
        reader.start()
        try:
            assert proc.stdin is not None
            proc.stdin.write(request)
            proc.stdin.close()
        except BrokenPipeError:
            pass
        killed: SandboxLimitError | None = None
        stopped = False
        watched_peak = 0.0
        status = rusage = None
        while True:
            pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            elapsed = time.monotonic() - t0
            mem = _proc_rss_mb(proc.pid)
            rss = None
            if mem is not None:
                rss = mem[0]
                watched_peak = max(watched_peak, mem[1])
            cpu = _proc_cpu_s(proc.pid)
            if not stopped and killed is None and should_stop is not None and should_stop():
                stopped = True
                _kill_group(proc)
            if killed is None and not stopped:
                if elapsed > timeout_s:
                    killed = _limit_error(
                        f"{path}: extractor killed after {timeout_s:g} s wall time", "wall", False, None,
                        "it is not tried again until the file changes; raise extract_timeout_s if files like "
                        "it need longer to parse")
                elif rss is not None and rss > memory_mb:
                    killed = _limit_error(f"{path}: extractor killed at {rss:.0f} MB resident memory, over the "
                                          f"{memory_mb} MB cap", "memory", False, None,
                                          "raise extract_memory_mb if the file is trusted")
                elif cpu is not None and cpu > cpu_s + 1:
                    killed = _limit_error(f"{path}: extractor killed after {cpu:.0f} s of CPU time, over the "
                                          f"{cpu_s} s cap", "cpu", False, None, "raise extract_cpu_s")
                if killed is not None:
                    _kill_group(proc)
            time.sleep(0.02 if elapsed < 1 else 0.05)
        proc.returncode = os.waitstatus_to_exitcode(status)
        _kill_group(proc)  # leftovers: tools the child started and abandoned
        reader.join(timeout=5)
        # wait4's ru_maxrss also counts the parent's pages copied at fork (Linux carries the
        # high-water mark across exec), so it overstates a small child in a big daemon: prefer
        # the child's own VmHWM from /proc, and fall back to rusage where there is no /proc
        peak = round(watched_peak if watched_peak > 0 else _maxrss_mb(rusage.ru_maxrss), 1)
        wall = round(time.monotonic() - t0, 3)
        if stopped:
            from ragweedd.errors import Interrupted

            raise Interrupted(f"extraction of {path} stopped after {wall:g} s: the daemon is stopping")
        if killed is not None:
            killed.peak_rss_mb = peak
            raise killed
        rc = proc.returncode
        if rc < 0:
            sig = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            if -rc == getattr(signal, "SIGXCPU", -1):
                raise _limit_error(f"{path}: extractor killed after using its {cpu_s} s of CPU time", "cpu",
                                   False, peak, "raise extract_cpu_s")
            near_cap = peak > 0.9 * memory_mb
            errf.seek(0, os.SEEK_END)
            errf.seek(max(0, errf.tell() - 2000))
            tail = errf.read().decode("utf-8", "replace").strip()[-500:]
            if near_cap:
                raise _limit_error(f"{path}: extractor died ({sig}) at its {memory_mb} MB memory cap", "memory",
                                   False, peak, "raise extract_memory_mb")
            err = ExtractionError(f"{path}: extractor crashed with signal {sig}" + (f": {tail}" if tail else ""))
            err.peak_rss_mb = peak
            raise err
        try:
            reply = json.loads(b"".join(out_chunks))
        except ValueError:
            errf.seek(0)
            tail = errf.read()[-2000:].decode("utf-8", "replace").strip()[-500:]
            err = ExtractionError(f"{path}: extractor exited with code {rc} without a result"
                                  + (f": {tail}" if tail else ""))
            err.peak_rss_mb = peak
            raise err from None
    peak = max(peak, float(reply.get("peak_rss_mb") or 0))
    if not reply.get("ok"):
        raise _error_from_reply(reply, peak)
    d = reply["doc"]
    stats = dict(d.get("stats") or {})
    stats.update(peak_rss_mb=peak, wall_s=wall)
    return ExtractedDoc(text=d["text"], kind=d["kind"], regions=[Region(s, e, m) for s, e, m in d["regions"]],
                        ocr_type=d.get("ocr_type"), title=d.get("title"), extractor=d.get("extractor", ""),
                        stats=stats)

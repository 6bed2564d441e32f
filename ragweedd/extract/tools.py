"""External programs the extractors run (pdftoppm, tesseract, unrtf, detex, ffmpeg, whisper-cli)
and the private scratch directories they write into."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from ragweedd.errors import ExtractionError, ToolMissingError
from ragweedd.extract.base import ExtractSettings

TOOL_PACKAGES = {
    "pdftoppm": "poppler-utils (apt) / poppler (brew)",
    "tesseract": "tesseract-ocr (apt) / tesseract (brew)",
    "unrtf": "unrtf (apt, brew)",
    "detex": "texlive-binaries (apt) / texlive (brew)",
    "ffmpeg": "ffmpeg (apt, brew)",
    "whisper-cli": "whisper.cpp (brew) or build from github.com/ggerganov/whisper.cpp",
}


PR_SET_PDEATHSIG = 1
_prctl = None
if sys.platform.startswith("linux"):
    try:
        import ctypes

        # looked up once here: preexec_fn runs between fork and exec, where loading a library is unsafe
        _prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        _prctl = None


def die_with_parent(parent_pid: int | None = None) -> bool:
    """Have the kernel SIGKILL this process when the thread that started it dies (Linux
    PR_SET_PDEATHSIG), so no extractor or tool outlives the daemon, even one killed with SIGKILL.
    With ``parent_pid``, exit at once when the parent already died before the request was set
    (then nothing would deliver the signal). Returns whether the kernel took the request."""
    if _prctl is None or _prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)
    return True


def _tool_preexec() -> None:
    die_with_parent()


def tool_path(name: str) -> str | None:
    return shutil.which(name)


def need_tool(name: str, fmt: str, path: Path) -> str:
    found = tool_path(name)
    if not found:
        pkg = TOOL_PACKAGES.get(os.path.basename(name), "your package manager")
        raise ToolMissingError(
            f"{path}: {fmt} files need the '{name}' program, which is not installed",
            hint=f"install {pkg}; `ragweedd doctor` lists every missing tool",
        )
    return found


def run_tool(argv: list[str], *, path: Path, settings: ExtractSettings, stdin: bytes | None = None,
             cwd: str | None = None) -> bytes:
    """Run an external tool; its stdout, or ExtractionError naming the tool, file and stderr."""
    try:
        # A tool dies with the extractor that started it: the sandbox kills its process group on a cap
        # or a stop, and when the extractor is killed some other way the kernel kills the tool too.
        proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=settings.tool_timeout_s,
                              cwd=cwd, stdin=None if stdin is not None else subprocess.DEVNULL,
                              preexec_fn=_tool_preexec if _prctl is not None else None)
    except subprocess.TimeoutExpired:
        # like the sandbox's wall-time kill: the same content would take as long again, so it is
        # not retried (it is tried again when the file changes)
        raise ExtractionError(f"{path}: {os.path.basename(argv[0])} did not finish in {settings.tool_timeout_s:.0f} s",
                              hint="raise extract_timeout_s if files like it need longer") from None
    except OSError as e:
        raise ExtractionError(f"{path}: could not run {argv[0]}: {e}") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip()[-400:]
        raise ExtractionError(
            f"{path}: {os.path.basename(argv[0])} failed with exit code {proc.returncode}: {tail or 'no message'}"
        )
    return proc.stdout


@contextlib.contextmanager
def scratch_dir(settings: ExtractSettings, prefix: str = "ragweed-") -> Iterator[Path]:
    """A private temp directory (under settings.scratch_dir when set), removed afterwards."""
    base = settings.scratch_dir or None
    if base:
        os.makedirs(base, mode=0o700, exist_ok=True)
    d = tempfile.mkdtemp(prefix=prefix, dir=base)
    try:
        yield Path(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)

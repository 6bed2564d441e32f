"""External programs the extractors run (pdftoppm, tesseract, unrtf, detex, ffmpeg, whisper-cli)
and the private scratch directories they write into."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
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
        proc = subprocess.run(argv, input=stdin, capture_output=True, timeout=settings.tool_timeout_s,
                              cwd=cwd, stdin=None if stdin is not None else subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        err = ExtractionError(f"{path}: {os.path.basename(argv[0])} did not finish in {settings.tool_timeout_s:.0f} s")
        err.retryable = True
        raise err from None
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

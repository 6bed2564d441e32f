"""Ingest runs below the user's own work: its threads lower their CPU and I/O priority (``ingest_nice``)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading


def lower_priority(nice: int) -> dict[str, bool]:
    """Lower the calling thread's CPU and I/O priority; returns what was applied."""
    done = {"nice": False, "ionice": False}
    if nice > 0 and hasattr(os, "nice"):
        try:
            os.nice(nice)
            done["nice"] = True
        except OSError:
            pass
    if sys.platform.startswith("linux") and shutil.which("ionice"):
        try:
            r = subprocess.run(["ionice", "-c3", "-p", str(threading.get_native_id())],
                               capture_output=True, timeout=5)
            done["ionice"] = r.returncode == 0
        except (OSError, subprocess.SubprocessError):
            pass
    return done

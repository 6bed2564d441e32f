"""The extraction subprocess: ``python -m ragweedd.ingest.sandbox_child PARENT_PID``.

Before anything else it asks the kernel to kill it when the daemon dies (PR_SET_PDEATHSIG on
Linux; it exits at once if PARENT_PID is already gone). Then it reads one JSON request {path,
settings, cpu_s, memory_mb, plugins} on stdin, caps itself (RLIMIT_AS, RLIMIT_CPU, no core dumps),
runs ``extract_file`` and writes one JSON reply on the *original*
stdout. File descriptor 1 is pointed at stderr first, so a parser or C library printing to stdout
cannot corrupt the reply. The reply is JSON, not pickle: a parser exploited by a hostile file must
not be able to run code in the daemon through what it sends back.
"""

from __future__ import annotations

import json
import os
import sys

from ragweedd.errors import RagweedError
from ragweedd.extract.tools import die_with_parent


def _set_limits(cpu_s: int, memory_mb: int) -> None:
    try:
        import resource
    except ImportError:  # not on this OS: the parent's watch still applies
        return
    for lim, soft, hard in (
        (getattr(resource, "RLIMIT_CPU", None), cpu_s, cpu_s + 5),
        # address space, not RSS: leave room for thread stacks and allocator arenas that are
        # reserved but never touched; the parent enforces memory_mb on the resident size
        (getattr(resource, "RLIMIT_AS", None), max(memory_mb * 2, memory_mb + 1024) << 20, None),
        (getattr(resource, "RLIMIT_CORE", None), 0, 0),
    ):
        if lim is None:
            continue
        try:
            cur_soft, cur_hard = resource.getrlimit(lim)
            if hard is None:
                hard = soft
            if cur_hard != resource.RLIM_INFINITY:
                soft, hard = min(soft, cur_hard), min(hard, cur_hard)
            resource.setrlimit(lim, (soft, hard))
        except (ValueError, OSError):
            pass  # macOS refuses RLIMIT_AS; the parent's RSS watch covers it


def _own_peak_mb() -> float:
    """Peak resident MiB of this process since exec (VmHWM); 0 where /proc is missing."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, IndexError):
        pass
    return 0.0


def _error_reply(err: BaseException, memory_mb: int, path: str) -> dict:
    if isinstance(err, MemoryError):
        return {"ok": False, "error": "SandboxLimitError", "retryable": False, "hint": None,
                "message": f"{path}: extractor ran out of memory (cap {memory_mb} MB, extract_memory_mb); stopped",
                "limit": "memory"}
    if isinstance(err, RagweedError):
        return {"ok": False, "error": type(err).__name__, "message": err.message, "hint": err.hint,
                "retryable": bool(getattr(err, "retryable", False))}
    if isinstance(err, RecursionError):
        msg = f"{path}: document nested too deeply for the parser (RecursionError)"
    else:
        msg = f"{path}: extractor crashed: {type(err).__name__}: {err}"
    return {"ok": False, "error": "ExtractionError", "message": msg[:2000], "hint": None, "retryable": False}


def main() -> int:

    # First of all: this process must not outlive the daemon (a SIGKILLed daemon cannot kill it).
    if len(sys.argv) > 1:
        die_with_parent(int(sys.argv[1]))
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    req = json.loads(sys.stdin.buffer.read())
    _set_limits(int(req["cpu_s"]), int(req["memory_mb"]))
    path = req["path"]
    try:
        from pathlib import Path

        from ragweedd.extract.base import ExtractSettings
        from ragweedd.extract.registry import extract_file, register

        register(req.get("plugins") or [])
        doc = extract_file(Path(path), ExtractSettings(**req["settings"]))
        reply = {"ok": True, "doc": {
            "text": doc.text, "kind": doc.kind, "ocr_type": doc.ocr_type, "title": doc.title,
            "extractor": doc.extractor, "stats": doc.stats,
            "regions": [[r.start, r.end, r.meta] for r in doc.regions],
        }}
    except BaseException as err:  # noqa: BLE001 - everything must reach the parent as a reply
        reply = _error_reply(err, int(req["memory_mb"]), path)
    reply["peak_rss_mb"] = _own_peak_mb()
    data = json.dumps(reply, ensure_ascii=False, default=str).encode("utf-8")
    with os.fdopen(reply_fd, "wb") as out:
        out.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())

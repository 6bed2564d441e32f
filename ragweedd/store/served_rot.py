"""Chunk texts a read found changed since they were indexed, for the daemon to act on.

A backend whose reads check each chunk text against the hash stored with it (SQLite:
ragweedd/store/sqlite/rag_served.py) tells its ``on_rot`` hook what it left out; a backend that
cannot tell never calls it.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from ragweedd.logging import get_logger

log = get_logger("ragweedd.integrity")

REINGEST = ("ragweedd re-ingests from disk the files whose stored content is missing or changed now "
            "(a restart does the same)")


class ServedRot:
    """Chunk texts a read found changed since they were indexed (ragweedd/store/sqlite/rag_served.py leaves
    them out of what it returns): each new document is logged and shown in status, and the integrity
    check -- so the repair above, which re-ingests its files -- is run at once rather than at its
    next scheduled time. While the same damage is still being met, the check is asked for again at
    most once per ``recheck_s``: a read never waits for it, and a storm of searches over one
    damaged page costs one check a minute at most."""

    def __init__(self, run_check: Callable[[], None], recheck_s: float = 60.0) -> None:
        self._run_check = run_check
        self._recheck_s = recheck_s
        self._lock = threading.Lock()
        self._asked_at = -recheck_s
        self.seen: dict[str, dict[str, list[str]]] = {}  # collection -> {document md5: its files}

    def __call__(self, rag: Any, rotten: dict[int, str]) -> None:
        with self._lock:
            known = self.seen.setdefault(rag.collection, {})
            new = sorted(set(rotten.values()) - set(known))
            now = time.monotonic()
            ask = bool(new) or now - self._asked_at >= self._recheck_s
            if ask:
                self._asked_at = now
        files: dict[str, list[str]] = {}
        for md5 in new:
            try:
                files[md5] = rag.paths_of(md5)
            except Exception:  # noqa: BLE001 - the names are for the message; the repair finds them itself
                files[md5] = []
        with self._lock:
            known.update(files)
        if new:
            log.error("chunk_text_rot_seen", collection=rag.collection, database=str(getattr(rag, "path", "")),
                      chunks=sorted(rotten)[:20], documents=len(new),
                      files=[p for ps in files.values() for p in ps][:5],
                      action="left out of results; the integrity check runs now and re-ingests the files")
        if ask:
            self._run_check()

    def problems(self) -> list[str]:
        """For status (degraded) until the repaired core replaces this one."""
        with self._lock:
            seen = {name: dict(docs) for name, docs in self.seen.items() if docs}
        out = []
        for name, docs in sorted(seen.items()):
            paths = sorted(p for ps in docs.values() for p in ps)
            example = f" (files: {', '.join(paths[:3])}{' ...' if len(paths) > 3 else ''})" if paths else ""
            out.append(f"collection '{name}': the stored text of {len(docs)} documents no longer matches what was "
                       f"indexed{example}; those passages are left out of results, and {REINGEST}")
        return out

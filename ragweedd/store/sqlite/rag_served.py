"""What rag.sqlite3 serves is what was indexed: every chunk text a search, an answer or a document
view reads is checked against the SHA-256 stored with the chunk when it was written.

The periodic integrity check (ragweedd/store/sqlite/integrity_check.py) compares every stored text with its hash,
but only every few hours; a stored copy that changed on disk in between (bit rot, a damaged page
SQLite's own checks do not see) would be served as the file's text until then. Checking the few
texts a read returns costs one hash of a short text each (microseconds per search), so readers
leave a failing chunk out and report it; the daemon then runs the check, and so the repair, at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable

from ragweedd.logging import get_logger
from ragweedd.store.rows import text_sha256

log = get_logger("ragweedd.store")


class ServedText:
    """Mixed into RagDB."""

    path: Path
    collection: str
    # Called with (this RagDB, {chunk id: document md5}) when a read meets chunk texts that fail
    # their hash; the daemon sets it on its store backend, which hands it to every RagDB it opens.
    on_rot: Callable[[Any, dict[int, str]], None] | None = None

    def rotten(self, rows: Iterable[tuple[int, str, str | None, str | None]]) -> dict[int, str]:
        """{chunk id: document md5} of the rows (chunk id, md5, stored hash, text as read) whose
        text no longer matches the hash stored with it; the caller leaves them out. A chunk stored
        before hashes existed has none yet and passes (the integrity check gives it one)."""
        bad = {cid: md5 for cid, md5, stored, text in rows
               if stored is not None and (text is None or text_sha256(text) != stored)}
        if bad:
            if self.on_rot is not None:
                self.on_rot(self, bad)
            else:  # a one-shot search: no daemon here to repair it
                log.error("chunk_text_rot_seen", database=str(self.path), chunks=sorted(bad)[:20],
                          documents=len(set(bad.values())),
                          action="left out of the results; the daemon's integrity check re-ingests those files "
                                 "(kill -USR2 the daemon, or restart it)")
        return bad

"""SHA-256 checks of model files before they are used.

A model file that differs from the pinned hash is never loaded: a truncated download, a swapped
package or a tampered file would otherwise produce vectors that silently disagree with the ones
already stored.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

from ragweedd.errors import ModelIntegrityError

# Re-hashing 23 MB on every load costs ~50 ms; a file whose (size, mtime, inode) did not change since
# it was verified in this process is not hashed again.
_verified: dict[str, tuple[int, int, int, str]] = {}
_lock = threading.Lock()


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def verify_file(path: str | os.PathLike, expected: str, *, what: str, fix: str) -> Path:
    """Return ``path`` if its SHA-256 is ``expected``; else raise ModelIntegrityError saying what to do."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise ModelIntegrityError(f"{what} {p} cannot be read ({e.strerror or e})", hint=fix) from None
    key = str(p.resolve())
    stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
    with _lock:
        seen = _verified.get(key)
    if seen is not None and seen[:3] == stamp and seen[3] == expected:
        return p
    try:
        actual = sha256_file(p)
    except OSError as e:
        raise ModelIntegrityError(f"{what} {p} cannot be read ({e.strerror or e})", hint=fix) from None
    if actual != expected:
        raise ModelIntegrityError(
            f"{what} {p} has SHA-256 {actual}, expected {expected}: the file is damaged or not the "
            "pinned version, so it is not loaded",
            hint=fix,
        )
    with _lock:
        _verified[key] = (*stamp, expected)
    return p

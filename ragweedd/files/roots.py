"""Whether a collection's root is there: a root that is gone or has become an empty mount point (a
disk that was not mounted) must not have its files taken as deleted."""

from __future__ import annotations

import os


def root_state(root: str | os.PathLike) -> str:
    """'ok', 'missing' (gone, renamed, unmounted to nothing) or 'empty_mount' (a mount point with
    nothing in it: the disk behind it is not there, so its files must not be taken as deleted)."""
    root = str(root)
    if os.path.isfile(root) and not os.path.islink(root):
        return "ok"  # a file given as a root by itself (``ragweedd ingest FILE -c NAME``)
    if not os.path.isdir(root):
        return "missing"
    try:
        if os.path.ismount(root) and not os.listdir(root):
            return "empty_mount"
    except OSError:
        return "missing"
    return "ok"

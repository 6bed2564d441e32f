"""Open a file of a collection so that its bytes are those of the regular file at that path.

Between a scan's (or a worker's) look at a path and the read, the path can change: a regular
``notes.txt`` replaced by a symlink to a file outside every root, or a folder on the way replaced by
a symlink. So a file is opened component by component from its root with ``O_NOFOLLOW`` (folders
with ``O_DIRECTORY`` too), the opened descriptor must be a regular file, and everything read for
the file -- its MD5 and what the extractor sees -- comes from that one descriptor:

* the MD5 is computed from the descriptor;
* the extractor (in-process for text, the sandbox subprocess for other formats) gets a private copy
  made from the descriptor, in a fresh 0700 folder under the scratch dir, with the file's own name
  (extractors choose by extension and use the name as a fallback title). The copy's MD5 is checked
  against the first one: a file that changed between the two reads is tried again later.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import shutil
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from ragweedd.errors import NotRegularFile
from ragweedd.paths import within

_BUF = 1 << 20
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
_DIR_FLAGS = _FILE_FLAGS | getattr(os, "O_DIRECTORY", 0)


def open_regular(path: str, root: str | None) -> int:
    """An fd of the regular file at ``path``, no symlink followed at or below ``root`` (the root
    itself may be a link: it is the user's choice of folder). Raises NotRegularFile or OSError."""
    path = os.path.abspath(path)
    if root and within(path, root, strictly=True):
        base, rel = root, os.path.relpath(path, root)
    else:
        base, rel = os.path.dirname(path), os.path.basename(path)
    parts = rel.split(os.sep)
    fd = os.open(base, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        for i, part in enumerate(parts):
            last = i == len(parts) - 1
            try:
                nfd = os.open(part, _FILE_FLAGS if last else _DIR_FLAGS, dir_fd=fd)
            except OSError as e:
                if e.errno in (errno.ELOOP, errno.ENOTDIR):  # a symlink; a folder on the way that is not one
                    raise NotRegularFile(f"{path}: {'it' if last else 'a folder on its way'} is a symbolic link "
                                         f"or not a folder; it is not followed") from None
                raise
            os.close(fd)
            fd = nfd
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(f"{path}: not a regular file")
        out, fd = fd, -1
        return out
    finally:
        if fd >= 0:
            os.close(fd)


def fd_md5(fd: int) -> str:
    h = hashlib.md5(usedforsecurity=False)
    off = 0
    while chunk := os.pread(fd, _BUF, off):
        h.update(chunk)
        off += len(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def private_copy(fd: int, name: str, scratch: str | os.PathLike) -> Iterator[tuple[Path, str]]:
    """(path of a private copy of the fd's bytes named ``name``, MD5 of the copied bytes)."""
    os.makedirs(scratch, exist_ok=True)
    d = tempfile.mkdtemp(prefix="read-", dir=scratch)  # 0700
    try:
        p = os.path.join(d, name)
        h = hashlib.md5(usedforsecurity=False)
        off = 0
        with open(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o600), "wb") as out:
            while chunk := os.pread(fd, _BUF, off):
                h.update(chunk)
                out.write(chunk)
                off += len(chunk)
        yield Path(p), h.hexdigest()
    finally:
        shutil.rmtree(d, ignore_errors=True)

"""Ignore patterns (DESIGN §4): editor and OS temp files by default, plus per-collection globs.

Patterns match a path relative to its collection root. A pattern ending in "/" matches a directory
anywhere in the path; other patterns match the file name, or the whole relative path when they
contain "/" ("drafts/**"). A pattern starting with "/" is a literal path from the root: that file
or folder and everything below it (the daemon's own directories are excluded this way, whatever
characters their names hold).
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path
from typing import Iterable, Iterator

DEFAULT_IGNORES: tuple[str, ...] = (
    "*.swp", "*.swx", "*.swo", "*~", ".#*", "#*#", "~$*", ".~lock.*#", "4913", ".DS_Store", "Thumbs.db",
    "*.tmp", "*.part", "*.crdownload", "*___jb_tmp___", "*___jb_old___",
    ".git/", ".hg/", ".svn/", "node_modules/", "__pycache__/", ".venv/",
)


def is_ignored(rel_path: str, extra: Iterable[str] = ()) -> bool:
    rel = rel_path.replace(os.sep, "/").lstrip("/")
    parts = rel.split("/")
    name = parts[-1]
    for pat in (*DEFAULT_IGNORES, *extra):
        if pat.startswith("/"):
            lit = pat.strip("/")
            if lit and (rel.rstrip("/") == lit or rel.startswith(lit + "/")):
                return True
        elif pat.endswith("/"):
            d = pat[:-1]
            if (any(fnmatch.fnmatchcase(p, d) for p in parts[:-1])
                    or (rel.endswith("/") and fnmatch.fnmatchcase(name, d))):
                return True
        elif "/" in pat:
            if fnmatch.fnmatchcase(rel, pat) or (pat.endswith("/**") and (rel + "/").startswith(pat[:-2])):
                return True
        elif fnmatch.fnmatchcase(name, pat):
            return True
    return False


def walk_files(root: Path, extra: Iterable[str] = ()) -> Iterator[Path]:
    """Regular files under root, ignored directories pruned, symlinks not followed.

    Walks with an explicit stack, not recursion (os.walk recurses before Python 3.12): a folder a
    thousand levels deep must not raise RecursionError and end the scan. Order is os.walk's: a
    folder's files, then its subfolders, by name. A folder that cannot be listed is left out."""
    extra = tuple(extra)
    root = Path(root)
    if root.is_file():
        yield root
        return
    stack: list[tuple[str, str]] = [(str(root), "")]
    while stack:
        dirpath, rel_dir = stack.pop()
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        subdirs = []
        for e in entries:
            try:
                if e.is_symlink():
                    continue
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if not is_ignored(rel_dir + e.name + "/", extra):
                    subdirs.append((e.path, rel_dir + e.name + "/"))
            elif not is_ignored(rel_dir + e.name, extra):
                yield Path(e.path)
        stack.extend(reversed(subdirs))

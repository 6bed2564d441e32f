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
    return _matches(rel, rel.split("/")[:-1], (*DEFAULT_IGNORES, *extra))


def _ignored_in_kept_folder(rel: str, name: str, is_dir: bool, pats: tuple[str, ...]) -> bool:
    """``is_ignored(rel)`` for an entry whose parent folder is known not to be ignored: a folder
    pattern ("x/") can then only match the entry's own name, so the path's other parts are not
    matched again. ``rel`` ends in "/" for a folder, like is_ignored's argument. This keeps a walk
    linear in the depth of a tree: matching every part of every path made a folder a thousand
    levels deep cost a billion pattern matches."""
    return _matches(rel, [name] if is_dir else [], pats)


def _matches(rel: str, folders: list[str], pats: tuple[str, ...]) -> bool:
    """The one rule behind both: ``rel`` is a "/"-separated path relative to the root (ending in "/"
    for a folder), ``folders`` the folder names folder patterns ("x/") are matched against."""
    name = rel.rsplit("/", 1)[-1]  # "" for a folder
    for pat in pats:
        if pat.startswith("/"):
            lit = pat.strip("/")
            if lit and (rel.rstrip("/") == lit or rel.startswith(lit + "/")):
                return True
        elif pat.endswith("/"):
            d = pat[:-1]
            if any(fnmatch.fnmatchcase(p, d) for p in folders) or (rel.endswith("/") and fnmatch.fnmatchcase(name, d)):
                return True
        elif "/" in pat:
            if fnmatch.fnmatchcase(rel, pat) or (pat.endswith("/**") and (rel + "/").startswith(pat[:-2])):
                return True
        elif fnmatch.fnmatchcase(name, pat):
            return True
    return False


def walk_files(root: Path, extra: Iterable[str] = (), *, base: str = "", max_depth: int | None = None,
               max_entries: int | None = None, cut: list[str] | None = None) -> Iterator[Path]:
    """Regular files under root, ignored directories pruned, symlinks not followed.

    Walks with an explicit stack, not recursion (os.walk recurses before Python 3.12): a folder a
    thousand levels deep must not raise RecursionError and end the scan. Order is os.walk's: a
    folder's files, then its subfolders, by name. A folder that cannot be listed is left out.

    ``base`` is root's own path relative to its collection root ("a/b/", or "" for the collection
    root itself), so patterns are matched against collection-relative paths; root itself is not
    matched. A bounded walk lists folders fewer than ``max_depth`` levels below root and at most
    ``max_entries`` entries; the folders it did not list are appended to ``cut``."""
    pats = (*DEFAULT_IGNORES, *extra)
    root = Path(root)
    if root.is_file():
        yield root
        return
    stack: list[tuple[str, str, int]] = [(str(root), base, 0)]
    seen = 0
    while stack:
        if max_entries is not None and seen >= max_entries:
            if cut is not None:
                cut.extend(d for d, _, _ in reversed(stack))
            return
        dirpath, rel_dir, depth = stack.pop()
        if max_depth is not None and depth >= max_depth:
            if cut is not None:
                cut.append(dirpath)
            continue
        try:
            with os.scandir(dirpath) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue
        seen += len(entries)
        subdirs = []
        for e in entries:
            try:
                if e.is_symlink():
                    continue
                is_dir = e.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                rel = rel_dir + e.name + "/"
                if not _ignored_in_kept_folder(rel, e.name, True, pats):
                    subdirs.append((e.path, rel, depth + 1))
            elif not _ignored_in_kept_folder(rel_dir + e.name, e.name, False, pats):
                yield Path(e.path)
        stack.extend(reversed(subdirs))

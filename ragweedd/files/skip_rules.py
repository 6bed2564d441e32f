"""What the stat alone says about a file: not to be indexed (empty, a type no extractor reads, over
its size cap), or unchanged since its row was written. The one set of rules for the watch side,
which writes skipped rows itself (watch/skipped.py), and for the pipeline, which skips the same
files the same way (ingest/pipeline.py)."""

from __future__ import annotations

import hashlib
import os
import stat as stat_mod
from pathlib import Path
from typing import TYPE_CHECKING

from ragweedd.extract.registry import extractor_for
from ragweedd.store.types import Row, SkippedFile

if TYPE_CHECKING:
    from ragweedd.config import Config

EMPTY_MD5 = hashlib.md5(b"", usedforsecurity=False).hexdigest()


# Extractors whose input is the text itself: their cap is ingest_max_text_mb (every other format's
# is ingest_max_file_mb).
TEXT_LIKE = frozenset({"text", "html", "svg", "json", "csv", "tex", "rtf"})


def skip_reason(path: str, size: int, cfg: Config | None = None) -> tuple[str | None, str] | None:
    """(md5, reason) when the stat alone says the file is not to be indexed, else None: an empty
    file (its md5 is known), a type no extractor reads, or (given ``cfg``) a file over its size cap;
    their bytes are never read. The one rule for the pipeline and the watch side (which passes no
    ``cfg`` and leaves files over a cap to the pipeline: there are few, and it skips them alike)."""

    p = Path(path)
    ex = extractor_for(p)
    if ex is None:
        return None, f"{path}: unsupported file type {p.suffix or '(no extension)'!r}; skipped"
    if size == 0:
        return EMPTY_MD5, f"{path}: empty file (0 bytes)"
    if cfg is not None:
        key, cap = (("ingest_max_text_mb", cfg.ingest_max_text_mb) if ex.name in TEXT_LIKE
                    else ("ingest_max_file_mb", cfg.ingest_max_file_mb))
        if size > cap << 20:
            return None, (f"{path}: larger than {key} ({cap} MiB): {size / 2**20:.1f} MiB; skipped "
                          f"(raise {key} to index it; it is read again at the next start or scan)")
    return None


# A file's ctime moves with every change of its content or inode, and nothing sets it back; the
# mtime can be put back (cp -p, rsync -t, tar x, a restore). A ctime later than when the row was
# written means the recorded size, mtime and inode may hide new content: the file is read again
# (its MD5 says whether it changed, and the row is written anew either way).


def stat_unchanged(row: Row, st: os.stat_result) -> bool:
    """Whether ``row`` (an ingest_files row: size_bytes, mtime_ns, inode, updated_at) still
    describes the file ``st`` was taken of."""
    if row["size_bytes"] != st.st_size or row["mtime_ns"] != st.st_mtime_ns or row["inode"] != st.st_ino:
        return False
    recorded = row["updated_at"]
    return recorded is None or st.st_ctime_ns <= recorded * 1e9


def cap_lifted(row: Row | None, path: str, size: int, cfg: Config | None) -> bool:
    """True for a row skipped because the file was over a size cap that no longer holds (the cap
    was raised): the file must be read although its stat is unchanged. Such a row is the only
    skip of a non-empty file of a readable type whose bytes were never read (no md5)."""
    return (row is not None and row["extract_status"] == "skipped" and row["md5"] is None and size > 0
            and skip_reason(path, size, cfg) is None)


def skipped_file(path: str, root: str | None, st: os.stat_result) -> SkippedFile | None:
    """The row of a regular file that is skipped from ``st``, or None when it needs the pipeline."""
    if not stat_mod.S_ISREG(st.st_mode):
        return None
    why = skip_reason(path, st.st_size)
    if why is None:
        return None
    return SkippedFile(path, root, st.st_size, st.st_mtime_ns, st.st_ino, why[0], why[1])

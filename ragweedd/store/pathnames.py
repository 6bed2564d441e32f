"""File names as the databases hold them.

A Linux file name is bytes, and not every name is UTF-8 (old Latin-1 archives: ``caf\\xe9.txt``).
Python hands such a name over as a str whose undecodable bytes are lone surrogates U+DC80..U+DCFF
(surrogateescape), but SQLite text must be valid UTF-8. Every store method that writes a path
passes it through ``to_db`` and every one that reads a path back passes it through ``from_db``, so
the rest of ragweedd sees the same str that ``os.listdir`` gave and opens the same file with it.

The stored form writes each undecodable byte as NUL followed by its two lower-case hex digits
(``caf\\x00e9.txt``). A file name can never contain NUL, so no other name has that form: the
mapping is injective and reversible, and a name that is valid UTF-8 is stored exactly as before
(no migration). Each escape is three characters of its own and ``/`` is never escaped, so a
folder's stored form is a prefix of its children's stored forms (``live_paths_under`` relies on it).
SQL's LIKE, GLOB, replace() and length() stop at a NUL, so no query matches a stored path with
them as it is: comparisons and ranges compare the bytes and are safe (``live_paths_under``), and a
glob over names is matched against ``shown_stored_path`` of the escaped ones (``live_files_page``).

What a user sees is a third form, ``contract.shown_path``: the bytes as ``\\xNN``, valid Unicode.
"""

from __future__ import annotations

from typing import Any

from ragweedd.contract import shown_path

ESCAPE = "\x00"
_TO_DB = {0xDC00 + b: f"{ESCAPE}{b:02x}" for b in range(0x80, 0x100)}


def to_db(path: str) -> str:
    """The stored form of a path (``str`` from the file system, surrogateescape)."""
    if path.isascii():
        return path
    return path.translate(_TO_DB)


def from_db(text: str) -> str:
    """The path a stored form stands for (inverse of ``to_db``)."""
    if ESCAPE not in text:
        return text
    head, *rest = text.split(ESCAPE)
    return head + "".join(chr(0xDC00 + int(part[:2], 16)) + part[2:] for part in rest)


def maybe_from_db(text: str | None) -> str | None:
    return None if text is None else from_db(text)


def shown_stored_path(text: str | None) -> str | None:
    """The shown form (``contract.shown_path``) of a stored path, for SQL that matches names as a
    user sees them (registered as the SQL function ``shown_path``)."""
    return None if text is None else shown_path(from_db(text))


def row(r: Any, columns: tuple[str, ...] = ("source_file", "root")) -> Any:
    """A row whose path ``columns`` are given back as paths: the row itself when none is escaped
    (nearly always: this runs for every row a scan compares), else a dict with decoded values."""
    if r is None:
        return None
    for k in columns:
        v = r[k]
        if v is not None and ESCAPE in v:
            out = dict(r)
            for c in columns:
                if out[c] is not None:
                    out[c] = from_db(out[c])
            return out
    return r

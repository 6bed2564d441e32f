"""File names are bytes on Linux; Python hands them to us as str with undecodable bytes as lone
surrogates (surrogateescape). The databases store UTF-8 text, so such a name cannot be stored: it
is reported (shown with its bad bytes and control characters escaped) and left out, instead of
taking down the thread that met it.
"""

from __future__ import annotations

import os


def storable(path: str) -> bool:
    """True when ``path`` can be stored as UTF-8 text (no undecodable bytes in the name)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown(path: str) -> str:
    """``path`` safe to print or log: undecodable bytes as \\xNN, control characters (newline,
    escape sequences) as \\xNN too, so one odd name can neither break a log line nor drive a
    terminal."""
    text = os.fsencode(path).decode("utf-8", "backslashreplace")
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}"
                   for c in text)

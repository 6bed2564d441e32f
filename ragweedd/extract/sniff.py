"""Sniffing and decoding file bytes: is it text, is it empty, which encoding.

Only the standard library is imported here: the sandbox child imports every extractor module at
start-up, and that must stay cheap.
"""

from __future__ import annotations

from pathlib import Path

from ragweedd.errors import ExtractionError, ExtractionSkipped

SNIFF_BYTES = 8192
# Bytes that never occur in text files (everything below 0x20 except \t \n \f \r and ESC).
_CONTROL = bytes(b for b in range(32) if b not in (9, 10, 12, 13, 27))


def looks_binary(head: bytes) -> str | None:
    """Why ``head`` (the first bytes of a file) is not text, or None when it looks like text."""
    if not head:
        return None
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None  # UTF-16 with BOM: NULs are expected
    if b"\x00" in head:
        return "contains NUL bytes"
    ctrl = sum(head.count(bytes([b])) for b in _CONTROL)
    if ctrl / len(head) > 0.10:
        return f"{ctrl * 100 // len(head)}% control characters"
    return None


def read_head(path: Path, n: int = SNIFF_BYTES) -> bytes:
    with open(path, "rb") as f:
        return f.read(n)


def require_nonempty(path: Path) -> int:
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise ExtractionError(f"{path}: file disappeared before it could be read") from None
    if size == 0:
        raise ExtractionSkipped(f"{path}: empty file (0 bytes)")
    return size


def decode_text(data: bytes) -> str:
    """UTF-8 (BOM stripped, undecodable bytes replaced); UTF-16 when it carries a BOM."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return data.decode("utf-16", errors="replace")
    return data.decode("utf-8-sig", errors="replace")

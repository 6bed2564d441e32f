"""Character statistics of text shared by extraction (is a text layer usable?) and chunking (is a
chunk garbage?). Standard library only."""

from __future__ import annotations

import math
from collections import Counter


def shannon_entropy(text: str) -> float:
    """Bits per character."""
    if not text:
        return 0.0
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def word_count(text: str) -> int:
    return len(text.split())


# Scripts whose characters are words or syllables (Han, kana, Hangul syllables, Yi): thousands of
# them in ordinary use, so ordinary text has far more bits per character than alphabetic text.
_LOGOGRAPHIC = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xA000, 0xA4CF),
                (0xAC00, 0xD7A3), (0xF900, 0xFAFF), (0x20000, 0x3FFFF))
# How many more bits per character ordinary text of those scripts may have: XQuAD's Chinese
# paragraphs have 5.0-7.5 (median 6.6) where English, Russian, Arabic and Hindi have 4.1-5.2, and
# 400 random Han characters 8.6. A chunk's garbage threshold (7.0) rises by this much times its
# share of such characters: 8.2 for Chinese prose, which keeps it and still drops the noise.
LOGOGRAPHIC_EXTRA_BITS = 1.2


def logographic_share(text: str) -> float:
    """The share of ``text``'s non-space characters that are Han, kana, Hangul syllables or Yi."""
    chars = [c for c in text if not c.isspace()]
    if not chars:
        return 0.0
    n = sum(1 for c in chars if ord(c) >= 0x3040 and any(a <= ord(c) <= b for a, b in _LOGOGRAPHIC))
    return n / len(chars)

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

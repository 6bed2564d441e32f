"""Shannon entropy over characters and the ingest filter of DESIGN §6."""

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


def verdict(entropy: float, words: int, *, entropy_max: float, entropy_min: float) -> str | None:
    """None to keep the chunk, else why it is dropped ("garbage" or "empty")."""
    if entropy > entropy_max:
        return "garbage"
    if entropy < entropy_min and words < 5:
        return "empty"
    return None

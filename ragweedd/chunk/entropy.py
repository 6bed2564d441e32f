"""Shannon entropy over characters and the ingest filter of DESIGN §6."""

from __future__ import annotations

from ragweedd.text_stats import shannon_entropy, word_count

__all__ = ["shannon_entropy", "verdict", "word_count"]


def verdict(entropy: float, words: int, *, entropy_max: float, entropy_min: float) -> str | None:
    """None to keep the chunk, else why it is dropped ("garbage" or "empty")."""
    if entropy > entropy_max:
        return "garbage"
    if entropy < entropy_min and words < 5:
        return "empty"
    return None

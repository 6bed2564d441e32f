"""Whether a PDF page's text layer is usable or needs OCR."""

from __future__ import annotations

import re

from ragweedd.text_stats import shannon_entropy

_WORD = re.compile(r"[^\W\d_]{2,}")


def is_garbage_text(text: str) -> bool:
    """True when a PDF page's text layer is missing or unusable (font without a ToUnicode map,
    scanner noise): too few letters, too few word-like tokens, or character soup."""
    s = text.strip()
    if len(s) < 16:
        return True
    tokens = s.split()
    words = [t for t in tokens if _WORD.fullmatch(t.strip(".,;:!?()[]\"'"))]
    if len(words) < 3 or len(words) / max(1, len(tokens)) < 0.3:
        return True
    letters = sum(ch.isalpha() for ch in s)
    if letters / len(s) < 0.4:
        return True
    return shannon_entropy(s) > 7.0

"""The boundary-aware splitter of DESIGN §6.

A window of ``chunk_chars`` slides over the text. Its cut moves back to just after the last sentence
end (``.``, ``!``, ``?``, newline) within the window's last 200 characters, else to just after the last
whitespace within its last 50; failing both the cut is the window end. The next window starts at
``max(pos + 1, boundary - overlap)``, so the text is always covered, in order, and the loop always
advances.

One guard beyond the original rule: a cut never lands at or before the previous chunk's end. With
the default sizes (window - overlap >= 200 chars) this never triggers; with tiny windows the plain
rule would find the same sentence end again and again and emit near-identical chunks that each
start one character later.
"""

from __future__ import annotations

SENTENCE_ENDS = ".!?\n"
SENTENCE_LOOKBACK = 200
WHITESPACE_LOOKBACK = 50
CHARS_PER_TOKEN = 4


def find_boundary(text: str, pos: int, end: int, floor: int = 0) -> int:
    """Where a window [pos, end) is cut; the cut is > max(pos, floor); end == len(text) is kept."""
    if end >= len(text):
        return len(text)
    floor = max(pos, floor)
    lo = max(floor, end - SENTENCE_LOOKBACK)
    best = max(text.rfind(ch, lo, end) for ch in SENTENCE_ENDS)
    if best >= lo:
        return best + 1
    lo = max(floor, end - WHITESPACE_LOOKBACK)
    for i in range(end - 1, lo - 1, -1):
        if text[i].isspace():
            return i + 1
    return end


def split_spans(text: str, chunk_chars: int, overlap_chars: int) -> list[tuple[int, int]]:
    """Character spans [start, end) of the chunks of ``text``."""
    if chunk_chars < 1:
        raise ValueError("chunk_chars must be >= 1")
    overlap_chars = max(0, min(overlap_chars, chunk_chars - 1))
    n = len(text)
    spans: list[tuple[int, int]] = []
    pos = prev = 0
    while pos < n:
        end = min(pos + chunk_chars, n)
        boundary = find_boundary(text, pos, end, prev)
        prev = boundary
        spans.append((pos, boundary))
        if boundary >= n:
            break
        pos = max(pos + 1, boundary - overlap_chars)
    return spans


def chunk_chars_for(kind: str, chunk_tokens: int, pdf_tokens: int, av_tokens: int) -> int:
    """Character budget of a document kind (text / pdf / av), at 4 chars per token."""
    if kind == "pdf":
        tokens = min(chunk_tokens, pdf_tokens)
    elif kind == "av":
        tokens = min(chunk_tokens, av_tokens)
    else:
        tokens = chunk_tokens
    return tokens * CHARS_PER_TOKEN

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

from typing import Iterable, Iterator

from ragweedd.errors import InternalError

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


def iter_spans(pieces: Iterable[str], chunk_chars: int, overlap_chars: int) -> Iterator[tuple[int, int, str]]:
    """(start, end, text[start:end]) of each chunk of the text that ``pieces`` make up when joined.

    The one implementation of the rule above, for a text in memory (one piece) and for a file read
    piece by piece: it keeps only the text from the current window's start to one character past
    its end (to know whether the window reaches the end of the text), so memory stays at about two
    windows plus one piece whatever the size of the text, and the spans are the same however the
    text is cut into pieces."""
    if chunk_chars < 1:
        raise InternalError("chunk_chars must be >= 1")
    overlap_chars = max(0, min(overlap_chars, chunk_chars - 1))
    it = iter(pieces)
    buf, base, eof = "", 0, False  # buf holds text[base:base + len(buf)]
    pos = prev = 0
    while True:
        if not eof and base + len(buf) <= pos + chunk_chars:
            more = [buf]
            have = base + len(buf)
            while have <= pos + chunk_chars:
                piece = next(it, None)
                if piece is None:
                    eof = True
                    break
                more.append(piece)
                have += len(piece)
            buf = "".join(more)
        known = base + len(buf)
        if pos >= known:
            return
        end = min(pos + chunk_chars, known)
        # Not at the end of the text, buf reaches past ``end``, so find_boundary cuts as it would on
        # the whole text; at the end, buf ends where the text ends.
        boundary = find_boundary(buf, pos - base, end - base, prev - base) + base
        prev = boundary
        yield pos, boundary, buf[pos - base:boundary - base]
        if eof and boundary >= known:
            return
        pos = max(pos + 1, boundary - overlap_chars)
        if pos - base > max(chunk_chars, len(buf) // 2):  # drop text no window will see again
            buf, base = buf[pos - base:], pos


def chunk_chars_for(kind: str, chunk_tokens: int, pdf_tokens: int, av_tokens: int) -> int:
    """Character budget of a document kind (text / pdf / av), at 4 chars per token."""
    if kind == "pdf":
        tokens = min(chunk_tokens, pdf_tokens)
    elif kind == "av":
        tokens = min(chunk_tokens, av_tokens)
    else:
        tokens = chunk_tokens
    return tokens * CHARS_PER_TOKEN

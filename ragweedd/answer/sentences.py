"""Cut a passage into the sentences an answer can quote, as character offsets into the passage.

The offsets are what matter: a quote is ``text[start:end]`` exactly, so its span in the document is
the passage's span moved by ``start``. Rules, in order:

- a blank line always ends a sentence (paragraphs, PDF pages);
- a line that starts with a bullet or a list number, a table row (``|`` cells, tabs, or columns
  aligned with runs of spaces), a markdown heading, the line after a short line with no closing
  punctuation (a title), and a line indented otherwise than the sentence that ends above it (a new
  paragraph, a definition list's next term) each start anew;
- any other line break is soft: PDF text and hard-wrapped prose break lines mid-sentence;
- inside that, a sentence ends at ``.``, ``!`` or ``?`` (and Arabic's ``؟``, Devanagari's ``।``;
  closing quotes and brackets included) when whitespace and then a capital of any script (or a
  letter of a script without case), digit, quote, bracket or bullet follow, unless the word before
  the full stop is a known abbreviation ("e.g.", "Dr.", "Fig.", "et al.") or a single capital (an
  initial). "3.5 mg" never ends one: no whitespace follows its point. Chinese and Japanese end one at
  ``。``, ``！`` or ``？`` whatever follows: they put no space after it;
- a sentence longer than ``MAX_CHARS`` (a table cell dump, a run-on list) is cut at a space.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

MAX_CHARS = 400

_ABBREV = frozenset("""
e.g i.e cf vs etc al approx ca resp viz fig figs eq eqs no nos vol vols pp p ch sec sect art
dr mr mrs ms prof sr jr st mt ft inc ltd co corp dept univ est min max avg
jan feb mar apr jun jul aug sep sept oct nov dec
""".split())
_BULLET = re.compile(r"[ \t]*(?:[-*+•‣◦▪–—]\s|\(?\d{1,3}[.)]\s|\(?[a-zA-Z][.)]\s|\[[ xX]\]\s)")
_HEADING = re.compile(r"[ \t]*#{1,6}\s")
_TABLE = re.compile(r"\|.*\||\t|\S {3,}\S.* {3,}\S")
_END = re.compile(r"""[.!?؟।]+['"”’)\]]*(?=\s)|[。！？]+['"”’」』)）]*""")
_NEXT_STARTS = re.compile(r"""\s*(?=[\w"'“‘(\[•\-*「『（])""")
_WORD_BEFORE = re.compile(r"([A-Za-z][A-Za-z.]*)\.$")
_LIST_NUMBER = re.compile(r"\(?(?:\d{1,3}|[a-zA-Z]|[ivxIVX]{1,4})[.)]")
_BLANK = re.compile(r"\n[ \t\r\f\v]*\n|\r[ \t\f\v]*\r|\f")


def split_sentences(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text``, in order, whitespace trimmed off."""
    out: list[tuple[int, int]] = []
    for b_start, b_end in _blocks(text):
        for s_start, s_end in _segments(text, b_start, b_end):
            for a, b in _sentences(text, s_start, s_end):
                out.extend(_cap(text, a, b))
    return out


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _blocks(text: str) -> Iterator[tuple[int, int]]:
    pos = 0
    for m in _BLANK.finditer(text):
        yield pos, m.start()
        pos = m.end()
    yield pos, len(text)


def _lines(text: str, a: int, b: int) -> list[tuple[int, int]]:
    out = []
    pos = a
    for m in re.finditer(r"\r\n|\r|\n", text[a:b]):
        out.append((pos, a + m.start()))
        pos = a + m.end()
    out.append((pos, b))
    return out


def _is_table_row(line: str) -> bool:
    return bool(_TABLE.search(line.strip()))


def _segments(text: str, a: int, b: int) -> Iterator[tuple[int, int]]:
    """Runs of lines that may hold one flowing sentence; a hard line start begins a new run."""
    lines = [(s, e) for s, e in _lines(text, a, b) if text[s:e].strip()]
    if not lines:
        return
    widest = max(len(text[s:e].strip()) for s, e in lines)
    seg_start, prev = lines[0][0], lines[0]
    prev_hard = _hard_alone(text[prev[0]:prev[1]])
    for s, e in lines[1:]:
        line = text[s:e]
        prev_line = text[prev[0]:prev[1]].strip()
        # a title: much shorter than the block's lines and not ending as prose or a wrapped clause does
        title = (len(prev_line) < min(40, widest * 0.7) and prev_line[-1:] not in ".,;:-"
                 and line.lstrip()[:1].isupper())
        # a sentence ended and the next line is indented otherwise: a new paragraph, or the next
        # term of a definition list (a man page's "libvirt" under the text of the term before)
        outdent = (_indent(line) != _indent(text[prev[0]:prev[1]])
                   and re.search(r"[.!?]['\"”’)\]]*$", prev_line) is not None)
        if prev_hard or title or outdent or _hard_start(line):
            yield seg_start, prev[1]
            seg_start = s
        prev, prev_hard = (s, e), _hard_alone(line)
    yield seg_start, prev[1]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _hard_start(line: str) -> bool:
    return bool(_BULLET.match(line) or _HEADING.match(line) or _is_table_row(line))


def _hard_alone(line: str) -> bool:
    # a heading or table row ends where its line ends; a bullet item may wrap onto the next line
    return bool(_HEADING.match(line) or _is_table_row(line))


def _sentences(text: str, a: int, b: int) -> Iterator[tuple[int, int]]:
    start = a
    seg = text[a:b]
    for m in _END.finditer(seg):
        end = a + m.end()
        nxt = _NEXT_STARTS.match(text, end, b)
        if nxt is None or not _opens(text, nxt.end(), b, spaced=m.group(0)[0] not in "。！？"):
            continue
        if m.group(0).startswith(".") and (_abbreviation(text[start:a + m.start() + 1])
                                           or _LIST_NUMBER.fullmatch(text[start:a + m.end()].strip())):
            continue
        s, e = _trim(text, start, end)
        if e > s:
            yield s, e
        start = nxt.end()
    s, e = _trim(text, start, b)
    if e > s:
        yield s, e


def _opens(text: str, i: int, b: int, *, spaced: bool) -> bool:
    """Whether a sentence can start at ``text[i]``: after a Western full stop (``spaced``) whitespace
    must come first, then no lower-case letter ("3.5 mg" and "e.g. the" go on); after a CJK one,
    anything."""
    if i >= b:
        return False
    if not spaced:
        return True
    if i == 0 or not text[i - 1].isspace():
        return False
    c = text[i]
    return not c.islower() and c != "_"


def _abbreviation(before: str) -> bool:
    """Does ``before`` (ending in a full stop) end with an abbreviation or an initial?"""
    m = _WORD_BEFORE.search(before)
    if not m:
        return False
    word = m.group(1)
    if len(word) == 1 and word.isupper():
        return True  # "J. Smith", "Vitamin D. " is rarer than initials in cited text
    return word.lower().rstrip(".") in _ABBREV


def _cap(text: str, a: int, b: int) -> Iterator[tuple[int, int]]:
    while b - a > MAX_CHARS:
        cut = text.rfind(" ", a + MAX_CHARS // 2, a + MAX_CHARS)
        if cut <= a:
            cut = a + MAX_CHARS
        s, e = _trim(text, a, cut)
        if e > s:
            yield s, e
        a, _ = _trim(text, cut, b)
    if b > a:
        yield a, b

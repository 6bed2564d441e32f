"""A search hit's ``snippet`` and ``snippet_marks`` (issue 24): the chunk's text cut to about
SNIPPET_CHARS characters around the densest run of the query's words, with each matched word's
[start, end) offsets within the snippet, so every face marks the same words (bold on a terminal,
``<mark>`` in the web UI).

- The text's whitespace is collapsed to single spaces first (a snippet is one line).
- Words are the runs of letters, digits and marks the keyword leg reads (ragweedd/keyterms.py). A
  word of the text matches a query word when the two are equal ignoring case and accents ("Café" =
  "cafe"), or when they share an index term in the query's language or in English: the same stem
  ("steeping" = "steep", "Häuser" = "Haus"), or, in scripts without spaces, a character bigram (the
  run "北京大学是" holds the query's "北京").
- Common function words ("the", "of", "how", ...; ``STOPWORDS``) are not marked unless the query
  has nothing else: "how often do I feed the starter" marks "feed" and "starter" only.
- The window: of every run of matches that fits in SNIPPET_CHARS, the one with the most distinct
  query words, then the most matches, then the earliest; the snippet is centred on it and cut at
  whitespace (a word is never split unless it is longer than WORD_SLACK characters), with "… " before
  and " …" after a cut end. Nothing matches (a dense-only hit): the chunk's start.
"""

from __future__ import annotations

import unicodedata
from typing import Any

from ragweedd import keyterms

SNIPPET_CHARS = 300
WORD_SLACK = 24  # how far a cut end may move to keep a word whole
ELLIPSIS_BEFORE, ELLIPSIS_AFTER = "… ", " …"

STOPWORDS = frozenset("""
a about above after again against all also am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having
he her here hers herself him himself his how i if in into is it its itself just me more most my myself no
nor not of off on once only or other our ours ourselves out over own same she should so some such than
that the their theirs them themselves then there these they this those through to too under until up very
was we were what when where which while who whom why will with would you your yours yourself yourselves
""".split())


def fold(word: str) -> str:
    """Case and accents away: "Crème" -> "creme"."""
    if word.isascii():
        return word.lower()
    decomposed = unicodedata.normalize("NFKD", word)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).casefold()


class QueryWords:
    """The words of one query as a snippet matches them: folded forms and index terms."""

    def __init__(self, query: str, lang: str | None = None) -> None:
        words = list(dict.fromkeys(fold(w) for w in keyterms.words(query or "")))
        content = [w for w in words if w not in STOPWORDS]
        self.words = content or words
        self.folded = {w: w for w in self.words}
        # the query's language (the search's, else detected) and English, as the snippets were
        # stemmed before every language had its stemmer
        if lang is None:
            lang = keyterms.detect(query) if self.words else ""
        self.langs = tuple(dict.fromkeys((lang, "en")))
        self.stems: dict[str, str] = {}  # stem -> the query word it stands for
        for w in self.words:
            for s in self._stems(w):
                self.stems.setdefault(s, w)
        # a stem is (nearly) a prefix of its word: only words sharing its first letters are stemmed
        self._prefixes = {s[:3] for s in self.stems if len(s) >= 3}
        self._seen: dict[str, str | None] = {}

    def match(self, token: str) -> str | None:
        """The query word ``token`` (a word of the text) matches, or None."""
        try:
            return self._seen[token]
        except KeyError:
            pass
        f = fold(token)
        hit = self.folded.get(f)
        if hit is None and (f[:3] in self._prefixes or keyterms.unspaced_in(f)):
            hit = next((self.stems[s] for s in self._stems(f) if s in self.stems), None)
        if len(self._seen) < 50_000:
            self._seen[token] = hit
        return hit

    def spans(self, token: str) -> list[tuple[int, int, str]]:
        """[start, end, query word) of the query words' bigrams inside a run of a script without
        spaces: the run "北京大学是中国" marks "北京", not the whole sentence it is written in."""
        low = token.lower()
        found: list[tuple[int, int, str]] = []
        for stem, w in self.stems.items():
            if not keyterms.unspaced_in(stem):
                continue
            at = low.find(stem)
            while at != -1:
                found.append((at, at + len(stem), w))
                at = low.find(stem, at + 1)
        found.sort()
        merged: list[tuple[int, int, str]] = []
        for a, b, w in found:  # overlapping bigrams of one word ("北京大" + "京大学") are one mark
            if merged and a <= merged[-1][1] and merged[-1][2] == w:
                merged[-1] = (merged[-1][0], max(b, merged[-1][1]), w)
            else:
                merged.append((a, b, w))
        return merged

    def _stems(self, word: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for lang in self.langs for t in keyterms.terms(word, lang)))


def make_snippet(text: str, query: str | QueryWords, width: int = SNIPPET_CHARS) -> tuple[str, list[list[int]]]:
    """(snippet, marks): ``marks`` are [start, end) offsets of the matched words within ``snippet``."""
    qw = query if isinstance(query, QueryWords) else QueryWords(query)
    t = " ".join(str(text or "").split())
    matches: list[tuple[int, int, str]] = []
    for m in keyterms.word_pattern().finditer(t):
        key = qw.match(m.group())
        if key is None:
            continue
        inner = qw.spans(m.group()) if keyterms.unspaced_in(m.group()) else []
        matches.extend((m.start() + a, m.start() + b, w) for a, b, w in inner)
        if not inner:
            matches.append((m.start(), m.end(), key))
    if not matches:
        lo, hi = 0, _cut_end(t, min(len(t), width), 0)
    else:
        i, j = _densest(matches, width)
        first, last = matches[i][0], matches[j][1]
        centre = (first + last) // 2
        lo = max(0, min(centre - width // 2, len(t) - width))
        hi = min(len(t), lo + width)
        lo = _cut_start(t, lo, first)
        hi = _cut_end(t, hi, last)
    while lo < hi and t[lo] == " ":
        lo += 1
    while hi > lo and t[hi - 1] == " ":
        hi -= 1
    before = ELLIPSIS_BEFORE if lo > 0 else ""
    after = ELLIPSIS_AFTER if hi < len(t) else ""
    shift = len(before) - lo
    marks = [[s + shift, e + shift] for s, e, _ in matches if s >= lo and e <= hi]
    return before + t[lo:hi] + after, marks


def _densest(matches: list[tuple[int, int, str]], width: int) -> tuple[int, int]:
    """(first, last) index of the run of matches within ``width`` characters with the most distinct
    query words, then the most matches; the earliest such run. One pass of a sliding window."""
    best, where = (0, 0, 0), (0, 0)
    counts: dict[str, int] = {}
    j = -1  # the window is matches[i..j]
    for i in range(len(matches)):
        if j < i:
            j, counts = i - 1, {}
        while j + 1 < len(matches) and matches[j + 1][1] - matches[i][0] <= width:
            j += 1
            counts[matches[j][2]] = counts.get(matches[j][2], 0) + 1
        score = (len(counts), j - i + 1, -i)
        if j >= i and score > best:
            best, where = score, (i, j)
        if j >= i:
            key = matches[i][2]
            counts[key] -= 1
            if not counts[key]:
                del counts[key]
    return where


def _cut_start(t: str, lo: int, keep: int) -> int:
    """``lo`` moved to the start of a word: back to the start of the word it falls in when that is
    near, else forward past it (never past ``keep``, the first match)."""
    if lo <= 0 or t[lo - 1] == " ":
        return max(lo, 0)
    back = t.rfind(" ", 0, lo) + 1
    if lo - back <= WORD_SLACK:
        return back
    fwd = t.find(" ", lo)
    return min(keep, fwd + 1) if fwd != -1 else lo


def _cut_end(t: str, hi: int, keep: int) -> int:
    """``hi`` moved to the end of a word: on to the end of the word it falls in when that is near,
    else back before it (never before ``keep``, the end of the last match)."""
    if hi >= len(t) or t[hi] == " ":
        return min(hi, len(t))
    fwd = t.find(" ", hi)
    fwd = len(t) if fwd == -1 else fwd
    if fwd - hi <= WORD_SLACK:
        return fwd
    back = t.rfind(" ", 0, hi)
    return max(keep, back) if back > 0 else hi


def add_snippets(hits: list[dict[str, Any]], query: str, lang: str | None = None) -> list[dict[str, Any]]:
    """Copies of ``hits``, each with its ``snippet`` and ``snippet_marks`` for ``query`` (copies: a
    search cache may hold the originals, found by a query of other words); ``lang``: the language
    the search read the query as."""
    qw = QueryWords(query, lang)
    out = []
    for h in hits:
        snippet, marks = make_snippet(h.get("text") or "", qw)
        out.append({**h, "snippet": snippet, "snippet_marks": marks})
    return out

"""How readable a PDF page's text layer is: whether the page needs OCR, and whether OCR did better.

A born-digital page of a financial filing is mostly figures and punctuation ("Cash........ $ 348,283",
"(9,226)", "12.5 %"), so a letters ratio calls its good text layer garbage. This measure reads the
text as tokens instead and asks how many of them are recognisable:

- dot leaders and rules ("........", ". . . .", "____", "-----") are removed first: they are layout;
- a token counts as *recognised* when, inside brackets, quotes and closing punctuation, it is a word
  or identifier of two or more letters/digits (inner ``- . / & : @ ' _ +`` allowed: "whales", "10-K",
  "COVID-19", "S&P"), a number (digits with ``, . : / -`` separators, an optional currency sign,
  sign, brackets, ``%``: "$(1,234.5)", "12.5%") or a URL/e-mail address;
- it is *neutral* (counted neither way) when it is a single ASCII letter ("(a)" in a list) or at most
  two punctuation characters ("$", "%", "—", "•");
- anything else is *unrecognised*: punctuation soup ("#$%&'", "~}|{"), lone letters outside ASCII
  ("Ā ā Ă" from a font without a ToUnicode map), unmapped glyphs ("(cid:12)").

Characters that no text layer should carry (C0 controls, the private-use area, U+FFFD/U+FFFE) are
counted separately. A text is **missing** when fewer than 16 characters sit in recognised tokens,
and **unreadable** when more than 10 % of its characters are such bad characters, when more than half
of its counted tokens are unrecognised, or when fewer than 20 % of the letters of its (ten or more)
ASCII words are vowels (a font whose codes were shifted: "7KH FRPSDQ\\ UHSRUWV"; English runs at about
40 %, the FinanceBench filings' pages at 30 % or more). Character entropy is not used: a page of Chinese text has
more than 7 bits of it and is perfectly readable.

``score`` compares two readings of one page (the text layer and OCR): characters in recognised
tokens minus characters in unrecognised tokens, and 0 for an unreadable text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MIN_READABLE_CHARS = 16
MAX_BAD_CHAR_SHARE = 0.10
MAX_UNRECOGNISED_SHARE = 0.5
MIN_VOWEL_SHARE = 0.2
MIN_WORDS_FOR_VOWEL_TEST = 10

# Three or more leader marks, optionally spaced (". . . ."), and rules of dashes, underscores, '='.
_LEADERS = re.compile(r"(?:[.·…_]\s?){3,}|[-–—=_]{3,}")
# Chinese and Japanese sentences carry no spaces: their punctuation separates the tokens.
_CJK_PUNCT = re.compile(r"[。，、；：？！「」『』（）《》【】・]")
_STRIP = "()[]{}<>\"'“”‘’«»,;:!?*"
_PRE = r"[()\[\]{}<>\"'“”‘’«»,;:!?*]*"
_POST = r"[()\[\]{}<>\"'“”‘’«»,;:!?*.]*"
_NUMBER = r"[-+−]?[$€£¥]?\(?[-+−]?\d+(?:[.,:/\-]\d+)*\)?(?:%|st|nd|rd|th|x|[MBK])?"
# Words and identifiers of two or more letters/digits: "whales", "10-K", "COVID-19", "S&P", "H.R."
_IDENT = r"[^\W_](?:[-./&:@'’_+]?[^\W_])+"
_URL = r"(?:https?://|www\.)\S+|[\w.+-]+@[\w-]+\.[\w.]+"
# One regex pass finds every recognised token; only what it leaves is looked at token by token.
_OK = re.compile(rf"(?<!\S){_PRE}(?!cid:\d)(?:{_URL}|{_NUMBER}|{_IDENT}){_POST}(?!\S)", re.I)
_ASCII_WORD = re.compile(r"\b[A-Za-z]{2,}\b")
_NO_VOWELS = str.maketrans("", "", "aeiouyAEIOUY")
_BAD_CHARS = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ue000-\uf8ff\ufffd\ufffe]")


@dataclass(frozen=True)
class TextQuality:
    chars: int  # characters other than whitespace
    bad_chars: int  # controls, private-use, replacement characters
    recognised: int  # tokens that are words, numbers, identifiers, addresses
    unrecognised: int
    readable_chars: int  # characters inside recognised tokens
    unrecognised_chars: int
    vowel_share: float  # vowels among the letters of ASCII words (1.0 when there are too few words)

    @property
    def missing(self) -> bool:
        return self.readable_chars < MIN_READABLE_CHARS

    @property
    def unreadable(self) -> bool:
        if self.chars and self.bad_chars / self.chars > MAX_BAD_CHAR_SHARE:
            return True
        counted = self.recognised + self.unrecognised
        if counted and self.unrecognised / counted > MAX_UNRECOGNISED_SHARE:
            return True
        return self.vowel_share < MIN_VOWEL_SHARE

    @property
    def verdict(self) -> str:
        """"unreadable", "missing" or "ok" (in that order of precedence)."""
        if self.unreadable:
            return "unreadable"
        return "missing" if self.missing else "ok"

    @property
    def score(self) -> int:
        return 0 if self.unreadable else max(0, self.readable_chars - self.unrecognised_chars)


def _unrecognised(tok: str) -> bool:
    """For a token the recognising regex left: neutral (False) or unrecognised (True)."""
    core = tok.strip(_STRIP).rstrip(".")
    if not core:
        return len(tok) > 2  # "—", "$", "%)" are typography; "#$%&'" is not
    if len(core) == 1:
        # "(a)", "$", "5", "€" are neutral; a lone "Ā" is what a font without a ToUnicode map gives
        return core.isalpha() and not core.isascii() and core not in "àÀ"
    return not (len(core) == 2 and not any(c.isalnum() for c in core))  # "$(", "—," are neutral


def assess(text: str) -> TextQuality:
    chars = len("".join(text.split()))
    bad_chars = len(_BAD_CHARS.findall(text))
    t = _CJK_PUNCT.sub(" ", _LEADERS.sub(" ", text))
    tokens = t.split()
    # _OK matches whole tokens only, so what the substitution leaves are the other tokens.
    left = _OK.sub(" ", t).split()
    recognised = len(tokens) - len(left)
    readable = len("".join(tokens)) - len("".join(left))
    rest = [tok for tok in left if _unrecognised(tok)]
    words = _ASCII_WORD.findall(t)
    share = 1.0
    if len(words) >= MIN_WORDS_FOR_VOWEL_TEST:
        letters = "".join(words)
        share = 1 - len(letters.translate(_NO_VOWELS)) / len(letters)
    return TextQuality(chars, bad_chars, recognised, len(rest), readable, sum(map(len, rest)), share)


def is_garbage_text(text: str) -> bool:
    """True when a PDF page's text layer is missing (too little readable text) or unreadable."""
    return assess(text).verdict != "ok"

"""The index form of text for the keyword leg, in any language (issue 31).

SQLite's ``porter unicode61`` tokenizer knew one language: English stems for every word, and a run
of Han characters as one "word", so a Chinese question matched almost nothing. Text is now turned
into its index form here, in Python, the same way at index time (a chunk) and at query time (a
query), and the keyword index (FTS5 with the ``ascii`` tokenizer, which splits on ASCII spaces and
punctuation only; PostgreSQL's tsvector built from the same terms) stores that form as it is:

1. NFKC (full-width letters and digits, ligatures, Arabic presentation forms become the ordinary
   ones), lower case; digits of any script become ASCII digits ("٢٠١٥" = "2015").
2. Words are runs of letters, digits and combining marks. Marks belong to words: Devanagari,
   Thai or Arabic vowel signs are marks, and Python's ``\\w`` alone would cut "हिन्दी" into pieces.
3. Scripts written without spaces between words (Han, kana, Thai, Lao, Khmer, Myanmar) become
   overlapping character bigrams ("北京大学" -> "北京 京大 大学"; a lone character stays itself):
   no dictionary to ship or to go stale, and a query's two-character word is one bigram of every
   text that holds it (as Lucene's CJK analyser does).
4. Other words are stemmed with the Snowball stemmer of the text's language (PyStemmer), then
   accents of Latin, Greek and Cyrillic letters are folded ("Häuser" -> "haus", "café" = "cafe").
   English keeps the original Porter stemmer with accents folded first: what ``porter unicode61``
   gave, so English search behaves as it did.

The language of a text is detected with py3langid (its model ships in the wheel; no download). A
query is short, so its language is chosen among the languages the collection's chunks were found
to be in (``detect(query, candidates)``): a query in a one-language collection is read as that
language, and a misread query cannot pick a stemmer no chunk was indexed with.

``FORM_VERSION`` names this form; an index built with another form is rebuilt (store/sqlite/rag_db.py).
Imports of PyStemmer and py3langid are lazy: ``ragweedctl`` imports ``ragweedd`` and must start fast.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from typing import Any, Iterable

# Bump when the index form changes: stored indexes are rebuilt from their chunk text.
FORM_VERSION = 1

# ISO 639-1 (as py3langid names languages) -> Snowball stemmer (PyStemmer). English keeps Porter.
STEMMERS: dict[str, str] = {
    "en": "porter", "ar": "arabic", "hy": "armenian", "eu": "basque", "ca": "catalan", "cs": "czech",
    "da": "danish", "nl": "dutch", "eo": "esperanto", "et": "estonian", "fi": "finnish", "fr": "french",
    "de": "german", "el": "greek", "hi": "hindi", "hu": "hungarian", "id": "indonesian", "ms": "indonesian",
    "ga": "irish", "it": "italian", "lt": "lithuanian", "ne": "nepali", "no": "norwegian", "nb": "norwegian",
    "nn": "norwegian", "fa": "persian", "pl": "polish", "pt": "portuguese", "ro": "romanian", "ru": "russian",
    "sr": "serbian", "es": "spanish", "sv": "swedish", "ta": "tamil", "tr": "turkish", "yi": "yiddish",
}

# Scripts without spaces between words: (first, last) code points.
_UNSPACED = ((0x0E00, 0x0EFF),  # Thai, Lao
             (0x1000, 0x109F),  # Myanmar
             (0x1780, 0x17FF),  # Khmer
             (0x3040, 0x30FF), (0x31F0, 0x31FF),  # Hiragana, Katakana
             (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF),  # Han
             (0x20000, 0x3FFFF))  # Han, supplementary planes
_UNSPACED_CLASS = "".join(f"{chr(a)}-{chr(b)}" for a, b in _UNSPACED)
_UNSPACED_RUN = re.compile(f"[{_UNSPACED_CLASS}]+|[^{_UNSPACED_CLASS}]+")
_MAX_WORD = 64  # longer runs are not words (hashes, base64): never stemmed...
_MAX_TERM = 200  # ...and cut here: PostgreSQL refuses lexemes over 2,047 bytes, FTS5 gains nothing

_lock = threading.Lock()
_word_re: re.Pattern[str] | None = None
_digits: dict[int, str] | None = None
_stemmers: dict[str, Any] = {}
_identifier: Any = None


def _tables() -> tuple[re.Pattern[str], dict[int, str]]:
    """The word pattern (letters, digits, marks) and the digit map, built once per process from
    the Unicode database (~20 ms: the basic and supplementary multilingual planes are scanned)."""
    global _word_re, _digits
    if _word_re is None or _digits is None:
        marks, digits = [], {}
        for cp in range(0x80, 0x20000):
            ch = chr(cp)
            cat = unicodedata.category(ch)
            if cat[0] == "M":
                marks.append(cp)
            elif cat == "Nd" and cp > 0x7F:
                digits[cp] = str(unicodedata.decimal(ch))
        ranges, start, prev = [], None, None
        for cp in marks:
            if start is None:
                start = prev = cp
            elif cp == prev + 1:  # type: ignore[operator]
                prev = cp
            else:
                ranges.append((start, prev))
                start = prev = cp
        if start is not None:
            ranges.append((start, prev))
        cls = "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges)  # type: ignore[arg-type]
        _digits = digits
        _word_re = re.compile(rf"(?:[^\W_]|[{cls}])+")
    return _word_re, _digits


def _stemmer(lang: str) -> Any:
    name = STEMMERS.get(lang)
    if name is None:
        return None
    st = _stemmers.get(lang)
    if st is None:
        import Stemmer  # PyStemmer

        with _lock:
            st = _stemmers.setdefault(lang, Stemmer.Stemmer(name, 10_000))
    return st


def fold(word: str) -> str:
    """Accents of Latin, Greek and Cyrillic letters away ("café" -> "cafe"); marks of other scripts
    (Devanagari vowel signs, Arabic vowels) are part of their letters and stay."""
    if word.isascii():
        return word
    d = unicodedata.normalize("NFD", word)
    kept = "".join(c for c in d if not 0x0300 <= ord(c) <= 0x036F)
    return unicodedata.normalize("NFC", kept) if len(kept) != len(d) else word


_UNSPACED_SEARCH = re.compile(f"[{_UNSPACED_CLASS}]")


def unspaced_in(text: str) -> bool:
    """Whether ``text`` holds a character of a script written without spaces."""
    return _UNSPACED_SEARCH.search(text) is not None


def _unspaced(ch: str) -> bool:
    cp = ord(ch)
    return any(a <= cp <= b for a, b in _UNSPACED)


def _stem(word: str, lang: str) -> str:
    if len(word) > _MAX_WORD or word.isdigit():
        return word[:_MAX_TERM]
    st = _stemmer(lang)
    if lang == "en":  # as porter unicode61: fold, then stem words of 3 letters or more
        word = fold(word)
        return (st.stemWord(word) or word) if st is not None and len(word) > 2 else word
    if st is not None:
        word = st.stemWord(word) or word
    return fold(word)


def terms(text: str, lang: str = "") -> list[str]:
    """The index terms of ``text`` in language ``lang`` (ISO 639-1, "" = unknown: no stemming), in
    text order, repeats kept."""
    if not text:
        return []
    word_re, digits = _tables()
    text = unicodedata.normalize("NFKC", text).lower()
    if not text.isascii():
        text = text.translate(digits)
    out: list[str] = []
    for m in word_re.finditer(text):
        w = m.group()
        if w.isascii():
            out.append(_stem(w, lang))
            continue
        for part in _UNSPACED_RUN.findall(w):
            if _unspaced(part[0]):
                if len(part) == 1:
                    out.append(part)
                else:
                    out.extend(part[i:i + 2] for i in range(len(part) - 1))
            else:
                # a mark left at the start of a part (after a Han character) is no word of its own
                while part and unicodedata.category(part[0])[0] == "M":
                    part = part[1:]
                if part:
                    out.append(_stem(part, lang))
    return out


def index_form(text: str, lang: str = "") -> str:
    """What the keyword index stores for ``text``: its terms joined by spaces."""
    return " ".join(terms(text, lang))


def query_terms(text: str, lang: str = "") -> list[str]:
    """The distinct index terms of a query, in query order."""
    return list(dict.fromkeys(terms(text, lang)))


def words(text: str) -> list[str]:
    """The words of ``text`` as the index form finds them (letters, digits and marks), lower-cased,
    before stemming and segmentation: what a snippet marks."""
    word_re, _ = _tables()
    return word_re.findall(unicodedata.normalize("NFKC", text or "").lower())


def word_pattern() -> re.Pattern[str]:
    return _tables()[0]


def _ident() -> Any:
    global _identifier
    if _identifier is None:
        with _lock:
            if _identifier is None:
                from py3langid.langid import MODEL_FILE, LanguageIdentifier

                _identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=False)
    return _identifier


def warm() -> None:
    """Load the detector and the word tables now (about 2 s, once per process) rather than in the
    first search."""
    _tables()
    _ident()


def detect(text: str, candidates: Iterable[str] | dict[str, int] | None = None) -> str:
    """The language of ``text`` (ISO 639-1), or "" when it has no letters. With ``candidates``
    (the languages a collection holds, with their chunk counts when known) the answer is the
    likeliest of them: a short query is often ambiguous ("Python" reads as Welsh), the collection's
    languages are not. Counts weigh in as a prior (log of each language's share), so a query in a
    collection of 5,000 English abstracts and three documents read as Latin is read as Latin only
    when its words say so clearly (langid's scores are log-likelihoods: tens of nats apart for a
    sentence, a few for one word)."""
    counts = dict(candidates) if isinstance(candidates, dict) else {c: 1 for c in (candidates or ())}
    counts = {c: n for c, n in counts.items() if c and n > 0}
    if len(counts) == 1:
        return next(iter(counts))
    sample = (text or "")[:2000]
    if not any(ch.isalpha() for ch in sample):
        return max(counts, key=lambda c: counts[c]) if counts else ""
    ranked = _ident().rank(sample)
    if not counts:
        return str(ranked[0][0])
    total = sum(counts.values())
    scored = [(float(score) + math.log(counts[lang] / total), str(lang)) for lang, score in ranked if lang in counts]
    if not scored:
        return max(counts, key=lambda c: counts[c])
    return max(scored)[1]


DOCUMENT_SAMPLE = 1500  # characters of a document read to tell its language (~5 ms of py3langid)


def sample(texts: list[str], limit: int = DOCUMENT_SAMPLE) -> str:
    """Up to ``limit`` characters from chunks spread over a document (not only its first page,
    which may be a title page, a table or a licence in another language)."""
    texts = [t for t in texts if t]
    if not texts:
        return ""
    per = max(200, limit // len(texts))
    step = max(1, len(texts) * per // limit) if len(texts) * per > limit else 1
    out, n = [], 0
    for t in texts[::step]:
        out.append(t[:per])
        n += len(out[-1])
        if n >= limit:
            break
    return " ".join(out)


def detect_document(texts: list[str]) -> str:
    """The language of a document from its chunks: one language per document, so its short chunks
    (a heading, a table row, a caption) are stemmed as the rest of it, not as whatever three words
    alone look like."""
    return detect(sample(texts))


def covered(lang: str, languages: frozenset[str] | None) -> bool:
    """Whether an embedder that reads ``languages`` (None = every language) reads ``lang`` well;
    an unknown language ("") counts as read."""
    return languages is None or not lang or lang in languages


def parse_languages(value: str) -> frozenset[str] | None:
    """A config value ("en", "en,de", "*") -> the set it names (None = every language)."""
    names = {p.strip().lower() for p in (value or "").replace(";", ",").split(",") if p.strip()}
    if not names or "*" in names:
        return None
    return frozenset(names)


"""Verified citations: every sentence of an LLM answer that cites ``[N]`` is checked against source N
(docs/answers.md, "Verified citations").

The check is deterministic. A claim is the answer's sentence with its citation marks taken out; its
terms are

- numbers ("2,350" and "2350" are one number; "3.5" stays "3.5"),
- names: capitalised words other than the sentence's first word, and words with a capital or digit
  inside (acronyms, "iPhone", "COVID-19"),
- key terms: the other content words, stemmed as the quotes stem them (stop words dropped).

Source N supports the claim when it holds every number and every name of it, and at least
``citation_min_support`` of all its terms (numbers and names included: a sentence whose facts are
all there may still reword the verb). A sentence citing several sources ("[1][2]") may take its
facts from all of them: a citation counts as supported when its source alone supports the claim,
or when the cited sources together do and this one holds at least two of the claim's terms, half
of an even share of those the sources hold together, and something of its own: one of the claim's
numbers or names, or a key term none of the other cited sources holds (so a second citation of an
unrelated source that shares only common words, "note" and "tons", is still flagged).

A number written with a scale word ("$4.8 billion", "12k") is also held by a source number of the
same value at the claim's precision, the source's own scale word applied or, when it has none, read
as units, thousands, millions or billions (a table states its unit once, in a header): "4,795.5"
holds "4.8 billion", not "4.800 billion". This counts for support as well as for the closest
sentence; a bare number is matched only as written. The scale word itself is not a separate term.

Citation marks that open a sentence ("... in 2019. [2] The ...") belong to the sentence before.

Each check carries the source's best-matching sentence: its offsets into the source's text, and its
``span`` in the document's extracted text when the source has one, as quotes place theirs.

With ``[llm] entailment`` set, each citation the deterministic check accepts is also put to that
model as a yes/no question; a "no" marks it unsupported. A provider failure leaves the deterministic
verdict and says so in the check.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass, field
from typing import Any, Sequence

from ragweedd.answer.citations import _CITE_RE, cited_numbers
from ragweedd.answer.quotes import words
from ragweedd.answer.sentences import split_sentences
from ragweedd.errors import RagweedError

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_TOKEN = re.compile(r"[\w][\w'’\-]*", re.UNICODE)
_LEADING_CITES = re.compile(r"^(?:\s*\[\s*\d[\d\s,;\-–]*\]\s*(?!\())+")
_ORDINAL = re.compile(r"^\d+(?:st|nd|rd|th)$")
# capitalised words that are not names wherever they stand
_NOT_NAMES = frozenset("""
i the a an this that these those it its they their there here however also in on at by for of to and
or but if when while as according based both each all some most many no not yes
""".split())


def _norm_number(s: str) -> str:
    s = s.strip(".,")
    if re.fullmatch(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):
        s = s.replace(",", "")
    s = s.replace(",", ".") if re.fullmatch(r"\d+,\d{1,2}", s) else s
    return s


def numbers(text: str) -> set[str]:
    return {_norm_number(m) for m in _NUMBER.findall(text)}


_SCALE = {"thousand": 1e3, "k": 1e3, "million": 1e6, "m": 1e6, "mn": 1e6, "billion": 1e9, "bn": 1e9,
          "b": 1e9, "trillion": 1e12, "tn": 1e12}
# a single letter only when it is attached ("12m"): "5 m" is more often five metres
_SCALED = re.compile(r"(\d+(?:[.,]\d+)*)(?:\s?(thousand|million|billion|trillion|bn|mn|tn)\b|([kmb])\b)?", re.I)


def _scale(m: re.Match[str]) -> float | None:
    word = m.group(2) or m.group(3)
    return _SCALE[word.lower()] if word else None


def _value(num: str) -> float | None:
    try:
        return float(_norm_number(num).replace(",", ""))
    except ValueError:
        return None


def scaled_numbers(text: str) -> dict[str, tuple[float, float]]:
    """The claim's numbers written with a scale word ("$4.8 billion", "12m"): normalised number ->
    (value, half a unit of its last digit), so "4.8 billion" stands for 4.75-4.85 billion."""
    out: dict[str, tuple[float, float]] = {}
    for m in _SCALED.finditer(text):
        v, scale = _value(m.group(1)), _scale(m)
        if scale and v is not None:
            dec = len(_norm_number(m.group(1)).partition(".")[2])
            out[_norm_number(m.group(1))] = (v * scale, 0.5 * scale / 10 ** dec)
    return out


def source_values(text: str) -> set[float]:
    """Every value a source's number may stand for: with its own scale word that one; bare, itself
    and in thousands, millions and billions (a table states its unit once, in a header)."""
    out: set[float] = set()
    for m in _SCALED.finditer(text):
        v, scale = _value(m.group(1)), _scale(m)
        if v is None:
            continue
        if scale:
            out.add(v * scale)
        else:
            out.update(v * f for f in (1.0, 1e3, 1e6, 1e9))
    return out


def _near(want: tuple[float, float], values: set[float]) -> bool:
    v, half = want
    return any(abs(x - v) <= half * (1 + 1e-9) for x in values)


def _bare(tok: str) -> str:
    """A token without edge quotes and hyphens or a possessive "'s"."""
    return re.sub(r"['’]s$", "", tok).strip("'’-")


def _tokens(text: str) -> set[str]:
    return {_bare(t) for t in _TOKEN.findall(text.lower())}


def names(text: str) -> set[str]:
    """Lower-cased names of a claim (see the module doc)."""
    out: set[str] = set()
    toks = list(_TOKEN.finditer(text))
    for k, m in enumerate(toks):
        w = _bare(m.group(0))
        if not w or w.isdigit() or _ORDINAL.match(w.lower()):
            continue
        inner = any(ch.isupper() for ch in w[1:]) or (any(ch.isdigit() for ch in w) and any(ch.isalpha() for ch in w))
        first = k == 0 or re.search(r"[.!?:;]\s*$", text[:m.start()]) is not None
        if inner or (w[0].isupper() and not first and w.lower() not in _NOT_NAMES):
            out.add(w.lower())
    return out


def _no_possessive(text: str) -> str:
    return re.sub(r"['’]s\b", "", text)


Words = tuple[set[str], set[str], set[str], set[float]]


def _source_words(text: str) -> Words:
    return set(words(_no_possessive(text))), numbers(text), _tokens(text), source_values(text)


@dataclass
class Claim:
    text: str  # the sentence without its citation marks
    start: int  # offsets into the answer
    end: int
    cites: list[int]
    nums: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)
    terms: set[str] = field(default_factory=set)
    scaled: dict[str, tuple[float, float]] = field(default_factory=dict)  # numbers with a scale word
    surface: dict[str, str] = field(default_factory=dict)  # stem or lower-cased name -> as written

    def shown(self, items: list[str]) -> list[str]:
        """``items`` as the claim writes them ("carried", not the stem "carri")."""
        return [self.surface.get(i, i) for i in items]


def claims(answer: str) -> list[Claim]:
    """The answer's sentences that cite something, marks moved to the sentence they close."""
    out: list[Claim] = []
    prev: Claim | None = None
    for a, b in split_sentences(answer or ""):
        seg = answer[a:b]
        lead = _LEADING_CITES.match(seg)
        if lead and prev is not None:
            for n in cited_numbers(lead.group(0)):
                if n not in prev.cites:
                    prev.cites.append(n)
            a += lead.end()
            seg = answer[a:b]
        text = " ".join(_CITE_RE.sub(" ", seg).split())
        text = re.sub(r"\s+([.,;:!?])", r"\1", text)
        c = Claim(text, a, b, cited_numbers(seg))
        out.append(c)
        prev = c
    for c in out:
        c.nums, c.names, c.scaled = numbers(c.text), names(c.text), scaled_numbers(c.text)
        for tok in _TOKEN.findall(_no_possessive(c.text)):
            w = _bare(tok)
            for key in (w.lower(), *words(w)):
                c.surface.setdefault(key, w)
        name_words = {w for n in c.names for w in words(n)}
        # "billion" in "$4.8 billion" is part of the number, matched with it
        scale_words = set(_SCALE) if c.scaled else set()
        c.terms = {t for t in words(_no_possessive(c.text))
                   if not t.isdigit() and t not in name_words and t not in scale_words}
    return [c for c in out if c.cites and (c.terms or c.nums or c.names)]


def _has_number(c: Claim, n: str, nums: set[str], values: set[float]) -> bool:
    """Written alike, or, for a number with a scale word, the same value at the claim's precision
    ("4.8 billion" is held by "4,795.5" in a table in millions)."""
    return n in nums or (n in c.scaled and _near(c.scaled[n], values))


def _coverage(c: Claim, src: Words) -> tuple[float, list[str], int]:
    """(share of all the claim's terms held, what is missing, how many are held)."""
    terms, nums, toks, values = src
    missing = sorted(n for n in c.nums if not _has_number(c, n, nums, values))
    missing += sorted(n for n in c.names if n not in toks)
    missing += sorted(c.terms - terms)
    total = len(c.terms) + len(c.nums) + len(c.names)
    held = total - len(missing)
    return (held / total if total else 1.0), missing, held


def _distinctive(c: Claim, n: int, cited: list[int], src_words: Any) -> bool:
    """Whether source ``n`` holds one of the claim's numbers or names, or a key term none of the
    other cited sources holds. Shared common words ("note", "tons") are not a contribution."""
    terms, nums, toks, values = src_words(n)
    if any(_has_number(c, x, nums, values) for x in c.nums) or any(x in toks for x in c.names):
        return True
    others: set[str] = set()
    for m in cited:
        if m != n:
            others |= src_words(m)[0]
    return bool((c.terms & terms) - others)


def _passes(c: Claim, share: float, missing: list[str], min_support: float) -> bool:
    hard = [m for m in missing if m in c.nums or m in c.names]
    return not hard and share >= min_support


def best_sentence(c: Claim, source: dict) -> dict[str, Any] | None:
    text = source.get("text") or ""
    best, best_score = None, -1.0
    want = c.terms | c.nums | c.names
    if not text or not want:
        return None
    for a, b in split_sentences(text):
        s = text[a:b]
        terms, nums, toks, values = _source_words(s)
        score = (len(c.terms & terms) + 2 * sum(1 for n in c.nums if _has_number(c, n, nums, values))
                 + 2 * sum(1 for n in c.names if n in toks))
        if score > best_score:
            best, best_score = (a, b), score
    if best is None:
        return None
    a, b = best
    span = source.get("span") or [None]
    base = span[0] if isinstance(span[0], int) else None
    return {"text": text[a:b], "offsets": [a, b], "span": [base + a, base + b] if base is not None else None,
            "score": round(best_score / (len(c.terms) + 2 * len(c.nums) + 2 * len(c.names)), 4)}


def verify(answer: str, sources: Sequence[dict], *, min_support: float = 0.6) -> list[dict[str, Any]]:
    """One check per (claim, cited source number); see the module doc. A number no source has is
    checked too, unsupported with ``no_source``."""
    by_n = {s.get("n"): s for s in sources}
    cache: dict[int, Words] = {}

    def src_words(n: int) -> Words:
        if n not in cache:
            cache[n] = _source_words(by_n[n].get("text") or "")
        return cache[n]

    out: list[dict[str, Any]] = []
    for c in claims(answer):
        valid = [n for n in c.cites if n in by_n]
        union: Words = (set(), set(), set(), set())
        for n in valid:
            for part, add in zip(union, src_words(n)):
                part |= add  # type: ignore[operator]
        u_share, u_missing, u_held = _coverage(c, union)
        together = _passes(c, u_share, u_missing, min_support)
        for n in valid:
            share, missing, held = _coverage(c, src_words(n))
            alone = _passes(c, share, missing, min_support)
            # with several sources cited, each must carry at least half of an even share of the claim
            # and something of its own: a number or name, or a term no other cited source holds
            supported = alone or (together and len(valid) > 1 and held >= max(2.0, u_held / (2 * len(valid)))
                                  and _distinctive(c, n, valid, src_words))
            out.append({"n": n, "claim": c.text, "answer_span": [c.start, c.end], "supported": supported,
                        "score": round(share, 4), "missing": c.shown(missing) if not supported else [],
                        "method": "terms", "source_sentence": best_sentence(c, by_n[n])})
        # a number no source has supports nothing: the claim stands on a source the reader cannot see
        for n in dict.fromkeys(n for n in c.cites if n not in by_n):
            out.append({"n": n, "claim": c.text, "answer_span": [c.start, c.end], "supported": False,
                        "score": 0.0, "missing": [], "method": "terms", "source_sentence": None,
                        "no_source": True})
    return out


def yes_no(text: str) -> bool | None:
    """The model's verdict: its first word when that is yes or no, else the only one of them it
    says; None when it says neither or both."""
    said = re.findall(r"[a-z]+", (text or "").lower())
    if said and said[0] in ("yes", "no"):
        return said[0] == "yes"
    found = {w for w in said if w in ("yes", "no")}
    return (found == {"yes"}) if len(found) == 1 else None


ENTAIL_SYSTEM = "You check whether a passage supports a claim. Answer only yes or no."
ENTAIL_PROMPT = """Passage:
{passage}

Claim: {claim}

Does the passage support every part of the claim? Answer "yes" or "no"."""


async def entail(checks: list[dict[str, Any]], sources: Sequence[dict], provider: Any, *,
                 concurrency: int = 4) -> dict[str, Any]:
    """Ask ``provider`` about every supported check; a "no" unsupports it. Returns the cost; a
    provider failure leaves the rest as the deterministic check said (``entailment_error``)."""

    by_n = {s.get("n"): s for s in sources}
    sem = asyncio.Semaphore(max(1, concurrency))
    cost = {"calls": 0, "input_tokens": 0, "output_tokens": 0}

    async def one(ch: dict[str, Any]) -> None:
        passage = " ".join(str(by_n[ch["n"]].get("text") or "").split())[:4000]
        msgs = [{"role": "system", "content": ENTAIL_SYSTEM},
                {"role": "user", "content": ENTAIL_PROMPT.format(passage=passage, claim=ch["claim"])}]
        try:
            async with sem:
                r = await provider.complete(msgs, max_tokens=16, temperature=0.0)
            cost["calls"] += 1
            cost["input_tokens"] += int((r.usage or {}).get("input_tokens") or 0)
            cost["output_tokens"] += int((r.usage or {}).get("output_tokens") or 0)
            yes = yes_no(r.text)
        except RagweedError as e:
            ch["entailment_error"] = str(e)[:300]
            return
        if yes is None:
            ch["entailment_error"] = f"the entailment model answered {' '.join(r.text.split())[:80]!r}, not yes or no"
            return
        ch["method"] = "terms+llm"
        ch["entailed"] = yes
        if not yes:
            ch["supported"] = False

    await asyncio.gather(*(one(ch) for ch in checks if ch["supported"]))
    return cost

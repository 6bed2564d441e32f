"""Citation checks: every ``[N]`` in an answer must name a source that was in the prompt.

Accepted forms: ``[1]``, ``[1, 3]``, ``[1,3]``, ``[1; 3]``, ``[2][3]``, ``[1-3]`` / ``[1–3]`` (a range).
Markdown links (``[1](http://...)``) are not citations. Refusal detection lives here too because it
is the other check made on a finished answer.
"""

from __future__ import annotations

import re

from ragweedd.answer.prompts import REFUSAL

_CITE_RE = re.compile(r"\[\s*(\d{1,4}(?:\s*(?:[,;]|[-–])\s*\d{1,4})*)\s*\](?!\()")
_PART_RE = re.compile(r"(\d+)\s*[-–]\s*(\d+)|(\d+)")
_MAX_RANGE = 50  # "[1-9999]" is not a citation of 9,999 sources


def cited_numbers(answer: str) -> list[int]:
    """Source numbers in order of first appearance, each once."""
    seen: dict[int, None] = {}
    for m in _CITE_RE.finditer(answer or ""):
        for a, b, single in _PART_RE.findall(m.group(1)):
            if single:
                seen.setdefault(int(single), None)
            else:
                lo, hi = int(a), int(b)
                if lo <= hi and hi - lo <= _MAX_RANGE:
                    for n in range(lo, hi + 1):
                        seen.setdefault(n, None)
                else:
                    seen.setdefault(lo, None)
                    seen.setdefault(hi, None)
    return list(seen)


def check_citations(answer: str, n_sources: int) -> dict:
    """``{"cited": [valid numbers], "invalid": [numbers with no source]}``, both in order of appearance."""
    nums = cited_numbers(answer)
    return {"cited": [n for n in nums if 1 <= n <= n_sources],
            "invalid": [n for n in nums if not 1 <= n <= n_sources]}


def _norm(s: str) -> str:
    s = _CITE_RE.sub(" ", s)
    return re.sub(r"[\s\"'*_`]+", " ", s).strip().rstrip(".").strip().lower()


_REFUSAL_NORM = _norm(REFUSAL)


def is_refusal(answer: str) -> bool:
    """True when the answer contains the refusal sentence (case, spacing and markup ignored)."""
    return _REFUSAL_NORM in _norm(answer or "")


def is_pure_refusal(answer: str) -> bool:
    return _norm(answer or "") == _REFUSAL_NORM

"""Periods written as one word ("FY2015", "FY15", "Q3'22", "H1'24") spelled out as the words a
document uses for them: "fiscal 2015", "q3 2022". A filing heads its columns "2015" and
writes "fiscal 2015" in prose; a question writes "FY2015", one token that neither the keyword index
nor a sentence's words would otherwise meet. Shared by the keyword plan (query words) and the
extractive answer (sentence words)."""

from __future__ import annotations

import re

_PERIOD = re.compile(r"\b(fy|cy|q[1-4]|h[12])'?(\d{2}|\d{4})\b", re.I)
_PERIOD_WORD = {"fy": "fiscal", "cy": "calendar"}


def _spelled(m: re.Match) -> str:
    kind, year = m.group(1).lower(), m.group(2)
    return f"{_PERIOD_WORD.get(kind, kind)} {'20' + year if len(year) == 2 else year}"


def spell_periods(text: str) -> str:
    """``text`` with each one-word period replaced by its words ("FY15" -> "fiscal 2015")."""
    return _PERIOD.sub(_spelled, text)

"""The financial statements a question names and a heading is the title of: "income", "balance",
"cash". Shared by the search (query/named.py), which ranks a named statement's chunks first, and the
extractive answer (answer/quotes.py), which counts a statement's rows as naming it; the names are
the ones US GAAP and IFRS filings use (docs/retrieval.md, "Named years and statements")."""

from __future__ import annotations

import re
from typing import Iterator

# A heading is a statement's title when the name opens it or follows "Consolidated" (or
# "Condensed", "Combined"), after the company's name if any: "Consolidated Balance Sheets", "The
# Boeing Company and Subsidiaries Consolidated Statements of Financial Position". A note that only
# mentions one ("Supplemental balance sheet information related to leases") is not the statement.
_TITLE = (r"(?:^\W*|\b(?:consolidated|condensed|combined)(?:\s+(?:consolidated|condensed|combined))?\s+)"
          r"(?:{})")


def _title(names: str) -> re.Pattern[str]:
    return re.compile(_TITLE.format(names), re.I)


# kind -> (how a question names it, how the statement's title names it)
_STATEMENTS: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "income": (
        re.compile(r"\bincome statements?\b|\bstatements? of (consolidated )?(income|operations|earnings)\b"
                   r"|\bprofit (and|&) loss (statement|account)\b|\bP&L\b", re.I),
        _title(r"statements? of (?:comprehensive )?(?:income|operations|earnings)|income statements?"
               r"|statements? of (?:profit|loss)|profit (?:and|or) loss")),
    "balance": (
        re.compile(r"\bbalance sheets?\b|\bstatements? of financial (position|condition)\b", re.I),
        _title(r"balance sheets?|statements? of financial (?:position|condition)")),
    "cash": (
        re.compile(r"\bcash flows? statements?\b|\bstatements? of cash flows?\b", re.I),
        _title(r"statements? of cash flows?|cash flows? statements?")),
}


def named_statements(query: str) -> set[str]:
    """The statements a question names: a subset of "income", "balance", "cash"."""
    return {kind for kind, (asked, _) in _STATEMENTS.items() if asked.search(query or "")}


# "... are classified in our Consolidated Statements of Earnings": a sentence that refers to one
_REFERS = re.compile(r"\b(?:our|the|in|into|to|of|from|within|on|see|its|their)\W*$", re.I)


def _headed(text: str) -> Iterator[tuple[str, re.Match[str]]]:
    """(statement kind, match) for each statement heading in ``text`` that is not a reference to
    one ("see the Consolidated Statements of Cash Flows")."""
    for kind, (_, heads) in _STATEMENTS.items():
        for m in heads.finditer(text):
            if not _REFERS.search(text[:m.start()]):
                yield kind, m


def headed_statements(heading: str) -> set[str]:
    """The statements a chunk's heading or table title says it is part of."""
    return {kind for kind, _ in _headed(heading or "")}


def statement_title(heading: str) -> str | None:
    """The statement's own title in a table title or heading that is one ("Consolidated Statements
    of Financial Position" of "Table of Contents The Boeing Company and Subsidiaries Consolidated
    Statements of Financial Position (Dollars in millions)"), else None."""
    found = [m for _, m in _headed(heading or "")]
    if not found:
        return None
    first = min(found, key=lambda m: m.start())
    return " ".join(first.group(0).split()).strip(" -–—:,.;") or None

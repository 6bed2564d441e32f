"""Questions that name a financial statement look in that statement first.

A question about a filing often says which statement holds its figure ("using the cash flow
statement", "based on the balance sheet"), and the figure sits on that statement's page. Neither
leg of the search ranks that page first by itself: the statement is a table of figures the
embedder reads poorly, and the words that name it are common in every filing, so the notes and the
discussion that repeat the question's words come first. The chunks know which statement they are
in (their section heading or their table's title, chunk/context.py), so when a question names one:

1. the fused ranking becomes ranks, ``1 / (RANK_K + rank)``, a scale that does not depend on the
   fusion's (z-scores can be negative);
2. a chunk in a statement the question names is multiplied by ``1 + BOOST``;
3. the chunks of that statement in the best-ranked document that neither leg found join the
   results at ``PULL`` x its best chunk's boosted rank score, in document order: a statement
   the search ranked nowhere is still read from the document the question is about.

The names are the ones filings use under US GAAP and IFRS (docs/retrieval.md, "Statements
named"). Measured on FinanceBench dev, hybrid (benchmarks/financebench.py): page hit@5 0.423 ->
0.577 and page hit@1 0.192 -> 0.269, document hit@5 unchanged at 0.949; 29 of its 78 questions
name a statement. Other questions are ranked as before.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

RANK_K = 10
BOOST = 2.0
PULL = 0.7

# kind -> (how a question names it, how a statement's heading or table title names it)
_STATEMENTS: dict[str, tuple[re.Pattern[str], re.Pattern[str]]] = {
    "income": (
        re.compile(r"\bincome statements?\b|\bstatements? of (consolidated )?(income|operations|earnings)\b"
                   r"|\bprofit (and|&) loss (statement|account)\b|\bP&L\b", re.I),
        re.compile(r"statements? of (consolidated |comprehensive )?(income|operations|earnings)"
                   r"|income statements?|statements? of (profit|loss)|profit (and|or) loss", re.I)),
    "balance": (
        re.compile(r"\bbalance sheets?\b|\bstatements? of financial (position|condition)\b", re.I),
        re.compile(r"balance sheets?|statements? of financial (position|condition)", re.I)),
    "cash": (
        re.compile(r"\bcash flows? statements?\b|\bstatements? of cash flows?\b", re.I),
        re.compile(r"statements? of (consolidated )?cash flows?|cash flows? statements?", re.I)),
}


def named_statements(query: str) -> set[str]:
    """The statements a question names: a subset of "income", "balance", "cash"."""
    return {kind for kind, (asked, _) in _STATEMENTS.items() if asked.search(query or "")}


def headed_statements(heading: str) -> set[str]:
    """The statements a chunk's heading or table title says it is part of."""
    return {kind for kind, (_, heads) in _STATEMENTS.items() if heads.search(heading or "")}


def heading_of(hit: dict[str, Any]) -> str:
    return " ".join(str(hit.get(k) or "") for k in ("section", "table_title"))


def rank_named_statements(query: str, briefs: list[dict[str, Any]],
                          headings: Callable[[str, list[int]], dict[int, str]],
                          statement_chunks: Callable[[str, str, set[str]], Iterable[dict[str, Any]]],
                          ) -> dict[str, Any] | None:
    """Re-score ``briefs`` (every fused candidate, with ``score``, ``collection``, ``embedding_id``
    and ``doc_id``) in place for a question that names a statement, and append the best document's
    statement chunks that are not among them. ``headings(collection, ids)`` gives each chunk's
    heading text; ``statement_chunks(collection, doc_id, kinds)`` the chunks of a document in
    those statements, as briefs without scores, in document order. Returns what it did for the
    search's meta, or None when the question names no statement."""
    kinds = named_statements(query)
    if not kinds or not briefs:
        return None
    order = sorted(briefs, key=lambda h: (-h["score"], h["collection"], h["embedding_id"]))
    by_col: dict[str, list[int]] = {}
    for h in order:
        by_col.setdefault(h["collection"], []).append(h["embedding_id"])
    heads: dict[tuple[str, int], str] = {}
    for col, ids in by_col.items():
        heads.update(((col, cid), text) for cid, text in headings(col, ids).items())
    boosted = 0
    for rank, h in enumerate(order):
        h["score"] = 1.0 / (RANK_K + rank + 1)
        if headed_statements(heads.get((h["collection"], h["embedding_id"]), "")) & kinds:
            h["score"] *= 1 + BOOST
            boosted += 1
    top = order[0]
    have = {(h["collection"], h["embedding_id"]) for h in briefs}
    base = PULL * (1 + BOOST) / (RANK_K + 1)
    pulled = 0
    for h in statement_chunks(top["collection"], top["doc_id"], kinds):
        if (h["collection"], h["embedding_id"]) in have:
            continue
        # document order among themselves, below the chunks the search ranked at the same level
        h.update(score=base * (1 - 1e-6 * (pulled + 1)), sim=None, bm25=None, fts=False, dense_rank=None,
                 fts_rank=None, known_item=False)
        briefs.append(h)
        pulled += 1
    return {"statements": sorted(kinds), "boosted": boosted, "pulled": pulled,
            "document": top["doc_id"]}

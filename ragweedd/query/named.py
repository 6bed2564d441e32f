"""What a question names that says where its answer is: a financial statement, a period.

A question about a filing names the company, the period and often the statement that holds its
figure ("What is Boeing's FY2018 net PP&E? Use the balance sheet."), and the answer sits on that
statement's page of that period's filing. Neither leg of the search ranks it first by itself: the
statement is a table of figures the embedder reads poorly, the words that name it are common in
every filing, and every filing of a company repeats the same years in its tables, so the notes and
the discussion that repeat the question's words, in any year's filing, come first. So when a
question names a year (written as one: "2018", or as a period: "FY2018", "Q2'23") or a statement:

1. the fused ranking becomes ranks, ``1 / (RANK_K + rank)``, a scale that does not depend on the
   fusion's (z-scores can be negative);
2. a chunk of a document whose file name (or folder name) holds a year the question names is
   multiplied by ``1 + YEAR_BOOST``: files are named for the period they cover
   ("BOEING_2018_10K.pdf", "minutes 2021-03.docx"), and a year is the one thing a question and a
   file name share that the text cannot tell apart;
3. a chunk in a statement the question names (its section heading or its table's title says so,
   chunk/context.py) is multiplied by ``1 + BOOST``;
4. the chunks of that statement in the best-ranked document that neither leg found join the
   results at ``PULL`` x its best chunk's rank score, boosted as 3. would, in document order: a
   statement the search ranked nowhere is still read from the document the question is about.

Statement names are the ones US GAAP and IFRS filings use. docs/retrieval.md ("Named years and
statements") has the measurements on FinanceBench dev and how the weights were chosen. A question
that names neither is ranked as before.
"""

from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any, Callable, Iterable

from ragweedd.periods import spell_periods
from ragweedd.statements import headed_statements, named_statements

RANK_K = 10
YEAR_BOOST = 1.0
BOOST = 2.0
PULL = 0.7
_YEAR = re.compile(r"^(19|20)\d\d$")


def named_years(query: str) -> set[str]:
    """The years a question names, as words or inside a period ("FY2018", "Q2'23")."""
    return {w for w in re.findall(r"[^\W_]+", spell_periods(query or "")) if _YEAR.match(w)}


def years_of_name(path: str) -> set[str]:
    """The years a file's name or its folder's name holds ("BOEING_2018_10K.pdf", "2021/minutes.md")."""
    p = PurePath(path or "")
    return {w for w in re.findall(r"(?<![0-9])(?:19|20)\d\d(?![0-9])", f"{p.parent.name} {p.name}")}


def rank_named(query: str, briefs: list[dict[str, Any]],
               headings: Callable[[str, list[int]], dict[int, str]],
               statement_chunks: Callable[[str, str, set[str]], Iterable[dict[str, Any]]],
               ) -> dict[str, Any] | None:
    """Re-score ``briefs`` (every fused candidate, with ``score``, ``collection``, ``embedding_id``,
    ``doc_id`` and ``source_file``) in place for a question that names a year or a statement, and
    append the best document's statement chunks that are not among them. ``headings(collection,
    ids)`` gives each chunk's heading text; ``statement_chunks(collection, doc_id, kinds)`` the
    chunks of a document in those statements, as briefs without scores, in document order.
    Returns what it did for the search's meta, or None when the question names neither."""
    kinds = named_statements(query)
    years = named_years(query)
    if not (kinds or years) or not briefs:
        return None
    order = sorted(briefs, key=lambda h: (-h["score"], h["collection"], h["embedding_id"]))
    fused = [h["score"] for h in order]
    heads: dict[tuple[str, int], str] = {}
    if kinds:
        by_col: dict[str, list[int]] = {}
        for h in order:
            by_col.setdefault(h["collection"], []).append(h["embedding_id"])
        for col, ids in by_col.items():
            heads.update(((col, cid), text) for cid, text in headings(col, ids).items())
    in_year = in_statement = 0
    name_years: dict[str, set[str]] = {}
    before_statements: dict[int, float] = {}  # id(brief) -> its rank score with the year boost
    for rank, h in enumerate(order):
        h["score"] = 1.0 / (RANK_K + rank + 1)
        src = h.get("source_file") or ""
        if years and (name_years.setdefault(src, years_of_name(src)) & years):
            h["score"] *= 1 + YEAR_BOOST
            in_year += 1
        before_statements[id(h)] = h["score"]
        if kinds and headed_statements(heads.get((h["collection"], h["embedding_id"]), "")) & kinds:
            h["score"] *= 1 + BOOST
            in_statement += 1
    meta: dict[str, Any] = {"years": sorted(years), "statements": sorted(kinds), "in_year": in_year,
                            "in_statement": in_statement, "pulled": 0, "document": None}
    if not kinds:
        if not in_year:  # nothing moved: the fusion's own scores stay, as for any other question
            for h, score in zip(order, fused):
                h["score"] = score
        return meta
    # the document the question is about: the best-ranked one before any statement counted
    top = max(order, key=lambda h: before_statements[id(h)])
    have = {(h["collection"], h["embedding_id"]) for h in briefs}
    base = PULL * (1 + BOOST) * before_statements[id(top)]
    pulled = 0
    for h in statement_chunks(top["collection"], top["doc_id"], kinds):
        if (h["collection"], h["embedding_id"]) in have:
            continue
        # document order among themselves, below the chunks the search ranked at the same level
        h.update(score=base * (1 - 1e-6 * (pulled + 1)), sim=None, bm25=None, fts=False, dense_rank=None,
                 fts_rank=None, known_item=False)
        briefs.append(h)
        pulled += 1
    meta.update(pulled=pulled, document=top["doc_id"])
    return meta


"""What the PostgreSQL store builds from user input, without a server: the keyword query
becomes a tsquery of parameters only, and a file-name glob a whole-name regular expression."""

import re

import pytest

from ragweedd.store.postgres.pg_ingest import glob_regex
from ragweedd.store.postgres.pg_keyword import tsquery_sql
from ragweedd.store.types import Terms, all_of, any_of


def test_planner_queries_become_parameterised_tsqueries():
    # words and phrases hold index terms (ragweedd/keyterms.py): each becomes a tsquery literal of
    # its lexemes, a phrase when several, parsed by no text search configuration
    q = any_of([Terms(("heart", "attack")), all_of([Terms(("cell",)), Terms(("divid",))])])
    sql, params = tsquery_sql(q)
    assert params == ["'heart' <-> 'attack'", "'cell'", "'divid'"]
    assert sql == "(%s::tsquery || (%s::tsquery && %s::tsquery))"
    assert tsquery_sql(Terms(("北京", "京大")))[1] == ["'北京' <-> '京大'"]
    # a quote inside a term (the planner never makes one) is escaped, not closed
    assert tsquery_sql(Terms(("say", '"hi"')))[1] == ["'say' <-> '\"hi\"'"]


@pytest.mark.parametrize("word", ["'; DROP TABLE chunks; --", "a & b", "a | !b", "x:*", "(a"])
def test_no_text_of_a_word_becomes_sql_or_an_operator(word):
    sql, params = tsquery_sql(Terms((word,)))
    assert sql == "%s::tsquery" and len(params) == 1 and params[0].startswith("'") and params[0].endswith("'")


@pytest.mark.parametrize("glob, yes, no", [
    ("*.pdf", ["/r/a.pdf", "/r/x/b.pdf"], ["/r/a.pdfx", "/r/apdf"]),
    ("/r/?", ["/r/a"], ["/r/ab", "/r/"]),
    ("[!a-b]", ["c"], ["a", "b"]),
    ("a.b", ["a.b"], ["axb"]),
    ("[x", ["[x"], ["x"]),
    ("*(1)+$^", ["/r/f(1)+$^"], ["/r/f1"]),
])
def test_glob_regex_matches_what_fnmatch_matches(glob, yes, no):
    rx = glob_regex(glob)
    for name in yes:
        assert re.search(rx, name), (glob, rx, name)
    for name in no:
        assert not re.search(rx, name), (glob, rx, name)


def test_the_postgresql_bm25_uses_the_rescoring_constants():
    from ragweedd.query import bm25
    from ragweedd.store.postgres import pg_keyword

    assert (pg_keyword.K1, pg_keyword.B) == (bm25.K1, bm25.B)

"""What the PostgreSQL store builds from user input, without a server: the keyword expression
becomes a tsquery of parameters only, and a file-name glob a whole-name regular expression."""

import re

import pytest

from ragweedd.errors import RequestError
from ragweedd.store.pg_ingest import glob_regex
from ragweedd.store.pg_keyword import tsquery_sql


def test_planner_expressions_become_parameterised_tsqueries():
    # quoted strings hold index terms (ragweedd/keyterms.py): each becomes a tsquery literal of
    # its lexemes, a phrase when several, parsed by no text search configuration
    sql, params = tsquery_sql('"heart attack" OR "cell" AND "divid"')
    assert params == ["'heart' <-> 'attack'", "'cell'", "'divid'"]
    assert sql == "(%s::tsquery || (%s::tsquery && %s::tsquery))"
    sql, params = tsquery_sql('("a" OR "b") "c" NOT "d"')
    assert params == ["'a'", "'b'", "'c'", "'d'"] and sql.count("%s") == 4 and "!!" in sql
    assert tsquery_sql('"北京 京大"')[1] == ["'北京' <-> '京大'"]
    # a quote inside a term (the planner never makes one) is escaped, not closed
    assert tsquery_sql('"say ""hi"""')[1] == ["'say' <-> '\"hi\"'"]


@pytest.mark.parametrize("expr", ["cells", '"a" OR', '"a" )', '("a"', "'; DROP TABLE chunks; --", '"a" NEAR "b"',
                                  '"a" * "b"', ""])
def test_anything_else_is_refused(expr):
    with pytest.raises(RequestError):
        tsquery_sql(expr)


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
    from ragweedd.store import pg_keyword

    assert (pg_keyword.K1, pg_keyword.B) == (bm25.K1, bm25.B)

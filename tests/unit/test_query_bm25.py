"""BM25 computed outside FTS5 for chosen rows and terms (query/bm25.py, FtsReader.row_stats) must be
FTS5's own bm25(): the OR tier adds the scores of the words its budget left out to FTS5's scores,
and score fusion compares them with FTS5's."""

import random
import sqlite3

import pytest

from ragweedd import keyterms
from ragweedd.config import load_config
from ragweedd.query.bm25 import Bm25Terms, fts5_idf
from ragweedd.query.fts_plan import execute, make_plan, phrase_of
from ragweedd.store.sqlite.fts_reader import STEMMER, FtsReader
from ragweedd.store.sqlite.rag_keywords import fts5_match
from ragweedd.store.types import any_of
from tests.query_support import fts_db, idf_cache

WORDS = ("cell cells protein membrane folding mitosis divides heart attack study onset elderly café "
         "Zürich running runs ran the of and in").split()


def real_schema_db(texts: list[tuple[str, str]]) -> sqlite3.Connection:
    """fts_chunks as a collection has it: content and the context line both indexed."""
    return fts_db(texts)


@pytest.fixture
def reader():
    rng = random.Random(4)
    texts = [(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 40))),
              " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6)))) for _ in range(300)]
    c = real_schema_db(texts)
    yield FtsReader(c)
    c.close()


def en(word: str) -> str:
    """A word's index term, as an English chunk holds it (ragweedd/keyterms.py)."""
    return keyterms.index_form(word, "en")


def fts5_scores(reader: FtsReader, words: list[str]) -> dict[int, float]:
    expr = fts5_match(any_of([t for t in (phrase_of(en(w)) for w in words) if t is not None]))
    return {int(r[0]): -float(r[1]) for r in reader.conn.execute(
        "SELECT rowid, bm25(fts_chunks) FROM fts_chunks WHERE fts_chunks MATCH ?", (expr,))}


def n_rows(reader: FtsReader) -> int:
    return int(reader.conn.execute("SELECT count(*) FROM fts_chunks").fetchone()[0])


def terms_for(reader: FtsReader, words: list[str]) -> Bm25Terms:
    n = n_rows(reader)
    return Bm25Terms({en(w): fts5_idf(reader.df_word(en(w)), n) for w in words}, reader.mean_row_tokens())


@pytest.mark.parametrize("words", [["protein"], ["cells", "membrane"], ["the", "of", "running", "café"],
                                   ["heart", "attack", "onset", "elderly", "zürich", "divides"]])
def test_scores_are_fts5_bm25(reader, words):
    want = fts5_scores(reader, words)
    assert want, "the corpus holds the words"
    got = terms_for(reader, words).score_rows(reader, list(want) + [10_000])
    assert got.pop(10_000) == 0.0  # a row that does not exist scores nothing
    assert got == pytest.approx(want, rel=1e-9)


def test_row_stats_count_every_column_as_fts5_does(reader):
    lengths, counts = reader.row_stats([1, 2, 3], ["cell", "run"])
    for rid in (1, 2, 3):
        content, context = reader.conn.execute("SELECT content, context FROM fts_chunks WHERE rowid = ?",
                                               (rid,)).fetchone()
        toks = keyterms.terms(content, "en") + keyterms.terms(context, "en")
        assert lengths[rid] == len(toks)
        assert counts.get(rid, {}) == {t: toks.count(t) for t in ("cell", "run") if t in toks}
    total = sum(len(keyterms.terms(r[0], "en")) + len(keyterms.terms(r[1], "en"))
                for r in reader.conn.execute("SELECT content, context FROM fts_chunks"))
    assert reader.mean_row_tokens() == pytest.approx(total / n_rows(reader))


def test_words_left_out_by_the_budget_still_count(reader):
    """With a budget that leaves the commoner words out of MATCH, the rows found score exactly as
    plain BM25 over every word scores them, and come in that order."""
    q = "protein membrane the of cells"
    cfg = load_config(text="synonyms_enabled = false\nfts_min_query_ic = 0.0", env={})
    plan = make_plan(q, idf_cache(reader), cfg)
    dfs = sorted(w.df for w in plan.words)
    assert len(set(dfs)) == 5
    budget = dfs[0] + dfs[1]  # room for the two rarest words only
    hits, meta = execute(reader, plan, 150, max_postings=budget)
    tier = meta["tiers"][-1]
    assert tier["tier"] == 2 and len(tier["left_out_for_budget"]) == 3
    commonest = sorted(plan.words, key=lambda w: w.df)[2:]
    assert sorted(tier["left_out_scored"]) == sorted(STEMMER.terms(w.word)[0] for w in commonest)
    full = fts5_scores(reader, q.split())
    assert {i: s for i, s in hits} == pytest.approx({i: full[i] for i, _ in hits}, rel=1e-9)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    # without the left-out words' share, FTS5's own ranking of the same MATCH differs
    # (the meta's description of the query is FTS5's own syntax)
    partial = {int(r[0]): -float(r[1]) for r in reader.conn.execute(
        "SELECT rowid, bm25(fts_chunks) FROM fts_chunks WHERE fts_chunks MATCH ?", (tier["match"],))}
    assert any(abs(partial[i] - s) > 1e-6 for i, s in hits)


def test_row_stats_count_the_index_form_of_any_language():
    """Rows in German and Chinese: the counts are those of their stems and bigrams, as FTS5 sees them."""
    c = fts_db([("Die Häuser und das Haus", ""), ("北京大学在北京", "")], lang=None)
    r = FtsReader(c)
    lengths, counts = r.row_stats([1, 2], ["haus", "北京"])
    assert counts == {1: {"haus": 2}, 2: {"北京": 2}}
    assert lengths == {1: 5, 2: 6}


"""The FTS5 plan on a real FTS5 table: words, IC gate, pruning, synonym budgets, tiers, OR budget,
and hostile queries that must never reach MATCH as syntax."""

import math

import pytest

from ragweedd.config import load_config
from ragweedd.errors import RequestError
from ragweedd.query.fts_plan import MIN_TIER_HITS, execute, known_item_rows, make_plan, phrase_of, query_words
from ragweedd.query.wordnet import WordNet
from ragweedd.store.sqlite.fts_reader import FtsReader
from ragweedd.store.types import Terms, all_of, any_of, describe
from tests.query_support import fts_db, fts_search, idf_cache, require_wordnet

CORPUS = (
    ["the protein folding in the cell membrane"] * 3
    + ["the cell divides by mitosis", "the heart attack victims recovered", "the myocardial infarction study",
       "the onset of disease in the elderly", "the café in Zürich sells coffee", "the Über-cool naïve résumé",
       "the 5G network and IL-6 cytokine levels", "the and or not near", "the the the the"]
)


def cfg(**kw):
    body = "\n".join(f"{k} = {v!r}".replace("'", '"') if isinstance(v, str) else f"{k} = {str(v).lower()}"
                     for k, v in kw.items())
    return load_config(text=body, env={})


@pytest.fixture
def conn():
    c = fts_db(CORPUS)
    yield FtsReader(c)
    c.close()


def test_query_words_are_the_index_terms_of_unicode_alphanumeric_runs():
    # English: Porter stems of the folded words, as fts_chunks' porter unicode61 gave before
    assert query_words("Zürich's café, naïve-résumé; IL-6 & 5G!") == [
        "zurich", "s", "cafe", "naiv", "resum", "il", "6", "5g"]
    # scripts without spaces: character bigrams
    assert query_words("Ωmega Δ 東京 タワー") == ["ωmega", "δ", "東京", "タワ", "ワー"]
    assert query_words("Häuser der Städte", "de") == ["haus", "der", "stadt"]
    assert query_words("___ --- ***") == []
    assert query_words("Cell cell CELL") == ["cell"]


def test_a_period_written_as_one_word_also_brings_the_words_documents_use_for_it():
    assert query_words("Adobe FY2015 revenue") == ["adob", "fy2015", "revenu", "fiscal", "2015"]
    assert query_words("capex in FY18 and Q3'22") == ["capex", "in", "fy18", "and", "q3", "22",
                                                      "fiscal", "2018", "2022"]
    assert query_words("fy 2015 hyfy20155") == ["fy", "2015", "hyfy20155"]  # no period word: nothing added


def test_a_one_word_period_finds_the_rows_that_write_it_out():
    # the 2014 row is the shorter one: on "revenue" alone BM25 would put it first
    rows = fts_db(["Revenue, fiscal 2014: 4,147", "Revenue for fiscal 2015 was 4,796 million dollars",
                   "Net income 2015 was 629 million"] + CORPUS)
    reader = FtsReader(rows)
    try:
        hits, meta = fts_search(reader, "FY2015 revenue", idf_cache(reader), cfg(), 1)
        top = rows.execute("SELECT content FROM fts_chunks WHERE rowid = ?", (hits[0][0],)).fetchone()[0]
        assert top == "Revenue for fiscal 2015 was 4,796 million dollars", meta
    finally:
        rows.close()


def test_a_word_becomes_a_phrase_of_alphanumerics_only():
    assert phrase_of('he"art') == Terms(("he", "art"))
    assert phrase_of("heart attack") == Terms(("heart", "attack"))
    assert phrase_of("*^-:()") is None


def test_each_backend_renders_the_query_tree_with_no_operator_from_a_word():
    from ragweedd.store.postgres.pg_keyword import tsquery_sql
    from ragweedd.store.sqlite.rag_keywords import fts5_match

    q = any_of([Terms(("heart", "attack")), all_of([Terms(("cell",)), Terms(('di"vid',))])])
    assert fts5_match(q) == '("heart attack" OR ("cell" AND "di""vid"))'
    assert describe(q) == '"heart attack" OR ("cell" AND "di""vid")'
    sql, params = tsquery_sql(q)
    assert sql == "(%s::tsquery || (%s::tsquery && %s::tsquery))"
    assert params == ["'heart' <-> 'attack'", "'cell'", "'di\"vid'"]
    assert all_of([Terms(("x",))]) == Terms(("x",)) == any_of([Terms(("x",))])
    with pytest.raises(RequestError):
        any_of([])


HOSTILE = ['"', '""', '"unbalanced', "NEAR(cell membrane, 2)", "cell*", "^cell", "-cell", "content:cell",
           "embedding_id:x", "(cell OR", "cell AND", "OR", "NOT cell", "AND OR NOT NEAR", "cell + membrane",
           "{content source_file}: cell", "'; DROP TABLE fts_chunks; --", "\x00cell", "cell\u200bmembrane",
           "((((((((((", "c" * 5000, " ".join(["near"] * 300), "a:b:c:d", "* * *", "\\\"cell\\\""]


@pytest.mark.parametrize("q", HOSTILE)
def test_operator_characters_never_reach_match(conn, q):
    # Any syntax reaching MATCH raises sqlite3.OperationalError ("fts5: syntax error ..."): the
    # plan must turn every query into quoted strings only.
    c = load_config(text="", env={})
    hits, meta = fts_search(conn, q, idf_cache(conn), c, 10)
    for t in meta.get("tiers", []):
        for part in t["match"].replace(" AND ", "\x01").replace(" OR ", "\x01").split("\x01"):
            assert part.startswith('"') and part.endswith('"') and '"' not in part[1:-1]
    if "cell" in q.lower() and "cell\u200b" not in q:
        assert hits, q


def test_operator_words_match_as_plain_words(conn):
    c = cfg(fts_min_query_ic=0.0)
    hits, meta = fts_search(conn, "and or not near", idf_cache(conn), c, 10)
    ids = {h[0] for h in hits}
    assert 11 in ids  # the row that holds the words themselves
    assert sorted(meta["tiers"][-1]["match"].split(" OR ")) == ['"and"', '"near"', '"not"', '"or"']


def test_unicode_words_match_with_diacritics_folded(conn):
    hits, meta = fts_search(conn, "Zurich cafe", idf_cache(conn), cfg(), 10)
    assert [h[0] for h in hits] == [8]
    hits, _ = fts_search(conn, "Über naïve", idf_cache(conn), cfg(), 10)
    assert [h[0] for h in hits] == [9]


def test_ic_gate_skips_common_queries(conn):
    hits, meta = fts_search(conn, "the the", idf_cache(conn), cfg(), 10)
    assert hits == [] and meta["skipped"].startswith("mean IDF")
    assert meta["mean_idf"] < 0.5
    hits, meta = fts_search(conn, "the", idf_cache(conn), cfg(fts_min_query_ic=0.0), 50)
    assert meta["skipped"] is None and len(hits) == len(CORPUS)


def test_empty_query_words_are_skipped_with_reason(conn):
    hits, meta = fts_search(conn, "?!*", idf_cache(conn), cfg(), 10)
    assert hits == [] and meta["skipped"] == "the query has no words"


def test_long_queries_keep_top_two_thirds_by_idf(conn):
    q = "the cell protein membrane folding mitosis divides the"
    plan = make_plan(q, idf_cache(conn), cfg(fts_long_query_threshold=5, fts_prune_long_queries=True))
    words = query_words(q)
    assert len(words) == 7
    kept = [w.word for w in plan.words if w.kept]
    assert len(kept) == math.ceil(7 * 2 / 3)
    assert "the" not in kept and "cell" not in kept  # the least informative go
    dropped_idf = max(w.idf for w in plan.words if not w.kept)
    assert all(w.idf >= dropped_idf for w in plan.words if w.kept)
    plan = make_plan(q, idf_cache(conn), cfg(fts_long_query_threshold=7, fts_prune_long_queries=True))
    assert all(w.kept for w in plan.words)


def test_every_word_counts_by_default(conn):
    # plain BM25 keeps every query word: pruning measured a loss, so it is a switch, off
    plan = make_plan("the cell protein membrane folding mitosis divides the", idf_cache(conn), cfg())
    assert all(w.kept for w in plan.words)


def test_tier_one_and_fires_when_it_fills_the_page(conn):
    hits, meta = fts_search(conn, "protein membrane", idf_cache(conn), cfg(), 3)
    assert meta["tier"] == 1 and len(hits) == 3 and len(meta["tiers"]) == 1


def test_a_partial_and_page_is_completed_by_the_or_tier(conn):
    # 4 rows hold "cell", 5 "in", 3 both: a page of 4 gets the AND rows first, then the rest
    hits, meta = fts_search(conn, "cell in", idf_cache(conn), cfg(synonyms_enabled=False, fts_min_query_ic=0.0), 4)
    assert [t["tier"] for t in meta["tiers"]] == [1, 2] and meta["tier"] == 2
    assert meta["tiers"][0]["hits"] == 3 and len(hits) == 4
    assert {h[0] for h in hits[:3]} == {1, 2, 3}


def test_the_and_tier_is_skipped_when_its_rarest_word_cannot_fill_the_page(conn):
    # "mitosis" is in one row: the AND of it and anything has at most one row, under a page of 3
    hits, meta = fts_search(conn, "protein mitosis", idf_cache(conn), cfg(synonyms_enabled=False), 3)
    assert [t["tier"] for t in meta["tiers"]] == [2] and len(hits) == 3


def test_words_missing_from_the_collection_do_not_block_the_and_tier(conn):
    hits, meta = fts_search(conn, "protein membrane zzyzx", idf_cache(conn), cfg(), 3)
    assert meta["tier"] == 1 and len(hits) == 3
    assert meta["tiers"][0]["match"] == '"protein" AND "membran"'  # index terms: Porter stems


def test_or_postings_budget_takes_rarest_terms_first(conn):
    plan = make_plan("mitosis protein", idf_cache(conn), cfg(synonyms_enabled=False))
    hits, meta = execute(conn, plan, 10, max_postings=2)
    t2 = meta["tiers"][-1]
    assert t2["match"] == '"mitosi"' and t2["left_out_for_budget"] == ['"protein"']
    assert {h[0] for h in hits} == {4}


def test_synonyms_expand_the_or_tier_with_budgets(conn):
    wn = WordNet(require_wordnet())
    c = cfg(fts_min_query_ic=0.0, synonyms_for="all")
    # "attack" -> first synset: onslaught, onset, onrush; only "onset" occurs in the collection
    plan = make_plan("attack zzzq", idf_cache(conn), c, wn)
    by = {w.word: w for w in plan.words}
    assert by["zzzq"].df == 0 and by["zzzq"].budget == 5
    assert by["attack"].synonyms == ["onset"]
    hits, meta = execute(conn, plan, 10, max_postings=10**6)
    assert meta["tier"] == 2 and {h[0] for h in hits} == {5, 7}
    assert '"onset"' in meta["tiers"][-1]["match"]


def test_synonym_budget_by_idf_third():
    class FakeWN:  # budgets only: the real WordNet is exercised above and in test_query_wordnet
        def synonyms(self, w):
            return tuple(f"{w}syn{i}" for i in range(9))

    texts = ["alpha"] * 1 + ["beta"] * 2 + ["gamma"] * 3 + ["delta"] * 4 + ["eps"] * 5 + ["zeta"] * 6
    texts += [f"{w}syn{i}" for w in ("alpha", "beta", "gamma", "delta", "eps", "zeta") for i in range(9)]
    conn = FtsReader(fts_db(texts))
    plan = make_plan("alpha beta gamma delta eps zeta", idf_cache(conn),
                     cfg(fts_min_query_ic=0.0, synonyms_max_per_word=5, fts_long_query_threshold=5,
                         fts_prune_long_queries=True, synonyms_for="all"), FakeWN())
    budgets = {w.source: (w.kept, w.budget, len(w.synonyms)) for w in plan.words}
    # 6 words by IDF: alpha beta | gamma delta | eps zeta; the long-query rule drops the last 2
    assert budgets == {"alpha": (True, 5, 5), "beta": (True, 5, 5), "gamma": (True, 3, 3),
                       "delta": (True, 3, 3), "eps": (False, 0, 0), "zeta": (False, 0, 0)}
    plan = make_plan("alpha gamma zeta", idf_cache(conn), cfg(fts_min_query_ic=0.0, synonyms_for="all"), FakeWN())
    assert [w.budget for w in plan.words] == [5, 3, 1]
    # the default gives synonyms only to words the collection lacks: only they need them to match
    plan = make_plan("alpha gamma qqq", idf_cache(conn), cfg(fts_min_query_ic=0.0), FakeWN())
    assert [w.budget for w in plan.words] == [0, 0, 5]


def test_min_tier_hits_is_three():
    assert MIN_TIER_HITS == 3


def test_filter_allowed_ids(conn):
    hits, meta = fts_search(conn, "protein membrane", idf_cache(conn), cfg(), 10, allowed={2})
    assert [h[0] for h in hits] == [2]


def test_known_item_rows_are_the_chunks_of_words_at_most_three_chunks_hold(conn):
    def rows(q, **kw):
        return sorted(known_item_rows(conn, make_plan(q, idf_cache(conn), cfg(fts_min_query_ic=0.0)), **kw))

    assert rows("mitosis in the myocardial cell") == [4, 6]  # "cell" is in 4 chunks, "the" in all
    assert rows("protein folding") == [1, 2, 3]  # three chunks hold them: still known items
    assert rows("cell divides") == [4]  # 4 chunks hold "cell": only "divides" counts
    assert rows("the cell") == []
    assert rows("mitosis myocardial", allowed={6, 7}) == [6]
    assert rows("zebra") == []  # absent


def test_a_full_and_page_does_not_answer_when_synonyms_widen_the_or_tier():
    """A word the collection lacks gets synonyms; the AND of the other words cannot stand for the
    OR tier then, however many rows it has."""
    class FakeWN:
        def synonyms(self, w):
            return ("shareholder",) if w == "stockholders" else ()

    texts = ["the board voted"] * 4 + ["every shareholder voted"] * 2 + ["shareholder letters"]
    conn = FtsReader(fts_db(texts))
    hits, meta = fts_search(conn, "stockholders voted", idf_cache(conn), cfg(fts_min_query_ic=0.0), 3,
                            wordnet=FakeWN())
    assert [t["tier"] for t in meta["tiers"]] == [2]
    assert meta["synonyms"] == {"stockholders": ["shareholder"]}
    assert {h[0] for h in hits} == {5, 6, 7}  # the rows holding "shareholder", not the AND's "voted" rows

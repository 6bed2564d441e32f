"""IDF: index terms (ragweedd/keyterms.py), df from fts5vocab equal to count(*) MATCH, the persistent cache in
ingest_db (what is cached, and invalidation when the collection drifts by more than 10 %)."""

import math
import sqlite3

import pytest

from ragweedd import keyterms
from ragweedd.query.idf import IdfCache, idf  # noqa: E402
from ragweedd.store.sqlite.fts_reader import STEMMER, FtsReader  # noqa: E402
from ragweedd.store.sqlite.idf_cache_db import META_N, META_SEQ, IdfCacheDB  # noqa: E402
from ragweedd.store.sqlite.ingest_db import IngestDB  # noqa: E402
from tests.query_support import fts_db  # noqa: E402

TEXTS = ["cells divide", "the cell", "the running dogs", "a café in Zürich", "the the", "the heart attack risk"]


def test_query_words_become_the_terms_the_index_holds():
    # the reader takes an index form as it is: the stemming is keyterms', on both sides
    assert STEMMER.terms("heart attack") == ("heart", "attack")
    assert STEMMER.terms("") == ()
    assert keyterms.index_form("cells", "en") == "cell"
    assert keyterms.index_form("running", "en") == "run"
    assert keyterms.index_form("Zürich", "en") == "zurich"


def test_vocab_df_equals_count_match():
    conn = fts_db(TEXTS * 3)
    stats = FtsReader(conn)
    assert stats.vocab is not None
    for w in ["cell", "cells", "the", "zurich", "café", "dogs", "absent"]:
        term = keyterms.index_form(w, "en")
        assert stats.df_term(term) == stats.df_match(term), w
    assert stats.df_word(keyterms.index_form("cells", "en")) == 6
    assert stats.df_word("heart attack") == 3  # phrase: bounded by its rarest word
    assert stats.df_word("???") == 0


def test_idf_formula():
    assert idf(0, 100) == pytest.approx(math.log(1 + 100.5 / 0.5))
    assert idf(50, 100) == pytest.approx(math.log(1 + 50.5 / 50.5))
    assert idf(100, 100) == pytest.approx(math.log(1 + 0.5 / 100.5))
    assert idf(1, 100) > idf(10, 100) > idf(60, 100) > 0


@pytest.fixture
def cache_env(tmp_path):
    conn = fts_db(TEXTS)
    IngestDB(tmp_path / "ingest.sqlite3").close()
    cache_conn = sqlite3.connect(tmp_path / "ingest.sqlite3", isolation_level=None)
    state = {"n": len(TEXTS), "seq": 10, "added": 0, "deleted": 0}
    cache = IdfCache("c", FtsReader(conn), n_docs=lambda: state["n"], seq=lambda: state["seq"],
                     cache=IdfCacheDB(cache_conn), changes_since=lambda s: (state["added"], state["deleted"]))
    yield cache, cache_conn, state
    cache_conn.close()


def rows(c):
    return dict(c.execute("SELECT term, doc FROM fts_idf_cache WHERE collection='c'").fetchall())


def test_cache_stores_rare_words_not_common_ones(cache_env):
    cache, cc, state = cache_env
    assert cache.df(["cell", "the", "zurich"]) == {"cell": 2, "the": 4, "zurich": 1}
    r = rows(cc)
    assert r["cell"] == 2 and r["zurich"] == 1 and "the" not in r  # 4/6 > 50 %
    assert r[META_N] == 6 and r[META_SEQ] == 10
    # memo answers the second time; the cache answers a new process (new IdfCache)
    cache.df(["cell"])
    assert cache.source_counts["memo"] == 1


def test_cache_survives_small_drift_and_resets_on_large(cache_env):
    cache, cc, state = cache_env
    cache.df(["cell"])
    cc.execute("UPDATE fts_idf_cache SET doc = 99 WHERE term = 'cell'")  # marks what the cache served
    state.update(seq=11, added=0, deleted=0)
    assert cache.df(["cell"]) == {"cell": 99}  # served from the persistent cache
    state.update(seq=12, added=1)  # 1 change on 6 chunks: > 10 % drift
    assert cache.df(["cell"]) == {"cell": 2}
    assert rows(cc)[META_SEQ] == 12


def test_cache_resets_when_sequence_goes_backwards(cache_env):
    cache, cc, state = cache_env
    cache.df(["cell"])
    cc.execute("UPDATE fts_idf_cache SET doc = 99 WHERE term = 'cell'")
    state.update(seq=3)  # the database was rebuilt
    assert cache.df(["cell"]) == {"cell": 2}


def test_busy_cache_never_fails_a_search(tmp_path):
    conn = fts_db(TEXTS)
    IngestDB(tmp_path / "ingest.sqlite3").close()
    locker = sqlite3.connect(tmp_path / "ingest.sqlite3", isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    cc = sqlite3.connect(tmp_path / "ingest.sqlite3", isolation_level=None, timeout=0.01)
    cache = IdfCache("c", FtsReader(conn), n_docs=lambda: 6, seq=lambda: 1, cache=IdfCacheDB(cc))
    assert cache.df(["cell", "zurich"]) == {"cell": 2, "zurich": 1}
    locker.execute("ROLLBACK")


def test_a_cache_of_english_only_terms_is_started_again(cache_env):
    """A cache written before the keyword index read every language holds Porter terms under its
    old reserved rows: it is found missing and dropped, not served for the rebuilt index."""
    cache, cc, state = cache_env
    cc.executemany("INSERT INTO fts_idf_cache(collection, term, doc, built_at) VALUES ('c', ?, ?, 0)",
                   [("\x00n", 6), ("\x00seq", 10), ("cell", 99)])
    assert cache.df(["cell"]) == {"cell": 2}
    assert "\x00n" not in rows(cc)

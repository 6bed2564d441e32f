"""The history on PostgreSQL is private to each source: machines that share one database each see
only their own searches and answers, and an id of another machine's entry is not found."""

import pytest

from ragweedd.store.postgres.backend import PgBackend


@pytest.fixture
def histories(pg_dsn):
    """Two machines' histories on one database."""
    a, b = PgBackend(pg_dsn, source="alice-laptop"), PgBackend(pg_dsn, source="bob-desktop")
    ha, hb = a.open_history(), b.open_history()
    yield ha, hb
    for x in (ha, hb, a, b):
        x.close()


def test_two_sources_on_one_database_see_only_their_own_history(histories):
    ha, hb = histories
    ha.insert("a1", "ask", "alice's salary question", 100.0, '{"answer": "private"}')
    ha.insert("a2", "search", "alice search", 101.0, "{}")
    hb.insert("b1", "search", "bob search", 102.0, "{}")
    assert ha.count() == 2 and hb.count() == 1
    # (the last two of each row: the conversation and turn, none here)
    assert ha.page(0, 10) == (2, [("a2", "search", "alice search", 101.0, None, None),
                                  ("a1", "ask", "alice's salary question", 100.0, None, None)])
    assert hb.page(0, 10) == (1, [("b1", "search", "bob search", 102.0, None, None)])
    assert hb.page(0, 10, kind="ask") == (0, [])
    # another machine's id is as absent as one never written: not read, changed or deleted
    assert hb.get("a1") is None
    assert not hb.set_body("a1", '{"answer": "overwritten"}')
    assert not hb.delete("a1")
    assert ha.get("a1")["body_json"] == '{"answer": "private"}'
    # keep counts only the source's own entries: bob's trimming never drops alice's
    hb.insert("b2", "search", "bob again", 103.0, "{}", keep=1)
    assert hb.page(0, 10)[1] == [("b2", "search", "bob again", 103.0, None, None)] and ha.count() == 2


def test_one_id_under_two_sources_is_two_entries(histories):
    ha, hb = histories
    ha.insert("same", "search", "alice", 100.0, "{}")
    hb.insert("same", "search", "bob", 100.0, "{}")
    assert ha.get("same")["query"] == "alice" and hb.get("same")["query"] == "bob"
    assert hb.delete("same") and ha.get("same")["query"] == "alice"


def test_history_written_before_migration_6_gets_the_empty_source(pg_dsn):
    import psycopg

    from ragweedd.store.postgres.connection import PgConn, migrate
    from ragweedd.store.postgres.pg_schema import MIGRATIONS

    db = PgConn(pg_dsn)
    try:
        migrate(db, [m for m in MIGRATIONS if m[0] <= 5])
        db.run("INSERT INTO history(id, kind, query, created_at, body_json) VALUES ('old', 'ask', 'q', 1.0, '{}')")
        assert migrate(db, MIGRATIONS) == [n for n, *_ in MIGRATIONS if n >= 6]
    finally:
        db.close()
    with psycopg.connect(pg_dsn) as c:
        assert c.execute("SELECT source FROM history WHERE id='old'").fetchone() == ("",)
    a = PgBackend(pg_dsn, source="alice-laptop")
    h = a.open_history()
    try:
        assert h.get("old") is None and h.count() == 0  # shown to no machine until given a source
    finally:
        h.close()
        a.close()


def test_a_conversation_is_private_to_its_source(histories):
    ha, hb = histories
    assert ha.insert_turn("a1", "alice's question", 100.0, lambda t: "{}", conversation="c" + "a" * 16,
                          title="alice's question") == 1
    assert ha.insert_turn("a2", "and then?", 101.0, lambda t: "{}", conversation="c" + "a" * 16, title=None) == 2
    # another machine cannot see, continue or delete it, nor take its id
    assert hb.conversation("c" + "a" * 16) is None and hb.conversation_page(0, 10) == (0, [])
    assert hb.insert_turn("b1", "bob's", 102.0, lambda t: "{}", conversation="c" + "a" * 16, title=None) == 0
    assert hb.delete_conversation("c" + "a" * 16) is None
    assert hb.insert_turn("b2", "bob's own", 103.0, lambda t: "{}", conversation="c" + "a" * 16, title="bob's own") == 1
    total, rows = ha.conversation_page(0, 10)
    assert total == 1 and rows[0][0] == "c" + "a" * 16 and rows[0][4] == 2

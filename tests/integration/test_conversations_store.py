"""Conversations in the history store (ragweedd/answer/history.py over store/sqlite/history_db.py and
store/postgres/pg_history.py): turns numbered in order, listed and reopened as threads, deleted as a whole,
bad ids refused without writing anything, the keep bound, concurrent turns, the migrations that
add them to an existing history, and threads recovered from the records when only the history's
five columns were copied (a salvaged file, ``ragweedd migrate``). Each test runs on a real SQLite
file and a real PostgreSQL (``db``), but those about the file itself."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from ragweedd.answer.history import check_conversation_id, thread_turn
from ragweedd.errors import NotFoundError, RequestError
from tests.history_support import open_history
from tests.integration.test_history import _PgRows, db, sqlite_db  # noqa: F401 - the same fixtures


def answered(text: str, cited: list[str], *, query: str | None = None, filters: dict | None = None) -> dict:
    return {"status": "done", "mode": "llm", "answer": text, "cited": [{"doc_id": d} for d in cited],
            "sources": [{"doc_id": d} for d in cited + ["f" * 32]],
            "rewrite": {"query": query, "filters": filters or {}} if query else None}


def test_turns_are_numbered_listed_and_reopened_as_a_thread(db):
    with open_history(db) as s:
        h1, cid, t1 = s.add_turn("How long should green tea steep?", {"status": "streaming"}, conversation_id=None)
        s.update(h1, answered("Two minutes [1].", ["a" * 32]))
        h2, same, t2 = s.add_turn("and black tea?", {"status": "streaming"}, conversation_id=cid)
        s.update(h2, answered("Four minutes [2][3].", ["b" * 32, "c" * 32], query="and black tea? steep",
                              filters={"collections": ["notes"]}))
        _, other, _ = s.add_turn("Who fixes bicycles?", {}, conversation_id=None)
        assert (same, t1, t2) == (cid, 1, 2) and other != cid
        assert check_conversation_id(cid) == cid
        page = s.conversations()
        assert page["total"] == 2 and [c["id"] for c in page["items"]] == [other, cid], "last continued first"
        assert page["items"][1]["title"] == "How long should green tea steep?" and page["items"][1]["turn_count"] == 2
        c = s.conversation(cid)
        assert [(t["turn"], t["query"], t["id"]) for t in c["turns"]] == [(1, "How long should green tea steep?", h1),
                                                                         (2, "and black tea?", h2)]
        assert all(t["conversation_id"] == cid and "state" not in t for t in c["turns"])
        # the history listing and an entry name their conversation and turn
        items = {i["id"]: i for i in s.list()["items"]}
        assert (items[h2]["conversation_id"], items[h2]["turn"]) == (cid, 2)
        assert s.show(h1)["conversation_id"] == cid and s.show(h1)["turn"] == 1
        # what a follow-up reads: questions, searched queries, answers without marks, filters, cited documents
        thread = s.thread(cid)
        assert thread == [
            {"question": "How long should green tea steep?", "query": "How long should green tea steep?",
             "answer": "Two minutes.", "filters": {}, "documents": ["a" * 32]},
            {"question": "and black tea?", "query": "and black tea? steep", "answer": "Four minutes.",
             "filters": {"collections": ["notes"]}, "documents": ["b" * 32, "c" * 32]}]


def test_a_failed_turn_reads_as_a_question_without_answer():
    e = {"query": "q", "status": "error", "answer": "partial", "mode": "passages", "sources": [{"doc_id": "d" * 32}]}
    assert thread_turn(e) == {"question": "q", "query": "q", "answer": "", "filters": {}, "documents": ["d" * 32]}


@pytest.mark.parametrize("cid,exc,words", [
    ("c" + "0" * 16, NotFoundError, "conversation 'c0000000000000000' does not exist"),
    ("nope", RequestError, "conversation id 'nope' is not one: a conversation id is 'c' and 16 hex digits"),
    ("0123456789abcdef", RequestError, "'0123456789abcdef' is a history id, not a conversation id"),
    ("C" + "0" * 16, RequestError, "is not one"),
    ("c" + "0" * 16 + "\n", RequestError, "is not one"),
    (7, RequestError, "is not one"),
])
def test_unknown_and_misshapen_ids_are_refused_and_nothing_is_written(db, cid, exc, words):
    with open_history(db) as s:
        s.add_turn("kept", {}, conversation_id=None)
        for call in (lambda: s.add_turn("q", {}, conversation_id=cid), lambda: s.conversation(cid),
                     lambda: s.thread(cid), lambda: s.delete_conversation(cid)):
            with pytest.raises(exc, match=words.replace("(", r"\(")):
                call()
        assert s.count() == 1 and s.conversations()["total"] == 1, "a refused call writes nothing"


def test_a_deleted_conversation_goes_with_its_turns_and_is_not_found_after(db):
    with open_history(db) as s:
        _, cid, _ = s.add_turn("first", {}, conversation_id=None)
        s.add_turn("second", {}, conversation_id=cid)
        _, kept, _ = s.add_turn("another thread", {}, conversation_id=None)
        searched = s.add("search", "a search", {})
        assert s.delete_conversation(cid) == {"id": cid, "deleted": True, "turns": 2}
        assert [i["query"] for i in s.list()["items"]] == ["a search", "another thread"]
        assert [c["id"] for c in s.conversations()["items"]] == [kept]
        for call in (lambda: s.add_turn("third", {}, conversation_id=cid), lambda: s.conversation(cid),
                     lambda: s.delete_conversation(cid)):
            with pytest.raises(NotFoundError, match="was deleted"):
                call()
        assert s.count() == 2 and s.show(searched)["kind"] == "search"


def test_a_conversation_whose_last_turn_goes_goes_with_it(db):
    with open_history(db) as s:
        hid, cid, _ = s.add_turn("only turn", {}, conversation_id=None)
        assert s.delete(hid)
        assert s.conversations()["total"] == 0
        with pytest.raises(NotFoundError):
            s.add_turn("again", {}, conversation_id=cid)


def test_the_keep_bound_drops_the_oldest_turns_and_emptied_conversations(db):
    with open_history(db, max_entries=3) as s:
        _, old, _ = s.add_turn("old 1", {}, conversation_id=None)
        s.add_turn("old 2", {}, conversation_id=old)
        _, new, _ = s.add_turn("new 1", {}, conversation_id=None)
        s.add_turn("new 2", {}, conversation_id=new)
        assert s.count() == 3
        assert [t["query"] for t in s.conversation(old)["turns"]] == ["old 2"]
        s.add_turn("new 3", {}, conversation_id=new)
        assert [c["id"] for c in s.conversations()["items"]] == [new], "the emptied conversation is gone"
        assert [t["turn"] for t in s.conversation(new)["turns"]] == [1, 2, 3]


def test_turns_written_at_once_get_one_number_each(db):
    with open_history(db) as s:
        _, cid, _ = s.add_turn("start", {}, conversation_id=None)
        errors: list[Exception] = []

        def writer() -> None:
            try:
                for _ in range(10):
                    s.add_turn("more", {}, conversation_id=cid)
            except Exception as e:  # noqa: BLE001 - collected for the assertion
                errors.append(e)

        ts = [threading.Thread(target=writer) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert errors == []
        assert [t["turn"] for t in s.conversation(cid)["turns"]] == list(range(1, 42))


def test_a_history_file_of_the_last_version_gains_conversations_and_keeps_its_rows(sqlite_db):
    from ragweedd.store.sqlite import history_db

    sqlite_db.parent.mkdir(parents=True)
    c = history_db.connect(sqlite_db)
    history_db.migrate(c, history_db.MIGRATIONS[:2], db_name="old history")
    c.execute("INSERT INTO history(id, kind, query, created_at, body_json) VALUES"
              " ('0123456789abcdef', 'ask', 'an old answer', 10.0, '{\"answer\": \"yes\"}')")
    c.commit()
    c.close()
    with open_history(sqlite_db) as s:
        assert [r[0] for r in s.db.conn.execute("SELECT number FROM schema_migrations ORDER BY 1")] == [1, 2, 3]
        e = s.show("0123456789abcdef")
        assert e["answer"] == "yes" and e["conversation_id"] is None and e["turn"] is None
        _, cid, turn = s.add_turn("a new one", {}, conversation_id=None)
        assert turn == 1 and s.conversations()["items"][0]["id"] == cid


def test_postgresql_records_the_conversations_migration(pg_dsn):
    import psycopg

    from ragweedd.store.postgres.backend import PgBackend

    PgBackend(pg_dsn).close()
    with psycopg.connect(pg_dsn) as c:
        names = dict(c.execute("SELECT number, name FROM ragweedd_migrations").fetchall())
    assert names[7] == "conversations"


def test_a_salvaged_history_gets_its_threads_back_from_the_records(sqlite_db, tmp_path):
    with open_history(sqlite_db) as s:
        h1, cid, _ = s.add_turn("first", {"status": "streaming"}, conversation_id=None)
        s.update(h1, {**s.show(h1), "status": "done", "answer": "A"})
        s.add_turn("second", {}, conversation_id=cid)
        s.add("search", "a search", {})
    from ragweedd.store.sqlite.history_db import HistoryDB

    fresh = HistoryDB(tmp_path / "new.sqlite3")
    try:
        assert fresh.copy_salvageable_from(sqlite_db) == 3
    finally:
        fresh.close()
    with open_history(tmp_path / "new.sqlite3") as s:
        c = s.conversation(cid)
        assert c["title"] == "first" and [(t["turn"], t["query"]) for t in c["turns"]] == [(1, "first"), (2, "second")]
        assert s.add_turn("third", {}, conversation_id=cid)[2] == 3


def test_postgresql_adopts_threads_copied_as_plain_rows(pg_dsn):
    from ragweedd.store.postgres.backend import PgBackend
    from ragweedd.store.postgres.pg_history import PgHistory

    PgBackend(pg_dsn).close()
    rows = PgHistory(pg_dsn, source="this-machine")
    try:
        # what ragweedd migrate writes: the five columns, the thread only in the records
        rows.insert("a" * 16, "ask", "first", 1.0, '{"conversation_id": "c1111111111111111", "turn": 1}')
        rows.insert("b" * 16, "ask", "second", 2.0, '{"conversation_id": "c1111111111111111", "turn": 2}')
        rows.insert("c" * 16, "ask", "no thread", 3.0, '{"answer": "x"}')
        assert rows.adopt_conversations() == 2
        assert rows.adopt_conversations() == 0, "done once"
    finally:
        rows.close()
    with open_history(_PgRows(pg_dsn)) as s:
        c = s.conversation("c1111111111111111")
        assert c["title"] == "first" and [t["turn"] for t in c["turns"]] == [1, 2]


def test_the_pre_conversation_columns_stay_readable_by_raw_sql(sqlite_db):
    """The five columns other tools (ragweedd migrate, salvage) read are unchanged."""
    with open_history(sqlite_db) as s:
        s.add_turn("q", {}, conversation_id=None)
    c = sqlite3.connect(sqlite_db)
    try:
        assert c.execute("SELECT id, kind, query, created_at, body_json FROM history").fetchone()[1] == "ask"
    finally:
        c.close()

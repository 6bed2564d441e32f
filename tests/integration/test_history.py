"""The history store (ragweedd/answer/history.py) on real SQLite files: round trip, paging, bad input,
damaged and newer files, the pre-migration table, bounded growth, concurrent writers (threads and a
second process), and an answer's continuation state surviving a reopen (a daemon restart). The
tests that are not about the file itself run on a real PostgreSQL too (``db`` is a fixture param)."""

import asyncio
import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from fake_chat import FakeChatProvider

from ragweedd.answer import NO_LLM_LABEL
from ragweedd.answer import history as hist
from ragweedd.answer.answering import answer_question, continue_answer
from ragweedd.config import default_config
from ragweedd.errors import NotFoundError, RequestError, StorageError
from ragweedd.llm import ChatResult
from tests.history_support import open_history

ROOT = Path(__file__).resolve().parents[2]
CFG = default_config()

HYBRID_META = {"mode": "hybrid", "timings_ms": {"filters": 0.1, "embed": 12.5, "vector": 3.0, "fts": 2.0,
                                                  "merge": 1.0, "total": 20.0}}


def hits(n=3):
    return [{"embedding_id": str(100 + i), "collection": "notes", "doc_id": f"{i:032x}",
             "source_file": f"/home/u/notes/f{i}.md", "filename": f"f{i}.md", "source_rel_path": f"f{i}.md",
             "text": f"Chunk {i}: cats purr when they are content, says note {i}. " * 5,
             "score": 0.9 - i / 10, "rel_score": 1 - i / 2, "page_label": str(i + 1), "section": None,
             "span": [0, 300], "t_start": None, "t_end": None, "member": None} for i in range(n)]


def run_answer(query, hs, **kw):
    async def go():
        return [e async for e in answer_question(query, hs, CFG, **kw)]
    return asyncio.run(go())


@pytest.fixture
def sqlite_db(tmp_path):
    return tmp_path / "state" / "history.sqlite3"


class _PgRows:
    """The history rows of one PostgreSQL database, opened again after each close, as a file is."""

    def __init__(self, dsn):
        self.dsn, self.rows = dsn, None

    def __getattr__(self, name):
        from ragweedd.store.postgres.pg_history import PgHistory

        if self.rows is None:
            self.rows = PgHistory(self.dsn, source="this-machine")
        return getattr(self.rows, name)

    def close(self):
        if self.rows is not None:
            self.rows.close()
            self.rows = None


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request, tmp_path):
    if request.param == "sqlite":
        return tmp_path / "state" / "history.sqlite3"
    from ragweedd.store.postgres.backend import PgBackend

    dsn = request.getfixturevalue("pg_dsn")
    PgBackend(dsn).close()  # the schema
    return _PgRows(dsn)


def test_round_trip_through_a_reopened_file(db):
    with open_history(db) as s:
        sid = s.add("search", "cats", hist.search_record({"results": hits(2), "retrieval_meta": HYBRID_META}),
                    created_at=1000.0)
        aid = s.add("ask", "do cats purr?", {"answer": "Yes [1].", "sources": hits(1)}, created_at=2000.0)
    assert not isinstance(db, Path) or db.exists()
    with open_history(db) as s:
        listing = s.list()
        assert listing["total"] == 2
        assert [i["id"] for i in listing["items"]] == [aid, sid], "newest first"
        assert listing["items"][0] == {"id": aid, "kind": "ask", "query": "do cats purr?",
                                       "created_at": "1970-01-01T00:33:20+00:00", "conversation_id": None,
                                       "turn": None}
        e = s.show(sid)
        assert e["kind"] == "search" and e["query"] == "cats"
        assert [h["filename"] for h in e["results"]] == ["f0.md", "f1.md"]
        assert e["retrieval_meta"]["timings_ms"]["embed"] == 12.5
        assert s.show(aid)["answer"] == "Yes [1]."


def test_paging_and_kind_filter(db):
    with open_history(db) as s:
        ids = [s.add("search" if i % 2 else "ask", f"q{i}", {}, created_at=float(i)) for i in range(7)]
        page = s.list(offset=2, limit=3)
        assert page["total"] == 7 and [i["query"] for i in page["items"]] == ["q4", "q3", "q2"]
        assert s.list(offset=7, limit=5)["items"] == []
        asks = s.list(kind="ask")
        assert asks["total"] == 4 and {i["id"] for i in asks["items"]} == set(ids[0::2])


def test_same_timestamp_keeps_insertion_order(db):
    with open_history(db) as s:
        a = s.add("search", "first", {}, created_at=5.0)
        b = s.add("search", "second", {}, created_at=5.0)
        assert [i["id"] for i in s.list()["items"]] == [b, a]


def test_update_replaces_the_record_and_keeps_the_columns(db):
    with open_history(db) as s:
        hid = s.add("ask", "q", {"status": "streaming", "sources": []})
        # a record read back with show() carries id/kind/query: writing it back must not duplicate or change them
        entry = s.show(hid)
        s.update(hid, {**entry, "status": "done", "answer": "A", "id": "forged", "kind": "search"})
        e = s.show(hid)
        assert e["id"] == hid and e["kind"] == "ask" and e["status"] == "done" and e["answer"] == "A"
        raw = json.loads(s.db.get(hid)["body_json"])  # the stored row, as the store holds it
        assert not {"id", "kind", "query", "created_at"} & set(raw)


@pytest.mark.parametrize("call,exc,words", [
    (lambda s: s.add("answer", "q", {}), RequestError, "kind 'answer' is unknown"),
    (lambda s: s.add("ask", None, {}), RequestError, "must be text"),
    (lambda s: s.add("ask", "q", ["not", "a", "dict"]), RequestError, "must be an object"),
    (lambda s: s.list(offset=-1), RequestError, "offset must be a whole number >= 0"),
    (lambda s: s.list(limit=0), RequestError, "limit must be a whole number from 1 to 1000"),
    (lambda s: s.list(limit=10**6), RequestError, "limit must be"),
    (lambda s: s.list(limit=True), RequestError, "limit must be"),
    (lambda s: s.list(offset="3"), RequestError, "offset must be"),
    (lambda s: s.list(kind="nope"), RequestError, "kind 'nope' is unknown"),
    (lambda s: s.show(""), RequestError, "history id is needed"),
    (lambda s: s.show("0123456789abcdef"), NotFoundError, "'0123456789abcdef' does not exist"),
    (lambda s: s.update("0123456789abcdef", {}), NotFoundError, "does not exist"),
])
def test_bad_input(db, call, exc, words):
    with open_history(db) as s:
        s.add("search", "kept", {})
        with pytest.raises(exc, match=words.replace("(", r"\(").replace(")", r"\)")):
            call(s)
        assert s.count() == 1, "a refused call writes nothing"


def test_values_json_cannot_encode_are_stored_as_text(db):
    with open_history(db) as s:
        hid = s.add("search", "q", {"path": Path("/x/y"), "tags": {7}})
        e = s.show(hid)
        assert e["path"] == "/x/y" and e["tags"] == "{7}"


def test_damaged_entry_is_a_storage_error_naming_the_file(sqlite_db):
    with open_history(sqlite_db) as s:
        good = s.add("search", "ok", {"a": 1})
        bad = s.add("search", "bad", {"a": 2})
        s.db.conn.execute("UPDATE history SET body_json='{not json' WHERE id=?", (bad,))
        with pytest.raises(StorageError, match=r"history entry '.*' in .*history.sqlite3 is damaged"):
            s.show(bad)
        s.db.conn.execute("UPDATE history SET body_json='[1,2]' WHERE id=?", (bad,))
        with pytest.raises(StorageError, match="damaged"):
            s.show(bad)
        assert s.show(good)["a"] == 1 and s.list()["total"] == 2, "one damaged entry does not hide the others"


def test_file_from_a_newer_ragweedd_is_refused(sqlite_db):
    open_history(sqlite_db).close()
    c = sqlite3.connect(sqlite_db)
    c.execute("INSERT INTO schema_migrations VALUES (99, 'future', 0)")
    c.commit()
    c.close()
    with pytest.raises(StorageError, match=r"written by a newer ragweedd \(migrations \[99\]"):
        open_history(sqlite_db)


def test_not_a_database_is_a_storage_error(sqlite_db):
    sqlite_db.parent.mkdir(parents=True)
    sqlite_db.write_bytes(b"this is not sqlite " * 100)
    with pytest.raises(StorageError, match="history.sqlite3"):
        open_history(sqlite_db)


def test_pre_migration_table_keeps_its_rows_and_gains_indexes(sqlite_db):
    # the table the first engine created by hand, before numbered migrations
    sqlite_db.parent.mkdir(parents=True)
    c = sqlite3.connect(sqlite_db)
    c.execute("CREATE TABLE history(id TEXT PRIMARY KEY, kind TEXT NOT NULL, query TEXT NOT NULL,"
              " created_at REAL NOT NULL, body_json TEXT NOT NULL)")
    c.execute("INSERT INTO history VALUES ('old1', 'search', 'old query', 10.0, '{\"results\": []}')")
    c.commit()
    c.close()
    with open_history(sqlite_db) as s:
        assert s.show("old1")["query"] == "old query"
        idx = {r[0] for r in s.db.conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
        assert {"history_created", "history_kind_created"} <= idx
        plan = " ".join(r[-1] for r in s.db.conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM history ORDER BY created_at DESC LIMIT 5"))
        assert "history_created" in plan, plan
        plan = " ".join(r[-1] for r in s.db.conn.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM history WHERE kind='ask' ORDER BY created_at DESC LIMIT 5"))
        assert "history_kind_created" in plan, plan
        assert [r[0] for r in s.db.conn.execute("SELECT number FROM schema_migrations ORDER BY 1")] == [1, 2, 3]


def test_bounded_growth_drops_the_oldest(db):
    with open_history(db, max_entries=3) as s:
        ids = [s.add("search", f"q{i}", {}, created_at=float(i % 2 * 10 + i)) for i in range(6)]
        assert s.count() == 3
        # created_at: 0, 11, 2, 13, 4, 15 -> the three newest are q5, q3, q1
        assert [i["query"] for i in s.list()["items"]] == ["q5", "q3", "q1"]
        with pytest.raises(NotFoundError):
            s.show(ids[0])
    with open_history(db) as s:  # 0 = unbounded
        for i in range(5):
            s.add("search", f"more{i}", {})
        assert s.count() == 8


def test_threads_share_one_store(db):
    with open_history(db) as s:
        errors = []

        def writer(k):
            try:
                for i in range(25):
                    hid = s.add("ask", f"t{k}-{i}", {"status": "streaming"})
                    s.update(hid, {"status": "done", "answer": str(i)})
                    s.list(limit=5)
            except Exception as e:  # noqa: BLE001 - collected for the assertion
                errors.append(e)

        ts = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert errors == []
        assert s.count() == 100
        assert all(s.show(i["id"])["status"] == "done" for i in s.list(limit=100)["items"])


def test_two_processes_write_the_same_file(sqlite_db):
    open_history(sqlite_db).close()
    code = ("import sys; from tests.history_support import open_history\n"
            "s = open_history(sys.argv[1])\n"
            "for i in range(40): s.add('search', f'{sys.argv[2]}{i}', {'i': i})\n")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(sqlite_db), tag], cwd=ROOT, stderr=subprocess.PIPE)
             for tag in ("a", "b")]
    for p in procs:
        assert p.wait(60) == 0, p.stderr.read().decode()
    with open_history(sqlite_db) as s:
        assert s.count() == 80


def test_stage_timings_from_retrieval_meta():
    assert hist.stage_timings(HYBRID_META) == {"embed_ms": 12.5, "retrieve_ms": 7.5}
    assert hist.stage_timings({"mode": "simple_hybrid", "ms": 4.0}) == {"retrieve_ms": 4.0}
    assert hist.stage_timings(None) == {}


def test_no_llm_answer_record_is_labelled_passages(db):
    res = {"results": hits(3), "retrieval_meta": HYBRID_META}
    with open_history(db) as s:
        hid = s.add("ask", "do cats purr?", hist.pending_answer(res))
        assert s.show(hid)["status"] == "streaming"
        done = run_answer("do cats purr?", res["results"])[-1]
        s.update(hid, hist.answer_record(done, res["retrieval_meta"]))
        e = s.show(hid)
    assert e["status"] == "done" and e["mode"] == "passages" and e["label"] == NO_LLM_LABEL
    assert e["answer"].startswith(NO_LLM_LABEL) and "[1] notes/f0.md [p.1]" in e["answer"]
    # the third passage, which the search scored lowest (rel_score 0), is no source (answer/quotes.py REL_WEIGHT)
    assert e["cited_numbers"] == [1, 2] and e["provider"] is None and e["state"] is None
    assert e["timings"]["embed_ms"] == 12.5 and e["timings"]["retrieve_ms"] == 7.5
    assert e["timings"]["synthesize_ms"] == 0.0 and "total_ms" in e["timings"]
    assert e["finish_reason"] == "stop" and e["retrieval_meta"]["mode"] == "hybrid"


def test_annotated_answer_keeps_filtered_set_usage_and_model(db):
    ann = FakeChatProvider("ann", default=lambda m: "[IRRELEVANT!!!]" if "Chunk 1" in m[0]["content"]
                           else '"cats purr" is relevant.')
    syn = FakeChatProvider("syn", default="Cats purr when content [1].")
    res = {"results": hits(3), "retrieval_meta": HYBRID_META}
    done = run_answer("do cats purr?", res["results"], annotator=ann, synthesizer=syn)[-1]
    with open_history(db) as s:
        hid = s.add("ask", "do cats purr?", hist.pending_answer(res))
        s.update(hid, hist.answer_record(done, res["retrieval_meta"]))
        e = s.show(hid)
    assert [f["filename"] for f in e["filtered"]] == ["f1.md"]
    assert {a["embedding_id"]: a["relevant"] for a in e["annotations"]} == {"100": True, "101": False, "102": True}
    assert e["provider"] == "fake:syn" and e["model"] == "syn" and e["llm_calls"] == 4
    assert e["usage"]["output_tokens"] > 0 and e["usage"]["by_stage"]["annotation"]["input_tokens"] > 0
    assert e["answer"] == "Cats purr when content [1]." and [c["filename"] for c in e["cited"]] == ["f0.md"]


def test_continuation_state_survives_a_reopen(db):
    syn = FakeChatProvider("syn", replies=[ChatResult(text="Cats purr when", stop_reason="max_tokens")])
    res = {"results": hits(2), "retrieval_meta": HYBRID_META}
    done = run_answer("do cats purr?", res["results"], synthesizer=syn)[-1]
    assert done["continuable"]
    with open_history(db) as s:
        hid = s.add("ask", "do cats purr?", hist.pending_answer(res))
        rec = hist.answer_record(done, res["retrieval_meta"])
        assert rec["finish_reason"] == "max_tokens"
        s.update(hid, rec)
    # "restart": a new store on the same file, a new provider object
    with open_history(db) as s:
        e = s.show(hid)
        assert e["continuable"] and e["state"]["answer"] == "Cats purr when"
        syn2 = FakeChatProvider("syn", replies=[" content [1]."])

        async def go():
            return [ev async for ev in continue_answer(e["state"], CFG, synthesizer=syn2)]
        evs = asyncio.run(go())
        s.update(hid, hist.answer_record(evs[-1], e["retrieval_meta"]))
        after = s.show(hid)
    assert syn2.requests[0][-2] == {"role": "assistant", "content": "Cats purr when"}
    assert after["answer"] == "Cats purr when content [1]." and after["continuations"] == 1
    assert after["state"] is None and not after["continuable"], "a finished answer leaves no state behind"
    assert after["finish_reason"] == "stop"
    assert after["timings"]["embed_ms"] == 12.5


def test_failed_answer_keeps_partial_text(db):
    res = {"results": hits(1), "retrieval_meta": HYBRID_META}
    with open_history(db) as s:
        body = hist.pending_answer(res)
        hid = s.add("ask", "q", body)
        s.update(hid, hist.failed_answer(body, {"code": "provider_timeout", "message": "slow"}, "Cats pu"))
        e = s.show(hid)
    assert e["status"] == "error" and e["error"]["code"] == "provider_timeout" and e["answer"] == "Cats pu"
    assert [x["filename"] for x in e["sources"]] == ["f0.md"]

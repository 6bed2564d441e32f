"""The storage seam, run on every backend: the same tests on SQLite files, on a real PostgreSQL
with pgvector (tests/pg_fixture.py) and on the in-memory backend of tests/memory_backend.py. What a
store promises through protocols.py -- chunks and their change log, content shared by paths, keyword
and vector search, the job queue, the history, the IDF cache -- holds on each."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from ragweedd.paths import Paths
from ragweedd.store.sqlite.backend import SqliteBackend
from ragweedd.store.types import PRIMARY, AllOf, AnyOf, Terms


@pytest.fixture(params=["sqlite", "postgresql", "memory"])
def backend(request, tmp_path):
    if request.param == "sqlite":
        return SqliteBackend(Paths(data=tmp_path / "data", state=tmp_path / "state", cache=tmp_path / "cache"))
    if request.param == "memory":
        # the third backend, in tests/: proof that the Protocols are all a backend implements
        from tests.memory_backend import MemoryBackend

        return MemoryBackend()
    from ragweedd.store.postgres.backend import PgBackend

    return PgBackend(request.getfixturevalue("pg_dsn"), source="laptop")


def _unit(*xs):
    v = np.array(xs, dtype=np.float32)
    return (v / np.linalg.norm(v)).astype(np.float32)


def _chunks(texts, contexts=None):
    return [{"chunk_idx": i, "text": t, "context": (contexts or {}).get(i, ""),
             "meta": {"char_start": 0, "char_end": len(t), "page_label": "1", "text_entropy": 4.0,
                      "word_count": len(t.split()), "line_start": 1, "line_end": 2}}
            for i, t in enumerate(texts)]


def _publish(rag, md5, path, texts, vecs=None, **kw):
    vecs = vecs if vecs is not None else [_unit(1, 0, 0, 0).tobytes()] * len(texts)
    return rag.publish(md5=md5, source_file=path, rel_path=path.rsplit("/", 1)[-1], kind="text",
                       extractor="text", ocr_type=None, title=None, size_bytes=10, chunks=_chunks(texts),
                       vectors={PRIMARY: vecs}, embedders={PRIMARY: ("hash:4", 4)}, **kw)


def test_publish_logs_adds_and_hits_read_back(backend):
    rag = backend.open_rag("notes")
    ids = _publish(rag, "a" * 32, "/home/me/notes/tea.txt", ["green tea steeps three minutes", "black tea"])
    assert len(ids) == 2 and rag.chunk_count() == 2 and rag.document_count() == 1
    assert [op for _, op, _ in rag.changes_after(0)] == ["add", "add"]
    assert {cid for _, _, cid in rag.changes_after(0)} == set(ids)
    assert rag.max_seq() == rag.changes_after(0)[-1][0] and rag.min_seq() == rag.changes_after(0)[0][0]
    assert rag.change_counts_after(0) == (2, 0)
    assert rag.chunk_ids_of("a" * 32) == ids and rag.chunks_of("a" * 32) == 2
    assert rag.md5_of_path("/home/me/notes/tea.txt") == "a" * 32 and rag.has_document("a" * 32)
    hit = rag.hits(ids)[ids[0]]
    assert hit["text"] == "green tea steeps three minutes" and hit["source_file"] == "/home/me/notes/tea.txt"
    assert hit["doc_id"] == "a" * 32 and hit["chunk_idx"] == 0 and hit["lines"] == [1, 2]
    md5, path, text, pages = rag.briefs(ids)[ids[1]]
    assert (md5, text, pages) == ("a" * 32, "black tea", None)
    assert rag.embedder() == ("hash:4", 4)
    assert set(rag.vectors_for(ids)) == set(ids)
    assert np.allclose(np.frombuffer(rag.vectors_for(ids)[ids[0]], dtype=np.float32), _unit(1, 0, 0, 0))
    assert backend.has_rag("notes") and "notes" in backend.indexed_collections()
    rag.close()


def test_copy_then_delete_one_copy_keeps_chunks_delete_both_removes(backend):
    rag = backend.open_rag("c")
    ids = _publish(rag, "b" * 32, "/r/one.txt", ["alpha beta"])
    version = rag.search_version()
    assert _publish(rag, "b" * 32, "/r/two.txt", ["alpha beta"]) == []  # dedup: only the path is added
    assert rag.search_version()[3] > version[3]  # a path write moves the version
    assert sorted(rag.paths_of("b" * 32)) == ["/r/one.txt", "/r/two.txt"]
    assert rag.remove_path("/r/one.txt") == ("b" * 32, [])
    assert rag.chunk_count() == 1 and rag.hits(ids)[ids[0]]["source_file"] == "/r/two.txt"
    assert rag.remove_path("/r/two.txt") == ("b" * 32, ids)
    assert rag.chunk_count() == 0 and not rag.has_document("b" * 32)
    assert rag.change_counts_after(0) == (1, 1) and rag.changes_after(0)[-1][1:] == ("delete", ids[0])
    assert rag.remove_path("/r/never.txt") == (None, [])


def test_new_content_at_a_path_supersedes_old_in_one_transaction(backend):
    rag = backend.open_rag("c")
    old = _publish(rag, "c" * 32, "/r/x.txt", ["old text"])
    new = _publish(rag, "d" * 32, "/r/x.txt", ["new text"])
    assert rag.md5_of_path("/r/x.txt") == "d" * 32 and not rag.has_document("c" * 32)
    assert rag.changes_after(0)[-2:] == [(rag.changes_after(0)[-2][0], "delete", old[0]),
                                         (rag.max_seq(), "add", new[0])]
    assert rag.link_path("d" * 32, "/r/z.txt", "z.txt") == []
    assert sorted(rag.paths_of("d" * 32)) == ["/r/x.txt", "/r/z.txt"]


def test_publish_failure_leaves_nothing_behind(backend):
    rag = backend.open_rag("c")

    def chunks():
        yield from _chunks(["first chunk"])
        raise RuntimeError("extractor died")

    with pytest.raises(RuntimeError):
        rag.publish(md5="e" * 32, source_file="/r/e.txt", rel_path="e.txt", kind="text", extractor="text",
                    ocr_type=None, title=None, size_bytes=1, chunks=chunks(), vectors={PRIMARY: [b"\x00" * 16] * 2},
                    embedders={PRIMARY: ("hash:4", 4)})
    assert rag.chunk_count() == 0 and rag.max_seq() == 0 and rag.md5_of_path("/r/e.txt") is None


def test_a_document_of_many_chunks_keeps_their_order_vectors_and_waiting_ones(backend):
    # more chunks than one write batch of the PostgreSQL store, drawn from generators as a large
    # file's are, every seventh still waiting for its vector
    rag = backend.open_rag("c")
    n = 1234
    vecs = [None if i % 7 == 3 else _unit(1, i, 0, 0).tobytes() for i in range(n)]
    texts = [f"part {i}" for i in range(n)]
    ids = rag.publish(md5="9" * 32, source_file="/r/long.txt", rel_path="long.txt", kind="text", extractor="text",
                      ocr_type=None, title=None, size_bytes=10, chunks=iter(_chunks(texts)),
                      vectors={PRIMARY: iter(vecs)}, embedders={PRIMARY: ("hash:4", 4)})
    assert len(ids) == n and ids == sorted(ids) and rag.chunk_ids_of("9" * 32) == ids
    waiting = [cid for cid, v in zip(ids, vecs) if v is None]
    assert rag.pending_summary() == (len(waiting), 1)
    assert [c[2] for c in rag.changes_after(0)] == [cid for cid in ids if cid not in set(waiting)]
    got = rag.vectors_for(ids[:20])
    assert sorted(got) == [cid for cid, v in zip(ids[:20], vecs) if v is not None]
    assert all(np.allclose(np.frombuffer(got[cid], dtype=np.float32), np.frombuffer(v, dtype=np.float32))
               for cid, v in zip(ids[:20], vecs) if v is not None)
    assert rag.hits([ids[777]])[ids[777]]["chunk_idx"] == 777
    rag.close()


def test_pending_vectors_are_logged_when_written_and_only_for_the_chunk_read(backend):
    rag = backend.open_rag("c")
    ids = _publish(rag, "f" * 32, "/r/f.txt", ["one", "two"], vecs=[None, None])
    assert rag.max_seq() == 0 and rag.pending_summary() == (2, 1)
    batch = rag.pending_batch(10)
    assert [b[0] for b in batch] == ids and batch[0][1] == f"{'f' * 32}:0" and batch[0][2] == "one"
    stale = (ids[1], "0" * 32 + ":1", "", _unit(0, 1, 0, 0).tobytes())  # not the chunk that was read
    done = rag.add_vectors("hash:4", [(b[0], b[1], b[3], _unit(1, 1, 0, 0).tobytes()) for b in batch[:1]] + [stale])
    assert done == [ids[0]] and rag.pending_summary() == (1, 1)
    assert rag.changes_after(0)[-1][1:] == ("add", ids[0])
    assert rag.add_vectors("hash:4", [(batch[0][0], batch[0][1], batch[0][3], b"\x00" * 16)]) == []  # not twice


def test_keyword_match_ranks_and_takes_no_operator_from_a_query(backend):
    rag = backend.open_rag("c")
    ids = _publish(rag, "1" * 32, "/r/k.txt", ["the cells divide quickly", "cell walls of plants",
                                                 "nothing relevant here"])
    # expressions are of index terms (ragweedd/keyterms.py: the planner turns words into them)
    got = rag.keyword_match(Terms(("cell",)), 10)
    assert {cid for cid, _ in got} == {ids[0], ids[1]} and all(s > 0 for _, s in got)  # "cells" and "cell"
    assert [cid for cid, _ in rag.keyword_match(AllOf((Terms(("cell",)), Terms(("plant",)))), 10)] == [ids[1]]
    assert {cid for cid, _ in rag.keyword_match(AnyOf((Terms(("divid",)), Terms(("wall",)))), 10)} == {ids[0], ids[1]}
    assert rag.keyword_match(Terms(("cell", "divid")), 10)[0][0] == ids[0]  # a phrase
    reader = backend.open_keyword_reader("c")
    try:
        assert [c for c, _ in reader.match(Terms(("plant",)), 5)] == [ids[1]]
        assert reader.chunk_count() == 3 and reader.max_seq() == rag.max_seq()
        assert reader.version()[1] == max(ids)
        assert reader.df_word("cell") == 2 and reader.df_match("cell wall") == 1
        assert reader.languages() == {"en": 3}
        lengths, counts = reader.row_stats(ids[:2], ["cell"])
        assert lengths[ids[0]] >= 3 and counts[ids[1]]["cell"] == 1
        assert reader.mean_row_tokens() > 0
    finally:
        reader.close()


def test_vector_search_with_and_without_a_filter(backend):
    from ragweedd.query.vectors import VectorSearch

    rag = backend.open_rag("c")
    dirs = [_unit(1, 0, 0, 0), _unit(0.9, 0.1, 0, 0), _unit(0, 1, 0, 0), _unit(0, 0, 1, 0)]
    ids = _publish(rag, "2" * 32, "/r/v.txt", ["a", "b", "c", "d"], vecs=[d.tobytes() for d in dirs])

    class Cfg:
        hnsw_ef = 64

    vs = VectorSearch(Cfg(), None)
    got = vs.search(rag, _unit(1, 0.05, 0, 0), 2)
    assert [c for c, _ in got] == ids[:2]
    assert got[0][1] == pytest.approx(float(dirs[0] @ _unit(1, 0.05, 0, 0)), abs=1e-5)
    got = vs.search(rag, _unit(1, 0.05, 0, 0), 2, allowed=[ids[2], ids[3]])
    assert [c for c, _ in got] == [ids[2], ids[3]] or [c for c, _ in got] == [ids[3], ids[2]]
    assert vs.search(rag, _unit(1, 0, 0, 0), 3, allowed=[]) == []


def test_job_queue_coalesces_serves_upserts_first_and_backs_off(backend):
    q = backend.open_jobs(max_tries=2)
    try:
        q.put("c", "/r/a.txt", "upsert", "/r")
        q.put("c", "/r/a.txt", "delete", "/r")
        q.put_many([("c", "/r/b.txt", "upsert", "/r"), ("c", "/r/a.txt", "delete", "/r")])
        assert q.depth() == {"queued": 2} and q.pending_paths("c") == {"/r/a.txt", "/r/b.txt"}
        j = q.claim(0)
        assert (j.path, j.op, j.root) == ("/r/b.txt", "upsert", "/r")
        assert q.depth("c") == {"queued": 1, "running": 1}
        q.put("c", "/r/b.txt", "upsert", "/r")  # changed while it ran: runs again after done
        q.done(j)
        assert q.depth() == {"queued": 2}
        j2 = q.claim(0)
        assert j2.path == "/r/b.txt"
        assert q.fail(j2, "boom") is True and q.claim(0).path == "/r/a.txt"  # b waits its backoff
        j3 = q.claim(0)
        assert j3 is None
    finally:
        q.close()


def test_a_failed_job_is_kept_with_its_error(backend):
    q = backend.open_jobs(max_tries=1)
    try:
        q.put("c", "/r/bad.pdf", "upsert")
        j = q.claim(0)
        assert q.fail(j, "cannot read /r/bad.pdf") is False
        assert q.depth() == {"failed": 1} and q.failed()[0]["error"] == "cannot read /r/bad.pdf"
        assert q.pending_paths("c") == set()
        q.drop_collection("c")
        assert q.depth() == {}
    finally:
        q.close()


def test_two_queues_never_claim_the_same_job(pg_dsn):
    # PostgreSQL only: a SQLite data directory has one queue and one daemon (its writer lock)
    from ragweedd.store.postgres.backend import PgBackend

    backend = PgBackend(pg_dsn, source="laptop")
    a, b = backend.open_jobs(max_tries=3), backend.open_jobs(max_tries=3)
    try:
        a.put_many([("c", f"/r/{i}.txt", "upsert", "/r") for i in range(200)])
        got: dict[str, list[int]] = {"a": [], "b": []}

        def work(name, q):
            while (j := q.claim(0)) is not None:
                got[name].append(j.id)
                q.done(j)

        ts = [threading.Thread(target=work, args=(n, q)) for n, q in (("a", a), ("b", b))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        assert len(got["a"]) + len(got["b"]) == 200 and not set(got["a"]) & set(got["b"])
        assert got["a"] and got["b"]  # both took part
    finally:
        a.close()
        b.close()


def test_running_jobs_of_a_dead_process_go_back_but_a_live_ones_stay(backend):
    # the first process: on PostgreSQL a backend of its own, whose connection holds its claimer
    first = backend if backend.shared is None else type(backend)(backend.dsn, source=backend.source)
    q1 = first.open_jobs(max_tries=3)
    q1.put_many([("c", "/r/1", "upsert", "/r"), ("c", "/r/2", "upsert", "/r")])
    held = q1.claim(0)
    assert held is not None
    q2 = backend.open_jobs(max_tries=3)
    try:
        if backend.shared is None:
            # one process per data directory: opening the queue is the restart, which requeues
            assert q2.depth() == {"queued": 2}
            return
        assert q2.depth() == {"queued": 1, "running": 1}  # q1 lives: its job is not taken
        q1.db.conn.close()  # the process dies: no done(), no release()
        first._db.conn.close()
        from tests.tools import wait_until

        wait_until(lambda: q2.requeue_orphans() or q2.depth() == {"queued": 2}, 10, what="orphan requeued")
        assert q2.depth() == {"queued": 2}
    finally:
        q2.close()


def test_history_rows(backend):
    h = backend.open_history()
    try:
        for i in range(5):
            h.insert(f"h{i}", "search" if i % 2 else "ask", f"query {i}", 100.0 + (i // 2), "{}", keep=4)
        assert h.count() == 4 and h.get("h0") is None  # the oldest dropped
        total, rows = h.page(0, 10)
        assert total == 4 and [r[0] for r in rows] == ["h4", "h3", "h2", "h1"]
        # (id, kind, query, time, conversation id, turn): these entries are in no conversation
        assert h.page(0, 10, kind="search") == (2, [("h3", "search", "query 3", 101.0, None, None),
                                                    ("h1", "search", "query 1", 100.0, None, None)])
        assert h.set_body("h4", '{"x": 1}') and h.get("h4")["body_json"] == '{"x": 1}'
        assert not h.set_body("nope", "{}") and h.delete("h4") and not h.delete("h4")
    finally:
        h.close()


def test_idf_cache(backend):
    c = backend.open_idf_cache(timeout_s=1.0)
    try:
        assert c.built_at("c") == (None, None)
        c.restart("c", 10, 3)
        c.remember("c", [("cell", 2), ("plant", 1)])
        c.remember("c", [("cell", 4)])
        assert c.built_at("c") == (10, 3) and c.lookup("c", ["cell", "plant", "x"]) == {"cell": 4, "plant": 1}
        c.restart("c", 11, 4)
        assert c.lookup("c", ["cell"]) == {}
    finally:
        c.close()


def test_pgvector_search_uses_the_hnsw_index_unfiltered_and_is_exact_filtered(pg_dsn):
    from ragweedd.store.postgres.backend import PgBackend

    rag = PgBackend(pg_dsn, source="laptop").open_rag("c")
    rng = np.random.default_rng(7)
    vecs = rng.normal(size=(300, 4)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    ids = _publish(rag, "3" * 32, "/r/many.txt", [f"chunk {i}" for i in range(300)], vecs=[v.tobytes() for v in vecs])
    rag.db.run("ANALYZE vectors")
    q = vecs[5]
    with rag.db.tx() as c:
        c.execute("SET LOCAL enable_seqscan = off")  # a small table: make the planner show its choice
        plan = " ".join(r["QUERY PLAN"] for r in c.execute(
            "EXPLAIN SELECT id FROM vectors WHERE collection_id=%s AND space='primary'"
            " ORDER BY vec::vector(4) <#> %s::vector(4) LIMIT 5", (rag.collection_id, str(q.tolist()))).fetchall())
    assert f"vectors_hnsw_{rag.collection_id}_primary_4" in plan
    assert rag.nearest(q, 1, ef=100)[0][0] == ids[5]
    allowed = ids[100:110]
    want = sorted(allowed, key=lambda i: -float(vecs[ids.index(i)] @ q))[:3]
    assert [c for c, _ in rag.nearest(q, 3, allowed=allowed)] == want
    rag.close()


def test_two_machines_same_path_do_not_collide_and_share_content(pg_dsn):
    from ragweedd.store.postgres.backend import PgBackend

    laptop = PgBackend(pg_dsn, source="laptop").open_rag("notes")
    desktop = PgBackend(pg_dsn, source="desktop").open_rag("notes")
    a = _publish(laptop, "4" * 32, "/home/me/notes/todo.txt", ["laptop todo list"])
    b = _publish(desktop, "5" * 32, "/home/me/notes/todo.txt", ["desktop todo list"])
    assert a and b and laptop.chunk_count() == 2  # same path, two machines: two documents
    assert laptop.md5_of_path("/home/me/notes/todo.txt") == "4" * 32
    assert desktop.md5_of_path("/home/me/notes/todo.txt") == "5" * 32
    # the same content on both machines is stored and embedded once
    assert _publish(desktop, "4" * 32, "/srv/share/todo-copy.txt", ["laptop todo list"]) == []
    assert laptop.sources_of("4" * 32) == [("laptop", "/home/me/notes/todo.txt"),
                                           ("desktop", "/srv/share/todo-copy.txt")]
    assert laptop.document_paths() == [("/home/me/notes/todo.txt", "todo.txt", "4" * 32)]
    assert laptop.remove_path("/home/me/notes/todo.txt") == ("4" * 32, [])  # the desktop still holds it
    assert laptop.chunk_ids_of("4" * 32) == a and laptop.hits(a)[a[0]]["source_file"] == "/srv/share/todo-copy.txt"
    assert desktop.remove_path("/srv/share/todo-copy.txt") == ("4" * 32, a)
    assert laptop.chunk_count() == 1
    laptop.close()
    desktop.close()


def test_odd_file_names_round_trip_on_postgresql(pg_dsn):
    from ragweedd.store.postgres.backend import PgBackend
    from ragweedd.store.postgres.connection import from_pg, to_pg

    latin1 = b"/r/caf\xe9 \xee\x80\x80.txt".decode("utf-8", "surrogateescape")  # a Latin-1 byte and U+E000
    for name in (latin1, "/r/plain.txt", "/r/\ue000x", "/r/\udce9\ue000"):
        assert from_pg(to_pg(name)) == name and "\x00" not in to_pg(name)
    assert to_pg("/r/dir/x").startswith(to_pg("/r/dir/"))
    rag = PgBackend(pg_dsn, source="nas").open_rag("c")
    ids = _publish(rag, "6" * 32, latin1, ["odd name"])
    assert rag.md5_of_path(latin1) == "6" * 32 and rag.paths_of("6" * 32) == [latin1]
    assert rag.hits(ids)[ids[0]]["source_file"] == latin1
    rag.close()


def test_ingest_files_supersede_list_and_count(backend):
    db = backend.open_ingest()
    try:
        db.set_file("c", "/a", md5="m1", size=1, mtime_ns=1, inode=1, status="done", chunks=3)
        first = db.live_file("c", "/a")["id"]
        db.set_file("c", "/a", md5="m2", size=2, mtime_ns=2, inode=1, status="done", chunks=4)
        assert db.file_by_id(first)["superseded"] == 1 and db.live_file("c", "/a")["md5"] == "m2"
        assert db.counts_by_state("c") == {"done": 1}
        assert db.mark_deleted("c", "/a") == "m2" and db.live_file("c", "/a") is None
        for name, st in (("/r/a", "done"), ("/r/b", "failed"), ("/r/sub/c", "done")):
            db.set_file("c", name, md5=name, size=1, mtime_ns=1, inode=1, status=st,
                        error="x" if st == "failed" else None)
        db.set_file("d", "/s/x", md5="x", size=1, mtime_ns=1, inode=1, status="pending")

        def page(collection=None, states=None, glob=None, offset=0, limit=50):
            rows, total = db.live_files_page(collection=collection, states=states, path_glob=glob, offset=offset,
                                             limit=limit)
            return [r["source_file"] for r in rows], total

        assert page() == (["/r/a", "/r/b", "/r/sub/c", "/s/x"], 4)
        assert page("c", ["failed"]) == (["/r/b"], 1)
        assert page(offset=1, limit=2) == (["/r/b", "/r/sub/c"], 4)
        assert page(glob="c") == (["/r/sub/c"], 1) and page(glob="/r/*") == (["/r/a", "/r/b", "/r/sub/c"], 3)
        assert page(glob="[!a-b]") == (["/r/sub/c", "/s/x"], 2)
        assert page(glob="/r/?") == (["/r/a", "/r/b"], 2) and page(glob="a.b") == ([], 0)
        assert db.counts_by_state() == {"done": 2, "failed": 1, "pending": 1}
        assert db.done_count("c") == 2 and db.is_live("c", "/r/b") and not db.is_live("d", "/r/b")
        assert sorted(db.live_paths_under("c", "/r/sub")) == ["/r/sub/c"] and db.live_paths_under("c", "/r/su") == []
        assert set(db.live_stats("c")) == {"/r/a", "/r/b", "/r/sub/c"}
        assert db.live_paths_for_md5("c", "/r/a") == ["/r/a"]
        db.save_collection("d", ["/s"], ["*.tmp"], "topic")
        db.save_collection("d", ["/s", "/t"], ["*.tmp"], "topic")
        assert db.run_time_collections() == [("d", ["/s", "/t"], ["*.tmp"], "topic")]
        db.forget_collection_files("d", also_collection=True)
        assert db.run_time_collections() == [] and page("d") == ([], 0)
        db.store_vectors("hash:4", 4, [("t1", b"\x01" * 16), ("t2", b"\x02" * 16)])
        db.store_vectors("hash:4", 4, [("t1", b"\x03" * 16)])
        assert db.cached_vectors("hash:4", ["t1", "t2", "t3"]) == {"t1": b"\x03" * 16, "t2": b"\x02" * 16}
        assert db.cached_vectors("other", ["t1"]) == {}
    finally:
        db.close()


def test_skipped_files_are_recorded_unless_a_job_or_real_state_holds_them(backend):
    from ragweedd.store.types import SkippedFile

    db = backend.open_ingest()
    q = backend.open_jobs(max_tries=3)
    try:
        q.put("c", "/r/queued.bin", "upsert", "/r")
        db.set_file("c", "/r/indexed.txt", md5="m", size=1, mtime_ns=1, inode=1, status="done")
        files = [SkippedFile(p, "/r", 0, 5, 9, None, "no extractor") for p in
                 ("/r/new.bin", "/r/queued.bin", "/r/indexed.txt")]
        assert sorted(db.record_skipped("c", files)) == ["/r/indexed.txt", "/r/queued.bin"]
        row = db.live_file("c", "/r/new.bin")
        assert row["extract_status"] == "skipped" and row["error"] == "no extractor" and row["root"] == "/r"
        assert db.forget_skipped("c", ["/r/new.bin", "/r/indexed.txt"]) == ["/r/indexed.txt"]
        assert db.live_file("c", "/r/new.bin") is None
        assert db.job_depth("c") == {"queued": 1} and db.failed_jobs(5) == []
    finally:
        q.close()
        db.close()


def test_two_machines_publishing_the_same_new_content_at_once_store_it_once(pg_dsn):
    from ragweedd.store.postgres.backend import PgBackend

    rags = [PgBackend(pg_dsn, source=s).open_rag("c") for s in ("laptop", "desktop")]
    start = threading.Barrier(2)
    out: dict[str, list[int]] = {}

    def go(rag):
        start.wait()
        out[rag.source] = _publish(rag, "7" * 32, "/shared/paper.txt", [f"chunk {i}" for i in range(50)])

    ts = [threading.Thread(target=go, args=(r,)) for r in rags]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    assert sorted(len(v) for v in out.values()) == [0, 50]  # one stored it, the other only linked
    assert rags[0].chunk_count() == 50 and rags[0].document_count() == 1
    assert sorted(rags[0].sources_of("7" * 32)) == [("desktop", "/shared/paper.txt"), ("laptop", "/shared/paper.txt")]
    assert rags[0].change_counts_after(0) == (50, 0)
    for r in rags:
        r.close()


def test_a_reader_following_the_change_log_never_misses_an_entry_of_concurrent_writers(pg_dsn):
    # Sequence numbers are taken when a row is inserted but become visible at commit: without the
    # collection's lock, a writer that commits late would leave a gap the reader has moved past.
    import time

    from ragweedd.store.postgres.backend import PgBackend

    backend = PgBackend(pg_dsn, source="host")
    slow, fast, reader = backend.open_rag("c"), backend.open_rag("c"), backend.open_rag("c")
    seen: list[int] = []
    last = 0

    def follow():
        nonlocal last
        for seq, _op, cid in reader.changes_after(last):
            seen.append(cid)
            last = seq

    # chunks waiting for their vectors: writing those logs the adds and touches no path
    _publish(slow, "8" * 32, "/r/slow.txt", ["slow one"], vecs=[None])
    _publish(slow, "9" * 32, "/r/fast.txt", ["fast one"], vecs=[None])
    (a, b) = [(cid, eid, ctx, _unit(1, 0, 0, 0).tobytes()) for cid, eid, _t, ctx in slow.pending_batch(10)]
    in_tx = threading.Event()

    def slow_writer():
        with slow.db.tx():  # add_vectors joins this transaction, which commits half a second later
            slow.add_vectors("hash:4", [a])
            in_tx.set()
            time.sleep(0.5)

    t = threading.Thread(target=slow_writer)
    t.start()
    in_tx.wait(10)
    f = threading.Thread(target=lambda: fast.add_vectors("hash:4", [b]))
    f.start()
    time.sleep(0.2)
    follow()  # while the slow writer has not committed
    t.join(10)
    f.join(10)
    follow()
    assert sorted(seen) == sorted(cid for _, _, cid in reader.changes_after(0)) and len(seen) == 2
    for r in (slow, fast, reader):
        r.close()


def test_a_store_outlives_a_dropped_connection(pg_dsn):
    import psycopg

    from ragweedd.store.postgres.backend import PgBackend
    from tests.tools import wait_until

    def terminate(pid: int) -> None:
        """A server restart, as the store sees it: its session ends (and has ended on return)."""
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            wait_until(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid=%s", (pid,)).fetchone(),
                       10, 0.02, "the session to end")

    rag = PgBackend(pg_dsn, source="host").open_rag("c")
    ids = _publish(rag, "a" * 32, "/r/a.txt", ["still here"])
    pid = rag.db.value("SELECT pg_backend_pid()")
    terminate(pid)
    assert rag.chunk_ids_of("a" * 32) == ids  # a read after the loss runs on a new connection
    assert rag.db.value("SELECT pg_backend_pid()") != pid
    terminate(rag.db.value("SELECT pg_backend_pid()"))
    assert _publish(rag, "b" * 32, "/r/b.txt", ["written after the loss"])  # so does a write
    assert rag.chunk_count() == 2
    rag.close()


def test_a_job_whose_outcome_could_not_be_written_is_claimed_again_with_no_try_spent(backend):
    # a worker that could not write a job's outcome (the server away) abandons it: the next claim
    # that reaches the store gives it back, while the job another worker holds stays its own
    q = backend.open_jobs(max_tries=3)
    try:
        q.put_many([("c", "/r/1", "upsert", "/r"), ("c", "/r/2", "upsert", "/r")])
        lost, kept = q.claim(0), q.claim(0)
        assert lost is not None and kept is not None
        q.abandon(lost)
        assert q.abandoned == 1
        again = q.claim(0)
        assert again is not None and (again.id, again.path, again.tries) == (lost.id, lost.path, 0)
        assert q.abandoned == 0 and q.depth() == {"running": 2}  # kept is still its worker's
        assert q.claim(0) is None and q.depth() == {"running": 2}
        q.done(again)
        q.done(kept)
        assert q.depth() == {}
    finally:
        q.close()


def test_a_claim_whose_answer_was_lost_does_not_stay_running_under_the_live_claimer(pg_dsn):
    # PostgreSQL: the claim committed, its answer lost with the connection, so no worker holds the
    # row; the claimer's lock is alive again (taken on reconnecting), so it is no one's orphan
    import psycopg

    from ragweedd.store.postgres.backend import PgBackend

    backend = PgBackend(pg_dsn, source="laptop")
    q = backend.open_jobs(max_tries=3)
    try:
        q.put_many([("c", "/r/1", "upsert", "/r")])
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute("UPDATE jobs SET state='running', claimed_by=%s", (q.claimer,))
        job = q.claim(0)  # the claim that finds nothing gives it back; the next takes it
        job = job or q.claim(0)
        assert job is not None and job.path == "/r/1" and job.tries == 0
        q.done(job)
        assert q.depth() == {}
    finally:
        q.close()
        backend.close()

"""rag.sqlite3 and ingest_db.sqlite3 on real files: migrations, WAL, FTS in step with chunks."""

import sqlite3

import pytest

from ragweedd.errors import StorageError
from ragweedd.store.sqlite.connection import connect, migrate
from ragweedd.store.sqlite.ingest_db import IngestDB
from ragweedd.store.sqlite.rag_db import RagDB, fts_rebuild
from ragweedd.store.types import PRIMARY, Terms


def _chunks(texts):
    return [{"chunk_idx": i, "text": t, "text_hash": f"h{i}", "meta": {"char_start": 0, "char_end": len(t),
             "page_label": "1", "text_entropy": 4.0, "word_count": len(t.split())}} for i, t in enumerate(texts)]


def _publish(rag, md5, path, texts):
    vec = b"\x00" * 16
    return rag.publish(md5=md5, source_file=path, rel_path=path.rsplit("/", 1)[-1], kind="text",
                       extractor="text", ocr_type=None, title=None, size_bytes=10, chunks=_chunks(texts),
                       vectors={PRIMARY: [vec] * len(texts)}, embedders={PRIMARY: ("hash:4", 4)})


def test_migrations_are_numbered_recorded_and_wal(tmp_path):
    rag = RagDB(tmp_path / "rag.sqlite3", "c")
    rows = rag.conn.execute("SELECT number, name FROM schema_migrations").fetchall()
    assert [tuple(r) for r in rows] == [(1, "initial"), (2, "chunk_text_hash"), (3, "pending_vectors"),
                                        (4, "fts_context_column"), (5, "pass_changes"), (6, "path_version"),
                                        (7, "hidden_chunks"), (8, "multilingual_keywords")]
    assert rag.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = {r[0] for r in rag.conn.execute("SELECT name FROM sqlite_master")}
    assert {"collections", "embeddings", "embedding_metadata", "fts_chunks", "vectors", "changes"} <= names
    rag.close()
    again = RagDB(tmp_path / "rag.sqlite3", "c")  # re-open applies nothing twice
    assert again.conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] == 8
    ing = IngestDB(tmp_path / "ingest_db.sqlite3")
    names = {r[0] for r in ing.conn.execute("SELECT name FROM sqlite_master")}
    assert {"ingest_files", "ingest_chunks", "collection_chunks", "fts_idf_cache", "embed_cache"} <= names


def test_newer_database_is_refused(tmp_path):
    conn = connect(tmp_path / "x.sqlite3")
    migrate(conn, [(1, "a", "CREATE TABLE t(x)"), (2, "b", "CREATE TABLE u(x)")], db_name="x")
    with pytest.raises(StorageError, match="newer ragweedd"):
        migrate(conn, [(1, "a", "CREATE TABLE t(x)")], db_name="x")


def test_migration_applied_meanwhile_by_another_connection_is_not_run_twice(tmp_path):
    # Two threads opening the same new collection both read "nothing applied" before either takes
    # the write lock; the second must not run the script again ("table already exists").
    class StaleReader(sqlite3.Connection):
        def execute(self, sql, *args):
            if sql == "SELECT number FROM schema_migrations":
                return iter(())
            return super().execute(sql, *args)

    migrations = [(1, "a", "CREATE TABLE t(x)"), (2, "b", "CREATE TABLE u(x)")]
    first = connect(tmp_path / "x.sqlite3")
    assert migrate(first, migrations[:1], db_name="x") == [1]
    late = sqlite3.connect(tmp_path / "x.sqlite3", isolation_level=None, factory=StaleReader)
    assert migrate(late, migrations, db_name="x") == [2]
    assert [r[0] for r in first.execute("SELECT number FROM schema_migrations ORDER BY 1")] == [1, 2]


def test_a_reader_before_the_writer_gets_a_clear_error(tmp_path):
    connect(tmp_path / "rag.sqlite3").close()  # the file exists, the first migration has not run
    with pytest.raises(StorageError, match="does not hold collection 'c' yet"):
        RagDB(tmp_path / "rag.sqlite3", "c", readonly=True)
    RagDB(tmp_path / "rag.sqlite3", "other").close()
    with pytest.raises(StorageError, match="does not hold collection 'c' yet"):
        RagDB(tmp_path / "rag.sqlite3", "c", readonly=True)


def test_failed_migration_rolls_back_whole(tmp_path):
    conn = connect(tmp_path / "x.sqlite3")
    with pytest.raises(StorageError, match="migration 1"):
        migrate(conn, [(1, "bad", "CREATE TABLE t(x);\nCREATE TABLE t(y);")], db_name="x")
    assert conn.execute("SELECT count(*) FROM sqlite_master WHERE name='t'").fetchone()[0] == 0


def test_publish_writes_chunks_fts_vectors_and_changes_together(tmp_path):
    rag = RagDB(tmp_path / "rag.sqlite3", "c")
    ids = _publish(rag, "m1", "/d/a.txt", ["alpha beta", "gamma delta"])
    assert len(ids) == 2
    fts = rag.conn.execute("SELECT rowid FROM fts_chunks WHERE fts_chunks MATCH 'gamma'").fetchall()
    assert [r[0] for r in fts] == [ids[1]]
    assert rag.changes_after(0) == [(1, "add", ids[0]), (2, "add", ids[1])]
    hit = rag.hits(ids)[ids[0]]
    assert hit["text"] == "alpha beta" and hit["source_file"] == "/d/a.txt" and hit["page_label"] == "1"
    assert rag.conn.execute("SELECT count(*) FROM vectors").fetchone()[0] == 2


def test_publish_failure_leaves_nothing_behind(tmp_path):
    rag = RagDB(tmp_path / "rag.sqlite3", "c")
    bad = _chunks(["one", "two"])
    bad[1]["chunk_idx"] = 0  # duplicate embedding_id -> UNIQUE violation on the second chunk
    with pytest.raises(sqlite3.IntegrityError):
        rag.publish(md5="m", source_file="/a", rel_path="a", kind="text", extractor="t", ocr_type=None, title=None,
                    size_bytes=1, chunks=bad, vectors={PRIMARY: [b"x", b"y"]}, embedders={PRIMARY: ("h", 1)})
    for table in ("embeddings", "fts_chunks", "vectors", "changes", "documents"):
        assert rag.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table


def test_copy_then_delete_one_copy_keeps_chunks_delete_both_removes(tmp_path):
    rag = RagDB(tmp_path / "rag.sqlite3", "c")
    ids = _publish(rag, "m1", "/d/a.txt", ["alpha beta"])
    assert rag.link_path("m1", "/d/copy.txt", "copy.txt") == []
    assert rag.remove_path("/d/a.txt") == ("m1", [])
    # the display path moved to the surviving copy, in FTS too
    assert rag.hits(ids)[ids[0]]["source_file"] == "/d/copy.txt"
    assert rag.conn.execute("SELECT source_file FROM fts_chunks").fetchone()[0] == "/d/copy.txt"
    md5, gone = rag.remove_path("/d/copy.txt")
    assert gone == ids
    assert rag.conn.execute("SELECT count(*) FROM fts_chunks").fetchone()[0] == 0
    assert rag.changes_after(1) == [(2, "delete", ids[0])]


def test_new_content_at_a_path_supersedes_old_in_one_transaction(tmp_path):
    rag = RagDB(tmp_path / "rag.sqlite3", "c")
    old = _publish(rag, "m1", "/d/a.txt", ["old words"])
    new = _publish(rag, "m2", "/d/a.txt", ["new words"])
    assert rag.conn.execute("SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH 'old'").fetchone()[0] == 0
    ops = [(op, i) for _, op, i in rag.changes_after(0)]
    assert ops == [("add", old[0]), ("delete", old[0]), ("add", new[0])]


def test_fts_rebuild_backfills_from_stored_text(tmp_path):
    rag = RagDB(tmp_path / "rag.sqlite3", "c")
    ids = _publish(rag, "m1", "/d/a.txt", [f"word{i} common" for i in range(2500)])
    rag.conn.execute("DELETE FROM fts_chunks WHERE rowid % 2 = 0")
    rag.conn.execute("INSERT INTO fts_chunks(rowid, embedding_id, content, source_file) "
                     "VALUES (999999, 'x', 'orphan', '')")
    assert fts_rebuild(rag.conn, batch=1000) == 2500
    assert rag.conn.execute("SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH 'common'").fetchone()[0] == 2500
    assert rag.conn.execute("SELECT count(*) FROM fts_chunks WHERE fts_chunks MATCH 'orphan'").fetchone()[0] == 0
    rag.conn.execute("INSERT INTO fts_chunks(fts_chunks) VALUES ('integrity-check')")
    assert len(ids) == 2500


def test_ingest_files_supersede_and_state_counts(tmp_path):
    db = IngestDB(tmp_path / "ingest_db.sqlite3")
    db.set_file("c", "/a", md5="m1", size=1, mtime_ns=1, inode=1, status="done", chunks=3)
    db.set_file("c", "/a", md5="m2", size=2, mtime_ns=2, inode=1, status="done", chunks=4)
    rows = db.conn.execute("SELECT md5, superseded FROM ingest_files ORDER BY id").fetchall()
    assert [tuple(r) for r in rows] == [("m1", 1), ("m2", 0)]
    assert db.counts_by_state("c") == {"done": 1}
    assert db.mark_deleted("c", "/a") == "m2"
    assert db.live_file("c", "/a") is None


def test_a_file_that_is_not_sqlite_is_a_clear_storage_error(tmp_path):
    bad = tmp_path / "rag.sqlite3"
    bad.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StorageError, match="not a usable SQLite database"):
        RagDB(bad, "c")
    assert bad.read_bytes().startswith(b"this is not")  # nothing lost


# --- one writer per database ------------------------------------------------------------------------
def test_a_reading_connection_cannot_write_even_to_temp(tmp_path):
    IngestDB(tmp_path / "i.sqlite3").close()
    ro = connect(tmp_path / "i.sqlite3", readonly=True)
    assert ro.execute("PRAGMA query_only").fetchone()[0] == 1
    with pytest.raises(sqlite3.OperationalError):
        ro.execute("CREATE TEMP TABLE scratch(x)")  # mode=ro alone would allow this
    ro.close()


def test_one_thread_writes_a_database_at_a_time(tmp_path):
    import threading
    import time

    from ragweedd.store.sqlite.connection import transaction, writer_lock

    path = tmp_path / "i.sqlite3"
    IngestDB(path).close()
    (tmp_path / "link.sqlite3").symlink_to(path)
    assert writer_lock(tmp_path / "link.sqlite3") is writer_lock(path)  # one lock per file, however named
    a, b = connect(path), connect(tmp_path / "link.sqlite3")
    inside, order = threading.Event(), []

    def first():
        with transaction(a):
            a.execute("INSERT INTO collection_chunks VALUES ('m1', 'c', 1, 0)")
            inside.set()
            time.sleep(0.3)
            order.append("first commits")

    t = threading.Thread(target=first)
    t.start()
    assert inside.wait(5)
    with transaction(b):  # waits for the lock, not in SQLite's busy handler
        order.append("second begins")
        b.execute("INSERT INTO collection_chunks VALUES ('m2', 'c', 1, 0)")
    t.join()
    assert order == ["first commits", "second begins"]

    quick = connect(path, timeout_s=0.05)
    with transaction(a):
        t0 = time.monotonic()
        done = []
        th = threading.Thread(target=lambda: done.append(_try_write(quick)))
        th.start()
        th.join(5)
    assert done == ["database is locked"] and time.monotonic() - t0 < 2
    for c in (a, b, quick):
        c.close()


def test_opening_a_collection_never_waits_for_a_write_under_way(tmp_path):
    """A search opens its collections while a long publish holds the writer lock: with nothing to
    migrate, opening only reads, so it neither waits for the lock nor fails on it."""
    import threading

    from ragweedd.store.sqlite.connection import transaction

    path = tmp_path / "rag.sqlite3"
    writer = RagDB(path, "c")
    _publish(writer, "m1", "/r/a.txt", ["sourdough starter notes"])
    opened: list = []

    def open_and_search():
        try:
            rag = RagDB(path, "c")  # what a search thread does
            opened.append(rag.keyword_match(Terms(("sourdough",)), 5))
            rag.close()
        except Exception as e:  # noqa: BLE001 - reported below
            opened.append(e)

    with transaction(writer.conn):  # a publish under way
        writer.conn.execute("INSERT INTO collections(name) VALUES ('other')")
        t = threading.Thread(target=open_and_search)
        t.start()
        t.join(10)  # the lock waits 30 s: only an open that does not wait is done by now
        assert not t.is_alive() and len(opened) == 1, "opening waited for the writer lock"
    assert isinstance(opened[0], list) and len(opened[0]) == 1, opened
    writer.close()


def _try_write(conn):
    from ragweedd.store.sqlite.connection import transaction

    try:
        with transaction(conn):
            conn.execute("INSERT INTO collection_chunks VALUES ('m3', 'c', 1, 0)")
    except sqlite3.OperationalError as e:
        return str(e).split(" (")[0]
    return "written"


def test_a_store_method_inside_a_larger_write_joins_it(tmp_path):
    from ragweedd.store.sqlite.connection import transaction

    db = IngestDB(tmp_path / "i.sqlite3")
    with pytest.raises(RuntimeError):
        with transaction(db.conn):
            db.record_collection_chunks("c", "m1", 3)  # its own write() joins the outer transaction
            raise RuntimeError("the larger write fails")
    assert db.conn.execute("SELECT count(*) FROM collection_chunks").fetchone()[0] == 0
    db.record_collection_chunks("c", "m1", 3)
    assert db.conn.execute("SELECT count(*) FROM collection_chunks").fetchone()[0] == 1
    db.close()


def test_named_reads_for_the_daemon_and_engine(tmp_path):
    rag = RagDB(tmp_path / "rag.sqlite3", "c")
    assert rag.min_seq() is None
    _publish(rag, "a" * 32, "/d/a.txt", ["one two", "three four", "five"])
    _publish(rag, "b" * 32, "/d/b.txt", ["six"])
    assert rag.min_seq() == 1
    assert [c[0] for c in rag.changes_batch_after(1, 2)] == [2, 3]
    ids = rag.chunk_ids_of("a" * 32)
    assert len(ids) == 3 and [rag.hits(ids)[i]["chunk_idx"] for i in ids] == [0, 1, 2]
    assert rag.chunk_ids_of_documents(["a" * 32, "b" * 32]) == set(ids) | set(rag.chunk_ids_of("b" * 32))
    assert sorted(rag.document_paths()) == [("/d/a.txt", "a.txt", "a" * 32), ("/d/b.txt", "b.txt", "b" * 32)]
    assert {(e, w) for _, e, w in rag.entropy_rows()} == {(4.0, 2), (4.0, 1)}
    assert rag.change_counts_after(0) == (4, 0)
    assert [i for i, _ in rag.keyword_match(Terms(("three",)), 5)] == [ids[1]]
    assert rag.rebuild_fts() == 4
    rag.close()

    db = IngestDB(tmp_path / "i.sqlite3")
    for name, st in (("/r/a", "done"), ("/r/b", "failed"), ("/r/sub/c", "done")):
        db.set_file("c", name, md5=name, size=1, mtime_ns=1, inode=1, status=st)
    db.set_file("d", "/s/x", md5="x", size=1, mtime_ns=1, inode=1, status="pending")
    def page(collection=None, states=None, glob=None, offset=0, limit=50):
        rows, total = db.live_files_page(collection=collection, states=states, path_glob=glob, offset=offset,
                                         limit=limit)
        return [r["source_file"] for r in rows], total

    assert page() == (["/r/a", "/r/b", "/r/sub/c", "/s/x"], 4)
    assert page("c", ["failed"]) == (["/r/b"], 1)
    assert page(offset=1, limit=2) == (["/r/b", "/r/sub/c"], 4)
    assert page(glob="c") == (["/r/sub/c"], 1) and page(glob="/r/*") == (["/r/a", "/r/b", "/r/sub/c"], 3)
    assert page(glob="[!a-b]") == (["/r/sub/c", "/s/x"], 2)  # fnmatch's negated class
    first = db.live_files_page(collection="c", states=None, path_glob=None, offset=0, limit=1)[0][0]
    assert db.file_by_id(first["id"])["source_file"] == "/r/a" and db.file_by_id(10**9) is None
    assert db.counts_by_state() == {"done": 2, "failed": 1, "pending": 1}
    assert db.done_count("c") == 2 and db.is_live("c", "/r/b") and not db.is_live("d", "/r/b")
    assert sorted(db.live_paths_under("c", "/r/sub")) == ["/r/sub/c"]
    assert set(db.live_stats("c")) == {"/r/a", "/r/b", "/r/sub/c"}
    db.save_collection("d", ["/s"], ["*.tmp"], "topic")
    assert db.run_time_collections() == [("d", ["/s"], ["*.tmp"], "topic")]
    db.forget_collection_files("d", also_collection=True)
    assert db.run_time_collections() == [] and page("d") == ([], 0)
    db.close()


def test_document_keys_are_never_reused_after_a_collection_is_removed(tmp_path):
    """A file's id is its document key: after the newest files' rows are gone (their collection
    removed), a new file must not get one of their ids, or a key a user kept names another file."""
    db = IngestDB(tmp_path / "ingest.sqlite3")
    for c in ("keep", "loopc"):
        db.set_file(c, f"/d/{c}.md", md5="a" * 32, size=1, mtime_ns=1, inode=1, status="done")
    gone = db.live_file("loopc", "/d/loopc.md")["id"]
    db.forget_removed_collection("loopc")
    db.set_file("deepc", "/d/deepc.md", md5="b" * 32, size=1, mtime_ns=1, inode=2, status="done")
    assert db.live_file("deepc", "/d/deepc.md")["id"] > gone
    db.close()


def test_an_older_ingest_db_keeps_its_keys_and_stops_reusing_them(tmp_path):
    """A database written before ids were AUTOINCREMENT is rebuilt with its rows, ids and indexes."""
    from ragweedd.store.sqlite.ingest_db import MIGRATIONS

    path = tmp_path / "ingest.sqlite3"
    old = sqlite3.connect(path)
    migrate(old, [m for m in MIGRATIONS if m[0] <= 4], db_name="old")
    for i, c in enumerate(("keep", "loopc")):
        old.execute("INSERT INTO ingest_files(collection, source_file, md5, first_seen, last_seen, extract_status,"
                    " updated_at) VALUES (?, ?, ?, 0, 0, 'done', 0)", (c, f"/d/{c}.md", f"{i:032x}"))
    old.commit()
    old.close()
    db = IngestDB(path)
    keep, loop = db.live_file("keep", "/d/keep.md"), db.live_file("loopc", "/d/loopc.md")
    assert (keep["id"], loop["id"]) == (1, 2) and keep["md5"] == f"{0:032x}"
    db.forget_removed_collection("loopc")
    db.set_file("deepc", "/d/deepc.md", md5="b" * 32, size=1, mtime_ns=1, inode=2, status="done")
    assert db.live_file("deepc", "/d/deepc.md")["id"] == 3
    names = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE tbl_name='ingest_files'")}
    assert {"ingest_files_live", "ingest_files_md5", "ingest_files_state"} <= names
    db.close()


def test_a_large_document_is_staged_then_swapped_in_whole(tmp_path):
    """While a large document is drawn (chunked), the collection shows the path's old content only
    and another writer gets in; after the swap only the new content; a failure while drawing
    leaves the old content as it was."""
    from ragweedd.store.sqlite.connection import transaction
    from ragweedd.store.sqlite.rag_db import STAGE_ABOVE

    path = tmp_path / "rag.sqlite3"
    rag = RagDB(path, "c")
    _publish(rag, "old", "/r/big.txt", ["the old version"])
    other = connect(path, timeout_s=0.5)  # another worker: it must never wait long
    reader = RagDB(path, "c", readonly=True)
    n = STAGE_ABOVE + 500
    seen: list = []

    def chunks(fail_at=None):
        for i, c in enumerate(_chunks([f"new text {i}" for i in range(n)])):
            if i == n // 2:
                seen.append((reader.md5_of_path("/r/big.txt"), reader.chunk_count(),
                              reader.keyword_match(Terms(("new",)), 5)))
                with transaction(other):  # a small file's publish gets in between the batches
                    other.execute("INSERT INTO collections(name) VALUES (?)", (f"x{len(seen)}",))
            if i == fail_at:
                raise RuntimeError("the chunker failed")
            yield c

    def vectors():
        while True:
            yield b"\x00" * 16

    kw = dict(source_file="/r/big.txt", rel_path="big.txt", kind="text", extractor="text", ocr_type=None,
              title=None, size_bytes=10, vectors={PRIMARY: vectors()}, embedders={PRIMARY: ("hash:4", 4)})
    with pytest.raises(RuntimeError):
        rag.publish(md5="new", chunks=chunks(fail_at=n - 10), **kw)
    assert seen[0] == ("old", 1, []) and rag.md5_of_path("/r/big.txt") == "old" and rag.chunk_count() == 1

    kw["vectors"] = {PRIMARY: vectors()}
    ids = rag.publish(md5="new", chunks=chunks(), **kw)
    assert seen[1] == ("old", 1, [])
    assert len(ids) == n and rag.md5_of_path("/r/big.txt") == "new" and not rag.has_document("old")
    assert rag.chunk_count() == n and rag.chunk_ids_of("new") == ids
    assert rag.conn.execute("SELECT count(*) FROM fts_chunks").fetchone()[0] == n
    # the old chunk's add and delete (its id is given again, as row-by-row inserts would), then one
    # add per new chunk, logged after the delete
    log = rag.conn.execute("SELECT op, id FROM changes ORDER BY seq").fetchall()
    assert [tuple(r) for r in log] == [("add", 1), ("delete", 1)] + [("add", i) for i in ids]
    assert rag.hits([ids[7]])[ids[7]]["text"] == "new text 7"
    for c in (other, reader, rag):
        c.close()


def test_connections_opening_a_new_database_at_once_all_get_it(tmp_path):
    """Two connections switching a new database to WAL at once: SQLite answers one "locked" without
    waiting. That is contention, not damage: a one-shot ingest failed with "not a usable SQLite
    database: database is locked" when its stages opened a new collection together."""
    import threading

    from ragweedd.store.sqlite.connection import connect

    errors: list[Exception] = []
    for k in range(10):
        path = tmp_path / f"new{k}.sqlite3"
        barrier = threading.Barrier(4)

        def open_it(path=path, barrier=barrier) -> None:
            barrier.wait()
            try:
                conn = connect(path)
                conn.execute("CREATE TABLE IF NOT EXISTS t(x)")
                conn.close()
            except Exception as e:  # noqa: BLE001 - every failure is the test's finding
                errors.append(e)

        threads = [threading.Thread(target=open_it) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert not errors, errors[:3]

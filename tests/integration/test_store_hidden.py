"""A large document is copied in and its old version deleted in short transactions, out of sight
(store/sqlite/rag_stage.py, store/sqlite/rag_hidden.py): other writers get in between, and no search -- keyword,
exact vectors, the change log the vector indexes replay, hits -- ever sees part of it or both
versions; a crash between the slices leaves nothing visible and the next start cleans up.

The big publish runs in a thread whose every acquisition of the writer lock waits at a gate the
test opens, so the test looks at the collection between any two of its transactions (the only
states a reader can ever see in WAL mode)."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ragweedd.store.sqlite import connection as store_sqlite
from ragweedd.store.sqlite.checks import collection_counts
from ragweedd.store.sqlite.rag_db import RagDB
from ragweedd.store.sqlite.rag_hidden import SLICE
from ragweedd.store.types import PRIMARY, Terms

PATH = "/r/big.txt"
DEADLINE = 120


class GatedLock:
    """The database's writer lock, with a gate before each outermost acquisition by one thread."""

    def __init__(self) -> None:
        self.inner = threading.RLock()
        self.gated: threading.Thread | None = None
        self.waiting = threading.Event()  # the gated thread waits at the gate (holding nothing)
        self.go = threading.Semaphore(0)
        self.depth = threading.local()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if threading.current_thread() is self.gated and getattr(self.depth, "n", 0) == 0:
            self.waiting.set()
            self.go.acquire()
        ok = self.inner.acquire(blocking, timeout)
        if ok:
            self.depth.n = getattr(self.depth, "n", 0) + 1
        return ok

    def release(self) -> None:
        self.depth.n -= 1
        self.inner.release()

    def step(self) -> None:
        """Let the gated thread run one transaction (to its next gate or its end)."""
        self.waiting.clear()
        self.go.release()


def _chunks(words: str, n: int):
    for i in range(n):
        yield {"chunk_idx": i, "text": f"{words} shared chunk{i}", "text_hash": f"h{i}",
               "meta": {"char_start": 0, "char_end": 10, "word_count": 3}}


def _vectors(n: int, first: float):
    import struct

    for i in range(n):
        yield struct.pack("4f", first, 1.0, float(i), 0.0)


def _publish(rag: RagDB, md5: str, words: str, n: int, path: str = PATH, vectors: bool = True) -> list[int]:
    return rag.publish(md5=md5, source_file=path, rel_path=os.path.basename(path), kind="text", extractor="text",
                       ocr_type=None, title=None, size_bytes=n, chunks=_chunks(words, n),
                       vectors={PRIMARY: _vectors(n, 1.0 if md5 == "old" else 2.0) if vectors else iter([None] * n)},
                       embedders={PRIMARY: ("hash:4", 4)})


def _replayed(rag: RagDB) -> set[int]:
    """What a vector index that replayed the whole change log holds."""
    live: set[int] = set()
    for _seq, op, cid in rag.changes_after(0):
        (live.add if op == "add" else live.discard)(cid)
    return live


def _raw(rag: RagDB, md5: str) -> int:
    """Rows of ``md5`` in the table, hidden or not."""
    return rag.conn.execute("SELECT count(*) FROM embeddings WHERE md5=?", (md5,)).fetchone()[0]


def _seen(reader: RagDB) -> dict:
    """Everything the search paths read, in the form: {path's md5, keyword hits, vectors, index}."""
    # '"share"': the index term of "shared" in these English chunks (ragweedd/keyterms.py)
    kw = {cid for cid, _ in reader.keyword_match(Terms(("share",)), 10 ** 6)}
    vec = {i for ids, _ in reader.iter_vectors(PRIMARY) for i in ids}
    return {"md5": reader.md5_of_path(PATH), "kw": kw, "vec": vec, "index": _replayed(reader)}


@pytest.fixture
def gated(tmp_path):
    path = tmp_path / "rag.sqlite3"
    lock = GatedLock()
    key = os.path.realpath(path)
    store_sqlite._WRITER_LOCKS[key] = lock  # type: ignore[assignment]
    yield path, lock
    store_sqlite._WRITER_LOCKS.pop(key, None)


def _run_gated(lock: GatedLock, fn) -> tuple[threading.Thread, dict]:
    out: dict = {}

    def run():
        try:
            out["ids"] = fn()
        except BaseException as e:  # noqa: BLE001 - reported by the test
            out["error"] = e

    t = threading.Thread(target=run)
    lock.gated = t
    t.start()
    return t, out


def _next_stop(lock: GatedLock, t: threading.Thread) -> bool:
    """Wait until the gated thread is at its gate (True) or done (False)."""
    deadline = time.monotonic() + DEADLINE
    while not lock.waiting.wait(0.05):
        if not t.is_alive():
            return False
        assert time.monotonic() < deadline, "the big publish neither reached its next transaction nor ended"
    return True


def test_a_small_publish_and_every_search_see_a_large_switch_whole(gated):
    """Between any two transactions of a large publish that replaces a large old version: another
    file's publish goes through at once (it never waits for the large one), and every search path
    sees either the whole old version or the whole new one, never part, never both."""
    path, lock = gated
    rag = RagDB(path, "c")
    n_old, n_new = 3 * SLICE, 5 * SLICE
    _publish(rag, "old", "oldword", n_old)
    old_ids = set(rag.chunk_ids_of("old"))
    writer2 = RagDB(path, "c")  # another worker of the same daemon
    reader = RagDB(path, "c", readonly=True)
    t, out = _run_gated(lock, lambda: _publish(rag, "new", "newword", n_new))

    states, small_while_copying = [], 0
    while _next_stop(lock, t):
        new_rows, old_rows = _raw(reader, "new"), _raw(reader, "old")
        seen = _seen(reader)
        new_ids = {r[0] for r in reader.conn.execute("SELECT id FROM embeddings WHERE md5='new'")}
        others = set(reader.chunk_ids_of_documents([f"small{i}" for i in range(small_while_copying)]))
        if seen["md5"] == "old":
            assert seen["kw"] - others == old_ids and seen["vec"] - others == old_ids, "part of the new file is seen"
            assert seen["index"] - others == old_ids
            assert reader.keyword_match(Terms(("newword",)), 10) == [] and not reader.hits(sorted(new_ids))
        else:
            assert seen["md5"] == "new" and new_rows == n_new
            assert seen["kw"] - others == new_ids and seen["vec"] - others == new_ids, "the old version is seen"
            assert seen["index"] - others == new_ids
            assert reader.keyword_match(Terms(("oldword",)), 10) == [] and not reader.hits(sorted(old_ids))
        counts = collection_counts(path)
        assert counts.chunks == counts.fts_rows == counts.vectors == len(seen["kw"])
        states.append((seen["md5"], new_rows, old_rows))
        if seen["md5"] == "old" and 0 < new_rows < n_new:
            # mid-copy: a small file's publish goes through now, and is found at once
            name = f"small{small_while_copying}"
            _publish(writer2, name, f"quokka{small_while_copying}", 3, path=f"/r/{name}.txt")
            assert reader.keyword_match(Terms((f"quokka{small_while_copying}",)), 10)
            small_while_copying += 1
        lock.step()
    t.join(DEADLINE)
    assert "error" not in out, out.get("error")
    assert small_while_copying >= 2, f"no state between the copy's transactions was ever seen: {states}"
    assert any(m == "new" and 0 < o < n_old for m, _n, o in states), f"the old version went at once: {states}"
    assert out["ids"] == rag.chunk_ids_of("new") and len(out["ids"]) == n_new
    assert _raw(rag, "old") == 0 and rag.conn.execute("SELECT count(*) FROM hidden_chunks").fetchone()[0] == 0
    assert collection_counts(path).chunks == n_new + 3 * small_while_copying
    for c in (writer2, reader, rag):
        c.close()


def test_a_large_file_removed_goes_slice_by_slice_out_of_sight(gated):
    path, lock = gated
    rag = RagDB(path, "c")
    ids = set(_publish(rag, "old", "oldword", 3 * SLICE))
    reader = RagDB(path, "c", readonly=True)
    t, out = _run_gated(lock, lambda: rag.remove_path(PATH))
    partial = 0
    while _next_stop(lock, t):
        seen = _seen(reader)
        if seen["md5"] is None:
            assert not seen["kw"] and not seen["vec"] and not seen["index"] and not reader.hits(sorted(ids))
            partial += 0 < _raw(reader, "old") < len(ids)
        else:
            assert seen["kw"] == seen["vec"] == seen["index"] == ids
        lock.step()
    t.join(DEADLINE)
    assert out["ids"] == ("old", sorted(ids)) and partial >= 1
    assert _raw(rag, "old") == 0 and rag.chunk_count() == 0
    rag.close()
    reader.close()


_CRASH = r"""
import os, sys, threading
from ragweedd.store.sqlite import connection as store_sqlite
from ragweedd.store.sqlite.rag_db import RagDB
from tests.integration.test_store_hidden import GatedLock, _publish
path = sys.argv[1]
lock = GatedLock()
store_sqlite._WRITER_LOCKS[os.path.realpath(path)] = lock
lock.gated = threading.current_thread()
class Stepper(threading.Thread):
    def run(self):
        while True:  # at each gate: tell the test, and run one transaction when it answers
            lock.waiting.wait()
            print("gate", flush=True)
            if not sys.stdin.readline():
                return
            lock.step()
Stepper(daemon=True).start()
rag = RagDB(path, "c")
_publish(rag, "new", "newword", int(sys.argv[3]))
print("finished", flush=True)
"""


@pytest.mark.parametrize("when", ["copying", "deleting the old version"])
def test_a_crash_between_slices_leaves_nothing_visible_and_the_file_is_indexed_once_after(tmp_path, when):
    """kill -9 of the writing process between two transactions: no search sees any of it, the
    integrity counts agree, and the start-up repair's purge plus the publish done again leave the
    file indexed exactly once."""
    from ragweedd.paths import Paths
    from ragweedd.store.sqlite.ingest_db import IngestDB
    from ragweedd.store.sqlite.repair import _check_collection  # the start-up repair of one collection

    paths = Paths.resolve(str(tmp_path / "data"), str(tmp_path / "state"), str(tmp_path / "cache"))
    db = paths.rag_db("c")
    db.parent.mkdir(parents=True, exist_ok=True)
    rag = RagDB(db, "c")
    n_old, n_new = 3 * SLICE, 4 * SLICE
    old_ids = set(_publish(rag, "old", "oldword", n_old))
    rag.close()
    root = str(Path(__file__).resolve().parents[2])
    proc = subprocess.Popen([sys.executable, "-c", _CRASH, str(db), root, str(n_new)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": root})
    reader = RagDB(db, "c", readonly=True)
    try:
        while True:  # the publish waits before each of its transactions: look, then let it go on
            ready, _, _ = select.select([proc.stdout], [], [], DEADLINE)
            assert ready, "the publish neither reached its next transaction nor ended"
            assert proc.stdout.readline() == "gate\n", "the publish ended before the crash point"
            md5 = reader.md5_of_path(PATH)
            if (when == "copying" and md5 == "old" and 0 < _raw(reader, "new") < n_new) or \
                    (when != "copying" and md5 == "new" and 0 < _raw(reader, "old") < n_old):
                break
            proc.stdin.write("\n")
            proc.stdin.flush()
    finally:
        proc.kill()
        proc.wait(30)
    seen = _seen(reader)
    visible = old_ids if when == "copying" else set(reader.chunk_ids_of("new"))
    assert seen["kw"] == seen["vec"] == seen["index"] == visible
    assert len(visible) == (n_old if when == "copying" else n_new)
    counts = collection_counts(db)
    assert counts.chunks == counts.fts_rows == counts.vectors == len(visible)
    assert reader.hidden_chunk_count() > 0  # rows left out of sight
    reader.close()

    ingest = IngestDB(paths.ingest_db)
    notes = _check_collection(paths, ingest, "c")
    ingest.close()
    assert any("interrupted publish" in n for n in notes), notes
    rag = RagDB(db, "c")
    assert rag.hidden_chunk_count() == 0
    assert rag.conn.execute("SELECT count(*) FROM hidden_chunks").fetchone()[0] == 0
    _publish(rag, "new", "newword", n_new)  # the job, still queued, runs again
    n, distinct = rag.conn.execute("SELECT count(*), count(DISTINCT embedding_id) FROM embeddings").fetchone()
    adds = rag.conn.execute("SELECT count(*), count(DISTINCT id) FROM changes WHERE op='add'").fetchone()
    assert n == distinct == n_new and _raw(rag, "old") == 0 and rag.md5_of_path(PATH) == "new"
    assert _replayed(rag) == set(rag.chunk_ids_of("new")) and adds[0] >= adds[1]
    assert len(rag.keyword_match(Terms(("share",)), 10 ** 6)) == n_new
    rag.close()


def test_a_failure_between_slices_leaves_the_old_version_and_nothing_else(gated):
    """A write that fails in the middle of the copy (a full disk, say): the old version is served
    as before, the half-copied rows are deleted at once, and the next try publishes it once."""
    path, lock = gated
    rag = RagDB(path, "c")
    old_ids = set(_publish(rag, "old", "oldword", 2 * SLICE))
    reader = RagDB(path, "c", readonly=True)
    t, out = _run_gated(lock, lambda: _publish(rag, "new", "newword", 4 * SLICE))
    while _next_stop(lock, t):
        if 0 < _raw(reader, "new") < 4 * SLICE:
            lock.gated = None  # from here the publish runs freely, until its next write fails:
            # the file may not grow any more, so the next slice fails with SQLite's disk-full error
            rag.conn.execute("PRAGMA max_page_count = " + str(rag.conn.execute("PRAGMA page_count").fetchone()[0]))
            lock.step()
            break
        lock.step()
    t.join(DEADLINE)
    assert "error" in out and "full" in str(out["error"]), out
    seen = _seen(reader)
    assert seen["md5"] == "old" and seen["kw"] == seen["vec"] == seen["index"] == old_ids
    # deleting needs no new pages: the half-copied rows went at once
    assert _raw(rag, "new") == 0 and rag.hidden_chunk_count() == 0
    assert rag.conn.execute("SELECT count(*) FROM hidden_chunks").fetchone()[0] == 0
    rag.conn.execute("PRAGMA max_page_count = 1073741823")
    ids = _publish(rag, "new", "newword", 4 * SLICE)
    assert len(ids) == 4 * SLICE and _replayed(rag) == set(ids) and _raw(rag, "old") == 0
    rag.close()
    reader.close()

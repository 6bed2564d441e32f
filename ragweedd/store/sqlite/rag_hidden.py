"""Chunks in rag.sqlite3 that no search may see: a large document's rows while they are copied in,
and a large document's rows while they are deleted (store/sqlite/rag_stage.py, ``RagDB._remove_path``).

Writing or deleting tens of thousands of chunks takes tens of seconds (FTS5 tokenises every text
both ways, the metadata index holds every text): far too long to hold the collection's writer
lock in one transaction, since every other file's publish waits for it. So such rows are written
and deleted in slices of short transactions while a ``hidden_chunks`` row covers their ids:

* every read that finds chunks (keyword MATCH, the exact vector matrix, the hits and briefs a
  search returns, the embedding stage's and the extra passes' batches, the integrity counts)
  leaves out the ids inside a hidden range in the same statement, so it sees none of those rows;
* a hidden chunk being copied in has no entry in the change logs, so no vector index holds it;
  the one short transaction that shows the new document logs its adds, and hides the old
  version and logs its deletes, so the vector indexes switch at the same moment as FTS;
* the ids of a document being copied in are reserved first (its last chunk is written first; a
  new chunk id is one past the highest), and a range being deleted shrinks from the top as its
  rows go, so a chunk id given meanwhile never falls inside a hidden range.

A range is 'adding' (owned by the publish copying it, named in ``owner``) or 'removing'. An
'adding' range whose owner is not a live publish of this process (a crash, a failed publish)
turns 'removing'; the start-up repair, the next large publish and every removal delete what is
left, slice by slice.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from typing import Iterable, Iterator

from ragweedd.store.sqlite.connection import transaction

SLICE = 250  # chunks in a first slice; later ones are sized to hold the writer lock about TARGET_S
TARGET_S = 0.2
HIDE_ABOVE = SLICE  # a document with more chunks is deleted hidden, in slices

_LIVE: set[str] = set()  # owners of 'adding' ranges whose publish runs in this process
_LIVE_GUARD = threading.Lock()


def visible(col: str) -> str:
    """SQL: the chunk id ``col`` is outside every hidden range (in the statement's own snapshot)."""
    return f"NOT EXISTS (SELECT 1 FROM hidden_chunks h WHERE {col} BETWEEN h.lo AND h.hi)"


def _runs(ids: list[int]) -> Iterator[tuple[int, int]]:
    """Sorted ids as ranges of consecutive ids."""
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        yield ids[i], ids[j]
        i = j + 1


class Pace:
    """Chunks per slice. A slice's cost per chunk grows with the collection (B-tree depth, FTS5
    segments to merge) and with the disk (each commit syncs and checkpoints the WAL), so the size
    follows what the last slice took: the writer lock is held about TARGET_S on any machine."""

    def __init__(self) -> None:
        self.size = SLICE

    def took(self, seconds: float) -> None:
        if seconds > TARGET_S:
            self.size = max(10, int(self.size * TARGET_S / seconds))
        elif seconds < TARGET_S / 2:
            self.size = min(4 * SLICE, self.size * 2)


def new_owner() -> str:
    owner = uuid.uuid4().hex
    with _LIVE_GUARD:
        _LIVE.add(owner)
    return owner


def owner_done(owner: str) -> None:
    with _LIVE_GUARD:
        _LIVE.discard(owner)


class HiddenChunks:
    """Mixed into RagDB."""

    conn: sqlite3.Connection

    def _hide_document(self, md5: str) -> list[int]:
        """Inside the caller's write: a document whose paths are gone leaves every search now --
        its chunks hidden, its vector deletes logged (the extra passes' too), its document row
        gone -- and its rows are deleted by ``purge_hidden`` after the caller's commit. Returns
        its chunk ids."""
        # This runs inside the switch of a large publish: plain SQL over id ranges, no row through
        # Python. A document's chunks were written by one publish, so their ids are one range.
        first, last, n = self.conn.execute("SELECT min(id), max(id), count(*) FROM embeddings WHERE md5=?",
                                           (md5,)).fetchone()
        if not n:
            ids: list[int] = []
        elif last - first + 1 == n:
            ids = list(range(first, last + 1))
        else:
            ids = [r[0] for r in self.conn.execute("SELECT id FROM embeddings WHERE md5=? ORDER BY id", (md5,))]
        now = time.time()
        runs = [(first, last)] if n and len(ids) == last - first + 1 else list(_runs(ids))
        for lo, hi in runs:
            self.conn.execute("INSERT INTO hidden_chunks(lo, hi, md5, state) VALUES (?,?,?,'removing')", (lo, hi, md5))
            self.conn.execute("INSERT INTO changes(op, id, at) SELECT 'delete', id, ? FROM embeddings"
                              " WHERE id BETWEEN ? AND ? ORDER BY id", (now, lo, hi))
            # The passes' vectors go (and are logged again by trigger) only when purged; logged
            # now, their indexes drop them with the primary's. A second delete of a label is a no-op.
            self.conn.execute("INSERT INTO pass_changes(space, op, id) SELECT space, 'delete', id FROM vectors"
                              " WHERE id BETWEEN ? AND ? AND space != 'primary' ORDER BY id", (lo, hi))
        self.conn.execute("DELETE FROM documents WHERE md5=?", (md5,))
        return ids

    def hidden_state(self, md5: str) -> tuple[str, str | None] | None:
        """('adding', owner) or ('removing', None) when chunks of ``md5`` are hidden, else None."""
        row = self.conn.execute("SELECT state, owner FROM hidden_chunks WHERE md5=? ORDER BY state LIMIT 1",
                                (md5,)).fetchone()
        return (row[0], row[1]) if row else None

    def wait_unhidden(self, md5: str, poll_s: float = 0.1) -> None:
        """Before ``md5`` is published: a copy of it under way in this process is waited for (its
        chunk keys would collide), and what is left of earlier ones is deleted."""
        while True:
            state = self.hidden_state(md5)
            if state is None:
                return
            with _LIVE_GUARD:
                live = state[1] in _LIVE
            if not live:
                self.purge_hidden(md5)
                return
            time.sleep(poll_s)

    def purge_hidden(self, md5: str | None = None) -> int:
        """Delete the rows of hidden ranges being removed (of ``md5``, or all), one slice per short
        transaction, top down; 'adding' ranges no live publish of this process owns are abandoned
        and go too. Returns how many chunks were deleted."""
        if self.conn.execute("SELECT 1 FROM hidden_chunks LIMIT 1").fetchone() is None:
            return 0
        with _LIVE_GUARD:
            live = sorted(_LIVE)
        q = ",".join("?" * len(live))
        cond = f" AND owner NOT IN ({q})" if live else ""
        with transaction(self.conn):
            self.conn.execute(f"UPDATE hidden_chunks SET state='removing', owner=NULL WHERE state='adding'{cond}",
                              live)
        total = 0
        where = "state='removing'" + (" AND md5=?" if md5 is not None else "")
        args: tuple = (md5,) if md5 is not None else ()
        pace = Pace()
        while True:
            with transaction(self.conn):
                t0 = time.perf_counter()
                row = self.conn.execute(f"SELECT rowid, lo, hi FROM hidden_chunks WHERE {where}"
                                        f" ORDER BY hi DESC LIMIT 1", args).fetchone()
                if row is None:
                    return total
                rid, lo, hi = row
                ids = [r[0] for r in self.conn.execute(
                    "SELECT id FROM embeddings WHERE id BETWEEN ? AND ? ORDER BY id DESC LIMIT ?", (lo, hi, pace.size))]
                if ids:
                    marks = ",".join("?" * len(ids))
                    self.conn.execute(f"DELETE FROM fts_chunks WHERE rowid IN ({marks})", ids)
                    self.conn.execute(f"DELETE FROM embeddings WHERE id IN ({marks})", ids)
                    total += len(ids)
                # The range ends at its highest row left: a chunk id given from now on is above it.
                top = self.conn.execute("SELECT max(id) FROM embeddings WHERE id BETWEEN ? AND ?",
                                        (lo, hi)).fetchone()[0]
                if top is None:
                    self.conn.execute("DELETE FROM hidden_chunks WHERE rowid=?", (rid,))
                else:
                    self.conn.execute("UPDATE hidden_chunks SET hi=? WHERE rowid=?", (top, rid))
            pace.took(time.perf_counter() - t0)

    def _purge_after(self, md5s: Iterable[str | None]) -> None:
        """After a write that may have hidden documents (``_hide_document``): their rows go now,
        slice by slice. Only theirs: what another thread hid is its own to delete."""
        for md5 in md5s:
            if md5 is not None and self.conn.execute(
                    "SELECT 1 FROM hidden_chunks WHERE md5=? AND state='removing' LIMIT 1", (md5,)).fetchone():
                self.purge_hidden(md5)

    def hidden_chunk_count(self) -> int:
        """Chunks hidden now (being copied in or deleted)."""
        return int(self.conn.execute(
            "SELECT count(*) FROM embeddings e WHERE NOT " + visible("e.id")).fetchone()[0])

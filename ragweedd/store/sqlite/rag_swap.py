"""A change of ``embed.model`` without downtime: the new model's vectors of one collection.

While a collection moves to another model, its chunks get the new model's vectors in the space
``MIGRATION`` of ``vectors`` -- an extra vector space like the ``multi_embed_*`` passes (rag_passes.py:
its writes are logged in ``pass_changes`` by trigger, its model is the ``embedders`` row of the
space), so ``pass_missing_batch`` / ``add_pass_vectors`` / ``reset_pass`` fill and resume it. The
primary vectors, their change log and their index keep serving searches, embedded by the old
model, until ``finish_model_swap`` puts the new vectors in their place in one transaction.
"""

from __future__ import annotations

import sqlite3
import time

from ragweedd.store.sqlite.connection import transaction
from ragweedd.store.types import MIGRATION, PRIMARY


class ModelSwap:
    """Mixed into RagDB."""

    conn: sqlite3.Connection

    def swap_progress(self) -> tuple[int, int]:
        """(chunks with a vector of the new model, chunks)."""
        row = self.conn.execute(
            "SELECT (SELECT count(*) FROM vectors WHERE space=?), (SELECT count(*) FROM embeddings)",
            (MIGRATION,)).fetchone()
        return int(row[0]), int(row[1])

    def cancel_model_swap(self) -> int:
        """Forget a move that is no longer wanted (``embed.model`` named the old model again, or a
        third one): the new vectors and their log go. Returns how many vectors went."""
        with transaction(self.conn):
            n = self.conn.execute("DELETE FROM vectors WHERE space=?", (MIGRATION,)).rowcount
            self.conn.execute("DELETE FROM pass_changes WHERE space=?", (MIGRATION,))
            self.conn.execute("DELETE FROM embedders WHERE space=?", (MIGRATION,))
        return int(n)

    def finish_model_swap(self) -> bool:
        """Make the new model's vectors the collection's primary vectors, in one transaction, if
        every chunk has one (else nothing changes and False is returned). The old vectors go; the
        change log is written again as one add per chunk, numbered after a gap, so every index
        file of the old vectors (its ``applied_seq`` from before the gap) is rebuilt rather than
        replayed: neither a file nor a running index can mix the two models."""
        target = self.conn.execute("SELECT embedder_id, dim FROM embedders WHERE space=?", (MIGRATION,)).fetchone()
        if target is None:
            return False
        with transaction(self.conn):
            missing = self.conn.execute(
                "SELECT count(*) FROM embeddings e WHERE NOT EXISTS"
                " (SELECT 1 FROM vectors v WHERE v.id = e.id AND v.space = ?)", (MIGRATION,)).fetchone()[0]
            if missing:
                return False
            self.conn.execute("DELETE FROM vectors WHERE space=?", (PRIMARY,))
            self.conn.execute("UPDATE vectors SET space=? WHERE space=?", (PRIMARY, MIGRATION))
            self.conn.execute("DELETE FROM pass_changes WHERE space=?", (MIGRATION,))
            self.conn.execute("DELETE FROM pending_vectors")  # every chunk has its vector now
            self.conn.execute("DELETE FROM changes")
            # AUTOINCREMENT numbers on from sqlite_sequence: one number is skipped, so the log's
            # first entry is two past what any old index holds ("the log no longer reaches back").
            self.conn.execute("UPDATE sqlite_sequence SET seq = seq + 1 WHERE name='changes'")
            self.conn.execute("INSERT INTO changes(op, id, at) SELECT 'add', id, ? FROM vectors WHERE space=?"
                              " ORDER BY id", (time.time(), PRIMARY))
            self.conn.execute("INSERT OR REPLACE INTO embedders(space, embedder_id, dim, since) VALUES (?,?,?,?)",
                              (PRIMARY, target[0], target[1], time.time()))
            self.conn.execute("DELETE FROM embedders WHERE space=?", (MIGRATION,))
        return True

"""The extra embedding passes' part of rag.sqlite3 (``multi_embed_384`` / ``multi_embed_1024``).

A pass's vectors are rows of ``vectors`` under its space name ("384", "1024"), and the pass's
change log is ``pass_changes`` (migration 5 in rag_db.py), written by triggers on ``vectors``: every
pass vector stored or removed -- also by ``ON DELETE CASCADE`` when a document goes -- is logged
there, so the primary's ``changes`` log and its index never see a pass's writes.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Sequence

from ragweedd.errors import InternalError
from ragweedd.store.sqlite.connection import transaction
from ragweedd.store.sqlite.rag_hidden import visible
from ragweedd.store.types import PRIMARY


class PassVectors:
    """Mixed into RagDB."""

    conn: sqlite3.Connection

    def pass_missing_batch(self, space: str, limit: int, after_id: int = 0) -> list[tuple[int, str, str, str]]:
        """Up to ``limit`` chunks without a vector in the extra pass ``space``, oldest first, in the
        form of ``pending_batch``."""
        return [(int(r[0]), r[1], r[2] or "", r[3] or "") for r in self.conn.execute(
            "SELECT e.id, e.embedding_id, t.string_value, c.string_value FROM embeddings e"
            " LEFT JOIN vectors v ON v.id = e.id AND v.space = ?"
            " LEFT JOIN embedding_metadata t ON t.id = e.id AND t.key = 'chroma:document'"
            " LEFT JOIN embedding_metadata c ON c.id = e.id AND c.key = 'context'"
            " WHERE v.id IS NULL AND e.id > ? AND " + visible("e.id") + " ORDER BY e.id LIMIT ?",
            (space, after_id, limit))]

    def add_pass_vectors(self, space: str, embedder_id: str, items: Sequence[tuple[int, str, str, bytes]]) -> list[int]:
        """Write vectors of the extra pass ``space`` (logged in ``pass_changes`` by trigger), in
        one transaction. As in ``add_vectors``, a chunk is passed over unless it is still the chunk
        that was read and still has no vector in that space. Returns the ids written."""
        if space == PRIMARY:
            raise InternalError("add_pass_vectors writes extra passes only; primary vectors go through add_vectors")
        done: list[int] = []
        with transaction(self.conn):
            for cid, embedding_id, context, vec in items:
                same = self.conn.execute(
                    "SELECT 1 FROM embeddings e LEFT JOIN embedding_metadata c ON c.id = e.id AND c.key = 'context'"
                    " WHERE e.id = ? AND e.embedding_id = ? AND coalesce(c.string_value, '') = ?"
                    " AND NOT EXISTS (SELECT 1 FROM vectors v WHERE v.id = e.id AND v.space = ?)"
                    " AND " + visible("e.id"),
                    (cid, embedding_id, context, space)).fetchone()
                if same is None:
                    continue
                self.conn.execute("INSERT INTO vectors(id, space, embedder_id, vec) VALUES (?,?,?,?)",
                                  (cid, space, embedder_id, vec))
                done.append(cid)
        return done

    def reset_pass(self, space: str, embedder_id: str, dim: int) -> int:
        """The extra pass ``space`` is now made by ``embedder_id``: its old vectors go (their
        deletes logged) and the new embedder is recorded, in one transaction. Returns how many went."""
        if space == PRIMARY:
            raise InternalError("reset_pass resets extra passes only")
        with transaction(self.conn):
            n = self.conn.execute("DELETE FROM vectors WHERE space=?", (space,)).rowcount
            self.conn.execute("INSERT OR REPLACE INTO embedders(space, embedder_id, dim, since) VALUES (?,?,?,?)",
                              (space, embedder_id, dim, time.time()))
        return int(n)

    def pass_vector_count(self, space: str) -> int:
        return int(self.conn.execute("SELECT count(*) FROM vectors WHERE space=?", (space,)).fetchone()[0])

    def pass_max_seq(self, space: str) -> int:
        """The last entry of the extra pass's change log (0 when it has none)."""
        return int(self.conn.execute("SELECT coalesce(max(seq), 0) FROM pass_changes WHERE space=?",
                                     (space,)).fetchone()[0])

    def pass_changes_after(self, space: str, seq: int, limit: int = -1) -> list[tuple[int, str, int]]:
        """Changes of the extra pass ``space`` after ``seq``, oldest first: (seq, op, chunk id)."""
        return [tuple(r) for r in self.conn.execute(
            "SELECT seq, op, id FROM pass_changes WHERE space=? AND seq > ? ORDER BY seq LIMIT ?",
            (space, seq, limit))]

    def max_chunk_id(self) -> int:
        return int(self.conn.execute("SELECT coalesce(max(id), 0) FROM embeddings").fetchone()[0])

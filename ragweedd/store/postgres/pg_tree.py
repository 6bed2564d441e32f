"""The section-tree reads of a collection on PostgreSQL (store/sqlite/tree_db.py has SQLite's): the same
rows, from the chunks' jsonb metadata."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ragweedd.store.postgres.connection import from_pg
from ragweedd.store.rows import section_row

if TYPE_CHECKING:
    from ragweedd.store.postgres.connection import PgConn


class PgTreeRows:
    db: PgConn
    collection_id: int

    def tree_documents(self) -> list[dict[str, Any]]:
        """Every document of the collection: md5, title, one source path (any machine's), chunk count."""
        rows = self.db.all(
            "SELECT d.md5, d.title, d.chunks, (SELECT min(source_file) FROM document_paths p"
            " WHERE p.collection_id = d.collection_id AND p.md5 = d.md5) AS source_file"
            " FROM documents d WHERE d.collection_id = %s ORDER BY d.md5", (self.collection_id,))
        return [{"md5": r["md5"], "title": r["title"], "chunks": r["chunks"], "source_file": from_pg(r["source_file"])}
                for r in rows if r["source_file"]]

    def tree_sections(self, md5: str) -> list[dict[str, Any]]:
        """A document's chunks in reading order with what places them in its outline."""
        return [section_row(r["id"], r["section"], r["section_path"], r["pages"], r["content"]) for r in self.db.all(
            "SELECT id, meta->>'section' AS section, meta->'section_path' AS section_path, meta->'pages' AS pages,"
            " content FROM chunks WHERE collection_id = %s AND md5 = %s ORDER BY chunk_idx",
            (self.collection_id, md5))]
